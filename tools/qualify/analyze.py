#!/usr/bin/env python3
"""Qualification analyzer: turns a report directory written by tools/qualify/run.py into
report.json, PNG plots and summary.md. Importable (analyze(report_dir) -> dict) and runnable:

  /usr/bin/python3 tools/qualify/analyze.py reports/20261202-153000

Figures per arm (docs/qualification.md says what each one means):
  - unique delivered fps overall and per complete 1000 ms bin of CLOCK_MONOTONIC (a bin is
    complete when it has ended and is not the first frame's bin: syncd's rule, docs/protocol.md),
    complete seconds, low-rate seconds (< 50), at syncd and at every shm reader;
  - drops by stage and reason (syncd's /stats frames_dropped and server rejections, publisher
    drops, frames sent but never offered, reader skipped/torn, published-but-unread);
  - verify failures (syncd's test publisher, every reader);
  - latency percentiles (p50/p95/p99/max): offer -> publish (producer send_start to syncd
    publish_done) with its parts, and publish -> read per reader;
  - resident-memory slope by least squares over minutes 1..N (KiB/min), and loop CPU.
Every figure names its source; a source the run did not have is reported missing, never filled in.
"""
import csv
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

LOW_RATE = 50
SLOPE_LIMIT_KIB_PER_MIN = 10.0
PERCENTILES = (50, 95, 99)


# --------------------------------------------------------------------------------------------
# loading

