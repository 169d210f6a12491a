// watch() (web/sync.js) against a fake RTCPeerConnection and a fake fetch: how each WHEP answer
// becomes a session or a typed SyncError, without a browser (browser/watch.test.js plays for real).
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { watch, whepUrl, SyncError, RETRYABLE_CODES } from '../../../web/sync.js';

class FakePC extends EventTarget {
  constructor() {
    super();
    this.connectionState = 'new';
    this.iceConnectionState = 'new';
    this.transceivers = [];
    this.closed = false;
    FakePC.last = this;
  }
  addTransceiver(kind, init) { this.transceivers.push({ kind, ...init }); }
  async createOffer() { return { type: 'offer', sdp: 'v=0\r\noffer\r\n' }; }
  async setLocalDescription(d) { this.localDescription = d; }
  async setRemoteDescription(d) {
    this.remoteDescription = d;
    if (FakePC.connects) setTimeout(() => { this.connectionState = 'connected'; this.dispatchEvent(new Event('connectionstatechange')); }, 5);
  }
  async getStats() { return new Map(); }
  close() { this.closed = true; this.connectionState = 'closed'; }
}

const realFetch = globalThis.fetch;
let requests;
function fakeFetch(answers) {
  requests = [];
  globalThis.fetch = async (url, init = {}) => {
    requests.push({ url: String(url), method: init.method ?? 'GET', headers: init.headers ?? {}, body: init.body });
    const a = answers(String(url), init);
    if (a instanceof Error) throw a;
    return new Response(a.body ?? '', { status: a.status, headers: a.headers ?? {} });
  };
}
afterEach(() => { globalThis.fetch = realFetch; FakePC.connects = true; });

const BASE = 'http://127.0.0.1:54997';
const opts = (o = {}) => ({ ticket: 't0k', base: BASE, RTCPeerConnection: FakePC, play: false, ...o });

test('whepUrl', () => {
  assert.equal(whepUrl('127.0.0.1:54997', 'main'), 'http://127.0.0.1:54997/whep/main');
  assert.equal(whepUrl('ws://h:1/ws', 'a.b-c'), 'http://h:1/whep/a.b-c');
});

test('201: the offer goes as application/sdp with the bearer ticket; Location is resolved; stop() DELETEs once', async () => {
  FakePC.connects = true;
  fakeFetch((url, init) => init.method === 'POST'
    ? { status: 201, body: 'v=0\r\nm=video 9 UDP/TLS/RTP/SAVPF 102\r\nm=audio 0 UDP/TLS/RTP/SAVPF 111\r\n', headers: { Location: '/whep/main/0123456789abcdef' } }
    : { status: 200 });
  const s = await watch('main', null, opts());
  assert.equal(s.state, 'connected');
  assert.equal(s.location, `${BASE}/whep/main/0123456789abcdef`);
  assert.equal(s.audio, false, 'audio m-line rejected (port 0)');
  assert.deepEqual(FakePC.last.transceivers.map((t) => [t.kind, t.direction]), [['video', 'recvonly'], ['audio', 'recvonly']]);
  const post = requests[0];
  assert.equal(post.url, `${BASE}/whep/main`);
  assert.equal(post.headers['Content-Type'], 'application/sdp');
  assert.equal(post.headers.Authorization, 'Bearer t0k');
  assert.equal(post.body, 'v=0\r\noffer\r\n');
  const ended = await s.stop();
  assert.deepEqual(ended, { reason: 'stopped', error: null, deleteStatus: 200 });
  assert.deepEqual(await s.ended, ended);
  await s.stop();
  assert.deepEqual(requests.slice(1).map((r) => [r.method, r.url]), [['DELETE', `${BASE}/whep/main/0123456789abcdef`]]);
  assert.ok(FakePC.last.closed);
});

test('audio: false offers video alone', async () => {
  fakeFetch(() => ({ status: 201, body: 'v=0\r\n', headers: { Location: '/whep/main/1' } }));
  const s = await watch('main', null, opts({ audio: false }));
  assert.deepEqual(FakePC.last.transceivers.map((t) => t.kind), ['video']);
  await s.stop();
});

async function refusal(answer, o) {
  fakeFetch(() => answer);
  try {
    await watch('main', null, opts(o));
  } catch (e) {
    assert.ok(e instanceof SyncError, String(e));
    assert.ok(FakePC.last?.closed, 'the peer connection is closed');
    return e;
  }
  assert.fail('watch resolved');
}

test('refusals are typed by status; busy carries Retry-After and is retryable', async () => {
  let e = await refusal({ status: 403, body: 'missing, unknown, expired or spent ticket' });
  assert.deepEqual([e.code, e.status, e.retryable], ['forbidden', 403, false]);
  e = await refusal({ status: 404, body: 'no such stream' });
  assert.deepEqual([e.code, e.status, e.retryable], ['not_found', 404, false]);
  e = await refusal({ status: 503, body: 'busy', headers: { 'Retry-After': '5' } });
  assert.deepEqual([e.code, e.status, e.retryable, e.retryAfter, e.details.retryAfter], ['busy', 503, true, 5, 5]);
  assert.ok(RETRYABLE_CODES.has('busy'));
  e = await refusal({ status: 400, body: 'bad offer: no_h264' });
  assert.deepEqual([e.code, e.message, e.retryable], ['bad_offer', 'bad offer: no_h264', false]);
  e = await refusal({ status: 415, body: '' });
  assert.deepEqual([e.code, e.status], ['http_error', 415]);
  e = await refusal(new TypeError('Failed to fetch'));
  assert.deepEqual([e.code, e.retryable], ['network', true]);
});

test('ICE/DTLS that does not connect within timeoutMs is webrtc_failed (not retryable), and the session is DELETEd', async () => {
  FakePC.connects = false;
  fakeFetch((url, init) => init.method === 'POST' ? { status: 201, body: 'v=0\r\n', headers: { Location: '/whep/main/2' } } : { status: 200 });
  const t0 = Date.now();
  let e;
  try { await watch('main', null, opts({ timeoutMs: 100 })); } catch (x) { e = x; }
  assert.ok(e instanceof SyncError);
  assert.deepEqual([e.code, e.retryable], ['webrtc_failed', false]);
  assert.ok(Date.now() - t0 < 2000);
  assert.deepEqual(requests.map((r) => r.method), ['POST', 'DELETE']);
  assert.ok(!RETRYABLE_CODES.has('webrtc_failed'));
});

test('a bad stream name and an aborted signal are refused before any request', async () => {
  fakeFetch(() => ({ status: 500 }));
  await assert.rejects(watch('a/b', null, opts()), { code: 'bad_message' });
  await assert.rejects(watch('main', null, opts({ signal: AbortSignal.abort() })), { code: 'aborted' });
  assert.equal(requests.length, 0);
});
