// Publishing from a page, in real Chromium: web/sync.js's publishCanvas (WebGL2 readback into
// pixel-pack buffers, fence, copy, flip, send) against a bare WebSocket sending the same bytes
// (header + RGBA pixels, no readback) from the same page, drawing the same pattern, in the same
// run, at 640x360, 1280x720 and 1920x1080. The figure is the library's unique frames/s accepted
// by syncd as a ratio of the bare socket's (goal >= 0.9).
//
//   cd tests/browser && SYNCD=../../build/release/src/daemon/syncd node bench/publish.bench.js
//   env: SYNC_BENCH_FPS (requested rate, default 60), SYNC_BENCH_SECONDS (window, default 6),
//        SYNC_BENCH_SIZES ("640x360,1280x720,1920x1080"), SYNC_BENCH_ROUNDS (default 3),
//        SYNC_BENCH_MIN_FRAMES (frames a window holds at least, default 60),
//        SYNC_BENCH_PAGE=1 also measures the library sending from the page's thread
//        (worker: false) beside its default, the publish Worker
import { startSyncd, launch, sleep, streamStats } from '../lib/harness.js';

const FPS = Number(process.env.SYNC_BENCH_FPS ?? 60);
const SECONDS = Number(process.env.SYNC_BENCH_SECONDS ?? 6);
const ROUNDS = Number(process.env.SYNC_BENCH_ROUNDS ?? 3);
const MIN_FRAMES = Number(process.env.SYNC_BENCH_MIN_FRAMES ?? 60);
const PAGE_MODE = process.env.SYNC_BENCH_PAGE === '1';
const SIZES = (process.env.SYNC_BENCH_SIZES ?? '640x360,1280x720,1920x1080').split(',').map((s) => s.split('x').map(Number));

const syncd = await startSyncd(['--max-pool-mb', '4096']);
const browser = await launch(syncd);

// Unique frames/s syncd accepted for `name` over a window of at least SECONDS and at least
// MIN_FRAMES frames (at 1920x1080 a page sends a few frames a second: a 6-s window of 15 frames
// would make one frame 7 % of the figure), at most 40 s.
async function measure(name) {
  await sleep(1500); // settle: the stream is open and its pool faulted in
  const s0 = await streamStats(syncd, name);
  const t0 = performance.now();
  await sleep(SECONDS * 1000);
  let s1 = await streamStats(syncd, name);
  while (s1.frames_unique - s0.frames_unique < MIN_FRAMES && performance.now() - t0 < 40000) {
    await sleep(250);
    s1 = await streamStats(syncd, name);
  }
  return (s1.frames_unique - s0.frames_unique) / ((performance.now() - t0) / 1000);
}

