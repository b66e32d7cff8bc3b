#!/usr/bin/env python3
"""check-man-coverage.py --header utls.h --mandir DIR: every UTLS_* function,
every SSL_MODE_* flag and UTLS_VERSION_NUMBER that the header declares must
have a man page (`man -M DIR -w NAME`), and every other public macro must be
named in some page. Exits 1 naming each one that is missing."""
import argparse
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import man_common  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--header", required=True)
    ap.add_argument("--mandir", required=True, help="the directory holding man3/")
    ap.add_argument("--render", action="store_true",
                    help="also render each page through man(1), .so links followed")
    args = ap.parse_args()
    functions, macros = man_common.header_api(args.header)
    if len(functions) < 50:
        print("check-man-coverage: only %d functions found in %s: the parser is broken"
              % (len(functions), args.header))
        return 1
    own = functions + [m for m in macros if man_common.OWN_PAGE_MACRO_RE.match(m)]
    missing = []
    # Not a terminal: man(1) then prints plain text, unless told to keep bold.
    render_env = {k: v for k, v in os.environ.items() if k != "MAN_KEEP_FORMATTING"}
    render_env["MANWIDTH"] = "80"
    for name in own:
        r = subprocess.run(["man", "-M", args.mandir, "-w", "3", name],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        path = r.stdout.strip()
        if r.returncode != 0 or not path.startswith(os.path.abspath(args.mandir)):
            missing.append(name)
            print("no man page: %s (man -M %s -w 3 %s: %s)"
                  % (name, args.mandir, name, (r.stderr.strip() or path or "nothing")))
            continue
        if args.render:
            r = subprocess.run(["man", "-M", args.mandir, "-P", "cat", "3", name],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=render_env)
            # The NAME line lists the name (hyphenation is off for it).
            if r.returncode != 0 or name not in r.stdout.replace("\u2010\n", ""):
                missing.append(name)
                print("man %s does not render a page naming it: %s"
                      % (name, r.stderr.strip() or r.stdout[:200]))
    text = []
    man3 = os.path.join(args.mandir, "man3")
    for fname in sorted(os.listdir(man3)):
        with open(os.path.join(man3, fname), encoding="utf-8") as f:
            text.append(man_common.roff_text(f.read()))
    text = "\n".join(text)
    words = set(re.findall(r"\w+", text))
    unnamed = [m for m in macros if m not in own and m not in words]
    for m in unnamed:
        print("macro named in no man page: %s" % m)
    own_macros = len(own) - len(functions)
    print("check-man-coverage: %d functions and %d macros need a page, %d other macros "
          "a mention; %d missing" % (len(functions), own_macros, len(macros) - own_macros,
                                      len(missing) + len(unnamed)))
    return 1 if missing or unnamed else 0


if __name__ == "__main__":
    sys.exit(main())
