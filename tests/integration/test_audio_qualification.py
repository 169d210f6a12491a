"""The CI arm of the av-concurrent audio qualification (issue 4, docs/benchmarks.md "Audio
capture"): 20 s of 32-channel audio alone, then 60 s of it while paced 1080p60 RGBA video is
ingested and verified by the same syncd. Runs tools/bench_audio.py.

It asserts what the run must never do on any machine: drop or mismatch an audio sample, leave a
gap, fail a video frame's verification, have a low-rate second, grow memory, exit uncleanly.
The two timing clauses (60 unique fps in every complete second; RTT p99 under video within
max(2 x idle, idle + 1 ms)) are printed with their verdict, not asserted: on this shared VM a
one-minute run's p99 and one boundary frame move with the host's steal time, and speed is
judged by the benchmark, whose 10-minute run (docs/benchmarks.md) exits 1 when either fails.
The strict per-second clause is asserted in CI by the qualification arm (test_qualification).
Timing means nothing under sanitizers, so sanitized builds skip the whole test."""
import json
import os
import subprocess
import sys
import unittest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "bench_audio.py")


@unittest.skipIf(os.environ.get("SYNC_SANITIZE"), "timing contract: release builds only")
class AvConcurrent(unittest.TestCase):
    def test_av_concurrent_60s(self):
        p = subprocess.run([sys.executable, BENCH, "--arm", "av-concurrent", "--seconds", "60",
                            "--idle-seconds", "20"], capture_output=True, text=True, timeout=400)
        self.assertTrue(p.stdout.strip(), p.stderr)
        s = json.loads(p.stdout)
        audio, video = s["audio"], s["video"]
        print(json.dumps({"audio": {k: audio[k] for k in ("frames", "continuity", "dropped_frames",
                                                          "first_frame_gaps", "rtt_ms")},
                          "idle_rtt_ms": s["idle"]["rtt_ms"], "video": video,
                          "rss_slope_kib_per_min": s["rss_slope_kib_per_min"]}, indent=1))
        self.assertEqual(audio["dropped_frames"], 0)
        self.assertEqual(audio["first_frame_gaps"], 0)
        self.assertEqual(audio["verify"]["mismatched_frames"], 0)
        self.assertAlmostEqual(audio["continuity"], 1.0, delta=0.001)
        self.assertEqual(video["low_rate_seconds"], 0)
        self.assertEqual(video["frames_verify_failed"], 0)
        self.assertEqual(video["frames_dropped"], 0)
        self.assertEqual(video["frames_verified"], video["frames_accepted"])
        self.assertLessEqual(s["rss_slope_kib_per_min"], 10.0)
        self.assertEqual(s["syncd_exit_code"], 0)
        fps_ok = video["min_second_unique_fps"] >= 60
        rtt_ok = audio["rtt_ms"]["p99"] <= s["rtt_p99_limit_ms"]
        print(f"timing (reported, judged by the 10-minute benchmark): min unique fps "
              f"{video['min_second_unique_fps']} ({'met' if fps_ok else 'MISSED'}); RTT p99 "
              f"{audio['rtt_ms']['p99']} ms vs limit {s['rtt_p99_limit_ms']:.3f} ms "
              f"({'met' if rtt_ok else 'MISSED'})")


if __name__ == "__main__":
    unittest.main()
