#!/usr/bin/env python3
"""Qualification runner: executes named arms against a real syncd and writes a report directory.

Arms (docs/qualification.md):
  video-baseline  paced 1080p60 into syncd --publisher test for 120 s
  soak            the same for 1800 s (--seconds makes it shorter, e.g. in CI)
  multi-reader    the same with --publisher test,shm and 4 sync-shm-reader processes, 120 s
  single-reader   the same with 1 reader (the reference for "writer CPU with 4 readers")
  camera          the same with --publisher test,camera in a private PipeWire session, and
                  GStreamer's pipewiresrc on the camera node as the one reader (camera_reader.py)
  relay           an H.264 clip (1080p60, --bitrate) relayed between two syncd through
                  sync-impair at 1 % loss and 20 +/- 5 ms each way, re-keyed every
                  --rekey-interval s, for 60 s (tools/qualify/relay_arm.py says what it records)
  relay-soak      the same for 1800 s
  relay-burst     the relay arm at 5 % Gilbert-Elliott burst loss
  relay-raw       the relay arm with raw RGBA frames the sending syncd encodes and the
                  receiving one decodes: glass to glass by stage, 60 s
  relay-raw-burst relay-raw at 5 % Gilbert-Elliott burst loss (mean 4) and 40 +/- 10 ms each
                  way
  relay-cap-shaper / relay-cap-policer  raw frames from a 30 Mbit/s start through a 10 Mbit/s
                  cap from 15 s to 45 s, a shaper (100-ms queue) or a policer (32-KB bucket)
  chain           the seed's whole chain: a Chromium page's canvas (H.264, WebCodecs) -> syncd
                  --relay-to -> sync-impair (1 %, 20 +/- 5 ms) -> syncd --relay-listen
                  --publisher camera -> PipeWire -> pipewiresrc; glass to glass per frame
                  (tools/qualify/chain_arm.py)
  relay-abr       raw RGBA frames encoded by the sending syncd, decoded by the receiving one,
                  through a path capped at 20 Mbit/s, then 4 from 20 s, then 20 from 40 s: the
                  adaptive bitrate's run, 70 s

What one arm records, under OUT/ARM/ (all times CLOCK_MONOTONIC ns, one clock for every process):
  producer_events.csv   sequence,send_start_ns,send_end_ns     (sync-producer --events)
  syncd_events.csv      index,stream,sequence,receive_start_ns,accept_ns,publish_done_ns
                        (GET /events/frames?since=K, polled every 2 s; absent when syncd lacks it)
  readerN_events.csv    sequence,publish_ns,read_ns            (sync-shm-reader --events, or
                        camera_reader.py: publish_ns is then the camera buffer's pts)
  readerN.json          the reader's JSON summary
  telemetry.jsonl       every 5 s: syncd VmRSS (and its anon/shmem parts), process CPU,
                        /stats process.loop_cpu_seconds and the stream's counters
  stats_final.json      /stats once the producer is done
  arm.json              parameters, command lines, start/end times, exit codes, what was missing
Then tools/qualify/analyze.py turns the directory into report.json, PNG plots and summary.md.

syncd is pinned to core 0 and the producer to core 1 (as tools/bench_paced.py does); readers are
not pinned (they share). A live line (fps, drops, memory) is shown when stderr is a terminal.

Usage:
  tools/qualify/run.py --arms video-baseline[,multi-reader,...] [--seconds S] [--size 1920x1080]
                       [--fps 60] [--build-dir build/release] [--out reports/STAMP]
Exit status: 0 every arm ran and met the contract, 1 a contract figure failed, 2 an arm could not
run (missing binary, syncd refused an option, a child failed).
Python 3 standard library; the analysis needs python3-numpy and python3-matplotlib.
"""
import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
import bench_common  # noqa: E402  (core pinning, shared with the benchmarks)
SYNCD_CORE = 0
PRODUCER_CORE = 1
STREAM = "qual"
EVENTS_POLL_S = 2.0
TELEMETRY_S = 5.0

