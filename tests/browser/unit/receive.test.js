// How receive() ends, against a fake syncd over node:http: the HTTP stream's body is
// close-delimited, so an end between two records is the stream closing only if syncd says the
// stream is no longer open (/stats); otherwise, and for a body cut inside a record, the receive
// rejects with SyncError 'disconnected' (details.reason), and resume() asks again with the
// same ticket. (tests/browser/browser/receive_end.test.js does the same in Chromium against syncd.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { receive, writeRecordHeader, RECORD_HEADER_BYTES, SyncError, RETRYABLE_CODES } from '../../../web/sync.js';

// A 2x2 rgba8 record (16 bytes of pixels) with `sequence`.
function record(sequence) {
  const b = new Uint8Array(RECORD_HEADER_BYTES + 16);
  writeRecordHeader(b, { sequence, width: 2, height: 2, format: 1 });
  return b;
}

// scenario: what GET /streams/s sends (records, then a cut inside one or not) and what /stats
// says afterwards ('closed', 'open', or 'gone': the connection dropped without an answer).
async function fakeSyncd({ body, stats }) {
  const gets = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/streams/s') {
      gets.push(url.searchParams.get('ticket'));
      if (gets.length > 2) {
        res.writeHead(403, { 'content-type': 'text/plain' });
        res.end('missing, unknown, expired or spent ticket\n');
        return;
      }
      // Close-delimited, as syncd sends it: no Content-Length, no chunks.
      res.socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/vnd.sync.frames\r\nConnection: close\r\nX-Sync-Receiver: ${gets.length}\r\n\r\n`);
      res.socket.end(body(gets.length));
      return;
    }
    if (url.pathname === '/stats') {
      if (stats === 'gone') {
        req.socket.destroy();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ server: {}, streams: [{ id: 1, name: 's', open: stats === 'open' }] }));
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { base: `http://127.0.0.1:${server.address().port}`, gets, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }) };
}

const twoRecords = (n) => Buffer.concat([record(n * 10 + 1), record(n * 10 + 2)]);

async function drain(frames) {
  const seqs = [];
  try {
    for await (const f of frames) seqs.push(f.sequence);
    return { seqs, error: null };
  } catch (e) {
    return { seqs, error: e };
  }
}

test('a body ending after a record while the stream is closed: a clean end', async () => {
  const fake = await fakeSyncd({ body: twoRecords, stats: 'closed' });
  try {
    const r = await drain(receive('s', 't', { base: fake.base, autoCredit: false }));
    assert.equal(r.error, null);
    assert.deepEqual(r.seqs, [11, 12]);
  } finally {
    await fake.close();
  }
});

test('a body ending after a record while the stream is open: disconnected (stream_open), resumable with the same ticket', async () => {
  const fake = await fakeSyncd({ body: twoRecords, stats: 'open' });
  try {
    const first = receive('s', 'two-uses', { base: fake.base, autoCredit: false });
    const r = await drain(first);
    assert.deepEqual(r.seqs, [11, 12]);
    assert.ok(r.error instanceof SyncError, String(r.error));
    assert.equal(r.error.code, 'disconnected');
    assert.equal(r.error.retryable, true);
    assert.ok(RETRYABLE_CODES.has('disconnected'));
    assert.deepEqual(r.error.details, { reason: 'stream_open', receiver: 1, frames: 2 });
    const second = first.resume();
    const r2 = await drain(second);
    assert.deepEqual(r2.seqs, [21, 22]);
    assert.equal(r2.error?.code, 'disconnected');
    assert.deepEqual(fake.gets, ['two-uses', 'two-uses'], 'the same ticket, once per receive');
    const st = second.stats();
    assert.equal(st.frames, 4, 'counters carry on');
    assert.equal(st.resumes, 1);
    // A third use is refused (the fake, like syncd, admits two).
    const r3 = await drain(second.resume());
    assert.equal(r3.error?.code, 'forbidden');
    assert.equal(r3.error.status, 403);
  } finally {
    await fake.close();
  }
});

test('a body ending after a record and syncd not answering: disconnected (syncd_unreachable)', async () => {
  const fake = await fakeSyncd({ body: twoRecords, stats: 'gone' });
  try {
    const r = await drain(receive('s', 't', { base: fake.base, autoCredit: false }));
    assert.deepEqual(r.seqs, [11, 12]);
    assert.equal(r.error?.code, 'disconnected');
    assert.equal(r.error.details.reason, 'syncd_unreachable');
  } finally {
    await fake.close();
  }
});

test('a body cut inside a record: disconnected (truncated), whatever /stats says', async () => {
  const fake = await fakeSyncd({ body: () => Buffer.concat([record(1), record(2).subarray(0, RECORD_HEADER_BYTES + 5)]), stats: 'closed' });
  try {
    const r = await drain(receive('s', 't', { base: fake.base, autoCredit: false }));
    assert.deepEqual(r.seqs, [1]);
    assert.equal(r.error?.code, 'disconnected');
    assert.equal(r.error.details.reason, 'truncated');
    assert.match(r.error.message, /inside a record/);
  } finally {
    await fake.close();
  }
});
