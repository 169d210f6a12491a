"""A private PipeWire session for tests: a session dbus-daemon, pipewire and wireplumber in a fresh
temporary runtime directory, so tests use real PipeWire on a machine with no desktop and no user
session. docs/camera.md, "Test setup", says why each step is there.

Also a command line, for people and for the next test to build on:
  python3 pipewire_session.py probe                     what this machine has, as JSON
  python3 pipewire_session.py shell                     start a session, print its env, wait
  python3 pipewire_session.py measure W H FPS SECS      session + camera source + counter, as JSON
  python3 pipewire_session.py count-frames TARGET SECS  consume a video node, print counts as JSON
(count-frames needs a session's env: run it under `shell`'s exports.) The camera node the tests
consume comes from pw_camera_source.c (build_camera_source).

Everything here runs on the test's main thread."""
import argparse
import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import struct
import tempfile
import time

import harness

BINARIES = ("dbus-daemon", "pipewire", "wireplumber", "pw-cli", "pw-dump")

# Variables a session sets for its children, and that an outer session must not leak into it.
SESSION_ENV = ("XDG_RUNTIME_DIR", "PIPEWIRE_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS",
               "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME")
LEAKY_ENV = ("PIPEWIRE_REMOTE", "PIPEWIRE_CORE", "PIPEWIRE_CONFIG_DIR", "PIPEWIRE_CONFIG_NAME",
             "WIREPLUMBER_CONFIG_DIR")


def _die_with_parent():
    """Runs in each session child before exec: SIGTERM it when the test process dies, so a test
    killed by a timeout leaves no PipeWire behind (its temporary directory stays)."""
    import ctypes
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def missing_binaries():
    """Names of the session's programs that are not on PATH (scripts/install-deps.sh has them)."""
    return [b for b in BINARIES if shutil.which(b) is None]


