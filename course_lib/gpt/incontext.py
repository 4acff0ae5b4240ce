"""In-context learning on a task the course generates (Chapter 8, GPT-3's few-shot prompting).

The task is a **secret code**: every episode draws a fresh code that gives each of four lower-case
letters an upper-case letter, and writes examples of it, one per line, each a letter followed by
its code letter (the template)::

    kR
    cB
    kR
    w       <- the query: w has not been shown, so the best answer is a guess
    c       <- this query's answer is in the prompt: B

No weight can store the code, because each episode invents a new one: the only way to answer a
query is to find its letter among the examples *in the prompt* and copy what followed it. A
character-level GPT is pre-trained on Shakespeare with such episodes mixed in
(:func:`pretraining_text`); :func:`accuracy_by_shots` then asks it held-out queries after 0, 1, 2,
4, 8 examples (shots). A perfect in-context learner answers a query exactly when its letter was
among the shots, and guesses (1 in 26) otherwise: :func:`ideal_accuracy`.

The recipe :data:`RECIPE` is trained by a script (about 13 minutes on one CPU thread) and ships
as ``data/gpt/incontext_char.pt`` (float16 weights, its history and measured accuracies)::

    python -m course_lib.gpt.incontext data/gpt/incontext_char.pt

>>> rnd = random.Random(0)
>>> code = make_code(rnd)
>>> sorted(code) == sorted(set(code)) and len(code) == N_INPUTS
True
>>> prompt, answer = episode(code, 2, random.Random(1))
>>> prompt.count("\\n"), prompt[-1] in code, answer == code[prompt[-1]]
(2, True, True)
"""

from __future__ import annotations

import json
import os
import random
import string
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from course_lib.checks import check_int
from course_lib.gpt.config import Recipe
from course_lib.gpt.model import GPT

__all__ = [
    "INPUTS",
    "MAX_LINES",
    "N_INPUTS",
    "OUTPUTS",
    "PER_PARAGRAPH",
    "RECIPE",
    "SHIPPED",
    "SHOTS",
    "accuracy_by_distance",
    "accuracy_by_shots",
    "attention_maps",
    "episode",
    "episode_at_distance",
    "ideal_accuracy",
    "line",
    "is_episode",
    "load_incontext",
    "make_code",
    "pretraining_text",
    "train_incontext",
]

INPUTS = string.ascii_lowercase  # what a code is applied to
OUTPUTS = string.ascii_uppercase  # what it gives
N_INPUTS = 4  # letters per code
SHOTS = (0, 1, 2, 4, 8)  # the numbers of examples the chapter evaluates
SHIPPED = ("gpt", "incontext_char.pt")

#: A small GPT (0.1 M parameters, RoPE); trained by :func:`train_incontext`.
RECIPE = Recipe(
    name="incontext",
    n_layers=2,
    n_heads=4,
    d_model=64,
    context_length=64,
    batch_size=32,
    lr=3e-3,
    min_lr=3e-4,
    warmup_steps=100,
    decay_steps=12000,
    positions="rope",
)
MAX_LINES = 16  # an episode of the pre-training text has 1 to 16 lines
PER_PARAGRAPH = 2  # episodes after each paragraph of Shakespeare


def line(x: str, y: str = "") -> str:
    """One example of the template; without ``y``, the query the model completes.

    >>> line("k", "R"), line("k")
    ('kR\\n', 'k')
    """
    return f"{x}{y}\n" if y else x


def make_code(rnd: random.Random) -> dict[str, str]:
    """A fresh code: ``N_INPUTS`` distinct lower-case letters, each given a random upper-case one.

    The outputs are drawn independently (two letters may share one), so a letter that has not
    been shown reveals nothing about its output.
    """
    if not isinstance(rnd, random.Random):
        raise TypeError(f"rnd must be a random.Random, got {type(rnd).__name__}")
    return {x: rnd.choice(OUTPUTS) for x in rnd.sample(INPUTS, N_INPUTS)}


