#!/usr/bin/python3
"""bench/scale: the process-wide tap with N connections, stock vs fork.

  run.py --build BUILD --out DIR [--ns 1,100,1000,10000] [--rate 2000]
         [--passes 3] [--burst 8] [--size 1400] [--duration-ms 10000] [--bulk-mb 2048]
         [--share-runs 3] [--smoke]
         [--no-oracle]

For each N, on one testbed (tools/testbed: 100 ms RTT, 2% loss on the data
direction), examples/utls-server serves N concurrent TLS 1.3 connections
from one load client (utls-server-stock load, the system libssl) carrying a
fixed aggregate load (RATE records/s of SIZE bytes dealt round robin, BURST
in a row to a connection: with one at a time, N = 10,000 carries 0.2
records/s per connection and nothing is past a hole, so the out-of-order
share is not measured there; --burst 8 gives a lost record records behind it
at every N, but the server's count of records held in order (late, right
after a late one) then also counts records that shared the lost segment), once
with the system libssl (utls-server-stock, in order) and once with the fork
and the process-wide tap (utls-server --mode utls), one after the other in
the same run. Per N and side: whole-host CPU (user + nice + sys + irq +
softirq + steal: online CPUs x the sending window - idle - iowait from
/proc/stat, whose idle time the tickless-idle code keeps exactly; the
tick-sampled user + sys + softirq counters miss most of a load made of
short bursts on this VM and are only reported, as host_cpu_sampled_ms) per
delivered record,
the server's own CPU in the data phase per record, the tap's kernel memory,
peak RSS, descriptors, ring drops, the share of records past a hole that
were delivered out of order, delayed_gt_rtt, and the ratios fork/stock.
Then (unless --no-oracle) a third pass of the fork with tcpdump on the
receiver's interface: the oracle, each record delivered the moment its last
byte arrived (bench/scale/oracle.py), and the fork's delayed_gt_rtt minus
the oracle's over the same records.

At the largest N, with the connections open and idle (the load client holds
them), an unrelated bulk TCP flow (BULK_MB over the receiver namespace's
loopback, which the tap's filters see and reject) is timed for its CPU
(its processes' user + sys), each time next to the same flow in a control
namespace (the sender's, which has no tap on either side), in alternating
order: BULK_RUNS pairs per pass. The rest of the host's cost is the median
of the pairs' ratios with the tapped server holding its N connections over
the same with the stock server holding its N (bulk_cpu_tap_cost). Then
BULK_RUNS more pairs, each run at the same time on one CPU
(bulk_cpu_tap_cost_concurrent; bulkflow.concurrent_pair): the core's speed,
which on some days moves a flow's CPU by 25% from one run to the next, is
the same for both halves. And SHARE_RUNS flows per pass and side under perf
record: the share of their samples in packet sockets' work gives the cost
by attribution (bulk_cpu_tap_cost_by_attribution; bulkflow.tap_samples),
with one flow in the control namespace, which must show none.

Writes DIR/scale.json and prints progress. Needs root (exit 77 without).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "latency"))
import capture  # noqa: E402
import oracle as oracle_mod  # noqa: E402
import bulkflow  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TB = os.path.join(ROOT, "tools", "testbed", "testbed")
PORT = 4433

def log(msg):
    print("bench/scale: " + msg, flush=True)


def tb(prefix, *args, check=True, **kw):
    return subprocess.run([TB, "--prefix", prefix] + list(args), check=check, **kw)


def testbed_up(prefix, nfq_bin=None):
    """Brings the bench's testbed up under |prefix| (100 ms RTT, 2% loss on
    the data direction, seeded; NFQ_BIN: the nfq-delay program, where the
    kernel has no netem) and returns the receiver's address."""
    up = ["up", "--rtt", "100", "--loss", "2", "--seed", "2020", "--queue", "10000"]
    if nfq_bin:
        up += ["--bin", nfq_bin]
    tb(prefix, "-q", "down", check=False)
    tb(prefix, "-q", *up)
    return tb(prefix, "addr", "receiver", capture_output=True, text=True).stdout.strip()


