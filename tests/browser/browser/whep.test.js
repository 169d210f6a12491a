// WHEP playback in real Chromium (docs/whep.md): a page publishes a canvas with sync.js (each
// frame's number drawn as the column marker: 16 columns of 8 pixels, white 1 and black 0, then a
// black guard column), syncd encodes it to H.264 once, and the same page plays it back through
// a plain RTCPeerConnection: POST /whep/NAME with its offer and a ticket as the bearer token,
// ICE-lite to syncd's UDP socket, DTLS-SRTP (AEAD_AES_128_GCM), H.264 into a <video>. Every
// frame the page shows is read with requestVideoFrameCallback and canvas readback: markers must
// decode and go forward, none corrupt. Rates are judged loosely (a busy 2-core machine).
// Also every refusal the endpoint makes, each with its status and counter.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startSyncd, launch, stats } from '../lib/harness.js';

let syncd, browser;
before(async () => {
  syncd = await startSyncd(['--whep-bitrate', '2000']);
  browser = await launch(syncd, { extraArgs: ['--autoplay-policy=no-user-gesture-required'] });
});
after(async () => {
  await browser?.close();
  assert.equal(await syncd?.stop(), 0);
});

// In the page: a publisher of a marked canvas, and helpers to offer and play.
const SETUP = async ({ stream, width, height, fps, codec = 'raw', bitrate }) => {
  const { connect, publishCanvas } = await import('/web/sync.js');
  const conn = await connect();
  const canvas = document.createElement('canvas');
  canvas.width = width;
  canvas.height = height;
  const ctx = canvas.getContext('2d');
  let n = 1;
  const draw = () => {
    ctx.fillStyle = `hsl(${(n * 7) % 360} 60% 50%)`;
    ctx.fillRect(0, 0, width, height);
    for (let bit = 0; bit <= 16; bit++) {
      ctx.fillStyle = bit < 16 && (n >> bit) & 1 ? '#fff' : '#000';
      ctx.fillRect(bit * 8, 0, 8, height);
    }
    n = (n + 1) & 0xffff || 1;
  };
  draw();
  window.drawTimer = setInterval(draw, 1000 / fps);
  const pub = await publishCanvas(canvas, { stream, fps, connection: conn, codec, bitrate });
  window.whep = { conn, pub };
  return true;
};

const PLAY = async ({ stream, seconds, audio }) => {
  const { ticket } = await window.whep.pub.createTicket();
  const pc = new RTCPeerConnection();
  pc.addTransceiver('video', { direction: 'recvonly' });
  if (audio) pc.addTransceiver('audio', { direction: 'recvonly' });
  const video = document.createElement('video');
  video.muted = true;
  video.playsInline = true;
  video.autoplay = true;
  document.body.append(video);
  pc.ontrack = (e) => { if (e.track.kind === 'video') video.srcObject = new MediaStream([e.track]); };
  const offer = await pc.createOffer();
  await pc.setLocalDescription(offer);
  const t0 = performance.now();
  const res = await fetch(`/whep/${stream}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${ticket}` },
    body: pc.localDescription.sdp,
  });
  const out = { status: res.status, location: res.headers.get('Location'), answer: await res.text(),
                frames: 0, unique: 0, corrupt: 0, backwards: 0, first_frame_ms: null,
                unique_per_second: [], width: 0, height: 0, srtp: null, dtls_cipher: null };
  if (res.status !== 201) return out;
  await pc.setRemoteDescription({ type: 'answer', sdp: out.answer });
  // One pixel from the middle of each marker column, from the middle row; black and white
  // within a margin that H.264 at a couple of Mbit/s and YUV -> RGB keep.
  const MARGIN = 48;
  const decode = (px) => {
    let seq = 0;
    for (let bit = 0; bit <= 16; bit++) {
      const i = (bit * 8 + 4) * 4;
      const lo = Math.min(px[i], px[i + 1], px[i + 2]), hi = Math.max(px[i], px[i + 1], px[i + 2]);
      if (hi <= MARGIN) continue;
      if (bit < 16 && lo >= 255 - MARGIN) { seq |= 1 << bit; continue; }
      return -1;
    }
    return seq;
  };
  const read = document.createElement('canvas');
  const rctx = read.getContext('2d', { willReadFrequently: true });
  let last = -1, secondStart = 0, secondUnique = 0;
  await new Promise((resolve) => {
    const end = () => resolve();
    const onFrame = (now) => {
      const w = video.videoWidth, h = video.videoHeight;
      if (w && h) {
        if (out.first_frame_ms === null) { out.first_frame_ms = now - t0; secondStart = now; }
        out.width = w; out.height = h;
        if (read.width !== w) { read.width = w; read.height = h; }
        rctx.drawImage(video, 0, 0);
        const seq = decode(rctx.getImageData(0, h >> 1, 17 * 8, 1).data);
        out.frames++;
        if (seq < 0) out.corrupt++;
        else if (seq !== last) {
          if (last >= 0 && ((seq - last) & 0xffff) > 0x8000) out.backwards++;
          out.unique++;
          secondUnique++;
          last = seq;
        }
        if (now - secondStart >= 1000) {
          out.unique_per_second.push(secondUnique);
          secondUnique = 0;
          secondStart = now;
        }
        if (out.first_frame_ms !== null && now - t0 - out.first_frame_ms >= seconds * 1000) return end();
      }
      if (performance.now() - t0 > (seconds + 20) * 1000) return end();
      video.requestVideoFrameCallback(onFrame);
    };
    video.requestVideoFrameCallback(onFrame);
  });
  for (const r of (await pc.getStats()).values()) {
    if (r.type === 'transport') { out.srtp = r.srtpCipher ?? null; out.dtls_cipher = r.dtlsCipher ?? null; }
  }
  out.delete_status = (await fetch(out.location, { method: 'DELETE' })).status;
  pc.close();
  video.remove();
  return out;
};

