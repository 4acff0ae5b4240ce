"""The widgets of Chapter 12: a bit editor and a value box.

:func:`bit_fields`, :func:`value_rows`, :func:`parse_number` and the two ``render_*`` functions
are pure (tested without a browser); :func:`bit_editor` and :func:`value_box` only wire
ipywidgets controls to them.
"""

from __future__ import annotations

import html
import math
from typing import Any

import course_lib.number_formats.reference as ref
from course_lib.interact import live_html
from course_lib.number_formats.formats import FORMAT_NAMES, check_bit_patterns, get_format

FIELD_COLOURS = {"sign": "#f4c7c3", "exponent": "#c9daf8", "fraction": "#d9ead3"}


def _bit_string(b: int, bits: int) -> str:
    return format(b, f"0{bits}b")


def bit_fields(bits: int, fmt: str) -> dict[str, Any]:
    """Split one bit pattern into its fields and explain its value with the chapter's formulas.

    >>> d = bit_fields(0x3E200000, "float32")
    >>> d["sign"], d["exponent"], d["fraction"], d["kind"], d["value"]
    ('0', '01111100', '01000000000000000000000', 'normal', 0.15625)
    >>> d["formula"]
    '(-1)^0 × 2^(124 - 127) × (1 + 2097152 / 2^23) = 2^-3 × 1.25 = 0.15625'
    >>> bit_fields(0x0001, "float16")["kind"]
    'subnormal'
    """
    f = get_format(fmt)
    b = int(check_bit_patterns(bits, f))
    text = _bit_string(b, f.bits)
    E, M = f.exponent_bits, f.mantissa_bits
    s, e, frac = b >> f.sign_shift, (b >> M) & f.exponent_all_ones, b & (2**M - 1)
    value = float(ref.decode(b, f))
    sign_word = "-" if s else ""
    if e == f.exponent_all_ones and f.ieee_specials:
        kind = "infinity" if frac == 0 else "NaN"
        formula = (
            f"exponent field all ones and fraction {'0' if frac == 0 else 'not 0'}: {kind}"
            f"{' (' + sign_word + 'inf)' if frac == 0 else ''}"
        )
    elif e == f.exponent_all_ones and frac == 2**M - 1:
        kind = "NaN"
        formula = f"{f.name} has no infinities: all ones in exponent and fraction is its NaN"
    elif e == 0 and frac == 0:
        kind = "zero"
        formula = f"exponent and fraction fields 0: {sign_word}0"
    elif e == 0:
        kind = "subnormal"
        formula = (
            f"(-1)^{s} × 2^(1 - {f.bias}) × ({frac} / 2^{M}) = {sign_word}2^{f.emin} × "
            f"{frac / 2**M:g} = {value:.7g}"
        )
    else:
        kind = "normal"
        formula = (
            f"(-1)^{s} × 2^({e} - {f.bias}) × (1 + {frac} / 2^{M}) = {sign_word}2^{e - f.bias} × "
            f"{1 + frac / 2**M:.10g} = {value:.7g}"
        )
    return {
        "format": f.name,
        "bits": text,
        "sign": text[0],
        "exponent": text[1 : 1 + E],
        "fraction": text[1 + E :],
        "kind": kind,
        "value": value,
        "formula": formula,
    }


def parse_number(text: Any) -> float:
    """Read a number typed by the learner (``"0.1"``, ``"1e-8"``, ``"-inf"``, ``"nan"``).

    >>> parse_number(" 1e-3 "), parse_number("-inf")
    (0.001, -inf)
    >>> parse_number("ten")
    Traceback (most recent call last):
    ...
    ValueError: 'ten' is not a number: type something like 0.1, -3e-8, 65504, inf or nan
    """
    try:
        return float(str(text).strip())
    except ValueError:
        raise ValueError(
            f"{str(text).strip()!r} is not a number: type something like 0.1, -3e-8, 65504, "
            "inf or nan"
        ) from None


def value_rows(x: float) -> list[dict[str, Any]]:
    """How ``x`` is stored in each format: bits, stored value, absolute and relative error.

    >>> rows = value_rows(0.1)
    >>> [(r["format"], r["hex"]) for r in rows][:3]
    [('float32', '0x3DCCCCCD'), ('float16', '0x2E66'), ('bfloat16', '0x3DCD')]
    >>> rows[2]["stored"], rows[2]["note"]
    (0.10009765625, 'rounded')
    """
    x = float(x)
    rows = []
    for name in FORMAT_NAMES:
        f = get_format(name)
        b = int(ref.encode(x, f))
        stored = float(ref.decode(b, f))
        if math.isnan(x) or math.isnan(stored):
            err, rel = math.nan, math.nan
            note = "NaN" if math.isnan(x) else "overflow: no infinity in this format, so NaN"
        elif math.isinf(stored) and not math.isinf(x):
            err, rel, note = math.inf, math.inf, "overflow to infinity"
        elif math.isinf(x):
            err, rel, note = 0.0, 0.0, "infinity"
        else:
            err = abs(stored - x)
            rel = err / abs(x) if x != 0 else 0.0
            if err == 0:
                note = "exact"
            elif stored == 0:
                note = "underflow to zero"
            elif abs(stored) < f.min_normal:
                note = "rounded (subnormal)"
            else:
                note = "rounded"
        rows.append(
            {
                "format": name,
                "hex": f"0x{b:0{f.bits // 4}X}",
                "bits": bit_fields(b, f)["bits"],
                "stored": stored,
                "abs error": err,
                "rel error": rel,
                "note": note,
            }
        )
    return rows


