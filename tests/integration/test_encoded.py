"""Encoded publishing through a real syncd (docs/web.md, "Encoded publishing"): an independent
client (Python websockets) publishes an x264 clip as an h264 stream, the way a page publishes its
WebCodecs access units; syncd decodes it once into the stream's decoded twin ("<name>.decoded",
I420), where the test publisher checks every decoded frame's column marker against its sequence,
and asks the source for key frames (stream.keyframe) when its decoder needs one. Bad input (not
H.264, truncated units, no IDR at the start, another size mid-stream) is counted by reason and
never disturbs another stream. An HTTP receiver of the twin is a consumer that starts the
decoder of a syncd that has no pixel publisher."""
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import websockets

from harness import HEADER, FRAME_MAGIC, Syncd, frame_bytes
from test_streams import RECORD

MAKE_CLIP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "h264",
                         "make_clip.py")
COLUMN_MARKER = 2  # frame flag: the pixels carry the column marker (docs/protocol.md)
H264 = 5
W, H = 640, 360


def make_clip(tmp, name, width, height, frames, keyint):
    """Access units of an x264 clip whose frame i carries the column marker of i + 1."""
    path = os.path.join(tmp, name)
    made = subprocess.run([sys.executable, MAKE_CLIP, "--out", path, "--width", str(width),
                           "--height", str(height), "--fps", "30", "--frames", str(frames),
                           "--keyint", str(keyint), "--bitrate", "1500", "--column-marker"],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    with open(path, "rb") as f:
        data = f.read()
    starts = [i for i in range(len(data) - 4) if data[i:i + 4] == b"\0\0\x01\x09"]
    return [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])]


def au_message(stream_id, sequence, au, flags=COLUMN_MARKER):
    return HEADER.pack(FRAME_MAGIC, 1, 56, stream_id, flags, sequence,
                       int(time.monotonic() * 1e6), 0, 0, H264, 0, 0) + au


class Source:
    """One WebSocket publishing an h264 stream; records what syncd sends it unasked."""

    def __init__(self, ws):
        self.ws = ws
        self.events = []  # stream.keyframe / stream.bitrate messages
        self.replies = asyncio.Queue()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self):
        async for text in self.ws:
            m = json.loads(text)
            # syncd's requests, and errors that answer no request (a refused frame's: they
            # carry its sequence).
            if m["type"] in ("stream.keyframe", "stream.bitrate") or (
                    m["type"] == "error" and "sequence" in m):
                self.events.append(m)
            else:
                await self.replies.put(m)

    async def request(self, message):
        await self.ws.send(json.dumps(message))
        return await asyncio.wait_for(self.replies.get(), 10)

    async def open(self, name, width=W, height=H, feedback=True):
        opened = await self.request({"type": "stream.open", "name": name, "width": width,
                                     "height": height, "format": "h264", "fps": 30,
                                     "feedback": feedback})
        assert opened["type"] == "stream.opened", opened
        return opened["stream"]

    def keyframe_reasons(self):
        return [e["reason"] for e in self.events if e["type"] == "stream.keyframe"]


async def connect(syncd):
    ws = await websockets.connect(syncd.url, max_size=None)
    await ws.send(json.dumps({"type": "hello", "protocol": 1}))
    assert json.loads(await ws.recv())["type"] == "welcome"
    return Source(ws)


async def send_all(source, stream, units, first_sequence=1, pause=0.004):
    for i, au in enumerate(units):
        await source.ws.send(au_message(stream, first_sequence + i, au))
        await asyncio.sleep(pause)  # about a frame's wire time: the ring and pools keep up


async def wait_decoded(syncd, name, frames):
    """Waits (without holding the event loop, so the sockets go on) for the twin's frames."""
    await asyncio.to_thread(syncd.wait_for, lambda: (syncd.stream_stats(name + ".decoded") or {})
                            .get("frames_accepted", 0) >= frames, 20)


def closed(syncd, name):
    return (lambda s: s if s and not s["open"] else None)(syncd.stream_stats(name))


