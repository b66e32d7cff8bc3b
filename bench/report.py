#!/usr/bin/env python3
"""report.py: the measurement tables of bench/README.md, from the JSON.

    report.py [--bench-dir build/bench] [--readme bench/README.md] [--check]

Reads the JSON that `make bench` leaves in build/bench/ (core, cpu, latency,
send, streams) and rewrites the part of bench/README.md between
`<!-- bench-report:begin -->` and `<!-- bench-report:end -->`: one table row
per key, its value as measured, and the target the project holds it to.
Nothing in that part is typed by hand; `make bench` runs this after the
benchmarks. A file the run did not produce gives rows that say so. With
--check it only reports whether the README's part is what the JSON gives
(exit 1 if not).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from marked_region import replace_region  # noqa: E402

BEGIN = "<!-- bench-report:begin -->"
END = "<!-- bench-report:end -->"

# (file, label, value paths, format, target). A row with several paths shows
# their values joined by " / ". fmt: "f3" three decimals, "pct" a share in
# percent, "ms" milliseconds, "gbps".
ROWS = [
    ("core.json", "header scan throughput (Gbit/s)", ["scan_gbps"], "f2", "≥ 1.0"),
    ("core.json", "probes per out-of-order record, cbr / vbr / mixed sizes",
     ["probes_per_record.cbr", "probes_per_record.vbr", "probes_per_record.mixed"], "f3", "≤ 1.05 / ≤ 1.5 / —"),
    ("core.json", "COBS encode / decode (Gbit/s)", ["cobs_gbps.encode", "cobs_gbps.decode"], "f2", ""),
    ("core.json", "uCOBS receive in order / 2% held back (Gbit/s)",
     ["ucobs_rx_gbps.in_order", "ucobs_rx_gbps.loss_2pct"], "f2", ""),
    ("cpu.json", "`offmode_ratio`: fork, modes off, vs stock libssl", ["offmode_ratio"], "f3", "= 1"),
    ("cpu.json", "`inorder_ratio`: `SSL_MODE_UNORDERED`, no loss, vs stock", ["inorder_ratio"], "f3", "≤ 1.03"),
    ("cpu.json", "`inorder_nometa_ratio`: the same without per-record metadata", ["inorder_nometa_ratio"], "f3", ""),
    ("cpu.json", "`loss2_ratio`: mode on, 2% loss, vs stock", ["loss2_ratio"], "f3", "≤ 1.07"),
    ("cpu.json", "`loss2_nometa_ratio`", ["loss2_nometa_ratio"], "f3", ""),
    ("cpu.json", "`ern.probes_per_ooo_record` cbr / vbr / mixed",
     ["ern.probes_per_ooo_record.cbr", "ern.probes_per_ooo_record.vbr", "ern.probes_per_ooo_record.mixed"],
     "f3", "= 1.0"),
    ("cpu.json", "`probe_cost.provider_gcm_32_vs_single` (EVP fallback)",
     ["probe_cost.provider_gcm_32_vs_single", "probe_cost.evp_gcm_32_vs_single"], "f2", "≤ 1.5"),
    ("latency.json", "`delayed_gt_rtt`: TLS / uTLS / oracle",
     ["tls.delayed_gt_rtt", "utls.delayed_gt_rtt", "oracle.delayed_gt_rtt"], "f3",
     "uTLS ≤ 0.03 and within 0.005 of the oracle"),
    ("latency.json", "`delayed_gt_rtt`: DTLS (lost) / uCOBS",
     ["dtls.delayed_gt_rtt", "dtls.lost", "ucobs.delayed_gt_rtt"], "f3", "uCOBS ≤ 0.03"),
    ("latency.json", "`delayed_gt_rtt`: unmodified event loops, epoll / poll / asyncio",
     ["evloop_epoll.delayed_gt_rtt", "evloop_poll.delayed_gt_rtt", "evloop_asyncio.delayed_gt_rtt"],
     "f3", "each within 0.005 of the oracle"),
    ("evloop.json", "1000-descriptor `epoll_wait`, companion preloaded / plain, nothing tapped",
     ["epoll_wait_ns.ratio"], "f3", "≤ 1.05"),
    ("latency.json", "`delayed_gt_rtt`: QUIC streams / QUIC datagrams",
     ["quic_stream.delayed_gt_rtt", "quic_datagram.delayed_gt_rtt"], "f3", ""),
    ("latency.json", "`variants.no_sack.delayed_gt_rtt`: TLS / uTLS",
     ["variants.no_sack.tls.delayed_gt_rtt", "variants.no_sack.utls.delayed_gt_rtt"], "f3",
     "paper: > 0.10 / < 0.03"),
    ("send.json", "urgent message p99 (ms): scheduler / stock, and the base",
     ["sched.p99_ms", "stock.p99_ms", "base_ms"], "f1", "scheduler ≤ 1.5 × base + 1 MSS"),
    ("streams.json", "p95 (ms): uTLS sub-streams / TLS",
     ["utls_streams.p95_ms", "tls.p95_ms"], "f1", "well below"),
    ("tunnel.json", "tunnel, VoIP share later than base + 100 ms: TLS / uTLS / oracle",
     ["modes.tls.voip.delayed_gt_base_plus_100ms", "modes.utls.voip.delayed_gt_base_plus_100ms",
      "oracle.delayed_gt_base_plus_100ms"], "f3", "uTLS ≤ 0.5 × TLS, within 0.005 of the oracle"),
    ("tunnel.json", "tunnel, inner TCP goodput uTLS / TLS; without the IP policy; socat preloaded / stock",
     ["ratios.bulk_goodput_utls_over_tls", "ratios.bulk_goodput_utls_nopolicy_over_tls",
      "ratios.bulk_goodput_socat_preload_over_socat_tls"], "f3", "≥ 0.95 / — / ≥ 0.95"),
]


def lookup(doc, path):
    cur = doc
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def fmt(value, how):
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, (int, float)):
        return str(value)
    digits = {"f1": 1, "f2": 2, "f3": 3}.get(how, 3)
    return "%.*f" % (digits, value)


def render(bench_dir):
    docs = {}
    for name in sorted({r[0] for r in ROWS}):
        path = os.path.join(bench_dir, name)
        try:
            with open(path) as fp:
                docs[name] = json.load(fp)
        except (OSError, ValueError):
            docs[name] = None
    lines = ["| file | what | value | target |", "|---|---|---|---|"]
    for name, label, paths, how, target in ROWS:
        doc = docs[name]
        if doc is None:
            value = "not in this run"
        else:
            value = " / ".join(fmt(lookup(doc, p), how) for p in paths)
        lines.append("| `%s` | %s | %s | %s |" % (name, label, value, target or ""))
    present = [n for n, d in docs.items() if d is not None]
    lines.append("")
    lines.append("Generated by `bench/report.py` from %s in `%s`."
                 % (", ".join("`%s`" % n for n in present) or "no JSON",
                    os.path.relpath(bench_dir, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))))
    return "\n".join(lines)


def splice(readme_text, table):
    return replace_region(readme_text, BEGIN, END, table, "report.py")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench-dir", default=os.path.join(here, "..", "build", "bench"))
    ap.add_argument("--readme", default=os.path.join(here, "README.md"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    with open(args.readme) as fp:
        text = fp.read()
    new = splice(text, render(args.bench_dir))
    if args.check:
        if new != text:
            print("report.py: %s is not what %s gives; run bench/report.py" % (args.readme, args.bench_dir))
            return 1
        print("report.py: %s is up to date" % args.readme)
        return 0
    with open(args.readme, "w") as fp:
        fp.write(new)
    print("report.py: wrote the tables of %s from %s" % (args.readme, args.bench_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
