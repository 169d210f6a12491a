"""Red-team cases for the shared-memory ring (docs/security.md, "Shared memory"): a file planted at
the ring's path, a forged ring for readers, and a writer killed or restarted under its readers.
Each case sends the hostile input, expects the documented refusal and counter, and checks that
syncd still answers /healthz."""
import json
import os
import re
import signal
import struct
import subprocess
import time
import unittest

import test_shm
from harness import PRODUCER, Syncd

READER = test_shm.READER
NOBODY = 65534  # the uid another local user's file gets here (root can chown to it)


def forged_ring(width=64, height=36, slots=2, slot_stride=None, write_counter=1):
    """A well-formed rgba8 ring with one published frame, byte for byte as include/sync/shm_ring.h
    lays it out (docs/protocol.md, "Shared-memory ring"): what a forger would plant. With a
    forged slot_stride the pixels are cut at 64 KiB (the header claims they fit)."""
    frame = width * height * 4
    stride = frame if slot_stride is None else slot_stride
    slots_offset = 256
    pixels_offset = 4096
    region = (pixels_offset + stride * slots) & (2**64 - 1)
    header = struct.pack("<IHHIIIIQQQQQIIIIQQ64s", 0x524E5953, 1, 256, width, height, 1, slots,
                         stride, frame, slots_offset, pixels_offset, region, 1, 1, 1, 0,
                         write_counter, 0, b"forged")
    header += struct.pack("<II", 1, 0) + struct.pack("<QII", 0, width * 4, height)
    header += bytes(32) + struct.pack("<QQ24s", 0x0BAD, 0, b"")
    assert len(header) == 256
    slot0 = struct.pack("<IIQQQQQ16s", 2, 0, 1, 0, 0, 0, 1, b"")
    body = header + slot0 + bytes(pixels_offset - 256 - 64)
    return body + bytes([0x5A]) * (stride * slots if slot_stride is None else 64 * 1024)


def metric(syncd, name):
    """The value of an unlabelled sample in /metrics."""
    status, text = syncd.get("/metrics")
    assert status == 200, status
    found = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    assert found, f"{name} not in /metrics"
    return float(found.group(1))


