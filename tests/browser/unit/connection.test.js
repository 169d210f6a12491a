// SyncConnection against a fake syncd built on the `ws` package: hello/welcome, requests and
// their replies, typed errors, ping, credit messages, reconnect with backoff and re-hello.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WebSocketServer, WebSocket } from 'ws';
import { connect, SyncConnection, SyncError } from '../../../web/sync.js';

function fakeSyncd(handler) {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  const seen = [];
  wss.on('connection', (ws) => {
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      const m = JSON.parse(data.toString());
      seen.push(m);
      const send = (o) => ws.send(JSON.stringify(o));
      send.ws = ws;
      if (m.type === 'hello') return send({ type: 'welcome', protocol: 1, server: 'fake', capabilities: [] });
      handler?.(m, send, ws);
    });
  });
  return new Promise((resolve) => wss.on('listening', () => resolve({ wss, seen, url: `ws://127.0.0.1:${wss.address().port}/ws` })));
}

// A ping resolves only on the pong with its own id; returns its round trip, which must be a
// real duration under `maxMs` (a loopback round trip takes well under a millisecond).
async function pingWithin(conn, maxMs) {
  const rtt = await conn.ping();
  assert.ok(Number.isFinite(rtt) && rtt >= 0 && rtt < maxMs, `ping rtt ${rtt} ms, expected under ${maxMs} ms`);
  return rtt;
}

test('hello/welcome, requests, typed errors, ping and credit', async () => {
  const f = await fakeSyncd((m, send) => {
    if (m.type === 'stream.open') {
      if (m.name === 'taken') return send({ type: 'error', code: 'stream_name_taken', message: 'taken', name: m.name });
      return send({ type: 'stream.opened', stream: 4, name: m.name, frame_bytes: m.width * m.height * 4 });
    }
    if (m.type === 'ticket.create') return send({ type: 'ticket', stream: m.stream, name: 'a', ticket: '0'.repeat(32), uses: m.uses ?? 1, expires_in_s: 60 });
    if (m.type === 'ping') return send({ type: 'pong', id: m.id });
    if (m.type === 'stats') return send({ type: 'stats', stats: { server: { version: 'x' } } });
    if (m.type === 'credit' && m.receiver === 999) return send({ type: 'error', code: 'unknown_receiver', message: 'no' });
    if (m.type === 'subscribe') return send({ type: 'error', code: 'topic_unavailable', message: 'no --headtracker' });
    if (m.type === 'audio.read') {
      // Held read: answered after the ping that follows it; then an audio_busy for a second read.
      setTimeout(() => {
        const b = Buffer.alloc(64 + 8);
        b.writeUInt32LE(0x4455414e, 0); b.writeUInt16LE(1, 4); b.writeUInt16LE(64, 6);
        b.writeUInt16LE(1, 8); b.writeUInt16LE(1, 10); b.writeUInt32LE(48000, 12); b.writeUInt32LE(2, 20);
        b.writeFloatLE(0.5, 64); b.writeFloatLE(-0.5, 68);
        send.ws.send(b);
      }, 50);
    }
  });
  const conn = await connect(f.url, { client: 'unit', WebSocket });
  try {
    assert.equal(conn.welcome.server, 'fake');
    assert.deepEqual(f.seen[0], { type: 'hello', protocol: 1, client: 'unit' });
    const opened = await conn.openStream({ name: 'a', width: 2, height: 2 });
    assert.equal(opened.stream, 4);
    await assert.rejects(conn.openStream({ name: 'taken', width: 2, height: 2 }), (e) => e instanceof SyncError && e.code === 'stream_name_taken' && e.details.name === 'taken');
    const t = await conn.createTicket(4, { uses: 2, ttl_s: 5 });
    assert.equal(t.ticket.length, 32);
    assert.deepEqual(f.seen.at(-1), { type: 'ticket.create', stream: 4, uses: 2, ttl_s: 5 });
    await pingWithin(conn, 1000);
    assert.deepEqual(f.seen.at(-1), { type: 'ping', id: 1 });
    assert.equal((await conn.stats()).server.version, 'x');
    assert.equal(conn.grantCredit(12, 1), true);
    const creditError = new Promise((r) => conn.once('credit-error', r));
    conn.grantCredit(999, 1);
    assert.equal((await creditError).code, 'unknown_receiver');
    // A credit error does not steal the reply of the request after it
    await pingWithin(conn, 1000);
    assert.ok(f.seen.some((m) => JSON.stringify(m) === '{"type":"credit","receiver":12,"frames":1}'));
    // A topic error rejects the subscription, not another request.
    const unsub = conn.subscribe('pose', () => {});
    await assert.rejects(unsub.ready, (e) => e.code === 'topic_unavailable');
    unsub();
    // A held audio.read does not swallow the replies of requests sent after it.
    const audio = conn.readAudio({ maxFrames: 2, minFrames: 2, timeoutMs: 100 });
    let audioDone = false;
    audio.then(() => { audioDone = true; }, () => {});
    // The fake holds the read 50 ms and answers the ping at once: the pong must not wait for it.
    await pingWithin(conn, 1000);
    assert.equal(audioDone, false, 'the pong waited behind the held audio read');
    const pkt = await audio;
    assert.equal(pkt.frames, 2);
    assert.deepEqual([...pkt.samples], [0.5, -0.5]);
  } finally {
    conn.close();
    f.wss.close();
  }
});

