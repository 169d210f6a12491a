// Chromium as a consumer of the system camera (docs/camera.md, "Chromium through the camera
// portal"): a headed Chromium (under the Xvfb display in $DISPLAY) with WebRtcPipeWireCamera
// opens the camera named on the command line with getUserMedia, reads each frame the page shows
// with requestVideoFrameCallback, draws its marker row into a canvas and decodes the sequence
// number that tests/integration/camera_marker.py draws: 16 columns of 8 pixels, bit i in
// column i, white for 1 and black for 0, and a black guard column after them.
//
// With --sample "x,y;x,y;...", the page also reads the colour at those points of the frame
// (each the average of a --patch by --patch square centred on it, default 8) from a canvas the
// whole frame is drawn into, on --sample-frames frames (default 3) after the count (or after
// the warm-up with --seconds 0, which skips the marker count: frames without a marker):
// `samples` is [[R, G, B], ...] in the points' order, from the last of those frames,
// `sample_yuv` the frame's own [Y, U, V] there (I420 or NV12, before Chromium's conversion),
// `sample_range` the largest difference of any value between those frames, and `sample_info`
// the frame's size, format and colour space (docs/camera.md, "Colour").
//
// Run by tests/integration/test_camera_chromium.py inside a private PipeWire session with
// xdg-desktop-portal on its bus; prints one JSON object on stdout:
//   node lib/camera_consumer.js --camera "Sync Camera" --width 640 --height 360 --fps 30 \
//     --seconds 10 --row 180 --warmup 1
//   node lib/camera_consumer.js --camera "Sync Camera" --width 640 --height 360 --fps 10 \
//     --seconds 0 --sample "35,180;106,180" --patch 8
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { CHROMIUM } from './harness.js';

// Flags on top of playwright's defaults. No --headless: the capture path is the desktop one,
// under Xvfb. No --use-fake-device-for-media-stream: that would replace the camera.
export const CAMERA_FLAGS = [
  '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-background-timer-throttling',
  '--disable-renderer-backgrounding', '--disable-backgrounding-occluded-windows',
  // Cameras through xdg-desktop-portal's Camera portal and PipeWire, instead of V4L2.
  '--enable-features=WebRtcPipeWireCamera',
];

// The page is routed in at this origin (never fetched): http://localhost is a secure context,
// which getUserMedia needs, and the camera permission is granted to it below.
const ORIGIN = 'http://localhost:9';

