#!/usr/bin/env python3
"""Peer benchmark: the same 1080p RGBA frames, from the same sync-producer, as fast as each sink
takes them, side by side in one run, rounds interleaved.

Sinks (each pinned to core 0; the producer to core 1):
  tcp          sync-tcp-sink: header + pixels straight into one buffer, XXH3: the physical ceiling
  syncd        syncd --publisher test: WebSocket -> pool slot -> in-place unmask -> XXH3 of every byte
  beast        bench/peers/beast (Boost.Beast, synchronous, one reserved flat_buffer)
  lws          bench/peers/lws (libwebsockets, 1 MiB rx and service buffers)
  lws-default  the same with lws's default 4 KiB buffers
  node         bench/peers/node/sink.js (Node `ws`, with bufferutil when installed)
  node-nobu    the same with WS_NO_BUFFER_UTIL=1 (JavaScript unmasking)
Every WebSocket peer answers hello/stream.open as syncd does and verifies every frame with
XXH3-64 over every pixel byte; a run with a hash failure, a sequence gap or a missing frame fails.

Per arm and round: frames/s (steady: the frames after the --warmup-frames'th (default 30) over
the time from its end to the last frame's, as the sink stamped them; wall: frames / (last frame
- producer start), the producer's start, connection and stream set-up included; producer: the
producer's own sending rate) and server CPU per frame over the same steady frames, as each sink
reports it (getrusage; syncd: its loop thread's CPU clock on /stats), so that
connection and buffer set-up count for no one (bench_ingest.py says why). The figure from accept
on is kept as server_cpu_ms_per_frame_with_setup. The table is the median over rounds, and each
arm's ratio to raw TCP of the same run.

Usage: bench/peers/run.py [--rounds 3] [--frames 300] [--arms tcp,syncd,beast,lws,node]
                          [--build-dir build/peers] [--out peers.json] [--markdown peers.md]
Needs a build with -DSYNC_BUILD_PEERS=ON and `npm ci` in bench/peers/node. Python 3 stdlib only.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tools"))
import bench_ingest  # noqa: E402  (Child, run_producer, the tcp and syncd arms)
from bench_common import BenchError, Child, pinned, port_from_line  # noqa: E402

NODE_DIR = REPO_ROOT / "bench" / "peers" / "node"
ALL_ARMS = ["tcp", "syncd", "beast", "lws", "lws-default", "node", "node-nobu"]
DEFAULT_ARMS = ALL_ARMS
METRICS = ("fps_steady", "fps_wall", "fps_producer", "server_cpu_ms_per_frame",
           "server_cpu_ms_per_frame_with_setup")
LABELS = {
    "tcp": "raw TCP (sync-tcp-sink)",
    "syncd": "syncd (--publisher test)",
    "beast": "Boost.Beast 1.74",
    "lws": "libwebsockets 4.1.6, 1 MiB buffers",
    "lws-default": "libwebsockets 4.1.6, default buffers",
    "node": "Node 20 `ws` 8 + bufferutil",
    "node-nobu": "Node 20 `ws` 8, no bufferutil",
}


def peer_argv(arm, paths):
    if arm == "beast":
        return [str(paths["beast"]), "--port", "0"], None
    if arm == "lws":
        return [str(paths["lws"]), "--port", "0", "--rx-buffer-kb", "1024"], None
    if arm == "lws-default":
        return [str(paths["lws"]), "--port", "0", "--rx-buffer-kb", "0"], None
    if arm in ("node", "node-nobu"):
        env = dict(os.environ)
        if arm == "node-nobu":
            env["WS_NO_BUFFER_UTIL"] = "1"
        return [paths["node"], str(NODE_DIR / "sink.js"), "--port", "0"], env
    raise ValueError(arm)


class EnvChild(Child):
    """bench_ingest.Child with an environment of its own."""

    def __init__(self, name, argv, env):
        if env is None:
            super().__init__(name, argv)
            return
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            super().__init__(name, argv)
        finally:
            os.environ.clear()
            os.environ.update(saved)


def run_ws_peer_arm(arm, args, paths):
    argv, env = peer_argv(arm, paths)
    argv = argv + ["--warmup-frames", str(args.warmup_frames)]
    sink = EnvChild(arm, pinned(bench_ingest.SERVER_CORE, argv), env)
    try:
        port = port_from_line(sink.first_stdout_line(15), arm)
        start_ns = time.monotonic_ns()
        producer = bench_ingest.run_producer(args, paths, [
            "--url", f"ws://127.0.0.1:{port}/ws", "--stream", "bench"])
        code = sink.wait(args.timeout)
        if code != 0:
            raise BenchError(f"{arm} exited with {code}: {sink.stderr_tail()}")
        result = sink.last_json()
    finally:
        sink.kill()
    if (result["frames"] != args.frames or result["hash_failures"] or result["seq_gaps"]
            or result.get("bad_frames")):
        raise BenchError(f"{arm}: {result['frames']} frames, {result['hash_failures']} hash "
                         f"failures, {result['seq_gaps']} gaps, {result.get('bad_frames')} bad")
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


def run_arm(arm, args, paths):
    if arm == "tcp":
        return bench_ingest.run_tcp_arm(args, paths)
    if arm == "syncd":
        return bench_ingest.run_syncd_arm(args, paths)
    return run_ws_peer_arm(arm, args, paths)


def resolve_paths(build_dir):
    paths = bench_ingest.resolve_paths(build_dir)
    build = Path(paths["syncd"]).parents[2]
    paths["beast"] = build / "bench" / "peers" / "sync-peer-beast"
    paths["lws"] = build / "bench" / "peers" / "sync-peer-lws"
    paths["node"] = shutil.which("node") or "node"
    return paths


def check_environment(arms, paths):
    bench_ingest.check_environment([a for a in arms if a in ("tcp", "syncd")] or ["tcp"], paths)
    for arm in arms:
        if arm == "beast" and not os.access(paths["beast"], os.X_OK):
            raise BenchError(f"{paths['beast']} not found: configure with -DSYNC_BUILD_PEERS=ON")
        if arm.startswith("lws") and not os.access(paths["lws"], os.X_OK):
            raise BenchError(f"{paths['lws']} not found: configure with -DSYNC_BUILD_PEERS=ON")
        if arm.startswith("node"):
            if not shutil.which("node"):
                raise BenchError("node not found")
            if not (NODE_DIR / "node_modules" / "ws").is_dir():
                raise BenchError(f"run `npm ci` (or `npm install`) in {NODE_DIR} first")


def summarize(runs, arms):
    median = {arm: {m: statistics.median(r[arm][m] for r in runs) for m in METRICS}
              for arm in arms}
    ratios = {}
    if "tcp" in median:
        for arm in arms:
            ratios[arm] = {m: median[arm][m] / median["tcp"][m] for m in METRICS}
    return median, ratios


def markdown_table(median, ratios):
    lines = ["| sink | frames/s (steady) | frames/s (wall) | frames/s (producer) | "
             "server CPU ms/frame | frames/s vs raw TCP | CPU/frame vs raw TCP |",
             "|---|---|---|---|---|---|---|"]
    for arm, row in median.items():
        r = ratios.get(arm)
        lines.append(f"| {LABELS.get(arm, arm)} | {row['fps_steady']:.1f} | {row['fps_wall']:.1f} | "
                     f"{row['fps_producer']:.1f} | {row['server_cpu_ms_per_frame']:.3f} | "
                     + (f"{r['fps_steady']:.2f}x | {r['server_cpu_ms_per_frame']:.2f}x |" if r
                        else "- | - |"))
    return "\n".join(lines)


def targets(median, ratios):
    """The issue's targets for syncd against the best peer (by frames/s) in the same run."""
    peers = [a for a in median if a not in ("tcp", "syncd")]
    if "syncd" not in median or not peers:
        return None
    best = max(peers, key=lambda a: median[a]["fps_steady"])
    best_cpu = min(peers, key=lambda a: median[a]["server_cpu_ms_per_frame"])
    s = median["syncd"]
    out = {
        "best_peer_by_fps": best,
        "best_peer_by_cpu": best_cpu,
        "syncd_fps_over_best_peer": s["fps_steady"] / median[best]["fps_steady"],
        "syncd_wall_fps_over_best_peer": s["fps_wall"] / median[best]["fps_wall"],
        "syncd_cpu_over_best_peer_cpu": (s["server_cpu_ms_per_frame"] /
                                         median[best_cpu]["server_cpu_ms_per_frame"]),
    }
    if "tcp" in ratios:
        out["syncd_fps_over_tcp"] = ratios["syncd"]["fps_steady"]
    out["fps_at_least_best_peer"] = out["syncd_fps_over_best_peer"] >= 1.0
    out["fps_at_least_0.9x_tcp"] = out.get("syncd_fps_over_tcp", 0) >= 0.9
    out["cpu_at_most_0.9x_best_peer"] = out["syncd_cpu_over_best_peer_cpu"] <= 0.9
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--frames", type=int, default=300, help="frames per arm and round")
    ap.add_argument("--warmup-frames", type=int, default=30,
                    help="frames before CPU per frame starts counting, for every sink alike")
    ap.add_argument("--fps", type=float, default=0, help="producer rate; 0 = as fast as taken")
    ap.add_argument("--width", type=int, default=1920)
    ap.add_argument("--height", type=int, default=1080)
    ap.add_argument("--arms", default=",".join(DEFAULT_ARMS),
                    help=f"comma-separated subset of {','.join(ALL_ARMS)} (default all)")
    ap.add_argument("--build-dir", default="build/release",
                    help="build tree configured with -DSYNC_BUILD_PEERS=ON")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--markdown", help="write the table as markdown here")
    args = ap.parse_args(argv)
    args.arm_list = [a.strip() for a in args.arms.split(",") if a.strip()]
    bad = [a for a in args.arm_list if a not in ALL_ARMS]
    if bad or not args.arm_list:
        ap.error(f"unknown arms {bad}; choose from {ALL_ARMS}")
    return args


