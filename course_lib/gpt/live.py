"""Chapter 8's GPT in the reader's browser: one call exports a model for the website's live view.

The website's chapter page runs the chapter's trained GPT on whatever the reader types (the
next-token distribution, every head's attention, generation), with ``onnxruntime-web``: the page
holds no model code of its own, only the graph :func:`export` writes. A model you trained
yourself opens in the same view from your disk (the page's "Open your own model" button; the
file is read in the browser and goes nowhere)::

    from course_lib.gpt.live import export
    export(model, tok, "my_gpt.onnx")        # model: a course GPT, tok: its tokenizer

The graph takes token ids (1, L), L at most the context length, and returns

* ``logits`` (1, L, V): what ``model(ids)`` returns, each position's next-token scores;
* ``attention`` (n_layers, n_heads, L, L): every head's causal attention weights
  (:func:`course_lib.gpt.incontext.attention_maps`, the model's attention recomputed with the
  weights kept).

Both come from one pass of the course's own PyTorch code (the weights-keeping path, which
reproduces the fused model to rounding; ``tests/test_live.py`` checks the file against
``model(ids)``). The tokenizer, the sizes and a name travel inside the file
(:func:`course_lib.onnx_export.read_metadata`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from course_lib.gpt.model import GPT

__all__ = ["export", "graph_outputs", "metadata", "tokenizer_description"]


class _Graph(torch.nn.Module):
    """What the page runs: ids (1, L) -> (logits (1, L, V), attention (n_layers, h, L, L))."""

    def __init__(self, model: GPT) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, attention = graph_outputs(self.model, tokens)
        return logits, attention[0]  # (1, L, V), (n_layers, h, L, L)


def graph_outputs(model: GPT, tokens: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The exported graph's two outputs in PyTorch: ``logits`` (..., L, V) and ``attention``
    (..., n_layers, h, L, L), from one pass that keeps the attention weights."""
    from course_lib.gpt.incontext import _maps_and_hidden

    maps, hidden = _maps_and_hidden(model, tokens)
    head = model.tok_emb if model.config.tie_head else model.lm_head  # tied: h_n W_e^T
    return F.linear(hidden, head), torch.stack(maps, dim=-4)


def tokenizer_description(tokenizer: Any) -> dict[str, Any]:
    """The tokenizer as the page reads it: ``{"kind": "char", "chars": ...}`` or chapter 7's
    BPE table (:func:`course_lib.bpe.live.tokenizer_table`)."""
    from course_lib.gpt.data import BPETokenizer, CharTokenizer

    if isinstance(tokenizer, CharTokenizer):
        return {"kind": "char", "chars": tokenizer.chars}
    if isinstance(tokenizer, BPETokenizer):
        from course_lib.bpe.live import tokenizer_table

        return tokenizer_table(tokenizer.tok)
    raise TypeError(
        "tokenizer must be the model's course_lib.gpt.data.CharTokenizer or BPETokenizer, got "
        f"{type(tokenizer).__name__}"
    )


def metadata(model: GPT, tokenizer: Any, name: str) -> dict[str, Any]:
    """The description written into the file beside the weights."""
    c = model.config
    tok = tokenizer_description(tokenizer)
    n_tok = len(tok["chars"]) if tok["kind"] == "char" else tok["vocab_size"]
    if n_tok > c.vocab_size:
        raise ValueError(
            f"the tokenizer has {n_tok} tokens but the model only {c.vocab_size}: is it the "
            "tokenizer this model was trained with?"
        )
    return {
        "format": 1,
        "kind": "gpt",
        "name": name,
        "context_length": c.context_length,
        "n_layers": c.n_layers,
        "n_heads": c.n_heads,
        "d_model": c.d_model,
        "vocab_size": c.vocab_size,
        "parameters": model.count_parameters(),
        "tokenizer": tok,
    }


def export(model: GPT, tokenizer: Any, path: str | os.PathLike, name: str | None = None) -> Path:
    """Write ``model`` and its ``tokenizer`` as one ONNX file the chapter's web page can open.

    ``name`` is what the page calls the model (default: the file's name). The model is exported
    in float32 on the CPU (a copy; ``model`` is left as it was). Returns the path written.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a course_lib.gpt.model.GPT, got {type(model).__name__}")
    from course_lib.onnx_export import export_graph

    path = Path(path)
    meta = metadata(model, tokenizer, name or path.stem)
    cpu = GPT(model.config, seed=0)
    cpu.load_state_dict({k: v.detach().float().cpu() for k, v in model.state_dict().items()})
    example = torch.arange(min(5, model.config.context_length)).remainder(model.config.vocab_size)
    return export_graph(
        _Graph(cpu.eval()),
        example[None],
        path,
        outputs=("logits", "attention"),
        dynamic={"logits": {1: "L"}, "attention": {2: "L", 3: "L"}},
        metadata=meta,
    )