const PAGE = `<!doctype html><meta charset=utf-8><title>camera consumer</title>
<video id=v autoplay muted playsinline style="width:160px"></video>
<script>
const BITS = 16, COLUMN = 8;
// Canvas values of the camera's black (Y 16) and white (Y 235) after Chromium's YUV to RGB:
// 0 and 255, within this margin (camera_marker.py allows 8 of 219 luma steps; 24 of 255 here).
const MARGIN = 24;
// One pixel from the middle of each column and of the guard column, from one row.
function decode(px) {
  let seq = 0;
  for (let bit = 0; bit <= BITS; bit++) {
    const i = (bit * COLUMN + COLUMN / 2) * 4;
    const lo = Math.min(px[i], px[i + 1], px[i + 2]), hi = Math.max(px[i], px[i + 1], px[i + 2]);
    if (hi <= MARGIN) continue;                                  // black: 0
    if (bit < BITS && lo >= 255 - MARGIN) { seq |= 1 << bit; continue; }  // white: 1
    return -1;                                                   // neither, or a white guard
  }
  return seq;
}

// The same marker from luma values (a VideoFrame's Y plane), with camera_marker.py's
// read_gst_marker tolerance: black 16 and white 235, within 8.
function decodeLuma(y) {
  let seq = 0;
  for (let bit = 0; bit <= BITS; bit++) {
    const v = y[bit * COLUMN + COLUMN / 2];
    if (Math.abs(v - 16) <= 8) continue;
    if (bit < BITS && Math.abs(v - 235) <= 8) { seq |= 1 << bit; continue; }
    return -1;
  }
  return seq;
}

// The average colour of a patch x patch square centred on each point of the frame shown now:
// the whole frame drawn into a canvas of its size (as a page that shows or records it would
// draw it), then getImageData of each square. Also the frame's own Y, U and V over the same
// squares (a VideoFrame of it, when I420 or NV12: what the camera delivered, before Chromium's
// conversion to RGB), its format and colour space, and the canvas's colour space.
async function samplePoints(video, points, patch) {
  const w = video.videoWidth, h = video.videoHeight;
  const canvas = new OffscreenCanvas(w, h);
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  ctx.drawImage(video, 0, 0, w, h);
  const half = Math.floor(patch / 2);
  const squares = points.map(([x, y]) => [Math.min(Math.max(x - half, 0), w - patch),
                                          Math.min(Math.max(y - half, 0), h - patch)]);
  const round2 = (v) => Math.round(v * 100) / 100;
  const rgb = squares.map(([x0, y0]) => {
    const px = ctx.getImageData(x0, y0, patch, patch).data;
    const sum = [0, 0, 0];
    for (let i = 0; i < px.length; i += 4) for (let c = 0; c < 3; c++) sum[c] += px[i + c];
    return sum.map((v) => round2(v / (patch * patch)));
  });
  const info = { size: w + 'x' + h, canvas_color_space: ctx.getContextAttributes().colorSpace };
  let yuv = null;
  try {
    const frame = new VideoFrame(video);
    try {
      info.format = frame.format;
      info.color_space = frame.colorSpace.toJSON();
      if (frame.format === 'I420' || frame.format === 'NV12') {
        const buf = new Uint8Array(frame.allocationSize());
        const [yp, up, vp] = await frame.copyTo(buf);
        const nv12 = frame.format === 'NV12';
        // Chroma sample (cx, cy) of the plane: U, or V (NV12: interleaved in one plane).
        const chroma = (cx, cy, v) => nv12 ? buf[up.offset + cy * up.stride + 2 * cx + v]
          : buf[(v ? vp : up).offset + cy * (v ? vp : up).stride + cx];
        yuv = squares.map(([x0, y0]) => {
          let sy = 0, su = 0, sv = 0, n = 0;
          for (let y = y0; y < y0 + patch; y++)
            for (let x = x0; x < x0 + patch; x++) sy += buf[yp.offset + y * yp.stride + x];
          for (let cy = y0 >> 1; cy <= (y0 + patch - 1) >> 1; cy++)
            for (let cx = x0 >> 1; cx <= (x0 + patch - 1) >> 1; cx++, n++) {
              su += chroma(cx, cy, 0);
              sv += chroma(cx, cy, 1);
            }
          return [round2(sy / (patch * patch)), round2(su / n), round2(sv / n)];
        });
      }
    } finally {
      frame.close();
    }
  } catch (e) {
    info.video_frame_error = String(e);
  }
  return { rgb, yuv, info };
}

// The colour samples (--sample), on sampleFrames frames shown one after another, after the
// warm-up when nothing was counted before it: out.samples from the last frame, out.sample_range
// the largest difference of one value between those frames, out.sample_yuv the frame's own
// [Y, U, V] over the same squares (null unless I420 or NV12), out.sample_info the frame's size,
// format and colour space and the canvas's colour space.
async function sampleFramesNow(video, out, { seconds, warmup, sample, patch, sampleFrames }) {
  const nextFrame = () => Promise.race([
    new Promise((r) => video.requestVideoFrameCallback((now) => r(now))),
    new Promise((r) => setTimeout(() => r(null), 20000))]);
  if (seconds <= 0) {
    const first = await nextFrame();
    if (first === null) { out.sample_error = 'no frame'; return; }
    await new Promise((r) => setTimeout(r, warmup * 1000));
  }
  const taken = [];
  for (let i = 0; i < sampleFrames; i++) {
    if (await nextFrame() === null) { out.sample_error = 'no frame'; return; }
    const s = await samplePoints(video, sample, patch);
    taken.push(s.rgb);
    out.sample_info = s.info;
    out.sample_yuv = s.yuv;
  }
  out.samples = taken[taken.length - 1];
  let range = 0;
  for (let p = 0; p < sample.length; p++)
    for (let c = 0; c < 3; c++) {
      const v = taken.map((t) => t[p][c]);
      range = Math.max(range, Math.max(...v) - Math.min(...v));
    }
  out.sample_range = Math.round(range * 100) / 100;
}

window.runCamera = async ({ camera, width, height, fps, seconds, row, warmup, readback, sample,
                            patch, sampleFrames }) => {
  const out = { devices: [], label: null, settings: null, frames: 0, unique: 0, corrupt: 0,
                repeats: 0, gaps: 0, missed_callbacks: 0, first_sequence: null,
                unique_per_second: [], sizes: {}, gap_samples: [], readback };
  // Chromium lists PipeWire cameras once its portal session has enumerated them: wait for it.
  const deadline = performance.now() + 15000;
  let device;
  while (!device && performance.now() < deadline) {
    const all = await navigator.mediaDevices.enumerateDevices();
    out.devices = all.filter((d) => d.kind === 'videoinput').map((d) => d.label);
    device = all.find((d) => d.kind === 'videoinput' && d.label === camera);
    if (!device) await new Promise((r) => setTimeout(r, 100));
  }
  if (!device) { out.error = 'camera not listed'; return out; }
  const t0 = performance.now();
  const stream = await navigator.mediaDevices.getUserMedia({ video: {
    deviceId: { exact: device.deviceId }, width: { exact: width }, height: { exact: height },
    frameRate: { ideal: fps } } });
  out.get_user_media_ms = Math.round(performance.now() - t0);
  const track = stream.getVideoTracks()[0];
  out.label = track.label;
  out.settings = track.getSettings();
  const video = document.getElementById('v');
  video.srcObject = stream;
  await video.play();
  // A canvas that holds one row of the marker's columns; willReadFrequently keeps it in memory,
  // so getImageData is a copy, not a GPU readback.
  const canvas = new OffscreenCanvas((BITS + 1) * COLUMN, 1);
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  // readback 'canvas': drawImage of the marker's row, getImageData, RGB values. 'videoframe':
  // a VideoFrame of the same frame copies out only two rows of the marker's columns, in the
  // frame's own YUV: no conversion of the whole frame to RGB on the page's thread, which at
  // 1080p60 costs more than the frame period here (docs/camera.md).
  const lumaRows = new Uint8Array(2 * (BITS + 1) * COLUMN * 2);
  const readSequence = async () => {
    if (readback === 'videoframe') {
      const frame = new VideoFrame(video);
      try {
        const layout = await frame.copyTo(lumaRows, { rect: { x: 0, y: row & ~1, width: (BITS + 1) * COLUMN, height: 2 } });
        out.pixel_format = frame.format;
        return decodeLuma(lumaRows.subarray(layout[0].offset));
      } finally {
        frame.close();
      }
    }
    ctx.drawImage(video, 0, row, canvas.width, 1, 0, 0, canvas.width, 1);
    return decode(ctx.getImageData(0, 0, canvas.width, 1).data);
  };
  const bins = Math.ceil(seconds);
  out.unique_per_second = new Array(bins).fill(0);
  let start = null, last = null, lastPresented = null;
  let watchdog;
  if (seconds > 0) await new Promise((resolve) => {
    // A stream that stops showing frames ends the count too, reported, instead of hanging.
    watchdog = setTimeout(() => { out.timed_out = true; resolve(); }, (warmup + seconds + 20) * 1000);
    const onFrame = async (now, md) => {
      if (start === null) start = now;
      // The first warmup seconds are the stream's start in Chromium: checked for corrupt
      // markers, not counted.
      const elapsed = (now - start) / 1000 - warmup;
      if (elapsed >= seconds) { resolve(); return; }
      if (elapsed < 0) {
        out.warmup_frames = (out.warmup_frames ?? 0) + 1;
        if (await readSequence() < 0) out.corrupt++;
        video.requestVideoFrameCallback(onFrame);
        return;
      }
      out.frames++;
      const size = md.width + 'x' + md.height;
      out.sizes[size] = (out.sizes[size] ?? 0) + 1;
      if (lastPresented !== null && md.presentedFrames > lastPresented + 1)
        out.missed_callbacks += md.presentedFrames - lastPresented - 1;
      lastPresented = md.presentedFrames;
      const seq = await readSequence();
      if (seq < 0) {
        out.corrupt++;
      } else if (last !== null && ((seq - last) & 0xffff) === 0) {
        out.repeats++;
      } else if (last !== null && ((seq - last) & 0xffff) >= 0x8000) {
        out.repeats++;  // older than the last one: out of order, counted with the repeats
      } else {
        if (out.first_sequence === null) out.first_sequence = seq;
        if (last !== null && ((seq - last) & 0xffff) > 1) {
          out.gaps += ((seq - last) & 0xffff) - 1;
          if (out.gap_samples.length < 10) out.gap_samples.push([last, seq, Math.round(elapsed * 1000)]);
        }
        last = seq;
        out.unique++;
        out.unique_per_second[Math.floor(elapsed)]++;
      }
      video.requestVideoFrameCallback(onFrame);
    };
    video.requestVideoFrameCallback(onFrame);
  });
  clearTimeout(watchdog);
  out.unique_fps = Math.round((out.unique / seconds) * 100) / 100;
  if (sample) await sampleFramesNow(video, out, { seconds, warmup, sample, patch, sampleFrames });
  track.stop();
  return out;
};
</script>`;

