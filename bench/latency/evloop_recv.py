#!/usr/bin/python3
"""evloop_recv.py: an ordinary asyncio TLS server (the standard ssl and
asyncio modules and nothing else), the Python counterpart of evloop-recv.

  evloop_recv.py --listen ADDR:PORT --out LOG --count N --size S
                 [--ready FILE] [--idle-ms MS] [--timeout S]

It accepts one connection and serves it from asyncio's event loop: the
non-blocking SSL socket is registered with loop.add_reader() (epoll under
asyncio's default selector), and recv() is called only when the loop says
the socket is readable, until SSLWantReadError. Every message (utls-stream's
stream format) gets a line in LOG in utls-stream's receiver format.

asyncio's own TLS streams (start_server(ssl=...)) read the socket into a
memory BIO themselves: the library never sees the socket, so no tap can
serve them (docs/evloop.md). This is the other common asyncio pattern: the
ssl module on the socket, the loop for readiness.

Exit status: 0 when every message arrived exactly once and intact, 1
otherwise, 2 on setup errors.
"""
import argparse
import asyncio
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time

MAGIC = 0x6d727473
HDR_LEN = 24


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def loaded_libssl():
    with open("/proc/self/maps") as f:
        for line in f:
            if "libssl.so" in line:
                return line.split()[-1]
    return "?"


def self_signed(tmp):
    cert, key = os.path.join(tmp, "c.pem"), os.path.join(tmp, "k.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=evloop-recv"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, LD_PRELOAD=""))
    return cert, key


class Receiver:
    def __init__(self, a, log):
        self.a, self.log = a, log
        self.seen = bytearray(a.count)
        self.ok = self.dup = self.bad = 0
        self.last = mono_ns()

    def check(self, p):
        if len(p) != self.a.size or len(p) < HDR_LEN:
            return None
        magic, idx, send_ns, length = struct.unpack_from("<IIQI", p)
        if magic != MAGIC or length != len(p) or idx >= self.a.count:
            return None
        for j in range(HDR_LEN, len(p)):
            if p[j] != (idx * 131 + j * 7 + (j >> 8)) & 0xff:
                return None
        return idx, send_ns

    def deliver(self, p, now):
        got = self.check(p)
        if got is None:
            self.bad += 1
            self.log.write(json.dumps({"i": -1, "len": len(p), "recv_ns": now, "ok": 0}) + "\n")
            return
        idx, send_ns = got
        if self.seen[idx]:
            self.dup += 1
            self.log.write(json.dumps({"i": idx, "send_ns": send_ns, "recv_ns": now, "dup": 1,
                                       "ok": 0}) + "\n")
            return
        self.seen[idx] = 1
        self.ok += 1
        self.log.write(json.dumps({"i": idx, "send_ns": send_ns, "recv_ns": now, "ok": 1}) + "\n")


async def serve(a, ctx, lsock, rcv):
    loop = asyncio.get_running_loop()
    conn, _ = await loop.sock_accept(lsock)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    tls = ctx.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
    tls.setblocking(False)
    done = loop.create_future()
    state = {"hs": False}

    def on_readable():
        try:
            if not state["hs"]:
                tls.do_handshake()
                state["hs"] = True
            while True:
                msg = tls.recv(65536)
                if not msg:
                    if not done.done():
                        done.set_result("eof")
                    return
                rcv.last = mono_ns()
                rcv.deliver(msg, rcv.last)
                if rcv.ok == a.count and not done.done():
                    done.set_result("all")
                    return
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except Exception as e:  # reported by the caller
            if not done.done():
                done.set_exception(e)

    loop.add_reader(tls.fileno(), on_readable)
    t0 = mono_ns()
    try:
        while not done.done():
            try:
                await asyncio.wait_for(asyncio.shield(done), 0.2)
            except asyncio.TimeoutError:
                now = mono_ns()
                if now - rcv.last > a.idle_ms * 1e6 or now - t0 > a.timeout * 1e9:
                    break
    finally:
        loop.remove_reader(tls.fileno())
    if done.done() and done.exception() is not None:
        raise done.exception()
    tls.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ready")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--idle-ms", type=int, default=3000)
    ap.add_argument("--timeout", type=int, default=300)
    a, _ = ap.parse_known_args()
    host, port = a.listen.rsplit(":", 1)
    with tempfile.TemporaryDirectory() as tmp:
        # The context first: a library configured from the environment may
        # start watching connections from here on.
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.load_cert_chain(*self_signed(tmp))
    lsock = socket.create_server((host.strip("[]"), int(port)))
    lsock.setblocking(False)
    log = open(a.out, "w")
    real_minus_mono = time.clock_gettime_ns(time.CLOCK_REALTIME) - mono_ns()
    log.write(json.dumps({"event": "start", "role": "recv", "mode": "evloop_asyncio",
                          "libssl": loaded_libssl(), "openssl": ssl.OPENSSL_VERSION,
                          "count": a.count, "size": a.size, "interval_ms": 0,
                          "real_minus_mono_ns": real_minus_mono, "pid": os.getpid()}) + "\n")
    log.flush()
    if a.ready:
        with open(a.ready + ".tmp", "w") as f:
            f.write("%d\n" % lsock.getsockname()[1])
        os.rename(a.ready + ".tmp", a.ready)
    rcv = Receiver(a, log)
    asyncio.run(serve(a, ctx, lsock, rcv))
    missing = a.count - rcv.ok
    log.write(json.dumps({"event": "end", "mode": "evloop_asyncio", "received": rcv.ok,
                          "missing": missing, "duplicates": rcv.dup, "bad": rcv.bad}) + "\n")
    log.close()
    print("evloop_recv.py: %d of %d messages, %d missing, %d duplicates, %d bad"
          % (rcv.ok, a.count, missing, rcv.dup, rcv.bad), file=sys.stderr)
    return 0 if missing == 0 and rcv.dup == 0 and rcv.bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
