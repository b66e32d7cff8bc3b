#!/usr/bin/python3
"""bench/latency: Minion's streaming experiment on the namespace testbed.

A sender writes one record every T ms over a path with a given RTT and loss;
the receiver logs when each record is delivered. Four modes run side by side,
each on a testbed of its own (tools/testbed --prefix), with the same loss seed:

  tls   stock OpenSSL (the system libssl; on a 3.5 build BUILD/stock's, see
        Setup), in-order SSL_read
  utls  the uTLS fork, SSL_MODE_UNORDERED through the tap (UTLS_tap_listen)
  dtls  OpenSSL DTLS 1.2 over UDP, one datagram per record (lost ones are lost)
  ucobs no TLS: uCOBS datagrams on plain TCP (UTLS_ucobs_send/recv, the tap),
        each sized so that its frame is as long as the TLS record (1440 bytes
        for 1448 on the wire; see ucobs_size)
  quic_stream    QUIC (quic-go v0.65.0, bench/latency/quic), one stream per
        message: reliable, no head-of-line blocking across messages
  quic_datagram  QUIC DATAGRAM frames (RFC 9221): unreliable, one per message
        (at most QUIC_DATAGRAM_MAX bytes, see there)

plus the oracle: each record delivered the moment its last byte reached the
receiving host, from a tcpdump capture taken on the receiver of the utls run
(see analyze.py); each QUIC mode has its own oracle from its capture,
decrypted with its key log (analyze.quic_oracle). Every mode reports the CPU
seconds of its sender and receiver processes. Writes OUT/latency.json, OUT/latency_cdf.png and sweep plots,
and keeps every per-record log under OUT/latency/.

Usage (as root; `make bench` runs it through the bench_latency target):
  run.py --build BUILD [--out DIR] [--quick] [--no-sweeps] [--no-quic]
  run.py --smoke --build BUILD --out DIR   (ctest bench.smoke_latency_quic)
Progress goes to stderr.
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
sys.path.insert(0, HERE)
import analyze  # noqa: E402
import capture  # noqa: E402
import procs  # noqa: E402
from procs import spawn, stop  # noqa: E402

PORT = 4433
BASE_MODES = ("tls", "utls", "dtls", "ucobs")
QUIC_MODES = ("quic_stream", "quic_datagram")
MODES = BASE_MODES + QUIC_MODES
# Unmodified event-loop receivers (issue 19, docs/evloop.md): programs linked
# with the system libssl that wait in epoll_wait / poll / asyncio before
# SSL_read, run with the fork and the companion library libutls-evloop.so
# preloaded and UTLS_MODE=unordered,tap,port=PORT; the sender is stock TLS. None of
# them includes utls.h. Measured in the headline run beside the others.
EVLOOP_MODES = ("evloop_epoll", "evloop_poll", "evloop_asyncio")
HEADLINE_MODES = BASE_MODES + EVLOOP_MODES + QUIC_MODES
# The largest message quic-go v0.65.0 sends in one DATAGRAM frame with
# 1452-byte packets (its maximum): SendDatagram reserves room for a 20-byte
# connection ID (estimateMaxPayloadSize: 1452 - 1 - 20 - 16 = 1415) and the
# frame's type and 2-byte length (1412). A larger message is refused
# (DatagramTooLargeError); DATAGRAM frames are never split. quic_datagram
# messages are min(--size, this).
QUIC_DATAGRAM_MAX = 1412
# TLS 1.3 AES-GCM: 5-byte header + 1 content-type byte + 16-byte tag.
TLS13_OVERHEAD = 22


def ucobs_size(wire):
    """The uCOBS datagram size whose frame is |wire| bytes. utls-stream's
    ucobs payload has no zero after its 24-byte header, so a datagram of S
    bytes is a frame of S + 2 + ceil((S - 24) / 254) bytes (two markers, one
    COBS code byte per block: the header's zeros end short blocks, the rest
    is cut every 254 bytes). 1448 -> 1440, 1470 -> 1462."""
    for s in range(wire, 24, -1):
        if s + 2 + -(-(s - 24) // 254) == wire:
            return s
    raise ValueError("no uCOBS datagram size gives a %d-byte frame" % wire)
# Loss recovery of the paper's era (Linux 2.6.34): no RACK, no TLP.
CLASSIC = ("net.ipv4.tcp_recovery=0", "net.ipv4.tcp_early_retrans=0")
# No SACK: RFC 2018 SACK is used only when both SYNs carry SACK-permitted,
# and Linux sends and accepts that option only with its own tcp_sack on, so
# turning it off at either end is enough (checked in captures). Off in the
# receiver's namespace, as a peer without SACK. Without SACK, Linux cannot run
# RACK-TLP (RACK needs SACKed segments, TLP is SACK-only) and falls back to
# NewReno: fast retransmit after three duplicate ACKs, the loss detection of
# the paper's kernel for a single loss (2.6.34's SACK/FACK also waited for
# three later segments).
NO_SACK = ("net.ipv4.tcp_sack=0",)
# Sender TCP counters (/proc/net/snmp, /proc/net/netstat of the sender's
# namespace) recorded per run: they show which loss recovery really ran.
TCP_COUNTERS = ("Tcp:RetransSegs", "TcpExt:TCPSackRecovery", "TcpExt:TCPRenoRecovery",
                "TcpExt:TCPSackRecoveryFail", "TcpExt:TCPRenoRecoveryFail",
                "TcpExt:TCPLossProbes", "TcpExt:TCPLossProbeRecovery", "TcpExt:TCPTimeouts",
                "TcpExt:TCPFastRetrans", "TcpExt:TCPLostRetransmit", "TcpExt:TCPSACKReorder",
                "TcpExt:TCPRenoReorder")
VARIANTS = ("plaintext_1448", "classic_recovery", "no_sack", "cubic", "reno")
# Run only when named in --variants: the headline's loss is on the data
# direction only; these add the same random loss on the ACK direction.
EXTRA_VARIANTS = ("loss_both", "no_sack_loss_both")

_testbeds = set()     # prefixes brought up


def log(msg):
    sys.stderr.write("bench/latency: %s\n" % msg)
    sys.stderr.flush()


class Setup:
    def __init__(self, build, out, prefix, bindir=None, quic_bin=None, quic=True):
        self.build = os.path.abspath(build)
        self.src = os.path.dirname(os.path.dirname(HERE))
        self.testbed = os.path.join(self.src, "tools", "testbed", "testbed")
        bindir = bindir or os.path.join(self.build, "examples", "utls-stream")
        self.fork_bin = os.path.join(bindir, "utls-stream")
        self.stock_bin = os.path.join(bindir, "utls-stream-stock")
        self.out = os.path.abspath(out)
        self.prefix = prefix
        self.evloop_bin = os.path.join(self.build, "bench", "latency", "evloop-recv")
        self.evloop_py = os.path.join(HERE, "evloop_recv.py")
        self.evloop_preload = "%s %s" % (os.path.join(self.build, "lib", "libssl.so.3"),
                                         os.path.join(self.build, "lib", "libutls-evloop.so"))
        for b in (self.fork_bin, self.stock_bin, self.testbed):
            if not os.access(b, os.X_OK):
                raise SystemExit("bench/latency: %s is missing (build first)" % b)
        # The OpenSSL base of the build (make BASE=3.5 builds in build-3.5).
        # A 3.5 build has no system libssl to compare with: its stock
        # libssl.so.3, built from the same verified source, is in BUILD/stock.
        # The stock programs (tls, dtls, the evloop modes' sender) have no
        # RUNPATH on 3.5 (examples/common/stream_example.cmake) and run with
        # LD_LIBRARY_PATH=BUILD/stock:BUILD/lib: stock 3.5 found first, on
        # 3.5's libcrypto from BUILD/lib (the fork beside it is never
        # reached), which utls-stream --require stock checks.
        self.base = build_base(self.build)
        stock_lib = os.path.join(self.build, "stock", "libssl.so.3")
        self.stock_lib_dir = None
        if self.base != "3.0":
            if not os.path.exists(stock_lib):
                raise SystemExit("bench/latency: %s is missing (the %s build's stock libssl; "
                                 "build first)" % (stock_lib, self.base))
            self.stock_lib_dir = os.path.dirname(stock_lib)
        self.tcpdump = shutil.which("tcpdump")
        # tcpdump's snap length: the oracle needs only the headers (it takes
        # segment lengths from IP), so the bench keeps 128 bytes a packet;
        # the demo keeps whole packets (0) so that its capture can be
        # decrypted.
        self.snaplen = 128
        self.quic_bin = quic_bin or os.path.join(self.build, "bench", "latency", "quic",
                                                 "quic-stream")
        self.tshark = shutil.which("tshark")
        self.quic = quic
        if quic and not os.access(self.quic_bin, os.X_OK):
            raise SystemExit("bench/latency: %s is missing: the build makes it when Go is "
                             "installed (bench/latency/quic); or run with --no-quic"
                             % self.quic_bin)

    def stock_env(self, env=None):
        """|env| (default: this process's) for a program that must run with
        stock libssl: on a 3.5 build, with LD_LIBRARY_PATH on its stock one."""
        env = dict(os.environ if env is None else env)
        if self.stock_lib_dir is not None:
            env["LD_LIBRARY_PATH"] = self.stock_lib_dir + ":" + os.path.join(self.build, "lib")
        return env

    def modes(self, modes):
        return tuple(m for m in modes if (self.quic or m not in QUIC_MODES)
                     and (m not in EVLOOP_MODES or os.access(self.evloop_bin, os.X_OK)))

    def tb(self, prefix, *args, check=True, quiet=True):
        cmd = [self.testbed, "--prefix", prefix] + (["-q"] if quiet else []) + list(args)
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if check and r.returncode != 0:
            raise RuntimeError("testbed %s failed: %s" % (" ".join(args), r.stderr.strip()))
        return r

    def tb_exec(self, prefix, where):
        return [self.testbed, "--prefix", prefix, "exec", where, "--"]




def build_base(build):
    """The OpenSSL base (UTLS_BASE, "3.0" or "3.5") the build directory
    |build| was configured for; "3.0" when its CMakeCache.txt does not say."""
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("UTLS_BASE:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return "3.0"


def cleanup(setup):
    procs.stop_all(signal.SIGKILL, 2)
    for prefix in sorted(_testbeds):
        setup.tb(prefix, "down", check=False)
    _testbeds.clear()


def parse_counters(text):
    """{"Group:Name": value} from the text of /proc/net/snmp and /proc/net/netstat:
    pairs of lines "Group: names..." and "Group: values...". Raises ValueError
    on any other shape."""
    values = {}
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) % 2:
        raise ValueError("counter text has an odd number of lines")
    for head, vals in zip(lines[::2], lines[1::2]):
        h, v = head.split(), vals.split()
        if not h or h[0] != v[0] or not h[0].endswith(":") or len(h) != len(v):
            raise ValueError("unexpected counter lines: %r / %r" % (head[:40], vals[:40]))
        for name, val in zip(h[1:], v[1:]):
            values[h[0] + name] = int(val)
    return values


def tcp_counters(setup, prefix):
    """The TCP_COUNTERS of the sender namespace of testbed |prefix|, {name: value}
    (name without its "Tcp:"/"TcpExt:" group; 0 when this kernel lacks one)."""
    r = subprocess.run(setup.tb_exec(prefix, "sender") + ["cat", "/proc/net/snmp",
                                                          "/proc/net/netstat"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("reading TCP counters in %s-snd failed: %s" % (prefix, r.stderr))
    values = parse_counters(r.stdout)
    return {k.split(":", 1)[1]: values.get(k, 0) for k in TCP_COUNTERS}


def wait_ready(recv, ready, mode):
    """Waits (10 s at most) for a receiver to write its |ready| file."""
    deadline = time.time() + 10
    while not os.path.exists(ready):
        if recv.poll() is not None or time.time() > deadline:
            raise RuntimeError("%s receiver did not start (exit %s)" % (mode, recv.poll()))
        time.sleep(0.02)


def finish_pair(recv, send, cap):
    """Waits for a mode's receiver and sender, forgets them, stops the capture;
    returns (receiver exit, receiver CPU, sender exit, sender CPU)."""
    rrc, rcpu = wait_cpu(recv)
    src, scpu = wait_cpu(send)
    procs.forget(recv)
    procs.forget(send)
    if cap is not None:
        time.sleep(0.2)
        stop(cap, signal.SIGINT)
    return rrc, rcpu, src, scpu


def wait_cpu(p):
    """Waits for |p| (wait4) and returns (exit code, CPU seconds): user +
    system time of the process and of its waited-for descendants."""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, ru.ru_utime + ru.ru_stime


def exec_wrapper_cpu(setup, prefix):
    """CPU seconds that `testbed exec` itself costs before it execs the
    program (the median of three runs of `testbed exec sender -- true`):
    subtracted from every sender's and receiver's CPU time."""
    vals = []
    for _ in range(3):
        p = spawn(setup.tb_exec(prefix, "sender") + ["true"])
        vals.append(wait_cpu(p)[1])
        procs.forget(p)
    return sorted(vals)[1]


def quic_size(mode, size):
    """The message size of a mode: quic_datagram cannot exceed one packet."""
    return min(size, QUIC_DATAGRAM_MAX) if mode == "quic_datagram" else size


def start_capture(setup, prefix, path, udp=False):
    if setup.tcpdump is None:
        return None
    # QUIC: whole packets, so that tshark can decrypt them.
    p = spawn(setup.tb_exec(prefix, "receiver")
              + [setup.tcpdump, "-i", "eth0", "--immediate-mode", "-n", "-s",
                 "0" if udp else str(setup.snaplen),
                 "--time-stamp-precision=nano", "-w", path, "udp" if udp else "tcp", "port",
                 str(PORT)],
              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if capture.wait_listening(p):
        return p
    stop(p)
    raise RuntimeError("tcpdump did not start in %s" % prefix)


def run_quic_mode(setup, prefix, mode, cfg, rundir, capture):
    """One QUIC stream (quic-stream, quic-go) through testbed |prefix|."""
    count, interval, rtt = cfg["count"], cfg["interval_ms"], cfg["rtt_ms"]
    size = quic_size(mode, cfg["size"])
    qmode = mode.split("_", 1)[1]
    recv_log = os.path.join(rundir, "%s.recv.jsonl" % mode)
    send_log = os.path.join(rundir, "%s.send.jsonl" % mode)
    ready = os.path.join(rundir, "%s.ready" % mode)
    pcap = os.path.join(rundir, "%s.pcap" % mode)
    keys = os.path.join(rundir, "%s.keys" % mode)
    for f in (ready, keys):
        if os.path.exists(f):
            os.unlink(f)
    limit = str(int(count * interval / 1000 + 120))
    cap = start_capture(setup, prefix, pcap, udp=True) if capture else None
    addr = "%s:%d" % (setup.tb(prefix, "addr", "receiver").stdout.strip(), PORT)
    common = ["--mode", qmode, "--count", str(count), "--size", str(size), "--timeout", limit,
              "--quiet"]
    # The receiver (server) writes the key log: the capture is decrypted with it.
    recv = spawn(setup.tb_exec(prefix, "receiver")
                 + [setup.quic_bin, "recv", "--listen", addr, "--out", recv_log, "--ready", ready,
                    "--keylog", keys, "--idle-ms", str(int(max(3000, 4 * rtt)))] + common)
    wait_ready(recv, ready, mode)
    send = spawn(setup.tb_exec(prefix, "sender")
                 + [setup.quic_bin, "send", "--connect", addr, "--out", send_log,
                    "--interval", str(interval)] + common)
    rrc, rcpu, src, scpu = finish_pair(recv, send, cap)
    if src != 0:
        raise RuntimeError("%s sender failed (exit %d), see %s" % (mode, src, send_log))
    if rrc != 0:
        log("warning: %s receiver exit %d (missing/duplicate/bad messages), see %s"
            % (mode, rrc, recv_log))
    if cap is not None and setup.tshark is None:
        log("warning: no tshark: %s has no oracle" % mode)
        cap = None
    res = analyze.analyze_quic_run(recv_log, rtt, send_log, pcap if cap is not None else None,
                                   keys, PORT, setup.tshark or "tshark")
    res["run"]["message_bytes"] = size
    res["run"]["sender_cc"] = "quic-go NewReno (v0.65.0 hard-codes it; no BBR, no option)"
    res["cpu_raw"] = (scpu, rcpu)
    res["exit"] = rrc
    return res


def run_mode(setup, prefix, mode, cfg, rundir, capture, keylog=None):
    """One stream through testbed |prefix|. Returns the analysis dict."""
    if mode in QUIC_MODES:
        return run_quic_mode(setup, prefix, mode, cfg, rundir, capture)
    count, interval, size = cfg["count"], cfg["interval_ms"], cfg["size"]
    overhead = TLS13_OVERHEAD
    if mode == "ucobs":
        # Plain TCP: the datagram is sized so that its frame has the TLS
        # record's wire size.
        size = ucobs_size(cfg["wire_record_bytes"])
        overhead = cfg["wire_record_bytes"] - size
    rtt = cfg["rtt_ms"]
    binary = setup.fork_bin if mode in ("utls", "ucobs") else setup.stock_bin
    require = "fork" if mode in ("utls", "ucobs") else "stock"
    recv_log = os.path.join(rundir, "%s.recv.jsonl" % mode)
    send_log = os.path.join(rundir, "%s.send.jsonl" % mode)
    ready = os.path.join(rundir, "%s.ready" % mode)
    pcap = os.path.join(rundir, "%s.pcap" % mode)
    if os.path.exists(ready):
        os.unlink(ready)
    limit = str(int(count * interval / 1000 + 120))
    cap = start_capture(setup, prefix, pcap) if capture and mode != "dtls" else None
    addr = "%s:%d" % (setup.tb(prefix, "addr", "receiver").stdout.strip(), PORT)
    common = ["--mode", mode, "--count", str(count), "--size", str(size), "--require", require,
              "--timeout", limit, "--quiet"]
    env = setup.stock_env() if binary == setup.stock_bin else dict(os.environ)
    counters0 = tcp_counters(setup, prefix) if mode != "dtls" else None
    if keylog and mode == "utls":
        env["SSLKEYLOGFILE"] = keylog  # the fork honours it: the pcap can be decrypted
    idle = ["--idle-ms", str(int(max(3000, 4 * rtt)))]
    if mode in EVLOOP_MODES:
        # An unmodified program: only the environment brings uTLS in (the
        # fork, not a stock libssl, whatever the base).
        env = dict(os.environ)
        env.update(LD_PRELOAD=setup.evloop_preload, UTLS_MODE="unordered,tap,port=%d" % PORT)
        if mode == "evloop_asyncio":
            prog = ["/usr/bin/python3", setup.evloop_py]
        else:
            prog = [setup.evloop_bin, "--loop", mode.split("_", 1)[1]]
        recv = spawn(setup.tb_exec(prefix, "receiver")
                     + prog + ["--listen", addr, "--out", recv_log, "--ready", ready,
                               "--count", str(count), "--size", str(size), "--timeout", limit]
                     + idle, env=env)
        binary = setup.stock_bin
        common = ["--mode", "tls", "--count", str(count), "--size", str(size), "--require",
                  "stock", "--timeout", limit, "--quiet"]
    else:
        recv = spawn(setup.tb_exec(prefix, "receiver")
                     + [binary, "recv", "--listen", addr, "--out", recv_log, "--ready", ready]
                     + idle + common, env=env)
    wait_ready(recv, ready, mode)
    send = spawn(setup.tb_exec(prefix, "sender")
                 + [binary, "send", "--connect", addr, "--out", send_log,
                    "--interval", str(interval)]
                 + (["--cc", cfg["sender_cc"]] if cfg.get("sender_cc") and mode != "dtls" else [])
                 + common, env=setup.stock_env() if binary == setup.stock_bin else None)
    rrc, rcpu, src, scpu = finish_pair(recv, send, cap)
    counters1 = tcp_counters(setup, prefix) if counters0 is not None else None
    if src != 0:
        raise RuntimeError("%s sender failed (exit %d), see %s" % (mode, src, send_log))
    if rrc != 0 and mode != "dtls":
        log("warning: %s receiver exit %d (missing/duplicate/bad records), see %s"
            % (mode, rrc, recv_log))
    res = analyze.analyze_run(recv_log, rtt, send_log,
                              pcap if cap is not None else None, PORT, overhead)
    if mode == "ucobs":
        res["run"]["datagram_bytes"] = size
        res["run"]["wire_bytes"] = size + overhead
    if counters0 is not None:
        # The namespace is this run's alone: the difference is this connection.
        res["run"]["sender_tcp"] = {k: counters1[k] - counters0[k] for k in counters1}
    res["cpu_raw"] = (scpu, rcpu)
    res["exit"] = rrc
    return res


def run_point(setup, cfg, name, modes=MODES,
              capture=("utls", "tls", "ucobs") + EVLOOP_MODES + QUIC_MODES,
              progress=True, keylog=None,
              sender_sysctls=(), receiver_sysctls=()):
    """All modes of one configuration in parallel, each on its own testbed."""
    modes = setup.modes(modes)
    rundir = os.path.join(setup.out, "latency", name)
    os.makedirs(rundir, exist_ok=True)
    results, errors = {}, {}
    prefixes = {}
    for k, mode in enumerate(modes):
        prefix = "%s%d" % (setup.prefix, k)
        args = ["up", "--rtt", str(cfg["rtt_ms"]), "--loss", str(cfg["loss_pct"]),
                "--seed", str(cfg["seed"]), "--loss-dir", cfg.get("testbed_loss_dir", "fwd")]
        _testbeds.add(prefix)
        # A fresh testbed per point: sysctls set for one variant (they live in
        # the namespaces) must not leak into the next point.
        setup.tb(prefix, "down", check=False)
        setup.tb(prefix, *args)
        for where, kvs in (("sender", sender_sysctls), ("receiver", receiver_sysctls)):
            for kv in kvs:
                r = subprocess.run(setup.tb_exec(prefix, where) + ["sysctl", "-qw", kv])
                if r.returncode != 0:
                    raise RuntimeError("sysctl %s in the %s namespace failed" % (kv, where))
        prefixes[mode] = prefix
    wrapper_cpu = exec_wrapper_cpu(setup, prefixes[modes[0]])

    def worker(mode):
        try:
            results[mode] = run_mode(setup, prefixes[mode], mode, cfg, rundir, mode in capture,
                                     keylog)
        except Exception as e:  # reported below
            errors[mode] = e

    secs = cfg["count"] * cfg["interval_ms"] / 1000.0
    log("%s: %s, %d records of %d bytes every %g ms, RTT %g ms, loss %g%% (seed %d), ~%.0f s"
        % (name, "+".join(modes), cfg["count"], cfg["size"], cfg["interval_ms"], cfg["rtt_ms"],
           cfg["loss_pct"], cfg["seed"], secs + 2))
    threads = [threading.Thread(target=worker, args=(m,)) for m in modes]
    for t in threads:
        t.start()
    t0 = time.time()
    while any(t.is_alive() for t in threads):
        time.sleep(0.5)
        if progress and time.time() - t0 >= 10:
            t0 = time.time()
            got = []
            for m in modes:
                path = os.path.join(rundir, "%s.recv.jsonl" % m)
                n = 0
                if os.path.exists(path):
                    with open(path) as f:
                        n = sum(1 for _ in f) - 1
                got.append("%s %d" % (m, max(n, 0)))
            log("%s: %s of %d records" % (name, ", ".join(got), cfg["count"]))
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join("%s: %s" % kv for kv in errors.items()))
    for mode, res in results.items():
        scpu, rcpu = res.pop("cpu_raw")
        n = res["run"]["records_sent"]
        res["run"]["cpu"] = {
            "sender_s": round(scpu, 4), "receiver_s": round(rcpu, 4),
            "exec_wrapper_s": round(wrapper_cpu, 4),
            "sender_s_per_1000": round(max(scpu - wrapper_cpu, 0) * 1000 / n, 4),
            "receiver_s_per_1000": round(max(rcpu - wrapper_cpu, 0) * 1000 / n, 4),
            "note": "user + system CPU of the process (wait4), minus exec_wrapper_s (what "
                    "`testbed exec` costs before it execs the program), per 1000 messages "
                    "sent; handshake and startup included. Kernel work done in softirq "
                    "context (most of TCP's receive path) is charged to whichever task "
                    "runs, so TCP's kernel cost is only partly here; QUIC's protocol "
                    "work is all in its process"}
    return results


def summarize(cfg, results):
    """The JSON block of one configuration: tls, utls, dtls, oracle."""
    out = {"config": cfg}
    for mode, res in results.items():
        out[mode] = res["run"]
        if "tap_arrival" in res:
            out[mode]["tap_arrival"] = {k: res["tap_arrival"][k]
                                        for k in ("delayed_gt_rtt", "p50_ms", "p95_ms", "p99_ms")}
    if "utls" in results and "oracle" in results["utls"]:
        out["oracle"] = results["utls"]["oracle"]
        out["oracle"]["run"] = "utls"
    for mode in ("tls", "ucobs") + EVLOOP_MODES + QUIC_MODES:
        if mode in results and "oracle" in results[mode]:
            o = results[mode]["oracle"]
            out[mode]["oracle_same_run"] = {k: o[k] for k in ("delayed_gt_rtt", "p50_ms", "p95_ms",
                                                               "p99_ms", "overtaken")}
            if mode in QUIC_MODES:
                out[mode]["oracle_same_run"].update(
                    {k: v for k, v in o.items() if k not in out[mode]["oracle_same_run"]
                     and k in ("source", "records_complete_in_pcap", "packets_to_receiver",
                               "message_frames", "messages_in_more_than_one_packet",
                               "udp_payload_bytes_median", "udp_payload_bytes_max", "lost")})
    # Which part of delayed_gt_rtt the receiver adds (head-of-line blocking:
    # the mode minus its own oracle) and which was already there when the
    # last byte reached the host (the sender's loss recovery, congestion
    # control and the network: the oracle).
    for mode in ("tls", "utls", "ucobs") + EVLOOP_MODES + QUIC_MODES:
        o = (out.get("oracle") if mode == "utls" else out.get(mode, {}).get("oracle_same_run"))
        if mode in out and o and o.get("delayed_gt_rtt") is not None:
            out[mode]["delayed_split"] = {
                "at_host": o["delayed_gt_rtt"],
                "added_by_receiver": round(out[mode]["delayed_gt_rtt"] - o["delayed_gt_rtt"], 6)}
    for mode in ("utls", "ucobs") + EVLOOP_MODES + QUIC_MODES:
        if mode in results and "oracle_latencies" in results[mode]:
            lag = analyze.behind_oracle(results[mode]["latencies"],
                                        results[mode]["oracle_latencies"])
            out[mode]["behind_oracle"] = lag
            if lag["gt_20ms"] > 0:
                log("warning: %s delivered %d records more than 20 ms after their last byte "
                    "reached the host (max %.1f ms): the receiver was not scheduled in time; "
                    "load average %s. Run the benchmark on an idle machine."
                    % (mode, lag["gt_20ms"], lag["max_ms"],
                       " ".join("%.2f" % x for x in os.getloadavg())))
    out["host_loadavg_after"] = list(os.getloadavg())
    return out


def cdf_plot(results, path, title, rtt):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    series = [("tls", "TLS (stock OpenSSL, in order)", "tab:red", "-"),
              ("utls", "uTLS (SSL_MODE_UNORDERED + tap)", "tab:blue", "-"),
              ("dtls", "DTLS over UDP (lost = never)", "tab:green", "--"),
              ("ucobs", "uCOBS over TCP (no TLS; tap)", "tab:purple", "-."),
              ("quic_stream", "QUIC, a stream per message (quic-go)", "tab:orange", "-"),
              ("quic_datagram", "QUIC DATAGRAM frames (lost = never)", "tab:brown", "--"),
              ("oracle", "oracle (last byte reached host)", "black", ":")]
    for key, label, color, ls in series:
        if key == "oracle":
            lat = results.get("utls", {}).get("oracle_latencies")
            count = results.get("utls", {}).get("run", {}).get("records_sent")
        else:
            lat = results.get(key, {}).get("latencies")
            count = results.get(key, {}).get("run", {}).get("records_sent")
        if not lat:
            continue
        vals = sorted(lat.values())
        n = count or len(vals)
        ys = [(i + 1) / n for i in range(len(vals))]
        ax.step(vals, ys, where="post", label=label, color=color, linestyle=ls)
    ax.axvline(rtt / 2 + rtt, color="grey", linewidth=0.8)
    ax.text(rtt / 2 + rtt, 0.02, " one-way + RTT", color="grey", fontsize=8)
    ax.set_xscale("log")
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter
    ticks = [t for t in (20, 30, 40, 50, 60, 80, 100, 150, 200, 300, 400, 600, 1000)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("delivery latency (ms, send to read return)")
    ax.set_ylabel("fraction of records sent")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="center right", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def sweep_plot(points, xkey, xlabel, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    xs = [p["config"][xkey] for p in points]
    for key, color, ls in (("tls", "tab:red", "-"), ("utls", "tab:blue", "-"),
                           ("dtls", "tab:green", "--"), ("ucobs", "tab:purple", "-."),
                           ("quic_stream", "tab:orange", "-"),
                           ("quic_datagram", "tab:brown", "--"), ("oracle", "black", ":")):
        ys = [p.get(key, {}).get("delayed_gt_rtt") for p in points]
        p99 = [p.get(key, {}).get("p99_ms") for p in points]
        if all(y is None for y in ys):
            continue
        axes[0].plot(xs, [y if y is not None else float("nan") for y in ys], marker="o",
                     color=color, linestyle=ls, label=key)
        axes[1].plot(xs, [y if y is not None else float("nan") for y in p99], marker="o",
                     color=color, linestyle=ls, label=key)
    axes[0].set_ylabel("share of records delayed > one-way + RTT")
    axes[1].set_ylabel("p99 delivery latency (ms)")
    for ax in axes:
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(doc):
    """The side-by-side table of one configuration, as text."""
    rows = ["%-13s %11s %12s %8s %8s %8s %13s %16s" % (
        "mode", "delivered", "delayed>RTT", "p50 ms", "p95 ms", "p99 ms", "out-of-order",
        "CPU ms/1000 r/s")]
    for key in MODES + EVLOOP_MODES + ("oracle",):
        m = doc.get(key)
        if not m:
            continue
        ooo = m.get("out_of_order")
        cpu = m.get("cpu")
        rows.append("%-13s %11s %11.1f%% %8.1f %8.1f %8.1f %13s %16s" % (
            key, "%d/%d" % (m["records_delivered"], m["records_sent"]),
            100 * m["delayed_gt_rtt"], m["p50_ms"], m["p95_ms"], m["p99_ms"],
            "-" if ooo is None else str(ooo),
            "%.0f / %.0f" % (1000 * cpu["receiver_s_per_1000"], 1000 * cpu["sender_s_per_1000"])
            if cpu else "-"))
    return "\n".join(rows)


def recovery_model(cfg, doc):
    """First-principles prediction of tls.delayed_gt_rtt (analyze.
    records_delayed_per_loss) next to what the runs measured. Measured per
    loss: the records the stock TLS run delayed past one-way + RTT, divided by
    the records its own capture shows overtaken in the network (lost and
    retransmitted: analyze.overtaken), both from the same run."""
    rtt, interval, p = cfg["rtt_ms"], cfg["interval_ms"], cfg["loss_pct"] / 100.0
    model = {"loss_per_record": p}
    for name, recovery in (("default", "rack"), ("no_sack", "dupack")):
        per = [analyze.records_delayed_per_loss(rtt, interval, recovery, ack_pending=pend)
               for pend in (False, True)]
        per_rtt = [analyze.records_delayed_per_loss(rtt, interval, recovery, over="rtt",
                                                    ack_pending=pend) for pend in (False, True)]
        # RACK times the loss from record 1's SACK, which is never delayed
        # (out-of-order data is acknowledged at once); duplicate-ACK counting
        # needs one more record about every other loss (ack_pending).
        per_loss = sum(per) / 2.0
        per_loss_rtt = sum(per_rtt) / 2.0
        entry = {"recovery": recovery,
                 "records_delayed_per_loss": per_loss,
                 "records_delayed_per_loss_range": [min(per), max(per)],
                 "predicted_delayed_gt_rtt": round(per_loss * p, 4),
                 "records_over_rtt_per_loss": per_loss_rtt,
                 "predicted_latency_gt_rtt": round(per_loss_rtt * p, 4)}
        point = doc if name == "default" else doc.get("variants", {}).get(name)
        tls = (point or {}).get("tls")
        if tls:
            entry["measured_delayed_gt_rtt"] = tls["delayed_gt_rtt"]
            entry["measured_latency_gt_rtt"] = tls["latency_gt_rtt"]
            lost = tls.get("oracle_same_run", {}).get("overtaken")
            if lost:
                entry["measured_records_lost"] = lost
                entry["measured_loss_per_record"] = round(lost / tls["records_sent"], 4)
                entry["measured_records_delayed_per_loss"] = round(
                    tls["delayed_gt_rtt"] * tls["records_sent"] / lost, 3)
                entry["predicted_delayed_gt_rtt_at_measured_loss"] = round(
                    per_loss * lost / tls["records_sent"], 4)
        model[name] = entry
    # Side by side in one run: how many times more records the paper's
    # recovery delays than today's, predicted and measured.
    ratio = {"predicted": round(model["no_sack"]["records_delayed_per_loss"]
                                / model["default"]["records_delayed_per_loss"], 3)}
    if "measured_delayed_gt_rtt" in model["no_sack"] and model["default"].get(
            "measured_delayed_gt_rtt"):
        ratio["measured"] = round(model["no_sack"]["measured_delayed_gt_rtt"]
                                  / model["default"]["measured_delayed_gt_rtt"], 3)
    model["tls_delayed_ratio_no_sack_to_default"] = ratio
    model["note"] = ("an isolated loss of record 0 delays records 0..n-1 past one-way + RTT, "
                     "n = floor(excess / interval) + 1; excess = max(interval, RTT/4) for RACK "
                     "(its reordering window), 3 intervals for three duplicate ACKs, 4 when the "
                     "receiver's delayed ACK of the record before the loss was still pending "
                     "(about every other loss); predicted = n * loss rate, first order: a "
                     "second loss in the same window, a lost retransmission (RTO) or a loss "
                     "during recovery delays more")
    return model


def strip(results):
    return {m: {k: v for k, v in r.items() if k not in ("latencies", "oracle_latencies")}
            for m, r in results.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", help="default BUILD/bench")
    ap.add_argument("--bin-dir", help="utls-stream binaries (default BUILD/examples/utls-stream)")
    ap.add_argument("--prefix", default="ulat", help="testbed prefix (PREFIX0..5)")
    ap.add_argument("--quic-bin", help="quic-stream (default BUILD/bench/latency/quic/quic-stream)")
    ap.add_argument("--no-quic", action="store_true",
                    help="without the QUIC modes (quic_stream, quic_datagram)")
    ap.add_argument("--smoke", action="store_true",
                    help="ctest: a few dozen messages of the QUIC modes, then checks of the "
                         "JSON (exit 1 when one fails, 77 without root)")
    ap.add_argument("--smoke-evloop", action="store_true",
                    help="ctest: a short run of utls and the unmodified event-loop receivers "
                         "at 5%% loss; each must be within 0.02 of its own capture's oracle "
                         "(exit 1 when one is not, 77 without root)")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--interval", type=float, default=20.0)
    ap.add_argument("--size", type=int, default=1426,
                    help="plaintext bytes per record (1426: a 1448-byte TLS record, one MSS)")
    ap.add_argument("--rtt", type=float, default=100.0)
    ap.add_argument("--loss", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cc", default="bbr",
                    help="the sender's TCP congestion control (TCP_CONGESTION; default bbr). "
                         "With cubic, 2%% random loss keeps an application-limited flow's cwnd "
                         "below the 5 records in flight that 100 ms at 20 ms need, and records "
                         "queue in the sender: the oracle itself is then late (variant 'cubic')")
    ap.add_argument("--sweep-count", type=int, default=1000)
    ap.add_argument("--sweep-loss", default="0,1,2,3,5")
    ap.add_argument("--sweep-rtt", default="20,50,100,200")
    ap.add_argument("--no-sweeps", action="store_true")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma-separated variants to run after the headline (default: all of "
                         "%s; 'none' for none; also %s: loss on the ACK direction too). The "
                         "--no-* options below remove one more"
                         % (", ".join(VARIANTS), ", ".join(EXTRA_VARIANTS)))
    ap.add_argument("--no-classic", dest="classic_recovery", action="store_false",
                    help="skip the variant with the sender's TCP in 3-dupack loss recovery")
    ap.add_argument("--no-cubic", dest="cubic_variant", action="store_false",
                    help="skip the variant with the sender's TCP in cubic")
    ap.add_argument("--no-no-sack", dest="no_sack_variant", action="store_false",
                    help="skip the variant without SACK (duplicate-ACK recovery, NewReno)")
    ap.add_argument("--no-variant", action="store_true",
                    help="skip the 1448-byte-plaintext variant (two segments per record)")
    ap.add_argument("--quick", action="store_true", help="short runs (a smoke test)")
    ap.add_argument("--demo", metavar="DIR",
                    help="make demo: one short run of the three modes, a table, the CDF plot, "
                         "a pcap and key log of the uTLS run, all in DIR")
    a = ap.parse_args()
    rc = procs.need_root("bench/latency", "network namespaces, the tap, tcpdump", a.smoke)
    if rc is not None:
        return rc
    if a.demo:
        a.out = a.demo
    setup = Setup(a.build, a.out or os.path.join(a.build, "bench"), a.prefix, a.bin_dir,
                  a.quic_bin, quic=not a.no_quic and not a.demo)
    if a.smoke:
        return smoke(setup, a)
    if a.smoke_evloop:
        return smoke_evloop(setup, a)
    wanted = set() if a.variants == "none" else set(v for v in a.variants.split(",") if v)
    unknown = wanted - set(VARIANTS) - set(EXTRA_VARIANTS)
    if unknown:
        raise SystemExit("bench/latency: unknown variant(s) %s (known: %s)"
                         % (", ".join(sorted(unknown)), ", ".join(VARIANTS + EXTRA_VARIANTS)))
    if a.quick:
        a.count, a.sweep_count, a.sweep_loss, a.sweep_rtt = 300, 200, "0,2,5", "20,100"
        a.classic_recovery = a.cubic_variant = a.no_sack_variant = False
    a.no_variant = a.no_variant or "plaintext_1448" not in wanted
    a.classic_recovery = a.classic_recovery and "classic_recovery" in wanted
    a.no_sack_variant = a.no_sack_variant and "no_sack" in wanted
    a.cubic_variant = a.cubic_variant and "cubic" in wanted
    a.reno_variant = "reno" in wanted and not a.quick
    os.makedirs(setup.out, exist_ok=True)

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    t_start = time.time()
    doc = {}
    if a.demo:
        return demo(setup, a, t_start)
    try:
        cfg = point_cfg(a, loss_dir="fwd (sender to receiver; ACKs unharmed)")
        res = run_point(setup, cfg, "headline", modes=HEADLINE_MODES)
        doc = summarize(cfg, res)
        doc["targets"] = {
            "tls.delayed_gt_rtt >= 0.08": doc["tls"]["delayed_gt_rtt"] >= 0.08,
            "utls.delayed_gt_rtt <= 0.03": doc["utls"]["delayed_gt_rtt"] <= 0.03,
            "|utls - oracle| <= 0.005": abs(doc["utls"]["delayed_gt_rtt"]
                                            - doc["oracle"]["delayed_gt_rtt"]) <= 0.005,
        }
        if "ucobs" in doc:
            doc["targets"]["ucobs.delayed_gt_rtt <= 0.03"] = doc["ucobs"]["delayed_gt_rtt"] <= 0.03
        for m in EVLOOP_MODES:
            # Issue 19, point 1: each unmodified event loop within 0.005 of
            # the oracle (the utls run's capture; its own is in
            # oracle_same_run).
            if m in doc:
                doc["targets"]["|%s - oracle| <= 0.005" % m] = abs(
                    doc[m]["delayed_gt_rtt"] - doc["oracle"]["delayed_gt_rtt"]) <= 0.005
        cdf_plot(res, os.path.join(setup.out, "latency_cdf.png"),
                 "%d records of %d B (%d B on the wire) every %g ms, RTT %g ms, %g%% loss"
                 % (a.count, a.size, a.size + TLS13_OVERHEAD, a.interval, a.rtt, a.loss), a.rtt)
        with open(os.path.join(setup.out, "latency", "headline", "results.json"), "w") as f:
            json.dump(strip(res), f, indent=1)
        log("headline: delayed>RTT tls %.4f utls %.4f dtls %.4f ucobs %s oracle %.4f quic_stream %s "
            "quic_datagram %s"
            % (doc["tls"]["delayed_gt_rtt"], doc["utls"]["delayed_gt_rtt"],
               doc["dtls"]["delayed_gt_rtt"],
               "%.4f" % doc["ucobs"]["delayed_gt_rtt"] if "ucobs" in doc else "-",
               doc["oracle"]["delayed_gt_rtt"],
               *["%.4f" % doc[m]["delayed_gt_rtt"] if m in doc else "-" for m in QUIC_MODES]))

        if not a.no_variant:
            vcfg = dict(cfg, size=1448, wire_record_bytes=1448 + TLS13_OVERHEAD)
            # quic_datagram cannot carry 1448 bytes in one packet (QUIC_DATAGRAM_MAX).
            vres = run_point(setup, vcfg, "plaintext_1448", modes=BASE_MODES + ("quic_stream",))
            doc["variants"] = {"plaintext_1448": summarize(vcfg, vres)}
            doc["variants"]["plaintext_1448"]["note"] = (
                "1448 plaintext bytes make a 1470-byte TLS record: two TCP segments per "
                "record (1448 + 22 bytes), so about twice as many records are hit by a loss")
            cdf_plot(vres, os.path.join(setup.out, "latency_cdf_plaintext1448.png"),
                     "%d records of 1448 B (1470 B on the wire) every %g ms, RTT %g ms, %g%% loss"
                     % (a.count, a.interval, a.rtt, a.loss), a.rtt)

        if a.classic_recovery:
            ccfg = dict(cfg, sender_sysctls=CLASSIC)
            run_variant(setup, doc, ccfg, "classic_recovery", modes=BASE_MODES,
                        sender_sysctls=CLASSIC, note=(
                "the sender's TCP without RACK-TLP (net.ipv4.tcp_recovery=0, "
                "tcp_early_retrans=0, in the sender namespace only): loss detection by three "
                "duplicate ACKs, as in the Linux 2.6.34 of the Minion paper"))

        if a.no_sack_variant:
            ncfg = dict(cfg, receiver_sysctls=NO_SACK, loss_recovery="NewReno (3 duplicate ACKs)")
            nres = run_variant(setup, doc, ncfg, "no_sack", modes=("tls", "utls", "ucobs"),
                               receiver_sysctls=NO_SACK, note=(
                "SACK off (net.ipv4.tcp_sack=0 in the receiver namespace; either end is "
                "enough, SACK needs both SYNs): Linux cannot use RACK-TLP without SACK and "
                "repairs a loss by fast retransmit after three duplicate ACKs (NewReno), "
                "or by RTO. This is the loss detection of the paper's Linux 2.6.34 for a "
                "single loss. No dtls: it does not use TCP. sender_tcp shows the recovery "
                "that ran (TCPRenoRecovery, no TCPSackRecovery or TCPLossProbes)"))
            for mode in ("tls", "utls", "ucobs"):
                ctr = nres[mode]["run"].get("sender_tcp", {})
                if ctr.get("TCPSackRecovery") or ctr.get("TCPLossProbes"):
                    log("warning: no_sack %s: SACK recovery or loss probes ran anyway: %s"
                        % (mode, ctr))
        for name in EXTRA_VARIANTS:
            if name not in wanted:
                continue
            sysctls = NO_SACK if name.startswith("no_sack") else ()
            bcfg = dict(cfg, testbed_loss_dir="both", receiver_sysctls=sysctls,
                        loss_dir="both (each direction its own seeded loss: seed, seed + 1)")
            run_variant(setup, doc, bcfg, name, modes=("tls", "utls", "ucobs"),
                        receiver_sysctls=sysctls, note=(
                "the same random loss on the ACK direction too (testbed --loss-dir both)%s: "
                "the paper's dummynet setup does not say which directions lost packets"
                % (", SACK off as in no_sack" if sysctls else "")))
        doc["recovery_model"] = recovery_model(cfg, doc)

        if a.cubic_variant and a.cc != "cubic":
            kcfg = dict(cfg, sender_cc="cubic")
            run_variant(setup, doc, kcfg, "cubic", note=(
                "the sender's TCP with cubic instead of bbr: cwnd reductions at 2% loss make "
                "the sender queue records, which delays them for every mode, the oracle included. "
                "The QUIC modes are unchanged: quic-go v0.65.0 always runs its NewReno"))

        if a.reno_variant and a.cc != "reno":
            rcfg = dict(cfg, sender_cc="reno")
            rres = run_variant(setup, doc, rcfg, "reno",
                               modes=("tls", "utls", "ucobs") + QUIC_MODES, note=(
                "like with like: the sender's TCP with reno (Linux's NewReno, TCP_CONGESTION "
                "reno) and quic-go's congestion control, which v0.65.0 hard-codes to NewReno "
                "(internal/ackhandler: NewCubicSender(..., true /* use Reno */, ...); its Cubic "
                "code is unreachable from the API and it has no BBR, so no BBR pair exists). "
                "Loss detection still differs: TCP RACK-TLP (reo_wnd = min_rtt/4) against "
                "RFC 9002 (3 packets or 9/8 RTT). No dtls: OpenSSL's DTLS has no congestion "
                "control"))
            cdf_plot(rres, os.path.join(setup.out, "latency_cdf_reno.png"),
                     "sender TCP reno vs quic-go NewReno: %d messages every %g ms, RTT %g ms, "
                     "%g%% loss" % (a.count, a.interval, a.rtt, a.loss), a.rtt)

        if not a.no_sweeps:
            doc["sweeps"] = {"loss": [], "rtt": []}
            for loss in [float(x) for x in a.sweep_loss.split(",")]:
                scfg = dict(cfg, count=a.sweep_count, loss_pct=loss)
                sres = run_point(setup, scfg, "sweep_loss_%g" % loss)
                doc["sweeps"]["loss"].append(summarize(scfg, sres))
            for rtt in [float(x) for x in a.sweep_rtt.split(",")]:
                scfg = dict(cfg, count=a.sweep_count, rtt_ms=rtt, one_way_ms=rtt / 2)
                sres = run_point(setup, scfg, "sweep_rtt_%g" % rtt)
                doc["sweeps"]["rtt"].append(summarize(scfg, sres))
            sweep_plot(doc["sweeps"]["loss"], "loss_pct", "loss (%)",
                       os.path.join(setup.out, "latency_sweep_loss.png"),
                       "RTT %g ms, %d records every %g ms" % (a.rtt, a.sweep_count, a.interval))
            sweep_plot(doc["sweeps"]["rtt"], "rtt_ms", "RTT (ms)",
                       os.path.join(setup.out, "latency_sweep_rtt.png"),
                       "%g%% loss, %d records every %g ms" % (a.loss, a.sweep_count, a.interval))
    except KeyboardInterrupt:
        log("interrupted")
        cleanup(setup)
        return 130
    finally:
        cleanup(setup)
    doc["elapsed_s"] = round(time.time() - t_start, 1)
    # Which libraries ran: the fork of this base, and stock libssl (the
    # system's on 3.0, BUILD/stock's on 3.5).
    doc["base"] = {"openssl_base": setup.base, "fork": os.path.join(setup.build, "lib"),
                   "stock": setup.stock_lib_dir or "system libssl.so.3"}
    path = os.path.join(setup.out, "latency.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    log("wrote %s, plots %s/latency_*.png (%.0f s)" % (path, setup.out, doc["elapsed_s"]))
    print(table(doc))
    for name, v in sorted(doc.get("variants", {}).items()):
        print("\nvariant %s:" % name)
        print(table(v))
    print(json.dumps({k: doc[k] for k in MODES + ("oracle", "targets", "recovery_model")
                      if k in doc}, indent=1))
    return 0


# The keys every mode's block has in latency.json (the smoke test checks them).
MODE_KEYS = ("delayed_gt_rtt", "p50_ms", "p95_ms", "p99_ms", "lost", "out_of_order",
             "records_sent", "records_delivered")
CPU_KEYS = ("sender_s_per_1000", "receiver_s_per_1000")


def check_doc(doc, modes, count):
    """What the smoke test asserts about a latency.json document. Returns a
    list of failures (empty: pass)."""
    bad = []
    for m in modes:
        b = doc.get(m)
        if not isinstance(b, dict):
            bad.append("%s: missing" % m)
            continue
        for k in MODE_KEYS:
            if not isinstance(b.get(k), (int, float)):
                bad.append("%s.%s: %r is not a number" % (m, k, b.get(k)))
        for k in CPU_KEYS:
            v = b.get("cpu", {}).get(k)
            if not isinstance(v, (int, float)) or v <= 0:
                bad.append("%s.cpu.%s: %r is not a positive number" % (m, k, v))
        if b.get("records_sent") != count:
            bad.append("%s.records_sent: %r, not %d" % (m, b.get("records_sent"), count))
        if b.get("duplicates") or b.get("bad"):
            bad.append("%s: %r duplicates, %r bad" % (m, b.get("duplicates"), b.get("bad")))
        o = b.get("oracle_same_run", {})
        if not isinstance(o.get("delayed_gt_rtt"), (int, float)):
            bad.append("%s.oracle_same_run: no oracle (capture, key log, tshark)" % m)
        elif o.get("records_complete_in_pcap", -1) < b.get("records_delivered", 0):
            bad.append("%s: %r messages delivered, only %r complete in the decrypted capture"
                       % (m, b.get("records_delivered"), o.get("records_complete_in_pcap")))
        if isinstance(b.get("min_ms"), (int, float)) and b["min_ms"] < doc["config"]["one_way_ms"]:
            bad.append("%s.min_ms %.1f is below the path's one-way delay" % (m, b["min_ms"]))
    s = doc.get("quic_stream", {})
    if s and s.get("records_delivered") != count:
        bad.append("quic_stream: %r of %d messages delivered (it is reliable)"
                   % (s.get("records_delivered"), count))
    d = doc.get("quic_datagram", {})
    if d and (d.get("records_delivered") or 0) < count // 2:
        bad.append("quic_datagram: only %r of %d messages" % (d.get("records_delivered"), count))
    return bad


def point_cfg(a, count=None, loss=None, loss_dir="fwd"):
    """The configuration of one measured point from the command line: its
    count and loss unless given, records of a.size bytes at a.interval."""
    return {"count": a.count if count is None else count, "interval_ms": a.interval,
            "size": a.size, "wire_record_bytes": a.size + TLS13_OVERHEAD, "rtt_ms": a.rtt,
            "loss_pct": a.loss if loss is None else loss, "loss_dir": loss_dir,
            "seed": a.seed, "one_way_ms": a.rtt / 2, "sender_cc": a.cc}


def smoke_point(setup, cfg, label, modes, name):
    """Runs one quiet point of a smoke test, always tears the testbeds down,
    and writes its summary to OUT/NAME; returns (summary, path)."""
    os.makedirs(setup.out, exist_ok=True)
    try:
        res = run_point(setup, cfg, label, modes=modes, progress=False)
        doc = summarize(cfg, res)
    finally:
        cleanup(setup)
    path = os.path.join(setup.out, name)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return doc, path


def run_variant(setup, doc, cfg, name, note, modes=MODES, **kw):
    """Runs the headline's variant |name| (configuration |cfg|; |kw| go to
    run_point), stores its summary with |note| in doc["variants"][name] and
    returns run_point's results."""
    res = run_point(setup, cfg, name, modes=modes, **kw)
    doc.setdefault("variants", {})[name] = summarize(cfg, res)
    doc["variants"][name]["note"] = note
    return res


