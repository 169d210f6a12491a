// The page at the head of the seed's chain (tools/qualify/chain_arm.py): Chromium publishing a
// canvas as H.264 (WebCodecs) with the column marker to a syncd, for a given time, recording
// when each frame was captured. Run by the chain arm; prints one JSON object on stdout:
//   {"offset_us", "clock_error_ms", "drift_ms", "sent": [sequence, captureTimeUs, ...],
//    "page": {the publisher's stats and the page's timings}}
// offset_us = the page's clock (performance.timeOrigin + now, µs) - CLOCK_MONOTONIC (µs), as
// encoded.bench.js measures it, so that a consumer stamping with CLOCK_MONOTONIC gets glass to
// glass as read_ns / 1000 + offset_us - captureTimeUs.
//
//   cd tests/browser && node bench/chain-page.js --base http://127.0.0.1:PORT --stream chain \
//     --width 640 --height 360 --fps 60 --seconds 60
import { parseArgs } from 'node:util';
import { openBrowser, openPage, pageSnap, clockOffset } from '../lib/bench_page.js';

const { values: o } = parseArgs({
  options: {
    base: { type: 'string' }, stream: { type: 'string', default: 'chain' },
    width: { type: 'string', default: '640' }, height: { type: 'string', default: '360' },
    fps: { type: 'string', default: '60' }, seconds: { type: 'string', default: '60' },
  },
});
const syncd = { base: o.base };
const browser = await openBrowser(syncd);
let code = 0;
try {
  const page = await openPage(browser, syncd, {
    stream: o.stream, codec: 'h264', w: o.width, h: o.height, fps: o.fps, draw: '2d', marker: '1',
  });
  const clock = await clockOffset(page);
  await page.evaluate(() => { window.bench.recording = true; window.bench.start(); });
  process.stderr.write('chain-page: publishing\n');
  // Until --seconds pass, or SIGUSR2 (the arm is done with the page): then the report. Not
  // SIGTERM: playwright closes its browsers on that (handleSIGTERM).
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, Number(o.seconds) * 1000);
    process.once('SIGUSR2', () => { clearTimeout(timer); resolve(); });
  });
  await page.evaluate(() => { window.bench.stopped = true; });
  const clockAfter = await clockOffset(page);
  const snap = await pageSnap(page);
  const sent = await page.evaluate(() => window.bench.sent);
  process.stdout.write(`${JSON.stringify({
    offset_us: clock.offsetUs, clock_error_ms: clock.errorMs,
    drift_ms: (clockAfter.offsetUs - clock.offsetUs) / 1000, sent, page: snap,
  })}\n`);
} catch (e) {
  process.stderr.write(`chain-page: ${e.stack ?? e}\n${browser.logs.join('\n')}\n`);
  code = 1;
} finally {
  await browser.close();
}
process.exit(code);
