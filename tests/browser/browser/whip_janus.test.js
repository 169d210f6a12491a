// WHIP push into a real SFU that fans out (docs/whep.md, "WHIP"): Janus (Debian's `janus`, 1.1)
// with its VideoRoom plugin, behind a WHIP endpoint written here with npm `janode`, the way
// Meetecho's simple-whip-server maps WHIP to the VideoRoom: a POSTed offer attaches a videoroom
// handle, joins the room as a publisher and configures it with the offer (`joinandconfigure`);
// Janus's answer goes back with 201 and a Location; DELETE hangs up and detaches the handle.
// A Chromium page then watches through Janus: a VideoRoom subscriber made with janode in this
// process, Janus's subscriber offer handed to the page's RTCPeerConnection, its answer back to
// Janus with `start`. Asserted: the viewer decodes frames at >= 0.8 x the source's rate over 10 s
// (requestVideoFrameCallback and getStats framesDecoded), the picture it shows is not black,
// syncd's /stats `whep.whip` is live with frames sent, and stopping syncd DELETEs the resource.
//
// Janus runs as a child process with a config folder written here: the WebSocket transport on
// loopback (janode's transport), the VideoRoom plugin (H.264, Opus, a room made here), everything
// else disabled, ICE-lite (syncd is the controlling agent; Janus only answers checks) on a narrow
// port range, mDNS ignored. Janus and libnice never gather on an interface flagged IFF_LOOPBACK
// (janus ice.c, janus_ice_setup_local), and this test's traffic stays on loopback; so Janus runs
// with a small LD_PRELOAD (compiled here with cc) whose getifaddrs shows `lo` as an ordinary
// interface and every other one as down: Janus's one candidate is 127.0.0.1.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile, readdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import Janode from 'janode';
import VideoRoomPlugin from 'janode/plugins/videoroom';
import { startSyncd, stats, waitFor, launch, sleep } from '../lib/harness.js';

const JANUS = process.env.JANUS ?? '/usr/bin/janus';
const TOKEN = 'whip-janus-token';
const ROOM = 4242;
const FPS = 30;
const SECONDS = 10;

let tmp, janus, connection, session, server, syncd, browser;
const janusLog = [];
const whip = { posts: [], deletes: [], resources: new Map(), publisher: null, webrtcup: false, media: [] };

// Janode logs at its own level to stdout; only errors here.
Janode.Logger.setLevel?.('error');

const janusTail = (n = 40) => `\n--- janus log (last ${n} lines) ---\n${janusLog.slice(-n).join('\n')}`;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

async function janusLibDir() {
  for (const dir of ['/usr/lib/x86_64-linux-gnu/janus', '/usr/lib/aarch64-linux-gnu/janus', '/usr/lib/janus', '/usr/local/lib/janus']) {
    if (existsSync(path.join(dir, 'plugins', 'libjanus_videoroom.so'))) return dir;
  }
  throw new Error('Janus plugins not found (apt-get install janus)');
}

const SHIM = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
/* Janus (and libnice) skip IFF_LOOPBACK interfaces when gathering: show lo as an ordinary
   interface and every other one as down, so Janus's only host candidate is on loopback. */
