// The dashboard (/) renders live numbers from /stats: per-stream unique fps and its plot, drops
// by reason, memory, connections, and the audio and head-pose sections when syncd has them.
// Assertions are on DOM numbers, not pixels; a screenshot goes to the test's temp dir.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startSyncd, launch, stats, waitFor, repoRoot } from '../lib/harness.js';

let syncd, browser, tmp;
before(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'sync-dashboard-'));
  syncd = await startSyncd([
    '--source', 'pattern:320x180@30',
    '--headtracker', `replay:${path.join(repoRoot, 'tests/data/headtrack/synthetic.replay')}`,
    '--audio-source', 'synthetic:2@48000,tone',
  ]);
  browser = await launch(syncd);
});
after(async () => {
  await browser?.close();
  assert.equal(await syncd?.stop(), 0);
});

const num = async (page, sel) => Number(await page.getAttribute(sel, 'data-value'));

test('dashboard shows live stream, memory and connection numbers', async () => {
  const page = await browser.newPage(`${syncd.base}/?interval_ms=500`);
  await waitFor(async () => (await num(page, '#polls')) >= 3, { what: '3 polls' });
  // The built-in pattern source runs at 30 fps: its row shows it once a second has completed.
  const row = 'tr[data-stream="pattern"]';
  await page.waitForSelector(row);
  const fps = await waitFor(async () => { const v = await num(page, `${row} [data-field="last_second_unique_fps"]`); return v >= 20 && v; }, { what: 'pattern fps >= 20' });
  const s = await stats(syncd);
  const pattern = s.streams.find((x) => x.name === 'pattern');
  assert.ok(Math.abs(fps - pattern.last_second_unique_fps) <= 5, `DOM ${fps} vs /stats ${pattern.last_second_unique_fps}`);
  const accepted = await num(page, `${row} [data-field="frames_accepted"]`);
  assert.ok(accepted > 0 && accepted <= pattern.frames_accepted, `accepted ${accepted} vs ${pattern.frames_accepted}`);
  const drops = JSON.parse(await page.getAttribute(`${row} [data-field="frames_dropped"]`, 'data-value'));
  assert.deepEqual(Object.keys(drops).sort(), Object.keys(pattern.frames_dropped).sort());
  assert.ok(Number(await page.getAttribute(`canvas.plot[data-stream^="pattern#"]`, 'data-points')) >= 1);
  const rss = await num(page, '#memory');
  assert.ok(rss > 1e6 && Math.abs(rss - s.process.resident_memory_bytes) / s.process.resident_memory_bytes < 0.5, `rss ${rss}`);
  assert.ok((await num(page, '#connections')) >= 1);
  assert.equal(await num(page, '#stream-count'), s.streams.filter((x) => x.open).length);
  assert.equal(await page.getAttribute('#status', 'data-ok'), 'true');

  // Audio and head-pose sections appear because syncd has those sources.
  await waitFor(async () => !(await page.isHidden('#audio')) && !(await page.isHidden('#headtracker')), { what: 'audio and headtracker sections' });
  assert.equal(await page.getAttribute('#audio-backend', 'data-value'), 'running');
  assert.ok((await num(page, '#audio-frames')) > 0);
  const poses = await waitFor(async () => { const n = await page.evaluate(() => window.syncDashboard.poseEvents); return n > 0 && n; }, { what: 'live pose events' });
  const ypr = await waitFor(async () => { const v = await page.getAttribute('#ht-ypr', 'data-value'); return v && v !== '' && JSON.parse(v); }, { what: 'yaw/pitch/roll in the DOM' });
  assert.equal(ypr.length, 3);
  assert.ok(ypr.every(Number.isFinite));

  // Plots with axes: unique fps, drops per second, RTT (the dashboard's own control ping).
  for (const plot of ['fps', 'drops']) {
    assert.ok(Number(await page.getAttribute(`#stream-panels div[data-stream="pattern"] canvas[data-plot="${plot}"]`, 'data-points')) >= 1, plot);
  }
  const rtt = await waitFor(async () => { const v = await num(page, '#rtt'); return v > 0 && v; }, { what: 'control RTT' });
  assert.ok(rtt < 1000, `rtt ${rtt} ms`);
  assert.ok(Number(await page.getAttribute('canvas[data-plot="rtt"]', 'data-points')) >= 1);
  // Per-publisher state, and links to every demo that answer.
  assert.match(await page.textContent('tr[data-stream="pattern"][data-publisher="test"] [data-field="state"]'), /delivered \d+/);
  for (const id of ['link-source', 'link-receive', 'link-stats', 'link-metrics']) {
    const href = await page.getAttribute(`#${id}`, 'href');
    assert.equal((await fetch(new URL(href, syncd.base))).status, 200, href);
  }

  const shot = path.join(tmp, 'dashboard.png');
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`# dashboard: pattern ${fps} fps, rss ${(rss / 2 ** 20).toFixed(1)} MiB, ${poses} pose events, screenshot ${shot}`);

  // The numbers move: polls keep coming and the accepted count grows.
  const polls = await num(page, '#polls');
  await waitFor(async () => (await num(page, `${row} [data-field="frames_accepted"]`)) > accepted && (await num(page, '#polls')) > polls, { what: 'live updates' });
  await page.close();
});

