"""Red-team cases for the protocol bugs of issue 14 (items 11, 13, 15, 16, 17), each against a
real syncd: the input a client written from docs/protocol.md alone sends, the specific reply the
docs promise (error code, fields, NAUD header values), the counter that moved, and /healthz
answering 200 afterwards."""
import json
import os
import struct
import time
import unittest

from harness import RawWebSocket, Syncd, client_frame, frame_message, marker_pixels

NAUD = struct.Struct("<4sHHHHIBBHIQQQQII")  # docs/protocol.md, "Audio: NAUD packets"
NAUD_MISSING_BEFORE = 1  # flags bit 0: frames are missing right before first_frame
REPLAY = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "../data/headtrack/synthetic.replay")
W, H = 16, 16
FRAME_BYTES = W * H * 4


def hello(ws):
    ws.send_text(json.dumps({"type": "hello", "protocol": 1}))
    welcome = ws.recv_json()
    assert welcome["type"] == "welcome", welcome
    return welcome


class Naud:
    """A decoded NAUD header (the fields the cases look at) and its samples."""

    def __init__(self, packet):
        f = NAUD.unpack_from(packet)
        assert f[0] == b"NAUD", f
        self.channels, self.rate, self.flags, self.frames = f[3], f[5], f[8], f[9]
        self.first_frame, self.dropped, self.gap, self.timestamp_ns, self.sequence = f[10:15]
        self.samples = packet[NAUD.size:]

    @property
    def end(self):
        return self.first_frame + self.frames

    def __repr__(self):
        return repr({k: v for k, v in vars(self).items() if k != "samples"})


def audio_read(ws, **fields):
    ws.send_text(json.dumps({"type": "audio.read", **fields}))
    while True:
        op, payload = ws.recv_frame()
        if op == 2:
            return Naud(payload)
        if op == 1:
            raise AssertionError(f"audio.read got {payload!r}")


