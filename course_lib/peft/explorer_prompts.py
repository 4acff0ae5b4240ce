"""Chapter 13's second explorer on the website (part 2): the code study's grid, precomputed.

The same :func:`course_lib.peft.widget.steer_html` the notebook's ``steer_explorer(grid)``
calls, on the shipped study (``data/peft/elicit_code.json``); see
:mod:`course_lib.static_explorer`.
"""

from __future__ import annotations

from functools import lru_cache

from course_lib.peft.widget import steer_html
from course_lib.static_explorer import Control, Explorer

CALL = "steer_explorer("


@lru_cache(maxsize=1)
def grid() -> tuple[dict, ...]:
    """The grid runs of the shipped code study (the notebook's ``grid``)."""
    from course_lib.peft.elicit import load_study

    study = load_study("code")
    return tuple(r for r in study["runs"] if r["steps"] == study["settings"]["steps"])


def render(method: str, init: str, lr: float) -> str:
    return steer_html(grid(), method, init, lr)


def mean_loss(method: str, init: str, lr: float) -> float:
    """The number shown: the loss averaged over the runs of this setting."""
    from course_lib.peft.elicit import grid_loss

    return round(grid_loss(list(grid()), method=method, init=init, lr=lr), 4)


def explorer() -> Explorer:
    lrs = tuple(sorted({r["lr"] for r in grid()}))
    return Explorer(
        "peft-prompts",
        "Explore the steering study",
        (
            Control("method", "method", ("prompt", "prefix"), "prompt", kind="select"),
            Control("init", "start", ("text", "random"), "text", kind="select"),
            Control("lr", "learning rate", lrs, lrs[len(lrs) // 2]),
        ),
        render=render,
        value=mean_loss,
    )
