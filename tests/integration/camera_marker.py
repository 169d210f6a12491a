"""The camera's frame marker, shared by the camera tests: a frame's sequence number drawn as
black and white columns (BITS columns of COLUMN pixels, full height), which survives the
camera's conversion from RGB into YUY2, I420 or NV12 and is read back from the luma plane. The
16-byte sequence marker (docs/protocol.md) does not: converting RGB mixes its bytes."""

import asyncio
import threading

import websockets

BITS = 16     # marker bits, one COLUMN-pixel column each
COLUMN = 8
# BT.601 limited range, as the camera writes it: black 16, white 235.
BLACK_Y, WHITE_Y = 16, 235


def marker_bit(sequence, x):
    return x // COLUMN < BITS and (sequence >> (x // COLUMN)) & 1


def marker_frame(fmt, sequence, width, height):
    """One frame of the source format (rgba8, bgra8, i420, nv12) with the sequence drawn in its
    columns."""
    if fmt in ("rgba8", "bgra8"):
        # Column by column, not pixel by pixel: fast enough to draw 640x360 at 60 a second.
        white, black = b"\xff\xff\xff\xff" * COLUMN, b"\x00\x00\x00\xff" * COLUMN
        row = b"".join(white if (sequence >> bit) & 1 else black for bit in range(BITS))
        row = (row + b"\x00\x00\x00\xff" * width)[:width * 4]
        return row * height
    luma_row = bytes(WHITE_Y if marker_bit(sequence, x) else BLACK_Y for x in range(width))
    chroma = bytes([128]) * (width * height // 2)  # grey: U = V = 128, in either 4:2:0 layout
    return luma_row * height + chroma


def luma(frame, camera_format, x, y, width):
    """The luma of pixel (x, y) in a tightly packed camera frame (yuy2, i420, nv12)."""
    if camera_format == "yuy2":
        return frame[(y * width + x) * 2]  # Y0 U Y1 V
    return frame[y * width + x]            # i420, nv12: the Y plane first


def read_marker(frame, camera_format, y, width):
    sequence = 0
    for bit in range(BITS):
        if luma(frame, camera_format, bit * COLUMN + COLUMN // 2, y, width) > 128:
            sequence |= 1 << bit
    return sequence


def read_gst_marker(buf, caps):
    """count_frames' decoder for frames the camera converted: the sequence from the first row's
    luma, or None when a column is neither clearly black nor clearly white, or the column after
    the marker is not black (a frame that is not a marker frame, or is damaged). Copies one
    row, never maps the frame."""
    s = caps.get_structure(0)
    fmt = s.get_string("format").lower()
    width = s.get_int("width")[1]
    row_bytes = width * 2 if fmt == "yuy2" else width
    if buf.get_size() < row_bytes or width < (BITS + 1) * COLUMN:
        return None
    row = buf.extract_dup(0, row_bytes)
    sequence = 0
    for bit in range(BITS + 1):
        y = luma(row, fmt, bit * COLUMN + COLUMN // 2, 0, width)
        if abs(y - BLACK_Y) <= 8:
            continue
        if bit < BITS and abs(y - WHITE_Y) <= 8:
            sequence |= 1 << bit
            continue
        return None
    return sequence


class ProducerThread:
    """An asyncio producer, produce(*args, stop, opened=event), on its own thread, so the test's
    thread can consume meanwhile. A context manager: stops the producer on exit and raises what
    it raised (a connection syncd closed under it is a test's doing, not an error)."""

    def __init__(self, produce, *args):
        self.stop = threading.Event()
        self.opened = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(produce, args))

    def _run(self, produce, args):
        try:
            asyncio.run(produce(*args, self.stop, opened=self.opened))
        except websockets.ConnectionClosed:
            pass
        except Exception as e:  # reported by __exit__
            self.error = e

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)
        if self.error is not None and exc[0] is None:
            raise self.error
