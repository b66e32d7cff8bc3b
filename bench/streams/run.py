#!/usr/bin/python3
"""bench/streams: the multistream experiment (issue 9, docs/substreams.md).

K streams of timed messages over ONE connection through tools/testbed
(100 ms RTT, 2% seeded loss by default): stream k sends a message every
--interval ms, the streams staggered by interval/K. Two modes run side by side
in one run, each on a testbed of its own with the same loss seed:

  tls           stock system libssl, one TLS connection, in order: the
                per-stream latency of the same workload multiplexed on one
                ordered TLS stream (a loss stalls every stream);
  utls_streams  the uTLS fork: SSL_MODE_UNORDERED through the tap, and
                sub-streams (UTLS_stream_write / UTLS_stream_read): a loss
                stalls only the stream whose message was hit.

Latency of a message = the receiver's return time minus the sender's write
time (CLOCK_MONOTONIC is shared by the namespaces of one host). Writes
OUT/streams.json (p50/p95/p99 per stream and overall for each mode, and the
ratios utls_streams / tls) and OUT/streams_cdf.png, and prints the JSON.
Every message of every stream must arrive exactly once, intact and in its
own stream's order (order_ok); a violation makes the run fail.

The utls_streams run is also captured (tcpdump on the receiver's interface):
utls_streams.oracle_streams is the per-stream-ordered oracle, each message
delivered the moment its record and every earlier message of its stream had
reached the host -- the best any receiver that keeps per-stream order can do
on those packets (it uses bench/latency/analyze.py's pcap reader).

  run.py --build BUILD --out OUT [--count N] [--smoke] [--prefix P]

--smoke: a short run (200 messages) that checks the JSON's structure and
the order assertion (ctest bench.smoke_streams). Needs root.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PORT = 4433
MODES = ("tls", "utls_streams")
_live = []
_testbeds = []
_oracle_lat = []  # the per-stream-ordered oracle's latencies, for the plot


def log(msg):
    sys.stderr.write("bench/streams: %s\n" % msg)
    sys.stderr.flush()


def percentile(values, p):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


def stats(lat_ms, rtt_ms):
    if not lat_ms:
        return {"count": 0}
    return {
        "count": len(lat_ms),
        "p50_ms": round(percentile(lat_ms, 50), 3),
        "p90_ms": round(percentile(lat_ms, 90), 3),
        "p95_ms": round(percentile(lat_ms, 95), 3),
        "p99_ms": round(percentile(lat_ms, 99), 3),
        "mean_ms": round(sum(lat_ms) / len(lat_ms), 3),
        "max_ms": round(max(lat_ms), 3),
        # Waited for a retransmission (the path alone takes RTT/2).
        "share_over_rtt": round(sum(1 for x in lat_ms if x > rtt_ms) / len(lat_ms), 5),
        "share_over_2rtt": round(sum(1 for x in lat_ms if x > 2 * rtt_ms) / len(lat_ms), 5),
    }


def analyze(recv_log, cfg):
    lines = [json.loads(l) for l in open(recv_log)]
    end = lines[-1] if lines and lines[-1].get("event") == "end" else {}
    msgs = [l for l in lines if "event" not in l]
    k, count = cfg["streams"], cfg["count"]
    per, order_ok, lat_all = [], True, []
    for s in range(k):
        ms = [m for m in msgs if m.get("ok") == 1 and m["s"] == s]
        expected = count // k + (1 if s < count % k else 0)
        qs = [m["q"] for m in ms]
        ok = qs == list(range(expected))
        order_ok = order_ok and ok
        lat = [(m["recv_ns"] - m["send_ns"]) / 1e6 for m in ms]
        lat_all += lat
        st = stats(lat, cfg["rtt_ms"])
        st.update({"stream": s, "expected": expected, "in_order_exactly_once": ok})
        per.append(st)
    bad = sum(1 for m in msgs if m.get("ok") != 1)
    res = stats(lat_all, cfg["rtt_ms"])
    res.update({
        "per_stream": per,
        "messages": len(msgs) - bad,
        "bad_or_duplicate": bad,
        "missing": end.get("missing"),
        "order_violations": end.get("order_violations"),
        "order_ok": bool(order_ok and bad == 0 and end.get("order_violations") == 0),
        "from_out_of_order_records": sum(1 for m in msgs if m.get("ooo") == 1),
        "held": sum(1 for m in msgs if m.get("held") == 1),
    })
    for key in ("utls", "streams", "tap"):
        if key in end:
            res[key] = end[key]
    return res, lat_all


def tb(prefix, *args, check=True):
    cmd = [os.path.join(ROOT, "tools", "testbed", "testbed"), "--prefix", prefix, "-q"] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("testbed %s %s failed: %s" % (prefix, " ".join(args), r.stderr.strip()))
    return r


def tb_exec(prefix, where):
    return [os.path.join(ROOT, "tools", "testbed", "testbed"), "--prefix", prefix, "exec", where,
            "--"]


def start_capture(prefix, path):
    """tcpdump on the receiver's interface (the oracle's arrival times)."""
    tcpdump = shutil.which("tcpdump")
    if tcpdump is None:
        return None
    p = subprocess.Popen(tb_exec(prefix, "receiver")
                         + [tcpdump, "-i", "eth0", "--immediate-mode", "-n", "-s", "128",
                            "--time-stamp-precision=nano", "-w", path, "tcp", "port", str(PORT)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _live.append(p)
    sys.path.insert(0, os.path.join(ROOT, "bench", "latency"))
    from capture import wait_listening  # the latency benchmark's tcpdump wait
    if wait_listening(p):
        return p
    p.kill()
    raise RuntimeError("tcpdump did not start in %s" % prefix)


def stream_oracle(recv_log, pcap, cfg):
    """Per-stream-ordered oracle: each message delivered the moment the last
    byte of its record AND of every earlier message of its stream reached the
    receiver's interface (from the capture). This is the best any receiver
    that keeps per-stream order can do on the same packets."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "latency"))
    from analyze import oracle_from_pcap  # the latency benchmark's pcap reader
    lines = [json.loads(l) for l in open(recv_log)]
    start = lines[0]
    msgs = [l for l in lines if "event" not in l and l.get("ok") == 1 and "off" in l]
    by_wl = {}
    for m in msgs:
        by_wl.setdefault(m["wl"], {})[(m["s"], m["q"])] = m["off"]
    done = {}
    for wl, offs in by_wl.items():
        done.update(oracle_from_pcap(pcap, PORT, offs, wl, start["real_minus_mono_ns"]))
    send = {(m["s"], m["q"]): m["send_ns"] for m in msgs}
    lat, per = [], [[] for _ in range(cfg["streams"])]
    for s in range(cfg["streams"]):
        t_ready = 0
        q = 0
        while (s, q) in send:
            if (s, q) not in done:
                break  # not complete in the capture: stop this stream here
            t_ready = max(t_ready, done[(s, q)])
            x = (t_ready - send[(s, q)]) / 1e6
            lat.append(x)
            per[s].append(x)
            q += 1
    _oracle_lat[:] = lat
    res = stats(lat, cfg["rtt_ms"])
    res["per_stream_p95_ms"] = [stats(v, cfg["rtt_ms"]).get("p95_ms") for v in per]
    res["source"] = "pcap"
    return res


