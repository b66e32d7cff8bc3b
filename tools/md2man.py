#!/usr/bin/env python3
"""md2man.py: the Markdown of docs/ as man(7) pages, so that the prose has one source.

    md2man.py --out-dir build/man --date 2026-11-24 --version 0.1.0 docs/unordered.md ...

Each input is an API page: its title is `# NAME(3)...` (the page is NAME.3) or it
has a `## NAME` section (the page is named after the first name listed there).
It becomes man3/<page>.3, and every other name in its NAME section gets
man3/<name>.3 holding `.so man3/<page>.3`, as OpenSSL installs its pages.
Stale *.3 files in man3/ that this run did not write are removed.

The subset understood is the one docs/ uses: ATX headings, paragraphs, fenced
code, bullet and numbered lists (nested, with paragraphs, code and tables
inside items), pipe tables (rendered with tbl), inline `code`, **bold**,
*italic*, links and images (their text). Anything else is kept as text.
Bad input (an unterminated fence, a table row with the wrong number of cells,
an API page without names, a name claimed by two pages) stops with a message
naming the file and line. Python 3 standard library only.
"""
import argparse
import os
import re
import sys

# A terminal man page is 80 columns: man(1) sets the line length to 78n and
# body text starts at the 7n paragraph indent. Tables are sized to fit that.
LINE_WIDTH = 78
BODY_INDENT = 7
LIST_INDENT = {False: 2, True: 4}  # bullet, numbered
CODE_INDENT = 4
TABLE_MIN_COLUMN = 4
# tbl separates columns by 3n; a table too wide for that gets 1n gaps, and
# then long words are left to hyphenation (a cap on the column floor).
TABLE_LAYOUTS = ((3, 99), (1, 99), (1, 10))
# An input is documentation written by us, but the converter still bounds what
# it reads: a runaway file (a generated dump pasted by mistake) stops here.
MAX_INPUT_BYTES = 1 << 20
MAX_LIST_DEPTH = 8  # nested lists deeper than this are a formatting mistake


class MdError(Exception):
    """MdError: malformed Markdown, with the file and line it was found at."""


# --- Block parsing ----------------------------------------------------------

FENCE_RE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)\s*$")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
ITEM_RE = re.compile(r"^( {0,12})([*+-]|\d{1,9}[.)])( +)(.*)$")
TABLE_SEP_RE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def split_row(line):
    """split_row returns the cells of a pipe-table row; `|` inside `code` or
    written as `\\|` does not split."""
    text = line.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    cells, cur, in_code = [], "", False
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] == "|":
            cur += "|"
            i += 2
            continue
        if c == "`":
            in_code = not in_code
        if c == "|" and not in_code:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    cells.append(cur.strip())
    return cells


def starts_block(line, nxt):
    """starts_block says whether |line| ends a paragraph by opening another block."""
    if FENCE_RE.match(line) or HEADING_RE.match(line):
        return True
    if line.lstrip().startswith("|") and nxt is not None and TABLE_SEP_RE.match(nxt):
        return True
    m = ITEM_RE.match(line)
    # Only bullets and "1." interrupt a paragraph (CommonMark): "in 2019.\n2. x" stays text.
    return bool(m) and (m.group(2) in "*+-" or m.group(2)[:-1] == "1")