test('reconnects with backoff and re-runs hello (and re-subscribes topics)', async () => {
  const f = await fakeSyncd((m, send) => {
    if (m.type === 'subscribe') { send({ type: 'subscribed', topic: m.topic }); send({ type: 'pose.status', connected: false }); }
  });
  const conn = new SyncConnection(f.url, { client: 'rc', WebSocket, backoff: { initialMs: 20, maxMs: 100, jitter: 0 } });
  await conn.ready;
  const events = [];
  const statusEvents = []; // the kebab-case event beside the topic callback
  conn.on('pose-status', (e) => statusEvents.push(e.connected));
  const firstStatus = new Promise((r) => conn.subscribe('pose', (e) => { events.push(e.type); r(); }));
  await firstStatus;
  const reconnecting = [];
  conn.on('reconnecting', (r) => reconnecting.push(r.delayMs));
  const reopened = new Promise((r) => conn.on('open', (e) => e.reconnected && r(e)));
  for (const c of f.wss.clients) c.terminate();
  await reopened;
  assert.equal(conn.counters().reconnects, 1);
  assert.deepEqual(reconnecting, [20]);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(f.seen.filter((m) => m.type === 'hello').length, 2);
  assert.equal(f.seen.filter((m) => m.type === 'subscribe').length, 2);
  assert.deepEqual(events, ['pose.status', 'pose.status']); // wire types, verbatim
  assert.deepEqual(statusEvents, [false, false]);
  conn.close();
  f.wss.close();
});

test('backoff grows while the server is away, pending requests fail typed', async () => {
  const f = await fakeSyncd(() => {}); // never answers stats
  const port = f.wss.address().port;
  const conn = new SyncConnection(f.url, { WebSocket, backoff: { initialMs: 10, maxMs: 40, jitter: 0 }, requestTimeoutMs: 5000 });
  await conn.ready;
  const delays = [];
  conn.on('reconnecting', (r) => delays.push(r.delayMs));
  const pending = conn.stats();
  const closed = new Promise((r) => f.wss.close(r));
  for (const c of f.wss.clients) c.terminate();
  await closed;
  await assert.rejects(pending, (e) => e.code === 'disconnected');
  await new Promise((r) => setTimeout(r, 250));
  assert.deepEqual(delays.slice(0, 4), [10, 20, 40, 40]);
  assert.equal(conn.state, 'reconnecting');
  await assert.rejects(conn.ping(), (e) => e.code === 'not_connected');
  conn.close();
  assert.equal(conn.state, 'closed');
  void port;
});

// connect() always settles: nothing listening, a server that never welcomes, an abort, and
// close() before the welcome each reject with a code that says what happened.
test('connect settles with a typed code: unreachable, timeout, aborted, closed', async () => {
  const net = await import('node:net');
  const free = await new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
  const t0 = Date.now();
  await assert.rejects(connect(`ws://127.0.0.1:${free}/ws`, { WebSocket, timeoutMs: 1500, backoff: { initialMs: 50, maxMs: 100 } }),
    (e) => e instanceof SyncError && e.code === 'syncd_unreachable');
  assert.ok(Date.now() - t0 < 5000, 'settled near its deadline');
  await assert.rejects(connect(`ws://127.0.0.1:${free}/ws`, { WebSocket, reconnect: false }),
    (e) => e.code === 'syncd_unreachable');

  // Accepts the WebSocket, never answers hello.
  const mute = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((r) => mute.on('listening', r));
  const muteUrl = `ws://127.0.0.1:${mute.address().port}/ws`;
  try {
    await assert.rejects(connect(muteUrl, { WebSocket, timeoutMs: 300 }), (e) => e.code === 'timeout');
    const ac = new AbortController();
    const aborted = connect(muteUrl, { WebSocket, signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    await assert.rejects(aborted, (e) => e.code === 'aborted');
    const conn = new SyncConnection(muteUrl, { WebSocket });
    const closed = new Promise((r) => conn.addEventListener('close', (ev) => r(ev.detail)));
    conn.close();
    await assert.rejects(conn.ready, (e) => e.code === 'closed');
    assert.equal((await closed).code, 'closed');
    assert.equal(conn.state, 'closed');
  } finally {
    mute.close();
  }
});

test('events are EventTarget events whose detail is what on() hands its callback', async () => {
  const f = await fakeSyncd();
  const conn = new SyncConnection(f.url, { WebSocket });
  try {
    const viaTarget = new Promise((r) => conn.addEventListener('open', (ev) => r(ev)));
    const viaOn = new Promise((r) => conn.on('open', r));
    await conn.ready;
    const ev = await viaTarget;
    assert.ok(ev instanceof Event);
    assert.equal(ev.type, 'open');
    assert.equal(ev.detail.welcome.server, 'fake');
    assert.equal((await viaOn).welcome.server, 'fake');
    // off() removes what on() added.
    let n = 0;
    const fn = () => ++n;
    conn.on('pose', fn);
    conn.off('pose', fn);
    conn.emit('pose', {});
    assert.equal(n, 0);
  } finally {
    conn.close();
    f.wss.close();
  }
});
