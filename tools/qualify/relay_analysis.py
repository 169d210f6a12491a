"""Figures, contract and plots of a relay arm (tools/qualify/relay_arm.py; docs/qualification.md,
"The relay arms"). Called by analyze.py for an arm whose arm.json says kind "relay".

Figures:
  - at the remote consumer (the receiving syncd's test publisher, which checks every access
    unit's bytes): unique fps per complete second by frame-complete time, low-rate seconds,
    frames lost after repair (sent by the producer, never complete at the receiver), verified
    and corrupt frames;
  - frame gaps at the receiver (time between consecutive unique frames, in frame intervals):
    the largest over the run, and the largest in a window around every re-key (from 1 s before
    the sender's switch was seen to 3 s after it, which covers the new epoch's completion, the
    switch, and the old key's retirement 2 s later); beside it the largest gap the sender's own
    accepts had in the same window, so a late producer is not charged to the relay (the
    contract takes the receiver's largest gap less the sender's own lateness beyond one
    interval);
  - transport latency: the sender's accept to the receiver's frame complete (one clock),
    p50/p95/p99/max, against the one-way delay plus one frame interval;
  - repair: packets lost on the wire (sync-impair), recovered by FEC and by retransmission,
    and the overhead (FEC and RTX packets per media packet);
  - CPU: the relay thread's CPU per frame and as a share of a core, on each side, and each
    process's; memory: each syncd's resident-memory slope over minutes 1..N.
  - adaptive bitrate (arm relay-abr, raw frames the sender encodes): per 0.25 s the path's cap
    (sync-impair's schedule), the sender's send-rate target, the encoder's bitrate and picture
    size, the rate the sender's socket sent; the time after the cap drops until the target is
    under it and until the consumer is back at >= 59 fps for 3 s running, and after the cap
    returns until the encoder is back at full size; frames lost during the drop.
Contract (profile random): >= 59.5 unique fps, 0 low-rate seconds, 0 frames lost, 0 corrupt,
p50 transport <= one-way + 1 interval, the largest gap around every re-key <= 2 intervals
(less the sender's own lateness),
memory slope <= 10 KiB/min on both sides (judged from 3 samples past minute 1). Profile burst
reports its figures; its contract is 0 corrupt frames and both syncd up to the end. Profile
wan-burst (relay-raw-burst): >= 99.5 % of the frames shown, 0 corrupt, 0 low-rate seconds, at
most one keyframe request per 2 s, both syncd up to the end. Profile abr
is judged on 0 corrupt frames (every decoded frame's column marker), both syncd up to the end,
the target under the cap within 5 s of the drop, and full size again within 30 s of the cap's
return.
"""
from pathlib import Path

import numpy as np

import analyze as A

GAP_WINDOW_BEFORE_NS = 1_000_000_000
GAP_WINDOW_AFTER_NS = 3_000_000_000
MIN_UNIQUE_FPS = 59.5
MAX_GAP_INTERVALS = 2.0


def _frames(path):
    """(sequence, accept_ns) of the unique frames of a syncd's event log, in arrival order."""
    cols = A.read_csv_columns(path, ["sequence", "accept_ns"])
    if cols is None:
        return None, None
    order = np.argsort(cols["accept_ns"], kind="stable")
    seq, t = cols["sequence"][order], cols["accept_ns"][order]
    keep = A.unique_mask(seq)
    return seq[keep], t[keep]


def _find_stream(stats, name):
    matches = [s for s in (stats or {}).get("streams", []) if s.get("name") == name]
    return matches[-1] if matches else None


def _cpu(samples, role, key):
    pts = [(s["t_s"], s[role].get(key)) for s in samples if s[role].get(key) is not None]
    if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
        return None
    return pts[-1][1] - pts[0][1], pts[-1][0] - pts[0][0]


ABR_TARGET_WITHIN_S = 5.0
ABR_FULL_SIZE_WITHIN_S = 30.0


def _schedule(text):
    """[(seconds, kbit/s)] from sync-impair's --fwd-rate-schedule text."""
    steps = []
    for part in (text or "").split(","):
        if ":" in part:
            t, k = part.split(":")
            steps.append((float(t), float(k)))
    return steps


