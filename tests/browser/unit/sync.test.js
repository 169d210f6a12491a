// Pure helpers of web/sync.js under Node's test runner (no browser).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  FRAME_HEADER_BYTES, FRAME_MAGIC, RECORD_HEADER_BYTES, RECORD_MAGIC, SyncError,
  writeFrameHeader, parseFrameHeader, stampMarker, readMarker, parseRecordHeader, writeRecordHeader,
  backoffDelay, messages, streamUrl, creditUrl, httpBase, wsUrl, flipRowsInPlace, regionChecksum,
  parseNaudPacket, validStreamName,
} from '../../../web/sync.js';

test('frame header matches docs/protocol.md byte for byte', () => {
  const buf = new ArrayBuffer(FRAME_HEADER_BYTES + 16);
  writeFrameHeader(buf, { streamId: 7, flags: 0, sequence: 0x1_0000_0002, captureTimeUs: 1234567890123, width: 640, height: 360, format: 1 });
  const v = new DataView(buf);
  assert.equal(v.getUint32(0, true), FRAME_MAGIC);
  assert.deepEqual([...new Uint8Array(buf, 0, 4)], [0x53, 0x59, 0x4e, 0x46]); // "SYNF"
  assert.equal(v.getUint16(4, true), 1);
  assert.equal(v.getUint16(6, true), 56);
  assert.equal(v.getUint32(8, true), 7);
  assert.equal(v.getUint32(12, true), 0);
  assert.equal(v.getBigUint64(16, true), 0x1_0000_0002n);
  assert.equal(v.getBigUint64(24, true), 1234567890123n);
  assert.equal(v.getUint32(32, true), 640);
  assert.equal(v.getUint32(36, true), 360);
  assert.equal(v.getUint32(40, true), 1);
  assert.equal(v.getUint32(44, true), 0);
  assert.equal(v.getBigUint64(48, true), 0n);
  const h = parseFrameHeader(buf);
  assert.equal(h.sequence, 0x1_0000_0002);
  assert.equal(h.streamId, 7);
  assert.equal(h.captureTimeUs, 1234567890123);
});

test('frame header with a content hash and bigint fields', () => {
  const buf = new Uint8Array(FRAME_HEADER_BYTES);
  writeFrameHeader(buf, { streamId: 1, flags: 1, sequence: 0xffff_ffff_ffff_fff0n, contentHash: 0xdead_beef_0123_4567n });
  const h = parseFrameHeader(buf);
  assert.equal(h.flags, 1);
  assert.equal(h.contentHash, 0xdead_beef_0123_4567n);
  assert.throws(() => parseFrameHeader(new Uint8Array(55)), (e) => e instanceof SyncError && e.code === 'bad_frame_header');
  buf[0] = 0;
  assert.throws(() => parseFrameHeader(buf), /magic/);
});