def run_reader(path, *args, timeout=30):
    """sync-shm-reader to the end: (exit code, JSON summary or None, stderr)."""
    proc = subprocess.run([READER, "--path", path, "--quiet", *args], capture_output=True,
                          text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    return proc.returncode, json.loads(lines[-1]) if lines else None, proc.stderr


def start_reader(path, *args):
    return subprocess.Popen([READER, "--path", path, "--quiet", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def start_producer(syncd, seconds, stream="ring"):
    return subprocess.Popen([PRODUCER, "--url", syncd.url, "--quiet", "--stream", stream,
                             "--width", "640", "--height", "360", "--fps", "60", "--seconds",
                             str(seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def produce(syncd, seconds):
    proc = start_producer(syncd, seconds)
    out, _ = proc.communicate(timeout=60)
    return json.loads(out.strip().splitlines()[-1])


class PlantedRingFile(unittest.TestCase):
    def setUp(self):
        self.path = f"/dev/shm/sync-redteam-{os.getpid()}-{self._testMethodName}.frames"
        self.addCleanup(self.remove, self.path)

    @staticmethod
    def remove(path):
        if os.path.lexists(path):
            os.unlink(path)

    def assert_ring_refused_and_stream_served(self, syncd):
        """The ring was refused with shm_foreign_file and counted; the stream ran without it and
        lost nothing; syncd still answers."""
        sent = produce(syncd, 1)
        ring = syncd.stream_stats("ring")
        self.assertEqual(ring["publishers"]["shm"]["error"]["code"], "shm_foreign_file")
        self.assertIn(self.path, ring["publishers"]["shm"]["error"]["message"])
        self.assertFalse(ring["publishers"]["shm"]["live"])
        self.assertEqual(ring["frames_verified"], sent["frames_sent"])
        self.assertEqual(ring["frames_dropped_total"], 0)
        self.assertEqual(metric(syncd, "syncd_shm_foreign_file_refusals_total"), 1)
        self.assertEqual(metric(syncd, "syncd_shm_region_failures_total"), 1)
        self.assertEqual(syncd.get("/healthz")[0], 200)

    def test_file_of_another_user_is_neither_replaced_nor_read(self):
        forged = forged_ring()
        with open(self.path, "wb") as f:
            f.write(forged)
        os.chmod(self.path, 0o666)
        if os.geteuid() == 0:
            os.chown(self.path, NOBODY, NOBODY)
            owner = NOBODY
        else:  # cannot give it away: a file of ours that others may write is refused as well
            owner = os.geteuid()
        before = os.stat(self.path)
        # Without the check, a reader took the forged frame as syncd's.
        rc, _, err = run_reader(self.path, "--frames", "1", "--open-wait", "0")
        self.assertEqual(rc, 3)
        if owner == NOBODY:
            self.assertIn("not a regular file owned by the writer's user", err)
            rc, _, err = run_reader(self.path, "--frames", "1", "--open-wait", "0",
                                    "--writer-uid", str(NOBODY))
            self.assertEqual(rc, 3)
        self.assertIn("writable by group or others", err)
        if owner != NOBODY:
            return  # syncd would replace a file of its own user: that case is not a plant
        with Syncd("--publisher", "test,shm", "--shm-path", self.path) as syncd:
            self.assert_ring_refused_and_stream_served(syncd)
            after = os.stat(self.path)
            self.assertEqual((after.st_ino, after.st_uid, after.st_size),
                             (before.st_ino, before.st_uid, before.st_size))
            with open(self.path, "rb") as f:
                self.assertEqual(f.read(), forged)
            self.assertEqual(syncd.stop(), 0)
        self.assertTrue(os.path.exists(self.path))  # not removed at exit either

    def test_symlink_at_the_path_is_not_followed(self):
        target = self.path + ".target"
        self.addCleanup(self.remove, target)
        with open(target, "wb"):
            pass
        os.symlink(target, self.path)
        with Syncd("--publisher", "test,shm", "--shm-path", self.path) as syncd:
            self.assert_ring_refused_and_stream_served(syncd)
            self.assertTrue(os.path.islink(self.path))
            self.assertEqual(os.stat(target).st_size, 0)  # nothing written through it
            self.assertEqual(syncd.stop(), 0)

    def test_forged_geometry_is_refused_by_the_reader(self):
        # slot_stride 2^63: two slots' worth wraps to 0 and the ring "fits" in a small file.
        with open(self.path, "wb") as f:
            f.write(forged_ring(slot_stride=2**63))
        os.chmod(self.path, 0o600)
        rc, _, err = run_reader(self.path, "--frames", "1", "--open-wait", "0")
        self.assertEqual(rc, 3)
        self.assertIn("not a version-1 frame ring", err)
        # A syncd replaces this stale file of its own user and serves a real ring there.
        with Syncd("--publisher", "test,shm", "--shm-path", self.path) as syncd:
            produce(syncd, 0.5)
            self.assertNotIn("error", syncd.stream_stats("ring")["publishers"]["shm"])
            self.assertEqual(metric(syncd, "syncd_shm_region_failures_total"), 0)
            self.assertEqual(syncd.get("/healthz")[0], 200)


    def test_header_that_never_settles_cannot_hold_the_reader(self):
        # write_counter 9, but the newest slot holds frame 1: a reader that trusted the counter
        # looked again at once, forever, past its timeout and past SIGTERM.
        with open(self.path, "wb") as f:
            f.write(forged_ring(write_counter=9))
        os.chmod(self.path, 0o600)
        reader = start_reader(self.path, "--seconds", "30")
        time.sleep(1.0)
        reader.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        out, err = reader.communicate(timeout=10)
        self.assertLess(time.monotonic() - stopped, 2.0)  # within one bounded wait (500 ms)
        summary = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(summary["frames_read"], 0)
        # Counted as torn looks, about one per 10 ms wait rather than millions.
        self.assertEqual(reader.returncode, 4, err)
        self.assertGreater(summary["torn"], 0)
        self.assertLess(summary["torn"], 300)


class WriterLiveness(unittest.TestCase):
    def setUp(self):
        self.path = f"/dev/shm/sync-redteam-{os.getpid()}-{self._testMethodName}.frames"
        self.addCleanup(PlantedRingFile.remove, self.path)

    def start_ring(self, syncd, seconds):
        producer = start_producer(syncd, seconds)
        self.addCleanup(lambda: (producer.kill(), producer.communicate()))
        syncd.wait_for(lambda: (syncd.stream_stats("ring") or {}).get("frames_accepted", 0) > 30)
        return producer

    def test_killed_syncd_is_reported_as_dead(self):
        with Syncd("--publisher", "test,shm", "--shm-path", self.path) as first:
            self.start_ring(first, 30)
            reader = start_reader(self.path, "--seconds", "30")
            time.sleep(1.0)
            first.stop(sig=signal.SIGKILL)  # the ring stays behind, live, with nobody writing
            killed = time.monotonic()
            out, err = reader.communicate(timeout=20)
            noticed = time.monotonic() - killed
        summary = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(reader.returncode, 5, err)
        self.assertEqual(summary["end"], "writer_dead")
        self.assertEqual(summary["writer_changes"], 1)
        self.assertGreater(summary["verified"], 0)
        self.assertEqual(summary["verify_failures"], 0)
        self.assertLess(noticed, 3.0)  # pid gone + heartbeat older than 250 ms, checked every 100
        self.assertIn("the writer is dead", err)
        self.assertTrue(os.path.exists(self.path))
        # A reader that comes now is not handed the dead writer's last frame.
        rc, _, err = run_reader(self.path, "--frames", "1", "--open-wait", "0")
        self.assertEqual(rc, 3)
        self.assertIn("the writer is dead", err)
        # The restarted syncd replaces its own stale ring, refusing nothing.
        old_inode = os.stat(self.path).st_ino
        with Syncd("--publisher", "test,shm", "--shm-path", self.path) as second:
            produce(second, 0.5)
            shm = second.stream_stats("ring")["publishers"]["shm"]
            self.assertNotIn("error", shm)
            self.assertEqual(metric(second, "syncd_shm_region_failures_total"), 0)
            self.assertEqual(second.get("/healthz")[0], 200)
        self.assertNotEqual(os.stat(self.path).st_ino if os.path.exists(self.path) else None,
                            old_inode)

    def test_restarted_syncd_reader_reattaches(self):
        with Syncd("--publisher", "test,shm", "--shm-path", self.path) as first:
            self.start_ring(first, 30)
            reader = start_reader(self.path, "--seconds", "40", "--reattach")
            time.sleep(1.0)
            first.stop(sig=signal.SIGKILL)
        time.sleep(0.5)
        with Syncd("--publisher", "test,shm", "--shm-path", self.path) as second:
            sent = produce(second, 3)
            out, err = reader.communicate(timeout=40)
            self.assertEqual(second.get("/healthz")[0], 200)
        summary = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(reader.returncode, 0, err)
        self.assertEqual(summary["writer_changes"], 1)
        self.assertEqual(summary["reattached"], 1)
        self.assertEqual(len(set(summary["generations"])), 2)
        self.assertTrue(summary["ended"])  # the second syncd's stream ended: read to its end
        self.assertGreater(summary["verified"], sent["frames_sent"])  # both syncds' frames
        self.assertEqual(summary["verify_failures"], 0)
        self.assertEqual(summary["torn"], 0)

    def test_second_syncd_on_the_path_is_reported_as_replaced(self):
        with Syncd("--publisher", "test,shm", "--shm-path", self.path) as first:
            self.start_ring(first, 30)
            reader = start_reader(self.path, "--seconds", "30")
            time.sleep(1.0)
            with Syncd("--publisher", "test,shm", "--shm-path", self.path) as second:
                # Its stream stays open while the reader looks: an ended ring is unlinked.
                self.start_ring(second, 30)
                out, err = reader.communicate(timeout=20)
                self.assertEqual(second.get("/healthz")[0], 200)
            self.assertEqual(first.get("/healthz")[0], 200)
        summary = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(reader.returncode, 5, err)
        self.assertEqual(summary["end"], "writer_replaced")
        self.assertEqual(summary["verify_failures"], 0)


if __name__ == "__main__":
    unittest.main()
