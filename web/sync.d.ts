// TypeScript declarations for web/sync.js (docs/web.md, docs/protocol.md).

export const PROTOCOL_VERSION: 1;
export const FRAME_MAGIC: number;
export const FRAME_HEADER_BYTES: 56;
export const FRAME_FLAG_CONTENT_HASH: 1;
/** Frame header flag: the pixels carry the sequence's column marker (drawColumnMarker). */
export const FRAME_FLAG_COLUMN_MARKER: 2;
export const RECORD_MAGIC: number;
export const RECORD_HEADER_BYTES: 64;
export const NAUD_MAGIC: number;
export const NAUD_HEADER_BYTES: 64;
export const MARKER_BYTES: 16;
/** Pixel formats (docs/protocol.md, "Pixel formats"). rgba8/bgra8: 4 bytes a pixel, one plane;
 * nv12, i420: 4:2:0, 1.5 bytes a pixel, even width and height. */
export type PixelFormat = 'rgba8' | 'bgra8' | 'nv12' | 'i420';
/** Wire values of the frame header, the shared-memory ring and HTTP records (0 in a frame
 * header: the stream's own format). */
export type PixelFormatCode = 1 | 2 | 3 | 4;
/** A stream's format: a pixel format, or h264 (encoded: one Annex B access unit a frame, of its
 * own size, 1 up to h264AccessUnitLimit(width, height)). */
export type StreamFormat = PixelFormat | 'h264';
/** Wire values of every stream format (5: h264). */
export type StreamFormatCode = PixelFormatCode | 5;
export const FORMAT_CODES: Readonly<{ rgba8: 1; bgra8: 2; nv12: 3; i420: 4; h264: 5 }>;
export const FORMAT_NAMES: Readonly<Record<number, StreamFormat>>;

/** One plane of a frame: bytes from the frame's start, bytes from row to row, and rows. Planes
 * are packed back to back with no row padding. */
export interface PlaneLayout { offset: number; stride: number; rows: number }
export interface FrameLayout { format: PixelFormat; width: number; height: number; planes: PlaneLayout[]; bytes: number }
/** null for an unknown format or a size that does not suit it (zero, odd sides for 4:2:0). */
export function frameLayout(format: PixelFormat | number, width: number, height: number): FrameLayout | null;

/** Codes syncd sends in an `error` message (docs/protocol.md, "Errors"). */
export type ServerErrorCode =
  | 'bad_json' | 'bad_message' | 'unknown_type' | 'protocol_unsupported' | 'hello_required'
  | 'stream_name_taken' | 'bad_geometry' | 'bad_slots' | 'stream_limit' | 'connection_stream_limit' | 'connection_memory_limit' | 'no_memory'
  | 'too_many_tickets' | 'ticket_unavailable' | 'unknown_stream' | 'not_stream_owner'
  | 'bad_frame_header' | 'frame_size_mismatch' | 'geometry_mismatch'
  | 'unknown_receiver' | 'unknown_topic' | 'topic_unavailable'
  | 'audio_busy' | 'audio_in_use' | 'audio_unavailable';

/** Codes the client itself gives an error, by what happened. */
export type ClientErrorCode =
  /** connect(): nothing answers at syncd's address (not running, wrong port). */
  | 'syncd_unreachable'
  /** connect(): syncd answered but refused this page: its Origin (or Host) is not allowed; start
   * syncd with `--allow-origin <the page's origin>`. */
  | 'origin_refused'
  /** No reply (or no welcome) in time. */
  | 'timeout'
  /** An AbortSignal fired. */
  | 'aborted'
  /** close() was called before syncd welcomed the connection. */
  | 'closed'
  /** The control connection went down (pending requests reject with it); or receive(): the
   * stream's connection went away while the stream had not closed (syncd stopped, the connection
   * was cut; `details.reason` says how it looked: ReceiveDisconnectReason). Retryable: a
   * FrameStream resumes with resume() while its ticket has a use left. */
  | 'disconnected'
  /** A request while not connected. */
  | 'not_connected'
  | 'connect_failed'
  /** receive() or watch(): HTTP 403, the ticket is missing, unknown, expired, spent, or for
   * another stream, or the page's Origin is not allowed. */
  | 'forbidden'
  /** receive() or watch(): HTTP 404, no such stream (it closed, or never opened; for watch() also
   * syncd run with --no-whep). */
  | 'not_found'
  /** receive(): another HTTP status (`status` holds it). */
  | 'http_error'
  /** receive() or watch(): the request for the stream failed (nothing answers at syncd's
   * address), or a cross-origin page without CORS. */
  | 'network'
  /** watch(): HTTP 503, syncd serves all the WHEP viewers it can (16 sessions, or 4 streams
   * watched); `retryAfter` holds the Retry-After seconds. Retryable. */
  | 'busy'
  /** watch(): HTTP 400, syncd cannot answer this browser's offer (`details.body` says why, e.g.
   * `bad offer: no_h264`: no H.264 packetization-mode 1). */
  | 'bad_offer'
  /** watch(): no RTCPeerConnection, syncd's answer not taken, or ICE/DTLS did not connect within
   * `timeoutMs` (usually syncd's --host is not an address this browser reaches). Also an
   * `ended` session's error when the connection failed later. Not retryable: the path needs a
   * change. */
  | 'webrtc_failed'
  /** @deprecated No longer given: receive() reports a body that ends inside a record as
   * 'disconnected' (details.reason 'truncated'). Kept so that code comparing with it compiles. */
  | 'truncated'
  | 'bad_record' | 'bad_reply' | 'bad_frame_header' | 'bad_audio_packet' | 'not_open' | 'no_context'
  /** Frame.drawTo of a 4:2:0 frame without WebCodecs. */
  | 'unsupported_format'
  /** Frame.drawTo on a canvas with neither a 2D nor a WebGL context. */
  | 'unsupported_canvas'
  /** publishCanvas with codec 'h264': this browser's VideoEncoder does not take the config. */
  | 'unsupported_codec'
  /** An encoded publisher's VideoFrame or VideoEncoder failed (also counted as a drop). */
  | 'encode_failed'
  | 'webgl_failed'
  /** publishCanvas: the publish Worker failed after it started (before, the page sends). */
  | 'worker_failed';