test('sequence marker: u64 LE sequence then its complement', () => {
  const px = new Uint8Array(32);
  stampMarker(px, 5);
  assert.deepEqual([...px.subarray(0, 16)], [5, 0, 0, 0, 0, 0, 0, 0, 0xfa, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
  assert.deepEqual(readMarker(px), { sequence: 5, valid: true });
  // Same bytes as the Python harness: struct.pack("<QQ", seq, ~seq & 0xFFFFFFFFFFFFFFFF)
  const big = 0x0123_4567_89ab_cdefn;
  stampMarker(px, big);
  const v = new DataView(px.buffer);
  assert.equal(v.getBigUint64(0, true), big);
  assert.equal(v.getBigUint64(8, true), ~big & 0xffff_ffff_ffff_ffffn);
  const seq = 2 ** 40 + 3;
  stampMarker(px, seq);
  assert.deepEqual(readMarker(px), { sequence: seq, valid: true });
  px[9] ^= 1;
  assert.equal(readMarker(px).valid, false);
  assert.equal(readMarker(new Uint8Array(8)).valid, false);
  assert.equal(readMarker(new Uint8Array(16)).valid, false); // all zero: complement is not 0
  assert.throws(() => stampMarker(px, -1), RangeError);
  // Stamping at an offset (inside a whole message buffer, after the 56-byte header)
  const msg = new Uint8Array(FRAME_HEADER_BYTES + 16);
  stampMarker(new DataView(msg.buffer), 9, FRAME_HEADER_BYTES);
  assert.deepEqual(readMarker(msg.subarray(FRAME_HEADER_BYTES)), { sequence: 9, valid: true });
});

test('record header parsing (docs/protocol.md "Record format")', () => {
  const buf = new ArrayBuffer(RECORD_HEADER_BYTES);
  const v = new DataView(buf);
  v.setUint32(0, RECORD_MAGIC, true);
  v.setUint16(4, 1, true);
  v.setUint16(6, 64, true);
  v.setBigUint64(8, 42n, true);
  v.setBigUint64(16, 1_700_000_000_000_000n, true);
  v.setBigUint64(24, 3_600_000_000_123n, true);
  v.setUint32(32, 640, true);
  v.setUint32(36, 360, true);
  v.setUint32(40, 1, true);
  v.setUint32(44, 0, true);
  v.setBigUint64(48, 0n, true);
  v.setUint32(56, 640 * 360 * 4, true);
  v.setUint32(60, 3, true);
  assert.deepEqual([...new Uint8Array(buf, 0, 4)], [0x53, 0x59, 0x4e, 0x53]); // "SYNS"
  const h = parseRecordHeader(buf);
  assert.deepEqual(h, {
    sequence: 42, captureTimeUs: 1_700_000_000_000_000, publishTimeNs: 3_600_000_000_123,
    width: 640, height: 360, format: 1, flags: 0, contentHash: null, payloadBytes: 921600, droppedBefore: 3,
  });
  v.setUint32(44, 1, true);
  v.setBigUint64(48, 0xfeed_face_cafe_beefn, true);
  assert.equal(parseRecordHeader(new Uint8Array(buf)).contentHash, 0xfeed_face_cafe_beefn);
  // Round trip through the writer
  const out = new ArrayBuffer(RECORD_HEADER_BYTES);
  writeRecordHeader(out, { ...h, flags: 1, contentHash: 0xfeed_face_cafe_beefn });
  assert.deepEqual(new Uint8Array(out), new Uint8Array(buf));
});

test('record header errors are typed', () => {
  const good = new ArrayBuffer(64);
  writeRecordHeader(good, { sequence: 1, width: 2, height: 2 });
  assert.equal(parseRecordHeader(good).payloadBytes, 16);
  const bad = (mutate) => {
    const b = good.slice(0);
    mutate(new DataView(b));
    return () => parseRecordHeader(b);
  };
  const isBadRecord = (e) => e instanceof SyncError && e.code === 'bad_record';
  assert.throws(bad((v) => v.setUint32(0, 0x464e5953, true)), isBadRecord); // a frame magic
  assert.throws(bad((v) => v.setUint16(4, 2, true)), isBadRecord);
  assert.throws(bad((v) => v.setUint16(6, 56, true)), isBadRecord);
  assert.throws(bad((v) => v.setUint32(56, 15, true)), isBadRecord);
  assert.throws(() => parseRecordHeader(new Uint8Array(63)), isBadRecord);
});

test('backoff schedule doubles up to the cap, with bounded jitter', () => {
  const none = { initialMs: 250, maxMs: 10000, jitter: 0 };
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 7].map((n) => backoffDelay(n, none)), [250, 500, 1000, 2000, 4000, 8000, 10000, 10000]);
  assert.equal(backoffDelay(100, none), 10000);
  assert.equal(backoffDelay(0, { ...none, jitter: 0.2 }, () => 0), 200);
  assert.equal(backoffDelay(0, { ...none, jitter: 0.2 }, () => 0.999999), 300);
  for (let n = 0; n < 10; ++n) {
    const d = backoffDelay(n);
    const base = Math.min(10000, 250 * 2 ** n);
    assert.ok(d >= base * 0.8 && d <= base * 1.2, `attempt ${n}: ${d}`);
  }
});

test('control messages: hello, stream.open, ticket.create, credit, subscribe, audio.read', () => {
  assert.deepEqual(messages.hello('page'), { type: 'hello', protocol: 1, client: 'page' });
  assert.deepEqual(messages.streamOpen({ name: 'a', width: 640, height: 360, fps: 30 }), { type: 'stream.open', name: 'a', width: 640, height: 360, format: 'rgba8', fps: 30 });
  assert.deepEqual(messages.ticketCreate(3), { type: 'ticket.create', stream: 3 });
  assert.deepEqual(messages.ticketCreate(3, { uses: 2, ttl_s: 30 }), { type: 'ticket.create', stream: 3, uses: 2, ttl_s: 30 });
  assert.equal(JSON.stringify(messages.credit(17, 1)), '{"type":"credit","receiver":17,"frames":1}');
  assert.deepEqual(messages.subscribe('pose'), { type: 'subscribe', topic: 'pose' });
  assert.deepEqual(messages.unsubscribe('pose'), { type: 'unsubscribe', topic: 'pose' });
  assert.deepEqual(messages.audioRead({ max_frames: 480, timeout_ms: 50 }), { type: 'audio.read', max_frames: 480, timeout_ms: 50 });
  assert.deepEqual(messages.ping(4), { type: 'ping', id: 4 });
});

