#!/usr/bin/python3
"""Renders the headline table of the top-level README.md from a latency.json
written by run.py (`make bench`), between the marker comments

    <!-- latency-table:begin ... -->
    <!-- latency-table:end -->

Nothing in the table is typed by hand: run the benchmark, then

    bench/latency/readme_table.py [--json build/bench/latency.json] [--readme README.md]

--check exits 1 when the README's table differs from what the JSON renders
(and changes nothing); --print writes the table to stdout only.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from marked_region import replace_region  # noqa: E402

BEGIN = "<!-- latency-table:begin"
END = "<!-- latency-table:end -->"
ROWS = (
    ("tls", "TLS (stock libssl, in order)"),
    ("utls", "**uTLS** (`SSL_MODE_UNORDERED` + tap)"),
    ("dtls", "DTLS over UDP (lost = never)"),
    ("ucobs", "**uCOBS** (datagrams on plain TCP + tap)"),
    ("quic_stream", "QUIC, a stream per message (quic-go)"),
    ("quic_datagram", "QUIC DATAGRAM frames (lost = never)"),
    ("oracle", "oracle (last byte reached the host)"),
)
BOLD = ("utls", "ucobs")


def pct(x):
    return "%.1f%%" % (100 * x)


def render(doc):
    cfg = doc["config"]
    out = []
    out.append("%d messages every %g ms, %g ms RTT, %g%% random loss (seed %d), every mode at "
               "once on a testbed of its own; messages of %d bytes (TLS: %d-byte records on "
               "the wire%s); TCP senders in %s, quic-go in NewReno. Rendered by "
               "`bench/latency/readme_table.py` from `build/bench/latency.json` (`make bench`):"
               % (cfg["count"], cfg["interval_ms"], cfg["rtt_ms"], cfg["loss_pct"], cfg["seed"],
                  cfg["size"], cfg["wire_record_bytes"],
                  "; QUIC DATAGRAM: %d bytes, quic-go's largest"
                  % doc["quic_datagram"]["message_bytes"]
                  if doc.get("quic_datagram", {}).get("message_bytes", cfg["size"]) != cfg["size"]
                  else "", cfg["sender_cc"]))
    out.append("")
    out.append("| | delayed > 1 RTT | p50 | p95 | p99 | delivered out of order "
               "| CPU ms per 1000 messages, receiver / sender |")
    out.append("|---|---|---|---|---|---|---|")
    for key, label in ROWS:
        m = doc.get(key)
        if not m:
            continue
        delayed = pct(m["delayed_gt_rtt"])
        if m.get("lost"):
            delayed += " (%s lost)" % pct(m["lost"])
        if key in BOLD:
            delayed = "**%s**" % delayed
        ooo = m.get("out_of_order")
        cpu = m.get("cpu")
        out.append("| %s | %s | %.1f ms | %.1f ms | %.1f ms | %s | %s |" % (
            label, delayed, m["p50_ms"], m["p95_ms"], m["p99_ms"],
            "—" if ooo is None or key in ("dtls", "oracle") else ooo,
            "%.0f / %.0f" % (1000 * cpu["receiver_s_per_1000"], 1000 * cpu["sender_s_per_1000"])
            if cpu else "—"))
    return "\n".join(out) + "\n"


def splice(text, table):
    return replace_region(text, BEGIN, END, table, "readme_table")


def main():
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default=os.path.join(src, "build", "bench", "latency.json"))
    ap.add_argument("--readme", default=os.path.join(src, "README.md"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--print", dest="just_print", action="store_true")
    a = ap.parse_args()
    with open(a.json) as f:
        table = render(json.load(f))
    if a.just_print:
        sys.stdout.write(table)
        return 0
    with open(a.readme) as f:
        text = f.read()
    new = splice(text, table)
    if a.check:
        if new != text:
            print("readme_table: %s differs from %s" % (a.readme, a.json))
            return 1
        return 0
    if new != text:
        with open(a.readme, "w") as f:
            f.write(new)
    print("readme_table: %s %s" % (a.readme, "updated" if new != text else "unchanged"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
