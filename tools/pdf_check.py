"""Does a PDF lose anything? Text clipped by the page or by a box, and glyphs its fonts lack.

    python -m tools.pdf_check book/_build/html/course.pdf

A small interpreter of the pages' content streams (read by :func:`operations`, or by pypdf
where that cannot read one): it follows the graphics
state (``q``/``Q``, ``cm``, clipping paths), the text state (``Tf``, ``Tm``, ``Td``, ``Tc``,
``Tz`` ...) and every text-showing operator, and places each glyph with its advance width from
the font (``/W`` of a CID font, ``/Widths`` of a simple or Type 3 font). A glyph whose centre lies
outside the page's media box or outside the current clipping path (rectangles; another path
counts as its bounding box) is clipped: a printed code line cut at the right edge, for
instance. A glyph drawn with glyph id 0 (``.notdef``, the empty box a browser prints where no
font has the character) is missing; its character is read from the font's ``/ToUnicode`` map.

Used by ``tests/test_book.py`` on the course's PDF, whose text it also gives
(``Problems.texts``), and from the command line above.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: a glyph counts as clipped when its centre is this far (points) outside the box
SLACK = 0.5
#: MathJax builds a tall or wide delimiter (a brace, a bar, a bracket, an underbrace) from
#: pieces of glyphs in boxes that clip them on purpose: those pieces, drawn in its Type 3 fonts,
#: are not lost text; nor is a glyph that maps to no text at all
STRETCHY = set("|\u2016\u2223\u2225\u23d0\u2502") | {chr(c) for c in range(0x239B, 0x23B0)} | {""}


@dataclass
class Glyph:
    page: int  # 1-based
    char: str
    x: float  # the glyph's centre, in points from the page's lower left corner
    y: float
    before: str = ""  # the text just before it on the page


@dataclass
class Problems:
    clipped: list[Glyph] = field(default_factory=list)
    missing: list[Glyph] = field(default_factory=list)
    pages: int = 0
    glyphs: int = 0
    #: the text around each clipped run, per page: what a reader would miss
    context: dict[int, list[str]] = field(default_factory=dict)
    #: each page's text, its glyphs in the order drawn, a line break where the baseline moves
    texts: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"{self.pages} pages, {self.glyphs} glyphs"]
        if self.clipped:
            pages = sorted({g.page for g in self.clipped})
            lines.append(f"{len(self.clipped)} glyphs clipped, on pages {_ranges(pages)}:")
            for page in pages[:20]:
                for text in self.context.get(page, [])[:3]:
                    lines.append(f"  page {page}: ...{text}")
        if self.missing:
            chars = sorted({g.char for g in self.missing})
            pages = sorted({g.page for g in self.missing})
            shown = ", ".join(
                f"{c!r} (U+{ord(c):04X})" if len(c) == 1 else repr(c) or "(not mapped)"
                for c in chars
            )
            lines.append(
                f"{len(self.missing)} glyphs missing from their fonts (printed as empty boxes): "
                f"{shown}, on pages {_ranges(pages)}; for instance after:"
            )
            seen = set()
            for g in self.missing:
                if g.before not in seen and len(seen) < 5:
                    seen.add(g.before)
                    lines.append(f"  page {g.page}: ...{g.before}[?]")
        if not self.clipped and not self.missing:
            lines.append("nothing clipped, no glyph missing")
        return "\n".join(lines)


def _is_text(char: str) -> bool:
    """Whether a glyph's text is something a reader reads: not empty, not white space, not a
    private-use or format character (MathJax draws its stretchy pieces with private-use code
    points; an invisible operator is a format character)."""
    import unicodedata

    if not char.strip():
        return False
    return not all(unicodedata.category(c) in ("Co", "Cf", "Cc", "Cs") for c in char)


def _ranges(pages: list[int]) -> str:
    out, start = [], None
    for i, p in enumerate(pages):
        if start is None:
            start = p
        if i + 1 == len(pages) or pages[i + 1] != p + 1:
            out.append(str(start) if start == p else f"{start}-{p}")
            start = None
    return ", ".join(out[:30]) + (" ..." if len(out) > 30 else "")


# -- fonts ------------------------------------------------------------------------------------


def _num(x) -> float:
    return float(x)


def _parse_tounicode(data: bytes) -> dict[int, str]:
    """A ToUnicode CMap's bfchar and bfrange entries: code -> text."""
    text = data.decode("latin-1")
    out: dict[int, str] = {}

    def hexstr(h: str) -> str:
        raw = bytes.fromhex(h)
        try:
            return raw.decode("utf-16-be")
        except UnicodeDecodeError:
            return "?"

    for block in re.findall(r"beginbfchar(.*?)endbfchar", text, re.S):
        for src, dst in re.findall(r"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]*)>", block):
            out[int(src, 16)] = hexstr(dst)
    for block in re.findall(r"beginbfrange(.*?)endbfrange", text, re.S):
        for lo, hi, rest in re.findall(
            r"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*(\[[^\]]*\]|<[0-9A-Fa-f]*>)", block
        ):
            lo_i, hi_i = int(lo, 16), int(hi, 16)
            if rest.startswith("["):
                for i, h in enumerate(re.findall(r"<([0-9A-Fa-f]*)>", rest)):
                    out[lo_i + i] = hexstr(h)
            else:
                start = bytes.fromhex(rest[1:-1])
                base = int.from_bytes(start, "big") if start else 0
                for code in range(lo_i, hi_i + 1):
                    value = (base + code - lo_i).to_bytes(max(len(start), 2), "big")
                    try:
                        out[code] = value.decode("utf-16-be")
                    except UnicodeDecodeError:
                        out[code] = "?"
    return out