def episode(code: dict[str, str], n_shots: int, rnd: random.Random) -> tuple[str, str]:
    """``n_shots`` examples drawn at random (with replacement) from ``code``, then a query.

    Returns the prompt (ending in the query's letter) and the answer, one upper-case letter.

    >>> episode({"a": "B"}, 1, random.Random(0))
    ('aB\\na', 'B')
    """
    check_int(n_shots, "n_shots", low=0)
    keys = sorted(code)
    shots = "".join(line(x, code[x]) for x in (rnd.choice(keys) for _ in range(n_shots)))
    q = rnd.choice(keys)
    return shots + line(q), code[q]


def ideal_accuracy(n_shots: int) -> float:
    """The accuracy of a perfect in-context learner after ``n_shots`` examples.

    The query's letter was among the shots with probability ``1 - (1 - 1/4)^k``; then the
    learner copies its output, otherwise it guesses one of 26.

    >>> [round(ideal_accuracy(k), 3) for k in (0, 1, 8)]
    [0.038, 0.279, 0.904]
    """
    check_int(n_shots, "n_shots", low=0)
    unseen = (1 - 1 / N_INPUTS) ** n_shots
    return 1 - unseen + unseen / len(OUTPUTS)


def is_episode(paragraph: str) -> bool:
    """Whether a paragraph of the pre-training text is an episode (every line fits the template).

    >>> is_episode("kR\\ncB"), is_episode("To be.")
    (True, False)
    """
    return all(
        len(ln) == 2 and ln[0] in INPUTS and ln[1] in OUTPUTS for ln in paragraph.split("\n")
    )


