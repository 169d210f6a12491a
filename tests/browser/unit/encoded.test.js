// Encoded (H.264) publishing and receiving in web/sync.js under Node's test runner: the pure
// helpers (header format 5 and the column-marker flag, level choice, admission, the column
// marker, Annex B inspection), and the publisher against fakes of WebCodecs (VideoEncoder,
// VideoFrame, OffscreenCanvas) and of the control WebSocket, which stands in for syncd.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import {
  FRAME_HEADER_BYTES, FRAME_FLAG_COLUMN_MARKER, FRAME_FLAG_CONTENT_HASH, FORMAT_CODES, FORMAT_NAMES, RECORD_HEADER_BYTES,
  SyncConnection, SyncError, publishCanvas, encodeCapability, writeFrameHeader, parseFrameHeader, writeRecordHeader,
  parseRecordHeader, h264Level, h264EncoderConfig, h264AccessUnitLimit, defaultH264Bitrate, encodedAdmission,
  columnMarkerColumns, drawColumnMarker, readColumnMarker, inspectAnnexB, COLUMN_MARKER_WIDTH, H264_MIN_BITRATE,
} from '../../../web/sync.js';

// ------------------------------------------------------------------------------------------------
// Pure helpers

test('frame header carries format 5 (h264) and the column-marker flag', () => {
  assert.equal(FORMAT_CODES.h264, 5);
  assert.equal(FORMAT_NAMES[5], 'h264');
  assert.equal(FRAME_FLAG_COLUMN_MARKER, 2);
  const buf = new ArrayBuffer(FRAME_HEADER_BYTES + 8);
  writeFrameHeader(buf, { streamId: 3, flags: FRAME_FLAG_COLUMN_MARKER, sequence: 77, captureTimeUs: 123456, width: 1280, height: 720, format: FORMAT_CODES.h264 });
  const v = new DataView(buf);
  assert.equal(v.getUint32(12, true), 2, 'flags at offset 12: bit 1');
  assert.equal(v.getUint32(40, true), 5, 'format at offset 40');
  const h = parseFrameHeader(buf);
  assert.deepEqual({ ...h, contentHash: undefined }, { streamId: 3, flags: 2, sequence: 77, captureTimeUs: 123456, width: 1280, height: 720, format: 5, contentHash: undefined });
  assert.equal(h.flags & FRAME_FLAG_CONTENT_HASH, 0);
});

test('h264 records: payload is one access unit of 1 up to the stream frame_bytes', () => {
  assert.equal(h264AccessUnitLimit(1920, 1080), 1920 * 1080 * 1.5);
  assert.equal(h264AccessUnitLimit(641, 361), 641 * 361 + 2 * 321 * 181);
  const rec = (payloadBytes) => {
    const b = new ArrayBuffer(RECORD_HEADER_BYTES);
    writeRecordHeader(b, { sequence: 1, width: 640, height: 360, format: 5, payloadBytes });
    return b;
  };
  assert.equal(parseRecordHeader(rec(1)).payloadBytes, 1);
  assert.equal(parseRecordHeader(rec(1234)).format, 5);
  assert.equal(parseRecordHeader(rec(h264AccessUnitLimit(640, 360))).payloadBytes, 345600);
  for (const bad of [0, h264AccessUnitLimit(640, 360) + 1]) {
    assert.throws(() => parseRecordHeader(rec(bad)), (e) => e instanceof SyncError && e.code === 'bad_record' && /h264/.test(e.message));
  }
});

test('level: the lowest from 3.1 that admits size, rate and bitrate (H.264 Table A-1)', () => {
  const cases = [
    [320, 240, 30, '1f'], [640, 360, 60, '1f'], [1280, 720, 30, '1f'], [1280, 720, 60, '20'],
    [1920, 1080, 30, '28'], [1920, 1080, 60, '2a'], [2560, 1440, 30, '32'], [2560, 1440, 60, '33'],
    [3840, 2160, 30, '33'], [3840, 2160, 60, '34'], [7680, 4320, 30, '3c'], [7680, 4320, 120, '3e'],
  ];
  for (const [w, h, fps, level] of cases) assert.equal(h264Level(w, h, fps), level, `${w}x${h}@${fps}`);
  // 720p30 above level 3.1's 14 Mbit/s Baseline ceiling moves up to 3.2.
  assert.equal(h264Level(1280, 720, 30, 15e6), '20');
  // A frame 8 x MaxFS^0.5 macroblocks wide is past the side limit even when the area fits.
  assert.equal(h264Level(16 * 170, 16, 30), '20');
});

