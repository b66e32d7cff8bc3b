"""man_common: what the docs tests read from include/openssl/utls.h and from
generated man pages (shared by check-man-*.py; standard library only)."""
import os
import re

C_COMMENT_RE = re.compile(r"/\*.*?\*/", re.S)
FUNCTION_RE = re.compile(r"\b(UTLS_\w+)\s*\([^()]*(?:\([^()]*\)[^()]*)*\)\s*;")
DEFINE_RE = re.compile(r"^\s*#\s*define\s+(\w+)", re.M)
# Which macros must have a man page of their own (man NAME), as OpenSSL gives
# SSL_MODE_* and OPENSSL_VERSION_NUMBER theirs; every other public macro must
# at least be documented in some page.
OWN_PAGE_MACRO_RE = re.compile(r"^(SSL_MODE_\w+|UTLS_VERSION_NUMBER)$")
# The include guards of <openssl/utls.h> and of its parts <openssl/utls_*.h>.
INCLUDE_GUARD_RE = re.compile(r"^OPENSSL_UTLS(_[A-Z0-9]+)?_H$")
PART_INCLUDE_RE = re.compile(r"^\s*#\s*include\s+<openssl/(utls_\w+\.h)>[^\n]*$", re.M)


def header_text(path, _seen=None):
    """header_text returns the text of the header |path| with every
    `#include <openssl/utls_*.h>` replaced by that part's own text (read from
    the same directory, each part once): what the umbrella <openssl/utls.h>
    declares, as one text."""
    seen = set() if _seen is None else _seen
    directory = os.path.dirname(os.path.abspath(path))
    with open(path, encoding="utf-8") as f:
        text = f.read()

    def expand(m):
        if m.group(1) in seen:
            return ""
        seen.add(m.group(1))
        return header_text(os.path.join(directory, m.group(1)), seen)

    return PART_INCLUDE_RE.sub(expand, text)


def header_api(path):
    """header_api returns (functions, macros) that |path| declares: every
    UTLS_* function prototype and every macro but the include guards, of the
    header and of the parts it includes."""
    text = C_COMMENT_RE.sub(" ", header_text(path))
    functions = sorted(set(FUNCTION_RE.findall(text)))
    macros = sorted(m for m in set(DEFINE_RE.findall(text)) if not INCLUDE_GUARD_RE.match(m))
    return functions, macros


ROFF_ESCAPES = [
    (re.compile(r"\\\[u([0-9A-F]{4,6})\]"), lambda m: chr(int(m.group(1), 16))),
    (re.compile(r"\\f(\(..|\[[^\]]*\]|.)"), ""),
    (re.compile(r"\\[&%:]"), ""),
    (re.compile(r"\\-"), "-"),
    (re.compile(r"\\e"), "\\\\"),
    (re.compile(r"\\\(bu"), "*"),
]


def roff_text(line):
    """roff_text undoes the escapes md2man.py writes, giving the source text."""
    for pattern, repl in ROFF_ESCAPES:
        line = pattern.sub(repl, line)
    return line


def synopsis(page_text):
    """synopsis returns the lines of the no-fill (code) blocks of a page's
    SYNOPSIS section, as C source."""
    out, in_syn, in_code = [], False, False
    lines = page_text.split("\n")
    for k, line in enumerate(lines):
        if line.startswith(".SH"):
            in_syn = k + 1 < len(lines) and lines[k + 1].strip() == "SYNOPSIS"
            continue
        if not in_syn:
            continue
        if line == ".nf":
            in_code = True
        elif line == ".fi":
            in_code = False
        elif in_code and not line.startswith("."):  # a request, such as .in
            out.append(roff_text(line))
    return out


def names(page_text):
    """names returns the names a page's NAME line lists."""
    lines = page_text.split("\n")
    for k, line in enumerate(lines[:-1]):
        if line.startswith(".SH") and lines[k + 1].strip() == "NAME":
            text = next((l for l in lines[k + 2:] if not l.startswith(".")), "")
            head = roff_text(text).split(" - ")[0]
            return [n.strip() for n in head.split(",") if n.strip()]
    return []
