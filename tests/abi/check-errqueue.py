#!/usr/bin/env python3
"""check-errqueue.py PROGRAM HEADER: every public call, and none leaves an
error queued on success.

Run as root, it runs PROGRAM twice: with CAP_NET_RAW (the tap works) and as
the unprivileged user nobody with no capabilities (the tap cannot be had, and
the calls that succeed without it must still leave nothing queued).

Runs test_errqueue (PROGRAM), which calls the functions of <openssl/utls.h>
(HEADER) in cases where they succeed and prints "ok NAME", "FAIL NAME: ..."
or "skip NAME: why" per call. Fails if the program failed, if a call FAILed,
or if a function the header declares was never called: a new public function
must get its case in test_errqueue.c. Exit 77 (skip) only when calls were
skipped (no CAP_NET_RAW) and nothing failed.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs"))
from man_common import header_api  # noqa: E402  (the docs tests' reading of utls.h)


def run_once(cmd, header, label):
    print("check-errqueue: %s" % label)
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    sys.stdout.write(run.stdout + run.stderr)
    seen, skipped, failed = set(), set(), []
    for line in run.stdout.splitlines():
        m = re.match(r"(ok|FAIL|skip) (UTLS_\w+)", line)
        if m:
            {"ok": seen, "skip": skipped}.get(m.group(1), set()).add(m.group(2))
            if m.group(1) == "FAIL":
                failed.append(m.group(2))
    missing = sorted(set(header_api(header)[0]) - seen - skipped - set(failed))
    if missing:
        print("check-errqueue: FAIL: never called: %s (add a case to test_errqueue.c)" % ", ".join(missing))
    if run.returncode != 0 or failed or missing:
        print("check-errqueue: FAIL (%s)" % label)
        return 1
    if skipped:
        print("check-errqueue: %d function(s) not called %s: %s" % (len(skipped), label, ", ".join(sorted(skipped))))
        return 77
    print("check-errqueue: all %d public functions called %s; none left an error queued on success"
          % (len(seen), label))
    return 0


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    prog, header = sys.argv[1:]
    rc = run_once([prog], header, "as this user")
    if rc == 1:
        return 1
    if os.geteuid() == 0 and os.path.exists("/usr/bin/setpriv"):
        unpriv = ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                  "--inh-caps=-all", "--bounding-set=-all", prog]
        rc2 = run_once(unpriv, header, "as nobody, without capabilities")
        if rc2 == 1:
            return 1
        return rc
    print("check-errqueue: not root: the run without capabilities was the only one")
    return rc


if __name__ == "__main__":
    sys.exit(main())