int getifaddrs(struct ifaddrs **out) {
  static int (*real)(struct ifaddrs **);
  if (!real) real = (int (*)(struct ifaddrs **))dlsym(RTLD_NEXT, "getifaddrs");
  int rc = real(out);
  if (rc != 0) return rc;
  for (struct ifaddrs *i = *out; i; i = i->ifa_next) {
    if (i->ifa_flags & IFF_LOOPBACK) i->ifa_flags &= ~IFF_LOOPBACK;
    else i->ifa_flags &= ~(IFF_UP | IFF_RUNNING);
  }
  return 0;
}
`;

async function writeJanusConfig(dir, wsPort, rtpBase) {
  const lib = await janusLibDir();
  const others = async (sub, keep) => (await readdir(path.join(lib, sub)))
    .filter((f) => f.endsWith('.so') && f !== keep).join(',');
  await writeFile(path.join(dir, 'janus.jcfg'), `general: {
\tconfigs_folder = "${dir}"
\tplugins_folder = "${lib}/plugins"
\ttransports_folder = "${lib}/transports"
\tevents_folder = "${lib}/events"
\tloggers_folder = "${lib}/loggers"
\tdebug_level = 4
\tinterface = "127.0.0.1"
\tsession_timeout = 60
}
media: {
\tipv6 = false
\trtp_port_range = "${rtpBase}-${rtpBase + 39}"
}
nat: {
\tice_lite = true
\tignore_mdns = true
\tice_enforce_list = "127.0.0.1"
}
plugins: {
\tdisable = "${await others('plugins', 'libjanus_videoroom.so')}"
}
transports: {
\tdisable = "${await others('transports', 'libjanus_websockets.so')}"
}
loggers: {
\tdisable = "${await others('loggers', '')}"
}
events: {
\tbroadcast = false
\tdisable = "${await others('events', '')}"
}
`);
  await writeFile(path.join(dir, 'janus.transport.websockets.jcfg'), `general: {
\tjson = "plain"
\tws = true
\tws_ip = "127.0.0.1"
\tws_port = ${wsPort}
\twss = false
}
admin: {
\tadmin_ws = false
\tadmin_wss = false
}
`);
  await writeFile(path.join(dir, 'janus.plugin.videoroom.jcfg'), `general: {
}
room-${ROOM}: {
\tdescription = "syncd WHIP"
\tpublishers = 1
\tvideocodec = "h264"
\taudiocodec = "opus"
\tbitrate = 0
\tfir_freq = 0
}
`);
}

async function startJanus() {
  if (!existsSync(JANUS)) throw new Error(`${JANUS} not found: apt-get install janus (scripts/install-deps.sh installs it)`);
  const wsPort = await freePort();
  const rtpBase = 42000 + 40 * Math.floor(Math.random() * 400);
  await writeJanusConfig(tmp, wsPort, rtpBase);
  const shimC = path.join(tmp, 'loopback-only.c');
  const shim = path.join(tmp, 'loopback-only.so');
  await writeFile(shimC, SHIM);
  await promisify(execFile)('cc', ['-shared', '-fPIC', '-O1', '-o', shim, shimC, '-ldl']);
  const proc = spawn(JANUS, ['-F', tmp, '-C', path.join(tmp, 'janus.jcfg'), '-o'], {
    stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LD_PRELOAD: shim },
  });
  const keep = (d) => { for (const l of d.toString().split('\n')) if (l) janusLog.push(l); if (janusLog.length > 4000) janusLog.splice(0, 2000); };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  const exited = new Promise((r) => proc.once('exit', (code, sig) => r(code ?? sig)));
  janus = {
    proc, url: `ws://127.0.0.1:${wsPort}/`, rtpBase,
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(t);
    },
  };
  // Its WebSocket answers once the transport is up: wait for the port, then connect janode.
  const deadline = Date.now() + 15000;
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`janus exited (${proc.exitCode ?? proc.signalCode})${janusTail(200)}`);
    const open = await new Promise((resolve) => {
      const c = net.connect(wsPort, '127.0.0.1', () => { c.end(); resolve(true); });
      c.once('error', () => resolve(false));
    });
    if (open) break;
    if (Date.now() > deadline) throw new Error(`Janus's WebSocket (port ${wsPort}) did not open within 15 s${janusTail(200)}`);
    await sleep(100);
  }
  return Janode.connect({ is_admin: false, address: { url: janus.url }, max_retries: 3, retry_time_secs: 1 });
}

