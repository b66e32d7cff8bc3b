#!/usr/bin/python3
"""Latency metrics of utls-stream runs, and the oracle from a receiver pcap.

Library and command line. As a command:

  analyze.py --rtt MS [--pcap FILE --port P] RECV_LOG [SEND_LOG]

prints the metrics of one run as JSON.

Definitions (all times CLOCK_MONOTONIC, host-wide, so sender and receiver
clocks are the same clock):
  latency      receive time - send time of a record (ms)
  one_way      the path's configured one-way delay, RTT/2 (the testbed splits
               the RTT half per direction)
  delayed_gt_rtt  share of the records SENT whose latency exceeds
               one_way + RTT; a record never delivered (DTLS) counts as delayed
               in `delayed_or_lost`, not in `delayed_gt_rtt`, which is over the
               records delivered (for TCP modes the two are equal: every record
               is delivered)
  latency_gt_rtt  share with latency > RTT (another reading of the paper's
               "delayed by at least one full RTT"; reported, not the target)
  p50/p95/p99  percentiles of the latency of delivered records (ms)
  oracle       each record delivered the moment its last byte reached the
               receiving host: the first time every byte of the record had been
               seen on the receiver's interface, from a tcpdump capture of the
               same run (kernel receive timestamps, AF_PACKET, before TCP's
               reordering queue: the same vantage point as the tap, but
               measured independently of the library under test)
"""
import json
import math
import struct
import sys


def add_interval(intervals, lo, hi):
    """The sorted, merged union of |intervals| and [lo, hi)."""
    merged = []
    for x, y in sorted(intervals + [(lo, hi)]):
        if merged and x <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], y))
        else:
            merged.append((x, y))
    return merged


def load_jsonl(path):
    start, end, recs, hs = None, None, [], None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                o = json.loads(line)
            except ValueError:
                continue
            ev = o.get("event")
            if ev == "start":
                start = o
            elif ev == "end":
                end = o
            elif ev == "handshake":
                hs = o
            else:
                recs.append(o)
    return start, end, hs, recs


