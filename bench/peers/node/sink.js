#!/usr/bin/env node
// Node `ws` WebSocket sink for the peer benchmark (bench/peers/run.py).
//
// The usual ws server: every binary message arrives as one Buffer (ws allocates a fresh buffer
// per message and concatenates its chunks into it; with `bufferutil` installed it unmasks in
// native code, without it in JavaScript: set WS_NO_BUFFER_UTIL=1 to measure that). Each frame is
// verified like syncd's test publisher does it: XXH3-64 (seed 0) over every pixel byte with
// @node-rs/xxhash (native), sequence gaps. Answers hello / stream.open as syncd would so the
// unmodified sync-producer works. Prints "listening on HOST:PORT" first and a JSON summary when
// the producer closes.
//
// Usage: node sink.js [--host 127.0.0.1] [--port 0] [--warmup-frames 0]
'use strict';
const { WebSocketServer } = require('ws');
const { xxh3 } = require('@node-rs/xxhash');

const HEADER_BYTES = 56;
const MAGIC = 0x464e5953;

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

function cpuSeconds() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

function nowNs() {
  return process.hrtime.bigint();  // CLOCK_MONOTONIC on Linux
}

let bufferutil = false;
try {
  if (!process.env.WS_NO_BUFFER_UTIL) {
    require('bufferutil');
    bufferutil = true;
  }
} catch (e) {
  bufferutil = false;
}

const host = arg('--host', '127.0.0.1');
const port = Number(arg('--port', '0'));
// Steady CPU per frame counts from the end of this frame on, as for syncd (run.py --warmup-frames).
const warmupFrames = Number(arg('--warmup-frames', '0'));
const stats = {
  frames: 0, hash_failures: 0, seq_gaps: 0, bad_frames: 0, unhashed_frames: 0,
};
let frameBytes = 0;
let expected = 0n;
let firstByteNs = 0n;
let lastFrameNs = 0n;
let cpuAtAccept = 0;
let cpuAfterWarmup = 0;
let warmupEndNs = 0n;

const wss = new WebSocketServer({
  host, port, maxPayload: 64 * 1024 * 1024, perMessageDeflate: false, clientTracking: false,
});

wss.on('listening', () => {
  process.stdout.write(`listening on ${host}:${wss.address().port}\n`);
});

function onText(ws, text) {
  let message;
  try {
    message = JSON.parse(text);
  } catch (e) {
    ws.send(JSON.stringify({ type: 'error', code: 'bad_json', message: 'bad_json' }));
    return;
  }
  if (message.type === 'hello') {
    ws.send(JSON.stringify({
      type: 'welcome', protocol: 1, server: `node/${process.versions.node} ws`,
      frame_header_bytes: HEADER_BYTES,
    }));
  } else if (message.type === 'stream.open') {
    const width = message.width | 0;
    const height = message.height | 0;
    frameBytes = width * height * 4;
    ws.send(JSON.stringify({
      type: 'stream.opened', stream: 1, name: message.name || 'main', width, height,
      format: message.format || 'rgba8', frame_bytes: frameBytes, header_bytes: HEADER_BYTES,
    }));
  } else if (message.type === 'stream.close') {
    ws.send(JSON.stringify({ type: 'stream.closed', stream: 1 }));
  }
}

function onFrame(data) {
  if (firstByteNs === 0n) firstByteNs = nowNs();
  if (data.length < HEADER_BYTES || data.readUInt32LE(0) !== MAGIC ||
      data.length - HEADER_BYTES !== frameBytes) {
    stats.bad_frames++;
    return;
  }
  const flags = data.readUInt32LE(12);
  const sequence = data.readBigUInt64LE(16);
  if (flags & 1) {
    const want = data.readBigUInt64LE(48);
    const pixels = data.subarray(HEADER_BYTES);
    if (xxh3.xxh64(pixels) !== want) stats.hash_failures++;
  } else {
    stats.unhashed_frames++;
  }
  if (stats.frames > 0 && sequence > expected) stats.seq_gaps += Number(sequence - expected);
  else if (stats.frames > 0 && sequence < expected) stats.seq_gaps++;
  expected = sequence + 1n;
  stats.frames++;
  lastFrameNs = nowNs();
  if (stats.frames === warmupFrames) {
    cpuAfterWarmup = cpuSeconds();
    warmupEndNs = lastFrameNs;
  }
}

wss.on('connection', (ws, request) => {
  cpuAtAccept = cpuAfterWarmup = cpuSeconds();
  request.socket.setNoDelay(true);
  ws.on('message', (data, isBinary) => {
    if (isBinary) onFrame(data);
    else onText(ws, data.toString('utf8'));
  });
  ws.on('close', () => {
    const cpuEnd = cpuSeconds();
    const cpu = cpuEnd - cpuAtAccept;
    const steadyFrames = stats.frames - warmupFrames;
    const seconds = stats.frames > 0 ? Number(lastFrameNs - firstByteNs) / 1e9 : 0;
    process.stdout.write(JSON.stringify({
      server: `node/${process.versions.node} ws${bufferutil ? '+bufferutil' : ''}`,
      ...stats,
      seconds,
      fps: seconds > 0 ? stats.frames / seconds : 0,
      cpu_seconds: cpu,
      cpu_ms_per_frame: stats.frames > 0 ? cpu * 1e3 / stats.frames : 0,
      warmup_frames: warmupFrames,
      steady_cpu_ms_per_frame: steadyFrames > 0 ? (cpuEnd - cpuAfterWarmup) * 1e3 / steadyFrames : 0,
      steady_fps: steadyFrames > 0 && warmupEndNs > 0n
        ? steadyFrames / (Number(lastFrameNs - warmupEndNs) / 1e9) : 0,
      first_byte_monotonic_ns: Number(firstByteNs),
      last_frame_monotonic_ns: Number(lastFrameNs),
      bufferutil,
    }) + '\n');
    wss.close();
    process.exit(0);
  });
});