export type SyncErrorCode = ServerErrorCode | ClientErrorCode;

/** An error from syncd (`code` is the server's stable code), from HTTP (`status`), or the
 * client's own (ClientErrorCode). */
/** The codes that may go away if the same thing is tried again later, unchanged (syncd not up
 * yet, a connection lost, a limit that frees); every other code needs a change first. */
export declare const RETRYABLE_CODES: ReadonlySet<SyncErrorCode>;

export class SyncError extends Error {
  constructor(code: SyncErrorCode, message?: string, options?: { status?: number; details?: unknown; cause?: unknown });
  readonly name: 'SyncError';
  /** Whether trying the same thing again later may succeed (RETRYABLE_CODES has the code). */
  readonly retryable: boolean;
  code: SyncErrorCode;
  /** HTTP status, for errors of the HTTP stream and of WHEP. */
  status?: number;
  /** 'busy': the seconds syncd's Retry-After asked for. */
  retryAfter?: number;
  /** The server's error message object, when it came from syncd. */
  details?: unknown;
}

type Bytes = ArrayBuffer | ArrayBufferView | DataView;

export interface FrameHeaderFields {
  streamId: number;
  flags?: number;
  sequence: number | bigint;
  captureTimeUs?: number | bigint;
  width?: number;
  height?: number;
  /** 0 = the stream's, else a FORMAT_CODES value (PixelFormatCode); parseFrameHeader returns
   * whatever the header holds. */
  format?: number;
  contentHash?: number | bigint;
}
export function writeFrameHeader(target: Bytes, fields: FrameHeaderFields, offset?: number): void;
export function parseFrameHeader(bytes: Bytes, offset?: number): Required<Omit<FrameHeaderFields, 'sequence' | 'captureTimeUs' | 'contentHash'>> & { sequence: number; captureTimeUs: number; contentHash: bigint };

export function stampMarker(pixels: Bytes, sequence: number | bigint, offset?: number): void;
export function readMarker(pixels: Bytes, offset?: number): { sequence: number; valid: boolean };

export interface RecordHeader {
  sequence: number;
  captureTimeUs: number;
  /** When syncd had the whole frame (record offset 24, "accept timestamp"), syncd's
   * CLOCK_MONOTONIC in ns (exact below 2^53, i.e. 104 days of uptime). */
  publishTimeNs: number;
  width: number;
  height: number;
  /** A FORMAT_CODES value; payloadBytes is frameLayout(format, width, height).bytes. */
  format: number;
  flags: number;
  contentHash: bigint | null;
  payloadBytes: number;
  droppedBefore: number;
}
export function parseRecordHeader(bytes: Bytes, offset?: number): RecordHeader;
export function writeRecordHeader(target: Bytes, fields: Partial<RecordHeader> & { sequence: number | bigint; width: number; height: number }, offset?: number): void;

export interface AudioPacket {
  channels: number;
  sampleRate: number;
  layout: 'interleaved' | 'unknown';
  flags: number;
  /** Frames are missing right before firstFrame. */
  discontinuity: boolean;
  frames: number;
  firstFrame: number;
  droppedFrames: number;
  gapFrames: number;
  timestampNs: number;
  sequence: number;
  xruns: number;
  /** frames x channels, interleaved. */
  samples: Float32Array;
}
export function parseNaudPacket(bytes: Bytes): AudioPacket;

export interface BackoffOptions { initialMs?: number; maxMs?: number; factor?: number; jitter?: number }
export function backoffDelay(attempt: number, options?: BackoffOptions, random?: () => number): number;

export const messages: Readonly<{
  hello(client?: string): { type: 'hello'; protocol: 1; client: string };
  streamOpen(c: { name: string; width: number; height: number; format?: StreamFormat; fps?: number; slots?: number; feedback?: boolean }): object;
  streamClose(stream: number): { type: 'stream.close'; stream: number };
  ticketCreate(stream: number | string, o?: { uses?: number; ttl_s?: number }): { type: 'ticket.create'; stream: number | string; uses?: number; ttl_s?: number };
  credit(receiver: number | string, frames?: number): { type: 'credit'; receiver: number | string; frames: number };
  streamReport(stream: number, c: { offered: number; sent: number; inFlight?: number; dropped?: Record<string, number> }): { type: 'stream.report'; stream: number; offered: number; sent: number; in_flight: number; dropped: Record<string, number> };
  stats(): { type: 'stats' };
  ping(id: unknown): { type: 'ping'; id: unknown };
  subscribe(topic: string): { type: 'subscribe'; topic: string };
  unsubscribe(topic: string): { type: 'unsubscribe'; topic: string };
  audioRead(o?: { max_frames?: number; min_frames?: number; timeout_ms?: number }): object;
  audioInfo(): { type: 'audio.info' };
}>;