def percentile(sorted_vals, q):
    """Nearest-rank-with-interpolation percentile (numpy's default 'linear')."""
    if not sorted_vals:
        return None
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    pos = (len(sorted_vals) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def metrics(latencies_ms, count, rtt_ms, one_way_ms=None, extra=None):
    """latencies_ms: {index: latency} of delivered records; count: records sent."""
    if one_way_ms is None:
        one_way_ms = rtt_ms / 2.0
    thr = one_way_ms + rtt_ms
    vals = sorted(latencies_ms.values())
    n = len(vals)
    delayed = sum(1 for v in vals if v > thr)
    # Another reading of the paper's "delayed by at least one full RTT":
    # latency above one RTT (that is, half an RTT beyond the one-way delay).
    over_rtt = sum(1 for v in vals if v > rtt_ms)
    lost = count - n
    out = {
        "delayed_gt_rtt": round(delayed / n, 6) if n else None,
        "latency_gt_rtt": round(over_rtt / n, 6) if n else None,
        "p50_ms": round(percentile(vals, 50), 3) if n else None,
        "p95_ms": round(percentile(vals, 95), 3) if n else None,
        "p99_ms": round(percentile(vals, 99), 3) if n else None,
        "min_ms": round(vals[0], 3) if n else None,
        "max_ms": round(vals[-1], 3) if n else None,
        "mean_ms": round(sum(vals) / n, 3) if n else None,
        "records_sent": count,
        "records_delivered": n,
        "lost": round(lost / count, 6) if count else None,
        "delayed_or_lost": round((delayed + lost) / count, 6) if count else None,
        "threshold_ms": thr,
    }
    if extra:
        out.update(extra)
    return out


def records_delayed_per_loss(rtt_ms, interval_ms, recovery, one_way_ms=None, dupthresh=3,
                             over="one_way_plus_rtt", ack_pending=False):
    """First-principles count of the records that one isolated loss delays
    past the threshold on an application-limited stream (one record = one
    segment every |interval_ms|, nothing queued in the sender).

    Record 0 is lost. Its retransmission reaches the receiver at
    one_way + RTT + excess after record 0 was sent, where |excess| is the
    time the sender needs to learn of the loss beyond one RTT:
      "dupack": |dupthresh| duplicate ACKs (classic fast retransmit, or
                2.6-era SACK/FACK: loss declared when |dupthresh| later
                segments are acknowledged): the ACK of record |dupthresh|
                arrives dupthresh * interval later than record 0's would have.
                |ack_pending|: the receiver was still delaying its ACK of
                record -1 when record 1 arrived (a receiver ACKs at least
                every second segment, RFC 5681 4.2, Linux's delayed-ACK
                timer is 40 ms or more: about every other loss at 20 ms
                spacing). Record 1's ACK then acknowledges record -1, is
                not a duplicate, and one more record is needed:
                (dupthresh + 1) * interval;
      "rack":   RACK (RFC 8985): record 1's SACK arrives after interval + RTT,
                and record 0 is declared lost once RTT + reo_wnd has passed
                since it was sent, reo_wnd = min_rtt / 4 while no reordering
                was seen: excess = max(interval, RTT / 4).
    Record k (sent k * interval later) waits in TCP's queue for record 0, so
    it is delivered with latency one_way + RTT + excess - k * interval. It
    counts when that exceeds the threshold (one_way + RTT for
    "one_way_plus_rtt", RTT for "rtt"). The retransmission always leaves a
    little after the ACK (ACK processing, the pacing timer: about 2 ms
    measured), so a record exactly on the threshold counts as delayed.
    Returns the number of records delayed per isolated loss, the lost one
    included."""
    if one_way_ms is None:
        one_way_ms = rtt_ms / 2.0
    if recovery == "dupack":
        excess = (dupthresh + (1 if ack_pending else 0)) * interval_ms
    elif recovery == "rack":
        excess = max(interval_ms, rtt_ms / 4.0)
    else:
        raise ValueError("recovery: dupack or rack, not %r" % (recovery,))
    if over == "one_way_plus_rtt":
        margin = excess
    elif over == "rtt":
        margin = excess + one_way_ms
    else:
        raise ValueError("over: one_way_plus_rtt or rtt, not %r" % (over,))
    return int(math.floor(margin / interval_ms)) + 1


def run_latencies(recv_log):
    """{index: latency_ms}, start line, end line, and the raw records."""
    start, end, _, recs = load_jsonl(recv_log)
    lat = {}
    for r in recs:
        if r.get("ok") == 1:
            lat[r["i"]] = (r["recv_ns"] - r["send_ns"]) / 1e6
    return lat, start, end, recs


# --- pcap ---------------------------------------------------------------

def read_pcap(path):
    """Yields (t_ns_realtime, frame bytes, original length) of a pcap file."""
    with open(path, "rb") as f:
        gh = f.read(24)
        if len(gh) < 24:
            return
        magic = struct.unpack("<I", gh[:4])[0]
        if magic == 0xa1b2c3d4:
            endian, nano = "<", False
        elif magic == 0xa1b23c4d:
            endian, nano = "<", True
        elif magic == 0xd4c3b2a1:
            endian, nano = ">", False
        elif magic == 0x4d3cb2a1:
            endian, nano = ">", True
        else:
            raise ValueError("%s: not a pcap file (pcapng is not supported)" % path)
        linktype = struct.unpack(endian + "I", gh[20:24])[0]
        while True:
            h = f.read(16)
            if len(h) < 16:
                return
            sec, frac, incl, orig = struct.unpack(endian + "IIII", h)
            data = f.read(incl)
            if len(data) < incl:
                return
            t = sec * 1000000000 + (frac if nano else frac * 1000)
            yield t, linktype, data


def tcp_packets(pcap_path):
    """Every TCP packet of a pcap file: (t_ns_realtime, sport, dport, seq,
    payload_len, flags), the payload length from the IP header (so a capture
    cut at a snap length still gives it)."""
    for t, lt, d in read_pcap(pcap_path):
        if lt == 1:          # Ethernet
            if len(d) < 14:
                continue
            et = struct.unpack("!H", d[12:14])[0]
            off = 14
            if et == 0x8100 and len(d) >= 18:
                et = struct.unpack("!H", d[16:18])[0]
                off = 18
        elif lt == 113:      # Linux cooked (any)
            et = struct.unpack("!H", d[14:16])[0]
            off = 16
        elif lt in (12, 101):  # raw IP
            et = 0x0800 if (d[0] >> 4) == 4 else 0x86dd
            off = 0
        else:
            continue
        if et == 0x0800:
            if len(d) < off + 20 or d[off + 9] != 6:
                continue
            ihl = (d[off] & 15) * 4
            tot = struct.unpack("!H", d[off + 2:off + 4])[0]
            tcp = off + ihl
            ip_payload = tot - ihl
        elif et == 0x86dd:
            if len(d) < off + 40 or d[off + 6] != 6:
                continue
            ip_payload = struct.unpack("!H", d[off + 4:off + 6])[0]
            tcp = off + 40
        else:
            continue
        if len(d) < tcp + 20:
            continue
        sport, dport, seq = struct.unpack("!HHI", d[tcp:tcp + 8])
        doff = (d[tcp + 12] >> 4) * 4
        yield t, sport, dport, seq, ip_payload - doff, d[tcp + 13]


def tcp_segments(pcap_path, port):
    """Data segments toward |port|: (t_ns_realtime, seq, payload_len),
    and the ISN of the SYN toward |port| (the last one seen)."""
    segs, isn = [], None
    for t, _, dport, seq, plen, flags in tcp_packets(pcap_path):
        if dport != port:
            continue
        if flags & 0x02 and not flags & 0x10:    # SYN
            isn = seq
            segs = []        # a new connection: forget older ones
            continue
        if plen > 0:
            segs.append((t, seq, plen))
    return segs, isn


def stream_offsets(segs, isn):
    """Yields (t, stream offset, payload length) for tcp_segments()' list:
    each 32-bit sequence number made an offset from the first payload byte,
    widened past 4 GiB around the furthest offset seen so far."""
    end_hint = 0
    for t, seq, plen in segs:
        rel = (seq - isn - 1) & 0xffffffff
        off = rel + (end_hint & ~0xffffffff)
        if off + (1 << 31) < end_hint:
            off += 1 << 32
        end_hint = max(end_hint, off + plen)
        yield t, off, plen


def oracle_from_pcap(pcap_path, port, offsets, wire_len, real_minus_mono_ns):
    """{index: CLOCK_MONOTONIC ns at which the record's last byte was first
    seen}. offsets: {index: stream offset of the record's header}."""
    segs, isn = tcp_segments(pcap_path, port)
    if isn is None:
        raise ValueError("%s: no SYN toward port %d" % (pcap_path, port))
    # Records sorted by offset, for a bisection per segment.
    order = sorted(offsets.items(), key=lambda kv: kv[1])
    starts = [o for _, o in order]
    import bisect
    covered = {i: [] for i in offsets}   # merged [a, b) intervals, record-relative
    done = {}
    for t, off, plen in stream_offsets(segs, isn):
        a, b = off, off + plen
        k = bisect.bisect_right(starts, a) - 1
        if k < 0:
            k = 0
        while k < len(order) and starts[k] < b:
            idx, ro = order[k]
            k += 1
            if idx in done or ro + wire_len <= a:
                continue
            lo, hi = max(a, ro) - ro, min(b, ro + wire_len) - ro
            merged = covered[idx] = add_interval(covered[idx], lo, hi)
            if len(merged) == 1 and merged[0] == (0, wire_len):
                done[idx] = t - real_minus_mono_ns
    return done


def record_offsets(recv_recs, send_hs, count, size, wire_len):
    """Stream offset of every record: from the uTLS receiver's log when it has
    them, else from the sender's handshake byte count (one record per write)."""
    offs = {}
    for r in recv_recs:
        if r.get("ok") == 1 and "offset" in r:
            offs[r["i"]] = r["offset"]
    if len(offs) == count:
        return offs
    if send_hs is None:
        raise ValueError("no offsets: need the utls receiver log or the sender log")
    base = send_hs["first_app_offset"]
    return {i: base + i * wire_len for i in range(count)}


def overtaken(completion):
    """How many records were overtaken in the network: their last byte reached
    the host after the last byte of some later record. On a path that does
    not reorder, that is a record (or part of one) lost and retransmitted.
    |completion|: {index: time}."""
    n, earliest_later = 0, None
    for i in sorted(completion, reverse=True):
        t = completion[i]
        if earliest_later is not None and t > earliest_later:
            n += 1
        earliest_later = t if earliest_later is None else min(earliest_later, t)
    return n


def behind_oracle(latencies, oracle_latencies):
    """How far a mode's deliveries trail the oracle of the same run: records
    delivered more than 5 and 20 ms after their last byte reached the host,
    and the largest lag. A receiver that delivers as early as the bytes allow
    stays within about a millisecond; more means its process was not
    scheduled (a loaded machine: stock TLS is late by as much then) or held a
    record back."""
    lags = [latencies[i] - oracle_latencies[i] for i in latencies if i in oracle_latencies]
    return {"records": len(lags),
            "gt_5ms": sum(1 for x in lags if x > 5.0),
            "gt_20ms": sum(1 for x in lags if x > 20.0),
            "max_ms": round(max(lags), 3) if lags else None}


# --- QUIC: the oracle from a capture decrypted with the key log -------------

def _quic_frames(node):
    """Every quic.frame dict below |node| (tshark -T json nests a packet's
    frames under "quic.frame", a dict for one frame and a list for several,
    and a UDP datagram with coalesced QUIC packets makes "quic" a list)."""
    if isinstance(node, list):
        for x in node:
            yield from _quic_frames(x)
    elif isinstance(node, dict):
        for k, v in node.items():
            if k == "quic.frame":
                for f in (v if isinstance(v, list) else [v]):
                    if isinstance(f, dict):
                        yield f
            elif isinstance(v, (dict, list)):
                yield from _quic_frames(v)


def _merge_duplicate_keys(pairs):
    """json object_pairs_hook: tshark -T json writes a key once per
    occurrence (a packet with three frames has "quic.frame" three times, a
    datagram with coalesced packets "quic" twice); keep them all, as a list."""
    d, multi = {}, set()
    for k, v in pairs:
        if k not in d:
            d[k] = v
            continue
        if k not in multi:
            d[k] = [d[k]]
            multi.add(k)
        d[k].append(v)
    return d


def _hexbytes(s, n=None):
    """bytes of tshark's "aa:bb:..." (the first |n| only)."""
    if n is not None:
        s = s[:3 * n - 1]
    return bytes.fromhex(s.replace(":", ""))


def _epoch_ns(s):
    sec, _, frac = s.partition(".")
    return int(sec) * 1000000000 + int((frac + "000000000")[:9])


def quic_packets(pcap_path, keylog, port, tshark="tshark"):
    """Decrypts the QUIC packets toward |port| in |pcap_path| with the NSS key
    log |keylog| (tshark -o tls.keylog_file), one UDP datagram at a time. Raises ValueError when tshark fails or
    decrypts nothing. Yields (t_ns_realtime, UDP payload bytes, frames)."""
    import subprocess
    cmd = [tshark, "-n", "-r", pcap_path, "-o", "tls.keylog_file:" + keylog,
           "-d", "udp.port==%d,quic" % port, "-Y", "udp.dstport==%d" % port,
           "-T", "json", "-J", "frame udp quic"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise ValueError("tshark failed on %s: %s" % (pcap_path, r.stderr.decode()[-500:]))
    pkts = json.loads(r.stdout.decode() or "[]", object_pairs_hook=_merge_duplicate_keys)
    for pk in pkts:
        layers = pk.get("_source", {}).get("layers", {})
        t = _epoch_ns(layers["frame"]["frame.time_epoch"])
        udp = layers.get("udp", {})
        udp_payload = int((udp[0] if isinstance(udp, list) else udp).get("udp.length", "8")) - 8
        yield t, udp_payload, list(_quic_frames(layers.get("quic", {})))


def quic_oracle(pcap_path, keylog, port, mode, size, real_minus_mono_ns, tshark="tshark"):
    """{index: CLOCK_MONOTONIC ns at which the message's last byte first
    reached the receiving host}, from the receiver-side capture decrypted
    with the run's key log. Returns (completion, info).

    stream:   STREAM frames (quic.stream.stream_id, .offset, quic.stream_data);
              a stream's message index is read from its decrypted first
              bytes (the payload header); the message is complete when its
              [0, size) bytes have all been seen, retransmissions included;
    datagram: each DATAGRAM frame (quic.dg) is a whole message; its index is
              in its header.
    The frame types are 0x08-0x0f (STREAM) and 0x30/0x31 (DATAGRAM)."""
    import struct as _st
    covered, sid_index, first_t = {}, {}, {}
    done = {}
    packets = frames = 0
    multi = set()     # messages whose first copy came in more than one packet
    seen_in = {}
    sizes = []        # UDP payload of the datagrams that carry message data
    for t, udp_len, fl in quic_packets(pcap_path, keylog, port, tshark):
        packets += 1
        nframes = frames
        for f in fl:
            ftype = int(f.get("quic.frame_type", "-1"))
            if mode == "stream" and 0x08 <= ftype <= 0x0f and "quic.stream_data" in f:
                frames += 1
                sid = int(f["quic.stream.stream_id"])
                off = int(f.get("quic.stream.offset", "0"))
                data = f["quic.stream_data"]
                n = (len(data) + 1) // 3
                if off == 0 and sid not in sid_index and n >= 8:
                    head = _hexbytes(data, 8)
                    if _st.unpack("<I", head[:4])[0] == 0x6d727473:
                        sid_index[sid] = _st.unpack("<I", head[4:8])[0]
                merged = covered[sid] = add_interval(covered.get(sid, []), off, off + n)
                seen_in.setdefault(sid, set()).add(t)
                if sid not in first_t and merged[0][0] == 0 and merged[0][1] >= size:
                    first_t[sid] = t
                    if len(seen_in[sid]) > 1:
                        multi.add(sid)
            elif mode == "datagram" and ftype in (0x30, 0x31) and "quic.dg" in f:
                frames += 1
                head = _hexbytes(f["quic.dg"], 8)
                if len(head) == 8 and _st.unpack("<I", head[:4])[0] == 0x6d727473:
                    idx = _st.unpack("<I", head[4:8])[0]
                    done.setdefault(idx, t - real_minus_mono_ns)
        if frames > nframes:
            sizes.append(udp_len)
    if mode == "stream":
        for sid, t in first_t.items():
            if sid in sid_index:
                done[sid_index[sid]] = t - real_minus_mono_ns
    if packets and not frames:
        raise ValueError("%s: no decrypted %s frames (key log %s)" % (pcap_path, mode, keylog))
    info = {"source": "pcap decrypted with the key log (tshark)", "packets_to_receiver": packets,
            "message_frames": frames}
    if sizes:
        sizes.sort()
        info["udp_payload_bytes_median"] = sizes[len(sizes) // 2]
        info["udp_payload_bytes_max"] = sizes[-1]
    if mode == "stream":
        info["messages_in_more_than_one_packet"] = len(multi & set(sid_index))
    return done, info


def overtook(recv_ns):
    """How many messages were delivered before an earlier message that was
    delivered too (uTLS's "out of order": past a hole). |recv_ns|: {index:
    delivery time}."""
    n, latest_earlier = 0, None
    for i in sorted(recv_ns):
        t = recv_ns[i]
        if latest_earlier is not None and t < latest_earlier:
            n += 1
        latest_earlier = t if latest_earlier is None else max(latest_earlier, t)
    return n


def analyze_quic_run(recv_log, rtt_ms, send_log, pcap=None, keylog=None, port=None,
                     tshark="tshark"):
    """analyze_run for quic-stream's logs (mode quic_stream / quic_datagram):
    the same metrics; out_of_order from the delivery order (overtook); the
    oracle from the decrypted capture (quic_oracle)."""
    lat, start, end, recs = run_latencies(recv_log)
    count, size = start["count"], start["size"]
    mode = start["mode"].split("_", 1)[1]
    recv_ns = {r["i"]: r["recv_ns"] for r in recs if r.get("ok") == 1}
    extra = {"out_of_order": overtook(recv_ns),
             "duplicates": end.get("duplicates") if end else None,
             "bad": end.get("bad") if end else None}
    res = {"run": metrics(lat, count, rtt_ms, extra=extra), "latencies": lat}
    if end and "quic_stats" in end:
        res["run"]["quic_receiver_stats"] = end["quic_stats"]
    send_start, send_end, send_hs, send_recs = load_jsonl(send_log)
    if send_end and "quic_stats" in send_end:
        res["run"]["quic_sender_stats"] = send_end["quic_stats"]
    if send_hs:
        res["run"]["cipher"] = send_hs.get("cipher")
    if pcap and keylog:
        comp, info = quic_oracle(pcap, keylog, port, mode, size, start["real_minus_mono_ns"],
                                 tshark)
        send_ns = {r["i"]: r["send_ns"] for r in send_recs}
        olat = {i: (t - send_ns[i]) / 1e6 for i, t in comp.items() if i in send_ns}
        info["records_complete_in_pcap"] = len(comp)
        info["overtaken"] = overtaken(comp)
        res["oracle"] = metrics(olat, count, rtt_ms, extra=info)
        res["oracle_latencies"] = olat
    return res


def analyze_run(recv_log, rtt_ms, send_log=None, pcap=None, port=None, wire_overhead=22):
    lat, start, end, recs = run_latencies(recv_log)
    count = start["count"]
    size = start["size"]
    extra = {"out_of_order": sum(1 for r in recs if r.get("ooo") == 1 and r.get("ok") == 1),
             "duplicates": end.get("duplicates") if end else None,
             "bad": end.get("bad") if end else None}
    res = {"run": metrics(lat, count, rtt_ms, extra=extra)}
    if end and "utls" in end:
        res["run"]["utls_stats"] = end["utls"]
    if end and "tap" in end:
        res["run"]["tap_stats"] = end["tap"]
    # The tap's own view: arrival_ns of each record (out-of-order records: the
    # kernel timestamp of the segment that completed it; in-order records: when
    # the library read them from the socket).
    tap = {r["i"]: (r["arrival_ns"] - r["send_ns"]) / 1e6 for r in recs
           if r.get("ok") == 1 and "arrival_ns" in r}
    if tap:
        res["tap_arrival"] = metrics(tap, count, rtt_ms)
    res["latencies"] = lat
    if pcap:
        send_hs = load_jsonl(send_log)[2] if send_log else None
        wire_len = size + wire_overhead
        offs = record_offsets(recs, send_hs, count, size, wire_len)
        if any(r.get("wire_len") not in (None, wire_len) for r in recs):
            raise ValueError("wire length differs from size + %d" % wire_overhead)
        comp = oracle_from_pcap(pcap, port, offs, wire_len, start["real_minus_mono_ns"])
        send_ns = {r["i"]: r["send_ns"] for r in recs if r.get("ok") == 1}
        if send_log:
            for r in load_jsonl(send_log)[3]:
                send_ns.setdefault(r["i"], r["send_ns"])
        olat = {i: (t - send_ns[i]) / 1e6 for i, t in comp.items() if i in send_ns}
        res["oracle"] = metrics(olat, count, rtt_ms,
                                extra={"source": "pcap", "records_complete_in_pcap": len(comp),
                                       "overtaken": overtaken(comp)})
        res["oracle_latencies"] = olat
    return res


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--rtt", type=float, required=True)
    ap.add_argument("--pcap")
    ap.add_argument("--port", type=int, default=4433)
    ap.add_argument("recv_log")
    ap.add_argument("send_log", nargs="?")
    a = ap.parse_args(argv)
    r = analyze_run(a.recv_log, a.rtt, a.send_log, a.pcap, a.port)
    r.pop("latencies", None)
    r.pop("oracle_latencies", None)
    json.dump(r, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