def analyze_abr(arm_dir, meta, rx_bins, fps):
    """The adaptive-bitrate figures of a relay-abr arm (abr.jsonl, the cap's schedule)."""
    rows = A.load_jsonl(arm_dir / "abr.jsonl")
    t_zero = meta.get("impair_start_ns")
    steps = _schedule(meta.get("rate_schedule"))
    if not rows or t_zero is None or len(steps) < 3:
        return None
    series = {"t_s": [], "cap_mbps": [], "target_mbps": [], "encoder_mbps": [], "height": [],
              "sent_mbps": []}
    last = None
    for r in rows:
        t = (r["t_ns"] - t_zero) / 1e9
        sender = r.get("sender") or {}
        enc = r.get("encoder") or {}
        cap = [k for (s0, k) in steps if s0 <= t]
        sent = None
        if last and r.get("bytes_sent") is not None and last.get("bytes_sent") is not None:
            dt = (r["t_ns"] - last["t_ns"]) / 1e9
            sent = (r["bytes_sent"] - last["bytes_sent"]) * 8 / dt / 1e6 if dt > 0 else None
        last = r
        series["t_s"].append(t)
        series["cap_mbps"].append(cap[-1] / 1000 if cap and cap[-1] else None)
        series["target_mbps"].append((sender.get("target_bps") or 0) / 1e6)
        series["encoder_mbps"].append((enc.get("bitrate_kbps") or 0) / 1000)
        series["height"].append(enc.get("height"))
        series["sent_mbps"].append(sent)
    drop_s, drop_kbps = steps[1]
    back_s = steps[2][0]
    t = np.array(series["t_s"])
    target = np.array(series["target_mbps"])
    height = np.array([h or 0 for h in series["height"]])
    under = np.nonzero((t >= drop_s) & (t < back_s) & (target * 1000 <= drop_kbps))[0]
    full = np.nonzero((t >= back_s) & (height >= meta.get("height", 0)))[0]
    encoder = np.array(series["encoder_mbps"])
    before = encoder[(t >= drop_s - 5) & (t < drop_s)]
    full_rate = float(before.mean()) if len(before) else None
    again = (np.nonzero((t >= back_s) & (encoder >= 0.9 * full_rate))[0]
             if full_rate else np.array([], dtype=int))
    settled = (t >= t[under[0]]) & (t < back_s) if len(under) else np.zeros(len(t), bool)
    abr = {"cap_drop_s": drop_s, "cap_kbps": drop_kbps, "cap_back_s": back_s,
           "target_under_cap_after_s": float(t[under[0]] - drop_s) if len(under) else None,
           # Once under the cap: the share of samples back over it, and the target's swing
           # (a see-saw shows as both).
           "target_over_cap_share_settled": float((target[settled] * 1000 > drop_kbps).mean())
           if settled.any() else None,
           "target_mbps_settled_min_max": [float(target[settled].min()), float(target[settled].max())]
           if settled.any() else None,
           "encoder_mbps_before_cap": full_rate,
           "full_rate_again_after_s": float(t[again[0]] - back_s) if len(again) else None,
           "full_size_again_after_s": float(t[full[0]] - back_s) if len(full) else None,
           "lowest_height": int(height[height > 0].min()) if (height > 0).any() else None,
           "_series": series}
    # The consumer: seconds since the drop until 3 complete seconds running at >= 59 fps (the
    # bins are whole seconds of CLOCK_MONOTONIC, the schedule's zero is t_zero on that clock).
    if rx_bins:
        abr["_rx_seconds"] = [(b["second"] + 0.5 - t_zero / 1e9, b["frames"]) for b in rx_bins]
        good = {int(b["second"]) for b in rx_bins if b["frames"] >= fps - 1}
        drop_at = t_zero / 1e9 + drop_s
        starts = sorted(s0 for s0 in good if s0 >= drop_at
                        and all(s0 + k in good for k in range(3)))
        abr["consumer_back_at_59_after_s"] = (starts[0] - drop_at) if starts else None
        back_at = t_zero / 1e9 + back_s
        during = [b["frames"] for b in rx_bins if drop_at <= b["second"] and b["second"] + 1 <= back_at]
        abr["shown_during_cap_share"] = (sum(during) / (fps * len(during))) if during else None
    return abr


def _event_columns(path):
    cols = A.read_csv_columns(path, ["sequence", "receive_start_ns", "accept_ns",
                                     "publish_done_ns"])
    if cols is None:
        return None
    _, first = np.unique(cols["sequence"], return_index=True)  # a sequence's first event
    return {k: v[first] for k, v in cols.items()}


def analyze_glass_to_glass(arm_dir, encode_mean_ms, decode_mean_ms, on_wire_mean_ms=None):
    """Per frame, on one clock: the producer's send start (the frame's timestamp) to the moment
    the receiving syncd had handed it to its publishers (a shared-memory reader can read it
    then), and the stages between. Medians of stages do not add up to the median total."""
    producer = A.read_csv_columns(arm_dir / "producer_events.csv", ["sequence", "send_start_ns"])
    tx = _event_columns(arm_dir / "sender_events.csv")
    rx = _event_columns(arm_dir / "receiver_events.csv")
    if producer is None or tx is None or rx is None:
        return None
    seq, i_p, i_rx = np.intersect1d(producer["sequence"], rx["sequence"], return_indices=True)
    _, j_tx, j_rx = np.intersect1d(tx["sequence"], seq, return_indices=True)
    if len(seq) == 0 or len(j_tx) == 0:
        return None
    start = producer["send_start_ns"][i_p][j_rx]
    tx_accept = tx["accept_ns"][j_tx]
    rx_complete = rx["receive_start_ns"][i_rx][j_rx]
    rx_accept = rx["accept_ns"][i_rx][j_rx]
    rx_published = rx["publish_done_ns"][i_rx][j_rx]
    total = rx_published - start
    med = lambda a: float(np.median(a) / 1e6)  # noqa: E731
    sender_to_receiver = med(rx_complete - tx_accept)
    complete_to_accept = med(rx_accept - rx_complete)
    # The receiver's "complete" is the arrival of a frame's last packet; the jitter buffer
    # holds it to its playout time, then the decoder (or the copy) fills the lease.
    stages = {
        "ingest (producer send -> sender accept)": med(tx_accept - start),
        "encode (x264 on the worker, mean)": encode_mean_ms,
        "packetize, protect, pace (mean)": on_wire_mean_ms,
        ("hand-over, transit, repair" if on_wire_mean_ms is not None else
         "packetize, protect, pace, transit, repair"):
            sender_to_receiver - (encode_mean_ms or 0) - (on_wire_mean_ms or 0),
        "jitter buffer, hand-over to the loop": complete_to_accept - (decode_mean_ms or 0),
        "decode into the lease (mean)": decode_mean_ms,
        "publish (to every publisher)": med(rx_published - rx_accept),
    }
    return {"frames": int(len(total)), "ms": A.percentiles_ms(total), "stages_median_ms": stages,
            "sender_to_receiver_median_ms": sender_to_receiver,
            "decode_mean_ms": decode_mean_ms, "_total_ns": total}