test('encoder config: constrained baseline Annex B, realtime, default bitrate 0.1 bit a pixel a frame', () => {
  const c = h264EncoderConfig({ width: 1920, height: 1080, fps: 60 });
  assert.deepEqual(c, {
    codec: 'avc1.42e02a', width: 1920, height: 1080, bitrate: 12441600, framerate: 60,
    latencyMode: 'realtime', hardwareAcceleration: 'no-preference', avc: { format: 'annexb' },
  });
  assert.equal(h264EncoderConfig({ width: 640, height: 360, fps: 30, bitrate: 2e6, hardwareAcceleration: 'prefer-software' }).hardwareAcceleration, 'prefer-software');
  assert.equal(defaultH264Bitrate(640, 360, 30), 691200);
  assert.equal(defaultH264Bitrate(64, 64, 1), 250000, 'floor');
  assert.equal(defaultH264Bitrate(3840, 2160, 60), 20e6, 'cap');
  // The level admits the ceiling stream.bitrate may raise it to.
  assert.equal(h264EncoderConfig({ width: 1280, height: 720, fps: 30, maxBitrate: 16e6 }).codec, 'avc1.42e020');
});

test('admission: not open, then the socket, then the encoder queue', () => {
  const ok = { open: true, bufferedAmount: 0, maxBufferedBytes: 1000, encodeQueueSize: 0, maxEncodeQueue: 2 };
  assert.equal(encodedAdmission(ok), null);
  assert.equal(encodedAdmission({ ...ok, encodeQueueSize: 1 }), null);
  assert.equal(encodedAdmission({ ...ok, encodeQueueSize: 2 }), 'encoder_busy');
  assert.equal(encodedAdmission({ ...ok, bufferedAmount: 1000 }), null);
  assert.equal(encodedAdmission({ ...ok, bufferedAmount: 1001 }), 'backpressure');
  assert.equal(encodedAdmission({ ...ok, bufferedAmount: 1001, encodeQueueSize: 5 }), 'backpressure');
  assert.equal(encodedAdmission({ ...ok, open: false, bufferedAmount: 1001, encodeQueueSize: 5 }), 'not_open');
});

// A 2D context over RGBA pixels: enough of one for drawImage (recorded) and fillRect.
class FakeContext2d {
  constructor(width, height) {
    this.width = width;
    this.height = height;
    this.pixels = new Uint8Array(width * height * 4).fill(128);
    this.fillStyle = '#000000';
    this.drawn = [];
  }
  fillRect(x, y, w, h) {
    const v = this.fillStyle === '#ffffff' ? 255 : this.fillStyle === '#000000' ? 0 : 77;
    for (let row = y; row < Math.min(this.height, y + h); ++row) {
      this.pixels.fill(v, (row * this.width + x) * 4, (row * this.width + Math.min(this.width, x + w)) * 4);
    }
  }
  drawImage(source, ...args) {
    this.drawn.push({ source, args });
    this.pixels.fill(128);
  }
}

test('column marker: 16 columns of 8 px, bit i in column i, then a black guard; read back as syncd does', () => {
  assert.equal(COLUMN_MARKER_WIDTH, 136);
  const cols = columnMarkerColumns(0x1_8005);
  assert.equal(cols.length, 17);
  assert.deepEqual(cols.filter((c) => c.white).map((c) => c.x), [0, 16, 120]);
  assert.deepEqual(cols[16], { x: 128, width: 8, white: false });
  for (const seq of [0, 1, 0xffff, 0x1_2345, 0xa5a5, 2 ** 40 + 9]) {
    const ctx = new FakeContext2d(160, 40);
    drawColumnMarker(ctx, seq, 40);
    assert.equal(readColumnMarker(ctx.pixels.subarray(1), 160 * 4, 160, 40, 4), seq % 65536, `sequence ${seq}`);
    assert.equal(ctx.pixels[(20 * 160 + 140) * 4], 128, 'nothing drawn right of the guard');
  }
  // Luma, and what is not a marker.
  const luma = new Uint8Array(200 * 10).fill(16);
  for (let y = 0; y < 10; ++y) luma.fill(235, y * 200 + 8, y * 200 + 16);
  assert.equal(readColumnMarker(luma, 200, 200, 10), 2);
  assert.equal(readColumnMarker(new Uint8Array(200 * 10).fill(128), 200, 200, 10), null, 'grey');
  assert.equal(readColumnMarker(new Uint8Array(100 * 10), 100, 100, 10), null, 'too narrow');
  for (let y = 0; y < 10; ++y) luma.fill(235, y * 200 + 128, y * 200 + 136);
  assert.equal(readColumnMarker(luma, 200, 200, 10), null, 'white guard');
});

