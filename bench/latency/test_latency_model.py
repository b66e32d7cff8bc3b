#!/usr/bin/python3
"""Unit test of bench/latency's loss-recovery model and helpers (ctest
bench.latency_model, label unit). No network, no root.

  * analyze.records_delayed_per_loss against counts worked out by hand from
    the per-record latencies (one-way 50 ms, RTT 100 ms, records every 20 ms);
  * analyze.overtaken on arrival orders with one, two adjacent and no losses;
  * run.parse_counters on the shape of /proc/net/snmp and /proc/net/netstat,
    and its refusal of truncated or mismatched text;
  * run.recovery_model on a made-up result document;
  * analyze.behind_oracle on lags just under and over its thresholds;
  * analyze.overtook (QUIC's out-of-order count) and run.check_doc, the
    assertions of the QUIC smoke test, on good and broken documents.
Exit 0 pass, 1 fail.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import analyze  # noqa: E402
import run  # noqa: E402

failures = []


def expect(what, got, want):
    if got != want:
        failures.append("%s: got %r, expected %r" % (what, got, want))


def expect_raises(what, fn):
    try:
        fn()
    except ValueError:
        return
    failures.append("%s: no ValueError" % what)


def test_model():
    f = analyze.records_delayed_per_loss
    # RACK: lost record at 50 + 100 + 25 = 175 ms, the next at 155, then 135: two past 150.
    expect("rack, > one-way + RTT", f(100, 20, "rack"), 2)
    # Over RTT (100 ms): 175, 155, 135, 115, then 95: four.
    expect("rack, > RTT", f(100, 20, "rack", over="rtt"), 4)
    # Three dupacks: 210, 190, 170, 150 (+ the pacing delay): four.
    expect("dupack", f(100, 20, "dupack"), 4)
    # The first out-of-order ACK was not a duplicate: 230 ... 150: five.
    expect("dupack, delayed ACK pending", f(100, 20, "dupack", ack_pending=True), 5)
    expect("dupack, > RTT", f(100, 20, "dupack", over="rtt"), 6)
    # RTT 200: RACK's window 50 ms > 20: 300+50 ... records at 50, 30, 10 over: three.
    expect("rack, RTT 200", f(200, 20, "rack"), 3)
    # Records every 100 ms at RTT 100: RACK waits for the next SACK (100 ms): two.
    expect("rack, sparse records", f(100, 100, "rack"), 2)
    expect("dupack, dupthresh 1", f(100, 20, "dupack", dupthresh=1), 2)
    expect_raises("unknown recovery", lambda: f(100, 20, "fack"))
    expect_raises("unknown threshold", lambda: f(100, 20, "rack", over="p99"))


def test_overtaken():
    o = analyze.overtaken
    expect("in order", o({0: 1, 1: 2, 2: 3}), 0)
    expect("empty", o({}), 0)
    expect("one lost", o({0: 1, 1: 9, 2: 3, 3: 4}), 1)
    expect("two adjacent lost", o({0: 1, 1: 9, 2: 10, 3: 3, 4: 4}), 2)
    expect("two separate losses", o({0: 7, 1: 2, 2: 3, 3: 9, 4: 5}), 2)
    expect("the last record lost is not seen", o({0: 1, 1: 2, 2: 9}), 0)


def test_counters():
    text = ("Tcp: RtoAlgorithm RetransSegs InSegs\nTcp: 1 57 3000\n"
            "TcpExt: TCPRenoRecovery TCPSackRecovery\nTcpExt: 52 0\n")
    d = run.parse_counters(text)
    expect("RetransSegs", d.get("Tcp:RetransSegs"), 57)
    expect("TCPRenoRecovery", d.get("TcpExt:TCPRenoRecovery"), 52)
    expect("count", len(d), 5)
    expect_raises("odd line count", lambda: run.parse_counters(text + "Tcp: X\n"))
    expect_raises("group mismatch", lambda: run.parse_counters("Tcp: A B\nUdp: 1 2\n"))
    expect_raises("length mismatch", lambda: run.parse_counters("Tcp: A B\nTcp: 1\n"))
    expect_raises("not a number", lambda: run.parse_counters("Tcp: A\nTcp: x\n"))
    with open("/proc/net/snmp") as a, open("/proc/net/netstat") as b:
        live = run.parse_counters(a.read() + b.read())
    for k in run.TCP_COUNTERS:
        if k not in live:
            failures.append("this kernel has no counter %s (TCP_COUNTERS would read 0)" % k)


def test_recovery_model():
    cfg = {"rtt_ms": 100.0, "interval_ms": 20.0, "loss_pct": 2.0}
    doc = {"tls": {"delayed_gt_rtt": 0.044, "latency_gt_rtt": 0.088, "records_sent": 3000,
                   "oracle_same_run": {"overtaken": 60}},
           "variants": {"no_sack": {"tls": {"delayed_gt_rtt": 0.1, "latency_gt_rtt": 0.14,
                                            "records_sent": 3000,
                                            "oracle_same_run": {"overtaken": 60}}}}}
    m = run.recovery_model(cfg, doc)
    expect("rack predicted", m["default"]["predicted_delayed_gt_rtt"], 0.04)
    expect("dupack per loss", m["no_sack"]["records_delayed_per_loss"], 4.5)
    expect("dupack predicted", m["no_sack"]["predicted_delayed_gt_rtt"], 0.09)
    expect("rack measured per loss", m["default"]["measured_records_delayed_per_loss"], 2.2)
    expect("dupack measured per loss", m["no_sack"]["measured_records_delayed_per_loss"], 5.0)
    expect("dupack at measured loss", m["no_sack"]["predicted_delayed_gt_rtt_at_measured_loss"],
           0.09)
    expect("ratio predicted", m["tls_delayed_ratio_no_sack_to_default"]["predicted"], 2.25)
    expect("ratio measured", m["tls_delayed_ratio_no_sack_to_default"]["measured"], 2.273)
    # Without the variant, only the prediction.
    del doc["variants"]
    m = run.recovery_model(cfg, doc)
    expect("no variant: no measurement", "measured_delayed_gt_rtt" in m["no_sack"], False)
    expect("no variant: no measured ratio", "measured" in m["tls_delayed_ratio_no_sack_to_default"],
           False)


def test_behind_oracle():
    f = analyze.behind_oracle
    oracle = {0: 50.0, 1: 50.0, 2: 170.0, 3: 50.0}
    # On time, just over 5 ms, just over 20 ms, and a record the oracle lacks.
    got = f({0: 50.9, 1: 55.1, 2: 190.5, 4: 400.0}, oracle)
    expect("behind_oracle counts", (got["records"], got["gt_5ms"], got["gt_20ms"]), (3, 2, 1))
    expect("behind_oracle max", got["max_ms"], 20.5)
    edge = f({0: 55.0, 2: 190.0}, oracle)
    expect("behind_oracle: exactly 5 ms is not over 5, exactly 20 not over 20",
           (edge["gt_5ms"], edge["gt_20ms"]), (1, 0))
    expect("behind_oracle nothing to compare", f({}, oracle)["max_ms"], None)


def test_quic_checks():
    f = analyze.overtook
    expect("overtook, in order", f({0: 1, 1: 2, 2: 3}), 0)
    # message 0 late: 1 and 2 overtook it
    expect("overtook, one late", f({0: 9, 1: 2, 2: 3}), 2)
    # a lost datagram (1 missing) is no hole
    expect("overtook, one lost", f({0: 1, 2: 3, 3: 4}), 0)

    def block(delivered, **kw):
        b = {"delayed_gt_rtt": 0.0, "p50_ms": 50.5, "p95_ms": 51.0, "p99_ms": 52.0, "lost": 0.0,
             "out_of_order": 0, "records_sent": 40, "records_delivered": delivered,
             "duplicates": 0, "bad": 0, "min_ms": 50.2,
             "cpu": {"sender_s_per_1000": 0.9, "receiver_s_per_1000": 0.6},
             "oracle_same_run": {"delayed_gt_rtt": 0.0, "records_complete_in_pcap": delivered}}
        b.update(kw)
        return b
    good = {"config": {"one_way_ms": 50.0}, "quic_stream": block(40), "quic_datagram": block(38)}
    expect("check_doc, good", run.check_doc(good, run.QUIC_MODES, 40), [])
    broken = [
        dict(good, quic_datagram=None),
        dict(good, quic_stream=block(39)),
        dict(good, quic_stream=dict(block(40), p99_ms=None)),
        dict(good, quic_stream=dict(block(40), cpu={})),
        dict(good, quic_stream=dict(block(40), oracle_same_run={})),
        dict(good, quic_stream=dict(block(40), duplicates=1)),
        dict(good, quic_datagram=dict(block(38), min_ms=10.0)),
        dict(good, quic_datagram=block(10)),
    ]
    for k, doc in enumerate(broken):
        if not run.check_doc(doc, run.QUIC_MODES, 40):
            failures.append("check_doc passed broken document %d" % k)


def main():
    for t in (test_model, test_overtaken, test_counters, test_recovery_model, test_behind_oracle,
              test_quic_checks):
        t()
    for f in failures:
        print("FAIL: %s" % f)
    print("PASS" if not failures else "%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
