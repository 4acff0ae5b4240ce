"""Chapter 9's BERT in the reader's browser: the masked-LM model as one ONNX file for the website.

The chapter page's live view fills the reader's ``[MASK]``s with the chapter's pre-trained
BERT, run by ``onnxruntime-web`` from the graph :func:`export` writes (no model code in the
page). The graph takes ``[CLS] text [SEP]`` as ids (1, L), one segment, no padding, and returns

* ``logits`` (1, L, V): ``model.mlm(ids)``, the masked-LM scores at every position;
* ``attention`` (n_layers, n_heads, L, L): ``model.attention_maps(ids)``, every head's weights.

The tokenizer (chapter 7's byte-level BPE trained for this model, with ``[PAD] [CLS] [SEP]
[MASK]`` after the bytes) travels inside the file as chapter 7's table
(:func:`course_lib.bpe.live.tokenizer_table`). :func:`fill` is what the page shows, computed in
PyTorch: the reference the browser test compares the page with.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from course_lib.bert.model import Bert

__all__ = ["encode_masked", "export", "fill"]


class _Graph(torch.nn.Module):
    def __init__(self, model: Bert) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.mlm(tokens), self.model.attention_maps(tokens)[0]


def encode_masked(tok: Any, text: str) -> list[int]:
    """``[CLS] text [SEP]`` as ids, ``[MASK]`` in the text as the mask token and every other
    special token's text as plain text (what a reader types is never a control token)."""
    from course_lib.bert.data import CLS, SEP

    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return [CLS, *tok.encode(text, allowed_special={"[MASK]"}, disallowed_special=()), SEP]


@torch.no_grad()
def fill(model: Bert, tok: Any, text: str, k: int = 5) -> dict[str, Any]:
    """What the page shows for ``text``: its ids, the logits (L, V) and each mask's ``k`` best
    tokens ``[(id, probability), ...]`` by rank."""
    from course_lib.bert.data import MASK
    from course_lib.checks import check_int

    check_int(k, "k", low=1)
    ids = encode_masked(tok, text)
    if len(ids) > model.config.max_len:
        raise ValueError(
            f"the text is {len(ids) - 2} tokens long; the model reads at most "
            f"{model.config.max_len - 2} (plus [CLS] and [SEP])"
        )
    logits = model.eval().mlm(torch.tensor([ids]))[0]  # (L, V)
    probs = torch.softmax(logits, -1)
    masks = [i for i, t in enumerate(ids) if t == MASK]
    top = {i: [(int(j), float(probs[i, j])) for j in probs[i].topk(k).indices] for i in masks}
    return {"ids": ids, "logits": logits, "top": top}


def export(model: Bert, tok: Any, path: str | os.PathLike, name: str | None = None) -> Path:
    """Write ``model`` (a course :class:`Bert`) and its tokenizer as one ONNX file for the page."""
    if not isinstance(model, Bert):
        raise TypeError(f"model must be a course_lib.bert.model.Bert, got {type(model).__name__}")
    from course_lib.bert.data import CLS, MASK, SEP
    from course_lib.bpe.live import tokenizer_table
    from course_lib.onnx_export import export_graph

    path = Path(path)
    c = model.config
    meta = {
        "format": 1,
        "kind": "bert",
        "name": name or path.stem,
        "context_length": c.max_len,
        "n_layers": c.n_layers,
        "n_heads": c.block.n_heads,
        "d_model": c.d_model,
        "vocab_size": c.vocab_size,
        "parameters": sum(p.numel() for p in model.parameters()),
        "cls": CLS,
        "sep": SEP,
        "mask": MASK,
        "tokenizer": tokenizer_table(tok),
    }
    cpu = Bert(c, params=model.numpy_parameters()).float().eval()
    example = torch.tensor([[CLS, 72, MASK, 105, SEP]])
    return export_graph(
        _Graph(cpu),
        example,
        path,
        outputs=("logits", "attention"),
        dynamic={"logits": {1: "L"}, "attention": {2: "L", 3: "L"}},
        metadata=meta,
    )
