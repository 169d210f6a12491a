// The encoded-publishing bench page (bench/encoded-page.html) in Chromium, shared by the benches
// and drivers that publish a page's canvas: bench/encoded.bench.js and bench/chain-page.js.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { launch, browserTestsDir } from './harness.js';

const PAGE = readFileSync(path.join(browserTestsDir, 'bench/encoded-page.html'));

/** A Chromium whose syncd origin serves the bench page at /bench/encoded-page.html. */
export async function openBrowser(syncd) {
  // The bench page is routed in at syncd's origin; a routed page has no IP address space, so
  // Local Network Access checks would block its loopback WebSocket: off.
  const browser = await launch(syncd, { extraArgs: ['--disable-features=LocalNetworkAccessChecks'] });
  await browser.context.route((url) => url.origin === syncd.base && url.pathname === '/bench/encoded-page.html',
    (route) => route.fulfill({ status: 200, body: PAGE, headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' } }));
  return browser;
}

/** The bench page with `query` (stream, codec, w, h, fps, draw, marker, readback), once ready. */
export async function openPage(browser, syncd, query) {
  const page = await browser.newPage(`${syncd.base}/bench/encoded-page.html?${new URLSearchParams(query)}`);
  await page.waitForFunction(() => window.bench?.ready || window.bench?.error, null, { timeout: 30000 });
  const err = await page.evaluate(() => window.bench.error);
  if (err) throw new Error(`${query.stream}: ${err}\n${browser.logs.join('\n')}`);
  return page;
}

/** The publisher's stats and the page's own timings. */
export const pageSnap = (page) => page.evaluate(() => {
  const b = window.bench;
  return { p: b.publisher.stats(), drawn: b.drawn, drawMsTotal: b.drawMsTotal, captureMsTotal: b.captureMsTotal, captureMsMax: b.captureMsMax, late: b.late };
});

/**
 * offset = page clock (µs) - this process's CLOCK_MONOTONIC (µs), from the narrowest of n round
 * trips (error <= half its width). Chromium's performance.now() advances on CLOCK_MONOTONIC too.
 */
export async function clockOffset(page, n = 20) {
  let best = null;
  for (let i = 0; i < n; ++i) {
    const m0 = process.hrtime.bigint();
    const p = await page.evaluate(() => window.bench.nowUs());
    const m1 = process.hrtime.bigint();
    const width = Number(m1 - m0) / 1000;
    if (!best || width < best.width) best = { width, offset: p - (Number(m0) + Number(m1)) / 2000 };
  }
  return { offsetUs: best.offset, errorMs: best.width / 2000 };
}