def parse_blocks(lines, where, depth=0):
    """parse_blocks returns the blocks of |lines| (a list of (lineno, text)) as
    tuples: ("heading", level, text), ("para", [text]), ("code", [text], lang),
    ("table", header, rows), ("list", ordered, [(marker, blocks)])."""
    if depth > MAX_LIST_DEPTH:
        raise MdError("%s:%d: lists nested deeper than %d" % (where, lines[0][0], MAX_LIST_DEPTH))
    blocks = []
    i, n = 0, len(lines)
    while i < n:
        lineno, line = lines[i]
        nxt = lines[i + 1][1] if i + 1 < n else None
        if not line.strip():
            i += 1
            continue
        m = FENCE_RE.match(line)
        if m:
            indent, fence = len(m.group(1)), m.group(2)
            body = []
            i += 1
            while i < n and not re.match(r"^\s*" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence),
                                         lines[i][1]):
                text = lines[i][1].expandtabs(8)
                body.append(text[indent:] if text[:indent].strip() == "" else text.lstrip())
                i += 1
            if i == n:
                raise MdError("%s:%d: code fence %s is never closed" % (where, lineno, fence))
            blocks.append(("code", body, m.group(3)))
            i += 1
            continue
        m = HEADING_RE.match(line)
        if m:
            blocks.append(("heading", len(m.group(1)), m.group(2)))
            i += 1
            continue
        if line.lstrip().startswith("|") and nxt is not None and TABLE_SEP_RE.match(nxt):
            header = split_row(line)
            rows = []
            i += 2
            while i < n and lines[i][1].lstrip().startswith("|"):
                row = split_row(lines[i][1])
                if len(row) != len(header):
                    raise MdError("%s:%d: table row has %d cells, the header %d"
                                  % (where, lines[i][0], len(row), len(header)))
                rows.append(row)
                i += 1
            blocks.append(("table", header, rows))
            continue
        m = ITEM_RE.match(line)
        if m:
            i, block = parse_list(lines, i, where, depth)
            blocks.append(block)
            continue
        para = [line.strip()]
        i += 1
        while i < n and lines[i][1].strip():
            nxt = lines[i + 1][1] if i + 1 < n else None
            if starts_block(lines[i][1], nxt):
                break
            para.append(lines[i][1].strip())
            i += 1
        blocks.append(("para", para))
    return blocks


def parse_list(lines, i, where, depth):
    """parse_list reads one list starting at lines[i]; returns (next index, block)."""
    first = ITEM_RE.match(lines[i][1])
    base = len(first.group(1))
    ordered = first.group(2)[0].isdigit()
    items = []
    n = len(lines)
    while i < n:
        m = ITEM_RE.match(lines[i][1])
        if not m or len(m.group(1)) != base or m.group(2)[0].isdigit() != ordered:
            break
        content = base + len(m.group(2)) + len(m.group(3))
        body = [(lines[i][0], m.group(4))]
        i += 1
        while i < n:
            lineno, text = lines[i]
            text = text.expandtabs(8)
            if not text.strip():
                # A blank line continues the item only if indented content follows.
                j = i
                while j < n and not lines[j][1].strip():
                    j += 1
                if j < n and len(lines[j][1]) - len(lines[j][1].lstrip()) >= content:
                    body.extend((lines[k][0], "") for k in range(i, j))
                    i = j
                    continue
                break
            indent = len(text) - len(text.lstrip())
            if indent >= content:
                body.append((lineno, text[content:]))
            elif ITEM_RE.match(text) or not body[-1][1].strip():
                break
            elif starts_block(text, None):
                break
            else:
                body.append((lineno, text.strip()))  # a lazy continuation line
            i += 1
        items.append((m.group(2), parse_blocks(body, where, depth + 1)))
    return i, ("list", ordered, items)


# --- Inline text --------------------------------------------------------------

def escape(text, code=False):
    """escape makes |text| safe inside a roff line: backslashes, non-ASCII
    characters as \\[uXXXX], and in code every hyphen as a minus sign."""
    out = []
    for c in text:
        if c == "\\":
            out.append("\\e")
        elif c == "-" and code:
            out.append("\\-")
        elif ord(c) > 126 or (ord(c) < 32 and c not in "\t\n"):
            out.append("\\[u%04X]" % ord(c))
        else:
            out.append(c)
    return "".join(out)


