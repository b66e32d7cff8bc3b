#!/usr/bin/python3
"""sides_at_once.py: bench/scale's CPU per record with the two sides run at
the same time, for a machine whose speed moves too much for run.py's sides,
timed one after the other, to be compared (make bench runs it after run.py;
needs root; docs/tap.md, COST).

  sides_at_once.py --build BUILD [--ns 100,10000] [--passes 4]
                   [--sides stock,utls] [--duration-ms 10000] [--out FILE]

Two testbeds (tools/testbed: 100 ms RTT, 2% loss, the same seed) run at
once, one per side: on each, examples/utls-server (stock: the system libssl,
in order; utls: the fork and the process-wide tap) serves N connections of
its own load client (the system libssl, 2,000 records/s of 1,400 bytes in
bursts of 8, as run.py). Both sides share both CPUs for the whole pass, so
both see the same machine speed. A side's CPU is the sum of the run time
(/proc/PID/task/TID/schedstat, in ns) of every process in its testbed's
three namespaces (server, load client, the two nfq-delay forwarders) over
its load client's sending window (which ends when the client makes its mark
file; the client gives the window's length). On this kernel
(CONFIG_IRQ_TIME_ACCOUNTING off) a softirq's time counts to the task it ran
in: the kernel's work on a packet (the tap's capture included) counts to
the process that sent it on. What no side's process runs (ksoftirqd,
kworkers, a timer's softirq that lands in the other side's task) is missed
or misplaced; --sides stock,stock (A/A) shows how much that and the
noise move the ratio.

Prints, per N and pass, each side's CPU per delivered record and the ratio
(second side over first), and per N the median ratio; writes the same as
JSON (FILE, default stdout's last line).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import PORT, TB, load_command, testbed_up  # noqa: E402


def log(msg):
    print("sides_at_once: " + msg, file=sys.stderr, flush=True)


def netns_inode(name):
    return os.stat("/run/netns/" + name).st_ino


def pids_in(inodes):
    """The processes whose network namespace is one of |inodes|."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.stat("/proc/%s/ns/net" % d).st_ino in inodes:
                out.append(int(d))
        except OSError:
            continue
    return out


def runtime_ns(pid):
    """The run time of every thread of |pid| (schedstat's first field), or
    None if it is gone."""
    total = 0
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
    except (OSError, ValueError):
        return None
    return total


class Sampler(threading.Thread):
    """Every 20 ms, each side's summed run time: {side: [(time, ns)]}. A
    process that is gone keeps its last value; one that appears is added
    (the load client starts after the sampler)."""

    def __init__(self, sides):
        super().__init__(daemon=True)
        self.sides = sides  # {side: set of namespace inodes}
        self.series = {s: [] for s in sides}
        self.last = {s: {} for s in sides}
        self.stop = threading.Event()

    def run(self):
        rescan = 0.0
        pids = {s: [] for s in self.sides}
        while not self.stop.is_set():
            now = time.time()
            if now >= rescan:
                for s, inodes in self.sides.items():
                    pids[s] = pids_in(inodes)
                rescan = now + 0.5
            for s in self.sides:
                for p in pids[s]:
                    v = runtime_ns(p)
                    if v is not None:
                        self.last[s][p] = v
                self.series[s].append((now, sum(self.last[s].values())))
            self.stop.wait(0.02)


def at(series, t):
    """The summed run time at time |t|, interpolated."""
    for (t0, v0), (t1, v1) in zip(series, series[1:]):
        if t0 <= t <= t1:
            return v0 + (v1 - v0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)
    raise RuntimeError("the window is outside the samples")


