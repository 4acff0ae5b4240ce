"""The chapter's task: teach chapter 8's pre-trained Shakespeare GPT to reverse a word.

The base model is chapter 8's shipped character-level GPT (:func:`load_base`: 4 layers, 4 heads,
width 128, context 64, about 0.8 million parameters), loaded into chapter 5's
:class:`~course_lib.models.decoder.DecoderOnlyModel`, whose parameter names a learned-position
GPT shares. The task is generated from a seed; nothing is downloaded. An example is a string of
``N_LETTERS`` random lowercase letters, a colon, the same letters reversed and a semicolon::

    stone:enots;

All these characters (``a``-``z``, ``:``, ``;``) are in the Shakespeare vocabulary (the
tokenizer has no ``=``). The model has read plenty of colons and semicolons but never this
pattern, and it continues the colon with Shakespeare-like letters: its exact-match accuracy
before fine-tuning is 0. The loss and the accuracy count the answer letters only (not the word
before the colon, which is random, nor the closing ``;``); an example counts as right when every
answer letter is the model's top prediction.

:func:`fine_tune` is the training loop (Adam, fixed seeds, held-out accuracy every few steps);
:func:`measure_step` times one step and counts the bytes of weights, gradients and Adam state.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.checks import check_int, check_real
from course_lib.models.decoder import DecoderOnlyModel

__all__ = [
    "END",
    "HELD_OUT_SEED",
    "LETTERS",
    "N_LETTERS",
    "SEP",
    "TASKS",
    "Curve",
    "accuracy",
    "answer_loss",
    "example_text",
    "fine_tune",
    "greedy_answers",
    "load_base",
    "measure_step",
    "random_words",
    "reverse_examples",
    "tokenizer",
    "training_step",
]

LETTERS = "abcdefghijklmnopqrstuvwxyz"
SEP, END = ":", ";"
N_LETTERS = 5
#: The tasks: write the word reversed (the chapter's task) or copied (the control).
TASKS = ("reverse", "copy")
#: The seed of the held-out examples :func:`fine_tune` evaluates on (training uses others).
HELD_OUT_SEED = 2**31 - 1


@functools.cache
def _pretrained_tokenizer() -> Any:
    from course_lib.gpt.pretrained import load_pretrained

    return load_pretrained()[1]


def tokenizer() -> Any:
    """Chapter 8's character tokenizer (77 characters of Shakespeare's text), loaded once."""
    return _pretrained_tokenizer()


def load_base() -> tuple[DecoderOnlyModel, Any]:
    """Chapter 8's shipped pre-trained GPT as a chapter 5 ``DecoderOnlyModel``, and its tokenizer.

    A learned-position GPT's state dict uses chapter 5's parameter names, so it loads into
    ``DecoderOnlyModel(gpt.config.decoder)`` exactly (every key, every shape); the two compute the
    same logits (the tests check it to float32 rounding).
    """
    from course_lib.gpt.pretrained import load_pretrained

    gpt, tok = load_pretrained()
    base = DecoderOnlyModel(gpt.config.decoder, generator=torch.Generator().manual_seed(0))
    base.load_state_dict(gpt.state_dict(), strict=True)
    return base.eval(), tok


def random_words(n: int, seed: int, n_letters: int = N_LETTERS) -> list[str]:
    """``n`` strings of ``n_letters`` random lowercase letters (uniform, from ``seed``).

    >>> random_words(3, seed=0, n_letters=4)
    ['qpbq', 'zrdz', 'rrzy']
    """
    n = check_int(n, "n", low=1)
    n_letters = check_int(n_letters, "n_letters", low=1)
    idx = torch.randint(0, 26, (n, n_letters), generator=torch.Generator().manual_seed(seed))
    return ["".join(LETTERS[i] for i in row) for row in idx.tolist()]


def _check_task(task: str) -> str:
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    return task


def example_text(word: str, task: str = "reverse") -> str:
    """The task's text for one word: the word, ``:``, the answer, ``;``.

    The answer is the word reversed (``task="reverse"``) or the word itself (``"copy"``, the
    control task).

    >>> example_text("stone"), example_text("stone", task="copy")
    ('stone:enots;', 'stone:stone;')
    """
    if not isinstance(word, str) or not word or any(c not in LETTERS for c in word):
        raise ValueError(f"word must be a non-empty string of lowercase letters a-z, got {word!r}")
    answer = word[::-1] if _check_task(task) == "reverse" else word
    return f"{word}{SEP}{answer}{END}"


def reverse_examples(
    n: int, seed: int, n_letters: int = N_LETTERS, tok: Any = None, task: str = "reverse"
) -> torch.Tensor:
    """``n`` examples ``w1 .. wn : wn .. w1 ;`` as token ids (n, 2 n_letters + 2).

    ``tok`` is chapter 8's tokenizer by default; ``task="copy"`` makes ``w1 .. wn : w1 .. wn ;``
    from the same words (the control task).

    >>> t = reverse_examples(2, seed=0, n_letters=4)
    >>> t.shape, tokenizer().decode(t[0].tolist())
    (torch.Size([2, 10]), 'qpbq:qbpq;')
    """
    tok = tok or tokenizer()
    rows = [tok.encode(example_text(w, task)) for w in random_words(n, seed, n_letters)]
    return torch.tensor(rows, dtype=torch.long)


def _answer_slice(tokens: torch.Tensor) -> slice:
    n_letters = (tokens.shape[-1] - 2) // 2
    return slice(n_letters, 2 * n_letters)  # positions whose next token is an answer letter


def answer_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the answer letters given everything before them."""
    s = _answer_slice(tokens)
    logits = model(tokens[:, :-1])[:, s]  # (B, n_letters, V)
    targets = tokens[:, 1:][:, s]  # (B, n_letters)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@torch.no_grad()