def read_csv_columns(path, columns):
    """{column: np.int64 array} of a CSV with a header line; None if the file is absent/empty."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            return None
        index = {name: header.index(name) for name in columns if name in header}
        if len(index) != len(columns):
            raise ValueError(f"{path}: header {header} lacks some of {columns}")
        rows = [[int(r[index[c]]) for c in columns] for r in reader if r]
    if not rows:
        return {c: np.zeros(0, dtype=np.int64) for c in columns}
    data = np.array(rows, dtype=np.int64)
    return {c: data[:, i] for i, c in enumerate(columns)}


def load_json(path):
    path = Path(path)
    if not path.exists():
        return None
    return json.loads(path.read_text())


def load_jsonl(path):
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --------------------------------------------------------------------------------------------
# figures

def unique_mask(sequences):
    """True where a sequence is higher than every one before it (a *unique* frame)."""
    if len(sequences) == 0:
        return np.zeros(0, dtype=bool)
    running = np.maximum.accumulate(sequences)
    prev = np.concatenate(([np.iinfo(np.int64).min], running[:-1]))
    return sequences > prev


def second_bins(times_ns, end_ns=None):
    """Unique frames per whole second of CLOCK_MONOTONIC, complete bins only.

    times_ns: arrival times of the unique frames. A bin is complete when it has ended (before
    end_ns, by default the last frame's time, i.e. the stream's end) and is not the first frame's
    bin. Silent seconds inside the range count as 0. Returns (list of {"second", "frames"}).
    """
    if len(times_ns) == 0:
        return []
    secs = times_ns // 1_000_000_000
    first = int(secs.min())
    end_ns = int(times_ns.max()) if end_ns is None else int(end_ns)
    last_complete = end_ns // 1_000_000_000 - 1  # the bin holding end_ns has not ended
    if last_complete <= first:
        return []
    secs = secs[secs <= last_complete]
    counts = np.bincount(secs - first, minlength=last_complete - first + 1)
    return [{"second": first + i, "frames": int(counts[i])}
            for i in range(1, last_complete - first + 1)]


def frames_behind_max(fps, nominal):
    """The most frames ever behind (or ahead of) the nominal count at a second's end.

    A frame due in the last 8.3 ms of a second that arrives late moves to the next one: 59 then
    61, no frame lost. This host's own wake-up latency does that now and then (a thread at
    SCHED_FIFO on an idle machine woke up to 15 ms late, at normal priority up to 65 ms; docs/
    decisions.md), so a count off by one at a boundary is lateness, reported with the latency
    percentiles. The running sum of (count - nominal) says how many frames were on the wrong side
    of any boundary: at most 1 means no stall ever held more than the one frame nearest a
    boundary; a lost frame or a longer stall shows as 2 or more.
    """
    running, worst = 0, 0
    for f in fps:
        running += f - round(nominal)
        worst = max(worst, abs(running))
    return worst


def bin_summary(bins, nominal):
    fps = [b["frames"] for b in bins]
    return {
        "frames_behind_max": frames_behind_max(fps, nominal),
        "complete_seconds": len(fps),
        "low_rate_seconds": sum(1 for f in fps if f < LOW_RATE),
        "seconds_at_nominal": sum(1 for f in fps if f == round(nominal)),
        "seconds_off_nominal": sum(1 for f in fps if f != round(nominal)),
        "min_fps": min(fps) if fps else None,
        "max_fps": max(fps) if fps else None,
        "mean_fps": (sum(fps) / len(fps)) if fps else None,
    }


def percentiles_ms(values_ns):
    if values_ns is None or len(values_ns) == 0:
        return None
    v = np.asarray(values_ns, dtype=np.float64) / 1e6
    out = {f"p{p}": float(np.percentile(v, p)) for p in PERCENTILES}
    out.update({"max": float(v.max()), "min": float(v.min()), "mean": float(v.mean()),
                "count": int(len(v))})
    return out


def least_squares_slope(xs, ys):
    if len(xs) < 2:
        return None
    x = np.asarray(xs, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    if np.ptp(x) == 0:
        return None
    return float(np.polyfit(x, y, 1)[0])


def stats_bins(telemetry):
    """Fallback when syncd has no event log: the complete bins /stats reported (its last 120 at
    every 5-s sample), keyed by complete-second index."""
    bins = {}
    for rec in telemetry:
        s = rec.get("stream") or {}
        recent = s.get("recent_seconds_unique_fps") or []
        first = (s.get("complete_seconds") or 0) - len(recent)
        for i, f in enumerate(recent):
            bins[first + i] = f
    return [{"second": k, "frames": v} for k, v in sorted(bins.items())]


def analyze_arm(arm_dir):
    arm_dir = Path(arm_dir)
    meta = load_json(arm_dir / "arm.json") or {}
    nominal = meta.get("fps", 60)
    result = {"arm": meta.get("arm", arm_dir.name), "seconds": meta.get("seconds"),
              "size": f"{meta.get('width')}x{meta.get('height')}", "nominal_fps": nominal,
              "readers_planned": meta.get("readers", 0),
              "reader_kind": meta.get("reader_kind"), "sources": {}, "notes":
              list(meta.get("notes", []))}
    stats = load_json(arm_dir / "stats_final.json")
    stream = None
    if stats:
        matches = [s for s in stats.get("streams", []) if s.get("name") == meta.get("stream")]
        stream = matches[-1] if matches else None
    telemetry = load_jsonl(arm_dir / "telemetry.jsonl")

    # ---- producer
    prod = read_csv_columns(arm_dir / "producer_events.csv",
                            ["sequence", "send_start_ns", "send_end_ns"])
    result["sources"]["producer_events"] = prod is not None
    frames_sent = int(len(prod["sequence"])) if prod else (
        (meta.get("producer_summary") or {}).get("frames_sent"))
    result["frames_sent"] = frames_sent
    if prod is not None and len(prod["sequence"]):
        result["producer_send_ms"] = percentiles_ms(prod["send_end_ns"] - prod["send_start_ns"])
        # Diagnostic: the producer's own offers per second (send_start). A second that is already
        # off nominal here was late upstream of syncd (the producer was not scheduled in time).
        pbins = second_bins(prod["send_start_ns"])
        result["producer_offers"] = {"per_second": pbins, **bin_summary(pbins, nominal)}
        result["producer_first_send_ns"] = int(prod["send_start_ns"].min())
        result["producer_last_send_ns"] = int(prod["send_end_ns"].max())

    # ---- syncd events
    ev = read_csv_columns(arm_dir / "syncd_events.csv",
                          ["index", "stream", "sequence", "receive_start_ns", "accept_ns",
                           "publish_done_ns"])
    ev_meta = (meta.get("sources") or {}).get("syncd_events", {})
    result["sources"]["syncd_events"] = {"available": ev is not None,
                                         "rows": int(len(ev["index"])) if ev else 0,
                                         "lost": ev_meta.get("lost", 0),
                                         "note": ev_meta.get("note", "")}
    if ev is not None and stream is not None and len(ev["stream"]):
        keep = ev["stream"] == stream.get("id", ev["stream"][0])
        ev = {k: v[keep] for k, v in ev.items()}
    if ev is not None and len(ev["index"]):
        order = np.argsort(ev["index"], kind="stable")
        ev = {k: v[order] for k, v in ev.items()}

    syncd = {}
    if ev is not None and len(ev["sequence"]):
        uniq = unique_mask(ev["sequence"])
        times = ev["receive_start_ns"][uniq]
        bins = second_bins(times)
        syncd["source"] = "syncd /events/frames (receive_start_ns of unique accepted frames)"
        syncd["frames_accepted_in_log"] = int(len(ev["sequence"]))
        syncd["frames_unique"] = int(uniq.sum())
        span = (times.max() - times.min()) / 1e9 if len(times) > 1 else 0
        syncd["unique_fps_overall"] = (len(times) - 1) / span if span > 0 else None
    elif telemetry:
        bins = stats_bins(telemetry)
        syncd["source"] = "syncd /stats recent_seconds_unique_fps (no event log in this build)"
        result["notes"].append("syncd has no /events/frames: per-second bins come from /stats, "
                               "offer->publish latency from the readers' publish stamps if any")
    else:
        bins = []
        syncd["source"] = "none"
    syncd["per_second"] = bins
    syncd.update(bin_summary(bins, nominal))
    if stream is not None:
        syncd["stats"] = {k: stream.get(k) for k in (
            "frames_offered", "frames_accepted", "frames_unique", "frames_dropped_total",
            "frames_verified", "frames_verify_failed", "complete_seconds", "low_rate_seconds",
            "min_second_unique_fps")}
        if "unique_fps_overall" not in syncd and stream.get("complete_seconds"):
            syncd["unique_fps_overall"] = None
    result["syncd"] = syncd

    # ---- offer -> publish
    lat = {}
    if prod is not None and ev is not None and len(ev["sequence"]):
        send = dict(zip(prod["sequence"].tolist(), prod["send_start_ns"].tolist()))
        idx = [i for i, s in enumerate(ev["sequence"].tolist()) if s in send]
        if idx:
            seq = ev["sequence"][idx]
            start = np.array([send[s] for s in seq.tolist()], dtype=np.int64)
            lat["offer_to_publish"] = percentiles_ms(ev["publish_done_ns"][idx] - start)
            lat["offer_to_receive_start"] = percentiles_ms(ev["receive_start_ns"][idx] - start)
            lat["receive_start_to_accept"] = percentiles_ms(ev["accept_ns"][idx] -
                                                            ev["receive_start_ns"][idx])
            lat["accept_to_publish_done"] = percentiles_ms(ev["publish_done_ns"][idx] -
                                                           ev["accept_ns"][idx])
            lat["offer_to_publish_source"] = "producer send_start_ns -> syncd publish_done_ns"
            result["_offer_to_publish_ms"] = ((ev["publish_done_ns"][idx] - start) / 1e6).tolist()

    # ---- readers
    readers = []
    published = set(ev["sequence"].tolist()) if ev is not None else None
    reader_fallback_publish = {}
    for i in range(int(meta.get("readers") or 0)):
        rj = load_json(arm_dir / f"reader{i}.json") or {}
        summary = rj.get("summary") or {}
        rev = read_csv_columns(arm_dir / f"reader{i}_events.csv",
                               ["sequence", "publish_ns", "read_ns"])
        r = {"reader": i, "exit_code": rj.get("exit_code"), "summary_present": bool(summary),
             "events_present": rev is not None}
        for key in ("frames_read", "skipped", "torn", "verify_failures", "seconds",
                    "first_sequence"):
            r[key] = summary.get(key)
        r["reported_unique_fps_per_second"] = summary.get("unique_fps_per_second")
        if rev is not None and len(rev["sequence"]):
            uniq = unique_mask(rev["sequence"])
            rbins = second_bins(rev["read_ns"][uniq])
            r["per_second"] = rbins
            r.update(bin_summary(rbins, nominal))
            r["publish_to_read"] = percentiles_ms(rev["read_ns"] - rev["publish_ns"])
            r["_publish_to_read_ms"] = ((rev["read_ns"] - rev["publish_ns"]) / 1e6).tolist()
            r["frames_in_log"] = int(len(rev["sequence"]))
            seqs = rev["sequence"]
            # The contract's bins (docs/protocol.md) are seconds of a frame's arrival at syncd (its
            # first byte). Read-time bins above add the offer -> read latency to every frame, so a
            # second's last frame (8.3 ms before the boundary at 60 fps) read more than 8.3 ms
            # after it was offered lands in the next bin: a 59/61 pair that is jitter, not loss.
            # The reader's delivery per complete second is therefore also counted by arrival.
            arrival = None
            if ev is not None and len(ev["sequence"]):
                arrival = dict(zip(ev["sequence"].tolist(), ev["receive_start_ns"].tolist()))
                r["per_second_by_arrival_source"] = "syncd receive_start_ns of each frame read"
            elif prod is not None:
                arrival = dict(zip(prod["sequence"].tolist(), prod["send_start_ns"].tolist()))
                r["per_second_by_arrival_source"] = "producer send_start_ns of each frame read"
            # Reference seconds: syncd's complete bins when they come from its event log, else
            # the complete seconds of the producer's offers.
            ref_bins = bins if ev is not None and len(ev["sequence"]) else (
                second_bins(prod["send_start_ns"]) if prod is not None else [])
            if meta.get("reader_kind") == "camera" and arrival is not None:
                # A camera consumer can join only once the node exists, which is after the
                # stream's first frame: it is judged from the first second it saw whole.
                joined = arrival.get(int(seqs.min()))
                if joined is not None:
                    r["joined_second"] = joined // 1_000_000_000
                    ref_bins = [b for b in ref_bins if b["second"] > r["joined_second"]]
            if arrival is not None and ref_bins:
                got = {}
                for sq in set(seqs[uniq].tolist()):
                    t = arrival.get(sq)
                    if t is not None:
                        got[t // 1_000_000_000] = got.get(t // 1_000_000_000, 0) + 1
                r["per_second_by_arrival"] = [{"second": b["second"],
                                               "frames": got.get(b["second"], 0)}
                                              for b in ref_bins]
                by_arrival = bin_summary(r["per_second_by_arrival"], nominal)
                r["by_arrival"] = by_arrival
            r["read_time"] = bin_summary(rbins, nominal)
            if published is not None and len(seqs):
                # Frames syncd published while this reader was reading that it never got.
                lo, hi = int(seqs.min()), int(seqs.max())
                window = {s for s in published if lo <= s <= hi}
                r["published_not_read"] = len(window - set(seqs.tolist()))
            for s, p in zip(seqs.tolist(), rev["publish_ns"].tolist()):
                reader_fallback_publish.setdefault(s, p)
        elif r["reported_unique_fps_per_second"]:
            # Only the reader's own complete bins (it applies the same rule).
            reported = r["reported_unique_fps_per_second"]
            r["per_second"] = [{"second": k, "frames": f} for k, f in enumerate(reported)]
            r.update(bin_summary(r["per_second"], nominal))
            r["per_second_source"] = "reader summary (unique_fps_per_second)"
        r["verified"] = (r.get("exit_code") == 0 and bool(r.get("frames_read"))
                         and r.get("verify_failures") == 0)
        readers.append(r)
    result["readers"] = readers

    if "offer_to_publish" not in lat and prod is not None and reader_fallback_publish:
        send = dict(zip(prod["sequence"].tolist(), prod["send_start_ns"].tolist()))
        pairs = [(reader_fallback_publish[s] - send[s]) for s in reader_fallback_publish
                 if s in send]
        if pairs:
            lat["offer_to_publish"] = percentiles_ms(np.array(pairs))
            lat["offer_to_publish_source"] = ("producer send_start_ns -> publish_ns stamped in the "
                                              "shm slot (frames some reader read)")
            result["_offer_to_publish_ms"] = (np.array(pairs) / 1e6).tolist()
    result["latency_ms"] = lat

    # ---- drops by stage and reason
    drops = {}
    if stream is not None:
        drops["syncd_ingest"] = dict(stream.get("frames_dropped") or {})
        pubs = {}
        for pname, p in (stream.get("publishers") or {}).items():
            d = {k: v for k, v in p.items() if "drop" in k and isinstance(v, (int, dict))}
            if d:
                pubs[pname] = d
        if pubs:
            drops["publishers"] = pubs
        if frames_sent is not None and stream.get("frames_offered") is not None:
            drops["transport"] = {"sent_not_offered": int(frames_sent) -
                                  int(stream["frames_offered"])}
    if stats:
        rejected = (stats.get("server") or {}).get("frames_rejected")
        if rejected:
            drops["syncd_rejected"] = rejected
    for r in readers:
        drops[f"reader{r['reader']}"] = {"skipped": r.get("skipped"), "torn": r.get("torn"),
                                         "published_not_read": r.get("published_not_read")}
    # The camera drops the frames before its consumer has joined as no_consumer: those frames,
    # and no more, are not losses. The consumer has joined at the end of the second it first
    # read in (joined_second), from which on it is judged whole; any no_consumer drop beyond the
    # frames published up to then still counts.
    excused = 0
    camera_drops = ((drops.get("publishers") or {}).get("camera") or {}).get("dropped") or {}
    if meta.get("reader_kind") == "camera" and readers and camera_drops.get("no_consumer"):
        joined = readers[0].get("joined_second")
        if ev is not None and joined is not None:
            before = int(sum(1 for t in ev["receive_start_ns"].tolist()
                             if t // 1_000_000_000 <= joined))
        else:  # no event log: the frames before the consumer's first one
            first_read = readers[0].get("first_sequence")
            published = prod["sequence"].tolist() if prod is not None else []
            before = sum(1 for sq in published if first_read is not None and sq < first_read)
        excused = min(int(camera_drops["no_consumer"]), before)
        result["camera_before_consumer"] = {
            "frames_published_while_joining": before,
            "no_consumer_drops": int(camera_drops["no_consumer"]),
            "excused": excused}
    result["drops"] = drops
    result["drops_total"] = int(sum(_sum_numbers(v) for k, v in drops.items()
                                    if not k.startswith("reader")) +
                                sum((r.get("skipped") or 0) for r in readers)) - excused
    result["torn_total"] = int(sum((r.get("torn") or 0) for r in readers))
    result["verify_failures"] = {
        "syncd": stream.get("frames_verify_failed") if stream else None,
        **{f"reader{r['reader']}": r.get("verify_failures") for r in readers}}

    # ---- memory and CPU
    samples = []
    t_stream = None
    for rec in telemetry:
        samples.append({"t_s": rec.get("t_s"), "rss_kib": rec.get("rss_kib"),
                        "rss_anon_kib": (rec.get("proc") or {}).get("RssAnon"),
                        "rss_shmem_kib": (rec.get("proc") or {}).get("RssShmem"),
                        "loop_cpu_seconds": rec.get("loop_cpu_seconds"),
                        "process_cpu_seconds": rec.get("process_cpu_seconds"),
                        "stream_open": (rec.get("stream") or {}).get("open"),
                        "loadavg_1m": rec.get("loadavg_1m"),
                        "steal_seconds": rec.get("steal_seconds")})
        if t_stream is None and (rec.get("stream") or {}).get("open"):
            t_stream = rec.get("t_s")
    result["telemetry_samples"] = samples
    # Minutes 1..N of the run: from 60 s on while the stream is open (the pool is freed at close).
    pts = [(s["t_s"] / 60.0, s["rss_kib"]) for s in samples
           if s["t_s"] is not None and s["t_s"] >= 60.0 and s["rss_kib"] and s["stream_open"]]
    open_rss = [s["rss_kib"] for s in samples if s["stream_open"] and s["rss_kib"]]
    result["memory"] = {
        "rss_kib_first_open": open_rss[0] if open_rss else None,
        "rss_kib_last_open": open_rss[-1] if open_rss else None,
        "rss_kib_max": max(open_rss) if open_rss else None,
        "slope_kib_per_min": least_squares_slope([p[0] for p in pts], [p[1] for p in pts]),
        "slope_samples": len(pts),
        "slope_window": "minutes 1..N (samples at t >= 60 s while the stream is open)",
    }
    loop = [s for s in samples if s["loop_cpu_seconds"] is not None and s["stream_open"]]
    cpu = {}
    if len(loop) >= 2:
        dt = loop[-1]["t_s"] - loop[0]["t_s"]
        cpu["loop_cpu_fraction"] = (loop[-1]["loop_cpu_seconds"] - loop[0]["loop_cpu_seconds"]) / dt
        proc = [s for s in loop if s["process_cpu_seconds"] is not None]
        if len(proc) >= 2:
            cpu["process_cpu_fraction"] = ((proc[-1]["process_cpu_seconds"] -
                                            proc[0]["process_cpu_seconds"]) /
                                           (proc[-1]["t_s"] - proc[0]["t_s"]))
        frames = nominal * dt
        cpu["loop_cpu_ms_per_frame"] = cpu["loop_cpu_fraction"] * dt * 1e3 / frames if frames else None
        cpu["window_s"] = dt
    loads = [s["loadavg_1m"] for s in samples if s.get("loadavg_1m") is not None]
    if loads:
        cpu["loadavg_1m_mean"] = sum(loads) / len(loads)
        cpu["loadavg_1m_max"] = max(loads)
    steal = [(s["t_s"], s["steal_seconds"]) for s in samples if s.get("steal_seconds") is not None]
    if len(steal) >= 2:
        deltas = [(b[1] - a[1], b[0]) for a, b in zip(steal, steal[1:])]
        cpu["steal_seconds_total"] = steal[-1][1] - steal[0][1]
        cpu["steal_seconds_max_sample"], cpu["steal_max_sample_t_s"] = max(deltas)
    result["cpu"] = cpu

    # ---- contract
    c = {}
    c["every_complete_second_at_nominal_but_one_boundary_frame"] = (
        syncd.get("complete_seconds", 0) > 0 and syncd.get("frames_behind_max", 2) <= 1)
    c["zero_low_rate_seconds"] = syncd.get("low_rate_seconds") == 0 and syncd.get(
        "complete_seconds", 0) > 0
    c["zero_drops"] = result["drops_total"] == 0
    c["zero_verify_failures"] = all((v or 0) == 0 for v in result["verify_failures"].values()) \
        and stream is not None and stream.get("frames_verify_failed") == 0
    c["all_sent_verified"] = (stream is not None and frames_sent is not None and
                              stream.get("frames_verified") == frames_sent)
    if readers:
        c["zero_torn"] = result["torn_total"] == 0
        c["all_readers_verified"] = all(r["verified"] for r in readers) and \
            len(readers) == result["readers_planned"]
        c["readers_every_complete_second_at_nominal_but_one_boundary_frame"] = all(
            (r.get("by_arrival") or {}).get("complete_seconds", 0) > 0 and
            r["by_arrival"]["frames_behind_max"] <= 1 for r in readers)
    slope = result["memory"]["slope_kib_per_min"]
    if slope is not None and result["memory"]["slope_samples"] >= 3:
        c["memory_slope_within_limit"] = abs(slope) <= SLOPE_LIMIT_KIB_PER_MIN
    c["syncd_clean_exit"] = meta.get("syncd_exit_code") == 0
    result["contract"] = c
    result["contract_met"] = all(c.values())
    return result


def _sum_numbers(value):
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, dict):
        return sum(_sum_numbers(v) for v in value.values())
    return 0


# --------------------------------------------------------------------------------------------
# plots

def reader_label(result, r):
    """"reader N" for a shared-memory reader, "camera consumer" for the camera arm's."""
    return "camera consumer" if result.get("reader_kind") == "camera" else f"reader {r['reader']}"


