#!/usr/bin/env python3
"""HTTP stream to receivers benchmark (issue 6): 1080p frames from the native producer through
syncd to the native HTTP stream receiver, paced and at max rate, the latter against a raw TCP
relay measured in the same run.

Pinning (2 cores): the server process (syncd, or sync-tcp-relay) on core 0; the producer and the
receiver (sync-stream-receiver, or sync-tcp-sink) together on core 1.

  a) paced:  syncd --publisher test (core 0)
             sync-producer --fps 60 --seconds S --ticket-file T (core 1)
             sync-stream-receiver --ticket-file T (core 1)
     Reports unique pairs/s per complete second of receive time and low-rate seconds (< 50), the
     receiver's drops as syncd counts them (/stats publishers.http.receivers) and verify
     failures. Target: 60.0 with zero low-rate seconds.

  b) max rate, interleaved rounds (relay then syncd, then syncd then relay, ...), N frames each:
       "syncd":  sync-producer --fps 0 -> syncd -> sync-stream-receiver
       "relay":  sync-producer --raw-tcp -> sync-tcp-relay -> sync-tcp-sink
     Both final consumers read every frame straight into one buffer and XXH3-verify it. syncd
     runs with no verifying publisher here (--publisher ''), so that it does what the relay does:
     take a frame in, write it out. Reports delivered frames/s at the final consumer (first byte
     to last frame), the ratio syncd/relay (target >= 0.9) and the server's CPU ms per delivered
     frame (utime+stime of syncd or the relay from /proc/PID/stat over the producer's run).
     syncd may drop frames for the receiver (newest wins, under credit); the relay cannot (TCP
     backpressure reaches the producer). Delivered frames/s is the figure both arms share.

Prints a live line (on a TTY) and tables; --out writes everything as JSON.
Exit status: 0 when the run completed (targets are reported, not enforced), 1 on a failed run.
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
import tempfile
import time
from pathlib import Path

from bench_common import (CLOCK_TICKS_PER_SECOND, BenchError, Child, cpu_ticks, find_stream,
                          http_get_json, pinned, port_from_line)

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVER_CORE = 0
CLIENT_CORE = 1


def start_syncd(paths, publishers, max_frames):
    syncd = Child("syncd", pinned(SERVER_CORE, [
        str(paths["syncd"]), "--port", "0", "--publisher", publishers, "--status-line", "off",
        "--receiver-max-frames", str(max_frames),
    ]))
    first = syncd.first_stdout_line(10)
    if not first.startswith("syncd listening on"):
        syncd.kill()
        raise BenchError(f"unexpected first line from syncd: {first!r}")
    return syncd, port_from_line(first, "syncd")


def stop_syncd(syncd):
    syncd.proc.send_signal(signal.SIGTERM)
    code = syncd.wait(10)
    if code != 0:
        raise BenchError(f"syncd exited with {code} on SIGTERM: {syncd.stderr_tail()}")


def receiver_account(port, stream_name):
    """syncd's account of the (single) receiver of a stream, once the stream has closed."""
    deadline = time.monotonic() + 10
    stream = None
    while time.monotonic() < deadline:
        stream = find_stream(http_get_json(f"http://127.0.0.1:{port}/stats"), stream_name)
        receivers = (stream or {}).get("publishers", {}).get("http", {}).get("receivers", [])
        if stream and not stream.get("open", True) and receivers and \
                not any(r.get("live") for r in receivers):
            return stream, receivers[-1]
        time.sleep(0.05)
    raise BenchError(f"syncd shows no departed receiver for {stream_name}: "
                     f"{json.dumps(stream)[:400]}")


