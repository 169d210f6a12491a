"""Helpers shared by the benchmark scripts in tools/: syncd's resident memory, its /stats, the
least-squares memory slope, and core pinning."""
import json
import os
import urllib.request


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


def pinned(core, argv, pin=True):
    """argv run on one core with taskset, when pinning is wanted and there is more than one."""
    if pin and os.cpu_count() and os.cpu_count() > 1:
        return ["taskset", "-c", str(core), *argv]
    return argv