def run_mode(mode, prefix, cfg, bindir, rundir):
    binary = os.path.join(bindir, "utls-substreams" if mode == "utls_streams"
                          else "utls-substreams-stock")
    require = "fork" if mode == "utls_streams" else "stock"
    recv_log = os.path.join(rundir, "%s.recv.jsonl" % mode)
    ready = os.path.join(rundir, "%s.ready" % mode)
    if os.path.exists(ready):
        os.unlink(ready)
    addr = "%s:%d" % (tb(prefix, "addr", "receiver").stdout.strip(), PORT)
    limit = str(int(cfg["count"] * cfg["interval_ms"] / cfg["streams"] / 1000 + 90))
    common = ["--mode", mode, "--count", str(cfg["count"]), "--streams", str(cfg["streams"]),
              "--size", str(cfg["size"]), "--require", require, "--timeout", limit, "--quiet"]
    pcap = os.path.join(rundir, "%s.pcap" % mode)
    cap = start_capture(prefix, pcap) if mode == "utls_streams" else None
    recv = subprocess.Popen(tb_exec(prefix, "receiver") + [binary, "recv", "--listen", addr,
                                                           "--out", recv_log, "--ready", ready]
                            + common)
    _live.append(recv)
    deadline = time.time() + 10
    while not os.path.exists(ready):
        if recv.poll() is not None or time.time() > deadline:
            raise RuntimeError("%s receiver did not start (exit %s)" % (mode, recv.poll()))
        time.sleep(0.02)
    send = subprocess.Popen(tb_exec(prefix, "sender") + [binary, "send", "--connect", addr,
                                                         "--interval", str(cfg["interval_ms"]),
                                                         "--cc", cfg["sender_cc"],
                                                         "--out", os.path.join(rundir, "%s.send.jsonl" % mode)]
                            + common)
    _live.append(send)
    rrc, src = recv.wait(), send.wait()
    if src != 0:
        raise RuntimeError("%s sender failed (exit %d)" % (mode, src))
    if cap is not None:
        time.sleep(0.2)
        cap.send_signal(signal.SIGINT)
        cap.wait(5)
    res, lat = analyze(recv_log, cfg)
    res["receiver_exit"] = rrc
    if cap is not None:
        try:
            res["oracle_streams"] = stream_oracle(recv_log, pcap, cfg)
        except Exception as e:  # the benchmark stands without it
            log("no oracle: %s" % e)
    return res, lat