class PipeWireSession:
    """dbus-daemon, pipewire and wireplumber in one process group, in a private runtime directory
    that is removed at stop(). Use as a context manager. While it runs, os.environ points at it
    (unless export=False), so any child started the ordinary way (harness.Syncd, subprocess)
    talks to this session and to no other; stop() puts os.environ back."""

    def __init__(self, export=True, ready_timeout=15.0):
        self.export = export
        self.ready_timeout = ready_timeout
        self.dir = None
        self.env = None
        self.pgid = None
        self.procs = {}
        self.saved_env = None
        self.timings = {}

    # --- lifetime -------------------------------------------------------------------------------

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        missing = missing_binaries()
        if missing:
            raise RuntimeError(f"not installed: {' '.join(missing)} (scripts/install-deps.sh)")
        t0 = time.monotonic()
        # A fresh 0700 directory: PipeWire and dbus put their sockets here, and wireplumber its
        # state, instead of /run/user/<uid> (absent: there is no login session) and ~/.local.
        self.dir = tempfile.mkdtemp(prefix="sync-pw-")
        os.chmod(self.dir, 0o700)
        dirs = {k: os.path.join(self.dir, k.lower()) for k in
                ("XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME")}
        for d in dirs.values():
            os.mkdir(d, 0o700)
        runtime = dirs["XDG_RUNTIME_DIR"]
        self.env = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}
        self.env.update(dirs)
        self.env["PIPEWIRE_RUNTIME_DIR"] = runtime
        bus = os.path.join(runtime, "bus")
        self.env["DBUS_SESSION_BUS_ADDRESS"] = f"unix:path={bus}"

        # The bus first: its process leads the group every later process joins, so one killpg
        # ends them all, grandchildren included (dbus-activated services inherit the group).
        with self._log("dbus-daemon") as log:
            dbus = subprocess.Popen(
                ["dbus-daemon", "--session", f"--address=unix:path={bus}", "--nofork",
                 "--print-address"], env=self.env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=log, process_group=0, text=True,
                preexec_fn=_die_with_parent)
        self.pgid = dbus.pid
        self.procs["dbus-daemon"] = dbus
        address = self._read_line(dbus, 5.0)
        if not address.startswith("unix:path="):
            raise RuntimeError(f"dbus-daemon did not start: {address!r} {self.log('dbus-daemon')}")
        self.env["DBUS_SESSION_BUS_ADDRESS"] = address.strip()
        self.timings["dbus"] = time.monotonic() - t0

        self.start_pipewire()
        self.timings["pipewire+wireplumber"] = time.monotonic() - t0

        if self.export:
            self.saved_env = dict(os.environ)
            for k in LEAKY_ENV:
                os.environ.pop(k, None)
            for k in SESSION_ENV:
                os.environ[k] = self.env[k]

    def stop(self):
        """Ends every process of the group (SIGTERM, then SIGKILL after 5 s), reaps them,
        removes the directory and restores os.environ. Safe to call twice."""
        if self.saved_env is not None:
            os.environ.clear()
            os.environ.update(self.saved_env)
            self.saved_env = None
        if self.pgid is not None:
            self._signal_group(signal.SIGTERM)
            deadline = time.monotonic() + 5.0
            while self.group_pids() and time.monotonic() < deadline:
                self._reap()
                time.sleep(0.02)
            if self.group_pids():
                self._signal_group(signal.SIGKILL)
            for p in self.procs.values():
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                if p.stdout:
                    p.stdout.close()
            # Until the group is empty, zombies included: a service the bus started on demand
            # (xdg-permission-store, asked for by wireplumber) is orphaned when the bus ends and
            # stays a zombie until PID 1 reaps it, a moment later.
            deadline = time.monotonic() + 5.0
            while self._group_exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            # Forgotten once empty: the number may later name someone else's group.
            self.pgid = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def stop_pipewire(self):
        """Ends pipewire and wireplumber (SIGTERM, as a service manager does on an update or a
        log-out), leaving the bus and the runtime directory: clients see their connection
        go."""
        for name in ("wireplumber", "pipewire"):
            p = self.procs.pop(name, None)
            if p is None:
                continue
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)

    def start_pipewire(self):
        """Starts pipewire and wireplumber again (after stop_pipewire()), ready when it
        returns."""
        self.spawn("pipewire", ["pipewire"])
        self._wait(lambda: self._run(["pw-cli", "info", "0"]).returncode == 0, "pipewire")
        self.spawn("wireplumber", ["wireplumber"])
        self._wait(self._wireplumber_ready, "wireplumber")

    def spawn(self, name, argv, **kw):
        """Starts argv in the session's process group and environment, its output into the log
        `name` (see log()) unless stdout or stderr are given. stop() ends it with the session."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        with self._log(name) as log:
            kw.setdefault("stdout", log)
            kw.setdefault("stderr", log)
            p = subprocess.Popen(argv, env=kw.pop("env", self.env), process_group=self.pgid,
                                 preexec_fn=_die_with_parent, **kw)
        self.procs[name] = p
        return p

    def log(self, name, tail=4000):
        """The end of what process `name` wrote, for failure messages."""
        try:
            with open(os.path.join(self.dir, f"{name}.log"), errors="replace") as f:
                return f.read()[-tail:]
        except (OSError, TypeError):
            return ""

    def group_pids(self):
        """Live (non-zombie) processes of the session's group, found in /proc."""
        if self.pgid is None:
            return []
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            # Fields after the parenthesised command: state, ppid, pgrp.
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == self.pgid and fields[0] != "Z":
                pids.append(int(entry))
        return pids

    # --- the graph ------------------------------------------------------------------------------

    def dump(self):
        """pw-dump's objects (a list of dicts)."""
        p = self._run(["pw-dump"], timeout=10)
        if p.returncode != 0:
            raise RuntimeError(f"pw-dump failed: {p.stderr}")
        return json.loads(p.stdout)

    def nodes(self):
        """{node id: props} of every node in the graph."""
        return {o["id"]: (o.get("info") or {}).get("props", {}) for o in self.dump()
                if o.get("type") == "PipeWire:Interface:Node"}

    def wait_for_node(self, name, timeout=10.0, present=True):
        """Props of the node whose node.name is `name` once it exists (or None once it is gone,
        with present=False)."""
        deadline = time.monotonic() + timeout
        while True:
            found = [p for p in self.nodes().values() if p.get("node.name") == name]
            if present and found:
                return found[0]
            if not present and not found:
                return None
            if time.monotonic() > deadline:
                raise AssertionError(f"node {name!r} {'never appeared' if present else 'stayed'}")
            time.sleep(0.1)

    # --- internals ------------------------------------------------------------------------------

    def _log(self, name):
        # Append-only, handed to the child; the caller closes its copy once Popen has dup'ed it.
        return open(os.path.join(self.dir, f"{name}.log"), "ab")

    def _run(self, argv, timeout=5):
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)

    def _wireplumber_ready(self):
        # wireplumber creates the "default" metadata once its modules are loaded, before its
        # policy scripts: by the time a test connects a stream, they are. pw-cli, not pw-dump:
        # pw-dump (0.3.65) often leaves metadata objects of other clients out of its output.
        p = self._run(["pw-cli", "ls", "Metadata"])
        return p.returncode == 0 and 'metadata.name = "default"' in p.stdout

    def _wait(self, ready, name):
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            proc = self.procs[name]
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}: {self.log(name)}")
            if ready():
                return
            time.sleep(0.05)
        raise RuntimeError(f"{name} not ready after {self.ready_timeout} s: {self.log(name)}")

    @staticmethod
    def _read_line(proc, timeout):
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        return proc.stdout.readline() if ready else ""

    def _signal_group(self, sig):
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            pass

    def _group_exists(self):
        try:
            os.killpg(self.pgid, 0)
            return True
        except ProcessLookupError:
            return False

    def _reap(self):
        for p in self.procs.values():
            p.poll()


