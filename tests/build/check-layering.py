#!/usr/bin/env python3
"""check-layering.py: the three layers of DESIGN.md section 10 stay apart.

  core/      pure C: no OpenSSL header at all;
  lib/*/     the uTLS runtime, one folder per concept: public OpenSSL headers
             only, never OpenSSL's internals;
  lib/glue/  the only code that includes ssl_local.h, record_local.h or
             statem_local.h (OpenSSL's internals), under which sit the
             hook patches of openssl-patch/patches/.

Checked, each a failure with the file and line named:
  1. no C file or header outside lib/glue/ (anywhere in the repository but
     build trees and the patch series) includes ssl_local.h, record_local.h
     or statem_local.h;
  2. no file under core/ includes an OpenSSL header;
  3. the include graph among lib/'s headers has no cycle;
  4. no .c file under lib/ is longer than MAX_LINES lines unless a
     `/* one concept: ... */` comment in its first lines says why.

Usage: check-layering.py [--root DIR]      exit 0 when clean, 1 otherwise
       check-layering.py --selftest         each rule must catch a planted
                                            violation (exit 0 if all do)
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

MAX_LINES = 800
CONCEPT_LINES = 5  # where the justification must be
INTERNAL = ("ssl_local.h", "record_local.h", "statem_local.h", "recmethod_local.h")
SKIP_DIRS = {".git", "build", "build-asan", "build-fuzz", "build-3.5", "patches"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def c_files(root, sub=""):
    top = os.path.join(root, sub)
    for d, dirs, files in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield os.path.join(d, f)


def includes(path):
    with open(path, errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            m = INCLUDE_RE.match(line)
            if m:
                yield n, m.group(1), m.group(2)


def check(root):
    errors = []
    rel = lambda p: os.path.relpath(p, root)
    glue = os.path.join(root, "lib", "glue") + os.sep

    # 1. OpenSSL's internals only in the glue.
    for p in c_files(root):
        if p.startswith(glue):
            continue
        for n, _, inc in includes(p):
            if os.path.basename(inc) in INTERNAL:
                errors.append(f"{rel(p)}:{n}: includes {inc}: only lib/glue/ may "
                              "(OpenSSL's internals; DESIGN.md section 10)")

    # 2. core/ is pure C.
    if os.path.isdir(os.path.join(root, "core")):
        for p in c_files(root, "core"):
            for n, _, inc in includes(p):
                if inc.startswith("openssl/"):
                    errors.append(f"{rel(p)}:{n}: includes {inc}: core/ is pure C, no OpenSSL")

    lib = os.path.join(root, "lib")
    if os.path.isdir(lib):
        # 3. No include cycle among lib/'s headers. "x/y.h" is relative to
        # lib/ (its include root), "y.h" to the including file's folder.
        headers = {os.path.relpath(p, lib) for p in c_files(lib) if p.endswith(".h")}
        graph = {}
        for h in headers:
            edges = []
            for _, kind, inc in includes(os.path.join(lib, h)):
                if kind != '"':
                    continue
                for cand in (os.path.normpath(os.path.join(os.path.dirname(h), inc)), inc):
                    if cand in headers:
                        edges.append(cand)
                        break
            graph[h] = edges
        state, stack = {}, []

        def visit(h):
            state[h] = 1
            stack.append(h)
            for e in graph[h]:
                if state.get(e) == 1:
                    cyc = stack[stack.index(e):] + [e]
                    errors.append("include cycle among lib/ headers: " + " -> ".join(cyc))
                elif e not in state:
                    visit(e)
            stack.pop()
            state[h] = 2

        for h in sorted(graph):
            if h not in state:
                visit(h)

        # 4. Files of one concept each, about 800 lines at most.
        for p in c_files(lib):
            if not p.endswith(".c"):
                continue
            with open(p, errors="replace") as fh:
                lines = fh.read().split("\n")
            n = len(lines) - (1 if lines and lines[-1] == "" else 0)
            head = "\n".join(lines[:CONCEPT_LINES])
            if n > MAX_LINES and not re.search(r"/\*\s*one concept:\s*\S", head):
                errors.append(f"{rel(p)}: {n} lines (> {MAX_LINES}): split it by concept, or "
                              "say why it is one with /* one concept: ... */ at its top")
    return errors


def selftest(me):
    """Plant each violation in a small tree; the check must name it."""
    cases = {
        "internal header outside the glue": {
            "lib/rx/a.c": '#include "ssl_local.h"\n'},
        "record_local.h outside the glue": {
            "lib/bio/a.c": '#include "record/record_local.h"\n'},
        "OpenSSL in core": {
            "core/src/a.c": "#include <openssl/evp.h>\n"},
        "include cycle": {
            "lib/rx/a.h": '#include "bio/b.h"\n',
            "lib/bio/b.h": '#include "rx/a.h"\n'},
        "long file": {
            "lib/rx/long.c": "int x;\n" * (MAX_LINES + 1)},
    }
    clean = {
        "lib/glue/g.c": '#include "ssl_local.h"\n',
        "lib/rx/ok.h": '#include "bio/ok.h"\n',
        "lib/bio/ok.h": "#include <openssl/bio.h>\n",
        "lib/tx/big.c": "/* one concept: the test's own */\n" + "int y;\n" * (MAX_LINES + 1),
        "core/src/c.c": "#include <stdint.h>\n",
    }
    failed = 0
    for name, files in [("clean tree", {})] + list(cases.items()):
        d = tempfile.mkdtemp(prefix="utls-layering-")
        try:
            for p, text in {**clean, **files}.items():
                os.makedirs(os.path.dirname(os.path.join(d, p)), exist_ok=True)
                with open(os.path.join(d, p), "w") as fh:
                    fh.write(text)
            r = subprocess.run([sys.executable, me, "--root", d], capture_output=True, text=True)
            want = 0 if name == "clean tree" else 1
            if r.returncode != want:
                print(f"FAIL: {name}: exit {r.returncode}, expected {want}\n{r.stdout}{r.stderr}")
                failed += 1
            else:
                print(f"ok: {name}" + (f" ({r.stdout.strip().splitlines()[0]})" if want else ""))
        finally:
            shutil.rmtree(d)
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if a.selftest:
        return selftest(os.path.abspath(__file__))
    errors = check(os.path.abspath(a.root))
    for e in errors:
        print(e)
    if errors:
        return 1
    print("layering: lib/glue/ alone includes OpenSSL's internals, core/ is pure C, "
          "no include cycle in lib/, no lib/ file over %d lines without a reason" % MAX_LINES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
