#!/usr/bin/python3
"""bulk_phases.py: what the tapped server costs an unrelated bulk flow, phase
by phase (by hand, needs root; docs/tap.md, COST).

  bulk_phases.py --build BUILD [--conns 100] [--pairs 24] [--mode utls|tls]
                 [--mb 2048]

On one testbed (tools/testbed: 100 ms RTT, 2% loss), examples/utls-server
(--mode utls: the fork and the process-wide tap; tls: the same server in
order) runs in the receiver's namespace and a load client (the system
libssl) opens CONNS connections to it, sends a little and holds them idle.
Then three phases, each PAIRS pairs of the bulk flow (bench/scale/bulkflow.c,
MB MiB over loopback) run back to back in the receiver's namespace and in the
sender's (alternating order): with the connections open; after the load
client closed them, the server still up; with no server. Prints, per phase,
the median of the pairs' ratios (receiver over sender) and that of each
half of the pairs (their spread shows the noise), the median of PAIRS more
pairs each run at once on one CPU (bulkflow.concurrent_pair: the core's
speed the same for both halves), and writes the same as
JSON to stdout's last line. The first two phases against the third give the
server's cost to the flow, with and without its connections. Each phase
also counts, with perf stat over three more flows in each namespace, the
kernel's socket-buffer frees per packet sent (skb:consume_skb over
net:net_dev_queue): a packet socket that sees what the host sends adds one
(the clone made for it). Counts do not move with the machine's speed; nor
does the last column, the share of three more flows' samples (perf record)
in packet sockets' work (bulkflow.tap_samples), the cost by attribution. The
server takes the tap's ISNs as the library decides (UTLS_TAP_ISN=capture
in the environment: from the control socket).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bulkflow  # noqa: E402
from run import PORT, TB, load_command, testbed_up  # noqa: E402


def log(msg):
    print("bulk_phases: " + msg, file=sys.stderr, flush=True)


def wait_for(path, what, proc, timeout_s=120):
    """Waits until |path| exists and is not empty; raises if |proc| ends or
    the time runs out."""
    deadline = time.monotonic() + timeout_s
    while not (os.path.exists(path) and os.path.getsize(path) > 0):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("%s did not come (exit %s)" % (what, proc.poll()))
        time.sleep(0.05)


def fmt(x):
    return "n/a (no perf)" if x is None else "%.2f" % x


def pct(x):
    return "n/a (no perf)" if x is None else "%.2f%%" % (100 * x)


class Phases:
    def __init__(self, a, prefix):
        self.a, self.prefix, self.port = a, prefix, 7000

    def ex(self, where):
        return [TB, "--prefix", self.prefix, "exec", where, "--"]

    def pairs(self, label):
        ratios = []
        for i in range(self.a.pairs):
            self.port += 1
            got = bulkflow.pair(i, self.a.mb, self.port, self.a.bulk_bin, self.ex)
            ratios.append(got["receiver"] / got["sender"])
        h = len(ratios) // 2
        res = {"phase": label, "ratio": statistics.median(ratios),
               "halves": [statistics.median(ratios[:h]), statistics.median(ratios[h:])],
               "ratios": ratios}
        # The same pairs run at once on one CPU (bulkflow.concurrent_pair).
        conc = []
        for i in range(self.a.pairs):
            self.port += 1
            got = bulkflow.concurrent_pair(i, self.a.mb, self.port, self.a.bulk_bin, self.ex,
                                           i % (os.cpu_count() or 1))
            conc.append(got["receiver"] / got["sender"])
        res["concurrent_ratio"] = statistics.median(conc)
        res["concurrent_ratios"] = conc
        # The kernel's work, counted: socket-buffer frees per packet sent,
        # in the receiver's namespace and in the sender's (perf, 3 flows).
        for where in ("receiver", "sender"):
            got = []
            for _ in range(3):
                self.port += 1
                f = bulkflow.skb_frees_per_packet(self.a.mb, self.port, self.a.bulk_bin,
                                                  self.ex(where))
                if f is not None:
                    got.append(f)
            res["skb_frees_per_packet_" + where] = statistics.median(got) if got else None
            # And by attribution: the share of the flow's samples in packet
            # sockets' work (bulkflow.tap_samples; 3 flows).
            tot = bulkflow.tap_samples_total(3, self.a.mb, self.port + 1, self.a.bulk_bin,
                                             self.ex(where))
            self.port += 3
            res["tap_share_" + where] = tot[1] / max(1, tot[0]) if tot else None
        log("%-34s receiver/sender %.3f (halves %.3f, %.3f; at once on one CPU %.3f); skb frees "
            "per packet sent %s / %s; samples in packet sockets' work %s / %s"
            % (label, res["ratio"], res["halves"][0], res["halves"][1], res["concurrent_ratio"],
               fmt(res["skb_frees_per_packet_receiver"]), fmt(res["skb_frees_per_packet_sender"]),
               pct(res["tap_share_receiver"]), pct(res["tap_share_sender"])))
        return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--conns", type=int, default=100)
    ap.add_argument("--pairs", type=int, default=24)
    ap.add_argument("--mode", choices=("utls", "tls"), default="utls")
    ap.add_argument("--mb", type=int, default=2048)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: bulk_phases needs root (testbed, AF_PACKET)")
        return 77
    a.bulk_bin = bulkflow.default_bin(a.build)
    bins = os.path.join(a.build, "examples", "utls-server")
    prefix = "ubp%d" % (os.getpid() % 100000)
    work = tempfile.mkdtemp(prefix="bulk-phases.")
    os.chmod(work, 0o755)
    f = {k: os.path.join(work, k) for k in ("ready", "mark", "release", "load.jsonl")}
    nfq = os.environ.get("UTLS_NFQ_DELAY") or os.path.join(a.build, "tools", "testbed",
                                                            "nfq-delay")
    server = load = None
    out = {"bench": "bulk_phases", "mode": a.mode, "conns": a.conns, "mb": a.mb, "phases": []}
    try:
        addr = testbed_up(prefix, nfq if os.path.exists(nfq) else None)
        p = Phases(a, prefix)
        server = subprocess.Popen(p.ex("receiver") + [
            os.path.join(bins, "utls-server"), "serve", "--listen", "0.0.0.0:%d" % PORT,
            "--mode", a.mode, "--rtt-ms", "100", "--ready", f["ready"], "--quiet"],
            stdout=subprocess.DEVNULL)
        wait_for(f["ready"], "the server", server)
        load = subprocess.Popen(load_command(bins, prefix, addr, a.conns, 200, 8, 1400, 1000,
                                             600000, f["mark"], f["release"], f["load.jsonl"]))
        while not os.path.exists(f["mark"]):
            if load.poll() is not None:
                raise RuntimeError("the load client ended early")
            time.sleep(0.1)
        time.sleep(2.0)  # the data phase's retransmissions are over
        out["phases"].append(p.pairs("%s server, %d idle connections" % (a.mode, a.conns)))
        open(f["release"], "w").close()
        load.wait(timeout=120)
        time.sleep(1.0)
        out["phases"].append(p.pairs("%s server, no connections" % a.mode))
        server.terminate()
        server.wait(timeout=60)
        time.sleep(0.5)
        out["phases"].append(p.pairs("no server"))
    finally:
        for proc in (load, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
        subprocess.run([TB, "--prefix", prefix, "-q", "down"], check=False)
        subprocess.run(["rm", "-rf", work])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