def main(argv):
    args = parse_args(argv)
    paths = resolve_paths(args.build_dir)
    try:
        check_environment(args.arm_list, paths)
        runs = []
        for i in range(args.rounds):
            order = args.arm_list if i % 2 == 0 else list(reversed(args.arm_list))
            results = {}
            for arm in order:
                r = run_arm(arm, args, paths)
                results[arm] = r
                print(f"round {i + 1} {arm:12} fps_steady {r['fps_steady']:7.1f}  "
                      f"fps_wall {r['fps_wall']:7.1f}  fps_producer "
                      f"{r['fps_producer']:7.1f}  server CPU {r['server_cpu_ms_per_frame']:.3f} "
                      f"ms/frame", flush=True)
            runs.append(results)
    except BenchError as e:
        print(f"bench/peers/run.py: {e}", file=sys.stderr)
        return 1
    median, ratios = summarize(runs, args.arm_list)
    table = markdown_table(median, ratios)
    verdict = targets(median, ratios)
    print(f"\n{args.width}x{args.height} rgba8 at max rate, {args.frames} frames per arm, median "
          f"of {args.rounds} round(s); sinks on core {bench_ingest.SERVER_CORE}, producer on "
          f"core {bench_ingest.PRODUCER_CORE}\n")
    print(table)
    if verdict:
        print("\n" + json.dumps(verdict, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    if args.out:
        report = {
            "benchmark": "peers",
            "command": " ".join(["bench/peers/run.py"] + argv),
            "width": args.width, "height": args.height, "frames": args.frames,
            "rounds": args.rounds, "arms": args.arm_list,
            "host": {"kernel": platform.release(), "cpus": os.cpu_count(),
                     "loadavg_at_end": os.getloadavg()},
            "median": median, "ratio_to_tcp": ratios, "targets": verdict, "runs": runs,
        }
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