class RedTeamProtocol(unittest.TestCase):
    def assert_healthy(self, syncd):
        self.assertEqual(syncd.get("/healthz"), (200, "ok"))

    # Item 11: a fragmented frame that ends short is refused like a single-message one: the
    # error names the stream and the frame's sequence, in its fields and in its text.
    def test_short_fragmented_frame_error_names_stream_and_sequence(self):
        with Syncd() as syncd:
            ws = RawWebSocket(syncd.port)
            hello(ws)
            ws.send_text(json.dumps({"type": "stream.open", "name": "short", "width": W,
                                     "height": H}))
            sid = ws.recv_json()["stream"]
            msg = frame_message(sid, 7, marker_pixels(FRAME_BYTES, 7))
            errors_before = syncd.stats()["server"]["control_errors"]
            ws.send(client_frame(2, msg[:100], fin=False))
            ws.send(client_frame(0, msg[100:500], fin=True))
            fragmented = ws.recv_json()
            # The same frame, short in one message, for the wording to compare with.
            ws.send(client_frame(2, msg[:500]))
            single = ws.recv_json()
            for err in (fragmented, single):
                self.assertEqual(err["code"], "frame_size_mismatch", err)
                self.assertEqual((err["stream"], err["sequence"]), (sid, 7), err)
                self.assertEqual(err["message"],
                                 f"stream {sid} frame 7: message is 500 bytes, stream needs "
                                 f"{56 + FRAME_BYTES}", err)
            s = syncd.stream_stats("short")
            self.assertEqual(s["frames_dropped"]["size_mismatch"], 2)
            self.assertEqual(syncd.stats()["server"]["control_errors"], errors_before + 2)
            ws.close()
            self.assert_healthy(syncd)

    # docs/protocol.md, "Which error when several apply": one error per message, the first
    # check that fails, in the documented order; the connection stays usable.
    def test_error_precedence_before_hello(self):
        with Syncd() as syncd:
            ws = RawWebSocket(syncd.port)
            errors_before = syncd.stats()["server"]["control_errors"]
            cases = [
                ("{not json", "bad_json"),
                ('["stream.open"]', "bad_message"),
                ('{"type":"no.such.type"}', "unknown_type"),
                # Fields are checked before hello: a bad stream.open is bad_message.
                ('{"type":"stream.open","name":"a","width":0,"height":2}', "bad_message"),
                ('{"type":"stream.open","name":"a","width":2,"height":2,"slots":17}',
                 "hello_required"),
                ('{"type":"stats"}', "hello_required"),
            ]
            for text, code in cases:
                ws.send_text(text)
                reply = ws.recv_json()
                self.assertEqual((reply["type"], reply["code"]), ("error", code), text)
            self.assertEqual(syncd.stats()["server"]["control_errors"],
                             errors_before + len(cases))
            hello(ws)  # still usable
            ws.send_text(json.dumps({"type": "audio.read"}))
            self.assertEqual(ws.recv_json()["code"], "audio_unavailable")
            ws.close()
            self.assert_healthy(syncd)

    # Item 15: one slot range (the registry's, 1-16) and one code for every count outside it.
    def test_stream_open_slots_out_of_range_is_bad_slots(self):
        with Syncd() as syncd:
            ws = RawWebSocket(syncd.port)
            hello(ws)
            errors_before = syncd.stats()["server"]["control_errors"]
            bad = [0, 17, 64, 65, 2**32, 2**32 + 4, 2**64 - 1]
            for slots in bad:
                ws.send_text(json.dumps({"type": "stream.open", "name": f"s{slots}",
                                         "width": W, "height": H, "slots": slots}))
                err = ws.recv_json()
                self.assertEqual((err["type"], err["code"], err["name"]),
                                 ("error", "bad_slots", f"s{slots}"), (slots, err))
                self.assertIn("[1, 16]", err["message"], (slots, err))
            self.assertEqual(syncd.stats()["server"]["control_errors"], errors_before + len(bad))
            for slots in (1, 16):
                ws.send_text(json.dumps({"type": "stream.open", "name": f"ok{slots}",
                                         "width": W, "height": H, "slots": slots}))
                opened = ws.recv_json()
                self.assertEqual((opened["type"], opened["slots"]), ("stream.opened", slots))
            self.assertEqual(syncd.stats()["server"]["control_errors"], errors_before + len(bad))
            ws.close()
            self.assert_healthy(syncd)

    # Item 13: a reader starts after the newest captured frame, not at 0 and not where the previous
    # reader stopped; its first packet carries the capture time of that position.
    def test_audio_readers_start_at_the_current_position(self):
        rate, channels = 48000, 2
        with Syncd("--audio-source", f"synthetic:{channels}@{rate}") as syncd:
            time.sleep(1.0)
            ends = []
            for reader in range(2):
                ws = RawWebSocket(syncd.port)
                hello(ws)
                now_ns = time.monotonic_ns()
                first = audio_read(ws)
                self.assertEqual(first.sequence, 0)
                # Where the source stands now: about a second in, later for the second reader.
                uptime_frames = (now_ns - syncd_started_ns(syncd)) * rate // 1_000_000_000
                self.assertLess(abs(first.first_frame - uptime_frames), rate // 5,
                                (reader, first.first_frame, uptime_frames))
                self.assertLess(abs(first.timestamp_ns - now_ns), 500_000_000,
                                (reader, first.timestamp_ns, now_ns))
                self.assertEqual((first.flags, first.dropped, first.gap), (0, 0, 0))
                if ends:
                    # The previous reader's end is not this reader's start.
                    self.assertGreater(first.first_frame, ends[-1] + rate * 4 // 10)
                # The next packet continues exactly where the first left off, bit-exact.
                nxt = audio_read(ws, min_frames=960, max_frames=960, timeout_ms=2000)
                self.assertEqual(nxt.frames, 960)
                self.assertEqual(nxt.first_frame, first.end)
                self.assertEqual((nxt.flags, nxt.dropped, nxt.gap, nxt.sequence), (0, 0, 0, 1))
                self.assertLess(abs(nxt.timestamp_ns - first.timestamp_ns
                                    - first.frames * 1_000_000_000 // rate), 2_000_000)
                samples = struct.unpack_from(f"<{channels}f", nxt.samples)
                self.assertEqual(samples, tuple(
                    float((nxt.first_frame * channels + c) % (1 << 24)) for c in range(channels)))
                ends.append(nxt.end)
                ws.close()
                syncd.wait_for(lambda: not syncd.stats()["audio"]["reader_attached"])
                time.sleep(0.5)
            audio = syncd.stats()["audio"]
            self.assertEqual(audio["reader_attaches"], 2)
            # What nobody read was counted as discarded, at least the second before the first
            # reader and the half second between the two.
            self.assertGreater(audio["frames_discarded_no_reader"], rate * 14 // 10)
            self.assertEqual(audio["frames_dropped"], 0)
            self.assert_healthy(syncd)

    # Item 13, the loss side: frames a reader misses while it does not read are counted as
    # dropped, and the packet after the hole is flagged, so the continuity rule holds.
    def test_audio_frames_missed_by_a_reader_are_dropped_and_flagged(self):
        rate = 48000
        with Syncd("--audio-source", f"synthetic:2@{rate}", "--audio-ring-ms", "100") as syncd:
            ws = RawWebSocket(syncd.port)
            hello(ws)
            first = audio_read(ws)
            time.sleep(0.5)  # 5 ring lengths: the capture ring overruns
            packets = [first]
            # Read on until the packets account for every frame syncd counts as dropped (the
            # loss counters travel with the first block after each hole).
            while len(packets) < 400 and not (
                    packets[-1].dropped > 0 and
                    packets[-1].dropped == syncd.stats()["audio"]["frames_dropped"]):
                packets.append(audio_read(ws, min_frames=1, timeout_ms=1000))
            for a, b in zip(packets, packets[1:]):
                self.assertEqual(b.first_frame, a.end + (b.dropped - a.dropped) + (b.gap - a.gap),
                                 (a, b))
                self.assertEqual(bool(b.flags & NAUD_MISSING_BEFORE), b.first_frame != a.end)
            dropped = packets[-1].dropped
            # 0.5 s captured into a 0.1 s ring: about 0.4 s lost.
            self.assertGreater(dropped, rate // 4, packets[:3])
            self.assertTrue(packets[-1].flags & NAUD_MISSING_BEFORE)
            self.assertEqual(syncd.stats()["audio"]["frames_dropped"], dropped)
            ws.close()
            self.assert_healthy(syncd)

    # Item 16: a replayed pose is stamped with CLOCK_MONOTONIC when its report is read, as a
    # device's is (the same clock as time.monotonic_ns() here), not with the file's own time.
    def test_replay_pose_t_ns_is_the_monotonic_clock(self):
        with Syncd("--headtracker", "replay:" + REPLAY) as syncd:
            ws = RawWebSocket(syncd.port)
            hello(ws)
            ws.send_text(json.dumps({"type": "subscribe", "topic": "pose"}))
            self.assertEqual(ws.recv_json()["type"], "subscribed")
            poses = []
            while len(poses) < 5:
                msg = ws.recv_json()
                if msg["type"] == "pose":
                    poses.append((msg, time.monotonic_ns()))
            for pose, received_ns in poses:
                self.assertLessEqual(pose["t_ns"], received_ns)
                self.assertLess(received_ns - pose["t_ns"], 1_000_000_000, pose)
            stamps = [p["t_ns"] for p, _ in poses]
            self.assertEqual(stamps, sorted(stamps))
            self.assertGreater(syncd.stats()["headtracker"]["samples"], 0)
            ws.close()
            self.assert_healthy(syncd)

    # Item 17: the welcome's capabilities list audio exactly when an audio source runs.
    def test_welcome_lists_audio_with_an_audio_source(self):
        for args, has_audio in ((("--audio-source", "synthetic"), True), ((), False)):
            with Syncd(*args) as syncd:
                ws = RawWebSocket(syncd.port)
                caps = hello(ws)["capabilities"]
                self.assertEqual("audio" in caps, has_audio, (args, caps))
                for cap in ("video.ingest", "tickets", "stats", "ping", "video.receive"):
                    self.assertIn(cap, caps)
                if not has_audio:
                    errors_before = syncd.stats()["server"]["control_errors"]
                    ws.send_text(json.dumps({"type": "audio.read"}))
                    self.assertEqual(ws.recv_json()["code"], "audio_unavailable")
                    self.assertEqual(syncd.stats()["server"]["control_errors"], errors_before + 1)
                ws.close()
                self.assert_healthy(syncd)


def syncd_started_ns(syncd):
    """CLOCK_MONOTONIC when syncd started, from its uptime (same clock as time.monotonic_ns)."""
    now = time.monotonic_ns()
    return now - int(syncd.stats()["server"]["uptime_s"] * 1e9)


if __name__ == "__main__":
    unittest.main()
