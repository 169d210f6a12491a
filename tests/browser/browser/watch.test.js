// watch() in real Chromium (web/sync.js, docs/web.md "Watching a stream over WHEP"): a page
// served by syncd plays syncd's own pattern source in a <video> through WHEP, with the ticket
// asked for by the stream's name over its connection; its refusals come back as typed
// SyncErrors; stop() DELETEs the session, which leaves syncd's /stats.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startSyncd, launch, stats, waitFor } from '../lib/harness.js';

let syncd, browser;
before(async () => {
  syncd = await startSyncd(['--source', 'pattern:320x180@30', '--whep-bitrate', '1000']);
  browser = await launch(syncd, { extraArgs: ['--autoplay-policy=no-user-gesture-required'] });
});
after(async () => {
  await browser?.close();
  assert.equal(await syncd?.stop(), 0);
});

const newVideo = () => {
  const video = document.createElement('video');
  video.muted = true;
  video.playsInline = true;
  document.body.append(video);
  return video;
};

test('watch() plays syncd\'s pattern in a <video>; stop() ends the session', async () => {
  const page = await browser.newPage(`${syncd.base}/`);
  try {
    const r = await page.evaluate(async (newVideoSrc) => {
      const newVideo = eval(newVideoSrc);
      const { connect, watch } = await import('/web/sync.js');
      await connect();
      const video = newVideo();
      const t0 = performance.now();
      const session = await watch('pattern', video);
      window.session = session;
      const connectedMs = performance.now() - t0;
      // Count the frames the element presents for 3 s after the first.
      let frames = 0, first = null;
      const t1 = await new Promise((resolve) => {
        const onFrame = (now) => {
          frames++;
          if (first === null) first = { now, currentTime: video.currentTime };
          if (now - first.now >= 3000 || performance.now() - t0 > 20000) return resolve(now);
          video.requestVideoFrameCallback(onFrame);
        };
        video.requestVideoFrameCallback(onFrame);
        setTimeout(() => resolve(null), 20000);
      });
      return { connectedMs, frames, firstCurrentTime: first?.currentTime ?? null, currentTime: video.currentTime,
               width: video.videoWidth, height: video.videoHeight, t1, location: session.location, url: session.url,
               state: session.state, audio: session.audio, stats: await session.stats() };
    }, newVideo.toString());
    console.log(`# watch: connected in ${r.connectedMs.toFixed(0)} ms, ${r.frames} frames presented in 3 s, ` +
                `${r.width}x${r.height}, currentTime ${r.firstCurrentTime?.toFixed(2)} -> ${r.currentTime.toFixed(2)}, ` +
                `decoded ${r.stats.video?.framesDecoded}, srtp ${r.stats.srtpCipher}`);
    assert.equal(r.state, 'connected');
    assert.match(r.location ?? '', new RegExp(`^${syncd.base}/whep/pattern/[0-9a-f]{16}$`), 'Location resolved against the WHEP URL');
    assert.equal(r.url, `${syncd.base}/whep/pattern`);
    assert.equal(r.audio, false, 'no --audio-source: the audio m-line is rejected');
    assert.equal(r.width, 320);
    assert.equal(r.height, 180);
    assert.ok(r.frames >= 30, `at least 30 frames presented in 3 s (got ${r.frames})`);
    assert.ok(r.currentTime - r.firstCurrentTime >= 2, `currentTime advances (${r.firstCurrentTime} -> ${r.currentTime})`);
    assert.ok(r.stats.video.framesDecoded >= 30, JSON.stringify(r.stats));

    const live = await stats(syncd);
    assert.equal(live.whep.sessions.length, 1, JSON.stringify(live.whep.sessions));
    const ended = await page.evaluate(async () => {
      const e = await window.session.stop();
      return { ...e, state: window.session.state, location: window.session.location, again: (await window.session.stop()).reason };
    });
    assert.equal(ended.reason, 'stopped');
    assert.equal(ended.error, null);
    assert.equal(ended.deleteStatus, 200);
    assert.equal(ended.state, 'ended');
    assert.equal(ended.again, 'stopped', 'a second stop() is harmless');
    const after = await waitFor(async () => { const s = await stats(syncd); return s.whep.sessions.length === 0 && s; }, { timeoutMs: 5000, what: 'no live WHEP session' });
    assert.ok(after.whep.deleted >= 1, JSON.stringify(after.whep));
    assert.ok(after.whep.ended_sessions_frames_sent >= 30, JSON.stringify(after.whep));
  } finally {
    await page.close();
  }
});