def frame_size(fmt, width, height):
    """Bytes of one frame by GStreamer format name (4:2:0 sizes from harness.frame_bytes)."""
    if fmt == "YUY2":
        return width * height * 2
    return harness.frame_bytes({"I420": "i420", "NV12": "nv12"}[fmt], width, height)


def read_sequence_marker(buf, caps=None):
    """The sequence in a GStreamer buffer's first 16 bytes (docs/protocol.md, "Sequence
    marker"), or None when they do not hold one. Copies 16 bytes, never maps the frame. An I420
    or NV12 stream passed through unconverted keeps this marker at the start of its Y plane."""
    if buf.get_size() < 16:
        return None
    sequence, complement = struct.unpack("<QQ", buf.extract_dup(0, 16))
    return sequence if complement == ~sequence & 0xFFFFFFFFFFFFFFFF else None


def read_buffer_offset(buf, caps=None):
    """The sequence pipewiresrc put in the buffer's offset from the producer's
    spa_meta_header.seq (syncd's camera writes the frame's sequence there), or None."""
    return None if buf.offset == 0xFFFFFFFFFFFFFFFF else buf.offset


def _gst():
    import gi
    gi.require_version("Gst", "1.0")
    from gi.repository import Gst
    Gst.init(None)
    return Gst


CAMERA_SOURCE_C = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pw_camera_source.c")


def build_camera_source(directory):
    """Compiles pw_camera_source.c into `directory` (about a second) and returns its path. A
    pw_stream program rather than gst-launch: pipewiresink copies appsrc buffers into PipeWire
    buffers before a consumer has negotiated any and fails (0.3.65), and videotestsrc cannot
    carry a sequence marker."""
    out = os.path.join(directory, "pw_camera_source")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libpipewire-0.3"],
                           capture_output=True, text=True, check=True).stdout.split()
    subprocess.run(["cc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", out,
                    CAMERA_SOURCE_C, *flags], check=True, capture_output=True, text=True)
    return out