export function validStreamName(name: unknown): boolean;
export function httpBase(url: string): string;
export function wsUrl(url: string): string;
export function streamUrl(base: string, name: string, ticket: string, credit?: number): string;
export function creditUrl(base: string, name: string, receiver: number | string, frames?: number): string;
export function flipRowsInPlace(bytes: Uint8Array, rowBytes: number, rows: number, scratch?: Uint8Array): void;
export function regionChecksum(pixels: Uint8Array | Uint8ClampedArray, width: number, x: number, y: number, w: number, h: number): number;

/** The largest access unit syncd takes into an h264 stream (its frame_bytes): width x height +
 * 2 x ceil(width / 2) x ceil(height / 2). */
export function h264AccessUnitLimit(width: number, height: number): number;
/** H.264 level as two hex digits (`avc1.42e0LL`): the lowest from 3.1 ('1f') that admits the
 * size, rate and bitrate ('20' 720p60, '28' 1080p30, '2a' 1080p60, '33' 2160p30, '34' 2160p60). */
export function h264Level(width: number, height: number, fps?: number, bitrate?: number): string;
/** The lowest bitrate stream.bitrate can set, 100 kbit/s. */
export const H264_MIN_BITRATE: 100000;
/** 0.1 bit a pixel a frame, within 250 kbit/s to 20 Mbit/s. */
export function defaultH264Bitrate(width: number, height: number, fps: number): number;
/** The VideoEncoderConfig of codec 'h264': constrained baseline `avc1.42e0LL`, Annex B, realtime. */
export function h264EncoderConfig(o: { width: number; height: number; fps?: number; bitrate?: number; maxBitrate?: number; hardwareAcceleration?: HardwareAcceleration }): VideoEncoderConfig;
export interface EncodeCapability {
  /** The browser's VideoEncoder takes `config`. */
  h264: boolean;
  /** What publishCanvas would encode with (null when unsupported). */
  config: VideoEncoderConfig | null;
  /** A hardware encoder takes it (`prefer-hardware` supported); null when unknown. */
  hardware: boolean | null;
}
/** Can this browser encode a canvas of this size and rate as H.264? */
export function encodeCapability(width: number, height: number, fps?: number): Promise<EncodeCapability>;

export const COLUMN_MARKER_BITS: 16;
export const COLUMN_MARKER_COLUMN: 8;
/** The marker's width in pixels, guard column included (136). */
export const COLUMN_MARKER_WIDTH: 136;
/** The 17 columns of a sequence's column marker (bit i in column i, then the black guard). */
export function columnMarkerColumns(sequence: number | bigint): Array<{ x: number; width: number; white: boolean }>;
/** Draws the column marker down `height` pixels from x = 0 (white #ffffff 1, black #000000 0). */
export function drawColumnMarker(ctx: CanvasRenderingContext2D | OffscreenCanvasRenderingContext2D, sequence: number | bigint, height: number): void;
/** Reads a column marker (the sequence's low 16 bits) as syncd does; null when there is none.
 * `plane`: a luma plane (pixelStep 1), or one channel of RGBA (pixelStep 4). */
export function readColumnMarker(plane: Uint8Array | Uint8ClampedArray, stride: number, width: number, height: number, pixelStep?: number): number | null;
/** key: the access unit has an IDR slice; codec: `avc1.PPCCLL` from its SPS, or null. */
export function inspectAnnexB(bytes: Bytes): { key: boolean; codec: string | null };
/** Why an encoded publisher skips a frame now (null: encode it). */
export function encodedAdmission(o: { open: boolean; bufferedAmount: number; maxBufferedBytes: number; encodeQueueSize: number; maxEncodeQueue: number }): null | 'not_open' | 'backpressure' | 'encoder_busy';

export interface Welcome {
  type: 'welcome';
  protocol: 1;
  server: string;
  capabilities: string[];
  publishers: string[];
  limits: { max_message_bytes: number; max_text_bytes: number };
  frame_header_bytes: number;
}

export interface StreamOpened {
  type: 'stream.opened'; stream: number; name: string; width: number; height: number;
  format: StreamFormat;
  /** The frame's planes in the format's order; frame_bytes is where the last one ends. */
  planes: PlaneLayout[];
  fps: number; slots: number; frame_bytes: number; header_bytes: number;
}

/** Receivers a ticket admits (1-16, default 1: a reload needs a use of its own) and how long it
 * lives (1-3600 s, default 60). */
export interface TicketOptions { uses?: number; ttlSeconds?: number }

/** syncd's `ticket` reply as sent (wire names). */
export interface Ticket { type: 'ticket'; stream: number; name: string; ticket: string; uses: number; expires_in_s: number }

/** syncd to an h264 stream's source (docs/protocol.md, "Messages from syncd to a stream's
 * source"): make the next frame a key frame. No reply. */
export interface StreamKeyframeMessage { type: 'stream.keyframe'; stream: number; reason: 'decoder' | 'relay' | 'whep' | 'consumer' }
/** syncd to an h264 stream's source: a target bitrate in bits/s, which the source follows up to its
 * own ceiling. No reply. */
export interface StreamBitrateMessage { type: 'stream.bitrate'; stream: number; bps: number }

export interface PoseEvent { type: 'pose'; seq: number; t_ns: number; q: [number, number, number, number]; ypr: [number, number, number]; discontinuityCount: number }
export interface PoseStatusEvent { type: 'pose.status'; source: string; connected: boolean; device: string; message: string }

