#!/usr/bin/env python3
"""scope_preload.py: one preloaded process, a message channel and an HTTPS
download at the same time; UTLS_MODE's scope reorders only the channel.

  scope_preload.py --fork LIB [--prefix P] [--bytes N] [--count N]

Over tools/testbed (100 ms RTT, 2% seeded loss on the data direction), two
servers run in the sender namespace with the system libssl: a message server
(port 7000, one 1000-byte message per TLS record every 20 ms, each numbered)
and an HTTPS server (port 8443, http.server, no ALPN) serving N random bytes.
In the receiver namespace ONE Python process, with the fork preloaded and
UTLS_MODE=unordered,tap,port=7000, reads the channel in one thread and
downloads the file with urllib in another. Passes when:
  * the process mapped the fork (/proc/self/maps),
  * the channel received every message, some before an earlier one (early
    records), and
  * the download's SHA-256 is the file's.
Control, same process layout with UTLS_MODE=unordered,tap,all (the scope
that names every connection): the download is reordered, so its SHA-256 is
wrong (or, when the reordering hits the HTTP header, urllib fails). That
shows the first check can fail.
Exit 0 pass, 1 fail, 77 not root.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from preload_env import preload_env_args  # noqa: E402  (the 3.5 build's libcrypto beside the fork)

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
TESTBED = os.path.join(SRC, "tools", "testbed", "testbed")
PY = "/usr/bin/python3"

SERVERS = r'''
import http.server, os, socket, ssl, struct, sys, threading, time
cert, key, docroot, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
def channel():
    ls = socket.create_server(("0.0.0.0", 7000))
    while True:
        c, _ = ls.accept()
        s = ctx.wrap_socket(c, server_side=True)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"bbr")
        t0 = time.monotonic()
        for i in range(count):
            d = t0 + i * 0.02 - time.monotonic()
            if d > 0:
                time.sleep(d)
            s.sendall(struct.pack("!I", i) + b"m" * 996)
        time.sleep(2)
        s.close()
threading.Thread(target=channel, daemon=True).start()
class Q(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass
os.chdir(docroot)
httpd = http.server.ThreadingHTTPServer(("0.0.0.0", 8443), Q)
httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
open(os.path.join(docroot, "ready"), "w").close()
httpd.serve_forever()
'''

CLIENT = r'''
import hashlib, json, ssl, socket, struct, sys, threading, urllib.request
host, count = sys.argv[1], int(sys.argv[2])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
out = {}
def channel():
    s = ctx.wrap_socket(socket.create_connection((host, 7000)))
    got, early, top, buf = set(), 0, -1, b""
    while len(got) < count:
        b = s.recv(4096)
        if not b:
            break
        i = struct.unpack("!I", b[:4])[0]
        if len(b) != 1000 or i in got:
            out["channel_bad"] = out.get("channel_bad", 0) + 1
            continue
        got.add(i)
        if i < top:
            early += 1
        top = max(top, i)
    out["channel_received"] = len(got)
    out["channel_before_an_earlier_one"] = early
def download():
    try:
        # Blocking, as urllib is by default (no timeout).
        r = urllib.request.urlopen("https://%s:8443/file" % host, context=ctx)
        data = r.read()
    except Exception as e:  # a reordered response may not even parse
        out["download_error"] = repr(e)[:200]
        return
    out["download_bytes"] = len(data)
    out["download_sha256"] = hashlib.sha256(data).hexdigest()
ts = [threading.Thread(target=channel), threading.Thread(target=download)]
for t in ts:
    t.start()
for t in ts:
    t.join()
out["libssl"] = sorted(set(l.split()[-1] for l in open("/proc/self/maps") if "libssl.so" in l))
print(json.dumps(out))
'''


def tb(prefix, *args, check=True):
    return subprocess.run([TESTBED, "--prefix", prefix, "-q"] + list(args), check=check,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_client(prefix, fork, mode, host, count):
    env = dict(os.environ)
    env["LD_PRELOAD"] = fork
    env["UTLS_MODE"] = mode
    env["UTLS_QUIET"] = "0"
    r = subprocess.run([TESTBED, "--prefix", prefix, "exec", "receiver", "--", "env"] + preload_env_args(fork)
                       + ["UTLS_MODE=" + mode, PY, "-c", CLIENT, host, str(count)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    if r.returncode != 0:
        print("client (%s) exited %d: %s" % (mode, r.returncode, r.stderr.strip()))
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fork", required=True)
    ap.add_argument("--prefix", default="usc%d" % (os.getpid() % 1000))
    ap.add_argument("--bytes", type=int, default=2_000_000)
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--no-control", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("SKIP: needs root (network namespaces, the tap)")
        return 77
    work = tempfile.mkdtemp(prefix="utls-scope-")
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-subj", "/CN=scope", "-days", "2", "-keyout", key, "-out", cert],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = os.urandom(a.bytes)
    with open(os.path.join(work, "file"), "wb") as f:
        f.write(data)
    want = hashlib.sha256(data).hexdigest()
    os.chmod(work, 0o755)
    fail = 0
    tb(a.prefix, "down", check=False)
    try:
        tb(a.prefix, "up", "--rtt", "100", "--loss", "2", "--seed", "3")
        host = tb(a.prefix, "addr", "sender").stdout.strip()
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env.pop("UTLS_MODE", None)
        srv = subprocess.Popen([TESTBED, "--prefix", a.prefix, "exec", "sender", "--", PY, "-c", SERVERS,
                                cert, key, work, str(a.count)], env=env)
        deadline = time.time() + 15
        while not os.path.exists(os.path.join(work, "ready")) and time.time() < deadline:
            time.sleep(0.1)
        runs = [("unordered,tap,port=7000", True)]
        if not a.no_control:
            runs.append(("unordered,tap,all", False))
        for mode, main_run in runs:
            out = run_client(a.prefix, a.fork, mode, host, a.count)
            print("UTLS_MODE=%s: %s" % (mode, json.dumps(out)))
            if out is None:
                fail = 1
                continue
            if not any(os.path.realpath(l) == os.path.realpath(a.fork) for l in out["libssl"]):
                print("FAIL: the process did not map the fork: %s" % out["libssl"])
                fail = 1
            intact = out.get("download_sha256") == want and out.get("download_bytes") == a.bytes
            if main_run:
                if out.get("channel_received") != a.count or out.get("channel_bad"):
                    print("FAIL: the channel received %s of %d messages (%s bad)"
                          % (out.get("channel_received"), a.count, out.get("channel_bad", 0)))
                    fail = 1
                if not out.get("channel_before_an_earlier_one"):
                    print("FAIL: no message of the channel arrived before an earlier one")
                    fail = 1
                if not intact:
                    print("FAIL: the download's SHA-256 is wrong (scope port=7000 reordered it)")
                    fail = 1
                else:
                    print("ok: %d channel messages early; download of %d bytes intact"
                          % (out["channel_before_an_earlier_one"], a.bytes))
            elif intact:
                print("FAIL (control): with scope 'all' the download came through intact: "
                      "the test would not notice a scope that reorders it")
                fail = 1
            elif "download_error" in out:
                print("ok (control): scope 'all' reorders the download: urllib failed (%s)"
                      % out["download_error"])
            else:
                print("ok (control): scope 'all' reorders the download: %d bytes, wrong SHA-256, "
                      "and urllib returned normally" % out.get("download_bytes", 0))
        srv.kill()
    finally:
        tb(a.prefix, "down", check=False)
    print("scope_preload: %s" % ("FAILED" if fail else "passed"))
    return fail


if __name__ == "__main__":
    sys.exit(main())
