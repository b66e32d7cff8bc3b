"""oracle: bench/scale's oracle, a receiver that delivers each record the
moment its last byte reached the receiving host, for N connections at once.

From a capture of the receiver's interface (tcpdump, headers only: the
payload length comes from the IP header) and utls-server's --records file
(one line per record the fork delivered: the client's port, the record's
stream offset and wire length, its send and delivery times), each record's
completion is the first time every byte of [offset, offset + wire length) of
its flow had been seen. The oracle's latency is completion - send; the
fork's is delivery - send; both are judged against the same one-way base
(the smallest oracle latency), as utls-server judges its own.
"""
import bisect
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "latency"))
from analyze import add_interval, tcp_packets  # noqa: E402


def load_records(path):
    """(real_minus_mono_ns, [(port, offset, wire_len, sent_ns, delivered_ns, ooo)])."""
    rmm, recs = None, []
    with open(path) as f:
        for line in f:
            if line.startswith("# real_minus_mono_ns"):
                rmm = int(line.split()[2])
            elif line.strip():
                port, off, wl, sent, at, ooo = (int(x) for x in line.split())
                recs.append((port, off, wl, sent, at, ooo))
    if rmm is None:
        raise ValueError("%s: no real_minus_mono_ns line" % path)
    return rmm, recs


def completions(pcap_path, port, recs):
    """{(client port, offset): CLOCK_REALTIME ns at which the record's last
    byte was first seen}, for the records |recs| of the flows toward |port|."""
    flows = {}
    for r in recs:
        flows.setdefault(r[0], []).append((r[1], r[2]))
    starts = {}
    for k, v in flows.items():
        v.sort()
        starts[k] = [o for o, _ in v]
    isn, covered, done = {}, {}, {}
    for t, sport, dport, seq, plen, flags in tcp_packets(pcap_path):
        if dport != port or sport not in flows:
            continue
        if flags & 0x02 and not flags & 0x10:    # the client's SYN: its ISN
            isn[sport] = seq
            continue
        if plen <= 0 or sport not in isn:
            continue
        a = (seq - isn[sport] - 1) & 0xffffffff   # these streams stay under 4 GiB
        b = a + plen
        recs_f, st = flows[sport], starts[sport]
        k = max(0, bisect.bisect_right(st, a) - 1)
        while k < len(recs_f) and st[k] < b:
            ro, wl = recs_f[k]
            k += 1
            key = (sport, ro)
            if key in done or ro + wl <= a:
                continue
            m = covered[key] = add_interval(covered.get(key, []), max(a, ro) - ro,
                                            min(b, ro + wl) - ro)
            if len(m) == 1 and m[0] == (0, wl):
                done[key] = t
                del covered[key]
    return done


def past_hole(recs, done, rmm):
    """(records past a hole, those of them the fork delivered out of order),
    from the capture: a record is past a hole when its last byte reached the
    host while an earlier record of its flow was still incomplete (by more
    than a millisecond: a lost segment keeps it so for a retransmission), and
    delivered out of order when the fork delivered it before that earlier
    record completed, which no in-order receiver can do. Records sharing the
    lost segment complete with it and are not past it."""
    flows = {}
    for p, off, wl, sent, at, ooo in recs:
        flows.setdefault(p, []).append((off, at + rmm))
    past = ooo = 0
    for p, rs in flows.items():
        rs.sort()
        filled = None  # when every record before this one had completed
        for off, at_real in rs:
            t = done.get((p, off))
            if t is None:     # not seen complete: the flow's later order is unknown
                break
            if filled is not None and t < filled - 1000000:
                past += 1
                if at_real < filled:
                    ooo += 1
            filled = t if filled is None else max(filled, t)
    return past, ooo


def summarize(pcap_path, records_path, port, rtt_ms):
    """The oracle's and the fork's share of records later than one RTT past
    the one-way base, over the records the capture saw complete."""
    rmm, recs = load_records(records_path)
    done = completions(pcap_path, port, recs)
    pairs = []
    for p, off, wl, sent, at, ooo in recs:
        t = done.get((p, off))
        if t is not None:
            pairs.append((t - rmm - sent, at - sent))
    if not pairs:
        raise ValueError("the capture completed none of %d records" % len(recs))
    past, ooo = past_hole(recs, done, rmm)
    base = min(o for o, _ in pairs)
    rtt = rtt_ms * 1000000
    n = len(pairs)
    oracle = sum(1 for o, _ in pairs if o - base > rtt) / n
    utls = sum(1 for _, u in pairs if u - base > rtt) / n
    # Deliveries before the capture saw the record complete would mean the
    # clocks or the offsets are off (or the capture missed bytes).
    early = sum(1 for o, u in pairs if u < o - 1000000)
    return {"records": len(recs), "completed_in_capture": n, "oracle_delayed_gt_rtt": oracle,
            "utls_delayed_gt_rtt": utls, "utls_minus_oracle": utls - oracle,
            "delivered_before_capture_ms": early,
            "past_hole": past, "past_hole_delivered_out_of_order": ooo,
            "ooo_share_past_hole": (ooo / past) if past else None}


if __name__ == "__main__":
    import json
    if len(sys.argv) != 5:
        raise SystemExit("usage: oracle.py PCAP RECORDS PORT RTT_MS")
    print(json.dumps(summarize(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