class EncodedPublishing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        # Key frames 1 s apart at 30 fps: the start, 30 and 60.
        cls.clip = make_clip(cls.tmp.name, "clip.264", W, H, 90, 30)
        cls.small = make_clip(cls.tmp.name, "small.264", 320, 180, 30, 30)
        cls.large = make_clip(cls.tmp.name, "large.264", 1280, 720, 2, 30)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def twin_checks(self, syncd, name, decoded_sequences):
        twin = syncd.wait_for(lambda: closed(syncd, name + ".decoded"))
        self.assertEqual(twin["format"], "i420")
        self.assertEqual((twin["width"], twin["height"]), (W, H))
        self.assertEqual(twin["frames_accepted"], decoded_sequences)
        test = twin["publishers"]["test"]
        # Every decoded frame's column marker is its sequence: the right picture, not just bytes.
        self.assertEqual(test["marker_verified"], decoded_sequences, test)
        self.assertEqual(test["verify_failed"]["marker_mismatch"], 0, test)
        self.assertEqual(test["sequence_reordered"] + test["sequence_duplicates"], 0, test)
        return twin

    def test_an_encoded_stream_is_decoded_once_into_its_twin_and_verified(self):
        path = f"/dev/shm/sync-test-{os.getpid()}-encoded.frames"

        async def scenario(syncd):
            source = await connect(syncd)
            stream = await source.open("enc")
            await send_all(source, stream, self.clip)
            # The decoder's first frames reach the twin before the close.
            await wait_decoded(syncd, "enc", len(self.clip))
            await source.request({"type": "stream.close", "stream": stream})
            await source.ws.close()
            return source

        with Syncd("--publisher", "test,shm", "--shm-path", path) as syncd:
            source = asyncio.run(scenario(syncd))
            s = syncd.wait_for(lambda: closed(syncd, "enc"))
            self.assertEqual(s["format"], "h264")
            self.assertEqual(s["frames_accepted"], len(self.clip))
            self.assertEqual(s["frames_dropped_total"], 0)
            # The access units themselves carry no marker to read: checked in the twin.
            self.assertEqual(s["publishers"]["test"]["unchecked"], len(self.clip))
            d = s["publishers"]["decode"]
            self.assertEqual(d["twin"], "enc.decoded")
            self.assertEqual((d["offered"], d["submitted"], d["dropped_total"]),
                             (len(self.clip), len(self.clip), 0), d)
            dec = d["decoder"]
            self.assertEqual((dec["frames_in"], dec["decoded"], dec["dropped_total"]),
                             (len(self.clip), len(self.clip), 0), dec)
            self.assertEqual(dec["keyframes"], 3, dec)
            self.twin_checks(syncd, "enc", len(self.clip))
            # The shared-memory ring carried the twin's pictures.
            self.assertGreater(
                syncd.stream_stats("enc.decoded")["publishers"]["shm"].get("delivered", 0), 0)
            # The decoder started for the pixel publishers, and asked the source for an IDR.
            self.assertIn("consumer", source.keyframe_reasons())
            self.assertEqual(s["source_requests"]["keyframes"]["consumer"], 1)
            self.assertEqual(syncd.stop(), 0)

    def test_a_stream_that_starts_without_an_idr_waits_and_asks_for_one(self):
        async def scenario(syncd):
            source = await connect(syncd)
            stream = await source.open("late")
            # Joined mid-GOP: P-frames 2..30 reference a picture the decoder never saw.
            await send_all(source, stream, self.clip[1:30], first_sequence=2, pause=0.02)
            waited = list(source.keyframe_reasons())
            # The source answers with its next IDR (frame 30 of the clip) and goes on.
            await send_all(source, stream, self.clip[30:60], first_sequence=31)
            await wait_decoded(syncd, "late", 30)
            await source.request({"type": "stream.close", "stream": stream})
            await source.ws.close()
            return waited, source.keyframe_reasons()

        with Syncd("--publisher", "test") as syncd:
            waited, heard = asyncio.run(scenario(syncd))
            # Asked at the start (a consumer), and again while it waited (the decoder), at most
            # every 200 ms: 29 frames 20 ms apart give 2-4 requests, not 29.
            self.assertIn("consumer", waited)
            self.assertIn("decoder", waited)
            self.assertLessEqual(len(waited), 5, waited)
            s = syncd.wait_for(lambda: closed(syncd, "late"))
            dec = s["publishers"]["decode"]["decoder"]
            self.assertEqual(dec["dropped"]["awaiting_keyframe"], 29, dec)
            self.assertEqual(dec["decoded"], 30, dec)
            self.assertEqual(s["source_requests"]["keyframes_passed"], len(heard))
            self.twin_checks(syncd, "late", 30)
            self.assertEqual(syncd.stop(), 0)

    def test_bad_access_units_are_counted_and_another_stream_decodes_on(self):
        rng = random.Random(29)
        idr = self.clip[0]

        async def scenario(syncd):
            good, bad = await connect(syncd), await connect(syncd)
            good_id, bad_id = await good.open("good"), await bad.open("bad")
            junk = [
                rng.randbytes(5000),                # not Annex B at all
                b"\0\0\0\x01" + rng.randbytes(3000),  # a start code, then noise
                idr[:len(idr) // 3],                # an IDR cut short
                idr,                                # a whole IDR: decodes
                self.small[0],                      # an IDR of another size (320x180): scaled
                self.large[0],                      # an SPS larger than declared (1280x720): scaled
                b"\0\0\0\x01\x67" + b"\xff" * 64,   # a broken SPS
                self.clip[1],                       # a P-frame after the break: waits
            ]

            async def bad_source():
                for i, au in enumerate(junk):
                    await bad.ws.send(au_message(bad_id, i + 1, au, flags=0))
                    await asyncio.sleep(0.03)

            await asyncio.gather(send_all(good, good_id, self.clip), bad_source())
            await wait_decoded(syncd, "good", len(self.clip))
            for source, sid in ((good, good_id), (bad, bad_id)):
                await source.request({"type": "stream.close", "stream": sid})
                await source.ws.close()
            return [e for e in good.events if e["type"] == "error"], \
                [e for e in bad.events if e["type"] == "error"], bad_id

        with Syncd("--publisher", "test") as syncd:
            good_errors, bad_errors, bad_id = asyncio.run(scenario(syncd))
            # The publisher of garbage is told, once in the 0.3 s it sent it (at most one a
            # second), with the frame it refused first; the other publisher hears nothing.
            self.assertEqual(good_errors, [])
            self.assertEqual(len(bad_errors), 1, bad_errors)
            self.assertEqual(bad_errors[0]["code"], "undecodable")
            self.assertEqual((bad_errors[0]["stream"], bad_errors[0]["sequence"]), (bad_id, 1))
            self.assertIn("not H.264", bad_errors[0]["message"])
            # The good stream lost nothing to its neighbour's garbage.
            self.twin_checks(syncd, "good", len(self.clip))
            s = syncd.wait_for(lambda: closed(syncd, "bad"))
            self.assertEqual(s["frames_accepted"], 8)
            dec = s["publishers"]["decode"]["decoder"]
            self.assertEqual(dec["frames_in"], 8, dec)
            self.assertEqual(dec["frames_in"], dec["decoded"] + dec["dropped_total"], dec)
            # The IDR, and the small and the large one scaled into the declared 640x360.
            self.assertGreaterEqual(dec["decoded"], 3, dec)
            self.assertGreaterEqual(dec["scaled"], 2, dec)
            refused = dec["dropped"]
            self.assertGreaterEqual(
                refused["refused"] + refused["decode_error"] + refused["awaiting_keyframe"], 4,
                dec)
            self.assertGreaterEqual(s["source_requests"]["undecodable"], 4, s["source_requests"])
            self.assertEqual(s["source_requests"]["undecodable_told"], 1)
            twin = syncd.wait_for(lambda: closed(syncd, "bad.decoded"))
            self.assertEqual(twin["frames_accepted"], dec["decoded"])
            self.assertEqual(twin["publishers"]["test"]["verify_failed"]["marker_mismatch"], 0)
            self.assertEqual(syncd.stop(), 0)

    def test_an_http_receiver_of_the_twin_starts_the_decoder(self):
        # No pixel publisher: the decoder idles until someone wants the twin's pixels.
        async def scenario(syncd):
            source = await connect(syncd)
            stream = await source.open("lazy")
            await send_all(source, stream, self.clip[:10])
            s = syncd.stream_stats("lazy")
            idle = dict(s["publishers"]["decode"])
            ticket = await source.request({"type": "ticket.create", "stream": idle["twin_stream"]})
            self.assertEqual(ticket["type"], "ticket", ticket)
            receiver = await asyncio.to_thread(http_receiver, syncd.port, "lazy.decoded",
                                               ticket["ticket"])
            # The source is asked for an IDR; it sends its next one (frame 30) and on.
            await send_all(source, stream, self.clip[30:60], first_sequence=31)
            records = await asyncio.to_thread(read_records, receiver, 5)
            await source.request({"type": "stream.close", "stream": stream})
            await source.ws.close()
            receiver.close()
            return idle, records, source.keyframe_reasons()

        with Syncd("--publisher", "") as syncd:
            idle, records, reasons = asyncio.run(scenario(syncd))
            self.assertEqual(idle["state"], "idle", idle)
            self.assertEqual(idle["dropped"]["no_consumer"], 10, idle)
            self.assertIn("consumer", reasons)
            self.assertEqual(len(records), 5)
            for r in records:
                self.assertEqual((r["width"], r["height"], r["format"]), (W, H, 4))
                # The column marker in the luma plane's first row is the record's sequence.
                row = r["pixels"][:W]
                marker = sum(1 << b for b in range(16) if row[b * 8 + 4] > 128)
                self.assertEqual(marker, r["sequence"] & 0xFFFF)
            self.assertEqual(syncd.stop(), 0)


    def test_an_http_receiver_of_the_access_units_gets_them_untouched_and_asks_for_an_idr(self):
        async def scenario(syncd):
            source = await connect(syncd)
            stream = await source.open("units")
            await send_all(source, stream, self.clip[:5])
            ticket = await source.request({"type": "ticket.create", "stream": stream})
            receiver = await asyncio.to_thread(http_receiver, syncd.port, "units",
                                               ticket["ticket"])
            await asyncio.sleep(0.2)
            asked = list(source.keyframe_reasons())
            # The source answers with an IDR (frame 30 of the clip) and goes on.
            await send_all(source, stream, self.clip[30:35], first_sequence=31)
            records = await asyncio.to_thread(read_records, receiver, 5, "h264")
            await source.request({"type": "stream.close", "stream": stream})
            await source.ws.close()
            receiver.close()
            return asked, records

        with Syncd("--publisher", "") as syncd:
            asked, records = asyncio.run(scenario(syncd))
            # A receiver that joins decodes from an IDR: the source is asked for one at once.
            self.assertEqual(asked, ["consumer"])
            self.assertEqual([r["sequence"] for r in records], list(range(31, 36)))
            for r, au in zip(records, self.clip[30:35]):
                self.assertEqual(r["format"], H264)
                self.assertEqual(r["pixels"], au)  # the page's bytes, as they came
            self.assertEqual(syncd.stop(), 0)


def http_receiver(port, name, ticket):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"GET /streams/{name}?ticket={ticket}&credit=5 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                 .encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            raise EOFError("no response head")
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


def read_records(sock, n, expect="i420"):
    buffer = b""

    def take(k):
        nonlocal buffer
        while len(buffer) < k:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise EOFError
            buffer += chunk
        out, buffer = buffer[:k], buffer[k:]
        return out

    records = []
    while len(records) < n:
        (magic, version, hbytes, seq, capture, publish, w, h, fmt, flags, digest, nbytes,
          dropped) = RECORD.unpack(take(RECORD.size))
        assert magic == 0x534E5953 and hbytes == 64
        assert expect == "h264" or nbytes == frame_bytes(expect, w, h)
        records.append({"sequence": seq, "width": w, "height": h, "format": fmt,
                        "pixels": take(nbytes)})
    return records


if __name__ == "__main__":
    unittest.main()
