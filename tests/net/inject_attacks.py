#!/usr/bin/python3
"""On-path attacks on the tap, from the testbed's ROUTER namespace (stdlib only).

Used by tests/net/inject_attacks.sh (issue 20, point 6). The router sits
between sender and receiver; the testbed delays and drops packets in its
FORWARD path (NFQUEUE), while packets the router itself sends leave at once,
so a forgery reaches the receiver ahead of anything genuine still in flight.
Every forged segment carries IP TTL 200 (genuine: 64 or less) so a counter can
tell them apart.

  inject_attacks.py holes --variant badcsum|badack|paws --dst IP --dport PORT --out FILE
      Watches the sender's data segments (router interface "snd") for the
      live sequence, ACK and timestamp, and the receiver's ACKs (interface
      "rcv") for SACK blocks. Every hole a SACK reveals ([ACK, first SACKed
      byte) and the gaps between blocks) is forged once, right away, in
      segments of at most 1448 bytes of random data, long before the
      retransmission: one forged copy at each lost offset. The variants are
      the three the kernel drops: a wrong TCP checksum; a valid checksum
      with an ACK for data never sent (ACK + 2^30); a valid checksum with a
      timestamp older than the last one accepted (TSval - 2^20, PAWS).

  inject_attacks.py copies [--ack-delta N] --dst IP --dport PORT --out FILE
      A forged copy of EVERY data segment the sender sends, sent the moment
      the genuine one enters the router, so it reaches the receiver ~50 ms
      first: same sequence number and length, the genuine record header kept
      (17 03 03 len) and the rest random, a valid checksum and the genuine
      timestamp, but an ACK N bytes past the genuine one (default 1: once
      the receiver has nothing in flight, the genuine ACK is its SND.NXT,
      so this is one byte of data it never sent). The kernel drops it (RFC
      9293 3.10.7.4). A tap that bounds the ACK with any slack takes it: the
      forged copy is then the first in the store everywhere, every record
      spends its probes failing on it, and out-of-order delivery stops (0-3
      of 800 records, measured before the ACK check became exact). The
      first 20 data segments (the handshake, where the receiver has data in
      flight and the kernel could take such an ACK) are left alone.

  inject_attacks.py storm --kind headers|spray --dst IP --dport PORT
                    --ahead BYTES --range BYTES --duration S --out FILE
      For --duration seconds, forged segments at offsets in
      [live sequence + ahead, + range): "headers" are segments packed with
      plausible TLS records (17 03 03 len, random body, 40..200 bytes each),
      "spray" are 1-byte segments. They carry a valid checksum, the live ACK
      and a current timestamp: nothing a host can check rejects them, except
      the receive window. Writes the storm's start and end (CLOCK_MONOTONIC
      ns, shared by the namespaces) with the counts.
"""
import argparse
import json
import random
import select
import socket
import struct
import sys
import time

import rawtcp
from rawtcp import ETH_P_IP

FORGED_TTL = 200
MSS = 1448


def sniffer(iface):
    return rawtcp.packet_socket(iface, 8 << 20)


def build(src, dst, sport, dport, seq, ack, ts, payload, good_csum=True):
    opts = b""
    if ts is not None:  # NOP NOP TS: the layout Linux uses
        opts = b"\x01\x01\x08\x0a" + struct.pack("!II", ts[0] & 0xFFFFFFFF, ts[1] & 0xFFFFFFFF)
    return rawtcp.ipv4_tcp(src, dst, sport, dport, seq, ack, 0x18, 502,  # PSH|ACK
                           payload, good_csum, 0, FORGED_TTL, opts)


def cmd_copies(a):
    rng = random.Random(a.seed)
    lv = Live(a)
    st = dict(packets=0, bytes=0)

    def on_data(p):
        pl = p["payload"]
        st["seen"] = st.get("seen", 0) + 1
        if st["seen"] <= 20:
            return
        body = rng.randbytes(len(pl))
        if len(pl) >= 5 and pl[:3] == b"\x17\x03\x03":
            body = pl[:5] + body[5:]  # the genuine header, a forged body
        lv.send(p["seq"], body, ack=(p["ack"] + a.ack_delta) & 0xFFFFFFFF, ts=p["ts"])
        st["packets"] += 1
        st["bytes"] += len(pl)

    lv.on_data = on_data
    end_t = time.monotonic() + a.duration
    while time.monotonic() < end_t:
        lv.poll(0.05)
    with open(a.out, "w") as f:
        json.dump(st, f)
    print("inject_attacks copies: %s" % json.dumps(st), file=sys.stderr)
    return 0


