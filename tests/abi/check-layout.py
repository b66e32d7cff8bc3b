#!/usr/bin/env python3
"""check-layout.py: the binary layout of the public uTLS types must not move.

A program built against include/openssl/utls.h passes these structures to
the library by pointer, and the library reads or fills sizeof(T) bytes of
them (UTLS_get_stats, UTLS_set_limits, UTLS_read_record, ...). A field moved,
resized, removed or inserted anywhere -- at the end too, since the library
would then write past an older caller's structure -- breaks every binary
built against the previous header, silently. So does a renumbered enum or a
changed flag or reason code.

This check parses every `typedef struct NAME_st { ... } NAME;`,
`typedef enum { ... } NAME;` and object-like `#define` in the header (but
version numbers), compiles a program that prints sizeof/alignof of each type,
offsetof/sizeof of each field and the value of each enumerator and constant, and compares the output with the committed baseline
(tests/abi/utls-layout.txt). Exit 0 if equal; 1 with the differences
otherwise; 2 on a usage or build error.

A deliberate change needs a new symbol version node for the functions that
take the changed type (libssl-utls.map), or a size-carrying API, and then
`check-layout.py --update` to record the new baseline.

Usage: check-layout.py --header H --baseline FILE [--cc CC] [--update]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs"))
from man_common import header_text  # noqa: E402  (utls.h with its parts expanded)

STRUCT_RE = re.compile(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", re.S)
ENUM_RE = re.compile(r"typedef\s+enum\s*\w*\s*\{(.*?)\}\s*(\w+)\s*;", re.S)
# Object-like constants (a mode bit, a flag, a reason code, a bound), which a
# caller compiles in. Version numbers are meant to change and are left out.
DEFINE_RE = re.compile(r"^#\s*define\s+([A-Z][A-Z0-9_]*)[ \t]+[^\s\\]", re.M)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def field_names(body):
    """The member names of a struct body, in order (one per declarator)."""
    names = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        if "{" in decl or "}" in decl or ":" in decl:
            raise ValueError(f"unsupported member declaration: {decl!r}")
        fp = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", decl)
        if fp:  # a function pointer
            names.append(fp.group(1))
            continue
        # "type a, *b, c[4]": the base type is what precedes the first name.
        parts = decl.split(",")
        first = re.sub(r"\[[^\]]*\]", "", parts[0]).strip()
        names.append(re.findall(r"\w+", first)[-1])
        for p in parts[1:]:
            p = re.sub(r"\[[^\]]*\]", "", p).strip().lstrip("*").strip()
            names.append(re.findall(r"\w+", p)[-1])
    return names


def enumerators(body):
    out = []
    for item in body.split(","):
        item = item.strip()
        if item:
            out.append(item.split("=")[0].strip())
    return out


def layout_program(text_of_header):
    text = strip_comments(text_of_header)
    lines = ["#include <stdalign.h>", "#include <stddef.h>", "#include <stdio.h>",
             "#include <openssl/utls.h>", "int main(void)", "{"]
    count = 0
    for m in STRUCT_RE.finditer(text):
        t = m.group(3)
        lines.append(f'    printf("%s size %zu align %zu\\n", "{t}", sizeof({t}), alignof({t}));')
        for f in field_names(m.group(2)):
            lines.append(f'    printf("%s.%s offset %zu size %zu\\n", "{t}", "{f}", '
                         f"offsetof({t}, {f}), sizeof((({t} *)0)->{f}));")
        count += 1
    for m in ENUM_RE.finditer(text):
        t = m.group(2)
        lines.append(f'    printf("%s size %zu\\n", "{t}", sizeof({t}));')
        for e in enumerators(m.group(1)):
            lines.append(f'    printf("%s::%s = %lld\\n", "{t}", "{e}", (long long){e});')
        count += 1
    for m in DEFINE_RE.finditer(text):
        name = m.group(1)
        if "VERSION" in name:
            continue
        lines.append(f'    printf("%s = %llu\\n", "{name}", (unsigned long long)({name}));')
        count += 1
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n", count


def current_layout(header, cc):
    program, count = layout_program(header_text(header))
    if count == 0:
        sys.exit(f"check-layout: no struct or enum found in {header}")
    include_dir = os.path.dirname(os.path.dirname(os.path.abspath(header)))
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "layout.c")
        exe = os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write(program)
        build = subprocess.run([cc, "-std=c11", "-I", include_dir, "-o", exe, src],
                               capture_output=True, text=True)
        if build.returncode != 0:
            print(build.stderr, file=sys.stderr)
            print("check-layout: the layout program did not build", file=sys.stderr)
            sys.exit(2)
        return subprocess.run([exe], check=True, capture_output=True,
                              text=True).stdout.splitlines()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--header", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--update", action="store_true",
                    help="write the current layout as the new baseline")
    a = ap.parse_args()

    now = current_layout(a.header, a.cc)
    if a.update:
        with open(a.baseline, "w") as f:
            f.write("# Binary layout of the public types of include/openssl/utls.h\n"
                    "# (x86_64 Linux), written by tests/abi/check-layout.py --update.\n")
            f.write("\n".join(now) + "\n")
        print(f"check-layout: {len(now)} lines written to {a.baseline}")
        return 0
    with open(a.baseline) as f:
        base = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]
    if now == base:
        print(f"check-layout: {len(now)} sizes, offsets and values as in the baseline")
        return 0
    base_set, now_set = set(base), set(now)
    for line in base:
        if line not in now_set:
            print(f"changed or removed: {line}")
    for line in now:
        if line not in base_set:
            print(f"new or moved:       {line}")
    print("check-layout: the public types' layout differs from the baseline: binaries "
          "built against the old header would misread them. Keep the layout, or give "
          "the functions that take the type a new version node (and a size-carrying "
          "API), then run check-layout.py --update.")
    return 1


if __name__ == "__main__":
    sys.exit(main())
