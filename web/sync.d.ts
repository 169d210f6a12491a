// TypeScript declarations for web/sync.js (docs/web.md, docs/protocol.md).

export const PROTOCOL_VERSION: 1;
export const FRAME_MAGIC: number;
export const FRAME_HEADER_BYTES: 56;
export const FRAME_FLAG_CONTENT_HASH: 1;
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
export const FORMAT_CODES: Readonly<{ rgba8: 1; bgra8: 2; nv12: 3; i420: 4 }>;
export const FORMAT_NAMES: Readonly<Record<number, PixelFormat>>;

/** One plane of a frame: bytes from the frame's start, bytes from row to row, and rows. Planes
 * are packed back to back with no row padding. */
export interface PlaneLayout { offset: number; stride: number; rows: number }
export interface FrameLayout { format: PixelFormat; width: number; height: number; planes: PlaneLayout[]; bytes: number }
/** null for an unknown format or a size that does not suit it (zero, odd sides for 4:2:0). */
export function frameLayout(format: PixelFormat | number, width: number, height: number): FrameLayout | null;

/** Codes syncd sends in an `error` message (docs/protocol.md, "Errors"). */
export type ServerErrorCode =
  | 'bad_json' | 'bad_message' | 'unknown_type' | 'protocol_unsupported' | 'hello_required'
  | 'stream_name_taken' | 'bad_geometry' | 'bad_slots' | 'stream_limit' | 'connection_stream_limit' | 'no_memory'
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
  /** The control connection went down (pending requests reject with it). */
  | 'disconnected'
  /** A request while not connected. */
  | 'not_connected'
  | 'connect_failed'
  /** receive(): HTTP 403, the ticket is missing, unknown, expired, spent, or for another stream. */
  | 'forbidden'
  /** receive(): HTTP 404, no such stream (it closed, or never opened). */
  | 'not_found'
  /** receive(): another HTTP status (`status` holds it). */
  | 'http_error'
  /** receive(): the stream's connection failed, or a cross-origin page without CORS. */
  | 'network'
  /** receive(): the stream ended inside a record (the publisher or syncd went away mid-frame). */
  | 'truncated'
  | 'bad_record' | 'bad_reply' | 'bad_frame_header' | 'bad_audio_packet' | 'not_open' | 'no_context'
  /** Frame.drawTo of a 4:2:0 frame without WebCodecs. */
  | 'unsupported_format'
  /** Frame.drawTo on a canvas with neither a 2D nor a WebGL context. */
  | 'unsupported_canvas'
  | 'webgl_failed'
  /** publishCanvas: the publish Worker failed after it started (before, the page sends). */
  | 'worker_failed';

export type SyncErrorCode = ServerErrorCode | ClientErrorCode;

/** An error from syncd (`code` is the server's stable code), from HTTP (`status`), or the
 * client's own (ClientErrorCode). */
export class SyncError extends Error {
  constructor(code: SyncErrorCode, message?: string, options?: { status?: number; details?: unknown; cause?: unknown });
  readonly name: 'SyncError';
  code: SyncErrorCode;
  /** HTTP status, for errors of the HTTP stream. */
  status?: number;
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
  streamOpen(c: { name: string; width: number; height: number; format?: PixelFormat; fps?: number; slots?: number }): object;
  streamClose(stream: number): { type: 'stream.close'; stream: number };
  ticketCreate(stream: number, o?: { uses?: number; ttl_s?: number }): { type: 'ticket.create'; stream: number; uses?: number; ttl_s?: number };
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
  format: PixelFormat;
  /** The frame's planes in the format's order; frame_bytes is where the last one ends. */
  planes: PlaneLayout[];
  fps: number; slots: number; frame_bytes: number; header_bytes: number;
}

/** Receivers a ticket admits (1-16, default 1: a reload needs a use of its own) and how long it
 * lives (1-3600 s, default 60). */
export interface TicketOptions { uses?: number; ttlSeconds?: number }

/** syncd's `ticket` reply as sent (wire names). */
export interface Ticket { type: 'ticket'; stream: number; name: string; ticket: string; uses: number; expires_in_s: number }

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
  message: { type: string; [field: string]: unknown };
  binary: ArrayBuffer;
  /** Closed for good: after close() (no detail) or a failed connect (its error). */
  close: SyncError | undefined;
}

/** syncd's /stats document (docs/protocol.md, "Stats"): top-level sections; each holds counters
 * and nested objects described there. */
export interface SyncdStats {
  server: Record<string, unknown>;
  streams?: Array<{ name: string; open: boolean; [field: string]: unknown }>;
  [section: string]: unknown;
}

export interface ConnectionCounters {
  connects: number; reconnects: number; disconnects: number; messagesIn: number; messagesOut: number;
  errors: number; lastRttMs: number | null; state: string; bufferedAmount: number;
}