ARMS = {
    # name: (default seconds, readers, what reads)
    "video-baseline": (120, 0, None),
    "soak": (1800, 0, None),
    "multi-reader": (120, 4, "shm"),
    "single-reader": (120, 1, "shm"),
    "camera": (120, 1, "camera"),
    # Two syncd relaying H.264 through sync-impair (tools/qualify/relay_arm.py).
    "relay": (60, 0, "relay"),
    "relay-soak": (1800, 0, "relay"),
    "relay-burst": (60, 0, "relay"),
    "relay-raw": (60, 0, "relay"),
    "relay-raw-burst": (60, 0, "relay"),
    "relay-cap-shaper": (60, 0, "relay"),
    "relay-cap-policer": (60, 0, "relay"),
    "relay-abr": (70, 0, "relay"),
    # A page's canvas to a camera over a WAN (tools/qualify/chain_arm.py).
    "chain": (60, 0, "chain"),
}
CAMERA_NAME = "Sync Camera Qualification"


# An arm that could not run; the message says why. The shared Child raises it too.
ArmError = bench_common.BenchError


class Unavailable(ArmError):
    """A needed component (binary, syncd option) does not exist in this build."""


# --------------------------------------------------------------------------------------------
# small helpers

def monotonic_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


REALTIME = False  # --realtime: syncd and the producer under SCHED_FIFO (chrt), see main()


def pinned(core, argv):
    if REALTIME and shutil.which("chrt"):
        argv = ["chrt", "-f", "10", *argv]
    return bench_common.pinned(core, argv)


def proc_status(pid):
    """VmRSS, RssAnon, RssFile, RssShmem in KiB from /proc/PID/status ({} if gone)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def proc_cpu_seconds(pid):
    """utime + stime of a process (all its threads), seconds; None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def steal_seconds():
    """Machine-wide CPU time the hypervisor gave to others (/proc/stat "steal"), seconds; None
    where the kernel does not count it. Tells a host stall from syncd's own."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def http_get(port, path, timeout=5.0, host="127.0.0.1"):
    """(status, headers, body bytes); status 0 when the connection failed."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers or {}), e.read()
    except (urllib.error.URLError, OSError):
        return 0, {}, b""


find_stream = bench_common.find_stream
Child = bench_common.Child


# --------------------------------------------------------------------------------------------
# build discovery

def resolve_paths(build_dir):
    build = Path(build_dir)
    if not build.is_absolute() and not build.exists():
        build = REPO_ROOT / build
    return {
        "syncd": build / "src" / "daemon" / "syncd",
        "producer": build / "tools" / "producer" / "sync-producer",
        "reader": build / "tools" / "shm_reader" / "sync-shm-reader",
        "camera_reader": HERE / "camera_reader.py",
    }


def help_text(binary):
    try:
        r = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=10)
        return r.stdout + r.stderr
    except (OSError, subprocess.TimeoutExpired):
        return ""


def capabilities(paths):
    """What this build offers: the shm publisher, the reader tool, the reader's --open-wait."""
    syncd_help = help_text(paths["syncd"]) if os.access(paths["syncd"], os.X_OK) else ""
    reader_ok = os.access(paths["reader"], os.X_OK)
    reader_help = help_text(paths["reader"]) if reader_ok else ""
    return {
        "syncd": bool(syncd_help),
        "producer": os.access(paths["producer"], os.X_OK),
        "shm_publisher": "--shm-path" in syncd_help,
        "shm_reader": reader_ok,
        "reader_open_wait": "--open-wait" in reader_help,
        "camera_publisher": "--camera-name" in syncd_help,
    }


# --------------------------------------------------------------------------------------------
# one arm

