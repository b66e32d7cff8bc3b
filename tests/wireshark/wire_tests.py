#!/usr/bin/python3
"""Driver of the wireshark tests (ctest label wireshark). Standard library only.

  compare   capture the same workload under stock libssl and under the preloaded
            fork (unordered mode on at the receivers) and run utls-wirecheck:
            no difference expected; with --alter the fork side's ClientHello is
            changed and the checker must report that difference.
  vectors   utls-wirecheck's JA4/JA4S test vectors, and a tampered copy that
            must fail.
  plugin    keylogged fork<->fork capture: tshark (as root it loads only the
            installed plugin) shows utls.* fields; the stock dissection is
            unchanged by the plugin (tshark -V with and without it).
  keylog    SSLKEYLOGFILE through the preloaded fork lets tshark decrypt
            openssl s_client (which has no SSLKEYLOGFILE support of its own,
            so the fork wrote the keys: checked against stock, which writes
            nothing) and curl.
  preload   examples/preload over the lossy testbed: the unmodified Python
            receiver under the preloaded fork gets messages out of order, all
            of them; the plugin marks out-of-order candidates in the
            receiver-side capture.

Exit 0 pass, 1 fail, 77 skip (ctest SKIP_RETURN_CODE).
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from tcpdump_capture import TcpdumpCapture, missing_prerequisite

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from preload_env import PRELOAD_VARS, preload_env_args, preload_vars  # noqa: E402

SKIP = 77


class Fail(Exception):
    pass


def log(*a):
    print(*a, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    """True when a TCP socket listens on |port| (reads /proc, connects to nothing:
    a probe connection would use up s_server's -naccept)."""
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def wait_port(port, timeout=15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if listening(port):
            return
        time.sleep(0.05)
    raise Fail("nothing listens on port %d" % port)


class Capture(TcpdumpCapture):
    """tcpdump --immediate-mode -U on an interface, stopped with SIGINT."""

    def __init__(self, path, bpf, iface="lo", prefix=()):
        super().__init__(list(prefix) + ["tcpdump", "-i", iface, "-w", path, "--immediate-mode", "-U",
                                         "-n", bpf], path, path + ".tcpdump.log", Fail)


def lib_env(lib, fork, system, extra=None):
    env = dict(os.environ)
    for k in PRELOAD_VARS + ("UTLS_MODE", "SSLKEYLOGFILE", "OPENSSL_CONF"):
        env.pop(k, None)
    if lib == "fork":
        env.update(preload_vars(fork))
    elif lib == "stock":
        env.update(preload_vars(system))
    if lib in ("fork", "stock"):
        env["WS_PEER_EXPECT"] = lib
    env.update(extra or {})
    return env


def make_cert(work):
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


def write_conf(path, ciphersuites=None, utls_mode=None):
    lines = ["openssl_conf = openssl_init", "[openssl_init]", "ssl_conf = ssl_sect", "[ssl_sect]",
             "system_default = system_default_sect", "[system_default_sect]"]
    if ciphersuites:
        lines.append("Ciphersuites = " + ciphersuites)
    if utls_mode:
        lines.append("UTLSMode = " + utls_mode)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


# TLS 1.2 ciphers are chosen with set_ciphers; TLS 1.3 suites through the
# configuration file (Python cannot set them).
CIPHERS = {
    "1.2": ["ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305",
            "ECDHE-ECDSA-AES128-SHA256"],
    "1.3": ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"],
}


def run_workload(a, work, lib, tls, alter, keylog=None):
    """One capture: a server and one client connection per cipher."""
    cert, key = make_cert(work) if not os.path.exists(os.path.join(work, "cert.pem")) else (
        os.path.join(work, "cert.pem"), os.path.join(work, "key.pem"))
    port = free_port()
    pcap = os.path.join(work, "%s-tls%s%s.pcap" % (lib, tls, "-" + alter if alter else ""))
    peer = [a.python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ws_peer.py")]
    ciphers = CIPHERS[tls]
    extra = {}
    if lib == "fork":
        # unordered reading on at both receivers: the server through the
        # environment, the client through the configuration file (below)
        extra["UTLS_MODE"] = a.fork_mode
    if keylog:
        extra["SSLKEYLOGFILE"] = keylog
    cap = Capture(pcap, "tcp port %d" % port)
    try:
        srv = subprocess.Popen(peer + ["server", "--port", str(port), "--tls", tls, "--cert", cert, "--key", key,
                                       "--connections", str(len(ciphers))],
                               env=lib_env(lib, a.fork, a.system, extra), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        try:
            wait_port_from(srv)
            for c in ciphers:
                args = peer + ["client", "--port", str(port), "--tls", tls]
                cextra = dict(extra)
                cextra.pop("UTLS_MODE", None)
                conf = write_conf(os.path.join(work, "%s-%s.cnf" % (lib, c)),
                                  ciphersuites=c if tls == "1.3" else None,
                                  utls_mode=a.fork_mode if lib == "fork" else None)
                cextra["OPENSSL_CONF"] = conf
                args += ["--cipher", c]
                if alter == "sni":
                    args += ["--sni", "localhost"]
                elif alter == "groups":
                    args += ["--groups", "prime256v1"]
                elif alter in ("cipher-list", "cipher-order"):
                    # the whole list; the altered side offers it in reverse order
                    args[args.index("--cipher") + 1] = ":".join(ciphers)
                    if alter == "cipher-order":
                        args.append("--reverse-ciphers")
                r = subprocess.run(args, env=lib_env(lib, a.fork, a.system, cextra), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, timeout=60)
                if r.returncode != 0:
                    raise Fail("client (%s, %s) failed: %s" % (lib, c, r.stderr.decode(errors="replace")))
            out, err = srv.communicate(timeout=60)
            if srv.returncode != 0:
                raise Fail("server (%s) failed: %s" % (lib, err.decode(errors="replace")))
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait()
    finally:
        cap.stop()
    return pcap


def wait_port_from(proc):
    line = proc.stdout.readline()
    if b"listening" not in line:
        raise Fail("server did not start: %s" % proc.stderr.read().decode(errors="replace"))


def checker(a, *args):
    r = subprocess.run([a.python, a.checker] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return r.returncode, r.stdout.decode(errors="replace")


def cmd_compare(a, work):
    stock = run_workload(a, work, "stock", a.tls, "cipher-list" if a.alter == "cipher-order" else None)
    fork = run_workload(a, work, "fork", a.tls, a.alter)
    rc, out = checker(a, "--label-a", "stock", "--label-b", "fork", stock, fork)
    log(out)
    if not a.alter:
        if rc != 0:
            raise Fail("the checker found differences between stock and fork (exit %d)" % rc)
        conns = re.search(r"RESULT: IDENTICAL .*\((\d+) connection", out)
        if not conns or int(conns.group(1)) != len(CIPHERS[a.tls]):
            raise Fail("expected %d connections compared" % len(CIPHERS[a.tls]))
        return
    if rc != 1:
        raise Fail("the altered ClientHello (%s) was not reported (exit %d)" % (a.alter, rc))
    want = {"sni": "client.extensions", "groups": "client.groups", "cipher-order": "client.ciphers"}[a.alter]
    if not re.search(r"^\s+\[conn \d+\] %s" % re.escape(want), out, re.M):
        raise Fail("the checker failed but did not name %s" % want)
    log("expected failure: the checker reported the altered %s" % want)


def cmd_vectors(a, work):
    rc, out = checker(a, "--vectors", a.vectors)
    log(out)
    if rc != 0:
        raise Fail("JA4 vectors do not match")
    # The check must be able to fail: one expected value changed.
    doc = json.load(open(a.vectors))
    doc["vectors"][0]["expected"]["ja4"] = doc["vectors"][0]["expected"]["ja4"][:-1] + "0"
    bad = os.path.join(work, "tampered.json")
    json.dump(doc, open(bad, "w"))
    rc, out = checker(a, "--vectors", bad)
    if rc == 0 or "FAIL" not in out:
        raise Fail("a tampered vector was accepted")
    log("tampered vector rejected, as it must be")


def tls_decode_as(a, pcap):
    """tls_decode_as returns tshark options that decode every TCP port of the
    connections in |pcap| (each test captures only its own) as TLS. The ports
    are ephemeral and random, and a client port can be one a Wireshark
    dissector owns (44818 is EtherNet/IP): tshark would then give the stream
    to that dissector instead of TLS and the test would fail by chance."""
    r = subprocess.run([a.tshark, "-r", pcap, "-Y", "tcp.flags.syn == 1", "-T", "fields",
                        "-e", "tcp.srcport", "-e", "tcp.dstport"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise Fail("tshark could not list the ports of %s: %s" % (pcap, r.stderr.decode(errors="replace")))
    ports = sorted({int(p) for p in r.stdout.decode().split() if p.isdigit()})
    opts = []
    for port in ports:
        opts += ["-d", "tcp.port==%d,tls" % port]
    return opts


# Decode As options per capture path (tls_decode_as), listed once per capture;
# every capture is written completely before tshark reads it.
_decode_as = {}


def tshark(a, *args):
    """tshark runs a.tshark with |args|; reading a capture ("-r PCAP" first),
    its connections are decoded as TLS (tls_decode_as). Returns stdout."""
    args = list(args)
    if len(args) >= 2 and args[0] == "-r":
        if args[1] not in _decode_as:
            _decode_as[args[1]] = tls_decode_as(a, args[1])
        args = args[:2] + _decode_as[args[1]] + args[2:]
    r = subprocess.run([a.tshark] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise Fail("tshark %s failed: %s" % (" ".join(args), r.stderr.decode(errors="replace")))
    return r.stdout.decode(errors="replace")


def strip_utls(text):
    """Removes the top-level uTLS subtree of each frame from tshark -V output."""
    out, skipping = [], False
    for line in text.splitlines():
        if not line.startswith(" "):
            skipping = line.startswith(("uTLS ", "[uTLS "))
        if not skipping:
            out.append(line)
    return "\n".join(out)


def cmd_plugin(a, work):
    if not os.path.exists(a.plugin):
        raise Fail("the plugin is not installed at %s (the wireshark.plugin.install fixture does it)" % a.plugin)
    keylog = os.path.join(work, "keys.log")
    pcap = run_workload(a, work, "fork", a.tls, None, keylog=keylog)
    if not os.path.getsize(keylog):
        raise Fail("no key log written")
    kl = ["-o", "tls.keylog_file:" + keylog]
    out = tshark(a, "-r", pcap, *kl, "-T", "fields", "-E", "occurrence=a", "-e", "frame.number",
                 "-e", "utls.record_offset", "-e", "utls.record.content_type", "-e", "utls.ooo_candidate",
                 "-e", "utls.plaintext_len")
    rows = [line.split("\t") for line in out.splitlines()]
    offsets = [r for r in rows if len(r) > 1 and r[1]]
    plain = sorted(int(v) for r in rows if len(r) > 4 and r[4] for v in r[4].split(","))
    log("frames with utls.record_offset: %d; utls.plaintext_len values: %s" % (len(offsets), plain))
    if not offsets:
        raise Fail("no utls.record_offset field in the keylogged capture")
    # the workload's messages: 11, 1001, 5001 bytes and bye (4) each way, per connection
    want = sorted([11, 1001, 5001, 4] * len(CIPHERS[a.tls]) + [11, 1001, 5001] * len(CIPHERS[a.tls]))
    if plain != want:
        raise Fail("utls.plaintext_len %s, expected %s" % (plain, want))
    # The stock dissection does not change with the plugin loaded.
    with_plugin = strip_utls(tshark(a, "-r", pcap, *kl, "-V"))
    without = strip_utls(tshark(a, "-r", pcap, *kl, "-V", "--disable-protocol", "utls"))
    if with_plugin != without:
        import difflib
        log("\n".join(list(difflib.unified_diff(without.splitlines(), with_plugin.splitlines(), lineterm=""))[:40]))
        raise Fail("tshark -V differs with the plugin (outside its uTLS subtree)")
    with_fields = tshark(a, "-r", pcap, *kl, "-T", "fields", "-e", "tls.record.content_type", "-e", "tls.app_data",
                         "-e", "_ws.col.Info", "-e", "_ws.col.Protocol")
    without_fields = tshark(a, "-r", pcap, *kl, "-T", "fields", "-e", "tls.record.content_type", "-e",
                            "tls.app_data", "-e", "_ws.col.Info", "-e", "_ws.col.Protocol",
                            "--disable-protocol", "utls")
    if with_fields != without_fields:
        raise Fail("TLS fields or columns differ with the plugin")
    log("tshark -V and the TLS columns are identical with and without the plugin")


def cmd_keylog(a, work):
    cert, key = make_cert(work)
    results = {}
    for lib in ("fork", "stock"):
        port = free_port()
        pcap = os.path.join(work, "%s-%s.pcap" % (a.client, lib))
        keylog = os.path.join(work, "%s-%s.keys" % (a.client, lib))
        cap = Capture(pcap, "tcp port %d" % port)
        srv = None
        try:
            if a.client == "curl":
                www = os.path.join(work, "www")
                os.makedirs(www, exist_ok=True)
                open(os.path.join(www, "hello.txt"), "w").write("hello from s_server\n")
                srv = subprocess.Popen(["openssl", "s_server", "-accept", str(port), "-cert", cert, "-key", key,
                                        "-WWW", "-naccept", "1", "-tls" + a.tls.replace(".", "_")], cwd=www,
                                       env=lib_env("none", a.fork, a.system), stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
                wait_port(port)
                r = subprocess.run(["curl", "-sk", "--tlsv" + a.tls, "https://127.0.0.1:%d/hello.txt" % port],
                                   env=lib_env(lib, a.fork, a.system, {"SSLKEYLOGFILE": keylog}),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
                if b"hello from s_server" not in r.stdout:
                    raise Fail("curl did not get the file: %s" % r.stderr.decode(errors="replace"))
            else:
                srv = subprocess.Popen(["openssl", "s_server", "-accept", str(port), "-cert", cert, "-key", key,
                                        "-naccept", "1", "-quiet", "-tls" + a.tls.replace(".", "_")],
                                       env=lib_env("none", a.fork, a.system), stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                wait_port(port)
                r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-quiet", "-no_ign_eof",
                                    "-tls" + a.tls.replace(".", "_")], input=b"secret line\n",
                                   env=lib_env(lib, a.fork, a.system, {"SSLKEYLOGFILE": keylog}),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
                time.sleep(0.3)
        finally:
            if srv is not None:
                if srv.poll() is None:
                    srv.terminate()
                try:
                    srv.wait(5)
                except subprocess.TimeoutExpired:
                    srv.kill()
                    srv.wait()
            cap.stop()
        size = os.path.getsize(keylog) if os.path.exists(keylog) else 0
        kl = ["-o", "tls.keylog_file:" + keylog] if size else []
        if a.client == "curl":
            got = tshark(a, "-r", pcap, *kl, "-Y", "http.request.method == \"GET\"", "-T", "fields",
                         "-e", "http.request.uri")
            decrypted = "/hello.txt" in got
        else:
            got = tshark(a, "-r", pcap, *kl, "-T", "fields", "-e", "utls.plaintext_len", "-e", "data.data")
            decrypted = "736563726574" in got.replace(":", "")  # "secret"
        results[lib] = (size, decrypted)
        log("%s under %s libssl: key log %d bytes, tshark decrypts: %s" % (a.client, lib, size, decrypted))
    if not results["fork"][1]:
        raise Fail("tshark could not decrypt the %s session with the fork's SSLKEYLOGFILE" % a.client)
    if a.client == "s_client" and results["stock"][0]:
        raise Fail("stock s_client wrote a key log: the test cannot tell who wrote the fork's")
    if a.client == "s_client":
        log("stock libssl wrote no key log for s_client, so the fork wrote the keys")
    else:
        log("note: curl writes SSLKEYLOGFILE itself (stock: %d bytes); with the fork, curl's own key log "
            "callback replaces the one the fork installs at SSL_CTX_new" % results["stock"][0])


def cmd_preload(a, work):
    if os.geteuid() != 0:
        log("SKIP: the testbed needs root")
        return SKIP
    if not os.access(a.testbed, os.X_OK):
        log("SKIP: no testbed at %s" % a.testbed)
        return SKIP
    T = [a.testbed, "--prefix", a.prefix]
    cert, key = make_cert(work)
    up = subprocess.run(T + ["up", "--rtt", "20", "--loss", str(a.loss), "--seed", str(a.seed)],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    log(up.stdout.decode(errors="replace"))
    if up.returncode != 0:
        raise Fail("testbed up failed")
    try:
        rcv_addr = subprocess.run(T + ["addr", "receiver"], stdout=subprocess.PIPE, check=True).stdout.decode().strip()
        port = 4433
        pcap = os.path.join(work, "receiver.pcap")
        cap = Capture(pcap, "tcp port %d" % port, iface="eth0", prefix=T + ["exec", "receiver", "--"])
        try:
            recv_out = os.path.join(work, "receiver.out")
            with open(recv_out, "w") as ro:
                rcv = subprocess.Popen(T + ["exec", "receiver", "--", "env"] + preload_env_args(a.fork) + [
                                            "UTLS_MODE=unordered,tap,port=%d" % port, a.python, os.path.join(a.example, "receiver.py"),
                                            "--port", str(port), "--cert", cert, "--key", key, "--tls", a.tls],
                                       stdout=ro, stderr=subprocess.PIPE)
                time.sleep(0.5)
                snd = subprocess.run(T + ["exec", "sender", "--", a.python, os.path.join(a.example, "sender.py"),
                                          "--host", rcv_addr, "--port", str(port), "--count", str(a.count),
                                          "--size", "1000", "--tls", a.tls],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
                if snd.returncode != 0:
                    raise Fail("sender failed: %s" % snd.stderr.decode(errors="replace"))
                try:
                    _, err = rcv.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    rcv.kill()
                    raise Fail("receiver did not finish")
                if rcv.returncode != 0:
                    raise Fail("receiver failed: %s" % err.decode(errors="replace"))
                if b"LD_PRELOAD" in err:
                    raise Fail("the fork was not preloaded: %s" % err.decode(errors="replace"))
        finally:
            cap.stop()
        seqs = [int(x) for x in open(recv_out).read().split()[1:]]
        inversions = sum(1 for x, y in zip(seqs, seqs[1:]) if y < x)
        log("received %d messages, %d out of order; first 40: %s" % (len(seqs), inversions, seqs[:40]))
        if sorted(seqs) != list(range(a.count)):
            raise Fail("not every message arrived exactly once")
        if inversions == 0:
            raise Fail("no message arrived out of order over the lossy testbed")
        if os.path.exists(a.plugin):
            out = tshark(a, "-r", pcap, "-T", "fields", "-E", "occurrence=a", "-e", "utls.ooo_candidate")
            marked = sum(v == "1" for line in out.splitlines() for v in line.split(","))
            log("records the plugin marks as out-of-order candidates in the receiver capture: %d" % marked)
            if marked == 0:
                raise Fail("the plugin marked no out-of-order candidate in a lossy receiver capture")
    finally:
        subprocess.run(T + ["down"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=("compare", "vectors", "plugin", "keylog", "preload"))
    ap.add_argument("--fork", required=True)
    ap.add_argument("--system", required=True)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--tshark", default="/usr/bin/tshark")
    ap.add_argument("--checker", required=True)
    ap.add_argument("--vectors")
    ap.add_argument("--plugin", default="")
    ap.add_argument("--tls", choices=("1.2", "1.3"), default="1.3")
    ap.add_argument("--alter", choices=("sni", "groups", "cipher-order"),
                    help="change the fork side's ClientHello: the checker must fail")
    ap.add_argument("--fork-mode", default="unordered,all",
                    help="UTLS_MODE / UTLSMode of the fork side (for instance unordered,negotiate)")
    ap.add_argument("--client", choices=("s_client", "curl"), default="s_client")
    ap.add_argument("--testbed", default="")
    ap.add_argument("--example", default="")
    ap.add_argument("--prefix", default="uws")
    ap.add_argument("--loss", type=float, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    why = missing_prerequisite(("tcpdump", "openssl", a.tshark),
                               None if a.command == "vectors" else
                               "capturing with tcpdump (and tshark loading the installed plugin) "
                               "needs root")
    if why is not None:
        log("SKIP: " + why)
        return SKIP
    work = tempfile.mkdtemp(prefix="utls-ws-")
    try:
        rc = {"compare": cmd_compare, "vectors": cmd_vectors, "plugin": cmd_plugin, "keylog": cmd_keylog,
              "preload": cmd_preload}[a.command](a, work)
        log("PASS" if not rc else "SKIPPED")
        return rc or 0
    except (Fail, subprocess.TimeoutExpired, subprocess.CalledProcessError) as e:
        log("FAIL: %s" % e)
        log("work directory kept: %s" % work)
        a.keep = True
        return 1
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