test('a canvas published with sync.js plays back over WHEP in a <video>, every marker read', async () => {
  const page = await browser.newPage(`${syncd.base}/`);
  try {
    await page.evaluate(SETUP, { stream: 'whep-canvas', width: 640, height: 360, fps: 30 });
    const r = await page.evaluate(PLAY, { stream: 'whep-canvas', seconds: 6, audio: true });
    console.log(`# whep: status ${r.status}, first frame ${r.first_frame_ms?.toFixed(0)} ms, ` +
                `${r.frames} frames shown, ${r.unique} unique, ${r.corrupt} corrupt, ${r.backwards} backwards, ` +
                `${r.width}x${r.height}, unique/s ${JSON.stringify(r.unique_per_second)}, ` +
                `srtp ${r.srtp}, dtls ${r.dtls_cipher}`);
    assert.equal(r.status, 201, r.answer);
    assert.match(r.location ?? '', /^\/whep\/whep-canvas\/[0-9a-f]{16}$/);
    assert.match(r.answer, /a=ice-lite/);
    assert.match(r.answer, /m=audio 0 /, 'the audio m-line is rejected');
    assert.notEqual(r.first_frame_ms, null, 'no frame reached the <video>');
    assert.equal(r.width, 640);
    assert.equal(r.height, 360);
    assert.equal(r.corrupt, 0, 'every frame shown carries a readable marker');
    assert.equal(r.backwards, 0, 'markers only go forward');
    assert.ok(r.unique >= 30, `at least 30 distinct frames in 6 s (got ${r.unique})`);
    assert.equal(r.srtp, 'SRTP_AEAD_AES_128_GCM'); // Chromium's name for RFC 7714's AEAD_AES_128_GCM
    assert.equal(r.delete_status, 200);

    const s = await stats(syncd);
    if (process.env.SYNC_WHEP_DEBUG) console.log(JSON.stringify({ whep: s.whep, streams: s.streams }, null, 1));
    assert.equal(s.whep.answered, 1);
    const egress = s.whep.egresses.find((e) => e.stream === 'whep-canvas');
    assert.ok(egress, JSON.stringify(s.whep));
    assert.ok(egress.frames_in > 0);
    assert.ok(egress.keyframe_requests >= 1, 'a new viewer asks for an IDR');
    // The DELETE ended the session: it is gone from the live list, its frames counted.
    const ended = await waitForEnded(0);
    assert.ok(ended.whep.ended_sessions_frames_sent >= r.unique, JSON.stringify(ended.whep));
  } finally {
    await page.evaluate(() => { clearInterval(window.drawTimer); window.whep?.pub.stop?.(); }).catch(() => {});
    await page.close();
  }
});