const SPS_PPS_IDR = [0, 0, 0, 1, 0x67, 0x42, 0xc0, 0x1e, 0x8c, 0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80, 0, 0, 1, 0x65, 0xb8, 0, 4];
test('Annex B: key frames (IDR) and the codec from the SPS', () => {
  assert.deepEqual(inspectAnnexB(new Uint8Array(SPS_PPS_IDR)), { key: true, codec: 'avc1.42c01e' });
  assert.deepEqual(inspectAnnexB(new Uint8Array([0, 0, 0, 1, 0x41, 0x9a, 0, 0, 1, 0x41, 1])), { key: false, codec: null });
  assert.deepEqual(inspectAnnexB(new Uint8Array([0, 0, 1, 0x09, 0xf0, 0, 0, 1, 0x65, 0x88])), { key: true, codec: null });
  assert.deepEqual(inspectAnnexB(new Uint8Array(0)), { key: false, codec: null });
});

// ------------------------------------------------------------------------------------------------
// The publisher against fakes

class FakeVideoFrame {
  constructor(source, init) {
    this.source = source;
    this.timestamp = init.timestamp;
    this.visibleRect = init.visibleRect ?? null;
    this.closed = false;
    FakeVideoFrame.made.push(this);
  }
  close() { this.closed = true; }
}

class FakeChunk {
  constructor(type, timestamp, byteLength) {
    this.type = type;
    this.timestamp = timestamp;
    this.byteLength = byteLength;
  }
  copyTo(dst) {
    assert.equal(dst.byteLength, this.byteLength);
    dst.fill(0xab);
    dst.set(this.type === 'key' ? [0, 0, 0, 1, 0x65] : [0, 0, 0, 1, 0x41]);
  }
}

class FakeVideoEncoder {
  constructor({ output, error }) {
    this.output = output;
    this.error = error;
    this.state = 'unconfigured';
    this.configs = [];
    this.queue = []; // frames handed to encode() with no output yet
    this.encoded = []; // every encode() call: {timestamp, keyFrame}
    FakeVideoEncoder.instances.push(this);
  }
  static async isConfigSupported(config) {
    return { supported: FakeVideoEncoder.supports(config), config };
  }
  get encodeQueueSize() { return this.queue.length; }
  configure(c) {
    this.configs.push(c);
    this.state = 'configured';
  }
  encode(frame, opts) {
    const e = { timestamp: frame.timestamp, keyFrame: !!opts?.keyFrame };
    this.queue.push(e);
    this.encoded.push(e);
  }
  // The oldest frame comes out: as a chunk of `bytes`, or not at all (skip: rate control).
  emit({ bytes = 100, skip = false, type } = {}) {
    const e = this.queue.shift();
    if (!skip) this.output(new FakeChunk(type ?? (e.keyFrame ? 'key' : 'delta'), e.timestamp, bytes));
    return e;
  }
  async flush() { while (this.queue.length) this.emit(); }
  close() { this.state = 'closed'; }
  fail(message) {
    this.state = 'closed';
    this.queue = [];
    this.error(new Error(message));
  }
}

