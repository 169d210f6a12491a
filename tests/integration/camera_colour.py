"""Colour bars through the system camera, and what a consumer sees of them (docs/camera.md,
"Colour"): the bars as an RGBA frame, a client that sends that frame to syncd, the colour
properties a PipeWire node advertises in its EnumFormat params (read with pw-cli), and
GStreamer's pipewiresrc + videoconvert turning the node's YUV back into RGB.

The consumer reads RGBA64_LE, not RGBA: GStreamer 1.22's videoconvert converts 8-bit YUV to
8-bit RGB through a fast path whose fixed-point matrix is off by up to 5 levels by itself (BT.601
green, Y 145 U 54 V 34, comes out 250 instead of 255; white 253), while its 16-bit path is within
1 of the exact inverse. Measured with appsrc and no PipeWire, see docs/camera.md.

Command line (the tests run the consumer in its own process, so a stuck pipeline ends in a
timeout, not a hung test run; it needs a PipeWire session's env):
  python3 camera_colour.py sample TARGET WIDTH HEIGHT [--caps CAPS]
prints {"caps": <pipewiresrc's caps>, "rgb": [[r, g, b] at each bar's centre]} as JSON.

Everything here runs on the caller's thread, but BarsProducer's client, which has its own."""
import argparse
import asyncio
import json
import re
import subprocess
import sys
import time

import websockets

from camera_marker import ProducerThread
from harness import FORMAT_CODES, frame_message

# What the bars are, left to right: the primaries and secondaries, white, black and a mid grey.
BARS = (("red", (255, 0, 0)), ("green", (0, 255, 0)), ("blue", (0, 0, 255)),
        ("magenta", (255, 0, 255)), ("yellow", (255, 255, 0)), ("cyan", (0, 255, 255)),
        ("white", (255, 255, 255)), ("black", (0, 0, 0)), ("grey", (128, 128, 128)))


def bar_of(x, width):
    return x * len(BARS) // width


def bars_frame(width, height):
    """The bars as one RGBA frame (R, G, B, A in memory), each bar the full height."""
    row = bytearray()
    for x in range(width):
        row += bytes(BARS[bar_of(x, width)][1]) + b"\xff"
    return bytes(row) * height