class EventsPoller:
    """GET /events/frames?since=K into syncd_events.csv; remembers next index and losses."""

    HEADER = "index,stream,sequence,receive_start_ns,accept_ns,publish_done_ns"

    def __init__(self, port, path, host="127.0.0.1"):
        self.port = port
        self.host = host
        self.path = path
        self.next_index = 0
        self.lost = 0
        self.rows = 0
        self.available = None  # unknown until the first poll
        self.note = ""
        self.stream_ids = set()
        self._file = None
        self._last_second = {}  # for the live line: bin -> unique frames

    def poll(self):
        if self.available is False:
            return
        status, headers, body = http_get(self.port, f"/events/frames?since={self.next_index}",
                                         host=self.host)
        if status != 200:
            if self.available is None:
                self.available = False
                self.note = f"GET /events/frames answered {status or 'no connection'}"
            return
        self.available = True
        headers = {k.lower(): v for k, v in headers.items()}
        text = body.decode("utf-8", "replace")
        lines = text.splitlines()
        if lines and lines[0].startswith("index"):
            lines = lines[1:]
        if self._file is None:
            self._file = open(self.path, "w")
            self._file.write(self.HEADER + "\n")
        for line in lines:
            if line.strip():
                self._file.write(line + "\n")
                self.rows += 1
        self._file.flush()
        if "x-events-next" in headers:
            self.next_index = int(headers["x-events-next"])
        elif lines:
            self.next_index = int(lines[-1].split(",")[0]) + 1
        self.lost += int(headers.get("x-events-lost", "0") or 0)

    def close(self):
        if self._file:
            self._file.close()


class LiveLine:
    def __init__(self, enabled):
        self.enabled = enabled
        self.shown = False

    def show(self, text):
        if self.enabled:
            print("\r" + text + " " * 4, end="", file=sys.stderr, flush=True)
            self.shown = True

    def finish(self):
        if self.shown:
            print(file=sys.stderr, flush=True)


def pipewire_session_module():
    """The tests' private PipeWire session (tests/integration/pipewire_session.py), or raises
    Unavailable saying what is missing."""
    sys.path.insert(0, str(REPO_ROOT / "tests" / "integration"))
    try:
        import pipewire_session
    except ImportError as e:
        raise Unavailable(f"cannot load the PipeWire session helper: {e}")
    missing = pipewire_session.missing_binaries()
    if missing:
        raise Unavailable(f"no {', '.join(missing)} (scripts/install-deps.sh installs them)")
    return pipewire_session


def finish_producer(producer, meta):
    """Waits for sync-producer to exit and records its exit code, summary and end time."""
    code = producer.wait(10)
    meta["producer_exit_code"] = code
    meta["producer_summary"] = producer.last_json(required=False)
    meta["producer_stderr"] = producer.stderr_lines[-5:]
    meta["producer_end_ns"] = monotonic_ns()
    return code


def run_arm(name, seconds, readers, reader_kind, args, paths, caps, out_dir):
    """One arm; reader_kind is None, "shm" (sync-shm-reader processes) or "camera" (syncd's
    camera in a private PipeWire session, with camera_reader.py as its one reader)."""
    if reader_kind != "camera":
        return _run_arm(name, seconds, readers, reader_kind, args, paths, caps, out_dir, None)
    with pipewire_session_module().PipeWireSession() as session:
        return _run_arm(name, seconds, readers, reader_kind, args, paths, caps, out_dir, session)


