// sync.js: browser client for syncd (docs/protocol.md, docs/web.md). An ES module with no build
// step and no dependencies. Nothing here touches the DOM at import time, so the pure helpers
// (headers, markers, records, backoff, message builders) are importable in Node for unit tests.

// ------------------------------------------------------------------------------------------------
// Wire constants (docs/protocol.md)

export const PROTOCOL_VERSION = 1;
export const FRAME_MAGIC = 0x464e5953; // bytes "SYNF"
export const FRAME_HEADER_BYTES = 56;
export const FRAME_FLAG_CONTENT_HASH = 1;
// The frame's pixels carry its sequence's column marker (drawColumnMarker), which survives lossy
// coding where the 16-byte sequence marker does not: syncd checks decoded H.264 frames by it.
export const FRAME_FLAG_COLUMN_MARKER = 2;
export const RECORD_MAGIC = 0x534e5953; // bytes "SYNS"
export const RECORD_HEADER_BYTES = 64;
export const NAUD_MAGIC = 0x4455414e; // bytes "NAUD"
export const NAUD_HEADER_BYTES = 64;
export const MARKER_BYTES = 16;
// Pixel formats (docs/protocol.md, "Pixel formats"): wire values of the frame header and records.
// h264 is encoded media (one Annex B access unit a frame, of its own size), not a picture.
export const FORMAT_CODES = Object.freeze({ rgba8: 1, bgra8: 2, nv12: 3, i420: 4, h264: 5 });
export const FORMAT_NAMES = Object.freeze({ 1: 'rgba8', 2: 'bgra8', 3: 'nv12', 4: 'i420', 5: 'h264' });

const TWO_32 = 4294967296;

/** An error from syncd (`code` is the server's stable code) or from HTTP (`status`). */
/**
 * The error codes that may go away if the same thing is tried again later, unchanged: syncd not
 * up yet, a connection lost, a limit that frees when others let go. Every other code needs a
 * change first (another origin allowed, another ticket, another name or size) and is final.
 */
export const RETRYABLE_CODES = new Set([
  'syncd_unreachable', 'timeout', 'disconnected', 'not_connected', 'connect_failed', 'network',
  'truncated', 'stream_limit', 'no_memory', 'too_many_tickets', 'audio_busy', 'busy',
]);

export class SyncError extends Error {
  constructor(code, message, { status, details, cause } = {}) {
    super(message || code, cause ? { cause } : undefined);
    this.name = 'SyncError';
    this.code = code;
    if (status !== undefined) this.status = status;
    if (details !== undefined) this.details = details;
  }

  /** Whether trying the same thing again later may succeed (RETRYABLE_CODES). */
  get retryable() {
    return RETRYABLE_CODES.has(this.code);
  }
}

// ------------------------------------------------------------------------------------------------
// Pure helpers: 64-bit fields as two u32 halves, so sequences stay plain numbers (exact below
// 2^53) and no BigInt is allocated on the per-frame path.

function setU64(view, offset, value) {
  if (typeof value === 'bigint') {
    view.setBigUint64(offset, value, true);
    return;
  }
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`not a u64: ${value}`);
  view.setUint32(offset, value % TWO_32, true);
  view.setUint32(offset + 4, Math.floor(value / TWO_32), true);
}

function getU64(view, offset) {
  // Exact below 2^53; syncd's CLOCK_MONOTONIC in ns stays below that for 104 days of uptime.
  return view.getUint32(offset + 4, true) * TWO_32 + view.getUint32(offset, true);
}

function asView(bytes) {
  if (bytes instanceof DataView) return bytes;
  if (ArrayBuffer.isView(bytes)) return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return new DataView(bytes);
}

/**
 * The layout of one frame (docs/protocol.md, "Pixel formats"): its planes, packed back to back
 * with no row padding, as `{offset, stride, rows}`, and its size in bytes. rgba8/bgra8: one plane
 * of 4 bytes a pixel; nv12: Y, then interleaved U V at half height; i420: Y, then U, then V, each
 * a quarter of Y. `format` is a name or a wire value. null when the format is unknown or the size
 * does not suit it (zero, or an odd side for nv12/i420, whose chroma covers 2x2 pixels). The same
 * planes as stream.opened's `planes`.
 */
export function frameLayout(format, width, height) {
  const code = typeof format === 'string' ? FORMAT_CODES[format] : format;
  if (!(width > 0 && height > 0 && Number.isInteger(width) && Number.isInteger(height))) return null;
  const luma = width * height;
  let planes;
  if (code === 1 || code === 2) {
    planes = [{ offset: 0, stride: width * 4, rows: height }];
  } else if (code === 3 || code === 4) {
    if (width % 2 || height % 2) return null;
    planes = code === 3
      ? [{ offset: 0, stride: width, rows: height }, { offset: luma, stride: width, rows: height / 2 }]
      : [
        { offset: 0, stride: width, rows: height },
        { offset: luma, stride: width / 2, rows: height / 2 },
        { offset: luma + luma / 4, stride: width / 2, rows: height / 2 },
      ];
  } else {
    return null;
  }
  const last = planes[planes.length - 1];
  return { format: FORMAT_NAMES[code], width, height, planes, bytes: last.offset + last.stride * last.rows };
}

/**
 * Writes the 56-byte binary frame header at `offset` of `target` (ArrayBuffer, view or DataView).
 * Fields: streamId, sequence, captureTimeUs, width, height, format (0 = the stream's, else a
 * FORMAT_CODES value), flags (bit 0: contentHash valid), contentHash (bigint or number).
 */
export function writeFrameHeader(target, fields, offset = 0) {
  const v = asView(target);
  const o = offset;
  v.setUint32(o + 0, FRAME_MAGIC, true);
  v.setUint16(o + 4, 1, true);
  v.setUint16(o + 6, FRAME_HEADER_BYTES, true);
  v.setUint32(o + 8, fields.streamId >>> 0, true);
  v.setUint32(o + 12, (fields.flags ?? 0) >>> 0, true);
  setU64(v, o + 16, fields.sequence);
  setU64(v, o + 24, fields.captureTimeUs ?? 0);
  v.setUint32(o + 32, (fields.width ?? 0) >>> 0, true);
  v.setUint32(o + 36, (fields.height ?? 0) >>> 0, true);
  v.setUint32(o + 40, (fields.format ?? 0) >>> 0, true);
  v.setUint32(o + 44, 0, true);
  setU64(v, o + 48, fields.contentHash ?? 0);
}

/** Parses a 56-byte frame header (for tests and tools); throws SyncError('bad_frame_header'). */
export function parseFrameHeader(bytes, offset = 0) {
  const v = asView(bytes);
  if (v.byteLength - offset < FRAME_HEADER_BYTES) throw new SyncError('bad_frame_header', 'short frame header');
  const o = offset;
  if (v.getUint32(o, true) !== FRAME_MAGIC) throw new SyncError('bad_frame_header', 'bad frame magic');
  if (v.getUint16(o + 4, true) !== 1) throw new SyncError('bad_frame_header', 'bad frame version');
  if (v.getUint16(o + 6, true) !== FRAME_HEADER_BYTES) throw new SyncError('bad_frame_header', 'bad frame header size');
  return {
    streamId: v.getUint32(o + 8, true),
    flags: v.getUint32(o + 12, true),
    sequence: getU64(v, o + 16),
    captureTimeUs: getU64(v, o + 24),
    width: v.getUint32(o + 32, true),
    height: v.getUint32(o + 36, true),
    format: v.getUint32(o + 40, true),
    contentHash: v.getBigUint64(o + 48, true),
  };
}

/**
 * Stamps the sequence marker into the first 16 bytes of `pixels` (a Uint8Array or DataView at
 * the first pixel): u64 LE sequence, then its bitwise complement.
 */
export function stampMarker(pixels, sequence, offset = 0) {
  const v = asView(pixels);
  let lo, hi;
  if (typeof sequence === 'bigint') {
    lo = Number(sequence & 0xffffffffn);
    hi = Number((sequence >> 32n) & 0xffffffffn);
  } else {
    if (!Number.isSafeInteger(sequence) || sequence < 0) throw new RangeError(`not a sequence: ${sequence}`);
    lo = sequence % TWO_32;
    hi = Math.floor(sequence / TWO_32);
  }
  v.setUint32(offset + 0, lo, true);
  v.setUint32(offset + 4, hi, true);
  v.setUint32(offset + 8, ~lo >>> 0, true);
  v.setUint32(offset + 12, ~hi >>> 0, true);
}

/** Reads the marker: `{sequence, valid}`; valid when the second half is the complement. */
export function readMarker(pixels, offset = 0) {
  const v = asView(pixels);
  if (v.byteLength - offset < MARKER_BYTES) return { sequence: -1, valid: false };
  const lo = v.getUint32(offset, true);
  const hi = v.getUint32(offset + 4, true);
  const valid = v.getUint32(offset + 8, true) === (~lo >>> 0) && v.getUint32(offset + 12, true) === (~hi >>> 0);
  return { sequence: hi * TWO_32 + lo, valid };
}

/**
 * Parses the 64-byte record header of the HTTP stream. Throws SyncError('bad_record') on a wrong
 * magic, version or header size, or a payload that is not one frame of the record's format and
 * size (frameLayout).
 */
export function parseRecordHeader(bytes, offset = 0) {
  const v = asView(bytes);
  if (v.byteLength - offset < RECORD_HEADER_BYTES) throw new SyncError('bad_record', 'short record header');
  const o = offset;
  const magic = v.getUint32(o, true);
  if (magic !== RECORD_MAGIC) throw new SyncError('bad_record', `bad record magic 0x${magic.toString(16)}`);
  const version = v.getUint16(o + 4, true);
  if (version !== 1) throw new SyncError('bad_record', `unsupported record version ${version}`);
  const headerBytes = v.getUint16(o + 6, true);
  if (headerBytes !== RECORD_HEADER_BYTES) throw new SyncError('bad_record', `bad record header size ${headerBytes}`);
  const width = v.getUint32(o + 32, true);
  const height = v.getUint32(o + 36, true);
  const format = v.getUint32(o + 40, true);
  const payloadBytes = v.getUint32(o + 56, true);
  // Sized without building the planes: this runs for every record received. An h264 record is
  // one access unit of its own size, 1 up to the stream's frame_bytes.
  const fits = format === FORMAT_CODES.h264
    ? width > 0 && height > 0 && payloadBytes >= 1 && payloadBytes <= h264AccessUnitLimit(width, height)
    : payloadBytes === recordFrameBytes(format, width, height);
  if (!fits) {
    const name = FORMAT_NAMES[format] ?? `format ${format}`;
    throw new SyncError('bad_record', `payload ${payloadBytes} B does not match ${width}x${height} ${name}`);
  }
  const flags = v.getUint32(o + 44, true);
  return {
    sequence: getU64(v, o + 8),
    captureTimeUs: getU64(v, o + 16),
    publishTimeNs: getU64(v, o + 24),
    width,
    height,
    format,
    flags,
    contentHash: flags & FRAME_FLAG_CONTENT_HASH ? v.getBigUint64(o + 48, true) : null,
    payloadBytes,
    droppedBefore: v.getUint32(o + 60, true),
  };
}

// frameLayout(format, width, height).bytes, or -1 (matches no payload) when there is none.
function recordFrameBytes(format, width, height) {
  if (width === 0 || height === 0) return -1;
  if (format === 1 || format === 2) return width * height * 4;
  if ((format === 3 || format === 4) && width % 2 === 0 && height % 2 === 0) return width * height * 1.5;
  return -1;
}

/** Writes a record header (the server's job; here for tests and native-compatible tools). */
export function writeRecordHeader(target, f, offset = 0) {
  const v = asView(target);
  const o = offset;
  v.setUint32(o, RECORD_MAGIC, true);
  v.setUint16(o + 4, 1, true);
  v.setUint16(o + 6, RECORD_HEADER_BYTES, true);
  setU64(v, o + 8, f.sequence);
  setU64(v, o + 16, f.captureTimeUs ?? 0);
  setU64(v, o + 24, f.publishTimeNs ?? 0);
  v.setUint32(o + 32, f.width, true);
  v.setUint32(o + 36, f.height, true);
  v.setUint32(o + 40, f.format ?? 1, true);
  v.setUint32(o + 44, f.flags ?? 0, true);
  setU64(v, o + 48, f.contentHash ?? 0);
  v.setUint32(o + 56, f.payloadBytes ?? frameLayout(f.format ?? 1, f.width, f.height)?.bytes ?? 0, true);
  v.setUint32(o + 60, f.droppedBefore ?? 0, true);
}

/** Parses a NAUD audio packet (the binary reply to audio.read). */
export function parseNaudPacket(bytes) {
  const v = asView(bytes);
  if (v.byteLength < NAUD_HEADER_BYTES) throw new SyncError('bad_audio_packet', 'short NAUD packet');
  if (v.getUint32(0, true) !== NAUD_MAGIC) throw new SyncError('bad_audio_packet', 'bad NAUD magic');
  if (v.getUint16(4, true) !== 1) throw new SyncError('bad_audio_packet', 'bad NAUD version');
  if (v.getUint16(6, true) !== NAUD_HEADER_BYTES) throw new SyncError('bad_audio_packet', 'bad NAUD header size');
  const channels = v.getUint16(8, true);
  const sampleFormat = v.getUint16(10, true);
  if (sampleFormat !== 1) throw new SyncError('bad_audio_packet', `sample format ${sampleFormat}`);
  const frames = v.getUint32(20, true);
  const payload = frames * channels * 4;
  if (v.byteLength !== NAUD_HEADER_BYTES + payload) throw new SyncError('bad_audio_packet', 'NAUD size mismatch');
  const start = v.byteOffset + NAUD_HEADER_BYTES;
  // Float32Array needs 4-byte alignment; copy only when the buffer does not give it.
  const samples = start % 4 === 0
    ? new Float32Array(v.buffer, start, frames * channels)
    : new Float32Array(v.buffer.slice(start, start + payload));
  return {
    channels,
    sampleRate: v.getUint32(12, true),
    layout: v.getUint8(16) === 0 ? 'interleaved' : 'unknown',
    flags: v.getUint16(18, true),
    discontinuity: (v.getUint16(18, true) & 1) !== 0,
    frames,
    firstFrame: getU64(v, 24),
    droppedFrames: getU64(v, 32),
    gapFrames: getU64(v, 40),
    timestampNs: getU64(v, 48),
    sequence: v.getUint32(56, true),
    xruns: v.getUint32(60, true),
    samples,
  };
}

/**
 * Reconnect delay for attempt n (0-based): min(maxMs, initialMs * factor^n), then +-jitter
 * (fraction) using `random()` in [0, 1).
 */
export function backoffDelay(attempt, { initialMs = 250, maxMs = 10000, factor = 2, jitter = 0.2 } = {}, random = Math.random) {
  const base = Math.min(maxMs, initialMs * Math.pow(factor, Math.max(0, attempt)));
  if (!jitter) return base;
  const spread = base * jitter;
  return Math.max(0, Math.round(base - spread + 2 * spread * random()));
}

// Control message builders (docs/protocol.md, "Control messages").
export const messages = Object.freeze({
  hello: (client = 'sync.js') => ({ type: 'hello', protocol: PROTOCOL_VERSION, client: String(client) }),
  streamOpen: ({ name, width, height, format = 'rgba8', fps, slots, feedback }) => {
    const m = { type: 'stream.open', name, width, height, format };
    if (fps !== undefined) m.fps = fps;
    if (slots !== undefined) m.slots = slots;
    if (feedback !== undefined) m.feedback = feedback;
    return m;
  },
  streamClose: (stream) => ({ type: 'stream.close', stream }),
  ticketCreate: (stream, { uses, ttl_s } = {}) => {
    const m = { type: 'ticket.create', stream };
    if (uses !== undefined) m.uses = uses;
    if (ttl_s !== undefined) m.ttl_s = ttl_s;
    return m;
  },
  credit: (receiver, frames = 1) => ({ type: 'credit', receiver, frames }),
  /** The source's own counters for a stream it owns (no reply; shown in /stats `source`). */
  streamReport: (stream, { offered, sent, inFlight = 0, dropped = {} }) => ({ type: 'stream.report', stream, offered, sent, in_flight: inFlight, dropped }),
  stats: () => ({ type: 'stats' }),
  ping: (id) => ({ type: 'ping', id }),
  subscribe: (topic) => ({ type: 'subscribe', topic }),
  unsubscribe: (topic) => ({ type: 'unsubscribe', topic }),
  audioRead: ({ max_frames, min_frames, timeout_ms } = {}) => {
    const m = { type: 'audio.read' };
    if (max_frames !== undefined) m.max_frames = max_frames;
    if (min_frames !== undefined) m.min_frames = min_frames;
    if (timeout_ms !== undefined) m.timeout_ms = timeout_ms;
    return m;
  },
  audioInfo: () => ({ type: 'audio.info' }),
});

const STREAM_NAME = /^[A-Za-z0-9._-]{1,64}$/;
export function validStreamName(name) {
  return typeof name === 'string' && STREAM_NAME.test(name);
}

