#!/usr/bin/env python3
"""check-mode-bits.py UTLS_H SSL_H...: uTLS's mode bits are not upstream's.

uTLS takes bits of OpenSSL's SSL_set_mode() space (SSL_MODE_UTLS_ALL in
utls.h). If an upstream release ever defines an SSL_MODE_* flag on one of
them, a program's SSL_set_mode() would turn on uTLS behaviour, or uTLS
would misread the upstream flag. This reads every `#define SSL_MODE_X value`
of the given upstream ssl.h files (the system's, the pinned tree's; more
bases when they exist) and fails if one shares a bit with SSL_MODE_UTLS_ALL.
--selftest proves the check fails on a header that does.
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs"))
from man_common import header_text  # noqa: E402  (utls.h with its parts expanded)

DEF = re.compile(r"^\s*#\s*define\s+(SSL_MODE_\w+)\s+(\S.*?)\s*(/\*.*)?$", re.M)


def values(path):
    text = re.sub(r"\\\n", " ", header_text(path))
    raw = {m.group(1): m.group(2) for m in DEF.finditer(text)}
    out = {}

    def ev(name, depth=0):
        if name in out or depth > 8:
            return out.get(name)
        expr = raw[name].replace("\\", " ")
        expr = re.sub(r"\b(0x[0-9A-Fa-f]+|\d+)[UuLl]*\b", r"\1", expr)
        for ref in set(re.findall(r"\bSSL_MODE_\w+", expr)):
            if ref not in raw or ev(ref, depth + 1) is None:
                return None
            expr = re.sub(r"\b%s\b" % ref, str(out[ref]), expr)
        if not expr.strip() or not re.fullmatch(r"[0-9xXa-fA-F|()\s]+", expr):
            return None
        out[name] = eval(expr)
        return out[name]

    for name in raw:
        ev(name)
    return out


def check(utls_h, upstream):
    ours = values(utls_h)
    mine = ours.get("SSL_MODE_UTLS_ALL")
    if not mine:
        print("check-mode-bits: %s defines no SSL_MODE_UTLS_ALL" % utls_h)
        return 2
    union = 0
    for name, v in ours.items():
        if name != "SSL_MODE_UTLS_ALL":
            union |= v
    if union != mine:
        print("check-mode-bits: FAIL: SSL_MODE_UTLS_ALL is %#x, but the uTLS mode flags of %s make %#x"
              % (mine, utls_h, union))
        return 1
    bad = 0
    for path in upstream:
        theirs = values(path)
        if not theirs:
            print("check-mode-bits: no SSL_MODE_* flags in %s (not an ssl.h?)" % path)
            return 2
        for name, v in sorted(theirs.items()):
            if v & mine:
                print("check-mode-bits: FAIL: %s defines %s = %#x, which shares bits %#x with SSL_MODE_UTLS_ALL"
                      % (path, name, v, v & mine))
                bad += 1
        if not bad:
            print("check-mode-bits: %s: %d SSL_MODE_* flags, none on uTLS's bits %#x"
                  % (path, len(theirs), mine))
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--selftest"]:
        with tempfile.NamedTemporaryFile("w", suffix=".h") as fp:
            fp.write("#define SSL_MODE_ASYNC 0x00000100U\n#define SSL_MODE_NEW_UPSTREAM 0x00000800U\n")
            fp.flush()
            rc = check(sys.argv[2], [fp.name])
        print("check-mode-bits: selftest %s" % ("passed" if rc == 1 else "FAILED"))
        sys.exit(0 if rc == 1 else 1)
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(check(sys.argv[1], sys.argv[2:]))