def _run_arm(name, seconds, readers, reader_kind, args, paths, caps, out_dir, session):
    arm_dir = out_dir / name
    arm_dir.mkdir(parents=True, exist_ok=True)
    width, height = (int(v) for v in args.size.lower().split("x"))
    meta = {
        "arm": name, "seconds": seconds, "fps": args.fps, "width": width, "height": height,
        "readers": readers, "reader_kind": reader_kind, "realtime": REALTIME, "stream": STREAM, "cores": {"syncd": SYNCD_CORE,
                                                       "producer": PRODUCER_CORE},
        "sources": {}, "notes": [], "capabilities": caps,
    }
    if not caps["syncd"] or not caps["producer"]:
        raise Unavailable(f"syncd or sync-producer not built under {args.build_dir}")
    if reader_kind == "shm" and not caps["shm_publisher"]:
        raise Unavailable("this syncd has no shm publisher (--shm-path) yet")
    if reader_kind == "shm" and not caps["shm_reader"]:
        raise Unavailable(f"sync-shm-reader not built ({paths['reader']})")
    if reader_kind == "camera" and not caps["camera_publisher"]:
        raise Unavailable("this syncd has no camera publisher (--camera-name) yet")

    shm_path = f"/dev/shm/sync-qual-{os.getpid()}-{name}.frames"
    syncd_argv = [str(paths["syncd"]), "--port", "0", "--status-line", "off"]
    if reader_kind == "shm":
        syncd_argv += ["--publisher", "test,shm", "--shm-path", shm_path,
                       "--shm-slots", str(args.shm_slots)]
        meta["shm_path"] = shm_path
    elif reader_kind == "camera":
        # The PipeWire backend (no --camera-device), in the session this process now points at.
        syncd_argv += ["--publisher", "test,camera", "--camera-name", CAMERA_NAME]
        meta["camera_name"] = CAMERA_NAME
    else:
        syncd_argv += ["--publisher", "test"]
    syncd = Child("syncd", pinned(SYNCD_CORE, syncd_argv))
    children = [syncd]
    live = LiveLine(sys.stderr.isatty() and not args.quiet)
    telemetry_file = open(arm_dir / "telemetry.jsonl", "w")
    poller = None
    try:
        first = syncd.first_stdout_line(10)
        if "listening on" not in first:
            raise ArmError(f"unexpected first line from syncd: {first!r}")
        port = int(first.strip().rsplit(":", 1)[1])
        meta["syncd_argv"] = syncd_argv
        poller = EventsPoller(port, arm_dir / "syncd_events.csv")

        def sample(t0):
            status, _, body = http_get(port, "/stats")
            stats = json.loads(body) if status == 200 else None
            s = find_stream(stats, STREAM)
            rec = {
                "t_ns": monotonic_ns(),
                "t_s": (monotonic_ns() - t0) / 1e9,
                "rss_kib": None, "proc": proc_status(syncd.pid),
                "process_cpu_seconds": proc_cpu_seconds(syncd.pid),
                "loop_cpu_seconds": (stats or {}).get("process", {}).get("loop_cpu_seconds"),
                "resident_memory_bytes": (stats or {}).get("process", {}).get(
                    "resident_memory_bytes"),
                # Context on a shared 2-core machine: other work running meanwhile.
                "loadavg_1m": os.getloadavg()[0],
                "steal_seconds": steal_seconds(),
            }
            rec["rss_kib"] = rec["proc"].get("VmRSS")
            if s:
                rec["stream"] = {k: s.get(k) for k in (
                    "open", "frames_offered", "frames_accepted", "frames_unique",
                    "frames_dropped", "frames_dropped_total", "frames_verified",
                    "frames_verify_failed", "complete_seconds", "low_rate_seconds",
                    "last_second_unique_fps", "min_second_unique_fps",
                    "recent_seconds_unique_fps")}
            telemetry_file.write(json.dumps(rec) + "\n")
            telemetry_file.flush()
            return rec

        t0 = monotonic_ns()
        meta["start_ns"] = t0
        sample(t0)  # before the stream opens: the daemon's bare footprint
        producer_argv = [str(paths["producer"]), "--url", f"ws://127.0.0.1:{port}/ws",
                         "--stream", STREAM, "--width", str(width), "--height", str(height),
                         "--fps", str(args.fps), "--seconds", str(seconds),
                         "--events", str(arm_dir / "producer_events.csv"), "--quiet"]
        if not args.producer_normal_priority:
            # The load generator keeps its schedule (SCHED_FIFO when permitted), as a page's
            # frames keep the display's vsync: a frame late into syncd is then syncd's doing.
            producer_argv.append("--realtime")
        meta["producer_argv"] = producer_argv
        producer = Child("sync-producer", pinned(PRODUCER_CORE, producer_argv))
        children.append(producer)
        producer_start = time.monotonic()

        reader_children = []
        if reader_kind == "camera":
            # The node appears with the stream's first frame; a consumer can only join then, so
            # the frames before it are dropped as no_consumer and the analyzer judges the
            # consumer from the first second it saw whole (analyze.py).
            try:
                session.wait_for_node(CAMERA_NAME, timeout=15)
            except AssertionError:
                raise ArmError(f"the camera node did not appear within 15 s: "
                               f"{syncd.stderr_tail()} {producer.stderr_tail()}")
            reader_seconds = seconds + 1.5 - (time.monotonic() - producer_start)
            meta["reader_seconds"] = reader_seconds
            argv = [sys.executable, str(paths["camera_reader"]), "--target", CAMERA_NAME,
                    "--seconds", f"{reader_seconds:.3f}",
                    "--events", str(arm_dir / "reader0_events.csv")]
            meta["reader_argv"] = [argv]
            child = Child("camera reader", argv)
            reader_children.append(child)
            children.append(child)
        elif readers:
            # The ring is created when the stream opens; the producer's paced schedule starts at
            # the next whole second, so readers started now see the first frame.
            if not caps["reader_open_wait"]:
                deadline = time.monotonic() + 10
                while not os.path.exists(shm_path):
                    if time.monotonic() > deadline or producer.proc.poll() is not None:
                        raise ArmError(f"{shm_path} did not appear within 10 s: "
                                       f"{syncd.stderr_tail()} {producer.stderr_tail()}")
                    time.sleep(0.01)
            # Until the producer's last frame (start is within 1 s), plus a margin.
            reader_seconds = seconds + 2.5 - (time.monotonic() - producer_start)
            meta["reader_seconds"] = reader_seconds
            meta["reader_argv"] = []
            for i in range(readers):
                argv = [str(paths["reader"]), "--path", shm_path,
                        "--seconds", f"{reader_seconds:.3f}",
                        "--events", str(arm_dir / f"reader{i}_events.csv"), "--quiet"]
                if caps["reader_open_wait"]:
                    argv += ["--open-wait", "10"]
                meta["reader_argv"].append(argv)
                child = Child(f"sync-shm-reader {i}", argv)
                reader_children.append(child)
                children.append(child)

        next_events = time.monotonic() + EVENTS_POLL_S
        next_sample = time.monotonic() + TELEMETRY_S
        last = None
        while producer.proc.poll() is None:
            now = time.monotonic()
            if now >= next_events:
                poller.poll()
                next_events += EVENTS_POLL_S
            if now >= next_sample:
                last = sample(t0)
                next_sample += TELEMETRY_S
                s = last.get("stream") or {}
                live.show(f"{name} {now - producer_start:6.0f}/{seconds}s  fps "
                          f"{s.get('last_second_unique_fps', 0):3d}  low-rate "
                          f"{s.get('low_rate_seconds', 0)}  drops "
                          f"{s.get('frames_dropped_total', 0)}  verified "
                          f"{s.get('frames_verified', 0)}  rss "
                          f"{(last['rss_kib'] or 0) / 1024:.1f} MiB  loop cpu "
                          f"{last['loop_cpu_seconds'] or 0:.1f}s")
            time.sleep(0.05)
        live.finish()
        producer_code = finish_producer(producer, meta)
        time.sleep(0.5)  # let syncd finish the last frame and close the stream

        for i, child in enumerate(reader_children):
            code = child.wait(seconds + 60)
            summary = child.last_json(required=False)
            (arm_dir / f"reader{i}.json").write_text(json.dumps(
                {"exit_code": code, "summary": summary, "stderr": child.stderr_lines[-5:]},
                indent=1) + "\n")
        poller.poll()
        meta["sources"]["syncd_events"] = {"available": bool(poller.available),
                                           "rows": poller.rows, "lost": poller.lost,
                                           "note": poller.note}
        final = sample(t0)
        status, _, body = http_get(port, "/stats")
        if status == 200:
            (arm_dir / "stats_final.json").write_text(body.decode())
        meta["final_telemetry"] = final
        syncd.proc.send_signal(signal.SIGTERM)
        meta["syncd_exit_code"] = syncd.wait(15)
        meta["syncd_stderr"] = syncd.stderr_lines[-10:]
        meta["end_ns"] = monotonic_ns()
        if producer_code != 0:
            raise ArmError(f"sync-producer exited with {producer_code}: "
                           f"{' | '.join(meta['producer_stderr'])}")
    finally:
        live.finish()
        telemetry_file.close()
        if poller:
            poller.close()
        for child in reversed(children):
            child.kill()
        if os.path.exists(shm_path):
            # syncd unlinks on a clean exit; a crash must not leave 33 MB behind in /dev/shm.
            meta["notes"].append(f"{shm_path} was left behind by syncd; removed by the runner")
            os.unlink(shm_path)
        (arm_dir / "arm.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    return meta


# --------------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arms", default="video-baseline",
                    help=f"comma-separated, run in order: {', '.join(ARMS)}")
    ap.add_argument("--seconds", type=float,
                    help="duration of every arm (default: the arm's own, e.g. soak 1800)")
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--fps", type=float, default=60)
    ap.add_argument("--readers", type=int, help="override the multi-reader arm's 4 readers")
    ap.add_argument("--shm-slots", type=int, default=8, help="shm ring slots (syncd --shm-slots)")
    ap.add_argument("--build-dir", default="build/release")
    ap.add_argument("--out", help="report directory (default reports/YYYYmmdd-HHMMSS)")
    ap.add_argument("--realtime", action="store_true",
                    help="also run syncd under SCHED_FIFO 10 (chrt; needs root): a diagnostic "
                         "for machines loaded by other work, not the default")
    ap.add_argument("--producer-normal-priority", action="store_true",
                    help="do not ask sync-producer for SCHED_FIFO pacing (its --realtime)")
    ap.add_argument("--bitrate", type=int, default=14000,
                    help="relay arms: the clip's x264 bitrate, kbit/s")
    ap.add_argument("--rekey-interval", type=float, default=10,
                    help="relay arms: the sender's --dtls-rekey-interval, s")
    ap.add_argument("--seed", type=int, default=1, help="relay arms: sync-impair's seed")
    ap.add_argument("--relay-audio", type=int, default=0, metavar="CHANNELS",
                    help="relay arms: also relay this many channels of the synthetic tone "
                         "capture (0: no audio); the arm's JSON then has an audio block")
    ap.add_argument("--netns", action="store_true",
                    help="relay arms: the receiving syncd in network namespace sync-a (10.77.0.1), "
                         "the rest here; run this inside sync-b (scripts/netns-pair.sh)")
    ap.add_argument("--no-analyze", action="store_true", help="only record")
    ap.add_argument("--quiet", action="store_true", help="no live line")
    args = ap.parse_args(argv)
    args.arm_list = [a.strip() for a in args.arms.split(",") if a.strip()]
    bad = [a for a in args.arm_list if a not in ARMS]
    if bad or not args.arm_list:
        ap.error(f"unknown arm(s) {bad}; choose from {', '.join(ARMS)}")
    return args


