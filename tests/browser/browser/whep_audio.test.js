// WHEP audio in real Chromium (docs/whep.md, "Audio"): syncd with a synthetic audio source (the
// tone signal: each channel its own sine) answers a page's audio + video offer with stereo Opus
// beside the H.264, on one BUNDLE transport, and the page plays both: the audio through an
// <audio> element. Judged from the page's own getStats(): Opus packets arriving, audible energy,
// little concealment; syncd's /stats account for every audio frame. The A/V offset Chromium
// estimates from syncd's sender reports is reported (not asserted: it depends on the machine's
// load). Also: a bad --whep-audio-channels stops syncd at start with a clear message, and mono.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { SYNCD, startSyncd, launch, stats } from '../lib/harness.js';

let syncd, browser;
before(async () => {
  syncd = await startSyncd(['--whep-bitrate', '1000', '--audio-source', 'synthetic:4,tone',
                            '--whep-audio-channels', '2,3']);
  browser = await launch(syncd, { extraArgs: ['--autoplay-policy=no-user-gesture-required'] });
});
after(async () => {
  await browser?.close();
  assert.equal(await syncd?.stop(), 0);
});

// In the page: publish a small canvas, then play it back with audio for `seconds`.
const PLAY_WITH_AUDIO = async ({ stream, seconds }) => {
  const { connect, publishCanvas } = await import('/web/sync.js');
  const conn = await connect();
  const canvas = document.createElement('canvas');
  canvas.width = 320;
  canvas.height = 180;
  const ctx = canvas.getContext('2d');
  let n = 0;
  const timer = setInterval(() => {
    ctx.fillStyle = `hsl(${(n++ * 7) % 360} 60% 50%)`;
    ctx.fillRect(0, 0, 320, 180);
  }, 1000 / 30);
  const pub = await publishCanvas(canvas, { stream, fps: 30, connection: conn });
  const { ticket } = await pub.createTicket();

  const pc = new RTCPeerConnection();
  pc.addTransceiver('video', { direction: 'recvonly' });
  pc.addTransceiver('audio', { direction: 'recvonly' });
  const video = document.createElement('video');
  const audio = document.createElement('audio');
  video.muted = true;
  video.autoplay = audio.autoplay = true;
  document.body.append(video, audio);
  pc.ontrack = (e) => {
    const el = e.track.kind === 'video' ? video : audio;
    el.srcObject = new MediaStream([e.track]);
  };
  await pc.setLocalDescription(await pc.createOffer());
  const res = await fetch(`/whep/${stream}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${ticket}` },
    body: pc.localDescription.sdp,
  });
  const out = { status: res.status, answer: await res.text(), location: res.headers.get('Location') };
  if (res.status !== 201) return out;
  await pc.setRemoteDescription({ type: 'answer', sdp: out.answer });
  const sample = async () => {
    const s = { audio: null, video: null, codec: null };
    const reports = await pc.getStats();
    for (const r of reports.values()) {
      if (r.type === 'inbound-rtp' && r.kind === 'audio') {
        s.audio = r;
        s.codec = reports.get(r.codecId) ?? null;
      }
      if (r.type === 'inbound-rtp' && r.kind === 'video') s.video = r;
    }
    return s;
  };
  const t0 = performance.now();
  // The A/V offset: what each receiver is playing now, in syncd's NTP time (from its SRs).
  const offsets = [];
  while (performance.now() - t0 < seconds * 1000) {
    await new Promise((r) => setTimeout(r, 1000));
    const s = await sample();
    if (s.audio?.estimatedPlayoutTimestamp && s.video?.estimatedPlayoutTimestamp)
      offsets.push(s.audio.estimatedPlayoutTimestamp - s.video.estimatedPlayoutTimestamp);
  }
  const s = await sample();
  const a = s.audio ?? {};
  Object.assign(out, {
    mime: s.codec?.mimeType ?? null,
    channels: s.codec?.channels ?? null,
    packets: a.packetsReceived ?? 0,
    packets_lost: a.packetsLost ?? 0,
    samples: a.totalSamplesReceived ?? 0,
    concealed: a.concealedSamples ?? 0,
    energy: a.totalAudioEnergy ?? 0,
    level: a.audioLevel ?? 0,
    duration: a.totalSamplesDuration ?? 0,
    jitter_buffer_ms: a.jitterBufferEmittedCount ? (a.jitterBufferDelay / a.jitterBufferEmittedCount) * 1000 : null,
    video_frames: s.video?.framesDecoded ?? 0,
    av_offset_ms: offsets,
  });
  out.delete_status = (await fetch(out.location, { method: 'DELETE' })).status;
  pc.close();
  clearInterval(timer);
  await pub.stop();
  return out;
};

