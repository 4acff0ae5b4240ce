"""Chapter 12's value box on the website: a number stored in every format, precomputed for the
numbers the chapter suggests trying.

The same :func:`parse_number` and :func:`render_value_html` the notebook's ``value_box("0.1")``
calls; see :mod:`course_lib.static_explorer`.

>>> explorer().value("0.1")[:3]
['0x3DCCCCCD', '0x2E66', '0x3DCD']
"""

from __future__ import annotations

from course_lib.number_formats.widget import parse_number, render_value_html, value_rows
from course_lib.static_explorer import Control, Explorer

CALL = 'value_box("0.1")'
NUMBERS = ("0.1", "1", "3.14159265", "448", "464", "65504", "65520", "1e-7", "1e-40", "inf")


def render(text: str) -> str:
    return render_value_html(parse_number(text))


def hex_codes(text: str) -> list[str]:
    """The bits of the stored value in each format, in hexadecimal."""
    return [r["hex"] for r in value_rows(parse_number(text))]


def explorer() -> Explorer:
    return Explorer(
        "number-formats",
        "Explore how a number is stored",
        (Control("text", "x =", NUMBERS, kind="select"),),
        render=render,
        value=hex_codes,
    )
