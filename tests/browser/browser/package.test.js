// The client as an npm package (web/package.json, docs/web.md "The client as a package"): `npm
// pack` on web/, the tarball installed into a small app, the app bundled with a real bundler
// (esbuild) and type-checked against the package's own types, the bundled page served by a
// plain HTTP server of its own (not syncd), and in real Chromium: with syncd down the page's
// connect() rejects with the typed SyncError 'syncd_unreachable' (the bundle needs nothing from
// syncd to say so; importing /web/sync.js from a syncd that is down fails with a plain
// TypeError instead), and with syncd up it connects, and publishes (from the page's thread, or
// from the publish Worker once the package's sync-worker.js and sync.js are served beside it).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, readFile, writeFile, rm } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { startSyncd, launch, webRoot, browserTestsDir, streamStats, waitFor } from '../lib/harness.js';

const run = promisify(execFile);
const NPM = process.env.NPM ?? 'npm';

let tmp, browser, server, pkg;
before(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'sync-package-'));
  browser = await launch(null);
});
after(async () => {
  server?.close();
  await browser?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

// The page's code: it imports the package by name, as a page author's app would.
const APP = `import { connect, publishCanvas, SyncError } from 'syncd-client';

const out = document.getElementById('out');
const syncd = new URLSearchParams(location.search).get('syncd');
try {
  const conn = await connect(syncd, { client: 'bundled-page', timeoutMs: 3000 });
  const canvas = document.createElement('canvas');
  canvas.width = 64; canvas.height = 32;
  const ctx = canvas.getContext('2d');
  ctx.fillRect(0, 0, 64, 32);
  const pub = await publishCanvas(canvas, { stream: 'bundled', fps: 30, clock: 'timer', context: ctx, connection: conn });
  await new Promise((r) => setTimeout(r, 1000));
  await pub.stop();
  out.dataset.result = JSON.stringify({ ok: true, server: conn.welcome?.server, sender: pub.sender, sent: pub.stats().sent });
  conn.close();
} catch (e) {
  out.dataset.result = JSON.stringify({ ok: false, syncError: e instanceof SyncError, name: e.name, code: e.code, retryable: e.retryable, message: String(e.message) });
}
`;

// The same, as TypeScript against the installed package's types (exports "types").
const APP_TS = `import { connect, SyncError, type SyncErrorCode, type SyncConnection } from 'syncd-client';

export async function reach(host: string): Promise<SyncErrorCode | SyncConnection> {
  try {
    return await connect(host, { timeoutMs: 3000 });
  } catch (e) {
    if (e instanceof SyncError && e.code === 'syncd_unreachable') return e.code;
    throw e;
  }
}
`;

test('npm pack on web/: the tarball holds the module, its types and the Worker, and nothing else', async () => {
  const { stdout } = await run(NPM, ['pack', '--json', '--pack-destination', tmp], { cwd: webRoot });
  const [packed] = JSON.parse(stdout);
  const manifest = JSON.parse(await readFile(path.join(webRoot, 'package.json'), 'utf8'));
  assert.equal(packed.name, manifest.name);
  assert.equal(packed.version, manifest.version);
  assert.deepEqual(packed.files.map((f) => f.path).sort(), ['package.json', 'sync-worker.js', 'sync.d.ts', 'sync.js']);
  assert.deepEqual(manifest.exports['.'], { types: './sync.d.ts', default: './sync.js' });
  assert.equal(manifest.types, './sync.d.ts');
  pkg = { name: packed.name, tarball: path.join(tmp, packed.filename) };
  console.log(`# packed ${packed.filename}: ${packed.entryCount} files, ${packed.size} bytes`);
});

test('a page that bundles the package (esbuild) gets syncd_unreachable while syncd is down, and connects once it is up', async () => {
  assert.ok(pkg, 'npm pack ran');
  // A small app with the tarball installed (no registry: the package has no dependencies).
  const app = path.join(tmp, 'app');
  await mkdir(path.join(app, 'dist'), { recursive: true });
  await writeFile(path.join(app, 'package.json'), JSON.stringify({ name: 'bundled-page', private: true, type: 'module' }));
  await run(NPM, ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', pkg.tarball], { cwd: app });
  await writeFile(path.join(app, 'main.js'), APP);
  await writeFile(path.join(app, 'check.ts'), APP_TS);

  // Types: the package's `exports` lead tsc to sync.d.ts.
  const tsc = path.join(browserTestsDir, 'node_modules/typescript/bin/tsc');
  const types = await run(process.execPath, [tsc, '--strict', '--noEmit', '--target', 'es2022', '--module', 'es2022', '--moduleResolution', 'bundler', '--lib', 'es2022,dom,dom.iterable', 'check.ts'], { cwd: app }).catch((e) => e);
  assert.equal(types.code ?? 0, 0, `${types.stdout}${types.stderr}`);

  // Bundled by esbuild from node_modules: one file, no import left for the browser to make.
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    absWorkingDir: app, entryPoints: ['main.js'], bundle: true, format: 'esm', target: 'chrome120',
    outfile: 'dist/app.js', logLevel: 'silent', metafile: true,
  });
  assert.deepEqual(result.errors, []);
  const inputs = Object.keys(result.metafile.inputs);
  assert.ok(inputs.some((p) => p.endsWith('node_modules/syncd-client/sync.js')), `bundled: ${inputs.join(', ')}`);
  const bundle = await readFile(path.join(app, 'dist/app.js'), 'utf8');
  assert.doesNotMatch(bundle, /^\s*import\s/m, 'no import statement left in the bundle');
  console.log(`# esbuild ${esbuild.version}: dist/app.js ${bundle.length} bytes from ${inputs.length} inputs`);

  // Served from a plain HTTP server of its own on another loopback port: not syncd.
  const files = { '/': ['text/html', '<!doctype html><title>bundled</title><div id="out"></div><script type="module" src="/dist/app.js"></script>'], '/dist/app.js': ['text/javascript', bundle] };
  server = http.createServer((req, res) => {
    const f = files[new URL(req.url, 'http://x').pathname];
    res.writeHead(f ? 200 : 404, { 'content-type': f ? f[0] : 'text/plain', 'cache-control': 'no-store' });
    res.end(f ? f[1] : 'not found\n');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const pageBase = `http://127.0.0.1:${server.address().port}`;
  const resultOf = async (syncdHost) => {
    const page = await browser.newPage(`${pageBase}/?syncd=${syncdHost}`);
    try {
      await page.waitForSelector('#out[data-result]', { state: 'attached', timeout: 20000 });
      return JSON.parse(await page.getAttribute('#out', 'data-result'));
    } finally {
      await page.close();
    }
  };

  // syncd down: a port where nothing listens.
  const free = net.createServer();
  await new Promise((r) => free.listen(0, '127.0.0.1', r));
  const downPort = free.address().port;
  await new Promise((r) => free.close(r));
  const down = await resultOf(`127.0.0.1:${downPort}`);
  console.log(`# syncd down: ${JSON.stringify(down)}`);
  assert.equal(down.ok, false);
  assert.equal(down.syncError, true, 'the bundle\'s own SyncError class');
  assert.equal(down.name, 'SyncError');
  assert.equal(down.code, 'syncd_unreachable');
  assert.equal(down.retryable, true);
  // The other way, importing the module from syncd, has no SyncError to give while syncd is
  // down: the import itself fails, with the browser's plain TypeError.
  const page = await browser.newPage(`${pageBase}/`);
  try {
    const imported = await page.evaluate(async (url) => {
      try {
        await import(url);
        return { ok: true };
      } catch (e) {
        return { ok: false, name: e.name, code: e.code ?? null, message: String(e.message) };
      }
    }, `http://127.0.0.1:${downPort}/web/sync.js`);
    console.log(`# import from a syncd that is down: ${JSON.stringify(imported)}`);
    assert.equal(imported.ok, false);
    assert.equal(imported.name, 'TypeError');
    assert.equal(imported.code, null);
  } finally {
    await page.close();
  }

  // syncd up: the same bundle connects, and publishes (from the page's thread: the bundle has
  // no sync-worker.js beside it, so its Worker cannot load and the page sends, docs/web.md).
  const syncd = await startSyncd();
  try {
    const up = await resultOf(`127.0.0.1:${syncd.port}`);
    console.log(`# syncd up: ${JSON.stringify(up)}`);
    assert.equal(up.ok, true, up.message);
    assert.match(up.server, /syncd/);
    assert.equal(up.sender, 'page');
    assert.ok(up.sent > 0, JSON.stringify(up));
    await waitFor(async () => (await streamStats(syncd, 'bundled'))?.frames_offered === up.sent, { what: 'the bundled page\'s frames in syncd' });
    // With the package's sync-worker.js and sync.js served beside the bundle, the Worker loads.
    for (const f of ['sync-worker.js', 'sync.js']) files[`/dist/${f}`] = ['text/javascript', await readFile(path.join(app, 'node_modules/syncd-client', f), 'utf8')];
    const withWorker = await resultOf(`127.0.0.1:${syncd.port}`);
    console.log(`# syncd up, Worker files beside the bundle: ${JSON.stringify(withWorker)}`);
    assert.equal(withWorker.ok, true, withWorker.message);
    assert.equal(withWorker.sender, 'worker');
    assert.ok(withWorker.sent > 0, JSON.stringify(withWorker));
  } finally {
    assert.equal(await syncd.stop(), 0);
  }
});