def accuracy(model: nn.Module, tokens: torch.Tensor) -> float:
    """The fraction of examples whose every answer letter is the model's top prediction.

    Teacher-forced, which here equals greedy decoding: if every top prediction is right, the
    greedy answer follows the same path.
    """
    was_training = model.training
    model.eval()
    s = _answer_slice(tokens)
    pred = model(tokens[:, :-1])[:, s].argmax(-1)  # (B, n_letters)
    model.train(was_training)
    return (pred == tokens[:, 1:][:, s]).all(dim=1).float().mean().item()


@torch.no_grad()
def _evaluate(model: nn.Module, tokens: torch.Tensor) -> tuple[float, float]:
    """Exact-match accuracy and answer loss on ``tokens``, from one forward pass."""
    was_training = model.training
    model.eval()
    s = _answer_slice(tokens)
    logits = model(tokens[:, :-1])[:, s]  # (B, n_letters, V)
    targets = tokens[:, 1:][:, s]  # (B, n_letters)
    model.train(was_training)
    acc = (logits.argmax(-1) == targets).all(dim=1).float().mean().item()
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()
    return acc, loss


@torch.no_grad()
def greedy_answers(model: nn.Module, words: Sequence[str], tok: Any = None) -> list[str]:
    """What ``model`` writes after ``word:``, greedily, one character per answer letter."""
    tok = tok or tokenizer()
    was_training = model.training
    model.eval()
    x = torch.tensor([tok.encode(w + SEP) for w in words])  # (B, n + 1): equal lengths
    for _ in range(len(words[0])):
        nxt = model(x)[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        x = torch.cat([x, nxt], dim=1)
    model.train(was_training)
    return [tok.decode(row[len(words[0]) + 1 :]) for row in x.tolist()]


@dataclass
class Curve:
    """What a training run recorded: steps, training losses (the batch of that step), held-out
    accuracies and held-out losses (on every held-out example)."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    held_out_loss: list[float] = field(default_factory=list)


def fine_tune(
    model: nn.Module,
    steps: int = 300,
    batch: int = 32,
    lr: float = 3e-3,
    seed: int = 1,
    eval_every: int = 50,
    eval_examples: int = 256,
    callback: Callable[[int], None] | None = None,
    progress: bool = False,
    task: str = "reverse",
) -> Curve:
    """Adam on the trainable parameters of ``model`` for the reversal task; returns the curve.

    Step ``s`` trains on ``reverse_examples(batch, seed=1_000_000 * seed + s)``; the accuracy is
    measured on ``eval_examples`` held-out examples (seed :data:`HELD_OUT_SEED`) at step 0, every
    ``eval_every`` steps and at the end, with the answer loss on the same examples (the training
    loss recorded beside it is that of one batch, noisier). ``progress`` shows a progress bar. ``task="copy"``
    trains and evaluates on the copy task instead (same words).
    """
    task = _check_task(task)
    steps = check_int(steps, "steps", low=1)
    batch = check_int(batch, "batch", low=1)
    eval_every = check_int(eval_every, "eval_every", low=1)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    opt = torch.optim.Adam(params, lr=lr)
    held_out = reverse_examples(eval_examples, seed=HELD_OUT_SEED, task=task)
    acc, held_loss = _evaluate(model, held_out)
    curve = Curve([0], [float("nan")], [acc], [held_loss])
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc="fine-tuning", leave=False)
    model.train()
    for step in range(1, steps + 1):
        x = reverse_examples(batch, seed=1_000_000 * seed + step, task=task)
        loss = answer_loss(model, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % eval_every == 0 or step == steps:
            curve.steps.append(step)
            curve.loss.append(loss.item())
            acc, held_loss = _evaluate(model, held_out)
            curve.accuracy.append(acc)
            curve.held_out_loss.append(held_loss)
        if bar is not None:
            bar.update(1)
        if callback is not None:
            callback(step)
    if bar is not None:
        bar.close()
    model.eval()
    return curve


def training_step(model: nn.Module, batch: int = 32, seed: int = 7) -> Callable[[], None]:
    """One Adam step of ``model`` on a fixed batch, as a function of no arguments (for timing).

    It trains ``model`` itself; pass a copy to leave the original unchanged.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-4)
    x = reverse_examples(batch, seed=seed)

    def step() -> None:
        loss = answer_loss(model, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step.optimizer = opt  # type: ignore[attr-defined]
    return step


def measure_step(
    model: nn.Module, batch: int = 32, seed: int = 7, repeats: int = 3
) -> dict[str, float]:
    """Time and memory of one Adam step on a copy of ``model`` (the model itself is not changed).

    Returns seconds per step (best of ``repeats``, :func:`course_lib.measure.best_time`), the
    bytes of frozen weights, trained weights, gradients and optimiser state after the step
    (:func:`course_lib.peft.counting.measured_memory`), and the peak bytes of the tensors a step
    creates (:func:`course_lib.measure.peak_tensor_memory`: activations and temporaries).
    """
    import copy

    from course_lib.measure import best_time, peak_tensor_memory
    from course_lib.peft.counting import measured_memory

    model = copy.deepcopy(model).train()
    step = training_step(model, batch, seed)
    seconds = best_time(step, repeats=repeats, warmup=1)
    step.optimizer.zero_grad(set_to_none=True)
    peak = peak_tensor_memory(step)
    return {
        "seconds": seconds,
        "peak step bytes": float(peak),
        **measured_memory(model, step.optimizer),
    }