test('a page publishing H.264 plays over WHEP as it encoded it: no transcode, PLIs and the rate reach its encoder', async () => {
  const page = await browser.newPage(`${syncd.base}/`);
  try {
    // The page's own ceiling (4 Mbit/s) is above the egress's --whep-bitrate (2 Mbit/s).
    await page.evaluate(SETUP, { stream: 'whep-h264', width: 640, height: 360, fps: 30, codec: 'h264', bitrate: 4_000_000 });
    const r = await page.evaluate(PLAY, { stream: 'whep-h264', seconds: 6, audio: false });
    const pub = await page.evaluate(() => window.whep.pub.stats());
    console.log(`# whep h264 passthrough: status ${r.status}, first frame ${r.first_frame_ms?.toFixed(0)} ms, ` +
                `${r.frames} frames shown, ${r.unique} unique, ${r.corrupt} corrupt, ${r.backwards} backwards, ` +
                `page encoder ${pub.encoder?.codec}, key-frame requests ${pub.keyframeRequests}, ` +
                `bitrate ${pub.bitrate} (${pub.bitrateChanges} changes)`);
    assert.equal(r.status, 201, r.answer);
    assert.notEqual(r.first_frame_ms, null, 'no frame reached the <video>');
    assert.equal(r.width, 640);
    assert.equal(r.corrupt, 0, 'every frame shown carries a readable marker');
    assert.equal(r.backwards, 0, 'markers only go forward');
    assert.ok(r.unique >= 30, `at least 30 distinct frames in 6 s (got ${r.unique})`);
    assert.match(pub.encoder?.codec ?? '', /^avc1\.42e0/, 'constrained baseline: packetization-mode 1 as it is');

    const s = await stats(syncd);
    const egress = s.whep.egresses.find((e) => e.stream === 'whep-h264');
    assert.ok(egress && egress.frames_in > 0, JSON.stringify(s.whep));
    // The page's access units went out as they came: the egress never encoded.
    assert.equal(egress.encoder, undefined, JSON.stringify(egress));
    // The viewer's PLI reached the page's encoder through syncd (stream.keyframe, reason whep),
    // and the egress's rate target became the page encoder's bitrate (stream.bitrate).
    const stream = s.streams.filter((x) => x.name === 'whep-h264').sort((a, b) => b.id - a.id)[0];
    assert.ok(stream.source_requests.keyframes.whep >= 1, JSON.stringify(stream.source_requests));
    assert.ok(pub.keyframeRequests >= 1, JSON.stringify(pub));
    assert.equal(stream.source_requests.target_bps, 2_000_000, JSON.stringify(stream.source_requests));
    assert.equal(pub.bitrate, 2_000_000, JSON.stringify(pub));
    assert.ok(pub.bitrateChanges >= 1, JSON.stringify(pub));
    await waitForEnded(0);
  } finally {
    await page.evaluate(() => { clearInterval(window.drawTimer); window.whep?.pub.stop?.(); }).catch(() => {});
    await page.close();
  }
});

async function waitForEnded(live) {
  const deadline = Date.now() + 5000;
  let s;
  while (Date.now() < deadline) {
    s = await stats(syncd);
    if (s.whep.sessions.length === live) return s;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`WHEP sessions still live: ${JSON.stringify(s?.whep.sessions)}`);
}

test('a stream\'s egress frees when its viewers leave: a fifth stream is refused with Retry-After while four are watched, then served', async () => {
  const page = await browser.newPage(`${syncd.base}/`);
  try {
    const r = await page.evaluate(async () => {
      const { connect, publishCanvas } = await import('/web/sync.js');
      const conn = await connect();
      const canvas = document.createElement('canvas');
      canvas.width = 64;
      canvas.height = 64;
      canvas.getContext('2d').fillRect(0, 0, 64, 64);
      window.egressPubs = [];
      for (let i = 0; i < 5; i++)
        window.egressPubs.push(await publishCanvas(canvas, { stream: `egress-${i}`, fps: 5, connection: conn }));
      const post = async (i) => {
        const pc = new RTCPeerConnection();
        pc.addTransceiver('video', { direction: 'recvonly' });
        await pc.setLocalDescription(await pc.createOffer());
        const { ticket } = await window.egressPubs[i].createTicket();
        const res = await fetch(`/whep/egress-${i}`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${ticket}` },
          body: pc.localDescription.sdp,
        });
        pc.close();
        return { status: res.status, location: res.headers.get('Location'),
                 retryAfter: res.headers.get('Retry-After'), text: await res.text() };
      };
      const watched = [];
      for (let i = 0; i < 4; i++) watched.push(await post(i));
      const refused = await post(4);
      return { watched, refused };
    });
    assert.deepEqual(r.watched.map((w) => w.status), [201, 201, 201, 201], JSON.stringify(r.watched));
    assert.equal(r.refused.status, 503, JSON.stringify(r.refused));
    assert.equal(r.refused.retryAfter, '5');
    const before = await stats(syncd);
    // The viewers leave: each session's DELETE, and its egress is idle once the session ended.
    const deleted = await page.evaluate(async (locations) =>
      Promise.all(locations.map(async (l) => (await fetch(l, { method: 'DELETE' })).status)),
      r.watched.map((w) => w.location));
    assert.deepEqual(deleted, [200, 200, 200, 200]);
    await waitForEnded(0);
    const served = await page.evaluate(async () => {
      const pc = new RTCPeerConnection();
      pc.addTransceiver('video', { direction: 'recvonly' });
      await pc.setLocalDescription(await pc.createOffer());
      const { ticket } = await window.egressPubs[4].createTicket();
      const res = await fetch('/whep/egress-4', {
        method: 'POST',
        headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${ticket}` },
        body: pc.localDescription.sdp,
      });
      pc.close();
      const location = res.headers.get('Location');
      const status = res.status;
      if (location) await fetch(location, { method: 'DELETE' });
      return { status, location };
    });
    assert.equal(served.status, 201, JSON.stringify(served));
    const after = await waitForEnded(0);
    assert.equal(after.whep.egresses_reused - before.whep.egresses_reused, 1);
    assert.ok(after.whep.egresses.length <= 4);
    assert.ok(after.whep.egresses.some((e) => e.stream === 'egress-4'), JSON.stringify(after.whep.egresses));
  } finally {
    await page.evaluate(() => window.egressPubs?.forEach((p) => p.stop?.())).catch(() => {});
    await page.close();
  }
});

