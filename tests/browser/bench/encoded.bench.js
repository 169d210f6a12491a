// Raw against encoded publishing from a page, in real Chromium (issue 29). Each arm gets a fresh
// syncd (`--publisher test,shm`, its own ring file) and a fresh Chromium, and one page,
// bench/encoded-page.html, publishing its canvas at SYNC_BENCH_FPS with codec=raw (rgba8:
// readback + the publish Worker) or codec=h264 (WebCodecs VideoEncoder). Per arm, over the
// window:
//   - acceptedFps: unique frames/s syncd took into the stream (/stats frames_unique);
//     decodedFps: the same of the decoded twin `<name>.decoded` (h264: syncd's decode output;
//     raw: the stream itself), and low-rate seconds of both (/stats low_rate_seconds deltas);
//   - ringFps: unique frames/s sync-shm-reader read off the ring (it carries the twin for h264);
//   - CPU in cores: syncd's pid, and Chromium = every process under this Node process but syncd
//     and the readers (/proc/PID/stat utime+stime deltas, CLK_TCK 100);
//   - glass to glass: from the frame's capture time (the header's, which sync.js stamps as
//     performance.timeOrigin + performance.now() in µs) to sync-shm-reader reading it. The reader
//     stamps reads with CLOCK_MONOTONIC (its --events CSV: sequence,publish_ns,read_ns), the page
//     with its own clock: so the bench measures the page clock against this process's
//     CLOCK_MONOTONIC (process.hrtime) directly: 20 page.evaluate(nowUs) round trips before the
//     page starts drawing, the narrowest one's midpoint gives offset = pageUs - monotonicUs
//     (error <= half its width: clockErrorMs). Chromium's performance.now() advances on
//     CLOCK_MONOTONIC too, so the offset holds for the run: measured again after the window
//     (clockDriftMs is the change). g2g = read_ns/1000 + offset - captureTimeUs, per frame
//     the page sent (its 'sent' events: sequence -> captureTimeUs) and the reader read;
//     also split at the ring's publish_ns (capture -> ring, ring -> read);
//   - the page's own costs: draw ms and capture() ms (h264: new VideoFrame(canvas) + encode();
//     raw: the readback) per frame, encode() to output ms, and its drops by reason.
// Prints a table, then the JSON. Not part of `npm test`.
//
//   cd tests/browser && SYNCD=/tmp/syncd SYNC_SHM_READER=/tmp/sync-shm-reader node bench/encoded.bench.js
//   env: SYNC_BENCH_SECONDS (window, default 20), SYNC_BENCH_SECONDS_1080_H264 (the 1080p h264
//        window, default 60), SYNC_BENCH_FPS (60), SYNC_BENCH_SIZES ("640x360,1280x720,1920x1080"),
//        SYNC_BENCH_CODECS ("raw,h264"), SYNC_BENCH_DRAW ("2d": a moving bar and a frame counter,
//        cheap to draw; "webgl": demo/source.html's WebGL2 pattern), SYNC_BENCH_PUBLISHERS
//        (syncd --publisher, default "test,shm"; "" = no pixel consumer, so syncd decodes
//        nothing), SYNC_BENCH_ARMS ("sizes,three"; "probe" adds the 1080p cost probes),
//        SYNC_AUDIO_READER (the three-pages arm's sync-audio-reader, default /tmp/sync-audio-reader),
//        SYNC_BENCH_READBACK (publishCanvas readback: auto; with draw=webgl and h264, 'async'
//        captures with new VideoFrame(canvas) as sync.js did before, 'sync'/'auto' with readPixels)
//   The three-pages arm ("three"): three pages publishing 1280x720@60 h264 at once, syncd with
//   --audio-source synthetic:32 and a sync-audio-reader reading it (--verify synthetic); each
//   stream's and twin's unique fps and low-rate seconds, the audio's drops.
import { spawn, execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startSyncd, sleep, stats, browserTestsDir } from '../lib/harness.js';
import { openBrowser, openPage, pageSnap, clockOffset } from '../lib/bench_page.js';

