#!/usr/bin/env python3
"""Audio continuity over the WAN relay, beside video (docs/wan.md, "Audio"; docs/benchmarks.md).

Two syncd on this machine: the sender captures the synthetic tone signal (--audio-source
synthetic:CHANNELS,tone) and relays its audio plus an x264 clip sent by sync-producer (720p60,
tools/h264/make_clip.py) through sync-impair (--loss % loss and --delay +/- --jitter ms each
way); the receiver (--audio-source relay:CHANNELS) serves the audio to sync-audio-reader for
--seconds. Prints one JSON line: the reader's continuity, the receiver's audio account (played,
FEC-rebuilt, concealed by reason, underflows), the audio's CPU on each relay thread (encode and
decode time over the run), capture-to-available latency, the video's transport latency and
frames, and their difference (the A/V offset at the receiver, both on this machine's clock).

Usage: /usr/bin/python3 tools/bench_relay_audio.py [--seconds 60] [--channels 32] [--no-video]
Needs a release build (build/release) and x264 + python3-numpy for the clip.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("SYNCD", os.path.join(ROOT, "build/release/src/daemon/syncd"))
os.environ.setdefault("SYNC_IMPAIR", os.path.join(ROOT, "build/release/tools/impair/sync-impair"))
from harness import PRODUCER, Syncd  # noqa: E402
from test_relay import Impair, fingerprint, relay_port  # noqa: E402

READER = os.path.join(ROOT, "build/release/tools/audio_reader/sync-audio-reader")
PRODUCER_BIN = os.environ.get("SYNC_PRODUCER",
                              os.path.join(ROOT, "build/release/tools/producer/sync-producer"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--channels", type=int, default=32)
    p.add_argument("--select", default="all")
    p.add_argument("--loss", default="1")
    p.add_argument("--delay", default="20")
    p.add_argument("--jitter", default="5")
    p.add_argument("--no-video", action="store_true")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ka, kb = os.path.join(tmp, "a.pem"), os.path.join(tmp, "b.pem")
        fa, fb = fingerprint(ka), fingerprint(kb)
        clip = os.path.join(tmp, "clip.264")
        if not a.no_video:
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools/h264/make_clip.py"),
                            "--out", clip, "--width", "1280", "--height", "720", "--fps", "60",
                            "--frames", "600", "--bitrate", "8000", "--keyint", "60"],
                           check=True, capture_output=True, timeout=600)
        with Syncd("--publisher", "test", "--relay-listen", "127.0.0.1:0", "--relay-cert", kb,
                   "--peer-fingerprint", fa, "--audio-source", f"relay:{a.channels}") as rx:
            impair = Impair(relay_port(rx), "--seed", "31", "--fwd-loss", a.loss, "--fwd-delay",
                            a.delay, "--fwd-jitter", a.jitter, "--rev-delay", a.delay,
                            "--rev-jitter", a.jitter)
            try:
                with Syncd("--relay-to", f"127.0.0.1:{impair.port}", "--relay-cert", ka,
                           "--peer-fingerprint", fb, "--audio-source",
                           f"synthetic:{a.channels},tone", "--relay-audio-channels",
                           a.select) as tx:
                    tx.wait_for(lambda: tx.stats()["relay"]["state"] == "connected")
                    if a.select != "none":
                        rx.wait_for(lambda: rx.stats()["relay"]["receiver"]["audio"]
                                    ["samples_written"] > 0)
                    producer = None
                    if not a.no_video:
                        producer = subprocess.Popen(
                            [PRODUCER_BIN, "--url", tx.url, "--quiet", "--stream", "cam",
                             "--format", "h264", "--h264", clip, "--width", "1280", "--height",
                             "720", "--fps", "60", "--seconds", str(a.seconds + 5), "--slots",
                             "8"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        time.sleep(1)
                    rx0 = rx.stats()["relay"]["receiver"]["audio"]
                    v0 = rx.stats()["relay"]["receiver"]
                    if a.select == "none":  # the video baseline: no audio relayed
                        time.sleep(a.seconds)
                        rx1 = rx.stats()["relay"]
                        out = None
                    else:
                        tx0 = tx.stats()["relay"]["sender"]["audio"]
                        out = subprocess.run([READER, "--url", rx.url, "--seconds",
                                              str(a.seconds), "--quiet"], capture_output=True,
                                             text=True, timeout=a.seconds + 60)
                        rx1 = rx.stats()["relay"]
                        tx1 = tx.stats()["relay"]["sender"]["audio"]
                    if producer:
                        producer.kill()
                        producer.wait()
            finally:
                impair.close()
    video = rx1["receiver"]["source"].get("transport", {})
    video_figures = {
        "video_transport_ms": {"mean": video.get("mean_us", 0) / 1000,
                               "max": video.get("max_us", 0) / 1000},
        "video_frames_complete": rx1["receiver"]["frames_complete"] - v0["frames_complete"],
        "video_frames_dropped": rx1["receiver"]["frames_dropped"] - v0["frames_dropped"],
    }
    if out is None:
        print(json.dumps({"seconds": a.seconds, "audio": "none", **video_figures}))
        return
    reader = json.loads(out.stdout.strip().splitlines()[-1])
    audio = rx1["receiver"]["audio"]
    d = lambda k, now, before: now[k] - before[k]  # noqa: E731
    result = {
        "seconds": a.seconds, "channels": audio["channels"], "video": not a.no_video,
        "path": f"{a.loss} % loss, {a.delay} +/- {a.jitter} ms each way",
        "reader": {k: reader[k] for k in ("frames", "gap_frames", "missing_frames",
                                          "dropped_frames", "discontinuity_flags",
                                          "continuity")},
        "frames_played": d("frames_played", audio, rx0),
        "frames_recovered_fec": d("frames_recovered_fec", audio, rx0),
        "recovered_with_lbrr_possible": d("recovered_with_lbrr_possible", audio, rx0),
        "frames_concealed_lost": audio["frames_concealed_by_reason"]["lost"] -
        rx0["frames_concealed_by_reason"]["lost"],
        "frames_concealed_underflow": audio["frames_concealed_by_reason"]["underflow"] -
        rx0["frames_concealed_by_reason"]["underflow"],
        "underflows": d("underflows", audio, rx0),
        "packets_late": d("packets_late", audio, rx0),
        "sender_encode_cpu_pct": 100 * d("encode_us", tx1, tx0) / 1e6 / a.seconds,
        "receiver_decode_cpu_pct": 100 * d("decode_us", audio, rx0) / 1e6 / a.seconds,
        "audio_bytes_per_s": d("bytes_sent", tx1, tx0) / a.seconds,
        "audio_latency_ms": {k: audio["latency_us"][k] / 1000 for k in ("min", "mean", "max")},
        **video_figures,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
