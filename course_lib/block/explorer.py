"""Chapter 5's parameter explorer on the website: every GPT-3 row, with and without GLU, biases
and tied output embeddings, precomputed.

The same :func:`course_lib.block.widget.render_html` the notebook's ``explorer("GPT-3 Small")``
calls, on the configuration its widget builds from a preset; see
:mod:`course_lib.static_explorer`.

>>> ex = explorer()
>>> ex.size, ex.value("GPT-3 Small", False, True, True)  # GPT-2 small's + 1024 positions x 768
(64, 125226240)
"""

from __future__ import annotations

from dataclasses import replace

from course_lib.block.config import DecoderConfig
from course_lib.block.widget import PRESETS, parameter_breakdown, preset_config, render_html
from course_lib.static_explorer import Control, Explorer

CALL = 'explorer("GPT-3 Small")'


def config(preset: str, gated: bool, bias: bool, tied: bool) -> DecoderConfig:
    """The configuration the widget builds when a preset is chosen and the boxes set."""
    cfg = preset_config(preset)
    block = replace(cfg.block, gated=gated, bias=bias)
    return replace(cfg, block=block, tie_embeddings=tied)


def render(preset: str, gated: bool, bias: bool, tied: bool) -> str:
    return render_html(config(preset, gated, bias, tied), PRESETS[preset].nominal)


def total(preset: str, gated: bool, bias: bool, tied: bool) -> int:
    """The exact number of parameters shown."""
    return sum(parameter_breakdown(config(preset, gated, bias, tied)).values())


def explorer() -> Explorer:
    yes_no = ("no", "yes")
    return Explorer(
        "block",
        "Explore where a decoder's parameters are",
        (
            Control("preset", "preset", tuple(PRESETS), kind="select"),
            Control("gated", "gated FFN (GLU)", (False, True), kind="select", labels=yes_no),
            Control("bias", "biases", (False, True), True, kind="select", labels=yes_no),
            Control("tied", "tied output", (False, True), True, kind="select", labels=yes_no),
        ),
        render=render,
        value=total,
    )