test('WHEP refusals: no ticket 403, wrong type 415, bad SDP 400, unknown stream 404, unknown session 404', async () => {
  const page = await browser.newPage(`${syncd.base}/`);
  try {
    await page.evaluate(SETUP, { stream: 'whep-refusals', width: 320, height: 180, fps: 10 });
    const before = await stats(syncd);
    const r = await page.evaluate(async () => {
      const { ticket } = await window.whep.pub.createTicket({ uses: 8 });
      const post = async (path, headers, body) => {
        const res = await fetch(path, { method: 'POST', headers, body });
        return { status: res.status, text: await res.text() };
      };
      const sdp = 'application/sdp';
      return {
        noTicket: await post('/whep/whep-refusals', { 'Content-Type': sdp }, 'v=0\r\n'),
        badTicket: await post('/whep/whep-refusals', { 'Content-Type': sdp, Authorization: 'Bearer nope' }, 'v=0\r\n'),
        wrongType: await post('/whep/whep-refusals', { 'Content-Type': 'text/plain', Authorization: `Bearer ${ticket}` }, 'v=0\r\n'),
        badSdp: await post('/whep/whep-refusals', { 'Content-Type': sdp, Authorization: `Bearer ${ticket}` }, 'hello'),
        noVideo: await post('/whep/whep-refusals', { 'Content-Type': sdp, Authorization: `Bearer ${ticket}` },
          'v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuvwx\r\n' +
          'a=fingerprint:sha-256 ' + Array(32).fill('AB').join(':') + '\r\na=setup:actpass\r\n' +
          'm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=recvonly\r\na=rtcp-mux\r\n' +
          'a=rtpmap:111 opus/48000/2\r\n'),
        unknownStream: await post('/whep/nobody', { 'Content-Type': sdp, Authorization: `Bearer ${ticket}` }, 'v=0\r\n'),
        unknownSession: (await fetch('/whep/whep-refusals/0123456789abcdef', { method: 'DELETE' })).status,
      };
    });
    assert.equal(r.noTicket.status, 403);
    assert.equal(r.badTicket.status, 403);
    assert.equal(r.wrongType.status, 415);
    assert.equal(r.badSdp.status, 400);
    assert.match(r.badSdp.text, /^bad offer: /);
    assert.equal(r.noVideo.status, 400);
    assert.match(r.noVideo.text, /no_h264/);
    assert.equal(r.unknownStream.status, 404);
    assert.equal(r.unknownSession, 404);
    const after = await stats(syncd);
    const d = (k) => after.whep.refused[k] - before.whep.refused[k];
    assert.equal(d('content_type'), 1);
    assert.equal(d('bad_sdp'), 1);
    assert.equal(d('no_h264'), 1);
    assert.equal(after.whep.delete_unknown - before.whep.delete_unknown, 1);
    assert.equal(after.server.tickets_refused - before.server.tickets_refused, 2);
  } finally {
    await page.evaluate(() => { clearInterval(window.drawTimer); window.whep?.pub.stop?.(); }).catch(() => {});
    await page.close();
  }
});