def _coloured_bits(bits: str, E: int) -> str:
    cells = []
    for i, ch in enumerate(bits):
        field = "sign" if i == 0 else "exponent" if i <= E else "fraction"
        cells.append(
            f'<span style="background:{FIELD_COLOURS[field]};padding:1px 2px;'
            f'font-family:monospace">{ch}</span>'
        )
    return "".join(cells)


def render_bits_html(bits: int, fmt: str) -> str:
    """HTML: the fields of a pattern in colour, its kind and the formula giving its value.

    >>> "0.15625" in render_bits_html(0x3E200000, "float32")
    True
    """
    d = bit_fields(bits, fmt)
    E = get_format(fmt).exponent_bits
    return (
        '<div class="bit-fields">'
        f"<div>{_coloured_bits(d['bits'], E)}</div>"
        f"<div><b>{html.escape(d['format'])}</b>: sign {d['sign']} | exponent {d['exponent']} | "
        f"fraction {d['fraction']} ({html.escape(d['kind'])})</div>"
        f'<div style="font-family:monospace">{html.escape(d["formula"])}</div></div>'
    )


def _fmt(v: float) -> str:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    return f"{v:.8g}"


def render_value_html(x: float) -> str:
    """HTML table: ``x`` stored in each format, with its bits and rounding error.

    >>> "65504" in render_value_html(70000.0)
    False
    >>> "overflow to infinity" in render_value_html(70000.0)
    True
    """
    head = "".join(
        f'<th style="padding:2px 8px;text-align:left">{h}</th>'
        for h in ("format", "bits", "hex", "stored value", "abs error", "rel error", "note")
    )
    rows = []
    for r in value_rows(x):
        E = get_format(r["format"]).exponent_bits
        rows.append(
            "<tr>"
            f'<td style="padding:2px 8px">{r["format"]}</td>'
            f'<td style="padding:2px 8px">{_coloured_bits(r["bits"], E)}</td>'
            f'<td style="padding:2px 8px;font-family:monospace">{r["hex"]}</td>'
            f'<td style="padding:2px 8px">{_fmt(r["stored"])}</td>'
            f'<td style="padding:2px 8px">{_fmt(r["abs error"])}</td>'
            f'<td style="padding:2px 8px">{_fmt(r["rel error"])}</td>'
            f'<td style="padding:2px 8px">{html.escape(r["note"])}</td></tr>'
        )
    return (
        f'<div class="value-box"><p>x = {html.escape(_fmt(float(x)))}</p>'
        f'<table style="border-collapse:collapse"><tr>{head}</tr>{"".join(rows)}</table></div>'
    )


def bit_editor(fmt: str = "float32", bits: int = 0x3E200000):
    """Click bits of a pattern; see its fields, its value, and that value in every format."""
    import ipywidgets as w

    f = get_format(fmt)
    state = {"bits": int(check_bit_patterns(bits, f)), "fmt": f.name}
    choose = w.Dropdown(options=list(FORMAT_NAMES), value=f.name, description="format")
    row = w.HBox()
    out = w.HTML()

    def show() -> None:
        value = float(ref.decode(state["bits"], state["fmt"]))
        out.value = render_bits_html(state["bits"], state["fmt"]) + render_value_html(value)

    def build() -> None:
        g = get_format(state["fmt"])
        buttons = []
        for i in reversed(range(g.bits)):  # most significant (sign) bit first
            field = (
                "sign" if i == g.bits - 1 else "exponent" if i >= g.mantissa_bits else "fraction"
            )
            bit = state["bits"] >> i & 1
            button = w.Button(
                description=str(bit),
                tooltip=f"bit {i} ({field}): click to flip",
                layout=w.Layout(width="26px", padding="0"),
                style={"button_color": FIELD_COLOURS[field], "font_weight": "bold" if bit else ""},
            )

            def flip(b: w.Button, i: int = i) -> None:
                state["bits"] ^= 1 << i
                now = state["bits"] >> i & 1
                b.description = str(now)
                b.style.font_weight = "bold" if now else ""
                show()

            button.on_click(flip)
            buttons.append(button)
        row.children = buttons
        show()

    def on_format(change: dict) -> None:
        value = float(ref.decode(state["bits"], state["fmt"]))
        state["fmt"] = change["new"]
        state["bits"] = int(ref.encode(value, change["new"]))  # keep the value, re-encode it
        build()

    choose.observe(on_format, names="value")
    build()
    return w.VBox([choose, row, out])


def value_box(text: str = "0.1"):
    """Type a number; see its bits, the stored value and the rounding error in each format."""
    import ipywidgets as w

    box = w.Text(value=text, description="x =", continuous_update=False)
    out = live_html([box], lambda: render_value_html(parse_number(box.value)))
    return w.VBox([box, out])


__all__ = [
    "bit_editor",
    "bit_fields",
    "parse_number",
    "render_bits_html",
    "render_value_html",
    "value_box",
    "value_rows",
]