test('a browser hears syncd\'s audio over WHEP: stereo Opus beside the video, little concealed', async () => {
  const page = await browser.newPage(`${syncd.base}/`);
  try {
    const r = await page.evaluate(PLAY_WITH_AUDIO, { stream: 'whep-audio', seconds: 6 });
    const concealedShare = r.samples ? r.concealed / r.samples : 1;
    console.log(`# whep audio: ${r.packets} packets, ${r.packets_lost} lost, ${r.mime}/${r.channels}, ` +
                `concealed ${(100 * concealedShare).toFixed(2)} % of ${r.samples} samples, ` +
                `energy ${r.energy?.toFixed(3)}, level ${r.level?.toFixed(3)}, ` +
                `jitter buffer ${r.jitter_buffer_ms?.toFixed(1)} ms, video frames ${r.video_frames}, ` +
                `A/V offset ms ${JSON.stringify(r.av_offset_ms.map((x) => Math.round(x)))}`);
    assert.equal(r.status, 201, r.answer);
    assert.match(r.answer, /^m=audio 9 UDP\/TLS\/RTP\/SAVPF \d+\r$/m, 'the audio m-line is accepted');
    assert.match(r.answer, /^a=group:BUNDLE 0 1\r$/m);
    assert.match(r.answer, /^a=fmtp:\d+ minptime=10;useinbandfec=1;stereo=1;sprop-stereo=1\r$/m);
    assert.equal(r.mime, 'audio/opus');
    // 50 packets a second: 6 s and more, loosely (the page's first second is set-up).
    assert.ok(r.packets >= 150, `Opus packets received: ${r.packets}`);
    // The tone is audible: channels 2 and 3 of the synthetic source are sines, not silence.
    assert.ok(r.energy > 0 && r.level > 0.01, `energy ${r.energy}, level ${r.level}`);
    // Concealment: Chromium fills what did not arrive in time. A loopback path loses nothing;
    // a loaded 2-core machine delays some, so a loose bound.
    assert.ok(concealedShare < 0.2, `concealed share ${concealedShare}`);
    assert.ok(r.video_frames > 0, 'the video plays too');
    assert.equal(r.delete_status, 200);

    const s = await stats(syncd);
    assert.equal(s.whep.answered_with_audio, 1);
    const egress = s.whep.egresses.find((e) => e.stream === 'whep-audio');
    assert.ok(egress?.audio, JSON.stringify(s.whep));
    console.log(`# whep audio in syncd: ${JSON.stringify(egress.audio)}`);
    assert.equal(egress.audio.stereo, true);
    assert.ok(egress.audio.frames_encoded >= 150, JSON.stringify(egress.audio));
    assert.equal(egress.audio.encode_errors, 0);
    const tap = s.audio.taps.find((t) => t.left === 2 && t.right === 3);
    assert.ok(tap, JSON.stringify(s.audio.taps));
    // Ended: the session's audio frames are all accounted for (sent, or dropped by reason).
    const deadline = Date.now() + 5000;
    let after = s;
    while (after.whep.sessions.length > 0 && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 100));
      after = await stats(syncd);
    }
    assert.equal(after.whep.sessions.length, 0);
    assert.ok(after.whep.ended_sessions_audio_frames_sent >= r.packets,
      `sent ${after.whep.ended_sessions_audio_frames_sent}, received ${r.packets}`);
    // Nobody listens now: the tap stops copying.
    const idle = after.audio.taps.find((t) => t.left === 2 && t.right === 3);
    assert.equal(idle.wanted, false);
  } finally {
    await page.close();
  }
});

test('--whep-audio-channels: a wrong index or syntax stops syncd at start, with the reason', () => {
  const run = (args) => spawnSync(SYNCD, ['--port', '0', '--status-line', 'off', ...args],
    { encoding: 'utf8', timeout: 20000 });
  const past = run(['--audio-source', 'synthetic:2', '--whep-audio-channels', '0,5']);
  assert.notEqual(past.status, 0);
  assert.match(past.stderr, /--whep-audio-channels: channel 5 is past the audio source's 2 channels/);
  const syntax = run(['--audio-source', 'synthetic:2', '--whep-audio-channels', 'left']);
  assert.notEqual(syntax.status, 0);
  assert.match(syntax.stderr, /--whep-audio-channels: expected none, N or L,R/);
  const noSource = run(['--whep-audio-channels', '0,1']);
  assert.notEqual(noSource.status, 0);
  assert.match(noSource.stderr, /--whep-audio-channels needs an --audio-source/);
});