/** `http(s)://host:port` base of a syncd, from a ws://, http:// or host:port string. */
export function httpBase(url) {
  const u = new URL(/^[a-z]+:\/\//i.test(url) ? url : `http://${url}`);
  const scheme = u.protocol === 'wss:' || u.protocol === 'https:' ? 'https:' : 'http:';
  return `${scheme}//${u.host}`;
}

/** The control WebSocket URL (`ws://host:port/ws`) from a ws://, http:// or host:port string. */
export function wsUrl(url) {
  const u = new URL(/^[a-z]+:\/\//i.test(url) ? url : `http://${url}`);
  const scheme = u.protocol === 'wss:' || u.protocol === 'https:' ? 'wss:' : 'ws:';
  const path = u.pathname && u.pathname !== '/' ? u.pathname : '/ws';
  return `${scheme}//${u.host}${path}`;
}

/** URL of a receiver's HTTP stream. */
export function streamUrl(base, name, ticket, credit) {
  let u = `${httpBase(base)}/streams/${encodeURIComponent(name)}?ticket=${encodeURIComponent(ticket)}`;
  if (credit !== undefined) u += `&credit=${credit}`;
  return u;
}

/** URL of the POST credit endpoint. */
export function creditUrl(base, name, receiver, frames = 1) {
  return `${httpBase(base)}/streams/${encodeURIComponent(name)}/credit?receiver=${encodeURIComponent(receiver)}&frames=${frames}`;
}

/** Reverses the row order of `rows` rows of `rowBytes` bytes in place (bottom-up <-> top-down). */
export function flipRowsInPlace(bytes, rowBytes, rows, scratch) {
  const tmp = scratch && scratch.byteLength >= rowBytes ? scratch : new Uint8Array(rowBytes);
  for (let top = 0, bottom = rows - 1; top < bottom; ++top, --bottom) {
    const a = top * rowBytes;
    const b = bottom * rowBytes;
    tmp.set(bytes.subarray(a, a + rowBytes));
    bytes.copyWithin(a, b, b + rowBytes);
    bytes.set(tmp.subarray(0, rowBytes), b);
  }
}

/** FNV-1a 32-bit over a rectangle of an RGBA image (`width` pixels a row, top-down). */
export function regionChecksum(pixels, width, x, y, w, h) {
  let hash = 0x811c9dc5;
  for (let row = y; row < y + h; ++row) {
    let i = (row * width + x) * 4;
    const end = i + w * 4;
    for (; i < end; ++i) {
      hash ^= pixels[i];
      hash = Math.imul(hash, 0x01000193);
    }
  }
  return hash >>> 0;
}

// ------------------------------------------------------------------------------------------------
// H.264 helpers (pure): the encoder's configuration, the stream's access-unit limit, the column
// marker, and what an Annex B access unit holds.

/** The largest access unit syncd takes into an h264 stream (its frame_bytes): an I420 frame's size. */
export function h264AccessUnitLimit(width, height) {
  return width * height + 2 * Math.ceil(width / 2) * Math.ceil(height / 2);
}

// H.264 levels (ITU-T H.264 Table A-1) from 3.1 up: [level_idc, MaxMBPS (macroblocks/s), MaxFS
// (macroblocks a frame), MaxBR (kbit/s, Baseline)]. 3.1 is the floor: it is what every decoder
// and every WebRTC peer takes (42e01f), and smaller levels buy nothing for a page.
const H264_LEVELS = [
  [0x1f, 108000, 3600, 14000],
  [0x20, 216000, 5120, 20000],
  [0x28, 245760, 8192, 20000],
  [0x29, 245760, 8192, 50000],
  [0x2a, 522240, 8704, 50000],
  [0x32, 589824, 22080, 135000],
  [0x33, 983040, 36864, 240000],
  [0x34, 2073600, 36864, 240000],
  [0x3c, 4177920, 139264, 240000],
  [0x3d, 8355840, 139264, 480000],
  [0x3e, 16711680, 139264, 800000],
];

/**
 * The H.264 level (two hex digits, as in `avc1.42e0LL`) for a picture size, frame rate and bitrate:
 * the lowest from 3.1 up whose frame size (each side at most sqrt(8 x MaxFS) macroblocks),
 * macroblock rate and bitrate admit it. 640x360 and 1280x720 at 30: '1f'; 720p60: '20'; 1080p30:
 * '28'; 1080p60: '2a' (4.0 allows 1080p only to 30 fps); 1440p60: '32'; 2160p30: '33';
 * 2160p60: '34'. Past level 6.2, '3e' (the encoder will refuse it).
 */
export function h264Level(width, height, fps = 30, bitrate = 0) {
  const mbw = Math.ceil(width / 16);
  const mbh = Math.ceil(height / 16);
  const fs = mbw * mbh;
  for (const [idc, maxMbps, maxFs, maxBrKbps] of H264_LEVELS) {
    const side = Math.sqrt(8 * maxFs);
    if (fs <= maxFs && mbw <= side && mbh <= side && fs * fps <= maxMbps && bitrate <= maxBrKbps * 1000) {
      return idc.toString(16).padStart(2, '0');
    }
  }
  return '3e';
}

export const H264_MIN_BITRATE = 100_000;
const H264_MAX_DEFAULT_BITRATE = 20_000_000;

/** Default H.264 bitrate: 0.1 bit a pixel a frame, 250 kbit/s to 20 Mbit/s (1080p60: 12.4 Mbit/s). */
export function defaultH264Bitrate(width, height, fps) {
  return Math.min(H264_MAX_DEFAULT_BITRATE, Math.max(250_000, Math.round(width * height * fps * 0.1)));
}

/**
 * The VideoEncoderConfig publishCanvas uses for `codec: 'h264'`: constrained baseline (no
 * B-frames, so syncd's WHEP egress can hand the page's access units to browsers as they are,
 * packetization-mode 1, profile-level-id 42e0xx), Annex B (start codes, which is what the
 * stream's frames carry), realtime latency, the browser's choice of hardware or software.
 */
export function h264EncoderConfig({ width, height, fps = 30, bitrate, maxBitrate, hardwareAcceleration = 'no-preference' }) {
  const bps = Math.round(bitrate ?? defaultH264Bitrate(width, height, fps));
  return {
    codec: `avc1.42e0${h264Level(width, height, fps, Math.max(bps, maxBitrate ?? 0))}`,
    width,
    height,
    bitrate: bps,
    framerate: fps,
    latencyMode: 'realtime',
    hardwareAcceleration,
    avc: { format: 'annexb' },
  };
}

/**
 * Can this browser encode H.264 for a canvas of this size and rate? `{h264, config, hardware}`:
 * config is the VideoEncoderConfig publishCanvas would use (null when unsupported); hardware is
 * whether a hardware encoder takes it (`prefer-hardware` supported), null when unknown.
 */
export async function encodeCapability(width, height, fps = 30) {
  const Encoder = globalThis.VideoEncoder;
  if (typeof Encoder !== 'function' || typeof Encoder.isConfigSupported !== 'function') return { h264: false, config: null, hardware: null };
  const config = h264EncoderConfig({ width, height, fps });
  const supported = async (c) => {
    try {
      return !!(await Encoder.isConfigSupported(c)).supported;
    } catch {
      return false; // a config the browser cannot even parse (odd sizes in some versions)
    }
  };
  if (!(await supported(config))) return { h264: false, config: null, hardware: null };
  const hardware = await supported({ ...config, hardwareAcceleration: 'prefer-hardware' });
  return { h264: true, config, hardware };
}

// The column marker (src/media/column_marker.h): the sequence's low 16 bits as 16 columns of 8
// pixels from x = 0, bit i in column i (white 1, black 0), then one black guard column.
export const COLUMN_MARKER_BITS = 16;
export const COLUMN_MARKER_COLUMN = 8;
export const COLUMN_MARKER_WIDTH = (COLUMN_MARKER_BITS + 1) * COLUMN_MARKER_COLUMN;

/** The marker's 17 columns for a sequence: `[{x, width, white}]`, guard last. */
export function columnMarkerColumns(sequence) {
  const columns = [];
  for (let bit = 0; bit <= COLUMN_MARKER_BITS; ++bit) {
    columns.push({ x: bit * COLUMN_MARKER_COLUMN, width: COLUMN_MARKER_COLUMN, white: columnMarkerBit(sequence, bit) });
  }
  return columns;
}

function columnMarkerBit(sequence, bit) {
  if (bit >= COLUMN_MARKER_BITS) return false; // the guard
  const low = typeof sequence === 'bigint' ? Number(sequence & 0xffffn) : sequence % 65536;
  return ((low >> bit) & 1) === 1;
}

/** Draws the column marker of `sequence` down the whole `height` through a 2D context. */
export function drawColumnMarker(ctx, sequence, height) {
  // Black under all 17 columns, then the white ones: fewer state changes than 17 fills of two
  // colours, and no allocation per frame.
  ctx.fillStyle = '#000000';
  ctx.fillRect(0, 0, COLUMN_MARKER_WIDTH, height);
  ctx.fillStyle = '#ffffff';
  for (let bit = 0; bit < COLUMN_MARKER_BITS; ++bit) {
    if (columnMarkerBit(sequence, bit)) ctx.fillRect(bit * COLUMN_MARKER_COLUMN, 0, COLUMN_MARKER_COLUMN, height);
  }
}

/**
 * Reads the column marker (low 16 bits of the sequence) as syncd does: the centre 4 pixels of each
 * column on 3 rows (a quarter, half, three quarters down), averaged; each column clearly black or
 * white, the guard black. `plane` is a luma plane (pixelStep 1) or one channel of RGBA
 * (pixelStep 4, starting at that channel). null when there is no readable marker.
 */
export function readColumnMarker(plane, stride, width, height, pixelStep = 1) {
  if (width < COLUMN_MARKER_WIDTH || height < 4 || stride < width * pixelStep) return null;
  const rows = [Math.floor(height / 4), Math.floor(height / 2), Math.floor(height * 3 / 4)];
  // Luma 16 black, 235 white, trusted within 60 (full-range RGB reads the same within that).
  const black = 16 + 60;
  const white = 235 - 60;
  let sequence = 0;
  for (let bit = 0; bit <= COLUMN_MARKER_BITS; ++bit) {
    const x0 = bit * COLUMN_MARKER_COLUMN + COLUMN_MARKER_COLUMN / 2 - 2;
    let sum = 0;
    for (const y of rows) for (let x = x0; x < x0 + 4; ++x) sum += plane[y * stride + x * pixelStep];
    const mean = Math.floor(sum / 12);
    const isBlack = mean <= black;
    const isWhite = mean >= white;
    if (isBlack === isWhite) return null;
    if (bit === COLUMN_MARKER_BITS) {
      if (!isBlack) return null;
    } else if (isWhite) {
      sequence |= 1 << bit;
    }
  }
  return sequence;
}

/**
 * What an Annex B access unit holds: `{key, codec}`. key: it has an IDR slice (NAL type 5);
 * codec: `avc1.PPCCLL` from its sequence parameter set (NAL type 7), or null without one.
 */
export function inspectAnnexB(bytes) {
  const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes.buffer ?? bytes, bytes.byteOffset ?? 0, bytes.byteLength);
  let key = false;
  let codec = null;
  for (let i = 0; i + 3 < b.length; ++i) {
    // A start code is 00 00 01 (a 4-byte 00 00 00 01 ends in it too).
    if (b[i] !== 0 || b[i + 1] !== 0 || b[i + 2] !== 1) continue;
    const nal = i + 3;
    const type = b[nal] & 0x1f;
    if (type === 5) key = true;
    if (type === 7 && nal + 3 < b.length && codec === null) {
      codec = 'avc1.' + [b[nal + 1], b[nal + 2], b[nal + 3]].map((x) => x.toString(16).padStart(2, '0')).join('');
    }
    i = nal;
  }
  return { key, codec };
}

/**
 * Admission of a canvas frame into the H.264 encoder: null to encode it, else why it is skipped.
 * The stream must be open ('not_open'); the socket must hold at most `maxBufferedBytes`
 * ('backpressure': it is the slower stage, so it is asked first); the encoder must hold fewer
 * than `maxEncodeQueue` frames not yet encoded ('encoder_busy'). Skipping, not queueing, keeps
 * the page responsive and the latency bounded.
 */
export function encodedAdmission({ open, bufferedAmount, maxBufferedBytes, encodeQueueSize, maxEncodeQueue }) {
  if (!open) return 'not_open';
  if (bufferedAmount > maxBufferedBytes) return 'backpressure';
  if (encodeQueueSize >= maxEncodeQueue) return 'encoder_busy';
  return null;
}

function nowUs() {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

// ------------------------------------------------------------------------------------------------
// Events: connections and publishers are EventTargets. Every event is a SyncEvent whose `detail`
// is what happened; `on(type, fn)` is shorthand for addEventListener that hands `fn` the detail
// and returns the function that removes it.

/** The event Sync objects dispatch; `detail` carries the event's data. */
export class SyncEvent extends Event {
  constructor(type, detail) {
    super(type);
    this.detail = detail;
  }
}

class Emitter extends EventTarget {
  #wrapped = new Map(); // fn -> Map(type -> listener), so off(type, fn) finds what on() added
  #listeners = new Map(); // type -> count: no event object is made for a type nobody hears
  addEventListener(type, listener, options) {
    super.addEventListener(type, listener, options);
    if (listener) this.#listeners.set(type, (this.#listeners.get(type) ?? 0) + 1);
  }
  removeEventListener(type, listener, options) {
    super.removeEventListener(type, listener, options);
    const n = this.#listeners.get(type) ?? 0;
    if (listener && n > 0) this.#listeners.set(type, n - 1);
  }
  on(type, fn) {
    const listener = (ev) => fn(ev.detail);
    let byType = this.#wrapped.get(fn);
    if (!byType) this.#wrapped.set(fn, (byType = new Map()));
    byType.set(type, listener);
    this.addEventListener(type, listener);
    return () => this.off(type, fn);
  }
  once(type, fn) {
    const off = this.on(type, (detail) => { off(); fn(detail); });
    return off;
  }
  off(type, fn) {
    const byType = this.#wrapped.get(fn);
    const listener = byType?.get(type);
    if (!listener) return;
    byType.delete(type);
    if (byType.size === 0) this.#wrapped.delete(fn);
    this.removeEventListener(type, listener);
  }
  /** Does anyone listen for `type`? (So a detail that costs something is made only then.) */
  listening(type) {
    return !!this.#listeners.get(type);
  }
  emit(type, detail) {
    // Counted listeners can over-count once-listeners added with addEventListener directly;
    // that only costs an event object nobody hears.
    if (!this.#listeners.get(type)) return;
    this.dispatchEvent(new SyncEvent(type, detail));
  }
}

// ------------------------------------------------------------------------------------------------
// The control connection

let defaultConnection = null;

/**
 * Connects to syncd's control WebSocket, does hello/welcome and resolves with a SyncConnection.
 * Settles within `timeoutMs` (default 10000): rejected with a SyncError whose code says why
 * (`syncd_unreachable`, `origin_refused`, `timeout`, `aborted`, `closed`,
 * `protocol_unsupported`). Once welcomed, it reconnects with exponential backoff on loss
 * (re-running hello) until close() or `signal` aborts.
 */
export function connect(url, options = {}) {
  const conn = new SyncConnection(url, options);
  defaultConnection = conn;
  return conn.ready;
}

export class SyncConnection extends Emitter {
  constructor(url, { client = 'sync.js', reconnect = true, backoff = {}, WebSocket: WS, requestTimeoutMs = 10000, timeoutMs = 10000, signal } = {}) {
    super();
    const loc = globalThis.location;
    this.url = wsUrl(url ?? (loc ? loc.host : '127.0.0.1:54997'));
    this.httpBase = httpBase(this.url);
    this.client = client;
    this.reconnect = reconnect;
    this.backoff = backoff;
    this.requestTimeoutMs = requestTimeoutMs;
    this.welcome = null;
    this.state = 'connecting';
    this._WS = WS ?? globalThis.WebSocket;
    this._ws = null;
    this._pending = []; // control requests awaiting a reply, in send order
    this._audioPending = []; // audio.read requests awaiting a binary NAUD reply
    this._topics = new Map(); // topic -> Set(callback)
    this._attempt = 0;
    this._timer = null;
    this._closed = false;
    this._pingId = 0;
    this._refusalCheck = null;  // _checkRefused()'s fetch, while one runs
    this._counters = { connects: 0, reconnects: 0, disconnects: 0, messagesIn: 0, messagesOut: 0, errors: 0, lastRttMs: null };
    this._lastDown = null; // why the last attempt ended, for the connect failure's code
    this.ready = new Promise((resolve, reject) => {
      this._readyResolve = resolve;
      this._readyReject = reject;
    });
    // ready never stays pending: it settles at the welcome, or fails at the deadline, on
    // abort, or at close().
    this.ready.catch(() => {}); // a failed connect is reported through ready, not as unhandled
    this._connectTimer = setTimeout(() => this._failConnect('timeout'), timeoutMs);
    this._signal = signal ?? null;
    if (signal) {
      this._onAbort = () => {
        if (this.welcome) this.close();
        else this._failConnect('aborted');
      };
      if (signal.aborted) {
        queueMicrotask(this._onAbort);
      } else {
        signal.addEventListener('abort', this._onAbort, { once: true });
      }
    }
    this._open();
  }

  // A WebSocket closed before it opened, with reconnect on: if syncd answers HTTP, it is up and
  // refused the upgrade (Origin or Host), so the connect fails now with origin_refused rather
  // than at its deadline. In a browser only (the check is a no-cors fetch); one at a time.
  _checkRefused() {
    if (this._refusalCheck || typeof document === 'undefined' || typeof fetch !== 'function') return;
    this._refusalCheck = syncdAnswersHttp(this.httpBase).then((answers) => {
      this._refusalCheck = null;
      if (answers && !this.welcome && !this._closed) this._failConnect('refused');
    });
  }

  // The first connect failed for good: settle ready with the reason, stop trying.
  async _failConnect(why) {
    if (this.welcome || this._closed) return;
    this._closed = true;
    clearTimeout(this._connectTimer);
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    const ws = this._ws;
    this._ws = null;
    ws?.close();
    this.state = 'closed';
    let error;
    if (why === 'aborted') {
      error = new SyncError('aborted', 'connect aborted', { cause: this._signal?.reason });
    } else if (why === 'closed') {
      error = new SyncError('closed', 'connection closed before syncd welcomed it');
    } else if (why === 'protocol_unsupported') {
      error = this._lastDown;
    } else {
      error = await diagnoseConnectFailure(this.httpBase, this._lastDown, why);
    }
    if (defaultConnection === this) defaultConnection = null;
    this._readyReject(error);
    this.emit('close', error);
  }

  get connected() {
    return this.state === 'open';
  }

  /** Bytes queued in the WebSocket and not yet sent (0 when disconnected). */
  get bufferedAmount() {
    return this._ws && this._ws.readyState === 1 ? this._ws.bufferedAmount : 0;
  }

  _open() {
    this.state = 'connecting';
    let ws;
    try {
      ws = new this._WS(this.url);
    } catch (e) {
      this._onDown(new SyncError('connect_failed', String(e?.message ?? e), { cause: e }));
      return;
    }
    ws.binaryType = 'arraybuffer';
    this._ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this._sendNow(messages.hello(this.client));
    };
    ws.onmessage = (ev) => this._onMessage(ev.data);
    ws.onerror = () => {}; // the close event follows and carries what there is to know
    ws.onclose = (ev) => {
      if (this._ws !== ws) return;
      this._ws = null;
      this._onDown(new SyncError('disconnected', `control connection closed (${ev.code}${ev.reason ? ' ' + ev.reason : ''})`, { details: { code: ev.code, reason: ev.reason, opened } }));
    };
  }

  _onDown(error) {
    this._lastDown = error;
    const wasOpen = this.state === 'open';
    this.state = this._closed ? 'closed' : 'reconnecting';
    if (wasOpen) {
      ++this._counters.disconnects;
      this.emit('disconnect', error);
    }
    for (const p of this._pending.splice(0)) p.reject(error);
    for (const p of this._audioPending.splice(0)) p.reject(error);
    if (this._closed) {
      this.emit('close');
      return;
    }
    if (!this.welcome) {
      // Not welcomed yet: without reconnect the first failure is final; with it, try again
      // until the connect deadline (the backoff below), unless syncd is there and refused this
      // page, which no retry changes: that settles at once (checked beside the backoff).
      if (!this.reconnect) {
        this._failConnect('down');
        return;
      }
      if (error.code === 'disconnected' && !error.details?.opened) this._checkRefused();
    }
    if (!this.reconnect) {
      this.state = 'closed';
      this.emit('close', error);
      return;
    }
    const delay = backoffDelay(this._attempt++, this.backoff);
    this.emit('reconnecting', { attempt: this._attempt, delayMs: delay, error });
    this._timer = setTimeout(() => {
      this._timer = null;
      if (!this._closed) this._open();
    }, delay);
  }

  _onMessage(data) {
    ++this._counters.messagesIn;
    if (typeof data !== 'string') {
      this._onBinary(data);
      return;
    }
    let m;
    try {
      m = JSON.parse(data);
    } catch {
      this.emit('error', new SyncError('bad_json', 'server sent invalid JSON'));
      return;
    }
    switch (m.type) {
      case 'welcome': {
        const first = !this.welcome;
        this.welcome = m;
        this.state = 'open';
        this._attempt = 0;
        ++this._counters.connects;
        if (!first) ++this._counters.reconnects;
        clearTimeout(this._connectTimer);
        for (const topic of this._topics.keys()) this._subscribeNow(topic);
        if (first) this._readyResolve(this);
        this.emit('open', { welcome: m, reconnected: !first });
        return;
      }
      case 'error':
        this._onError(m);
        return;
      case 'pose':
      case 'pose.status': {
        const topic = 'pose';
        for (const cb of this._topics.get(topic) ?? []) {
          try { cb(m); } catch (e) { setTimeout(() => { throw e; }); }
        }
        // Event names are kebab-case like the others (the message's wire type stays pose.status).
        this.emit(m.type === 'pose' ? 'pose' : 'pose-status', m);
        return;
      }
      default:
        break;
    }
    const i = this._pending.findIndex((p) => p.replyTypes.includes(m.type));
    if (i >= 0) {
      const [p] = this._pending.splice(i, 1);
      clearTimeout(p.timer);
      p.resolve(m);
      return;
    }
    this.emit('message', m);
  }

  _onError(m) {
    ++this._counters.errors;
    const err = new SyncError(m.code ?? 'error', m.message ?? m.code, { details: m });
    // Errors that answer no request: frame refusals (they carry a sequence) and credit for a
    // receiver syncd no longer knows (credit has no success reply).
    if (m.sequence !== undefined || m.code === 'unknown_receiver') {
      this.emit(m.code === 'unknown_receiver' ? 'credit-error' : 'frame-error', err);
      this.emit('error', err);
      return;
    }
    // A hello that failed (protocol_unsupported) while connecting.
    if (!this.welcome && this.state === 'connecting' && m.code === 'protocol_unsupported') {
      this._lastDown = err;
      this._failConnect('protocol_unsupported');
      return;
    }
    // Replies come in request order, so an error answers the oldest pending request of its
    // kind: audio codes go to the oldest audio.read (which syncd may hold for a while), any
    // other code to the oldest other request.
    const audioCode = typeof m.code === 'string' && m.code.startsWith('audio_');
    let i = this._pending.findIndex((p) => !!p.audio === audioCode);
    if (i < 0) i = this._pending.findIndex(() => true);
    if (i >= 0) {
      const [p] = this._pending.splice(i, 1);
      clearTimeout(p.timer);
      if (p.audio) {
        const j = this._audioPending.indexOf(p);
        if (j >= 0) this._audioPending.splice(j, 1);
      }
      p.reject(err);
      return;
    }
    this.emit('error', err);
  }

  _onBinary(data) {
    const p = this._audioPending.shift();
    if (!p) {
      this.emit('binary', data);
      return;
    }
    const j = this._pending.indexOf(p);
    if (j >= 0) this._pending.splice(j, 1);
    clearTimeout(p.timer);
    try {
      p.resolve(parseNaudPacket(data));
    } catch (e) {
      p.reject(e);
    }
  }

  _sendNow(obj) {
    const ws = this._ws;
    if (!ws || ws.readyState !== 1) return false;
    ws.send(typeof obj === 'string' ? obj : JSON.stringify(obj));
    ++this._counters.messagesOut;
    return true;
  }

  /** Sends a control message without waiting for anything; false when not connected. */
  send(obj) {
    if (this.state !== 'open') return false;
    return this._sendNow(obj);
  }

  /** Sends a binary message (a frame); false when not connected. */
  sendBinary(data) {
    const ws = this._ws;
    if (this.state !== 'open' || !ws || ws.readyState !== 1) return false;
    ws.send(data);
    return true;
  }

  /** Sends `obj` and resolves with the first reply whose type is in `replyTypes`. */
  request(obj, replyTypes, { timeoutMs = this.requestTimeoutMs } = {}) {
    if (this.state !== 'open') return Promise.reject(new SyncError('not_connected', 'not connected to syncd'));
    return new Promise((resolve, reject) => {
      const p = { type: obj.type, replyTypes: [].concat(replyTypes), resolve, reject, timer: null };
      p.timer = setTimeout(() => {
        const i = this._pending.indexOf(p);
        if (i >= 0) this._pending.splice(i, 1);
        reject(new SyncError('timeout', `no reply to ${obj.type} within ${timeoutMs} ms`));
      }, timeoutMs);
      this._pending.push(p);
      this._sendNow(obj);
    });
  }

  /** syncd's /stats document over the control connection. */
  async stats() {
    const reply = await this.request(messages.stats(), 'stats');
    return reply.stats;
  }

  /** Round-trip time of a control ping, in ms. */
  async ping() {
    const id = ++this._pingId;
    const t0 = performance.now();
    const reply = await this.request(messages.ping(id), 'pong');
    if (reply.id !== id) throw new SyncError('bad_reply', 'pong id mismatch');
    const rtt = performance.now() - t0;
    this._counters.lastRttMs = rtt;
    return rtt;
  }

  /** Client-side counters of this connection. */
  counters() {
    return { ...this._counters, state: this.state, bufferedAmount: this.bufferedAmount };
  }

  openStream(config) {
    if (!validStreamName(config.name)) return Promise.reject(new SyncError('bad_message', `invalid stream name ${config.name}`));
    return this.request(messages.streamOpen(config), 'stream.opened');
  }

  closeStream(stream) {
    return this.request(messages.streamClose(stream), 'stream.closed');
  }

  /** A ticket for a stream this connection owns: `{ticket, stream, name, uses, expires_in_s}`. */
  createTicket(stream, { uses, ttlSeconds, ttl_s } = {}) {
    // A publisher's stream may be owned by its Worker's connection: the publisher asks there.
    if (typeof stream === 'object' && stream) return stream.createTicket({ uses, ttlSeconds: ttlSeconds ?? ttl_s });
    const id = stream;
    // ttl_s: the wire's name, still taken from callers written before the camelCase option.
    return this.request(messages.ticketCreate(id, { uses, ttl_s: ttlSeconds ?? ttl_s }), 'ticket');
  }

  /** Grants `frames` credit to a receiver; fire and forget (syncd replies only on error). */
  grantCredit(receiver, frames = 1) {
    return this.send(messages.credit(receiver, frames));
  }

  /**
   * Subscribes to a topic ('pose'); `callback` gets every event of it (`pose` and
   * `pose.status`). Re-subscribed after a reconnect. Returns an unsubscribe function; the
   * returned function's `ready` promise settles with syncd's `subscribed` reply or a SyncError
   * (`unknown_topic`, `topic_unavailable`), which is also emitted as an 'error' event.
   */
  subscribe(topic, callback) {
    let set = this._topics.get(topic);
    let ready = Promise.resolve(null);
    if (!set) {
      set = new Set();
      this._topics.set(topic, set);
      if (this.state === 'open') ready = this._subscribeNow(topic);
    }
    set.add(callback);
    const unsubscribe = () => {
      set.delete(callback);
      if (set.size === 0 && this._topics.get(topic) === set) {
        this._topics.delete(topic);
        if (this.state === 'open') this.request(messages.unsubscribe(topic), 'unsubscribed').catch(() => {});
      }
    };
    unsubscribe.ready = ready;
    return unsubscribe;
  }

  _subscribeNow(topic) {
    const p = this.request(messages.subscribe(topic), 'subscribed');
    p.catch((e) => this.emit('error', e));
    return p;
  }

  /** Makes the next head-tracker sample the new center (`pose.recenter`). */
  recenterPose() {
    return this.send({ type: 'pose.recenter' });
  }

  /** The audio source's description (`audio.info`). */
  audioInfo() {
    return this.request(messages.audioInfo(), 'audio.info');
  }

  /**
   * One audio.read: resolves with the parsed NAUD packet `{channels, sampleRate, frames,
   * firstFrame, droppedFrames, gapFrames, timestampNs, sequence, xruns, discontinuity, samples}`.
   */
  readAudio({ maxFrames, minFrames, timeoutMs } = {}) {
    if (this.state !== 'open') return Promise.reject(new SyncError('not_connected', 'not connected to syncd'));
    const msg = messages.audioRead({ max_frames: maxFrames, min_frames: minFrames, timeout_ms: timeoutMs });
    return new Promise((resolve, reject) => {
      const wait = (timeoutMs ?? 1000) + this.requestTimeoutMs;
      const p = { type: msg.type, replyTypes: [], audio: true, resolve, reject, timer: null };
      p.timer = setTimeout(() => {
        for (const list of [this._pending, this._audioPending]) {
          const i = list.indexOf(p);
          if (i >= 0) list.splice(i, 1);
        }
        reject(new SyncError('timeout', 'no audio reply'));
      }, wait);
      this._pending.push(p);
      this._audioPending.push(p);
      this._sendNow(msg);
    });
  }

  publishCanvas(canvas, options) {
    return publishCanvas(canvas, { ...options, connection: this });
  }

  receive(name, ticket, options) {
    return receive(name, ticket, { ...options, connection: this });
  }

  /** Closes for good (no reconnect). A connect still under way rejects with `closed`. */
  close() {
    if (!this.welcome) {
      this._failConnect('closed');
      return;
    }
    if (this._closed) return;
    this._signal?.removeEventListener('abort', this._onAbort);
    this._closed = true;
    if (this._timer) clearTimeout(this._timer);
    this._timer = null;
    const ws = this._ws;
    if (ws) {
      ws.close(1000);
    } else {
      this._onDown(new SyncError('closed', 'connection closed'));
    }
    if (defaultConnection === this) defaultConnection = null;
  }
}

/**
 * Why a connect failed, told apart as far as a page can: nothing answers at syncd's address
 * (`syncd_unreachable`), or syncd answers HTTP but refused this page's WebSocket
 * (`origin_refused`: its Origin or Host is not allowed; a browser does not show a refused
 * upgrade's status, so the page asks /healthz the way a `<img>` would, which needs no CORS).
 */
async function syncdAnswersHttp(base) {
  try {
    await fetch(`${base}/healthz`, { mode: 'no-cors', cache: 'no-store', signal: AbortSignal.timeout?.(2000) });
    return true;
  } catch {
    return false;
  }
}

async function diagnoseConnectFailure(base, lastDown, why) {
  const inBrowser = typeof globalThis.document !== 'undefined';
  if (typeof fetch === 'function' && inBrowser && lastDown) {
    if (!(await syncdAnswersHttp(base))) {
      return new SyncError('syncd_unreachable', `syncd does not answer at ${base}`, { cause: lastDown });
    }
    if (lastDown.code === 'disconnected' && !lastDown.details?.opened) {
      return new SyncError('origin_refused', `syncd at ${base} refused this page (${globalThis.location?.origin}): start it with --allow-origin ${globalThis.location?.origin}`, { cause: lastDown });
    }
  }
  if (lastDown && lastDown.details?.code === 1006 && !lastDown.details?.opened && !inBrowser) {
    return new SyncError('syncd_unreachable', `no WebSocket at ${base}: ${lastDown.message}`, { cause: lastDown });
  }
  if (why === 'timeout') return new SyncError('timeout', `syncd did not welcome this client in time${lastDown ? ` (${lastDown.message})` : ''}`, { cause: lastDown ?? undefined });
  return lastDown ?? new SyncError('syncd_unreachable', `cannot connect to ${base}`);
}

function connectionFrom(options) {
  const c = options?.connection ?? defaultConnection;
  if (!c) throw new SyncError('not_connected', 'call connect() first or pass {connection}');
  return c;
}

/** createTicket on the default connection (or `{connection}`). */
export function createTicket(stream, options = {}) {
  return connectionFrom(options).createTicket(stream, options);
}

/** subscribe on the default connection. */
export function subscribe(topic, callback, options = {}) {
  return connectionFrom(options).subscribe(topic, callback);
}

/** readAudio on the default connection. */
export function readAudio(options = {}) {
  return connectionFrom(options).readAudio(options);
}

// ------------------------------------------------------------------------------------------------
// Publishing a canvas
//
// Two halves. CanvasPublisher (the page's thread) captures: it reads the canvas's pixels into a
// message buffer and owns the counters. A StreamSender (where the socket is) owns the stream on
// one connection: it opens and re-opens it, numbers, flips, stamps and sends each frame, and
// sends the publisher's counters as stream.report. By default the sender runs in a Worker
// (web/sync-worker.js) on its own connection, with message buffers transferred there and back,
// so the copy into the socket and the row flip, a few ms a frame at 1080p, leave the thread that
// renders; `worker: false` (or a page where no Worker can start) sends from the page's thread.

// The one admission rule, for the socket where it is (the page's) or as the page last heard of
// it (the Worker's): more than maxBufferedFrames (+ slack) frames queued and not yet sent.
function overBound(bufferedBytes, maxBufferedFrames, messageBytes, slackFrames) {
  return bufferedBytes > (maxBufferedFrames + slackFrames) * messageBytes;
}

/**
 * Sends one stream's frames on one connection. Runs on the thread that owns the connection: the
 * page's (worker: false) or the publish Worker's. Internal to publishCanvas and sync-worker.js.
 */
export class StreamSender extends Emitter {
  constructor(conn, { name, width, height, fps, slots, maxBufferedFrames = 2, firstSequence = 1 }) {
    super();
    this.connection = conn;
    this._openRequest = { name, width, height, format: 'rgba8', fps, slots };
    this.width = width;
    this.height = height;
    this.frameBytes = width * height * 4;
    this.messageBytes = FRAME_HEADER_BYTES + this.frameBytes;
    this.maxBufferedFrames = maxBufferedFrames;
    this.sequence = firstSequence;
    this.streamId = null;
    this._closed = false;
    this._rowScratch = new Uint8Array(width * 4);
    this._message = null; // the views below are of this buffer (rebuilt when another arrives)
    this._view = null;
    this._pixels = null;
    this._offOpen = conn.on('open', ({ reconnected }) => {
      if (reconnected && !this._closed) this.openStream(true).catch((e) => this.emit('error', e));
    });
    this._offDown = conn.on('disconnect', () => {
      this.streamId = null;
      this.emit('down');
    });
  }

  /** The stream is open on a connected socket. */
  get ready() {
    return this.streamId !== null && this.connection.connected;
  }

  /** The socket holds more than maxBufferedFrames (+ slack) frames not yet sent. */
  congested(slackFrames = 0) {
    return overBound(this.connection.bufferedAmount, this.maxBufferedFrames, this.messageBytes, slackFrames);
  }

  /** Opens (or, after a reconnect, re-opens) the stream; emits 'open' {reply, reopened}. */
  async openStream(reopened = false) {
    const reply = await this.connection.openStream(this._openRequest);
    if (this._closed) return reply;
    this.streamId = reply.stream;
    this.emit('open', { reply, reopened });
    return reply;
  }

  /**
   * Sends `message` (FRAME_HEADER_BYTES, then the pixels; rows bottom-up when `bottomUp`, as GL
   * reads them): returns the frame's sequence, or the reason it was dropped ('not_open', or
   * 'pre_send' when the socket filled since the frame was admitted). The socket copies the
   * bytes, so the buffer is the caller's again on return.
   */
  send(message, captureUs, bottomUp) {
    if (!this.ready) return 'not_open';
    if (this.congested(1)) return 'pre_send';
    if (message !== this._message) {
      this._message = message;
      this._view = new DataView(message);
      this._pixels = new Uint8Array(message, FRAME_HEADER_BYTES, this.frameBytes);
    }
    // GL rows are bottom-up; the wire is top-down like the native producer's.
    if (bottomUp) flipRowsInPlace(this._pixels, this.width * 4, this.height, this._rowScratch);
    const seq = this.sequence;
    stampMarker(this._pixels, seq);
    writeFrameHeader(this._view, {
      streamId: this.streamId, flags: 0, sequence: seq, captureTimeUs: captureUs,
      width: this.width, height: this.height, format: FORMAT_CODES.rgba8,
    });
    if (!this.connection.sendBinary(message)) return 'not_open';
    ++this.sequence;
    return seq;
  }

  /** Tells syncd the publisher's own counters (shown in /stats `source` and the dashboard). */
  report(counters) {
    if (this.streamId !== null) this.connection.send(messages.streamReport(this.streamId, counters));
  }

  createTicket(opts) {
    if (this.streamId === null) return Promise.reject(new SyncError('not_open', 'stream is not open'));
    return this.connection.createTicket(this.streamId, opts);
  }

  /** Stops sending; with `closeStream`, closes the stream (its receivers end cleanly). */
  async close(closeStream) {
    if (this._closed) return;
    this._closed = true;
    this._offOpen();
    this._offDown();
    const id = this.streamId;
    this.streamId = null;
    if (closeStream && id !== null && this.connection.connected) {
      try {
        await this.connection.closeStream(id);
      } catch (e) {
        if (e.code !== 'unknown_stream') throw e;
      }
    }
  }
}

// Where a CanvasPublisher's frames go. Both sinks call the publisher's handlers: sent(seq,
// bytes), dropped(reason), open({reply, reopened}), down(), error(e); the Worker's also
// answered() before sent or dropped, for a frame it had in flight.

// The page's thread: one message buffer, reused (the socket copies it on send).
class PageSink {
  constructor(conn, streamOptions, handlers) {
    this.kind = 'page';
    this.sender = new StreamSender(conn, streamOptions);
    this.handlers = handlers;
    const message = new ArrayBuffer(this.sender.messageBytes);
    this._buffer = { message, pixels: new Uint8Array(message, FRAME_HEADER_BYTES, this.sender.frameBytes) };
    this.sender.on('open', handlers.open);
    this.sender.on('down', handlers.down);
    this.sender.on('error', handlers.error);
  }
  get ready() { return this.sender.ready; }
  congested(slackFrames = 0) { return this.sender.congested(slackFrames); }
  takeBuffer() { return this._buffer; }
  giveBack() {}
  async start() { await this.sender.openStream(); }
  send(buffer, captureUs, bottomUp) {
    const r = this.sender.send(buffer.message, captureUs, bottomUp);
    if (typeof r === 'number') this.handlers.sent(r, buffer.message.byteLength, buffer.message);
    else this.handlers.dropped(r);
  }
  report(counters) { this.sender.report(counters); }
  createTicket(opts) { return this.sender.createTicket(opts); }
  async stop(closeStream) { await this.sender.close(closeStream); }
}

// A SyncError the Worker posted as {code, message, details} (errors do not cross threads whole).
const errorFromWorker = (e) => new SyncError(e.code, e.message, { details: e.details });

// The publish Worker: its own connection (same URL and client name), a small pool of message
// buffers that travel to the Worker and back (transferred, never copied), and the Worker's
// bufferedAmount mirrored here for admission.
class WorkerSink {
  constructor(worker, conn, streamOptions, handlers, buffers) {
    this.kind = 'worker';
    this.worker = worker;
    this.handlers = handlers;
    this.frameBytes = streamOptions.width * streamOptions.height * 4;
    this.messageBytes = FRAME_HEADER_BYTES + this.frameBytes;
    this.maxBufferedFrames = streamOptions.maxBufferedFrames;
    this._streamOptions = streamOptions;
    this._conn = conn;
    this._free = [];
    for (let i = 0; i < buffers; ++i) this._free.push(this._wrap(new ArrayBuffer(this.messageBytes)));
    this._posted = 0; // frames in the Worker, not yet answered
    this._buffered = 0; // the Worker's socket's bufferedAmount, as last told
    this._streamOpen = false;
    this._requests = new Map(); // id -> {resolve, reject}
    this._nextRequest = 1;
    this._started = null; // {resolve, reject} while starting
    this._stopped = null; // resolve, while stopping
    worker.onmessage = (e) => this._onMessage(e.data);
    worker.onerror = (e) => this._onWorkerError(e);
  }

  _wrap(message) {
    return { message, pixels: new Uint8Array(message, FRAME_HEADER_BYTES, this.frameBytes) };
  }

  get ready() { return this._streamOpen; }

  // The Worker's socket as it last said, plus the frames on their way there.
  congested(slackFrames = 0) {
    return overBound(this._buffered + this._posted * this.messageBytes, this.maxBufferedFrames, this.messageBytes, slackFrames);
  }

  takeBuffer() { return this._free.pop() ?? null; }
  giveBack(buffer) { this._free.push(buffer); }

  start() {
    return new Promise((resolve, reject) => {
      this._started = { resolve, reject };
      const c = this._conn;
      this.worker.postMessage({ type: 'start', url: c.url, client: c.client, reconnect: c.reconnect, backoff: c.backoff, timeoutMs: c.requestTimeoutMs, stream: this._streamOptions });
    });
  }

  send(buffer, captureUs, bottomUp) {
    ++this._posted;
    this.worker.postMessage({ type: 'frame', message: buffer.message, captureUs, bottomUp }, [buffer.message]);
  }

  report(counters) { this.worker.postMessage({ type: 'report', counters }); }

  createTicket(opts) {
    return new Promise((resolve, reject) => {
      const id = this._nextRequest++;
      this._requests.set(id, { resolve, reject });
      this.worker.postMessage({ type: 'ticket', id, opts });
    });
  }

  async stop(closeStream) {
    if (this._stopped) return;
    await new Promise((resolve) => {
      this._stopped = resolve;
      this.worker.postMessage({ type: 'stop', close: closeStream });
      // A Worker that cannot answer (it crashed) is not waited for.
      this._stopTimer = setTimeout(resolve, 5000);
    });
    clearTimeout(this._stopTimer);
    this.worker.terminate();
    // Frames the Worker never answered for (only if it died) are dropped, so the account closes.
    for (; this._posted > 0; --this._posted) {
      this.handlers.answered();
      this.handlers.dropped('not_open');
    }
    for (const r of this._requests.values()) r.reject(new SyncError('closed', 'publisher stopped'));
    this._requests.clear();
  }

  _onMessage(m) {
    switch (m.type) {
      case 'sent':
        --this._posted;
        this._buffered = m.buffered;
        this._free.push(this._wrap(m.message));
        this.handlers.answered();
        if (typeof m.result === 'number') this.handlers.sent(m.result, m.message.byteLength, m.message);
        else this.handlers.dropped(m.result);
        return;
      case 'buffered':
        this._buffered = m.buffered;
        return;
      case 'open':
        this._streamOpen = true;
        if (this._started) {
          this._started.resolve();
          this._started = null;
        }
        this.handlers.open({ reply: m.reply, reopened: m.reopened });
        return;
      case 'down':
        this._streamOpen = false;
        this._buffered = 0;
        this.handlers.down();
        return;
      case 'error': {
        const err = errorFromWorker(m.error);
        if (this._started) {
          this._started.reject(err);
          this._started = null;
          return;
        }
        this.handlers.error(err);
        return;
      }
      case 'ticket': {
        const r = this._requests.get(m.id);
        this._requests.delete(m.id);
        if (!r) return;
        if (m.error) r.reject(errorFromWorker(m.error));
        else r.resolve(m.ticket);
        return;
      }
      case 'stopped':
        this._streamOpen = false;
        this._stopped?.();
        return;
      default:
        break;
    }
  }

  _onWorkerError(e) {
    // The module failed to load or threw: while starting, publishCanvas falls back to the page.
    e.preventDefault?.();
    const err = new SyncError('worker_failed', `publish worker: ${e.message ?? 'failed to load'}`);
    if (this._started) {
      this._started.reject(err);
      this._started = null;
      return;
    }
    this.handlers.error(err);
  }
}

// A software GL (SwiftShader: headless Chromium, or a machine without a GPU driver) renders on
// the CPU, so there is no GPU pipeline for an asynchronous readback to overlap: a synchronous
// readPixels into the message buffer is one copy, where pixel-pack buffers add a fence, its
// polling and a second copy (measured in headless Chromium: 3.8 ms a frame against 19.6 at
// 640x360, 4.4 against 54 at 1920x1080). On a GPU, readPixels would stall until the GPU has
// drawn, so there the readback stays asynchronous.
function softwareGl(gl) {
  const info = gl.getExtension('WEBGL_debug_renderer_info');
  const renderer = String(gl.getParameter(info ? info.UNMASKED_RENDERER_WEBGL : gl.RENDERER));
  return /SwiftShader|llvmpipe|softpipe|software/i.test(renderer);
}

// The publish Worker, or null where none can start. A module Worker must come from the page's
// origin; a page of another origin (a dev server importing syncd's module with CORS) starts it
// through a same-origin blob that imports the module.
function startPublishWorker() {
  if (typeof Worker !== 'function') return null;
  try {
    // Inside the try: a bundle in a classic-script format has no import.meta.url to resolve
    // against (the page then sends, as without a Worker).
    const url = new URL('./sync-worker.js', import.meta.url);
    if (globalThis.location && url.origin === globalThis.location.origin) return new Worker(url, { type: 'module' });
    const shim = URL.createObjectURL(new Blob([`import ${JSON.stringify(url.href)};`], { type: 'text/javascript' }));
    const worker = new Worker(shim, { type: 'module' });
    setTimeout(() => URL.revokeObjectURL(shim), 10000);
    return worker;
  } catch {
    return null; // a Content-Security-Policy without worker-src, for one
  }
}

/**
 * Publishes a canvas as a stream, raw (`codec: 'raw'`, the default) or encoded (`'h264'`, or
 * `'auto'`: h264 where the browser's VideoEncoder takes the config, else raw).
 *
 * Raw: pixels are read with WebGL2 asynchronous readback (pixel-pack buffers + fence) when the
 * canvas has a WebGL2 context, else with 2D getImageData, and sent as rgba8 from a Worker unless
 * `worker: false` (see above). H.264: see "Publishing a canvas encoded" below. Either way, frames
 * that would pile up (in the WebSocket, or in the encoder) are dropped and counted, never queued
 * without bound.
 *
 * options: stream (name), fps (capture rate in auto mode, default 30), width/height (default the
 * canvas size; the stream's geometry), connection, manual (true: no timer, call
 * handle.capture() right after drawing), clock ('raf' default: rAF, with a timer while the page
 * is hidden or rAF falls behind fps; or 'timer'; see CaptureClock), slots (syncd pool
 * slots), signal, codec ('raw' default, 'h264', 'auto').
 * Raw only: context (the canvas's own context, if it was created elsewhere), maxBufferedFrames
 * (drop threshold in frames of bufferedAmount, default 2), readbackBuffers (default 3), worker
 * (default true where Workers exist).
 * H.264 only: bitrate (bits/s, default defaultH264Bitrate), maxBitrate (ceiling for syncd's
 * stream.bitrate, default the initial bitrate), keyFrameInterval (frames, default 2 s worth),
 * hardwareAcceleration (default 'no-preference'), columnMarker, maxEncodeQueue (default 2),
 * maxBufferedBytes.
 */
export async function publishCanvas(canvas, options = {}) {
  const conn = connectionFrom(options);
  const { signal } = options;
  if (signal?.aborted) throw new SyncError('aborted', 'publish aborted', { cause: signal.reason });
  const config = await chooseEncoderConfig(canvas, options);
  if (signal?.aborted) throw new SyncError('aborted', 'publish aborted', { cause: signal.reason });
  const p = config ? new EncodedCanvasPublisher(conn, canvas, options, config) : new CanvasPublisher(conn, canvas, options);
  // Aborting stops the publisher and closes its stream (its receivers end cleanly).
  const onAbort = () => p.stop().catch((e) => p.emit('error', e));
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await p._start(options.worker ?? true);
  } catch (e) {
    signal?.removeEventListener('abort', onAbort);
    await p.stop({ close: false }).catch(() => {});
    throw signal?.aborted ? new SyncError('aborted', 'publish aborted', { cause: e }) : e;
  }
  return p;
}

// The capture clock of auto mode. requestAnimationFrame captures in step with the page's
// rendering, but a page can be visible and still get few rAF callbacks: Chromium throttles rAF in
// a page covered by another (measured here: a second page opened in the same browser took the
// first page's rAF from 60 to 1-1.5 callbacks/s within 3 s while its visibilityState stayed
// 'visible'), so a publisher that waited for rAF ran at 1 frame/s and its hidden-page fallback
// never started. So a timer watches too: every CLOCK_WATCH_MS it counts the captures rAF gave
// over the last window (CLOCK_WINDOW_MS, or 10 periods at a low rate), and when they fall under
// CLOCK_BEHIND of the nominal rate the timer drives the captures (counted in clockFallbacks).
// rAF gets them back once it ticks at 0.95 of the nominal rate again over a window that doubles
// after each fallback (2 s, 4 s, ... 32 s), so a rAF that keeps failing does not flap. A hidden
// page gets no rAF at all: the timer drives it, as it always did (not counted: rAF is off there,
// not behind). A page whose own rendering runs below the rate asked for gets the timer too (its
// rAF is behind as well): it then captures its last picture again between renders.
const CLOCK_WINDOW_MS = 1000;
const CLOCK_WATCH_MS = 250;
const CLOCK_BEHIND = 0.9;
const CLOCK_RETRY_MAX_MS = 32000;

const pageHidden = () => !!(globalThis.document && globalThis.document.hidden);

// What both publishers share: the capture clock (auto mode) and counting a drop by its reason.
class CaptureClock extends Emitter {
  /** What drives the captures now: 'raf', 'timer' (clock 'timer', a hidden page, or rAF fell
   * behind the nominal rate), 'manual' (capture() calls), or null before the clock started. */
  get activeClock() {
    return this.manual ? 'manual' : this._clk?.source ?? null;
  }

  _schedule() {
    const period = 1000 / this.fps;
    const useRaf = this.clock !== 'timer' && typeof requestAnimationFrame === 'function';
    const now = performance.now();
    const c = this._clk = {
      period, useRaf, source: useRaf && !pageHidden() ? 'raf' : 'timer', fallback: false, hidden: pageHidden(),
      // At least 10 periods a window, so that one capture more or less at its edges cannot
      // decide it at a low rate.
      windowMs: Math.max(CLOCK_WINDOW_MS, 10 * period), since: now, captures: 0, rafTicks: 0,
    };
    c.retryMs = c.windowMs;
    this._nextDue = now;
    const onFrame = (t) => {
      this._raf = null;
      if (this._stopped) return;
      ++c.rafTicks;
      if (c.source === 'raf') this._tick(t);
      armFrame();
    };
    // While rAF does not drive the captures it still runs (and is counted) so that the timer
    // can see it recover.
    const armFrame = () => {
      if (useRaf && this._raf === null && !pageHidden()) this._raf = requestAnimationFrame(onFrame);
    };
    const onTimer = () => {
      this._timer = null;
      if (this._stopped) return;
      const t = performance.now();
      this._watchClock(t);
      if (c.source === 'timer') this._tick(t);
      armFrame();
      this._timer = setTimeout(onTimer, c.source === 'timer' ? Math.max(1, period / 2) : CLOCK_WATCH_MS);
    };
    armFrame();
    this._timer = setTimeout(onTimer, c.source === 'timer' ? 0 : CLOCK_WATCH_MS);
  }

  _tick(now) {
    const c = this._clk;
    if (now < this._nextDue) return;
    // Keep the long-run rate at fps even when ticks jitter, without bursting after a stall.
    this._nextDue = Math.max(this._nextDue + c.period, now - c.period / 2);
    ++c.captures;
    this.capture();
  }

  // Which clock drives the captures, judged by the timer (see CLOCK_WINDOW_MS above).
  _watchClock(now) {
    const c = this._clk;
    if (!c.useRaf) return;
    const restart = () => {
      c.since = now;
      c.captures = 0;
      c.rafTicks = 0;
    };
    if (pageHidden()) {
      c.hidden = true;
      c.source = 'timer';
      restart();
      return;
    }
    if (c.hidden) {
      // Visible again: rAF resumes (unless it had fallen behind before), judged afresh.
      c.hidden = false;
      if (!c.fallback) c.source = 'raf';
      restart();
      return;
    }
    const elapsed = now - c.since;
    if (!c.fallback) {
      if (elapsed < c.windowMs) return;
      if (c.captures + 1 < CLOCK_BEHIND * this.fps * elapsed / 1000) {
        c.fallback = true;
        c.source = 'timer';
        c.retryMs = Math.min(CLOCK_RETRY_MAX_MS, c.retryMs * 2);
        ++this.counters.clockFallbacks;
      }
      restart();
      return;
    }
    if (elapsed < c.retryMs) return;
    if (c.rafTicks >= 0.95 * this.fps * elapsed / 1000) {
      c.fallback = false;
      c.source = 'raf';
    }
    restart();
  }

  _drop(reason) {
    ++this.counters.dropped[reason];
    ++this.counters.droppedTotal;
  }
}

class CanvasPublisher extends CaptureClock {
  constructor(conn, canvas, o) {
    super();
    this.connection = conn;
    this.canvas = canvas;
    this.name = o.stream ?? 'canvas';
    if (!validStreamName(this.name)) throw new SyncError('bad_message', `invalid stream name ${this.name}`);
    this.fps = o.fps ?? 30;
    this.width = o.width ?? canvas.width;
    this.height = o.height ?? canvas.height;
    this.manual = !!o.manual;
    this.clock = o.clock ?? 'raf';
    this.streamId = null;
    this.frameBytes = this.width * this.height * 4;
    this._readbackBuffers = o.readbackBuffers ?? 3;
    this._streamOptions = {
      name: this.name, width: this.width, height: this.height, fps: this.fps, slots: o.slots,
      maxBufferedFrames: o.maxBufferedFrames ?? 2, firstSequence: o.firstSequence ?? 1,
    };
    this.counters = {
      offered: 0, // capture attempts (ticks)
      sent: 0,
      dropped: { backpressure: 0, readback_busy: 0, pre_send: 0, not_open: 0, readback_failed: 0 },
      droppedTotal: 0,
      inFlight: 0, // readbacks started, and frames handed to the Worker, not yet sent or dropped
      bytesSent: 0,
      reopens: 0,
      lastSequence: 0,
      readbackMsMax: 0,
      readbackMsTotal: 0,
      clockFallbacks: 0, // times rAF fell behind the nominal rate in a visible page (CaptureClock)
    };
    this._stopped = false;
    this._timer = null;
    this._raf = null;
    this._nextDue = 0;
    this._sink = null;
    this._handlers = {
      sent: (seq, bytes, message) => {
        ++this.counters.sent;
        this.counters.bytesSent += bytes;
        this.counters.lastSequence = seq;
        this.emit('frame', seq);
        // 'sent' carries the capture time the header holds (µs, page clock: timeOrigin + now),
        // so a page can time a frame from its capture to wherever syncd delivers it (the
        // benches' glass to glass). Read from the header only when someone listens.
        if (this.listening('sent')) this.emit('sent', { sequence: seq, captureTimeUs: Number(new DataView(message).getBigUint64(24, true)) });
      },
      dropped: (reason) => this._drop(reason),
      answered: () => --this.counters.inFlight,
      open: ({ reply, reopened }) => {
        this.streamId = reply.stream;
        this.opened = reply;
        if (reopened) ++this.counters.reopens;
        this.emit('open', reply);
      },
      down: () => {
        this.streamId = null;
      },
      error: (e) => this.emit('error', e),
    };
    this._setupReader(o);
  }

  /** Where frames are sent from: 'worker' or 'page' (null before the stream opened). */
  get sender() {
    return this._sink?.kind ?? null;
  }

  /** 'raw': rgba8 frames (an EncodedCanvasPublisher says 'h264'). */
  get codec() {
    return 'raw';
  }

  /** The VideoEncoderConfig in use: none for raw frames. */
  get encoder() {
    return null;
  }

  _setupReader(o) {
    let gl = o.context ?? null;
    const isGl2 = (c) => typeof WebGL2RenderingContext !== 'undefined' && c instanceof WebGL2RenderingContext;
    if (gl && !isGl2(gl)) {
      this._ctx2d = gl;
      gl = null;
    } else if (!gl && !o.force2d) {
      gl = this.canvas.getContext('webgl2');
    }
    if (gl) {
      this.gl = gl;
      const mode = o.readback ?? 'auto';
      if (mode !== 'auto' && mode !== 'async' && mode !== 'sync') throw new SyncError('bad_message', `readback must be auto, async or sync, not ${mode}`);
      if (mode === 'sync' || (mode === 'auto' && softwareGl(gl))) {
        this.readback = 'webgl2-sync';
        return;
      }
      this.readback = 'webgl2';
      this._pbos = [];
      for (let i = 0; i < this._readbackBuffers; ++i) {
        const buf = gl.createBuffer();
        gl.bindBuffer(gl.PIXEL_PACK_BUFFER, buf);
        gl.bufferData(gl.PIXEL_PACK_BUFFER, this.frameBytes, gl.STREAM_READ);
        this._pbos.push({ buf, sync: null, captureUs: 0, t0: 0 });
      }
      gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
      this._busy = []; // PBOs with a readback in flight, oldest first
      this._free = [...this._pbos];
      this._poll = null;
    } else {
      this._ctx2d = this._ctx2d ?? this.canvas.getContext('2d', { willReadFrequently: true });
      if (!this._ctx2d) throw new SyncError('no_context', 'canvas has neither a WebGL2 nor a 2D context');
      this.readback = '2d';
    }
  }

  async _start(useWorker) {
    const worker = useWorker ? startPublishWorker() : null;
    if (worker) {
      // Each buffer is one frame in the Worker or its socket: admission keeps maxBufferedFrames
      // there, plus the readbacks finishing meanwhile.
      this._sink = new WorkerSink(worker, this.connection, this._streamOptions, this._handlers, this._streamOptions.maxBufferedFrames + 2);
      try {
        await this._sink.start();
      } catch (e) {
        if (e.code !== 'worker_failed') throw e;
        // No Worker here after all (the module could not load): send from the page.
        worker.terminate();
        this._sink = null;
      }
    }
    if (!this._sink) {
      this._sink = new PageSink(this.connection, this._streamOptions, this._handlers);
      await this._sink.start();
    }
    if (this._stopped) return;
    // Once a second syncd hears the page's own counters, so /stats and the dashboard show the
    // frames the page captured and dropped before they reached syncd.
    this._reportTimer = setInterval(() => this._report(), 1000);
    if (!this.manual) this._schedule();
  }

  // Frames handed to the Worker are in flight until it answers.
  _handOff(buffer, captureUs, bottomUp) {
    if (this._sink.kind === 'worker') ++this.counters.inFlight;
    this._sink.send(buffer, captureUs, bottomUp);
  }

  /**
   * Captures the canvas now (call right after drawing when the WebGL context does not preserve
   * its drawing buffer). Returns false when the frame was dropped at admission.
   */
  capture() {
    if (this._stopped) return false;
    ++this.counters.offered;
    const sink = this._sink;
    if (!sink || !sink.ready) {
      this._drop('not_open');
      return false;
    }
    // A capture is admitted while the socket holds at most maxBufferedFrames frames; a completed
    // readback is sent with one frame of slack above that, so the socket stays full (it is the
    // bottleneck: an idle socket while a readback runs is throughput lost) and a readback is
    // rarely thrown away (pre_send) after the GPU copied it.
    if (sink.congested()) {
      this._drop('backpressure');
      return false;
    }
    const captureUs = nowUs();
    if (this.readback === 'webgl2-sync') {
      const buffer = sink.takeBuffer();
      if (!buffer) {
        this._drop('backpressure');
        return false;
      }
      // Straight into the message buffer: no pixel-pack buffer, no second copy.
      const t0 = performance.now();
      const gl = this.gl;
      gl.readPixels(0, 0, this.width, this.height, gl.RGBA, gl.UNSIGNED_BYTE, buffer.pixels);
      const ms = performance.now() - t0;
      this.counters.readbackMsTotal += ms;
      if (ms > this.counters.readbackMsMax) this.counters.readbackMsMax = ms;
      this._handOff(buffer, captureUs, true);
      return true;
    }
    if (this.readback === '2d') {
      const buffer = sink.takeBuffer();
      if (!buffer) {
        this._drop('backpressure');
        return false;
      }
      let img;
      try {
        // getImageData allocates by API design; the pixels are then copied into a reused
        // message buffer.
        img = this._ctx2d.getImageData(0, 0, this.width, this.height);
      } catch (e) {
        sink.giveBack(buffer);
        this._drop('readback_failed');
        this.emit('error', e);
        return false;
      }
      buffer.pixels.set(img.data);
      this._handOff(buffer, captureUs, false);
      return true;
    }
    const gl = this.gl;
    const slot = this._free.shift();
    if (!slot) {
      this._drop('readback_busy');
      return false;
    }
    slot.captureUs = captureUs;
    slot.t0 = performance.now();
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, slot.buf);
    gl.readPixels(0, 0, this.width, this.height, gl.RGBA, gl.UNSIGNED_BYTE, 0);
    gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
    slot.sync = gl.fenceSync(gl.SYNC_GPU_COMMANDS_COMPLETE, 0);
    gl.flush();
    this._busy.push(slot);
    ++this.counters.inFlight;
    this._armPoll();
    return true;
  }

  _armPoll() {
    if (this._poll !== null) return;
    // Fences cannot signal before control returns to the event loop; poll soon after, then
    // less and less often (1, 2, 4, 8 ms): a software GL under load takes hundreds of ms, and
    // a 1-ms timer for all of it is CPU the page's WebSocket needs.
    this._pollDelay = Math.min(8, (this._pollDelay ?? 0.5) * 2);
    this._poll = setTimeout(() => {
      this._poll = null;
      this._collect();
    }, this._pollDelay);
  }

  _collect() {
    const gl = this.gl;
    while (this._busy.length) {
      const slot = this._busy[0];
      const status = gl.clientWaitSync(slot.sync, 0, 0);
      if (status === gl.TIMEOUT_EXPIRED) break;
      this._busy.shift();
      this._pollDelay = 0.5; // the next readback is polled from 1 ms again
      gl.deleteSync(slot.sync);
      slot.sync = null;
      --this.counters.inFlight;
      if (status === gl.WAIT_FAILED || this._stopped) {
        if (!this._stopped) this._drop('readback_failed');
        this._free.push(slot);
        continue;
      }
      const ms = performance.now() - slot.t0;
      this.counters.readbackMsTotal += ms;
      if (ms > this.counters.readbackMsMax) this.counters.readbackMsMax = ms;
      // The socket may have filled while the GPU worked: drop before copying anything.
      const sink = this._sink;
      const buffer = sink.ready && !sink.congested(1) ? sink.takeBuffer() : null;
      if (!buffer) {
        this._drop(sink.ready ? 'pre_send' : 'not_open');
        this._free.push(slot);
        continue;
      }
      gl.bindBuffer(gl.PIXEL_PACK_BUFFER, slot.buf);
      gl.getBufferSubData(gl.PIXEL_PACK_BUFFER, 0, buffer.pixels);
      gl.bindBuffer(gl.PIXEL_PACK_BUFFER, null);
      this._free.push(slot);
      this._handOff(buffer, slot.captureUs, true);
    }
    if (this._busy.length && !this._stopped) this._armPoll();
  }

  /** Counters plus rates; offered = sent + droppedTotal + inFlight. */
  stats() {
    return { ...this.counters, dropped: { ...this.counters.dropped }, stream: this.name, streamId: this.streamId, codec: this.codec, encoder: null, readback: this.readback, sender: this.sender, width: this.width, height: this.height, clock: this.activeClock };
  }

  /** A ticket for this stream (see SyncConnection.createTicket). */
  createTicket(opts) {
    if (this.streamId === null || !this._sink) return Promise.reject(new SyncError('not_open', 'stream is not open'));
    return this._sink.createTicket(opts);
  }

  _report() {
    if (this.streamId === null || !this._sink) return;
    const c = this.counters;
    this._sink.report({ offered: c.offered, sent: c.sent, inFlight: c.inFlight, dropped: { ...c.dropped } });
  }

  /** Stops capturing and closes the stream (receivers' HTTP streams then end). */
  async stop({ close = true } = {}) {
    if (this._stopped) return;
    this._report();
    clearInterval(this._reportTimer);
    this._stopped = true;
    if (this._raf !== null && typeof cancelAnimationFrame === 'function') cancelAnimationFrame(this._raf);
    if (this._timer !== null) clearTimeout(this._timer);
    if (this._poll !== null) clearTimeout(this._poll);
    if (this._pbos) {
      for (const slot of this._busy) {
        this.gl.deleteSync(slot.sync);
        --this.counters.inFlight;
        this._drop('not_open');
      }
      this._busy = [];
      for (const slot of this._pbos) this.gl.deleteBuffer(slot.buf);
      this._pbos = [];
      this._free = [];
    }
    this.streamId = null;
    await this._sink?.stop(close);
  }
}

