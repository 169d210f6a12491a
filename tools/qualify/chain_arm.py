"""The seed's whole chain as a qualification arm (tools/qualify/run.py --arms chain; docs/camera.md,
"The whole chain"): a page's canvas reaching a camera on another machine over a WAN.

  Chromium (tests/browser/bench/chain-page.js: a 2D canvas with the column marker, published as
  H.264 through WebCodecs, publishCanvas codec h264)
    -> syncd A (--relay-to: the page's access units relayed as they come)
    -> sync-impair (1 % loss, 20 +/- 5 ms each way)
    -> syncd B (--relay-listen, --publisher camera: the relayed stream decoded once, its twin
       shown by the PipeWire camera node)
    -> a private PipeWire session (tests/integration/pipewire_session.py)
    -> GStreamer pipewiresrc (pipewire_session.py count-frames --marker luma), which reads each
       frame's marker back from its luma.

One machine, one clock: the page's capture time (performance.timeOrigin + now, measured against
CLOCK_MONOTONIC by the page driver) and the consumer's read time (CLOCK_MONOTONIC) give glass to
glass per frame, joined by the marker (the sequence's low 16 bits: a run shorter than the 18
minutes it takes to wrap at 60 fps; a longer one keeps each value's latest capture).

What it records under OUT/chain/: page.json (the driver's report: clock offset, every frame's
capture time, the publisher's stats), consumer.json and consumer_events.csv (count-frames),
stats_final_sender.json / stats_final_receiver.json, the impairment's counts, arm.json."""
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(REPO_ROOT / "tests" / "integration"))
import bench_common  # noqa: E402
import relay_arm  # noqa: E402

STREAM = "chain"
CAMERA_NAME = "Sync Chain Camera"
ONE_WAY_MS, JITTER_MS = relay_arm.ONE_WAY_MS, relay_arm.JITTER_MS
LOW_RATE_FPS = 50  # 5/6 of 60
STARTUP_S = 20  # the page's start (Chromium, encoder), the relay, the node: at most this


def _stats(runner, port):
    status, _, body = runner.http_get(port, "/stats")
    return json.loads(body) if status == 200 else None