export interface ConnectOptions {
  /** Name sent in hello. */
  client?: string;
  /** Reconnect after a loss (default true); hello is re-run and topics re-subscribed. */
  reconnect?: boolean;
  backoff?: BackoffOptions;
  /** A WebSocket implementation (Node: the `ws` package); default globalThis.WebSocket. */
  WebSocket?: unknown;
  requestTimeoutMs?: number;
  /** connect() settles within this (default 10000): welcomed, or rejected with
   * `syncd_unreachable`, `origin_refused`, `timeout`, ... Reconnecting starts only after a
   * first welcome. */
  timeoutMs?: number;
  /** Aborting it rejects a connect under way (`aborted`) or closes an open connection. */
  signal?: AbortSignal;
}

/** The event Sync objects dispatch (they are EventTargets); `detail` is what happened. */
export class SyncEvent<T = unknown> extends Event {
  constructor(type: string, detail: T);
  readonly detail: T;
}

/** Events of a SyncConnection, by type: the `detail` of each. */
export interface SyncConnectionEvents {
  open: { welcome: Welcome; reconnected: boolean };
  disconnect: SyncError;
  error: SyncError;
  'credit-error': SyncError;
  'frame-error': SyncError;
  reconnecting: { attempt: number; delayMs: number; error: SyncError };
  pose: PoseEvent;
  /** The head tracker's status (the wire message `pose.status`). */
  'pose-status': PoseStatusEvent;
  /** A message that answers no request: stream.keyframe and stream.bitrate among them. */
  message: StreamKeyframeMessage | StreamBitrateMessage | { type: string; [field: string]: unknown };
  binary: ArrayBuffer;
  /** Closed for good: after close() (no detail) or a failed connect (its error). */
  close: SyncError | undefined;
}

/** A stage's figures in /stats (docs/protocol.md, "Stages"). */
export interface StageStats { count: number; total_us?: number; mean_us?: number; max_us?: number; [field: string]: unknown }

/** One stream in /stats `streams` (docs/protocol.md, "Stats"). */
export interface StreamStats {
  id: number;
  name: string;
  open: boolean;
  width: number;
  height: number;
  format: PixelFormat | string;
  nominal_fps: number;
  slots: number;
  slots_in_use: number;
  frame_bytes: number;
  frames_offered: number;
  frames_accepted: number;
  frames_unique: number;
  /** Drops by reason (docs/protocol.md, "Accounting"). */
  frames_dropped: Record<string, number>;
  frames_dropped_total: number;
  complete_seconds: number;
  /** Complete seconds with fewer unique frames than low_rate_threshold (5/6 of nominal_fps). */
  low_rate_seconds: number;
  low_rate_threshold: number;
  last_second_unique_fps: number;
  min_second_unique_fps: number;
  recent_seconds_unique_fps: number[];
  last_publish_monotonic_ns: number;
  stages: { ingest_gap: StageStats; receive: StageStats; decode: StageStats; hash: StageStats; publish: StageStats };
  /** Per publisher (test, http, shm, camera, relay, whep...), its own figures. */
  publishers: Record<string, Record<string, unknown>>;
  /** A page publisher's own counters, from its stream.report (docs/protocol.md). */
  source?: { offered: number; sent: number; in_flight: number; dropped_total: number; dropped: Record<string, number>; [field: string]: unknown };
  [field: string]: unknown;
}

/** syncd's /stats document (docs/protocol.md, "Stats"): top-level sections; each holds counters
 * and nested objects described there. */
export interface SyncdStats {
  /** The server's figures: counters by name (docs/protocol.md, "Stats"). */
  server: { version: string; uptime_s: number; port: number; connections_open: number; [counter: string]: unknown };
  streams: StreamStats[];
  [section: string]: unknown;
}

export interface ConnectionCounters {
  connects: number; reconnects: number; disconnects: number; messagesIn: number; messagesOut: number;
  errors: number; lastRttMs: number | null; state: string; bufferedAmount: number;
}

type Unsubscribe = (() => void) & { ready: Promise<unknown> };

/**
 * @internal The sending half of publishCanvas on the thread that owns the socket (the page's, or
 * the publish Worker's: web/sync-worker.js imports it). Not for pages: use publishCanvas.
 */
export class StreamSender extends EventTarget {
  constructor(conn: SyncConnection, options: { name: string; width: number; height: number; fps?: number; slots?: number; maxBufferedFrames?: number; firstSequence?: number });
  readonly connection: SyncConnection;
  readonly width: number;
  readonly height: number;
  readonly frameBytes: number;
  readonly messageBytes: number;
  maxBufferedFrames: number;
  sequence: number;
  streamId: number | null;
  /** The stream is open on a connected socket. */
  readonly ready: boolean;
  /** The socket holds more than maxBufferedFrames (+ slack) frames not yet sent. */
  congested(slackFrames?: number): boolean;
  /** Opens (or re-opens) the stream; resolves with syncd's `stream.opened` reply. */
  openStream(reopened?: boolean): Promise<{ type: 'stream.opened'; stream: number; [field: string]: unknown }>;
  /** The frame's sequence, or why it was dropped. */
  send(message: ArrayBuffer, captureUs: number, bottomUp?: boolean): number | 'not_open' | 'pre_send';
  report(counters: Record<string, number>): void;
  createTicket(o?: TicketOptions): Promise<Ticket>;
  close(closeStream?: boolean): Promise<void>;
}

