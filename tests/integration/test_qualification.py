"""The CI arm of the qualification harness (issue 3, docs/qualification.md): one minute of paced
1080p60 through a real syncd into 4 shared-memory readers, recorded and analyzed by
tools/qualify/run.py and analyze.py, asserting the measurement contract:

  - 60 unique frames in every complete second (at syncd, and at every reader), but for the one
    frame due just before a second's end arriving just after it;
  - zero drops at any stage, zero verify failures, every frame sent verified by syncd;
  - zero torn frames, and the 4 readers all verified (read frames, no verify failure, exit 0).

A build without sync-shm-reader (or a syncd without the shm publisher or the per-frame event
log) fails the arm, saying what is missing: absence is a failure, not a skip. Only sanitizer
builds skip it (SYNC_SANITIZE, a deliberate configuration: the timing contract is not theirs).

Environment: SYNCD, SYNC_PRODUCER, SYNC_SHM_READER (set by CTest); SYNC_QUAL_SECONDS overrides
the 60 s (for a quick local run); SYNC_QUAL_KEEP=DIR keeps the report there.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from harness import PRODUCER, SYNCD

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "tools" / "qualify" / "run.py"
READER = os.environ.get("SYNC_SHM_READER", "")
SECONDS = float(os.environ.get("SYNC_QUAL_SECONDS", "60"))
SANITIZED = os.environ.get("SYNC_SANITIZE", "")


def build_dir_of(binary):
    # BUILD/src/daemon/syncd -> BUILD
    return Path(binary).resolve().parents[2]


def shm_capable():
    if not READER or not os.access(READER, os.X_OK):
        return False, f"sync-shm-reader is not built (SYNC_SHM_READER={READER!r})"
    help_text = subprocess.run([SYNCD, "--help"], capture_output=True, text=True).stdout
    if "--shm-path" not in help_text:
        return False, "this syncd has no shm publisher (--shm-path)"
    expected = build_dir_of(SYNCD) / "tools" / "shm_reader" / "sync-shm-reader"
    if Path(READER).resolve() != expected.resolve():
        return False, f"sync-shm-reader is not in syncd's build tree ({expected})"
    return True, ""


@unittest.skipIf(SANITIZED, f"timing contract is measured on the release build, not under "
                            f"sanitizers ({SANITIZED})")
class QualificationArm(unittest.TestCase):
    report = None
    arm = None
    missing = ""
    proc = None

    @classmethod
    def setUpClass(cls):
        name = cls.name = "multi-reader"
        ok, cls.missing = shm_capable()
        if not ok:
            return  # every test fails in setUp, naming what is missing
        keep = os.environ.get("SYNC_QUAL_KEEP")
        cls.out = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="sync-qual-"))
        argv = [sys.executable, str(RUNNER), "--arms", name, "--seconds", f"{SECONDS:g}",
                "--size", "1920x1080", "--fps", "60", "--build-dir", str(build_dir_of(SYNCD)),
                # 16 slots, not the harness's 8: here 4 readers, the producer and syncd share
                # 2 cores. One run on a quiet machine (load 0.6) had a 77-ms stall of syncd's
                # input and 3 torn frames (three readers each lost the frame it was hashing in
                # place to a rewrite): the frames queued in a stall are published a few ms
                # apart, faster than a descheduled reader reads one. A ring's depth is its
                # readers' slack; 16 doubles it.
                "--shm-slots", "16",
                "--out", str(cls.out), "--quiet"]
        cls.proc = subprocess.run(argv, capture_output=True, text=True, timeout=SECONDS + 240)
        report_path = cls.out / "report.json"
        if report_path.exists():
            cls.report = json.loads(report_path.read_text())
            cls.arm = cls.report["arms"].get(name)
        # What CI logs show: the summary table.
        print(cls.proc.stdout[-4000:], file=sys.stderr)
        if cls.proc.returncode not in (0, 1):
            print(cls.proc.stderr[-4000:], file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        if cls.proc and not os.environ.get("SYNC_QUAL_KEEP"):
            shutil.rmtree(cls.out, ignore_errors=True)

    def setUp(self):
        self.assertEqual(self.missing, "", "the multi-reader arm cannot run")
        self.assertIsNotNone(self.arm, f"the {self.name} arm produced no report: "
                                       f"{self.proc.stderr[-2000:]}")

    # ---- syncd
    def test_60_unique_fps_in_every_complete_second(self):
        s = self.arm["syncd"]
        self.assertGreaterEqual(s["complete_seconds"], int(SECONDS) - 3, s["source"])
        # 60 in every complete second, but for the one frame due in the last 8.3 ms of a
        # second arriving after its end (59 then 61: docs/decisions.md, "One frame across a
        # second's end"); a lost frame or a longer stall puts 2 or more on the wrong side.
        self.assertLessEqual(s["frames_behind_max"], 1,
                             f"seconds not at 60 unique fps ({s['source']}): "
                             f"{[b for b in s['per_second'] if b['frames'] != 60]}")
        self.assertEqual(s["low_rate_seconds"], 0)

    def test_zero_drops(self):
        self.assertEqual(self.arm["drops_total"], 0, json.dumps(self.arm["drops"]))
        self.assertEqual(self.arm["syncd"]["stats"]["frames_dropped_total"], 0)

    def test_every_frame_sent_verified(self):
        stats = self.arm["syncd"]["stats"]
        self.assertGreater(self.arm["frames_sent"], 0)
        self.assertEqual(stats["frames_verified"], self.arm["frames_sent"])
        self.assertEqual(stats["frames_verify_failed"], 0)

    def test_per_frame_events_recorded(self):
        self.assertTrue(self.arm["sources"]["producer_events"])
        ev = self.arm["sources"]["syncd_events"]
        self.assertTrue(ev["available"], f"syncd has no per-frame event log: {ev['note']}")
        self.assertEqual(ev["rows"], self.arm["frames_sent"])
        self.assertEqual(ev["lost"], 0)
        self.assertIn("offer_to_publish", self.arm["latency_ms"])

    def test_report_has_plots_and_summary(self):
        for kind in ("fps", "latency", "memory"):
            self.assertTrue((self.out / self.arm["plots"][kind]).exists(), kind)
        self.assertTrue((self.out / "summary.md").exists())
        self.assertTrue(self.arm["contract"]["syncd_clean_exit"])

    # ---- readers
    def test_zero_torn_frames(self):
        self.assertEqual(self.arm["torn_total"], 0)

    def test_four_readers_all_verified(self):
        readers = self.arm["readers"]
        self.assertEqual(len(readers), 4)
        for r in readers:
            self.assertTrue(r["verified"], json.dumps({k: r.get(k) for k in (
                "reader", "exit_code", "frames_read", "verify_failures")}))
            self.assertEqual(r["skipped"], 0, f"reader {r['reader']} skipped frames")
            self.assertEqual(r.get("published_not_read", 0), 0)

    def test_readers_60_unique_fps_in_every_complete_second(self):
        # Binned as the contract bins (a frame's arrival second at syncd, docs/protocol.md): each
        # reader got all 60 frames of every complete second. Bins by read time are in the report
        # too; there a second's last frame read > 8.3 ms after it was offered moves to the next
        # bin (59/61), which is latency jitter at the boundary, not a lost frame.
        for r in self.arm["readers"]:
            self.assertGreaterEqual(r["by_arrival"]["complete_seconds"], int(SECONDS) - 3)
            self.assertLessEqual(r["by_arrival"]["frames_behind_max"], 1, (
                f"reader {r['reader']}: "
                f"{[b for b in r['per_second_by_arrival'] if b['frames'] != 60]}"))


if __name__ == "__main__":
    unittest.main()
