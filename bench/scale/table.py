#!/usr/bin/python3
"""table.py SCALE_JSON DOC: renders bench/scale's result (scale.json) as the
cost table of docs/tap.md, between its scale-table markers.

  python3 bench/scale/table.py build/bench/scale.json docs/tap.md
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from marked_region import replace_region  # noqa: E402

BEGIN = "<!-- scale-table:begin"
END = "<!-- scale-table:end -->"


def pct(x):
    return "-" if x is None else "%.1f%%" % (100.0 * x)


def oracle_rows(d):
    """The oracle pass (the fork with a capture beside it), a table of its
    own: the main one is already as wide as a man page allows."""
    runs = [r for r in d["runs"] if "oracle" in r]
    if not runs:
        return ""
    rows = ["| N | records | past a hole delivered out of order | delayed > 1 RTT, uTLS | "
            "delayed > 1 RTT, oracle | uTLS - oracle |",
            "|---|---|---|---|---|---|"]
    for r in runs:
        o = r["oracle"]
        rows.append("| %d | %d of %d | %s (%d of %d) | %s | %s | %+.4f |" % (
            r["conns"], o["completed_in_capture"], o["records"],
            pct(o.get("ooo_share_past_hole")), o.get("past_hole_delivered_out_of_order", 0),
            o.get("past_hole", 0), pct(o["utls_delayed_gt_rtt"]),
            pct(o["oracle_delayed_gt_rtt"]), o["utls_minus_oracle"]))
    return ("\nThe oracle pass (the fork again, with tcpdump on the receiver's interface; "
            "records whose completion the capture saw; past a hole: completed while an "
            "earlier record of its connection was not, from the capture):\n\n"
            + "\n".join(rows) + "\n")


def render(d):
    rows = ["| N | host CPU per record, stock / uTLS (ratio) | server CPU per record, stock / uTLS | "
            "tap kernel memory | RSS peak, stock / uTLS | ring drops | out of order (server's "
            "count) | delayed > 1 RTT, stock / uTLS |",
            "|---|---|---|---|---|---|---|---|"]
    for r in d["runs"]:
        s, u = r["stock"], r["utls"]
        rows.append("| %d | %.0f / %.0f µs (%.3f) | %.0f / %.0f µs | %.1f MiB | %.1f / %.1f MiB | %d | "
                    "%s (%d of %d) | %s / %s |" % (
                        r["conns"], s["host_cpu_us_per_record"], u["host_cpu_us_per_record"],
                        r["ratio_host_cpu_per_record"], s["server_data_cpu_us_per_record"],
                        u["server_data_cpu_us_per_record"], u["tap_kernel_bytes"] / 1048576.0,
                        s["rss_peak_kb"] / 1024.0, u["rss_peak_kb"] / 1024.0, u["ring_drops"],
                        pct(u["ooo_share_past_hole"]), u["out_of_order"],
                        u["out_of_order"] + u["held_in_order"], pct(s["delayed_gt_rtt"]),
                        pct(u["delayed_gt_rtt"])))
    big = d["runs"][-1]
    text = ("%d records/s of %d bytes over N connections%s, %d ms RTT, %d%% loss, %.0f s per side "
            "(`bench/scale/run.py`, `make bench`).\n\n" % (
                d["rate"], d["size"],
                " (%d in a row to each)" % d["burst"] if d.get("burst", 1) > 1 else "",
                d["rtt_ms"], d["loss_pct"], d["duration_ms"] / 1000.0))
    text += "\n".join(rows) + "\n"
    text += oracle_rows(d)
    if "bulk_cpu_tap_cost" in big:
        ub, sb = big["utls"]["bulk"], big["stock"]["bulk"]
        text += ("\nA bulk TCP flow of %d MiB over the receiver's loopback beside %d idle "
                 "connections, each time next to the same flow in a control namespace (no tap), "
                 "%d pairs per side: it costs %.3f times its control beside the tapped server "
                 "and %.3f beside the stock one (medians of the pairs' ratios): beside the tap it "
                 "costs **%.3f** times as much. Medians of the samples themselves, minutes apart: %.0f ms "
                 "tapped, %.0f ms stock (%.3f).\n" % (
                     ub["mb"], big["conns"], len(ub["vs_control_runs"]), ub["vs_control"],
                     sb["vs_control"], big["bulk_cpu_tap_cost"], ub["cpu_ms"], sb["cpu_ms"],
                     big["bulk_cpu_ratio_tapped_vs_stock"]))
    if "bulk_cpu_tap_cost_concurrent" in big:
        ub, sb = big["utls"]["bulk"], big["stock"]["bulk"]
        text += ("\nThe same pairs run at once on one CPU (the core's speed the same for both "
                 "halves), %d per side: %.3f beside the tapped server, %.3f beside the stock one: "
                 "the tap costs the flow **%.3f** times as much (95%% bootstrap interval %.3f to "
                 "%.3f).\n" % (
                     len(ub["concurrent_vs_control_runs"]), ub["concurrent_vs_control"],
                     sb["concurrent_vs_control"], big["bulk_cpu_tap_cost_concurrent"],
                     big["bulk_cpu_tap_cost_concurrent_ci95"][0],
                     big["bulk_cpu_tap_cost_concurrent_ci95"][1]))
    if "bulk_cpu_tap_cost_by_attribution" in big:
        ub = big["utls"]["bulk"]
        text += ("\nBy attribution (`perf record -a -g` over %d flows beside the tapped server, "
                 "which the machine's speed does not move): %.2f%% of the flow's %d samples were "
                 "in packet sockets' work (%.2f%% beside the stock server, %.2f%% in the control "
                 "namespace), so the tap costs the flow **%.3f** times as much.\n" % (
                     ub["share_flows"],
                     100 * big["bulk_tap_share"], ub["samples"][0],
                     100 * big["bulk_tap_share_stock"], 100 * big["bulk_tap_share_control"],
                     big["bulk_cpu_tap_cost_by_attribution"]))
    text += "\nTargets: " + ", ".join("%s %s" % (k, "yes" if v else "**no**")
                                       for k, v in d.get("targets", {}).items()) + ".\n"
    return text


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    d = json.load(open(sys.argv[1]))
    doc = open(sys.argv[2]).read()
    open(sys.argv[2], "w").write(replace_region(doc, BEGIN, END, render(d), "table.py"))


if __name__ == "__main__":
    main()