// The WHIP endpoint (simple-whip-server's mapping onto the VideoRoom).
async function onWhip(req, res) {
  let body = '';
  for await (const chunk of req) body += chunk;
  const resource = /^\/whip\/resource\/(\d+)$/.exec(req.url ?? '');
  if (req.method === 'DELETE' && resource) {
    whip.deletes.push(req.url);
    const handle = whip.resources.get(resource[1]);
    if (!handle) { res.writeHead(404).end(); return; }
    whip.resources.delete(resource[1]);
    await handle.hangup().catch(() => {});
    await handle.detach().catch(() => {});
    res.writeHead(200).end();
    return;
  }
  if (req.method !== 'POST' || req.url !== `/whip/endpoint/${ROOM}`) { res.writeHead(404).end(); return; }
  const post = { auth: req.headers.authorization, type: req.headers['content-type'], offer: body };
  whip.posts.push(post);
  if (req.headers.authorization !== `Bearer ${TOKEN}`) { post.status = 401; res.writeHead(401).end('unauthorized'); return; }
  let handle;
  try {
    handle = await session.attach(VideoRoomPlugin);
    handle.on(Janode.EVENT.HANDLE_WEBRTCUP, () => { whip.webrtcup = true; });
    handle.on(Janode.EVENT.HANDLE_MEDIA, (m) => whip.media.push(m));
    handle.on(Janode.EVENT.HANDLE_HANGUP, (h) => { whip.hangup = h; });
    const joined = await handle.joinConfigurePublisher({
      room: ROOM, display: 'syncd', audio: true, video: true, jsep: { type: 'offer', sdp: body },
    });
    whip.publisher = joined.feed;
    post.answer = joined.jsep?.sdp;
    if (!post.answer) throw new Error(`no jsep answer: ${JSON.stringify(joined)}`);
    whip.resources.set(String(handle.id), handle);
    post.status = 201;
    res.writeHead(201, { 'Content-Type': 'application/sdp', Location: `/whip/resource/${handle.id}` });
    res.end(post.answer);
  } catch (e) {
    post.status = 500;
    post.error = e.message;
    await handle?.detach().catch(() => {});
    res.writeHead(500, { 'Content-Type': 'text/plain' }).end(e.message);
  }
}

