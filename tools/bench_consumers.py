#!/usr/bin/env python3
"""Consumers that stop reading, against ingest (docs/benchmarks.md, "Stalled consumers").

a) A producer's accepted frames/s at max rate (1080p RGBA, --fps 0), with no consumers and with
   two stalled HTTP stream receivers and two stalled WebSocket clients attached (staggered, so
   the receivers pin different frames), alternating arms in one run; ratio of medians and of
   each round's pair.
b) syncd's resident memory with 50 stalled WebSocket clients that each pipeline 2,000 stats
   requests, against its frame pool bytes.

Usage: tools/bench_consumers.py [--rounds 3] [--frames 600] [--clients 50]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (Child, get_stats, port_from_line, rss_bytes,  # noqa: E402
                          stalled_http_receiver, stalled_ws_client)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build", "release")
SYNCD = os.path.join(BUILD, "src", "daemon", "syncd")
PRODUCER = os.path.join(BUILD, "tools", "producer", "sync-producer")


def start_syncd(*args):
    syncd = Child("syncd", [SYNCD, "--port", "0", "--status-line", "off", "--publisher", "test",
                            *args])
    return syncd, port_from_line(syncd.first_stdout_line(10), "syncd")


def wait_file(path, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path):
            return open(path).read().strip()
        time.sleep(0.02)
    raise RuntimeError(f"no {path}")


def ingest_round(frames, stalled):
    # No write timeout: the output limits alone protect ingest.
    syncd, port = start_syncd("--write-timeout-ms", "0")
    sockets = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ticket_path = os.path.join(tmp, "ticket")
            producer = Child("producer", [PRODUCER, "--url", f"ws://127.0.0.1:{port}/ws",
                                          "--stream", "main", "--fps", "0", "--frames",
                                          str(frames), "--slots", "4", "--ticket-file",
                                          ticket_path, "--ticket-uses", "2", "--quiet"])
            ticket = wait_file(ticket_path)
            if stalled:
                sockets.append(stalled_http_receiver(port, "main", ticket))
                time.sleep(0.2)
                sockets.append(stalled_http_receiver(port, "main", ticket))
                sockets += [stalled_ws_client(port) for _ in range(2)]
            if producer.wait(300) != 0:
                raise RuntimeError("producer failed: " + producer.stderr_tail())
            summary = producer.last_json()
        stats = get_stats(port)
        s = next(x for x in stats["streams"] if x["name"] == "main")
        return {"producer_fps": summary["fps"], "accepted": s["frames_accepted"],
                "offered": s["frames_offered"], "dropped": s["frames_dropped"],
                "accepted_fps": summary["fps"] * s["frames_accepted"] / max(s["frames_offered"], 1)}
    finally:
        for sock in sockets:
            sock.close()
        syncd.kill()


def memory_arm(clients):
    syncd, port = start_syncd()
    sockets = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ticket_path = os.path.join(tmp, "ticket")
            producer = Child("producer", [PRODUCER, "--url", f"ws://127.0.0.1:{port}/ws",
                                          "--stream", "main", "--fps", "60", "--seconds", "8",
                                          "--slots", "4", "--ticket-file", ticket_path,
                                          "--quiet"])
            wait_file(ticket_path)
            base = rss_bytes(syncd.pid)
            sockets = [stalled_ws_client(port) for _ in range(clients)]
            time.sleep(2)
            stats = get_stats(port)
            rss = rss_bytes(syncd.pid)
            producer.wait(60)
        return {"clients": clients, "rss_bytes": rss, "rss_before_clients_bytes": base,
                "pool_bytes": stats["process"]["pool_bytes"],
                "output_queued_bytes": stats["server"]["output_queued_bytes"],
                "reads_paused_for_output": stats["server"]["reads_paused_for_output"],
                "rss_over_pool_mib": (rss - stats["process"]["pool_bytes"]) / 2**20}
    finally:
        for sock in sockets:
            sock.close()
        syncd.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--clients", type=int, default=50)
    args = ap.parse_args()
    rounds = []
    for i in range(args.rounds):
        base = ingest_round(args.frames, False)
        stalled = ingest_round(args.frames, True)
        rounds.append({"baseline": base, "stalled": stalled,
                       "ratio": stalled["accepted_fps"] / base["accepted_fps"]})
        print(f"round {i + 1}: accepted fps {base['accepted_fps']:.1f} alone, "
              f"{stalled['accepted_fps']:.1f} with stalled consumers "
              f"(ratio {rounds[-1]['ratio']:.3f}; dropped {stalled['dropped']})", file=sys.stderr)
    med_base = statistics.median(r["baseline"]["accepted_fps"] for r in rounds)
    med_stalled = statistics.median(r["stalled"]["accepted_fps"] for r in rounds)
    memory = memory_arm(args.clients)
    print(f"memory: {args.clients} stalled clients, rss {memory['rss_bytes'] / 2**20:.1f} MiB, "
          f"pool {memory['pool_bytes'] / 2**20:.1f} MiB, over pool "
          f"{memory['rss_over_pool_mib']:.1f} MiB", file=sys.stderr)
    print(json.dumps({"rounds": rounds, "accepted_fps_median_baseline": med_base,
                      "accepted_fps_median_stalled": med_stalled,
                      "ratio_of_medians": med_stalled / med_base,
                      "paired_ratios": [r["ratio"] for r in rounds], "memory": memory}))


if __name__ == "__main__":
    main()