def cdf_plot(lats, path, cfg, oracle_lat):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = {"tls": "tab:red", "utls_streams": "tab:blue"}
    for mode in MODES:
        xs = sorted(lats[mode]["all"])
        if not xs:
            continue
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.plot(xs, ys, color=colors[mode], lw=2, label="%s (all streams)" % mode)
        for s, v in enumerate(lats[mode]["per_stream"]):
            v = sorted(v)
            ax.plot(v, [(i + 1) / len(v) for i in range(len(v))], color=colors[mode], lw=0.6,
                    alpha=0.5, label="%s, each stream" % mode if s == 0 else None)
    if oracle_lat:
        xs = sorted(oracle_lat)
        ax.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], color="black", ls="--", lw=1,
                label="per-stream-order oracle (capture)")
    ax.axvline(cfg["rtt_ms"] / 2, color="gray", ls=":", lw=1, label="one-way delay")
    ax.set_xscale("log")
    ax.set_xlabel("message delivery latency (ms)")
    ax.set_ylabel("CDF")
    ax.set_title("%d streams, a message per stream every %g ms, RTT %g ms, loss %g%%"
                 % (cfg["streams"], cfg["interval_ms"], cfg["rtt_ms"], cfg["loss_pct"]))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def check_structure(doc):
    """The smoke test's assertions: keys, numbers, per-stream order."""
    errs = []
    for mode in MODES:
        m = doc.get(mode, {})
        for key in ("p50_ms", "p95_ms", "p99_ms", "per_stream", "order_ok", "messages"):
            if key not in m:
                errs.append("%s.%s missing" % (mode, key))
        if not m.get("order_ok"):
            errs.append("%s: a stream lost, repeated or reordered a message" % mode)
        if m.get("messages") != doc["config"]["count"]:
            errs.append("%s: %s of %d messages" % (mode, m.get("messages"), doc["config"]["count"]))
        if len(m.get("per_stream", [])) != doc["config"]["streams"]:
            errs.append("%s: per_stream has %d entries" % (mode, len(m.get("per_stream", []))))
        for s in m.get("per_stream", []):
            if not (0 < s.get("p50_ms", 0) <= s.get("p95_ms", 0) <= s.get("p99_ms", 0)):
                errs.append("%s stream %s: percentiles not ordered" % (mode, s.get("stream")))
    r = doc.get("ratio", {})
    for key in ("p50", "p95", "p99", "per_stream_p95"):
        if key not in r:
            errs.append("ratio.%s missing" % key)
    if doc.get("utls_streams", {}).get("utls", {}).get("fallback", "").startswith("none") is False:
        errs.append("utls_streams: the fork fell back to in-order delivery")
    return errs