def main(argv):
    args = parse_args(argv)
    global REALTIME
    REALTIME = args.realtime
    paths = resolve_paths(args.build_dir)
    caps = capabilities(paths)
    out = Path(args.out) if args.out else REPO_ROOT / "reports" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    run_meta = {"command": "tools/qualify/run.py " + " ".join(argv), "arms": args.arm_list,
                "build_dir": str(args.build_dir), "capabilities": caps,
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "results": {}}
    failed_to_run = False
    for name in args.arm_list:
        default_seconds, readers, reader_kind = ARMS[name]
        if readers > 1 and args.readers:
            readers = args.readers
        seconds = args.seconds if args.seconds else default_seconds
        seconds = int(seconds) if float(seconds).is_integer() else seconds
        print(f"== {name}: {args.size}@{args.fps:g} for {seconds} s"
              + (f", {readers} {reader_kind} reader(s)" if readers else ""), file=sys.stderr,
              flush=True)
        try:
            if reader_kind == "relay":
                import relay_arm
                relay_arm.run_relay_arm(name, seconds, args, paths, caps, out,
                                        sys.modules[__name__])
            elif reader_kind == "chain":
                import chain_arm
                chain_arm.run_chain_arm(name, seconds, args, paths, caps, out,
                                        sys.modules[__name__])
            else:
                run_arm(name, seconds, readers, reader_kind, args, paths, caps, out)
            run_meta["results"][name] = "ran"
        except Unavailable as e:
            print(f"   not run: {e}", file=sys.stderr)
            run_meta["results"][name] = f"unavailable: {e}"
            failed_to_run = True
        except ArmError as e:
            print(f"   failed: {e}", file=sys.stderr)
            run_meta["results"][name] = f"failed: {e}"
            failed_to_run = True
    run_meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    (out / "run.json").write_text(json.dumps(run_meta, indent=1) + "\n")
    print(f"report directory: {out}", file=sys.stderr)
    if args.no_analyze:
        return 2 if failed_to_run else 0
    sys.path.insert(0, str(HERE))
    import analyze
    report = analyze.analyze(out)
    print(analyze.summary_markdown(report))
    if failed_to_run:
        return 2
    return 0 if report.get("contract_met") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
