"""The relay's CI arm of the qualification harness (issue 16, docs/qualification.md, "The relay
arms"): one minute of a 1080p60 H.264 clip (about 12 Mbit/s) relayed between two real syncd
through sync-impair at 1 % random loss and 20 +/- 5 ms each way, re-keyed every 10 s, recorded
and analyzed by tools/qualify/run.py and analyze.py, asserting the contract:

  - at the remote consumer (the receiving syncd's test publisher, which checks every byte):
    >= 59.5 unique fps, 0 low-rate seconds, 0 frames lost after repair, 0 corrupt;
  - transport latency (sender accept to receiver frame complete) p50 <= one-way delay + one
    frame interval;
  - re-keys took effect during the stream, and around every one the largest gap between frames
    at the receiver is <= 2 frame intervals;
  - both syncd exit cleanly; the report has its plots.

And the raw arm (issue 17): one minute of 720p60 RGBA frames with the column marker, encoded by
the sending syncd (x264 on its worker, adaptive bitrate) and decoded by the receiving one, over
the same path: every frame's marker read at the remote consumer, >= 59.5 unique fps, 0 low-rate
seconds, glass to glass (the producer's send start to the receiver's publish) p50 <= one-way +
2 frame intervals. 1080p60 raw does not fit beside CI's other work on 2 cores; its figures are
measured with the documented command (docs/wan.md, "Figures").

The 30-minute soak (relay-soak), 5 % burst loss (relay-burst) and the adaptive-bitrate run
(relay-abr) are documented commands, not CI's. Sanitizer builds skip this (SYNC_SANITIZE): the timing contract is the release build's.

Environment: SYNCD, SYNC_PRODUCER (set by CTest); SYNC_QUAL_SECONDS overrides the 60 s;
SYNC_QUAL_KEEP=DIR keeps the report there.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from harness import SYNCD
from test_qualification import RUNNER, SANITIZED, SECONDS, build_dir_of


class ArmRun:
    """Runs one arm once for its test class (name, size) and loads its report."""
    name = None
    size = None

    @classmethod
    def setUpClass(cls):
        keep = os.environ.get("SYNC_QUAL_KEEP")
        cls.out = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="sync-relay-qual-"))
        argv = [sys.executable, str(RUNNER), "--arms", cls.name, "--seconds", f"{SECONDS:g}",
                "--size", cls.size, "--fps", "60", "--build-dir", str(build_dir_of(SYNCD)),
                "--out", str(cls.out), "--quiet"]
        cls.proc = subprocess.run(argv, capture_output=True, text=True, timeout=SECONDS + 300)
        report_path = cls.out / "report.json"
        cls.arm = None
        if report_path.exists():
            cls.arm = json.loads(report_path.read_text())["arms"].get(cls.name)
        print(cls.proc.stdout[-4000:], file=sys.stderr)  # the summary table, for CI's log
        if cls.proc.returncode not in (0, 1):
            print(cls.proc.stderr[-4000:], file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        if not os.environ.get("SYNC_QUAL_KEEP"):
            shutil.rmtree(cls.out, ignore_errors=True)

    def setUp(self):
        self.assertIsNotNone(self.arm, f"the {self.name} arm produced no report: "
                                       f"{self.proc.stderr[-2000:]}")


@unittest.skipIf(SANITIZED, f"timing contract is measured on the release build, not under "
                            f"sanitizers ({SANITIZED})")
class RelayQualificationArm(ArmRun, unittest.TestCase):
    name = "relay"
    size = "1920x1080"

    def test_every_frame_reaches_the_remote_consumer_intact(self):
        r = self.arm["receiver"]
        self.assertGreaterEqual(self.arm["frames_sent"], int(SECONDS * 60) - 60)
        self.assertEqual(r["frames_lost"], 0)
        self.assertEqual(r["frames_corrupt"], 0)
        self.assertEqual(r["frames_verified"], self.arm["frames_sent"])
        # The path did lose packets, and repair made up for them.
        self.assertGreater(self.arm["repair"]["wire_lost_fwd"], 0)
        self.assertGreater(self.arm["repair"]["recovered_fec"], 0)

    def test_unique_fps_at_the_remote_consumer(self):
        r = self.arm["receiver"]
        self.assertGreaterEqual(r["complete_seconds"], int(SECONDS) - 3)
        self.assertGreaterEqual(r["mean_fps"], 59.5)
        self.assertEqual(r["low_rate_seconds"], 0)

    def test_transport_latency_within_one_way_plus_a_frame(self):
        t = self.arm["transport_ms"]
        self.assertLessEqual(t["p50"], self.arm["transport_bound_ms"], json.dumps(t))
        # One machine, one clock: below the one-way delay would mean a broken measurement.
        self.assertGreater(t["p50"], 20 - 5)

    def test_re_keys_cost_no_stall(self):
        gaps = self.arm["gaps"]
        self.assertGreaterEqual(len(gaps["rekeys"]), int(SECONDS // 10) - 2)
        self.assertEqual(self.arm["repair"]["srtp_refused"], 0)
        for rekey in gaps["rekeys"]:
            # Less what the producer's own lateness at the sender already left (analyzer).
            self.assertLessEqual(rekey["relay_added_intervals"], 2.0, json.dumps(gaps["rekeys"]))

    def test_report_and_clean_exit(self):
        for kind in ("timeline", "memory"):
            self.assertTrue((self.out / self.arm["plots"][kind]).exists(), kind)
        self.assertTrue(self.arm["contract"]["both_syncd_exited_cleanly"])
        self.assertTrue((self.out / "summary.md").exists())


@unittest.skipIf(SANITIZED, f"timing contract is measured on the release build, not under "
                            f"sanitizers ({SANITIZED})")
class RawRelayQualificationArm(ArmRun, unittest.TestCase):
    name = "relay-raw"
    size = "1280x720"

    def test_every_frame_relayed_is_decoded_with_its_marker(self):
        r = self.arm["receiver"]
        sent = self.arm["frames_sent"]
        self.assertGreaterEqual(sent, int(SECONDS * 60) - 60)
        # Nothing lost in transport: every frame the sender relayed was decoded, its marker
        # read. Frames the sender never relayed (its encoder's core stalled) are counted by
        # reason and bounded: 0.1 %.
        never_relayed = sum(r["lost_before_the_relay"].values())
        self.assertEqual(r["lost_in_transport"], 0, json.dumps(r["relay"]))
        self.assertLessEqual(never_relayed, sent // 1000, json.dumps(r["lost_before_the_relay"]))
        self.assertEqual(r["frames_lost"], never_relayed)
        self.assertEqual(r["frames_corrupt"], 0)
        self.assertEqual(r["frames_marker_verified"], sent - never_relayed)
        self.assertGreater(self.arm["repair"]["wire_lost_fwd"], 0)

    def test_unique_fps_at_the_remote_consumer(self):
        r = self.arm["receiver"]
        self.assertGreaterEqual(r["complete_seconds"], int(SECONDS) - 3)
        self.assertGreaterEqual(r["mean_fps"], 59.5)
        self.assertEqual(r["low_rate_seconds"], 0)

    def test_glass_to_glass_within_transit_plus_two_frames(self):
        g = self.arm["glass_to_glass"]
        print(f"  glass to glass {json.dumps(g['ms'])}; stages {json.dumps(g['stages_median_ms'])}",
              file=sys.stderr)
        self.assertLessEqual(g["ms"]["p50"], g["bound_ms"], json.dumps(g))
        self.assertGreater(g["ms"]["p50"], 20 - 5)  # one clock: below the one-way delay is broken

    def test_report_and_clean_exit(self):
        for kind in ("timeline", "glass"):
            self.assertTrue((self.out / self.arm["plots"][kind]).exists(), kind)
        self.assertTrue(self.arm["contract"]["both_syncd_exited_cleanly"])


if __name__ == "__main__":
    unittest.main()