type Unsubscribe = (() => void) & { ready: Promise<unknown> };

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
  openStream(c: { name: string; width: number; height: number; format?: PixelFormat; fps?: number; slots?: number }): Promise<StreamOpened>;
  closeStream(stream: number): Promise<{ type: 'stream.closed'; stream: number }>;
  createTicket(stream: number | CanvasPublisher, o?: TicketOptions): Promise<Ticket>;
  grantCredit(receiver: number | string, frames?: number): boolean;
  subscribe(topic: 'pose', callback: (e: PoseEvent | PoseStatusEvent) => void): Unsubscribe;
  recenterPose(): boolean;
  audioInfo(): Promise<any>;
  readAudio(o?: { maxFrames?: number; minFrames?: number; timeoutMs?: number }): Promise<AudioPacket>;
  publishCanvas(canvas: HTMLCanvasElement | OffscreenCanvas, o?: PublishOptions): Promise<CanvasPublisher>;
  receive(name: string, ticket: string, o?: ReceiveOptions): FrameStream;
  close(): void;
}

/** Connects (hello/welcome) and resolves once welcomed; becomes the default connection. */
export function connect(url?: string, options?: ConnectOptions): Promise<SyncConnection>;

export interface PublishOptions {
  stream?: string;
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
  /** Auto-mode clock: 'raf' (default; a timer while hidden) or 'timer'. */
  clock?: 'raf' | 'timer';
  /** Drop when bufferedAmount exceeds this many frames (default 2). */
  maxBufferedFrames?: number;
  /** Pixel-pack buffers in flight (default 3). */
  readbackBuffers?: number;
  /** WebGL2 readback: 'async' (pixel-pack buffers + fence), 'sync' (readPixels into the
   * message buffer), or 'auto' (default: sync on a software GL such as SwiftShader, else async). */
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
  stream: string;
  streamId: number | null;
  readback: 'webgl2' | 'webgl2-sync' | '2d';
  /** Where frames are sent from; null before the stream opened. */
  sender: 'worker' | 'page' | null;
  width: number;
  height: number;
}

export interface CanvasPublisher extends EventTarget {
  readonly name: string;
  readonly streamId: number | null;
  readonly readback: 'webgl2' | 'webgl2-sync' | '2d';
  readonly sender: 'worker' | 'page' | null;
  capture(): boolean;
  stats(): PublisherStats;
  createTicket(o?: TicketOptions): Promise<Ticket>;
  stop(o?: { close?: boolean }): Promise<void>;
  on(type: 'open', fn: (e: StreamOpened) => void): () => void;
  on(type: 'frame', fn: (sequence: number) => void): () => void;
  on(type: 'error', fn: (e: Error) => void): () => void;
}

export function publishCanvas(canvas: HTMLCanvasElement | OffscreenCanvas, options?: PublishOptions): Promise<CanvasPublisher>;
export function createTicket(stream: number | CanvasPublisher, options?: TicketOptions & { connection?: SyncConnection }): Promise<Ticket>;
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
}

/** A received frame. receive() makes them; a page may also make one around its own pixels
 * (`header` as parseRecordHeader returns it) to use drawTo. */
export const Frame: { new (header: Omit<RecordHeader, 'payloadBytes'>, pixels: Uint8Array): Frame };
export interface Frame {
  sequence: number;
  width: number;
  height: number;
  /** A name, or the wire value when this client does not know it. */
  format: PixelFormat | number;
  /** Where each plane lies in `pixels` (empty for an unknown format). */
  readonly planes: PlaneLayout[];
  flags: number;
  contentHash: bigint | null;
  captureTimeUs: number;
  /** syncd's accept time of the frame, CLOCK_MONOTONIC ns (record offset 24). */
  publishTimeNs: number;
  droppedBefore: number;
  /** Valid until the iterator advances (the buffer is reused). */
  pixels: Uint8Array;
  marker(): { sequence: number; valid: boolean };
  /** nv12 and i420 are drawn through WebCodecs' VideoFrame (SyncError 'unsupported_format'
   * without it). */
  /** Resizes the canvas to the frame and draws it: 2D, or WebGL / WebGL2 when the canvas has
   * such a context (the page's GL state is changed). */
  drawTo(canvas: HTMLCanvasElement | OffscreenCanvas): void;
}

export interface FrameStream extends AsyncIterable<Frame> {
  readonly name: string;
  /** From X-Sync-Receiver, once open. */
  receiver: number | string | null;
  open(): Promise<Response>;
  next(): Promise<IteratorResult<Frame>>;
  /** The frames as WebCodecs VideoFrames (RGBA/BGRA/NV12/I420, `timestamp` = capture time in
   * µs); the reader closes each. SyncError 'unsupported_format' without WebCodecs. */
  videoFrames(): ReadableStream<VideoFrame>;
  close(): void;
  stats(): { frames: number; bytes: number; droppedBefore: number; creditsGranted: number; reads: number; creditFailures: number; receiver: number | string | null };
}

export function receive(name: string, ticket: string, options?: ReceiveOptions): FrameStream;