// ------------------------------------------------------------------------------------------------
// Publishing a canvas encoded (H.264 through WebCodecs)
//
// Chromium's WebSocket carries about 50 MB/s here, so raw RGBA at 1080p60 (500 MB/s) reaches
// syncd at ~6 frames/s; H.264 at ~1-1.5 MB/s fits many times over. syncd decodes the stream once
// for its pixel consumers and hands the access units as they are to its H.264 consumers (relay,
// WHEP).
//
// Everything runs on the page's thread and its own connection: VideoFrame(canvas) copies the
// canvas (it must, before the page draws again), WebCodecs encodes off-thread and calls back here,
// and a second or so of encoded 1080p60 is about a megabyte, which the page's socket sends
// without a Worker's help (the raw path's Worker exists to take 500 MB/s of copies off it).

// How long stop() waits for the encoder to give back what it holds.
const ENCODER_FLUSH_MS = 2000;
// After an encoder error, the next encoder is made no sooner than this (an unsupported config
// fails every time: a frame a second is enough to notice it came back).
const ENCODER_RETRY_MS = 1000;

// The config a publishCanvas call encodes with, or null to publish raw.
async function chooseEncoderConfig(canvas, o) {
  const codec = o.codec ?? 'raw';
  if (codec === 'raw') return null;
  if (codec !== 'h264' && codec !== 'auto') throw new SyncError('bad_message', `codec must be raw, h264 or auto, not ${codec}`);
  const width = o.width ?? canvas.width;
  const height = o.height ?? canvas.height;
  const fps = o.fps ?? 30;
  const config = h264EncoderConfig({ width, height, fps, bitrate: o.bitrate, maxBitrate: o.maxBitrate, hardwareAcceleration: o.hardwareAcceleration });
  const Encoder = globalThis.VideoEncoder;
  let supported = typeof Encoder === 'function' && typeof globalThis.VideoFrame === 'function';
  if (supported && typeof Encoder.isConfigSupported === 'function') {
    try {
      supported = !!(await Encoder.isConfigSupported(config)).supported;
    } catch {
      supported = false;
    }
  }
  if (supported) return config;
  if (codec === 'auto') return null;
  throw new SyncError('unsupported_codec', `this browser cannot encode ${config.codec} at ${width}x${height} ${fps} fps (VideoEncoder)`);
}

