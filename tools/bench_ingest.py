#!/usr/bin/env python3
"""Ingest benchmark: raw 1080p RGBA frames into syncd over WebSocket vs. into a raw TCP sink.

Both arms run in the same invocation, interleaved round by round (tcp then syncd, then syncd then
tcp, ...), so that the noise of a shared 2-core machine falls on both alike. Absolute figures
drift from day to day; the ratios syncd/tcp are the result.

  arm "tcp":   sync-tcp-sink (core 0)  <- sync-producer --raw-tcp (core 1)
               the sink reads each frame straight into one buffer, XXH3-hashing each 256 KiB
               window as it lands, as syncd's ingest does: the floor for any verifying receiver.
  arm "syncd": syncd --publisher test (core 0)  <- sync-producer over WebSocket (core 1)
               the test publisher verifies every frame's hash and sequence marker.
  arm "tcp-huge" (opt-in): the tcp arm with the sink reading into a huge-page buffer, as syncd's
               frame pool is; the ratio syncd/tcp-huge is what remains once memory layout is
               equal.
  arm "tcp-whole" (opt-in): the tcp arm reading the whole frame first and hashing it after
               (--hash-window-kb 0): what hashing windows while they are in cache saves.

Per arm and round it records frames/s three ways, for every arm alike:
  fps_steady    frames after the --warmup-frames'th / the time from its end to the last frame's,
                as the server stamped them (the sink; syncd: publication, on /stats): the rate
                the server takes frames at, without set-up;
  fps_wall      frames / (last frame as the server stamped it - producer process start), i.e.
                with the producer's start, connection and stream set-up included;
  fps_producer  the producer's own figure: frames / (last send end - first send start);
and the server's CPU per frame in the steady state, over the same frames as fps_steady (tcp: the sink's getrusage; syncd: its loop thread's CPU clock from /stats, the thread
that does all of its work here). Connection and stream set-up stay out of it: syncd maps and
faults in its frame pool at stream setup (~60 ms for 4 slots), the sink before accept(). The
figure with set-up included (tcp: from accept; syncd: /proc/PID/stat from producer start) is kept
as server_cpu_ms_per_frame_with_setup.

Prints a table of medians over the rounds and, with --out, writes the same as JSON.
Exit status: 0 ok, 1 usage or a failed run (non-zero exit, hash failures, missing frames).
Python 3 standard library only.
"""

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

from bench_common import (CLOCK_TICKS_PER_SECOND, BenchError, Child, cpu_ticks, find_stream,
                          http_get_json, pinned, port_from_line)

# Extra syncd arguments for experiments (SYNCD_ARGS="--read-turn-kb 65536"); empty normally.
SYNCD_EXTRA_ARGS = os.environ.get("SYNCD_ARGS", "").split()

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVER_CORE = 0
PRODUCER_CORE = 1
STREAM_NAME = "bench"


def run_producer(args, paths, target_args):
    argv = pinned(PRODUCER_CORE, [
        str(paths["producer"]), *target_args,
        "--frames", str(args.frames), "--fps", str(args.fps),
        "--width", str(args.width), "--height", str(args.height), "--quiet",
    ])
    producer = Child("sync-producer", argv)
    code = producer.wait(args.timeout)
    if code != 0:
        raise BenchError(f"sync-producer exited with {code}: {producer.stderr_tail()}")
    summary = producer.last_json()
    if summary.get("frames_sent") != args.frames:
        raise BenchError(f"sync-producer sent {summary.get('frames_sent')} of {args.frames} frames")
    if summary.get("errors_received", 0) != 0:
        raise BenchError(f"syncd sent {summary['errors_received']} error messages")
    return summary


