"""Exercise checkers of Chapter 10: ``from course_lib.feedback import exercises as check``.

Each checker runs the learner's function on inputs the learner did not choose, compares it with
the library (:mod:`course_lib.feedback.ppo`) and says in plain words what is wrong, naming known
mistakes (:func:`course_lib.checker.first_mistake`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from course_lib.checker import Outcome, check_cases, diagnose, first_mistake, seeded
from course_lib.feedback import ppo

__all__ = ["loo_advantages", "per_token_rewards"]

#: Seed of this chapter's checker inputs.
SEED = 10


def _with_hints(hints: Callable[[tuple[Any, ...]], list[tuple[Any, str]]]) -> Callable:
    def compare(got: Any, case: tuple[tuple[Any, ...], Any]) -> str | None:
        args, want = case
        problem = diagnose(got, want, rtol=1e-5, atol=1e-6)
        if problem is None:
            return None
        hint = first_mistake(got, hints(args), rtol=1e-5, atol=1e-6)
        return f"{problem} ({hint})" if hint else problem

    return compare


def loo_advantages(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(total)``: leave-one-out advantages of a (prompts, k) NumPy array of total rewards.

    >>> loo_advantages(lambda t: ppo.loo_advantages(torch.as_tensor(t)).numpy()).passed
    True
    >>> out = loo_advantages(lambda t: t - t.mean(axis=1, keepdims=True))
    >>> "your own answer" in str(out)
    True
    """
    rng = seeded(SEED)
    inputs = [
        ("three prompts, four answers each (0/1 rewards)", rng.integers(0, 2, (3, 4)) * 1.0),
        ("two prompts, five answers, real-valued totals", rng.standard_normal((2, 5))),
        ("one prompt, two answers", np.array([[1.0, 0.0]])),
    ]

    def want(t: np.ndarray) -> np.ndarray:
        return ppo.loo_advantages(torch.as_tensor(t)).numpy()

    cases = [(name, (t.copy(),), ((t,), want(t))) for name, t in inputs]

    def hints(args: tuple[Any, ...]) -> list[tuple[Any, str]]:
        (t,) = args
        k = t.shape[1]
        others = t.sum(1, keepdims=True) - t
        return [
            (
                t - t.mean(1, keepdims=True),
                "the baseline includes your own answer: average the *other* k - 1 answers",
            ),
            (t - others / k, "divide the others' sum by k - 1, the number of other answers"),
            (t - t.mean(), "the baseline must be per prompt (per row), not over the whole batch"),
            (others / (k - 1) - t, "the sign is flipped: total minus baseline"),
            (-others / (k - 1), "you dropped the answer's own total: total minus baseline"),
        ]

    return check_cases(
        "leave-one-out advantages", fn, cases, compare=_with_hints(hints), require=require
    )


def per_token_rewards(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(score, logp, logp_ref, mask, beta)``: InstructGPT's per-token rewards, (B, T) tensors.

    >>> per_token_rewards(ppo.per_token_rewards).passed
    True
    >>> def padded(score, logp, logp_ref, mask, beta):
    ...     r = -beta * (logp - logp_ref) * mask
    ...     r[:, -1] += score
    ...     return r
    >>> "padding" in str(per_token_rewards(padded))
    True
    """
    g = torch.Generator().manual_seed(SEED)
    lengths = torch.tensor([2, 6, 4])
    mask = (torch.arange(6) < lengths[:, None]).float()  # (3, 6)
    logp, logp_ref = -torch.rand(2, 3, 6, generator=g, dtype=torch.float64)
    score = torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64)
    full = torch.ones(2, 6)
    inputs = [
        ("two answers that fill the whole row", (score[:2], logp[:2], logp_ref[:2], full, 0.1)),
        ("three answers of 2, 6 and 4 tokens, beta 0.2", (score, logp, logp_ref, mask, 0.2)),
    ]

    def run(args: tuple[Any, ...]) -> torch.Tensor:
        s, lp, lr, m, b = args
        return ppo.per_token_rewards(s, lp, lr, m, b)

    cases = [
        (
            name,
            tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args),
            (args, run(args)),
        )
        for name, args in inputs
    ]

    def hints(args: tuple[Any, ...]) -> list[tuple[Any, str]]:
        s, lp, lr, m, b = args
        kl = -b * (lp - lr)
        rows = torch.arange(len(s))
        last = m.sum(-1).long() - 1
        at_pad = kl * m
        at_pad[:, -1] += s
        at_first = kl * m
        at_first[:, 0] += s
        unmasked = kl.clone()
        unmasked[rows, last] += s
        flipped = -kl * m
        flipped[rows, last] += s
        everywhere = (kl + s[:, None]) * m
        return [
            (at_pad, "the score landed in the last column, a padding position after the full "
                     "stop in short answers: put it at each answer's own last token"),
            (at_first, "the score must arrive at the answer's last token, not its first"),
            (unmasked, "padding positions pay a KL penalty: multiply the KL term by the mask"),
            (flipped, "the KL term has the wrong sign: it is -beta (log pi - log pi_ref)"),
            (everywhere, "the score is paid once per answer, not at every token"),
        ]  # fmt: skip

    return check_cases("per-token rewards", fn, cases, compare=_with_hints(hints), require=require)
