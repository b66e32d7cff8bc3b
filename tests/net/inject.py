#!/usr/bin/python3
"""Forged TCP segments for tests/net/forged_segments.sh (Python 3 stdlib only).

  inject.py inject --dst IP --dport PORT [--iface eth0] [--duration S]
                   [--interval MS] [--seed N] [--good-checksum] --out FILE
      Runs in the SENDER namespace. Learns the live connection (source port,
      sequence and ack numbers, TLS record boundaries) by watching the
      sender's own outgoing segments on an AF_PACKET socket, then for
      --duration seconds sends forged IPv4 TCP segments with the connection's
      4-tuple through a raw socket: in-window random bytes ahead of and behind
      the live sequence number, TLS-shaped records (17 03 03 len, random body)
      at the offsets where genuine records will land, packs of small
      TLS-shaped records, and out-of-window segments (2^31 away, far ahead, far
      behind). Every forged segment carries a WRONG TCP checksum unless
      --good-checksum, and IP TTL 200 (the genuine sender uses 64) so a
      sniffer can tell the two apart. Writes counts per kind as JSON.

  inject.py count --src IP --dport PORT [--iface eth0] --out FILE
      Runs in the RECEIVER namespace until SIGTERM/SIGINT: counts the IPv4 TCP
      segments from --src to --dport that arrive, genuine (TTL < 150) and
      forged (TTL >= 150), with payload bytes. Writes JSON on exit.
"""
import argparse
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time

import rawtcp
from rawtcp import ETH_P_IP

FORGED_TTL = 200
REC_WIRE = None  # learned: the genuine record size on the wire


def packet_socket(iface):
    return rawtcp.packet_socket(iface, 4 << 20)


def build(src, dst, sport, dport, seq, ack, payload, good, ipid):
    return rawtcp.ipv4_tcp(src, dst, sport, dport, seq, ack, 0x18, 4096,  # PSH|ACK
                           payload, good, ipid, FORGED_TTL)


def tls_record(rng, body_len):
    return b"\x17\x03\x03" + struct.pack("!H", body_len) + rng.randbytes(body_len)