test('a receiver link copied from the dashboard plays the pattern; the page counters agree', async () => {
  const page = await browser.newPage(`${syncd.base}/?interval_ms=500&pose=0`);
  try {
    const button = 'tr[data-stream="pattern"] [data-field="receiver_link"] button';
    await page.waitForSelector(button);
    await page.click(button);
    const link = await waitFor(async () => page.getAttribute(button, 'data-link'), { what: 'receiver link' });
    assert.match(link, /\/demo\/receive\.html\?stream=pattern&ticket=[0-9a-f]{32}/);
    const receiver = await browser.newPage(link);
    const frames = await waitFor(async () => { const n = await receiver.evaluate(() => window.syncReceive?.frames ?? 0); return n >= 5 && n; }, { what: 'the receiver playing the pattern' });
    // Checked by its column marker (syncd's pattern has no demo reference block) and drawn:
    // every frame verified, none counted as an error.
    const r = await waitFor(async () => { const v = await receiver.evaluate(() => ({ ...window.syncReceive, connection: undefined, stream: undefined })); return v.pairs >= 5 && v; }, { what: 'verified frames' });
    assert.equal(r.markerErrors, 0, JSON.stringify(r));
    assert.equal(r.checksumErrors, 0, JSON.stringify(r));
    assert.match(await receiver.textContent('#checksum-errors'), /not checked/);
    // The link survives a reload (16 uses).
    await receiver.reload();
    await waitFor(async () => (await receiver.evaluate(() => window.syncReceive?.frames ?? 0)) >= 3, { what: 'frames after a reload' });
    await receiver.close();

    // A page publishing through sync.js: the dashboard shows the page's own counters.
    const source = await browser.newPage(`${syncd.base}/demo/source.html?stream=counted&fps=15&w=320&h=180`);
    await source.waitForFunction(() => window.syncSource?.publisher, null, { timeout: 15000 });
    const row = 'tr[data-stream="counted"]';
    await waitFor(async () => (await num(page, `${row} [data-field="source_offered"]`)) >= 10, { what: 'page counters on the dashboard' });
    const shown = await num(page, `${row} [data-field="source_offered"]`);
    const own = await source.evaluate(() => window.syncSource.publisher.stats());
    // Reported once a second, polled every 500 ms: the dashboard is at most ~2 s behind.
    assert.ok(shown <= own.offered && shown >= own.offered - 2 * 15 - 5, `dashboard ${shown}, page ${own.offered}`);
    const src = (await stats(syncd)).streams.find((x) => x.name === 'counted').source;
    assert.equal(src.offered, src.sent + src.dropped_total + src.in_flight);
    console.log(`# receiver link: ${frames} frames; page offered ${own.offered}, dashboard shows ${shown}`);
    await source.close();
  } finally {
    await page.close();
  }
});

test('audio levels from audio.read: one meter per channel', async () => {
  const page = await browser.newPage(`${syncd.base}/?interval_ms=500&pose=0&levels=1`);
  try {
    await waitFor(async () => (await page.evaluate(() => window.syncDashboard.levelReads)) >= 3, { what: '3 level reads' });
    assert.equal(await page.getAttribute('#levels', 'data-channels'), '2');
    const levels = JSON.parse(await page.getAttribute('#levels', 'data-levels'));
    assert.equal(levels.length, 2);
    // The tone signal: every channel a sine at 0.25, i.e. -12 dBFS peak.
    assert.ok(levels.every((v) => v > -14 && v < -10), JSON.stringify(levels));
  } finally {
    await page.close();
  }
});

test('dashboard says so when syncd goes away', async () => {
  const page = await browser.newPage(`${syncd.base}/?interval_ms=300&pose=0`);
  await waitFor(async () => (await page.getAttribute('#status', 'data-ok')) === 'true', { what: 'live' });
  assert.equal(await syncd.stop(), 0);
  await waitFor(async () => (await page.getAttribute('#status', 'data-ok')) === 'false', { what: 'offline status' });
  await page.close();
});