def plot_arm(result, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    name = result["arm"]
    files = {}

    fig, ax = plt.subplots(figsize=(10, 3.5))
    bins = result["syncd"].get("per_second") or []
    if bins:
        x0 = bins[0]["second"]
        ax.step([b["second"] - x0 for b in bins], [b["frames"] for b in bins], where="mid",
                label="syncd", linewidth=1.5)
    for r in result["readers"]:
        rb = r.get("per_second") or []
        if rb:
            x0r = bins[0]["second"] if bins and "per_second_source" not in r else rb[0]["second"]
            ax.step([b["second"] - x0r for b in rb], [b["frames"] for b in rb], where="mid",
                    label=reader_label(result, r), linewidth=0.8, alpha=0.8)
    pb = (result.get("producer_offers") or {}).get("per_second") or []
    if pb and bins:
        ax.step([b["second"] - bins[0]["second"] for b in pb], [b["frames"] for b in pb],
                where="mid", color="black", linestyle="--", linewidth=0.7,
                label="producer offers")
    ax.axhline(result["nominal_fps"], color="grey", linestyle=":", linewidth=0.8)
    ax.axhline(LOW_RATE, color="red", linestyle="--", linewidth=0.8, label="low-rate (<50)")
    peak = max([b["frames"] for b in bins + pb] or [0])
    ax.set_ylim(0, max(result["nominal_fps"] * 1.25, peak * 1.05, 10))
    ax.set_xlabel("complete second")
    ax.set_ylabel("unique frames")
    ax.set_title(f"{name}: unique fps per complete second")
    ax.legend(loc="lower right", fontsize=7, ncol=3)
    fig.tight_layout()
    files["fps"] = f"{name}-fps.png"
    fig.savefig(out_dir / files["fps"], dpi=100)
    plt.close(fig)

    series = []
    if result.get("_offer_to_publish_ms"):
        series.append(("offer -> publish", result["_offer_to_publish_ms"]))
    for r in result["readers"]:
        if r.get("_publish_to_read_ms"):
            series.append((f"publish -> read, {reader_label(result, r)}",
                           r["_publish_to_read_ms"]))
    if series:
        fig, ax = plt.subplots(figsize=(10, 3.5))
        for label, values in series:
            v = np.sort(np.asarray(values))
            v = np.clip(v, 1e-3, None)
            ax.plot(v, np.arange(1, len(v) + 1) / len(v), label=label, linewidth=1)
        ax.set_xscale("log")
        ax.set_xlabel("latency, ms (log)")
        ax.set_ylabel("fraction of frames")
        ax.set_title(f"{name}: latency distribution (CDF)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        files["latency"] = f"{name}-latency.png"
        fig.savefig(out_dir / files["latency"], dpi=100)
        plt.close(fig)

    samples = [s for s in result["telemetry_samples"] if s["rss_kib"]]
    if samples:
        fig, ax = plt.subplots(figsize=(10, 3.5))
        t = [s["t_s"] / 60 for s in samples]
        ax.plot(t, [s["rss_kib"] / 1024 for s in samples], marker=".", label="VmRSS")
        if any(s.get("rss_shmem_kib") for s in samples):
            ax.plot(t, [(s.get("rss_shmem_kib") or 0) / 1024 for s in samples], marker=".",
                    linewidth=0.8, label="of which shared memory")
        slope = result["memory"]["slope_kib_per_min"]
        ax.set_xlabel("minutes")
        ax.set_ylabel("MiB")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{name}: syncd resident memory (slope minute 1..N: "
                     + (f"{slope:+.2f} KiB/min)" if slope is not None else "n/a)"))
        ax.legend(fontsize=7)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        files["memory"] = f"{name}-memory.png"
        fig.savefig(out_dir / files["memory"], dpi=100)
        plt.close(fig)
    return files


# --------------------------------------------------------------------------------------------
# report

def _fmt(v, spec=".2f"):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def summary_markdown(report):
    lines = [f"# Qualification report {report.get('report_dir', '')}", "",
             f"Command: `{report.get('command', '')}`", ""]
    relay = {k: a for k, a in report["arms"].items() if a.get("kind") == "relay"}
    chain = {k: a for k, a in report["arms"].items() if a.get("kind") == "chain"}
    arms = {k: a for k, a in report["arms"].items() if a.get("kind") not in ("relay", "chain")}
    if relay:
        import relay_analysis
        lines += relay_analysis.summary_rows(relay) + [""]
    if chain:
        import chain_arm
        lines += chain_arm.summary_rows(chain) + [""]
    if arms:
        lines += _local_arm_rows(arms, report)
    lines.append("")
    for name, a in report["arms"].items():
        plots = ", ".join(f"[{k}]({v})" for k, v in a.get("plots", {}).items())
        src = (a.get("syncd") or {}).get("source")
        lines.append(f"- {name}: plots {plots or 'none'}"
                     + (f"; per-second source: {src}" if src else ""))
        for n in a.get("notes", []):
            lines.append(f"  - note: {n}")
    return "\n".join(lines) + "\n"


def _local_arm_rows(arms, report):
    lines = []
    cols = ["figure"] + list(arms)
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "---|" * len(cols))

    def row(label, fn):
        vals = []
        for a in arms.values():
            try:
                vals.append(_fmt(fn(a)))
            except (KeyError, TypeError, IndexError):
                vals.append("n/a")
        lines.append(f"| {label} | " + " | ".join(vals) + " |")

    row("duration s / readers", lambda a: f"{a['seconds']} / {a['readers_planned']}")
    row("frames sent", lambda a: a["frames_sent"])
    row("frames verified by syncd", lambda a: a["syncd"]["stats"]["frames_verified"])
    row("unique fps overall (syncd)", lambda a: a["syncd"].get("unique_fps_overall"))
    row("complete seconds", lambda a: a["syncd"]["complete_seconds"])
    row("seconds at nominal / min fps / max fps",
        lambda a: f"{a['syncd']['seconds_at_nominal']} / {a['syncd']['min_fps']} / "
                  f"{a['syncd']['max_fps']}")
    row("frames late across a second's end, most at once (limit 1)",
        lambda a: a["syncd"]["frames_behind_max"])
    row("low-rate seconds (<50)", lambda a: a["syncd"]["low_rate_seconds"])
    row("producer: seconds off nominal in its own offers (upstream lateness)",
        lambda a: a["producer_offers"]["seconds_off_nominal"])
    row("drops (all stages)", lambda a: a["drops_total"])
    row("verify failures (syncd + readers)",
        lambda a: sum((v or 0) for v in a["verify_failures"].values()))
    row("offer->publish p50 / p99 / max ms",
        lambda a: "{p50:.2f} / {p99:.2f} / {max:.2f}".format(**a["latency_ms"]["offer_to_publish"]))
    row("readers verified", lambda a: (f"{sum(r['verified'] for r in a['readers'])}/"
                                       f"{len(a['readers'])}") if a["readers"] else "-")
    row("reader frames read (min)", lambda a: min(r["frames_read"] for r in a["readers"])
        if a["readers"] else "-")
    row("reader seconds off nominal, by arrival (sum)",
        lambda a: sum(r["by_arrival"]["seconds_off_nominal"] for r in a["readers"])
        if a["readers"] else "-")
    row("reader seconds off nominal, by read time (sum; boundary jitter)",
        lambda a: sum(r.get("seconds_off_nominal") or 0 for r in a["readers"])
        if a["readers"] else "-")
    row("skipped / torn (readers, sum)",
        lambda a: f"{sum(r.get('skipped') or 0 for r in a['readers'])} / {a['torn_total']}"
        if a["readers"] else "-")
    row("publish->read p50 / p99 / max ms (worst reader)",
        lambda a: "{p50:.3f} / {p99:.3f} / {max:.3f}".format(
            **max((r["publish_to_read"] for r in a["readers"] if r.get("publish_to_read")),
                  key=lambda p: p["p99"])) if a["readers"] else "-")
    row("RSS MiB (stream open, first -> last)",
        lambda a: f"{a['memory']['rss_kib_first_open'] / 1024:.1f} -> "
                  f"{a['memory']['rss_kib_last_open'] / 1024:.1f}")
    row("RSS slope KiB/min (minutes 1..N)", lambda a: a["memory"]["slope_kib_per_min"])
    row("loop CPU (fraction of a core)", lambda a: a["cpu"]["loop_cpu_fraction"])
    row("syncd process CPU (fraction of a core)", lambda a: a["cpu"]["process_cpu_fraction"])
    row("machine load avg 1 min, mean / max (2 cores)",
        lambda a: f"{a['cpu']['loadavg_1m_mean']:.2f} / {a['cpu']['loadavg_1m_max']:.2f}")
    row("hypervisor steal, total s / most in one 5-s sample (at t s)",
        lambda a: (f"{a['cpu']['steal_seconds_total']:.2f} / "
                   f"{a['cpu']['steal_seconds_max_sample']:.2f} "
                   f"(t {a['cpu']['steal_max_sample_t_s']:.0f})")
        if "steal_seconds_total" in a["cpu"] else "-")
    row("contract met", lambda a: "yes" if a["contract_met"] else
        "NO: " + ", ".join(k for k, v in a["contract"].items() if not v))
    if report.get("writer_cpu_4_over_1_reader") is not None:
        lines += ["", f"Writer (syncd process) CPU with 4 readers / with 1 reader: "
                      f"{report['writer_cpu_4_over_1_reader']:.3f}x (target <= 1.1x)"]
    return lines


def analyze(report_dir, plots=True):
    report_dir = Path(report_dir)
    run = load_json(report_dir / "run.json") or {}
    arm_names = run.get("arms") or sorted(p.name for p in report_dir.iterdir()
                                          if (p / "arm.json").exists())
    report = {"report_dir": str(report_dir), "command": run.get("command"),
              "analyzed": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "rerun": f"/usr/bin/python3 tools/qualify/analyze.py {report_dir}",
              "capabilities": run.get("capabilities"), "arms": {}, "not_run": {}}
    for name in arm_names:
        if not (report_dir / name / "arm.json").exists():
            report["not_run"][name] = (run.get("results") or {}).get(name, "no data")
            continue
        kind = (load_json(report_dir / name / "arm.json") or {}).get("kind")
        if kind == "chain":
            import chain_arm
            result = chain_arm.analyze_chain_arm(report_dir / name)
            if plots:
                result["plots"] = chain_arm.plot_chain_arm(result, report_dir)
        elif kind == "relay":
            import relay_analysis
            result = relay_analysis.analyze_relay_arm(report_dir / name)
            if plots:
                result["plots"] = relay_analysis.plot_relay_arm(result, report_dir)
        else:
            result = analyze_arm(report_dir / name)
            if plots:
                result["plots"] = plot_arm(result, report_dir)
        report["arms"][name] = result
    four = report["arms"].get("multi-reader", {}).get("cpu", {}).get("process_cpu_fraction")
    one = report["arms"].get("single-reader", {}).get("cpu", {}).get("process_cpu_fraction")
    report["writer_cpu_4_over_1_reader"] = four / one if four and one else None
    report["contract_met"] = bool(report["arms"]) and all(
        a["contract_met"] for a in report["arms"].values()) and not report["not_run"]

    # The raw per-frame series stay in the CSVs; the JSON keeps bins, percentiles, samples.
    def strip(obj):
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if not k.startswith("_")}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        if isinstance(obj, float) and not math.isfinite(obj):
            return None
        return obj
    clean = strip(report)
    (report_dir / "report.json").write_text(json.dumps(clean, indent=1) + "\n")
    (report_dir / "summary.md").write_text(summary_markdown(clean))
    return clean


def main(argv):
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 1
    report = analyze(argv[0])
    print(summary_markdown(report))
    return 0 if report["contract_met"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
