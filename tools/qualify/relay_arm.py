"""The WAN relay arms of the qualification runner (tools/qualify/run.py; docs/qualification.md,
"The relay arms").

Two syncd on this machine, one clock for both: the sender (--relay-to) takes an H.264 stream from
sync-producer (an x264 clip made at the start, tools/h264/make_clip.py, sent in rotation), and
relays it over DTLS-keyed SRTP through sync-impair to the receiver (--relay-listen), whose test
publisher checks every access unit's bytes against the hash the sender computed. Re-keys every
--rekey-interval seconds (10 by default).

Profiles (sync-impair, both directions):
  random   1 % random loss, 20 +/- 5 ms (uniform) delay each way       (arms relay, relay-soak)
  burst    5 % Gilbert-Elliott loss in mean bursts of 4 packets, the same delay  (relay-burst)
  wan-burst  the same bursts, and 40 +/- 10 ms each way (relay-raw-burst: raw frames encoded at
           the sender and decoded at the receiver, every frame's marker checked)
  cap-shaper   raw frames from a 30 Mbit/s start (--relay-bitrate and --relay-max-bitrate 30000)
           through a path capped at 10 Mbit/s from 15 s to 45 s, a 100-ms queue in front of the
           cap (a shaper; relay-cap-shaper)
  cap-policer  the same cap as a policer: a 32-KB token bucket and no queue, what does not fit
           is dropped (relay-cap-policer)
  abr      the same delay and no random loss; the sender's path capped at 20 Mbit/s, 4 Mbit/s
           from 20 s, 20 Mbit/s again from 40 s (relay-abr). The source is raw: sync-producer's
           RGBA pattern with the column marker, which the sending syncd encodes (adaptive
           bitrate follows the estimate) and the receiving syncd decodes; its test publisher
           checks every frame's marker.

What one arm records under OUT/ARM/, besides what every arm records (producer_events.csv,
arm.json):
  sender_events.csv / receiver_events.csv   GET /events/frames of each syncd (accept_ns per
                                            producer sequence: the sender's accept and the
                                            receiver's frame complete)
  telemetry.jsonl   every 5 s, per syncd: VmRSS, process CPU, the relay thread's CPU
                    (/proc/PID/task/TID/stat of the thread named sync-relay), loop CPU, the
                    /stats "relay" object
  key_switches.jsonl  every change of the sender's send epoch (polled every 0.2 s): when each
                    re-key took effect, for the frame gaps around it
  impair.json       sync-impair's totals (datagrams dropped by reason, per direction)
  abr.jsonl         (relay-abr) every 0.25 s: the sender's send-rate target and REMB, its
                    socket's bytes sent, and its encoder's bitrate and picture size
  stats_final_sender.json / stats_final_receiver.json
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_common

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
STREAM = "relay-qual"
EVENTS_POLL_S = 2.0
TELEMETRY_S = 5.0
KEYS_POLL_S = 0.2
CLIP_FRAMES = 600  # 10 s at 60 fps, sent in rotation
ONE_WAY_MS = 20
JITTER_MS = 5

ABR_POLL_S = 0.25
ABR_SCHEDULE = "0:20000,20:4000,40:20000"  # seconds after sync-impair starts : kbit/s
CAP_SCHEDULE = "0:0,15:10000,45:0"  # no cap, 10 Mbit/s from 15 s to 45 s, no cap again
CAP_START_KBPS = "30000"

PROFILES = {
    "random": ["--fwd-loss", "1", "--rev-loss", "1"],
    "abr": ["--fwd-rate-schedule", ABR_SCHEDULE],
    "cap-shaper": ["--fwd-rate-schedule", CAP_SCHEDULE],
    "cap-policer": ["--fwd-rate-schedule", CAP_SCHEDULE, "--fwd-bucket", "32768", "--fwd-queue", "1"],
    "burst": ["--fwd-burst-loss", "5", "--fwd-burst-length", "4", "--rev-burst-loss", "5",
              "--rev-burst-length", "4"],
}
# One-way delay and jitter per profile (ms); the rest take ONE_WAY_MS +/- JITTER_MS.
PROFILE_DELAY = {"wan-burst": (40, 10)}
PROFILES["wan-burst"] = PROFILES["burst"]


def delay_args(one_way_ms, jitter_ms):
    return ["--fwd-delay", str(one_way_ms), "--fwd-jitter", str(jitter_ms), "--rev-delay",
            str(one_way_ms), "--rev-jitter", str(jitter_ms)]

NETNS_RECEIVER = "sync-a"  # scripts/netns-pair.sh's namespaces and addresses
NETNS_RECEIVER_ADDRESS = "10.77.0.1"

# name: (sync-impair profile, source: an H.264 clip or raw frames the sender encodes); the
# lengths are run.py's ARMS
RELAY_ARMS = {
    "relay": ("random", "clip"),
    "relay-soak": ("random", "clip"),
    "relay-burst": ("burst", "clip"),
    "relay-raw": ("random", "raw"),
    "relay-raw-burst": ("wan-burst", "raw"),
    "relay-abr": ("abr", "raw"),
    "relay-cap-shaper": ("cap-shaper", "raw"),
    "relay-cap-policer": ("cap-policer", "raw"),
}


def monotonic_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def impair_path(paths):
    """sync-impair in syncd's build tree."""
    return paths["syncd"].parents[2] / "tools" / "impair" / "sync-impair"