class Live:
    """The connection as the router sees it: sender's data on "snd"."""

    def __init__(self, a):
        self.a = a
        self.snd = sniffer("snd")
        self.rcv = sniffer("rcv")
        self.raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self.sport = self.src = self.nxt = self.ack = self.ts = None
        self.on_data = None  # called with each genuine data segment

    def poll(self, timeout, on_ack=None):
        r, _, _ = select.select([self.snd, self.rcv], [], [], timeout)
        for s in r:
            while True:
                try:
                    pkt, addr = s.recvfrom(65535, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                if addr[1] != ETH_P_IP or addr[2] == socket.PACKET_OUTGOING:
                    continue
                p = rawtcp.parse_ipv4_tcp(pkt)
                if p is None or p["ttl"] == FORGED_TTL:
                    continue
                if s is self.snd and p["dst"] == self.a.dst and p["dport"] == self.a.dport:
                    if self.sport is None and p["payload"]:
                        self.sport, self.src = p["sport"], p["src"]
                    if p["sport"] != self.sport:
                        continue
                    end = (p["seq"] + len(p["payload"])) & 0xFFFFFFFF
                    if self.nxt is None or ((end - self.nxt) & 0xFFFFFFFF) < 1 << 31:
                        self.nxt = end
                    self.ack = p["ack"]
                    if p["ts"] is not None:
                        self.ts = p["ts"]
                    if self.on_data is not None and p["payload"]:
                        self.on_data(p)
                elif (s is self.rcv and p["src"] == self.a.dst and p["sport"] == self.a.dport
                      and p["dport"] == self.sport and on_ack is not None):
                    on_ack(p)

    @classmethod
    def started(cls, a):
        """A Live that has seen the connection's data and ACKs, or None
        (said on stderr) if none came within wait_live's limit."""
        lv = cls(a)
        if not lv.wait_live():
            print("inject_attacks: no data segment seen", file=sys.stderr)
            return None
        return lv

    def wait_live(self, limit=20.0):
        t0 = time.monotonic()
        while self.nxt is None or self.ack is None:
            self.poll(0.2)
            if time.monotonic() - t0 > limit:
                return False
        return True

    def send(self, seq, payload, ack=None, ts=None, good_csum=True):
        pkt = build(self.src, self.a.dst, self.sport, self.a.dport, seq,
                    self.ack if ack is None else ack, self.ts if ts is None else ts,
                    payload, good_csum)
        self.raw.sendto(pkt, (self.a.dst, 0))


def cmd_holes(a):
    rng = random.Random(a.seed)
    lv = Live.started(a)
    if lv is None:
        return 2
    forged = set()
    st = dict(holes=0, packets=0, bytes=0)

    def forge(lo, hi):
        seq = lo
        while ((hi - seq) & 0xFFFFFFFF) > 0 and ((hi - seq) & 0xFFFFFFFF) < 1 << 30:
            n = min(MSS, (hi - seq) & 0xFFFFFFFF)
            ack, ts, good = None, None, True
            if a.variant == "badcsum":
                good = False
            elif a.variant == "badack":
                ack = (lv.ack + (1 << 30)) & 0xFFFFFFFF
            elif a.variant == "paws":
                ts = ((lv.ts[0] - (1 << 20)) & 0xFFFFFFFF, lv.ts[1]) if lv.ts else None
            lv.send(seq, rng.randbytes(n), ack=ack, ts=ts, good_csum=good)
            st["packets"] += 1
            st["bytes"] += n
            seq = (seq + n) & 0xFFFFFFFF

    def on_ack(p):
        if not p["sack"]:
            return
        edges = sorted(p["sack"], key=lambda b: (b[0] - p["ack"]) & 0xFFFFFFFF)
        lo = p["ack"]
        for left, right in edges:
            gap = (left - lo) & 0xFFFFFFFF
            if 0 < gap < 1 << 20 and lo not in forged:
                forged.add(lo)
                st["holes"] += 1
                forge(lo, left)
            if ((right - lo) & 0xFFFFFFFF) < 1 << 30:
                lo = right

    end_t = time.monotonic() + a.duration
    while time.monotonic() < end_t:
        lv.poll(0.05, on_ack)
    st["variant"] = a.variant
    with open(a.out, "w") as f:
        json.dump(st, f)
    print("inject_attacks holes %s: %s" % (a.variant, json.dumps(st)), file=sys.stderr)
    return 0


def cmd_storm(a):
    rng = random.Random(a.seed)
    lv = Live.started(a)
    if lv is None:
        return 2
    if a.delay > 0:
        t_end = time.monotonic() + a.delay
        while time.monotonic() < t_end:
            lv.poll(0.05)
    base = (lv.nxt + a.ahead) & 0xFFFFFFFF
    st = dict(kind=a.kind, packets=0, bytes=0, base_ahead=a.ahead, range=a.range)
    st["start_ns"] = time.monotonic_ns()
    end_t = time.monotonic() + a.duration
    while time.monotonic() < end_t:
        lv.poll(0)
        for _ in range(50):
            if a.kind == "spray":
                payload = rng.randbytes(1)
            else:
                payload = b""
                while len(payload) < 1200:
                    n = rng.randrange(40, 200)
                    payload += b"\x17\x03\x03" + struct.pack("!H", n) + rng.randbytes(n)
            off = rng.randrange(0, a.range - len(payload))
            lv.send((base + off) & 0xFFFFFFFF, payload)
            st["packets"] += 1
            st["bytes"] += len(payload)
        time.sleep(a.pause / 1000.0)
    st["end_ns"] = time.monotonic_ns()
    with open(a.out, "w") as f:
        json.dump(st, f)
    print("inject_attacks storm: %s" % json.dumps(st), file=sys.stderr)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("holes")
    h.add_argument("--variant", choices=("badcsum", "badack", "paws"), required=True)
    cp = sub.add_parser("copies")
    cp.add_argument("--ack-delta", type=int, default=1,
                    help="bytes past the genuine ACK (the kernel drops any > 0 here)")
    s = sub.add_parser("storm")
    s.add_argument("--kind", choices=("headers", "spray"), required=True)
    s.add_argument("--ahead", type=int, default=1 << 20)
    s.add_argument("--range", type=int, default=4 << 20)
    s.add_argument("--delay", type=float, default=1.0, help="s after the first data segment")
    s.add_argument("--pause", type=float, default=5.0, help="ms between bursts of 50")
    for p in (h, cp, s):
        p.add_argument("--dst", required=True)
        p.add_argument("--dport", type=int, required=True)
        p.add_argument("--duration", type=float, default=10.0)
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--out", required=True)
    a = ap.parse_args()
    return {"holes": cmd_holes, "copies": cmd_copies, "storm": cmd_storm}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