def pretraining_text(
    text: str, seed: int = 0, max_lines: int = MAX_LINES, per_paragraph: int = PER_PARAGRAPH
) -> str:
    """``text`` with ``per_paragraph`` episodes of 1 to ``max_lines`` lines after each paragraph.

    Paragraphs are the pieces between blank lines; each episode has its own code and is set off
    by blank lines, so it reads as a paragraph too. The result is deterministic in ``seed``.

    >>> mixed = pretraining_text("To be.\\n\\nOr not.", seed=0, max_lines=2)
    >>> parts = mixed.split("\\n\\n")
    >>> parts[0], parts[3], all(is_episode(p) for p in parts[1:3] + parts[4:])
    ('To be.', 'Or not.', True)
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    check_int(max_lines, "max_lines", low=1)
    check_int(per_paragraph, "per_paragraph", low=1)
    rnd = random.Random(seed)
    parts = []
    for para in text.split("\n\n"):
        parts.append(para)
        for _ in range(per_paragraph):
            code = make_code(rnd)
            keys = sorted(code)
            xs = [rnd.choice(keys) for _ in range(rnd.randint(1, max_lines))]
            parts.append("".join(line(x, code[x]) for x in xs).rstrip("\n"))
    return "\n\n".join(parts)


@torch.no_grad()
def accuracy_by_shots(
    model: GPT,
    tokenizer: Any,
    shots: Sequence[int] = SHOTS,
    n_episodes: int = 400,
    seed: int = 1234,
    prefix: str = "\n\n",
) -> dict[int, float]:
    """The fraction of held-out queries whose most probable next character is the answer.

    For each number of shots, ``n_episodes`` episodes with fresh codes (drawn from ``seed``, not
    the training seed) are run as one batch: every prompt of a batch has the same length, so the
    answer is read at the last position.
    """
    check_int(n_episodes, "n_episodes", low=1)
    model.eval()
    out = {}
    for k in shots:
        rnd = random.Random(f"{seed}-{k}")
        prompts, answers = zip(
            *(episode(make_code(rnd), k, rnd) for _ in range(n_episodes)), strict=True
        )
        ids = torch.tensor([tokenizer.encode(prefix + p) for p in prompts])  # (N, L)
        if ids.shape[1] > model.config.context_length:
            raise ValueError(
                f"{k} shots need {ids.shape[1]} characters, the model reads "
                f"{model.config.context_length}"
            )
        want = torch.tensor([tokenizer.encode(a)[0] for a in answers])  # (N,)
        logits = model(ids.to(model.tok_emb.device))[:, -1]  # (N, V): the next character
        out[k] = round(float((logits.argmax(-1).cpu() == want).double().mean()), 4)
    return out


def episode_at_distance(
    code: dict[str, str], n_shots: int, distance: int, rnd: random.Random
) -> tuple[str, str]:
    """``n_shots`` examples in which the query's letter is shown exactly once, ``distance`` lines
    before the query (1: the last line); the other lines show the code's other letters.

    >>> episode_at_distance({"a": "B", "c": "D"}, 3, 2, random.Random(0))
    ('aB\\ncD\\naB\\nc', 'D')
    """
    check_int(n_shots, "n_shots", low=1)
    check_int(distance, "distance", low=1)
    if distance > n_shots:
        raise ValueError(f"distance must be at most n_shots = {n_shots}, got {distance}")
    keys = sorted(code)
    q = rnd.choice(keys)
    others = [x for x in keys if x != q]
    if not others:
        raise ValueError("the code needs at least two letters to hide the query among others")
    xs = [rnd.choice(others) for _ in range(n_shots)]
    xs[n_shots - distance] = q
    return "".join(line(x, code[x]) for x in xs) + line(q), code[q]


@torch.no_grad()
def accuracy_by_distance(
    model: GPT,
    tokenizer: Any,
    n_shots: int = 8,
    n_episodes: int = 200,
    seed: int = 4321,
    prefix: str = "\n\n",
) -> dict[int, float]:
    """Accuracy when the query's only example sits 1 to ``n_shots`` lines before it.

    Separates *how far back* the model can find the example from *whether* it was shown, which
    :func:`accuracy_by_shots` mixes: a perfect in-context learner scores 1 at every distance.
    """
    check_int(n_episodes, "n_episodes", low=1)
    model.eval()
    out = {}
    for dist in range(1, n_shots + 1):
        rnd = random.Random(f"{seed}-{dist}")
        prompts, answers = zip(
            *(episode_at_distance(make_code(rnd), n_shots, dist, rnd) for _ in range(n_episodes)),
            strict=True,
        )
        ids = torch.tensor([tokenizer.encode(prefix + p) for p in prompts])  # (N, L)
        want = torch.tensor([tokenizer.encode(a)[0] for a in answers])  # (N,)
        logits = model(ids.to(model.tok_emb.device))[:, -1]  # (N, V)
        out[dist] = round(float((logits.argmax(-1).cpu() == want).double().mean()), 4)
    return out


@torch.no_grad()
def attention_maps(model: GPT, tokens: Any) -> list[torch.Tensor]:
    """Every layer's attention weights, (..., h, L, L) each, recomputed from the model's weights.

    The model itself calls a fused attention kernel that does not return its weights; this
    repeats its computation (norm, projections, RoPE or learned positions, causal softmax) and
    keeps them. ``tests/test_gpt.py`` checks that the weights reproduce the model's output.
    """
    return _maps_and_hidden(model, tokens)[0]


def _maps_and_hidden(model: GPT, tokens: Any) -> tuple[list[torch.Tensor], torch.Tensor]:
    import math

    import torch.nn.functional as F

    from course_lib.gpt import accelerated as acc

    c = model.config
    p = model.parameter_dict()
    t = acc.check_tokens(tokens, c, model.tok_emb.device)
    L = t.shape[-1]
    h = F.embedding(t, p["tok_emb"])  # (..., L, d)
    rope = None
    if c.positions == "learned":
        h = h + p["pos_emb"][:L]
    else:
        rope = acc.rope_tables(0, L, c.d_head, c.rope_base, h.dtype, h.device)
    causal = torch.ones(L, L, dtype=torch.bool, device=h.device).tril()
    maps = []
    for blk in p["blocks"]:
        z = acc._norm(h, blk, "norm1", c)
        q, k, v = (
            (
                F.linear(
                    z, acc._fuse(blk[f"w_{n}"]).t(), blk[f"b_{n}"].reshape(-1) if c.bias else None
                )
            )
            .unflatten(-1, (c.n_heads, c.d_head))
            .transpose(-3, -2)
            for n in "qkv"
        )  # (..., h, L, d_head) each
        if rope is not None:
            q, k = acc._rotate(q, *rope), acc._rotate(k, *rope)
        s = (q @ k.transpose(-1, -2) / math.sqrt(c.d_head)).masked_fill(~causal, -math.inf)
        w = torch.softmax(s, -1)  # (..., h, L, L)
        maps.append(w)
        a = (w @ v).transpose(-3, -2).flatten(-2)  # (..., L, d)
        h = h + F.linear(a, blk["w_o"].t(), blk.get("b_o"))
        h = h + acc._mlp(acc._norm(h, blk, "norm2", c), blk, c)
    return maps, acc._norm(h, p, "final_norm", c)


def train_incontext(
    text: str | None = None,
    recipe: Recipe = RECIPE,
    max_steps: int | None = None,
    seed: int = 0,
    progress: bool = True,
    eval_interval: int = 250,
) -> dict[str, Any]:
    """Pre-train ``recipe`` on Shakespeare with episodes mixed in (:func:`pretraining_text`).

    Returns :func:`course_lib.gpt.train.train`'s result with ``accuracy`` (by shots) added.
    """
    from course_lib.gpt.data import CharTokenizer, shakespeare_file
    from course_lib.gpt.train import train

    if text is None:
        text = shakespeare_file().read_text(encoding="utf-8")
    mixed = pretraining_text(text, seed=seed)
    tok = CharTokenizer.train(mixed + INPUTS + OUTPUTS + line("a", "B"))  # every letter a code uses
    res = train(
        mixed,
        tok,
        recipe,
        max_steps=recipe.decay_steps if max_steps is None else max_steps,
        seed=seed,
        progress=progress,
        eval_interval=eval_interval,
        log=(lambda r: print(json.dumps(r), flush=True)) if progress else None,
    )
    res["accuracy"] = accuracy_by_shots(res["model"], tok)
    return res


def _save(res: dict[str, Any], dst: str | os.PathLike, command: str) -> Path:
    """The model in float16, its tokenizer, recipe, history and accuracies (atomically)."""
    model = res["model"]
    ckpt = {
        "version": 1,
        "config": model.config.to_dict(),
        "model": {k: v.detach().cpu().half() for k, v in model.state_dict().items()},
        "tokenizer": res["tokenizer"].to_dict(),
        "recipe": RECIPE.to_dict(),
        "trainer": None,
        "extra": {
            "history": res["history"],
            "steps": res["steps"],
            "accuracy": {str(k): v for k, v in res["accuracy"].items()},
            "command": command,
        },
    }
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + f".tmp{os.getpid()}")
    torch.save(ckpt, tmp)
    os.replace(tmp, dst)
    return dst


def load_incontext(path: str | os.PathLike | None = None) -> tuple[GPT, Any, dict[str, Any]]:
    """The shipped model (float32, eval mode), its tokenizer and its ``extra`` record."""
    from course_lib.gpt.data import load_tokenizer
    from course_lib.gpt.train import load_checkpoint, model_from_checkpoint
    from course_lib.paths import data_path

    ckpt = load_checkpoint(data_path(*SHIPPED) if path is None else path)
    model = model_from_checkpoint(ckpt).float().eval()
    return model, load_tokenizer(ckpt["tokenizer"]), dict(ckpt["extra"])


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m course_lib.gpt.incontext")
    parser.add_argument("out", help="where to write the float16 checkpoint")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    result = train_incontext(max_steps=args.max_steps, seed=args.seed, progress=True)
    print(json.dumps({"accuracy": result["accuracy"], "seconds": result["seconds"]}))
    cmd = "python -m course_lib.gpt.incontext " + " ".join(sys.argv[1:])
    print(_save(result, args.out, cmd))
