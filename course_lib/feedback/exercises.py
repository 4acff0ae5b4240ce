"""Exercise checkers of Chapter 10: ``from course_lib.feedback import exercises as check``.

Each checker runs the learner's function on named cases (:func:`course_lib.checker.check_cases`)
and says in plain words what is wrong, naming known mistakes (:func:`course_lib.checker.first_mistake`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from course_lib.checker import Outcome, check_cases, diagnose, first_mistake, seeded
from course_lib.feedback import reference as ref

__all__ = ["masked_nll", "pairwise_loss", "ppo_clip_objective"]

#: Seed of this chapter's checker inputs.
SEED = 10


def _with_hints(hints: Callable[[tuple[Any, ...]], list[tuple[Any, str]]]) -> Callable:
    def compare(got: Any, case: tuple[tuple[Any, ...], Any]) -> str | None:
        args, want = case
        problem = diagnose(got, want)
        if problem is None:
            return None
        hint = first_mistake(got, hints(args))
        return f"{problem} ({hint})" if hint else problem

    return compare


def _cases(name_args: list[tuple[str, tuple[Any, ...]]], fn: Callable) -> list:
    return [(name, args, (args, fn(*args))) for name, args in name_args]


def masked_nll(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(logits, targets, mask)``: the mean NLL over the positions where ``mask`` is 1.

    >>> masked_nll(lambda z, t, m: ref.masked_nll(z, t, m)).passed
    True
    >>> "prompt" in str(masked_nll(lambda z, t, m: ref.masked_nll(z, t, np.ones_like(m))))
    True
    """
    rng = seeded(SEED)
    z = rng.standard_normal((2, 5, 4))
    t = rng.integers(0, 4, size=(2, 5))
    m = np.array([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]], dtype=float)
    cases = _cases(
        [("one sequence", (z[0], t[0], m[0])), ("a batch of two", (z, t, m))], ref.masked_nll
    )

    def hints(args: tuple[Any, ...]) -> list[tuple[Any, str]]:
        zz, tt, mm = args
        lp = ref.token_logprobs(zz, tt)
        return [
            (
                ref.masked_nll(zz, tt, np.ones_like(mm)),
                "you averaged over every token: mask out the prompt",
            ),
            (
                -(lp * mm).sum() / mm.size,
                "divide by the number of response tokens, not by all tokens",
            ),
            (-(lp * mm).sum(), "you summed: divide by the number of response tokens"),
            (
                ref.masked_nll(zz, tt, 1 - mm),
                "the mask is inverted: you trained on the prompt only",
            ),
        ]

    return check_cases(
        "the SFT loss masked to the response",
        fn,
        cases,
        compare=_with_hints(hints),
        require=require,
    )


def pairwise_loss(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(r_chosen, r_rejected)``: the mean of ``-log sigmoid(r_chosen - r_rejected)``.

    >>> pairwise_loss(ref.pairwise_loss).passed
    True
    >>> "swapped" in str(pairwise_loss(lambda a, b: ref.pairwise_loss(b, a)))
    True
    """
    rng = seeded(SEED + 1)
    big = np.array([400.0, -400.0, 0.0])
    cases = _cases(
        [
            ("six comparisons", (rng.standard_normal(6), rng.standard_normal(6))),
            ("reward gaps of +-800 (use a form that cannot overflow)", (big, -big)),
        ],
        ref.pairwise_loss,
    )

    def hints(args: tuple[Any, ...]) -> list[tuple[Any, str]]:
        a, b = args
        return [
            (ref.pairwise_loss(b, a), "chosen and rejected are swapped"),
            (np.sum(np.logaddexp(0, -(a - b))), "you summed the comparisons: take the mean"),
            (np.mean(np.logaddexp(0, a - b)), "the sign inside the sigmoid is wrong"),
        ]

    return check_cases(
        "the reward model's pairwise loss", fn, cases, compare=_with_hints(hints), require=require
    )


def ppo_clip_objective(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(logp_new, logp_old, advantages, clip)``: PPO's per-token clipped surrogate.

    >>> ppo_clip_objective(ref.ppo_clip_objective).passed
    True
    """
    lo = np.log(np.full(6, 0.5))
    ln = np.log(np.array([0.3, 0.45, 0.5, 0.55, 0.7, 0.9]))
    adv_pos, adv_neg = np.ones(6), -np.ones(6)
    cases = _cases(
        [
            ("positive advantages", (ln, lo, adv_pos, 0.2)),
            ("negative advantages", (ln, lo, adv_neg, 0.2)),
            ("mixed advantages, clip 0.1", (ln, lo, np.array([2.0, -1, 0.5, -0.5, 1, -2]), 0.1)),
        ],
        ref.ppo_clip_objective,
    )

    def hints(args: tuple[Any, ...]) -> list[tuple[Any, str]]:
        n, o, a, c = args
        rho = np.exp(n - o)
        return [
            (rho * a, "nothing is clipped: take min(rho A, clip(rho) A)"),
            (np.clip(rho, 1 - c, 1 + c) * a, "take the min of the clipped and unclipped terms"),
            (
                np.maximum(rho * a, np.clip(rho, 1 - c, 1 + c) * a),
                "min, not max: the bound is pessimistic",
            ),
            (np.exp(o - n) * a, "the ratio is upside down: exp(logp_new - logp_old)"),
        ]

    return check_cases(
        "PPO's clipped objective", fn, cases, compare=_with_hints(hints), require=require
    )