test('watch() refusals are typed: a bad ticket is forbidden, an unknown stream unknown_stream / not_found', async () => {
  const page = await browser.newPage(`${syncd.base}/`);
  try {
    const before = await stats(syncd);
    const r = await page.evaluate(async (newVideoSrc) => {
      const newVideo = eval(newVideoSrc);
      const { connect, watch, SyncError } = await import('/web/sync.js');
      const conn = await connect();
      const video = newVideo();
      const attempt = async (name, options) => {
        try {
          const s = await watch(name, video, options);
          await s.stop();
          return { ok: true };
        } catch (e) {
          return { isSyncError: e instanceof SyncError, code: e.code, status: e.status ?? null,
                   retryable: e.retryable, message: e.message };
        }
      };
      const { ticket } = await conn.createTicket('pattern', { uses: 1 });
      return {
        badTicket: await attempt('pattern', { ticket: 'nope' }),
        unknownByName: await attempt('nobody'),
        unknownWithTicket: await attempt('nobody', { ticket }),
        badName: await attempt('no/such'),
        srcObject: video.srcObject === null,
      };
    }, newVideo.toString());
    console.log(`# watch refusals: ${JSON.stringify(r)}`);
    assert.deepEqual({ ...r.badTicket, message: undefined },
      { isSyncError: true, code: 'forbidden', status: 403, retryable: false, message: undefined });
    assert.equal(r.unknownByName.code, 'unknown_stream', 'ticket.create by name: no open stream so called');
    assert.equal(r.unknownByName.retryable, false);
    assert.equal(r.unknownWithTicket.code, 'not_found');
    assert.equal(r.unknownWithTicket.status, 404);
    assert.equal(r.unknownWithTicket.retryable, false);
    assert.equal(r.badName.code, 'bad_message');
    assert.ok(r.srcObject, 'a refused watch leaves the element alone');
    const after = await stats(syncd);
    assert.equal(after.server.tickets_refused - before.server.tickets_refused, 1);
    assert.equal(after.whep.sessions.length, 0);
  } finally {
    await page.close();
  }
});

test('a page of another origin watches with --allow-origin: ticket by name over its WebSocket, CORS POST, Location resolved, DELETE', async () => {
  // The viewer page and its copy of sync.js come from a dev server on another port (another
  // origin); everything else goes to syncd.
  const http = await import('node:http');
  const { readFile } = await import('node:fs/promises');
  const { webRoot } = await import('../lib/harness.js');
  const devServer = http.createServer(async (req, res) => {
    if (req.url === '/sync.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' });
      res.end(await readFile(`${webRoot}/sync.js`));
    } else {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>viewer</title>');
    }
  });
  await new Promise((r) => devServer.listen(0, '127.0.0.1', r));
  const DEV = `http://127.0.0.1:${devServer.address().port}`;
  const allowed = await startSyncd(['--source', 'pattern:320x180@30', '--allow-origin', DEV]);
  const VIEW = async (base) => {
    const { connect, watch } = await import('/sync.js');
    const video = document.createElement('video');
    video.muted = true;
    document.body.append(video);
    let conn;
    try {
      conn = await connect(base, { timeoutMs: 5000 });
      const session = await watch('pattern', video, { connection: conn });
      const deadline = performance.now() + 10000;
      while (video.currentTime < 1 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      const out = { ok: true, location: session.location, width: video.videoWidth, currentTime: video.currentTime };
      out.ended = await session.stop();
      return out;
    } catch (e) {
      return { ok: false, code: e.code, message: e.message };
    } finally {
      conn?.close();
    }
  };
  try {
    const page = await browser.newPage(`${DEV}/`);
    try {
      // Not listed: a loopback page may connect, but not ticket a stream syncd sources.
      const refused = await page.evaluate(VIEW, syncd.base);
      assert.deepEqual([refused.ok, refused.code], [false, 'not_stream_owner'], JSON.stringify(refused));
      const r = await page.evaluate(VIEW, allowed.base);
      console.log(`# watch from ${DEV}: ${JSON.stringify(r)}`);
      assert.equal(r.ok, true, JSON.stringify(r));
      assert.match(r.location, new RegExp(`^${allowed.base}/whep/pattern/[0-9a-f]{16}$`));
      assert.equal(r.width, 320);
      assert.ok(r.currentTime >= 1, JSON.stringify(r));
      assert.equal(r.ended.deleteStatus, 200, 'the cross-origin DELETE went through its preflight');
    } finally {
      await page.close();
    }
    await waitFor(async () => (await stats(allowed)).whep.sessions.length === 0, { timeoutMs: 5000, what: 'no live WHEP session' });
  } finally {
    assert.equal(await allowed.stop(), 0);
    devServer.close();
  }
});