// The control WebSocket with syncd behind it: hello, stream.open/close answered at once.
class FakeWebSocket {
  constructor(url) {
    this.url = url;
    this.readyState = 0;
    this.bufferedAmount = 0;
    this.sent = [];
    FakeWebSocket.last = this;
    queueMicrotask(() => {
      this.readyState = 1;
      this.onopen?.();
    });
  }
  send(data) {
    if (typeof data !== 'string') {
      // Copy: the publisher reuses its message buffer.
      this.sent.push({ binary: new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength)) });
      return;
    }
    const m = JSON.parse(data);
    this.sent.push(m);
    const reply = (o) => queueMicrotask(() => this.onmessage?.({ data: JSON.stringify(o) }));
    if (m.type === 'hello') reply({ type: 'welcome', protocol: 1, server: 'fake', capabilities: [] });
    if (m.type === 'stream.open') {
      FakeWebSocket.nextStream += 1;
      reply({ type: 'stream.opened', stream: FakeWebSocket.nextStream, name: m.name, width: m.width, height: m.height, format: m.format, fps: m.fps, frame_bytes: h264AccessUnitLimit(m.width, m.height) });
    }
    if (m.type === 'stream.close') reply({ type: 'stream.closed', stream: m.stream });
  }
  // syncd sends something on its own.
  serverSends(o) { this.onmessage?.({ data: JSON.stringify(o) }); }
  close(code = 1006) {
    if (this.readyState === 3) return;
    this.readyState = 3;
    queueMicrotask(() => this.onclose?.({ code, reason: '' }));
  }
  frames() { return this.sent.filter((m) => m.binary).map((m) => ({ header: parseFrameHeader(m.binary), payload: m.binary.subarray(FRAME_HEADER_BYTES) })); }
  texts(type) { return this.sent.filter((m) => m.type === type); }
}

beforeEach(() => {
  FakeVideoEncoder.instances = [];
  FakeVideoEncoder.supports = () => true;
  FakeVideoFrame.made = [];
  FakeWebSocket.nextStream = 0;
  globalThis.VideoEncoder = FakeVideoEncoder;
  globalThis.VideoFrame = FakeVideoFrame;
  globalThis.OffscreenCanvas = class {
    constructor(w, h) {
      this.width = w;
      this.height = h;
      this.ctx = new FakeContext2d(w, h);
    }
    getContext() { return this.ctx; }
  };
});

const tick = () => new Promise((r) => setTimeout(r, 0));

async function connectFake() {
  const conn = new SyncConnection('ws://127.0.0.1:1/ws', { WebSocket: FakeWebSocket, backoff: { initialMs: 1, maxMs: 1, jitter: 0 } });
  await conn.ready;
  return { conn, ws: FakeWebSocket.last };
}

function balanced(p) {
  const c = p.counters;
  assert.equal(c.offered, c.sent + c.droppedTotal + c.inFlight, JSON.stringify(c));
  assert.equal(c.droppedTotal, Object.values(c.dropped).reduce((a, b) => a + b, 0));
}

test('h264 publisher: stream.open format h264, one access unit a binary frame, key frame first', async () => {
  const { conn, ws } = await connectFake();
  const canvas = { width: 64, height: 32 };
  const p = await publishCanvas(canvas, { connection: conn, stream: 'enc', codec: 'h264', fps: 60, manual: true, firstSequence: 10 });
  try {
    assert.equal(p.codec, 'h264');
    assert.equal(p.encoder.codec, 'avc1.42e01f');
    assert.deepEqual(p.encoder.avc, { format: 'annexb' });
    assert.equal(p.bitrate, 250000);
    assert.equal(p.keyFrameInterval, 120);
    assert.deepEqual(ws.texts('stream.open')[0], { type: 'stream.open', name: 'enc', width: 64, height: 32, format: 'h264', fps: 60, feedback: true });
    const enc = FakeVideoEncoder.instances[0];
    assert.equal(enc.configs[0], p.encoder);
    assert.equal(p.nextSequence, 10);
    assert.equal(p.capture(), true);
    assert.equal(p.nextSequence, 11);
    assert.equal(FakeVideoFrame.made[0].source, canvas);
    assert.equal(FakeVideoFrame.made[0].closed, true, 'the VideoFrame is closed once handed to the encoder');
    assert.equal(p.counters.inFlight, 1);
    balanced(p);
    enc.emit({ bytes: 500 });
    assert.equal(p.capture(), true);
    enc.emit({ bytes: 40 });
    const frames = ws.frames();
    assert.equal(frames.length, 2);
    assert.deepEqual(frames.map((f) => [f.header.sequence, f.header.format, f.header.width, f.header.height, f.header.flags, f.header.streamId]), [[10, 5, 64, 32, 0, 1], [11, 5, 64, 32, 0, 1]]);
    assert.equal(frames[0].header.captureTimeUs, enc.encoded[0].timestamp, 'capture time is the VideoFrame timestamp');
    assert.ok(frames[1].header.captureTimeUs > frames[0].header.captureTimeUs);
    assert.equal(frames[0].payload.byteLength, 500);
    assert.equal(frames[1].payload.byteLength, 40);
    assert.equal(inspectAnnexB(frames[0].payload).key, true);
    assert.deepEqual(enc.encoded.map((e) => e.keyFrame), [true, false]);
    const s = p.stats();
    assert.equal(s.sent, 2);
    assert.equal(s.keyframesSent, 1);
    assert.equal(s.bytesSent, 2 * FRAME_HEADER_BYTES + 540);
    assert.equal(s.encoded, 2);
    assert.ok(s.encodeMsMean >= 0 && s.encodeMsMax >= s.encodeMsMean);
    assert.equal(s.codec, 'h264');
    assert.equal(s.sender, 'page');
    balanced(p);
  } finally {
    await p.stop();
    conn.close();
  }
  assert.deepEqual(ws.texts('stream.close'), [{ type: 'stream.close', stream: 1 }]);
  const report = ws.texts('stream.report').at(-1);
  assert.equal(report.offered, 2);
  assert.equal(report.sent, 2);
});

