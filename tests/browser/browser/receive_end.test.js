// How a receive() ends, in real Chromium. The HTTP stream's body is close-delimited, so a stream
// that closed and a connection that went away both look like the end of the body; the client
// tells them apart: (a) the publisher closes its stream: the receive loop ends cleanly; (b) syncd
// is killed (SIGKILL) under a receiver: the receive rejects with SyncError 'disconnected'; (c) the
// receive's HTTP connection is cut while the stream goes on (a TCP proxy between the page and
// syncd drops it): 'disconnected', and resume() receives again with the same 2-use ticket, whose
// uses then run out ('forbidden').
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startSyncd, launch, waitFor } from '../lib/harness.js';

let syncd, browser, page;
before(async () => {
  // --cors-loopback: the page (at syncd's origin) also reads from another loopback port: the
  // proxy of (c) and the second syncd of (b).
  syncd = await startSyncd(['--cors-loopback']);
  browser = await launch(syncd);
  console.log(`# pages served by ${browser.servedBy}`);
  page = await browser.newPage(`${syncd.base}/healthz`);
  await page.evaluate(installHelpers);
});
after(async () => {
  await browser?.close();
  assert.equal(await syncd?.stop(), 0);
});

// In the page: window.sync (the module), publish() (a 160x90 2D canvas redrawn and captured by a
// timer, on a connection of its own to `host`), startReceive() / resume() (a receive loop in
// the background whose progress window.rx[key] shows).
async function installHelpers() {
  const sync = await import('/web/sync.js');
  window.sync = sync;
  window.pubs = {};
  window.rx = {};
  window.publish = async (host, stream) => {
    const conn = new sync.SyncConnection(host, { client: `pub-${stream}`, timeoutMs: 5000, backoff: { initialMs: 100, maxMs: 500 } });
    await conn.ready;
    const canvas = document.createElement('canvas');
    canvas.width = 160; canvas.height = 90;
    const ctx = canvas.getContext('2d');
    let i = 0;
    const draw = setInterval(() => { ctx.fillStyle = `hsl(${(i += 11) % 360} 80% 50%)`; ctx.fillRect(0, 0, 160, 90); }, 20);
    const pub = await sync.publishCanvas(canvas, { stream, fps: 30, clock: 'timer', context: ctx, connection: conn });
    window.pubs[stream] = { conn, pub, draw };
  };
  window.ticket = async (stream, uses) => (await window.pubs[stream].pub.createTicket({ uses, ttlSeconds: 60 })).ticket;
  const loop = async (rx) => {
    rx.state = 'receiving';
    rx.error = null;
    try {
      for await (const f of rx.stream) {
        ++rx.frames;
        rx.firstSeq ??= f.sequence;
        rx.lastSeq = f.sequence;
      }
      rx.state = 'ended';
    } catch (e) {
      rx.state = 'error';
      rx.error = { code: e.code, name: e.name, syncError: e instanceof sync.SyncError, retryable: e.retryable, details: e.details ?? null, status: e.status ?? null, message: String(e.message) };
    }
    rx.stats = rx.stream.stats();
  };
  window.startReceive = (key, stream, ticket, base, host) => {
    // Credit goes on a control connection to the same syncd (not through the proxy).
    const connection = new sync.SyncConnection(host, { client: `rx-${key}` });
    const rx = window.rx[key] = { frames: 0, firstSeq: null, lastSeq: null, state: 'starting', error: null, segments: [] };
    rx.stream = sync.receive(stream, ticket, { base, connection, credit: 2 });
    loop(rx);
  };
  window.resume = (key) => {
    const rx = window.rx[key];
    rx.segments.push({ frames: rx.frames, firstSeq: rx.firstSeq, lastSeq: rx.lastSeq, error: rx.error });
    rx.stream = rx.stream.resume();
    rx.firstSeq = null;
    loop(rx);
  };
}

const rxState = (key) => page.evaluate((k) => { const r = window.rx[k]; return { frames: r.frames, firstSeq: r.firstSeq, lastSeq: r.lastSeq, state: r.state, error: r.error, stats: r.stats ?? null, segments: r.segments }; }, key);
const waitFrames = (key, n) => waitFor(async () => { const r = await rxState(key); return (r.frames >= n || r.state !== 'receiving') && r; }, { what: `${key}: ${n} frames` });
const waitEnd = (key, timeoutMs = 15000) => waitFor(async () => { const r = await rxState(key); return r.state !== 'receiving' && r.state !== 'starting' && r; }, { what: `${key} to end`, timeoutMs });

test('(a) the publisher closes its stream: the receive loop ends cleanly', async () => {
  await page.evaluate((host) => window.publish(host, 'closing'), `127.0.0.1:${syncd.port}`);
  const ticket = await page.evaluate(() => window.ticket('closing', 1));
  await page.evaluate(([t, base, host]) => window.startReceive('a', 'closing', t, base, host), [ticket, syncd.base, `127.0.0.1:${syncd.port}`]);
  const r0 = await waitFrames('a', 10);
  assert.equal(r0.state, 'receiving', JSON.stringify(r0.error));
  await page.evaluate(() => window.pubs.closing.pub.stop());
  const end = await waitEnd('a');
  console.log(`# (a) ${end.frames} frames, then ${end.state}${end.error ? ' ' + JSON.stringify(end.error) : ''}`);
  assert.equal(end.state, 'ended', `ended with ${JSON.stringify(end.error)}`);
  assert.ok(end.frames >= 10);
});

