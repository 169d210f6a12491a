// syncd's SDP core (src/webrtc/sdp.h) against a real Chromium: the page's own recvonly offers go
// through tests/unit/webrtc_answer (the core as a filter), and Chromium must accept each answer
// with setRemoteDescription, the video transceiver becoming recvonly on the H.264 payload type
// the core chose (and, answering as syncd with an audio source does, the audio one on Opus),
// every other m-line rejected. No syncd: only the offer/answer text is under test
// here; ICE, DTLS and media are the WHEP runtime's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_FLAGS, browserTestsDir } from '../lib/harness.js';

const ANSWER = path.resolve(browserTestsDir,
  process.env.WEBRTC_ANSWER ?? '../../build/release/tests/unit/webrtc_answer');

let context, page, profile;
before(async () => {
  profile = await mkdtemp(path.join(tmpdir(), 'sync-chromium-whep-'));
  context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, args: CHROMIUM_FLAGS });
  page = await context.newPage();
});
after(async () => {
  await context?.close();
  if (profile) await rm(profile, { recursive: true, force: true });
});

function answerFor(offer, { audio = false } = {}) {
  const r = spawnSync(ANSWER, audio ? ['--audio'] : [], { input: offer, encoding: 'utf8' });
  assert.ok(!r.error, `cannot run ${ANSWER}: ${r.error}`);
  return { status: r.status, answer: r.stdout, log: r.stderr };
}

async function makeOffer(kinds) {
  return page.evaluate(async (kinds) => {
    window.pc?.close();
    const pc = (window.pc = new RTCPeerConnection());
    for (const k of kinds) {
      if (k === 'data') pc.createDataChannel('d');
      else pc.addTransceiver(k.replace('-send', ''), { direction: k.endsWith('-send') ? 'sendonly' : 'recvonly' });
    }
    const offer = await pc.createOffer();
    await pc.setLocalDescription(offer);
    return offer.sdp;
  }, kinds);
}

const shapes = [['audio', 'video'], ['video'], ['audio', 'video', 'data'], ['video', 'audio']];
for (const [kinds, audio] of [...shapes.map((k) => [k, false]), ...shapes.filter((k) => k.includes('audio')).map((k) => [k, true])]) {
  test(`Chromium accepts the answer to its ${kinds.join(' + ')} offer${audio ? ', with syncd\'s audio' : ''}`, async () => {
    const offer = await makeOffer(kinds);
    const { status, answer, log } = answerFor(offer, { audio });
    assert.equal(status, 0, log);
    const pt = Number(/chose payload type (\d+)/.exec(log)[1]);
    const result = await page.evaluate(async (sdp) => {
      await window.pc.setRemoteDescription({ type: 'answer', sdp });
      return {
        signaling: window.pc.signalingState,
        transceivers: window.pc.getTransceivers().map((t) => ({
          mid: t.mid, kind: t.receiver.track.kind, currentDirection: t.currentDirection,
        })),
        remote: window.pc.remoteDescription.sdp,
      };
    }, answer);
    assert.equal(result.signaling, 'stable');
    for (const t of result.transceivers) {
      const taken = t.kind === 'video' || (audio && t.kind === 'audio');
      assert.equal(t.currentDirection, taken ? 'recvonly' : 'stopped', JSON.stringify(t));
    }
    if (audio) {
      const apt = Number(/chose audio payload type (\d+)/.exec(log)[1]);
      assert.match(result.remote, new RegExp(`^a=rtpmap:${apt} opus/48000/2\\r$`, 'm'));
      assert.match(offer, new RegExp(`^a=rtpmap:${apt} opus/48000/2\\r$`, 'm'));
    }
    assert.match(result.remote, new RegExp(`^m=video 9 UDP/TLS/RTP/SAVPF ${pt}\\r$`, 'm'));
    assert.match(result.remote, new RegExp(`^a=fmtp:${pt} .*packetization-mode=1`, 'm'));
    // The offer's payload type for that fmtp is the one Chromium itself listed as H.264.
    assert.match(offer, new RegExp(`^a=rtpmap:${pt} H264/90000\\r$`, 'm'));
  });
}

test('an offer whose only video is sendonly is refused with no_h264', async () => {
  const { status, log } = answerFor(await makeOffer(['audio', 'video-send']));
  assert.equal(status, 2);
  assert.match(log, /refused: no_h264/);
});