async function main() {
  const { values } = parseArgs({ options: {
    camera: { type: 'string', default: 'Sync Camera' },
    width: { type: 'string', default: '640' }, height: { type: 'string', default: '360' },
    fps: { type: 'string', default: '30' }, seconds: { type: 'string', default: '10' },
    row: { type: 'string', default: '0' }, warmup: { type: 'string', default: '1' },
    readback: { type: 'string', default: 'canvas' },
    sample: { type: 'string' }, patch: { type: 'string', default: '8' },
    'sample-frames': { type: 'string', default: '3' },
  } });
  const args = { camera: values.camera, width: Number(values.width), height: Number(values.height),
                 fps: Number(values.fps), seconds: Number(values.seconds), row: Number(values.row),
                 warmup: Number(values.warmup), readback: values.readback,
                 // "x,y;x,y;...": the points whose colour --sample reads, in frame pixels.
                 sample: values.sample
                   ? values.sample.split(';').map((p) => p.split(',').map(Number)) : null,
                 patch: Number(values.patch), sampleFrames: Number(values['sample-frames']) };
  if (args.sample && args.sample.some((p) => p.length !== 2 || p.some((v) => !Number.isInteger(v))))
    throw new Error(`--sample: x,y;x,y;... in whole pixels, not ${values.sample}`);
  if (!process.env.DISPLAY) throw new Error('no DISPLAY: run under Xvfb');
  const profile = await mkdtemp(path.join(tmpdir(), 'sync-chromium-camera-'));
  const launched = Date.now();
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: false, args: CAMERA_FLAGS,
    viewport: { width: 800, height: 600 },
  });
  const logs = [];
  try {
    // Chromium's own site permission, as a user's "Allow" would give it; the portal's is
    // granted separately, in the permission store (the test does it).
    await context.grantPermissions(['camera'], { origin: ORIGIN });
    await context.route(`${ORIGIN}/**`, (route) => route.fulfill({
      status: 200, contentType: 'text/html; charset=utf-8', body: PAGE }));
    const page = await context.newPage();
    page.on('console', (m) => logs.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => logs.push(`[pageerror] ${e}`));
    await page.goto(`${ORIGIN}/camera.html`);
    const result = await page.evaluate((a) => window.runCamera(a), args);
    result.user_agent = await page.evaluate(() => navigator.userAgent);
    result.launch_to_result_s = Math.round((Date.now() - launched) / 100) / 10;
    result.logs = logs.slice(-20);
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await context.close().catch(() => {});
    await rm(profile, { recursive: true, force: true }).catch(() => {});
  }
}

main().catch((e) => {
  process.stderr.write(`camera_consumer: ${e.stack ?? e}\n`);
  process.exit(1);
});
