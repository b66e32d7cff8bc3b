#!/usr/bin/python3
"""A forged SYN after each genuine one, for tests/net/tap_server.sh (stdlib only).

  forge_syn.py --iface IFACE --dport PORT --delay-ms MS --delta N --out FILE

Runs in the ROUTER namespace until SIGTERM. Watches IFACE (the router's
interface toward the sender) for SYNs to PORT. For each, DELAY-MS later (so
that it reaches the receiver after the genuine SYN, which the testbed delays
by half the RTT) it sends a SYN with the same 4-tuple, sequence number + N
and a WRONG TCP checksum (TTL 200), straight to the receiver: the kernel
drops it, a tap that trusts the last SYN it saw takes its ISN. Writes
{"syns_seen": n, "forged": n} as JSON on exit.
"""
import argparse
import json
import select
import signal
import socket
import struct
import time

import rawtcp
from rawtcp import ETH_P_IP


def forged_syn(src, dst, sport, dport, seq):
    return rawtcp.ipv4_tcp(src, dst, sport, dport, seq, 0, 0x02, 64240,  # SYN
                           b"", False, 0x4242, 200)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iface", required=True)
    ap.add_argument("--dport", type=int, required=True)
    ap.add_argument("--delay-ms", type=float, default=80)
    ap.add_argument("--delta", type=int, default=123456789)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    st = {"syns_seen": 0, "forged": 0}
    running = [True]

    def stop(*_):
        running[0] = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sn = rawtcp.packet_socket(a.iface)
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    due = []  # (time, packet, dst)
    while running[0]:
        timeout = 0.05 if not due else max(0.0, min(0.05, due[0][0] - time.monotonic()))
        try:
            r, _, _ = select.select([sn], [], [], timeout)
        except InterruptedError:
            continue
        if r:
            pkt, addr = sn.recvfrom(65535)
            if addr[1] == ETH_P_IP and len(pkt) >= 40 and pkt[0] >> 4 == 4 and pkt[9] == 6 \
                    and pkt[8] != 200:
                ihl = (pkt[0] & 15) * 4
                sport, dport, seq = struct.unpack("!HHI", pkt[ihl:ihl + 8])
                flags = pkt[ihl + 13]
                if dport == a.dport and flags & 0x12 == 0x02:
                    st["syns_seen"] += 1
                    src, dst = socket.inet_ntoa(pkt[12:16]), socket.inet_ntoa(pkt[16:20])
                    due.append((time.monotonic() + a.delay_ms / 1000.0,
                                forged_syn(src, dst, sport, dport, seq + a.delta), dst))
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, p, dst = due.pop(0)
            raw.sendto(p, (dst, 0))
            st["forged"] += 1
    with open(a.out, "w") as f:
        json.dump(st, f)


if __name__ == "__main__":
    main()
