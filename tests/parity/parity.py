#!/usr/bin/env python3
"""parity.py: differential parity suite, the fork against the distribution's libssl3.

Commands (see README.md beside this file):
  setup                      create the tlslite-ng venv under the build dir (a failure FAILS)
  selftest                   the comparator must see differences (unit test of compare())
  run --group G [--unordered [--hole]] [--only SUBSTR]
                             run group G (tls12_aead, tls12_cbc, tls13, handshake, dtls12)
                             against the system libssl and the fork (LD_PRELOAD), the fork
                             with UTLS_MODE=unordered,tap,all when --unordered (root only, else
                             exit 77 = skipped), each hostile input past a TCP hole with
                             --hole (three network namespaces; take /tmp/utls-net.lock);
                             any difference FAILS.
  self-tests of run: --perturb OPTS --expect-diff (a fork side that really differs must
                             fail), --null (the system library on both sides must agree).

Each case drives the same hostile peer against both libraries: tlslite-ng (an independent
TLS implementation) completes a handshake and then writes hand-made records to the socket;
for DTLS 1.2 a DTLS client linked to the system libssl talks through a UDP man in the middle
that injects datagrams. Compared per case: the peer's view (alerts received, whether the
echo after the hostile input came back, EOF) and the server's (alerts sent and received,
SSL_get_error, the error queue's reason strings, echoes, how the connection ended).
"""
import argparse
import atexit
import json
import os
import random
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from preload_env import preload_vars  # noqa: E402  (the 3.5 libcrypto beside a preloaded libssl)

TLSLITE_VERSION = "0.8.2"
SURVIVE = b"parity-survival-check"
BASELINE = b"parity-baseline"


NULL_RUN = False  # --null: both sides are the system library
STOCK_FORK = False  # --fork-is-stock: the "fork" side is a stock libssl (no UTLS_ symbols)
CCM8_SECLEVEL = None  # --ccm8-seclevel N


def with_ccm8_seclevel(argv):
    """argv with ':@SECLEVEL=N' appended to a CCM8 cipher list (--ccm8-seclevel): OpenSSL 3.2 and
    later put the CCM8 suites (64-bit tags) below security level 1, so on the 3.5 base both libraries
    refuse them at the default level and every CCM8 case would test nothing."""
    if CCM8_SECLEVEL is None:
        return list(argv)
    out = list(argv)
    for i in range(len(out) - 1):
        if out[i] == "--cipher" and "CCM8" in out[i + 1]:
            out[i + 1] += ":@SECLEVEL=%d" % CCM8_SECLEVEL
        elif out[i] == "--suites" and "CCM_8" in out[i + 1] and "--cipher" not in out:
            # TLS 1.3: the level is set through the (otherwise unused) TLS 1.2 cipher list.
            out += ["--cipher", "DEFAULT:@SECLEVEL=%d" % CCM8_SECLEVEL]
    return out


class Failure(Exception):
    pass


def log(msg):
    print(msg, flush=True)


# --------------------------------------------------------------------------------------
# Comparison: pure functions, unit-tested by `selftest`.
# --------------------------------------------------------------------------------------
SERVER_KEYS = ("handshake", "version", "cipher", "echoes", "end", "ssl_error", "errno",
               "errors", "alerts_sent", "alerts_recv")


def observation(peer, server):
    """The compared part of one run of a case: the peer's view and the server's."""
    obs = {"peer": dict(peer)}
    if server is None:
        obs["server"] = {"missing": True}
    elif "died" in server:
        obs["server"] = {"died": server["died"]}
    else:
        obs["server"] = {k: server.get(k) for k in SERVER_KEYS}
        # Records the fork delivered out of order (its own report): not compared,
        # but they bound the one allowed difference (compare()).
        obs["ooo"] = (server.get("mode") or {}).get("records_out_of_order") or 0
    return obs


def compare(system, fork):
    """Returns the list of (field, system value, fork value) that differ.

    The one allowed difference (README, "Allowed differences"): an authentic
    record that the fork delivered out of order, before the in-order stream
    reached a protocol error that ends the connection, has been echoed by the
    server application once more than stock delivered. Only server.echoes may
    then be larger, by at most the number of records delivered out of order;
    every alert, error and the connection's end must still be the same.
    """
    diffs = []
    for side in ("peer", "server"):
        a, b = system.get(side, {}), fork.get(side, {})
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                diffs.append(("%s.%s" % (side, k), a.get(k), b.get(k)))
    early = fork.get("ooo", 0)
    if early and len(diffs) == 1 and diffs[0][0] == "server.echoes":
        sys_n, fork_n = diffs[0][1], diffs[0][2]
        if isinstance(sys_n, int) and isinstance(fork_n, int) and sys_n < fork_n <= sys_n + early:
            return []
    return diffs


def diff_line(case, diffs):
    parts = ["%s: system=%s fork=%s" % (f, json.dumps(x), json.dumps(y)) for f, x, y in diffs]
    return "DIFF %s | %s" % (case, " | ".join(parts))


def summary(obs):
    """One short human-readable word group for the table."""
    p, s = obs["peer"], obs["server"]
    if "died" in s:
        return "server died (%s)" % s["died"]
    out = []
    if s.get("alerts_sent"):
        out.append("sent " + ",".join(a.split(":", 2)[2] for a in s["alerts_sent"]))
    if s.get("errors"):
        out.append("err " + s["errors"][0])
    if "retransmission" in p:
        out.append(p["retransmission"])
    if "echo2" in p:
        out.append("peer %s%s" % ("echo" if p["echo2"] else "no echo",
                                  " alert " + ",".join(p["alerts_recv"]) if p.get("alerts_recv") else ""))
    else:
        out.append("peer " + str(p.get("after", p.get("hs"))))
    return "; ".join(out)


def cmd_selftest(args):
    base_peer = {"hs": "ok", "baseline": True, "after": "alert:2:20"}
    base_srv = {"handshake": "ok", "version": "TLSv1.2", "cipher": "X", "echoes": 1, "end": "read",
                "ssl_error": "SSL_ERROR_SSL", "errno": 0,
                "errors": ["decryption failed or bad record mac"],
                "alerts_sent": ["fatal:20:bad record mac"], "alerts_recv": [], "mode": {"fork": False}}
    a = observation(base_peer, base_srv)
    checks = 0

    def expect(name, b, fields):
        nonlocal checks
        got = [f for f, _, _ in compare(a, b)]
        if got != fields:
            raise Failure("selftest %s: compare() found %s, expected %s" % (name, got, fields))
        log("selftest %-28s ok: %s" % (name, diff_line(name, compare(a, b)) if fields else "no difference"))
        checks += 1

    expect("identical", observation(dict(base_peer), dict(base_srv)), [])
    # The fork's own mode report is not compared (it is checked separately).
    expect("mode-ignored", observation(base_peer, dict(base_srv, mode={"fork": True, "unordered": True})), [])
    # (a) of the outside tester: internal_error instead of bad_record_mac.
    expect("alert-differs", observation(dict(base_peer, after="alert:2:80"),
                                        dict(base_srv, alerts_sent=["fatal:80:internal error"],
                                             errors=["internal error"])),
           ["peer.after", "server.alerts_sent", "server.errors"])
    # (b): the connection dies on one side and survives on the other.
    expect("survival-differs", observation(dict(base_peer, echo2=False), dict(base_srv, echoes=2)),
           ["peer.echo2", "server.echoes"])
    # The allowed early delivery: one more echo than stock, after one record
    # delivered out of order, is no difference; two more, or with nothing
    # delivered out of order, or together with another difference, are.
    early = observation(base_peer, dict(base_srv, echoes=2, mode={"records_out_of_order": 1}))
    expect("early-delivery-allowed", early, [])
    expect("early-delivery-too-many", observation(base_peer, dict(base_srv, echoes=3,
           mode={"records_out_of_order": 1})), ["server.echoes"])
    expect("extra-echo-without-ooo", observation(base_peer, dict(base_srv, echoes=2)), ["server.echoes"])
    expect("early-delivery-and-alert", observation(base_peer, dict(base_srv, echoes=2, alerts_sent=["x"],
           mode={"records_out_of_order": 1})), ["server.alerts_sent", "server.echoes"])
    expect("ssl-error-differs", observation(base_peer, dict(base_srv, ssl_error="SSL_ERROR_SYSCALL")),
           ["server.ssl_error"])
    expect("server-died", observation(base_peer, {"died": "signal 11"}),
           ["server.alerts_recv", "server.alerts_sent", "server.cipher", "server.died", "server.echoes",
            "server.end", "server.errno", "server.errors", "server.handshake", "server.ssl_error",
            "server.version"])
    # A deliberately different expectation from a real run: a real observation of the
    # system library compared against an altered copy must fail the same way a run does.
    if args.server and os.path.exists(args.server):
        rep = Report("selftest")
        rep.add("selftest/real-vs-altered", a, observation(dict(base_peer, after="echo"), base_srv))
        if rep.ok():
            raise Failure("selftest: Report did not fail on a difference")
        log("selftest %-28s ok: Report fails on a difference" % "report-fails")
        checks += 1
    log("selftest: %d checks passed" % checks)


class Report:
    def __init__(self, group):
        self.group = group
        self.rows = []
        self.diffs = []

    def add(self, case, sys_obs, fork_obs):
        d = compare(sys_obs, fork_obs)
        self.rows.append((case, not d, summary(sys_obs), summary(fork_obs)))
        if d:
            line = diff_line(case, d)
            self.diffs.append(line)
            log(line)

    def ok(self):
        return not self.diffs

    def table(self):
        w = max([len(r[0]) for r in self.rows] + [4])
        log("")
        log("%-*s  %-4s  %s" % (w, "case", "same", "system  ||  fork"))
        for case, same, s, f in self.rows:
            log("%-*s  %-4s  %s%s" % (w, case, "yes" if same else "NO", s, "" if same else "  ||  " + f))
        log("")
        log("%s: %d cases, %d same, %d different" % (self.group, len(self.rows),
                                                    len(self.rows) - len(self.diffs), len(self.diffs)))


