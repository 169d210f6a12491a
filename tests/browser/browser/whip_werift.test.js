// WHIP push (docs/whep.md, "WHIP"): syncd offers its stream to an SFU's WHIP endpoint. The SFU
// here is werift (pure TypeScript, from npm) behind a small WHIP server in this process: it takes
// syncd's POSTed offer (bearer token checked), answers as a full ICE agent, and receives. The
// first POST is refused with 503, so syncd's retry is exercised too. Asserted: syncd is the
// controlling agent that connects (werift's connection state), the H.264 that arrives starts on
// an IDR with SPS and PPS and every access unit is whole, the Opus from syncd's audio source
// arrives on its own payload type, /stats tell the push's story, and stopping syncd DELETEs
// the session's resource.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { RTCPeerConnection, RTCRtpCodecParameters } from 'werift';
import { startSyncd, stats, waitFor } from '../lib/harness.js';

const TOKEN = 'whip-secret-token';
let server, syncd;
const sfu = { posts: [], deletes: [], pcs: [], refuseNext: 1 };

function makePeer() {
  return new RTCPeerConnection({
    codecs: {
      video: [new RTCRtpCodecParameters({
        mimeType: 'video/H264', clockRate: 90000, payloadType: 102,
        rtcpFeedback: [{ type: 'nack' }, { type: 'nack', parameter: 'pli' }],
        parameters: 'level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f',
      })],
      audio: [new RTCRtpCodecParameters({ mimeType: 'audio/opus', clockRate: 48000, channels: 2, payloadType: 111 })],
    },
  });
}

// What werift receives: access units (NAL types in order, whole or not) and Opus packets.
function watch(pc) {
  const got = { units: [], current: null, videoPackets: 0, audioPackets: 0, audioPayloadTypes: new Set() };
  pc.onTransceiverAdded.subscribe((transceiver) => {
    transceiver.onTrack.subscribe((track) => {
      track.onReceiveRtp.subscribe((rtp) => {
        if (track.kind === 'audio') {
          got.audioPackets++;
          got.audioPayloadTypes.add(rtp.header.payloadType);
          return;
        }
        got.videoPackets++;
        const { timestamp, marker } = rtp.header;
        if (!got.current || got.current.timestamp !== timestamp) {
          if (got.current) got.units.push(got.current);
          got.current = { timestamp, nals: [], marker: false, broken: false };
        }
        const p = rtp.payload;
        const type = p[0] & 0x1f;
        if (type === 28) {
          if (p[1] & 0x80) got.current.nals.push(p[1] & 0x1f);
          else if (got.current.nals.length === 0) got.current.broken = true;
        } else if (type === 24) {
          for (let i = 1; i + 2 < p.length;) { const n = (p[i] << 8) | p[i + 1]; got.current.nals.push(p[i + 2] & 0x1f); i += 2 + n; }
        } else {
          got.current.nals.push(type);
        }
        if (marker) got.current.marker = true;
      });
    });
  });
  return got;
}

before(async () => {
  server = http.createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    if (req.method === 'DELETE' && req.url.startsWith('/whip/session/')) {
      sfu.deletes.push(req.url);
      res.writeHead(200).end();
      return;
    }
    if (req.method !== 'POST' || req.url !== '/whip/room') { res.writeHead(404).end(); return; }
    sfu.posts.push({ auth: req.headers.authorization, type: req.headers['content-type'], offer: body });
    if (req.headers.authorization !== `Bearer ${TOKEN}`) { res.writeHead(401).end('no'); return; }
    if (sfu.refuseNext > 0) { sfu.refuseNext--; res.writeHead(503, { 'Retry-After': '1' }).end('busy'); return; }
    const pc = makePeer();
    const entry = { pc, got: watch(pc) };
    sfu.pcs.push(entry);
    await pc.setRemoteDescription({ type: 'offer', sdp: body });
    await pc.setLocalDescription(await pc.createAnswer());
    entry.answer = pc.localDescription.sdp;
    res.writeHead(201, { 'Content-Type': 'application/sdp', Location: `/whip/session/${sfu.pcs.length}` });
    res.end(entry.answer);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/whip/room`;
  syncd = await startSyncd(['--source', 'pattern:320x180@30', '--audio-source', 'synthetic:2,tone',
                            '--whip-to', url, '--whip-token', TOKEN, '--whip-bitrate', '1000']);
});

after(async () => {
  if (syncd) await syncd.stop();
  for (const { pc } of sfu.pcs) await pc.close();
  await new Promise((r) => server?.close(r));
});

test('syncd pushes its stream to a WHIP endpoint (werift): ICE as the controlling agent, H.264 and Opus', async () => {
  // The first offer was refused (503): syncd offers again after its back-off.
  await waitFor(() => sfu.pcs.length >= 1, { timeoutMs: 20000, what: `a second POST (${sfu.posts.length} so far)` });
  assert.ok(sfu.posts.length >= 2);
  const offer = sfu.posts.at(-1);
  assert.equal(offer.type, 'application/sdp');
  assert.match(offer.offer, /^a=setup:actpass\r$/m);
  assert.match(offer.offer, /^m=video 9 UDP\/TLS\/RTP\/SAVPF 102\r$/m);
  assert.match(offer.offer, /^m=audio 9 UDP\/TLS\/RTP\/SAVPF 111\r$/m);
  assert.match(offer.offer, /^a=sendonly\r$/m);

  const { pc, got } = sfu.pcs[0];
  await waitFor(() => pc.connectionState === 'connected', { timeoutMs: 15000, what: `werift connected (${pc.connectionState})` });
  await waitFor(() => got.units.length >= 45 && got.audioPackets >= 50, {
    timeoutMs: 20000, what: `45 access units and 50 Opus packets (${got.units.length}, ${got.audioPackets})`,
  });
  const first = got.units[0];
  console.log(`# whip werift: ${sfu.posts.length} posts, ${got.units.length} access units, ` +
              `${got.videoPackets} video and ${got.audioPackets} audio packets, first NAL types ${JSON.stringify(first.nals)}`);
  assert.ok(first.nals.includes(5), `the first access unit holds an IDR: ${JSON.stringify(first.nals)}`);
  assert.ok(first.nals.indexOf(7) >= 0 && first.nals.indexOf(7) < first.nals.indexOf(5), 'SPS before the IDR');
  assert.ok(first.nals.indexOf(8) >= 0 && first.nals.indexOf(8) < first.nals.indexOf(5), 'PPS before the IDR');
  assert.equal(got.units.filter((u) => !u.marker || u.broken).length, 0, 'every access unit whole');
  assert.deepEqual([...got.audioPayloadTypes], [111]);

  const s = await stats(syncd);
  const whip = s.whep.whip;
  assert.equal(whip.state, 'live', JSON.stringify(whip));
  assert.equal(whip.stream, 'pattern');
  assert.ok(whip.posts >= 2 && whip.refused_status >= 1 && whip.answered === 1, JSON.stringify(whip));
  assert.ok(!JSON.stringify(s).includes(TOKEN), 'the bearer token never shows in /stats');
  const session = s.whep.sessions.find((x) => x.whip);
  assert.ok(session, JSON.stringify(s.whep.sessions));
  assert.equal(session.state, 'connected');
  assert.ok(session.checks_answered >= 1, JSON.stringify(session));
  assert.ok(session.audio?.frames_sent >= 50, JSON.stringify(session.audio));

  // Stopping syncd releases the SFU's resource.
  assert.equal(await syncd.stop(), 0);
  syncd = null;
  assert.deepEqual(sfu.deletes, ['/whip/session/1']);
});