def cmd_inject(a):
    rng = random.Random(a.seed)
    sn = packet_socket(a.iface)
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    st = dict(sport=None, nxt=None, ack=None, boundary=None, rec_wire=None, seen=0)

    def absorb(block):
        """Reads every queued packet; updates the live connection state."""
        while True:
            r, _, _ = select.select([sn], [], [], 0 if not block else 0.2)
            if not r:
                return
            block = False
            pkt, addr = sn.recvfrom(65535)
            if addr[1] != ETH_P_IP:
                continue
            p = rawtcp.parse_ipv4_tcp(pkt)
            if not p or p["ttl"] == FORGED_TTL or p["dst"] != a.dst or p["dport"] != a.dport:
                continue
            if st["sport"] is None and len(p["payload"]) > 0:
                st["sport"], st["src"] = p["sport"], p["src"]
            if p["sport"] != st["sport"]:
                continue
            st["seen"] += 1
            pl = p["payload"]
            end = (p["seq"] + len(pl)) & 0xFFFFFFFF
            if st["nxt"] is None or ((end - st["nxt"]) & 0xFFFFFFFF) < 1 << 31:
                st["nxt"] = end
            st["ack"] = p["ack"]
            if len(pl) >= 5 and pl[:3] == b"\x17\x03\x03":
                w = 5 + struct.unpack("!H", pl[3:5])[0]
                if st["boundary"] is None or ((p["seq"] - st["boundary"]) & 0xFFFFFFFF) < 1 << 31:
                    st["boundary"] = p["seq"]
                    st["rec_wire"] = w

    t0 = time.monotonic()
    while st["nxt"] is None or st["boundary"] is None:
        absorb(True)
        if time.monotonic() - t0 > a.wait:
            print("inject: no data segment of the connection seen", file=sys.stderr)
            return 2
    kinds = {k: {"packets": 0, "bytes": 0} for k in (
        "inwin_random_ahead", "inwin_random_behind", "inwin_tls_at_record_offsets",
        "inwin_tls_small_pack", "outwin_2pow31", "outwin_far_ahead", "outwin_far_behind")}
    ipid = 1

    def send(kind, seq, payload):
        nonlocal ipid
        pkt = build(st["src"], a.dst, st["sport"], a.dport, seq, st["ack"], payload,
                    a.good_checksum, ipid)
        ipid = (ipid + 1) & 0xFFFF
        raw.sendto(pkt, (a.dst, 0))
        kinds[kind]["packets"] += 1
        kinds[kind]["bytes"] += len(payload)

    print("inject: sport %d nxt %u record start %u (%d bytes)" % (
        st["sport"], st["nxt"], st["boundary"], st["rec_wire"]), file=sys.stderr)
    first_nxt = st["nxt"]
    end_t = time.monotonic() + a.duration
    rounds = 0
    while time.monotonic() < end_t:
        absorb(False)
        nxt, rw = st["nxt"], st["rec_wire"]
        # (a) in window: random bytes just ahead of what the sender has sent
        # (they land where later genuine bytes will) and behind it (holes,
        # bytes in flight, bytes the receiver already has).
        send("inwin_random_ahead", nxt + rng.randrange(0, 48000),
             rng.randbytes(rng.randrange(1, 1401)))
        send("inwin_random_behind", nxt - rng.randrange(1, 48000),
             rng.randbytes(rng.randrange(1, 1401)))
        # TLS-shaped: a complete record of the genuine size at the offset where
        # a future genuine record starts (two segments, split like the real
        # ones), so the forged bytes reach the tap first.
        k = rng.randrange(1, 20)
        rec = tls_record(rng, rw - 5)
        seq = st["boundary"] + k * rw
        send("inwin_tls_at_record_offsets", seq, rec[:1448])
        if len(rec) > 1448:
            send("inwin_tls_at_record_offsets", seq + 1448, rec[1448:])
        # Many small plausible headers in one segment: probe work per byte.
        pack = b""
        while len(pack) < 1300:
            pack += tls_record(rng, rng.randrange(17, 120))
        send("inwin_tls_small_pack", nxt + rng.randrange(-20000, 30000), pack)
        # (b) out of window.
        body = tls_record(rng, rw - 5)[:1448] if rounds % 2 else rng.randbytes(1000)
        send("outwin_2pow31", nxt + (1 << 31) + rng.randrange(-100000, 100000), body)
        send("outwin_far_ahead", nxt + rng.randrange(64 << 20, 1 << 30), body)
        send("outwin_far_behind", nxt - rng.randrange(64 << 20, 1 << 30), body)
        rounds += 1
        time.sleep(a.interval / 1000.0)
    total_p = sum(k["packets"] for k in kinds.values())
    total_b = sum(k["bytes"] for k in kinds.values())
    out = dict(sport=st["sport"], good_checksum=a.good_checksum, rounds=rounds,
               genuine_segments_watched=st["seen"], first_nxt=first_nxt, last_nxt=st["nxt"],
               record_wire_len=st["rec_wire"], packets=total_p, bytes=total_b, kinds=kinds)
    with open(a.out, "w") as f:
        json.dump(out, f)
    print("inject: %d forged segments, %d bytes, %d rounds" % (total_p, total_b, rounds),
          file=sys.stderr)
    return 0


def cmd_count(a):
    sn = packet_socket(a.iface)
    c = {"genuine": 0, "genuine_bytes": 0, "forged": 0, "forged_bytes": 0}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    if a.ready:
        open(a.ready, "w").write("%d\n" % os.getpid())
    while not stop:
        try:
            r, _, _ = select.select([sn], [], [], 0.2)
        except InterruptedError:
            continue
        if not r:
            continue
        pkt, addr = sn.recvfrom(65535)
        if addr[1] != ETH_P_IP or addr[2] == socket.PACKET_OUTGOING:
            continue
        p = rawtcp.parse_ipv4_tcp(pkt)
        if not p or p["src"] != a.src or p["dport"] != a.dport:
            continue
        k = "forged" if p["ttl"] >= 150 else "genuine"
        c[k] += 1
        c[k + "_bytes"] += len(p["payload"])
    with open(a.out, "w") as f:
        json.dump(c, f)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("inject")
    i.add_argument("--dst", required=True)
    i.add_argument("--dport", type=int, required=True)
    i.add_argument("--iface", default="eth0")
    i.add_argument("--duration", type=float, default=5.0)
    i.add_argument("--interval", type=float, default=20.0, help="ms between rounds")
    i.add_argument("--wait", type=float, default=20.0, help="s to wait for the connection")
    i.add_argument("--seed", type=int, default=1)
    i.add_argument("--good-checksum", action="store_true",
                   help="valid TCP checksums: the kernel accepts in-window forgeries")
    i.add_argument("--out", required=True)
    c = sub.add_parser("count")
    c.add_argument("--src", required=True)
    c.add_argument("--dport", type=int, required=True)
    c.add_argument("--iface", default="eth0")
    c.add_argument("--ready")
    c.add_argument("--out", required=True)
    a = ap.parse_args()
    return cmd_inject(a) if a.cmd == "inject" else cmd_count(a)


if __name__ == "__main__":
    sys.exit(main())
