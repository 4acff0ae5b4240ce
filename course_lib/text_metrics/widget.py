"""The BLEU explorer of Chapter 3: type a candidate and references, see every count of BLEU.

:func:`bleu_breakdown` and :func:`render_html` are pure (tested without a browser);
:func:`bleu_explorer` only wires ipywidgets controls to them.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence

from course_lib.checks import check_choice, check_int
from course_lib.interact import error_html, live_html
from course_lib.text_metrics import SMOOTHING, TOKENIZERS, bleu_from_stats, corpus_stats, tokenize

__all__ = ["bleu_breakdown", "bleu_explorer", "render_html"]

MATCH, CLIPPED, MISS = "match", "clipped", "miss"
_COLOURS = {MATCH: "#c9ecd9", CLIPPED: "#fde2b8", MISS: "#ffffff"}


def _positions(cand: list[str], refs: list[list[str]], n: int) -> list[str]:
    """Status of each n-gram position of the candidate, left to right.

    A position is a ``match`` while its n-gram has been used fewer times than its clip
    ``min(C(s, c), max_y C(s, y))``, ``clipped`` once the clip is used up, ``miss`` if no
    reference has it.
    """
    ref_max: Counter = Counter()
    for ref in refs:
        for g, c in Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1)).items():
            ref_max[g] = max(ref_max[g], c)
    used: Counter = Counter()
    out = []
    for i in range(len(cand) - n + 1):
        g = tuple(cand[i : i + n])
        if ref_max[g] == 0:
            out.append(MISS)
        elif used[g] < ref_max[g]:
            used[g] += 1
            out.append(MATCH)
        else:
            out.append(CLIPPED)
    return out


def bleu_breakdown(
    candidate: str,
    references: Sequence[str],
    max_n: int = 4,
    *,
    tokenize_method: str = "13a",
    smoothing: str = "none",
) -> dict:
    """Everything BLEU computes for one candidate: tokens, n-gram statuses, counts, BP, score.

    >>> b = bleu_breakdown("the the the cat", ["the cat sat", "the the dog"], max_n=2)
    >>> b["orders"][0]["positions"]  # "the" may count twice (reference 2 has it twice)
    ['match', 'match', 'clipped', 'match']
    >>> (b["orders"][0]["matches"], b["orders"][0]["total"], b["c"], b["r"])
    (3, 4, 4, 3)
    """
    if not isinstance(candidate, str):
        raise TypeError(f"candidate must be a str, got {type(candidate).__name__}")
    if isinstance(references, str) or not isinstance(references, Sequence):
        raise TypeError("references must be a list of str (one reference per item)")
    refs_text = [r for r in references if isinstance(r, str) and r.strip()]
    if not refs_text:
        raise ValueError("give at least one non-empty reference")
    check_int(max_n, "max_n", low=1, high=9)
    check_choice(tokenize_method, "tokenize_method", TOKENIZERS)
    check_choice(smoothing, "smoothing", SMOOTHING)
    cand = tokenize(candidate, tokenize_method)
    refs = [tokenize(r, tokenize_method) for r in refs_text]
    stats = corpus_stats([cand], [refs], max_n, tokenize=tokenize_method)
    result = bleu_from_stats(stats, smoothing=smoothing)
    orders = []
    for n in range(1, max_n + 1):
        pos = _positions(cand, refs, n)
        assert pos.count(MATCH) == stats.matches[n - 1]  # the same clipping as the library
        orders.append(
            {
                "n": n,
                "positions": pos,
                "matches": stats.matches[n - 1],
                "total": stats.totals[n - 1],
                "precision": result.precisions[n - 1],
            }
        )
    return {
        "tokens": cand,
        "references": refs,
        "orders": orders,
        "c": stats.c,
        "r": stats.r,
        "bp": result.bp,
        "bleu": result.score,
    }


def _token_row(tokens: list[str], positions: list[str], n: int) -> str:
    """Colour each token by the best status of the n-gram positions that cover it."""
    rank = {MATCH: 2, CLIPPED: 1, MISS: 0}
    status = [MISS] * len(tokens)
    for i, s in enumerate(positions):
        for j in range(i, i + n):
            if rank[s] > rank[status[j]]:
                status[j] = s
    cells = "".join(
        f'<span style="background:{_COLOURS[s]};padding:1px 3px;margin:1px;'
        f'border:1px solid #ccc;border-radius:3px">{html.escape(t)}</span>'
        for t, s in zip(tokens, status, strict=True)
    )
    return cells or "<i>(no tokens)</i>"


def render_html(
    candidate: str,
    references: Sequence[str],
    max_n: int = 4,
    *,
    tokenize_method: str = "13a",
    smoothing: str = "none",
) -> str:
    """HTML of :func:`bleu_breakdown`: highlighted tokens per order, the counts, BP and BLEU.

    >>> "BLEU-2 = " in render_html("the cat", ["the cat sat"], max_n=2)
    True
    """
    try:
        b = bleu_breakdown(
            candidate, references, max_n, tokenize_method=tokenize_method, smoothing=smoothing
        )
    except (TypeError, ValueError) as err:
        return error_html(err)
    rows = []
    for o in b["orders"]:
        n = o["n"]
        p = f"{o['precision']:.3f}" if o["total"] else "undefined (0/0)"
        clipped = o["positions"].count(CLIPPED)
        rows.append(
            f"<tr><td>{n}</td><td>{_token_row(b['tokens'], o['positions'], n)}</td>"
            f"<td>{o['matches']} / {o['total']}</td><td>{clipped}</td><td>{p}</td></tr>"
        )
    legend = " ".join(
        f'<span style="background:{c};padding:1px 4px;border:1px solid #ccc">{k}</span>'
        for k, c in _COLOURS.items()
    )
    return (
        '<div class="bleu-explorer">'
        f"<p>legend: {legend} (a token takes the best status of the n-grams covering it)</p>"
        '<table style="border-collapse:collapse"><tr><th>n</th><th>candidate tokens</th>'
        "<th>clipped matches / total</th><th>clipped away</th><th>p_n</th></tr>"
        + "".join(rows)
        + "</table>"
        f'<p style="font-family:monospace">c = {b["c"]}, r = {b["r"]} (closest reference length, '
        f"ties to the shorter), BP = {b['bp']:.4f}<br>"
        f"BLEU-{max_n} = {b['bleu']:.4f} (smoothing: {html.escape(smoothing)})</p></div>"
    )


def bleu_explorer(candidate: str, references: Sequence[str]):
    """An ipywidgets explorer: edit the candidate and references, see BLEU's counts update."""
    import ipywidgets as w

    cand = w.Textarea(value=candidate, description="candidate", layout=w.Layout(width="95%"))
    refs = w.Textarea(
        value="\n".join(references),
        description="references",
        placeholder="one reference per line",
        layout=w.Layout(width="95%", height="80px"),
    )
    max_n = w.IntSlider(4, 1, 6, description="max n")
    tok = w.Dropdown(options=list(TOKENIZERS), value="13a", description="tokenize")
    smooth = w.Dropdown(options=list(SMOOTHING), value="none", description="smoothing")
    out = live_html(
        [cand, refs, max_n, tok, smooth],
        lambda: render_html(
            cand.value,
            refs.value.split("\n"),
            max_n.value,
            tokenize_method=tok.value,
            smoothing=smooth.value,
        ),
    )
    return w.VBox([cand, refs, w.HBox([max_n, tok, smooth]), out])
