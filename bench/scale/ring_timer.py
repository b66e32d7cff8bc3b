#!/usr/bin/env python3
"""What a packet ring costs an unrelated bulk TCP flow on the same host.

Usage: ring_timer.py [--runs 6] [--mb 2048] [--variants v3-1,v3-100,v2,filter,tap]
                      [--bulk-bin build/bench/scale/bulkflow]

In a network namespace of its own (unshare -n, loopback only), each run
times the CPU (user + sys of both ends) of an MB-MiB TCP transfer over
loopback twice: once beside an AF_PACKET socket of the given variant, with
no reader, and once beside nothing. The two alternate, run after run, so
that drift falls on both. Variants:

  v3-T    a TPACKET_V3 ring of 64 blocks of 256 KiB whose block retire
          timer is T ms (the tap's ring until it moved to V2 used 1)
  v2      a TPACKET_V2 ring of 2 KiB frames, the same 16 MiB, no timer:
          the tap's ring (lib/bio/tap_local.h)
  filter  a plain packet socket with a reject-all filter (no ring), which
          sees outgoing packets too, as the tap's control socket does
  tap     both of the tap's sockets: the v2 ring and such a plain socket

Every socket sees every interface (ETH_P_ALL) and rejects every packet in
its filter, as the tap's filters reject the flow's packets. Prints one JSON
object: per variant, the CPU of each run with and without the socket and
the ratio of the medians. Needs root (exit 77 without). docs/tap.md, COST,
gives what it measured.
"""
import argparse
import ctypes
import json
import mmap
import os
import socket
import statistics
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bulkflow  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ETH_P_ALL = 3
SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_VERSION = 10
PACKET_IGNORE_OUTGOING = 23
SO_ATTACH_FILTER = 26
TPACKET_V2, TPACKET_V3 = 1, 2
BLOCK, BLOCKS, FRAME = 1 << 18, 64, 1 << 11


def open_socket(variant):
    """The packet socket of |variant|, bound to every interface; returns
    what must stay alive while it is measured."""
    if variant == "tap":
        return open_socket("v2") + open_socket("filter")
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    reject = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, 0))  # ret #0
    s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER,
                 struct.pack("HL", 1, ctypes.addressof(reject)))
    keep = [s, reject]
    if variant == "filter":
        return keep
    s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    if variant == "v2":
        s.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        s.setsockopt(SOL_PACKET, PACKET_RX_RING,
                     struct.pack("IIII", BLOCK, BLOCKS, FRAME, BLOCK // FRAME * BLOCKS))
    elif variant.startswith("v3-"):
        s.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
        s.setsockopt(SOL_PACKET, PACKET_RX_RING,
                     struct.pack("IIIIIII", BLOCK, BLOCKS, FRAME, BLOCK // FRAME * BLOCKS,
                                 int(variant[3:]), 0, 0))
    else:
        raise SystemExit("unknown variant %r" % variant)
    keep.append(mmap.mmap(s.fileno(), BLOCK * BLOCKS))
    return keep


def inside(a):
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    out, port = {}, 7000
    for v in a.variants.split(","):
        runs = {"with": [], "without": []}
        for i in range(a.runs):
            for side in (("with", "without") if i % 2 == 0 else ("without", "with")):
                keep = open_socket(v) if side == "with" else None
                time.sleep(0.2)
                runs[side].append(round(bulkflow.cpu_ms(a.mb, port, a.bulk_bin)[0]))
                port += 1
                del keep
            print("ring_timer: %s run %d of %d: %d ms with, %d without"
                  % (v, i + 1, a.runs, runs["with"][-1], runs["without"][-1]),
                  file=sys.stderr, flush=True)
        out[v] = dict(runs, ratio=statistics.median(runs["with"])
                      / statistics.median(runs["without"]))
    print(json.dumps({"bench": "ring_timer", "mb": a.mb, "variants": out}, indent=1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--mb", type=int, default=2048)
    ap.add_argument("--variants", default="v3-1,v3-100,v2,filter,tap")
    ap.add_argument("--bulk-bin", default=bulkflow.default_bin(os.path.join(ROOT, "build")),
                    help="the bulk flow program (default: build/bench/scale/bulkflow)")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inside:
        return inside(a)
    if os.geteuid() != 0:
        print("SKIP: ring_timer needs root (a network namespace, AF_PACKET)")
        return 77
    return subprocess.run(["unshare", "-n", sys.executable, os.path.abspath(__file__), "--inside",
                           "--runs", str(a.runs), "--mb", str(a.mb), "--variants",
                           a.variants, "--bulk-bin", os.path.abspath(a.bulk_bin)]).returncode


if __name__ == "__main__":
    sys.exit(main())