class Font:
    """What placing a font's glyphs needs: code width, code -> glyph id, code -> text."""

    def __init__(self, font) -> None:
        font = font.get_object()
        self.subtype = str(font.get("/Subtype"))
        self.two_bytes = self.subtype == "/Type0"
        self.scale = 0.001
        self.widths: dict[int, float] = {}
        self.default_width = 0.0
        self.cid_to_gid: bytes | None = None
        self.identity = True
        if self.two_bytes:
            desc = font["/DescendantFonts"][0].get_object()
            self.default_width = _num(desc.get("/DW", 1000))
            w = desc.get("/W", [])
            i = 0
            while i < len(w):
                first = int(w[i])
                nxt = w[i + 1]
                if isinstance(nxt, list) or hasattr(nxt, "__iter__") and not isinstance(nxt, str):
                    for j, width in enumerate(nxt):
                        self.widths[first + j] = _num(width)
                    i += 2
                else:
                    last, width = int(nxt), _num(w[i + 2])
                    for code in range(first, last + 1):
                        self.widths[code] = width
                    i += 3
            gid_map = desc.get("/CIDToGIDMap")
            if gid_map is not None and str(gid_map) != "/Identity":
                self.cid_to_gid = gid_map.get_object().get_data()
                self.identity = False
        else:
            first = int(font.get("/FirstChar", 0))
            for j, width in enumerate(font.get("/Widths", [])):
                self.widths[first + j] = _num(width)
            if self.subtype == "/Type3":
                self.scale = _num(font["/FontMatrix"][0])
        tounicode = font.get("/ToUnicode")
        self.text = _parse_tounicode(tounicode.get_object().get_data()) if tounicode else {}

    def codes(self, data: bytes) -> list[int]:
        if self.two_bytes:
            return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data) - 1, 2)]
        return list(data)

    def width(self, code: int) -> float:
        return self.widths.get(code, self.default_width) * self.scale

    def gid(self, code: int) -> int:
        if not self.two_bytes:
            return code  # a simple font: only its own encoding says; code 0 is unusual
        if self.identity or self.cid_to_gid is None:
            return code
        i = 2 * code
        return (
            int.from_bytes(self.cid_to_gid[i : i + 2], "big") if i + 1 < len(self.cid_to_gid) else 0
        )


# -- content streams --------------------------------------------------------------------------

#: One token of a content stream, after white space: a number, a name, a hex string, the start
#: or end of an array or a dictionary, the start of a literal string, a comment, or an operator.
_TOKEN = re.compile(
    rb"""[ \t\r\n\f\x00]*(?:
      (?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))(?=[ \t\r\n\f\x00\[\]()<>{}/%]|$)
    | (?P<name>/[^ \t\r\n\f\x00\[\]()<>{}/%]*)
    | (?P<hex><(?!<)[0-9A-Fa-f \t\r\n\f\x00]*>)
    | (?P<open>\[|<<)
    | (?P<close>\]|>>)
    | (?P<lit>\()
    | (?P<comment>%[^\r\n]*)
    | (?P<op>[^ \t\r\n\f\x00\[\]()<>{}/%]+)
    )""",
    re.X,
)
_ESCAPES = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("f"): 12}
#: The content-stream operators of PDF 2.0 (ISO 32000-2, annex A): a word that is none of these
#: (a number glued to an operator, "1 -2.Td") is left to pypdf.
_OPERATORS = frozenset(
    "b B b* B* BDC BI BMC BT BX c cm CS cs d d0 d1 Do DP EI EMC ET EX f F f* G g gs h i ID j J "
    "K k l m M MP n q Q re RG rg ri s S SC sc SCN scn sh T* Tc Td TD Tf Tj TJ TL Tm Tr Ts Tw Tz "
    "v w W W* y ' \"".split()
)


