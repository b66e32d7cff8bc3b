#!/usr/bin/python3
"""ERN interop driver (ctest label `interop;ern`, issue 6). Standard library only.

The fork with negotiation on (LD_PRELOAD=<fork> UTLS_MODE=unordered,negotiate,
into the unmodified `openssl s_server -rev` / `openssl s_client`) against stock
peers, and fork <-> fork. Subcommands:

  matrix   --peer openssl|gnutls|go|tlslite|fork|nss --fork-role client|server --tls V
           (nss: NSS's tstclnt, as a client of the fork only)
           one connection; the client sends several lines, each one only after
           the answer to the previous one (so it writes after reading the TLS 1.3
           tickets), the server answers each line reversed (gnutls-serv --echo:
           unchanged); the client's received bytes must equal the expected answers
           exactly (which proves both directions). /proc/PID/maps of every openssl
           process: the fork side maps the fork's libssl, a stock openssl the system one.
  forkfork --tls V [--cipher LIST] [--mte] [--expect-legacy]
           tests/ern-interop/ern_peer (linked to the fork, UTLS_MODE in the
           environment) on both ends of a loopback socket: UTLS_ern_status() and the
           ERN counters of both ends must show numbers in both directions (TLS 1.3,
           TLS 1.2 with AES-GCM or AES-CBC), or with --expect-legacy no negotiation at all (TLS 1.2
           ciphers that cannot carry the offer, docs/ern.md "TLS 1.2").
  ja3      --tls V   tcpdump captures of fork<->fork and stock<->stock openssl
           s_client/s_server with the same options: JA3 and JA3S (tshark) equal,
           the same number of records per direction, and wireshark/utls-wirecheck passes.
           The record lengths also show the negotiation happened (TLS 1.3, and TLS 1.2
           with the default AES-GCM suite).
  tlslite-setup --venv DIR   pip install tlslite-ng into a venv (a failure is a FAIL).

--expect-fail CATEGORY inverts the result (negative self-tests).
"""
import argparse
import os
import re
import subprocess
import sys
import time

for _shared in ("interop", "wireshark"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, _shared))
from interop_procs import (Failure, Proc, child_setup, check_maps, free_port, listening_ports, log,  # noqa: E402
                           run_driver, set_log_name, wait_until)
from tcpdump_capture import TcpdumpCapture  # noqa: E402

set_log_name("ern-interop")

CATEGORIES = ("maps", "version", "data", "ern", "ja3", "records", "wirecheck", "process", "timeout", "setup")


def check_lib(cfg, pr, lib):
    """From /proc/PID/maps, while pr is alive: it maps the fork (lib "fork")
    or the system libssl, never the other."""
    check_maps(pr, lib, cfg.fork, cfg.system)


