"""netcheck.py: the result checks the tests/net scripts share.

The scripts' inline Python runs with PYTHONPATH=tests/net and imports from
here: check() prints one "ok:" or "FAIL:" line and remembers failures,
finish() exits 1 if any check failed (0 otherwise), receiver_log() splits a
utls-stream / utls-substreams receiver log, count_really_early() tells
whether records marked out of order really overtook an earlier one, and
check_delivered_once() / check_out_of_order() are the delivery checks of a
utls-stream receiver's log; load_json() reads a helper's JSON result.
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
