"""The camera publisher end to end (docs/camera.md): syncd runs with `--publisher camera` and a
regular file standing in for the v4l2loopback device, which receives each frame whole, one
write() after another. A client sends frames whose sequence number is drawn as black and white
columns; the test decodes it back from the Y plane of every frame in the file, for each camera
format and for an RGB and a 4:2:0 source. A camera whose device cannot open leaves syncd serving
everything else, with its frames counted as dropped (no_backend)."""
import asyncio
import json
import os
import tempfile
import unittest

import websockets

from camera_marker import BITS, BLACK_Y, luma, marker_frame, read_marker
from harness import FORMAT_CODES, Syncd, frame_bytes, frame_message

W, H = 256, 64    # even, as every camera format needs
FRAMES = 5


def camera_frame_bytes(camera_format):
    return W * H * 2 if camera_format == "yuy2" else W * H * 3 // 2


async def send_frames(syncd, name, fmt, sequences, wait_delivered=True):
    """Opens a stream and sends one frame at a time; with wait_delivered, each only after the
    camera has delivered the one before (the camera drops frames it cannot take at once)."""
    async with websockets.connect(syncd.url, max_size=None) as ws:
        await ws.send(json.dumps({"type": "hello", "protocol": 1}))
        assert json.loads(await ws.recv())["type"] == "welcome"
        await ws.send(json.dumps({"type": "stream.open", "name": name, "width": W, "height": H,
                                  "format": fmt}))
        opened = json.loads(await ws.recv())
        assert opened["type"] == "stream.opened", opened
        assert opened["frame_bytes"] == frame_bytes(fmt, W, H)
        for i, seq in enumerate(sequences):
            await ws.send(frame_message(opened["stream"], seq, marker_frame(fmt, seq, W, H), W, H,
                                        FORMAT_CODES[fmt]))
            if wait_delivered:
                for _ in range(400):
                    cam = camera_stats(syncd, name)
                    if cam and cam["delivered"] + sum(cam["dropped"].values()) == i + 1:
                        break
                    await asyncio.sleep(0.025)


def camera_stats(syncd, name):
    s = syncd.stream_stats(name)
    return s["publishers"]["camera"] if s else None