/**
 * A canvas published as an h264 stream (publishCanvas with codec 'h264', or 'auto' where the
 * browser encodes). Each captured frame becomes a VideoFrame, is encoded, and each output chunk
 * goes to syncd as one binary frame (56-byte header, format 5, then the Annex B access unit).
 */
class EncodedCanvasPublisher extends CaptureClock {
  constructor(conn, canvas, o, config) {
    super();
    this.connection = conn;
    this.canvas = canvas;
    this.name = o.stream ?? 'canvas';
    if (!validStreamName(this.name)) throw new SyncError('bad_message', `invalid stream name ${this.name}`);
    this.fps = o.fps ?? 30;
    this.width = config.width;
    this.height = config.height;
    this.manual = !!o.manual;
    this.clock = o.clock ?? 'raf';
    this.streamId = null;
    this.opened = null;
    this.readback = 'videoframe';
    // A WebGL2 canvas on a software GL (SwiftShader in headless Chromium, llvmpipe): the frame is
    // read with a synchronous readPixels into a reused buffer, flipped to top-down, and the
    // VideoFrame made from that buffer ('webgl2-sync'). new VideoFrame(canvas) of such a canvas
    // snapshots the drawing buffer through the GPU process and reads it back, which blocks the
    // page's thread far longer: measured in headless Chromium at 1920x1080, WebGL2 pattern,
    // 12-18 ms a capture against 6-10 ms for readPixels + flip + VideoFrame(buffer), and the
    // page could then offer only ~30 of 60 frames/s (tests/browser/bench/encoded.bench.js,
    // docs/benchmarks.md). On a GPU the canvas frame stays a GPU copy an encoder can take
    // as it is, so there (and for 2D canvases, whose snapshot is a cheap CPU copy) VideoFrame
    // (canvas) stays. Option `readback`: 'auto' (default), 'sync' (always readPixels), 'async'
    // (never: VideoFrame(canvas)).
    const gl = o.context ?? null;
    const isGl2 = typeof WebGL2RenderingContext !== 'undefined' && gl instanceof WebGL2RenderingContext;
    const mode = o.readback ?? 'auto';
    if (isGl2 && (mode === 'sync' || (mode === 'auto' && softwareGl(gl)))) {
      this.readback = 'webgl2-sync';
      this.gl = gl;
    }
    this._rgba = null; // webgl2-sync: the reused RGBA buffer (width x height x 4)
    this._rowScratch = null;
    /** The VideoEncoderConfig in use (its bitrate follows stream.bitrate). */
    this.encoder = config;
    this.maxBitrate = Math.max(H264_MIN_BITRATE, o.maxBitrate ?? config.bitrate);
    this.keyFrameInterval = Math.max(1, Math.round(o.keyFrameInterval ?? 2 * this.fps));
    this.maxEncodeQueue = Math.max(1, o.maxEncodeQueue ?? 2);
    this._maxBufferedBytes = o.maxBufferedBytes ?? null;
    this._maxBufferedFrames = o.maxBufferedFrames ?? 4;
    this.columnMarker = !!o.columnMarker;
    // syncd's frame_bytes for the stream: the largest access unit it takes.
    this.frameBytes = h264AccessUnitLimit(this.width, this.height);
    this._sequence = o.firstSequence ?? 1;
    // feedback: syncd sends this stream's key-frame requests and bitrate targets (stream.keyframe,
    // stream.bitrate), which the encoder follows.
    this._openRequest = { name: this.name, width: this.width, height: this.height, format: 'h264', fps: this.fps, slots: o.slots, feedback: true };
    this.counters = {
      offered: 0,
      sent: 0,
      dropped: {
        not_open: 0, backpressure: 0, encoder_busy: 0, encode_failed: 0, too_large: 0,
        // The encoder took the frame and gave nothing back (its rate control skipped it).
        encoder_skipped: 0,
        // Encoded after a frame it refers to was lost (dropped, or sent to a stream that went
        // away): useless to a decoder, so not sent; the next key frame ends it.
        awaiting_key: 0,
      },
      droppedTotal: 0,
      inFlight: 0, // frames inside the encoder
      bytesSent: 0,
      reopens: 0,
      lastSequence: 0,
      keyframeRequests: 0,
      keyframesSent: 0,
      bitrateChanges: 0,
      encoded: 0,
      encodeMsTotal: 0,
      encodeMsMax: 0,
      clockFallbacks: 0, // times rAF fell behind the nominal rate in a visible page (CaptureClock)
    };
    this._stopped = false;
    this._timer = null;
    this._raf = null;
    this._nextDue = 0;
    this._videoEncoder = null;
    this._encoderFailedAt = -Infinity;
    this._pending = []; // frames inside the encoder, oldest first: {timestamp, sequence, t0}
    this._lastCaptureUs = 0;
    this._forceKey = true; // the next frame into the encoder is a key frame
    this._sinceKey = 0; // frames into the encoder since the last key frame asked for
    this._awaitKeyOutput = false; // deltas out of the encoder are useless until a key frame
    // One message buffer, grown when an access unit is larger (the socket copies it on send).
    this._message = new ArrayBuffer(FRAME_HEADER_BYTES + Math.min(this.frameBytes, 65536));
    this._view = new DataView(this._message);
    this._markerCanvas = null;
    this._markerCtx = null;
    this._offs = [];
  }

