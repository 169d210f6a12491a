// The client module in real Chromium, where a page author meets it: Frame.drawTo on 2D, WebGL
// and WebGL2 canvases (rows the right way up, bgra8 swapped); connect() settling with a code that
// says what went wrong; publishCanvas sending from its Worker (the default) and from the page;
// and CORS: a page on another loopback origin (a dev server on :5173) imports /web/sync.js,
// connects and publishes (its Worker started through a same-origin shim) only when syncd runs
// with --cors-loopback.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { startSyncd, launch, webRoot, streamStats, waitFor } from '../lib/harness.js';

// In a page: draws the demo pattern into a WebGL2 canvas and publishes it for `ms`, then asks for
// two tickets (one through the connection, one through the publisher), stops, and returns the
// publisher's account. Passed to page.evaluate, so it stands alone.
async function publishPatternInPage({ base, stream, worker, ms }) {
  const sync = await import(`${base}/web/sync.js`);
  const { drawPattern } = await import(`${base}/demo/pattern.js`);
  const conn = await sync.connect(base.replace('http://', ''), { client: `publish-${stream}`, timeoutMs: 5000 });
  const canvas = document.createElement('canvas');
  canvas.width = 320; canvas.height = 180;
  const gl = canvas.getContext('webgl2', { preserveDrawingBuffer: false });
  const pub = await sync.publishCanvas(canvas, { stream, fps: 30, manual: true, context: gl, worker });
  let i = 0;
  const until = performance.now() + ms;
  while (performance.now() < until) {
    drawPattern(gl, 320, 180, i++);
    pub.capture();
    await new Promise((r) => setTimeout(r, 33));
  }
  const viaConnection = await conn.createTicket(pub, { uses: 2 });
  const viaPublisher = await pub.createTicket();
  const sender = pub.sender;
  await pub.stop();
  conn.close();
  return { sender, stats: pub.stats(), tickets: [viaConnection, viaPublisher] };
}

let syncd, browser;
before(async () => {
  syncd = await startSyncd();
  browser = await launch(syncd);
});
after(async () => {
  await browser?.close();
  assert.equal(await syncd?.stop(), 0);
});

test('Frame.drawTo draws the right way up on 2D, WebGL and WebGL2 canvases', async () => {
  const page = await browser.newPage(`${syncd.base}/`);
  try {
    const results = await page.evaluate(async () => {
      const { Frame } = await import('/web/sync.js');
      const w = 64, h = 32;
      const out = [];
      for (const kind of ['2d', 'webgl', 'webgl2']) {
        for (const format of [1, 2]) { // rgba8, bgra8
          // Top half red, bottom half green (bytes in the frame's own channel order).
          const px = new Uint8Array(w * h * 4);
          for (let y = 0; y < h; ++y) {
            for (let x = 0; x < w; ++x) {
              const i = (y * w + x) * 4;
              const [r, g, b] = y < h / 2 ? [255, 0, 0] : [0, 255, 0];
              if (format === 1) px.set([r, g, b, 255], i);
              else px.set([b, g, r, 255], i);
            }
          }
          const canvas = document.createElement('canvas');
          const gl = kind === '2d' ? null : canvas.getContext(kind, { preserveDrawingBuffer: true });
          if (kind !== '2d' && !gl) { out.push({ kind, format, skipped: 'no context' }); continue; }
          const frame = new Frame({ sequence: 1, width: w, height: h, format, flags: 0, contentHash: null, captureTimeUs: 0, publishTimeNs: 0, droppedBefore: 0 }, px);
          let error = null;
          try { frame.drawTo(canvas); } catch (e) { error = String(e); }
          const at = (x, y) => {
            if (!gl) return [...canvas.getContext('2d').getImageData(x, y, 1, 1).data];
            const p = new Uint8Array(4);
            gl.readPixels(x, h - 1 - y, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, p); // GL rows are bottom-up
            return [...p];
          };
          out.push({ kind, format, error, top: error ? null : at(5, 2), bottom: error ? null : at(5, h - 3) });
        }
      }
      return out;
    });
    for (const r of results) {
      const what = `${r.kind} format ${r.format}`;
      assert.equal(r.skipped, undefined, `${what}: ${r.skipped}`);
      assert.equal(r.error, null, what);
      assert.deepEqual(r.top.slice(0, 3), [255, 0, 0], `${what}: top row red`);
      assert.deepEqual(r.bottom.slice(0, 3), [0, 255, 0], `${what}: bottom row green`);
    }
  } finally {
    await page.close();
  }
});

