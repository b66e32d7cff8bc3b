#!/usr/bin/env python3
"""bench/tunnel: IP tunnels over TLS on the testbed, stock vs uTLS, one run.

Each receiver mode gets a testbed of its own (PREFIX0, PREFIX1, ...), all
with the same parameters and loss seed (default 100 ms RTT, 2% random loss on
the data direction, a 10 Mbit/s bottleneck), brought up at once. The tunnel's
server runs in the receiver namespace, its client in the sender namespace;
the inner flows go from the sender's tunnel address 10.99.0.1 to the
receiver's 10.99.0.2, so their packets cross the lossy direction inside the
tunnel's TLS records.

Modes (--modes):
  tls            examples/tunnel, tunnel-stock: the system libssl, in order
  utls           examples/tunnel, the fork: SSL_MODE_UNORDERED + tap +
                 SSL_MODE_UTLS_IP_TUNNEL (inner TCP in order, datagrams early)
  utls_nopolicy  the same without SSL_MODE_UTLS_IP_TUNNEL: every packet early
  socat_tls      socat TUN <-> OPENSSL (Debian's socat), the system libssl
  socat_preload  the same socat, its receiving side with the fork preloaded:
                 UTLS_MODE=unordered,tap,iptunnel,port=PORT
  socat_preload_nopolicy  the same without the word iptunnel
  socat_evloop   as socat_preload plus the companion preload library of the
                 event-loop work (--evloop-lib PATH; only with that option):
                 socat waits in pselect6, and without the companion library
                 it never learns of a record past a hole

examples/tunnel's modes run first, then socat's; within each group:
Phases: (1) a VoIP-like flow, --voip-count UDP datagrams of 172 bytes at 50/s,
the group's modes at once; the utls run is captured on the receiver's interface and
each datagram's oracle is the moment the last byte of the record carrying it
reached the host. (2) inner TCP bulk transfers (--bulk-bytes, cubic), every
mode of the group at once in each of --runs rounds; goodput, SHA-256 and the inner sender's
retransmissions. Output: OUT/tunnel.json.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "latency"))
import analyze  # noqa: E402  (tcp_segments, add_interval, percentile)
import procs  # noqa: E402
from procs import spawn, stop  # noqa: E402

PORT = 4433
VOIP_PORT = 5004
BULK_PORT = 5201
SND_IP, RCV_IP = "10.99.0.1", "10.99.0.2"
TUN = "utun"
MTU = 1400
ALL_MODES = ("tls", "utls", "utls_nopolicy", "socat_tls", "socat_preload", "socat_preload_nopolicy",
             "socat_evloop")


def log(msg):
    sys.stderr.write("bench/tunnel: %s\n" % msg)
    sys.stderr.flush()




def wait_file(path, proc=None, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path):
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


class Bed:
    def __init__(self, a, mode, index):
        self.a = a
        self.mode = mode
        self.prefix = "%s%d" % (a.prefix, index)
        self.dir = os.path.join(a.out, "tunnel", mode)
        os.makedirs(self.dir, exist_ok=True)
        self.procs = []
        self.cap = None

    def tb(self, *args, check=True):
        r = subprocess.run([self.a.testbed, "--prefix", self.prefix, "-q"] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if check and r.returncode != 0:
            raise RuntimeError("testbed %s: %s" % (" ".join(args), r.stderr.strip()))
        return r

    def ex(self, where):
        return [self.a.testbed, "--prefix", self.prefix, "exec", where, "--"]

    def path(self, name):
        return os.path.join(self.dir, name)

    def up(self):
        a = self.a
        self.tb("down", check=False)
        self.tb("up", "--rtt", str(a.rtt), "--loss", str(a.loss), "--seed", str(a.seed),
                "--rate", str(a.rate), "--queue", str(a.queue))
        for where in ("sender", "receiver"):
            # The outer TCP in bbr (socat cannot choose per socket); the inner
            # bulk sender asks for cubic itself.
            subprocess.run(self.ex(where) + ["sysctl", "-qw",
                                             "net.ipv4.tcp_congestion_control=" + a.cc],
                           check=True)
        self.rcv_addr = self.tb("addr", "receiver").stdout.strip()

    def start_capture(self):
        self.cap = spawn(self.ex("receiver") + [self.a.tcpdump, "-i", "eth0", "--immediate-mode",
                                                "-n", "-s", "128", "--time-stamp-precision=nano",
                                                "-w", self.path("receiver.pcap"), "tcp", "port",
                                                str(PORT)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 10
        while time.time() < deadline:
            line = self.cap.stderr.readline()
            if "listening on" in line:
                return
            if not line and self.cap.poll() is not None:
                break
        raise RuntimeError("tcpdump did not start in %s" % self.prefix)

    def stop_capture(self):
        if self.cap is not None:
            time.sleep(0.3)
            stop(self.cap, signal.SIGINT)

    def start_tunnel(self):
        a, m = self.a, self.mode
        for f in ("srv.ready", "cli.ready"):
            if os.path.exists(self.path(f)):
                os.unlink(self.path(f))
        if m in ("tls", "utls", "utls_nopolicy"):
            binary = a.tunnel_stock if m == "tls" else a.tunnel
            extra = ["--mode", "tls"] if m == "tls" else ["--mode", "utls"]
            if m == "utls_nopolicy":
                extra.append("--no-ip-policy")
            extra += ["--require", "stock" if m == "tls" else "fork", "--cc", a.cc, "--mtu", str(MTU)]
            srv = spawn(self.ex("receiver") + [binary, "server", "--listen", "0.0.0.0:%d" % PORT,
                                               "--tun", TUN, "--local", RCV_IP, "--peer", SND_IP,
                                               "--log", self.path("rx.jsonl"),
                                               "--ready", self.path("srv.ready")] + extra,
                        stderr=open(self.path("server.err"), "w"))
            if not wait_file(self.path("srv.ready"), srv):
                raise RuntimeError("%s: tunnel server did not start (%s)" % (m, self.path("server.err")))
            cli = spawn(self.ex("sender") + [binary, "client", "--connect", "%s:%d" % (self.rcv_addr, PORT),
                                             "--tun", TUN, "--local", SND_IP, "--peer", RCV_IP,
                                             "--ready", self.path("cli.ready")] + extra,
                        stderr=open(self.path("client.err"), "w"))
            if not wait_file(self.path("cli.ready"), cli):
                raise RuntimeError("%s: tunnel client did not connect (%s)" % (m, self.path("client.err")))
        else:
            env = dict(os.environ)
            for k in ("LD_PRELOAD", "UTLS_MODE"):
                env.pop(k, None)
            senv = dict(env)
            if m in ("socat_preload", "socat_preload_nopolicy", "socat_evloop"):
                libs = [a.evloop_lib, a.fork] if m == "socat_evloop" else [a.fork]
                senv["LD_PRELOAD"] = " ".join(libs)
                senv["UTLS_MODE"] = ("unordered,tap,port=%d" if m == "socat_preload_nopolicy"
                                     else "unordered,tap,iptunnel,port=%d") % PORT
            tun = "TUN:%s/24,tun-name=%s,tun-type=tun,iff-no-pi,iff-up"
            srv = spawn(self.ex("receiver") + [a.socat, "-b", "65536",
                                               "OPENSSL-LISTEN:%d,reuseaddr,nodelay,cert=%s,key=%s,verify=0"
                                               % (PORT, a.cert, a.key), tun % (RCV_IP, TUN)],
                        env=senv, stderr=open(self.path("server.err"), "w"))
            time.sleep(0.5)
            cli = spawn(self.ex("sender") + [a.socat, "-b", "65536",
                                             "OPENSSL:%s:%d,nodelay,verify=0" % (self.rcv_addr, PORT),
                                             tun % (SND_IP, TUN)],
                        env=env, stderr=open(self.path("client.err"), "w"))
            deadline = time.time() + 20
            while time.time() < deadline:
                ok = all(subprocess.run(self.ex(w) + ["ip", "link", "show", TUN],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
                         for w in ("sender", "receiver"))
                if ok:
                    break
                if srv.poll() is not None or cli.poll() is not None:
                    raise RuntimeError("%s: socat ended (%s)" % (m, self.path("server.err")))
                time.sleep(0.1)
            for w in ("sender", "receiver"):
                subprocess.run(self.ex(w) + ["ip", "link", "set", TUN, "mtu", str(MTU)], check=True)
            self.server_pid = srv.pid
        self.procs += [srv, cli]
        self.srv = srv
        # The inner path must work before anything is measured.
        deadline = time.time() + 10
        while time.time() < deadline:
            r = subprocess.run(self.ex("sender") + [a.python, "-c",
                                                    "import socket;s=socket.socket(2,2);"
                                                    "s.sendto(b'x',('%s',9))" % RCV_IP],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                break
            time.sleep(0.1)

    def loaded_libssl(self):
        """The libssl the receiving process really mapped (/proc/PID/maps)."""
        try:
            pids = subprocess.run(["pgrep", "-P", str(self.srv.pid)], stdout=subprocess.PIPE,
                                  text=True).stdout.split() + [str(self.srv.pid)]
            for pid in pids:
                with open("/proc/%s/maps" % pid) as f:
                    for line in f:
                        if "libssl.so" in line:
                            return line.split()[-1]
        except OSError:
            pass
        return None

    def down(self):
        for p in self.procs:
            stop(p)
        self.tb("down", check=False)


def voip_phase(beds, a):
    recvs, sends = [], []
    for b in beds:
        rd = b.path("voip.ready")
        if os.path.exists(rd):
            os.unlink(rd)
        r = spawn(b.ex("receiver") + [a.python, a.flows, "voip-recv", RCV_IP, str(VOIP_PORT),
                                      "--count", str(a.voip_count), "--out", b.path("voip.jsonl"),
                                      "--ready", rd])
        if not wait_file(rd, r):
            raise RuntimeError("%s: voip receiver did not start" % b.mode)
        recvs.append(r)
    for b in beds:
        sends.append(spawn(b.ex("sender") + [a.python, a.flows, "voip-send", RCV_IP, str(VOIP_PORT),
                                             "--count", str(a.voip_count)],
                           stdout=subprocess.DEVNULL))
    for p in sends + recvs:
        p.wait(a.voip_count / 50.0 + 60)


def load_jsonl(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    return out


def voip_metrics(lat_ms, count, threshold_ms):
    lat = sorted(lat_ms)
    n = len(lat)
    return {"delivered": n, "sent": count, "lost": count - n,
            "delayed_gt_base_plus_100ms": (sum(1 for x in lat if x > threshold_ms) / n) if n else None,
            "p50_ms": analyze.percentile(lat, 50) if n else None,
            "p95_ms": analyze.percentile(lat, 95) if n else None,
            "p99_ms": analyze.percentile(lat, 99) if n else None}


def oracle(bed, voip, a):
    """Per datagram, the moment the last byte of its record reached the host,
    from the capture and the tunnel's log of each record's offset/length."""
    recs = {r["head"]: r for r in load_jsonl(bed.path("rx.jsonl")) if r.get("proto") == 17}
    segs, isn = analyze.tcp_segments(bed.path("receiver.pcap"), PORT)
    if isn is None:
        raise RuntimeError("no SYN in %s" % bed.path("receiver.pcap"))
    rmm = time.time_ns() - time.monotonic_ns()
    want = {}
    for v in voip:
        r = recs.get(v["i"])
        if r is not None:
            want[v["i"]] = (r["offset"], r["offset"] + r["wire_len"])
    cover = {i: [] for i in want}
    done = {}
    for t, off, plen in analyze.stream_offsets(segs, isn):
        for i, (lo, hi) in want.items():
            if i in done or off >= hi or off + plen <= lo:
                continue
            cover[i] = analyze.add_interval(cover[i], max(lo, off) - lo, min(hi, off + plen) - lo)
            if cover[i] == [(0, hi - lo)]:
                done[i] = t - rmm
    sent = {v["i"]: v["send_ns"] for v in voip}
    return [(done[i] - sent[i]) / 1e6 for i in done if i in sent]


def bulk_phase(beds, a, doc):
    """Every mode's transfer at once in each round: the modes share the
    machine's load alike, so the ratios compare like with like."""
    for rnd in range(a.runs):
        started = []
        for b in beds:
            out = b.path("bulk%d.json" % rnd)
            rd = b.path("bulk.ready")
            for f in (out, rd):
                if os.path.exists(f):
                    os.unlink(f)
            r = spawn(b.ex("receiver") + [a.python, a.flows, "bulk-recv", RCV_IP, str(BULK_PORT),
                                          "--out", out, "--ready", rd])
            if not wait_file(rd, r):
                raise RuntimeError("%s: bulk receiver did not start" % b.mode)
            started.append((b, r, out))
        sends = [(b, r, out, spawn(b.ex("sender") + [a.python, a.flows, "bulk-send", RCV_IP,
                                                     str(BULK_PORT), "--bytes", str(a.bulk_bytes),
                                                     "--seed", str(a.seed + rnd)],
                                   stdout=subprocess.PIPE, text=True))
                 for b, r, out in started]
        for b, r, out, s in sends:
            stdout, _ = s.communicate(timeout=600)
            r.wait(60)
            sent = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else {}
            got = json.load(open(out)) if os.path.exists(out) else {}
            run = {"mbit_s": got.get("mbit_s"), "seconds": got.get("seconds"),
                   "bytes": got.get("bytes"), "inner_retransmissions": sent.get("retrans"),
                   "sha256_intact": bool(got) and got.get("sha256") == sent.get("sha256")
                   and got.get("bytes") == a.bulk_bytes}
            doc["modes"][b.mode]["bulk"]["runs"].append(run)
            log("bulk round %d %s: %.2f Mbit/s, %s inner retransmissions, SHA-256 %s"
                % (rnd, b.mode, run["mbit_s"] or 0, run["inner_retransmissions"],
                   "intact" if run["sha256_intact"] else "WRONG"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", help="default BUILD/bench")
    ap.add_argument("--prefix", default="utun")
    ap.add_argument("--modes", default="tls,utls,utls_nopolicy,socat_tls,socat_preload,"
                                        "socat_preload_nopolicy")
    ap.add_argument("--evloop-lib", help="the companion preload library (adds socat_evloop)")
    ap.add_argument("--voip-count", type=int, default=3000)
    ap.add_argument("--bulk-bytes", type=int, default=20_000_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--rtt", type=float, default=100.0)
    ap.add_argument("--loss", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=10.0, help="bottleneck, Mbit/s")
    ap.add_argument("--queue", type=int, default=300, help="bottleneck queue, packets")
    ap.add_argument("--cc", default="bbr", help="the outer TCP's congestion control")
    ap.add_argument("--smoke", action="store_true",
                    help="ctest: a short run of tls and utls, checks only (exit 1 on a failed "
                         "check, 77 without root)")
    a = ap.parse_args()
    rc = procs.need_root("bench/tunnel", "network namespaces, TUN devices, the tap", a.smoke)
    if rc is not None:
        return rc
    a.build = os.path.abspath(a.build)
    a.out = os.path.abspath(a.out or os.path.join(a.build, "bench"))
    src = os.path.dirname(os.path.dirname(HERE))
    a.testbed = os.path.join(src, "tools", "testbed", "testbed")
    a.flows = os.path.join(HERE, "flows.py")
    a.python = "/usr/bin/python3"
    a.tunnel = os.path.join(a.build, "examples", "tunnel", "tunnel")
    a.tunnel_stock = os.path.join(a.build, "examples", "tunnel", "tunnel-stock")
    a.fork = os.path.join(a.build, "lib", "libssl.so.3")
    a.tcpdump = shutil.which("tcpdump")
    a.socat = shutil.which("socat")
    if a.smoke:
        a.modes, a.voip_count, a.bulk_bytes, a.runs = "tls,utls", 250, 1_000_000, 1
    modes = [m for m in a.modes.split(",") if m]
    if a.evloop_lib and "socat_evloop" not in modes:
        modes.append("socat_evloop")
    bad = [m for m in modes if m not in ALL_MODES]
    if bad:
        raise SystemExit("bench/tunnel: unknown mode(s) %s" % ", ".join(bad))
    if "socat_evloop" in modes and not a.evloop_lib:
        raise SystemExit("bench/tunnel: socat_evloop needs --evloop-lib")
    if any(m.startswith("socat") for m in modes) and a.socat is None:
        raise SystemExit("bench/tunnel: socat is not installed (tools/install-deps.sh)")
    for f in (a.tunnel, a.tunnel_stock, a.fork, a.testbed):
        if not os.path.exists(f):
            raise SystemExit("bench/tunnel: %s is missing (build first)" % f)
    if a.tcpdump is None:
        raise SystemExit("bench/tunnel: tcpdump is missing")
    os.makedirs(os.path.join(a.out, "tunnel"), exist_ok=True)
    a.cert = os.path.join(a.out, "tunnel", "cert.pem")
    a.key = os.path.join(a.out, "tunnel", "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-subj", "/CN=tunnel", "-days", "2", "-keyout", a.key, "-out", a.cert],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    one_way = a.rtt / 2
    threshold = one_way + 100.0
    doc = {"params": {"rtt_ms": a.rtt, "loss_pct": a.loss, "seed": a.seed, "rate_mbit": a.rate,
                      "queue_packets": a.queue, "outer_cc": a.cc, "inner_cc": "cubic",
                      "voip_count": a.voip_count, "voip_pps": 50, "voip_size": 172,
                      "bulk_bytes": a.bulk_bytes, "runs": a.runs, "mtu": MTU,
                      "threshold_ms": threshold,
                      "threshold": "one-way delay (rtt/2) + 100 ms: 'later than base + 100 ms'"},
           "modes": {m: {"voip": None, "bulk": {"runs": []}} for m in modes}}
    rc = 0
    # Two groups, one after the other: examples/tunnel's modes, then socat's.
    # Within a group the modes run at once (same load, same time); fewer at
    # once keep the bench's own processes from starving each other on a
    # small machine.
    groups = [[m for m in modes if not m.startswith("socat")], [m for m in modes if m.startswith("socat")]]
    index = {m: i for i, m in enumerate(modes)}
    for group in (g for g in groups if g):
        beds = [Bed(a, m, index[m]) for m in group]
        try:
            for b in beds:
                b.up()
                if b.mode == "utls":
                    b.start_capture()
                b.start_tunnel()
                doc["modes"][b.mode]["receiver_libssl"] = b.loaded_libssl()
            log("tunnels up: %s" % ", ".join("%s (%s)" % (b.mode, b.prefix) for b in beds))
            voip_phase(beds, a)
            for b in beds:
                b.stop_capture()
                voip = load_jsonl(b.path("voip.jsonl"))
                lat = [(v["recv_ns"] - v["send_ns"]) / 1e6 for v in voip]
                doc["modes"][b.mode]["voip"] = voip_metrics(lat, a.voip_count, threshold)
                rx = [r for r in load_jsonl(b.path("rx.jsonl")) if r.get("proto") == 17]
                if rx:
                    doc["modes"][b.mode]["voip"]["records_out_of_order"] = sum(r["ooo"] for r in rx)
                if b.mode == "utls":
                    doc["oracle"] = voip_metrics(oracle(b, voip, a), a.voip_count, threshold)
            bulk_phase(beds, a, doc)
        finally:
            for b in beds:
                b.down()
    doc["host_loadavg_after"] = os.getloadavg()
    for m in modes:
        runs = doc["modes"][m]["bulk"]["runs"]
        vals = [r["mbit_s"] for r in runs if r["mbit_s"]]
        doc["modes"][m]["bulk"]["median_mbit_s"] = statistics.median(vals) if vals else None
        rt = [r["inner_retransmissions"] for r in runs if r["inner_retransmissions"] is not None]
        doc["modes"][m]["bulk"]["median_inner_retransmissions"] = statistics.median(rt) if rt else None
        doc["modes"][m]["bulk"]["sha256_intact"] = bool(runs) and all(r["sha256_intact"] for r in runs)

    def ratio(x, y):
        return x / y if x is not None and y else None

    def paired(m, base):
        """Median over rounds of m's goodput over base's in the same round
        (the modes of a round ran at once, under the same machine load)."""
        if m not in md or base not in md:
            return None
        rs = [ratio(x["mbit_s"], y["mbit_s"]) for x, y in zip(md[m]["bulk"]["runs"], md[base]["bulk"]["runs"])]
        rs = [r for r in rs if r is not None]
        return statistics.median(rs) if rs else None

    md = doc["modes"]
    t = {}
    if "utls" in md and "tls" in md:
        du, ds = md["utls"]["voip"]["delayed_gt_base_plus_100ms"], md["tls"]["voip"]["delayed_gt_base_plus_100ms"]
        t["voip_delayed_utls_over_tls"] = ratio(du, ds)
        t["voip_delayed_utls_minus_oracle"] = (du - doc["oracle"]["delayed_gt_base_plus_100ms"]
                                                if "oracle" in doc and du is not None else None)
        t["bulk_goodput_utls_over_tls"] = ratio(md["utls"]["bulk"]["median_mbit_s"],
                                                md["tls"]["bulk"]["median_mbit_s"])
        t["bulk_goodput_utls_over_tls_paired"] = paired("utls", "tls")
        t["targets"] = {
            "voip_delayed_ratio_le_0.5": t["voip_delayed_utls_over_tls"] is not None
            and t["voip_delayed_utls_over_tls"] <= 0.5,
            "voip_within_0.005_of_oracle": t["voip_delayed_utls_minus_oracle"] is not None
            and abs(t["voip_delayed_utls_minus_oracle"]) <= 0.005,
            "bulk_goodput_ratio_ge_0.95": t["bulk_goodput_utls_over_tls"] is not None
            and t["bulk_goodput_utls_over_tls"] >= 0.95,
            "bulk_goodput_paired_ratio_ge_0.95": t["bulk_goodput_utls_over_tls_paired"] is not None
            and t["bulk_goodput_utls_over_tls_paired"] >= 0.95,
            "bulk_sha256_intact": md["utls"]["bulk"]["sha256_intact"] and md["tls"]["bulk"]["sha256_intact"],
        }
    if "utls_nopolicy" in md and "tls" in md:
        t["bulk_goodput_utls_nopolicy_over_tls"] = ratio(md["utls_nopolicy"]["bulk"]["median_mbit_s"],
                                                         md["tls"]["bulk"]["median_mbit_s"])
        t["bulk_goodput_utls_nopolicy_over_tls_paired"] = paired("utls_nopolicy", "tls")
    if "socat_preload" in md and "socat_tls" in md:
        t["bulk_goodput_socat_preload_over_socat_tls"] = ratio(
            md["socat_preload"]["bulk"]["median_mbit_s"], md["socat_tls"]["bulk"]["median_mbit_s"])
        t["bulk_goodput_socat_preload_over_socat_tls_paired"] = paired("socat_preload", "socat_tls")
        t["voip_delayed_socat_preload_over_socat_tls"] = ratio(
            md["socat_preload"]["voip"]["delayed_gt_base_plus_100ms"],
            md["socat_tls"]["voip"]["delayed_gt_base_plus_100ms"])
    if "socat_preload_nopolicy" in md and "socat_tls" in md:
        t["bulk_goodput_socat_preload_nopolicy_over_socat_tls"] = ratio(
            md["socat_preload_nopolicy"]["bulk"]["median_mbit_s"], md["socat_tls"]["bulk"]["median_mbit_s"])
        t["bulk_goodput_socat_preload_nopolicy_over_socat_tls_paired"] = paired(
            "socat_preload_nopolicy", "socat_tls")
    if "socat_evloop" in md and "socat_tls" in md:
        t["bulk_goodput_socat_evloop_over_socat_tls"] = ratio(
            md["socat_evloop"]["bulk"]["median_mbit_s"], md["socat_tls"]["bulk"]["median_mbit_s"])
        t["voip_delayed_socat_evloop_over_socat_tls"] = ratio(
            md["socat_evloop"]["voip"]["delayed_gt_base_plus_100ms"],
            md["socat_tls"]["voip"]["delayed_gt_base_plus_100ms"])
    doc["ratios"] = t
    path = os.path.join(a.out, "tunnel.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    log("wrote %s" % path)
    log(json.dumps(t, sort_keys=True))
    if a.smoke:
        back = json.load(open(path))
        for m in modes:
            v, bk = back["modes"][m]["voip"], back["modes"][m]["bulk"]
            if v is None or v["delivered"] != a.voip_count:
                log("FAIL: %s delivered %s of %d datagrams" % (m, v and v["delivered"], a.voip_count))
                rc = 1
            if not bk["sha256_intact"]:
                log("FAIL: %s: bulk SHA-256 not intact" % m)
                rc = 1
        lib = back["modes"]["utls"].get("receiver_libssl") or ""
        if not lib.endswith(os.path.join("build", "lib", "libssl.so.3")) and a.build not in lib:
            log("FAIL: the utls receiver mapped %s, not the fork" % lib)
            rc = 1
        if "oracle" not in back or back["oracle"]["delivered"] == 0:
            log("FAIL: no oracle from the utls run's capture")
            rc = 1
        log("smoke %s" % ("passed" if rc == 0 else "FAILED"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