  /** 'h264'. */
  get codec() {
    return 'h264';
  }

  /** Where frames are sent from: always the page's own connection. */
  get sender() {
    return this.streamId === null && !this.opened ? null : 'page';
  }

  /** The encoder's target bitrate now, bits/s. */
  get bitrate() {
    return this.encoder.bitrate;
  }

  /** The sequence the next frame that enters the encoder gets (for a page's own marker). */
  get nextSequence() {
    return this._sequence;
  }

  /** Bytes the socket may hold before frames are skipped ('backpressure'): a few frames' worth
   * at the current bitrate, and at least 256 KiB (a key frame is many times an average one). */
  get maxBufferedBytes() {
    if (this._maxBufferedBytes !== null) return this._maxBufferedBytes;
    return Math.max(262144, Math.round(this._maxBufferedFrames * this.encoder.bitrate / 8 / this.fps));
  }

  async _start() {
    const conn = this.connection;
    this._offs.push(conn.on('message', (m) => this._onControl(m)));
    this._offs.push(conn.on('disconnect', () => {
      this.streamId = null;
    }));
    this._offs.push(conn.on('open', ({ reconnected }) => {
      if (reconnected && !this._stopped) this._openStream(true).catch((e) => this.emit('error', e));
    }));
    this._makeEncoder();
    await this._openStream(false);
    if (this._stopped) return;
    this._reportTimer = setInterval(() => this._report(), 1000);
    if (!this.manual) this._schedule();
  }

