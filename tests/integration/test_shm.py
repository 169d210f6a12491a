"""The shared-memory ring of a real syncd, read by independent reader processes."""
import json
import os
import signal
import stat
import subprocess
import time
import unittest

from harness import PRODUCER, Syncd

READER = os.environ.get("SYNC_SHM_READER", "../../build/release/tools/shm_reader/sync-shm-reader")


def start_reader(path, seconds):
    return subprocess.Popen([READER, "--path", path, "--seconds", str(seconds), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def reader_summary(proc, timeout=30):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, json.loads(out.strip().splitlines()[-1]), err


class SharedMemoryRing(unittest.TestCase):
    def setUp(self):
        self.path = f"/dev/shm/sync-test-{os.getpid()}-{self._testMethodName}.frames"

    def produce(self, syncd, seconds, *extra):
        return subprocess.run([PRODUCER, "--url", syncd.url, "--quiet", "--stream", "ring",
                               "--width", "640", "--height", "360", "--fps", "60",
                               "--seconds", str(seconds), *extra],
                              capture_output=True, text=True, timeout=60)

    def test_four_readers_verify_every_frame(self):
        with Syncd("--publisher", "test,shm", "--shm-path", self.path) as syncd:
            readers = [start_reader(self.path, 6) for _ in range(4)]
            time.sleep(0.3)
            sent = json.loads(self.produce(syncd, 4).stdout.strip().splitlines()[-1])
            for r in readers:
                rc, summary, err = reader_summary(r)
                self.assertEqual(rc, 0, err)
                self.assertTrue(summary["ended"])
                self.assertEqual(summary["verified"], sent["frames_sent"])
                self.assertEqual(summary["verify_failures"], 0)
                self.assertEqual(summary["torn"], 0)
                self.assertEqual(summary["skipped"], 0)
            ring = syncd.stream_stats("ring")
            self.assertEqual(ring["publishers"]["shm"]["delivered"], sent["frames_sent"])
            self.assertEqual(ring["frames_verified"], sent["frames_sent"])
            self.assertEqual(syncd.stop(), 0)
        self.assertFalse(os.path.exists(self.path))

    def test_killed_reader_breaks_nothing(self):
        with Syncd("--publisher", "test,shm", "--shm-path", self.path) as syncd:
            producer = subprocess.Popen([PRODUCER, "--url", syncd.url, "--quiet", "--stream",
                                         "ring", "--width", "640", "--height", "360", "--fps",
                                         "60", "--seconds", "5"], stdout=subprocess.PIPE, text=True)
            victim = start_reader(self.path, 30)
            syncd.wait_for(lambda: os.path.exists(self.path))
            self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o600)
            time.sleep(1.5)
            victim.send_signal(signal.SIGKILL)  # dies wherever it is, maybe mid-frame
            victim.communicate()
            survivor = start_reader(self.path, 30)
            producer.wait(timeout=30)
            rc, summary, err = reader_summary(survivor)
            self.assertEqual(rc, 0, err)
            self.assertGreater(summary["verified"], 60)
            self.assertEqual(summary["torn"], 0)
            self.assertEqual(summary["verify_failures"], 0)
            ring = syncd.stream_stats("ring")
            self.assertEqual(ring["frames_dropped_total"], 0)
            self.assertEqual(ring["frames_verified"], ring["frames_accepted"])
            self.assertEqual(syncd.stop(), 0)

    def test_missing_ring_is_reported(self):
        proc = subprocess.run([READER, "--path", self.path, "--frames", "1", "--open-wait", "0"],
                              capture_output=True, text=True, timeout=10)
        self.assertEqual(proc.returncode, 3)
        self.assertIn("no shared-memory ring", proc.stderr)


if __name__ == "__main__":
    unittest.main()
