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

from course_lib.checker import Outcome, check_cases, diagnose, first_mistake, guarded, seeded
from course_lib.feedback import accelerated as acc
from course_lib.feedback import ppo

__all__ = ["loo_advantages", "masked_gae"]

#: Seed of this chapter's checker inputs.
SEED = 10


def _with_hints(hints: Callable[[tuple[Any, ...]], list[tuple[Any, str]]]) -> Callable:
    def compare(got: Any, case: tuple[tuple[Any, ...], Any]) -> str | None:
        args, want = case
        problem = diagnose(got, want, rtol=1e-5, atol=1e-6)
        if problem is None:
            return None
        hint = first_mistake(got, hints(args), rtol=1e-5, atol=1e-6)
        return f"{hint} ({problem})" if hint else problem

    return compare


@guarded
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


def _gae_loop(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float,
    lam: float,
    *,
    mask_next_value: bool,
    reset_running: bool,
) -> torch.Tensor:
    """The exercise's backward loop with either half of the fix switched on or off."""
    n = rewards.shape[-1]
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(n)):
        nxt = values[..., t + 1] if t + 1 < n else torch.zeros_like(values[..., 0])
        if mask_next_value and t + 1 < n:
            nxt = nxt * mask[..., t + 1]
        delta = rewards[..., t] + gamma * nxt - values[..., t]
        running = delta + gamma * lam * running
        if reset_running:
            running = running * mask[..., t]
        out[..., t] = running * mask[..., t]
    return out


@guarded
def masked_gae(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(rewards, values, mask, gamma, lam)``: GAE advantages (B, T) of answers padded after
    their last token (``mask`` 1 on each answer's tokens, a prefix of the row), 0 at the padding.

    The answer ends at its last token: the value after it is 0 and nothing after it flows back.
    Compared with :func:`course_lib.feedback.ppo.advantages_and_returns` (not whitened).

    >>> def right(rewards, values, mask, gamma, lam):
    ...     return ppo.advantages_and_returns(rewards, values, mask, gamma, lam, False)[0]
    >>> masked_gae(right).passed
    True
    >>> def unmasked_values(rewards, values, mask, gamma, lam):
    ...     return _gae_loop(rewards, values, mask, gamma, lam, mask_next_value=False,
    ...                      reset_running=False)
    >>> "padding" in str(masked_gae(unmasked_values))
    True
    """
    g = torch.Generator().manual_seed(SEED)
    dt = torch.float64
    full = torch.ones(2, 5, dtype=dt)
    lengths = torch.tensor([2, 5, 3])
    mask = (torch.arange(5) < lengths[:, None]).to(dt)  # (3, 5)
    mask2 = (torch.arange(6) < torch.tensor([1, 4])[:, None]).to(dt)  # (2, 6)
    inputs = [
        (
            "two answers that fill the whole row",
            (torch.randn(2, 5, generator=g, dtype=dt), torch.randn(2, 5, generator=g, dtype=dt),
             full, 1.0, 0.95),
        ),
        (
            "three answers of 2, 5 and 3 tokens (gamma 1, lam 0.95), values not 0 at the padding",
            (torch.randn(3, 5, generator=g, dtype=dt) * mask,
             torch.randn(3, 5, generator=g, dtype=dt), mask, 1.0, 0.95),
        ),
        (
            "two answers of 1 and 4 tokens, gamma 0.9, lam 0.8",
            (torch.randn(2, 6, generator=g, dtype=dt) * mask2,
             torch.randn(2, 6, generator=g, dtype=dt), mask2, 0.9, 0.8),
        ),
    ]  # fmt: skip

    def want(args: tuple[Any, ...]) -> torch.Tensor:
        r, v, m, gamma, lam = args
        return ppo.advantages_and_returns(r, v, m, gamma, lam, normalise=False)[0]

    cases = [
        (name, tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args),
         (args, want(args)))
        for name, args in inputs
    ]  # fmt: skip

    def compare(got: Any, case: tuple[tuple[Any, ...], Any]) -> str | None:
        args, expected = case
        problem = diagnose(got, expected, rtol=1e-5, atol=1e-6)
        if problem is None:
            return None
        r, v, m, gamma, lam = args

        def loop(**kw: bool) -> torch.Tensor:
            return _gae_loop(r, v, m, gamma, lam, **kw)

        mistakes = [
            (loop(mask_next_value=False, reset_running=False),
             "short answers still see the padding after their last token: the answer ends there, "
             "so the value after it is 0 and nothing after it may flow back into the running sum"),
            (loop(mask_next_value=True, reset_running=False),
             "the last token no longer adds gamma V of the padding, but the running sum still "
             "carries the padding positions' TD errors back into the answer: reset it to 0 there"),
            (loop(mask_next_value=False, reset_running=True),
             "the running sum no longer carries the padding, but the last token's TD error still "
             "adds gamma times the value at the padding position after it: that value must be 0"),
            (ppo.advantages_and_returns(r, v, m, gamma, 0.0, normalise=False)[0],
             "these are the one-step TD errors (lam = 0): the running sum needs gamma * lam "
             "times the next advantage"),
            (acc.gae(r * m, v * m, gamma, 1.0) * m,
             "the running sum is multiplied by gamma only: GAE discounts by gamma * lam"),
        ]  # fmt: skip
        hint = first_mistake(got, mistakes, rtol=1e-5, atol=1e-6)
        return f"{hint} ({problem})" if hint else problem

    return check_cases(
        "GAE over answers of different lengths", fn, cases, compare=compare, require=require
    )