const SECONDS = Number(process.env.SYNC_BENCH_SECONDS ?? 20);
const SECONDS_1080_H264 = Number(process.env.SYNC_BENCH_SECONDS_1080_H264 ?? 60);
const FPS = Number(process.env.SYNC_BENCH_FPS ?? 60);
const SIZES = (process.env.SYNC_BENCH_SIZES ?? '640x360,1280x720,1920x1080').split(',').filter(Boolean).map((s) => s.split('x').map(Number));
const CODECS = (process.env.SYNC_BENCH_CODECS ?? 'raw,h264').split(',').filter(Boolean);
const DRAW = process.env.SYNC_BENCH_DRAW ?? '2d';
const PUBLISHERS = process.env.SYNC_BENCH_PUBLISHERS ?? 'test,shm';
const ARMS = (process.env.SYNC_BENCH_ARMS ?? 'sizes,three').split(',');
const READBACK = process.env.SYNC_BENCH_READBACK ?? 'auto';
const READER = path.resolve(browserTestsDir, process.env.SYNC_SHM_READER ?? '/tmp/sync-shm-reader');
const AUDIO_READER = path.resolve(browserTestsDir, process.env.SYNC_AUDIO_READER ?? '/tmp/sync-audio-reader');
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
const load = () => os.loadavg().map((x) => +x.toFixed(2));
const hasShm = PUBLISHERS.split(',').includes('shm');

// ---- CPU from /proc

function procStat(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' '); // f[0] is field 3 (state)
    return { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) };
  } catch {
    return null;
  }
}

// pid -> ticks of every process under `root`, except the subtrees of `exclude`.
function treeTicks(root, exclude) {
  const children = new Map();
  const all = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const st = procStat(d);
    if (!st) continue;
    all.set(Number(d), st);
    if (!children.has(st.ppid)) children.set(st.ppid, []);
    children.get(st.ppid).push(Number(d));
  }
  const out = new Map();
  const stack = [...(children.get(root) ?? [])];
  while (stack.length) {
    const pid = stack.pop();
    if (exclude.has(pid)) continue;
    out.set(pid, all.get(pid).ticks);
    stack.push(...(children.get(pid) ?? []));
  }
  return out;
}

// Busy ticks of the whole machine (/proc/stat: all but idle and iowait).
function machineBusy() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return f.reduce((a, b) => a + b, 0) - f[3] - f[4];
}

function cpuSampler(syncdPid, exclude) {
  const ex = new Set([syncdPid, ...exclude]);
  const t0 = performance.now();
  const m0 = machineBusy();
  const c0 = treeTicks(process.pid, ex);
  const s0 = procStat(syncdPid)?.ticks ?? 0;
  return () => {
    const seconds = (performance.now() - t0) / 1000;
    const c1 = treeTicks(process.pid, ex);
    let chromium = 0;
    for (const [pid, t] of c1) chromium += t - (c0.get(pid) ?? 0); // a process born since: all of it
    const s1 = procStat(syncdPid)?.ticks ?? s0;
    let readers = 0;
    for (const pid of exclude) readers += procStat(pid)?.ticks ?? 0; // started just before t0
    // Everything else the machine ran meanwhile (another build, say): a disturbed figure shows
    // here. Readers that have exited are no longer in /proc, so they count as other.
    const other = machineBusy() - m0 - chromium - (s1 - s0) - readers;
    return {
      otherCores: +(Math.max(0, other) / CLK_TCK / seconds).toFixed(2),
      chromiumCores: +(chromium / CLK_TCK / seconds).toFixed(2),
      syncdCores: +((s1 - s0) / CLK_TCK / seconds).toFixed(2),
      chromiumProcesses: c1.size,
    };
  };
}

// ---- the page

function startReader(ring, seconds, events) {
  const proc = spawn(READER, ['--path', ring, '--seconds', String(seconds), '--events', events, '--quiet', '--open-wait', '10'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  const done = new Promise((resolve) => proc.once('exit', (code) => {
    let summary = null;
    try { summary = JSON.parse(out.trim().split('\n').pop()); } catch { /* printed nothing */ }
    resolve({ code, summary, stderr: err });
  }));
  return { proc, done };
}

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p / 100 * sorted.length))] : NaN);
const ms2 = (x) => +(x / 1000).toFixed(2);