test('connect() settles: syncd down is syncd_unreachable, a refused page is origin_refused', async () => {
  const page = await browser.newPage(`${syncd.base}/`);
  try {
    // A port where nothing listens (syncd stopped on it).
    const down = await startSyncd();
    const downPort = down.port;
    assert.equal(await down.stop(), 0);
    const r = await page.evaluate(async (port) => {
      const { connect } = await import('/web/sync.js');
      const t0 = performance.now();
      try {
        await connect(`127.0.0.1:${port}`, { timeoutMs: 2000 });
        return { ok: true };
      } catch (e) {
        return { code: e.code, name: e.name, retryable: e.retryable, ms: performance.now() - t0 };
      }
    }, downPort);
    assert.equal(r.name, 'SyncError');
    assert.equal(r.code, 'syncd_unreachable');
    assert.ok(r.ms < 8000, `settled in ${r.ms} ms`);
    assert.equal(r.retryable, true);
  } finally {
    await page.close();
  }
  // A page on a public origin syncd does not allow (Chromium's Local Network Access checks off,
  // so the request reaches syncd and it is syncd that refuses).
  const lna = await launch(null, { extraArgs: ['--disable-features=LocalNetworkAccessChecks'] });
  try {
    await lna.context.route('http://evil.example/**', (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<!doctype html><title>x</title>' }));
    await lna.context.route('http://evil.example/sync.js', async (route) => {
      await route.fulfill({ status: 200, contentType: 'text/javascript', body: await readFile(path.join(webRoot, 'sync.js'), 'utf8') });
    });
    const page = await lna.newPage('http://evil.example/');
    // With reconnect on or off, the refusal settles at once, not at the connect deadline: no
    // retry changes it (RETRYABLE_CODES), while an unreachable syncd is retried (above).
    for (const reconnect of [false, true]) {
      const r = await page.evaluate(async ([port, reconnect]) => {
        const { connect } = await import('/sync.js');
        const t0 = performance.now();
        try {
          await connect(`127.0.0.1:${port}`, { timeoutMs: 8000, reconnect });
          return { ok: true };
        } catch (e) {
          return { code: e.code, message: e.message, retryable: e.retryable, ms: performance.now() - t0 };
        }
      }, [syncd.port, reconnect]);
      assert.equal(r.code, 'origin_refused', JSON.stringify(r));
      assert.equal(r.retryable, false, JSON.stringify(r));
      assert.ok(r.ms < 2000, `reconnect ${reconnect}: settled in ${r.ms} ms, not at the 8-s deadline`);
    }
  } finally {
    await lna.close();
  }
});

test('CORS: a page on a loopback dev origin imports sync.js and connects only with --cors-loopback', async () => {
  // Routed files (a syncd built from another web/) are fulfilled by the test, not by syncd's CORS.
  assert.equal(browser.servedBy, 'syncd', 'syncd must serve this web/ (rebuild it) for its CORS headers to be under test');
  // A real dev server on another loopback port (as `vite` on :5173 would be).
  const http = await import('node:http');
  const devServer = http.createServer((req, res) => { res.writeHead(200, { 'content-type': 'text/html' }); res.end('<!doctype html><title>dev</title>'); });
  await new Promise((r) => devServer.listen(0, '127.0.0.1', r));
  const DEV = `http://localhost:${devServer.address().port}`;
  const tryImport = async (target) => {
    const page = await browser.newPage(`${DEV}/`);
    try {
      return await page.evaluate(async (base) => {
        try {
          const { connect } = await import(`${base}/web/sync.js`);
          const conn = await connect(base.replace('http://', ''), { timeoutMs: 5000 });
          const server = conn.welcome.server;
          conn.close();
          return { ok: true, server };
        } catch (e) {
          return { ok: false, error: String(e) };
        }
      }, target.base);
    } finally {
      await page.close();
    }
  };
  const dev = await startSyncd(['--cors-loopback']);
  try {
    const refused = await tryImport(syncd);
    assert.equal(refused.ok, false, 'without --cors-loopback the module import is blocked');
    const allowed = await tryImport(dev);
    assert.equal(allowed.ok, true, allowed.error);
    // The dev page publishes too: its Worker cannot load from syncd's origin directly, so
    // sync.js starts it from a same-origin blob that imports the module (CORS again).
    const page = await browser.newPage(`${DEV}/`);
    try {
      const r = await page.evaluate(publishPatternInPage, { base: dev.base, stream: 'from-dev-origin', worker: true, ms: 1000 });
      assert.equal(r.sender, 'worker');
      assert.ok(r.stats.sent >= 5 && r.stats.offered === r.stats.sent + r.stats.droppedTotal, JSON.stringify(r.stats));
      const s = await waitFor(async () => { const x = await streamStats(dev, 'from-dev-origin'); return x?.frames_offered === r.stats.sent && x; }, { what: 'the dev page frames in syncd' });
      assert.equal(s.publishers.test.verify_failed.marker_mismatch, 0);
    } finally {
      await page.close();
    }
  } finally {
    assert.equal(await dev.stop(), 0);
    devServer.close();
  }
});

test('receive(...).videoFrames() is a ReadableStream of VideoFrames with the stream size and markers', async () => {
  const { WebSocket } = await import('ws');
  const pattern = await startSyncd(['--source', 'pattern:320x180@30']);
  const page = await browser.newPage(`${pattern.base}/`);
  // A native client (no Origin) tickets syncd's own pattern stream.
  const ws = new WebSocket(pattern.ws);
  const rpc = (m) => new Promise((resolve) => { ws.once('message', (d) => resolve(JSON.parse(String(d)))); ws.send(JSON.stringify(m)); });
  try {
    await new Promise((r) => ws.once('open', r));
    await rpc({ type: 'hello', protocol: 1 });
    let id;
    for (let i = 0; i < 50 && id === undefined; ++i) {
      id = (await (await fetch(`${pattern.base}/stats`)).json()).streams?.find((s) => s.name === 'pattern')?.id;
      if (id === undefined) await new Promise((r) => setTimeout(r, 100));
    }
    const t = await rpc({ type: 'ticket.create', stream: id });
    assert.equal(t.type, 'ticket', JSON.stringify(t));
    const r = await page.evaluate(async (ticket) => {
      const { receive } = await import('/web/sync.js');
      const reader = receive('pattern', ticket).videoFrames().getReader();
      const out = [];
      for (let i = 0; i < 5; ++i) {
        const { value } = await reader.read();
        out.push({ w: value.codedWidth, h: value.codedHeight, format: value.format, ts: value.timestamp });
        // The marker survives in the VideoFrame's own copy: its first 16 bytes.
        const bytes = new Uint8Array(value.allocationSize());
        await value.copyTo(bytes);
        out.at(-1).marker = new DataView(bytes.buffer).getUint32(0, true);
        value.close();
      }
      await reader.cancel();
      return out;
    }, t.ticket);
    assert.equal(r.length, 5);
    for (const f of r) {
      assert.deepEqual([f.w, f.h, f.format], [320, 180, 'RGBA']);
      assert.ok(f.ts > 0);
    }
    for (let i = 1; i < r.length; ++i) assert.ok(r[i].marker > r[i - 1].marker, `markers increase: ${r.map((f) => f.marker)}`);
  } finally {
    ws.close();
    await page.close();
    assert.equal(await pattern.stop(), 0);
  }
});

test('publishCanvas stops on its AbortSignal: the stream closes in syncd', async () => {
  const page = await browser.newPage(`${syncd.base}/`);
  try {
    const r = await page.evaluate(async () => {
      const { connect, publishCanvas } = await import('/web/sync.js');
      const conn = await connect(location.host);
      const canvas = document.createElement('canvas');
      canvas.width = 64; canvas.height = 32;
      canvas.getContext('2d').fillRect(0, 0, 64, 32);
      const ac = new AbortController();
      const pub = await publishCanvas(canvas, { stream: 'aborted', fps: 30, signal: ac.signal, connection: conn });
      await new Promise((res) => setTimeout(res, 500));
      const before = pub.stats().sent;
      ac.abort();
      await new Promise((res) => setTimeout(res, 500));
      const after = pub.stats().sent;
      await new Promise((res) => setTimeout(res, 500));
      return { before, after, later: pub.stats().sent };
    });
    assert.ok(r.before > 0, JSON.stringify(r));
    assert.equal(r.later, r.after, 'nothing sent after the abort');
    const s = (await (await fetch(`${syncd.base}/stats`)).json()).streams.find((x) => x.name === 'aborted');
    assert.equal(s?.open, false, 'syncd closed the stream');
  } finally {
    await page.close();
  }
});

test('publishCanvas sends from a Worker by default, from the page with worker: false; same frames, exact account', async () => {
  const page = await browser.newPage(`${syncd.base}/`);
  try {
    for (const worker of [true, false]) {
      const stream = `sent-from-${worker ? 'worker' : 'page'}`;
      const r = await page.evaluate(publishPatternInPage, { base: syncd.base, stream, worker, ms: 1500 });
      assert.equal(r.sender, worker ? 'worker' : 'page');
      const p = r.stats;
      // Every capture sent or dropped by reason; nothing left in flight once stopped.
      assert.equal(p.inFlight, 0, JSON.stringify(p));
      assert.equal(p.offered, p.sent + p.droppedTotal, JSON.stringify(p));
      assert.ok(p.sent >= 10, JSON.stringify(p));
      assert.equal(p.lastSequence, p.sent, 'sequences run 1..sent without gaps');
      // syncd took every frame sent and its test publisher verified each marker.
      const s = await waitFor(async () => { const x = await streamStats(syncd, stream); return x?.frames_offered === p.sent && x; }, { what: `syncd's count of ${stream}` });
      assert.equal(s.frames_accepted + s.frames_dropped_total, p.sent);
      const t = s.publishers.test;
      assert.equal(t.verify_failed.marker_mismatch, 0);
      assert.equal(t.sequence_duplicates + t.sequence_reordered, 0);
      assert.ok(t.marker_verified >= 10, `marker_verified ${t.marker_verified}`);
      // Tickets reach the stream wherever its connection is.
      for (const ticket of r.tickets) assert.equal(ticket.name, stream);
    }
  } finally {
    await page.close();
  }
});