test('URLs: stream, credit, http and ws bases', () => {
  assert.equal(streamUrl('ws://127.0.0.1:5000/ws', 'main', '9f0c', 2), 'http://127.0.0.1:5000/streams/main?ticket=9f0c&credit=2');
  assert.equal(streamUrl('127.0.0.1:5000', 'a.b-c_d', 'ff'), 'http://127.0.0.1:5000/streams/a.b-c_d?ticket=ff');
  assert.equal(creditUrl('http://localhost:1', 'main', 5, 1), 'http://localhost:1/streams/main/credit?receiver=5&frames=1');
  assert.equal(httpBase('wss://h:1/ws'), 'https://h:1');
  assert.equal(wsUrl('http://127.0.0.1:54997'), 'ws://127.0.0.1:54997/ws');
  assert.equal(wsUrl('127.0.0.1:9'), 'ws://127.0.0.1:9/ws');
  assert.equal(wsUrl('ws://127.0.0.1:9/ws'), 'ws://127.0.0.1:9/ws');
  assert.ok(validStreamName('demo-1.x_y'));
  assert.ok(!validStreamName('bad name'));
  assert.ok(!validStreamName('x'.repeat(65)));
});

test('row flip turns a bottom-up readback top-down', () => {
  const rows = 5, rowBytes = 8;
  const px = new Uint8Array(rows * rowBytes);
  for (let r = 0; r < rows; ++r) px.fill(r, r * rowBytes, (r + 1) * rowBytes);
  flipRowsInPlace(px, rowBytes, rows, new Uint8Array(rowBytes));
  assert.deepEqual([...px.filter((_, i) => i % rowBytes === 0)], [4, 3, 2, 1, 0]);
  flipRowsInPlace(px, rowBytes, rows);
  assert.deepEqual([...px.filter((_, i) => i % rowBytes === 0)], [0, 1, 2, 3, 4]);
});

test('region checksum covers exactly the rectangle', () => {
  const w = 4, h = 4;
  const px = new Uint8Array(w * h * 4);
  const a = regionChecksum(px, w, 1, 1, 2, 2);
  px[0] = 9; // outside the region
  assert.equal(regionChecksum(px, w, 1, 1, 2, 2), a);
  px[(1 * w + 1) * 4] = 9; // inside
  assert.notEqual(regionChecksum(px, w, 1, 1, 2, 2), a);
  assert.equal(regionChecksum(new Uint8Array(0), 0, 0, 0, 0, 0), 0x811c9dc5);
});

test('NAUD audio packets parse', () => {
  const frames = 3, ch = 2;
  const buf = new ArrayBuffer(64 + frames * ch * 4);
  const v = new DataView(buf);
  v.setUint32(0, 0x4455414e, true);
  v.setUint16(4, 1, true); v.setUint16(6, 64, true);
  v.setUint16(8, ch, true); v.setUint16(10, 1, true);
  v.setUint32(12, 48000, true);
  v.setUint8(16, 0); v.setUint16(18, 1, true);
  v.setUint32(20, frames, true);
  v.setBigUint64(24, 960n, true); v.setBigUint64(32, 5n, true); v.setBigUint64(40, 0n, true);
  v.setBigUint64(48, 123456789n, true); v.setUint32(56, 7, true); v.setUint32(60, 1, true);
  new Float32Array(buf, 64).set([0.5, -0.5, 0.25, -0.25, 1, -1]);
  const p = parseNaudPacket(buf);
  assert.equal(p.channels, 2); assert.equal(p.sampleRate, 48000); assert.equal(p.frames, 3);
  assert.equal(p.firstFrame, 960); assert.equal(p.droppedFrames, 5); assert.equal(p.discontinuity, true);
  assert.equal(p.sequence, 7); assert.equal(p.xruns, 1);
  assert.deepEqual([...p.samples], [0.5, -0.5, 0.25, -0.25, 1, -1]);
  assert.throws(() => parseNaudPacket(buf.slice(0, 70)), (e) => e.code === 'bad_audio_packet');
});

test('demo pattern module agrees with sync.js checksum', async () => {
  const pattern = await import('../../../web/demo/pattern.js');
  const px = new Uint8Array(8 * 8 * 4).map((_, i) => (i * 37) & 255);
  assert.equal(pattern.regionChecksum(px, 8, 1, 2, 5, 3), regionChecksum(px, 8, 1, 2, 5, 3));
  // The reference block's checksum is fixed by REF and refCellColor: a change to either (which
  // every receiver page would then disagree with) shows here.
  assert.equal(pattern.expectedRefChecksum(), 1178356677);
});