def run_tcp_arm(args, paths, sink_args=()):
    sink = Child("sync-tcp-sink", pinned(SERVER_CORE, [
        str(paths["sink"]), "--port", "0", "--frames", str(args.frames),
        "--width", str(args.width), "--height", str(args.height),
        "--warmup-frames", str(args.warmup_frames),
        *sink_args,
    ]))
    try:
        port = port_from_line(sink.first_stdout_line(10), "sync-tcp-sink")
        start_ns = time.monotonic_ns()  # CLOCK_MONOTONIC, the clock the sink stamps with
        producer = run_producer(args, paths, ["--raw-tcp", f"127.0.0.1:{port}"])
        code = sink.wait(args.timeout)
        if code != 0:
            raise BenchError(f"sync-tcp-sink exited with {code}: {sink.stderr_tail()}")
        result = sink.last_json()
    finally:
        sink.kill()
    if result["frames"] != args.frames or result["hash_failures"] or result["seq_gaps"]:
        raise BenchError(f"tcp sink: {result['frames']} frames, {result['hash_failures']} hash "
                         f"failures, {result['seq_gaps']} sequence gaps")
    wall_s = (result["last_frame_monotonic_ns"] - start_ns) / 1e9
    return {
        "fps_steady": result["steady_fps"],
        "fps_wall": args.frames / wall_s,
        "fps_producer": producer["fps"],
        "fps_server": result["fps"],
        "server_cpu_ms_per_frame": result["steady_cpu_ms_per_frame"],
        "server_cpu_ms_per_frame_with_setup": result["cpu_ms_per_frame"],
        "frames": result["frames"],
        "producer": producer,
        "server": result,
    }


class background:
    """Runs fn(*args) on a thread; result() joins it and returns or raises what fn did."""

    def __init__(self, fn, *args):
        self._value, self._error = None, None
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)
        self._thread.start()

    def _run(self, fn, args):
        try:
            self._value = fn(*args)
        except BaseException as e:  # handed to the caller of result()
            self._error = e

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def wait_for_warmup(stats_url, args):
    """Polls /stats until --warmup-frames frames are verified; returns that snapshot's loop CPU.

    The polls fall before the measured interval, which starts with the snapshot returned.
    """
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        try:
            snapshot = http_get_json(stats_url)
        except OSError:
            snapshot = {}
        stream = find_stream(snapshot, STREAM_NAME)
        if stream is not None and stream.get("frames_verified", 0) >= args.warmup_frames:
            return {"cpu_s": snapshot["process"]["loop_cpu_seconds"],
                    "verified": stream["frames_verified"],
                    "last_publish_ns": stream["last_publish_monotonic_ns"]}
        time.sleep(0.01)  # seldom: each poll costs this script CPU on the producer's machine
    raise BenchError(f"syncd did not verify {args.warmup_frames} warm-up frames in time")


def run_syncd_arm(args, paths):
    syncd = Child("syncd", pinned(SERVER_CORE, [
        str(paths["syncd"]), "--port", "0", "--publisher", "test", *SYNCD_EXTRA_ARGS,
    ]))
    try:
        first = syncd.first_stdout_line(10)
        if not first.startswith("syncd listening on"):
            raise BenchError(f"unexpected first line from syncd: {first!r}")
        port = port_from_line(first, "syncd")
        stats_url = f"http://127.0.0.1:{port}/stats"

        ticks_before = cpu_ticks(syncd.pid)
        start_ns = time.monotonic_ns()  # CLOCK_MONOTONIC, the clock syncd stamps with
        producer = background(run_producer, args, paths, [
            "--url", f"ws://127.0.0.1:{port}/ws", "--stream", STREAM_NAME,
        ])
        warm = wait_for_warmup(stats_url, args)
        # /stats is asked for again only once the producer is done, so that the polling itself
        # adds next to nothing to syncd's CPU; by then every frame is normally verified already.
        producer = producer.result()
        stream, done, snapshot = None, None, None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            snapshot = http_get_json(stats_url)
            stream = find_stream(snapshot, STREAM_NAME)
            accounted = 0
            if stream is not None:
                accounted = (stream.get("frames_verified", 0) +
                             stream.get("frames_verify_failed", 0) +
                             stream.get("frames_dropped_total", 0))
            if accounted >= args.frames:
                done = time.monotonic()
                break
            time.sleep(0.002)
        ticks_after = cpu_ticks(syncd.pid)
        if done is None:
            raise BenchError(f"syncd did not account for {args.frames} frames within 10 s: "
                             f"{json.dumps(stream)[:500]}")

        syncd.proc.send_signal(signal.SIGTERM)
        code = syncd.wait(10)
        if code != 0:
            raise BenchError(f"syncd exited with {code} on SIGTERM: {syncd.stderr_tail()}")
    finally:
        syncd.kill()

    verified = stream.get("frames_verified", 0)
    if verified != args.frames:
        raise BenchError(f"syncd verified {verified} of {args.frames} frames "
                         f"({stream.get('frames_verify_failed', 0)} failed, "
                         f"{stream.get('frames_dropped_total', 0)} dropped)")
    cpu_ms = (ticks_after - ticks_before) * 1000.0 / CLOCK_TICKS_PER_SECOND
    steady_cpu_ms = (snapshot["process"]["loop_cpu_seconds"] - warm["cpu_s"]) * 1000.0
    steady_s = (stream["last_publish_monotonic_ns"] - warm["last_publish_ns"]) / 1e9
    return {
        "fps_steady": (verified - warm["verified"]) / steady_s,
        # Up to the last frame's publication as syncd stamped it, as the sinks stamp theirs,
        # rather than to when a poll noticed it.
        "fps_wall": verified / ((stream["last_publish_monotonic_ns"] - start_ns) / 1e9),
        "fps_producer": producer["fps"],
        "server_cpu_ms_per_frame": steady_cpu_ms / (verified - warm["verified"]),
        "server_cpu_ms_per_frame_with_setup": cpu_ms / verified,
        "frames": verified,
        "producer": producer,
        "server": stream,
    }


