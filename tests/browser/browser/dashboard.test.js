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
    '--audio-source', 'synthetic:2@48000',
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
  const recent = JSON.parse(await page.getAttribute(`${row} [data-field="recent_seconds_unique_fps"]`, 'data-value'));
  assert.ok(recent.length >= 1);
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

  const shot = path.join(tmp, 'dashboard.png');
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`# dashboard: pattern ${fps} fps, rss ${(rss / 2 ** 20).toFixed(1)} MiB, ${poses} pose events, screenshot ${shot}`);

  // The numbers move: polls keep coming and the accepted count grows.
  const polls = await num(page, '#polls');
  await waitFor(async () => (await num(page, `${row} [data-field="frames_accepted"]`)) > accepted && (await num(page, '#polls')) > polls, { what: 'live updates' });
  await page.close();
});

test('dashboard says so when syncd goes away', async () => {
  const page = await browser.newPage(`${syncd.base}/?interval_ms=300&pose=0`);
  await waitFor(async () => (await page.getAttribute('#status', 'data-ok')) === 'true', { what: 'live' });
  assert.equal(await syncd.stop(), 0);
  await waitFor(async () => (await page.getAttribute('#status', 'data-ok')) === 'false', { what: 'offline status' });
  await page.close();
});