test('admission: encoder queue full -> encoder_busy, socket behind -> backpressure; nothing queued', async () => {
  const { conn, ws } = await connectFake();
  const p = await publishCanvas({ width: 64, height: 32 }, { connection: conn, stream: 'adm', codec: 'h264', manual: true, maxEncodeQueue: 2, maxBufferedBytes: 5000 });
  try {
    const enc = FakeVideoEncoder.instances[0];
    assert.equal(p.capture(), true);
    assert.equal(p.capture(), true);
    assert.equal(p.capture(), false);
    assert.equal(p.counters.dropped.encoder_busy, 1);
    assert.equal(enc.encoded.length, 2, 'the skipped frame never reached the encoder');
    assert.equal(p.nextSequence, 3, 'a skipped frame takes no sequence');
    balanced(p);
    enc.emit();
    ws.bufferedAmount = 5001;
    assert.equal(p.capture(), false);
    assert.equal(p.counters.dropped.backpressure, 1);
    ws.bufferedAmount = 5000;
    assert.equal(p.capture(), true);
    balanced(p);
    // The default socket bound: a few frames at the bitrate, at least 256 KiB.
    assert.equal(p.maxBufferedBytes, 5000);
    enc.emit();
    enc.emit();
    assert.deepEqual(p.stats().dropped, { not_open: 0, backpressure: 1, encoder_busy: 1, encode_failed: 0, too_large: 0, encoder_skipped: 0, awaiting_key: 0 });
    balanced(p);
  } finally {
    await p.stop();
    conn.close();
  }
});

test('default socket bound scales with the bitrate', async () => {
  const { conn } = await connectFake();
  const p = await publishCanvas({ width: 1920, height: 1080 }, { connection: conn, stream: 'bound', codec: 'h264', fps: 30, manual: true, bitrate: 40e6 });
  try {
    assert.equal(p.maxBufferedBytes, Math.round(4 * 40e6 / 8 / 30));
    p.setBitrate(1e6);
    assert.equal(p.maxBufferedBytes, 262144);
  } finally {
    await p.stop();
    conn.close();
  }
});

test('stream.keyframe and stream.bitrate for this stream are followed; other streams ignored', async () => {
  const { conn, ws } = await connectFake();
  const p = await publishCanvas({ width: 1280, height: 720 }, { connection: conn, stream: 'ctl', codec: 'h264', fps: 30, manual: true, bitrate: 2e6, maxBitrate: 3e6, keyFrameInterval: 1000 });
  try {
    const enc = FakeVideoEncoder.instances[0];
    const id = p.streamId;
    p.capture();
    enc.emit();
    p.capture();
    enc.emit();
    ws.serverSends({ type: 'stream.keyframe', stream: id + 1, reason: 'decoder' });
    p.capture();
    enc.emit();
    const requests = [];
    p.on('keyframe-request', (m) => requests.push(m.reason));
    ws.serverSends({ type: 'stream.keyframe', stream: id, reason: 'decoder' });
    p.capture();
    enc.emit();
    p.capture();
    enc.emit();
    assert.deepEqual(enc.encoded.map((e) => e.keyFrame), [true, false, false, true, false]);
    assert.deepEqual(requests, ['decoder']);
    assert.equal(p.counters.keyframeRequests, 1);
    assert.equal(p.counters.keyframesSent, 2);

    ws.serverSends({ type: 'stream.bitrate', stream: id + 1, bps: 500000 });
    assert.equal(p.bitrate, 2e6);
    ws.serverSends({ type: 'stream.bitrate', stream: id, bps: 500000 });
    assert.equal(p.bitrate, 500000);
    assert.equal(enc.configs.at(-1).bitrate, 500000);
    assert.equal(enc.configs.at(-1).codec, p.encoder.codec, 'reconfigured with the same config but the bitrate');
    assert.equal(p.encoder.bitrate, 500000);
    ws.serverSends({ type: 'stream.bitrate', stream: id, bps: 9e6 });
    assert.equal(p.bitrate, 3e6, 'capped at maxBitrate');
    ws.serverSends({ type: 'stream.bitrate', stream: id, bps: 1000 });
    assert.equal(p.bitrate, H264_MIN_BITRATE, 'not below 100 kbit/s');
    ws.serverSends({ type: 'stream.bitrate', stream: id, bps: 100000 });
    ws.serverSends({ type: 'stream.bitrate', stream: id, bps: 'fast' });
    assert.equal(p.counters.bitrateChanges, 3, 'only changes count');
    assert.equal(enc.configs.length, 4);
    assert.equal(p.stats().bitrate, H264_MIN_BITRATE);
    balanced(p);
  } finally {
    await p.stop();
    conn.close();
  }
});