ARMS = {
    "tcp": run_tcp_arm,
    "tcp-huge": lambda args, paths: run_tcp_arm(args, paths, ["--huge-pages"]),
    "tcp-whole": lambda args, paths: run_tcp_arm(args, paths, ["--hash-window-kb", "0"]),
    "syncd": run_syncd_arm,
}
BASELINES = ("tcp", "tcp-huge", "tcp-whole")  # the arms syncd's figures are divided by
METRICS = ("fps_steady", "fps_wall", "fps_producer", "server_cpu_ms_per_frame",
           "server_cpu_ms_per_frame_with_setup")


def resolve_paths(build_dir):
    build = Path(build_dir)
    if not build.is_absolute() and not build.exists():
        build = REPO_ROOT / build
    return {
        "syncd": build / "src" / "daemon" / "syncd",
        "producer": build / "tools" / "producer" / "sync-producer",
        "sink": build / "tools" / "tcp_sink" / "sync-tcp-sink",
    }


def check_environment(arms, paths):
    needed = {"producer"} | {"sink" for a in arms if a.startswith("tcp")} | \
             {"syncd" for a in arms if a == "syncd"}
    for key in sorted(needed):
        if not os.access(paths[key], os.X_OK):
            raise BenchError(f"{paths[key]} not found; build first (cmake --build --preset release)")
    if shutil.which("taskset") is None:
        raise BenchError("taskset (util-linux) is needed to pin the processes")
    cores = os.sched_getaffinity(0)
    if not {SERVER_CORE, PRODUCER_CORE} <= cores:
        raise BenchError(f"needs cores {SERVER_CORE} and {PRODUCER_CORE}; allowed: {sorted(cores)}")


def summarize(runs, arms):
    median = {}
    for arm in arms:
        rows = [r[arm] for r in runs]
        median[arm] = {m: statistics.median(row[m] for row in rows) for m in METRICS}
    # Two ratios per baseline: of the medians, and the median of each round's own ratio. The
    # second pairs arms that ran seconds apart, so drifts slower than a round cancel out.
    ratio, paired = {}, {}
    for baseline in BASELINES:
        if baseline in median and "syncd" in median:
            ratio[baseline] = {m: median["syncd"][m] / median[baseline][m] for m in METRICS}
            paired[baseline] = {
                m: statistics.median(r["syncd"][m] / r[baseline][m] for r in runs)
                for m in METRICS}
    return median, ratio, paired


