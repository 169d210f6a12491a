"""Pixel formats end to end through a real syncd (docs/protocol.md, "Pixel formats"): NV12 and
I420 frames from the native producer verified by syncd's test publisher, read back from the
shared-memory ring at their own size, and carried by the HTTP stream; stream.opened's planes and
the frame header's format values for all four formats, checked from a Python client."""
import asyncio
import json
import os
import random
import sys
import subprocess
import tempfile
import unittest

import websockets

from harness import (ENCODED_FORMAT_CODES, FORMAT_CODES, PRODUCER, Syncd, frame_bytes, frame_message, frame_planes,
                     last_json, marker_pixels)
from test_streams import Receiver

READER = os.environ.get("SYNC_SHM_READER", "../../build/release/tools/shm_reader/sync-shm-reader")
RECEIVER = os.environ.get("SYNC_STREAM_RECEIVER",
                          "../../build/release/tools/stream_receiver/sync-stream-receiver")
MAKE_CLIP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "h264",
                         "make_clip.py")
W, H = 640, 360  # even, as 4:2:0 needs; small enough for a shared 2-core machine


def run_producer(syncd, fmt, stream, *extra):
    proc = subprocess.run([PRODUCER, "--url", syncd.url, "--quiet", "--stream", stream,
                           "--format", fmt, "--width", str(W), "--height", str(H), *extra],
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, last_json(proc.stdout), proc.stderr


async def hello(ws):
    await ws.send(json.dumps({"type": "hello", "protocol": 1}))
    assert json.loads(await ws.recv())["type"] == "welcome"


async def request(ws, message):
    await ws.send(json.dumps(message))
    return json.loads(await ws.recv())


class PixelFormats(unittest.TestCase):
    def check_stream(self, syncd, name, fmt, sent):
        s = syncd.wait_for(lambda: (lambda s: s if s and not s["open"] else None)(
            syncd.stream_stats(name)))
        self.assertEqual(s["format"], fmt)
        self.assertEqual(s["frame_bytes"], W * H * 3 // 2)
        self.assertEqual(s["frames_accepted"], sent)
        # The test publisher hashed every byte of every frame, chroma planes included.
        self.assertEqual(s["frames_verified"], sent)
        self.assertEqual(s["frames_verify_failed"], 0)
        self.assertEqual(s["frames_dropped_total"], 0)
        return s

    def test_420_frames_verified_and_read_from_the_ring(self):
        for fmt in ("nv12", "i420"):
            with self.subTest(fmt=fmt), tempfile.TemporaryDirectory() as tmp:
                path = f"/dev/shm/sync-test-{os.getpid()}-formats-{fmt}.frames"
                events = os.path.join(tmp, "events.csv")
                with Syncd("--publisher", "test,shm", "--shm-path", path) as syncd:
                    # The reader waits for the ring, reads until the stream ends, then reports.
                    reader = subprocess.Popen([READER, "--path", path, "--seconds", "60",
                                               "--quiet", "--events", events],
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True)
                    rc, sent, err = run_producer(syncd, fmt, "ring", "--fps", "60",
                                                 "--frames", "120")
                    self.assertEqual(rc, 0, err)
                    self.assertEqual(sent["frames_sent"], 120)
                    self.assertEqual(sent["errors_received"], 0)
                    s = self.check_stream(syncd, "ring", fmt, 120)
                    self.assertEqual(s["publishers"]["shm"]["delivered"], 120)

                    out, err = reader.communicate(timeout=60)
                    self.assertEqual(reader.returncode, 0, err)
                    r = last_json(out)
                    self.assertTrue(r["ended"], r)
                    self.assertEqual(r["format"], fmt)
                    self.assertEqual((r["width"], r["height"]), (W, H))
                    self.assertEqual(r["frame_bytes"], W * H * 3 // 2)
                    self.assertEqual(r["frame_bytes_read"], W * H * 3 // 2)
                    self.assertEqual([(p["offset"], p["stride"], p["rows"]) for p in r["planes"]],
                                     frame_planes(fmt, W, H))
                    # Each frame's XXH3 over frame_bytes matched the producer's hash over its
                    # whole frame: a ring sized 4 bytes a pixel would fail every one.
                    self.assertEqual(r["verify_failures"], 0)
                    self.assertEqual(r["torn"], 0)
                    self.assertEqual(r["skipped"], 0)
                    self.assertEqual(r["verified"], r["frames_read"])
                    with open(events) as f:
                        sequences = [int(l.split(",")[0]) for l in f.read().splitlines()[1:]]
                    # The reader may have mapped the ring a frame or two after the producer
                    # began; from then on it read every frame, in order, to the last one.
                    self.assertEqual(len(sequences), r["frames_read"])
                    self.assertLess(sequences[0], 30)
                    self.assertEqual(sequences, list(range(sequences[0], 120)))
                    self.assertEqual(syncd.stop(), 0)
                self.assertFalse(os.path.exists(path))

    def test_420_frames_reach_an_http_receiver(self):
        with Syncd() as syncd, tempfile.TemporaryDirectory() as tmp:
            ticket_file = os.path.join(tmp, "ticket")
            receiver = subprocess.Popen(
                [RECEIVER, "--url", f"http://127.0.0.1:{syncd.port}", "--stream", "recv",
                 "--ticket-file", ticket_file, "--credit", "8", "--quiet"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            rc, sent, err = run_producer(syncd, "i420", "recv", "--fps", "60", "--frames", "90",
                                         "--ticket-file", ticket_file)
            self.assertEqual(rc, 0, err)
            self.assertEqual(sent["frames_sent"], 90)
            out, err = receiver.communicate(timeout=30)
            self.assertEqual(receiver.returncode, 0, err)
            r = last_json(out)
            self.assertEqual(r["end"], "stream_ended")
            self.assertEqual(r["format"], "i420")
            self.assertEqual((r["width"], r["height"]), (W, H))
            self.assertEqual(r["frame_bytes"], W * H * 3 // 2)
            # Every frame offered to the receiver reached it verified, or was dropped by syncd
            # with a reason (a receiver starved of CPU on a loaded machine is a slow consumer,
            # and newest-wins drops for it). The producer's paced schedule may start before the
            # receiver is admitted (it finds the ticket file by polling), so the first frame or
            # two may never have been offered to it.
            rec = syncd.stream_stats("recv")["publishers"]["http"]["receivers"][0]
            self.assertGreaterEqual(rec["offered"], 88)
            self.assertEqual(rec["offered"], rec["completed"] + rec["dropped_total"], rec)
            self.assertEqual(r["frames"], rec["completed"])
            self.assertGreaterEqual(r["frames"], 60, rec)
            self.assertEqual(r["hash_verified"], r["frames"])
            self.assertEqual(r["verify_failures"], 0)
            self.check_stream(syncd, "recv", "i420", 90)
            self.assertEqual(syncd.stop(), 0)

    def test_stream_opened_planes_and_frame_header_formats(self):
        w, h = 64, 32

        async def scenario(syncd):
            async with websockets.connect(syncd.url, max_size=None) as ws:
                await hello(ws)
                for fmt, code in FORMAT_CODES.items():
                    opened = await request(ws, {"type": "stream.open", "name": fmt, "width": w,
                                                "height": h, "format": fmt})
                    self.assertEqual(opened["type"], "stream.opened", opened)
                    self.assertEqual(opened["format"], fmt)
                    self.assertEqual(opened["frame_bytes"], frame_bytes(fmt, w, h))
                    self.assertEqual([(p["offset"], p["stride"], p["rows"])
                                      for p in opened["planes"]], frame_planes(fmt, w, h))
                    sid, size = opened["stream"], opened["frame_bytes"]
                    # The header may name the stream's format or leave it 0 ("the stream's").
                    await ws.send(frame_message(sid, 0, marker_pixels(size, 0, 1), w, h, code))
                    await ws.send(frame_message(sid, 1, marker_pixels(size, 1, 2), fmt=0))
                    # Another format of the same size is refused: NV12 and I420 bytes differ.
                    other = {1: 2, 2: 1, 3: 4, 4: 3}[code]
                    await ws.send(frame_message(sid, 2, marker_pixels(size, 2), fmt=other))
                    error = json.loads(await ws.recv())
                    self.assertEqual((error["code"], error["sequence"]), ("geometry_mismatch", 2))
                    # A frame sized 4 bytes a pixel fits only the 4-byte formats.
                    if code >= 3:
                        await ws.send(frame_message(sid, 3, marker_pixels(w * h * 4, 3), fmt=code))
                        error = json.loads(await ws.recv())
                        self.assertEqual(error["code"], "frame_size_mismatch")
                # Not a format: refused before any stream is looked up.
                await ws.send(frame_message(1, 9, marker_pixels(w * h * 4, 9), fmt=6))
                error = json.loads(await ws.recv())
                self.assertEqual(error["code"], "bad_frame_header")
                # 4:2:0 needs even sides; the 4-byte formats do not.
                for fmt, ok in (("nv12", False), ("i420", False), ("bgra8", True)):
                    reply = await request(ws, {"type": "stream.open", "name": "odd-" + fmt,
                                               "width": w + 1, "height": h, "format": fmt})
                    self.assertEqual(reply["type"] == "stream.opened", ok, reply)
                    if not ok:
                        self.assertEqual(reply["code"], "bad_geometry")
                reply = await request(ws, {"type": "stream.open", "name": "yuv", "width": w,
                                           "height": h, "format": "yuv420"})
                self.assertEqual(reply["code"], "bad_message")
                self.assertIn("nv12", reply["message"])

        with Syncd() as syncd:
            asyncio.run(scenario(syncd))
            for fmt in FORMAT_CODES:
                s = syncd.stream_stats(fmt)
                self.assertEqual(s["format"], fmt)
                self.assertEqual(s["frames_verified"], 2, s)
                self.assertEqual(s["frames_verify_failed"], 0)
                self.assertEqual(s["frames_dropped"]["geometry_mismatch"], 1)
            self.assertEqual(syncd.stop(), 0)

    def test_h264_access_units_of_any_size_verified_and_read_from_the_ring(self):
        # An encoded stream (what the WAN relay carries) takes access units of 1 byte up to an
        # I420 frame's size; each is verified, and read back from the ring, at its own size.
        w, h = 64, 32
        room = w * h * 3 // 2
        rng = random.Random(5)
        sizes = [1, room, room - 1, 17] + [rng.randint(1, room) for _ in range(56)]

        async def scenario(syncd):
            async with websockets.connect(syncd.url, max_size=None) as ws:
                await hello(ws)
                opened = await request(ws, {"type": "stream.open", "name": "au", "width": w,
                                            "height": h, "format": "h264"})
                self.assertEqual(opened["type"], "stream.opened", opened)
                self.assertEqual(opened["frame_bytes"], room)
                self.assertEqual(len(opened["planes"]), 1)
                for seq, size in enumerate(sizes):
                    await ws.send(frame_message(opened["stream"], seq, rng.randbytes(size), w, h,
                                                ENCODED_FORMAT_CODES["h264"]))
                    await asyncio.sleep(0.005)  # the ring holds 4: let the reader keep up
                # One byte past the slot, and an empty one: refused, counted, the stream goes on.
                for seq, size in ((len(sizes), room + 1), (len(sizes) + 1, 0)):
                    await ws.send(frame_message(opened["stream"], seq, rng.randbytes(size)))
                    error = json.loads(await ws.recv())
                    self.assertEqual((error["code"], error["sequence"]),
                                     ("frame_size_mismatch", seq), error)
                await request(ws, {"type": "stream.close", "stream": opened["stream"]})

        with tempfile.TemporaryDirectory() as tmp:
            path = f"/dev/shm/sync-test-{os.getpid()}-formats-h264.frames"
            with Syncd("--publisher", "test,shm", "--shm-path", path,
                       "--shm-slots", "4", "--shm-stream", "au") as syncd:
                reader = subprocess.Popen([READER, "--path", path, "--seconds", "60", "--quiet",
                                           "--open-wait", "10",
                                           "--events", os.path.join(tmp, "events.csv")],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True)
                asyncio.run(scenario(syncd))
                s = syncd.wait_for(lambda: (lambda s: s if s and not s["open"] else None)(
                    syncd.stream_stats("au")))
                self.assertEqual(s["format"], "h264")
                self.assertEqual(s["frames_accepted"], len(sizes))
                self.assertEqual(s["frames_verified"], len(sizes))
                self.assertEqual(s["frames_verify_failed"], 0)
                self.assertEqual(s["frames_dropped"]["size_mismatch"], 2)
                out, err = reader.communicate(timeout=60)
                self.assertEqual(reader.returncode, 0, err)
                r = last_json(out)
                self.assertEqual(r["format"], "h264")
                self.assertEqual(r["verify_failures"], 0, r)
                self.assertGreater(r["frames_read"], len(sizes) // 2, r)
                self.assertEqual(syncd.stop(), 0)

    def test_producer_sends_an_x264_clip_as_an_h264_stream(self):
        # tools/h264/make_clip.py encodes marker frames with x264 (--aud); sync-producer --h264
        # splits the clip at its delimiters and sends each access unit as a frame.
        with tempfile.TemporaryDirectory() as tmp:
            clip = os.path.join(tmp, "clip.264")
            made = subprocess.run([sys.executable, MAKE_CLIP, "--out", clip, "--width", "320",
                                   "--height", "180", "--fps", "60", "--frames", "30",
                                   "--bitrate", "1000", "--keyint", "10"],
                                  capture_output=True, text=True, timeout=120)
            self.assertEqual(made.returncode, 0, made.stderr)
            self.assertEqual(last_json(made.stdout)["frames"], 30)
            with Syncd() as syncd:
                proc = subprocess.run([PRODUCER, "--url", syncd.url, "--quiet", "--stream", "clip",
                                       "--format", "h264", "--h264", clip, "--width", "320",
                                       "--height", "180", "--fps", "60", "--frames", "75"],
                                      capture_output=True, text=True, timeout=60)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(last_json(proc.stdout)["frames_sent"], 75)
                s = syncd.wait_for(lambda: (lambda s: s if s and not s["open"] else None)(
                    syncd.stream_stats("clip")))
                self.assertEqual(s["format"], "h264")
                # 75 frames: the 30 access units two and a half times, each verified.
                self.assertEqual(s["frames_verified"], 75)
                self.assertEqual(s["frames_verify_failed"], 0)
                # A file without delimiters is refused before any stream opens.
                bare = os.path.join(tmp, "bare.264")
                with open(bare, "wb") as f:
                    f.write(b"\0\0\0\x01\x67\x42" + b"\x11" * 64)
                proc = subprocess.run([PRODUCER, "--url", syncd.url, "--quiet", "--stream", "bare",
                                       "--format", "h264", "--h264", bare, "--width", "320",
                                       "--height", "180", "--frames", "1"],
                                      capture_output=True, text=True, timeout=60)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertIn("access unit delimiter", proc.stderr)
                self.assertIsNone(syncd.stream_stats("bare"))

    def test_http_records_carry_the_format(self):
        w, h = 64, 32

        async def scenario(syncd):
            async with websockets.connect(syncd.url, max_size=None) as ws:
                await hello(ws)
                opened = await request(ws, {"type": "stream.open", "name": "rec", "width": w,
                                            "height": h, "format": "nv12"})
                sid = opened["stream"]
                ticket = await request(ws, {"type": "ticket.create", "stream": sid})
                receiver = Receiver(syncd.port, "rec", ticket["ticket"], credit=2)
                self.assertEqual(receiver.status, 200)
                await asyncio.sleep(0.1)
                pixels = marker_pixels(frame_bytes("nv12", w, h), 0, 0x5A)
                await ws.send(frame_message(sid, 0, pixels))
                # Receiver.record() also checks the payload against the record's format.
                record = receiver.record()
                self.assertEqual(record["format"], FORMAT_CODES["nv12"])
                self.assertEqual((record["width"], record["height"]), (w, h))
                self.assertEqual(record["pixels"], pixels)
                receiver.close()

        with Syncd() as syncd:
            asyncio.run(scenario(syncd))
            self.assertEqual(syncd.stop(), 0)


if __name__ == "__main__":
    unittest.main()
