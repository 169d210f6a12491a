#!/usr/bin/env python3
"""The camera arm's consumer: GStreamer's pipewiresrc on syncd's camera node, as OBS or a browser
would take it, recording every frame like sync-shm-reader does.

Each frame's sequence is the producer's, which syncd's camera writes into the PipeWire buffer
header (`spa_meta_header.seq`, the buffer's offset in GStreamer), and its publish stamp is the
header's pts: the frame's accept time in syncd (CLOCK_MONOTONIC, PipeWire's clock). So the
analyzer bins the frames by their arrival at syncd and measures accept -> consumer latency, as
for a shared-memory reader. The pixels are converted (RGBA -> I420), so this consumer checks no
content; the camera's tests check the markers drawn in the pixels (test_camera_pipewire.py).

Writes --events as `sequence,publish_ns,read_ns` and prints a JSON summary as its last stdout
line, with the keys sync-shm-reader's summary has (frames_read, unique_fps_per_second, skipped,
torn, verify_failures), plus caps and first_sequence. verify_failures counts frames that carried
no sequence. Runs in the PipeWire session its environment names (tests/integration/
pipewire_session.py sets it up). Exit status 0 when frames were read, 1 when none came.
"""
import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "integration"))
import pipewire_session  # noqa: E402  (the tests' session and consumer, shared)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="the camera node's name (--camera-name)")
    ap.add_argument("--seconds", type=float, required=True, help="from the first frame")
    ap.add_argument("--events", required=True, help="CSV of every frame read")
    ap.add_argument("--caps", default="video/x-raw,format=I420",
                    help="what the consumer asks for (I420: what Chromium takes)")
    ap.add_argument("--first-frame-timeout", type=float, default=15.0)
    args = ap.parse_args(argv)

    events = []
    r = pipewire_session.count_frames(args.target, args.seconds, caps=args.caps,
                                      first_frame_timeout=args.first_frame_timeout,
                                      decode=pipewire_session.read_buffer_offset, events=events)
    with open(args.events, "w") as f:
        f.write("sequence,publish_ns,read_ns\n")
        for sequence, publish_ns, read_ns in events:
            # A frame without a stamp cannot be binned by latency; none is expected from syncd.
            if publish_ns is not None:
                f.write(f"{sequence},{publish_ns},{read_ns}\n")
    summary = {
        "frames_read": r["frames"],
        "unique": r["unique"],
        "unique_fps_per_second": r["unique_per_second"],
        "skipped": r["gaps"],
        "repeats": r["repeats"],
        "torn": 0,  # PipeWire hands a consumer whole buffers
        "verify_failures": r["corrupt"],
        "first_sequence": r["first_sequence"],
        "first_frame_s": r["first_frame_s"],
        "caps": r["caps"],
        "seconds": args.seconds,
        "latency_p50_ms": r.get("latency_p50_ms"),
        "latency_p99_ms": r.get("latency_p99_ms"),
    }
    print(json.dumps(summary), flush=True)
    return 0 if r["frames"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