_MATCHING = {b"]": b"[", b">>": b"<<"}


class _NotParsed(ValueError):
    """A stream the fast reader leaves to pypdf (an inline image, or a token it does not know)."""


def _literal(data: bytes, pos: int) -> tuple[bytes, int]:
    """The literal string whose "(" ends at ``pos``: its bytes, and where it ends."""
    out = bytearray()
    depth = 1
    n = len(data)
    while pos < n:
        c = data[pos]
        pos += 1
        if c == 0x5C:  # backslash
            if pos >= n:
                break
            e = data[pos]
            pos += 1
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
            elif 0x30 <= e <= 0x37:  # up to three octal digits
                digits = bytes([e])
                while len(digits) < 3 and pos < n and 0x30 <= data[pos] <= 0x37:
                    digits += bytes([data[pos]])
                    pos += 1
                out.append(int(digits, 8) & 0xFF)
            elif e == 0x0D:  # a line continued
                if pos < n and data[pos] == 0x0A:
                    pos += 1
            elif e != 0x0A:
                out.append(e)
        elif c == 0x28:
            depth += 1
            out.append(c)
        elif c == 0x29:
            depth -= 1
            if depth == 0:
                return bytes(out), pos
            out.append(c)
        else:
            out.append(c)
    raise _NotParsed("a literal string without its end")


def operations(data: bytes) -> list[tuple[list, str]]:
    """A content stream's operations, ``(operands, operator)``, as pypdf's ``ContentStream``
    gives them, but read with one regular expression (pypdf reads byte by byte: two thirds of
    the check's time). Numbers are floats, names and operators str, strings bytes, arrays
    lists, dictionaries lists of their keys and values. Raises :class:`_NotParsed` where a
    stream has what it does not read: an inline image, a word that is no operator (a number
    glued to one), a bracket closed by the other kind, a string or an array left open."""
    ops: list[tuple[list, str]] = []
    operands: list = []
    nested: list[list] = []
    opened: list[bytes] = []  # "[" or "<<", one per open array or dictionary
    pos, n = 0, len(data)
    while pos < n:
        m = _TOKEN.match(data, pos)
        if m is None:
            if data[pos:].strip(b" \t\r\n\f\x00"):
                raise _NotParsed(f"no token at byte {pos}: {data[pos : pos + 20]!r}")
            break
        pos = m.end()
        kind = m.lastgroup
        if kind == "num":
            value = float(m.group(kind))
        elif kind == "name":
            raw = re.sub(rb"#([0-9A-Fa-f]{2})", lambda h: bytes([int(h[1], 16)]), m.group(kind))
            value = raw.decode("latin-1")
        elif kind == "hex":
            digits = re.sub(rb"[ \t\r\n\f\x00]", b"", m.group(kind)[1:-1])
            value = bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode())
        elif kind == "lit":
            value, pos = _literal(data, pos)
        elif kind == "open":
            nested.append([])
            opened.append(m.group(kind))
            continue
        elif kind == "close":
            if not nested or opened.pop() != _MATCHING[m.group(kind)]:
                raise _NotParsed(f"{m.group(kind)!r} without its start at byte {pos}")
            value = nested.pop()
        elif kind == "comment":
            continue
        else:
            word = m.group(kind).decode("latin-1")
            if word in ("true", "false", "null"):
                value = {"true": True, "false": False, "null": None}[word]
            elif nested:
                raise _NotParsed(f"operator {word!r} inside an array or dictionary")
            elif word == "BI":
                raise _NotParsed("an inline image")
            elif word not in _OPERATORS:
                raise _NotParsed(f"{word!r} is no operator (at byte {pos})")
            else:
                ops.append((operands, word))
                operands = []
                continue
        (nested[-1] if nested else operands).append(value)
    if nested:
        raise _NotParsed("an array or dictionary without its end")
    return ops


def _operations(stream, reader) -> list[tuple[list, object]]:
    """The stream's operations: :func:`operations`, or pypdf's where that cannot read it."""
    from pypdf.generic import ContentStream

    try:
        return operations(stream.get_data())
    except _NotParsed:
        return ContentStream(stream, reader).operations