def one_pass(a, tbs, n, work, k, first):
    """Both sides at once with N connections each, side |first| started
    first; returns {index: result}."""
    procs, files = {}, {}
    starts = (first, 1 - first)
    for i in starts:
        side, prefix, addr = tbs[i]
        f = {x: os.path.join(work, "%s-%d-%d-%d" % (x, i, n, k))
             for x in ("ready", "sout", "lout", "mark", "release")}
        files[i] = f
        server_bin = os.path.join(a.bin_dir,
                                  "utls-server-stock" if side == "stock" else "utls-server")
        procs[i] = [subprocess.Popen(
            [TB, "--prefix", prefix, "exec", "receiver", "--", server_bin, "serve", "--listen",
             "0.0.0.0:%d" % PORT, "--mode", "tls" if side == "stock" else "utls", "--rtt-ms",
             "100", "--ready", f["ready"], "--out", f["sout"], "--quiet"])]
    for i in files:
        deadline = time.monotonic() + 10
        while not (os.path.exists(files[i]["ready"]) and os.path.getsize(files[i]["ready"]) > 0):
            if time.monotonic() > deadline:
                raise RuntimeError("a server did not start")
            time.sleep(0.025)
    sampler = Sampler({i: {netns_inode("%s-%s" % (prefix, x)) for x in ("snd", "rtr", "rcv")}
                       for i, (_, prefix, _) in enumerate(tbs)})
    sampler.start()
    try:
        for i in starts:
            side, prefix, addr = tbs[i]
            f = files[i]
            procs[i].append(subprocess.Popen(load_command(
                a.bin_dir, prefix, addr, n, 2000, 8, 1400, a.duration_ms, 0, f["mark"],
                f["release"], f["lout"])))
        for i in procs:
            procs[i][1].wait(timeout=600)
    finally:
        sampler.stop.set()
        sampler.join()
        for i in procs:
            for p in procs[i]:
                if p.poll() is None:
                    p.terminate()
            procs[i][0].wait(timeout=60)
    out = {}
    for i, (side, _, _) in enumerate(tbs):
        ld = [json.loads(x) for x in open(files[i]["lout"])][-1]
        sv = [json.loads(x) for x in open(files[i]["sout"])][-1]
        end = os.stat(files[i]["mark"]).st_mtime
        start = end - ld["window_s"]
        cpu_ns = at(sampler.series[i], end) - at(sampler.series[i], start)
        out[i] = {"side": side, "records": sv["records"], "cpu_ms": cpu_ns / 1e6,
                  "cpu_us_per_record": cpu_ns / 1e3 / max(1, sv["records"]),
                  "window_s": ld["window_s"], "ooo": sv["ooo"], "bad": sv["bad"],
                  "host_cpu_ms_both_sides": ld["host_cpu_ms"]}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--ns", default="100,10000")
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--sides", default="stock,utls",
                    help="two of stock, utls (stock,stock: the A/A check)")
    ap.add_argument("--duration-ms", type=int, default=10000)
    ap.add_argument("--out")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: sides_at_once needs root (testbeds, AF_PACKET)")
        return 77
    sides = a.sides.split(",")
    if len(sides) != 2 or not set(sides) <= {"stock", "utls"}:
        raise SystemExit("--sides: two of stock, utls")
    a.bin_dir = os.path.join(a.build, "examples", "utls-server")
    nfq = os.path.join(a.build, "tools", "testbed", "nfq-delay")
    work = tempfile.mkdtemp(prefix="sides-at-once.")
    os.chmod(work, 0o755)
    tbs = []
    result = {"bench": "sides_at_once", "sides": sides, "duration_ms": a.duration_ms,
              "cpu": "run time of the side's processes (schedstat) over its sending window",
              "runs": []}
    try:
        for i, side in enumerate(sides):
            prefix = "usa%d%d" % (os.getpid() % 10000, i)
            tbs.append((side, prefix, testbed_up(prefix, nfq if os.path.exists(nfq) else None)))
        for n in [int(x) for x in a.ns.split(",")]:
            row = {"conns": n, "passes": []}
            for k in range(a.passes):
                # Which side starts first alternates from pass to pass, and
                # which testbed carries which side every second pass: four
                # passes cover the four combinations (in an A/A run the side
                # started first cost 2 to 3% more when it was always the same).
                order = tbs if (k // 2) % 2 == 0 else [(s, p2, a2) for (s, _, _), (_, p2, a2)
                                                       in zip(tbs, reversed(tbs))]
                got = one_pass(a, order, n, work, k, k % 2)
                r = got[1]["cpu_us_per_record"] / got[0]["cpu_us_per_record"]
                row["passes"].append({"sides": [got[0], got[1]], "ratio": r})
                log("N=%d pass %d: %s %.1f us/record (%d records), %s %.1f us/record (%d records): "
                    "%.3f" % (n, k + 1, got[0]["side"], got[0]["cpu_us_per_record"],
                              got[0]["records"], got[1]["side"], got[1]["cpu_us_per_record"],
                              got[1]["records"], r))
            row["ratio"] = statistics.median(p["ratio"] for p in row["passes"])
            log("N=%d: %s/%s median %.3f" % (n, sides[1], sides[0], row["ratio"]))
            result["runs"].append(row)
        by_n = {r["conns"]: r["ratio"] for r in result["runs"]}
        if 100 in by_n and 10000 in by_n:
            result["ratio_10000_le_1.05x_ratio_100"] = by_n[10000] <= 1.05 * by_n[100]
    finally:
        for _, prefix, _ in tbs:
            subprocess.run([TB, "--prefix", prefix, "-q", "down"], check=False)
        subprocess.run(["rm", "-rf", work])
    text = json.dumps(result)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
