"""Chapter 13's method explorer on the website: every method and rank, precomputed.

The same :func:`course_lib.peft.widget.method_html` the notebook's ``method_explorer(cfg,
curves)`` calls, on chapter 8's GPT and the shipped comparison's curves; see
:mod:`course_lib.static_explorer`.
"""

from __future__ import annotations

from functools import lru_cache

from course_lib.peft.counting import METHODS, trainable_parameters
from course_lib.peft.widget import TARGETS_ALL, method_html
from course_lib.static_explorer import Control, Explorer

CALL = "method_explorer("
RANKS = (1, 2, 4, 8)


@lru_cache(maxsize=1)
def config_and_curves():
    """Chapter 8's decoder configuration and the comparison's curves (the notebook's)."""
    from course_lib.gpt.pretrained import load_pretrained
    from course_lib.peft.compare import by_name, load_comparison

    gpt, _ = load_pretrained()
    runs = by_name(load_comparison())
    curves = {
        k: (v["curve"]["steps"], v["curve"]["accuracy"]) for k, v in runs.items() if v["curve"]
    }
    return gpt.config.decoder, curves


def render(method: str, rank: int) -> str:
    cfg, curves = config_and_curves()
    return method_html(cfg, method, rank, curves)


def trainable(method: str, rank: int) -> int:
    """The number of trainable parameters shown."""
    cfg, _ = config_and_curves()
    return trainable_parameters(cfg, method, rank=rank, targets=TARGETS_ALL, virtual_tokens=8)


def explorer() -> Explorer:
    return Explorer(
        "peft",
        "Explore fine-tuning methods",
        (
            Control("method", "method", METHODS, "lora", kind="select"),
            Control("rank", "rank", RANKS, 4),
        ),
        render=render,
        value=trainable,
    )
