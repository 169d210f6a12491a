// WHEP playback in real Chromium: syncd's own pattern source at each size, encoded once by syncd
// (x264 on its encoder's worker) and played in a page through POST /whep/pattern. The figure is
// the frames/s the page presents (requestVideoFrameCallback, distinct RTP timestamps) as a ratio
// of the frames/s syncd's source produced in the same window; beside it the time from the POST
// to the first frame shown, syncd's encode time per frame and syncd's whole CPU share.
//
//   cd tests/browser && SYNCD=../../build/release/src/daemon/syncd node bench/whep.bench.js
//   env: SYNC_BENCH_SIZES ("640x360@30,1280x720@60,1920x1080@60"), SYNC_BENCH_SECONDS (8),
//        SYNC_BENCH_BITRATE (kbit/s, 4000)
import { readFile } from 'node:fs/promises';
import { startSyncd, launch, sleep, stats } from '../lib/harness.js';

const SECONDS = Number(process.env.SYNC_BENCH_SECONDS ?? 8);
const BITRATE = String(process.env.SYNC_BENCH_BITRATE ?? 4000);
const SIZES = (process.env.SYNC_BENCH_SIZES ?? '640x360@30,1280x720@60,1920x1080@60').split(',');

async function cpuSeconds(pid) {
  const f = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;  // utime + stime, clock ticks
}

async function run(size) {
  const syncd = await startSyncd(['--source', `pattern:${size}`, '--whep-bitrate', BITRATE]);
  const browser = await launch(syncd, { extraArgs: ['--autoplay-policy=no-user-gesture-required'] });
  try {
    const page = await browser.newPage(`${syncd.base}/`);
    await page.evaluate(async () => {
      const { connect } = await import('/web/sync.js');
      const conn = await connect();
      const s = await conn.stats();
      const pattern = s.streams.find((x) => x.name === 'pattern');
      const { ticket } = await conn.createTicket(pattern.id);
      const pc = new RTCPeerConnection();
      window.benchPc = pc;
      pc.addTransceiver('video', { direction: 'recvonly' });
      const video = document.createElement('video');
      video.muted = true; video.autoplay = true; video.playsInline = true;
      document.body.append(video);
      pc.ontrack = (e) => { video.srcObject = new MediaStream([e.track]); };
      await pc.setLocalDescription(await pc.createOffer());
      const t0 = performance.now();
      const res = await fetch('/whep/pattern', { method: 'POST', headers: { 'Content-Type': 'application/sdp', Authorization: `Bearer ${ticket}` }, body: pc.localDescription.sdp });
      await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });
      window.bench = { first: null, frames: 0, width: 0, height: 0 };
      const seen = new Set();
      const onFrame = (now, meta) => {
        if (window.bench.first === null) window.bench.first = now - t0;
        if (!seen.has(meta.rtpTimestamp)) { seen.add(meta.rtpTimestamp); window.bench.frames++; }
        if (seen.size > 4096) seen.clear();
        window.bench.width = meta.width; window.bench.height = meta.height;
        video.requestVideoFrameCallback(onFrame);
      };
      video.requestVideoFrameCallback(onFrame);
    });
    await sleep(3000);  // settle: connected, the first IDR decoded, the jitter buffer at its target
    const s0 = await stats(syncd), c0 = await cpuSeconds(syncd.proc.pid);
    const inbound = () => page.evaluate(async () => {
      for (const r of (await window.benchPc.getStats()).values())
        if (r.type === 'inbound-rtp' && r.kind === 'video')
          return { received: r.framesReceived, decoded: r.framesDecoded, dropped: r.framesDropped };
      return {};
    });
    const i0 = await inbound();
    const p0 = await page.evaluate(() => window.bench.frames);
    const t0 = performance.now();
    await sleep(SECONDS * 1000);
    const s1 = await stats(syncd), c1 = await cpuSeconds(syncd.proc.pid);
    const b = await page.evaluate(() => window.bench);
    const i1 = await inbound();
    const secs = (performance.now() - t0) / 1000;
    const produced = (s1.source.frames_produced - s0.source.frames_produced) / secs;
    const shown = (b.frames - p0) / secs;
    const egress = s1.whep.egresses[0];
    const session = s1.whep.sessions[0];
    const encodeMs = (() => {
      const st = s1.streams.find((x) => x.name === 'pattern');
      const e = st?.publishers?.whep?.encoder?.encode;
      return e?.mean_us !== undefined ? e.mean_us / 1000 : null;
    })();
    return {
      size, produced_fps: produced, shown_fps: shown, ratio: shown / produced,
      // Chromium's own counts over the window (getStats inbound-rtp): received whole, decoded,
      // and dropped before the compositor.
      received_fps: (i1.received - i0.received) / secs,
      decoded_fps: (i1.decoded - i0.decoded) / secs,
      chromium_dropped: i1.dropped - i0.dropped,
      first_frame_ms: b.first, shown_size: `${b.width}x${b.height}`,
      encode_ms: encodeMs, syncd_cpu: (c1 - c0) / secs,
      frames_sent: session?.frames_sent, dropped: session?.frames_dropped,
      publisher: egress?.publisher,
      encoder: egress?.encoder,
    };
  } finally {
    await browser.close();
    await syncd.stop();
  }
}

const rows = [];
for (const size of SIZES) rows.push(await run(size));
console.log('| size | source fps | shown fps | shown / source | shown size | first frame ms | encode ms/frame | encoder load, load steps down | syncd CPU (cores) |');
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.size} | ${r.produced_fps.toFixed(1)} | ${r.shown_fps.toFixed(1)} | ${r.ratio.toFixed(3)} | ${r.shown_size} | ${r.first_frame_ms?.toFixed(0)} | ${r.encode_ms?.toFixed(2) ?? '?'} | ${r.encoder?.load ?? '?'}, ${r.encoder?.load_steps_down ?? '?'} | ${r.syncd_cpu.toFixed(2)} |`);
}
console.log(JSON.stringify(rows, null, 1));