class Camera(unittest.TestCase):
    def test_frames_reach_the_device_in_every_format(self):
        sequences = [1, 2, 0x5a5a, 0xa5a5, 0xffff][:FRAMES]
        for source in ("rgba8", "nv12"):
            for camera_format in ("yuy2", "i420", "nv12"):
                with self.subTest(source=source, camera_format=camera_format), \
                        tempfile.TemporaryDirectory() as tmp:
                    device = os.path.join(tmp, "video10")
                    open(device, "wb").close()
                    with Syncd("--publisher", "camera", "--camera-device", device,
                               "--camera-format", camera_format) as syncd:
                        asyncio.run(send_frames(syncd, "cam", source, sequences))
                        cam = syncd.wait_for(
                            lambda: (lambda c: c if c and c["delivered"] == FRAMES else None)(
                                camera_stats(syncd, "cam")))
                        self.assertEqual(cam["offered"], FRAMES)
                        self.assertEqual(cam["converting"], 0)
                        self.assertEqual(sum(cam["dropped"].values()), 0, cam)
                        self.assertEqual((cam["backend"], cam["target"], cam["format"]),
                                         ("v4l2loopback", device, camera_format))
                        status, metrics = syncd.get("/metrics")
                        self.assertEqual(status, 200)
                        self.assertIn(f'syncd_camera_frames_delivered_total{{stream="cam"}} '
                                      f'{FRAMES}', metrics)
                        self.assertEqual(syncd.stop(), 0)
                    with open(device, "rb") as f:
                        data = f.read()
                    size = camera_frame_bytes(camera_format)
                    self.assertEqual(len(data), FRAMES * size)
                    for i, seq in enumerate(sequences):
                        frame = data[i * size:(i + 1) * size]
                        for y in (0, H // 2, H - 1):
                            self.assertEqual(read_marker(frame, camera_format, y, W), seq,
                                             f"frame {i} row {y}")
                        # Black and white within rounding of BT.601's limits.
                        self.assertLessEqual(
                            abs(luma(frame, camera_format, 8 * BITS + 4, 0, W) - BLACK_Y), 2)

    def test_a_camera_that_cannot_start_leaves_syncd_serving(self):
        with Syncd("--publisher", "test,camera", "--camera-device",
                   "/nonexistent/video99") as syncd:
            self.assertEqual(syncd.get("/healthz")[0], 200)
            asyncio.run(send_frames(syncd, "cam", "rgba8", [1, 2, 3], wait_delivered=False))
            s = syncd.wait_for(lambda: (lambda s: s if s and s["frames_accepted"] == 3
                                        and s["frames_verified"] == 3 else None)(
                syncd.stream_stats("cam")))
            cam = s["publishers"]["camera"]
            self.assertEqual(cam["backend"], "none")
            self.assertIn("/nonexistent/video99", cam["error"])
            self.assertEqual(cam["offered"], 3)
            self.assertEqual(cam["dropped"]["no_backend"], 3)
            self.assertEqual(cam["delivered"], 0)
            status, metrics = syncd.get("/metrics")
            self.assertIn('syncd_camera_frames_dropped_total{stream="cam",reason="no_backend"} 3',
                          metrics)
            self.assertEqual(syncd.get("/healthz")[0], 200)
            self.assertEqual(syncd.stop(), 0)
            err = syncd.proc.stderr.read()
            self.assertIn('camera "Sync Camera" unavailable', err)
            self.assertIn("serving everything else", err)

    def test_an_odd_sized_stream_is_dropped_and_counted(self):
        # Every camera format shares chroma between two columns: 255 wide cannot be carried.
        # The RGBA stream itself is fine; only the camera drops its frames.
        async def scenario(syncd):
            async with websockets.connect(syncd.url, max_size=None) as ws:
                await ws.send(json.dumps({"type": "hello", "protocol": 1}))
                await ws.recv()
                await ws.send(json.dumps({"type": "stream.open", "name": "odd", "width": 255,
                                          "height": H, "format": "rgba8"}))
                opened = json.loads(await ws.recv())
                self.assertEqual(opened["type"], "stream.opened", opened)
                for seq in (1, 2):
                    await ws.send(frame_message(opened["stream"], seq,
                                                bytes(255 * H * 4), 255, H, 1))

        with tempfile.TemporaryDirectory() as tmp:
            device = os.path.join(tmp, "video10")
            open(device, "wb").close()
            with Syncd("--publisher", "test,camera", "--camera-device", device) as syncd:
                asyncio.run(scenario(syncd))
                s = syncd.wait_for(lambda: (lambda s: s if s and s["frames_verified"] == 2
                                            else None)(syncd.stream_stats("odd")))
                cam = s["publishers"]["camera"]
                self.assertEqual((cam["offered"], cam["delivered"]), (2, 0))
                self.assertEqual(cam["dropped"]["unsupported_size"], 2)
                metrics = syncd.get("/metrics")[1]
                self.assertIn('syncd_camera_frames_dropped_total{stream="odd",'
                              'reason="unsupported_size"} 2', metrics)
                self.assertEqual(syncd.get("/healthz")[0], 200)
                self.assertEqual(syncd.stop(), 0)
            self.assertEqual(os.path.getsize(device), 0)

    def test_camera_options_are_checked(self):
        import subprocess
        from harness import SYNCD
        proc = subprocess.run([SYNCD, "--port", "0", "--publisher", "camera",
                               "--camera-format", "bgrx"], capture_output=True, text=True,
                              timeout=10)
        self.assertEqual(proc.returncode, 2)  # a usage error (README.md, "Exit status")
        self.assertIn("camera-format", proc.stderr)


if __name__ == "__main__":
    unittest.main()
