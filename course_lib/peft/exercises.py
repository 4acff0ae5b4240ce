"""Exercise checkers of Chapter 13: ``from course_lib.peft import exercises as check``.

Each checker runs the learner's function on named cases (:func:`course_lib.checker.check_cases`)
and says in plain words what is wrong, naming known mistakes (:func:`course_lib.checker.first_mistake`).
Every case has ``alpha != r``: a missing or inverted scale shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from course_lib.checker import (
    Outcome,
    check_cases,
    diagnose,
    diagnose_number,
    first_mistake,
    seeded,
)
from course_lib.peft import reference as ref

__all__ = ["count_lora", "lora_linear", "merge", "unmerge"]

#: Seed of this chapter's checker inputs.
SEED = 13


def _factors(rng: np.random.Generator, d: int, k: int, r: int) -> tuple[np.ndarray, ...]:
    return rng.standard_normal((d, k)), rng.standard_normal((r, k)), rng.standard_normal((d, r))


def _scale_mistakes(compute: Callable[[float], np.ndarray], alpha: float, r: int) -> list:
    """Wrong answers made with another scale than alpha / r, most telling first."""
    wrong = [
        (1.0, "the update is not scaled: multiply B A (or (x A^T) B^T) by alpha / r"),
        (float(alpha), "the update is scaled by alpha, not alpha / r"),
        (r / alpha, "the scale is inverted: it is alpha / r, not r / alpha"),
        (0.0, "the LoRA update is missing: you return the frozen layer only"),
    ]
    return [(compute(s), hint) for s, hint in wrong if not np.isclose(s, alpha / r)]


def _compare(got: Any, expected: tuple[np.ndarray, list]) -> str | None:
    """A named mistake if ``got`` equals one, else what differs from the right answer."""
    want, wrong = expected
    return first_mistake(got, wrong) or diagnose(got, want)


def lora_linear(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(x, W, A, B, alpha)`` returns ``x W^T + (alpha / r) (x A^T) B^T``.

    >>> lora_linear(lambda x, W, A, B, a: ref.lora_linear(x, W, A, B, a)).passed
    True
    >>> print(lora_linear(lambda x, W, A, B, a: x @ W.T + (x @ A.T) @ B.T))
    ❌ Not yet: a LoRA linear layer
       - on 3 inputs, W (5, 4), r = 2, alpha = 6: the update is not scaled: multiply B A (or (x A^T) B^T) by alpha / r
    """
    rng = seeded(SEED)
    cases = []
    for n, d, k, r, alpha in [(3, 5, 4, 2, 6.0), (1, 2, 3, 1, 0.5), (6, 8, 8, 4, 16.0)]:
        x = rng.standard_normal((n, k))
        W, A, B = _factors(rng, d, k, r)
        want = ref.lora_linear(x, W, A, B, alpha)
        wrong = _scale_mistakes(lambda s: x @ W.T + s * (x @ A.T) @ B.T, alpha, r)  # noqa: B023
        cases.append(
            (
                f"{n} inputs, W ({d}, {k}), r = {r}, alpha = {alpha:g}",
                (x, W, A, B, alpha),
                (want, wrong),
            )
        )

    return check_cases("a LoRA linear layer", fn, cases, compare=_compare, require=require)


def merge(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(W, A, B, alpha)`` returns the merged weight ``W + (alpha / r) B A``.

    >>> merge(ref.lora_weight).passed
    True
    >>> print(merge(lambda W, A, B, alpha: W + B @ A))
    ❌ Not yet: merging a LoRA update into W
       - on W (5, 4), r = 2, alpha = 6: the update is not scaled: multiply B A (or (x A^T) B^T) by alpha / r
    """
    rng = seeded(SEED + 1)
    cases = []
    for d, k, r, alpha in [(5, 4, 2, 6.0), (3, 7, 1, 0.5), (8, 8, 8, 32.0)]:
        W, A, B = _factors(rng, d, k, r)
        want = ref.lora_weight(W, A, B, alpha)
        wrong = _scale_mistakes(lambda s: W + s * B @ A, alpha, r)  # noqa: B023
        cases.append((f"W ({d}, {k}), r = {r}, alpha = {alpha:g}", (W, A, B, alpha), (want, wrong)))

    return check_cases("merging a LoRA update into W", fn, cases, compare=_compare, require=require)


def unmerge(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(W_merged, A, B, alpha)`` returns the frozen weight the update was merged into.

    >>> unmerge(lambda Wm, A, B, alpha: Wm - (alpha / A.shape[0]) * B @ A).passed
    True
    >>> print(unmerge(lambda Wm, A, B, alpha: Wm + (alpha / A.shape[0]) * B @ A))
    ❌ Not yet: unmerging a LoRA update
       - on W (5, 4), r = 2, alpha = 6: you added the update a second time: unmerging subtracts (alpha / r) B A
    """
    rng = seeded(SEED + 2)
    cases = []
    for d, k, r, alpha in [(5, 4, 2, 6.0), (3, 7, 1, 0.5)]:
        W, A, B = _factors(rng, d, k, r)
        Wm, s = ref.lora_weight(W, A, B, alpha), alpha / r
        wrong = [
            (
                Wm + s * B @ A,
                "you added the update a second time: unmerging subtracts (alpha / r) B A",
            ),
            (Wm - B @ A, "the update is not scaled: subtract (alpha / r) B A"),
            (Wm, "you returned the merged weight unchanged"),
        ]
        cases.append((f"W ({d}, {k}), r = {r}, alpha = {alpha:g}", (Wm, A, B, alpha), (W, wrong)))

    return check_cases("unmerging a LoRA update", fn, cases, compare=_compare, require=require)


def count_lora(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(d, k, r, n_layers)``: trainable numbers of LoRA on one (d, k) matrix per layer.

    >>> count_lora(lambda d, k, r, n: n * r * (d + k)).passed
    True
    >>> print(count_lora(lambda d, k, r, n: r * (d + k)))
    ❌ Not yet: counting LoRA's trainable parameters
       - on GPT-2 small's c_attn (2304 x 768), r = 8, 12 layers: you return 24576, the right value is 294912: count every layer: each has its own A and B
    """
    cases = []
    for what, (d, k, r, n) in [
        ("GPT-2 small's c_attn (2304 x 768), r = 8, 12 layers", (2304, 768, 8, 12)),
        ("a (64, 16) matrix, r = 1, 1 layer", (64, 16, 1, 1)),
        ("a square (4096, 4096) matrix, r = 16, 32 layers", (4096, 4096, 16, 32)),
    ]:
        wrong = {
            "count every layer: each has its own A and B": r * (d + k),
            "that is the size of the full update B A (d k), not of its factors": n * d * k,
            "A is (r, k) and B is (d, r): together r (d + k), not r d k": n * r * d * k,
            "A and B are different shapes: r k + d r, not 2 r d": n * 2 * r * d,
        }
        cases.append((what, (d, k, r, n), (n * r * (d + k), wrong)))
    return check_cases(
        "counting LoRA's trainable parameters",
        fn,
        cases,
        compare=lambda got, e: diagnose_number(got, e[0], e[1]),
        require=require,
    )
