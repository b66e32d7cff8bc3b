#!/usr/bin/env python3
"""Measurement helpers for the testbed (no ping/iperf/socat needed).

  probe.py ping DST [-c N] [-i SEC] [-W SEC]        ICMP echo (raw socket, root)
  probe.py udp-sink --port P [--expect N] [--timeout S] [--out FILE]
  probe.py udp-send DST --port P [-c N] [--pps R] [--size B]
  probe.py tcp-sink --port P [--out FILE]           accept one connection, hash it
  probe.py tcp-send DST --port P --bytes N          send N deterministic bytes

Every command prints one JSON object on stdout (udp-sink/tcp-sink also to
--out, written when done, so a background sink can be read later).
"""
import argparse
import hashlib
import json
import os
import select
import socket
import statistics
import struct
import sys
import time


def icmp_checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def emit(a, out):
    """Prints the result |out| as one JSON line and, with --out, writes it to
    that file atomically (a temporary file renamed: complete or absent)."""
    js = json.dumps(out)
    if a.out:
        with open(a.out + ".tmp", "w") as f:
            f.write(js + "\n")
        os.rename(a.out + ".tmp", a.out)
    print(js)


def cmd_ping(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    sent = {}
    rtts = {}
    t_end_send = None
    nxt = time.monotonic()
    seq = 0
    s.setblocking(False)
    while True:
        now = time.monotonic()
        if seq < a.count and now >= nxt:
            seq += 1
            payload = struct.pack("!d", now) + bytes(48)
            hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
            pkt = struct.pack("!BBHHH", 8, 0, icmp_checksum(hdr + payload), ident, seq) + payload
            s.sendto(pkt, (a.dst, 0))
            sent[seq] = now
            nxt += a.interval
            if seq == a.count:
                t_end_send = now
        if t_end_send is not None and (now - t_end_send > a.wait or len(rtts) == a.count):
            break
        wait = max(0.0, nxt - now) if seq < a.count else 0.05
        r, _, _ = select.select([s], [], [], wait)
        if not r:
            continue
        try:
            data = s.recv(2048)
            t = time.monotonic()
            ihl = (data[0] & 15) * 4
            typ, code, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if typ == 0 and rid == ident and rseq in sent and rseq not in rtts:
                rtts[rseq] = (t - sent[rseq]) * 1000.0
            continue
        except BlockingIOError:
            pass
    v = sorted(rtts.values())
    out = {"sent": a.count, "received": len(v),
           "loss_pct": 100.0 * (a.count - len(v)) / a.count,
           "lost_seqs": [i for i in range(1, a.count + 1) if i not in rtts][:200]}
    if v:
        out.update(rtt_min_ms=v[0], rtt_avg_ms=statistics.fmean(v),
                   rtt_median_ms=statistics.median(v), rtt_max_ms=v[-1],
                   rtt_stdev_ms=statistics.pstdev(v))
    print(json.dumps(out))


def cmd_udp_sink(a):
    s = socket.socket(socket.AF_INET6 if ":" in a.bind else socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((a.bind, a.port))
    got = set()
    dup = 0
    reordered = 0
    last = 0
    deadline = time.monotonic() + a.timeout
    first = None
    idle = a.idle
    if a.ready:
        open(a.ready, "w").close()
    while True:
        now = time.monotonic()
        if now > deadline or (a.expect and len(got) >= a.expect):
            break
        if first is not None and now - lastrx > idle:
            break
        s.settimeout(0.05)
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        lastrx = time.monotonic()
        if first is None:
            first = lastrx
        (n,) = struct.unpack("!I", data[:4])
        if n in got:
            dup += 1
        got.add(n)
        if n < last:
            reordered += 1
        last = max(last, n)
    total = a.expect or (max(got) if got else 0)
    missing = [i for i in range(1, total + 1) if i not in got]
    out = {"received": len(got), "expected": total, "duplicates": dup, "reordered": reordered,
           "missing_count": len(missing), "missing": missing,
           "loss_pct": 100.0 * len(missing) / total if total else 0.0}
    emit(a, out)


def cmd_udp_send(a):
    fam = socket.AF_INET6 if ":" in a.dst else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    pad = bytes(max(0, a.size - 4))
    t0 = time.monotonic()
    for i in range(1, a.count + 1):
        target = t0 + (i - 1) / a.pps
        d = target - time.monotonic()
        if d > 0:
            time.sleep(d)  # late wake-ups are caught up by the absolute schedule
        while True:
            try:
                s.sendto(struct.pack("!I", i) + pad, (a.dst, a.port))
                break
            except BlockingIOError:
                time.sleep(0.0001)
    dt = time.monotonic() - t0
    print(json.dumps({"sent": a.count, "seconds": dt, "pps": a.count / dt if dt else 0}))


def pattern_bytes(n):
    block = hashlib.sha256(b"utls-testbed").digest() * 2048  # 64 KiB
    while n > 0:
        yield block[:n]
        n -= len(block)


def tcp_sink(bind, port, ready, timeout):
    """Accepts one TCP connection on BIND:PORT (touching READY once it
    listens) and reads it to its end: {"bytes", "sha256", "seconds" from
    accept to end of stream, "mbit_s"}. Shared with bench/tunnel/flows.py."""
    ls = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((bind, port))
    ls.listen(1)
    if ready:
        open(ready, "w").close()
    ls.settimeout(timeout)
    c, _ = ls.accept()
    c.settimeout(timeout)
    h = hashlib.sha256()
    n = 0
    t0 = time.monotonic()
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        h.update(b)
        n += len(b)
    dt = time.monotonic() - t0
    c.close()
    return {"bytes": n, "sha256": h.hexdigest(), "seconds": dt,
            "mbit_s": n * 8 / dt / 1e6 if dt else 0}


def cmd_tcp_sink(a):
    emit(a, tcp_sink(a.bind, a.port, a.ready, a.timeout))


def cmd_tcp_send(a):
    s = socket.create_connection((a.dst, a.port), timeout=a.timeout)
    h = hashlib.sha256()
    t0 = time.monotonic()
    for chunk in pattern_bytes(a.bytes):
        s.sendall(chunk)
        h.update(chunk)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # wait for the peer to close
    dt = time.monotonic() - t0
    print(json.dumps({"bytes": a.bytes, "sha256": h.hexdigest(), "seconds": dt}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("ping")
    q.add_argument("dst")
    q.add_argument("-c", "--count", type=int, default=10)
    q.add_argument("-i", "--interval", type=float, default=0.02)
    q.add_argument("-W", "--wait", type=float, default=2.0)
    q.set_defaults(fn=cmd_ping)
    q = sub.add_parser("udp-sink")
    q.add_argument("--bind", default="0.0.0.0")
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--expect", type=int, default=0)
    q.add_argument("--timeout", type=float, default=30)
    q.add_argument("--idle", type=float, default=1.5, help="stop this long after the last datagram")
    q.add_argument("--out")
    q.add_argument("--ready", help="touch this file once bound")
    q.set_defaults(fn=cmd_udp_sink)
    q = sub.add_parser("udp-send")
    q.add_argument("dst")
    q.add_argument("--port", type=int, required=True)
    q.add_argument("-c", "--count", type=int, default=1000)
    q.add_argument("--pps", type=float, default=1000)
    q.add_argument("--size", type=int, default=100)
    q.set_defaults(fn=cmd_udp_send)
    q = sub.add_parser("tcp-sink")
    q.add_argument("--bind", default="0.0.0.0")
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--timeout", type=float, default=60)
    q.add_argument("--out")
    q.add_argument("--ready")
    q.set_defaults(fn=cmd_tcp_sink)
    q = sub.add_parser("tcp-send")
    q.add_argument("dst")
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--bytes", type=int, default=1 << 20)
    q.add_argument("--timeout", type=float, default=60)
    q.set_defaults(fn=cmd_tcp_send)
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
