// A page from a foreign origin cannot drive syncd: its WebSocket upgrade and its stream request
// are refused with 403 (docs/protocol.md, "Upgrade rules"), counted in server.origin_refused.
// Chromium's Local Network Access checks would already block a public page from reaching
// loopback; they are turned off for the first browser so the request does reach syncd and it
// is syncd's own Origin check under test. The second browser keeps the default behaviour.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startSyncd, launch, stats } from '../lib/harness.js';

let syncd;
before(async () => { syncd = await startSyncd(); });
after(async () => { assert.equal(await syncd?.stop(), 0); });

const EVIL = 'http://evil.example/';

async function tryFromForeignPage(browser) {
  await browser.context.route(`${EVIL}**`, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<!doctype html><title>evil</title><p>evil</p>' }));
  const page = await browser.newPage(EVIL);
  assert.equal(await page.evaluate(() => location.origin), 'http://evil.example');
  return page.evaluate(async ({ port }) => {
    const ws = await new Promise((resolve) => {
      const w = new WebSocket(`ws://127.0.0.1:${port}/ws`);
      let opened = false;
      w.onopen = () => { opened = true; w.send(JSON.stringify({ type: 'hello', protocol: 1, client: 'evil' })); };
      w.onmessage = (e) => resolve({ opened, message: String(e.data) });
      w.onclose = (e) => resolve({ opened, closeCode: e.code });
      setTimeout(() => resolve({ opened, timeout: true }), 5000);
    });
    let fetchResult;
    try {
      // A CORS request carries Origin (a no-cors GET would not: then only the ticket guards).
      const r = await fetch(`http://127.0.0.1:${port}/streams/x?ticket=00`);
      fetchResult = { type: r.type, status: r.status };
    } catch (e) {
      fetchResult = { error: String(e) };
    }
    return { ws, fetch: fetchResult };
  }, { port: syncd.port });
}

test('a foreign-origin page gets 403 from syncd', async () => {
  const before = (await stats(syncd)).server.origin_refused;
  const browser = await launch(null, { extraArgs: ['--disable-features=LocalNetworkAccessChecks'] });
  try {
    const r = await tryFromForeignPage(browser);
    console.log(`# foreign page, LNA checks off: ${JSON.stringify(r)}`);
    assert.equal(r.ws.opened, false, 'WebSocket must not open');
    assert.equal(r.ws.closeCode, 1006);
    const after = (await stats(syncd)).server.origin_refused;
    assert.ok(after >= before + 2, `origin_refused ${before} -> ${after}: syncd refused the upgrade and the stream request`);
  } finally {
    await browser.close();
  }
});

test('with Chromium defaults the foreign page cannot reach syncd either', async () => {
  const browser = await launch(null);
  try {
    const before = (await stats(syncd)).server.connections_accepted;
    const r = await tryFromForeignPage(browser);
    console.log(`# foreign page, Chromium defaults: ${JSON.stringify(r)}`);
    assert.equal(r.ws.opened, false);
    void before;
  } finally {
    await browser.close();
  }
});

test('a loopback page is allowed (control)', async () => {
  const browser = await launch(syncd);
  try {
    const page = await browser.newPage(`${syncd.base}/`);
    const r = await page.evaluate(async () => {
      const { connect } = await import('/web/sync.js');
      const c = await connect(location.host, { client: 'loopback-check' });
      const rtt = await c.ping();
      const server = c.welcome.server;
      c.close();
      return { rtt, server };
    });
    assert.match(r.server, /^syncd\//);
    // A real round trip through syncd: a number, and well under a second on loopback.
    assert.ok(Number.isFinite(r.rtt) && r.rtt < 1000, `ping rtt ${r.rtt} ms`);
  } finally {
    await browser.close();
  }
});