def analyze_relay_arm(arm_dir):
    arm_dir = Path(arm_dir)
    meta = A.load_json(arm_dir / "arm.json") or {}
    fps = meta.get("fps", 60)
    interval_ms = 1000.0 / fps
    one_way_ms = meta.get("one_way_ms", 20)
    result = {"arm": meta.get("arm", arm_dir.name), "kind": "relay",
              "seconds": meta.get("seconds"), "profile": meta.get("profile"),
              "size": f"{meta.get('width')}x{meta.get('height')}", "nominal_fps": fps,
              "impairment": " ".join(meta.get("impair_args", [])),
              "rekey_interval_s": meta.get("rekey_interval_s"), "clip": meta.get("clip"),
              "notes": list(meta.get("notes", []))}
    producer = A.read_csv_columns(arm_dir / "producer_events.csv", ["sequence"])
    sent = int(len(producer["sequence"])) if producer is not None else None
    tx_seq, tx_t = _frames(arm_dir / "sender_events.csv")
    rx_seq, rx_t = _frames(arm_dir / "receiver_events.csv")
    stats_rx = A.load_json(arm_dir / "stats_final_receiver.json") or {}
    stats_tx = A.load_json(arm_dir / "stats_final_sender.json") or {}
    stream_rx = _find_stream(stats_rx, meta.get("stream")) or {}
    relay_rx = (stats_rx.get("relay") or {})
    relay_tx = (stats_tx.get("relay") or {})
    result["frames_sent"] = sent

    # ---- the remote consumer
    c = {}
    if rx_t is not None and len(rx_t):
        bins = A.second_bins(rx_t)
        summary = A.bin_summary(bins, fps)
        span_s = (rx_t[-1] - rx_t[0]) / 1e9
        lost = (sent - len(np.intersect1d(rx_seq, np.arange(sent)))) if sent else None
        test = (stream_rx.get("publishers") or {}).get("test") or {}
        result["receiver"] = {
            **summary, "per_second": bins, "frames_complete": int(len(rx_t)),
            "unique_fps_overall": (len(rx_t) - 1) / span_s if span_s > 0 else None,
            "frames_lost": lost, "frames_verified": test.get("verified"),
            "frames_corrupt": sum((test.get("verify_failed") or {}).values()),
            "relay": relay_rx.get("receiver"),
        }
        c["unique_fps_at_least_59_5"] = (summary["mean_fps"] or 0) >= MIN_UNIQUE_FPS
        c["zero_low_rate_seconds"] = summary["low_rate_seconds"] == 0
        c["zero_frames_lost"] = lost == 0
        c["zero_corrupt"] = result["receiver"]["frames_corrupt"] == 0
    else:
        result["receiver"] = None
        result["notes"].append("no receiver event log: nothing to judge at the consumer")
        c["receiver_frames_recorded"] = False

    # The sending syncd's own input, per second: a second low there was low before the relay
    # (the producer or the sender's ingest was late), which the receiver cannot make up.
    if tx_t is not None and len(tx_t):
        tx_summary = A.bin_summary(A.second_bins(tx_t), fps)
        result["sender"] = {**tx_summary, "per_second": A.second_bins(tx_t)}

    # ---- transport latency (sender accept -> receiver frame complete, one clock)
    if tx_t is not None and rx_t is not None and len(rx_t):
        common, i_tx, i_rx = np.intersect1d(tx_seq, rx_seq, return_indices=True)
        latency_ns = rx_t[i_rx] - tx_t[i_tx]
        result["transport_ms"] = A.percentiles_ms(latency_ns)
        result["transport_bound_ms"] = one_way_ms + interval_ms
        result["_transport"] = (tx_t[i_tx], latency_ns)
        c["transport_p50_within_one_way_plus_interval"] = (
            result["transport_ms"]["p50"] <= result["transport_bound_ms"])

    # ---- frame gaps around re-keys
    switches = [s["t_ns"] for s in A.load_jsonl(arm_dir / "key_switches.jsonl")]
    if rx_t is not None and len(rx_t) > 1:
        rx_gap = np.diff(rx_t) / 1e6 / interval_ms
        tx_gap = np.diff(tx_t) / 1e6 / interval_ms if tx_t is not None and len(tx_t) > 1 else None
        result["gaps"] = {"largest_intervals": float(rx_gap.max()),
                          "largest_at_s": float((rx_t[1 + int(rx_gap.argmax())] - rx_t[0]) / 1e9),
                          "p99_intervals": float(np.percentile(rx_gap, 99)),
                          "sender_largest_intervals": float(tx_gap.max())
                          if tx_gap is not None else None, "rekeys": []}
        for t in switches:
            lo, hi = t - GAP_WINDOW_BEFORE_NS, t + GAP_WINDOW_AFTER_NS
            m = (rx_t[1:] >= lo) & (rx_t[1:] <= hi)
            mt = (tx_t[1:] >= lo) & (tx_t[1:] <= hi) if tx_gap is not None else None
            if not m.any():
                continue
            result["gaps"]["rekeys"].append({
                "t_s": float((t - rx_t[0]) / 1e9),
                "largest_intervals": float(rx_gap[m].max()),
                "sender_largest_intervals": float(tx_gap[mt].max())
                if mt is not None and mt.any() else None})
        result["_gaps"] = (rx_t[1:], rx_gap, switches, rx_t[0])
        if result["gaps"]["rekeys"]:
            # Judged on what the relay adds: a gap the producer already left at the sender
            # (its own lateness beyond one interval) is not the relay's stall.
            for r in result["gaps"]["rekeys"]:
                r["relay_added_intervals"] = r["largest_intervals"] - max(
                    0.0, (r["sender_largest_intervals"] or 1.0) - 1.0)
            c["gap_across_every_rekey_within_2_intervals"] = all(
                r["relay_added_intervals"] <= MAX_GAP_INTERVALS
                for r in result["gaps"]["rekeys"])
        else:
            result["notes"].append("no re-key took effect during the stream")
    result["rekeys_seen"] = len(switches)
    # Audio continuity at the receiver, when the arm relayed audio (--relay-audio): every frame
    # played, rebuilt from the next packet or concealed by reason; underflows are the target 0.
    audio = ((relay_rx.get("receiver") or {}).get("audio") or {})
    if audio.get("samples_written"):
        sent_audio = (((stats_tx.get("relay") or {}).get("sender") or {}).get("audio") or {})
        result["audio"] = {
            "channels": audio.get("channels"),
            "frames_sent": sent_audio.get("frames_sent"),
            "frames_played": audio.get("frames_played"),
            "frames_recovered_fec": audio.get("frames_recovered_fec"),
            "frames_concealed_by_reason": audio.get("frames_concealed_by_reason"),
            "underflows": audio.get("underflows"),
            "packets_late": audio.get("packets_late"),
            "stalls": audio.get("stalls"),
            "latency_ms": {k: v / 1000 for k, v in (audio.get("latency_us") or {}).items()
                           if k != "samples"},
        }

    # ---- repair
    impair = A.load_json(arm_dir / "impair.json") or {}
    s = relay_tx.get("sender") or {}
    r = relay_rx.get("receiver") or {}
    # Where lost frames were lost: never handed to the relay by the sending syncd (its relay
    # publisher's drops, by reason), or sent and never completed at the receiver.
    stream_tx = _find_stream(stats_tx, meta.get("stream")) or {}
    relay_pub = (stream_tx.get("publishers") or {}).get("relay") or {}
    if result.get("receiver") and s.get("frames_sent") is not None:
        result["receiver"]["lost_before_the_relay"] = {
            k: v for k, v in (relay_pub.get("dropped") or {}).items() if v}
        result["receiver"]["lost_in_transport"] = (s["frames_sent"]
                                                   - result["receiver"]["frames_complete"])
    # The sender's packets_sent counts every packet the pacer sent: media, FEC and RTX.
    total = s.get("packets_sent") or 0
    media = total - (s.get("fec_packets_sent") or 0) - (s.get("rtx_packets_sent") or 0)
    fwd = impair.get("fwd") or {}
    result["repair"] = {
        "packets_sent": total, "media_packets_sent": media,
        "fec_packets_sent": s.get("fec_packets_sent"),
        "rtx_packets_sent": s.get("rtx_packets_sent"),
        "wire_lost_fwd": (fwd.get("drop_random") or 0) + (fwd.get("drop_burst") or 0),
        "wire_lost_rev": sum((impair.get("rev") or {}).get(k) or 0
                             for k in ("drop_random", "drop_burst")),
        "recovered_fec": r.get("packets_recovered_fec"),
        "recovered_rtx": r.get("packets_recovered_rtx"),
        "overhead": ((s.get("fec_packets_sent") or 0) + (s.get("rtx_packets_sent") or 0)) / media
        if media else None,
        "media_packets_per_frame": media / s["frames_sent"] if s.get("frames_sent") else None,
        "packets_per_frame": total / s["frames_sent"] if s.get("frames_sent") else None,
        "frames_dropped_by_receiver": r.get("frames_dropped"),
        "srtp_refused": (relay_rx.get("refused") or {}).get("srtp"),
        "rekeys": (relay_tx.get("keys") or {}).get("rekeys"),
    }
    if r.get("frames_dropped"):
        c.setdefault("zero_frames_lost", False)

    # ---- CPU and memory, each side
    samples = A.load_jsonl(arm_dir / "telemetry.jsonl")
    result["cpu"] = {}
    result["memory"] = {}
    for role in ("sender", "receiver"):
        cpu = {}
        for key in ("relay_thread_cpu_seconds", "process_cpu_seconds", "loop_cpu_seconds"):
            d = _cpu(samples, role, key)
            if d:
                cpu[key.replace("_seconds", "_fraction")] = d[0] / d[1]
        d = _cpu(samples, role, "relay_thread_cpu_seconds")
        if d and sent:
            cpu["relay_thread_us_per_frame"] = d[0] / sent * 1e6
        result["cpu"][role] = cpu
        # Minutes 1..N while the stream runs (the pools go when it closes).
        pts = [(x["t_s"] / 60, x[role]["rss_kib"]) for x in samples
               if x[role].get("rss_kib") and x["t_s"] >= 60
               and x["t_ns"] <= meta.get("producer_end_ns", x["t_ns"])]
        slope = A.least_squares_slope([p[0] for p in pts], [p[1] for p in pts])
        result["memory"][role] = {"slope_kib_per_min": slope, "slope_samples": len(pts),
                                  "rss_kib_last": samples[-1][role].get("rss_kib")
                                  if samples else None}
        if slope is not None and len(pts) >= 3:
            c[f"{role}_memory_slope_within_limit"] = abs(slope) <= A.SLOPE_LIMIT_KIB_PER_MIN
    result["_telemetry"] = samples

    if meta.get("source") == "raw":
        if meta.get("profile") in ("abr", "cap-shaper", "cap-policer"):
            result["abr"] = analyze_abr(arm_dir, meta, (result.get("receiver") or {}).get(
                "per_second"), fps)
        test = (stream_rx.get("publishers") or {}).get("test") or {}
        if result.get("receiver"):
            result["receiver"]["frames_marker_verified"] = test.get("marker_verified")
        # The last sample taken while the stream was open (the final /stats comes after the
        # sender's stream closed).
        encoder, decoder, relay_tx = {}, {}, {}
        for x in A.load_jsonl(arm_dir / "telemetry.jsonl"):
            relay_tx = ((x.get("sender") or {}).get("relay") or {}).get("sender") or relay_tx
            pub = (((x.get("sender") or {}).get("stream") or {}).get("publishers") or {})
            encoder = (pub.get("relay") or {}).get("encoder") or encoder
            rr = ((x.get("receiver") or {}).get("relay") or {}).get("receiver") or {}
            decoder = (rr.get("source") or {}).get("decoder") or decoder
        mean_ms = lambda st: st.get("mean_us") / 1000 if st and st.get("mean_us") else None  # noqa
        on_wire = (relay_tx.get("frame_on_wire_ns_total") / relay_tx["frames_on_wire"] / 1e6
                   if relay_tx.get("frames_on_wire") else None)
        result["glass_to_glass"] = analyze_glass_to_glass(
            arm_dir, mean_ms(encoder.get("encode")), mean_ms(decoder.get("decode")), on_wire)
        # Sender accept -> receiver complete includes the encoder here: the transport bound is
        # part 1's, for encoded sources; a raw source is judged glass to glass. Its losses are
        # judged where they happen: none in transport, and at most 0.1 % never relayed (raw
        # frames the sender dropped, by reason, when its encoder's core stalled).
        c.pop("transport_p50_within_one_way_plus_interval", None)
        rx = result.get("receiver") or {}
        if "lost_in_transport" in rx and sent:
            c.pop("zero_frames_lost", None)
            c["zero_frames_lost_in_transport"] = rx["lost_in_transport"] == 0 and not r.get(
                "frames_dropped")
            c["at_most_0_1_percent_never_relayed"] = (
                sum(rx["lost_before_the_relay"].values()) <= sent // 1000)
        g = result["glass_to_glass"]
        if g:
            g["bound_ms"] = one_way_ms + 2 * interval_ms
            if meta.get("profile") == "random":
                c["glass_to_glass_p50_within_one_way_plus_2_intervals"] = (
                    g["ms"]["p50"] <= g["bound_ms"])
    exits_ok = meta.get("sender_exit_code") == 0 and meta.get("receiver_exit_code") == 0
    if meta.get("profile") == "abr":
        abr = result.get("abr") or {}
        c = {k: v for k, v in c.items() if k in ("zero_corrupt", "receiver_frames_recorded")}
        c["target_under_the_cap_within_5_s"] = (
            abr.get("target_under_cap_after_s") is not None
            and abr["target_under_cap_after_s"] <= ABR_TARGET_WITHIN_S)
        c["full_size_again_within_30_s"] = (
            abr.get("full_size_again_after_s") is not None
            and abr["full_size_again_after_s"] <= ABR_FULL_SIZE_WITHIN_S)
    if meta.get("profile") in ("cap-shaper", "cap-policer"):
        # A capacity cap (docs/wan.md "Caps"): the target under the cap within 2 s and staying
        # there, >= 95 % of the frames shown during the cap, full rate within 5 s of its end.
        abr = result.get("abr") or {}
        c = {k: v for k, v in c.items() if k in ("zero_corrupt", "receiver_frames_recorded")}
        c["target_under_the_cap_within_2_s"] = (abr.get("target_under_cap_after_s") is not None
                                                and abr["target_under_cap_after_s"] <= 2)
        c["target_stays_under_the_cap"] = (abr.get("target_over_cap_share_settled") is not None
                                           and abr["target_over_cap_share_settled"] <= 0.05)
        c["at_least_95_percent_shown_during_the_cap"] = (
            abr.get("shown_during_cap_share") is not None and abr["shown_during_cap_share"] >= 0.95)
        c["full_rate_within_5_s_of_the_caps_end"] = (abr.get("full_rate_again_after_s") is not None
                                                     and abr["full_rate_again_after_s"] <= 5)
    if meta.get("profile") == "burst":
        # Reported, not judged: what 5 % burst loss costs; but never a corrupt frame.
        c = {k: v for k, v in c.items() if k in ("zero_corrupt", "receiver_frames_recorded")}
    if meta.get("profile") == "wan-burst":
        # A bad WAN (docs/wan.md "Repair on a lossy path"): nearly every frame shown, no second
        # short of frames, no keyframe storm. Gaps are the repair's round trips (80-100 ms), so
        # the re-key windows are not judged on 2 intervals.
        shown = (result["receiver"] or {}).get("frames_complete") or 0
        requests = (relay_rx.get("receiver") or {}).get("keyframe_requests_sent") or 0
        c = {k: v for k, v in c.items()
             if k in ("zero_corrupt", "zero_low_rate_seconds", "receiver_frames_recorded")}
        c["at_least_99_5_percent_of_frames_shown"] = bool(sent) and shown >= 0.995 * sent
        c["at_most_one_keyframe_request_per_2_s"] = requests <= max(1.0, meta["seconds"] / 2)
        result["keyframe_requests"] = requests
    c["both_syncd_exited_cleanly"] = exits_ok
    result["contract"] = c
    result["contract_met"] = all(c.values())
    return result


def plot_relay_arm(result, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    name = result["arm"]
    files = {}
    rx = result.get("receiver") or {}
    fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    ax = axes[0]
    bins = rx.get("per_second") or []
    if bins:
        ax.step([b["second"] - bins[0]["second"] + 1 for b in bins],
                [b["frames"] for b in bins], where="mid", label="remote consumer")
        sb = (result.get("sender") or {}).get("per_second") or []
        if sb:
            ax.step([b["second"] - bins[0]["second"] + 1 for b in sb], [b["frames"] for b in sb],
                    where="mid", color="black", linestyle="--", linewidth=0.7,
                    label="sending syncd's input")
    ax.axhline(result["nominal_fps"], color="grey", linestyle=":", linewidth=0.8)
    ax.axhline(A.LOW_RATE, color="red", linestyle="--", linewidth=0.8, label="low-rate (<50)")
    ax.set_ylim(0, result["nominal_fps"] * 1.25)
    ax.set_ylabel("unique frames / s")
    ax.set_title(f"{name}: {result['size']}@{result['nominal_fps']:g} H.264 relayed, re-key "
                 f"every {result['rekey_interval_s']:g} s\nsync-impair {result['impairment']}",
                 fontsize=9)
    ax.legend(loc="lower right", fontsize=7)
    gaps = result.get("_gaps")
    transport = result.get("_transport")
    t0 = gaps[3] if gaps else None
    if transport is not None and t0 is not None:
        ax = axes[1]
        ax.plot((transport[0] - t0) / 1e9, transport[1] / 1e6, ".", markersize=1.5,
                label="sender accept -> receiver complete")
        ax.axhline(result["transport_bound_ms"], color="red", linestyle="--", linewidth=0.8,
                   label=f"one-way + 1 interval ({result['transport_bound_ms']:.1f} ms)")
        ax.set_ylabel("transport latency, ms")
        ax.legend(loc="upper right", fontsize=7)
    if gaps is not None:
        ax = axes[2]
        ax.plot((gaps[0] - t0) / 1e9, gaps[1], ".", markersize=1.5, label="gap before frame")
        ax.axhline(MAX_GAP_INTERVALS, color="red", linestyle="--", linewidth=0.8,
                   label="2 intervals")
        ax.set_ylabel("frame gap, intervals")
        ax.set_xlabel("seconds since the first frame at the receiver")
        for a in axes:
            for i, s in enumerate(gaps[2]):
                a.axvline((s - t0) / 1e9, color="green", linewidth=0.6, alpha=0.6,
                          label="re-key (send switch)" if a is ax and i == 0 else None)
        ax.legend(loc="upper right", fontsize=7)
    for a in axes:
        a.grid(True, alpha=0.3)
    fig.tight_layout()
    files["timeline"] = f"{name}-timeline.png"
    fig.savefig(out_dir / files["timeline"], dpi=100)
    plt.close(fig)

    abr = result.get("abr") or {}
    series = abr.get("_series")
    if series:
        fig, axes = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
        ax = axes[0]
        ax.step(series["t_s"], [c if c is not None else np.nan for c in series["cap_mbps"]],
                where="post", color="black", linewidth=1.2, label="path cap (sync-impair)")
        ax.plot(series["t_s"], series["target_mbps"], label="sender's target (estimate)")
        ax.plot(series["t_s"], series["encoder_mbps"], label="encoder bitrate")
        ax.plot(series["t_s"], [v if v is not None else np.nan for v in series["sent_mbps"]],
                linewidth=0.7, alpha=0.8, label="sent (media + FEC + RTX)")
        ax.set_ylabel("Mbit/s")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{name}: {result['size']}@{result['nominal_fps']:g} raw -> H.264, path "
                     f"capped {abr['cap_kbps'] / 1000:g} Mbit/s from {abr['cap_drop_s']:g} s to "
                     f"{abr['cap_back_s']:g} s", fontsize=9)
        ax.legend(loc="upper right", fontsize=7)
        ax = axes[1]
        secs = abr.get("_rx_seconds") or []
        if secs:
            ax.step([x for x, _ in secs], [n for _, n in secs], where="mid",
                    label="delivered (remote consumer)")
        ax.axhline(result["nominal_fps"], color="grey", linestyle=":", linewidth=0.8)
        ax.axhline(A.LOW_RATE, color="red", linestyle="--", linewidth=0.8, label="low-rate (<50)")
        ax.set_ylim(0, result["nominal_fps"] * 1.25)
        ax.set_ylabel("unique frames / s")
        ax.legend(loc="lower right", fontsize=7)
        ax = axes[2]
        ax.step(series["t_s"], [h if h else np.nan for h in series["height"]], where="post")
        ax.set_ylabel("encoded height, px")
        ax.set_xlabel("seconds since the path's schedule started")
        for a in axes:
            a.grid(True, alpha=0.3)
            a.axvline(abr["cap_drop_s"], color="red", linewidth=0.6, alpha=0.6)
            a.axvline(abr["cap_back_s"], color="green", linewidth=0.6, alpha=0.6)
        fig.tight_layout()
        files["abr"] = f"{name}-abr.png"
        fig.savefig(out_dir / files["abr"], dpi=100)
        plt.close(fig)

    g = result.get("glass_to_glass") or {}
    if g.get("stages_median_ms"):
        fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 6),
                                      gridspec_kw={"height_ratios": [1, 1.4]})
        left = 0.0
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, (label, ms) in enumerate(g["stages_median_ms"].items()):
            if ms is None:
                continue
            ax.barh([0], [ms], left=left, color=colors[i % len(colors)],
                    label=f"{label}: {ms:.1f} ms")
            left += ms
        ax.axvline(g["ms"]["p50"], color="black", linewidth=1,
                   label=f"glass to glass p50 {g['ms']['p50']:.1f} ms (p99 "
                         f"{g['ms']['p99']:.1f})")
        ax.axvline(g["bound_ms"], color="red", linestyle="--", linewidth=0.8,
                   label=f"bound: one-way + 2 intervals ({g['bound_ms']:.1f} ms)")
        ax.set_yticks([])
        ax.set_xlabel("ms (stage medians, stacked)")
        ax.set_title(f"{name}: {result['size']}@{result['nominal_fps']:g} glass to glass by "
                     f"stage, sync-impair {result['impairment']}", fontsize=9)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), fontsize=7, ncol=2)
        total = np.sort(g["_total_ns"] / 1e6)
        ax2.plot(total, np.arange(1, len(total) + 1) / len(total))
        ax2.axvline(g["bound_ms"], color="red", linestyle="--", linewidth=0.8)
        ax2.set_xlabel("glass to glass, ms (producer send start -> published at the receiver)")
        ax2.set_ylabel("fraction of frames")
        ax2.grid(True, alpha=0.3)
        fig.tight_layout()
        files["glass"] = f"{name}-glass.png"
        fig.savefig(out_dir / files["glass"], dpi=100)
        plt.close(fig)

    samples = result.get("_telemetry") or []
    if samples:
        fig, ax = plt.subplots(figsize=(10, 3.5))
        for role in ("sender", "receiver"):
            pts = [(x["t_s"] / 60, x[role]["rss_kib"] / 1024) for x in samples
                   if x[role].get("rss_kib")]
            slope = result["memory"][role]["slope_kib_per_min"]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".",
                    label=f"{role} syncd VmRSS (slope "
                          + (f"{slope:+.2f} KiB/min)" if slope is not None else "n/a)"))
        ax.set_xlabel("minutes")
        ax.set_ylabel("MiB")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{name}: resident memory")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        files["memory"] = f"{name}-memory.png"
        fig.savefig(out_dir / files["memory"], dpi=100)
        plt.close(fig)
    return files


