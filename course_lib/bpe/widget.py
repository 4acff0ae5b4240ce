"""Widget of Chapter 7: tokenise your own text with the first N merges and see the tokens coloured.

The computation is :func:`course_lib.bpe.analysis.token_spans` (tested); this only draws it.

>>> "tokens" in render_html([(256, "ab"), (99, "c")])
True
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from course_lib.bpe.analysis import token_spans, tokenizer_from_merges
from course_lib.interact import live_html

__all__ = ["merges_explorer", "render_html"]

_COLOURS = ("#fde2e4", "#e2ece9", "#dfe7fd", "#fff1c1", "#e8dff5")


def render_html(spans: Sequence[tuple[int, str]]) -> str:
    """Tokens as coloured boxes (alternating colours), with the count and bytes per token."""
    boxes = "".join(
        f'<span title="id {i}" style="background:{_COLOURS[k % len(_COLOURS)]};'
        f'padding:1px 2px;margin:0 1px;border-radius:3px;white-space:pre">{html.escape(t)}</span>'
        for k, (i, t) in enumerate(spans)
    )
    n_bytes = sum(len(t.encode("utf-8")) for _, t in spans)
    return (
        f'<div class="bpe-explorer"><p style="font-family:monospace;line-height:2">{boxes}</p>'
        f"<p>{len(spans)} tokens for {n_bytes} bytes ({n_bytes / max(len(spans), 1):.2f} bytes per token)</p></div>"
    )


def merges_explorer(merges: Sequence[tuple[bytes, bytes]], text: str = "The quick brown fox"):
    """Type text; move the slider to use the first N merges."""
    import ipywidgets as w

    box = w.Textarea(value=text, description="text", layout=w.Layout(width="95%"))
    n = w.IntSlider(min(200, len(merges)), 0, len(merges), description="merges")
    out = live_html(
        [box, n],
        lambda: render_html(token_spans(tokenizer_from_merges(merges[: n.value]), box.value)),
    )
    return w.VBox([box, n, out])