async function run(mode, w, h, round) {
  const page = await browser.newPage(`${syncd.base}/demo/receive.html?stream=none`);
  const name = `${mode}-${w}x${h}-${round}`;
  try {
    await page.evaluate(async ({ mode, name, w, h, fps }) => {
      const sync = await import('/web/sync.js');
      const { drawPattern } = await import('/demo/pattern.js');
      const canvas = document.createElement('canvas');
      canvas.width = w; canvas.height = h;
      document.body.append(canvas);
      const gl = canvas.getContext('webgl2', { antialias: false, alpha: false, preserveDrawingBuffer: false });
      const period = 1000 / fps;
      let index = 0;
      let next = performance.now();
      let send;
      if (mode !== 'bare') {
        await sync.connect(location.host, { client: 'bench' });
        const pub = await sync.publishCanvas(canvas, { stream: name, fps, manual: true, context: gl, slots: 4, worker: mode === 'library' });
        send = () => pub.capture();
        window.benchStats = () => pub.stats();
      } else {
        // The bare socket: the protocol's minimum (hello, stream.open, frames), one reused
        // buffer, the same drop-when-buffered rule as the library (2 frames).
        const ws = new WebSocket(`ws://${location.host}/ws`);
        ws.binaryType = 'arraybuffer';
        await new Promise((r) => { ws.onopen = r; });
        const reply = () => new Promise((r) => { ws.onmessage = (e) => r(JSON.parse(e.data)); });
        ws.send(JSON.stringify(sync.messages.hello('bench-bare')));
        await reply();
        ws.send(JSON.stringify(sync.messages.streamOpen({ name, width: w, height: h, fps, slots: 4 })));
        const opened = await reply();
        const message = new ArrayBuffer(sync.FRAME_HEADER_BYTES + w * h * 4);
        const view = new DataView(message);
        const pixels = new Uint8Array(message, sync.FRAME_HEADER_BYTES);
        let seq = 1, sent = 0, dropped = 0;
        send = () => {
          if (ws.bufferedAmount > 2 * message.byteLength) { ++dropped; return; }
          sync.stampMarker(pixels, seq);
          sync.writeFrameHeader(view, { streamId: opened.stream, sequence: seq++, width: w, height: h, format: 1 });
          ws.send(message);
          ++sent;
        };
        window.benchStats = () => ({ sent, dropped });
      }
      const tick = () => {
        const now = performance.now();
        if (now >= next) {
          next = Math.max(next + period, now - period / 2);
          drawPattern(gl, w, h, index++);
          send();
        }
        setTimeout(tick, Math.max(1, period / 2));
      };
      tick();
    }, { mode, name, w, h, fps: FPS });
    const fps = await measure(name);
    const stats = await page.evaluate(() => window.benchStats());
    return { fps, stats };
  } finally {
    await page.close();
  }
}

const rows = [];
for (const [w, h] of SIZES) {
  for (let round = 0; round < ROUNDS; ++round) {
    // Alternate the order so neither mode always runs on the warmer machine.
    const modes = PAGE_MODE ? ['bare', 'library', 'page'] : ['bare', 'library'];
    const order = round % 2 === 0 ? modes : [...modes].reverse();
    const r = {};
    for (const mode of order) r[mode] = await run(mode, w, h, round);
    const ratio = r.bare.fps > 0 ? r.library.fps / r.bare.fps : 0;
    const pageRatio = PAGE_MODE && r.bare.fps > 0 ? r.page.fps / r.bare.fps : null;
    rows.push({ size: `${w}x${h}`, round, bare: +r.bare.fps.toFixed(2), library: +r.library.fps.toFixed(2), ratio: +ratio.toFixed(3), sender: r.library.stats.sender, pageRatio: pageRatio === null ? null : +pageRatio.toFixed(3), libraryReadbackMsMax: +(r.library.stats.readbackMsMax ?? 0).toFixed(1), libraryDropped: r.library.stats.dropped });
    const page = PAGE_MODE ? `, page-thread library ${r.page.fps.toFixed(2)} fps (ratio ${pageRatio.toFixed(3)})` : '';
    console.log(`${w}x${h} round ${round}: bare ${r.bare.fps.toFixed(2)} fps, library (${r.library.stats.sender}) ${r.library.fps.toFixed(2)} fps, ratio ${ratio.toFixed(3)}${page}; library drops ${JSON.stringify(r.library.stats.dropped)}, readback max ${(r.library.stats.readbackMsMax ?? 0).toFixed(1)} ms`);
  }
}
// Per size, the median of the rounds' ratios: one slow round (the machine's, not the code's)
// moves it least.
const median = (xs) => { const v = [...xs].sort((a, b) => a - b); const m = v.length >> 1; return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2; };
const summary = SIZES.map(([w, h]) => {
  const mine = rows.filter((r) => r.size === `${w}x${h}`);
  return { size: `${w}x${h}`, medianRatio: +median(mine.map((r) => r.ratio)).toFixed(3), medianPageRatio: PAGE_MODE ? +median(mine.map((r) => r.pageRatio)).toFixed(3) : null };
});
for (const x of summary) console.log(`${x.size}: median ratio ${x.medianRatio}${PAGE_MODE ? `, page-thread ${x.medianPageRatio}` : ''}`);
console.log(JSON.stringify({ fps: FPS, seconds: SECONDS, minFrames: MIN_FRAMES, rows, summary }));
await browser.close();
await syncd.stop();