def run_point(a, cfg, bindir, rundir, prefix):
    """Both modes of one configuration side by side, each on a testbed of its
    own; returns the JSON section (modes, ratios) and the latencies."""
    results, lats, errors = {}, {}, {}
    os.makedirs(rundir, exist_ok=True)
    try:
        prefixes = {}
        for mode in MODES:
            p = "%s%s" % (prefix, "tls" if mode == "tls" else "ust")
            _testbeds.append(p)
            tb(p, "up", "--rtt", str(cfg["rtt_ms"]), "--loss", str(cfg["loss_pct"]),
               "--seed", str(cfg["seed"]))
            prefixes[mode] = p
        log("%d messages over %d streams (each every %g ms, %d bytes), RTT %g ms, loss %g%%, "
            "~%.0f s" % (cfg["count"], cfg["streams"], cfg["interval_ms"], cfg["size"],
                         cfg["rtt_ms"], cfg["loss_pct"],
                         cfg["count"] * cfg["interval_ms"] / cfg["streams"] / 1000 + 2))

        def worker(mode):
            try:
                results[mode], lat = run_mode(mode, prefixes[mode], cfg, bindir, rundir)
                lats[mode] = lat
            except Exception as e:
                errors[mode] = e
        threads = [threading.Thread(target=worker, args=(m,)) for m in MODES]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError("; ".join("%s: %s" % kv for kv in errors.items()))
    finally:
        for p in _live:
            if p.poll() is None:
                p.kill()
        for p in _testbeds:
            tb(p, "down", check=False)
        del _testbeds[:]
    doc = {"config": cfg}
    for mode in MODES:
        doc[mode] = results[mode]
    t, u = results["tls"], results["utls_streams"]
    doc["ratio"] = {
        "what": "utls_streams / tls (below 1: uTLS sub-streams deliver sooner)",
        "p50": round(u["p50_ms"] / t["p50_ms"], 4),
        "p90": round(u["p90_ms"] / t["p90_ms"], 4),
        "p95": round(u["p95_ms"] / t["p95_ms"], 4),
        "p99": round(u["p99_ms"] / t["p99_ms"], 4),
        "per_stream_p95": [round(us["p95_ms"] / ts["p95_ms"], 4)
                           for us, ts in zip(u["per_stream"], t["per_stream"])],
        "share_over_rtt": round(u["share_over_rtt"] / t["share_over_rtt"], 4)
        if t["share_over_rtt"] else None,
    }
    o = u.get("oracle_streams")
    if o and o.get("count"):
        # How close sub-streams come to the best any per-stream-ordered
        # receiver could do on the same packets (1.0 = the oracle).
        doc["ratio"]["utls_streams_vs_stream_oracle_p95"] = round(u["p95_ms"] / o["p95_ms"], 4)
    return doc


def log_point(name, doc):
    for mode in MODES:
        r = doc[mode]
        log("%s: %-13s p50 %7.1f  p90 %7.1f  p95 %7.1f  p99 %7.1f ms  >RTT %5.1f%%  per-stream "
            "p95 %s  order_ok %s"
            % (name, mode, r["p50_ms"], r["p90_ms"], r["p95_ms"], r["p99_ms"],
               100 * r["share_over_rtt"], " ".join("%.1f" % s["p95_ms"] for s in r["per_stream"]),
               r["order_ok"]))
    o = doc["utls_streams"].get("oracle_streams")
    if o:
        log("%s: %-13s p50 %7.1f  p90 %7.1f  p95 %7.1f  p99 %7.1f ms  >RTT %5.1f%%  (per-stream-"
            "order oracle, from the capture)" % (name, "oracle", o["p50_ms"], o["p90_ms"],
                                                  o["p95_ms"], o["p99_ms"],
                                                  100 * o["share_over_rtt"]))


