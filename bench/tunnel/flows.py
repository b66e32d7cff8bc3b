#!/usr/bin/env python3
"""flows.py: the inner flows bench/tunnel sends through a tunnel.

  flows.py voip-send DST PORT --count N [--pps 50] [--size 172]
  flows.py voip-recv BIND PORT --count N --out FILE [--idle S] [--ready FILE]
  flows.py bulk-send DST PORT --bytes N [--seed S] [--cc cubic]
  flows.py bulk-recv BIND PORT --out FILE [--ready FILE] [--timeout S]

voip: UDP datagrams of --size bytes every 1/pps s, each starting with its
index (4 bytes, big endian) and its CLOCK_MONOTONIC send time in ns (8
bytes); the receiver writes one JSON line per datagram (index, send and
receive time). The namespaces share the host's clock, so the difference is
the one-way latency through the tunnel.

bulk: one inner TCP connection carrying --bytes pseudo-random bytes (seeded,
not periodic: a reordered or duplicated block changes the digest); the sender
prints its SHA-256 and the inner TCP's retransmissions (TCP_INFO
tcpi_total_retrans); the receiver writes bytes, SHA-256, seconds from accept
to end of stream and goodput.
"""
import argparse
import hashlib
import json
import os
import random
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                                "tools", "testbed"))
import probe  # noqa: E402  (tcp_sink)


def voip_send(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = b"\0" * max(0, a.size - 12)
    t0 = time.monotonic_ns() + 10_000_000
    period = int(1e9 / a.pps)
    for i in range(a.count):
        due = t0 + i * period
        while True:
            now = time.monotonic_ns()
            if now >= due:
                break
            time.sleep(min((due - now) / 1e9, 0.05))
        s.sendto(struct.pack("!IQ", i, time.monotonic_ns()) + pad, (a.dst, a.port))
    print(json.dumps({"sent": a.count}))


def voip_recv(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind((a.bind, a.port))
    if a.ready:
        open(a.ready, "w").close()
    got = 0
    s.settimeout(a.timeout)
    with open(a.out, "w") as f:
        while got < a.count:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            t = time.monotonic_ns()
            if len(b) < 12:
                continue
            i, sent = struct.unpack("!IQ", b[:12])
            f.write(json.dumps({"i": i, "send_ns": sent, "recv_ns": t}) + "\n")
            got += 1
            s.settimeout(a.idle)
    return 0


def bulk_data(n, seed):
    r = random.Random(seed)
    left = n
    while left > 0:
        k = min(left, 1 << 16)
        yield r.randbytes(k)
        left -= k


def bulk_send(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if a.cc:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, a.cc.encode())
    s.settimeout(a.timeout)
    deadline = time.monotonic() + 15
    while True:
        try:
            s.connect((a.dst, a.port))
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            s.close()
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if a.cc:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, a.cc.encode())
            s.settimeout(a.timeout)
    h = hashlib.sha256()
    for chunk in bulk_data(a.bytes, a.seed):
        s.sendall(chunk)
        h.update(chunk)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    # struct tcp_info (linux/tcp.h): tcpi_total_retrans is the u32 at 100.
    retrans = struct.unpack_from("I", info, 100)[0] if len(info) >= 104 else None
    print(json.dumps({"bytes": a.bytes, "sha256": h.hexdigest(), "retrans": retrans}))


def bulk_recv(a):
    out = probe.tcp_sink(a.bind, a.port, a.ready, a.timeout)
    with open(a.out, "w") as f:
        json.dump(out, f)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    def receiver(name, timeout):
        """A receiving command: BIND PORT --out FILE [--ready FILE] [--timeout S]."""
        q = sub.add_parser(name)
        q.add_argument("bind")
        q.add_argument("port", type=int)
        q.add_argument("--out", required=True)
        q.add_argument("--ready")
        q.add_argument("--timeout", type=float, default=timeout)
        return q

    q = sub.add_parser("voip-send")
    q.add_argument("dst")
    q.add_argument("port", type=int)
    q.add_argument("--count", type=int, required=True)
    q.add_argument("--pps", type=float, default=50)
    q.add_argument("--size", type=int, default=172)
    q = receiver("voip-recv", 30)
    q.add_argument("--count", type=int, required=True)
    q.add_argument("--idle", type=float, default=5)
    q = sub.add_parser("bulk-send")
    q.add_argument("dst")
    q.add_argument("port", type=int)
    q.add_argument("--bytes", type=int, required=True)
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--cc", default="cubic")
    q.add_argument("--timeout", type=float, default=120)
    receiver("bulk-recv", 120)
    a = ap.parse_args()
    return {"voip-send": voip_send, "voip-recv": voip_recv, "bulk-send": bulk_send,
            "bulk-recv": bulk_recv}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