test('(b) syncd killed under a receiver: the receive rejects with disconnected', async () => {
  const victim = await startSyncd(['--cors-loopback']);
  const host = `127.0.0.1:${victim.port}`;
  try {
    await page.evaluate((h) => window.publish(h, 'doomed'), host);
    const ticket = await page.evaluate(() => window.ticket('doomed', 2));
    await page.evaluate(([t, base, h]) => window.startReceive('b', 'doomed', t, base, h), [ticket, victim.base, host]);
    const r0 = await waitFrames('b', 10);
    assert.equal(r0.state, 'receiving', JSON.stringify(r0.error));
    victim.proc.kill('SIGKILL');
    const end = await waitEnd('b');
    console.log(`# (b) ${end.frames} frames, then ${end.state} ${JSON.stringify(end.error)}`);
    assert.equal(end.state, 'error', 'the loop must not end cleanly when syncd died');
    assert.equal(end.error.syncError, true);
    assert.equal(end.error.name, 'SyncError');
    assert.equal(end.error.code, 'disconnected', JSON.stringify(end.error));
    assert.equal(end.error.retryable, true);
    assert.ok(['read_failed', 'truncated', 'syncd_unreachable'].includes(end.error.details?.reason), JSON.stringify(end.error));
    // Tickets die with syncd: resuming now fails with the request itself (nothing listens).
    await page.evaluate(() => window.resume('b'));
    const again = await waitEnd('b');
    assert.equal(again.error?.code, 'network', JSON.stringify(again.error));
  } finally {
    await page.evaluate(async () => { const p = window.pubs.doomed; clearInterval(p.draw); await p.pub.stop({ close: false }); p.conn.close(); });
    await victim.stop();
  }
});

// A TCP proxy in front of syncd that can cut the connections carrying GET /streams/.
async function startProxy(port) {
  const streams = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    const pair = { client, upstream };
    client.once('data', (d) => { if (d.toString('latin1').startsWith('GET /streams/')) streams.add(pair); });
    client.pipe(upstream);
    upstream.pipe(client);
    const done = () => { streams.delete(pair); client.destroy(); upstream.destroy(); };
    client.on('error', done);
    upstream.on('error', done);
    client.on('close', done);
    upstream.on('close', done);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    get streams() { return streams.size; },
    cut() {
      const n = streams.size;
      for (const { client, upstream } of streams) { client.destroy(); upstream.destroy(); }
      streams.clear();
      return n;
    },
    close: () => new Promise((r) => server.close(r)),
  };
}

test('(c) a receive whose connection is cut resumes with the same 2-use ticket', async () => {
  const proxy = await startProxy(syncd.port);
  const host = `127.0.0.1:${syncd.port}`;
  try {
    await page.evaluate((h) => window.publish(h, 'lasting'), host);
    const ticket = await page.evaluate(() => window.ticket('lasting', 2));
    await page.evaluate(([t, base, h]) => window.startReceive('c', 'lasting', t, base, h), [ticket, proxy.base, host]);
    const r0 = await waitFrames('c', 10);
    assert.equal(r0.state, 'receiving', JSON.stringify(r0.error));

    // The connection goes; the stream does not.
    assert.equal(proxy.cut(), 1);
    const cut = await waitEnd('c');
    console.log(`# (c) cut after ${cut.frames} frames: ${JSON.stringify(cut.error)}`);
    assert.equal(cut.state, 'error');
    assert.equal(cut.error.code, 'disconnected', JSON.stringify(cut.error));
    assert.equal(cut.error.syncError, true);
    assert.equal(cut.error.retryable, true);

    // Resumed with the same ticket (its second use): frames go on from where the stream is.
    await page.evaluate(() => window.resume('c'));
    const resumed = await waitFor(async () => { const r = await rxState('c'); return (r.frames >= cut.frames + 10 || r.state !== 'receiving') && r; }, { what: 'frames after resume' });
    assert.equal(resumed.state, 'receiving', JSON.stringify(resumed.error));
    assert.ok(resumed.firstSeq > cut.lastSeq, `resumed at sequence ${resumed.firstSeq} after ${cut.lastSeq}`);
    console.log(`# (c) resumed: sequences ${resumed.firstSeq}..${resumed.lastSeq} after ${cut.lastSeq}`);

    // Cut again: both uses are spent, so a second resume is refused.
    assert.equal(proxy.cut(), 1);
    const cut2 = await waitEnd('c');
    assert.equal(cut2.error?.code, 'disconnected', JSON.stringify(cut2.error));
    await page.evaluate(() => window.resume('c'));
    const spent = await waitEnd('c');
    assert.equal(spent.error?.code, 'forbidden', JSON.stringify(spent.error));
    assert.equal(spent.error.status, 403);
    assert.equal(spent.stats.resumes, 2);
    assert.equal(spent.stats.frames, spent.frames, 'counters carry on across resumes');

    // The stream itself went on throughout: closing it now still ends a receive cleanly.
    await page.evaluate(() => window.pubs.lasting.pub.stop());
  } finally {
    await proxy.close();
  }
});
