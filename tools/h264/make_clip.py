#!/usr/bin/env python3
"""Makes an H.264 test clip for encoded streams (format h264) and the WAN relay's tests.

Draws W x H I420 frames (a moving gradient and bar, so the encoder has real work) with each
frame's index in a marker of coarse blocks that survives compression (MARKER_BITS bits, one
block of BLOCK x BLOCK luma each, black or white, in the top-left corner, with a parity block),
and encodes them with Debian's x264 as the relay would see them from a live encoder: no
B-frames, zero-latency tuning, a key frame every --keyint frames, constant bitrate with a
one-frame VBV, and an access unit delimiter before every access unit (--aud), which
sync-producer --h264 splits the stream at.

With --column-marker each frame also carries syncd's column marker (src/media/column_marker.h:
the sequence's low 16 bits as 8-pixel columns down the whole frame, then a black guard column)
for the sequence a producer numbering from 1 gives it (frame i: i + 1), so syncd's test
publisher verifies the frames that its decoder made of the clip.

Usage: tools/h264/make_clip.py --out clip.264 --width 1280 --height 720 --fps 60 --frames 600
       [--bitrate 8000] [--keyint 60] [--preset ultrafast] [--column-marker]
Prints a JSON summary (frames, bytes, mean and max access unit bytes, encode seconds).
numpy (python3-numpy) and x264 (Debian package x264).
"""
import argparse
import json
import shutil
import subprocess
import sys
import time

import numpy as np

MARKER_BITS = 16
BLOCK = 16


def marker_blocks(index):
    """The marker's block values for a frame index: MARKER_BITS bits, most significant first,
    then even parity; True is white."""
    bits = [(index >> (MARKER_BITS - 1 - i)) & 1 for i in range(MARKER_BITS)]
    return [bool(b) for b in bits] + [bool(sum(bits) & 1)]


def read_marker(luma, width):
    """The frame index in a decoded luma plane (2-D array), or None when the parity fails."""
    blocks = []
    for i in range(MARKER_BITS + 1):
        x = i * BLOCK
        centre = luma[BLOCK // 4:BLOCK - BLOCK // 4, x + BLOCK // 4:x + BLOCK - BLOCK // 4]
        blocks.append(float(centre.mean()) > 128)
    bits, parity = blocks[:MARKER_BITS], blocks[MARKER_BITS]
    if (sum(bits) & 1) != parity:
        return None
    return sum(int(b) << (MARKER_BITS - 1 - i) for i, b in enumerate(bits))


COLUMN = 8  # the column marker's column width (src/media/column_marker.h)


def frame_i420(index, width, height, column_marker=False):
    y = np.add.outer(np.arange(height, dtype=np.uint32),
                     np.arange(width, dtype=np.uint32) + index * 4) % 220 + 16
    y = y.astype(np.uint8)
    bar = (index * 8) % width
    y[:, bar:bar + max(4, width // 64)] = 235
    for i, white in enumerate(marker_blocks(index)):
        y[0:BLOCK, i * BLOCK:(i + 1) * BLOCK] = 235 if white else 16
    if column_marker:
        sequence = (index + 1) & 0xFFFF
        for bit in range(MARKER_BITS + 1):  # the last column is the black guard
            white = bit < MARKER_BITS and (sequence >> bit) & 1
            y[:, bit * COLUMN:(bit + 1) * COLUMN] = 235 if white else 16
    cw, ch = width // 2, height // 2
    u = np.full((ch, cw), 128, np.uint8)
    v = (np.add.outer(np.arange(ch), np.arange(cw) + index) % 128 + 64).astype(np.uint8)
    return y.tobytes() + u.tobytes() + v.tobytes()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--fps", type=int, default=60)
    ap.add_argument("--frames", type=int, default=600)
    ap.add_argument("--bitrate", type=int, default=8000, help="kbit/s")
    ap.add_argument("--keyint", type=int, default=60)
    ap.add_argument("--preset", default="ultrafast")
    ap.add_argument("--column-marker", action="store_true",
                    help="draw syncd's column marker of sequence i + 1 into frame i")
    args = ap.parse_args(argv)
    if args.width % 2 or args.height % 2 or args.width < (MARKER_BITS + 1) * BLOCK:
        ap.error(f"width and height must be even, width at least {(MARKER_BITS + 1) * BLOCK}")
    if args.frames > 1 << MARKER_BITS:
        ap.error(f"at most {1 << MARKER_BITS} frames: the marker has {MARKER_BITS} bits")
    if not shutil.which("x264"):
        print("make_clip.py: x264 is not installed (Debian package x264)", file=sys.stderr)
        return 2
    vbv = max(1, args.bitrate // args.fps)  # one frame's worth: a live, low-latency encoder
    cmd = ["x264", "--quiet", "--demuxer", "raw", "--input-csp", "i420",
           "--input-res", f"{args.width}x{args.height}", "--fps", str(args.fps),
           "--preset", args.preset, "--tune", "zerolatency", "--bframes", "0",
           "--keyint", str(args.keyint), "--min-keyint", str(args.keyint), "--no-scenecut",
           "--bitrate", str(args.bitrate), "--vbv-maxrate", str(args.bitrate),
           "--vbv-bufsize", str(vbv), "--aud", "--threads", "1", "-o", args.out, "-"]
    t0 = time.monotonic()
    enc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    for i in range(args.frames):
        enc.stdin.write(frame_i420(i, args.width, args.height, args.column_marker))
    enc.stdin.close()
    err = enc.stderr.read().decode(errors="replace")
    if enc.wait() != 0:
        print(f"make_clip.py: x264 failed: {err}", file=sys.stderr)
        return 1
    seconds = time.monotonic() - t0
    data = open(args.out, "rb").read()
    # Access units start at their delimiters (00 00 00 01 09 from x264).
    starts = [i for i in range(len(data) - 4) if data[i:i + 4] == b"\0\0\x01\x09"]
    sizes = [b - a for a, b in zip(starts, starts[1:] + [len(data)])]
    print(json.dumps({"frames": len(sizes), "bytes": len(data),
                      "mean_au_bytes": round(sum(sizes) / max(1, len(sizes))),
                      "max_au_bytes": max(sizes) if sizes else 0,
                      "encode_seconds": round(seconds, 2)}))
    return 0 if len(sizes) == args.frames else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