def env_for(cfg, lib, openssl_cli=False):
    """lib: fork (preloaded, negotiation on), stock (plain), or none.
    --libcrypto (the 3.5 base's own libcrypto.so.3) is preloaded before the
    fork; with --preload-stock the openssl CLI's stock side preloads it and
    --system (the 3.5 stock libssl) too, so that both sides are one base."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("LD_") or k.startswith("UTLS_") or k.startswith("PYTHON")
                   or k.startswith("GNUTLS_") or k.lower().endswith("_proxy")
                   or k in ("SSLKEYLOGFILE", "OPENSSL_CONF"))}
    env["HOME"] = cfg.work
    if lib == "fork":
        env["LD_PRELOAD"] = " ".join(p for p in (cfg.libcrypto, cfg.fork) if p)
    elif lib == "stock" and openssl_cli and cfg.preload_stock:
        env["LD_PRELOAD"] = " ".join(p for p in (cfg.libcrypto, cfg.system) if p)
    if lib in ("fork", "linked"):  # linked: ern_peer, linked to the fork (RPATH)
        env["UTLS_MODE"] = cfg.fork_mode
    return env


TLS_FLAG = {"1.2": "-tls1_2", "1.3": "-tls1_3"}
TLS_NAME = {"1.2": "TLSv1.2", "1.3": "TLSv1.3"}
GNUTLS_PRIO = {"1.2": "NORMAL:-VERS-ALL:+VERS-TLS1.2", "1.3": "NORMAL:-VERS-ALL:+VERS-TLS1.3"}


def grep(text, rx):
    m = re.search(rx, text, re.M)
    return m.group(1) if m else None


def check_version(cfg, who, seen):
    if seen != TLS_NAME[cfg.tls]:
        raise Failure("version", "%s negotiated %r, expected %s" % (who, seen, TLS_NAME[cfg.tls]))
    log("version OK: %s %s" % (who, seen))


def make_cert(cfg):
    cfg.cert, cfg.key = os.path.join(cfg.work, "cert.pem"), os.path.join(cfg.work, "key.pem")
    r = subprocess.run([cfg.openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", cfg.key,
                        "-out", cfg.cert, "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       capture_output=True, env=env_for(cfg, "none"), timeout=30)
    if r.returncode != 0:
        raise Failure("setup", "openssl req failed: %s" % r.stderr.decode(errors="replace"))


def make_msgs(cfg):
    """Lines of hex of several sizes. Every answer fits one 1024-byte read: openssl
    s_client reads 1024 bytes at a time, and in UTLS_MODE=unordered one SSL_read
    returns one whole record or fails (docs/unordered.md "One record per read")."""
    sizes = [16, 300, 40, 1000, 8, 700]
    cfg.msgs = [os.urandom(n // 2).hex().encode() + b"\n" for n in sizes]
    cfg.expect_msgs = list(cfg.msgs)
    if cfg.corrupt:
        cfg.msgs[2] = b"x" + cfg.msgs[2][1:]  # sent as is, but the expectation is computed from the original
    cfg.msgs_file = os.path.join(cfg.work, "msgs.txt")
    with open(cfg.msgs_file, "wb") as f:
        f.write(b"".join(cfg.msgs))


def answer(line, kind):
    body = line.rstrip(b"\r\n")
    return (body if kind == "echo" else body[::-1]) + b"\n"


# --------------------------------------------------------------------------
# servers and clients

def start_server(cfg, kind, lib):
    """kind: s_server, gnutls, go, tlslite, ern_peer. Returns (proc, port, answer kind)."""
    if kind in ("go", "tlslite", "ern_peer"):
        argv = {"go": [cfg.gopeer, "-role", "server", "-tls", cfg.tls, "-cert", cfg.cert, "-key", cfg.key],
                "tlslite": [cfg.tlslite_python, cfg.tlslite_peer, "server", "--tls", cfg.tls,
                            "--cert", cfg.cert, "--key", cfg.key],
                "ern_peer": [cfg.server_ern_peer or cfg.ern_peer, "server", "--tls", cfg.tls, "--cert", cfg.cert,
                             "--key", cfg.key]
                + (["--cipher", cfg.cipher] if cfg.cipher else []) + (["--etm", "0"] if cfg.mte else [])}[kind]
        pr = Proc("server_" + kind, argv, env_for(cfg, lib), cfg.work, stdin=False)
        port = int(wait_until(lambda: grep(pr.out().decode(errors="replace"), r"^LISTENING (\d+)"), 20,
                              "%s server to listen" % kind, [pr]))
        wait_until(lambda: port in listening_ports(pr.pid), 10, "%s LISTEN socket" % kind, [pr])
        return pr, port, "rev"
    for attempt in range(5):
        port = free_port()
        if kind == "s_server":
            argv = [cfg.openssl, "s_server", "-rev", "-naccept", "1", "-accept", "127.0.0.1:%d" % port,
                    "-cert", cfg.cert, "-key", cfg.key, TLS_FLAG[cfg.tls]] + cfg.extra_server
        else:  # gnutls
            argv = [cfg.gnutls_serv, "--echo", "-p", str(port), "--x509certfile", cfg.cert,
                    "--x509keyfile", cfg.key, "--priority", GNUTLS_PRIO[cfg.tls]]
        pr = Proc("server_" + kind, argv, env_for(cfg, lib, kind == "s_server"), cfg.work)
        try:
            wait_until(lambda: port in listening_ports(pr.pid), 20, "%s to listen on %d" % (kind, port), [pr])
            return pr, port, "echo" if kind == "gnutls" else "rev"
        except Failure as f:
            if f.category == "process" and re.search("in use|bind", pr.err() + pr.out().decode(errors="replace"),
                                                     re.I) and attempt < 4:
                log("port %d taken, retrying" % port)
                continue
            raise
    raise Failure("setup", "no free port")


def run_client(cfg, kind, lib, port, ans_kind):
    """Runs the client to completion; returns (proc, received bytes)."""
    expected = b"".join(answer(m, ans_kind) for m in cfg.expect_msgs)
    if kind in ("go", "tlslite", "ern_peer"):
        argv = {"go": [cfg.gopeer, "-role", "client", "-tls", cfg.tls, "-cert", cfg.cert,
                       "-addr", "127.0.0.1:%d" % port, "-msgs", cfg.msgs_file],
                "tlslite": [cfg.tlslite_python, cfg.tlslite_peer, "client", "--tls", cfg.tls,
                            "--port", str(port), "--msgs", cfg.msgs_file],
                "ern_peer": [cfg.client_ern_peer or cfg.ern_peer, "client", "--tls", cfg.tls, "--ca", cfg.cert,
                             "--port", str(port), "--msgs", cfg.msgs_file]
                + (["--cipher", cfg.cipher] if cfg.cipher else []) + (["--etm", "0"] if cfg.mte else [])}[kind]
        pr = Proc("client_" + kind, argv, env_for(cfg, lib), cfg.work, stdin=False)
        rc = pr.wait(30)
        if rc != 0:
            raise Failure("process", "%s client exited %d\n%s" % (kind, rc, pr.tails()))
        check_version(cfg, "%s client" % kind, grep(pr.err(), r"^VERSION (\S+)"))
        return pr, pr.out(), expected
    if kind == "s_client":
        argv = [cfg.openssl, "s_client", "-brief", "-nocommands", "-no_ign_eof",
                "-connect", "127.0.0.1:%d" % port, "-servername", "localhost", "-CAfile", cfg.cert,
                "-verify_return_error", "-verify_hostname", "localhost", TLS_FLAG[cfg.tls]] + cfg.extra_client
        pr = Proc("client_s_client", argv, env_for(cfg, lib, True), cfg.work)
        wait_until(lambda: "CONNECTION ESTABLISHED" in pr.err() and grep(pr.err(), r"^Protocol version: (\S+)"),
                   20, "s_client handshake", [pr])
        check_version(cfg, "s_client (%s)" % lib, grep(pr.err(), r"^Protocol version: (\S+)"))
        received = pr.out
    elif kind == "nss":
        # NSS's tstclnt: no certificate database (-D), the self-signed server
        # certificate accepted (-o), -v for the negotiated version on stderr.
        v = cfg.tls
        argv = [cfg.tstclnt, "-D", "-o", "-v", "-h", "127.0.0.1", "-p", str(port), "-V",
                "tls%s:tls%s" % (v, v)]
        pr = Proc("client_nss", argv, env_for(cfg, lib), cfg.work)
        received = pr.out
    else:  # gnutls-cli; --logfile keeps its stdout to the received bytes
        logf = os.path.join(cfg.work, "gnutls-cli.log")
        argv = [cfg.gnutls_cli, "-p", str(port), "--x509cafile", cfg.cert, "--verify-hostname", "localhost",
                "--priority", GNUTLS_PRIO[cfg.tls], "--logfile", logf, "127.0.0.1"]
        pr = Proc("client_gnutls", argv, env_for(cfg, lib), cfg.work)

        def logtext():
            try:
                return open(logf, errors="replace").read()
            except OSError:
                return ""
        # Its log file is block-buffered (read after it exits); it reads stdin only
        # once the handshake is complete, so the first line may be written at once.
        received = pr.out
    want = b""
    for i, m in enumerate(cfg.msgs):
        pr.write(m)
        want += answer(cfg.expect_msgs[i], ans_kind)
        try:
            wait_until(lambda: len(received()) >= len(want), 20, "the answer to line %d" % i, [pr])
        except Failure as f:
            raise Failure("data", "no (complete) answer to line %d: %s" % (i, f))
        if not want.startswith(received()[:len(want)]) and received()[:len(want)] != want:
            break  # the final comparison reports it
    if kind == "s_client":
        check_lib(cfg, pr, lib)  # still alive here: stdin is open
    if kind == "nss":
        # tstclnt neither ends nor half-closes when its stdin does: it waits
        # for the server. Every answer is in; the version from its -v lines.
        seen = grep(pr.err(), r"SSL version 3\.(\d) using")
        check_version(cfg, "tstclnt", {"3": "TLSv1.2", "4": "TLSv1.3"}.get(seen, seen))
        pr.kill()
        return pr, received(), expected
    pr.close_stdin()
    rc = pr.wait(20)
    if rc != 0:
        raise Failure("process", "%s exited %d\n%s" % (pr.name, rc, pr.tails()))
    if kind == "gnutls":
        if "Handshake was completed" not in logtext():
            raise Failure("process", "gnutls-cli logged no completed handshake:\n%s" % logtext()[-1500:])
        v = grep(logtext(), r"^- Description: \(TLS(1\.[23])")
        check_version(cfg, "gnutls-cli", "TLSv" + v if v else None)
    return pr, received(), expected


def check_data(who, got, want):
    if got != want:
        i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
        raise Failure("data", "%s received %d bytes, expected %d; first difference at byte %d: got %r want %r"
                      % (who, len(got), len(want), i, got[i:i + 40], want[i:i + 40]))
    log("data OK: %s received the %d expected bytes exactly (%d lines, both directions)"
        % (who, len(got), want.count(b"\n")))


PEER_CLIENT = {"openssl": "s_client", "gnutls": "gnutls", "go": "go", "tlslite": "tlslite", "fork": "s_client",
               "nss": "nss"}
PEER_SERVER = {"openssl": "s_server", "gnutls": "gnutls", "go": "go", "tlslite": "tlslite", "fork": "s_server"}


def cmd_matrix(cfg):
    make_cert(cfg)
    make_msgs(cfg)
    peer_lib = "fork" if cfg.peer == "fork" else "stock"
    if cfg.peer not in PEER_SERVER and cfg.fork_role == "client":
        raise Failure("setup", "%s runs only as a client (of the fork as the server)" % cfg.peer)
    if cfg.fork_role == "server":
        server, port, ans = start_server(cfg, "s_server", "fork")
        check_lib(cfg, server, "fork")
        client, got, want = run_client(cfg, PEER_CLIENT[cfg.peer], peer_lib, port, ans)
    else:
        server, port, ans = start_server(cfg, PEER_SERVER[cfg.peer], peer_lib)
        if cfg.peer in ("openssl", "fork"):
            check_lib(cfg, server, peer_lib)
        client, got, want = run_client(cfg, "s_client", "fork", port, ans)
    check_data("%s client" % ("fork" if cfg.fork_role == "client" else cfg.peer), got, want)
    if cfg.fork_role == "server" or cfg.peer in ("openssl", "fork"):
        rc = server.wait(20, "exit after its one connection")
        if rc != 0:
            raise Failure("process", "s_server exited %d\n%s" % (rc, server.tails()))
        check_version(cfg, "s_server", grep(server.err(), r"^Protocol version: (\S+)"))
    elif cfg.peer in ("go", "tlslite"):
        rc = server.wait(20, "exit after its one connection")
        if rc != 0:
            raise Failure("process", "%s server exited %d\n%s" % (cfg.peer, rc, server.tails()))
        check_version(cfg, "%s server" % cfg.peer, grep(server.err(), r"^VERSION (\S+)"))


def parse_ern(pr):
    m = re.search(r"^ERN role=(\S+) version=(\S+) status=0x([0-9a-f]+) sent=(\d+) received=(\d+)", pr.err(), re.M)
    if not m:
        raise Failure("process", "%s printed no ERN line\n%s" % (pr.name, pr.tails()))
    return {"version": m.group(2), "status": int(m.group(3), 16), "sent": int(m.group(4)),
            "received": int(m.group(5))}


BITS = {0x1: "OFFERED", 0x2: "ACCEPTED", 0x4: "TX", 0x8: "RX"}


def bits(v):
    return "|".join(n for b, n in sorted(BITS.items()) if v & b) or "0"


def cmd_forkfork(cfg):
    make_cert(cfg)
    make_msgs(cfg)
    server, port, ans = start_server(cfg, "ern_peer", "linked")
    # linked (not preloaded) to the fork; --server-fork: the other base's build
    check_maps(server, "fork", cfg.server_fork or cfg.fork, cfg.system)
    client, got, want = run_client(cfg, "ern_peer", "linked", port, ans)
    check_data("ern_peer client", got, want)
    rc = server.wait(20)
    if rc != 0:
        raise Failure("process", "ern_peer server exited %d\n%s" % (rc, server.tails()))
    n = len(cfg.msgs)
    for pr in (client, server):
        e = parse_ern(pr)
        log("%s: %s status=0x%x (%s) records sent with a number=%d received with a number=%d"
            % (pr.name, e["version"], e["status"], bits(e["status"]), e["sent"], e["received"]))
        if not cfg.expect_legacy:
            # utls.h: OFFERED = "server: offered; client: saw a valid offer",
            # then ACCEPTED, TX and RX: all four bits on both ends.
            need = 0xF
            if e["status"] & need != need:
                raise Failure("ern", "%s: status 0x%x (%s), expected at least %s"
                              % (pr.name, e["status"], bits(e["status"]), bits(need)))
            # The client switches at line 2 at the latest, the server at its answer to it.
            if e["sent"] < n - 1 or e["received"] < n - 1:
                raise Failure("ern", "%s: only %d numbered records sent / %d received for %d lines"
                              % (pr.name, e["sent"], e["received"], n))
        else:
            if e["status"] != 0 or e["sent"] or e["received"]:
                raise Failure("ern", "%s: TLS %s with %s must not negotiate (docs/ern.md), status 0x%x sent %d "
                              "received %d" % (pr.name, cfg.tls, cfg.cipher, e["status"], e["sent"], e["received"]))
    log("ern OK: %s" % ("numbers in both directions on both ends" if not cfg.expect_legacy
                        else "TLS %s with %s: no negotiation, as documented" % (cfg.tls, cfg.cipher)))


# --------------------------------------------------------------------------
# captures

class Capture(TcpdumpCapture):
    def __init__(self, cfg, path, port):
        super().__init__([cfg.tcpdump, "-i", "lo", "-w", path, "--immediate-mode", "-U", "-n",
                          "tcp port %d" % port], path, path + ".log", lambda m: Failure("setup", m),
                         start_new_session=True, preexec_fn=child_setup)

    def fins(self, cfg):
        r = subprocess.run([cfg.tshark, "-r", self.path, "-Y", "tcp.flags.fin==1", "-T", "fields",
                            "-e", "frame.number"], capture_output=True, timeout=20)
        return len(r.stdout.split())

    def stop(self, cfg=None):
        if cfg is not None and self.proc.poll() is None:
            # Under load tcpdump lags: wait until both FINs are in the file.
            end = time.monotonic() + 8
            while self.fins(cfg) < 2 and time.monotonic() < end:
                time.sleep(0.1)
        super().stop()


def capture_session(cfg, lib):
    port = free_port()
    pcap = os.path.join(cfg.work, "%s.pcap" % lib)
    cap = Capture(cfg, pcap, port)
    try:
        argv = [cfg.openssl, "s_server", "-rev", "-naccept", "1", "-accept", "127.0.0.1:%d" % port,
                "-cert", cfg.cert, "-key", cfg.key, TLS_FLAG[cfg.tls]]
        server = Proc("server_%s" % lib, argv, env_for(cfg, lib, True), cfg.work)
        wait_until(lambda: port in listening_ports(server.pid), 20, "s_server to listen", [server])
        check_lib(cfg, server, lib)
        extra = cfg.extra_client if lib == "fork" else []
        cfg_extra, cfg.extra_client = cfg.extra_client, extra
        try:
            client, got, want = run_client(cfg, "s_client", lib, port, "rev")
        finally:
            cfg.extra_client = cfg_extra
        check_data("s_client (%s)" % lib, got, want)
        if server.wait(20) != 0:
            raise Failure("process", "s_server exited %d\n%s" % (server.p.returncode, server.tails()))
    finally:
        cap.stop(cfg)
    return pcap


def tshark_fields(cfg, pcap, *fields, flt=None):
    argv = [cfg.tshark, "-r", pcap, "-T", "fields", "-E", "occurrence=a", "-E", "separator=\t"]
    if flt:
        argv += ["-Y", flt]
    for f in fields:
        argv += ["-e", f]
    r = subprocess.run(argv, capture_output=True, timeout=30)
    if r.returncode != 0:
        raise Failure("setup", "tshark failed: %s" % r.stderr.decode(errors="replace"))
    return [line.split("\t") for line in r.stdout.decode(errors="replace").splitlines() if line.strip()]


def records(cfg, pcap, port):
    """Per direction (c2s, s2c): list of (outer content type, length) in capture order."""
    rows = tshark_fields(cfg, pcap, "tcp.dstport", "tls.record.opaque_type", "tls.record.content_type",
                         "tls.record.length", flt="tls.record")
    out = {"c2s": [], "s2c": []}
    for r in rows:
        d = "c2s" if int(r[0]) == port else "s2c"
        types = r[1].split(",") if r[1] else []
        ctypes_ = r[2].split(",") if r[2] else []
        lens = r[3].split(",") if r[3] else []
        # content_type for cleartext records, opaque_type for TLS 1.3 protected ones; in one
        # segment the cleartext records always come first (ServerHello, CCS, then protected).
        allt = ctypes_ + types
        if len(allt) != len(lens):
            raise Failure("setup", "tshark: %d record types for %d lengths in %r" % (len(allt), len(lens), r))
        for t, ln in zip(allt, lens):
            out[d].append((int(t), int(ln)))
    return out


def server_port(cfg, pcap):
    rows = tshark_fields(cfg, pcap, "tcp.dstport", flt="tcp.flags.syn==1 && tcp.flags.ack==0")
    return int(rows[0][0])


def cmd_ja3(cfg):
    make_cert(cfg)
    make_msgs(cfg)
    stock = capture_session(cfg, "stock")
    fork = capture_session(cfg, "fork")
    fp = {}
    for name, pcap in (("stock", stock), ("fork", fork)):
        ja3 = [r[0] for r in tshark_fields(cfg, pcap, "tls.handshake.ja3", flt="tls.handshake.type==1")]
        ja3s = [r[0] for r in tshark_fields(cfg, pcap, "tls.handshake.ja3s", flt="tls.handshake.type==2")]
        ja3f = [r[0] for r in tshark_fields(cfg, pcap, "tls.handshake.ja3_full", flt="tls.handshake.type==1")]
        ja3sf = [r[0] for r in tshark_fields(cfg, pcap, "tls.handshake.ja3s_full", flt="tls.handshake.type==2")]
        if len(ja3) != 1 or len(ja3s) != 1 or not ja3[0] or not ja3s[0]:
            raise Failure("ja3", "%s capture: expected one ClientHello and one ServerHello, got JA3 %r JA3S %r"
                          % (name, ja3, ja3s))
        fp[name] = (ja3[0], ja3s[0], ja3f[0], ja3sf[0])
        log("%s: JA3 %s (%s)  JA3S %s (%s)" % (name, ja3[0], ja3f[0], ja3s[0], ja3sf[0]))
    if cfg.wrong_ja3:
        fp["stock"] = ("0" * 32,) + fp["stock"][1:]
        log("self-test: expecting a wrong JA3 %s" % fp["stock"][0])
    if fp["stock"][0] != fp["fork"][0]:
        raise Failure("ja3", "JA3 differs: stock %s fork %s" % (fp["stock"][0], fp["fork"][0]))
    if fp["stock"][1] != fp["fork"][1]:
        raise Failure("ja3", "JA3S differs: stock %s fork %s" % (fp["stock"][1], fp["fork"][1]))
    log("JA3 and JA3S equal: %s / %s" % fp["fork"][:2])
    # Records: same count and types per direction; lengths show the negotiation (TLS 1.3).
    rs, rf = records(cfg, stock, server_port(cfg, stock)), records(cfg, fork, server_port(cfg, fork))
    for d in ("c2s", "s2c"):
        ts, tf = [t for t, _ in rs[d]], [t for t, _ in rf[d]]
        diffs = [lf - ls for (_, ls), (_, lf) in zip(rs[d], rf[d])]
        log("%s: %d records stock, %d fork; types %s; fork-stock length differences %s"
            % (d, len(ts), len(tf), "same" if ts == tf else "DIFFER", diffs))
        if ts != tf:
            raise Failure("records", "%s: record types/counts differ: stock %s fork %s" % (d, ts, tf))
        # docs/ern.md: +24 in the first numbered record (token 16 + number 8), +8 in later ones,
        # +20 in a TLS 1.3 ticket with the offer (s2c only). TLS 1.2 (AES-GCM, the default
        # suite here): the offer is the explicit nonce, so no length changes for it.
        if 24 not in diffs:
            raise Failure("records", "%s: no record 24 bytes longer than stock: the fork did not switch "
                          "to numbers (differences %s)" % (d, diffs))
        if any(x not in (0, 8, 24, 20 if d == "s2c" and cfg.tls == "1.3" else 0) for x in diffs):
            raise Failure("records", "%s: record length differences other than the documented ones: %s"
                          % (d, diffs))
    if cfg.tls == "1.3" and 20 not in [x - y for (_, y), (_, x) in zip(rs["s2c"], rf["s2c"])]:
        raise Failure("records", "s2c: no ticket 20 bytes longer than stock (no offer?)")
    r = subprocess.run([cfg.python, cfg.checker, "--label-a", "stock", "--label-b", "fork", stock, fork],
                       capture_output=True, timeout=60)
    out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
    log("utls-wirecheck (exit %d):\n%s" % (r.returncode, out))
    if r.returncode != 0:
        raise Failure("wirecheck", "utls-wirecheck found differences (exit %d)" % r.returncode)


def cmd_tlslite_setup(cfg):
    venv = cfg.venv
    py = os.path.join(venv, "bin", "python")
    probe = [py, "-c", "import tlslite; print(tlslite.__version__)"]
    if os.path.exists(py) and subprocess.run(probe, capture_output=True).returncode == 0:
        log("tlslite-ng already installed in %s" % venv)
        return
    r = subprocess.run([cfg.python, "-m", "venv", venv], capture_output=True, timeout=120)
    if r.returncode != 0:
        raise Failure("setup", "python -m venv %s failed: %s" % (venv, r.stderr.decode(errors="replace")))
    env = dict(os.environ)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    r = subprocess.run([py, "-m", "pip", "install", "tlslite-ng"], capture_output=True, timeout=170, env=env)
    if r.returncode != 0:
        raise Failure("setup", "pip install tlslite-ng failed (PyPI reachable?): %s"
                      % (r.stdout + r.stderr).decode(errors="replace")[-2000:])
    r = subprocess.run(probe, capture_output=True)
    if r.returncode != 0:
        raise Failure("setup", "tlslite-ng does not import after install: %s" % r.stderr.decode(errors="replace"))
    log("tlslite-ng %s installed in %s" % (r.stdout.decode().strip(), venv))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cmd", choices=["matrix", "forkfork", "ja3", "tlslite-setup"])
    ap.add_argument("--fork", help="the fork's libssl.so.3")
    ap.add_argument("--system", help="the system libssl.so.3")
    ap.add_argument("--tls", choices=["1.2", "1.3"], default="1.3")
    ap.add_argument("--peer", choices=sorted(PEER_CLIENT))
    ap.add_argument("--fork-role", choices=["client", "server"])
    ap.add_argument("--fork-mode", default="unordered,negotiate,all")
    ap.add_argument("--cipher", help="TLS 1.2 cipher list: forkfork (both ern_peer ends); matrix and ja3 "
                    "(openssl s_server/s_client only)")
    ap.add_argument("--mte", action="store_true", help="forkfork: TLS 1.2 CBC with MAC-then-encrypt")
    ap.add_argument("--expect-legacy", action="store_true",
                    help="forkfork: the suite cannot carry the offer; neither end may negotiate")
    ap.add_argument("--openssl", default="/usr/bin/openssl")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--gnutls-cli", default="/usr/bin/gnutls-cli")
    ap.add_argument("--gnutls-serv", default="/usr/bin/gnutls-serv")
    ap.add_argument("--tstclnt", default="/usr/bin/tstclnt")
    ap.add_argument("--gopeer")
    ap.add_argument("--venv")
    ap.add_argument("--ern-peer")
    ap.add_argument("--libcrypto", help="the fork's own libcrypto.so.3 (the 3.5 base), preloaded with it")
    ap.add_argument("--preload-stock", action="store_true",
                    help="--system is a stock libssl to preload into the openssl CLI (the 3.5 base's)")
    ap.add_argument("--server-ern-peer", help="forkfork: the server's ern_peer (default --ern-peer), e.g. "
                    "the other base's build")
    ap.add_argument("--client-ern-peer", help="forkfork: the client's ern_peer (default --ern-peer)")
    ap.add_argument("--server-fork", help="forkfork: the libssl the server's ern_peer maps (default --fork)")
    ap.add_argument("--tshark", default="/usr/bin/tshark")
    ap.add_argument("--tcpdump", default="/usr/bin/tcpdump")
    ap.add_argument("--checker")
    ap.add_argument("--deadline", type=float, default=55.0)
    ap.add_argument("--expect-fail", choices=CATEGORIES)
    ap.add_argument("--corrupt", action="store_true", help="self-test: one line sent altered")
    ap.add_argument("--wrong-ja3", action="store_true", help="self-test: expect a wrong JA3")
    ap.add_argument("--client-extra", default="", help="self-test: extra s_client options (fork side)")
    a = ap.parse_args()

    cfg = argparse.Namespace(**vars(a))
    cfg.python = os.path.realpath(a.python)
    cfg.fork = os.path.realpath(a.fork) if a.fork else None
    cfg.system = os.path.realpath(a.system) if a.system else None
    cfg.libcrypto = os.path.realpath(a.libcrypto) if a.libcrypto else None
    cfg.extra_client = a.client_extra.split()
    cfg.extra_server = []
    if a.cipher and a.cmd in ("matrix", "ja3"):
        # TLS 1.2 suite of the openssl CLI on both sides (fork and stock alike)
        cfg.extra_client += ["-cipher", a.cipher]
        cfg.extra_server += ["-cipher", a.cipher]
    cfg.here = os.path.dirname(os.path.abspath(__file__))
    cfg.tlslite_peer = os.path.join(cfg.here, "tlslite_peer.py")
    cfg.tlslite_python = os.path.join(a.venv, "bin", "python") if a.venv else None

    def body(work):
        cfg.work = work
        if a.cmd == "matrix" and a.peer == "tlslite" and not os.path.exists(cfg.tlslite_python or ""):
            raise Failure("setup", "tlslite-ng venv missing (%s): the ern-interop.tlslite.setup test installs "
                          "it with pip from PyPI; it failed or did not run" % a.venv)
        if a.cmd == "matrix" and a.peer == "go" and not os.path.exists(a.gopeer or ""):
            raise Failure("setup", "the Go peer %s was not built (ern-interop.go.build)" % a.gopeer)
        if a.cmd == "matrix":
            log("scenario: fork (%s, UTLS_MODE=%s) as %s <-> %s, TLS %s"
                % (cfg.fork, cfg.fork_mode, a.fork_role, a.peer, a.tls))
        {"matrix": cmd_matrix, "forkfork": cmd_forkfork, "ja3": cmd_ja3, "tlslite-setup": cmd_tlslite_setup}[a.cmd](cfg)

    return run_driver(body, "utls-ern-interop-", a.deadline if a.cmd != "tlslite-setup" else None,
                      a.expect_fail, keep_var="ERN_INTEROP_KEEP")


if __name__ == "__main__":
    sys.exit(main())
