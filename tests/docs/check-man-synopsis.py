#!/usr/bin/env python3
"""check-man-synopsis.py --include DIR --cc CC PAGE|MAN3DIR...: the C code of each
page's SYNOPSIS, taken from the generated man page, must compile after
`#include <openssl/utls.h>` from DIR. A prototype re-declared with other
types, or a macro redefined with another value, is a compile error, so a page
that drifts from the header fails, naming the page and the compiler's words.
Every name in a page's NAME line must also appear in its SYNOPSIS."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import man_common  # noqa: E402

# A SYNOPSIS may show a call (`SSL_set_mode(ssl, SSL_MODE_UNORDERED);`): a
# statement that starts with an identifier and `(` has no type, so it is
# compiled inside a function that has an `SSL *ssl` to use.
CALL_RE = re.compile(r"^\s*[A-Za-z_]\w*\s*\(")


def split_statements(lines):
    """split_statements groups C lines into preprocessor lines (with their
    continuations) and statements ending at `;` outside parentheses."""
    out, cur, depth = [], [], 0
    cont = False
    for line in lines:
        if cont or (not cur and line.lstrip().startswith("#")):
            out.append(("pp", line))
            cont = line.rstrip().endswith("\\")
            continue
        if not cur and not line.strip():
            continue
        cur.append(line)
        code = re.sub(r"/\*.*?\*/", "", line)
        depth += code.count("(") - code.count(")")
        if depth == 0 and code.rstrip().endswith(";"):
            out.append(("stmt", "\n".join(cur)))
            cur = []
    if cur:
        out.append(("stmt", "\n".join(cur)))
    return out


def source_for(page, lines):
    decls, calls = [], []
    for kind, text in split_statements(lines):
        if kind == "stmt" and CALL_RE.match(text):
            calls.append(text)
        else:
            decls.append(text)
    src = ["/* SYNOPSIS of %s */" % page, "#include <openssl/utls.h>", '#line 1 "%s"' % page]
    src += decls
    src.append("void synopsis_calls(SSL *ssl);")
    src.append("void synopsis_calls(SSL *ssl)\n{\n    (void)ssl;")
    src += calls
    src.append("}")
    return "\n".join(src) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--include", required=True, help="the directory holding openssl/utls.h")
    ap.add_argument("--cc", default="cc")
    ap.add_argument("pages", nargs="+")
    args = ap.parse_args()
    pages = []
    for arg in args.pages:
        if os.path.isdir(arg):
            pages += sorted(os.path.join(arg, f) for f in os.listdir(arg) if f.endswith(".3"))
        else:
            pages.append(arg)
    failed, checked = 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for page in pages:
            with open(page, encoding="utf-8") as f:
                text = f.read()
            if text.startswith(".so "):
                continue
            lines = man_common.synopsis(text)
            if not any(re.search(r"\w\s*\(", l) or "#define" in l for l in lines):
                print("%s: no C code in its SYNOPSIS" % page)
                failed += 1
                continue
            checked += 1
            declared = set(re.findall(r"\w+", "\n".join(lines)))
            undeclared = [n for n in man_common.names(text) if n not in declared]
            if undeclared:
                print("%s: NAME lists %s, which its SYNOPSIS does not show"
                      % (page, ", ".join(undeclared)))
                failed += 1
                continue
            src = os.path.join(tmp, os.path.basename(page) + ".c")
            with open(src, "w", encoding="utf-8") as f:
                f.write(source_for(os.path.basename(page), lines))
            r = subprocess.run([args.cc, "-std=c11", "-Wall", "-Wextra", "-Werror",
                                "-fsyntax-only", "-I", args.include, src],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                print("%s: its SYNOPSIS does not match the header:\n%s" % (page, r.stdout))
                failed += 1
    if failed:
        print("check-man-synopsis: %d of %d pages FAILED" % (failed, checked))
        return 1
    print("check-man-synopsis: the SYNOPSIS of %d pages compiles against the header" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