def run_syncd_pipeline(args, paths, *, publishers, stream_name, producer_args, receiver_args,
                       live=False):
    """syncd + producer (--ticket-file) + stream receiver. Returns (receiver summary, producer
    summary, syncd stream stats, syncd receiver account, syncd CPU ms, wall start)."""
    syncd, port = start_syncd(paths, publishers, args.receiver_max_frames)
    producer = receiver = None
    with tempfile.TemporaryDirectory(prefix="bench_stream.") as tmp:
        ticket = os.path.join(tmp, "ticket")
        try:
            # The receiver first: it holds its control connection open and polls for the ticket.
            receiver = Child("sync-stream-receiver", pinned(CLIENT_CORE, [
                str(paths["receiver"]), "--url", f"http://127.0.0.1:{port}",
                "--stream", stream_name, "--ticket-file", ticket, "--quiet",
                "--credit", str(args.credit),
                "--receive-buffer-kb", str(args.receive_buffer_kb), *receiver_args,
            ]))
            ticks_before = cpu_ticks(syncd.pid)
            start_ns = time.monotonic_ns()
            producer = Child("sync-producer", pinned(CLIENT_CORE, [
                str(paths["producer"]), "--url", f"ws://127.0.0.1:{port}/ws",
                "--stream", stream_name, "--width", str(args.width), "--height",
                str(args.height), "--ticket-file", ticket, "--quiet", *producer_args,
            ]))
            if live:
                watch_paced(args, port, stream_name, producer)
            code = producer.wait(args.timeout)
            if code != 0:
                raise BenchError(f"sync-producer exited with {code}: {producer.stderr_tail()}")
            code = receiver.wait(30)
            ticks_after = cpu_ticks(syncd.pid)
            if code not in (0, 4):
                raise BenchError(f"sync-stream-receiver exited with {code}: "
                                 f"{receiver.stderr_tail()}")
            rsum = receiver.last_json()
            psum = producer.last_json()
            stream, account = receiver_account(port, stream_name)
            stop_syncd(syncd)
        finally:
            for child in (producer, receiver, syncd):
                if child:
                    child.kill()
    cpu_ms = (ticks_after - ticks_before) * 1000.0 / CLOCK_TICKS_PER_SECOND
    return rsum, psum, stream, account, cpu_ms, start_ns