INLINE_RE = re.compile(
    r"(?P<code>(?P<ticks>`+)(?P<ctext>.+?)(?P=ticks))"
    r"|(?P<img>!\[(?P<alt>[^\]]*)\]\([^)]*\))"
    r"|(?P<link>\[(?P<ltext>[^\]]+)\]\([^)]*\))"
    r"|(?P<bold>\*\*(?P<btext>(?:`[^`]*`|[^`])+?)\*\*)"
    r"|(?P<ital>(?<![\w*])\*(?P<itext>[^\s*](?:`[^`]*`|[^`])*?)(?<=[^\s*])\*(?![\w*]))",
    re.S)  # a paragraph is converted whole: spans may cross its line breaks


def runs(text, font=""):
    """runs splits Markdown inline text into (font, escaped text) pieces; font
    is a set of letters from "BI" (code is shown bold, as function names are)."""
    out = []
    pos = 0
    for m in INLINE_RE.finditer(text):
        if m.start() > pos:
            out.append((font, escape(text[pos:m.start()])))
        if m.group("code"):
            code = m.group("ctext").replace("\n", " ")
            code = escape(code.strip() or code, code=True)
            # Marks the words of code; inline() keeps them from hyphenation.
            code = re.sub(r"(^|\s)(?=\S)", "\\1" + NOHYPH, code)
            out.append((font + "B" if "B" not in font else font, code))
        elif m.group("img") is not None:
            out.extend(runs(m.group("alt"), font))
        elif m.group("link"):
            out.extend(runs(m.group("ltext"), font))
        elif m.group("bold"):
            out.extend(runs(m.group("btext"), font if "B" in font else font + "B"))
        else:
            out.extend(runs(m.group("itext"), font if "I" in font else font + "I"))
        pos = m.end()
    if pos < len(text):
        out.append((font, escape(text[pos:])))
    return out


# A word that holds code is never hyphenated: it gets \% in front of it (only
# there: inside a word \% would be a hyphenation point).
NOHYPH = "\x00"


FONT_ESCAPE = {"": "\\fR", "B": "\\fB", "I": "\\fI", "BI": "\\f(BI"}


# In a narrow table cell code may break after these characters
# (\: is an invisible break point): UTLS_R_STREAM_MESSAGE_TOO_LARGE fits.
# In prose too, an identifier longer than this may break (without a hyphen):
# otherwise it can leave a line that troff cannot fill.
LONG_CODE_WORD = 30
CELL_BREAK_RE = re.compile(r"([_./])(?=[A-Za-z_])")


def inline(text, cell=False):
    """inline returns |text| as roff text with font escapes (one line per line
    of |text|); no line starts with a control character. In a table |cell|, code may
    break after `_`, `.` and `/`."""
    out, cur = [], ""
    for font, piece in runs(text):
        font = "".join(sorted(font))
        if font != cur:
            out.append(FONT_ESCAPE[font])
            cur = font
        out.append(piece)
    if cur:
        out.append("\\fR")
    def code_word(m):
        word = m.group(0).replace(NOHYPH, "")
        if not cell and len(word) > LONG_CODE_WORD:
            word = CELL_BREAK_RE.sub(r"\1\\:", word)
        return "\\%" + word

    line = "".join(out)
    if cell:
        line = CELL_BREAK_RE.sub(r"\1\\:", line)
    line = re.sub(r"\S*%s\S*" % NOHYPH, code_word, line)
    return "\n".join("\\&" + l if l[:1] in (".", "'") else l for l in line.split("\n"))


def paragraph(lines):
    """paragraph returns the roff text lines of a paragraph's Markdown lines."""
    return inline("\n".join(lines)).split("\n")


def plain(text):
    """plain returns inline Markdown as unformatted text (for widths, names)."""
    text = "".join(piece for _, piece in runs(text))
    return text.replace(NOHYPH, "").replace("\\-", "-").replace("\\e", "\\")


# --- Rendering -----------------------------------------------------------------