# --------------------------------------------------------------------------------------
# The server under test
# --------------------------------------------------------------------------------------
class Server:
    """parity_server, on the system libssl or (LD_PRELOAD) the fork."""

    def __init__(self, args, lib, proto, extra, count, unordered):
        self.args, self.lib, self.proto, self.extra, self.count = args, lib, proto, extra, count
        self.unordered = unordered
        self.start()

    def start(self):
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env.pop("UTLS_MODE", None)
        env["OPENSSL_CONF"] = "/dev/null"  # the same (empty) configuration for both
        env.pop("LD_LIBRARY_PATH", None)
        preload = {}
        if self.lib == "fork":
            preload = preload_vars(self.args.fork)
            if self.unordered:
                env["UTLS_MODE"] = "unordered,tap,all"
        elif self.args.system_preload:
            # A distribution libssl that is not this machine's (Debian 13's
            # on Debian 12, tests/security35): preloaded like the fork.
            preload = preload_vars(self.args.system)
        cmd = [self.args.server, "--proto", self.proto, "--count", str(self.count)] + with_ccm8_seclevel(self.extra)
        if HOLE and self.proto == "tls":
            # The preload reaches parity_server only, not ip(8), which links
            # the system's libcrypto (a 3.5 libssl cannot load beside it).
            cmd = (HOLE.server_prefix() + ["env"] + ["%s=%s" % kv for kv in sorted(preload.items())]
                   + cmd + ["--bind", HOLE.SERVER_ADDR])
        else:
            env.update(preload)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read().decode(errors="replace")
            raise Failure("parity_server (%s) did not start: %s" % (self.lib, err))
        start = json.loads(line)
        self.port = start["port"]
        want = os.path.realpath(self.args.fork if self.lib == "fork" else self.args.system)
        # (in the --null self-test, args.fork is the system library itself)
        got = os.path.realpath(start["libssl"]) if start["libssl"] != "?" else "?"
        if got != want:
            raise Failure("parity_server (%s) has %s mapped, expected %s" % (self.lib, got, want))
        self.mapped = got

    def next_conn(self, timeout=8.0):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return {"died": "no report within %.0fs" % timeout}
        line = self.proc.stdout.readline()
        if not line:
            rc = self.proc.wait(timeout=5)
            err = self.proc.stderr.read().decode(errors="replace").strip()
            return {"died": "exit %s %s" % (rc, err[-200:])}
        return json.loads(line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def check_mode(server_obs, lib, unordered, proto):
    """The fork's own report: the mode must be what the variant says."""
    if server_obs is None or "died" in server_obs:
        return
    mode = server_obs.get("mode", {})
    if lib == "system":
        if mode.get("fork"):
            raise Failure("the system run reports the fork's UTLS_ symbols: wrong library loaded")
        return
    if not mode.get("fork"):
        if NULL_RUN or STOCK_FORK:
            return
        raise Failure("the fork run has no UTLS_ symbols: the fork is not loaded")
    if proto == "tls" and server_obs.get("handshake") == "ok":
        if bool(mode.get("unordered")) != bool(unordered):
            raise Failure("fork mode: unordered=%s, expected %s (%s)" % (mode.get("unordered"), unordered, mode))


# --------------------------------------------------------------------------------------
# TLS peer: tlslite-ng with hand-made records
# --------------------------------------------------------------------------------------
def tlslite():
    import tlslite.api  # noqa: F401  (imported lazily: only the TLS groups need it)
    import tlslite
    return tlslite


class Peer:
    """A tlslite-ng client connection plus the means to write arbitrary records."""

    def __init__(self, port, prof, hook=None):
        from tlslite.api import TLSConnection, HandshakeSettings
        self.prof = prof
        self.port = port
        self.sock = socket.create_connection((HOLE.SERVER_ADDR if HOLE else "127.0.0.1", port), timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = TLSConnection(self.sock)
        st = HandshakeSettings()
        st.versions = [prof["tlslite_version"]]
        st.minVersion = prof["tlslite_version"]
        st.maxVersion = prof["tlslite_version"]
        st.cipherNames = list(prof["tlslite_ciphers"])
        st.useEncryptThenMAC = prof.get("etm", True)
        st.keyShares = ["x25519"]
        st.eccCurves = ["x25519", "secp256r1"]
        st.use_heartbeat_extension = False
        self.settings = st
        self.rl = self.conn._recordLayer
        if hook is not None:
            hook(self)

    def handshake(self):
        self.conn.handshakeClientCert(settings=self.settings)

    # -- records --
    @property
    def ws(self):
        return self.rl._writeState

    def raw(self, data):
        self.sock.sendall(bytes(data))

    @staticmethod
    def header(ctype, body_len, version=(3, 3)):
        return bytes([ctype, version[0], version[1]]) + struct.pack(">H", body_len)

    def record(self, ctype, body, version=(3, 3)):
        return self.header(ctype, len(body), version) + bytes(body)

    def next_seq(self):
        return bytes(self.ws.getSeqNumBytes())

    # TLS 1.2 AEAD (GCM, CCM, CCM_8, ChaCha20-Poly1305)
    def seal12(self, ctype, plaintext, version=(3, 3)):
        ws = self.ws
        seq = self.next_seq()
        aad = seq + bytes([ctype, version[0], version[1]]) + struct.pack(">H", len(plaintext))
        nonce = self.rl._getNonce(ws, bytearray(seq))
        body = bytes(ws.encContext.seal(bytearray(nonce), bytearray(plaintext), bytearray(aad)))
        if self.prof["explicit_nonce"]:
            body = seq + body
        return body

    # TLS 1.3: inner plaintext = content || type || zeros, outer type 23
    def seal13(self, ctype, content, pad=0, outer_type=23, outer_version=(3, 3), raw_inner=None):
        ws = self.ws
        inner = raw_inner if raw_inner is not None else bytes(content) + bytes([ctype]) + bytes(pad)
        out_len = len(inner) + ws.encContext.tagLength
        aad = bytes([outer_type, outer_version[0], outer_version[1]]) + struct.pack(">H", out_len)
        seq = self.next_seq()
        nonce = self.rl._getNonce(ws, bytearray(seq))
        body = bytes(ws.encContext.seal(bytearray(nonce), bytearray(inner), bytearray(aad)))
        return self.header(outer_type, len(body), outer_version) + body

    def mac12(self, seq, ctype, data, version=(3, 3)):
        mac = self.ws.macContext.copy()
        mac.update(seq + bytes([ctype, version[0], version[1]]) + struct.pack(">H", len(data)) + bytes(data))
        return bytes(mac.digest())

    def cbc_encrypt(self, data):
        return bytes(self.ws.encContext.encrypt(bytearray(data)))

    def seal_cbc(self, ctype, plaintext, pad_len=None, pad_fill=None, bad_mac=False, trunc_to=None,
                 extra_block=False):
        """TLS 1.2 CBC record (explicit IV), MAC-then-encrypt or encrypt-then-MAC as negotiated.
        pad_len/pad_fill: the padding (TLS: pad_len+1 bytes of value pad_len); a bad fill makes
        bad padding under a good MAC. bad_mac flips one MAC bit."""
        bs = 16
        seq = self.next_seq()
        iv = bytes(random.Random(len(plaintext)).getrandbits(8) for _ in range(bs))
        etm = self.ws.encryptThenMAC
        if etm:
            body = bytes(plaintext)
        else:
            mac = bytearray(self.mac12(seq, ctype, plaintext))
            if bad_mac:
                mac[0] ^= 0x01
            body = bytes(plaintext) + bytes(mac)
        if pad_len is None:
            pad_len = (bs - 1 - len(body) % bs) % bs
        fill = bytes([pad_len] * (pad_len + 1)) if pad_fill is None else bytes(pad_fill)
        padded = iv + body + fill
        if extra_block:
            padded += bytes(bs)
        ct = self.cbc_encrypt(padded)
        if trunc_to is not None:
            ct = ct[:trunc_to]
        if etm:
            mac = bytearray(self.mac12(seq, ctype, ct))
            if bad_mac:
                mac[0] ^= 0x01
            ct = ct + bytes(mac)
        return ct

    def app_record(self, ctype, content):
        """A correctly protected record of any type with the negotiated protection."""
        p = self.prof
        if p["kind"] == "tls13":
            return self.seal13(ctype, content)
        if p["kind"] == "aead":
            return self.record(ctype, self.seal12(ctype, content))
        return self.record(ctype, self.seal_cbc(ctype, content))

    # -- reading what the server says after the hostile input --
    def read_events(self, want, timeout=2.0):
        """Reads records until `want` was echoed, an alert, EOF or the timeout.
        Returns the list of events; the last one ends it."""
        from tlslite.errors import TLSAbruptCloseError, TLSError
        events = []
        got = b""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                events.append("timeout")
                return events
            self.sock.settimeout(left)
            try:
                result = None
                for result in self.rl.recvRecord():
                    if result in (0, 1):
                        continue
                    break
                header, parser = result
            except socket.timeout:
                events.append("timeout")
                return events
            except TLSAbruptCloseError:
                events.append("eof")
                return events
            except (ConnectionResetError, BrokenPipeError):
                events.append("reset")
                return events
            except TLSError as e:
                events.append("peer-error:%s" % type(e).__name__)
                return events
            data = bytes(parser.bytes)
            if header.type == 21:
                level, desc = (data + b"\0\0")[0], (data + b"\0\0")[1]
                events.append("alert:%d:%d" % (level, desc))
                if level == 2 or desc == 0:
                    return events
            elif header.type == 23:
                got += data
                if want in got:
                    events.append("echo")
                    return events
            elif header.type == 22:
                htype = data[0] if data else -1
                if htype == 24 and self.prof["kind"] == "tls13":
                    # the server's KeyUpdate: switch our read key as a client must
                    s = self.conn.session
                    s.cl_app_secret, s.sr_app_secret = self.rl.calcTLS1_3KeyUpdate_sender(
                        s.cipherSuite, s.cl_app_secret, s.sr_app_secret)
                    if "keyupdate" not in events:
                        events.append("keyupdate")
                else:
                    events.append("handshake:%d" % htype)
            else:
                events.append("record:%d" % header.type)

    def send_app(self, data):
        self.raw(self.app_record(23, data))

    def client_keyupdate(self, request, send=True, split=None):
        """Sends KeyUpdate(request) with the current key, then moves to the next key."""
        msg = bytes([24, 0, 0, 1, request])
        if send:
            if split:
                self.raw(b"".join(self.app_record(22, msg[a:b]) for a, b in split))
            else:
                self.raw(self.app_record(22, msg))
        s = self.conn.session
        s.cl_app_secret, s.sr_app_secret = self.rl.calcTLS1_3KeyUpdate_reciever(
            s.cipherSuite, s.cl_app_secret, s.sr_app_secret)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class HoleNet:
    """Three network namespaces: the peer (this process), a router, the servers. Before each
    hostile input the peer sends one filler record whose first transmission an nftables rule
    in the router drops once, so that the hostile records reach the server *past a hole*: the
    fork's unordered path (the tap) sees them before TCP's in-order stream does. A drop in the
    router, not at the peer: a packet that the sender's own host drops is reported to its TCP,
    which then sends it again before anything behind it, so no hole would form. The same for
    both libraries."""

    CLIENT_ADDR, SERVER_ADDR = "10.79.1.2", "10.79.2.2"

    def __init__(self):
        tag = "par%d" % os.getpid()
        self.ns_c, self.ns_r, self.ns_s = tag + "c", tag + "r", tag + "s"
        self.made = 0
        c, r, sv = self.ns_c, self.ns_r, self.ns_s
        cmds = [["ip", "netns", "add", c], ["ip", "netns", "add", r], ["ip", "netns", "add", sv],
                ["ip", "link", "add", "vc", "netns", c, "type", "veth", "peer", "name", "rc", "netns", r],
                ["ip", "link", "add", "vs", "netns", sv, "type", "veth", "peer", "name", "rs", "netns", r],
                ["ip", "-n", c, "addr", "add", "10.79.1.2/24", "dev", "vc"],
                ["ip", "-n", r, "addr", "add", "10.79.1.1/24", "dev", "rc"],
                ["ip", "-n", r, "addr", "add", "10.79.2.1/24", "dev", "rs"],
                ["ip", "-n", sv, "addr", "add", "10.79.2.2/24", "dev", "vs"]]
        for ns, dev in ((c, "vc"), (r, "rc"), (r, "rs"), (sv, "vs"), (c, "lo"), (r, "lo"), (sv, "lo")):
            cmds.append(["ip", "-n", ns, "link", "set", dev, "up"])
        cmds += [["ip", "-n", c, "route", "add", "default", "via", "10.79.1.1"],
                 ["ip", "-n", sv, "route", "add", "default", "via", "10.79.2.1"],
                 ["ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1"],
                 # the hole must last: no SACK (no fast recovery on one segment), and a
                 # 5 ms minimum RTO instead of 200 ms, so the filler comes back by RTO soon
                 ["ip", "netns", "exec", c, "sysctl", "-qw", "net.ipv4.tcp_sack=0"],
                 ["ip", "-n", c, "route", "replace", "default", "via", "10.79.1.1", "rto_min", "5ms"]]
        for cmd in cmds:
            res = subprocess.run(cmd, capture_output=True)
            if res.returncode != 0:
                self.close()
                raise Failure("%s: %s" % (" ".join(cmd), res.stderr.decode(errors="replace").strip()))
        # this process (and the sockets it makes from now on) lives in the peer's namespace
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open("/run/netns/" + self.ns_c, os.O_RDONLY)
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            raise Failure("setns: errno %d" % ctypes.get_errno())
        os.close(fd)

    def server_prefix(self):
        return ["ip", "netns", "exec", self.ns_s]

    def arm(self, port, header):
        """Drop the first segment to `port` whose payload starts with `header` (5 bytes). The quota
        lets through the retransmission: the filler's segment (800-900 bytes) fits under 1200
        bytes once, not twice (a quota stops matching once the bytes it counted reach it)."""
        rules = ("table inet parity_hole\ndelete table inet parity_hole\n"
                 "table inet parity_hole {\n chain hole {\n  type filter hook forward priority 0;\n"
                 "  tcp dport %d @ih,0,40 0x%s quota until 1200 bytes counter drop\n }\n}\n" % (port, header.hex()))
        r = subprocess.run(["ip", "netns", "exec", self.ns_r, "nft", "-f", "-"], input=rules.encode(),
                           capture_output=True)
        if r.returncode != 0:
            raise Failure("nft: %s" % r.stderr.decode(errors="replace"))

    def dropped(self):
        r = subprocess.run(["ip", "netns", "exec", self.ns_r, "nft", "list", "table", "inet", "parity_hole"],
                           capture_output=True)
        out = r.stdout.decode()
        return "packets 1 " in out

    def close(self):
        for ns in (self.ns_c, self.ns_r, self.ns_s):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


HOLE = None  # the HoleNet of an --unordered TLS run


def wait_acked(sock, timeout=2.0):
    """Until every byte we sent is acknowledged (the hole was filled), from TCP_INFO."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        if struct.unpack_from("I", info, 24)[0] == 0:  # tcpi_unacked
            return True
        time.sleep(0.002)
    return False


def rnd(case, n):
    """Deterministic bytes: the same for both libraries."""
    r = random.Random(case)
    return bytes(r.getrandbits(8) for _ in range(n))


def run_tls_case(port, prof, case):
    """One connection: handshake, baseline echo, hostile input, survival check."""
    from tlslite.errors import TLSRemoteAlert, TLSAbruptCloseError, TLSError
    obs = {}
    peer = Peer(port, prof, hook=case.get("hook"))
    try:
        try:
            peer.handshake()
            obs["hs"] = "ok"
        except TLSRemoteAlert as e:
            obs["hs"] = "alert:%d:%d" % (e.level, e.description)
            return obs
        except TLSAbruptCloseError:
            obs["hs"] = "eof"
            return obs
        except (ConnectionResetError, BrokenPipeError):
            obs["hs"] = "reset"
            return obs
        except TLSError as e:
            obs["hs"] = "peer-error:%s" % type(e).__name__
            return obs
        except socket.timeout:
            obs["hs"] = "timeout"
            return obs
        if prof["kind"] == "cbc":
            obs["etm"] = bool(peer.ws.encryptThenMAC)  # compared like the rest
        if case.get("after_hs_only"):
            # handshake cases: the survival check is the echo right after the handshake
            peer.send_app(SURVIVE)
            obs["after"] = " ".join(peer.read_events(SURVIVE))
            return obs
        peer.send_app(BASELINE)
        obs["baseline"] = " ".join(peer.read_events(BASELINE))
        if obs["baseline"] != "echo":
            return obs
        try:
            if HOLE:
                filler = peer.app_record(23, b"F" * 777)
                HOLE.arm(peer.port, filler[:5])
                peer.raw(filler)
                time.sleep(0.001)  # the filler goes out alone, as its own segment
            case["act"](peer)
            if HOLE:
                # the hostile records went out past the hole; wait until TCP filled it
                wait_acked(peer.sock)
                if not HOLE.dropped():
                    raise Failure("%s: the filler record was not dropped: no hole" % case["name"])
                HOLE.made += 1
            peer.send_app(SURVIVE)
        except (ConnectionResetError, BrokenPipeError):
            obs["send"] = "reset"
        obs["after"] = " ".join(peer.read_events(SURVIVE))
        if obs["after"] == "echo":
            # a clean end: close_notify, as a well-behaved client
            try:
                peer.raw(peer.app_record(21, b"\x01\x00"))
            except OSError:
                pass
        return obs
    finally:
        peer.close()


# ---- TLS profiles ------------------------------------------------------------------------
def tls_profiles(group):
    v12, v13 = (3, 3), (3, 4)
    P = []
    if group == "tls12_aead":
        for name, ossl, tl, cert, nonce, tag in [
                ("aes128gcm", "ECDHE-RSA-AES128-GCM-SHA256", "aes128gcm", "rsa", 8, 16),
                ("aes256gcm", "ECDHE-RSA-AES256-GCM-SHA384", "aes256gcm", "rsa", 8, 16),
                ("chacha20", "ECDHE-RSA-CHACHA20-POLY1305", "chacha20-poly1305", "rsa", 0, 16),
                ("aes128ccm", "ECDHE-ECDSA-AES128-CCM", "aes128ccm", "ecdsa", 8, 16),
                ("aes128ccm8", "ECDHE-ECDSA-AES128-CCM8", "aes128ccm_8", "ecdsa", 8, 8)]:
            P.append(dict(name=name, kind="aead", server=["--max", "1.2", "--cipher", ossl], cert=cert,
                          tlslite_version=v12, tlslite_ciphers=[tl], explicit_nonce=nonce, tag=tag))
    elif group == "tls12_cbc":
        for name, ossl, tl, mac, etm in [
                ("aes128sha256_etm", "ECDHE-RSA-AES128-SHA256", "aes128", 32, True),
                ("aes128sha256_mte", "ECDHE-RSA-AES128-SHA256", "aes128", 32, False),
                ("aes256sha1_etm", "ECDHE-RSA-AES256-SHA", "aes256", 20, True),
                ("aes256sha1_mte", "ECDHE-RSA-AES256-SHA", "aes256", 20, False)]:
            srv = ["--max", "1.2", "--cipher", ossl] + ([] if etm else ["--no-etm"])
            P.append(dict(name=name, kind="cbc", server=srv, cert="rsa", tlslite_version=v12,
                          tlslite_ciphers=[tl], mac=mac, etm=True, expect_etm=etm))
    elif group == "tls13":
        for name, suite, tl, tag in [
                ("aes128gcm", "TLS_AES_128_GCM_SHA256", "aes128gcm", 16),
                ("aes256gcm", "TLS_AES_256_GCM_SHA384", "aes256gcm", 16),
                ("chacha20", "TLS_CHACHA20_POLY1305_SHA256", "chacha20-poly1305", 16),
                ("aes128ccm", "TLS_AES_128_CCM_SHA256", "aes128ccm", 16),
                ("aes128ccm8", "TLS_AES_128_CCM_8_SHA256", "aes128ccm_8", 8)]:
            P.append(dict(name=name, kind="tls13", server=["--min", "1.3", "--suites", suite], cert="rsa",
                          tlslite_version=v13, tlslite_ciphers=[tl], tag=tag))
    elif group == "handshake":
        P.append(dict(name="tls12", kind="aead", server=["--max", "1.2", "--cipher", "ECDHE-RSA-AES128-GCM-SHA256"],
                      cert="rsa", tlslite_version=v12, tlslite_ciphers=["aes128gcm"], explicit_nonce=8, tag=16))
        P.append(dict(name="tls13", kind="tls13", server=["--min", "1.3", "--suites", "TLS_AES_128_GCM_SHA256"],
                      cert="rsa", tlslite_version=v13, tlslite_ciphers=["aes128gcm"], tag=16))
        # a server whose blocking socket has a receive timeout (SO_RCVTIMEO) of 300 ms
        # and a peer that stays silent longer: the read must give up as stock's does
        P.append(dict(name="tls12_so_rcvtimeo", kind="aead", idle_ms=300,
                      server=["--max", "1.2", "--cipher", "ECDHE-RSA-AES128-GCM-SHA256"],
                      cert="rsa", tlslite_version=v12, tlslite_ciphers=["aes128gcm"], explicit_nonce=8, tag=16))
        P.append(dict(name="tls13_so_rcvtimeo", kind="tls13", idle_ms=300,
                      server=["--min", "1.3", "--suites", "TLS_AES_128_GCM_SHA256"],
                      cert="rsa", tlslite_version=v13, tlslite_ciphers=["aes128gcm"], tag=16))
    return P


# ---- TLS cases -------------------------------------------------------------------------
def C(name, act=None, hook=None, after_hs_only=False):
    return dict(name=name, act=act, hook=hook, after_hs_only=after_hs_only)


def tls12_size_cases(seal, tag, max_ciphertext):
    """The length and content-type cases that TLS 1.2's AEAD and CBC record
    protections share: |seal(p, type, plaintext)| protects a record the
    profile's way, |tag| names the random bodies, |max_ciphertext| is the
    largest ciphertext the protection allows."""
    return [
        C("oversized_ciphertext", lambda p: p.raw(p.record(23, rnd(tag + "-big", 2 ** 14 + 2048 + 1)))),
        C("max_ciphertext_random", lambda p: p.raw(p.record(23, rnd(tag + "-maxc", max_ciphertext)))),
        C("oversized_plaintext", lambda p: p.raw(p.record(23, seal(p, 23, b"A" * (2 ** 14 + 1))))),
        C("max_plaintext", lambda p: p.raw(p.record(23, seal(p, 23, b"B" * 2 ** 14)))),
        C("zero_len_appdata", lambda p: p.raw(p.record(23, seal(p, 23, b"")))),
        C("zero_len_appdata_x40", lambda p: p.raw(b"".join(p.record(23, seal(p, 23, b"")) for _ in range(40)))),
        C("zero_len_handshake", lambda p: p.raw(p.record(22, seal(p, 22, b"")))),
        C("zero_len_alert", lambda p: p.raw(p.record(21, seal(p, 21, b"")))),
        C("unknown_content_type", lambda p: p.raw(p.record(0x42, seal(p, 0x42, b"hello")))),
    ]


def tls12_aead_cases(prof):
    n, tag = prof["explicit_nonce"], prof["tag"]
    cases = []
    # every ciphertext length from 0 to explicit nonce + tag + 1 (random bytes)
    for L in range(0, n + tag + 2):
        cases.append(C("short_len_%d" % L, lambda p, L=L: p.raw(p.record(23, rnd("aead-len-%d" % L, L)))))
    for L in (0, n, n + tag - 1):
        cases.append(C("short_len_%d_handshake_type" % L,
                       lambda p, L=L: p.raw(p.record(22, rnd("aead-hlen-%d" % L, L)))))
        cases.append(C("short_len_%d_alert_type" % L,
                       lambda p, L=L: p.raw(p.record(21, rnd("aead-alen-%d" % L, L)))))

    def flip(p, where):
        body = bytearray(p.seal12(23, b"hello, world"))
        body[where] ^= 0x01
        p.raw(p.record(23, body))
    cases += [
        C("bad_tag_last_bit", lambda p: flip(p, -1)),
        C("bad_tag_first_byte", lambda p: flip(p, -tag)),
        C("bad_ciphertext_bit", lambda p: flip(p, n)),
    ]
    cases += tls12_size_cases(lambda p, t, b: p.seal12(t, b), "aead", 2 ** 14 + 2048)
    cases += [
        C("heartbeat_type", lambda p: p.raw(p.record(24, p.seal12(24, b"\x01\x00\x10" + b"x" * 32)))),
        C("header_version_0301", lambda p: p.raw(p.record(23, p.seal12(23, b"hello", (3, 1)), (3, 1)))),
        C("header_version_0304", lambda p: p.raw(p.record(23, p.seal12(23, b"hello", (3, 4)), (3, 4)))),
        C("header_version_0303_aad_0301", lambda p: p.raw(p.record(23, p.seal12(23, b"hello", (3, 1))))),
        C("plaintext_ccs", lambda p: p.raw(p.record(20, b"\x01"))),
        C("encrypted_ccs", lambda p: p.raw(p.record(20, p.seal12(20, b"\x01")))),
        C("warning_alert_unknown", lambda p: p.raw(p.record(21, p.seal12(21, b"\x01\xfe")))),
        C("alert_too_long", lambda p: p.raw(p.record(21, p.seal12(21, b"\x01\x00\x00")))),
        C("alert_one_byte", lambda p: p.raw(p.record(21, p.seal12(21, b"\x01")))),
        C("hello_request_from_client", lambda p: p.raw(p.record(22, p.seal12(22, b"\x00\x00\x00\x00")))),
        C("renegotiation_clienthello", lambda p: p.raw(p.record(22, p.seal12(22, clienthello_bytes(p))))),
        C("handshake_fragment_then_appdata", lambda p: p.raw(
            p.record(22, p.seal12(22, b"\x01\x00\x00\x40")) + p.record(23, p.seal12(23, b"x")))),
        C("replayed_record", lambda p: replay(p)),
        C("garbage_header_type_0", lambda p: p.raw(p.record(0, rnd("t0", 40)))),
    ]
    return cases


def replay(p):
    rec = p.app_record(23, b"replay-me")
    p.raw(rec + rec)


def clienthello_bytes(p):
    """A fresh ClientHello message (type, length, body) as tlslite would write it."""
    from tlslite.messages import ClientHello
    from tlslite.constants import CipherSuite
    ch = ClientHello()
    ch.create((3, 3), bytearray(32), bytearray(0), [CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256])
    return bytes(ch.write())


def tls12_cbc_cases(prof):
    mac, bs = prof["mac"], 16
    cases = []
    for L in range(0, mac + bs + 2):
        cases.append(C("short_len_%d" % L, lambda p, L=L: p.raw(p.record(23, rnd("cbc-len-%d" % L, L)))))
    cases += [
        C("good", lambda p: p.raw(p.record(23, p.seal_cbc(23, b"hello")))),
        C("bad_mac_good_pad", lambda p: p.raw(p.record(23, p.seal_cbc(23, b"hello", bad_mac=True)))),
        C("good_mac_bad_pad_fill", lambda p: p.raw(p.record(23, p.seal_cbc(
            23, b"hello" * 3, pad_len=None, pad_fill=bad_fill(p, b"hello" * 3))))),
        C("good_mac_pad_len_too_big", lambda p: p.raw(p.record(23, p.seal_cbc(
            23, b"x" * (bs - 1 - (0 if p.ws.encryptThenMAC else mac % bs)),
            pad_fill=bytes([200]))))),
        C("good_mac_full_block_pad_ok", lambda p: p.raw(p.record(23, p.seal_cbc(
            23, b"y" * (bs - (0 if p.ws.encryptThenMAC else mac % bs)), pad_fill=bytes([15] * 16))))),
        C("good_mac_max_pad_255", lambda p: p.raw(p.record(23, p.seal_cbc(
            23, b"z" * (bs - (0 if p.ws.encryptThenMAC else mac % bs)), pad_fill=bytes([255] * 256))))),
        C("bad_mac_bad_pad", lambda p: p.raw(p.record(23, p.seal_cbc(
            23, b"hello" * 3, pad_fill=bad_fill(p, b"hello" * 3), bad_mac=True)))),
        C("not_block_multiple", lambda p: p.raw(p.record(23, p.seal_cbc(23, b"hello" * 5, trunc_to=-1)))),
    ]
    cases += tls12_size_cases(lambda p, t, b: p.seal_cbc(t, b), "cbc", 2 ** 14 + 2048 - 16)
    cases += [
        C("header_version_0301", lambda p: p.raw(p.record(23, p.seal_cbc(23, b"hello"), (3, 1)))),
        C("plaintext_ccs", lambda p: p.raw(p.record(20, b"\x01"))),
        C("hello_request_from_client", lambda p: p.raw(p.record(22, p.seal_cbc(22, b"\x00\x00\x00\x00")))),
        C("renegotiation_clienthello", lambda p: p.raw(p.record(22, p.seal_cbc(22, clienthello_bytes(p))))),
        C("replayed_record", lambda p: replay(p)),
    ]
    return cases


def bad_fill(p, plaintext):
    """Padding of the right length whose first byte is wrong."""
    bs = 16
    body = len(plaintext) + (0 if p.ws.encryptThenMAC else p.prof["mac"])
    pad_len = (bs - 1 - body % bs) % bs
    if pad_len == 0:
        pad_len = bs  # a full block of padding, so that there are bytes to spoil
    fill = bytearray([pad_len] * (pad_len + 1))
    fill[0] ^= 0x01
    return bytes(fill)


def tls13_cases(prof):
    tag = prof["tag"]
    cases = []
    for L in range(0, tag + 2):
        cases.append(C("short_len_%d" % L, lambda p, L=L: p.raw(p.record(23, rnd("t13-len-%d" % L, L)))))

    def flip(p, where):
        rec = bytearray(p.seal13(23, b"hello, world"))
        rec[where] ^= 0x01
        p.raw(rec)

    def ku_flood(p, n):
        for _ in range(n):
            p.client_keyupdate(1)

    def ku_then(p, tail):
        # KeyUpdate followed, in the same record, by the start of another message
        p.raw(p.seal13(22, bytes([24, 0, 0, 1, 0]) + tail))
        p.client_keyupdate(0, send=False)

    def ku_interleaved(p):
        msg = bytes([24, 0, 0, 1, 0])
        p.raw(p.seal13(22, msg[:2]) + p.seal13(23, b"between") + p.seal13(22, msg[2:]))
        p.client_keyupdate(0, send=False)

    cases += [
        C("bad_tag_last_bit", lambda p: flip(p, -1)),
        C("bad_ciphertext_bit", lambda p: flip(p, 5)),
        C("oversized_ciphertext", lambda p: p.raw(p.record(23, rnd("t13-big", 2 ** 14 + 256 + 1)))),
        C("max_ciphertext_random", lambda p: p.raw(p.record(23, rnd("t13-maxc", 2 ** 14 + 256)))),
        C("oversized_plaintext", lambda p: p.raw(p.seal13(23, b"A" * (2 ** 14 + 1)))),
        C("oversized_by_padding", lambda p: p.raw(p.seal13(23, b"A" * 2 ** 14, pad=1))),
        C("max_plaintext", lambda p: p.raw(p.seal13(23, b"B" * 2 ** 14))),
        C("max_padding_only", lambda p: p.raw(p.seal13(23, b"C", pad=2 ** 14 - 1))),
        C("all_zero_inner", lambda p: p.raw(p.seal13(23, b"", raw_inner=bytes(20)))),
        C("empty_inner", lambda p: p.raw(p.seal13(23, b"", raw_inner=b""))),
        C("zero_len_appdata", lambda p: p.raw(p.seal13(23, b""))),
        C("zero_len_appdata_x40", lambda p: p.raw(b"".join(p.seal13(23, b"") for _ in range(40)))),
        C("zero_len_handshake", lambda p: p.raw(p.seal13(22, b""))),
        C("zero_len_alert", lambda p: p.raw(p.seal13(21, b""))),
        C("inner_unknown_type", lambda p: p.raw(p.seal13(0x42, b"hello"))),
        C("inner_ccs", lambda p: p.raw(p.seal13(20, b"\x01"))),
        C("outer_type_handshake", lambda p: p.raw(p.seal13(23, b"hello", outer_type=22))),
        C("outer_type_alert", lambda p: p.raw(p.seal13(23, b"hello", outer_type=21))),
        C("outer_version_0301", lambda p: p.raw(p.seal13(23, b"hello", outer_version=(3, 1)))),
        C("outer_version_0304", lambda p: p.raw(p.seal13(23, b"hello", outer_version=(3, 4)))),
        C("plaintext_ccs", lambda p: p.raw(p.record(20, b"\x01"))),
        C("plaintext_alert_fatal", lambda p: p.raw(p.record(21, b"\x02\x28"))),
        C("plaintext_appdata", lambda p: p.raw(p.record(23, b"plain text, no tag here"))),
        C("warning_alert_unknown", lambda p: p.raw(p.seal13(21, b"\x01\xfe"))),
        C("user_canceled_warning", lambda p: p.raw(p.seal13(21, b"\x01\x5a"))),
        C("keyupdate_not_requested", lambda p: p.client_keyupdate(0)),
        C("keyupdate_requested", lambda p: p.client_keyupdate(1)),
        C("keyupdate_flood_200", lambda p: ku_flood(p, 200)),
        C("keyupdate_split_4_1", lambda p: p.client_keyupdate(1, split=[(0, 4), (4, 5)])),
        C("keyupdate_split_1byte", lambda p: p.client_keyupdate(0, split=[(i, i + 1) for i in range(5)])),
        C("keyupdate_bad_value", lambda p: p.raw(p.seal13(22, bytes([24, 0, 0, 1, 2])))),
        C("keyupdate_bad_length", lambda p: p.raw(p.seal13(22, bytes([24, 0, 0, 2, 0, 0])))),
        C("keyupdate_not_record_end", lambda p: ku_then(p, bytes([24, 0]))),
        C("keyupdate_interleaved_appdata", ku_interleaved),
        C("newsessionticket_from_client", lambda p: p.raw(p.seal13(4, b"", raw_inner=bytes(
            [4, 0, 0, 13, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, 0xab, 0xcd, 0, 0]) + b"\x16"))),
        C("clienthello_after_handshake", lambda p: p.raw(p.seal13(22, clienthello_bytes(p)))),
        C("finished_after_handshake", lambda p: p.raw(p.seal13(22, bytes([20, 0, 0, 32]) + bytes(32)))),
        C("handshake_fragment_then_alert", lambda p: p.raw(
            p.seal13(22, bytes([24, 0])) + p.seal13(21, b"\x01\x5a"))),
        C("replayed_record", lambda p: replay(p)),
    ]
    return cases


# ---- handshake cases (plaintext and encrypted handshake messages) ------------------------
def split_hook(htype, plan, version=None):
    """Rewrites how the client's handshake message `htype` goes out: `plan(data, rec)` returns
    the list of (content type, fragment) records to send instead; rec(ctype, data) encrypts as
    the record layer currently does."""
    def hook(peer):
        from tlslite.messages import Message
        orig = peer.rl.sendRecord
        state = {"done": False}

        def send(msg):
            data = bytes(msg.write())
            if not state["done"] and msg.contentType == 22 and data and data[0] == htype:
                state["done"] = True
                saved = peer.rl._recordSocket.version
                for ctype, frag in plan(data):
                    if version is not None and htype == 1:
                        peer.rl._recordSocket.version = version
                    for r in orig(Message(ctype, bytearray(frag))):
                        yield r
                    peer.rl._recordSocket.version = saved
                return
            for r in orig(msg):
                yield r
        peer.rl.sendRecord = send
    return hook


def handshake_cases(prof):
    tls13 = prof["kind"] == "tls13"
    cases = []
    if prof.get("idle_ms"):
        return [C("peer_silent_past_so_rcvtimeo", lambda p: time.sleep(3 * prof["idle_ms"] / 1000.0))]

    def hs(name, htype, plan, version=None):
        cases.append(C(name, hook=split_hook(htype, plan, version), after_hs_only=True))

    hs("ch_plain", 1, lambda d: [(22, d)])
    hs("ch_1byte_records", 1, lambda d: [(22, d[i:i + 1]) for i in range(len(d))])
    hs("ch_split_header", 1, lambda d: [(22, d[:2]), (22, d[2:])])
    hs("ch_split_half", 1, lambda d: [(22, d[:len(d) // 2]), (22, d[len(d) // 2:])])
    hs("ch_interleaved_warning_alert", 1, lambda d: [(22, d[:10]), (21, b"\x01\x5a"), (22, d[10:])])
    hs("ch_interleaved_fatal_alert", 1, lambda d: [(22, d[:10]), (21, b"\x02\x28"), (22, d[10:])])
    hs("ch_interleaved_ccs", 1, lambda d: [(22, d[:10]), (20, b"\x01"), (22, d[10:])])
    hs("ch_interleaved_appdata", 1, lambda d: [(22, d[:10]), (23, b"early"), (22, d[10:])])
    hs("ch_interleaved_zero_len_handshake", 1, lambda d: [(22, d[:10]), (22, b""), (22, d[10:])])
    hs("ch_zero_len_handshake_first", 1, lambda d: [(22, b""), (22, d)])
    hs("ch_zero_len_appdata_first", 1, lambda d: [(23, b""), (22, d)])
    hs("ch_ccs_first", 1, lambda d: [(20, b"\x01"), (22, d)])
    hs("ch_warning_alert_first", 1, lambda d: [(21, b"\x01\x5a"), (22, d)])
    hs("ch_unknown_type_first", 1, lambda d: [(0x42, b"junk"), (22, d)])
    hs("ch_heartbeat_first", 1, lambda d: [(24, b"\x01\x00\x10" + b"h" * 32), (22, d)])
    hs("ch_twice_in_one_record", 1, lambda d: [(22, d + d)])
    hs("ch_trailing_garbage_record", 1, lambda d: [(22, d + b"\x00\x00")])
    hs("ch_truncated_then_next", 1, lambda d: [(22, d[:-3]), (22, bytes([2, 0, 0, 0]))])
    hs("ch_oversized_record", 1, lambda d: [(22, d + bytes([0x10, 0, 0x40, 0]) + b"p" * (2 ** 14 + 1 - len(d) - 4))])
    hs("ch_record_version_0300", 1, lambda d: [(22, d)], version=(3, 0))
    hs("ch_record_version_0301", 1, lambda d: [(22, d)], version=(3, 1))
    hs("ch_record_version_0303", 1, lambda d: [(22, d)], version=(3, 3))
    hs("ch_record_version_0304", 1, lambda d: [(22, d)], version=(3, 4))
    hs("ch_record_version_0200", 1, lambda d: [(22, d)], version=(2, 0))
    hs("ch_record_version_0400", 1, lambda d: [(22, d)], version=(4, 0))
    hs("ch_record_version_fefd", 1, lambda d: [(22, d)], version=(0xfe, 0xfd))
    # the client's Finished (encrypted under handshake keys in both versions)
    hs("finished_split_1byte", 20, lambda d: [(22, d[i:i + 1]) for i in range(len(d))])
    hs("finished_split_half", 20, lambda d: [(22, d[:len(d) // 2]), (22, d[len(d) // 2:])])
    hs("finished_interleaved_warning_alert", 20, lambda d: [(22, d[:4]), (21, b"\x01\x5a"), (22, d[4:])])
    hs("finished_interleaved_appdata", 20, lambda d: [(22, d[:4]), (23, b"early"), (22, d[4:])])
    hs("finished_zero_len_handshake_first", 20, lambda d: [(22, b""), (22, d)])
    hs("finished_zero_len_appdata_first", 20, lambda d: [(23, b""), (22, d)])
    hs("finished_bad_verify_data", 20, lambda d: [(22, d[:-1] + bytes([d[-1] ^ 1]))])
    if not tls13:
        hs("cke_1byte_records", 16, lambda d: [(22, d[i:i + 1]) for i in range(len(d))])
        hs("cke_interleaved_ccs", 16, lambda d: [(22, d[:3]), (20, b"\x01"), (22, d[3:])])
        hs("cke_interleaved_warning_alert", 16, lambda d: [(22, d[:3]), (21, b"\x01\x5a"), (22, d[3:])])
    return cases


def tls_cases(group, prof):
    return {"tls12_aead": tls12_aead_cases, "tls12_cbc": tls12_cbc_cases, "tls13": tls13_cases,
            "handshake": handshake_cases}[group](prof)


# --------------------------------------------------------------------------------------
# DTLS 1.2: a real DTLS client (system libssl) through a UDP man in the middle
# --------------------------------------------------------------------------------------
def dtls_profiles():
    return [
        dict(name="aes128gcm", cipher="ECDHE-RSA-AES128-GCM-SHA256", cert="rsa", overhead=8 + 16, kind="aead"),
        dict(name="chacha20", cipher="ECDHE-RSA-CHACHA20-POLY1305", cert="rsa", overhead=16, kind="aead"),
        dict(name="aes128ccm", cipher="ECDHE-ECDSA-AES128-CCM", cert="ecdsa", overhead=8 + 16, kind="aead"),
        dict(name="aes128ccm8", cipher="ECDHE-ECDSA-AES128-CCM8", cert="ecdsa", overhead=8 + 8, kind="aead"),
        dict(name="cbc_etm", cipher="ECDHE-RSA-AES128-SHA256", cert="rsa", overhead=16 + 32, kind="cbc"),
        dict(name="cbc_mte", cipher="ECDHE-RSA-AES128-SHA256", cert="rsa", overhead=16 + 32, kind="cbc",
             no_etm=True),
        # a small path MTU (the server's flight in many fragments) and lost flights: the
        # server retransmits from its buffer, and each retransmitted fragment must equal
        # the first transmission
        dict(name="mtu256_retransmit", cipher="ECDHE-RSA-AES128-GCM-SHA256", cert="rsa", overhead=8 + 16,
             kind="aead", mtu=256, handshake_loss=True),
        # the MTU from the kernel (loopback): after three lost flights the server falls
        # back to the minimum MTU and re-fragments what it retransmits
        dict(name="querymtu_retransmit", cipher="ECDHE-RSA-AES128-GCM-SHA256", cert="rsa", overhead=8 + 16,
             kind="aead", handshake_loss=True, only=["lost_client_final_flight_x3"]),
    ]


def dtls_rec(ctype, epoch, seq, body, version=b"\xfe\xfd", length=None):
    return (bytes([ctype]) + version + struct.pack(">H", epoch) + seq.to_bytes(6, "big")
            + struct.pack(">H", len(body) if length is None else length) + bytes(body))


def dtls_records(dgram):
    out, i = [], 0
    while i + 13 <= len(dgram):
        ln = struct.unpack(">H", dgram[i + 11:i + 13])[0]
        out.append(dict(type=dgram[i], version=dgram[i + 1:i + 3], epoch=struct.unpack(">H", dgram[i + 3:i + 5])[0],
                        seq=int.from_bytes(dgram[i + 5:i + 11], "big"), raw=dgram[i:i + 13 + ln],
                        body=dgram[i + 13:i + 13 + ln]))
        i += 13 + ln
    return out


def dtls_cases(prof):
    """Each case: f(state) -> list of datagrams to inject towards the server, where state has
    the client's datagrams so far and the client's last record (epoch 1, application data)."""
    ov = prof["overhead"]
    cases = []
    if prof.get("handshake_loss"):
        return [
            ("lost_client_final_flight", lambda st: [], {"drop_client_final": 1}),
            ("lost_client_final_flight_twice", lambda st: [], {"drop_client_final": 2}),
            ("lost_server_first_flight", lambda st: [], {"drop_server_flight": True}),
            ("lost_server_first_flight_then_forged", lambda st: [dtls_rec(23, 1, st["last_app"]["seq"] + 1,
                                                                          rnd("dtls-lf", 5))],
             {"drop_server_flight": True}),
        ] if not prof.get("only") else [
            ("lost_client_final_flight_x3", lambda st: [], {"drop_client_final": 3}),
        ]

    def last_app(st):
        return st["last_app"]

    def nxt(st, k=1):
        return last_app(st)["seq"] + k

    for L in range(0, ov + 2):
        cases.append(("short_len_%d" % L, lambda st, L=L: [dtls_rec(23, 1, nxt(st), rnd("dtls-len-%d" % L, L))]))
    # the outside tester's datagram: 18 bytes, epoch 1, record length 5
    cases.append(("forged_18_byte_datagram", lambda st: [dtls_rec(23, 1, nxt(st), rnd("dtls-18", 5))]))
    for t in (21, 22):
        for L in (0, 5):
            cases.append(("short_len_%d_type_%d" % (L, t),
                          lambda st, L=L, t=t: [dtls_rec(t, 1, nxt(st), rnd("dtls-t-%d-%d" % (t, L), L))]))

    def mutate(st, seq=None, epoch=None, version=None, flip=None, ctype=None):
        r = last_app(st)
        body = bytearray(r["body"])
        if flip is not None:
            body[flip] ^= 0x01
        return [dtls_rec(r["type"] if ctype is None else ctype, r["epoch"] if epoch is None else epoch,
                         r["seq"] if seq is None else seq, body,
                         version=r["version"] if version is None else version)]

    cases += [
        ("duplicate_last_record", lambda st: [last_app(st)["raw"]]),
        ("duplicate_x5", lambda st: [last_app(st)["raw"]] * 5),
        ("replay_new_seq", lambda st: mutate(st, seq=nxt(st, 3))),
        ("flipped_tag_bit", lambda st: mutate(st, seq=nxt(st), flip=-1)),
        ("flipped_ciphertext_bit", lambda st: mutate(st, seq=nxt(st), flip=len(last_app(st)["body"]) // 2)),
        ("out_of_epoch_2", lambda st: mutate(st, epoch=2)),
        ("out_of_epoch_2_handshake", lambda st: mutate(st, epoch=2, ctype=22)),
        ("out_of_epoch_7", lambda st: mutate(st, epoch=7, seq=nxt(st))),
        ("epoch_0_appdata", lambda st: [dtls_rec(23, 0, 50, b"plaintext application data")]),
        ("epoch_0_fatal_alert", lambda st: [dtls_rec(21, 0, 50, b"\x02\x28")]),
        ("epoch_0_warning_alert", lambda st: [dtls_rec(21, 0, 50, b"\x01\x5a")]),
        ("epoch_0_ccs", lambda st: [dtls_rec(20, 0, 50, b"\x01")]),
        ("epoch_0_clienthello_replay", lambda st: [st["client"][0]]),
        ("replay_final_flight", lambda st: list(st["final_flight"])),
        ("wrong_version_feff", lambda st: mutate(st, seq=nxt(st), version=b"\xfe\xff")),
        ("wrong_version_0303", lambda st: mutate(st, seq=nxt(st), version=b"\x03\x03")),
        ("wrong_version_fefc", lambda st: mutate(st, seq=nxt(st), version=b"\xfe\xfc")),
        ("unknown_content_type", lambda st: mutate(st, seq=nxt(st), ctype=0x42)),
        ("seq_far_ahead", lambda st: mutate(st, seq=nxt(st, 1 << 40))),
        ("seq_max", lambda st: mutate(st, seq=(1 << 48) - 1)),
        ("short_datagram_1", lambda st: [b"\x17"]),
        ("short_datagram_12", lambda st: [dtls_rec(23, 1, nxt(st), b"")[:12]]),
        ("length_beyond_datagram", lambda st: [dtls_rec(23, 1, nxt(st), rnd("dtls-lb", 30), length=200)]),
        ("oversized_record", lambda st: [dtls_rec(23, 1, nxt(st), rnd("dtls-big", 2 ** 14 + 2048 + 1))]),
        ("two_records_short_then_dup", lambda st: [dtls_rec(23, 1, nxt(st), rnd("dtls-2", 5)) + last_app(st)["raw"]]),
        ("empty_datagram", lambda st: [b""]),
        # records of the next epoch are buffered (bounded) until the epoch changes
        ("next_epoch_flood_150", lambda st: [dtls_rec(23, 2, nxt(st, k), rnd("dtls-fl-%d" % k, 1000))
                                             for k in range(150)]),
        ("next_epoch_flood_big", lambda st: [dtls_rec(22, 2, nxt(st, k), rnd("dtls-flb-%d" % k, 2 ** 14))
                                             for k in range(40)]),
    ]
    return cases


class RetransmitCheck:
    """Reassembles the server's epoch-0 handshake messages from their first transmission and
    checks every retransmitted fragment against it (byte for byte)."""

    def __init__(self):
        self.msgs = {}      # message_seq -> (msg_type, bytearray, bytearray of "have" flags)
        self.seen = set()   # (message_seq, frag_off, frag_len)
        self.retransmitted = 0
        self.mismatch = []

    def server_datagram(self, d):
        for r in dtls_records(d):
            if r["type"] != 22 or r["epoch"] != 0:
                continue
            b = r["body"]
            while len(b) >= 12:
                mtype, mlen = b[0], int.from_bytes(b[1:4], "big")
                mseq = int.from_bytes(b[4:6], "big")
                foff, flen = int.from_bytes(b[6:9], "big"), int.from_bytes(b[9:12], "big")
                frag = bytes(b[12:12 + flen])
                b = b[12 + flen:]
                if mtype == 3:  # HelloVerifyRequest: not part of a flight we compare
                    continue
                if mseq not in self.msgs:
                    self.msgs[mseq] = (mtype, bytearray(mlen), bytearray(mlen))
                typ, buf, have = self.msgs[mseq]
                end = min(foff + len(frag), len(buf))
                key = (mseq, foff, flen)
                if key in self.seen or (end > foff and all(have[foff:end])):
                    self.retransmitted += 1
                    if typ != mtype or bytes(buf[foff:end]) != frag[:end - foff]:
                        self.mismatch.append("msg_seq %d offset %d" % (mseq, foff))
                self.seen.add(key)
                for i in range(foff, end):
                    if not have[i]:
                        buf[i] = frag[i - foff]
                        have[i] = 1

    def verdict(self):
        if self.mismatch:
            return "MISMATCH " + ", ".join(sorted(set(self.mismatch))[:4])
        return "retransmitted, identical" if self.retransmitted else "no retransmission"


def is_final_flight(dgram):
    """ClientKeyExchange, ChangeCipherSpec or the encrypted Finished of the client."""
    for r in dtls_records(dgram):
        if r["type"] == 20 or (r["type"] == 22 and r["epoch"] == 1) or \
                (r["type"] == 22 and r["epoch"] == 0 and r["body"][:1] == b"\x10"):
            return True
    return False


class Mitm(threading.Thread):
    """UDP man in the middle: forwards client <-> server and injects when it forwards the
    server's first epoch-1 application-data record (the echo of ping-1)."""

    def __init__(self, server_port, inject, opts=None):
        super().__init__(daemon=True)
        self.inject = inject
        self.opts = opts or {}
        self.retx = RetransmitCheck()
        self.client_hellos = 0
        self.client_final_dropped = 0
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.1", 0))
        self.port = self.front.getsockname()[1]
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind(("127.0.0.1", 0))
        self.back.connect(("127.0.0.1", server_port))
        self.client_addr = None
        self.client_dgrams = []
        self.injected = None
        self.error = None
        self.stop_flag = False

    def run(self):
        try:
            self._run()
        except Exception as e:  # reported by the case, never silently
            self.error = repr(e)

    def _run(self):
        last_app = None
        while True:
            r, _, _ = select.select([self.front, self.back], [], [], 0.03)
            if not r and self.stop_flag:
                break  # stopped, and nothing in flight for 30 ms (the client's close_notify)
            if self.front in r:
                d, addr = self.front.recvfrom(70000)
                self.client_addr = addr
                self.client_dgrams.append(d)
                recs = dtls_records(d)
                for rec in recs:
                    if rec["type"] == 23 and rec["epoch"] == 1:
                        last_app = rec
                    if rec["type"] == 22 and rec["epoch"] == 0 and rec["body"][:1] == b"\x01":
                        self.client_hellos += 1
                if (self.injected is None and is_final_flight(d)
                        and self.client_final_dropped < self.opts.get("drop_client_final", 0)
                        and any(r["type"] == 22 and r["epoch"] == 0 and r["body"][:1] == b"\x10" for r in recs)):
                    # lose the client's first ClientKeyExchange..Finished flight(s): the server
                    # must retransmit its own flight from its buffer
                    self.client_final_dropped += 1
                    self.dropping_final = True
                    continue
                if getattr(self, "dropping_final", False) and is_final_flight(d) and not any(
                        r["type"] == 22 and r["epoch"] == 0 and r["body"][:1] == b"\x10" for r in recs):
                    continue  # the rest of the same (lost) flight
                self.dropping_final = False
                self.back.send(d)
            if self.back in r:
                try:
                    d = self.back.recv(70000)
                except ConnectionRefusedError:
                    continue
                self.retx.server_datagram(d)
                if self.opts.get("drop_server_flight") and self.client_hellos < 2 and any(
                        r["type"] == 22 and r["epoch"] == 0 for r in dtls_records(d)):
                    continue  # lose the server's first flight: the client retransmits its ClientHello
                if self.injected is None and last_app is not None and any(
                        rec["type"] == 23 and rec["epoch"] == 1 for rec in dtls_records(d)):
                    st = {"last_app": last_app, "client": self.client_dgrams,
                          "final_flight": [x for x in self.client_dgrams if is_final_flight(x)]}
                    self.injected = self.inject(st)
                    for x in self.injected:
                        self.back.send(x)
                if self.client_addr:
                    self.front.sendto(d, self.client_addr)

    def close(self):
        self.stop_flag = True
        self.join(2)
        self.front.close()
        self.back.close()


def run_dtls_case(args, server_port, prof, inject, opts=None):
    m = Mitm(server_port, inject, opts)
    m.start()
    try:
        r = subprocess.run(with_ccm8_seclevel([args.dtls_client, "--port", str(m.port), "--cipher", prof["cipher"],
                                               "--wait-ms", "600"]),
                           capture_output=True, timeout=15, env=clean_env())
    except subprocess.TimeoutExpired:
        return {"client": "hung for 15 s"}
    finally:
        m.close()
    if m.error:
        raise Failure("man in the middle failed: %s" % m.error)
    out = r.stdout.decode(errors="replace").strip()
    try:
        obs = json.loads(out.splitlines()[-1])
    except (ValueError, IndexError):
        raise Failure("parity_dtls_client printed no result (exit %d): %s %s"
                      % (r.returncode, out, r.stderr.decode(errors="replace")))
    obs["injected"] = m.injected is not None
    if opts:
        # what the server retransmitted must equal what it sent first
        obs["retransmission"] = m.retx.verdict()
    if obs.get("handshake") == "ok" and not obs["injected"]:
        raise Failure("the man in the middle never injected (no echo of ping-1 seen)")
    return obs


def clean_env():
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("UTLS_MODE", None)
    env["OPENSSL_CONF"] = "/dev/null"
    return env


# --------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------
def make_certs(args):
    # A directory of this run's own: ctest runs parity groups in parallel in
    # one workdir, and a shared certs/ let one run's key meet another run's
    # certificate ("key values mismatch", seen in a CI run).
    os.makedirs(args.workdir, exist_ok=True)
    d = tempfile.mkdtemp(prefix="certs.", dir=args.workdir)
    atexit.register(shutil.rmtree, d, True)
    out = {}
    for kind, alg in (("rsa", ["-newkey", "rsa:2048"]), ("ecdsa", ["-newkey", "ec", "-pkeyopt",
                                                                    "ec_paramgen_curve:P-256"])):
        cert, key = os.path.join(d, kind + ".crt"), os.path.join(d, kind + ".key")
        r = subprocess.run([args.openssl, "req", "-x509", "-nodes", "-days", "2", "-subj", "/CN=parity.test"]
                           + alg + ["-keyout", key, "-out", cert], capture_output=True, env=clean_env())
        if r.returncode != 0:
            raise Failure("openssl req failed: %s" % r.stderr.decode(errors="replace"))
        out[kind] = (cert, key)
    return out


def cmd_run(args):
    t0 = time.monotonic()
    if args.unordered and os.geteuid() != 0:
        log("SKIPPED: UTLS_MODE=unordered,tap,all needs root (CAP_NET_RAW for the tap); "
            "this variant did not run and says so")
        return 77
    group = args.group
    certs = make_certs(args)
    rep = Report(group + ("_unordered" if args.unordered else "") + ("_hole" if args.hole else ""))
    libs = ("system", "fork")
    log("parity %s: system=%s fork=%s%s" % (group, args.system, args.fork,
                                             " UTLS_MODE=unordered,tap,all" if args.unordered else ""))
    global HOLE
    if args.hole:
        if not args.unordered or group not in ("tls12_aead", "tls12_cbc", "tls13"):
            raise Failure("--hole is for --unordered runs of tls12_aead, tls12_cbc and tls13")
        HOLE = HoleNet()
        log("  hole network: namespaces %s (peer), %s (router), %s (servers); a filler record before each "
            "hostile input is dropped once in the router" % (HOLE.ns_c, HOLE.ns_r, HOLE.ns_s))
    try:
        return run_group(args, group, rep, libs, certs, t0)
    finally:
        if HOLE:
            HOLE.close()


def run_group(args, group, rep, libs, certs, t0):
    ooo_seen = [0, 0]  # fork connections with the unordered path active; of them, ones that scanned past a hole
    if group == "dtls12":
        profiles = dtls_profiles()
    else:
        tlslite()
        profiles = tls_profiles(group)
    modes_seen = set()
    for prof in profiles:
        cases = dtls_cases(prof) if group == "dtls12" else tls_cases(group, prof)
        if args.only:
            cases = [c for c in cases if args.only in "%s/%s" % (prof["name"], c[0] if isinstance(c, tuple) else c["name"])]
        if not cases:
            continue
        cert, key = certs[prof["cert"]]
        extra = ["--cert", cert, "--key", key]
        if group == "dtls12":
            extra += ["--cipher", prof["cipher"], "--idle-ms", "4000" if prof.get("handshake_loss") else "1500"]
            extra += (["--no-etm"] if prof.get("no_etm") else []) + (["--mtu", str(prof["mtu"])] if prof.get("mtu") else [])
        else:
            extra += prof["server"] + ["--idle-ms", str(prof.get("idle_ms", 4000))]
        proto = "dtls" if group == "dtls12" else "tls"
        servers = {lib: Server(args, lib, proto, extra + (args.perturb.split() if lib == "fork" and args.perturb else []),
                               len(cases), args.unordered) for lib in libs}
        if prof is profiles[0]:
            for lib in libs:
                log("  %s server: %s mapped" % (lib, servers[lib].mapped))
        try:
            for case in cases:
                cname = case[0] if isinstance(case, tuple) else case["name"]
                full = "%s/%s/%s" % (group, prof["name"], cname)
                obs, errs = {}, []

                def one(lib, case=case):
                    try:
                        srv = servers[lib]
                        if srv.proc.poll() is not None:
                            srv.start()  # a crashed server is reported once, then replaced
                        if group == "dtls12":
                            peer = run_dtls_case(args, srv.port, prof, case[1], case[2] if len(case) > 2 else None)
                            peer.pop("injected", None)
                        else:
                            peer = run_tls_case(srv.port, prof, case)
                        sobs = srv.next_conn()
                        if lib == "system" and "expect_etm" in prof and peer.get("etm", prof["expect_etm"]) != prof["expect_etm"]:
                            raise Failure("%s: encrypt-then-MAC negotiated=%s with the system library, expected %s"
                                          % (full, peer.get("etm"), prof["expect_etm"]))
                        check_mode(sobs, lib, args.unordered, proto)
                        if os.environ.get("PARITY_DEBUG"):
                            log("  debug %s %s: peer=%s server=%s" % (full, lib, json.dumps(peer), json.dumps(sobs)))
                        if lib == "fork" and sobs and sobs.get("mode", {}).get("unordered") and proto == "tls":
                            ooo_seen[0] += 1
                            if sobs["mode"].get("tap_fragments", 0) or sobs["mode"].get("fragments", 0):
                                ooo_seen[1] += 1
                        if lib == "fork" and sobs and "mode" in sobs and prof["name"] not in modes_seen:
                            modes_seen.add(prof["name"])
                            log("  fork's own report (%s/%s): %s" % (prof["name"], cname, json.dumps(sobs["mode"])))
                        obs[lib] = observation(peer, sobs)
                    except BaseException as e:  # re-raised below, in the main thread
                        errs.append(e)
                if group == "dtls12":
                    # DTLS cases spend their time waiting: both libraries at once
                    ts = [threading.Thread(target=one, args=(lib,)) for lib in libs]
                    for t in ts:
                        t.start()
                    for t in ts:
                        t.join()
                else:
                    for lib in libs:
                        one(lib)
                if errs:
                    raise errs[0]
                rep.add(full, obs["system"], obs["fork"])
        finally:
            for s in servers.values():
                s.stop()
    rep.table()
    log("%s: runtime %.1f s" % (rep.group, time.monotonic() - t0))
    if HOLE:
        log("%s: %d holes made; the fork's unordered path saw fragments past a hole in %d of %d connections"
            % (rep.group, HOLE.made, ooo_seen[1], ooo_seen[0]))
        if HOLE.made and not ooo_seen[1] and not NULL_RUN:
            log("FAIL: the fork never saw a fragment past a hole: the tap is not working")
            return 1
    if args.expect_diff:
        # self-test: a deliberately different "fork" side must be caught
        if rep.ok():
            log("FAIL: self-test: the fork side was perturbed (%s) but no difference was found" % args.perturb)
            return 1
        log("PASS: self-test: the perturbed side (%s) differs in %d case(s), as it must" % (args.perturb, len(rep.diffs)))
        return 0
    if not rep.ok():
        log("FAIL: %d case(s) where the fork differs from the system libssl:" % len(rep.diffs))
        for d in rep.diffs:
            log("  " + d)
        return 1
    if NULL_RUN:
        log("PASS: self-test: the system library against itself agrees in all %d cases" % len(rep.rows))
    else:
        log("PASS: the fork behaves like the system libssl in all %d cases" % len(rep.rows))
    return 0


def cmd_setup(args):
    venv = args.venv
    py = os.path.join(venv, "bin", "python")
    probe = [py, "-c", "import tlslite; print(tlslite.__version__)"]
    if os.path.exists(py):
        r = subprocess.run(probe, capture_output=True)
        if r.returncode == 0 and r.stdout.decode().strip() == TLSLITE_VERSION:
            log("tlslite-ng %s already installed in %s" % (TLSLITE_VERSION, venv))
            return 0
    r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, timeout=120)
    if r.returncode != 0:
        raise Failure("python -m venv %s failed: %s" % (venv, r.stderr.decode(errors="replace")))
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run([py, "-m", "pip", "install", "tlslite-ng==" + TLSLITE_VERSION], capture_output=True,
                       timeout=200, env=env)
    if r.returncode != 0:
        raise Failure("pip install tlslite-ng==%s failed (PyPI reachable?): %s"
                      % (TLSLITE_VERSION, (r.stdout + r.stderr).decode(errors="replace")[-2000:]))
    r = subprocess.run(probe, capture_output=True)
    if r.returncode != 0 or r.stdout.decode().strip() != TLSLITE_VERSION:
        raise Failure("tlslite-ng does not import after install: %s" % (r.stdout + r.stderr).decode(errors="replace"))
    log("tlslite-ng %s installed in %s" % (TLSLITE_VERSION, venv))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fork")
    ap.add_argument("--system")
    ap.add_argument("--system-preload", action="store_true",
                    help="--system is not the library parity_server links: LD_PRELOAD it, as the fork "
                         "(Debian 13's libssl.so.3 for the 3.5 base, tests/security35)")
    ap.add_argument("--fork-is-stock", action="store_true",
                    help="--fork is a stock libssl without the UTLS_ symbols (tests/security35/negative.sh: "
                         "the 3.5 tree with or without its security series)")
    ap.add_argument("--ccm8-seclevel", type=int,
                    help="append :@SECLEVEL=N to the CCM8 profiles' cipher lists, server and DTLS client, both "
                         "libraries (the 3.5 base: CCM8 is below its default security level)")
    ap.add_argument("--openssl", default="/usr/bin/openssl")
    ap.add_argument("--server")
    ap.add_argument("--dtls-client")
    ap.add_argument("--venv")
    ap.add_argument("--workdir", default=".")
    ap.add_argument("cmd", choices=["setup", "selftest", "run"])
    ap.add_argument("--group", choices=["tls12_aead", "tls12_cbc", "tls13", "handshake", "dtls12"])
    ap.add_argument("--unordered", action="store_true")
    ap.add_argument("--hole", action="store_true",
                    help="--unordered through two network namespaces, each hostile input past a TCP hole "
                         "(root; run it under flock -o /tmp/utls-net.lock)")
    ap.add_argument("--only", help="run only the cases whose profile/name contains this")
    ap.add_argument("--perturb", help="self-test: extra parity_server options for the fork side only")
    ap.add_argument("--expect-diff", action="store_true", help="self-test: succeed only if differences are found")
    ap.add_argument("--null", action="store_true",
                    help="self-test: the system library on both sides (the harness must be deterministic)")
    args = ap.parse_args()

    # The TLS groups need tlslite-ng: run under the venv's interpreter.
    if args.cmd == "run" and args.group != "dtls12" and args.venv:
        vpy = os.path.join(args.venv, "bin", "python")
        if os.path.realpath(sys.prefix) != os.path.realpath(args.venv):
            if not os.path.exists(vpy):
                log("FAIL: tlslite-ng venv missing (%s): the parity.tlslite.setup test installs it" % args.venv)
                return 1
            os.execv(vpy, [vpy] + sys.argv)
    try:
        if args.cmd == "setup":
            return cmd_setup(args)
        if args.cmd == "selftest":
            cmd_selftest(args)
            return 0
        if not args.group:
            ap.error("run needs --group")
        for f in ("fork", "system", "server"):
            if not getattr(args, f) or not os.path.exists(getattr(args, f)):
                raise Failure("--%s %s does not exist" % (f, getattr(args, f)))
        if args.ccm8_seclevel is not None:
            global CCM8_SECLEVEL
            CCM8_SECLEVEL = args.ccm8_seclevel
        if args.fork_is_stock:
            global STOCK_FORK
            STOCK_FORK = True
        if args.null:
            global NULL_RUN
            NULL_RUN = True
            args.fork = args.system
        return cmd_run(args)
    except Failure as e:
        log("FAIL: %s" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
