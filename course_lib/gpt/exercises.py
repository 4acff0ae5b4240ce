"""Exercise checkers of Chapter 8: ``from course_lib.gpt import exercises as check``.

Each checker runs the learner's function on named cases (:func:`course_lib.checker.check_cases`)
and says in plain words what is wrong, naming known mistakes.

>>> import course_lib.gpt.reference as ref
>>> causal_lm_loss(lambda logits, tokens: ref.causal_lm_loss(logits, tokens)).passed
True
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from course_lib.checker import Outcome, check_cases, diagnose, diagnose_number, seeded, to_array
from course_lib.gpt import reference as ref

__all__ = ["causal_lm_loss", "last_token_state", "learning_rate"]

#: Seed of this chapter's checker inputs.
SEED = 8


def _log_softmax(x: np.ndarray) -> np.ndarray:
    z = x - x.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


# ------------------------------------------------------------------------- the causal LM loss
def causal_lm_loss(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(logits, tokens)`` is eq. (20) as a mean loss; logits (B, L, V), tokens (B, L)."""
    rng = seeded(SEED)
    cases = []
    for desc, (B, L, V) in (("one sequence of 4 tokens, V = 3", (1, 4, 3)),
                             ("a batch (3, 6) with V = 5", (3, 6, 5))):  # fmt: skip
        logits, tokens = 2 * rng.standard_normal((B, L, V)), rng.integers(0, V, (B, L))
        cases.append((desc, (logits, tokens), (logits, tokens)))

    def compare(got: object, case: tuple) -> str | None:
        logits, tokens = case
        want = float(ref.causal_lm_loss(logits, tokens))
        lp = _log_softmax(logits)
        pick = lambda lp_, t: np.take_along_axis(lp_, t[..., None], -1)[..., 0]  # noqa: E731
        mistakes = {
            "no shift: position i must predict token i+1, not its own token i (compare "
            "logits[:, :-1] with tokens[:, 1:])": -pick(lp, tokens).mean(),
            "shifted the wrong way: logits[:, 1:] must not be compared with tokens[:, :-1]; "
            "position i predicts token i+1": -pick(lp[:, 1:], tokens[:, :-1]).mean(),
            "you summed the log-probabilities: average them over the predictions": -pick(
                lp[:, :-1], tokens[:, 1:]
            ).sum(),
            "the sign is flipped: the loss is minus the log-likelihood": pick(
                lp[:, :-1], tokens[:, 1:]
            ).mean(),
        }
        arr = to_array(got)
        if arr is None or arr.size != 1:
            return diagnose(got, np.asarray(want))
        return diagnose_number(float(arr.ravel()[0]), want, mistakes)

    return check_cases(
        "the causal language-model loss", fn, cases, compare=compare, require=require
    )


# ------------------------------------------------------------------------- the schedule
def learning_rate(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(step, lr, min_lr, warmup, decay)``: linear warm-up, then cosine to min_lr."""

    def want(step: int, lr: float, min_lr: float, warmup: int, decay: int) -> float:
        if step < warmup:
            return lr * (step + 1) / warmup
        if step >= decay:
            return min_lr
        progress = (step - warmup) / (decay - warmup)
        return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (lr - min_lr)

    args = [(0, 1e-3, 1e-4, 100, 2000), (49, 1e-3, 1e-4, 100, 2000), (100, 1e-3, 1e-4, 100, 2000),
            (1050, 1e-3, 1e-4, 100, 2000), (1500, 1e-3, 1e-4, 100, 2000),
            (2000, 1e-3, 1e-4, 100, 2000), (3000, 1e-3, 1e-4, 100, 2000)]  # fmt: skip
    cases = [(f"step {a[0]} (warm-up 100, decay to step 2000)", a, a) for a in args]

    def compare(got: object, a: tuple) -> str | None:
        step, lr, min_lr, warmup, decay = a
        w = want(*a)
        mistakes = {}
        if step < warmup:
            mistakes[
                "the warm-up is off by one: step 0 must already take a small step, lr * (step + 1) / warmup"
            ] = lr * step / warmup
        elif step < decay:
            p = (step - warmup) / (decay - warmup)
            mistakes[
                "the cosine must end at min_lr, not at 0: min_lr + (lr - min_lr) * (1 + cos(pi p)) / 2"
            ] = 0.5 * (1 + math.cos(math.pi * p)) * lr
            mistakes[
                "measure the cosine's progress from the end of the warm-up: (step - warmup) / (decay - warmup)"
            ] = min_lr + 0.5 * (1 + math.cos(math.pi * step / decay)) * (lr - min_lr)
        else:
            mistakes["after decay_steps the rate stays at min_lr"] = (
                0.5 * (1 + math.cos(math.pi * (step - warmup) / (decay - warmup))) * (lr - min_lr)
                + min_lr
            )
        arr = to_array(got)
        if arr is None or arr.size != 1:
            return diagnose(got, np.asarray(w))
        return diagnose_number(float(arr.ravel()[0]), w, mistakes)

    return check_cases("warm-up and cosine decay", fn, cases, compare=compare, require=require)


# ------------------------------------------------------------------------- eq. (23)'s h^m
def last_token_state(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(hidden, lengths)`` picks ``h^m``, the state at each sequence's last real token.

    hidden (B, L, d) comes from right-padded sequences; ``lengths`` (B,) are their real lengths.
    """
    rng = seeded(SEED + 1)
    h1 = rng.standard_normal((3, 5, 4))
    cases = [
        (
            "three sequences of lengths 5, 2, 3 padded to 5",
            (h1, np.array([5, 2, 3])),
            (h1, [5, 2, 3]),
        ),
        ("one sequence with no padding", (h1[:1], np.array([5])), (h1[:1], [5])),
    ]

    def compare(got: object, case: tuple) -> str | None:
        h, lengths = case
        n = np.asarray(lengths)
        expected = h[np.arange(len(n)), n - 1]
        if got is not None and (arr := to_array(got)) is not None and arr.shape == expected.shape:
            if not np.allclose(arr, expected):
                if np.allclose(arr, h[:, -1]):
                    return ("you read the last position, L-1: for a padded sequence that is a "
                            "padding token; read position lengths[b] - 1")  # fmt: skip
                if np.all(n < h.shape[1]) and np.allclose(arr, h[np.arange(len(n)), n]):
                    return "off by one: the last real token is at index lengths[b] - 1"
        return diagnose(got, expected)

    return check_cases("the classifier's input h^m", fn, cases, compare=compare, require=require)