def split_c_line(line, limit, cont=None):
    """split_c_line breaks a C line longer than |limit| after its last ", "
    that fits (outside string literals and comments), continuing under the
    first unclosed "(" (or |cont|, or 4 columns in); a trailing comment that does not fit
    moves to a line of its own. Returns the lines; a line it cannot break
    comes back as it is."""
    if len(line) <= limit:
        return [line]
    code, sep, comment = line.partition("/*")
    if sep and code.strip() and len(code.rstrip()) <= limit:
        lead = len(code) - len(code.lstrip())
        return [code.rstrip()] + split_c_line(" " * (lead + 4) + sep + comment, limit)
    depth, in_str, opens, cut = 0, False, [], None
    for k, c in enumerate(line[:limit]):
        if c == '"' and line[k - 1:k] != "\\":
            in_str = not in_str
        elif in_str:
            continue
        elif line.startswith("/*", k):
            break
        elif c == "(":
            opens.append(k)
        elif c == ")" and opens:
            opens.pop()
        elif c == "," and line[k + 1:k + 2] == " " and k + 1 < limit:
            cut = (k + 1, opens[-1] + 1 if opens else None)
    if cut is None:
        # No ", " to break at: after the first "(", if that leaves a shorter line.
        paren = line.find("(")
        if paren < 0 or paren + 1 >= limit or line.startswith("#", len(line) - len(line.lstrip())):
            return [line]
        cut = (paren + 1, None)
    pos, col = cut
    lead = len(line) - len(line.lstrip())
    if col is None:
        col = cont if cont is not None else lead + 4
    if col > limit // 2:
        col = lead + 4
    return [line[:pos].rstrip()] + split_c_line(" " * col + line[pos:].lstrip(), limit, col)


def join_c_statements(body, room):
    """join_c_statements joins the lines of a C declaration that spans lines
    (open parentheses at a line's end) if one of them is wider than |room|,
    so that split_c_line can wrap it as a whole."""
    out, group, depth = [], [], 0
    for text in body:
        group.append(text.rstrip())
        code = re.sub(r"/\*.*?\*/", "", text)
        depth += code.count("(") - code.count(")")
        if depth > 0:
            continue
        if len(group) > 1 and max(len(g) for g in group) > room:
            out.append(group[0] + " " + " ".join(g.strip() for g in group[1:]))
        else:
            out += group
        group, depth = [], 0
    return out + group


def render_code(body, lang, indent):
    """render_code sets a fenced block in no-fill mode. C is wrapped to the
    terminal's width; every block is indented CODE_INDENT if it then fits,
    less if not (diagrams wider than the page stay as they are)."""
    room = LINE_WIDTH - BODY_INDENT - indent
    if lang == "c":
        body = [part for text in join_c_statements(body, room)
                for part in split_c_line(text.rstrip(), room)]
    widest = max((len(text.rstrip()) for text in body), default=0)
    out = [".PP", ".RS %d" % max(0, min(CODE_INDENT, room - widest)), ".nf"]
    # A block wider than the text starts left of the margin, up to column 0.
    shift = min(BODY_INDENT + indent, widest - room)
    if shift > 0:
        out.append(".in -%dn" % shift)
    for text in body:
        text = escape(text.rstrip(), code=True)
        if text[:1] in (".", "'") or not text:
            text = "\\&" + text
        out.append(text)
    if shift > 0:
        out.append(".in")
    out += [".fi", ".RE"]
    return out