def summary_rows(arms):
    """Markdown table lines for the relay arms."""
    lines = ["| figure | " + " | ".join(arms) + " |", "|" + "---|" * (len(arms) + 1)]

    def row(label, fn):
        vals = []
        for a in arms.values():
            try:
                vals.append(A._fmt(fn(a)))
            except (KeyError, TypeError, IndexError, ValueError):
                vals.append("n/a")
        lines.append(f"| {label} | " + " | ".join(vals) + " |")

    row("duration s / profile", lambda a: f"{a['seconds']} / {a['profile']}")
    row("impairment (sync-impair)", lambda a: a["impairment"])
    row("clip: mean kbit/s at the rate", lambda a: round(
        a["clip"]["mean_au_bytes"] * 8 * a["nominal_fps"] / 1000))
    row("frames sent / complete at the receiver",
        lambda a: f"{a['frames_sent']} / {a['receiver']['frames_complete']}")
    row("frames lost after repair / corrupt",
        lambda a: f"{a['receiver']['frames_lost']} / {a['receiver']['frames_corrupt']}")
    row("of those lost: in transport / before the relay (the sender's drops)",
        lambda a: f"{a['receiver']['lost_in_transport']} / "
                  f"{a['receiver']['lost_before_the_relay'] or 0}")
    row("remote unique fps (mean of complete seconds) / min second",
        lambda a: f"{a['receiver']['mean_fps']:.2f} / {a['receiver']['min_fps']}")
    row("low-rate seconds (<50): receiver / the sender's own input",
        lambda a: f"{a['receiver']['low_rate_seconds']} / {a['sender']['low_rate_seconds']}")
    row("transport p50 / p99 / max ms (bound p50)",
        lambda a: "{p50:.1f} / {p99:.1f} / {max:.1f} ({b:.1f})".format(
            b=a["transport_bound_ms"], **a["transport_ms"]))
    row("re-keys / largest gap around one, intervals (sender's own)",
        lambda a: f"{len(a['gaps']['rekeys'])} / "
                  f"{max(r['largest_intervals'] for r in a['gaps']['rekeys']):.2f} "
                  f"({max(r['sender_largest_intervals'] or 0 for r in a['gaps']['rekeys']):.2f})")
    row("largest gap anywhere, intervals (at s) / p99",
        lambda a: f"{a['gaps']['largest_intervals']:.2f} ({a['gaps']['largest_at_s']:.1f}) / "
                  f"{a['gaps']['p99_intervals']:.2f}")
    row("wire loss fwd/rev; recovered FEC/RTX",
        lambda a: f"{a['repair']['wire_lost_fwd']}/{a['repair']['wire_lost_rev']}; "
                  f"{a['repair']['recovered_fec']}/{a['repair']['recovered_rtx']}")
    row("repair overhead (FEC+RTX per media packet)", lambda a: a["repair"]["overhead"])
    row("relay thread us/frame, sender / receiver",
        lambda a: f"{a['cpu']['sender']['relay_thread_us_per_frame']:.0f} / "
                  f"{a['cpu']['receiver']['relay_thread_us_per_frame']:.0f}")
    row("process CPU (of a core), sender / receiver",
        lambda a: f"{a['cpu']['sender']['process_cpu_fraction']:.2f} / "
                  f"{a['cpu']['receiver']['process_cpu_fraction']:.2f}")
    row("RSS slope KiB/min, sender / receiver",
        lambda a: f"{A._fmt(a['memory']['sender']['slope_kib_per_min'])} / "
                  f"{A._fmt(a['memory']['receiver']['slope_kib_per_min'])}")
    row("ABR: target under the cap after the drop, s / consumer >= 59 fps again after, s",
        lambda a: f"{A._fmt(a['abr']['target_under_cap_after_s'])} / "
                  f"{A._fmt(a['abr']['consumer_back_at_59_after_s'])}")
    row("ABR: lowest encoded height / full size again after the cap's return, s",
        lambda a: f"{a['abr']['lowest_height']} / {A._fmt(a['abr']['full_size_again_after_s'])}")
    row("cap: shown during it / target over it once settled (share) / settled target Mbit/s",
        lambda a: f"{A._fmt(a['abr']['shown_during_cap_share'])} / "
                  f"{A._fmt(a['abr']['target_over_cap_share_settled'])} / "
                  f"{a['abr']['target_mbps_settled_min_max']}")
    row("cap: encoder Mbit/s before it / full rate again after its end, s",
        lambda a: f"{A._fmt(a['abr']['encoder_mbps_before_cap'])} / "
                  f"{A._fmt(a['abr']['full_rate_again_after_s'])}")
    row("glass to glass p50 / p99 / max ms (bound p50)",
        lambda a: "{p50:.1f} / {p99:.1f} / {max:.1f} ({b:.1f})".format(
            b=a["glass_to_glass"]["bound_ms"], **a["glass_to_glass"]["ms"]))
    row("frames checked by their column marker (decoded at the receiver)",
        lambda a: a["receiver"]["frames_marker_verified"])
    row("contract met", lambda a: "yes" if a["contract_met"] else
        "NO: " + ", ".join(k for k, v in a["contract"].items() if not v))
    return lines