# The headline keeps the streaming experiment's traffic (bench/latency: one
# record of one MSS every 20 ms, 100 ms RTT, 2% loss) and deals its messages
# round-robin to 4 streams, so every segment carries one stream's message and
# a loss hits one stream. 1422 plaintext bytes + a 4-byte sub-stream header +
# 22 bytes of TLS 1.3 make 1448 bytes on the wire, one full segment. The
# "dense" variant sends 4 x 300-byte messages every 20 ms (one every 5 ms):
# each stream then sees a loss of its own about once a second, so its p95
# falls inside its own recoveries and sub-streams gain less at p95.
HEADLINE = {"count": 3000, "size": 1422, "interval_ms": 80.0}
DENSE = {"count": 4000, "size": 300, "interval_ms": 20.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=None, help="default BUILD/bench")
    ap.add_argument("--bin-dir", default=None)
    ap.add_argument("--count", type=int, default=HEADLINE["count"], help="messages in total")
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--size", type=int, default=HEADLINE["size"],
                    help="plaintext bytes per message (default: one 1448-byte record on the "
                         "wire with the sub-stream header)")
    ap.add_argument("--interval", type=float, default=HEADLINE["interval_ms"],
                    help="ms between messages of a stream (default 80: one message every 20 ms "
                         "over the 4 streams, as in bench/latency)")
    ap.add_argument("--rtt", type=float, default=100.0)
    ap.add_argument("--loss", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cc", default="bbr",
                    help="the sender's TCP congestion control (default bbr, as in bench/latency: "
                         "with cubic, 2%% loss shrinks the window until messages queue in the "
                         "sender and every mode, the oracle included, is late)")
    ap.add_argument("--prefix", default="sstb",
                    help="testbed prefix; the testbeds are PREFIXtls and PREFIXust "
                         "(PREFIXdtls and PREFIXdust for the dense variant)")
    ap.add_argument("--no-variant", action="store_true", help="skip the dense variant")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--json-name", default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: bench/streams needs root (network namespaces, the tap)")
        return 77
    if a.smoke:
        a.count, a.prefix = 200, a.prefix if a.prefix != "sstb" else "ssts"
        a.no_variant = True
    out = os.path.abspath(a.out or os.path.join(a.build, "bench"))
    bindir = a.bin_dir or os.path.join(os.path.abspath(a.build), "examples", "utls-substreams")
    name = a.json_name or ("streams_smoke.json" if a.smoke else "streams.json")
    rundir = os.path.join(out, "streams", "smoke" if a.smoke else "full")
    cfg = {"count": a.count, "streams": a.streams, "size": a.size, "interval_ms": a.interval,
           "rtt_ms": a.rtt, "loss_pct": a.loss, "seed": a.seed, "sender_cc": a.cc,
           "record_plaintext": "size + 3..4 header bytes (utls_streams); size (tls)",
           "note": "the streaming experiment's traffic (one message every %g ms in all) dealt "
                   "round-robin to %d streams" % (a.interval / a.streams, a.streams)}
    t_start = time.time()

    def on_signal(signum, frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, on_signal)
    doc = {"benchmark": "streams"}
    doc.update(run_point(a, cfg, bindir, rundir, a.prefix))
    headline_oracle = list(_oracle_lat)  # the variant's run replaces _oracle_lat
    log_point("headline", doc)
    if not a.no_variant:
        dcfg = dict(cfg, **DENSE)
        dcfg["note"] = ("4 x 300-byte messages every 20 ms (one every 5 ms): each stream meets a "
                        "loss of its own about once a second, so its p95 falls inside its own "
                        "loss recoveries")
        ddoc = run_point(a, dcfg, bindir, os.path.join(out, "streams", "dense"), a.prefix + "d")
        log_point("dense", ddoc)
        doc["variants"] = {"dense": ddoc}
    doc["elapsed_s"] = round(time.time() - t_start, 1)
    path = os.path.join(out, name)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    try:
        plot_lats = {}
        for mode in MODES:
            lines = [json.loads(l) for l in open(os.path.join(rundir, "%s.recv.jsonl" % mode))]
            msgs = [l for l in lines if "event" not in l and l.get("ok") == 1]
            plot_lats[mode] = {
                "all": [(m["recv_ns"] - m["send_ns"]) / 1e6 for m in msgs],
                "per_stream": [[(m["recv_ns"] - m["send_ns"]) / 1e6 for m in msgs if m["s"] == s]
                               for s in range(a.streams)]}
        png = os.path.join(out, "streams_smoke_cdf.png" if a.smoke else "streams_cdf.png")
        cdf_plot(plot_lats, png, cfg, headline_oracle)
        log("plot %s" % png)
    except ImportError as e:
        log("no plot (%s)" % e)
    print(json.dumps({k: doc[k] for k in ("config", "ratio")}, indent=1))
    log("wrote %s (%.0f s)" % (path, doc["elapsed_s"]))
    errs = check_structure(doc)
    if "variants" in doc:
        errs += ["dense: " + e for e in check_structure(dict(doc["variants"]["dense"],
                                                              benchmark="streams"))]
    for e in errs:
        log("FAIL: " + e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