def load_command(bin_dir, prefix, addr, n, rate, burst, size, duration_ms, hold_ms, mark,
                 release, out):
    """The load client (utls-server-stock load, the system libssl) in the
    sender's namespace: N connections to ADDR:PORT, RATE records/s of SIZE
    bytes for DURATION_MS, then held open for up to HOLD_MS (until RELEASE
    exists); MARK is made when the data phase ends."""
    return [TB, "--prefix", prefix, "exec", "sender", "--",
            os.path.join(bin_dir, "utls-server-stock"), "load",
            "--connect", "%s:%d" % (addr, PORT), "--conns", str(n), "--rate", str(rate),
            "--burst", str(burst), "--size", str(size), "--duration-ms", str(duration_ms),
            "--rtt-ms", "100", "--hold-ms", str(hold_ms), "--mark", mark, "--release", release,
            "--out", out, "--quiet"]


def start_capture(prefix, pcap):
    """tcpdump in the receiver namespace, headers of the segments toward the
    server (the oracle needs no payload), until stop_capture()."""
    p = subprocess.Popen([TB, "--prefix", prefix, "exec", "receiver", "--", "tcpdump", "-i", "eth0",
                          "-n", "-s", "96", "-B", "65536", "--immediate-mode",
                          "--time-stamp-precision=nano", "-w", pcap, "tcp", "dst", "port",
                          str(PORT)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if not capture.wait_listening(p):
        p.kill()
        raise RuntimeError("tcpdump did not start")
    return p


def stop_capture(p):
    p.terminate()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()


def one_side(a, prefix, work, side, n, bulk, oracle=False):
    """Runs one server (side "stock" or "utls") with N connections; returns
    its result dict. With |oracle| (side "utls" only) a capture runs beside
    it and the result holds the oracle's numbers (oracle.summarize)."""
    server_bin = os.path.join(a.bin_dir, "utls-server-stock" if side == "stock" else "utls-server")
    sout = os.path.join(work, "serve-%s-%d.jsonl" % (side, n))
    lout = os.path.join(work, "load-%s-%d.jsonl" % (side, n))
    mark = os.path.join(work, "mark-%s-%d" % (side, n))
    release = os.path.join(work, "release-%s-%d" % (side, n))
    ready = os.path.join(work, "ready-%s-%d" % (side, n))
    recs = os.path.join(work, "records-%s-%d" % (side, n))
    pcap = os.path.join(work, "oracle-%d.pcap" % n)
    for f in (sout, lout, mark, ready, release, recs):
        if os.path.exists(f):
            os.unlink(f)
    cap = start_capture(prefix, pcap) if oracle else None
    server = subprocess.Popen([TB, "--prefix", prefix, "exec", "receiver", "--", server_bin, "serve",
                               "--listen", "0.0.0.0:%d" % PORT, "--mode",
                               "tls" if side == "stock" else "utls", "--rtt-ms", "100",
                               "--ready", ready, "--out", sout, "--quiet"]
                              + (["--records", recs] if oracle else []))
    try:
        for _ in range(400):
            if os.path.exists(ready) and os.path.getsize(ready) > 0:
                break
            time.sleep(0.025)
        else:
            raise RuntimeError("%s server did not start" % side)
        hold = 0
        if bulk:
            hold = 3 * 60 * 1000  # ended by the bulk measurement below
        load = subprocess.Popen(load_command(a.bin_dir, prefix, a.receiver_addr, n, a.rate,
                                             a.burst, a.size, a.duration_ms, hold, mark, release,
                                             lout))
        bulk_res = None
        if bulk:
            while not os.path.exists(mark):
                if load.poll() is not None:
                    raise RuntimeError("load client ended early")
                time.sleep(0.1)
            # The connections idle: the data phase's last retransmissions
            # (RTO 200 ms and more at 100 ms RTT) are over.
            time.sleep(2.0)
            # Pairs, back to back in alternating order: the flow in the
            # receiver's namespace (whose loopback the tap's sockets see,
            # with the uTLS server) and in the sender's (the load client's
            # namespace: no tap on either side). The host's speed drifts by
            # up to 20% over a minute on this VM, which no number of samples
            # taken minutes apart cancels; a pair's ratio does.
            runs, control = [], []
            for i in range(a.bulk_runs):
                got = bulkflow.pair(i, a.bulk_mb, 5001 + i, a.bulk_bin,
                                    lambda where: [TB, "--prefix", prefix, "exec", where, "--"])
                runs.append(got["receiver"])
                control.append(got["sender"])
                log("  bulk flow beside %d idle %s connections: %.0f ms CPU, %.0f ms in the "
                    "control namespace (%.3f)" % (n, side, runs[-1], control[-1],
                                                  runs[-1] / control[-1]))
            bulk_res = {"cpu_ms_runs": runs, "cpu_ms": statistics.median(runs), "mb": a.bulk_mb,
                        "control_cpu_ms_runs": control,
                        "vs_control_runs": [x / c for x, c in zip(runs, control)]}
            # The same pairs run at once on one CPU (bulkflow.concurrent_pair):
            # the core's speed, which the pairs above only partly cancel,
            # is the same for both.
            conc = []
            for i in range(a.bulk_runs):
                got = bulkflow.concurrent_pair(
                    i, a.bulk_mb, 5201 + i, a.bulk_bin,
                    lambda where: [TB, "--prefix", prefix, "exec", where, "--"],
                    i % (os.cpu_count() or 1))
                conc.append(got["receiver"] / got["sender"])
            log("  the same at once on one CPU: ratios %s"
                % ", ".join("%.3f" % x for x in conc))
            bulk_res["concurrent_vs_control_runs"] = conc
            # Attribution (bulkflow.tap_samples): the flow's samples in a
            # packet socket's work, beside the connections and, as the
            # check that nothing else is counted, in the control namespace.
            for where, key, k in (("receiver", "samples", a.share_runs),
                                  ("sender", "control_samples", 1)):
                bulk_res[key] = bulkflow.tap_samples_total(
                    k, a.bulk_mb, 5101, a.bulk_bin, [TB, "--prefix", prefix, "exec", where, "--"])
            bulk_res["share_flows"] = a.share_runs
            if None in (bulk_res["samples"], bulk_res["control_samples"]):
                log("  attribution: n/a (no perf)")
                bulk_res["samples"] = bulk_res["control_samples"] = None
            else:
                log("  attribution: %d of %d samples in packet sockets' work (%d of %d in the "
                    "control namespace)" % (bulk_res["samples"][1], bulk_res["samples"][0],
                                            bulk_res["control_samples"][1],
                                            bulk_res["control_samples"][0]))
            open(release, "w").close()  # the load client closes its connections
        load.wait(timeout=600)
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        if cap is not None:
            stop_capture(cap)
    if oracle:
        return oracle_mod.summarize(pcap, recs, PORT, 100)
    ld = [json.loads(x) for x in open(lout)][-1]
    sv = [json.loads(x) for x in open(sout)][-1]
    past_hole = sv["ooo"] + sv["held_in_order"]
    tap = sv.get("tap", {})
    res = {
        "conns": n, "ready": ld["ready"], "failed": ld["failed"], "sent": ld["sent"],
        "delivered": sv["records"], "bad": sv["bad"], "dup": sv["dup"],
        "host_cpu_ms": ld["host_cpu_ms"], "host_cpu_sampled_ms": ld.get("host_cpu_sampled_ms"),
        "window_s": ld["window_s"],
        "segs_out_per_record": ld.get("segs_out", 0) / max(1, sv["records"]),
        "acks_in_per_record": ld.get("segs_in", 0) / max(1, sv["records"]),
        "host_cpu_us_per_record": 1000.0 * ld["host_cpu_ms"] / max(1, sv["records"]),
        "server_data_cpu_us_per_record": 1000.0 * sv["data_cpu_ms"] / max(1, sv["records"]),
        "handshake_s": ld["handshake_s"],
        "rss_peak_kb": sv["rss_peak_kb"], "max_open_conns": sv["max_open"],
        "fds_at_end": sv["fds"],
        "tap_kernel_bytes": tap.get("kernel_bytes", 0), "ring_drops": tap.get("ring_drops", 0),
        "inbox_drops": tap.get("inbox_drops", 0), "tapped": sv.get("tapped", 0),
        "out_of_order": sv["ooo"], "held_in_order": sv["held_in_order"],
        "ooo_share_past_hole": (sv["ooo"] / past_hole) if past_hole else None,
        "delayed_gt_rtt": sv["delayed_gt_rtt"] / max(1, sv["records"]),
        "p99_ms": sv["p99_ms"],
    }
    if bulk_res is not None:
        res["bulk"] = bulk_res
    return res


def bootstrap_ci95(a, b, rounds=10000):
    """The 95% interval of median(a) / median(b), from |rounds| resamples of
    each (seeded: the same data give the same interval)."""
    rng = random.Random(2020)
    est = sorted(statistics.median(rng.choices(a, k=len(a)))
                 / statistics.median(rng.choices(b, k=len(b))) for _ in range(rounds))
    return [est[int(0.025 * rounds)], est[int(0.975 * rounds) - 1]]


def ooo_share(row):
    """The share of records past a hole delivered out of order: exact from
    the oracle pass's capture where there is one (oracle.past_hole), else
    the server's own count, a lower bound (records that shared a lost
    segment count as held in order there)."""
    o = row.get("oracle")
    if o is not None and "ooo_share_past_hole" in o:
        return o["ooo_share_past_hole"]
    return row["utls"]["ooo_share_past_hole"]


def targets(result):
    """The issue's targets, from the runs. The out-of-order share holds only
    where it was measured: a run with no record past a hole fails it."""
    by_n = {r["conns"]: r for r in result["runs"]}
    t = {}
    for n in (1000, 10000):
        if n in by_n:
            t["cpu_ratio_le_1.15_at_%d" % n] = by_n[n]["ratio_host_cpu_per_record"] <= 1.15
    if 100 in by_n and 10000 in by_n:
        t["cpu_ratio_10000_le_1.05x_ratio_100"] = (by_n[10000]["ratio_host_cpu_per_record"]
                                                  <= 1.05 * by_n[100]["ratio_host_cpu_per_record"])
    t["tap_kernel_bytes_le_64MiB"] = all(r["utls"]["tap_kernel_bytes"] <= 64 << 20
                                         for r in result["runs"])
    t["tap_kernel_bytes_independent_of_n"] = len({r["utls"]["tap_kernel_bytes"]
                                                  for r in result["runs"]}) == 1
    t["zero_ring_drops"] = all(r["utls"]["ring_drops"] == 0 for r in result["runs"])
    t["ooo_share_ge_0.95"] = all(ooo_share(r) is not None and ooo_share(r) >= 0.95
                                 for r in result["runs"])
    if any("utls_minus_oracle" in r for r in result["runs"]):
        t["utls_minus_oracle_le_0.005"] = all(r.get("utls_minus_oracle", 1) <= 0.005
                                              for r in result["runs"])
    big = by_n[max(by_n)]
    if "bulk_cpu_tap_cost" in big:
        t["bulk_flow_cpu_le_1.05"] = big["bulk_cpu_tap_cost"] <= 1.05
    if "bulk_cpu_tap_cost_concurrent" in big:
        # the whole 95% interval, not only the estimate
        t["bulk_flow_cpu_le_1.05_concurrent"] = big["bulk_cpu_tap_cost_concurrent_ci95"][1] <= 1.05
    if "bulk_cpu_tap_cost_by_attribution" in big:
        t["bulk_flow_cpu_le_1.05_by_attribution"] = big["bulk_cpu_tap_cost_by_attribution"] <= 1.05
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build")
    ap.add_argument("--out")
    ap.add_argument("--bin-dir", default=None)
    ap.add_argument("--ns", default="1,100,1000,10000")
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--burst", type=int, default=8,
                    help="records in a row to one connection (the load is still RATE/s)")
    ap.add_argument("--size", type=int, default=1400)
    ap.add_argument("--duration-ms", type=int, default=10000)
    ap.add_argument("--passes", type=int, default=3,
                    help="passes per side and N; CPU per record is each side's median")
    ap.add_argument("--bulk-mb", type=int, default=2048)
    ap.add_argument("--bulk-bin", default=None,
                    help="the bulk flow program (default: BUILD/bench/scale/bulkflow)")
    ap.add_argument("--bulk-runs", type=int, default=8,
                    help="bulk flow pairs (receiver and control namespace) per pass and side")
    ap.add_argument("--share-runs", type=int, default=3,
                    help="bulk flows under perf record per pass and side (attribution)")
    ap.add_argument("--json-name", default="scale.json")
    ap.add_argument("--no-oracle", dest="oracle", action="store_false",
                    help="skip the third pass per N (the fork with a capture: the oracle)")
    ap.add_argument("--smoke", action="store_true", help="N=100, 2 s, a 256 MiB bulk flow")
    ap.add_argument("--retarget", metavar="JSON", help="recompute the targets of a result file")
    a = ap.parse_args()
    if a.retarget:
        d = json.load(open(a.retarget))
        d["targets"] = targets(d)
        with open(a.retarget, "w") as f:
            json.dump(d, f, indent=1)
        print(json.dumps(d["targets"]))
        return 0
    if os.geteuid() != 0:
        print("SKIP: bench/scale needs root (testbed, AF_PACKET)")
        return 77
    if a.smoke:
        a.ns, a.duration_ms, a.bulk_mb, a.bulk_runs, a.passes = "100", 2000, 256, 1, 1
        a.share_runs = 1
    a.bin_dir = a.bin_dir or os.path.join(a.build, "examples", "utls-server")
    a.bulk_bin = a.bulk_bin or bulkflow.default_bin(a.build)
    ns = [int(x) for x in a.ns.split(",")]
    prefix = "usc%d" % (os.getpid() % 100000)
    work = tempfile.mkdtemp(prefix="bench-scale.")
    os.chmod(work, 0o755)
    result = {"bench": "scale", "passes": a.passes,
              "host_cpu": "online CPUs x window - (idle + iowait), /proc/stat",
              "rate": a.rate, "burst": a.burst, "size": a.size, "duration_ms": a.duration_ms,
              "rtt_ms": 100, "loss_pct": 2, "runs": []}
    try:
        a.receiver_addr = testbed_up(prefix, os.environ.get("UTLS_NFQ_DELAY"))
        for n in ns:
            bulk = n == max(ns)
            row = {"conns": n}
            # PASSES alternating passes per side (stock, utls, then utls,
            # stock, ...): the testbed's own CPU moves by +-10% from one
            # window to the next, so each side's CPU per record is the
            # median of its passes, and drift over the run falls on both.
            got = {"stock": [], "utls": []}
            for p in range(a.passes):
                for side in (("stock", "utls") if p % 2 == 0 else ("utls", "stock")):
                    log("N=%d %s, pass %d of %d: %d connections, %d records/s for %.1f s%s"
                        % (n, side, p + 1, a.passes, n, a.rate, a.duration_ms / 1000.0,
                           ", then a bulk flow beside them" if bulk else ""))
                    r = one_side(a, prefix, work, side, n, bulk)
                    log("  %d/%d delivered, %.1f us host CPU per record, %d out of order, "
                        "ooo share %s, ring drops %d, RSS %d KiB"
                        % (r["delivered"], r["sent"], r["host_cpu_us_per_record"],
                           r["out_of_order"],
                           "%.3f" % r["ooo_share_past_hole"]
                           if r["ooo_share_past_hole"] is not None else "-",
                           r["ring_drops"], r["rss_peak_kb"]))
                    got[side].append(r)
            for side in ("stock", "utls"):
                first = dict(got[side][0])
                for key in ("host_cpu_us_per_record", "server_data_cpu_us_per_record"):
                    first[key + "_passes"] = [x[key] for x in got[side]]
                    first[key] = statistics.median(first[key + "_passes"])
                if bulk:
                    # Every pass's bulk runs, both orders: which side ran
                    # first moved the bulk flow's CPU by 20% in one run.
                    b = {k: [c for x in got[side] for c in x["bulk"][k]]
                         for k in ("cpu_ms_runs", "control_cpu_ms_runs", "vs_control_runs",
                                   "concurrent_vs_control_runs")}
                    first["bulk"] = dict(first["bulk"], cpu_ms=statistics.median(b["cpu_ms_runs"]),
                                         vs_control=statistics.median(b["vs_control_runs"]),
                                         concurrent_vs_control=statistics.median(
                                             b["concurrent_vs_control_runs"]), **b)
                    first["bulk"]["share_flows"] = sum(x["bulk"]["share_flows"] for x in got[side])
                    for k in ("samples", "control_samples"):
                        per = [x["bulk"].get(k) for x in got[side]]
                        first["bulk"][k] = (None if None in per else
                                            [sum(x[0] for x in per), sum(x[1] for x in per)])
                first["passes"] = got[side][1:]
                row[side] = first
            s, u = row["stock"], row["utls"]
            row["ratio_host_cpu_per_record"] = (u["host_cpu_us_per_record"]
                                                / s["host_cpu_us_per_record"])
            row["ratio_server_cpu_per_record"] = (u["server_data_cpu_us_per_record"]
                                                  / max(1e-9, s["server_data_cpu_us_per_record"]))
            row["delayed_gt_rtt_utls_minus_stock"] = u["delayed_gt_rtt"] - s["delayed_gt_rtt"]
            if bulk:
                # The target: what the flow costs in the tapped namespace
                # against the control namespace at the same minute, over
                # the same with the stock server (which calibrates the two
                # namespaces: 1 but for noise).
                row["bulk_cpu_tap_cost"] = u["bulk"]["vs_control"] / s["bulk"]["vs_control"]
                row["bulk_cpu_tap_cost_concurrent"] = (u["bulk"]["concurrent_vs_control"]
                                                       / s["bulk"]["concurrent_vs_control"])
                row["bulk_cpu_tap_cost_concurrent_ci95"] = bootstrap_ci95(
                    u["bulk"]["concurrent_vs_control_runs"], s["bulk"]["concurrent_vs_control_runs"])
                # Across the sides, minutes apart: drift included.
                row["bulk_cpu_ratio_tapped_vs_stock"] = u["bulk"]["cpu_ms"] / s["bulk"]["cpu_ms"]
                # By attribution: the flow without its samples in packet
                # sockets' work costs (1 - share) of what it cost.
                if u["bulk"]["samples"] is not None and s["bulk"]["samples"] is not None:
                    share = {x: d["bulk"]["samples"][1] / max(1, d["bulk"]["samples"][0])
                             for x, d in (("utls", u), ("stock", s))}
                    row["bulk_tap_share"] = share["utls"]
                    row["bulk_tap_share_stock"] = share["stock"]
                    row["bulk_tap_share_control"] = (
                        u["bulk"]["control_samples"][1] / max(1, u["bulk"]["control_samples"][0]))
                    row["bulk_cpu_tap_cost_by_attribution"] = ((1 - share["stock"])
                                                               / (1 - share["utls"]))
            if a.oracle:
                # A third pass with a capture beside the fork (not beside the
                # two above: tcpdump's CPU would blur their ratio).
                log("N=%d utls with a capture: the oracle" % n)
                o = one_side(a, prefix, work, "utls", n, False, oracle=True)
                row["oracle"] = o
                row["utls_minus_oracle"] = o["utls_minus_oracle"]
                log("  oracle %.4f, utls %.4f delayed > 1 RTT over %d of %d records: utls - oracle "
                    "%.4f; %d of %d records past a hole delivered out of order"
                    % (o["oracle_delayed_gt_rtt"], o["utls_delayed_gt_rtt"],
                       o["completed_in_capture"], o["records"], o["utls_minus_oracle"],
                       o["past_hole_delivered_out_of_order"], o["past_hole"]))
            result["runs"].append(row)
            log("N=%d: host CPU per record utls/stock %.3f, server CPU per record %.3f"
                % (n, row["ratio_host_cpu_per_record"], row["ratio_server_cpu_per_record"]))
    finally:
        tb(prefix, "-q", "down", check=False)
    result["targets"] = targets(result)
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, a.json_name)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    log("wrote %s; targets: %s" % (path, json.dumps(result["targets"])))
    subprocess.run(["rm", "-rf", work])
    # What must hold in any run, the smoke run included: nothing lost,
    # forged or duplicated, every connection tapped, early records.
    bad = []
    for r in result["runs"]:
        for side, x in [(sd, x) for sd in ("stock", "utls")
                        for x in [r[sd]] + r[sd].get("passes", [])]:
            if x["delivered"] != x["sent"] or x["bad"] or x["dup"] or x["failed"]:
                bad.append("N=%d %s: %d of %d delivered, %d bad, %d dup, %d failed"
                           % (r["conns"], side, x["delivered"], x["sent"], x["bad"], x["dup"],
                              x["failed"]))
        if r["utls"]["tapped"] != r["conns"]:
            bad.append("N=%d: %d of %d connections tapped" % (r["conns"], r["utls"]["tapped"],
                                                              r["conns"]))
        o = r.get("oracle")
        if o is not None and (o["completed_in_capture"] < 0.99 * o["records"]
                              or o["delivered_before_capture_ms"] > 0.01 * o["records"]):
            bad.append("N=%d: the oracle's capture completed %d of %d records, %d delivered "
                       "more than 1 ms before the capture saw them (clocks or offsets off)"
                       % (r["conns"], o["completed_in_capture"], o["records"],
                          o["delivered_before_capture_ms"]))
        if r["stock"]["held_in_order"] > 0 and r["utls"]["out_of_order"] == 0:
            bad.append("N=%d: records were held behind holes with stock, none out of order "
                       "with the tap" % r["conns"])
    for b in bad:
        log("FAIL: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