test('key frame every keyFrameInterval frames, without maxBitrate the initial bitrate is the ceiling', async () => {
  const { conn, ws } = await connectFake();
  const p = await publishCanvas({ width: 64, height: 32 }, { connection: conn, stream: 'gop', codec: 'h264', manual: true, keyFrameInterval: 3, bitrate: 400000 });
  try {
    const enc = FakeVideoEncoder.instances[0];
    for (let i = 0; i < 7; ++i) {
      p.capture();
      enc.emit();
    }
    assert.deepEqual(enc.encoded.map((e) => e.keyFrame), [true, false, false, true, false, false, true]);
    ws.serverSends({ type: 'stream.bitrate', stream: p.streamId, bps: 800000 });
    assert.equal(p.bitrate, 400000);
  } finally {
    await p.stop();
    conn.close();
  }
});

test('too large, skipped by the encoder, encoder error: counted, and the chain restarts at a key frame', async () => {
  const { conn, ws } = await connectFake();
  const errors = [];
  const p = await publishCanvas({ width: 64, height: 32 }, { connection: conn, stream: 'bad', codec: 'h264', manual: true, maxEncodeQueue: 8 });
  p.on('error', (e) => errors.push(e.code));
  try {
    let enc = FakeVideoEncoder.instances[0];
    const limit = h264AccessUnitLimit(64, 32);
    p.capture();
    enc.emit({ bytes: limit }); // exactly the limit: sent
    p.capture();
    p.capture();
    enc.emit({ bytes: limit + 1 }); // over: dropped
    enc.emit({ bytes: 10 }); // a delta after the lost one: useless to a decoder
    assert.equal(p.counters.dropped.too_large, 1);
    assert.equal(p.counters.dropped.awaiting_key, 1);
    p.capture();
    enc.emit();
    assert.equal(enc.encoded.at(-1).keyFrame, true, 'the frame after a lost one is a key frame');
    assert.equal(ws.frames().length, 2);
    // The encoder's rate control skips a frame: it gave no output for it.
    p.capture();
    p.capture();
    enc.emit({ skip: true });
    enc.emit();
    assert.equal(p.counters.dropped.encoder_skipped, 1);
    balanced(p);
    // An encoder error loses what it held; a new encoder is made a second later.
    p.capture();
    p.capture();
    enc.fail('boom');
    assert.equal(p.counters.dropped.encode_failed, 2);
    assert.deepEqual(errors, ['encode_failed']);
    assert.equal(p.capture(), false);
    assert.equal(p.counters.dropped.encode_failed, 3);
    balanced(p);
  } finally {
    await p.stop();
    conn.close();
  }
});