def column_widths(header, rows, avail, gap, word_cap):
    """column_widths shares |avail| columns among the table's columns: each
    gets its natural width if all fit, else short columns keep theirs and the
    long ones share the rest, never below their longest word."""
    ncol = len(header)
    cells = [header] + rows
    natural = [max(len(plain(r[c])) for r in cells) for c in range(ncol)]
    word = [max(max((len(w) for w in re.split(r"\s+|(?<=[_./])(?=[A-Za-z_])", plain(r[c]))), default=0)
                for r in cells)
            for c in range(ncol)]
    floor = [max(TABLE_MIN_COLUMN, min(word[c], natural[c], word_cap)) for c in range(ncol)]
    # allbox draws each column with half a gap on either side of its text.
    avail -= gap * ncol
    if sum(natural) <= avail:
        return [max(1, w) for w in natural]
    widths = [None] * ncol
    left = list(range(ncol))
    budget = avail
    changed = True
    while changed and left:
        changed = False
        share = budget // len(left)
        for c in list(left):
            if natural[c] <= share or floor[c] >= share:
                widths[c] = natural[c] if natural[c] <= share else floor[c]
                budget -= widths[c]
                left.remove(c)
                changed = True
    for c in left:
        widths[c] = max(floor[c], budget // len(left))
    return widths


def render_table(header, rows, indent):
    """render_table sets a pipe table with tbl, boxed, its columns sized to
    fit 80 columns at the margin |indent| further in (see column_widths)."""
    # Box edges take 2 columns; the rest is shared by the columns and gaps.
    avail = LINE_WIDTH - BODY_INDENT - indent - 2
    for gap, word_cap in TABLE_LAYOUTS:
        widths = column_widths(header, rows, avail, gap, word_cap)
        if sum(widths) + gap * len(widths) <= avail:
            break
    sep = "" if gap == 3 else str(gap)
    fmt = " ".join("lw(%dn)%s" % (w, sep if c < len(widths) - 1 else "")
                   for c, w in enumerate(widths))
    # Narrow cells cannot be justified: .na for the table, .ad restores the mode.
    out = [".PP", ".na", ".TS", "allbox tab(\t);", fmt.replace("lw", "lbw"), fmt + "."]
    for row in [header] + rows:
        out.append("\t".join("T{\n%s\nT}" % inline(cell, cell=True) for cell in row))
    out += [".TE", ".sp", ".ad"]  # .PP alone leaves no space under a box
    return out


def render_blocks(blocks, indent=0):
    """render_blocks returns the roff lines of |blocks|; |indent| is how far
    the enclosing list items already moved the margin (for table widths)."""
    out = []
    for block in blocks:
        kind = block[0]
        if kind == "heading":
            out += [".SH" if block[1] <= 2 else ".SS", inline(block[2])]
        elif kind == "para":
            out.append(".PP")
            out += paragraph(block[1])
        elif kind == "code":
            out += render_code(block[1], block[2], indent)
        elif kind == "table":
            out += render_table(block[1], block[2], indent)
        elif kind == "list":
            out += render_list(block[1], block[2], indent)
        else:
            raise AssertionError(kind)
    return out


def render_list(ordered, items, indent):
    """render_list sets a list as tagged paragraphs; an item's further
    paragraphs stay at its indent, its code, tables and lists go in .RS."""
    width = LIST_INDENT[ordered]
    out = []
    for marker, blocks in items:
        tag = "\\(bu" if not ordered else marker
        out.append('.IP "%s" %d' % (tag, width))
        rest = blocks
        if blocks and blocks[0][0] == "para":
            out += paragraph(blocks[0][1])
            rest = blocks[1:]
        for block in rest:
            if block[0] == "para":
                out.append('.IP "" %d' % width)
                out += paragraph(block[1])
            else:
                # .RS moves the margin by the item's indent; .RE restores it.
                out.append(".RS")
                out += render_blocks([block], indent + width)
                out.append(".RE")
    return out


# --- Pages -----------------------------------------------------------------------

TITLE_RE = re.compile(r"^([A-Za-z_]\w*)\((\d)\)")
NAME_TOKEN_RE = re.compile(r"`([A-Za-z_]\w*)(?:\(\))?`")


class Page:
    """Page: one API page, its name, the names it documents and its blocks."""

    def __init__(self, path):
        """__init__ reads and parses |path|; raises MdError if it is no API page."""
        self.path = path
        with open(path, "rb") as f:
            raw = f.read(MAX_INPUT_BYTES + 1)
        if len(raw) > MAX_INPUT_BYTES:
            raise MdError("%s: larger than %d bytes" % (path, MAX_INPUT_BYTES))
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MdError("%s: not UTF-8 (%s)" % (path, e))
        lines = list(enumerate(text.split("\n"), 1))
        blocks = parse_blocks(lines, path)
        if not blocks or blocks[0][:2] != ("heading", 1):
            raise MdError("%s:1: an API page starts with a `# TITLE` heading" % path)
        self.title = plain(blocks[0][2])
        self.blocks = blocks[1:]
        self.names, self.description = self._name_section()
        m = TITLE_RE.match(self.title)
        self.name = m.group(1) if m else self.names[0]
        self.section = m.group(2) if m else "3"

    def _name_section(self):
        """_name_section returns (names, description) of the NAME section and
        replaces its paragraph by a ("name", names, description) block."""
        for k, block in enumerate(self.blocks):
            if block[:2] == ("heading", 2) and plain(block[2]).strip() == "NAME":
                if k + 1 >= len(self.blocks) or self.blocks[k + 1][0] != "para":
                    break
                text = " ".join(self.blocks[k + 1][1])
                head, sep, desc = text.partition(" \u2014 ")
                if not sep:
                    head, sep, desc = text.partition(" - ")
                names = NAME_TOKEN_RE.findall(head)
                if not sep or not names:
                    raise MdError("%s: NAME must be `name`, `name` \u2014 description" % self.path)
                self.blocks[k + 1] = ("name", names, desc)
                return names, desc
        raise MdError("%s: no `## NAME` section naming what the page documents" % self.path)

    def render(self, date, version):
        """render returns the page as man(7) roff text."""
        out = ['.\\" Generated by tools/md2man.py from %s; edit that file, not this one.'
               % os.path.basename(self.path),
               '.TH %s %s "%s" "uTLS %s" "uTLS"' % (self.name, self.section, date, version)]
        for block in self.blocks:
            if block[0] == "name":
                # Unjustified: a list of long names justified is mostly gaps.
                out.append(".na")
                out.append("%s \\- %s" % (", ".join("\\%" + escape(nm) for nm in block[1]),
                                          escape(plain(block[2]))))
                out.append(".ad")
            else:
                out += render_blocks([block])
        return "\n".join(out) + "\n"


def write_if_changed(path, text):
    """write_if_changed leaves an unchanged file alone (and its mtime)."""
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv):
    """main converts the pages named in |argv|; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", required=True, help="writes OUT_DIR/man3/*.3")
    ap.add_argument("--date", default="", help="the date in each page's footer")
    ap.add_argument("--version", default="", help="the uTLS release in each footer")
    ap.add_argument("--stamp", help="a file touched after a successful run")
    ap.add_argument("pages", nargs="+", help="Markdown API pages")
    args = ap.parse_args(argv)
    try:
        pages = [Page(p) for p in args.pages]
    except (MdError, OSError) as e:
        print("md2man: %s" % e, file=sys.stderr)
        return 1
    owner = {}
    files = {}
    for page in pages:
        for nm in [page.name] + page.names:
            if nm in owner and owner[nm] is not page:
                print("md2man: %s is named by both %s and %s"
                      % (nm, owner[nm].path, page.path), file=sys.stderr)
                return 1
            owner[nm] = page
        files["%s.%s" % (page.name, page.section)] = page.render(args.date, args.version)
        for nm in page.names:
            if nm != page.name:
                files["%s.%s" % (nm, page.section)] = ".so man%s/%s.%s\n" % (
                    page.section, page.name, page.section)
    outdir = os.path.join(args.out_dir, "man3")
    os.makedirs(outdir, exist_ok=True)
    for old in os.listdir(outdir):
        if old.endswith(".3") and old not in files:
            os.remove(os.path.join(outdir, old))
    for fname, text in sorted(files.items()):
        write_if_changed(os.path.join(outdir, fname), text)
    if args.stamp:
        with open(args.stamp, "w") as f:
            f.write("%d pages\n" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
