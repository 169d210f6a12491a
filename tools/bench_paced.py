#!/usr/bin/env python3
"""Paced ingest run: one producer sends frames at a fixed rate to a real syncd for a duration
while this script samples syncd's resident memory every 5 s and collects the unique frames of
every complete second. Prints a live line, then a summary; --out writes it as JSON.

The contract checked (docs/benchmarks.md): every complete second carries the nominal rate of
unique frames, zero low-rate seconds (< 50), zero drops, zero verify failures, and a flat
resident-memory slope (least squares over minute 1..end, in KiB/min).

Usage: tools/bench_paced.py [--seconds 120] [--fps 60] [--size 1920x1080] [--build-dir build/release]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

from bench_common import (find_stream, get_stats, least_squares_slope, pinned, rss_bytes,
                          stage_delta)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--fps", type=float, default=60)
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--build-dir", default="build/release")
    ap.add_argument("--out")
    args = ap.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    syncd_bin = os.path.join(args.build_dir, "src/daemon/syncd")
    producer_bin = os.path.join(args.build_dir, "tools/producer/sync-producer")

    syncd = subprocess.Popen(pinned(0, [syncd_bin, "--port", "0", "--publisher", "test",
                                        "--status-line", "off"]),
                             stdout=subprocess.PIPE, text=True)
    line = syncd.stdout.readline()
    port = int(line.strip().rsplit(":", 1)[1])
    before = get_stats(port)
    producer = subprocess.Popen(
        pinned(1, [producer_bin, "--url", f"ws://127.0.0.1:{port}/ws", "--stream", "paced",
                   "--width", str(width), "--height", str(height), "--fps", str(args.fps),
                   "--seconds", str(args.seconds), "--quiet", "--realtime"]),
        stdout=subprocess.PIPE, text=True)

    start = time.monotonic()
    memory = []       # (seconds since start, rss bytes)
    bins = {}         # complete-second index -> unique frames
    live = sys.stderr.isatty()

    def sample(record_memory=True):
        stats = get_stats(port)
        if record_memory:  # only while the stream runs: its pool is freed when it closes
            memory.append((time.monotonic() - start, rss_bytes(syncd.pid)))
        s = find_stream(stats, "paced")
        if s:
            recent = s["recent_seconds_unique_fps"]
            first = s["complete_seconds"] - len(recent)
            for i, fps in enumerate(recent):
                bins[first + i] = fps
        return stats, s

    s = None
    next_sample = time.monotonic()
    while producer.poll() is None:
        if time.monotonic() >= next_sample:
            _, s = sample()
            next_sample += 5
            if live and s:
                print(f"\r{time.monotonic() - start:6.0f}s  fps {s['last_second_unique_fps']:3d}"
                      f"  low-rate {s['low_rate_seconds']}  drops {s['frames_dropped_total']}"
                      f"  verified {s['frames_verified']}  rss {memory[-1][1] / 2**20:.1f} MiB",
                      end="", file=sys.stderr, flush=True)
        time.sleep(0.1)
    if live:
        print(file=sys.stderr)
    producer_summary = json.loads(producer.stdout.read().strip().splitlines()[-1])
    time.sleep(0.5)
    final, s = sample(record_memory=False)
    syncd.send_signal(signal.SIGTERM)
    exit_code = syncd.wait(timeout=10)

    per_second = [bins[k] for k in sorted(bins)]
    loop_busy = stage_delta(before["process"]["loop_iteration_busy"],
                            final["process"]["loop_iteration_busy"],
                            final["stage_histogram_bounds_us"])
    slope_points = [(t / 60.0, b / 1024.0) for t, b in memory if t >= 60.0]
    slope = least_squares_slope(slope_points)
    summary = {
        "arm": "paced",
        "size": args.size,
        "nominal_fps": args.fps,
        "seconds": args.seconds,
        "frames_sent": producer_summary.get("frames_sent"),
        "frames_accepted": s["frames_accepted"],
        "frames_verified": s["frames_verified"],
        "frames_verify_failed": s["frames_verify_failed"],
        "frames_dropped": s["frames_dropped"],
        "complete_seconds": s["complete_seconds"],
        "low_rate_seconds": s["low_rate_seconds"],
        "min_second_unique_fps": min(per_second) if per_second else None,
        "max_second_unique_fps": max(per_second) if per_second else None,
        "seconds_at_nominal": sum(1 for f in per_second if f == round(args.fps)),
        "per_second_unique_fps": per_second,
        "rss_mib_first": memory[0][1] / 2**20 if memory else None,
        "rss_mib_last": memory[-1][1] / 2**20 if memory else None,
        "rss_slope_kib_per_min": slope,
        "memory_samples": [{"t": round(t, 1), "rss": b} for t, b in memory],
        # Where a frame's time goes in syncd (the /stats stages: mean per frame), and how long
        # its loop stayed away from epoll at a time over the run (set-up included).
        "stage_mean_us": {name: st["total_us"] / st["count"] if st["count"] else None
                          for name, st in s["stages"].items()},
        "loop_iteration_busy": loop_busy,
        "loop_iterations_over_1ms_per_s": loop_busy["over_1ms"] / args.seconds,
        "syncd_exit_code": exit_code,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    brief = {k: v for k, v in summary.items() if k not in ("per_second_unique_fps",
                                                             "memory_samples",
                                                             "loop_iteration_busy")}
    print(json.dumps(brief, indent=1))
    ok = (summary["low_rate_seconds"] == 0 and s["frames_dropped_total"] == 0 and
          summary["frames_verify_failed"] == 0 and exit_code == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
