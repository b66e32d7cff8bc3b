"""marked_region: replace the generated part of a file between two markers.

Used by the generators whose output lives inside a hand-written file:
bench/report.py (bench/README.md), bench/latency/readme_table.py (README.md's
headline table) and tools/mkerr.py (utls_err.h's UTLS_R_* macros). The line that
holds |begin| and the line that holds |end| are kept as they are; everything
between them becomes |body|.
"""


def replace_region(text, begin, end, body, who):
    """|text| with the lines between the |begin| and |end| marker lines
    replaced by |body| (a newline is added if it lacks one). Exits with a
    message naming |who| when a marker is missing."""
    b = text.find(begin)
    e = text.find(end, b + len(begin)) if b >= 0 else -1
    if b < 0 or e < 0:
        raise SystemExit("%s: no %s ... %s markers" % (who, begin, end))
    after_begin = text.find("\n", b)
    start_of_end = text.rfind("\n", 0, e) + 1
    if after_begin < 0 or after_begin >= start_of_end:
        raise SystemExit("%s: %s and %s must stand on lines of their own" % (who, begin, end))
    if body and not body.endswith("\n"):
        body += "\n"
    return text[:after_begin + 1] + body + text[start_of_end:]