def thread_cpu_seconds(pid, name):
    """utime + stime of the thread of process pid called name; None if none is."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != name:
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return None


def make_clip(path, width, height, fps, bitrate_kbps):
    """The x264 clip, made once per report directory and size."""
    if path.exists():
        return json.loads(path.with_suffix(".json").read_text())
    out = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "h264" / "make_clip.py"),
                          "--out", str(path), "--width", str(width), "--height", str(height),
                          "--fps", str(int(fps)), "--frames", str(CLIP_FRAMES), "--bitrate",
                          str(bitrate_kbps), "--keyint", str(int(2 * fps))],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise bench_common.BenchError(f"make_clip.py failed: {out.stderr.strip()[-300:]}")
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    path.with_suffix(".json").write_text(json.dumps(summary) + "\n")
    return summary


def fingerprint(syncd, cert):
    out = subprocess.run([str(syncd), "--print-fingerprint", "--relay-cert", cert],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise bench_common.BenchError(f"syncd --print-fingerprint: {out.stderr.strip()}")
    return out.stdout.strip()


def run_relay_arm(name, seconds, args, paths, caps, out_dir, runner):
    """One relay arm. runner is run.py's module (EventsPoller, LiveLine, helpers)."""
    profile, source = RELAY_ARMS[name]
    arm_dir = out_dir / name
    arm_dir.mkdir(parents=True, exist_ok=True)
    width, height = (int(v) for v in args.size.lower().split("x"))
    impair_binary = impair_path(paths)
    if not caps["syncd"] or not caps["producer"]:
        raise runner.Unavailable(f"syncd or sync-producer not built under {args.build_dir}")
    if not os.access(impair_binary, os.X_OK):
        raise runner.Unavailable(f"sync-impair not built ({impair_binary})")
    if "--relay-listen" not in runner.help_text(paths["syncd"]):
        raise runner.Unavailable("this syncd has no relay (--relay-listen)")
    # --netns: the receiver in namespace sync-a, reached over the veth pair from here (sync-b).
    rx_host = NETNS_RECEIVER_ADDRESS if args.netns else "127.0.0.1"
    rx_prefix = ["ip", "netns", "exec", NETNS_RECEIVER] if args.netns else []
    one_way_ms, jitter_ms = PROFILE_DELAY.get(profile, (ONE_WAY_MS, JITTER_MS))
    impair_args = ["--seed", str(args.seed), *PROFILES[profile], *delay_args(one_way_ms, jitter_ms)]
    meta = {
        "arm": name, "kind": "relay", "reader_kind": "relay", "seconds": seconds,
        "fps": args.fps, "width": width, "height": height, "readers": 0, "stream": STREAM,
        "profile": profile, "impair_args": impair_args, "one_way_ms": one_way_ms,
        "jitter_ms": jitter_ms, "rekey_interval_s": args.rekey_interval,
        "bitrate_kbps": args.bitrate, "notes": [], "capabilities": caps,
        "netns": bool(args.netns), "source": source,
    }
    if source == "clip":
        print(f"   making the {width}x{height} clip ({CLIP_FRAMES} frames at {args.bitrate} "
              f"kbit/s)", file=sys.stderr, flush=True)
        clip = out_dir / f"relay-clip-{width}x{height}-{args.bitrate}k.264"
        meta["clip"] = {"path": str(clip), **make_clip(clip, width, height, args.fps,
                                                       args.bitrate)}
    else:
        meta["rate_schedule"] = CAP_SCHEDULE if profile.startswith("cap-") else ABR_SCHEDULE

    keys_dir = tempfile.TemporaryDirectory(prefix="sync-relay-qual-")
    cert_tx = os.path.join(keys_dir.name, "sender.pem")
    cert_rx = os.path.join(keys_dir.name, "receiver.pem")
    fp_tx = fingerprint(paths["syncd"], cert_tx)
    fp_rx = fingerprint(paths["syncd"], cert_rx)

    Child = bench_common.Child
    children = []
    live = runner.LiveLine(sys.stderr.isatty() and not args.quiet)
    telemetry_file = open(arm_dir / "telemetry.jsonl", "w")
    switches_file = open(arm_dir / "key_switches.jsonl", "w")
    abr_file = open(arm_dir / "abr.jsonl", "w") if source == "raw" else None
    pollers = {}
    try:
        # The receiver is not pinned: sync-impair and the receiver share whatever the sender
        # (core 0) and the producer (core 1) leave.
        rx_argv = [*rx_prefix, str(paths["syncd"]), "--host", rx_host, "--port", "0",
                   "--status-line", "off", "--publisher", "test", "--relay-listen",
                   f"{rx_host}:0", "--relay-cert", cert_rx, "--peer-fingerprint", fp_tx]
        # Audio beside the video (docs/wan.md, "Audio"): the tone capture at the sender, a
        # relay-written source at the receiver; its account lands in the final stats.
        audio_channels = getattr(args, "relay_audio", 0) or 0
        if audio_channels:
            rx_argv += ["--audio-source", f"relay:{audio_channels}"]
            meta["audio_channels"] = audio_channels
        rx = Child("receiving syncd", rx_argv)
        children.append(rx)
        rx_port = bench_common.port_from_line(rx.first_stdout_line(10), "receiving syncd")
        udp_line = rx.stdout_line(1, 10)
        if "relay listening on udp port" not in udp_line:
            raise runner.ArmError(f"unexpected second line from syncd: {udp_line!r}")
        rx_udp = int(udp_line.split()[-1])

        impair_argv = [str(impair_binary), "--listen", "127.0.0.1:0", "--to",
                       f"{rx_host}:{rx_udp}", "--quiet", *impair_args]
        impair = Child("sync-impair", impair_argv)
        children.append(impair)
        impair_port = bench_common.port_from_line(impair.first_stdout_line(10), "sync-impair")
        meta["impair_start_ns"] = monotonic_ns()  # the rate schedule's zero, near enough

        tx_argv = [
            str(paths["syncd"]), "--port", "0", "--status-line", "off", "--publisher", "test",
            "--relay-to", f"127.0.0.1:{impair_port}", "--relay-cert", cert_tx,
            "--peer-fingerprint", fp_rx, "--dtls-rekey-interval", str(args.rekey_interval)]
        if profile.startswith("cap-"):
            tx_argv += ["--relay-bitrate", CAP_START_KBPS, "--relay-max-bitrate", CAP_START_KBPS]
        if audio_channels:
            tx_argv += ["--audio-source", f"synthetic:{audio_channels},tone"]
        # A raw source's sender runs two busy threads, the loop (ingest at up to 500 MB/s) and
        # the encoder's worker (x264, ~8 ms a 1080p frame with the conversion): pinned to one
        # core they would share it and the encoder falls behind; unpinned, the scheduler
        # spreads them (and the producer) over both cores, as on a user's machine.
        if source == "clip":
            tx_argv = runner.pinned(runner.SYNCD_CORE, tx_argv)
        tx = Child("sending syncd", tx_argv)
        children.append(tx)
        tx_port = bench_common.port_from_line(tx.first_stdout_line(10), "sending syncd")
        endpoints = {"sender": ("127.0.0.1", tx_port), "receiver": (rx_host, rx_port)}
        meta.update({"receiver_argv": rx_argv, "impair_argv": impair_argv, "sender_argv": tx_argv})

        def relay_stats(role):
            host, port = endpoints[role]
            status, _, body = runner.http_get(port, "/stats", host=host)
            return json.loads(body) if status == 200 else None

        deadline = time.monotonic() + 15
        while ((relay_stats("sender") or {}).get("relay") or {}).get("state") != "connected":
            if time.monotonic() > deadline:
                raise runner.ArmError(f"the relay did not connect within 15 s: "
                                      f"{tx.stderr_tail()} {rx.stderr_tail()}")
            time.sleep(0.05)

        daemons = {"sender": tx, "receiver": rx}
        pollers = {role: runner.EventsPoller(port, arm_dir / f"{role}_events.csv", host)
                   for role, (host, port) in endpoints.items()}

        def sample(t0):
            rec = {"t_ns": monotonic_ns(), "t_s": (monotonic_ns() - t0) / 1e9,
                   "loadavg_1m": os.getloadavg()[0], "steal_seconds": runner.steal_seconds()}
            for role, child in daemons.items():
                stats = relay_stats(role) or {}
                proc = runner.proc_status(child.pid)
                rec[role] = {
                    "rss_kib": proc.get("VmRSS"), "proc": proc,
                    "process_cpu_seconds": runner.proc_cpu_seconds(child.pid),
                    "relay_thread_cpu_seconds": thread_cpu_seconds(child.pid, "sync-relay"),
                    "loop_cpu_seconds": stats.get("process", {}).get("loop_cpu_seconds"),
                    "relay": stats.get("relay"),
                    "stream": runner.find_stream(stats, STREAM),
                }
            telemetry_file.write(json.dumps(rec) + "\n")
            telemetry_file.flush()
            return rec

        t0 = monotonic_ns()
        meta["start_ns"] = t0
        sample(t0)
        # A raw stream asks for 8 slots, as a page relaying its canvas should: the encoder
        # holds a pinned frame for its ~6-11 ms, and with 4 slots (3 pins) a stall of the
        # encoder's core for two frame intervals already refuses a pin.
        media_args = (["--format", "h264", "--h264", str(clip)] if source == "clip" else
                      ["--format", "rgba8", "--camera-marker", "--slots", "8"])
        producer_argv = [str(paths["producer"]), "--url", f"ws://127.0.0.1:{tx_port}/ws",
                         "--stream", STREAM, *media_args,
                         "--width", str(width), "--height", str(height), "--fps",
                         str(args.fps), "--seconds", str(seconds),
                         "--events", str(arm_dir / "producer_events.csv"), "--quiet"]
        if not args.producer_normal_priority:
            producer_argv.append("--realtime")
        meta["producer_argv"] = producer_argv
        producer = Child("sync-producer", runner.pinned(runner.PRODUCER_CORE, producer_argv))
        children.append(producer)
        producer_start = time.monotonic()

        next_events = time.monotonic() + EVENTS_POLL_S
        next_sample = time.monotonic() + TELEMETRY_S
        next_keys = time.monotonic()
        next_abr = time.monotonic()
        send_epoch = None
        while producer.proc.poll() is None:
            now = time.monotonic()
            if abr_file and now >= next_abr:
                stats = relay_stats("sender") or {}
                r = stats.get("relay") or {}
                stream = runner.find_stream(stats, STREAM) or {}
                relay_pub = (stream.get("publishers") or {}).get("relay") or {}
                abr_file.write(json.dumps({
                    "t_ns": monotonic_ns(), "sender": r.get("sender"),
                    "bytes_sent": (r.get("socket") or {}).get("bytes_sent"),
                    "encoder": relay_pub.get("encoder")}) + "\n")
                abr_file.flush()
                next_abr += ABR_POLL_S
            if now >= next_keys:
                r = (relay_stats("sender") or {}).get("relay") or {}
                epoch = (r.get("keys") or {}).get("send_epoch")
                if epoch is not None and epoch != send_epoch:
                    if send_epoch is not None:
                        switches_file.write(json.dumps({"t_ns": monotonic_ns(),
                                                        "from": send_epoch, "to": epoch}) + "\n")
                        switches_file.flush()
                    send_epoch = epoch
                next_keys += KEYS_POLL_S
            if now >= next_events:
                for p in pollers.values():
                    p.poll()
                next_events += EVENTS_POLL_S
            if now >= next_sample:
                last = sample(t0)
                next_sample += TELEMETRY_S
                s = last["receiver"].get("stream") or {}
                rr = (last["receiver"].get("relay") or {}).get("receiver") or {}
                live.show(f"{name} {now - producer_start:6.0f}/{seconds}s  remote fps "
                          f"{s.get('last_second_unique_fps', 0):3d}  low-rate "
                          f"{s.get('low_rate_seconds', 0)}  verified "
                          f"{s.get('frames_verified', 0)}  dropped "
                          f"{rr.get('frames_dropped', 0)}  fec/rtx "
                          f"{rr.get('packets_recovered_fec', 0)}/"
                          f"{rr.get('packets_recovered_rtx', 0)}  rss tx/rx "
                          f"{(last['sender']['rss_kib'] or 0) / 1024:.0f}/"
                          f"{(last['receiver']['rss_kib'] or 0) / 1024:.0f} MiB")
            time.sleep(0.02)
        live.finish()
        producer_code = runner.finish_producer(producer, meta)

        # The sender's BYE closes the receiver's stream once its last frame is through.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            src = (((relay_stats("receiver") or {}).get("relay") or {}).get("receiver") or {}).get(
                "source") or {}
            if src.get("stream") is None and src.get("streams_opened"):
                break
            time.sleep(0.1)
        else:
            meta["notes"].append("the receiver's stream was still open 10 s after the producer")
        for p in pollers.values():
            p.poll()
        meta["sources"] = {f"{role}_events": {"available": bool(p.available), "rows": p.rows,
                                              "lost": p.lost, "note": p.note}
                           for role, p in pollers.items()}
        meta["final_telemetry"] = sample(t0)
        for role in daemons:
            stats = relay_stats(role)
            if stats:
                (arm_dir / f"stats_final_{role}.json").write_text(json.dumps(stats) + "\n")
        for child, what in ((tx, "sender"), (rx, "receiver")):
            child.proc.send_signal(signal.SIGTERM)
            meta[f"{what}_exit_code"] = child.wait(15)
            meta[f"{what}_stderr"] = child.stderr_lines[-10:]
            (arm_dir / f"{what}_stderr.txt").write_text("\n".join(child.stderr_lines) + "\n")
        impair.proc.send_signal(signal.SIGTERM)
        impair.wait(10)
        (arm_dir / "impair.json").write_text(json.dumps(impair.last_json(required=False),
                                                        indent=1) + "\n")
        meta["end_ns"] = monotonic_ns()
        if producer_code != 0:
            raise runner.ArmError(f"sync-producer exited with {producer_code}: "
                                  f"{' | '.join(meta['producer_stderr'])}")
    finally:
        live.finish()
        telemetry_file.close()
        switches_file.close()
        if abr_file:
            abr_file.close()
        for p in pollers.values():
            p.close()
        for child in reversed(children):
            child.kill()
        keys_dir.cleanup()
        (arm_dir / "arm.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    return meta
