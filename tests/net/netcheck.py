"""netcheck.py: the result checks the tests/net scripts share.

The scripts' inline Python runs with PYTHONPATH=tests/net and imports from
here: check() prints one "ok:" or "FAIL:" line and remembers failures,
finish() exits 1 if any check failed (0 otherwise), receiver_log() splits a
utls-stream / utls-substreams receiver log, and count_really_early() tells
whether records marked out of order really overtook an earlier one.
"""
import json
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


def receiver_log(path):
    """Returns (start, end, items) of a receiver's JSON-lines log: its first
    line, its last line, and every line that is not an event (one per
    delivered record or message). A line that is not JSON raises (a failure)."""
    lines = [json.loads(l) for l in open(path)]
    return lines[0], lines[-1], [l for l in lines[1:] if "event" not in l]


def count_really_early(items):
    """Counts the items marked out of order ("ooo": 1) that were delivered
    before some item with a lower index "i": the ones really early."""
    first_seen = {}
    for pos, r in enumerate(items):
        first_seen.setdefault(r["i"], pos)
    return sum(1 for r in items if r.get("ooo") == 1
               and any(first_seen.get(j, 1 << 30) > first_seen[r["i"]] for j in range(r["i"])))