before(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), 'sync-janus-'));
  connection = await startJanus();
  session = await connection.create();
  server = http.createServer((req, res) => {
    onWhip(req, res).catch((e) => { if (!res.headersSent) res.writeHead(500).end(e.message); });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/whip/endpoint/${ROOM}`;
  syncd = await startSyncd(['--source', `pattern:640x360@${FPS}`, '--whip-to', url, '--whip-token', TOKEN,
                            '--whip-bitrate', '1500']);
});

after(async () => {
  await browser?.close().catch(() => {});
  await syncd?.stop().catch(() => {});
  await session?.destroy().catch(() => {});
  await connection?.close().catch(() => {});
  await janus?.stop().catch(() => {});
  await new Promise((r) => (server ? server.close(r) : r()));
  if (tmp) await rm(tmp, { recursive: true, force: true }).catch(() => {});
});

// In the page: take Janus's subscriber offer, answer it (ICE gathered: Janus does half-trickle),
// and play what arrives in a <video>.
const ANSWER = async (offer) => {
  const pc = new RTCPeerConnection();
  window.viewer = { pc, connection: [] };
  pc.onconnectionstatechange = () => window.viewer.connection.push(pc.connectionState);
  const video = document.createElement('video');
  video.muted = true;
  video.autoplay = true;
  video.playsInline = true;
  video.width = 640;
  video.height = 360;
  document.body.appendChild(video);
  window.viewer.video = video;
  pc.ontrack = (e) => {
    if (e.track.kind !== 'video') return;
    video.srcObject = e.streams[0] ?? new MediaStream([e.track]);
    video.play().catch(() => {});
  };
  await pc.setRemoteDescription(offer);
  await pc.setLocalDescription(await pc.createAnswer());
  await new Promise((resolve) => {
    if (pc.iceGatheringState === 'complete') return resolve();
    const t = setTimeout(resolve, 3000);
    pc.onicegatheringstatechange = () => { if (pc.iceGatheringState === 'complete') { clearTimeout(t); resolve(); } };
  });
  return { type: 'answer', sdp: pc.localDescription.sdp };
};

// In the page: count the frames the <video> presents and decodes over `seconds`, and read the
// picture back through a canvas.
const WATCH = async ({ seconds }) => {
  const { pc, video } = window.viewer;
  const decoded = async () => {
    for (const r of (await pc.getStats()).values()) if (r.type === 'inbound-rtp' && r.kind === 'video') return r;
    return null;
  };
  const t0 = performance.now();
  while (!(video.videoWidth > 0) && performance.now() - t0 < 15000) await new Promise((r) => setTimeout(r, 50));
  const firstFrameMs = video.videoWidth > 0 ? performance.now() - t0 : null;
  let callbacks = 0;
  let stop = false;
  const onFrame = () => { callbacks++; if (!stop) video.requestVideoFrameCallback(onFrame); };
  video.requestVideoFrameCallback(onFrame);
  const canvas = document.createElement('canvas');
  canvas.width = video.videoWidth;
  canvas.height = video.videoHeight;
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  const grab = () => { ctx.drawImage(video, 0, 0); return ctx.getImageData(0, 0, canvas.width, canvas.height).data; };
  const checksum = (d) => { let h = 0; for (let i = 0; i < d.length; i += 4) h = (Math.imul(h, 31) + d[i] + (d[i + 1] << 8) + (d[i + 2] << 16)) | 0; return h; };
  const first = checksum(grab());
  const before = await decoded();
  const start = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const after = await decoded();
  const elapsed = (performance.now() - start) / 1000;
  stop = true;
  const px = grab();
  const moved = checksum(px) !== first;
  let sum = 0, lit = 0;
  const levels = new Set();
  for (let i = 0; i < px.length; i += 4) {
    const y = 0.299 * px[i] + 0.587 * px[i + 1] + 0.114 * px[i + 2];
    sum += y;
    if (y > 32) lit++;
    levels.add((px[i] >> 4) << 8 | (px[i + 1] >> 4) << 4 | (px[i + 2] >> 4));
  }
  const n = px.length / 4;
  let transport = null;
  const report = await pc.getStats();
  for (const r of report.values()) {
    if (r.type !== 'transport') continue;
    const pair = report.get(r.selectedCandidatePairId);
    const local = report.get(pair?.localCandidateId), remote = report.get(pair?.remoteCandidateId);
    transport = { srtp: r.srtpCipher, dtls: r.dtlsState, local: local?.port, remote: `${remote?.address}:${remote?.port}` };
  }
  return {
    firstFrameMs, elapsed, callbacks, width: video.videoWidth, height: video.videoHeight,
    decodedBefore: before?.framesDecoded ?? 0, decodedAfter: after?.framesDecoded ?? 0,
    framesDropped: after?.framesDropped ?? 0, packetsLost: after?.packetsLost ?? 0, codec: after?.codecId ?? null,
    meanLuma: sum / n, litFraction: lit / n, colours: levels.size, moved, transport, connection: window.viewer.connection,
  };
};

test('syncd pushes over WHIP into Janus (VideoRoom, janode) and a Chromium subscriber watches it', async () => {
  // syncd's offer, Janus's answer.
  await waitFor(() => whip.posts.some((p) => p.status), { timeoutMs: 20000, what: `a WHIP POST\n${syncd.stderr}` });
  const post = whip.posts.find((p) => p.status);
  assert.equal(post.type, 'application/sdp');
  assert.equal(post.auth, `Bearer ${TOKEN}`);
  assert.equal(post.status, 201, `Janus refused syncd's offer: ${post.error}\n${post.offer}${janusTail()}`);
  assert.match(post.answer, /^a=ice-lite\r?$/m, 'Janus answers as an ICE-lite agent');
  assert.match(post.answer, /^m=video [1-9]\d* UDP\/TLS\/RTP\/SAVPF /m);
  assert.match(post.answer, /^a=rtpmap:\d+ H264\/90000\r?$/m);
  // Janus's candidates: loopback only (see the LD_PRELOAD above).
  const candidates = (sdp) => [...sdp.matchAll(/^a=candidate:\S+ \d+ \S+ \d+ (\S+) \d+ typ (\S+)/gm)].map((m) => `${m[1]} ${m[2]}`);
  assert.deepEqual([...new Set(candidates(post.answer))], ['127.0.0.1 host'], post.answer);

  // ICE (syncd controlling), DTLS and media up on the publisher's side.
  const whipState = async () => JSON.stringify((await stats(syncd)).whep, null, 1);
  await waitFor(() => whip.webrtcup, { timeoutMs: 15000, what: `Janus's webrtcup for the publisher` })
    .catch(async (e) => { throw new Error(`${e.message}\n${await whipState()}\n${syncd.stderr}${janusTail()}`); });
  await waitFor(() => whip.media.some((m) => m.type === 'video' && m.receiving), { timeoutMs: 10000, what: 'Janus receiving video' })
    .catch(async (e) => { throw new Error(`${e.message}: ${JSON.stringify(whip.media)}\n${await whipState()}${janusTail()}`); });

  // The room lists syncd as its publisher.
  const sub = await session.attach(VideoRoomPlugin);
  const inRoom = await sub.listParticipants({ room: ROOM });
  assert.deepEqual(inRoom.participants.map((p) => [p.feed, p.display, p.publisher]), [[whip.publisher, 'syncd', true]]);

  // A subscriber through Janus, watched by Chromium.
  const joined = await sub.joinSubscriber({ room: ROOM, feed: whip.publisher });
  assert.equal(joined.jsep?.type, 'offer', JSON.stringify(joined));
  assert.deepEqual([...new Set(candidates(joined.jsep.sdp))], ['127.0.0.1 host'], joined.jsep.sdp);
  assert.match(joined.jsep.sdp, /^a=rtpmap:\d+ H264\/90000\r?$/m);
  browser = await launch(null, { extraArgs: ['--autoplay-policy=no-user-gesture-required'] });
  const page = await browser.newPage();
  await page.setContent('<!doctype html><title>Janus viewer</title><body style="margin:0;background:#000"></body>');
  const answer = await page.evaluate(ANSWER, { type: 'offer', sdp: joined.jsep.sdp });
  const started = await sub.start({ jsep: answer });
  assert.equal(started.started, 'ok');

  const r = await page.evaluate(WATCH, { seconds: SECONDS });
  const decodedFps = (r.decodedAfter - r.decodedBefore) / r.elapsed;
  const shownFps = r.callbacks / r.elapsed;
  const s = await stats(syncd);
  const w = s.whep.whip;
  const pushSession = s.whep.sessions?.find((x) => x.whip);
  console.log(`# whip janus: ${whip.posts.length} post(s), first frame ${r.firstFrameMs?.toFixed(0)} ms after start, ` +
              `${r.width}x${r.height}, ${r.decodedAfter - r.decodedBefore} frames decoded in ${r.elapsed.toFixed(1)} s ` +
              `(${decodedFps.toFixed(1)} fps), ${r.callbacks} shown (${shownFps.toFixed(1)} fps), ` +
              `dropped ${r.framesDropped}, lost ${r.packetsLost}, mean luma ${r.meanLuma.toFixed(1)}, ` +
              `lit ${(100 * r.litFraction).toFixed(0)} %, ${r.colours} colours, srtp ${r.transport?.srtp}, ` +
              `to Janus at ${r.transport?.remote}; ` +
              `syncd whip ${w?.state}, session frames sent ${pushSession?.frames_sent}`);
  if (process.env.SYNC_WHIP_DEBUG) console.log(JSON.stringify({ whip: w, session: pushSession, viewer: r }, null, 1));

  assert.notEqual(r.firstFrameMs, null, `no frame reached the viewer's <video> (${JSON.stringify(r)})`);
  assert.equal(r.width, 640);
  assert.equal(r.height, 360);
  assert.ok(decodedFps >= 0.8 * FPS, `decoded ${decodedFps.toFixed(1)} fps, want >= ${0.8 * FPS}`);
  assert.ok(shownFps >= 0.8 * FPS, `shown ${shownFps.toFixed(1)} fps, want >= ${0.8 * FPS}`);
  assert.ok(r.meanLuma > 20 && r.litFraction > 0.1 && r.colours >= 4,
            `the picture is black or flat: ${JSON.stringify({ meanLuma: r.meanLuma, lit: r.litFraction, colours: r.colours })}`);
  assert.ok(r.moved, 'the picture changed over the 10 s');

  assert.equal(w.state, 'live', JSON.stringify(w));
  assert.equal(w.stream, 'pattern');
  assert.equal(w.answered, 1, JSON.stringify(w));
  assert.ok(!JSON.stringify(s).includes(TOKEN), 'the bearer token never shows in /stats');
  assert.ok(pushSession, JSON.stringify(s.whep.sessions));
  assert.equal(pushSession.state, 'connected');
  assert.ok(pushSession.checks_answered >= 1, JSON.stringify(pushSession));
  assert.ok(pushSession.frames_sent >= r.decodedAfter - r.decodedBefore, JSON.stringify(pushSession));
  // Janus asks its publisher for a keyframe when a subscriber starts: the PLI reached syncd.
  assert.ok(pushSession.plis_received >= 1, JSON.stringify(pushSession));

  await page.close();

  // Stopping syncd DELETEs the resource: the publisher leaves the room.
  const resource = [...whip.resources.keys()][0];
  assert.equal(await syncd.stop(), 0);
  syncd = null;
  assert.deepEqual(whip.deletes, [`/whip/resource/${resource}`]);
  assert.equal(whip.resources.size, 0);
  const left = await sub.listParticipants({ room: ROOM });
  assert.deepEqual(left.participants, [], JSON.stringify(left));
  await sub.detach().catch(() => {});
});
