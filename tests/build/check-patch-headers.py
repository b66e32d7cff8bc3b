#!/usr/bin/env python3
"""check-patch-headers.py OPENSSL_PATCH_DIR: the patch series' headers.

Every patch of patches/ (the uTLS hooks) and security/ (distribution fixes)
must carry a DEP-3 header (https://dep-team.pages.debian.net/deps/dep3/):
a description (git's Subject plus body, or Description:), Forwarded: and
Last-Update:; each security patch also names its CVE (Bug: CVE-...) and its
Origin:. The subject starts with the upstream file area it touches, as a
comma-separated list of paths or directories ("ssl/record/ssl3_record.c:",
"ssl/record/, ssl/t1_enc.c:"), and every file the diff changes must lie in
one of them. The hook patches are numbered 0001..N in series order, with
"[PATCH n/N]" subjects that agree. Exit 0 if all hold, 1 with one line per
problem otherwise; --selftest runs the checks on made-up headers.
"""
import os
import re
import sys


def header_and_files(text):
    head, _, _ = text.partition("\n---\n")
    files = re.findall(r"(?m)^\+\+\+ b/(\S+)", text)
    return head, files


def subject(head):
    m = re.search(r"(?ms)^Subject: (.*?)\n(?=\S|\n)", head)
    if not m:
        return None
    return re.sub(r"^\[PATCH[^\]]*\]\s*", "", " ".join(m.group(1).split()))


def check_patch(name, text, security):
    problems = []
    head, files = header_and_files(text)
    subj = subject(head)
    if not subj and not re.search(r"(?m)^Description: \S", head):
        problems.append("%s: no Subject/Description" % name)
    for field in ("Forwarded", "Last-Update") + (("Bug", "Origin") if security else ()):
        if not re.search(r"(?m)^%s: \S" % field, head):
            problems.append("%s: no %s: field" % (name, field))
    if security and not re.search(r"(?m)^Bug: CVE-\d{4}-\d+", head):
        problems.append("%s: Bug: does not name a CVE" % name)
    if not re.search(r"(?m)^Last-Update: \d{4}-\d{2}-\d{2}$", head):
        problems.append("%s: Last-Update is not a YYYY-MM-DD date" % name)
    if subj:
        area = subj.split(": ", 1)[0] if ": " in subj else ""
        paths = [a.strip() for a in area.split(",") if a.strip()]
        if not paths or not all("/" in p or "." in p for p in paths):
            problems.append("%s: subject does not start with the file area it touches: %r" % (name, subj))
        else:
            for f in files:
                if not any(f == p or (p.endswith("/") and f.startswith(p)) for p in paths):
                    problems.append("%s: touches %s, which its subject's area (%s) does not name"
                                    % (name, f, area))
    if not files:
        problems.append("%s: no diff" % name)
    return problems


def check_dir(root):
    problems = []
    for sub, security in (("patches", False), ("security", True)):
        d = os.path.join(root, sub)
        series = [l.strip() for l in open(os.path.join(d, "series"))
                  if l.strip() and not l.startswith("#")]
        on_disk = sorted(f for f in os.listdir(d) if f.endswith(".patch"))
        if sorted(series) != on_disk:
            problems.append("%s/series lists %s but the folder holds %s" % (sub, series, on_disk))
        for i, name in enumerate(series, 1):
            text = open(os.path.join(d, name)).read()
            problems += check_patch("%s/%s" % (sub, name), text, security)
            if not security:
                if not name.startswith("%04d-" % i):
                    problems.append("%s/%s: is number %d in series" % (sub, name, i))
                m = re.search(r"(?m)^Subject: \[PATCH (\d+)/(\d+)\]", text)
                if not m or int(m.group(1)) != i or int(m.group(2)) != len(series):
                    problems.append("%s/%s: subject numbering is not [PATCH %d/%d]" % (sub, name, i, len(series)))
    return problems


def selftest():
    good = ("From: x\nSubject: [PATCH] ssl/record/: hook\n\nwhy\n\nForwarded: not-needed\n"
            "Last-Update: 2026-11-26\n---\n+++ b/ssl/record/a.c\n")
    assert check_patch("g", good, False) == [], check_patch("g", good, False)
    bad_area = good.replace("+++ b/ssl/record/a.c", "+++ b/ssl/ssl_lib.c")
    assert any("does not name" in p for p in check_patch("b", bad_area, False))
    no_fwd = good.replace("Forwarded: not-needed\n", "")
    assert any("Forwarded" in p for p in check_patch("f", no_fwd, False))
    assert any("CVE" in p for p in check_patch("s", good, True))
    print("check-patch-headers: selftest passed")


if __name__ == "__main__":
    if sys.argv[1:] == ["--selftest"]:
        selftest()
        sys.exit(0)
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    found = check_dir(sys.argv[1])
    for p in found:
        print("check-patch-headers: " + p)
    if found:
        sys.exit(1)
    print("check-patch-headers: every patch has a DEP-3 header and names the area it touches")
