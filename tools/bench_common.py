"""Helpers shared by the benchmark scripts in tools/ and bench/: child processes with drained
pipes, core pinning, syncd's /stats, resident memory and CPU ticks, and the least-squares memory
slope."""
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request

CLOCK_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")



def rss_bytes(pid):
    """Resident set size of a process, from /proc/PID/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def get_stats(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as r:
        return json.loads(r.read())


def least_squares_slope(points):
    """Slope of y over x by ordinary least squares; None with fewer than two distinct x."""
    n = len(points)
    if n < 2:
        return None
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def stage_delta(before, after, bounds_us):
    """What a syncd stage aggregate (count, total_us, histogram) gained between two /stats
    documents, with upper bounds on its p99 and p99.9 from the histogram (None: the +Inf bucket
    or no events) and the number of events over 1 ms. The lifetime max cannot be differenced; it
    is reported as max_us_lifetime."""
    buckets = [a - b for a, b in zip(after["histogram"], before["histogram"])]
    count = after["count"] - before["count"]

    def bound(q):
        if count == 0:
            return None
        seen = 0
        for i, n in enumerate(buckets):
            seen += n
            if seen >= q * count:
                return bounds_us[i] if i < len(bounds_us) else None
        return None

    # Bucket i + 1 holds the events above bounds_us[i].
    over_1ms = sum(n for n, lower in zip(buckets[1:], bounds_us) if lower >= 1000.0)
    return {"count": count,
            "mean_us": (after["total_us"] - before["total_us"]) / count if count else None,
            "p99_at_most_us": bound(0.99), "p999_at_most_us": bound(0.999),
            "over_1ms": over_1ms,
            "max_us_lifetime": after["max_us"], "histogram": buckets,
            "bounds_us": bounds_us}


def pinned(core, argv, pin=True):
    """argv run on one core with taskset, when pinning is wanted and can be had: taskset exists,
    the core is ours, and we have more than one."""
    allowed = os.sched_getaffinity(0)
    if pin and shutil.which("taskset") and core in allowed and len(allowed) > 1:
        return ["taskset", "-c", str(core), *argv]
    return argv


def find_stream(stats, name):
    """The last stream called name in a /stats document (a name can be reused), or None."""
    matches = [s for s in (stats or {}).get("streams", []) if s.get("name") == name]
    return matches[-1] if matches else None


def http_get_json(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


class BenchError(Exception):
    """A run that cannot be counted; the message says why."""


class Child:
    """A child process whose stdout and stderr are drained by threads.

    Draining matters: a server that logs to a pipe nobody reads blocks once the pipe's 64 KiB
    fill up, which would stall the very loop being measured.
    """

    def __init__(self, name, argv, env=None, cwd=None):
        self.name = name
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True, bufsize=1, env=env,
                                     cwd=cwd)
        self.stdout_lines = []
        self.stderr_lines = []
        self._line_ready = threading.Condition()
        self._threads = [
            threading.Thread(target=self._drain, args=(self.proc.stdout, self.stdout_lines),
                             daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr, self.stderr_lines),
                             daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _drain(self, stream, lines):
        for line in stream:
            with self._line_ready:
                # Live lines are "\r"-rewritten; keep only the last state of each.
                lines.append(line.rstrip("\n").split("\r")[-1])
                self._line_ready.notify_all()
        with self._line_ready:
            self._line_ready.notify_all()

    @property
    def pid(self):
        return self.proc.pid

    def first_stdout_line(self, timeout):
        return self.stdout_line(0, timeout)

    def stdout_line(self, index, timeout):
        """Line `index` (0-based) of the child's stdout, waiting up to timeout seconds for it."""
        deadline = time.monotonic() + timeout
        with self._line_ready:
            while len(self.stdout_lines) <= index:
                left = deadline - time.monotonic()
                if self.proc.poll() is not None and not self._threads[0].is_alive():
                    raise BenchError(f"{self.name} exited with {self.proc.returncode} before "
                                     f"printing line {index + 1}: {self.stderr_tail()}")
                if left <= 0:
                    raise BenchError(f"{self.name} printed no line {index + 1} within "
                                     f"{timeout} s")
                self._line_ready.wait(min(left, 0.1))
            return self.stdout_lines[index]

    def wait(self, timeout):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise BenchError(f"{self.name} did not finish within {timeout} s") from None
        for t in self._threads:
            t.join(timeout=5)
        return code

    def last_json(self, required=True):
        """The last stdout line that parses as a JSON object; without one, BenchError, or None
        when not required (a child that crashed is still worth recording)."""
        for line in reversed(self.stdout_lines):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
        if not required:
            return None
        raise BenchError(f"{self.name} printed no JSON summary: {self.stderr_tail()}")

    def stderr_tail(self, lines=5):
        return " | ".join(self.stderr_lines[-lines:]) or "(no stderr)"

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def port_from_line(line, name):
    # "listening on 127.0.0.1:PORT" / "syncd listening on 127.0.0.1:PORT": the port follows the
    # last ':' (an IPv6 host has colons of its own).
    try:
        return int(line.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        raise BenchError(f"cannot find a port in {name}'s first line: {line!r}") from None


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # The command name (field 2) is in parentheses and may contain spaces: split after it.
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])




# ---------------------------------------------------------------------------------------------
# Consumers that stop reading (tools/bench_consumers.py, tests/integration/test_consumers.py)

def _small_receive_buffer_socket(port):
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A small receive window: what the peer does not read stays in syncd, not in our kernel.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    return s


def stalled_http_receiver(port, stream, ticket, credit=16):
    """An HTTP stream receiver that sends its request and never reads a byte."""
    s = _small_receive_buffer_socket(port)
    s.sendall(f"GET /streams/{stream}?ticket={ticket}&credit={credit} HTTP/1.1\r\n"
              f"Host: 127.0.0.1\r\n\r\n".encode())
    return s


def stalled_ws_client(port, requests=2000):
    """A WebSocket client that says hello, pipelines `requests` stats requests (each answered
    with the whole /stats document) and never reads a byte."""
    import base64
    import os as _os
    import struct
    s = _small_receive_buffer_socket(port)
    key = base64.b64encode(_os.urandom(16)).decode()
    s.sendall(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
              f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
              f"Sec-WebSocket-Version: 13\r\n\r\n".encode())

    def frame(text):
        payload = text.encode()
        return struct.pack("!BB", 0x81, 0x80 | len(payload)) + b"\0\0\0\0" + payload

    burst = frame('{"type":"hello","protocol":1}') + frame('{"type":"stats"}') * requests
    s.setblocking(False)
    sent = 0
    deadline = time.time() + 2
    while sent < len(burst) and time.time() < deadline:  # syncd stops reading when it pauses
        try:
            sent += s.send(burst[sent:])
        except BlockingIOError:
            time.sleep(0.01)
    return s
