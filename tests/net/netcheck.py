"""netcheck.py: the result checks the tests/net scripts share.

The scripts' inline Python runs with PYTHONPATH=tests/net and imports from
here: check() prints one "ok:" or "FAIL:" line and remembers failures,
finish() exits 1 if any check failed (0 otherwise), receiver_log() splits a
utls-stream / utls-substreams receiver log, count_really_early() tells
whether records marked out of order really overtook an earlier one, and
check_delivered_once() / check_out_of_order() are the delivery checks of a
utls-stream receiver's log, check_tap_stream() all the checks of a stream
read through the tap; load_json() reads a helper's JSON result.
"""
import json
import os
import sys

fails = []


def check(ok, what):
    """Prints what passed or failed; a failure makes finish() exit 1."""
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        fails.append(what)


def finish():
    """Exits 1 if any check() failed, else 0."""
    sys.exit(1 if fails else 0)


def load_json(work, name):
    """The JSON object in the file |name| in |work|, or {} if the helper that
    writes it did not (it died, or never started): the checks on its keys
    then fail instead of the script."""
    try:
        with open(os.path.join(work, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def receiver_log(path):
    """Returns (start, end, items) of a receiver's JSON-lines log: its first
    line, its last line, and every line that is not an event (one per
    delivered record or message). A line that is not JSON raises (a failure)."""
    lines = [json.loads(l) for l in open(path)]
    return lines[0], lines[-1], [l for l in lines[1:] if "event" not in l]


def fork_receiver_log(path, mode=None):
    """receiver_log(path), after checking that the receiver ran the fork (in
    |mode|, when given) and finished its log."""
    start, end, items = receiver_log(path)
    check(start.get("fork") == 1 and (mode is None or start.get("mode") == mode),
          "the receiver ran the fork%s (%s)" % (" in %s mode" % mode if mode else "",
                                                start.get("libssl")))
    check(end.get("event") == "end", "the receiver finished its log")
    return start, end, items


def count_really_early(items):
    """Counts the items marked out of order ("ooo": 1) that were delivered
    before some item with a lower index "i": the ones really early."""
    first_seen = {}
    for pos, r in enumerate(items):
        first_seen.setdefault(r["i"], pos)
    return sum(1 for r in items if r.get("ooo") == 1
               and any(first_seen.get(j, 1 << 30) > first_seen[r["i"]] for j in range(r["i"])))


def check_delivered_once(items, end, count, noun):
    """Checks a utls-stream receiver's items (receiver_log) and summary line
    |end|: the intact items ("ok": 1) are indices 0..count-1, each once; the
    receiver counted no duplicate and no bad item; every item is intact.
    |noun| names an item in the messages ("record", "datagram")."""
    good = [r["i"] for r in items if r.get("ok") == 1]
    check(sorted(good) == list(range(count)),
          "every %s delivered (%d of %d)" % (noun, len(set(good)), count))
    check(len(good) == len(set(good)) and end.get("duplicates") == 0,
          "no %s delivered twice" % noun)
    check(end.get("bad") == 0 and all(r.get("ok") == 1 for r in items), "every %s intact" % noun)


def check_out_of_order(items, noun):
    """Checks that some items were delivered out of order and that each of
    them really came before an earlier one (count_really_early); returns how
    many were marked out of order."""
    ooo = sum(1 for r in items if r.get("ooo") == 1)
    check(ooo > 0, "%ss delivered out of order: %d" % (noun, ooo))
    early = count_really_early(items)
    check(early == ooo, "each out-of-order %s came before an earlier one (%d)" % (noun, early))
    return ooo


def check_tap_stream(path, count, min_packets=1, bytes_per_ooo=0, really_early=True):
    """The checks of a utls-stream receiver that read |count| records through
    the tap (its log at |path|), then finish(): the fork ran; every record
    delivered once and intact; some out of order, each really early, as many
    as UTLS_STATS counted; no fallback; the tap took at least |min_packets|
    segments and, with |bytes_per_ooo|, that many payload bytes per
    out-of-order record (whole segments, not cut-off frames); no ring drops.
    Without |really_early|, records out of order (taken from the capture
    ahead of the kernel's stream) need not overtake an earlier record: the
    capture may hold the hole's bytes too. Returns the records."""
    start, end, recs = fork_receiver_log(path)
    check_delivered_once(recs, end, count, "record")
    if really_early:
        ooo = check_out_of_order(recs, "record")
    else:
        ooo = sum(1 for r in recs if r.get("ooo") == 1)
        check(ooo > 0, "records delivered out of order: %d" % ooo)
    u = end.get("utls", {})
    check(u.get("fallback", "").startswith("none"), "no fallback (%s)" % u.get("fallback"))
    check(u.get("records_out_of_order") == ooo,
          "UTLS_STATS agrees (%s)" % u.get("records_out_of_order"))
    t = end.get("tap", {})
    pk, pb = t.get("packets", 0), t.get("payload_bytes", 0)
    check(pk >= min_packets, "the tap captured the stream (%s packets, %s payload bytes)"
          % (pk, pb))
    if bytes_per_ooo:
        check(pb >= ooo * bytes_per_ooo,
              "payload bytes (%d) cover the %d out-of-order records" % (pb, ooo))
    check(t.get("ring_drops", 1) == 0, "no tap ring drops (%s)" % t.get("ring_drops"))
    return recs
