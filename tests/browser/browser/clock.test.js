// publishCanvas's capture clock in a page that stays visible while another page covers it: a
// second page opened in front (same browser, same context) makes Chromium throttle the first
// page's requestAnimationFrame from 60 to 1-2 callbacks/s, with visibilityState still 'visible',
// so a rAF clock alone published at 1 frame/s. The publisher notices rAF falling behind the
// nominal rate and lets a timer drive its captures (stats: clock 'timer', clockFallbacks), and
// hands them back to rAF once the page is in front again.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startSyncd, launch, sleep, streamStats, waitFor } from '../lib/harness.js';

const FPS = 30;
const WINDOW_MS = 5000;

let syncd, browser;
before(async () => {
  syncd = await startSyncd();
  browser = await launch(syncd);
  console.log(`# pages served by ${browser.servedBy}`);
});
after(async () => {
  await browser?.close();
  assert.equal(await syncd?.stop(), 0);
});

// In page A: a 320x180 2D canvas redrawn by a timer (the page's own rendering does not depend on
// rAF, so every frame differs), published raw with the default clock; rAF callbacks counted.
async function startPublishing({ fps }) {
  const { connect, publishCanvas } = await import('/web/sync.js');
  const conn = await connect(location.host, { client: 'clock-test' });
  const canvas = document.createElement('canvas');
  canvas.width = 320; canvas.height = 180;
  document.body.append(canvas);
  const ctx = canvas.getContext('2d');
  let i = 0;
  setInterval(() => { ctx.fillStyle = `hsl(${(i += 7) % 360} 80% 50%)`; ctx.fillRect(0, 0, 320, 180); }, 1000 / fps / 2);
  window.rafTicks = 0;
  const count = () => { ++window.rafTicks; requestAnimationFrame(count); };
  requestAnimationFrame(count);
  window.pub = await publishCanvas(canvas, { stream: 'occluded', fps, codec: 'raw', context: ctx, connection: conn });
}

const pageState = (page) => page.evaluate(() => ({ rafTicks: window.rafTicks, visibility: document.visibilityState, stats: window.pub.stats(), now: performance.now() }));

// Unique frames/s of the stream at syncd, and rAF callbacks/s in page A, over one window.
async function measure(a, ms) {
  const s0 = await streamStats(syncd, 'occluded');
  const p0 = await pageState(a);
  const t0 = performance.now();
  await sleep(ms);
  const s1 = await streamStats(syncd, 'occluded');
  const p1 = await pageState(a);
  const seconds = (performance.now() - t0) / 1000;
  return {
    uniqueFps: (s1.frames_unique - s0.frames_unique) / seconds,
    rafFps: (p1.rafTicks - p0.rafTicks) / ((p1.now - p0.now) / 1000),
    visibility: p1.visibility, stats: p1.stats,
  };
}

test('a visible page covered by another keeps publishing at its rate: the timer takes over from a throttled rAF', async () => {
  const a = await browser.newPage(`${syncd.base}/healthz`);
  let b;
  try {
    await a.evaluate(startPublishing, { fps: FPS });
    await waitFor(async () => (await streamStats(syncd, 'occluded'))?.frames_accepted >= FPS, { what: 'A publishing' });
    const alone = await measure(a, 3000);
    console.log(`# A in front: ${alone.uniqueFps.toFixed(2)} unique frames/s at syncd, rAF ${alone.rafFps.toFixed(1)}/s, clock ${alone.stats.clock}`);
    assert.equal(alone.stats.clock, 'raf');
    assert.equal(alone.stats.clockFallbacks, 0);

    // B in front of A, in the same context.
    b = await browser.newPage(`${syncd.base}/healthz`);
    await b.bringToFront();
    const fell = await waitFor(async () => { const p = await pageState(a); return p.stats.clockFallbacks >= 1 && p; }, { what: 'the publisher to notice rAF falling behind', timeoutMs: 20000 });
    assert.equal(fell.stats.clock, 'timer');
    await sleep(1000);
    const covered = await measure(a, WINDOW_MS);
    console.log(`# B in front: ${covered.uniqueFps.toFixed(2)} unique frames/s at syncd, A's rAF ${covered.rafFps.toFixed(1)}/s, visibility ${covered.visibility}, clock ${covered.stats.clock}, clockFallbacks ${covered.stats.clockFallbacks}`);
    // The case under test: rAF throttled while the page still says it is visible.
    assert.equal(covered.visibility, 'visible');
    assert.ok(covered.rafFps < FPS / 2, `A's rAF ran at ${covered.rafFps}/s: Chromium did not throttle it, so this test shows nothing`);
    assert.equal(covered.stats.clock, 'timer');
    assert.ok(covered.uniqueFps >= 0.9 * FPS, `unique frames/s at syncd ${covered.uniqueFps} < 0.9 x ${FPS}`);
    const p = covered.stats;
    assert.equal(p.offered, p.sent + p.droppedTotal + p.inFlight, JSON.stringify(p));

    // A in front again: rAF recovers and gets the captures back (within its retry window).
    await b.close();
    b = null;
    await a.bringToFront();
    const back = await waitFor(async () => { const q = await pageState(a); return q.stats.clock === 'raf' && q; }, { what: 'rAF to drive the captures again', timeoutMs: 20000 });
    const again = await measure(a, 3000);
    console.log(`# A in front again: ${again.uniqueFps.toFixed(2)} unique frames/s at syncd, rAF ${again.rafFps.toFixed(1)}/s, clock ${again.stats.clock}, clockFallbacks ${back.stats.clockFallbacks}`);
    assert.ok(again.uniqueFps >= 0.9 * FPS, `unique frames/s at syncd ${again.uniqueFps} < 0.9 x ${FPS}`);
    await a.evaluate(() => window.pub.stop());
  } finally {
    await b?.close();
    await a.close();
  }
});
