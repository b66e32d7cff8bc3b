#!/usr/bin/env python3
"""fde_compare.py: does a libssl built here have the machine code of another?

Compares two builds of the same library function by function, without debug
symbols on the reference side: every function has one frame description
entry (FDE) in .eh_frame, and with the same sources, compiler and flags the
list of FDE sizes in address order is the same. A security fix that changes
a function changes its size (nearly always), so aligning the two lists
(difflib) names each function that differs, by the symbol the local,
unstripped build has at that place.

    fde_compare.py REFERENCE LOCAL     exit 0: same sizes; 1: differences
    fde_compare.py --selftest          the alignment logic on made-up lists

Used by binary-parity.sh: REFERENCE is the distribution's stripped
libssl.so.3, LOCAL the stock build from the verified source with Debian's
series and openssl-patch/security/ applied. A difference means the
distribution carries a change the fork does not (or the other way round).
"""
import difflib
import re
import subprocess
import sys


def fde_ranges(lib):
    """(start, size) of every FDE of LIB, in address order."""
    out = subprocess.run(["readelf", "--debug-dump=frames", lib],
                         capture_output=True, text=True, check=True).stdout
    ranges = set()
    for m in re.finditer(r"FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", out):
        start, end = int(m.group(1), 16), int(m.group(2), 16)
        ranges.add((start, end - start))
    return sorted(ranges)


def symbols(lib):
    """address -> name of the code symbols of LIB (static ones too)."""
    out = subprocess.run(["nm", "--defined-only", lib],
                         capture_output=True, text=True, check=True).stdout
    names = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTWi":
            names.setdefault(int(parts[0], 16), parts[2])
    return names


def differences(ref_sizes, local_sizes):
    """Aligned runs that differ: (kind, ref_indexes, local_indexes)."""
    matcher = difflib.SequenceMatcher(None, ref_sizes, local_sizes, autojunk=False)
    return [(tag, range(i1, i2), range(j1, j2))
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def compare(reference, local):
    ref, loc = fde_ranges(reference), fde_ranges(local)
    names = symbols(local)
    if not ref or not loc:
        print("fde_compare: no frame descriptions in %s" % (reference if not ref else local))
        return 2
    diffs = differences([s for _, s in ref], [s for _, s in loc])
    print("fde_compare: %d functions in %s, %d in %s" % (len(ref), reference, len(loc), local))
    for tag, ri, li in diffs:
        ref_part = ", ".join("%#x bytes" % ref[i][1] for i in ri) or "nothing"
        loc_part = ", ".join("%s (%#x bytes)" % (names.get(loc[j][0], hex(loc[j][0])), loc[j][1])
                             for j in li) or "nothing"
        print("fde_compare: DIFFERS (%s): reference has %s where the local build has %s"
              % (tag, ref_part, loc_part))
    if diffs:
        print("fde_compare: %d place(s) differ" % len(diffs))
        return 1
    print("fde_compare: every function has the same size")
    return 0


def selftest():
    same = differences([10, 20, 30, 40], [10, 20, 30, 40])
    assert same == [], same
    grown = differences([10, 20, 35, 40], [10, 20, 30, 40])
    assert [(t, list(r), list(l)) for t, r, l in grown] == [("replace", [2], [2])], grown
    extra = differences([10, 20, 30, 40], [10, 20, 25, 30, 40])
    assert [(t, list(r), list(l)) for t, r, l in extra] == [("insert", [], [2])], extra
    print("fde_compare: selftest passed")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--selftest"]:
        sys.exit(selftest())
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(compare(sys.argv[1], sys.argv[2]))