  async _openStream(reopened) {
    const reply = await this.connection.openStream(this._openRequest);
    if (this._stopped) return reply;
    this.streamId = reply.stream;
    this.opened = reply;
    if (reopened) {
      ++this.counters.reopens;
      // A new stream: its first frame must be one a decoder can start from, and what the
      // encoder still holds refers to frames the old stream had.
      this._breakChain();
    }
    this.emit('open', reply);
    return reply;
  }

  _makeEncoder() {
    const enc = new VideoEncoder({
      output: (chunk) => this._onChunk(enc, chunk),
      error: (e) => this._onEncoderError(enc, e),
    });
    enc.configure(this.encoder);
    this._videoEncoder = enc;
    this._forceKey = true;
    return enc;
  }

  // The encoder to capture into, or null while one failed within ENCODER_RETRY_MS.
  _encoderForCapture() {
    if (this._videoEncoder) return this._videoEncoder;
    if (performance.now() - this._encoderFailedAt < ENCODER_RETRY_MS) return null;
    try {
      return this._makeEncoder();
    } catch (e) {
      this._encoderFailedAt = performance.now();
      this.emit('error', new SyncError('encode_failed', `VideoEncoder: ${e?.message ?? e}`, { cause: e }));
      return null;
    }
  }

  // A frame the stream needed was lost: the next frame is a key frame, and deltas coming out of
  // the encoder before one are not sent.
  _breakChain() {
    this._forceKey = true;
    this._awaitKeyOutput = true;
  }

  /**
   * Captures the canvas now and hands it to the encoder (call right after drawing when the
   * WebGL context does not preserve its drawing buffer). false when the frame was skipped.
   */
  capture() {
    if (this._stopped) return false;
    ++this.counters.offered;
    const conn = this.connection;
    const enc = this._encoderForCapture();
    const reason = encodedAdmission({
      open: this.streamId !== null && conn.connected,
      bufferedAmount: conn.bufferedAmount,
      maxBufferedBytes: this.maxBufferedBytes,
      encodeQueueSize: enc ? enc.encodeQueueSize : 0,
      maxEncodeQueue: this.maxEncodeQueue,
    });
    if (reason) {
      this._drop(reason);
      return false;
    }
    if (!enc || enc.state !== 'configured') {
      this._drop('encode_failed');
      return false;
    }
    // VideoFrame timestamps must differ (outputs are matched to frames by them): the capture
    // time in µs, moved on by 1 µs should two captures fall in the same one.
    let captureUs = nowUs();
    if (captureUs <= this._lastCaptureUs) captureUs = this._lastCaptureUs + 1;
    const sequence = this._sequence;
    let frame;
    try {
      frame = this._videoFrame(captureUs, sequence);
    } catch (e) {
      this._drop('encode_failed');
      this.emit('error', new SyncError('encode_failed', `VideoFrame from the canvas: ${e?.message ?? e}`, { cause: e }));
      return false;
    }
    const keyFrame = this._forceKey || this._sinceKey >= this.keyFrameInterval;
    const entry = { timestamp: captureUs, sequence, t0: performance.now() };
    try {
      enc.encode(frame, { keyFrame });
    } catch (e) {
      this._drop('encode_failed');
      this.emit('error', new SyncError('encode_failed', `VideoEncoder.encode: ${e?.message ?? e}`, { cause: e }));
      return false;
    } finally {
      frame.close();
    }
    this._lastCaptureUs = captureUs;
    this._pending.push(entry);
    ++this.counters.inFlight;
    ++this._sequence;
    if (keyFrame) {
      this._forceKey = false;
      this._sinceKey = 0;
    }
    ++this._sinceKey;
    return true;
  }

  _videoFrame(captureUs, sequence) {
    if (this.readback === 'webgl2-sync') return this._readPixelsFrame(captureUs, sequence);
    if (!this.columnMarker) {
      const init = { timestamp: captureUs };
      // A canvas larger than the stream: its top-left width x height, as the raw path reads.
      if (this.canvas.width !== this.width || this.canvas.height !== this.height) {
        init.visibleRect = { x: 0, y: 0, width: this.width, height: this.height };
      }
      return new VideoFrame(this.canvas, init);
    }
    if (!this._markerCanvas) {
      this._markerCanvas = new OffscreenCanvas(this.width, this.height);
      this._markerCtx = this._markerCanvas.getContext('2d', { alpha: false });
    }
    const ctx = this._markerCtx;
    ctx.drawImage(this.canvas, 0, 0, this.width, this.height, 0, 0, this.width, this.height);
    drawColumnMarker(ctx, sequence, this.height);
    return new VideoFrame(this._markerCanvas, { timestamp: captureUs });
  }

  // webgl2-sync: the canvas's top-left width x height read into the reused buffer, rows flipped
  // to top-down, the column marker written straight into the pixels (no OffscreenCanvas), and a
  // VideoFrame made of the buffer (it copies it, so the buffer is ours again on return).
  _readPixelsFrame(captureUs, sequence) {
    const gl = this.gl;
    const w = this.width, h = this.height, rowBytes = w * 4;
    if (!this._rgba) {
      this._rgba = new Uint8Array(rowBytes * h);
      this._rowScratch = new Uint8Array(rowBytes);
    }
    const px = this._rgba;
    gl.readPixels(0, gl.drawingBufferHeight - h, w, h, gl.RGBA, gl.UNSIGNED_BYTE, px);
    flipRowsInPlace(px, rowBytes, h, this._rowScratch);
    if (this.columnMarker) {
      // One row of the marker (opaque black or white per column), copied down every row.
      const n = Math.min(COLUMN_MARKER_WIDTH, w);
      const row0 = new Uint32Array(px.buffer, px.byteOffset, n);
      for (let x = 0; x < n; ++x) row0[x] = columnMarkerBit(sequence, Math.floor(x / COLUMN_MARKER_COLUMN)) ? 0xffffffff : 0xff000000;
      for (let y = 1; y < h; ++y) px.copyWithin(y * rowBytes, 0, n * 4);
    }
    return new VideoFrame(px, { format: 'RGBX', codedWidth: w, codedHeight: h, timestamp: captureUs });
  }

  _onChunk(enc, chunk) {
    if (enc !== this._videoEncoder) return;
    const pending = this._pending;
    // Outputs come in capture order; a frame older than this output gave none (skipped).
    while (pending.length && pending[0].timestamp < chunk.timestamp) {
      pending.shift();
      --this.counters.inFlight;
      this._drop('encoder_skipped');
    }
    if (!pending.length || pending[0].timestamp !== chunk.timestamp) return; // not a frame of ours
    const entry = pending.shift();
    --this.counters.inFlight;
    const c = this.counters;
    const ms = performance.now() - entry.t0;
    ++c.encoded;
    c.encodeMsTotal += ms;
    if (ms > c.encodeMsMax) c.encodeMsMax = ms;
    const key = chunk.type === 'key';
    if (this._awaitKeyOutput && !key) {
      this._drop(this.streamId === null ? 'not_open' : 'awaiting_key');
      return;
    }
    const bytes = chunk.byteLength;
    if (bytes > this.frameBytes) {
      this._drop('too_large');
      this._breakChain();
      return;
    }
    if (this.streamId === null || !this.connection.connected) {
      this._drop('not_open');
      this._breakChain();
      return;
    }
    const total = FRAME_HEADER_BYTES + bytes;
    if (this._message.byteLength < total) {
      // Grow by half again at least, so a run of growing key frames reallocates a few times.
      this._message = new ArrayBuffer(Math.min(FRAME_HEADER_BYTES + this.frameBytes, Math.max(total, Math.ceil(this._message.byteLength * 1.5))));
      this._view = new DataView(this._message);
    }
    writeFrameHeader(this._view, {
      streamId: this.streamId, flags: this.columnMarker ? FRAME_FLAG_COLUMN_MARKER : 0, sequence: entry.sequence,
      captureTimeUs: entry.timestamp, width: this.width, height: this.height, format: FORMAT_CODES.h264,
    });
    chunk.copyTo(new Uint8Array(this._message, FRAME_HEADER_BYTES, bytes));
    if (!this.connection.sendBinary(new Uint8Array(this._message, 0, total))) {
      this._drop('not_open');
      this._breakChain();
      return;
    }
    if (key) {
      this._awaitKeyOutput = false;
      ++c.keyframesSent;
    }
    ++c.sent;
    c.bytesSent += total;
    c.lastSequence = entry.sequence;
    this.emit('frame', entry.sequence);
    if (this.listening('sent')) this.emit('sent', { sequence: entry.sequence, captureTimeUs: entry.timestamp });
  }

  _onEncoderError(enc, e) {
    if (enc !== this._videoEncoder) return;
    this._videoEncoder = null;
    this._encoderFailedAt = performance.now();
    // A closed encoder gives nothing more: what it held is lost.
    for (; this._pending.length; this._pending.shift()) {
      --this.counters.inFlight;
      this._drop('encode_failed');
    }
    this._breakChain();
    try {
      if (enc.state !== 'closed') enc.close();
    } catch { /* closed already */ }
    if (!this._stopped) this.emit('error', new SyncError('encode_failed', `VideoEncoder: ${e?.message ?? e}`, { cause: e }));
  }

  // Server-initiated stream messages (docs/protocol.md, "Messages from syncd to a stream's
  // source"); those of other streams are not ours.
  _onControl(m) {
    if (!m || this.streamId === null || m.stream !== this.streamId) return;
    if (m.type === 'stream.keyframe') {
      ++this.counters.keyframeRequests;
      this._forceKey = true;
      this.emit('keyframe-request', m);
    } else if (m.type === 'stream.bitrate') {
      if (typeof m.bps === 'number' && Number.isFinite(m.bps) && m.bps > 0) this.setBitrate(m.bps);
    }
  }

  /**
   * Sets the encoder's target bitrate: `bps`, at most maxBitrate and at least 100 kbit/s.
   * Returns the bitrate now in force. Called for syncd's stream.bitrate; a page may call it too.
   */
  setBitrate(bps) {
    const target = Math.max(H264_MIN_BITRATE, Math.min(Math.round(bps), this.maxBitrate));
    if (target === this.encoder.bitrate) return target;
    this.encoder = { ...this.encoder, bitrate: target };
    ++this.counters.bitrateChanges;
    const enc = this._videoEncoder;
    if (enc && enc.state === 'configured') {
      try {
        enc.configure(this.encoder);
      } catch (e) {
        this._onEncoderError(enc, e);
      }
    }
    this.emit('bitrate', target);
    return target;
  }

  /** Counters plus what is encoded how; offered = sent + droppedTotal + inFlight. */
  stats() {
    const c = this.counters;
    return {
      ...c, dropped: { ...c.dropped }, stream: this.name, streamId: this.streamId, codec: this.codec,
      encoder: { ...this.encoder, avc: { ...this.encoder.avc } }, bitrate: this.encoder.bitrate,
      encodeMsMean: c.encoded ? c.encodeMsTotal / c.encoded : 0, encodeQueueSize: this._videoEncoder?.encodeQueueSize ?? 0,
      readback: this.readback, sender: this.sender, width: this.width, height: this.height, clock: this.activeClock,
    };
  }

  /** A ticket for this stream (see SyncConnection.createTicket). */
  createTicket(opts) {
    if (this.streamId === null) return Promise.reject(new SyncError('not_open', 'stream is not open'));
    return this.connection.createTicket(this.streamId, opts);
  }

  _report() {
    if (this.streamId === null) return;
    const c = this.counters;
    this.connection.send(messages.streamReport(this.streamId, { offered: c.offered, sent: c.sent, inFlight: c.inFlight, dropped: { ...c.dropped } }));
  }

