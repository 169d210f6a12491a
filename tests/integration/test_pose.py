"""The pose topic of a real syncd fed by a head-tracker replay (no HID hardware here: the replay
goes through the same reader, decoder and filter as a hidraw device)."""
import asyncio
import json
import math
import os
import time
import unittest

import websockets

from harness import Syncd

REPLAY = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "../data/headtrack/synthetic.replay")


async def hello(ws):
    await ws.send(json.dumps({"type": "hello", "protocol": 1}))
    return json.loads(await ws.recv())


async def subscribe_and_read(ws, count):
    """Subscribes to pose; returns (the subscribe reply, the first count poses, other messages)."""
    await ws.send(json.dumps({"type": "subscribe", "topic": "pose"}))
    reply = json.loads(await ws.recv())
    poses, others = [], []
    while len(poses) < count:
        msg = json.loads(await asyncio.wait_for(ws.recv(), 10))
        (poses if msg["type"] == "pose" else others).append(msg)
    return reply, poses, others


class PoseTopic(unittest.TestCase):
    def test_subscriber_receives_poses(self):
        async def scenario(url):
            async with websockets.connect(url) as ws:
                await hello(ws)
                reply, poses, statuses = await subscribe_and_read(ws, 40)
                self.assertEqual(reply["type"], "subscribed")
                self.assertTrue(any(s["type"] == "pose.status" for s in statuses))
                seqs = [p["seq"] for p in poses]
                self.assertEqual(seqs, sorted(seqs))
                for p in poses:
                    self.assertEqual(len(p["q"]), 4)
                    self.assertAlmostEqual(math.fsum(c * c for c in p["q"]), 1.0, places=6)
                    self.assertTrue(all(math.isfinite(v) for v in p["ypr"]))
                    self.assertIn("discontinuityCount", p)
                # The replay turns the head to +40 degrees of yaw within its first second.
                self.assertGreater(max(abs(p["ypr"][0]) for p in poses), 5.0)
                await ws.send(json.dumps({"type": "unsubscribe", "topic": "pose"}))

        with Syncd("--headtracker", "replay:" + REPLAY) as syncd:
            asyncio.run(scenario(syncd.url))
            ht = syncd.stats()["headtracker"]
            self.assertGreater(ht["samples"], 0)
            # The replay holds one report with a 0x8000 (out-of-range) value: refused, counted,
            # and the daemon carries on (once per pass of the looping replay).
            self.assertGreaterEqual(ht["out_of_range"], 1)
            self.assertEqual(syncd.stop(), 0)

    def test_replay_loops_like_a_device_that_keeps_reporting(self):
        # The file spans 3.96 s; a subscriber arriving after that still gets poses, with seq
        # still rising (a page that opens late sees a live topic, not a finished one).
        async def scenario(url):
            async with websockets.connect(url) as ws:
                await hello(ws)
                reply, poses, _ = await subscribe_and_read(ws, 20)
                self.assertEqual(reply["type"], "subscribed")
                seqs = [p["seq"] for p in poses]
                self.assertEqual(seqs, sorted(seqs))

        with Syncd("--headtracker", "replay:" + REPLAY) as syncd:
            lines = sum(1 for line in open(REPLAY) if line.strip() and not line.startswith("#"))
            deadline = time.monotonic() + 15
            while syncd.stats()["headtracker"]["reports"] <= lines:
                self.assertLess(time.monotonic(), deadline, "the replay did not start again")
                time.sleep(0.2)
            asyncio.run(scenario(syncd.url))
            ht = syncd.stats()["headtracker"]
            self.assertTrue(ht["connected"])
            self.assertEqual(ht["disconnects"], 0)
            self.assertEqual(syncd.stop(), 0)

    def test_without_tracker_topic_is_unavailable_and_daemon_runs(self):
        async def scenario(url):
            async with websockets.connect(url) as ws:
                await hello(ws)
                await ws.send(json.dumps({"type": "subscribe", "topic": "pose"}))
                self.assertEqual(json.loads(await ws.recv())["code"], "topic_unavailable")
                await ws.send(json.dumps({"type": "subscribe", "topic": "weather"}))
                self.assertEqual(json.loads(await ws.recv())["code"], "unknown_topic")

        with Syncd() as syncd:
            asyncio.run(scenario(syncd.url))
            self.assertEqual(syncd.stop(), 0)

    def test_no_device_present_keeps_serving(self):
        async def scenario(url):
            async with websockets.connect(url) as ws:
                await hello(ws)
                await ws.send(json.dumps({"type": "subscribe", "topic": "pose"}))
                self.assertEqual(json.loads(await ws.recv())["type"], "subscribed")
                status = json.loads(await asyncio.wait_for(ws.recv(), 5))
                self.assertEqual(status["type"], "pose.status")
                self.assertFalse(status["connected"])

        with Syncd("--headtracker", "auto") as syncd:
            asyncio.run(scenario(syncd.url))
            self.assertEqual(syncd.get("/healthz"), (200, "ok"))
            self.assertEqual(syncd.stop(), 0)

    def test_bad_replay_file_fails_at_start(self):
        syncd = Syncd("--headtracker", "replay:/nonexistent.replay")
        with self.assertRaises(RuntimeError):
            syncd.__enter__()
        syncd.__exit__(None, None, None)


if __name__ == "__main__":
    unittest.main()
