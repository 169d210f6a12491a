// A page publishes its WebGL2 canvas encoded (WebCodecs H.264, codec=h264 with the column
// marker) into syncd started with --publisher test,shm. Page side: the stream is h264, syncd
// accepts every access unit, the page's accounting closes (offered = sent + dropped + in
// flight), the encoder is constrained baseline. Server side (syncd's decoded twins): syncd
// decodes the stream once into "<name>.decoded" (i420), whose column markers the test publisher
// verifies, and its decoder asks the page for a key frame (stream.keyframe). A second page
// receives the h264 stream over HTTP with receive(), decodes it with VideoDecoder and reads each
// picture's column marker.
//
//   cd tests/browser && SYNCD=/path/to/syncd node --test browser/encoded.test.js
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startSyncd, launch, sleep, streamStats, waitFor } from '../lib/harness.js';

const WIDTH = 640;
const HEIGHT = 360;
const FPS = Number(process.env.SYNC_BROWSER_FPS ?? 30);
const NAME = 'enc';

let syncd, browser, source;
before(async () => {
  const shmPath = path.join(tmpdir(), `sync-encoded-test-${process.pid}.frames`);
  syncd = await startSyncd(['--publisher', 'test,shm', '--shm-path', shmPath]);
  browser = await launch(syncd);
  console.log(`# pages served by ${browser.servedBy}`);
});
after(async () => {
  await source?.close().catch(() => {});
  await browser?.close();
  const code = await syncd?.stop();
  if (browser?.logs.length) console.log(`# page logs:\n# ${browser.logs.slice(-20).join('\n# ')}`);
  assert.equal(code, 0, `syncd exit: ${code}\n${syncd?.stderr}`);
});

const pageStats = (page) => page.evaluate(() => window.syncSource.publisher.stats());

// The source page, publishing: opened once, shared by the tests in order.
async function openSource() {
  if (source) return source;
  source = await browser.newPage(`${syncd.base}/demo/source.html?stream=${NAME}&fps=${FPS}&w=${WIDTH}&h=${HEIGHT}&codec=h264&marker=1&ticket=0`);
  await source.waitForFunction(() => window.syncSource?.publisher || window.syncSource?.error, null, { timeout: 20000 });
  const err = await source.evaluate(() => window.syncSource.error);
  assert.equal(err, null, `source page error: ${JSON.stringify(err)}`);
  return source;
}

test('page publishes 640x360 H.264 (WebCodecs): an h264 stream, every access unit accepted, the page accounting closes', async () => {
  const page = await openSource();
  const first = await pageStats(page);
  assert.equal(first.codec, 'h264');
  assert.ok(first.encoder.codec.startsWith('avc1.42e0'), `encoder codec ${first.encoder.codec}`);
  assert.deepEqual(first.encoder.avc, { format: 'annexb' });
  assert.equal(first.encoder.latencyMode, 'realtime');
  assert.equal(first.sender, 'page');
  // source.html draws WebGL2; on headless Chromium's SwiftShader the frame is read with
  // readPixels (not new VideoFrame(canvas)), its column marker written into the pixels, which
  // syncd then verifies on the decoded twin (next test).
  assert.equal(first.readback, 'webgl2-sync');
  await waitFor(async () => (await streamStats(syncd, NAME))?.frames_accepted >= 30, { what: '30 accepted access units', timeoutMs: 30000 });
  const s0 = await streamStats(syncd, NAME);
  await sleep(3000);
  const s1 = await streamStats(syncd, NAME);
  const p = await pageStats(page);
  const rate = (s1.frames_accepted - s0.frames_accepted) / 3;
  console.log(`# ${WIDTH}x${HEIGHT} @ ${FPS} fps h264: syncd accepted ${rate.toFixed(1)} frames/s; page ${JSON.stringify({ offered: p.offered, sent: p.sent, inFlight: p.inFlight, dropped: p.dropped, bitrate: p.bitrate, encodeMsMean: +p.encodeMsMean.toFixed(2), encodeMsMax: +p.encodeMsMax.toFixed(2), keyframesSent: p.keyframesSent, keyframeRequests: p.keyframeRequests, kbytesSent: Math.round(p.bytesSent / 1024) })}`);
  assert.equal(s1.format, 'h264');
  assert.equal(s1.width, WIDTH);
  assert.equal(s1.height, HEIGHT);
  assert.ok(s1.frames_accepted > s0.frames_accepted, 'frames_accepted grows');
  assert.equal(s1.frames_dropped_total, 0, `dropped at syncd: ${JSON.stringify(s1.frames_dropped)}`);
  // Exact accounting on the page: offered = sent + dropped + in flight (inside the encoder).
  assert.equal(p.offered, p.sent + p.droppedTotal + p.inFlight);
  assert.ok(p.sent >= s1.frames_accepted - 1, `page sent ${p.sent}, syncd accepted ${s1.frames_accepted}`);
  assert.ok(p.keyframesSent >= 1);
  assert.equal(p.dropped.encode_failed, 0);
  assert.equal(p.dropped.too_large, 0);
  // syncd shows the page's own counters (stream.report).
  assert.equal(s1.source?.offered > 0, true, `source report ${JSON.stringify(s1.source)}`);
});