export class SyncConnection extends EventTarget {
  constructor(url?: string, options?: ConnectOptions);
  readonly url: string;
  readonly httpBase: string;
  readonly ready: Promise<SyncConnection>;
  welcome: Welcome | null;
  state: 'connecting' | 'open' | 'reconnecting' | 'closed';
  readonly connected: boolean;
  readonly bufferedAmount: number;
  /** addEventListener shorthand: `fn` gets the event's detail; returns the remover. */
  on<K extends keyof SyncConnectionEvents>(type: K, fn: (detail: SyncConnectionEvents[K]) => void): () => void;
  once<K extends keyof SyncConnectionEvents>(type: K, fn: (detail: SyncConnectionEvents[K]) => void): () => void;
  off<K extends keyof SyncConnectionEvents>(type: K, fn: (detail: SyncConnectionEvents[K]) => void): void;
  addEventListener<K extends keyof SyncConnectionEvents>(type: K, listener: (ev: SyncEvent<SyncConnectionEvents[K]>) => void, options?: boolean | AddEventListenerOptions): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
  send(message: object): boolean;
  sendBinary(data: ArrayBuffer | ArrayBufferView): boolean;
  request<T = any>(message: { type: string }, replyTypes: string | string[], o?: { timeoutMs?: number }): Promise<T>;
  stats(): Promise<SyncdStats>;
  /** Round-trip time of a control ping, ms. */
  ping(): Promise<number>;
  counters(): ConnectionCounters;
  openStream(c: { name: string; width: number; height: number; format?: StreamFormat; fps?: number; slots?: number; /** syncd sends this stream's stream.keyframe / stream.bitrate (h264 sources). */ feedback?: boolean }): Promise<StreamOpened>;
  closeStream(stream: number): Promise<{ type: 'stream.closed'; stream: number }>;
  /** `stream`: its id, its name (the newest open stream so called: what a WHEP URL carries), or a
   * publisher. */
  createTicket(stream: number | string | CanvasPublisher, o?: TicketOptions): Promise<Ticket>;
  grantCredit(receiver: number | string, frames?: number): boolean;
  subscribe(topic: 'pose', callback: (e: PoseEvent | PoseStatusEvent) => void): Unsubscribe;
  recenterPose(): boolean;
  audioInfo(): Promise<any>;
  readAudio(o?: { maxFrames?: number; minFrames?: number; timeoutMs?: number }): Promise<AudioPacket>;
  publishCanvas(canvas: HTMLCanvasElement | OffscreenCanvas, o: PublishOptions & { codec: 'h264' }): Promise<EncodedCanvasPublisher>;
  publishCanvas(canvas: HTMLCanvasElement | OffscreenCanvas, o?: PublishOptions & { codec?: 'raw' }): Promise<RawCanvasPublisher>;
  publishCanvas(canvas: HTMLCanvasElement | OffscreenCanvas, o?: PublishOptions): Promise<CanvasPublisher>;
  receive(name: string, ticket: string, o?: ReceiveOptions): FrameStream;
  close(): void;
}

/** Connects (hello/welcome) and resolves once welcomed; becomes the default connection. */
export function connect(url?: string, options?: ConnectOptions): Promise<SyncConnection>;

export interface PublishOptions {
  stream?: string;
  /** 'raw' (default: rgba8 frames, as before there was a choice), 'h264' (WebCodecs VideoEncoder;
   * SyncError 'unsupported_codec' where the browser cannot), or 'auto' (h264 where
   * encodeCapability says so, else raw). The publisher's `codec` says which. */
  codec?: 'raw' | 'h264' | 'auto';
  /** h264: target bits/s (default defaultH264Bitrate: 0.1 bit a pixel a frame, at most 20 Mbit/s). */
  bitrate?: number;
  /** h264: the most stream.bitrate may raise it to (default the initial bitrate). */
  maxBitrate?: number;
  /** h264: a key frame every this many frames (default 2 s worth), and whenever syncd asks. */
  keyFrameInterval?: number;
  /** h264: VideoEncoder's hardwareAcceleration (default 'no-preference': hardware where there is
   * one, else software). */
  hardwareAcceleration?: HardwareAcceleration;
  /** h264: draw the sequence's column marker into each frame before encoding and set
   * FRAME_FLAG_COLUMN_MARKER (for tests and qualification: syncd checks it after decoding). */
  columnMarker?: boolean;
  /** h264: skip a frame ('encoder_busy') while the encoder holds this many not yet encoded
   * (default 2). */
  maxEncodeQueue?: number;
  /** h264: skip a frame ('backpressure') while the socket holds more than this many bytes
   * (default max(256 KiB, maxBufferedFrames (default 4) frames at the bitrate)). */
  maxBufferedBytes?: number;
  /** Capture rate in auto mode (default 30). */
  fps?: number;
  width?: number;
  height?: number;
  connection?: SyncConnection;
  /** The canvas's context when it was created elsewhere (WebGL2 or 2D). */
  context?: WebGL2RenderingContext | CanvasRenderingContext2D | OffscreenCanvasRenderingContext2D;
  /** Use 2D getImageData even if WebGL2 is available. */
  force2d?: boolean;
  /** No timer: call capture() right after drawing (needed unless preserveDrawingBuffer). */
  manual?: boolean;
  /** Auto-mode clock: 'raf' (default: requestAnimationFrame, and a timer while the page is hidden
   * or while rAF gives fewer than 0.9 of `fps`, as in a visible page another one covers; see
   * PublisherStats.clock) or 'timer' (always a timer). */
  clock?: 'raf' | 'timer';
  /** Drop when bufferedAmount exceeds this many frames (default 2). */
  maxBufferedFrames?: number;
  /** Pixel-pack buffers in flight (default 3). */
  readbackBuffers?: number;
  /** WebGL2 readback: 'async' (pixel-pack buffers + fence), 'sync' (readPixels into the
   * message buffer), or 'auto' (default: sync on a software GL such as SwiftShader, else async).
   * codec 'h264' with a WebGL2 `context`: 'sync' reads the frame with readPixels (readback
   * 'webgl2-sync'), 'async' makes it with new VideoFrame(canvas); 'auto' is sync on a software GL. */
  readback?: 'auto' | 'async' | 'sync';
  /** syncd pool slots for the stream. */
  slots?: number;
  /** Send frames from a Worker on its own connection (default true where Workers exist; the
   * page's thread sends when a Worker cannot start, or with false). */
  worker?: boolean;
  /** Aborting stops the publisher and closes its stream (a start under way rejects `aborted`). */
  signal?: AbortSignal;
  firstSequence?: number;
}