test('reconnect: the stream reopens and its first frame is a key frame; frames meanwhile are not_open', async () => {
  const { conn, ws } = await connectFake();
  const p = await publishCanvas({ width: 64, height: 32 }, { connection: conn, stream: 're', codec: 'h264', manual: true, maxEncodeQueue: 8 });
  try {
    const enc = FakeVideoEncoder.instances[0];
    p.capture();
    enc.emit();
    p.capture();
    p.capture(); // inside the encoder when the connection drops
    ws.close();
    await tick();
    assert.equal(p.streamId, null);
    assert.equal(p.capture(), false);
    assert.equal(p.counters.dropped.not_open, 1);
    enc.emit(); // out while the stream is away
    assert.equal(p.counters.dropped.not_open, 2);
    const reopened = new Promise((r) => p.on('open', r));
    await reopened;
    const ws2 = FakeWebSocket.last;
    assert.notEqual(ws2, ws);
    assert.equal(p.streamId, 2);
    assert.equal(p.counters.reopens, 1);
    enc.emit(); // a delta encoded for the old stream: not sent to the new one
    assert.equal(p.counters.dropped.not_open + p.counters.dropped.awaiting_key, 3);
    p.capture();
    assert.equal(enc.encoded.at(-1).keyFrame, true);
    enc.emit();
    const f = ws2.frames();
    assert.equal(f.length, 1);
    assert.equal(f[0].header.streamId, 2);
    assert.equal(inspectAnnexB(f[0].payload).key, true);
    balanced(p);
  } finally {
    await p.stop();
    conn.close();
  }
});

test('stop: the encoder is flushed into the stream, then closed; the stream closes after the report', async () => {
  const { conn, ws } = await connectFake();
  const p = await publishCanvas({ width: 64, height: 32 }, { connection: conn, stream: 'stop', codec: 'h264', manual: true });
  const enc = FakeVideoEncoder.instances[0];
  p.capture();
  p.capture();
  await p.stop();
  assert.equal(enc.state, 'closed');
  assert.equal(p.counters.sent, 2);
  assert.equal(p.counters.inFlight, 0);
  const order = ws.sent.map((m) => (m.binary ? 'frame' : m.type)).filter((t) => t !== 'hello');
  assert.deepEqual(order.slice(-4), ['frame', 'frame', 'stream.report', 'stream.close']);
  assert.equal(p.capture(), false);
  conn.close();
});

test('stop: frames the encoder never gives back are dropped as not_open', async () => {
  const { conn } = await connectFake();
  const p = await publishCanvas({ width: 64, height: 32 }, { connection: conn, stream: 'stuck', codec: 'h264', manual: true });
  const enc = FakeVideoEncoder.instances[0];
  enc.flush = async () => { throw new Error('closed'); };
  p.capture();
  await p.stop();
  assert.equal(p.counters.dropped.not_open, 1);
  balanced(p);
  conn.close();
});

test('columnMarker: drawn into an OffscreenCanvas copy with the sequence, header flag bit 1 set', async () => {
  const { conn, ws } = await connectFake();
  const canvas = { width: 320, height: 48 };
  const p = await publishCanvas(canvas, { connection: conn, stream: 'mark', codec: 'h264', manual: true, columnMarker: true, firstSequence: 0x1_0203 });
  try {
    const enc = FakeVideoEncoder.instances[0];
    p.capture();
    const frame = FakeVideoFrame.made[0];
    assert.notEqual(frame.source, canvas);
    const ctx = frame.source.ctx;
    assert.equal(ctx.drawn[0].source, canvas, 'the canvas is drawn first');
    assert.equal(readColumnMarker(ctx.pixels.subarray(1), 320 * 4, 320, 48, 4), 0x0203);
    enc.emit();
    const [f] = ws.frames();
    assert.equal(f.header.sequence, 0x1_0203);
    assert.equal(f.header.flags, FRAME_FLAG_COLUMN_MARKER);
  } finally {
    await p.stop();
    conn.close();
  }
});

