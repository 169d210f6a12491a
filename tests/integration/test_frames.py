"""Video frames through a real syncd: admission, verification, refusal with coded errors,
accounting, and clients that vanish mid-frame."""
import asyncio
import json
import socket
import struct
import time
import unittest

import websockets

from harness import (RawWebSocket, Syncd, client_frame, frame_bytes, frame_message,
                     marker_pixels)

W, H = 64, 32
FRAME_BYTES = frame_bytes("rgba8", W, H)


async def open_stream(ws, name, width=W, height=H, **extra):
    await ws.send(json.dumps({"type": "hello", "protocol": 1}))
    assert json.loads(await ws.recv())["type"] == "welcome"
    await ws.send(json.dumps({"type": "stream.open", "name": name, "width": width,
                              "height": height, "format": "rgba8", "fps": 60, **extra}))
    reply = json.loads(await ws.recv())
    assert reply["type"] == "stream.opened", reply
    return reply["stream"]


def accounting_holds(s):
    return s["frames_offered"] == s["frames_accepted"] + s["frames_dropped_total"]


class FrameIngest(unittest.TestCase):
    def test_frames_verified_every_byte(self):
        async def scenario(url):
            async with websockets.connect(url, max_size=None) as ws:
                sid = await open_stream(ws, "verify")
                for seq in range(50):
                    await ws.send(frame_message(sid, seq, marker_pixels(FRAME_BYTES, seq, seq)))
                # Frames without a content hash are checked by their sequence marker.
                for seq in range(50, 60):
                    await ws.send(frame_message(sid, seq, marker_pixels(FRAME_BYTES, seq),
                                                with_hash=False))
                await ws.send(json.dumps({"type": "ping", "id": 1}))
                self.assertEqual(json.loads(await ws.recv())["type"], "pong")

        with Syncd() as syncd:
            asyncio.run(scenario(syncd.url))
            s = syncd.wait_for(lambda: (lambda s: s if s and s["frames_accepted"] == 60 else None)(
                syncd.stream_stats("verify")))
            self.assertEqual(s["frames_verified"], 50)
            self.assertEqual(s["publishers"]["test"]["marker_verified"], 10)
            self.assertEqual(s["frames_verify_failed"], 0)
            self.assertEqual(s["publishers"]["test"]["sequence_gaps"], 0)
            self.assertEqual(s["frames_unique"], 60)
            self.assertTrue(accounting_holds(s))
            self.assertEqual(syncd.stop(), 0)

    def test_corrupted_frame_fails_verification(self):
        async def scenario(url):
            async with websockets.connect(url, max_size=None) as ws:
                sid = await open_stream(ws, "corrupt")
                msg = bytearray(frame_message(sid, 0, marker_pixels(FRAME_BYTES, 0, 9)))
                msg[-1] ^= 0x40  # one bit in the last pixel byte
                await ws.send(bytes(msg))
                await ws.send(frame_message(sid, 2, marker_pixels(FRAME_BYTES, 2)))

        with Syncd() as syncd:
            asyncio.run(scenario(syncd.url))
            s = syncd.wait_for(lambda: (lambda s: s if s and s["frames_accepted"] == 2 else None)(
                syncd.stream_stats("corrupt")))
            self.assertEqual(s["frames_verify_failed"], 1)
            self.assertEqual(s["frames_verified"], 1)
            self.assertEqual(s["publishers"]["test"]["sequence_gaps"], 1)
            _, metrics = syncd.get("/metrics")
            self.assertIn('syncd_frames_verify_failed_total{stream="corrupt",reason="hash_mismatch"} 1',
                          metrics)

    def test_mismatched_frames_refused_connection_survives(self):
        async def scenario(url):
            async with websockets.connect(url, max_size=None) as ws:
                sid = await open_stream(ws, "strict")
                await ws.send(frame_message(sid, 0, marker_pixels(FRAME_BYTES - 4, 0)))
                err = json.loads(await ws.recv())
                self.assertEqual(err["code"], "frame_size_mismatch")
                self.assertEqual(err["sequence"], 0)
                await ws.send(frame_message(sid, 1, marker_pixels(FRAME_BYTES, 1), width=W + 1))
                self.assertEqual(json.loads(await ws.recv())["code"], "geometry_mismatch")
                await ws.send(frame_message(sid + 100, 2, marker_pixels(FRAME_BYTES, 2)))
                self.assertEqual(json.loads(await ws.recv())["code"], "unknown_stream")
                await ws.send(frame_message(sid, 3, marker_pixels(FRAME_BYTES, 3), magic=0x12345678))
                self.assertEqual(json.loads(await ws.recv())["code"], "bad_frame_header")
                await ws.send(b"\x01\x02\x03")
                self.assertEqual(json.loads(await ws.recv())["code"], "bad_frame_header")
                # Still alive: a good frame is accepted.
                await ws.send(frame_message(sid, 4, marker_pixels(FRAME_BYTES, 4)))
                await ws.send(json.dumps({"type": "ping", "id": 0}))
                self.assertEqual(json.loads(await ws.recv())["type"], "pong")

        with Syncd() as syncd:
            asyncio.run(scenario(syncd.url))
            s = syncd.wait_for(lambda: (lambda s: s if s and s["frames_accepted"] == 1 else None)(
                syncd.stream_stats("strict")))
            self.assertEqual(s["frames_dropped"]["size_mismatch"], 1)
            self.assertEqual(s["frames_dropped"]["geometry_mismatch"], 1)
            self.assertEqual(s["frames_offered"], 3)
            self.assertTrue(accounting_holds(s))
            server = syncd.stats()["server"]
            self.assertEqual(server["frames_rejected"]["unknown_stream"], 1)
            self.assertEqual(server["frames_rejected"]["bad_header"], 2)

    def test_stream_names_are_owned(self):
        async def scenario(url):
            async with websockets.connect(url) as a, websockets.connect(url) as b:
                sid = await open_stream(a, "owned")
                await b.send(json.dumps({"type": "hello", "protocol": 1}))
                await b.recv()
                await b.send(json.dumps({"type": "stream.open", "name": "owned", "width": W,
                                         "height": H}))
                self.assertEqual(json.loads(await b.recv())["code"], "stream_name_taken")
                await b.send(frame_message(sid, 0, marker_pixels(FRAME_BYTES, 0)))
                self.assertEqual(json.loads(await b.recv())["code"], "not_stream_owner")
                await b.send(json.dumps({"type": "stream.close", "stream": sid}))
                self.assertEqual(json.loads(await b.recv())["code"], "not_stream_owner")
                await a.send(json.dumps({"type": "stream.close", "stream": sid}))
                self.assertEqual(json.loads(await a.recv())["type"], "stream.closed")

        with Syncd() as syncd:
            asyncio.run(scenario(syncd.url))

    def test_disconnect_mid_frame_frees_slot_others_continue(self):
        with Syncd() as syncd:
            other = RawWebSocket(syncd.port)
            other.send_text(json.dumps({"type": "hello", "protocol": 1}))
            other.recv_json()
            other.send_text(json.dumps({"type": "stream.open", "name": "steady", "width": W,
                                        "height": H, "slots": 1}))
            steady = other.recv_json()["stream"]

            quitter = RawWebSocket(syncd.port)
            quitter.send_text(json.dumps({"type": "hello", "protocol": 1}))
            quitter.recv_json()
            quitter.send_text(json.dumps({"type": "stream.open", "name": "quitter", "width": W,
                                          "height": H, "slots": 1}))
            qid = quitter.recv_json()["stream"]
            whole = client_frame(2, frame_message(qid, 0, marker_pixels(FRAME_BYTES, 0)))
            quitter.send(whole[: len(whole) // 2])
            time.sleep(0.2)
            quitter.close()

            for seq in range(5):
                other.send(client_frame(2, frame_message(steady, seq, marker_pixels(FRAME_BYTES, seq))))
            syncd.wait_for(lambda: syncd.stream_stats("steady")["frames_verified"] == 5)
            q = syncd.wait_for(lambda: (lambda s: s if s and not s["open"] else None)(
                syncd.stream_stats("quitter")))
            self.assertEqual(q["frames_dropped"]["disconnected"], 1)
            self.assertTrue(accounting_holds(q))
            self.assertEqual(q["slots_in_use"], 0)
            other.close()
            self.assertEqual(syncd.stop(), 0)

    def test_fragmented_binary_frame(self):
        with Syncd() as syncd:
            ws = RawWebSocket(syncd.port)
            ws.send_text(json.dumps({"type": "hello", "protocol": 1}))
            ws.recv_json()
            ws.send_text(json.dumps({"type": "stream.open", "name": "frag", "width": W,
                                     "height": H}))
            sid = ws.recv_json()["stream"]
            msg = frame_message(sid, 7, marker_pixels(FRAME_BYTES, 7, 3))
            parts = [msg[:20], msg[20:3000], msg[3000:]]
            ws.send(client_frame(2, parts[0], fin=False))
            ws.send(client_frame(9, b"between"))
            ws.send(client_frame(0, parts[1], fin=False))
            ws.send(client_frame(0, parts[2], fin=True))
            self.assertEqual(ws.recv_frame(), (10, b"between"))
            syncd.wait_for(lambda: syncd.stream_stats("frag")["frames_verified"] == 1)
            ws.close()

    def test_oversized_fragmented_frame_refused_next_frame_verifies(self):
        # The first message's fragments carry more pixels than the stream's frame: syncd refuses
        # it part-way, after hashing some of it. The next frame must verify on its own bytes,
        # so the ingest's hash starts over with every frame.
        with Syncd() as syncd:
            ws = RawWebSocket(syncd.port)
            ws.send_text(json.dumps({"type": "hello", "protocol": 1}))
            ws.recv_json()
            ws.send_text(json.dumps({"type": "stream.open", "name": "big", "width": W,
                                     "height": H}))
            sid = ws.recv_json()["stream"]
            msg = frame_message(sid, 0, marker_pixels(FRAME_BYTES, 0))
            ws.send(client_frame(2, msg[:4000], fin=False))
            ws.send(client_frame(0, msg[4000:], fin=False))
            ws.send(client_frame(0, b"\x55" * 4096, fin=True))
            err = ws.recv_json()
            self.assertEqual(err["code"], "frame_size_mismatch")
            ws.send(client_frame(2, frame_message(sid, 1, marker_pixels(FRAME_BYTES, 1))))
            s = syncd.wait_for(lambda: (lambda s: s if s and s["frames_accepted"] == 1 else None)(
                syncd.stream_stats("big")))
            self.assertEqual(s["frames_verified"], 1)
            self.assertEqual(s["frames_verify_failed"], 0)
            self.assertEqual(s["frames_dropped"]["size_mismatch"], 1)
            self.assertTrue(accounting_holds(s))
            ws.close()


if __name__ == "__main__":
    unittest.main()