def watch_paced(args, port, stream_name, producer):
    """Live line while the paced producer runs (only on a TTY)."""
    if not sys.stderr.isatty():
        return
    start = time.monotonic()
    while producer.proc.poll() is None:
        time.sleep(1)
        try:
            s = find_stream(http_get_json(f"http://127.0.0.1:{port}/stats"), stream_name)
        except OSError:
            continue
        if not s:
            continue
        recs = s.get("publishers", {}).get("http", {}).get("receivers", [])
        rec = recs[-1] if recs else {}
        print(f"\r{time.monotonic() - start:6.0f}s  ingest fps {s.get('last_second_unique_fps')}"
              f"  receiver sent {rec.get('sent', 0)}  dropped {rec.get('dropped_total', 0)}",
              end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# a) paced

def run_paced(args, paths):
    rsum, psum, stream, account, cpu_ms, _ = run_syncd_pipeline(
        args, paths, publishers="test", stream_name="paced",
        producer_args=["--fps", str(args.fps), "--seconds", str(args.seconds), "--realtime"],
        receiver_args=[], live=True)
    per_second = rsum["per_second_unique_fps"]
    accounting_ok = account["offered"] == account["completed"] + account["dropped_total"] + \
        account["pending"] + account["in_flight"]
    return {
        "size": f"{args.width}x{args.height}",
        "nominal_fps": args.fps,
        "seconds": args.seconds,
        "credit": args.credit,
        "receiver_max_frames": args.receiver_max_frames,
        "frames_sent": psum["frames_sent"],
        "frames_received": rsum["frames"],
        "complete_seconds": rsum["complete_seconds"],
        "unique_pairs_per_s": rsum["mean_unique_fps"],
        "min_second_unique_fps": rsum["min_second_unique_fps"],
        "max_second_unique_fps": rsum["max_second_unique_fps"],
        "low_rate_seconds": rsum["low_rate_seconds"],
        "receiver_drops_syncd": account["dropped"],
        "receiver_dropped_total_syncd": account["dropped_total"],
        "receiver_dropped_reported_in_records": rsum["dropped_reported"],
        "accounting_ok": accounting_ok,
        "verify_failures_receiver": rsum["verify_failures"],
        "hash_failures_receiver": rsum["hash_failures"],
        "frames_verify_failed_syncd": stream.get("frames_verify_failed"),
        "frames_dropped_ingest_syncd": stream.get("frames_dropped_total"),
        "latency_ms_mean": rsum["latency_ms_mean"],
        "latency_ms_max": rsum["latency_ms_max"],
        "syncd_cpu_ms_per_frame": cpu_ms / max(1, rsum["frames"]),
        "ack_stage_us_max": account["stages"]["ack"]["max_us"],
        "write_complete_stage_us_max": account["stages"]["write_complete"]["max_us"],
        "per_second_unique_fps": per_second,
        "receiver": rsum,
        "syncd_receiver_account": account,
    }


def print_paced(p):
    print(f"\na) paced {p['size']} at {p['nominal_fps']:g} fps for {p['seconds']} s: syncd on core "
          f"{SERVER_CORE}; producer and receiver on core {CLIENT_CORE}; receiver credit "
          f"{p['credit']}, syncd --receiver-max-frames {p['receiver_max_frames']}")
    print(f"  unique pairs/s (mean of {p['complete_seconds']} complete seconds) "
          f"{p['unique_pairs_per_s']:.2f}  (min {p['min_second_unique_fps']}, "
          f"max {p['max_second_unique_fps']})")
    print(f"  low-rate seconds (< 50)         {p['low_rate_seconds']}")
    print(f"  frames sent / received          {p['frames_sent']} / {p['frames_received']}")
    print(f"  receiver drops (syncd)          {p['receiver_dropped_total_syncd']} "
          f"{json.dumps(p['receiver_drops_syncd'])}; in records {p['receiver_dropped_reported_in_records']}"
          f"; accounting {'exact' if p['accounting_ok'] else 'BROKEN'}")
    print(f"  verify failures                 receiver {p['verify_failures_receiver']}, "
          f"syncd {p['frames_verify_failed_syncd']}")
    print(f"  latency publish->received       mean {p['latency_ms_mean']:.2f} ms, "
          f"max {p['latency_ms_max']:.2f} ms")
    target = p["unique_pairs_per_s"] >= 60.0 - 1e-9 and p["low_rate_seconds"] == 0
    print(f"  target 60.0 with zero low-rate seconds: {'met' if target else 'MISSED'}")


# ---------------------------------------------------------------------------------------------
# b) max rate

def run_max_syncd(args, paths):
    rsum, psum, stream, account, cpu_ms, start_ns = run_syncd_pipeline(
        args, paths, publishers="", stream_name="max",
        producer_args=["--fps", "0", "--frames", str(args.frames)], receiver_args=[])
    if psum["frames_sent"] != args.frames:
        raise BenchError(f"sync-producer sent {psum['frames_sent']} of {args.frames} frames")
    if rsum["verify_failures"]:
        raise BenchError(f"receiver verify failures: {json.dumps(rsum)[:400]}")
    frames = rsum["frames"]
    return {
        "fps_delivered": rsum["fps"],
        "fps_wall": frames / ((rsum["last_frame_monotonic_ns"] - start_ns) / 1e9),
        "fps_producer": psum["fps"],
        "frames_delivered": frames,
        "frames_sent": psum["frames_sent"],
        "server_cpu_ms_per_frame": cpu_ms / max(1, frames),
        # syncd also took in the frames it then dropped for the receiver: per frame taken in.
        "server_cpu_ms_per_frame_in": cpu_ms / max(1, psum["frames_sent"]),
        "receiver_cpu_ms_per_frame": rsum["cpu_ms_per_frame"],
        "dropped_for_receiver": account["dropped_total"],
        "offered_to_receiver": account["offered"],
    }


def run_max_relay(args, paths):
    sink = relay = producer = None
    try:
        sink = Child("sync-tcp-sink", pinned(CLIENT_CORE, [
            str(paths["sink"]), "--port", "0", "--width", str(args.width),
            "--height", str(args.height),
        ]))
        sink_port = port_from_line(sink.first_stdout_line(10), "sync-tcp-sink")
        relay = Child("sync-tcp-relay", pinned(SERVER_CORE, [
            str(paths["relay"]), "--port", "0", "--to", f"127.0.0.1:{sink_port}",
            "--width", str(args.width), "--height", str(args.height),
            "--send-buffer-kb", str(args.relay_send_buffer_kb),
        ]))
        relay_port = port_from_line(relay.first_stdout_line(10), "sync-tcp-relay")
        start_ns = time.monotonic_ns()
        producer = Child("sync-producer", pinned(CLIENT_CORE, [
            str(paths["producer"]), "--raw-tcp", f"127.0.0.1:{relay_port}", "--fps", "0",
            "--frames", str(args.frames), "--width", str(args.width),
            "--height", str(args.height), "--quiet",
        ]))
        code = producer.wait(args.timeout)
        if code != 0:
            raise BenchError(f"sync-producer exited with {code}: {producer.stderr_tail()}")
        # The relay exits at the producer's EOF; its CPU is its own getrusage() from accept() on,
        # the same span the syncd arm's /proc sampling covers.
        code = relay.wait(30)
        if code != 0:
            raise BenchError(f"sync-tcp-relay exited with {code}: {relay.stderr_tail()}")
        relay_sum = relay.last_json()
        code = sink.wait(30)
        if code != 0:
            raise BenchError(f"sync-tcp-sink exited with {code}: {sink.stderr_tail()}")
        sink_sum = sink.last_json()
        psum = producer.last_json()
    finally:
        for child in (producer, relay, sink):
            if child:
                child.kill()
    if sink_sum["frames"] != args.frames or sink_sum["hash_failures"] or sink_sum["seq_gaps"]:
        raise BenchError(f"tcp sink: {json.dumps(sink_sum)[:400]}")
    return {
        "fps_delivered": sink_sum["fps"],
        "fps_wall": args.frames / ((sink_sum["last_frame_monotonic_ns"] - start_ns) / 1e9),
        "fps_producer": psum["fps"],
        "frames_delivered": sink_sum["frames"],
        "frames_sent": psum["frames_sent"],
        "server_cpu_ms_per_frame": relay_sum["cpu_ms_per_frame"],
        "server_cpu_ms_per_frame_in": relay_sum["cpu_ms_per_frame"],
        "receiver_cpu_ms_per_frame": sink_sum["cpu_ms_per_frame"],
        "dropped_for_receiver": 0,
        "offered_to_receiver": sink_sum["frames"],
    }


MAX_ARMS = {"relay": run_max_relay, "syncd": run_max_syncd}
MAX_METRICS = ("fps_delivered", "fps_wall", "fps_producer", "server_cpu_ms_per_frame",
               "server_cpu_ms_per_frame_in", "receiver_cpu_ms_per_frame")


def run_max(args, paths):
    runs = []
    arms = ["relay", "syncd"]
    for i in range(args.rounds):
        order = arms if i % 2 == 0 else list(reversed(arms))
        results = {}
        for arm in order:
            r = MAX_ARMS[arm](args, paths)
            results[arm] = r
            print(f"round {i + 1} {arm:5}  delivered {r['fps_delivered']:6.1f} frames/s  "
                  f"({r['frames_delivered']}/{r['frames_sent']} frames)  server CPU "
                  f"{r['server_cpu_ms_per_frame']:.3f} ms/frame", flush=True)
        runs.append(results)
    median = {arm: {m: statistics.median(r[arm][m] for r in runs) for m in MAX_METRICS}
              for arm in arms}
    ratio = {m: median["syncd"][m] / median["relay"][m] for m in MAX_METRICS
             if median["relay"][m]}
    return {"median": median, "ratio_syncd_over_relay": ratio, "runs": runs}


def print_max(args, m):
    print(f"\nb) max rate {args.width}x{args.height} rgba8, {args.frames} frames per arm, median of "
          f"{args.rounds} interleaved round(s); server (syncd / relay) on core {SERVER_CORE}, "
          f"producer and receiver (stream receiver / tcp sink) on core {CLIENT_CORE}; receiver "
          f"credit {args.credit}, syncd --receiver-max-frames {args.receiver_max_frames}")
    header = (f"{'':12} {'delivered f/s':>14} {'wall f/s':>10} {'producer f/s':>13} "
              f"{'server CPU ms/delivered':>24} {'ms/frame in':>12} {'receiver CPU ms/f':>18}")
    print(header)
    print("-" * len(header))
    for arm in ("relay", "syncd"):
        row = m["median"][arm]
        print(f"{arm:12} {row['fps_delivered']:14.1f} {row['fps_wall']:10.1f} "
              f"{row['fps_producer']:13.1f} {row['server_cpu_ms_per_frame']:24.3f} "
              f"{row['server_cpu_ms_per_frame_in']:12.3f} {row['receiver_cpu_ms_per_frame']:18.3f}")
    r = m["ratio_syncd_over_relay"]
    print(f"{'syncd/relay':12} {r['fps_delivered']:13.2f}x {r['fps_wall']:9.2f}x "
          f"{r['fps_producer']:12.2f}x {r['server_cpu_ms_per_frame']:23.2f}x "
          f"{r['server_cpu_ms_per_frame_in']:11.2f}x {r['receiver_cpu_ms_per_frame']:17.2f}x")
    print(f"  target delivered ratio >= 0.9: {'met' if r['fps_delivered'] >= 0.9 else 'MISSED'}")


# ---------------------------------------------------------------------------------------------

def resolve_paths(build_dir):
    build = Path(build_dir)
    if not build.is_absolute() and not build.exists():
        build = REPO_ROOT / build
    return {
        "syncd": build / "src" / "daemon" / "syncd",
        "producer": build / "tools" / "producer" / "sync-producer",
        "receiver": build / "tools" / "stream_receiver" / "sync-stream-receiver",
        "relay": build / "tools" / "tcp_relay" / "sync-tcp-relay",
        "sink": build / "tools" / "tcp_sink" / "sync-tcp-sink",
    }


def check_environment(paths):
    for key, path in paths.items():
        if not os.access(path, os.X_OK):
            raise BenchError(f"{path} not found; build first")
    if shutil.which("taskset") is None:
        raise BenchError("taskset (util-linux) is needed to pin the processes")
    cores = os.sched_getaffinity(0)
    if not {SERVER_CORE, CLIENT_CORE} <= cores:
        raise BenchError(f"needs cores {SERVER_CORE} and {CLIENT_CORE}; allowed: {sorted(cores)}")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=("paced", "max"), help="run one benchmark (default both)")
    p.add_argument("--seconds", type=int, default=120, help="paced run length (default 120)")
    p.add_argument("--fps", type=float, default=60, help="paced rate (default 60)")
    p.add_argument("--rounds", type=int, default=3, help="max-rate A/B rounds (default 3)")
    p.add_argument("--frames", type=int, default=300, help="max-rate frames per arm and round")
    p.add_argument("--width", type=int, default=1920)
    p.add_argument("--height", type=int, default=1080)
    p.add_argument("--build-dir", default="build/release")
    p.add_argument("--credit", type=int, default=2,
                   help="the receiver's initial credit (default 2, the protocol's default)")
    p.add_argument("--receiver-max-frames", type=int, default=2,
                   help="syncd --receiver-max-frames, the source byte limit (default 2)")
    p.add_argument("--receive-buffer-kb", type=int, default=4096,
                   help="the stream receiver's SO_RCVBUF (default 4096 as sync-tcp-sink; 0 = "
                        "kernel autotuning)")
    p.add_argument("--relay-send-buffer-kb", type=int, default=4096,
                   help="the relay's SO_SNDBUF towards the sink (default 4096, as the producer "
                        "and sink use; 0 = kernel autotuning, as syncd's stream sockets)")
    p.add_argument("--timeout", type=float, default=0,
                   help="seconds a producer run may take (default: paced length + 60)")
    p.add_argument("--out", help="also write the results as JSON here")
    args = p.parse_args(argv)
    if args.seconds < 3 or args.rounds < 1 or args.frames < 1:
        p.error("--seconds must be at least 3; --rounds and --frames positive")
    if not args.timeout:
        args.timeout = args.seconds + 60
    return args