test('a WebGL2 canvas on a software GL: readPixels into a reused buffer, rows top-down, marker in the pixels, VideoFrame of the buffer', async () => {
  // Rows come bottom-up from readPixels: row r (GL order) is filled with the byte r.
  class FakeGl2 {
    constructor() { this.RENDERER = 1; this.RGBA = 2; this.UNSIGNED_BYTE = 3; this.drawingBufferHeight = 48; this.reads = []; }
    getExtension() { return null; }
    getParameter() { return 'Google SwiftShader'; }
    readPixels(x, y, w, h, format, type, dst) {
      this.reads.push([x, y, w, h]);
      for (let r = 0; r < h; ++r) dst.fill(r, r * w * 4, (r + 1) * w * 4);
    }
  }
  globalThis.WebGL2RenderingContext = FakeGl2;
  const { conn, ws } = await connectFake();
  const gl = new FakeGl2();
  const canvas = { width: 320, height: 48 };
  const p = await publishCanvas(canvas, { connection: conn, stream: 'glsw', codec: 'h264', manual: true, context: gl, columnMarker: true, firstSequence: 0x1_0203 });
  try {
    assert.equal(p.readback, 'webgl2-sync');
    assert.equal(p.stats().readback, 'webgl2-sync');
    p.capture();
    const frame = FakeVideoFrame.made[0];
    assert.ok(frame.source instanceof Uint8Array, 'a VideoFrame of the buffer, not of the canvas');
    assert.deepEqual(gl.reads[0], [0, 0, 320, 48]);
    const px = frame.source;
    // Top-down: the top row is GL's last; right of the marker the bytes are the page's.
    assert.equal(px[(0 * 320 + 200) * 4], 47);
    assert.equal(px[(47 * 320 + 200) * 4], 0);
    assert.equal(readColumnMarker(px.subarray(1), 320 * 4, 320, 48, 4), 0x0203);
    FakeVideoEncoder.instances[0].emit();
    const [f] = ws.frames();
    assert.equal(f.header.flags, FRAME_FLAG_COLUMN_MARKER);
    p.capture();
    assert.equal(FakeVideoFrame.made[1].source, px, 'the buffer is reused');
  } finally {
    await p.stop();
    conn.close();
    delete globalThis.WebGL2RenderingContext;
  }
  // readback 'async' keeps VideoFrame(canvas) on any GL.
  globalThis.WebGL2RenderingContext = FakeGl2;
  const { conn: c2 } = await connectFake();
  const q = await publishCanvas(canvas, { connection: c2, stream: 'glvf', codec: 'h264', manual: true, context: new FakeGl2(), readback: 'async' });
  assert.equal(q.readback, 'videoframe');
  await q.stop();
  c2.close();
  delete globalThis.WebGL2RenderingContext;
});

test('codec auto: h264 where the encoder takes the config, else raw; h264 where it does not: unsupported_codec', async () => {
  const { conn } = await connectFake();
  const ctx = { getImageData: (x, y, w, h) => ({ data: new Uint8ClampedArray(w * h * 4) }) };
  const canvas = { width: 64, height: 32, getContext: (kind) => (kind === '2d' ? ctx : null) };
  const a = await publishCanvas(canvas, { connection: conn, stream: 'auto1', codec: 'auto', manual: true });
  assert.equal(a.codec, 'h264');
  assert.equal(a.encoder.codec, 'avc1.42e01f');
  await a.stop();
  FakeVideoEncoder.supports = () => false;
  const b = await publishCanvas(canvas, { connection: conn, stream: 'auto2', codec: 'auto', manual: true, worker: false });
  assert.equal(b.codec, 'raw');
  assert.equal(b.encoder, null);
  assert.equal(b.readback, '2d');
  await b.stop();
  await assert.rejects(publishCanvas(canvas, { connection: conn, stream: 'h', codec: 'h264', manual: true }), (e) => e instanceof SyncError && e.code === 'unsupported_codec');
  await assert.rejects(publishCanvas(canvas, { connection: conn, stream: 'v', codec: 'vp8', manual: true }), (e) => e.code === 'bad_message');
  // The default stays raw.
  FakeVideoEncoder.supports = () => true;
  const c = await publishCanvas(canvas, { connection: conn, stream: 'dflt', manual: true, worker: false });
  assert.equal(c.codec, 'raw');
  assert.equal(c.stats().codec, 'raw');
  await c.stop();
  conn.close();
});

test('encodeCapability: the config, and whether hardware takes it', async () => {
  FakeVideoEncoder.supports = (c) => c.hardwareAcceleration !== 'prefer-hardware';
  assert.deepEqual(await encodeCapability(1920, 1080, 60), { h264: true, config: h264EncoderConfig({ width: 1920, height: 1080, fps: 60 }), hardware: false });
  FakeVideoEncoder.supports = () => true;
  assert.equal((await encodeCapability(1280, 720, 60)).hardware, true);
  FakeVideoEncoder.supports = () => false;
  assert.deepEqual(await encodeCapability(1280, 720, 60), { h264: false, config: null, hardware: null });
  delete globalThis.VideoEncoder;
  assert.deepEqual(await encodeCapability(1280, 720, 60), { h264: false, config: null, hardware: null });
});