export interface PublisherStats {
  /** offered = sent + droppedTotal + inFlight */
  offered: number;
  sent: number;
  dropped: { backpressure: number; readback_busy: number; pre_send: number; not_open: number; readback_failed: number };
  droppedTotal: number;
  inFlight: number;
  bytesSent: number;
  reopens: number;
  lastSequence: number;
  readbackMsMax: number;
  readbackMsTotal: number;
  /** Times the timer took the captures over from a requestAnimationFrame that fell behind the
   * nominal rate in a visible page (e.g. covered by another page, which throttles its rAF). */
  clockFallbacks: number;
  /** What drives the captures now (CanvasPublisherBase.activeClock). */
  clock: CaptureClockSource | null;
  stream: string;
  streamId: number | null;
  codec: 'raw';
  encoder: null;
  readback: 'webgl2' | 'webgl2-sync' | '2d';
  /** Where frames are sent from; null before the stream opened. */
  sender: 'worker' | 'page' | null;
  width: number;
  height: number;
}

/** Why an encoded publisher did not send a frame. */
export interface EncodedDropCounts {
  /** The stream was not open (connecting, reconnecting, stopping). */
  not_open: number;
  /** The socket held more than maxBufferedBytes. */
  backpressure: number;
  /** The encoder held maxEncodeQueue frames not yet encoded. */
  encoder_busy: number;
  /** VideoFrame or VideoEncoder failed (the encoder is made again a second later). */
  encode_failed: number;
  /** An access unit over the stream's frame_bytes (h264AccessUnitLimit). */
  too_large: number;
  /** The encoder took the frame and gave nothing back (rate control). */
  encoder_skipped: number;
  /** A delta after a lost frame it refers to: not sent until the next key frame. */
  awaiting_key: number;
}

export interface EncodedPublisherCounters {
  /** offered = sent + droppedTotal + inFlight */
  offered: number;
  sent: number;
  dropped: EncodedDropCounts;
  droppedTotal: number;
  /** Frames inside the encoder. */
  inFlight: number;
  bytesSent: number;
  reopens: number;
  lastSequence: number;
  /** stream.keyframe messages from syncd for this stream. */
  keyframeRequests: number;
  /** Key frames sent (the first, periodic ones, and those asked for). */
  keyframesSent: number;
  /** Bitrate changes applied (stream.bitrate or setBitrate). */
  bitrateChanges: number;
  /** Frames out of the encoder; encode time is from encode() to its output. */
  encoded: number;
  encodeMsTotal: number;
  encodeMsMax: number;
  /** Times the timer took the captures over from a requestAnimationFrame that fell behind (as
   * PublisherStats.clockFallbacks). */
  clockFallbacks: number;
}

export interface EncodedPublisherStats extends EncodedPublisherCounters {
  stream: string;
  streamId: number | null;
  codec: 'h264';
  encoder: VideoEncoderConfig;
  /** Current target, bits/s. */
  bitrate: number;
  encodeMsMean: number;
  encodeQueueSize: number;
  readback: 'videoframe' | 'webgl2-sync';
  sender: 'page' | null;
  width: number;
  height: number;
  /** What drives the captures now (CanvasPublisherBase.activeClock). */
  clock: CaptureClockSource | null;
}

/** What drives a publisher's captures: 'raf' (requestAnimationFrame), 'timer' (option clock
 * 'timer', a hidden page, or a rAF that fell behind the nominal rate), 'manual' (capture()). */
export type CaptureClockSource = 'raf' | 'timer' | 'manual';

interface CanvasPublisherBase extends EventTarget {
  readonly name: string;
  readonly streamId: number | null;
  /** What drives the captures now; null before the clock started. */
  readonly activeClock: CaptureClockSource | null;
  capture(): boolean;
  createTicket(o?: TicketOptions): Promise<Ticket>;
  stop(o?: { close?: boolean }): Promise<void>;
  on(type: 'open', fn: (e: StreamOpened) => void): () => void;
  on(type: 'frame', fn: (sequence: number) => void): () => void;
  /** A frame went to the socket: its sequence and the capture time its header carries (µs,
   * performance.timeOrigin + performance.now()). */
  on(type: 'sent', fn: (f: { sequence: number; captureTimeUs: number }) => void): () => void;
  on(type: 'error', fn: (e: Error) => void): () => void;
  /** h264 only: syncd asked for a key frame. */
  on(type: 'keyframe-request', fn: (m: StreamKeyframeMessage) => void): () => void;
  /** h264 only: the bitrate changed (bits/s). */
  on(type: 'bitrate', fn: (bps: number) => void): () => void;
}

/** A canvas published as rgba8 frames (codec 'raw'). */
export interface RawCanvasPublisher extends CanvasPublisherBase {
  readonly codec: 'raw';
  readonly encoder: null;
  readonly readback: 'webgl2' | 'webgl2-sync' | '2d';
  readonly sender: 'worker' | 'page' | null;
  stats(): PublisherStats;
}

