"""Starts and stops a real syncd for integration tests, and speaks raw RFC 6455 where a test
needs to break the protocol on purpose (the websockets library refuses to)."""
import base64
import json
import os
import signal
import socket
import struct
import subprocess
import time
import urllib.request

SYNCD = os.environ.get("SYNCD", "../../build/release/src/daemon/syncd")
PRODUCER = os.environ.get("SYNC_PRODUCER", "../../build/release/tools/producer/sync-producer")

FRAME_MAGIC = 0x464E5953
HEADER = struct.Struct("<IHHIIQQIIIIQ")  # docs/protocol.md, "Binary video frames"
assert HEADER.size == 56
HAS_HASH = 1

# Pixel formats: wire values of the frame header, the ring header and HTTP records.
FORMAT_CODES = {"rgba8": 1, "bgra8": 2, "nv12": 3, "i420": 4}
# Access units, not pictures: frames of any size up to an I420 frame (docs/protocol.md).
ENCODED_FORMAT_CODES = {"h264": 5}


def frame_planes(fmt, width, height):
    """The planes of a frame as (offset, stride, rows), packed in the format's order
    (docs/protocol.md, "Pixel formats"). fmt is a name or a wire value. Written out here, not
    asked of syncd, so tests compare syncd's answers with an independent reading of the spec."""
    code = FORMAT_CODES.get(fmt, fmt)
    luma = width * height
    if code in (1, 2):
        return [(0, width * 4, height)]
    if width % 2 or height % 2:
        raise ValueError("4:2:0 formats need even sizes")
    if code == 3:
        return [(0, width, height), (luma, width, height // 2)]
    if code == 4:
        return [(0, width, height), (luma, width // 2, height // 2),
                (luma + luma // 4, width // 2, height // 2)]
    raise ValueError(f"unknown pixel format {fmt!r}")


def frame_bytes(fmt, width, height):
    """Bytes of one frame, all planes: 4 a pixel for rgba8/bgra8, 1.5 for nv12/i420."""
    offset, stride, rows = frame_planes(fmt, width, height)[-1]
    return offset + stride * rows


class Syncd:
    """A syncd process on a free port; use as a context manager."""

    def __init__(self, *args):
        self.args = [SYNCD, "--port", "0", "--status-line", "off", *args]
        self.proc = None
        self.port = None

    def __enter__(self):
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise RuntimeError("syncd did not start: " + line + self.proc.stderr.read())
        self.port = int(line.strip().rsplit(":", 1)[1])
        return self

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()

    @property
    def url(self):
        return f"ws://127.0.0.1:{self.port}/ws"

    def get(self, path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def stats(self):
        return json.loads(self.get("/stats")[1])

    def stream_stats(self, name):
        for s in self.stats()["streams"]:
            if s["name"] == name:
                return s
        return None

    def wait_for(self, predicate, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError("condition not met in time")


def raw_http(port, request: bytes, read_timeout=5.0):
    """Sends bytes and returns everything the server says until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as s:
        s.sendall(request)
        chunks = []
        while True:
            try:
                data = s.recv(65536)
            except socket.timeout:
                break
            if not data:
                break
            chunks.append(data)
        return b"".join(chunks)


def frames_behind_max(per_second, nominal=60):
    """The most frames on the wrong side of any second's end, from unique frames per complete
    second in time order (the qualification's rule, tools/qualify/analyze.py): 1 is the frame
    due just before a boundary arriving just after it (59 then 61, this host's wake-up latency),
    2 or more a lost frame or a longer stall."""
    running, worst = 0, 0
    for frames in per_second:
        running += frames - nominal
        worst = max(worst, abs(running))
    return worst


def last_json(text):
    """The last line of a tool's output that parses as a JSON object (its summary), or {}."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}


def upgrade_request(key=b"dGhlIHNhbXBsZSBub25jZQ==", version=b"13", origin=None):
    req = (b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: " + version + b"\r\n")
    if origin is not None:
        req += b"Origin: " + origin + b"\r\n"
    return req + b"\r\n"


def client_frame(opcode, payload=b"", fin=True, mask=True, rsv=0, key=b"\x11\x22\x33\x44",
                 declared_length=None):
    first = (0x80 if fin else 0) | (rsv << 4) | opcode
    n = len(payload) if declared_length is None else declared_length
    if n < 126:
        header = struct.pack("!BB", first, (0x80 if mask else 0) | n)
    elif n < 65536:
        header = struct.pack("!BBH", first, (0x80 if mask else 0) | 126, n)
    else:
        header = struct.pack("!BBQ", first, (0x80 if mask else 0) | 127, n)
    if not mask:
        return header + payload
    masked = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return header + key + masked


class RawWebSocket:
    """A hand-driven client socket after a successful upgrade."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(upgrade_request())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise AssertionError("closed during handshake")
            head += chunk
        assert head.startswith(b"HTTP/1.1 101"), head
        self.buffer = b""

    def send(self, data):
        self.sock.sendall(data)

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def recv_frame(self):
        """(opcode, payload) of the next server frame (servers never mask)."""
        b0, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        return b0 & 0x0F, self._read(n)

    def recv_close_code(self):
        """Reads frames until a Close; returns its code (None if the socket just ended)."""
        try:
            while True:
                op, payload = self.recv_frame()
                if op == 8:
                    return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
        except (EOFError, ConnectionResetError):
            return None

    def send_text(self, text):
        self.send(client_frame(1, text.encode()))

    def recv_json(self):
        while True:
            op, payload = self.recv_frame()
            if op == 1:
                return json.loads(payload)

    def close(self):
        self.sock.close()


def frame_message(stream_id, sequence, pixels, width=0, height=0, fmt=0, with_hash=True,
                  magic=FRAME_MAGIC, version=1):
    import xxhash
    digest = xxhash.xxh3_64_intdigest(pixels) if with_hash else 0
    header = HEADER.pack(magic, version, 56, stream_id, HAS_HASH if with_hash else 0, sequence,
                         int(time.monotonic() * 1e6), width, height, fmt, 0, digest)
    return header + pixels


def marker_pixels(size, sequence, fill=0):
    """Pixels whose first 16 bytes carry the sequence marker."""
    body = bytearray([fill & 0xFF]) * size
    body[0:16] = struct.pack("<QQ", sequence, ~sequence & 0xFFFFFFFFFFFFFFFF)
    return bytes(body)