async function glassToGlass(eventsFile, sent, offsetUs) {
  const capture = new Map();
  for (let i = 0; i < sent.length; i += 2) capture.set(sent[i], sent[i + 1]);
  let text = '';
  try { text = await readFile(eventsFile, 'utf8'); } catch { return null; }
  const g2g = [], toRing = [], ringToRead = [];
  const seen = new Set();
  for (const line of text.split('\n').slice(1)) {
    if (!line) continue;
    const [seq, publishNs, readNs] = line.split(',').map(Number);
    if (seen.has(seq) || !capture.has(seq)) continue;
    seen.add(seq);
    const c = capture.get(seq);
    g2g.push(readNs / 1000 + offsetUs - c);
    toRing.push(publishNs / 1000 + offsetUs - c);
    ringToRead.push((readNs - publishNs) / 1000);
  }
  const s = (a) => a.sort((x, y) => x - y);
  s(g2g); s(toRing); s(ringToRead);
  return {
    frames: g2g.length,
    p50: ms2(pct(g2g, 50)), p95: ms2(pct(g2g, 95)), p99: ms2(pct(g2g, 99)), max: ms2(g2g[g2g.length - 1]),
    captureToRingP50: ms2(pct(toRing, 50)), ringToReadP50: ms2(pct(ringToRead, 50)),
  };
}

const streamOf = (s, name) => (s.streams ?? []).filter((x) => x.name === name).sort((a, b) => b.id - a.id)[0] ?? null;
const rate = (a, b, key, seconds) => (a && b ? +((b[key] - a[key]) / seconds).toFixed(2) : null);
const delta = (a, b, key) => (a && b ? b[key] - a[key] : null);

function pageFigures(p0, p1) {
  const dropped = {};
  for (const [k, v] of Object.entries(p1.p.dropped)) if (v - (p0.p.dropped[k] ?? 0)) dropped[k] = v - (p0.p.dropped[k] ?? 0);
  const drawn = Math.max(1, p1.drawn - p0.drawn);
  const encoded = p1.p.codec === 'h264';
  return {
    offeredFps: null, // filled by the caller
    drawMs: +((p1.drawMsTotal - p0.drawMsTotal) / drawn).toFixed(2),
    captureMs: +((p1.captureMsTotal - p0.captureMsTotal) / drawn).toFixed(2),
    captureMsMax: +p1.captureMsMax.toFixed(2),
    ...(encoded
      ? { encodeMs: +((p1.p.encodeMsTotal - p0.p.encodeMsTotal) / Math.max(1, p1.p.encoded - p0.p.encoded)).toFixed(2), encodeMsMax: +p1.p.encodeMsMax.toFixed(2), bitrate: p1.p.bitrate }
      : { readbackMs: +((p1.p.readbackMsTotal - p0.p.readbackMsTotal) / Math.max(1, p1.p.sent - p0.p.sent)).toFixed(2), readback: p1.p.readback, sender: p1.p.sender }),
    lateTicks: p1.late - p0.late,
    dropped,
  };
}