/** A canvas published as an h264 stream (codec 'h264', or 'auto' where the browser encodes). */
export interface EncodedCanvasPublisher extends CanvasPublisherBase {
  readonly codec: 'h264';
  /** The VideoEncoderConfig in use (its bitrate follows stream.bitrate). */
  readonly encoder: VideoEncoderConfig;
  readonly readback: 'videoframe' | 'webgl2-sync';
  readonly sender: 'page' | null;
  /** Current target bitrate, bits/s. */
  readonly bitrate: number;
  /** The ceiling of stream.bitrate, bits/s. */
  readonly maxBitrate: number;
  readonly keyFrameInterval: number;
  /** The sequence the next frame into the encoder gets: a page drawing its own marker reads it
   * right before capture(). */
  readonly nextSequence: number;
  readonly counters: EncodedPublisherCounters;
  /** Sets the target bitrate (clamped to 100 kbit/s..maxBitrate); returns the one in force. */
  setBitrate(bps: number): number;
  stats(): EncodedPublisherStats;
}

export type CanvasPublisher = RawCanvasPublisher | EncodedCanvasPublisher;

export function publishCanvas(canvas: HTMLCanvasElement | OffscreenCanvas, options: PublishOptions & { codec: 'h264' }): Promise<EncodedCanvasPublisher>;
export function publishCanvas(canvas: HTMLCanvasElement | OffscreenCanvas, options?: PublishOptions & { codec?: 'raw' }): Promise<RawCanvasPublisher>;
export function publishCanvas(canvas: HTMLCanvasElement | OffscreenCanvas, options?: PublishOptions): Promise<CanvasPublisher>;
export function createTicket(stream: number | string | CanvasPublisher, options?: TicketOptions & { connection?: SyncConnection }): Promise<Ticket>;
export function subscribe(topic: 'pose', callback: (e: PoseEvent | PoseStatusEvent) => void, options?: { connection?: SyncConnection }): Unsubscribe;
export function readAudio(options?: { maxFrames?: number; minFrames?: number; timeoutMs?: number; connection?: SyncConnection }): Promise<AudioPacket>;

export interface ReceiveOptions {
  /** Initial credit (default 2, at most 16). */
  credit?: number;
  connection?: SyncConnection;
  /** syncd base URL (default: the connection's, else the page's origin). */
  base?: string;
  signal?: AbortSignal;
  /** Grant 1 credit after each consumed frame (default true). */
  autoCredit?: boolean;
  /** h264 streams: decode the access units (WebCodecs VideoDecoder) and give each Frame its
   * picture as `videoFrame` (default true); false: the access units themselves in `pixels`. */
  decode?: boolean;
  /** h264: how long to wait for a unit's picture before reading the next record (default 500). */
  decodeTimeoutMs?: number;
}

/** A received frame. receive() makes them; a page may also make one around its own pixels
 * (`header` as parseRecordHeader returns it) to use drawTo. */
export const Frame: { new (header: Omit<RecordHeader, 'payloadBytes'>, pixels: Uint8Array, videoFrame?: VideoFrame | null): Frame };
export interface Frame {
  sequence: number;
  width: number;
  height: number;
  /** A name, or the wire value when this client does not know it. */
  format: StreamFormat | number;
  /** Where each plane lies in `pixels` (empty for an unknown format). */
  readonly planes: PlaneLayout[];
  flags: number;
  contentHash: bigint | null;
  captureTimeUs: number;
  /** syncd's accept time of the frame, CLOCK_MONOTONIC ns (record offset 24). */
  publishTimeNs: number;
  droppedBefore: number;
  /** Valid until the iterator advances (the buffer is reused). h264: the access unit (Annex B),
   * empty when its picture came out after the unit's turn. */
  pixels: Uint8Array;
  /** h264 received with decode (the default): the decoded picture, `timestamp` = capture time in
   * µs. The caller owns it and must close() it (each one holds decoder memory). Otherwise null. */
  videoFrame: VideoFrame | null;
  marker(): { sequence: number; valid: boolean };
  /** nv12 and i420 are drawn through WebCodecs' VideoFrame (SyncError 'unsupported_format'
   * without it). */
  /** Resizes the canvas to the frame and draws it: 2D, or WebGL / WebGL2 when the canvas has
   * such a context (the page's GL state is changed). */
  drawTo(canvas: HTMLCanvasElement | OffscreenCanvas): void;
}

/** How a receive that ended with 'disconnected' saw its connection go (SyncError.details.reason):
 * 'read_failed' (the connection broke: reset), 'truncated' (the body ended inside a record),
 * 'syncd_unreachable' (it ended after a record and syncd did not answer), 'stream_open' (it
 * ended after a record while the stream was still open: the connection was cut). */
export type ReceiveDisconnectReason = 'read_failed' | 'truncated' | 'syncd_unreachable' | 'stream_open';

/** SyncError.details of a receive's 'disconnected' error. */
export interface ReceiveDisconnectDetails { reason: ReceiveDisconnectReason; receiver: number | string | null; frames: number }

/** Frames of one stream from `GET /streams/{name}`. Iterating finishes (a clean end) only when the
 * stream closed; a connection that went away rejects with SyncError 'disconnected'. */