# -- the interpreter --------------------------------------------------------------------------


def _mul(a, b):
    """3x3 affine matrices as 6-tuples (a b c d e f), PDF's row-vector convention: a then b."""
    return (
        a[0] * b[0] + a[1] * b[2],
        a[0] * b[1] + a[1] * b[3],
        a[2] * b[0] + a[3] * b[2],
        a[2] * b[1] + a[3] * b[3],
        a[4] * b[0] + a[5] * b[2] + b[4],
        a[4] * b[1] + a[5] * b[3] + b[5],
    )


def _apply(m, x, y):
    return (m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5])


IDENTITY = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def _intersect(a, b):
    if a is None:
        return b
    return (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))


def _inside(box, x, y) -> bool:
    return box[0] - SLACK <= x <= box[2] + SLACK and box[1] - SLACK <= y <= box[3] + SLACK


@dataclass
class _State:
    ctm: tuple = IDENTITY
    clip: tuple | None = None
    font: Font | None = None
    size: float = 0.0
    tc: float = 0.0
    tw: float = 0.0
    th: float = 1.0
    tl: float = 0.0
    rise: float = 0.0


def _run(ops, resources, state: _State, page_no, media, out: Problems, fonts, run_text, reader):
    stack: list[_State] = []
    path_pts: list[tuple[float, float]] = []
    pending_clip = False
    tm = tlm = IDENTITY
    font_res = resources.get("/Font", {}) if resources else {}
    xobjects = resources.get("/XObject", {}) if resources else {}

    def show(data) -> None:
        nonlocal tm
        font = state.font
        if font is None:
            return
        if hasattr(data, "original_bytes"):  # pypdf's decoded text string: its raw codes
            data = data.original_bytes
        elif isinstance(data, str):
            data = data.encode("latin-1")
        for code in font.codes(bytes(data)):
            w0 = font.width(code)
            trm = _mul(
                (state.size * state.th, 0, 0, state.size, 0, state.rise), _mul(tm, state.ctm)
            )
            cx, cy = _apply(trm, w0 / 2, 0.35)
            char = font.text.get(code, "")
            out.glyphs += 1
            glyph = Glyph(page_no, char, cx, cy)
            if font.two_bytes and font.gid(code) == 0:
                glyph.before = "".join(g[1] for g in run_text[-30:])
                out.missing.append(glyph)
            visible = _is_text(char) and not (font.subtype == "/Type3" and char in STRETCHY)
            clipped = visible and (
                not _inside(media, cx, cy) or (state.clip and not _inside(state.clip, cx, cy))
            )
            if clipped:
                out.clipped.append(glyph)
            left, right = _apply(trm, 0, 0.35)[0], _apply(trm, w0, 0.35)[0]
            run_text.append((bool(clipped), char, cy, abs(trm[3]), left, right))
            tx = w0 * state.size + state.tc + (state.tw if code == 32 and not font.two_bytes else 0)
            tm = _mul((1, 0, 0, 1, tx * state.th, 0), tm)

    for operands, op in ops:
        op = op.decode("latin-1") if isinstance(op, bytes) else op
        if op == "q":
            stack.append(_State(**state.__dict__))
        elif op == "Q":
            if stack:
                restored = stack.pop()
                state.__dict__.update(restored.__dict__)
        elif op == "cm":
            state.ctm = _mul(tuple(map(_num, operands)), state.ctm)
        elif op in ("m", "l"):
            path_pts.append(_apply(state.ctm, _num(operands[0]), _num(operands[1])))
        elif op in ("c", "v", "y"):
            vals = list(map(_num, operands))
            for i in range(0, len(vals), 2):
                path_pts.append(_apply(state.ctm, vals[i], vals[i + 1]))
        elif op == "re":
            x, y, w, h = map(_num, operands)
            for px, py in ((x, y), (x + w, y), (x, y + h), (x + w, y + h)):
                path_pts.append(_apply(state.ctm, px, py))
        elif op in ("W", "W*"):
            pending_clip = True
        elif op in ("n", "f", "F", "f*", "S", "s", "B", "B*", "b", "b*"):
            if pending_clip and path_pts:
                xs, ys = [p[0] for p in path_pts], [p[1] for p in path_pts]
                state.clip = _intersect(state.clip, (min(xs), min(ys), max(xs), max(ys)))
            pending_clip = False
            path_pts = []
        elif op == "BT":
            tm = tlm = IDENTITY
        elif op == "Tf":
            name, size = operands
            if name not in fonts.setdefault(id(font_res), {}):
                fonts[id(font_res)][name] = Font(font_res[name]) if name in font_res else None
            state.font, state.size = fonts[id(font_res)][name], _num(size)
        elif op == "Tc":
            state.tc = _num(operands[0])
        elif op == "Tw":
            state.tw = _num(operands[0])
        elif op == "Tz":
            state.th = _num(operands[0]) / 100
        elif op == "TL":
            state.tl = _num(operands[0])
        elif op == "Ts":
            state.rise = _num(operands[0])
        elif op == "Tm":
            tm = tlm = tuple(map(_num, operands))
        elif op in ("Td", "TD"):
            tx, ty = map(_num, operands)
            if op == "TD":
                state.tl = -ty
            tm = tlm = _mul((1, 0, 0, 1, tx, ty), tlm)
        elif op == "T*":
            tm = tlm = _mul((1, 0, 0, 1, 0, -state.tl), tlm)
        elif op == "Tj":
            show(operands[0])
        elif op == "'":
            tm = tlm = _mul((1, 0, 0, 1, 0, -state.tl), tlm)
            show(operands[0])
        elif op == '"':
            state.tw, state.tc = _num(operands[0]), _num(operands[1])
            tm = tlm = _mul((1, 0, 0, 1, 0, -state.tl), tlm)
            show(operands[2])
        elif op == "TJ":
            for item in operands[0]:
                if isinstance(item, bytes | str) or hasattr(item, "original_bytes"):
                    show(item)
                else:
                    shift = -_num(item) / 1000 * state.size * state.th
                    tm = _mul((1, 0, 0, 1, shift, 0), tm)
        elif op == "Do":
            xobj = xobjects.get(operands[0]) if xobjects else None
            if xobj is None:
                continue
            xobj = xobj.get_object()
            if xobj.get("/Subtype") != "/Form":
                continue
            inner = _State(**state.__dict__)
            if "/Matrix" in xobj:
                inner.ctm = _mul(tuple(map(_num, xobj["/Matrix"])), state.ctm)
            ops = _operations(xobj, reader)
            res = xobj.get("/Resources", resources)
            _run(ops, res, inner, page_no, media, out, fonts, run_text, reader)


