"""The temperature explorer of Chapter 2: how T, top-k and top-p reshape a distribution.

:func:`parse_logits`, :func:`distribution` and :func:`render_html` are pure (tested without a
browser); :func:`temperature_explorer` only wires ipywidgets controls to them.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from course_lib.checks import as_array, check_int, check_real
from course_lib.interact import live_html
from course_lib.softmax.reference import sampling_probs


def parse_logits(text: str) -> np.ndarray:
    """Read logits typed as numbers separated by commas or spaces (``-inf`` masks an entry).

    >>> parse_logits("2, 4 4, -inf")
    array([  2.,   4.,   4., -inf])
    >>> parse_logits("2, four")
    Traceback (most recent call last):
    ...
    ValueError: logits must be numbers separated by commas or spaces; 'four' is not a number
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    tokens = text.replace(",", " ").split()
    if not tokens:
        raise ValueError("logits must contain at least one number, got an empty text")
    values = []
    for tok in tokens:
        try:
            values.append(float(tok))
        except ValueError:
            raise ValueError(
                f"logits must be numbers separated by commas or spaces; {tok!r} is not a number"
            ) from None
    arr = np.array(values)
    if np.isnan(arr).any() or (arr == np.inf).any():
        raise ValueError("logits must be finite or -inf (a masked entry); NaN and +inf are not")
    return arr


def distribution(
    logits: Any, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0
) -> dict[str, Any]:
    """The sampling distribution of 1-D logits and what to say about it.

    ``top_k=0`` and ``top_p=1`` switch the filters off. Returns the probabilities, which entries
    survive the filters, the entropy in bits and the effective number of choices ``2**entropy``.

    >>> d = distribution([2.0, 4.0, 4.0], temperature=1.0)
    >>> d["probs"].round(3).tolist(), round(d["entropy_bits"], 3)
    ([0.063, 0.468, 0.468], 1.277)
    >>> distribution([2.0, 4.0, 4.0], top_k=1)["kept"].tolist()  # the tie with the first is kept
    [False, True, True]
    """
    x = as_array(logits, "logits", ndim=1)
    t = check_real(temperature, "temperature", low=0.0)
    k = check_int(top_k, "top_k", low=0)
    p = check_real(top_p, "top_p", low=0.0, high=1.0, low_open=True)
    probs = sampling_probs(x, t, top_k=k or None, top_p=None if p == 1.0 else p)
    nz = probs[probs > 0]
    entropy = float(-(nz * np.log2(nz)).sum())
    return {
        "probs": probs,
        "kept": probs > 0,
        "entropy_bits": entropy,
        "effective_choices": 2.0**entropy,
    }


def render_html(
    logits: Any,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    labels: list[str] | None = None,
) -> str:
    """A horizontal bar chart (HTML) of the sampling distribution, with a one-line summary.

    >>> "effective number of choices" in render_html([1.0, 2.0], temperature=0.5)
    True
    """
    d = distribution(logits, temperature, top_k, top_p)
    x = as_array(logits, "logits", ndim=1)
    names = labels if labels is not None else [f"token {i}" for i in range(len(x))]
    if len(names) != len(x):
        raise ValueError(f"labels must have one name per logit ({len(x)}), got {len(names)}")
    rows = []
    for name, logit, prob, kept in zip(names, x, d["probs"], d["kept"], strict=True):
        colour = "#0072B2" if kept else "#bbbbbb"
        width = 100.0 * prob
        rows.append(
            "<tr>"
            f'<td style="padding:2px 8px;font-family:monospace">{html.escape(str(name))}</td>'
            f'<td style="padding:2px 8px;text-align:right;font-family:monospace">{logit:.2f}</td>'
            '<td style="width:320px;padding:2px 8px">'
            f'<div style="background:{colour};height:14px;width:{width:.1f}%"></div></td>'
            f'<td style="padding:2px 8px;text-align:right;font-family:monospace">{prob:.3f}</td>'
            "</tr>"
        )
    head = (
        '<tr><th style="text-align:left;padding:2px 8px">token</th>'
        '<th style="padding:2px 8px">logit</th><th style="padding:2px 8px">probability</th>'
        '<th style="padding:2px 8px">p</th></tr>'
    )
    summary = (
        f"T = {temperature:.3g}, top-k = {top_k or 'off'}, "
        f"top-p = {'off' if top_p == 1.0 else f'{top_p:.2f}'}: entropy "
        f"{d['entropy_bits']:.3f} bits, effective number of choices {d['effective_choices']:.2f}"
    )
    return (
        '<div class="softmax-explorer"><table style="border-collapse:collapse">'
        f"{head}{''.join(rows)}</table>"
        f'<p style="font-family:monospace">{html.escape(summary)}</p></div>'
    )


def temperature_explorer(logits: str = "2, 4, 4, 1, -1", labels: list[str] | None = None):
    """An ipywidgets explorer: edit the logits, move T, top-k and top-p, see the distribution."""
    import ipywidgets as w

    text = w.Text(value=logits, description="logits")
    temp = w.FloatLogSlider(value=1.0, base=10, min=-2, max=2, step=0.05, description="T")
    k = w.IntSlider(value=0, min=0, max=20, description="top-k (0 off)")
    p = w.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05, description="top-p (1 off)")

    def render() -> str:
        x = parse_logits(text.value)
        names = labels if labels is not None and len(labels) == len(x) else None
        k.max = max(len(x), 1)
        return render_html(x, temp.value, k.value, p.value, names)

    out = live_html([text, temp, k, p], render)
    return w.VBox([text, w.HBox([temp, k, p]), out])


def entropy_curve(logits: Any, temperatures: Any) -> np.ndarray:
    """Entropy in bits of ``softmax(logits / T)`` for each temperature (for the chapter's figure).

    It rises from ``log2(number of maxima)`` at T = 0 to ``log2(number of unmasked entries)``.

    >>> entropy_curve([0.0, 1.0], [0.0, float("inf")]).tolist()
    [0.0, 1.0]
    """
    temps = as_array(temperatures, "temperatures", ndim=1)
    out = np.empty(len(temps))
    for i, t in enumerate(temps):
        out[i] = distribution(logits, float(t))["entropy_bits"]
    return out