def smoke(setup, a):
    """ctest bench.smoke_latency_quic: the QUIC modes for a few dozen
    messages on the usual path (100 ms RTT, 2% loss), the JSON written and
    read back, and check_doc."""
    count = 40
    doc, path = smoke_point(setup, point_cfg(a, count=count), "smoke", QUIC_MODES,
                            "latency.json")
    with open(path) as f:
        doc = json.load(f)
    print(table(doc))
    bad = check_doc(doc, QUIC_MODES, count)
    for b in bad:
        log("FAIL: " + b)
    log("smoke: %s (%s)" % ("FAIL" if bad else "ok", path))
    return 1 if bad else 0


def smoke_evloop(setup, a):
    """ctest bench.smoke_latency_evloop: utls and the unmodified event-loop
    receivers (EVLOOP_MODES) for 250 records at 5% loss, 100 ms RTT. Each
    event loop must deliver every record exactly once and be within 0.02 of
    the oracle of its own run's capture: an event loop that reads only when
    the kernel says the socket is readable is an RTT late for every record
    behind a hole (about 0.2 here), so this fails without the companion
    library."""
    count, slack = 250, 0.02
    modes = setup.modes(("utls",) + EVLOOP_MODES)
    if len(modes) != 1 + len(EVLOOP_MODES):
        log("FAIL: %s is missing (build first)" % setup.evloop_bin)
        return 1
    doc, path = smoke_point(setup, point_cfg(a, count=count, loss=5.0), "smoke_evloop", modes,
                            "latency_evloop.json")
    print(table(doc))
    bad = []
    for m in EVLOOP_MODES:
        b = doc.get(m, {})
        o = b.get("oracle_same_run", {}).get("delayed_gt_rtt")
        if b.get("records_delivered") != count or b.get("duplicates") or b.get("bad"):
            bad.append("%s: %r of %d delivered, %r duplicates, %r bad"
                       % (m, b.get("records_delivered"), count, b.get("duplicates"),
                          b.get("bad")))
        elif o is None:
            bad.append("%s: no oracle (capture)" % m)
        elif b["delayed_gt_rtt"] - o > slack:
            bad.append("%s: delayed>RTT %.4f, its oracle %.4f: not woken for records past "
                       "a hole" % (m, b["delayed_gt_rtt"], o))
        else:
            log("%s: delayed>RTT %.4f, oracle of its run %.4f" % (m, b["delayed_gt_rtt"], o))
    for b in bad:
        log("FAIL: " + b)
    log("smoke_evloop: %s (%s)" % ("FAIL" if bad else "ok", path))
    return 1 if bad else 0