export interface FrameStream extends AsyncIterable<Frame> {
  readonly name: string;
  readonly ticket: string;
  /** From X-Sync-Receiver, once open. */
  receiver: number | string | null;
  open(): Promise<Response>;
  next(): Promise<IteratorResult<Frame>>;
  /** The frames as WebCodecs VideoFrames (RGBA/BGRA/NV12/I420, or h264's decoded pictures;
   * `timestamp` = capture time in µs); the reader closes each. SyncError 'unsupported_format' without WebCodecs. */
  videoFrames(): ReadableStream<VideoFrame>;
  close(): void;
  /** A new receive of the same stream with the same ticket and options (closing this one if it
   * is open), e.g. after 'disconnected': it spends one more use of the ticket (`forbidden` when
   * none is left); frames go on from what syncd has now; counters carry on (`resumes`). */
  resume(): FrameStream;
  /** frames counts records (across resumes: `resumes` is how many receives came before this
   * one); the h264 counters appear once an h264 record arrived: pictures
   * decoded, deltas dropped while waiting for a key frame, decoder errors, and units whose
   * picture took longer than decodeTimeoutMs. */
  stats(): { frames: number; bytes: number; droppedBefore: number; creditsGranted: number; reads: number; creditFailures: number; resumes: number; receiver: number | string | null; decoded?: number; awaitingKey?: number; decodeErrors?: number; decodeTimeouts?: number };
}

export function receive(name: string, ticket: string, options?: ReceiveOptions): FrameStream;

/** watch() options. */
export interface WatchOptions {
  /** A ticket for the stream (its bearer token); without one, watch() asks `connection` for one
   * by the stream's name (`{"type":"ticket.create","stream":NAME,"uses":1}`). */
  ticket?: string;
  /** The connection that makes the ticket (default the default connection; without one, watch()
   * opens its own to `base` and closes it once the ticket is spent). */
  connection?: SyncConnection;
  /** syncd's URL (`http://host:port`, `host:port`); default the connection's, else the page's origin. */
  base?: string;
  /** Offer to receive audio too (default true): syncd answers it with stereo Opus when it has an
   * `--audio-source`, else rejects the audio m-line and the video plays alone. */
  audio?: boolean;
  /** How long ICE and DTLS may take before watch() rejects with 'webrtc_failed' (default 10000). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Call `video.play()` once connected (default true); a refusal (autoplay of unmuted media)
   * is the session's `playError` and `play-error` event, not a rejection. */
  play?: boolean;
  /** Passed to `new RTCPeerConnection()`. */
  rtcConfiguration?: RTCConfiguration;
  /** An RTCPeerConnection implementation (default the browser's; for tests). */
  RTCPeerConnection?: typeof RTCPeerConnection;
}

/** How a WHEP session ended: stop(), the peer connection failed later (error 'webrtc_failed'),
 * or closed; `deleteStatus` is the DELETE's HTTP status (200), null if none went or it failed. */
export interface WhepEnded { reason: 'stopped' | 'failed' | 'closed'; error: SyncError | null; deleteStatus: number | null }

export interface WhepStats {
  state: 'connecting' | 'connected' | 'ended';
  connectionState: RTCPeerConnectionState;
  /** From the POST to the peer connection's 'connected'. */
  connectMs: number | null;
  video: { packetsReceived: number; packetsLost: number; bytesReceived: number; framesReceived: number; framesDecoded: number; framesDropped: number; keyFramesDecoded: number; frameWidth: number; frameHeight: number; framesPerSecond: number; nackCount: number; pliCount: number; jitterBufferDelayMs: number | null } | null;
  audio: { packetsReceived: number; packetsLost: number; bytesReceived: number; concealedSamples: number; totalSamplesReceived: number; audioLevel: number | null } | null;
  srtpCipher: string | null;
  roundTripTimeMs: number | null;
}

export interface WhepSessionEvents { ended: WhepEnded; 'play-error': unknown }

/** A stream playing in a `<video>` over WHEP (watch()). */
export class WhepSession extends EventTarget {
  readonly stream: string;
  /** The WHEP endpoint posted to. */
  readonly url: string;
  /** The session resource, absolute (the answer's Location resolved against `url`); null once ended. */
  location: string | null;
  readonly pc: RTCPeerConnection;
  readonly video: HTMLVideoElement | null;
  /** Whether syncd answered the audio m-line (it has an --audio-source). */
  audio: boolean;
  state: 'connecting' | 'connected' | 'ended';
  /** video.play()'s refusal, if it refused. */
  playError: unknown;
  /** Settles when the session ends, however it ends (never rejects). */
  readonly ended: Promise<WhepEnded>;
  on<K extends keyof WhepSessionEvents>(type: K, fn: (detail: WhepSessionEvents[K]) => void): () => void;
  once<K extends keyof WhepSessionEvents>(type: K, fn: (detail: WhepSessionEvents[K]) => void): () => void;
  off<K extends keyof WhepSessionEvents>(type: K, fn: (detail: WhepSessionEvents[K]) => void): void;
  /** DELETEs the session resource (syncd ends it) and closes the peer connection. */
  stop(): Promise<WhepEnded>;
  stats(): Promise<WhepStats>;
}

/** `http(s)://host:port/whep/NAME` from a syncd URL and a stream name. */
export function whepUrl(base: string, name: string): string;

/**
 * Plays `streamName` in `video` over WHEP (docs/whep.md): resolves once ICE and DTLS are up.
 * Rejects with a SyncError: 'forbidden' (403), 'not_found' (404), 'busy' (503, `retryAfter`),
 * 'bad_offer' (400), 'http_error', 'network', 'webrtc_failed', 'aborted', 'bad_message' (not a
 * stream name), or the ticket request's codes ('unknown_stream', 'not_stream_owner',
 * 'not_connected', 'syncd_unreachable', 'origin_refused', ...).
 */
export function watch(streamName: string, video: HTMLVideoElement | null, options?: WatchOptions): Promise<WhepSession>;