def _page_text(run_text: list[tuple]) -> str:
    """The page's glyphs' text in the order drawn: a line break wherever the glyphs' middle
    height moves by more than half their size (a new line; a superscript's smaller shift
    stays), and a space where a glyph starts a fifth of its size or more after the one before
    on its line (a table's next cell, a word set apart) without a space drawn between."""
    parts: list[str] = []
    last = None
    for _, char, y, size, left, right in run_text:
        if last is not None:
            y0, size0, right0 = last
            if abs(y - y0) > 0.5 * max(size, size0, 1.0):
                parts.append("\n")
            elif left - right0 > 0.2 * max(size, 1.0) and " " not in (char, parts[-1][-1:]):
                parts.append(" ")
        parts.append(char)
        last = (y, size, right)
    return "".join(parts)


def check(path: Path) -> Problems:
    """Every glyph of every page of the PDF at ``path``, placed; the clipped and the missing;
    and each page's text (``Problems.texts``)."""
    from pypdf import PdfReader

    reader = PdfReader(path)
    out = Problems(pages=len(reader.pages))
    fonts: dict = {}
    for i, page in enumerate(reader.pages, start=1):
        contents = page.get_contents()
        if contents is None:
            out.texts.append("")
            continue
        media = tuple(map(float, page.mediabox))
        run_text: list[tuple] = []  # clipped, text, y, size, left and right x: _page_text
        ops = _operations(contents, reader)
        _run(ops, page.get("/Resources", {}), _State(), i, media, out, fonts, run_text, reader)
        out.texts.append(_page_text(run_text))
        contexts = []
        j = 0
        while j < len(run_text):
            if run_text[j][0]:
                start = j
                while j < len(run_text) and (run_text[j][0] or not run_text[j][1].strip()):
                    j += 1
                before = "".join(g[1] for g in run_text[max(0, start - 40) : start])
                cut = "".join(g[1] for g in run_text[start:j])
                contexts.append(f"{before[-40:]}[{cut[:60]}]")
            j += 1
        if contexts:
            out.context[i] = contexts
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pdf", type=Path)
    args = parser.parse_args(argv)
    problems = check(args.pdf)
    print(problems.summary())
    return 1 if problems.clipped or problems.missing else 0


if __name__ == "__main__":
    sys.exit(main())