def run_chain_arm(name, seconds, args, paths, caps, out_dir, runner):
    """Runs the chain for `seconds` at the consumer (after the node first appears)."""
    import pipewire_session
    arm_dir = out_dir / name
    arm_dir.mkdir(parents=True, exist_ok=True)
    width, height = (int(v) for v in args.size.lower().split("x"))
    if not caps["syncd"]:
        raise runner.Unavailable(f"syncd not built under {args.build_dir}")
    missing = pipewire_session.missing_binaries()
    if missing:
        raise runner.Unavailable(f"PipeWire test parts not installed: {' '.join(missing)}")
    browser_dir = REPO_ROOT / "tests" / "browser"
    if not (browser_dir / "node_modules" / "playwright-core").exists():
        raise runner.Unavailable("playwright-core not installed (cd tests/browser && npm ci)")
    impair_binary = relay_arm.impair_path(paths)
    impair_args = ["--seed", str(args.seed), *relay_arm.PROFILES["random"],
                   *relay_arm.delay_args(ONE_WAY_MS, JITTER_MS)]
    meta = {"arm": name, "kind": "chain", "seconds": seconds, "fps": args.fps, "width": width,
            "height": height, "stream": STREAM, "camera": CAMERA_NAME,
            "impair_args": impair_args, "one_way_ms": ONE_WAY_MS, "jitter_ms": JITTER_MS,
            "rekey_interval_s": args.rekey_interval, "notes": []}
    keys_dir = tempfile.TemporaryDirectory(prefix="sync-chain-")
    cert_tx = os.path.join(keys_dir.name, "sender.pem")
    cert_rx = os.path.join(keys_dir.name, "receiver.pem")
    fp_tx = relay_arm.fingerprint(paths["syncd"], cert_tx)
    fp_rx = relay_arm.fingerprint(paths["syncd"], cert_rx)
    session = pipewire_session.PipeWireSession(export=False)
    Child = bench_common.Child
    children = []
    live = runner.LiveLine(sys.stderr.isatty() and not args.quiet)
    try:
        session.start()
        rx = Child("receiving syncd", [
            str(paths["syncd"]), "--port", "0", "--status-line", "off", "--publisher", "camera",
            "--camera-name", CAMERA_NAME, "--relay-listen", "127.0.0.1:0", "--relay-cert",
            cert_rx, "--peer-fingerprint", fp_tx], env=session.env)
        children.append(rx)
        rx_port = bench_common.port_from_line(rx.first_stdout_line(10), "receiving syncd")
        lines = [rx.stdout_line(i, 10) for i in (1,)]
        udp = [ln for ln in lines if "relay listening on udp port" in ln]
        if not udp:
            raise runner.ArmError(f"unexpected line from the receiving syncd: {lines!r}")
        rx_udp = int(udp[0].split()[-1])
        impair = Child("sync-impair", [str(impair_binary), "--listen", "127.0.0.1:0", "--to",
                                       f"127.0.0.1:{rx_udp}", "--quiet", *impair_args])
        children.append(impair)
        impair_port = bench_common.port_from_line(impair.first_stdout_line(10), "sync-impair")
        tx = Child("sending syncd", [
            str(paths["syncd"]), "--port", "0", "--status-line", "off", "--relay-to",
            f"127.0.0.1:{impair_port}", "--relay-cert", cert_tx, "--peer-fingerprint", fp_rx,
            "--dtls-rekey-interval", str(args.rekey_interval)])
        children.append(tx)
        tx_port = bench_common.port_from_line(tx.first_stdout_line(10), "sending syncd")
        deadline = time.monotonic() + 15
        while ((_stats(runner, tx_port) or {}).get("relay") or {}).get("state") != "connected":
            if time.monotonic() > deadline:
                raise runner.ArmError(f"the relay did not connect within 15 s: "
                                      f"{tx.stderr_tail()} {rx.stderr_tail()}")
            time.sleep(0.05)

        page = Child("chain page", [
            "node", "bench/chain-page.js", "--base", f"http://127.0.0.1:{tx_port}", "--stream",
            STREAM, "--width", str(width), "--height", str(height), "--fps", f"{args.fps:g}",
            "--seconds", str(seconds + STARTUP_S + 10)], cwd=str(browser_dir))
        children.append(page)
        t_page = time.monotonic()
        try:
            session.wait_for_node(CAMERA_NAME, timeout=STARTUP_S)
        except AssertionError:
            raise runner.ArmError(f"no camera node within {STARTUP_S} s of the page's start: "
                                  f"{page.stderr_tail(20)} {rx.stderr_tail()}")
        meta["node_after_page_start_s"] = round(time.monotonic() - t_page, 2)
        consumer = Child("consumer", [
            sys.executable, pipewire_session.__file__, "count-frames", CAMERA_NAME, str(seconds),
            "--marker", "luma", "--events", str(arm_dir / "consumer_events.csv")],
            env=session.env, cwd=str(REPO_ROOT / "tests" / "integration"))
        children.append(consumer)
        started = time.monotonic()
        while consumer.proc.poll() is None:
            if time.monotonic() - started > seconds + 60:
                raise runner.ArmError("the consumer did not finish")
            s = runner.find_stream(_stats(runner, rx_port) or {}, STREAM + ".decoded") or {}
            cam = (s.get("publishers") or {}).get("camera") or {}
            live.show(f"{name} {time.monotonic() - started:5.0f}/{seconds}s  camera delivered "
                      f"{cam.get('delivered', 0)}  consumed {cam.get('consumed', 0)}  "
                      f"dropped {sum((cam.get('dropped') or {}).values())}")
            time.sleep(0.5)
        live.finish()
        (arm_dir / "consumer.json").write_text(
            (consumer.stdout_lines[-1] if consumer.stdout_lines else "null") + "\n")
        (arm_dir / "consumer_stderr.txt").write_text("\n".join(consumer.stderr_lines) + "\n")
        if consumer.proc.returncode != 0:
            raise runner.ArmError(f"the consumer failed: {consumer.stderr_tail(10)}")
        page.proc.send_signal(signal.SIGUSR2)  # chain-page.js: stop and report
        page.wait(30)
        (arm_dir / "page.json").write_text(
            (page.stdout_lines[-1] if page.stdout_lines else "null") + "\n")
        if page.proc.returncode != 0:
            raise runner.ArmError(f"the page failed: {page.stderr_tail(20)}")
        # Once the page has stopped and its last frames are through (a second: the path's
        # delay, a retransmission), every stage's count covers the same frames.
        time.sleep(1.0)
        for role, port in (("sender", tx_port), ("receiver", rx_port)):
            (arm_dir / f"stats_final_{role}.json").write_text(json.dumps(_stats(runner, port)) + "\n")
        for child, what in ((tx, "sender"), (rx, "receiver")):
            child.proc.send_signal(signal.SIGTERM)
            meta[f"{what}_exit_code"] = child.wait(15)
            (arm_dir / f"{what}_stderr.txt").write_text("\n".join(child.stderr_lines) + "\n")
        impair.proc.send_signal(signal.SIGTERM)
        impair.wait(10)
        (arm_dir / "impair.json").write_text(json.dumps(impair.last_json(required=False)) + "\n")
    finally:
        live.finish()
        for child in reversed(children):
            child.kill()
        session.stop()
        keys_dir.cleanup()
        (arm_dir / "arm.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    return meta


def _load(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def analyze_chain_arm(arm_dir):
    arm_dir = Path(arm_dir)
    meta = _load(arm_dir / "arm.json") or {}
    page = _load(arm_dir / "page.json") or {}
    consumer = _load(arm_dir / "consumer.json") or {}
    tx = _load(arm_dir / "stats_final_sender.json") or {}
    rx = _load(arm_dir / "stats_final_receiver.json") or {}
    fps = meta.get("fps", 60)
    interval_ms = 1000 / fps
    result = {"arm": meta.get("arm", arm_dir.name), "kind": "chain", "seconds": meta.get("seconds"),
              "size": f"{meta.get('width')}x{meta.get('height')}", "nominal_fps": fps,
              "impairment": " ".join(meta.get("impair_args", [])), "notes": meta.get("notes", [])}
    # ---- glass to glass: the page's capture time to the consumer's read, per frame
    sent = page.get("sent") or []
    capture = {}
    for i in range(0, len(sent) - 1, 2):
        capture[int(sent[i]) & 0xFFFF] = float(sent[i + 1])  # the latest of each marker value
    rows = []
    try:
        for line in (arm_dir / "consumer_events.csv").read_text().splitlines()[1:]:
            seq, _, read_ns = line.split(",")
            rows.append((int(seq), int(read_ns)))
    except OSError:
        pass
    offset = page.get("offset_us")
    g2g = np.array([r[1] / 1000 + offset - capture[r[0]] for r in rows if r[0] in capture]
                   if offset is not None else [], dtype=float) / 1000
    times = np.array([r[1] for r in rows if r[0] in capture], dtype=float) / 1e9
    result["_g2g"] = (times, g2g)
    p = (page.get("page") or {}).get("p") or {}
    encode_ms = p.get("encodeMsMean")  # the page's encode() to its output, WebCodecs
    decoded = (bench_common.find_stream(rx, STREAM) or {}).get("publishers", {}).get("decode") or {}
    decoder = decoded.get("decoder") or {}
    decode_ms = (decoder.get("decode") or {}).get("mean_us")
    decode_ms = decode_ms / 1000 if decode_ms else None
    bound = ONE_WAY_MS + interval_ms + (encode_ms or 0) + (decode_ms or 0)
    result["glass_to_glass"] = {
        "frames": int(len(g2g)),
        "ms": {k: float(np.percentile(g2g, q)) for k, q in
               (("p50", 50), ("p95", 95), ("p99", 99), ("max", 100))} if len(g2g) else None,
        "encode_ms_mean": encode_ms, "decode_ms_mean": decode_ms, "bound_ms": bound,
        "clock_error_ms": page.get("clock_error_ms"), "clock_drift_ms": page.get("drift_ms")}
    # ---- the consumer: unique frames a second, low-rate seconds, damaged frames
    per_second = consumer.get("unique_per_second") or []
    full = per_second[:-1] if len(per_second) > 1 else per_second  # the last bin is partial
    result["consumer"] = {
        "unique": consumer.get("unique"), "unique_fps": consumer.get("unique_fps"),
        "corrupt": consumer.get("corrupt"), "gaps": consumer.get("gaps"),
        "repeats": consumer.get("repeats"), "caps": consumer.get("caps"),
        "per_second": per_second, "min_second": min(full) if full else None,
        "low_rate_seconds": sum(1 for n in full if n < LOW_RATE_FPS)}
    # ---- where frames went missing, stage by stage
    relay_tx = (tx.get("relay") or {}).get("sender") or {}
    relay_rx = (rx.get("relay") or {}).get("receiver") or {}
    stream_tx = bench_common.find_stream(tx, STREAM) or {}
    twin = bench_common.find_stream(rx, STREAM + ".decoded") or {}
    cam = (twin.get("publishers") or {}).get("camera") or {}
    result["stages"] = {
        "page": {"sent": p.get("sent"), "dropped": p.get("dropped")},
        "sender_syncd": {"accepted": stream_tx.get("frames_accepted"),
                         "dropped": stream_tx.get("frames_dropped")},
        "relay_sender": {"frames_sent": relay_tx.get("frames_sent"),
                         "frames_refused": relay_tx.get("frames_refused")},
        "relay_receiver": {"frames_complete": relay_rx.get("frames_complete"),
                           "frames_dropped": relay_rx.get("frames_dropped"),
                           "recovered_fec": relay_rx.get("packets_recovered_fec"),
                           "recovered_rtx": relay_rx.get("packets_recovered_rtx")},
        "decode": {k: decoder.get(k) for k in ("decoded", "dropped") if k in decoder},
        "camera": {k: cam.get(k) for k in ("offered", "delivered", "consumed", "abandoned",
                                           "with_consumer", "dropped")},
        "consumer": {"unique": consumer.get("unique")}}
    result["rekeys"] = ((tx.get("relay") or {}).get("keys") or {}).get("rekeys")
    c = {}
    g = result["glass_to_glass"]
    c["glass_to_glass_p50_within_one_way_plus_interval_plus_codec"] = bool(
        g["ms"] and g["ms"]["p50"] <= bound)
    c["zero_low_rate_seconds_at_the_consumer"] = bool(full) and \
        result["consumer"]["low_rate_seconds"] == 0
    c["zero_corrupt"] = consumer.get("corrupt") == 0
    c["re_keyed_during_the_run"] = bool(result["rekeys"])
    c["both_syncd_exited_cleanly"] = (meta.get("sender_exit_code") == 0
                                      and meta.get("receiver_exit_code") == 0)
    result["contract"] = c
    result["contract_met"] = all(c.values())
    return result


def plot_chain_arm(result, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    name = result["arm"]
    fig, axes = plt.subplots(2, 1, figsize=(10, 7))
    per_second = result["consumer"]["per_second"]
    ax = axes[0]
    ax.step(range(1, len(per_second) + 1), per_second, where="mid", label="camera consumer")
    ax.axhline(result["nominal_fps"], color="grey", linestyle=":", linewidth=0.8)
    ax.axhline(LOW_RATE_FPS, color="red", linestyle="--", linewidth=0.8, label="low-rate (<50)")
    ax.set_ylim(0, result["nominal_fps"] * 1.25)
    ax.set_ylabel("unique frames / s")
    ax.set_xlabel("second of the consumer's run")
    ax.set_title(f"{name}: page canvas (H.264) -> syncd -> WAN -> syncd -> PipeWire camera -> "
                 f"pipewiresrc, {result['size']}\nsync-impair {result['impairment']}", fontsize=9)
    ax.legend(loc="lower right", fontsize=7)
    times, g2g = result["_g2g"]
    ax = axes[1]
    if len(g2g):
        ax.plot(times - times[0], g2g, ".", markersize=1.5, label="canvas capture -> consumer")
        ax.axhline(result["glass_to_glass"]["bound_ms"], color="red", linestyle="--",
                   linewidth=0.8, label=f"bound p50 ({result['glass_to_glass']['bound_ms']:.1f} ms)")
        ax.axhline(result["glass_to_glass"]["ms"]["p50"], color="green", linewidth=0.8,
                   label=f"p50 ({result['glass_to_glass']['ms']['p50']:.1f} ms)")
    ax.set_ylabel("glass to glass, ms")
    ax.set_xlabel("seconds")
    ax.legend(loc="upper right", fontsize=7)
    for a in axes:
        a.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_dir / f"{name}.png", dpi=100)
    plt.close(fig)
    return {"timeline": f"{name}.png"}


def summary_rows(arms):
    lines = []
    cols = ["figure"] + list(arms)
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))

    def row(label, fn):
        vals = []
        for a in arms.values():
            try:
                v = fn(a)
                vals.append(f"{v:.1f}" if isinstance(v, float) else str(v))
            except (KeyError, TypeError, IndexError):
                vals.append("n/a")
        lines.append(f"| {label} | " + " | ".join(vals) + " |")

    row("duration s / size", lambda a: f"{a['seconds']} / {a['size']}")
    row("consumer unique fps / min second / low-rate s",
        lambda a: f"{a['consumer']['unique_fps']} / {a['consumer']['min_second']} / "
                  f"{a['consumer']['low_rate_seconds']}")
    row("consumer corrupt / gaps", lambda a: f"{a['consumer']['corrupt']} / "
                                             f"{a['consumer']['gaps']}")
    row("glass to glass p50 / p95 / p99 ms (bound p50)",
        lambda a: "{p50:.1f} / {p95:.1f} / {p99:.1f}".format(**a["glass_to_glass"]["ms"])
        + f" ({a['glass_to_glass']['bound_ms']:.1f})")
    row("page encode / receiver decode ms (mean)",
        lambda a: f"{a['glass_to_glass']['encode_ms_mean']:.2f} / "
                  f"{a['glass_to_glass']['decode_ms_mean']:.2f}")
    row("stages: page sent / relayed / complete at B / camera delivered / consumed / consumer",
        lambda a: " / ".join(str(x) for x in (
            a["stages"]["page"]["sent"], a["stages"]["relay_sender"]["frames_sent"],
            a["stages"]["relay_receiver"]["frames_complete"],
            a["stages"]["camera"]["delivered"], a["stages"]["camera"]["consumed"],
            a["stages"]["consumer"]["unique"])))
    row("re-keys", lambda a: a["rekeys"])
    row("contract met", lambda a: "yes" if a["contract_met"] else "NO: " + ", ".join(
        k for k, v in a["contract"].items() if not v))
    return lines
