"""How every widget of the course is wired: controls in, one pure render function, HTML out.

The computation a widget shows lives in a pure function of its chapter (tested without a
browser); the widget only calls it. :func:`live_html` is that wiring, written once: it renders
now and again whenever one of the controls changes value, and shows an error in plain words
(a learner typing "1,2,x" into a box of numbers) instead of a stack trace.

>>> error_html(ValueError("logits must be numbers, got 'x'"))
'<p class="course-error" style="color:#b3261e">logits must be numbers, got &#x27;x&#x27;</p>'
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["error_html", "live_html"]


def error_html(err: BaseException) -> str:
    """An error message as a red HTML paragraph."""
    return f'<p class="course-error" style="color:#b3261e">{html.escape(str(err))}</p>'


def live_html(
    controls: Sequence[Any],
    render: Callable[[], str],
    *,
    before: Callable[[], None] | None = None,
    errors: tuple[type[BaseException], ...] = (ValueError, TypeError),
) -> Any:
    """An ``ipywidgets.HTML`` showing ``render()``, refreshed when any control's value changes.

    ``before()`` runs first on each change (to adjust other controls, e.g. a slider's maximum);
    an exception of a type in ``errors`` is shown as a message instead of the output.
    """
    import ipywidgets as w

    out = w.HTML()

    def update(_: object = None) -> None:
        try:
            if before is not None:
                before()
            out.value = render()
        except errors as err:
            out.value = error_html(err)

    for control in controls:
        control.observe(update, names="value")
    update()
    return out