def count_frames(target, seconds, caps=None, first_frame_timeout=10.0, stall_after=None,
                 stall_seconds=0.0, decode=read_sequence_marker, events=None):
    """Consumes the video node `target` (node.name or object.serial) with GStreamer's pipewiresrc
    into an appsink for `seconds` from the first frame, reading each frame's sequence marker.
    Returns counts, unique sequences a second (by arrival) and low-rate seconds, frames without
    a valid marker ("corrupt"), repeats and gaps, the negotiated caps, and latency percentiles
    when the producer stamps CLOCK_MONOTONIC into the buffer header's pts (pw_camera_source
    does). With stall_after, it stops pulling for stall_seconds after that many frames, once: a
    stalled consumer, whose appsink fills and whose pipewiresrc then holds PipeWire's buffers.
    decode(buffer, caps) returns a frame's sequence or None; frames converted from RGB carry
    another marker (tests/integration/test_camera.py reads it from the Y plane's columns).
    Needs the session's env in os.environ (read when the stream connects). A format the node
    does not offer makes pipewiresrc's start block about 30 s, then fail (not-negotiated).
    With events (a list), each frame with a sequence appends (sequence, pts_ns, read_ns): the
    producer's stamp (CLOCK_MONOTONIC, None without one) and when the appsink handed it over."""
    Gst = _gst()
    # pipewiresrc (0.3.65) sets no media.type on its stream; wireplumber links only nodes of the
    # same media.type, so without this property the consumer is destroyed as "target not found".
    src = Gst.ElementFactory.make("pipewiresrc")
    src.set_property("target-object", str(target))
    src.set_property("stream-properties",
                     Gst.Structure.new_from_string("props,media.type=(string)Video"))
    pipeline = Gst.Pipeline.new("consumer")
    sink = Gst.ElementFactory.make("appsink")
    sink.set_property("sync", False)
    sink.set_property("max-buffers", 16)
    sink.set_property("drop", False)
    elements = [src]
    if caps:
        capsfilter = Gst.ElementFactory.make("capsfilter")
        capsfilter.set_property("caps", Gst.Caps.from_string(caps))
        elements.append(capsfilter)
    elements.append(sink)
    for e in elements:
        pipeline.add(e)
    for a, b in zip(elements, elements[1:]):
        a.link(b)
    started = time.monotonic()
    pipeline.set_state(Gst.State.PLAYING)
    bins = math.ceil(seconds)
    result = {"target": str(target), "seconds": seconds, "caps": None, "first_frame_s": None,
              "frames": 0, "unique": 0, "corrupt": 0, "repeats": 0, "gaps": 0, "bytes": None,
              "first_sequence": None, "unique_per_second": [0] * bins}
    latencies = []
    first = None
    last = None
    try:
        while True:
            now = time.monotonic()
            if result["first_frame_s"] is None and now - started > first_frame_timeout:
                break
            if result["first_frame_s"] is not None and now - first >= seconds:
                break
            sample = sink.emit("try-pull-sample", 50 * Gst.MSECOND)
            if sample is None:
                continue
            now = time.monotonic()
            now_ns = time.monotonic_ns()
            buf = sample.get_buffer()
            if result["first_frame_s"] is None:
                first = now
                result["first_frame_s"] = round(now - started, 3)
                result["caps"] = sample.get_caps().to_string()
                result["bytes"] = buf.get_size()
            elapsed = now - first
            if elapsed >= seconds:
                break
            result["frames"] += 1
            # pipewiresrc's PTS is the header's pts less the pipeline's base time, both on the
            # PipeWire clock, which is CLOCK_MONOTONIC: so this is the producer's stamp.
            stamp_ns = None
            if buf.pts != Gst.CLOCK_TIME_NONE:
                stamp_ns = buf.pts + pipeline.get_base_time()
                latencies.append(now_ns - stamp_ns)
            sequence = decode(buf, sample.get_caps())
            if sequence is None:
                result["corrupt"] += 1
                continue
            if events is not None:
                events.append((sequence, stamp_ns, now_ns))
            if result["first_sequence"] is None:
                result["first_sequence"] = sequence
            if last is not None and sequence <= last:
                result["repeats"] += 1
                continue
            if last is not None and sequence > last + 1:
                result["gaps"] += sequence - last - 1
            last = sequence
            result["unique"] += 1
            result["unique_per_second"][int(elapsed)] += 1
            if stall_after is not None and result["frames"] == stall_after:
                time.sleep(stall_seconds)
    finally:
        pipeline.set_state(Gst.State.NULL)
    result["unique_fps"] = round(result["unique"] / seconds, 2)
    # As docs/qualification.md counts them: complete seconds with fewer than 50 unique frames.
    result["low_rate_seconds"] = sum(1 for n in result["unique_per_second"][:int(seconds)]
                                     if n < 50)
    if latencies:
        latencies.sort()
        for q in (50, 99):
            i = min(len(latencies) - 1, len(latencies) * q // 100)
            result[f"latency_p{q}_ms"] = round(latencies[i] / 1e6, 3)
    return result


def cpu_seconds(pid):
    """User + system CPU time a live process has used, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(width, height, fps, seconds, caps=None):
    """A whole run, for figures: a private session, pw_camera_source at width x height @ fps, and
    count_frames for `seconds` in this process; adds the CPU each process used meanwhile and the
    source's own counts."""
    with tempfile.TemporaryDirectory(prefix="sync-pw-build-") as build, PipeWireSession() as s:
        source = s.spawn("camera", [build_camera_source(build), "sync-measure-camera", str(width),
                                    str(height), str(fps)])
        s.wait_for_node("sync-measure-camera")
        pids = {"camera source": source.pid, "pipewire": s.procs["pipewire"].pid,
                "wireplumber": s.procs["wireplumber"].pid, "consumer (this process)": os.getpid()}
        before = {k: cpu_seconds(p) for k, p in pids.items()}
        t0 = time.monotonic()
        result = count_frames("sync-measure-camera", seconds, caps)
        wall = time.monotonic() - t0
        result["cpu_percent"] = {k: round(100 * (cpu_seconds(p) - before[k]) / wall, 1)
                                 for k, p in pids.items()}
        source.send_signal(signal.SIGTERM)
        source.wait(timeout=10)
        result["source"] = json.loads(s.log("camera").strip().splitlines()[-1])
        return result


def probe():
    """What this machine offers for the PipeWire tests, as a dict; starts and stops a session if
    the programs are there."""
    def version(argv):
        """The last line argv prints, \"\" if none, None if it fails."""
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        lines = (p.stdout + p.stderr).strip().splitlines()
        return (lines[-1] if lines else "") if p.returncode == 0 else None
    out = {
        "uid": os.getuid(),
        "missing": missing_binaries(),
        "pipewire": version(["pipewire", "--version"]),
        "wireplumber": version(["wireplumber", "--version"]),
        "libpipewire-0.3": version(["pkg-config", "--modversion", "libpipewire-0.3"]),
        "gst-pipewiresrc": version(["gst-inspect-1.0", "pipewiresrc"]) is not None,
        "gst-pipewiresink": version(["gst-inspect-1.0", "pipewiresink"]) is not None,
    }
    # In a child: importing gi here would load GStreamer into the caller (a test process).
    out["python-gst"] = version([sys.executable, "-c", "import gi; gi.require_version('Gst', "
                                 "'1.0'); from gi.repository import Gst"]) is not None
    if not out["missing"]:
        try:
            with PipeWireSession(export=False) as s:
                out["session_ready_s"] = {k: round(v, 3) for k, v in s.timings.items()}
                core = [o for o in s.dump() if o.get("id") == 0][0]
                out["server_version"] = core["info"].get("version")
        except RuntimeError as e:
            out["session_error"] = str(e)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("probe")
    sub.add_parser("shell")
    run = sub.add_parser("measure")
    run.add_argument("width", type=int)
    run.add_argument("height", type=int)
    run.add_argument("fps", type=int)
    run.add_argument("seconds", type=float)
    run.add_argument("--caps")
    count = sub.add_parser("count-frames")
    count.add_argument("target")
    count.add_argument("seconds", type=float)
    count.add_argument("--caps")
    count.add_argument("--stall-after", type=int)
    count.add_argument("--stall-seconds", type=float, default=0.0)
    count.add_argument("--marker", choices=("sequence", "luma", "offset"), default="sequence",
                       help="sequence: the 16-byte marker; luma: camera_marker's columns, for "
                            "frames the camera converted from RGB; offset: the producer's "
                            "sequence that syncd's camera puts in the buffer header (no check "
                            "of the pixels)")
    count.add_argument("--events", metavar="CSV",
                       help="also write sequence,stamp_ns,read_ns per frame read (CLOCK_MONOTONIC)")
    args = parser.parse_args()
    if args.command == "probe":
        print(json.dumps(probe(), indent=1))
    elif args.command == "shell":
        with PipeWireSession() as s:
            for k in SESSION_ENV:
                print(f"export {k}={s.env[k]}")
            print("# Ctrl-C or SIGTERM stops the session", flush=True)
            signal.signal(signal.SIGTERM, signal.default_int_handler)
            try:
                signal.pause()
            except KeyboardInterrupt:
                pass
    elif args.command == "measure":
        print(json.dumps(measure(args.width, args.height, args.fps, args.seconds, args.caps)))
    else:
        decode = read_sequence_marker
        if args.marker == "luma":
            from camera_marker import read_gst_marker as decode
        elif args.marker == "offset":
            decode = read_buffer_offset
        events = [] if args.events else None
        result = count_frames(args.target, args.seconds, args.caps, stall_after=args.stall_after,
                              stall_seconds=args.stall_seconds, decode=decode, events=events)
        if args.events:
            with open(args.events, "w") as f:
                f.write("sequence,stamp_ns,read_ns\n")
                for sequence, stamp_ns, read_ns in events:
                    f.write(f"{sequence},{stamp_ns if stamp_ns is not None else ''},{read_ns}\n")
        print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())
