"""Consumers that stop reading cannot starve a producer (docs/architecture.md, "Output limits"):
HTTP stream receivers and WebSocket clients that read nothing, against a paced 1080p60 producer.
Also: capabilities list what is registered."""
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tools"))
from bench_common import stalled_http_receiver, stalled_ws_client  # noqa: E402
from harness import PRODUCER, Syncd  # noqa: E402
import websockets  # noqa: E402


def wait_for_file(path, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                return f.read().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} did not appear")


class StalledConsumers(unittest.TestCase):
    def run_producer_with_stalled_consumers(self, syncd, seconds):
        with tempfile.TemporaryDirectory() as tmp:
            ticket_path = os.path.join(tmp, "ticket")
            producer = subprocess.Popen(
                [PRODUCER, "--url", syncd.url, "--stream", "main", "--fps", "60", "--seconds",
                 str(seconds), "--slots", "4", "--ticket-file", ticket_path, "--ticket-uses", "2",
                 "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            ticket = wait_for_file(ticket_path)
            # Staggered, so the two receivers hold different frames (a frame pinned by both
            # takes one slot): together they would pin all 4 slots of the producer's pool.
            stalled = [stalled_http_receiver(syncd.port, "main", ticket)]
            time.sleep(0.3)
            stalled.append(stalled_http_receiver(syncd.port, "main", ticket))
            stalled += [stalled_ws_client(syncd.port) for _ in range(2)]
            # Mid-run: the receivers hold what they may, the rest is dropped for them.
            time.sleep(seconds / 2)
            mid = syncd.stats()
            self.assertEqual(syncd.get("/healthz")[0], 200)
            out, err = producer.communicate(timeout=seconds + 30)
            self.assertEqual(producer.returncode, 0, out + err)
            return mid, syncd.stats(), stalled

    def test_stalled_receivers_and_clients_do_not_starve_ingest(self):
        # No write timeout: the output limits alone must protect the producer.
        with Syncd("--publisher", "test", "--write-timeout-ms", "0") as syncd:
            mid, end, stalled = self.run_producer_with_stalled_consumers(syncd, 6)
            s = next(x for x in end["streams"] if x["name"] == "main")
            self.assertGreaterEqual(s["frames_offered"], 300)
            # Every frame the producer offered was accepted and verified: none found the pool
            # full, although two receivers stopped reading with 16 frames of credit each.
            self.assertEqual(s["frames_dropped_total"], 0, s["frames_dropped"])
            self.assertEqual(s["frames_accepted"], s["frames_offered"])
            self.assertEqual(s["frames_verified"], s["frames_accepted"])
            receivers = next(x for x in mid["streams"] if x["name"] == "main")
            receivers = receivers["publishers"]["http"]["receivers"]
            self.assertEqual(len(receivers), 2)
            for r in receivers:
                self.assertLessEqual(r["pinned_slots"], 2)
                self.assertGreater(r["dropped_total"], 0)  # they lose frames, not the producer
            # The WebSocket clients' requests wait while their replies go unread.
            server = end["server"]
            self.assertGreaterEqual(server["reads_paused_for_output"], 2)
            self.assertEqual(server["slow_consumer_closes"], 0)
            self.assertLessEqual(server["output_queued_bytes"], server["output_budget_bytes"])
            for sock in stalled:
                sock.close()

    def test_write_timeout_closes_stalled_receivers(self):
        with Syncd("--publisher", "test", "--write-timeout-ms", "500") as syncd:
            _, end, stalled = self.run_producer_with_stalled_consumers(syncd, 4)
            self.assertGreaterEqual(end["server"]["write_timeouts"], 2)
            s = next(x for x in end["streams"] if x["name"] == "main")
            self.assertEqual(s["frames_dropped_total"], 0, s["frames_dropped"])
            for sock in stalled:
                sock.close()


class Capabilities(unittest.TestCase):
    def welcome(self, syncd):
        async def hello():
            async with websockets.connect(syncd.url) as ws:
                await ws.send(json.dumps({"type": "hello", "protocol": 1}))
                return json.loads(await ws.recv())
        return asyncio.run(hello())

    def test_capabilities_list_the_registered_services(self):
        with Syncd() as syncd:
            caps = self.welcome(syncd)["capabilities"]
            for c in ("video.ingest", "video.receive", "tickets", "stats", "ping"):
                self.assertIn(c, caps)
            self.assertNotIn("audio", caps)
            self.assertNotIn("pose", caps)
        with Syncd("--audio-source", "synthetic:2") as syncd:
            self.assertIn("audio", self.welcome(syncd)["capabilities"])


if __name__ == "__main__":
    unittest.main()