test('syncd decodes the stream into <name>.decoded (i420); the test publisher verifies its column markers; a keyframe request reaches the page', async () => {
  const page = await openSource();
  const twinName = `${NAME}.decoded`;
  const failures = [];
  let twin = null;
  try {
    twin = await waitFor(async () => streamStats(syncd, twinName), { what: `${twinName} in /stats`, timeoutMs: 15000 });
  } catch (e) {
    failures.push(`no ${twinName} stream in /stats: ${e.message}`);
  }
  if (twin) {
    const verified = (t) => t?.publishers?.test?.marker_verified ?? 0;
    if (twin.format !== 'i420') failures.push(`${twinName} format ${twin.format}, expected i420`);
    const t0 = await waitFor(async () => {
      const s = await streamStats(syncd, twinName);
      return verified(s) >= 10 ? s : null;
    }, { what: `${twinName} marker_verified >= 10`, timeoutMs: 20000 }).catch((e) => {
      failures.push(e.message);
      return null;
    });
    if (t0) {
      await sleep(2000);
      const t1 = await streamStats(syncd, twinName);
      const test1 = t1.publishers.test;
      console.log(`# ${twinName}: ${JSON.stringify({ format: t1.format, frames_accepted: t1.frames_accepted, marker_verified: test1.marker_verified, verify_failed: test1.verify_failed, gaps: test1.sequence_gaps, dup: test1.sequence_duplicates, reordered: test1.sequence_reordered })}`);
      if (!(verified(t1) > verified(t0))) failures.push(`marker_verified did not grow (${verified(t0)} -> ${verified(t1)})`);
      if (test1.verify_failed?.marker_mismatch !== 0) failures.push(`marker mismatches ${JSON.stringify(test1.verify_failed)}`);
    }
  }
  const p = await pageStats(page);
  if (!(p.keyframeRequests >= 1)) failures.push(`page keyframeRequests ${p.keyframeRequests}: no stream.keyframe from syncd`);
  assert.deepEqual(failures, [], 'server-dependent assertions (decoded twin, stream.keyframe)');
});

test('another page receives the h264 stream with receive(): decoded VideoFrames whose column marker is the record sequence', async () => {
  const page = await openSource();
  const ticket = await page.evaluate(() => window.syncSource.publisher.createTicket({ uses: 1 }).then((t) => t.ticket));
  // A document of syncd's origin (a secure context: WebCodecs is there) to import the module in.
  const b = await browser.newPage(`${syncd.base}/web/sync.js`);
  try {
    const r = await b.evaluate(async ({ name, ticket }) => {
      const m = await import('/web/sync.js');
      const conn = await m.connect(location.host, { client: 'encoded-receiver' });
      const frames = m.receive(name, ticket, { connection: conn });
      const out = { frames: 0, pictures: 0, markersOk: 0, mismatches: [], formats: new Set(), first: null };
      const deadline = performance.now() + 20000;
      for await (const f of frames) {
        ++out.frames;
        const vf = f.videoFrame;
        if (vf) {
          ++out.pictures;
          out.formats.add(vf.format);
          const buf = new Uint8Array(vf.allocationSize());
          const layout = await vf.copyTo(buf);
          const rgb = /^(RGB|BGR)/.test(vf.format);
          const plane = buf.subarray(layout[0].offset + (rgb ? 1 : 0));
          const marker = m.readColumnMarker(plane, layout[0].stride, vf.displayWidth, vf.displayHeight, rgb ? 4 : 1);
          if (marker === f.sequence % 65536) ++out.markersOk;
          else if (out.mismatches.length < 5) out.mismatches.push({ sequence: f.sequence, marker });
          out.first ??= { format: f.format, width: f.width, height: f.height, timestamp: vf.timestamp, captureTimeUs: f.captureTimeUs, flags: f.flags };
          vf.close();
        }
        if (out.pictures >= 30 || performance.now() > deadline) break;
      }
      frames.close();
      conn.close();
      return { ...out, formats: [...out.formats], stats: frames.stats() };
    }, { name: NAME, ticket });
    console.log(`# receive(): ${JSON.stringify(r)}`);
    assert.equal(r.first?.format, 'h264');
    assert.equal(r.first.width, WIDTH);
    assert.equal(r.first.timestamp, r.first.captureTimeUs, 'the picture timestamp is the capture time');
    assert.ok(r.first.flags & 2, 'records keep the column-marker flag');
    assert.ok(r.pictures >= 30, `pictures ${r.pictures}`);
    assert.equal(r.markersOk, r.pictures, JSON.stringify(r.mismatches));
    assert.equal(r.stats.decodeErrors, 0);
  } finally {
    await b.close();
  }
});

test('stopping the page flushes the encoder and closes the stream; the accounting still closes', async () => {
  const page = await openSource();
  const p = await page.evaluate(async () => {
    await window.syncSource.stop();
    return window.syncSource.publisher.stats();
  });
  assert.equal(p.inFlight, 0);
  assert.equal(p.offered, p.sent + p.droppedTotal);
  const s = await waitFor(async () => {
    const x = await streamStats(syncd, NAME);
    return x && x.open === false ? x : null;
  }, { what: 'the stream closed' });
  assert.equal(s.frames_dropped_total, 0);
  assert.equal(s.source.offered, p.offered, 'the last stream.report has the final counters');
});
