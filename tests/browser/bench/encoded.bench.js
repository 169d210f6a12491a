// Raw against encoded publishing from a page, in real Chromium: demo/source.html drawing its
// WebGL2 pattern at 60 fps (default) and publishing it with codec=raw (rgba8, readback + the
// publish Worker) or codec=h264 (WebCodecs VideoEncoder, constrained baseline) at 640x360,
// 1280x720 and 1920x1080. For each: unique frames/s syncd accepted over the window (from
// /stats frames_unique), the page's drops by reason over the window, and its encode time (h264:
// encode() to output, mean and max) or readback time (raw). Prints a table, then the JSON.
// Not part of `npm test`.
//
//   cd tests/browser && SYNCD=../../build/release/src/daemon/syncd node bench/encoded.bench.js
//   env: SYNC_BENCH_SECONDS (window, default 20), SYNC_BENCH_FPS (default 60),
//        SYNC_BENCH_SIZES ("640x360,1280x720,1920x1080"), SYNC_BENCH_CODECS ("raw,h264"),
//        SYNC_BENCH_PUBLISHERS (syncd --publisher, default "test": syncd then decodes each
//        h264 stream into its .decoded twin, as it does whenever a pixel consumer runs)
import { startSyncd, launch, sleep, streamStats } from '../lib/harness.js';

const SECONDS = Number(process.env.SYNC_BENCH_SECONDS ?? 20);
const FPS = Number(process.env.SYNC_BENCH_FPS ?? 60);
const SIZES = (process.env.SYNC_BENCH_SIZES ?? '640x360,1280x720,1920x1080').split(',').map((s) => s.split('x').map(Number));
const CODECS = (process.env.SYNC_BENCH_CODECS ?? 'raw,h264').split(',');
const PUBLISHERS = process.env.SYNC_BENCH_PUBLISHERS ?? 'test';

const syncd = await startSyncd(['--publisher', PUBLISHERS, '--max-pool-mb', '4096']);
const browser = await launch(syncd);

const pageStats = (page) => page.evaluate(() => window.syncSource.publisher.stats());

async function run(codec, w, h) {
  const name = `${codec}-${w}x${h}`;
  const page = await browser.newPage(`${syncd.base}/demo/source.html?stream=${name}&fps=${FPS}&w=${w}&h=${h}&codec=${codec}&ticket=0`);
  try {
    await page.waitForFunction(() => window.syncSource?.publisher || window.syncSource?.error, null, { timeout: 30000 });
    const err = await page.evaluate(() => window.syncSource.error);
    if (err) throw new Error(`${name}: ${JSON.stringify(err)}`);
    await sleep(3000); // settle: the stream open, its pool faulted in, the encoder warm
    const s0 = await streamStats(syncd, name);
    const p0 = await pageStats(page);
    const t0 = performance.now();
    await sleep(SECONDS * 1000);
    const s1 = await streamStats(syncd, name);
    const p1 = await pageStats(page);
    const seconds = (performance.now() - t0) / 1000;
    const dropped = {};
    for (const [k, v] of Object.entries(p1.dropped)) if (v - (p0.dropped[k] ?? 0)) dropped[k] = v - (p0.dropped[k] ?? 0);
    const encoded = p1.codec === 'h264';
    const ms = encoded
      ? { encodeMsMean: (p1.encodeMsTotal - p0.encodeMsTotal) / Math.max(1, p1.encoded - p0.encoded), encodeMsMax: p1.encodeMsMax }
      : { readbackMsMean: (p1.readbackMsTotal - p0.readbackMsTotal) / Math.max(1, p1.sent - p0.sent), readbackMsMax: p1.readbackMsMax };
    return {
      codec: p1.codec, size: `${w}x${h}`, fps: FPS, seconds: +seconds.toFixed(1),
      acceptedFps: +((s1.frames_unique - s0.frames_unique) / seconds).toFixed(2),
      offeredFps: +((p1.offered - p0.offered) / seconds).toFixed(2),
      dropped, droppedAtSyncd: s1.frames_dropped_total - s0.frames_dropped_total,
      megabytesPerSecond: +((p1.bytesSent - p0.bytesSent) / seconds / 1e6).toFixed(2),
      ...(encoded ? { encoder: p1.encoder.codec, bitrate: p1.bitrate, keyframeRequests: p1.keyframeRequests } : { readback: p1.readback, sender: p1.sender }),
      ...Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, +v.toFixed(2)])),
    };
  } finally {
    await page.close();
  }
}

const results = [];
try {
  for (const [w, h] of SIZES) {
    for (const codec of CODECS) {
      const r = await run(codec, w, h);
      results.push(r);
      console.error(`# ${JSON.stringify(r)}`);
    }
  }
} finally {
  await browser.close();
  await syncd.stop();
}

const cols = ['size', 'codec', 'acceptedFps', 'offeredFps', 'megabytesPerSecond', 'encode/readback ms mean', 'max', 'page drops by reason'];
const rows = results.map((r) => [
  r.size, r.codec, r.acceptedFps.toFixed(1), r.offeredFps.toFixed(1), r.megabytesPerSecond.toFixed(2),
  (r.encodeMsMean ?? r.readbackMsMean).toFixed(2), (r.encodeMsMax ?? r.readbackMsMax).toFixed(2),
  Object.entries(r.dropped).map(([k, v]) => `${k} ${v}`).join(', ') || 'none',
]);
const widths = cols.map((c, i) => Math.max(c.length, ...rows.map((row) => row[i].length)));
const line = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
console.log(`${FPS} fps requested, ${SECONDS} s windows, syncd --publisher ${PUBLISHERS}`);
console.log(line(cols));
console.log(line(widths.map((n) => '-'.repeat(n))));
for (const row of rows) console.log(line(row));
console.log(JSON.stringify({ fps: FPS, seconds: SECONDS, publishers: PUBLISHERS, results }, null, 1));