  /**
   * Stops capturing, lets the encoder finish what it holds (sent while the stream is open;
   * dropped as not_open once it is closed), and closes the stream (receivers' HTTP streams end).
   */
  async stop({ close = true } = {}) {
    if (this._stopped) return;
    this._stopped = true;
    clearInterval(this._reportTimer);
    if (this._raf !== null && typeof cancelAnimationFrame === 'function') cancelAnimationFrame(this._raf);
    if (this._timer !== null) clearTimeout(this._timer);
    const enc = this._videoEncoder;
    if (enc && enc.state === 'configured' && this._pending.length) {
      let timer;
      await Promise.race([
        enc.flush().catch(() => {}),
        new Promise((r) => { timer = setTimeout(r, ENCODER_FLUSH_MS); }),
      ]);
      clearTimeout(timer);
    }
    this._videoEncoder = null;
    try {
      if (enc && enc.state !== 'closed') enc.close();
    } catch { /* closed already */ }
    for (; this._pending.length; this._pending.shift()) {
      --this.counters.inFlight;
      this._drop('not_open');
    }
    this._report();
    for (const off of this._offs.splice(0)) off();
    const id = this.streamId;
    this.streamId = null;
    if (close && id !== null && this.connection.connected) {
      try {
        await this.connection.closeStream(id);
      } catch (e) {
        if (e.code !== 'unknown_stream') throw e;
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Receiving a stream over HTTP

/**
 * Receives a stream: returns a FrameStream, an async iterable of frames read from
 * `GET /streams/{name}?ticket=` with a BYOB reader into reused buffers. Credit is granted
 * automatically (1 frame after each frame is consumed) on the control connection, or by
 * `POST /streams/{name}/credit` when there is none.
 *
 * An h264 stream's records are access units: by default they are decoded (WebCodecs
 * VideoDecoder, from the first key frame on) and each Frame carries the picture as `videoFrame`,
 * a VideoFrame the caller owns and must close(); with `decode: false` the frames are the access
 * units themselves (`pixels`, Annex B) and `videoFrame` is null.
 *
 * The iterator finishes (a clean end) only when the stream closed. A receive whose connection
 * went away (syncd stopped, the connection cut) rejects with a SyncError 'disconnected'
 * (`details.reason`: 'read_failed', 'truncated', 'syncd_unreachable' or 'stream_open'), after
 * which `resume()` receives again with the same ticket, if it has a use left.
 *
 * options: credit (initial, default 2), connection, base (syncd URL, default the connection's or
 * the page's origin), signal (AbortSignal), autoCredit (default true), decode (h264: default
 * true), decodeTimeoutMs (h264: how long to wait for a unit's picture before reading on, default
 * 500).
 */
export function receive(name, ticket, options = {}) {
  return new FrameStream(name, ticket, options);
}

export class Frame {
  constructor(h, pixels, videoFrame = null) {
    this.sequence = h.sequence;
    this.width = h.width;
    this.height = h.height;
    this.format = FORMAT_NAMES[h.format] ?? h.format;
    this.flags = h.flags;
    this.contentHash = h.contentHash;
    this.captureTimeUs = h.captureTimeUs;
    this.publishTimeNs = h.publishTimeNs;
    this.droppedBefore = h.droppedBefore;
    /** Valid until the iterator is advanced: the buffer is reused for the next frame. For h264,
     * the access unit (Annex B); empty when a decoded picture came out after its unit's turn. */
    this.pixels = pixels;
    /** h264, decoded: the picture (WebCodecs VideoFrame, timestamp = capture time in µs). The
     * caller owns it and must close() it; null otherwise. */
    this.videoFrame = videoFrame;
  }

  /** Where each plane lies in `pixels` (`{offset, stride, rows}`); computed when asked for. */
  get planes() {
    return frameLayout(this.format, this.width, this.height)?.planes ?? [];
  }

  /** The sequence marker in the pixels. */
  marker() {
    return readMarker(this.pixels);
  }

  /**
   * Draws into a canvas, resized to the frame: through its 2D context, or, when the canvas
   * already has a WebGL or WebGL2 context, as a texture on a full-canvas quad. nv12 and i420
   * frames go through WebCodecs' VideoFrame, which converts them to RGB; without it they cannot
   * be drawn (SyncError 'unsupported_format').
   */
  drawTo(canvas) {
    if (canvas.width !== this.width) canvas.width = this.width;
    if (canvas.height !== this.height) canvas.height = this.height;
    // A canvas has one kind of context for life: '2d' is null when it is a WebGL canvas.
    const ctx = canvas.getContext('2d');
    const gl = ctx ? null : canvas.getContext('webgl2') ?? canvas.getContext('webgl');
    if (!ctx && !gl) throw new SyncError('unsupported_canvas', 'the canvas has neither a 2D nor a WebGL context (a bitmaprenderer?)');
    if (this.videoFrame) {
      // A decoded h264 picture: drawn as it is (it stays the caller's to close).
      const vf = this.videoFrame;
      if (gl) drawTexture(gl, this.width, this.height, false, (g) => g.texImage2D(g.TEXTURE_2D, 0, g.RGBA, g.RGBA, g.UNSIGNED_BYTE, vf));
      else ctx.drawImage(vf, 0, 0);
      return;
    }
    if (this.format === 'h264') throw new SyncError('unsupported_format', 'an h264 access unit is not a picture: receive with decode (the default) to draw it');
    if (this.format === 'nv12' || this.format === 'i420') {
      if (typeof VideoFrame !== 'function') {
        throw new SyncError('unsupported_format', `drawing ${this.format} needs WebCodecs (VideoFrame)`);
      }
      const frame = new VideoFrame(this.pixels, {
        format: this.format === 'nv12' ? 'NV12' : 'I420',
        codedWidth: this.width,
        codedHeight: this.height,
        timestamp: this.captureTimeUs,
        layout: this.planes.map((p) => ({ offset: p.offset, stride: p.stride })),
      });
      try {
        if (gl) drawTexture(gl, this.width, this.height, false, (g) => g.texImage2D(g.TEXTURE_2D, 0, g.RGBA, g.RGBA, g.UNSIGNED_BYTE, frame));
        else ctx.drawImage(frame, 0, 0);
      } finally {
        frame.close();
      }
      return;
    }
    if (gl) {
      const data = this.pixels.subarray(0, this.width * this.height * 4);
      drawTexture(gl, this.width, this.height, this.format === 'bgra8', (g) => g.texImage2D(g.TEXTURE_2D, 0, g.RGBA, this.width, this.height, 0, g.RGBA, g.UNSIGNED_BYTE, data));
      return;
    }
    let data = this.pixels;
    if (this.format === 'bgra8') data = swapRB(this.pixels, canvas);
    const clamped = new Uint8ClampedArray(data.buffer, data.byteOffset, this.width * this.height * 4);
    ctx.putImageData(new ImageData(clamped, this.width, this.height), 0, 0);
  }
}

// One program, texture and quad per WebGL context, made on its first drawTo.
const glDrawers = new WeakMap();
function glDrawer(gl) {
  let d = glDrawers.get(gl);
  if (d && !gl.isContextLost()) return d;
  const shader = (type, src) => {
    const sh = gl.createShader(type);
    gl.shaderSource(sh, src);
    gl.compileShader(sh);
    if (!gl.getShaderParameter(sh, gl.COMPILE_STATUS)) throw new SyncError('webgl_failed', gl.getShaderInfoLog(sh) ?? 'shader');
    return sh;
  };
  const program = gl.createProgram();
  // Rows arrive top-down; GL's texture origin is the bottom row, so v runs downwards here.
  gl.attachShader(program, shader(gl.VERTEX_SHADER, 'attribute vec2 p; varying vec2 uv; void main() { uv = vec2(p.x * 0.5 + 0.5, 0.5 - p.y * 0.5); gl_Position = vec4(p, 0.0, 1.0); }'));
  gl.attachShader(program, shader(gl.FRAGMENT_SHADER, 'precision mediump float; varying vec2 uv; uniform sampler2D t; uniform bool bgra; void main() { vec4 c = texture2D(t, uv); gl_FragColor = bgra ? c.bgra : c; }'));
  gl.linkProgram(program);
  if (!gl.getProgramParameter(program, gl.LINK_STATUS)) throw new SyncError('webgl_failed', gl.getProgramInfoLog(program) ?? 'link');
  const quad = gl.createBuffer();
  gl.bindBuffer(gl.ARRAY_BUFFER, quad);
  gl.bufferData(gl.ARRAY_BUFFER, new Float32Array([-1, -1, 1, -1, -1, 1, 1, 1]), gl.STATIC_DRAW);
  const texture = gl.createTexture();
  gl.bindTexture(gl.TEXTURE_2D, texture);
  // NPOT textures in WebGL1 need clamping and no mipmaps.
  for (const [k, v] of [[gl.TEXTURE_MIN_FILTER, gl.LINEAR], [gl.TEXTURE_MAG_FILTER, gl.LINEAR], [gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE], [gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE]]) gl.texParameteri(gl.TEXTURE_2D, k, v);
  d = { program, quad, texture, p: gl.getAttribLocation(program, 'p'), bgra: gl.getUniformLocation(program, 'bgra') };
  glDrawers.set(gl, d);
  return d;
}

// Uploads with `upload(gl)` into the drawer's texture and draws it over the whole canvas. The
// page's own GL state (program, buffers, texture unit 0, viewport) is changed; a page that
// mixes its own drawing with drawTo sets its state again after.
function drawTexture(gl, width, height, bgra, upload) {
  const d = glDrawer(gl);
  gl.useProgram(d.program);
  gl.activeTexture(gl.TEXTURE0);
  gl.bindTexture(gl.TEXTURE_2D, d.texture);
  gl.pixelStorei(gl.UNPACK_ALIGNMENT, 1);
  upload(gl);
  gl.bindBuffer(gl.ARRAY_BUFFER, d.quad);
  gl.enableVertexAttribArray(d.p);
  gl.vertexAttribPointer(d.p, 2, gl.FLOAT, false, 0, 0);
  gl.uniform1i(d.bgra, bgra ? 1 : 0);
  gl.viewport(0, 0, width, height);
  gl.drawArrays(gl.TRIANGLE_STRIP, 0, 4);
}

const bgraScratch = new WeakMap();
function swapRB(pixels, key) {
  let out = bgraScratch.get(key);
  if (!out || out.length !== pixels.length) {
    out = new Uint8Array(pixels.length);
    bgraScratch.set(key, out);
  }
  for (let i = 0; i < pixels.length; i += 4) {
    out[i] = pixels[i + 2];
    out[i + 1] = pixels[i + 1];
    out[i + 2] = pixels[i];
    out[i + 3] = pixels[i + 3];
  }
  return out;
}

// How long a receive whose body ended between two records waits for syncd to say whether the
// stream closed (FrameStream._lostConnection). A syncd that was killed refuses at once; this bounds
// a hung one.
const END_PROBE_MS = 5000;

class FrameStream {
  constructor(name, ticket, o, resumed = null) {
    this.name = name;
    this.ticket = ticket;
    this._options = o;
    this.credit = o.credit ?? 2;
    this.connection = o.connection ?? defaultConnection;
    this.base = httpBase(o.base ?? this.connection?.httpBase ?? globalThis.location?.origin ?? 'http://127.0.0.1:54997');
    this.autoCredit = o.autoCredit ?? true;
    this.receiver = null;
    this.response = null;
    this._abort = new AbortController();
    if (o.signal) {
      if (o.signal.aborted) this._abort.abort(o.signal.reason);
      else o.signal.addEventListener('abort', () => this._abort.abort(o.signal.reason), { once: true });
    }
    // A resumed receive counts on from the one it resumes (resumes: how many came before).
    this.counters = resumed ? { ...resumed, resumes: resumed.resumes + 1 } : { frames: 0, bytes: 0, droppedBefore: 0, creditsGranted: 0, reads: 0, creditFailures: 0, resumes: 0 };
    this.decode = o.decode ?? true;
    this.decodeTimeoutMs = o.decodeTimeoutMs ?? 500;
    this._decoder = null; // an AccessUnitDecoder once an h264 record arrives
    this._iter = null;
  }

  /** Opens the HTTP stream (done by the first next(); call it to see HTTP errors early). */
  async open() {
    if (this.response) return this.response;
    let res;
    try {
      res = await fetch(streamUrl(this.base, this.name, this.ticket, this.credit), { cache: 'no-store', signal: this._abort.signal });
    } catch (e) {
      if (this._abort.signal.aborted) throw new SyncError('aborted', 'receive aborted', { cause: e });
      throw new SyncError('network', `GET /streams/${this.name} failed: ${e?.message ?? e}`, { cause: e });
    }
    if (!res.ok) {
      const body = await res.text().catch(() => '');
      let code = res.status === 403 ? 'forbidden' : res.status === 404 ? 'not_found' : 'http_error';
      let message = body.trim() || `HTTP ${res.status}`;
      try {
        const j = JSON.parse(body);
        if (j && typeof j.code === 'string') code = j.code;
        if (j && typeof j.message === 'string') message = j.message;
      } catch { /* plain text body */ }
      throw new SyncError(code, message, { status: res.status });
    }
    const receiver = res.headers.get('X-Sync-Receiver');
    this.receiver = receiver === null ? null : /^\d+$/.test(receiver) ? Number(receiver) : receiver;
    this.response = res;
    return res;
  }

  [Symbol.asyncIterator]() {
    if (!this._iter) this._iter = this._frames();
    return this._iter;
  }

  next() {
    return this[Symbol.asyncIterator]().next();
  }

  /**
   * The stream as a ReadableStream of WebCodecs VideoFrames (where the browser has them):
   * each record becomes a VideoFrame (RGBA, BGRA, NV12 or I420; `timestamp` is the capture
   * time in µs) that the reader owns and must close(). The VideoFrame holds its own copy, so
   * credit goes back as soon as it is made. Cancelling the stream ends the receive.
   */
  videoFrames() {
    if (typeof VideoFrame !== 'function') throw new SyncError('unsupported_format', 'this browser has no WebCodecs VideoFrame; iterate the frames instead');
    const formats = { rgba8: 'RGBA', bgra8: 'BGRA', nv12: 'NV12', i420: 'I420' };
    const iterator = this[Symbol.asyncIterator]();
    return new ReadableStream({
      pull: async (controller) => {
        const { value: f, done } = await iterator.next();
        if (done) {
          controller.close();
          return;
        }
        if (f.videoFrame) {
          controller.enqueue(f.videoFrame); // a decoded h264 picture: the reader owns it now
          return;
        }
        const format = formats[f.format];
        if (!format) throw new SyncError('unsupported_format', `no VideoFrame format for ${f.format}`);
        controller.enqueue(new VideoFrame(f.pixels, {
          format, codedWidth: f.width, codedHeight: f.height, timestamp: f.captureTimeUs,
          layout: f.planes.map((p) => ({ offset: p.offset, stride: p.stride })),
        }));
      },
      cancel: () => this.close(),
    }, { highWaterMark: 1 });
  }

  /** Ends the stream (the server sees the receiver go away). */
  close() {
    this._abort.abort();
    if (this._iter) this._iter.return?.();
  }

  /**
   * A new receive of the same stream with the same ticket and options, for after this one
   * ended with `disconnected` (or was closed): a new `GET /streams/{name}`, which spends one
   * more use of the ticket, so it needs a ticket made with `uses` to spare (a spent one gets
   * `forbidden`). Frames go on from what syncd has now (the new records' droppedBefore starts
   * at 0); an h264 stream is decoded again from its next key frame. Counters carry on, with
   * `resumes` counting. This one is closed first if it is still open.
   */
  resume() {
    this.close();
    return new FrameStream(this.name, this.ticket, this._options, this.counters);
  }

  stats() {
    return { ...this.counters, receiver: this.receiver };
  }

  // An h264 record: decoded, and its pictures (usually one, this unit's) yielded; or, with
  // decode off, the access unit yielded as it is.
  async *_h264Frames(h, au) {
    if (!this.decode) {
      yield new Frame(h, au);
      return;
    }
    if (!this._decoder) {
      if (typeof VideoDecoder !== 'function' || typeof EncodedVideoChunk !== 'function') {
        throw new SyncError('unsupported_format', 'decoding h264 needs WebCodecs (VideoDecoder); receive with decode: false for the access units');
      }
      this._decoder = new AccessUnitDecoder(this.counters);
    }
    const dec = this._decoder;
    if (dec.decode(h, au)) await dec.wait(this.decodeTimeoutMs);
    for (let out = dec.take(); out; out = dec.take()) {
      yield new Frame(out.header, out.header === h ? au : EMPTY_BYTES, out.frame);
    }
  }

  _grant() {
    if (!this.autoCredit || this.receiver === null) return;
    const c = this.connection;
    if (c && c.connected && c.grantCredit(this.receiver, 1)) {
      ++this.counters.creditsGranted;
      return;
    }
    fetch(creditUrl(this.base, this.name, this.receiver, 1), { method: 'POST', cache: 'no-store' })
      .then((r) => { if (r.ok) ++this.counters.creditsGranted; else ++this.counters.creditFailures; })
      .catch(() => { ++this.counters.creditFailures; });
  }

  _disconnected(reason, message, cause) {
    return new SyncError('disconnected', message, { details: { reason, receiver: this.receiver, frames: this.counters.frames }, cause });
  }

  // The body ended after a complete record. syncd ends it there when the stream closed, but the
  // body is close-delimited (no Content-Length, no chunks: docs/protocol.md), so a connection that
  // went away between two records (syncd killed, a proxy or the network cutting it) ends the very
  // same way. syncd is asked, once: no answer means it went away, a stream of this name still
  // open means the connection did; either is a 'disconnected' error (returned), and a stream no
  // longer open is the clean end (null). A syncd that answers /stats with an error, or a document
  // without streams, cannot tell, and the end stays clean as before.
  async _lostConnection() {
    const probe = new AbortController();
    const timer = setTimeout(() => probe.abort(), END_PROBE_MS);
    const onAbort = () => probe.abort();
    this._abort.signal.addEventListener('abort', onAbort, { once: true });
    try {
      const r = await fetch(`${this.base}/stats`, { cache: 'no-store', signal: probe.signal });
      if (!r.ok) return null;
      const stats = await r.json();
      if (!Array.isArray(stats?.streams)) return null;
      if (!stats.streams.some((x) => x.name === this.name && x.open)) return null;
      return this._disconnected('stream_open', `the stream's connection ended while ${this.name} is still open`);
    } catch (e) {
      if (this._abort.signal.aborted) throw new SyncError('aborted', 'receive aborted', { cause: e });
      return this._disconnected('syncd_unreachable', `the stream's connection ended and syncd does not answer at ${this.base}`, e);
    } finally {
      clearTimeout(timer);
      this._abort.signal.removeEventListener('abort', onAbort);
    }
  }

  async *_frames() {
    const res = await this.open();
    const reader = res.body.getReader({ mode: 'byob' });
    let header = new ArrayBuffer(RECORD_HEADER_BYTES);
    let pixels = new ArrayBuffer(0);
    // Reads exactly n bytes into buf (transferred by every BYOB read); returns the buffer, or
    // null at a clean end of stream before the first byte.
    const readExactly = async (buf, n) => {
      let filled = 0;
      while (filled < n) {
        let r;
        try {
          r = await reader.read(new Uint8Array(buf, filled, n - filled));
        } catch (e) {
          if (this._abort.signal.aborted) throw new SyncError('aborted', 'receive aborted', { cause: e });
          // The connection broke (reset, or ended where HTTP says it cannot): gone, not closed.
          throw this._disconnected('read_failed', `stream read failed: ${e?.message ?? e}`, e);
        }
        ++this.counters.reads;
        if (r.value) buf = r.value.buffer;
        if (r.done) {
          if (filled === 0) return { buf, done: true };
          // syncd ends a closed stream's response after a complete record, never inside one.
          throw this._disconnected('truncated', `the stream's connection ended inside a record (${filled} of ${n} bytes)`);
        }
        filled += r.value.byteLength;
      }
      return { buf, done: false };
    };
    try {
      for (;;) {
        const hr = await readExactly(header, RECORD_HEADER_BYTES);
        header = hr.buf;
        if (hr.done) {
          const lost = await this._lostConnection();
          if (lost) throw lost;
          // The stream ended: pictures the decoder still holds are the last frames.
          if (this._decoder) {
            await this._decoder.flush();
            for (let out = this._decoder.take(); out; out = this._decoder.take()) yield new Frame(out.header, EMPTY_BYTES, out.frame);
          }
          return;
        }
        const h = parseRecordHeader(header);
        if (pixels.byteLength < h.payloadBytes) pixels = new ArrayBuffer(h.payloadBytes);
        const pr = await readExactly(pixels, h.payloadBytes);
        pixels = pr.buf;
        if (pr.done) throw this._disconnected('truncated', "the stream's connection ended after a record header");
        ++this.counters.frames;
        this.counters.bytes += RECORD_HEADER_BYTES + h.payloadBytes;
        this.counters.droppedBefore += h.droppedBefore;
        if (h.format === FORMAT_CODES.h264) {
          yield* this._h264Frames(h, new Uint8Array(pixels, 0, h.payloadBytes));
          // Its pictures (if any) were consumed: one more record may come.
          this._grant();
          continue;
        }
        yield new Frame(h, new Uint8Array(pixels, 0, h.payloadBytes));
        // The consumer has finished with that frame: one more may come.
        this._grant();
      }
    } finally {
      this._decoder?.close();
      this._decoder = null;
      try {
        await reader.cancel();
      } catch { /* already closed */ }
      reader.releaseLock?.();
    }
  }
}

const EMPTY_BYTES = new Uint8Array(0);

/**
 * Decodes an h264 stream's access units in order with a WebCodecs VideoDecoder (Annex B, so no
 * description), starting at a key frame: deltas before the first one, or after frames syncd
 * dropped for this receiver (their references are gone), are dropped and counted (awaitingKey).
 * The codec string comes from the key frame's SPS. Pictures are matched back to their records by
 * timestamp (the capture time). Internal to receive().
 */
class AccessUnitDecoder {
  constructor(counters) {
    this.counters = counters;
    // A resumed receive's decoder counts on from the last one's.
    counters.decoded ??= 0;
    counters.awaitingKey ??= 0;
    counters.decodeErrors ??= 0;
    counters.decodeTimeouts ??= 0;
    this.decoder = null;
    this.codec = null;
    this.needKey = true;
    this.outputs = []; // VideoFrames out of the decoder, not yet taken
    this.headers = new Map(); // timestamp -> record header, for units inside the decoder
    this._wake = null;
  }

  /** Hands a unit to the decoder; false when it was dropped (no key frame to start from yet). */
  decode(h, au) {
    const { key, codec } = inspectAnnexB(au);
    if (h.droppedBefore > 0) this.needKey = true;
    if (this.needKey && !key) {
      ++this.counters.awaitingKey;
      return false;
    }
    try {
      if (!this.decoder || this.decoder.state === 'closed' || (key && codec && codec !== this.codec)) this._configure(codec ?? this.codec ?? 'avc1.42e01f');
      this.headers.set(h.captureTimeUs, h);
      this.decoder.decode(new EncodedVideoChunk({ type: key ? 'key' : 'delta', timestamp: h.captureTimeUs, data: au }));
    } catch (e) {
      this._error(e);
      return false;
    }
    this.needKey = false;
    return true;
  }

  _configure(codec) {
    if (!this.decoder || this.decoder.state === 'closed') {
      const decoder = new VideoDecoder({
        output: (f) => {
          if (decoder !== this.decoder) {
            f.close();
            return;
          }
          this.outputs.push(f);
          this._wake?.();
        },
        error: (e) => {
          if (decoder === this.decoder) this._error(e);
        },
      });
      this.decoder = decoder;
    }
    this.decoder.configure({ codec, optimizeForLatency: true });
    this.codec = codec;
  }

  _error(e) {
    ++this.counters.decodeErrors;
    this.lastError = e;
    const d = this.decoder;
    this.decoder = null;
    try {
      if (d && d.state !== 'closed') d.close();
    } catch { /* closed */ }
    this.headers.clear();
    this.needKey = true;
    this._wake?.();
  }

  /** Waits until a picture is out, or `ms` passed (counted: the next record is read anyway). */
  async wait(ms) {
    if (this.outputs.length || !this.decoder) return;
    const got = await new Promise((resolve) => {
      const timer = setTimeout(() => {
        this._wake = null;
        resolve(false);
      }, ms);
      this._wake = () => {
        clearTimeout(timer);
        this._wake = null;
        resolve(true);
      };
    });
    if (!got) ++this.counters.decodeTimeouts;
  }

  /** The oldest picture not yet taken, with its record's header: `{frame, header}`, or null. */
  take() {
    const frame = this.outputs.shift();
    if (!frame) return null;
    ++this.counters.decoded;
    let header = null;
    // Units older than this picture gave none: forget them.
    for (const [ts, h] of this.headers) {
      if (ts > frame.timestamp) break;
      this.headers.delete(ts);
      if (ts === frame.timestamp) header = h;
    }
    header ??= { sequence: -1, captureTimeUs: frame.timestamp, publishTimeNs: 0, width: frame.displayWidth, height: frame.displayHeight, format: FORMAT_CODES.h264, flags: 0, contentHash: null, payloadBytes: 0, droppedBefore: 0 };
    return { frame, header };
  }

  async flush() {
    if (!this.decoder || this.decoder.state !== 'configured') return;
    try {
      await this.decoder.flush();
    } catch { /* closed meanwhile */ }
  }

  close() {
    for (const f of this.outputs.splice(0)) f.close();
    const d = this.decoder;
    this.decoder = null;
    try {
      if (d && d.state !== 'closed') d.close();
    } catch { /* closed */ }
  }
}

// ------------------------------------------------------------------------------------------------
// WHEP playback (docs/whep.md, docs/web.md "Watching a stream over WHEP")

/** The WHEP endpoint of a stream: `http(s)://host:port/whep/NAME`. */
export function whepUrl(base, name) {
  return `${httpBase(base)}/whep/${encodeURIComponent(name)}`;
}

// A refused WHEP POST as a SyncError, by its status (docs/whep.md, "The endpoint").
async function whepRefusal(res) {
  let body = '';
  try { body = (await res.text()).trim(); } catch { /* no body */ }
  const s = res.status;
  const details = { status: s, body };
  if (s === 403) return new SyncError('forbidden', `WHEP refused (403): the ticket is missing, unknown, expired, spent or for another stream, or this page's Origin is not allowed${body ? `: ${body}` : ''}`, { status: s, details });
  if (s === 404) return new SyncError('not_found', `WHEP: no such stream${body ? ` (${body})` : ''}`, { status: s, details });
  if (s === 400) return new SyncError('bad_offer', body || 'bad offer', { status: s, details });
  if (s === 503) {
    const ra = Number.parseInt(res.headers.get('Retry-After') ?? '', 10);
    const retryAfter = Number.isFinite(ra) && ra >= 0 ? ra : undefined;
    details.retryAfter = retryAfter;
    const err = new SyncError('busy', `WHEP: syncd is serving all the viewers it can${retryAfter !== undefined ? `; retry after ${retryAfter} s` : ''}`, { status: s, details });
    if (retryAfter !== undefined) err.retryAfter = retryAfter;
    return err;
  }
  return new SyncError('http_error', `WHEP: HTTP ${s}${body ? `: ${body}` : ''}`, { status: s, details });
}

/**
 * Plays a stream in `video` over WHEP (RFC 9725, docs/whep.md): a recvonly RTCPeerConnection
 * (video, and audio unless `audio: false`), its offer POSTed to `/whep/NAME` with a ticket as the
 * bearer token, the answer set, the tracks on the element. The ticket is `options.ticket`, or one
 * made through `options.connection` (default the default connection; without one, a connection
 * of its own to `base`, closed once the ticket is spent). Resolves with a WhepSession once ICE
 * and DTLS are up; rejects with a SyncError (forbidden, not_found, unknown_stream, busy,
 * bad_offer, http_error, network, webrtc_failed, aborted, ...).
 */
export async function watch(streamName, video, options = {}) {
  const { ticket: givenTicket, connection, base, audio = true, timeoutMs = 10000, signal, play = true, rtcConfiguration } = options;
  if (!validStreamName(streamName)) throw new SyncError('bad_message', `invalid stream name ${streamName}`);
  const aborted = () => new SyncError('aborted', 'watch aborted', { cause: signal?.reason });
  if (signal?.aborted) throw aborted();
  const loc = globalThis.location;
  const httpRoot = base !== undefined ? httpBase(base)
    : connection?.httpBase ?? defaultConnection?.httpBase ?? (loc ? loc.origin : 'http://127.0.0.1:54997');
  const url = whepUrl(httpRoot, streamName);

  // The ticket: given, or asked for by the stream's name (ticket.create takes a name).
  let ticket = givenTicket;
  let own = null;
  if (ticket === undefined) {
    let conn = connection ?? (base === undefined ? defaultConnection : null);
    if (!conn) {
      own = new SyncConnection(httpRoot, { reconnect: false, signal });
      conn = await own.ready;
    }
    try {
      if (conn.state === 'connecting') await conn.ready; // a connect() still on its way
      ({ ticket } = await conn.createTicket(streamName, { uses: 1 }));
    } catch (e) {
      own?.close();
      throw e;
    }
  }

  const PC = options.RTCPeerConnection ?? globalThis.RTCPeerConnection;
  if (typeof PC !== 'function') {
    own?.close();
    throw new SyncError('webrtc_failed', 'this browser has no RTCPeerConnection');
  }
  const pc = new PC(rtcConfiguration);
  const session = new WhepSession(streamName, url, pc, video);
  try {
    pc.addTransceiver('video', { direction: 'recvonly' });
    if (audio) pc.addTransceiver('audio', { direction: 'recvonly' });
    pc.ontrack = (e) => session._onTrack(e);
    // syncd is ICE-lite with one host candidate: the offer need not wait for gathering.
    await pc.setLocalDescription(await pc.createOffer());
    if (signal?.aborted) throw aborted();
    session._t0 = performance.now();
    let res;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${ticket}` },
        body: pc.localDescription.sdp,
        cache: 'no-store',
        signal,
      });
    } catch (e) {
      if (signal?.aborted) throw aborted();
      throw new SyncError('network', `WHEP POST to ${url} failed (nothing answers there, or a cross-origin page syncd does not allow)`, { cause: e });
    } finally {
      own?.close(); // the ticket is spent (or refused): the connection made for it is done
    }
    if (res.status !== 201) throw await whepRefusal(res);
    const location = res.headers.get('Location');
    if (location) session.location = new URL(location, url).href;
    const answer = await res.text();
    try {
      await pc.setRemoteDescription({ type: 'answer', sdp: answer });
    } catch (e) {
      throw new SyncError('webrtc_failed', `syncd's answer was not taken: ${e?.message ?? e}`, { cause: e, details: { stage: 'answer' } });
    }
    session.audio = /^m=audio [1-9]/m.test(answer);
    await session._connected(timeoutMs, signal, aborted);
  } catch (e) {
    own?.close();
    const err = e instanceof SyncError ? e : new SyncError('webrtc_failed', String(e?.message ?? e), { cause: e });
    await session._teardown(err, 'failed');
    throw err;
  }
  if (play && video && typeof video.play === 'function') {
    // A page without a user gesture plays only muted media: the caller decides muted.
    video.play().catch((e) => { session.playError = e; session.emit('play-error', e); });
  }
  return session;
}

/** One WHEP viewing session (watch()). Events: `ended` ({reason, error}), `play-error`. */
export class WhepSession extends Emitter {
  constructor(stream, url, pc, video) {
    super();
    this.stream = stream;
    this.url = url;
    this.location = null;
    this.pc = pc;
    this.video = video ?? null;
    this.audio = false;
    this.state = 'connecting';
    this.playError = null;
    this._t0 = 0;
    this._connectMs = null;
    this._mediaStream = null;
    this._deleteStatus = null;
    this.ended = new Promise((resolve) => { this._endedResolve = resolve; });
  }

  _onTrack(e) {
    if (!this._mediaStream) this._mediaStream = e.streams?.[0] ?? new MediaStream();
    if (!this._mediaStream.getTracks().includes(e.track)) this._mediaStream.addTrack(e.track);
    if (this.video && this.video.srcObject !== this._mediaStream) this.video.srcObject = this._mediaStream;
  }

  // Resolves when the peer connection is connected (ICE and DTLS); rejects with webrtc_failed
  // when it fails or takes longer than timeoutMs.
  _connected(timeoutMs, signal, aborted) {
    const pc = this.pc;
    return new Promise((resolve, reject) => {
      let timer = null;
      const done = (err) => {
        clearTimeout(timer);
        pc.removeEventListener('connectionstatechange', check);
        signal?.removeEventListener('abort', onAbort);
        if (err) return reject(err);
        this.state = 'connected';
        this._connectMs = performance.now() - this._t0;
        pc.addEventListener('connectionstatechange', () => {
          if (pc.connectionState === 'failed') {
            this._teardown(new SyncError('webrtc_failed', 'the WebRTC connection to syncd failed (consent lost: the session ended or the path went away)', { details: { stage: 'connection' } }), 'failed');
          } else if (pc.connectionState === 'closed') {
            this._teardown(null, 'closed');
          }
        });
        resolve();
      };
      const check = () => {
        const s = pc.connectionState;
        if (s === 'connected') done();
        else if (s === 'failed' || s === 'closed') done(new SyncError('webrtc_failed', `ICE/DTLS with syncd ${s} (is syncd's --host an address this browser reaches?)`, { details: { stage: 'connect', state: s } }));
      };
      const onAbort = () => done(aborted());
      timer = setTimeout(() => done(new SyncError('webrtc_failed', `ICE/DTLS with syncd not connected within ${timeoutMs} ms (state ${pc.connectionState}, ICE ${pc.iceConnectionState})`, { details: { stage: 'connect', state: pc.connectionState, timeoutMs } })), timeoutMs);
      pc.addEventListener('connectionstatechange', check);
      signal?.addEventListener('abort', onAbort, { once: true });
      check();
    });
  }

  async _teardown(error, reason) {
    if (this.state === 'ended') return;
    this.state = 'ended';
    const loc = this.location;
    this.location = null;
    if (loc) {
      try {
        this._deleteStatus = (await fetch(loc, { method: 'DELETE', cache: 'no-store' })).status;
      } catch {
        this._deleteStatus = null; // syncd gone: its session ends by consent (30 s)
      }
    }
    try { this.pc.close(); } catch { /* closed */ }
    if (this.video && this._mediaStream && this.video.srcObject === this._mediaStream) this.video.srcObject = null;
    for (const t of this._mediaStream?.getTracks() ?? []) t.stop();
    const detail = { reason, error: error ?? null, deleteStatus: this._deleteStatus };
    this._endedResolve(detail);
    this.emit('ended', detail);
  }

  /** DELETEs the session resource and closes the peer connection; resolves with `ended`'s detail. */
  async stop() {
    await this._teardown(null, 'stopped');
    return this.ended;
  }

  /** Counters from the peer connection's getStats(): the video (and audio) received. */
  async stats() {
    const out = { state: this.state, connectionState: this.pc.connectionState, connectMs: this._connectMs,
      video: null, audio: null, srtpCipher: null, roundTripTimeMs: null };
    if (this.state === 'ended') return out;
    for (const r of (await this.pc.getStats()).values()) {
      if (r.type === 'inbound-rtp' && r.kind === 'video') {
        out.video = { packetsReceived: r.packetsReceived ?? 0, packetsLost: r.packetsLost ?? 0, bytesReceived: r.bytesReceived ?? 0,
          framesReceived: r.framesReceived ?? 0, framesDecoded: r.framesDecoded ?? 0, framesDropped: r.framesDropped ?? 0,
          keyFramesDecoded: r.keyFramesDecoded ?? 0, frameWidth: r.frameWidth ?? 0, frameHeight: r.frameHeight ?? 0,
          framesPerSecond: r.framesPerSecond ?? 0, nackCount: r.nackCount ?? 0, pliCount: r.pliCount ?? 0,
          jitterBufferDelayMs: r.jitterBufferEmittedCount ? (r.jitterBufferDelay / r.jitterBufferEmittedCount) * 1000 : null };
      } else if (r.type === 'inbound-rtp' && r.kind === 'audio') {
        out.audio = { packetsReceived: r.packetsReceived ?? 0, packetsLost: r.packetsLost ?? 0, bytesReceived: r.bytesReceived ?? 0,
          concealedSamples: r.concealedSamples ?? 0, totalSamplesReceived: r.totalSamplesReceived ?? 0, audioLevel: r.audioLevel ?? null };
      } else if (r.type === 'transport') {
        out.srtpCipher = r.srtpCipher ?? null;
      } else if (r.type === 'candidate-pair' && r.nominated && r.state === 'succeeded' && r.currentRoundTripTime !== undefined) {
        out.roundTripTimeMs = r.currentRoundTripTime * 1000;
      }
    }
    return out;
  }
}