def main(argv):
    args = parse_args(argv)
    paths = resolve_paths(args.build_dir)
    report = {
        "benchmark": "stream",
        "command": " ".join([Path(sys.argv[0]).name] + argv),
        "cores": {"server": SERVER_CORE, "producer_and_receiver": CLIENT_CORE},
        "host": {"kernel": platform.release(), "cpus": os.cpu_count()},
        # The cores are shared with other work; the load average says how much there was.
        "loadavg_start": os.getloadavg(),
    }
    try:
        check_environment(paths)
        if args.only in (None, "paced"):
            report["paced"] = run_paced(args, paths)
        if args.only in (None, "max"):
            report["max_rate"] = run_max(args, paths)
    except BenchError as e:
        print(f"bench_stream: {e}", file=sys.stderr)
        return 1
    report["loadavg_end"] = os.getloadavg()
    print(f"\nload average (1/5/15 min) at start {report['loadavg_start'][0]:.2f}/"
          f"{report['loadavg_start'][1]:.2f}/{report['loadavg_start'][2]:.2f}, at end "
          f"{report['loadavg_end'][0]:.2f}/{report['loadavg_end'][1]:.2f}/"
          f"{report['loadavg_end'][2]:.2f} ({os.cpu_count()} CPUs)")
    if "paced" in report:
        print_paced(report["paced"])
    if "max_rate" in report:
        print_max(args, report["max_rate"])
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