// One or more pages publishing at once on a fresh syncd and Chromium, measured over `seconds`.
async function arm({ label, codec, w, h, pages: nPages = 1, seconds, audio = false }) {
  const ring = `/dev/shm/sync-bench-${process.pid}.frames`;
  const args = ['--publisher', PUBLISHERS, '--max-pool-mb', '4096'];
  if (hasShm) args.push('--shm-path', ring);
  if (audio) args.push('--audio-source', 'synthetic:32');
  const syncd = await startSyncd(args);
  const browser = await openBrowser(syncd);
  const names = Array.from({ length: nPages }, (_, i) => (nPages > 1 ? `${codec}-${w}x${h}-${i + 1}` : `${codec}-${w}x${h}`));
  const events = `${os.tmpdir()}/sync-bench-${process.pid}.csv`;
  try {
    const pages = [];
    for (const name of names) pages.push(await openPage(browser, syncd, { stream: name, codec, w, h, fps: FPS, draw: DRAW, readback: READBACK }));
    // The page clock against ours while the page is idle, then again after the window once
    // it has stopped: their difference is the drift over the run.
    const clock = await clockOffset(pages[0]);
    await Promise.all(pages.map((p) => p.evaluate(() => window.bench.start())));
    await sleep(4000); // settle: the streams open, pools faulted in, encoders warm
    const load0 = load();
    const exclude = [];
    // The ring carries the first raw stream opened (an h264 stream's decoded twin): with three
    // pages, the first twin to start, which the reader's summary names.
    const reader = hasShm ? startReader(ring, seconds, events) : null;
    if (reader) exclude.push(reader.proc.pid);
    let audioReader = null;
    if (audio) {
      const ap = spawn(AUDIO_READER, ['--url', syncd.ws, '--seconds', String(seconds), '--verify', 'synthetic', '--quiet'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      ap.stdout.on('data', (d) => { out += d; });
      audioReader = { proc: ap, done: new Promise((r) => ap.once('exit', (code) => { let j = null; try { j = JSON.parse(out.trim().split('\n').pop()); } catch { /* none */ } r({ code, summary: j, out }); })) };
      exclude.push(ap.pid);
    }
    const cpu = cpuSampler(syncd.proc.pid, exclude);
    const s0 = await stats(syncd);
    const p0 = await Promise.all(pages.map(pageSnap));
    await Promise.all(pages.map((p) => p.evaluate(() => { window.bench.sent = []; window.bench.recording = true; })));
    const t0 = performance.now();
    await sleep(seconds * 1000);
    const s1 = await stats(syncd);
    const p1 = await Promise.all(pages.map(pageSnap));
    const elapsed = (performance.now() - t0) / 1000;
    const cpuFig = cpu();
    const sent = await Promise.all(pages.map((p) => p.evaluate(() => { window.bench.recording = false; window.bench.stopped = true; return window.bench.sent; })));
    const r = reader ? await reader.done : null;
    await sleep(300);
    const clockAfter = await clockOffset(pages[0]);
    const a = audioReader ? await audioReader.done : null;
    const streams = names.map((name, i) => {
      const st0 = streamOf(s0, name), st1 = streamOf(s1, name);
      const tw = codec === 'h264' ? `${name}.decoded` : name;
      const tw0 = streamOf(s0, tw), tw1 = streamOf(s1, tw);
      const pf = pageFigures(p0[i], p1[i]);
      pf.offeredFps = +((p1[i].p.offered - p0[i].p.offered) / elapsed).toFixed(2);
      return {
        name,
        acceptedFps: rate(st0, st1, 'frames_unique', elapsed),
        lowRateSeconds: delta(st0, st1, 'low_rate_seconds'),
        decodedFps: rate(tw0, tw1, 'frames_unique', elapsed),
        decodedLowRateSeconds: delta(tw0, tw1, 'low_rate_seconds'),
        minSecondFps: tw1?.recent_seconds_unique_fps?.length ? Math.min(...tw1.recent_seconds_unique_fps.slice(-Math.floor(elapsed) + 1)) : null,
        ...(codec === 'h264' ? { decode: decodeFigures(st0, st1) } : {}),
        megabytesPerSecond: +((p1[i].p.bytesSent - p0[i].p.bytesSent) / elapsed / 1e6).toFixed(2),
        page: pf,
      };
    });
    const result = {
      label, codec, size: `${w}x${h}`, fps: FPS, draw: DRAW, pages: nPages, seconds: +elapsed.toFixed(1),
      load: { before: load0, after: load() },
      ...cpuFig, streams,
    };
    if (r) {
      const ringPage = Math.max(0, names.indexOf(String(r.summary?.stream ?? '').replace(/\.decoded$/, '')));
      result.ring = { stream: r.summary?.stream, fps: r.summary ? +(((r.summary.verified ?? 0) + (r.summary.unhashed ?? 0)) / elapsed).toFixed(2) : null, exit: r.code, summary: r.summary };
      result.glassToGlassMs = {
        stream: names[ringPage],
        ...(await glassToGlass(events, sent[ringPage], clock.offsetUs)),
        clockErrorMs: +clock.errorMs.toFixed(2), clockDriftMs: +((clockAfter.offsetUs - clock.offsetUs) / 1000).toFixed(2),
      };
    }
    if (audio) {
      const au0 = s0.audio ?? {}, au1 = s1.audio ?? {};
      result.audio = {
        channels: au1.channels, framesDropped: (au1.frames_dropped ?? 0) - (au0.frames_dropped ?? 0),
        overrunEvents: (au1.overrun_events ?? 0) - (au0.overrun_events ?? 0), xruns: (au1.xruns ?? 0) - (au0.xruns ?? 0),
        gapFrames: (au1.gap_frames ?? 0) - (au0.gap_frames ?? 0),
        framesCaptured: (au1.frames_captured ?? 0) - (au0.frames_captured ?? 0),
        reader: a?.summary ? { exit: a.code, ...pick(a.summary, ['frames', 'dropped_frames', 'gap_frames', 'verify_failures', 'continuous', 'rtt_ms']) } : { exit: a?.code, out: a?.out?.slice(-500) },
      };
    }
    return result;
  } finally {
    await browser.close();
    await syncd.stop();
    rmSync(events, { force: true });
    rmSync(ring, { force: true });
  }
}

// syncd's decode of an h264 stream over the window (/stats streams[].publishers.decode): frames
// its twin dropped and the decoder dropped, by reason, and the decoder's time per frame.
function decodeFigures(st0, st1) {
  const d0 = st0?.publishers?.decode, d1 = st1?.publishers?.decode;
  if (!d0 || !d1) return null;
  const diff = (a = {}, b = {}) => Object.fromEntries(Object.entries(b).map(([k, v]) => [k, v - (a[k] ?? 0)]).filter(([, v]) => v));
  const st = (a, b) => (a && b && b.count > a.count ? { meanMs: +((b.total_us - a.total_us) / (b.count - a.count) / 1000).toFixed(2), maxMsEver: +(b.max_us / 1000).toFixed(2) } : null);
  return {
    twinDropped: diff(d0.dropped, d1.dropped), decoderDropped: diff(d0.decoder?.dropped, d1.decoder?.dropped),
    losses: (d1.losses ?? 0) - (d0.losses ?? 0), keyframeRequests: (d1.decoder?.keyframe_requests ?? 0) - (d0.decoder?.keyframe_requests ?? 0),
    decode: st(d0.decoder?.decode, d1.decoder?.decode),
  };
}

const pick = (o, keys) => Object.fromEntries(keys.filter((k) => k in o).map((k) => [k, o[k]]));

// The 1080p cost probes (no publisher running): draw + new VideoFrame(canvas) per draw mode, and
// the encoder alone.
async function probe() {
  const syncd = await startSyncd(['--publisher', '']);
  const browser = await openBrowser(syncd);
  const out = {};
  try {
    for (const draw of ['2d', 'webgl']) {
      const page = await openPage(browser, syncd, { probe: 1, codec: 'h264', w: 1920, h: 1080, fps: 60, draw });
      out[`videoFrame_${draw}`] = await page.evaluate(() => window.bench.videoFrameCost(120));
      // How fast the browser's encoder takes a moving bar at 1080p: one frame at a time (its
      // latency), and with up to 3 given and not yet out (its throughput).
      if (draw === '2d') {
        out.encoderAlone_1 = await page.evaluate(() => window.bench.encoderAlone(240, 1));
        out.encoderAlone_3 = await page.evaluate(() => window.bench.encoderAlone(240, 3));
        out.encoderAlone_1_wholeFrame = await page.evaluate(() => window.bench.encoderAlone(240, 1, true));
        out.encoderAlone_3_wholeFrame = await page.evaluate(() => window.bench.encoderAlone(240, 3, true));
      }
      await page.close();
    }
  } finally {
    await browser.close();
    await syncd.stop();
  }
  return out;
}

const results = [];
let probes = null;
if (ARMS.includes('probe')) {
  probes = await probe();
  console.error(`# probe ${JSON.stringify(probes)}`);
}
if (ARMS.includes('sizes')) {
  for (const [w, h] of SIZES) {
    for (const codec of CODECS) {
      const seconds = codec === 'h264' && w === 1920 ? SECONDS_1080_H264 : SECONDS;
      const r = await arm({ label: 'sizes', codec, w, h, seconds });
      results.push(r);
      console.error(`# ${JSON.stringify(r)}`);
    }
  }
}
if (ARMS.includes('three')) {
  const r = await arm({ label: 'three', codec: 'h264', w: 1280, h: 720, pages: 3, seconds: SECONDS, audio: true });
  results.push(r);
  console.error(`# ${JSON.stringify(r)}`);
}

const drawNote0 = DRAW === '2d' ? '2d (a moving bar and a frame counter, cheap to draw)' : 'webgl (demo/source.html\'s WebGL2 pattern on the software GL)';
const drawNote = `${drawNote0}, readback ${READBACK}`;
console.log(`${FPS} fps requested, page drawing ${drawNote}, syncd --publisher ${PUBLISHERS}, load before/after each arm in the JSON`);
const cols = ['arm', 'load1', 'other cores', 'size', 'codec', 'stream', 'offered', 'accepted', 'decoded', 'ring', 'low-rate s (stream/twin)', 'chromium cores', 'syncd cores', 'g2g p50/p95 ms', 'draw / capture / encode ms', 'page drops'];
const rows = [];
for (const r of results) {
  for (const s of r.streams) {
    rows.push([
      r.label, String(r.load.before[0]), String(r.otherCores), r.size, r.codec, s.name, String(s.page.offeredFps), String(s.acceptedFps), String(s.decodedFps),
      r.ring ? String(r.ring.fps) : '-', `${s.lowRateSeconds}/${s.decodedLowRateSeconds}`,
      String(r.chromiumCores), String(r.syncdCores),
      r.glassToGlassMs?.frames ? `${r.glassToGlassMs.p50}/${r.glassToGlassMs.p95}` : '-',
      `${s.page.drawMs} / ${s.page.captureMs} / ${s.page.encodeMs ?? s.page.readbackMs}`,
      Object.entries(s.page.dropped).map(([k, v]) => `${k} ${v}`).join(', ') || 'none',
    ]);
  }
}
const widths = cols.map((c, i) => Math.max(c.length, ...rows.map((row) => row[i].length)));
const line = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
console.log(line(cols));
console.log(line(widths.map((n) => '-'.repeat(n))));
for (const row of rows) console.log(line(row));
for (const r of results) if (r.audio) console.log(`audio (three pages): ${JSON.stringify(r.audio)}`);
for (const r of results) if (r.glassToGlassMs) console.log(`g2g ${r.label} ${r.size} ${r.codec}: ${JSON.stringify(r.glassToGlassMs)}`);
for (const r of results) for (const s of r.streams) if (s.decode) console.log(`syncd decode ${r.label} ${s.name}: ${JSON.stringify(s.decode)}, slowest second ${s.minSecondFps} fps`);
// Issue 29's goals, as measured here.
const find = (codec, size) => results.find((r) => r.label === 'sizes' && r.codec === codec && r.size === size);
const enc1080 = find('h264', '1920x1080'), raw1080 = find('raw', '1920x1080');
const verdict = (ok) => (ok ? 'met' : 'NOT met');
if (enc1080) {
  const s = enc1080.streams[0];
  const lowRate = Math.max(s.lowRateSeconds, s.decodedLowRateSeconds);
  console.log(`goal (b) 1080p60 encoded, 0 low-rate seconds over ${enc1080.seconds} s (stream/twin ${s.lowRateSeconds}/${s.decodedLowRateSeconds}): ${verdict(lowRate === 0)}`);
  if (raw1080) {
    const ratio = s.decodedFps / Math.max(0.01, raw1080.streams[0].decodedFps);
    console.log(`goal (b) encoded >= 4x raw at 1080p: ${s.decodedFps} / ${raw1080.streams[0].decodedFps} fps = ${ratio.toFixed(1)}x: ${verdict(ratio >= 4)}`);
  }
  if (enc1080.glassToGlassMs?.frames) console.log(`goal (b) glass to glass p50 < 33 ms at 1080p encoded: ${enc1080.glassToGlassMs.p50} ms: ${verdict(enc1080.glassToGlassMs.p50 < 33)}`);
}
for (const r of results.filter((x) => x.label === 'three')) {
  const worst = Math.max(...r.streams.map((s) => Math.max(s.lowRateSeconds, s.decodedLowRateSeconds)));
  console.log(`goal (c) three pages 1280x720@60 h264, each 0 low-rate seconds: ${r.streams.map((s) => `${s.name} ${s.acceptedFps}/${s.decodedFps} fps, ${s.lowRateSeconds}/${s.decodedLowRateSeconds}`).join('; ')}: ${verdict(worst === 0)}`);
  console.log(`goal (c) audio 0 drops: syncd frames_dropped ${r.audio.framesDropped}, overruns ${r.audio.overrunEvents}: ${verdict(r.audio.framesDropped === 0 && r.audio.overrunEvents === 0)}`);
}
if (probes) console.log(`probes (1080p, no publisher): ${JSON.stringify(probes)}`);
console.log(JSON.stringify({ fps: FPS, draw: DRAW, readback: READBACK, publishers: PUBLISHERS, probes, results }, null, 1));
