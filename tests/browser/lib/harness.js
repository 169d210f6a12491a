// Test harness: starts a real syncd on a free port, a real Chromium (Debian's, via
// playwright-core) with the flags from ../shared/FIELD-NOTES.md and a fresh profile, and makes
// the pages of web/ available at syncd's origin.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import readline from 'node:readline';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const browserTestsDir = path.resolve(here, '..');
export const repoRoot = path.resolve(browserTestsDir, '../..');
export const webRoot = path.join(repoRoot, 'web');
export const SYNCD = path.resolve(browserTestsDir, process.env.SYNCD ?? '../../build/release/src/daemon/syncd');
export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  // Hidden and occluded pages must keep rendering and reading: two pages run at once.
  '--disable-background-timer-throttling', '--disable-renderer-backgrounding',
  '--disable-backgrounding-occluded-windows',
];

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Starts syncd with `--port 0`; resolves once it prints `syncd listening on HOST:PORT`. */
export async function startSyncd(args = []) {
  const proc = spawn(SYNCD, ['--port', '0', '--status-line', 'off', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; if (stderr.length > 65536) stderr = stderr.slice(-32768); });
  const lines = readline.createInterface({ input: proc.stdout });
  const first = await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('syncd printed nothing within 10 s')), 10000);
    proc.once('error', (e) => { clearTimeout(t); reject(e); });
    proc.once('exit', (code) => { clearTimeout(t); reject(new Error(`syncd exited (${code}) before listening: ${stderr}`)); });
    lines.once('line', (l) => { clearTimeout(t); resolve(l); });
  });
  const m = /syncd listening on (.+):(\d+)\s*$/.exec(first);
  if (!m) {
    proc.kill('SIGKILL');
    throw new Error(`unexpected first line from syncd: ${first}`);
  }
  lines.on('line', () => {}); // keep draining stdout
  const port = Number(m[2]);
  const base = `http://127.0.0.1:${port}`;
  return {
    proc, port, base, ws: `ws://127.0.0.1:${port}/ws`,
    get stderr() { return stderr; },
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      const exited = new Promise((r) => proc.once('exit', (code, sig) => r(code ?? sig)));
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}

export async function getJson(base, p) {
  const r = await fetch(base + p, { cache: 'no-store' });
  if (!r.ok) throw new Error(`${p}: HTTP ${r.status}`);
  return r.json();
}

export const stats = (syncd) => getJson(syncd.base, '/stats');

export async function streamStats(syncd, name) {
  const s = await stats(syncd);
  // The newest stream of that name (closed ones stay listed).
  return (s.streams ?? []).filter((x) => x.name === name).sort((a, b) => b.id - a.id)[0] ?? null;
}

export async function waitFor(fn, { timeoutMs = 15000, intervalMs = 100, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await sleep(intervalMs);
  }
  throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
}

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css', '.json': 'application/json', '.ts': 'text/plain' };

/** web/ file for a URL path, with syncd's mapping: / -> index.html, /demo/* and /web/*. */
export function webFileFor(pathname) {
  let rel;
  if (pathname === '/' || pathname === '/index.html') rel = 'index.html';
  else if (pathname.startsWith('/demo/')) rel = pathname.slice(1);
  else if (pathname.startsWith('/web/')) rel = pathname.slice(5);
  else return null;
  const file = path.resolve(webRoot, decodeURIComponent(rel));
  if (!file.startsWith(webRoot + path.sep)) return null;
  return file;
}

/**
 * A Chromium with a fresh profile. Pages come from syncd itself when it serves web/; until then
 * (or with SYNC_WEB_ROUTE=1) the same files are routed in at syncd's origin, so the pages stay
 * same-origin with /stats and /streams exactly as when syncd serves them.
 */
export async function launch(syncd, { tmp, extraArgs = [] } = {}) {
  let served = !syncd;
  let servedBy = syncd ? 'syncd' : 'none';
  if (syncd && process.env.SYNC_WEB_ROUTE !== '1') {
    try {
      // The module and the pages tests drive: one of them older than the working tree (syncd
      // embeds web/ at build time) and the working tree's files are routed in instead.
      served = true;
      for (const [url, rel] of [['/web/sync.js', 'sync.js'], ['/demo/source.html', 'demo/source.html'], ['/demo/receive.html', 'demo/receive.html']]) {
        const r = await fetch(`${syncd.base}${url}`);
        const body = await r.text();
        const disk = await readFile(path.join(webRoot, rel), 'utf8');
        if (r.ok && body === disk) continue;
        served = false;
        if (r.ok) console.log(`# syncd serves a web/${rel} that differs from the working tree (stale build?): routing web/ instead`);
        break;
      }
    } catch {
      served = false; // not served
    }
  }
  const args = [...CHROMIUM_FLAGS, ...extraArgs];
  // Routed (not fetched) pages have no IP address space, so Chromium's Local Network Access
  // checks would treat them as public and block their loopback WebSocket: turn those off, in
  // that fallback only.
  if (!served) args.push('--disable-features=LocalNetworkAccessChecks');
  const profile = await mkdtemp(path.join(tmpdir(), 'sync-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, args, viewport: { width: 1000, height: 800 },
  });
  if (syncd) {
    if (!served) {
      servedBy = 'route';
      await context.route((url) => url.origin === syncd.base && webFileFor(url.pathname) !== null, async (route) => {
        const file = webFileFor(new URL(route.request().url()).pathname);
        try {
          const body = await readFile(file);
          await route.fulfill({ status: 200, body, headers: { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store' } });
        } catch {
          await route.fulfill({ status: 404, body: 'not found\n' });
        }
      });
    }
  }
  const logs = [];
  context.on('console', (m) => logs.push(`[${m.type()}] ${m.text()}`));
  context.on('weberror', (e) => logs.push(`[pageerror] ${e.error()}`));
  return {
    context, servedBy, logs, profile, tmp,
    async newPage(url) {
      const page = await context.newPage();
      page.on('pageerror', (e) => logs.push(`[pageerror ${url}] ${e}`));
      if (url) await page.goto(url);
      return page;
    },
    async close() {
      await context.close().catch(() => {});
      await rm(profile, { recursive: true, force: true }).catch(() => {});
    },
  };
}

/**
 * Does this syncd serve tickets and /streams (docs/protocol.md "HTTP stream to receivers")?
 * Returns why not, or '' when it does: the welcome lists `tickets` and `video.receive`, and
 * ticket.create for a stream that does not exist is refused with `unknown_stream`. The tests
 * assert on it: a syncd without receivers fails them rather than skipping them.
 */
export async function streamReceiversMissing(syncd) {
  const { default: WebSocket } = await import('ws');
  const ws = new WebSocket(syncd.ws);
  let welcome;
  const reply = await new Promise((resolve, reject) => {
    ws.on('open', () => ws.send(JSON.stringify({ type: 'hello', protocol: 1, client: 'probe' })));
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      if (m.type === 'welcome') {
        welcome = m;
        ws.send(JSON.stringify({ type: 'ticket.create', stream: 999999 }));
      } else resolve(m);
    });
    ws.on('error', reject);
  });
  ws.close();
  const caps = welcome?.capabilities ?? [];
  for (const cap of ['tickets', 'video.receive'])
    if (!caps.includes(cap)) return `welcome capabilities ${JSON.stringify(caps)} lack ${cap}`;
  if (reply.type !== 'error' || reply.code !== 'unknown_stream')
    return `ticket.create for a missing stream got ${JSON.stringify(reply)}, not unknown_stream`;
  return '';
}
