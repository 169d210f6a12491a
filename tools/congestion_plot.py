#!/usr/bin/python3
"""Plots a simulated bottleneck run of the bandwidth estimate (docs/wan.md, "Bandwidth estimate
and pacing"): the link's capacity, the sender's target, the receiver's delay-based estimate
(REMB) and the loss-based estimate against time, and the bottleneck's queue delay below.

The CSV comes from the unit test's cap-drop run (tests/unit/congestion/congestion_sim_test.cpp):

    CONGESTION_SIM_CSV=/tmp/cap-drop.csv build/rel/tests/unit/congestion_tests \
        --gtest_filter='CongestionSim.CapDropsFrom20To4AndReturns'
    /usr/bin/python3 tools/congestion_plot.py /tmp/cap-drop.csv docs/img/congestion-cap-drop.png

Usage: tools/congestion_plot.py CSV PNG [--title TITLE]
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", default="Cap 20 -> 4 -> 20 Mbit/s, 20 +/- 5 ms one way, 60 fps source "
                    "following the target")
    args = ap.parse_args()

    with open(args.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    t = [float(r["t_s"]) for r in rows]

    def mbps(column):
        return [float(r[column]) / 1e6 for r in rows]

    fig, (rate_ax, delay_ax) = plt.subplots(2, 1, sharex=True, figsize=(10, 6),
                                            gridspec_kw={"height_ratios": [3, 1.3]})
    rate_ax.step(t, mbps("capacity_bps"), where="post", color="black", lw=1.5, label="capacity")
    rate_ax.plot(t, mbps("link_bps"), color="0.7", lw=0.8, label="sent into the link (per 100 ms)")
    rate_ax.plot(t, mbps("remb_bps"), color="tab:blue", lw=1.2, ls="--",
                 label="delay-based estimate (REMB)")
    rate_ax.plot(t, [min(v, 26) for v in mbps("loss_based_bps")], color="tab:orange", lw=1,
                 ls=":", label="loss-based estimate")
    rate_ax.plot(t, mbps("target_bps"), color="tab:red", lw=1.6, label="target (paced)")
    rate_ax.set_ylabel("Mbit/s")
    rate_ax.set_ylim(0, 26)
    rate_ax.grid(alpha=0.3)
    rate_ax.legend(loc="upper right", fontsize=8, ncol=2)
    rate_ax.set_title(args.title, fontsize=10)

    delay_ax.plot(t, [float(r["queue_delay_ms"]) for r in rows], color="tab:purple", lw=1)
    delay_ax.set_ylabel("queue delay, ms\n(max per 100 ms)")
    delay_ax.set_xlabel("time, s")
    delay_ax.set_yscale("log")
    delay_ax.grid(alpha=0.3, which="both")

    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