def bar_centres(width, height):
    """(x, y) of each bar's centre: far from its edges, where chroma is shared with a
    neighbour."""
    return [((2 * i + 1) * width // (2 * len(BARS)), height // 2) for i in range(len(BARS))]


async def produce_bars(url, name, width, height, fps, stop, opened=None):
    """Opens an rgba8 stream and sends the bars at fps (paced by the clock, never caught up:
    every frame is the same) until stop is set."""
    frame = bars_frame(width, height)
    async with websockets.connect(url, max_size=None) as ws:
        await ws.send(json.dumps({"type": "hello", "protocol": 1}))
        assert json.loads(await ws.recv())["type"] == "welcome"
        await ws.send(json.dumps({"type": "stream.open", "name": name, "width": width,
                                  "height": height, "format": "rgba8", "fps": fps}))
        reply = json.loads(await ws.recv())
        assert reply["type"] == "stream.opened", reply
        if opened is not None:
            opened.set()
        sequence = 1
        start = time.monotonic()
        while not stop.is_set():
            await ws.send(frame_message(reply["stream"], sequence, frame, width, height,
                                        FORMAT_CODES["rgba8"], with_hash=False))
            sequence += 1
            await asyncio.sleep(max(0.0, start + sequence / fps - time.monotonic()))


def BarsProducer(url, name, width, height, fps=10):
    """produce_bars() on its own thread while the test's thread consumes."""
    return ProducerThread(produce_bars, url, name, width, height, fps)


COLOUR_KEYS = ("colorRange", "colorMatrix", "transferFunction", "colorPrimaries")


def enum_formats(node_id):
    """The node's EnumFormat params as dicts: "format" (its name, "I420") and each colour
    property present as its SPA Id number. From `pw-cli enum-params`, which prints the numbers;
    pw-dump 0.3.65 prints these four Ids under the names of pod types ("Bool" for 2, "Int" for 4,
    "Double" for 7, "None" for 1). Needs the session's env in os.environ."""
    p = subprocess.run(["pw-cli", "enum-params", str(node_id), "EnumFormat"],
                       capture_output=True, text=True, timeout=10)
    if p.returncode != 0:
        raise AssertionError(f"pw-cli enum-params {node_id}: {p.stderr}")
    formats = []
    for obj in re.split(r"^\s*Object: ", p.stdout, flags=re.M)[1:]:
        props = {}
        for key, kind, value, name in re.findall(
                r"Prop: key \S*:(\w+) \(\d+\), flags \w+\s+(\w+) (\S+)(?:\s+\(([^)]*)\))?", obj):
            if key == "format":
                props["format"] = name.rsplit(":", 1)[-1]
            elif key in COLOUR_KEYS and kind == "Id":
                props[key] = int(value)
        formats.append(props)
    return formats


def gst_colorimetry(fmt):
    """GStreamer's caps colorimetry for an EnumFormat's colour properties: SPA's enums and
    GStreamer's share their numbers, range:matrix:transfer:primaries ("2:4:7:1")."""
    return ":".join(str(fmt[k]) for k in COLOUR_KEYS)


def sample(target, width, height, caps=None, frames=3, timeout=20.0):
    """pipewiresrc [! capsfilter caps] ! videoconvert ! RGBA64_LE into an appsink: after `frames`
    frames, the RGB (8-bit, rounded from 16) at each bar's centre, and the caps pipewiresrc put
    on its pad. In this process: the command line runs it in a child."""
    import pipewire_session
    Gst = pipewire_session._gst()
    src = Gst.ElementFactory.make("pipewiresrc")
    src.set_property("target-object", str(target))
    # pipewiresrc sets no media.type; wireplumber links only nodes of the same media type.
    src.set_property("stream-properties",
                     Gst.Structure.new_from_string("props,media.type=(string)Video"))
    elements = [src]
    if caps:
        capsfilter = Gst.ElementFactory.make("capsfilter")
        capsfilter.set_property("caps", Gst.Caps.from_string(caps))
        elements.append(capsfilter)
    convert = Gst.ElementFactory.make("videoconvert")
    rgb = Gst.ElementFactory.make("capsfilter")
    rgb.set_property("caps", Gst.Caps.from_string("video/x-raw,format=RGBA64_LE"))
    sink = Gst.ElementFactory.make("appsink")
    sink.set_property("sync", False)
    sink.set_property("max-buffers", 2)
    sink.set_property("drop", True)
    elements += [convert, rgb, sink]
    pipeline = Gst.Pipeline.new("colour")
    for e in elements:
        pipeline.add(e)
    for a, b in zip(elements, elements[1:]):
        a.link(b)
    pipeline.set_state(Gst.State.PLAYING)
    try:
        last, seen = None, 0
        deadline = time.monotonic() + timeout
        while seen < frames and time.monotonic() < deadline:
            s = sink.emit("try-pull-sample", 100 * Gst.MSECOND)
            if s is not None:
                last, seen = s, seen + 1
        if last is None:
            raise RuntimeError(f"no frame from {target} within {timeout} s")
        src_caps = src.get_static_pad("src").get_current_caps()
        buf = last.get_buffer()
        ok, info = buf.map(Gst.MapFlags.READ)
        try:
            out = []
            for x, y in bar_centres(width, height):
                o = (y * width + x) * 8
                out.append([round(int.from_bytes(info.data[o + 2 * c:o + 2 * c + 2], "little") /
                                  257) for c in range(3)])
        finally:
            buf.unmap(info)
        return {"caps": src_caps.to_string() if src_caps else None, "frames": seen, "rgb": out}
    finally:
        pipeline.set_state(Gst.State.NULL)


def sample_in_child(target, width, height, caps=None, timeout=40):
    """sample() in its own process."""
    argv = [sys.executable, __file__, "sample", str(target), str(width), str(height)]
    if caps:
        argv += ["--caps", caps]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError(p.stderr)
    return json.loads(p.stdout)


def worst_error(rgb):
    """The largest difference, in levels, between a sampled bar and the bar sent."""
    return max(abs(g - s) for got, (_, sent) in zip(rgb, BARS) for g, s in zip(got, sent))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("target")
    s.add_argument("width", type=int)
    s.add_argument("height", type=int)
    s.add_argument("--caps")
    args = parser.parse_args()
    print(json.dumps(sample(args.target, args.width, args.height, args.caps)))


if __name__ == "__main__":
    sys.exit(main())