def demo(setup, a, t_start):
    cfg = point_cfg(a)
    keylog = os.path.join(setup.out, "utls.keys")
    if os.path.exists(keylog):
        os.unlink(keylog)
    setup.snaplen = 0  # whole packets: the demo's capture is for Wireshark, decrypted
    try:
        res = run_point(setup, cfg, "demo", modes=BASE_MODES, keylog=keylog)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        cleanup(setup)
    doc = summarize(cfg, res)
    rundir = os.path.join(setup.out, "latency", "demo")
    shutil.copyfile(os.path.join(rundir, "utls.pcap"), os.path.join(setup.out, "utls.pcap"))
    plot = os.path.join(setup.out, "latency_cdf.png")
    cdf_plot(res, plot, "%d records of %d B (%d B on the wire) every %g ms, RTT %g ms, %g%% loss"
             % (a.count, a.size, a.size + TLS13_OVERHEAD, a.interval, a.rtt, a.loss), a.rtt)
    doc["elapsed_s"] = round(time.time() - t_start, 1)
    with open(os.path.join(setup.out, "demo.json"), "w") as f:
        json.dump(doc, f, indent=1)
    u = doc["utls"]
    print()
    print("%d records of %d bytes (one %d-byte TLS record = one TCP segment each), one every %g ms,"
          % (a.count, a.size, a.size + TLS13_OVERHEAD, a.interval))
    print("over %g ms RTT with %g%% random loss (seed %d, sender TCP: %s), in namespaces"
          % (a.rtt, a.loss, a.seed, a.cc))
    print("sender -> router -> receiver;")
    print("the %d modes ran at the same time, each on a testbed of its own." % len(BASE_MODES))
    print()
    print(table(doc))
    print()
    print("delayed>RTT: share of records that arrived more than one RTT later than the path's")
    print("one-way delay (latency > %g ms). oracle: each record delivered the moment its last"
          % (a.rtt * 1.5))
    print("byte reached the receiver (from the capture of the uTLS run). dtls: lost datagrams")
    print("are never delivered (p50..p99 over those delivered).")
    print("uTLS delivered %d records out of order (%d trial decryptions, fallback: %s)."
          % (u.get("out_of_order", 0), u.get("utls_stats", {}).get("probes", 0),
             u.get("utls_stats", {}).get("fallback", "?")))
    print()
    print("CDF plot:        %s" % plot)
    print("uTLS pcap:       %s  (receiver side, whole packets, tcpdump --immediate-mode)"
          % os.path.join(setup.out, "utls.pcap"))
    print("TLS key log:     %s  (with -o tcp.reassemble_out_of_order:TRUE: decryption survives the holes)"
          % keylog)
    print("per-record logs: %s/" % rundir)
    print("numbers:         %s" % os.path.join(setup.out, "demo.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
