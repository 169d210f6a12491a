// WHEP interop with a WebRTC stack that is not Chromium's: werift (pure TypeScript, from npm) as
// the player, the way a native WHEP client or a restreaming SFU would take a stream from syncd
// (docs/whep.md, "Interop"). syncd runs its own pattern source (a syncd-owned stream, so a native
// client may ask for a ticket); Node asks for one over the control WebSocket with sync.js, and
// werift posts its offer with it. Asserted: 201 and the answer, ICE and DTLS complete with
// werift's own stack (it must offer AEAD_AES_128_GCM among its SRTP profiles), and the RTP that
// arrives is H.264 that a decoder could start on: access units whose first holds an IDR with
// SPS and PPS before it, timestamps that go forward, none broken (each reassembled access unit
// ends on a marker and starts with a NAL header that is not a fragment's middle).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { WebSocket } from 'ws';
import { RTCPeerConnection, RTCRtpCodecParameters } from 'werift';
import { connect } from '../../../web/sync.js';
import { startSyncd, stats, waitFor } from '../lib/harness.js';

let syncd;
before(async () => { syncd = await startSyncd(['--source', 'pattern:320x180@30', '--whep-bitrate', '1000']); });
after(async () => { assert.equal(await syncd?.stop(), 0); });

test('werift plays a stream over WHEP: ICE-lite, DTLS-SRTP GCM, H.264 access units from an IDR on', async () => {
  const conn = await connect(syncd.ws, { WebSocket, reconnect: false });
  const pc = new RTCPeerConnection({
    codecs: {
      video: [new RTCRtpCodecParameters({
        mimeType: 'video/H264', clockRate: 90000,
        rtcpFeedback: [{ type: 'nack' }, { type: 'nack', parameter: 'pli' }],
        parameters: 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f',
      })],
    },
  });
  try {
    const pattern = await waitFor(async () => (await stats(syncd)).streams?.find((s) => s.name === 'pattern' && s.open !== false), { what: 'the pattern stream' });
    const { ticket } = await conn.createTicket(pattern.id, { uses: 1 });

    const units = [];  // per access unit: NAL types, in order, and whether it ended on a marker
    let current = null, lastTimestamp = null, backwards = 0, packets = 0;
    const transceiver = pc.addTransceiver('video', { direction: 'recvonly' });
    transceiver.onTrack.subscribe((track) => {
      track.onReceiveRtp.subscribe((rtp) => {
        packets++;
        const { timestamp, marker } = rtp.header;
        if (lastTimestamp !== null && timestamp !== lastTimestamp && ((timestamp - lastTimestamp) >>> 0) > 0x80000000) backwards++;
        if (!current || current.timestamp !== timestamp) {
          if (current) units.push(current);
          current = { timestamp, nals: [], marker: false, broken: false };
        }
        lastTimestamp = timestamp;
        const p = rtp.payload;
        const type = p[0] & 0x1f;
        if (type === 28) {            // FU-A: the NAL type is in the FU header; S bit starts it
          if (p[1] & 0x80) current.nals.push(p[1] & 0x1f);
          else if (current.nals.length === 0) current.broken = true;
        } else if (type === 24) {     // STAP-A
          for (let i = 1; i + 2 < p.length;) { const n = (p[i] << 8) | p[i + 1]; current.nals.push(p[i + 2] & 0x1f); i += 2 + n; }
        } else {
          current.nals.push(type);
        }
        if (marker) current.marker = true;
      });
    });
    await pc.setLocalDescription(await pc.createOffer());
    const res = await fetch(`${syncd.base}/whep/pattern`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${ticket}` },
      body: pc.localDescription.sdp,
    });
    const answer = await res.text();
    assert.equal(res.status, 201, answer);
    await pc.setRemoteDescription({ type: 'answer', sdp: answer });
    await waitFor(() => pc.connectionState === 'connected', { timeoutMs: 15000, what: `werift connected (${pc.connectionState})` });
    await waitFor(() => units.length >= 45, { timeoutMs: 20000, what: `45 access units (${units.length}, ${packets} packets)` });

    const first = units[0];
    console.log(`# werift: ${units.length} access units, ${packets} packets, first NAL types ${JSON.stringify(first.nals)}`);
    assert.ok(first.nals.includes(5), `the first access unit holds an IDR: ${JSON.stringify(first.nals)}`);
    assert.ok(first.nals.indexOf(7) >= 0 && first.nals.indexOf(7) < first.nals.indexOf(5), 'SPS before the IDR');
    assert.ok(first.nals.indexOf(8) >= 0 && first.nals.indexOf(8) < first.nals.indexOf(5), 'PPS before the IDR');
    assert.equal(units.filter((u) => !u.marker || u.broken).length, 0, 'every access unit whole, ending on a marker');
    assert.equal(backwards, 0);

    const location = res.headers.get('location');
    assert.equal((await fetch(syncd.base + location, { method: 'DELETE' })).status, 200);
    const s = await waitFor(async () => { const x = await stats(syncd); return x.whep.sessions.length === 0 && x; }, { what: 'the session ended' });
    assert.ok(s.whep.ended_sessions_frames_sent >= 45, JSON.stringify(s.whep));
  } finally {
    await pc.close();
    conn.close();
  }
});