def print_table(args, median, ratio, paired):
    print(f"\nIngest of {args.width}x{args.height} rgba8 at max rate, {args.frames} frames per arm, "
          f"median of {args.rounds} round(s); server on core {SERVER_CORE}, producer on core "
          f"{PRODUCER_CORE}")
    header = (f"{'':23} {'frames/s (steady)':>18} {'frames/s (wall)':>16} "
              f"{'frames/s (producer)':>20} {'server CPU ms/frame':>20}")
    print(header)
    print("-" * len(header))
    for arm, row in median.items():
        print(f"{arm:23} {row['fps_steady']:18.1f} {row['fps_wall']:16.1f} "
              f"{row['fps_producer']:20.1f} {row['server_cpu_ms_per_frame']:20.3f}")
    for kind, table in (("", ratio), (" paired", paired)):
        for baseline, row in table.items():
            label = f"syncd/{baseline}{kind}"
            print(f"{label:23} {row['fps_steady']:17.2f}x {row['fps_wall']:15.2f}x "
                  f"{row['fps_producer']:19.2f}x {row['server_cpu_ms_per_frame']:19.2f}x")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="A/B rounds (default 3)")
    parser.add_argument("--frames", type=int, default=600, help="frames per arm and round")
    parser.add_argument("--fps", type=float, default=0,
                        help="producer rate; 0 (default) sends as fast as the sink takes frames")
    parser.add_argument("--warmup-frames", type=int, default=30,
                        help="frames before the CPU-per-frame interval starts (default 30)")
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--build-dir", default="build/release",
                        help="CMake build tree holding syncd and the tools (default build/release)")
    parser.add_argument("--arms", default="tcp,syncd",
                        help="comma-separated subset of " + ",".join(ARMS) +
                        " (default tcp,syncd)")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds one producer run may take before the run fails")
    parser.add_argument("--out", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    args.arm_list = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in args.arm_list if a not in ARMS]
    if unknown or not args.arm_list:
        parser.error(f"--arms takes some of {', '.join(ARMS)}, got {args.arms!r}")
    if args.rounds < 1 or args.frames < 1:
        parser.error("--rounds and --frames must be positive")
    if not 1 <= args.warmup_frames < args.frames:
        parser.error("--warmup-frames must be at least 1 and fewer than --frames")
    return args


def main(argv):
    args = parse_args(argv)
    paths = resolve_paths(args.build_dir)
    try:
        check_environment(args.arm_list, paths)
        runs = []
        for round_index in range(args.rounds):
            # Alternate the order so neither arm always runs on a warmer (or hotter) machine.
            order = args.arm_list if round_index % 2 == 0 else list(reversed(args.arm_list))
            results = {}
            for arm in order:
                r = ARMS[arm](args, paths)
                results[arm] = r
                print(f"round {round_index + 1} {arm:8} fps_steady {r['fps_steady']:7.1f}  "
                      f"fps_wall {r['fps_wall']:7.1f}  "
                      f"fps_producer {r['fps_producer']:7.1f}  "
                      f"server CPU {r['server_cpu_ms_per_frame']:.3f} ms/frame", flush=True)
            runs.append(results)
    except BenchError as e:
        print(f"bench_ingest: {e}", file=sys.stderr)
        return 1

    median, ratio, paired = summarize(runs, args.arm_list)
    print_table(args, median, ratio, paired)
    if args.out:
        report = {
            "benchmark": "ingest",
            "command": " ".join([Path(sys.argv[0]).name] + argv),
            "width": args.width,
            "height": args.height,
            "frames": args.frames,
            "warmup_frames": args.warmup_frames,
            "rounds": args.rounds,
            "cores": {"server": SERVER_CORE, "producer": PRODUCER_CORE},
            "host": {"kernel": platform.release(), "cpus": os.cpu_count()},
            "median": median,
            **{f"ratio_syncd_over_{b.replace('-', '_')}": ratio.get(b) for b in BASELINES},
            **{f"paired_ratio_syncd_over_{b.replace('-', '_')}": paired.get(b) for b in BASELINES},
            "runs": runs,
        }
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
