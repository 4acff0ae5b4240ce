"""Exercise checkers of Chapter 13: ``from course_lib.peft import exercises as check``.

Each checker runs the learner's function on inputs it draws itself (:func:`course_lib.checker.
check_cases`), compares with the library (:mod:`course_lib.peft.reference`,
:mod:`course_lib.peft.counting`, :mod:`course_lib.peft.spectrum`) and names known mistakes
(:func:`course_lib.checker.first_mistake`, :func:`course_lib.checker.diagnose_number`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from course_lib.checker import (
    Outcome,
    check_cases,
    diagnose,
    first_mistake,
    seeded,
    to_array,
)
from course_lib.peft import reference as ref
from course_lib.peft.counting import NF4_DQ_BITS, qlora_budget  # noqa: F401 (doctest)
from course_lib.peft.spectrum import top_r_energy as _energy

__all__ = [
    "ALPHA_RATIO_EXPLANATION",
    "dora_weight",
    "lora_merge",
    "prefix_attention",
    "prefix_share",
    "qlora_gb",
    "top_r_energy",
    "written_code_explanation",
]

#: Seed of this chapter's checker inputs.
SEED = 13


def _attend(q, k, v, pk, pv, *, order="prefix first", offset=None, scale=True, causal=True):
    """Prefix attention with one thing changed (to make the named wrong answers)."""
    lead = q.shape[:-2]
    T, dk = q.shape[-2:]
    P = pk.shape[-2]
    pk, pv = np.broadcast_to(pk, (*lead, P, dk)), np.broadcast_to(pv, (*lead, P, dk))
    if order == "prefix first":
        keys, vals = np.concatenate([pk, k], -2), np.concatenate([pv, v], -2)
        sees = np.tril(np.ones((T, P + T), bool), k=P if offset is None else offset)
    else:  # the prefix after the tokens, the mask as if it came first
        keys, vals = np.concatenate([k, pk], -2), np.concatenate([v, pv], -2)
        sees = np.tril(np.ones((T, P + T), bool), k=P)
    if not causal:
        sees = np.ones_like(sees)
    s = q @ np.swapaxes(keys, -1, -2) / (np.sqrt(dk) if scale else 1.0)
    s = np.where(sees, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ vals


def prefix_attention(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(q, k, v, pk, pv)``: causal attention of the tokens with a trained prefix in front.

    ``q``, ``k``, ``v`` are (B, h, T, d_head), ``pk``, ``pv`` (h, P, d_head); the answer is
    (B, h, T, d_head), as :func:`course_lib.peft.reference.prefix_attention`.

    >>> prefix_attention(ref.prefix_attention).passed
    True
    >>> print(prefix_attention(lambda q, k, v, pk, pv: _attend(q, k, v, pk, pv, offset=0)))
    ❌ Not yet: attention with a trained prefix
       - on B = 2, h = 2, T = 5 tokens, P = 3 prefix positions, d_head = 4: token i sees only the first i + 1 of the P + T keys: the causal mask covers the prefix too; shift it by P (tril with diagonal P) so that every token sees the whole prefix
    """
    rng = seeded(SEED)
    cases = []
    for B, h, T, P, dk in [(2, 2, 5, 3, 4), (1, 3, 4, 1, 2), (3, 1, 6, 4, 8)]:
        q, k, v = (rng.standard_normal((B, h, T, dk)) for _ in range(3))
        pk, pv = rng.standard_normal((h, P, dk)), rng.standard_normal((h, P, dk))
        args = (q, k, v, pk, pv)
        wrong = [
            (
                _attend(*args, offset=0),
                "token i sees only the first i + 1 of the P + T keys: the causal mask covers the "
                "prefix too; shift it by P (tril with diagonal P) so that every token sees the "
                "whole prefix",
            ),
            (
                _attend(*args, offset=P - 1),
                "a token does not see itself: the mask stops one column short (tril with "
                "diagonal P - 1 instead of P)",
            ),
            (
                _attend(*args, order="tokens first"),
                "the prefix is placed after the tokens: prepend it (concatenate [pk, k] and "
                "[pv, v]), so that the mask's first P columns are the prefix",
            ),
            (_attend(*args, scale=False), "the scores are not divided by sqrt(d_head)"),
            (
                _attend(*args, causal=False),
                "no causal mask: a token sees the tokens after it",
            ),
            (
                _attend(q, k, v, pk[:, :0], pv[:, :0]),
                "the prefix is ignored: this is plain causal attention over the tokens",
            ),
        ]
        what = f"B = {B}, h = {h}, T = {T} tokens, P = {P} prefix positions, d_head = {dk}"
        cases.append((what, args, (ref.prefix_attention(*args), wrong)))

    def compare(got: Any, expected: tuple[np.ndarray, list]) -> str | None:
        want, wrong = expected
        return first_mistake(got, wrong) or diagnose(got, want)

    return check_cases(
        "attention with a trained prefix", fn, cases, compare=compare, require=require
    )


#: How far a QLoRA budget may be from the exact value: answers rounded to 0.01 GB pass.
GB_TOLERANCE = 0.006
#: How far a share of energy may be off: answers rounded to 3 decimals pass.
SHARE_TOLERANCE = 5e-4

#: LLaMA-7B and LLaMA-65B: parameters, width, feed-forward width, layers.
LLAMA = {
    "LLaMA-7B": (6_738_415_616, 4096, 11008, 32),
    "LLaMA-65B": (65_285_660_672, 8192, 22016, 80),
}


def qlora_gb(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(n_params, d, d_ff, n_layers, r)``: QLoRA's memory in GB (1e9 bytes), no activations.

    Frozen weights in NF4 with double quantisation; LoRA of rank r on the seven matrices of every
    LLaMA block, 16 bytes per trained number (:func:`course_lib.peft.counting.qlora_budget`).

    >>> qlora_gb(lambda n, d, f, L, r: sum(v for k, v in qlora_budget(n, d, f, L, r).items()
    ...                                    if k != "trained") / 1e9).passed
    True
    >>> print(qlora_gb(lambda n, d, f, L, r: n * 4 / 8 / 1e9 + 16 * L * r * (11 * d + 3 * f) / 1e9))
    ❌ Not yet: QLoRA's memory budget
       - on LLaMA-7B, r = 64: you return 5.92773, the right value is 6.03467: 4 bits per weight leaves out the block scales: NF4 with double quantisation costs 4 + 8/64 + 32/(64 * 256) bits
    """
    cases = []
    for name, (n, d, f, L) in LLAMA.items():
        for r in (64, 8):
            lora = L * r * (8 * d + 3 * (d + f))
            right = (n * NF4_DQ_BITS / 8 + 16 * lora) / 1e9
            adapters = 16 * lora / 1e9
            frozen = n * NF4_DQ_BITS / 8 / 1e9
            wrong = {
                "4 bits per weight leaves out the block scales: NF4 with double quantisation "
                "costs 4 + 8/64 + 32/(64 * 256) bits": n * 4 / 8 / 1e9 + adapters,
                "4.5 bits per weight is NF4 with float32 scales: double quantisation stores "
                "them in 8 bits (4 + 8/64 + 32/(64 * 256) bits)": n * 4.5 / 8 / 1e9 + adapters,
                "the frozen weights are counted in 16 bits: QLoRA stores them in NF4": n * 2 / 1e9
                + adapters,
                "a trained number costs 16 bytes with Adam (weight, gradient, two moments), "
                "not 4": frozen + 4 * lora / 1e9,
                "a trained number costs 16 bytes with Adam, not 2": frozen + 2 * lora / 1e9,
                "LoRA is on all seven matrices of a block: the gate, up and down projections "
                "of the feed-forward too": frozen + 16 * L * r * 8 * d / 1e9,
                "a LLaMA block has three feed-forward matrices (gate, up, down), not two": frozen
                + 16 * L * r * (8 * d + 2 * (d + f)) / 1e9,
                "every layer has its own adapters: multiply by n_layers": frozen
                + 16 * lora / L / 1e9,
                "that is in bits or GiB, not GB (1e9 bytes)": right * 1e9 / 2**30,
            }
            cases.append((f"{name}, r = {r}", (n, d, f, L, r), (right, wrong)))
    return check_cases(
        "QLoRA's memory budget",
        fn,
        cases,
        compare=lambda got, e: diagnose_number_close(got, e[0], e[1], atol=GB_TOLERANCE),
        require=require,
    )


def _number(got: Any) -> float | str:
    """The learner's scalar as a float, or what is wrong with it (a message)."""
    if got is None:
        return "the function returned None: did you forget a `return` statement?"
    if isinstance(got, bool | str | bytes):
        return f"return a number, got {type(got).__name__} {got!r:.40}"
    arr = to_array(got)
    if arr is None or arr.size != 1:
        what = type(got).__name__ if arr is None else f"{arr.size} numbers"
        return f"return one number, got {what}"
    return float(arr.reshape(()))


def diagnose_number_close(
    got: Any, want: float, mistakes: dict[str, float], *, rtol: float = 1e-4, atol: float = 0.0
) -> str | None:
    """:func:`diagnose_number` with a tolerance (``rtol``, and ``atol`` for a rounded answer);
    a value within the tolerance of a known mistake is named."""
    value = _number(got)
    if isinstance(value, str):
        return value
    if not math.isfinite(value):
        return f"you return {value}, the right value is {want:.6g}"
    if math.isclose(value, want, rel_tol=rtol, abs_tol=atol):
        return None
    for hint, wrong in mistakes.items():
        if math.isclose(value, wrong, rel_tol=rtol, abs_tol=atol):
            return f"you return {value:.6g}, the right value is {want:.6g}: {hint}"
    return f"you return {value:.6g}, the right value is {want:.6g}"


def top_r_energy(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(delta, r)``: the share of ``||delta||_F^2`` in the r largest singular directions.

    >>> top_r_energy(_energy).passed
    True
    >>> print(top_r_energy(lambda D, r: np.linalg.svd(D)[1][:r].sum() / np.linalg.svd(D)[1].sum()))
    ❌ Not yet: the energy of the top r singular directions
       - on a (12, 8) matrix of rank 2 plus noise, r = 2: you return 0.823207, the right value is 0.985702: square the singular values: ||delta||_F^2 is the sum of their squares
    """
    rng = seeded(SEED + 1)
    cases = []
    for (d, k), rank, r in [((12, 8), 2, 2), ((6, 10), 3, 1), ((9, 9), 9, 4)]:
        delta = rng.standard_normal((d, rank)) @ rng.standard_normal((rank, k))
        delta += 0.3 * rng.standard_normal((d, k))
        s = np.linalg.svd(delta, compute_uv=False)
        wrong = {
            "square the singular values: ||delta||_F^2 is the sum of their squares": s[:r].sum()
            / s.sum(),
            "that counts r + 1 directions: the top r are s[:r]": (s[: r + 1] ** 2).sum()
            / (s**2).sum(),
            "divide by the sum of all squared singular values, not by the largest": (
                s[:r] ** 2
            ).sum()
            / s[0] ** 2,
            "that is the share of the other directions: take the top r": (s[r:] ** 2).sum()
            / (s**2).sum(),
        }
        what = f"a ({d}, {k}) matrix of rank {rank} plus noise, r = {r}"
        cases.append((what, (delta, r), (_energy(delta, r), wrong)))
    return check_cases(
        "the energy of the top r singular directions",
        fn,
        cases,
        compare=lambda got, e: diagnose_number_close(got, e[0], e[1], atol=SHARE_TOLERANCE),
        require=require,
    )


# ------------------------------------------------------------------ LoRA's merge (find the bug)
def _merge_cases() -> list[tuple[str, tuple, tuple]]:
    rng = seeded(SEED + 2)
    cases = []
    for (d, k), r, alpha in [((5, 7), 2, 16.0), ((4, 6), 3, 5.0), ((6, 5), 4, 3.0)]:
        W = rng.standard_normal((d, k))
        A, B = rng.standard_normal((r, k)), rng.standard_normal((d, r))
        BA = B @ A
        right = W + (alpha / r) * BA
        wrong = [
            (
                W + (alpha / k) * BA,
                "r is the number of rows of A, which is (r, k): dividing by "
                "A.shape[1] divides by k, the input width (a test with r = k cannot see it)",
            ),
            (
                W + BA,
                "the update is not scaled: merge W + (alpha / r) B A, not W + B A (the notes' "
                "formula, right only when alpha = r)",
            ),
            (W + (r / alpha) * BA, "the scale is upside down: alpha / r, not r / alpha"),
            (W + alpha * BA, "the scale is alpha / r: divide by the rank r too"),
            (W + BA / r, "the scale is alpha / r: multiply by alpha too"),
            (W + alpha / np.sqrt(r) * BA, "alpha / sqrt(r) is rsLoRA's scale; LoRA's is alpha / r"),
            (W - (alpha / r) * BA, "that subtracts the update (it unmerges): add it"),
            ((alpha / r) * BA, "that is the update alone: add W to it"),
        ]
        wrong = [(w, h) for w, h in wrong if not np.allclose(w, right)]
        what = f"W {d} x {k}, r = {r}, alpha = {alpha:g}"
        cases.append((what, (W, A, B, alpha), (right, wrong)))
    return cases


def lora_merge(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(W, A, B, alpha)``: the merged weight ``W + (alpha / r) B A`` (d, k), r = rows of A.

    >>> lora_merge(ref.lora_weight).passed
    True
    >>> print(lora_merge(lambda W, A, B, alpha: W + alpha / A.shape[1] * B @ A))
    ❌ Not yet: merging a LoRA update into W
       - on W 5 x 7, r = 2, alpha = 16: r is the number of rows of A, which is (r, k): dividing by A.shape[1] divides by k, the input width (a test with r = k cannot see it)
    """

    def compare(got: Any, expected: tuple[np.ndarray, list]) -> str | None:
        want, wrong = expected
        return first_mistake(got, wrong) or diagnose(got, want)

    return check_cases(
        "merging a LoRA update into W", fn, _merge_cases(), compare=compare, require=require
    )


# ------------------------------------------------------------------ DoRA (optional exercise)
def _dora_cases() -> list[tuple[str, tuple, tuple]]:
    rng = seeded(SEED + 3)
    cases = []
    for (d, k), r, alpha in [((5, 8), 2, 4.0), ((6, 3), 1, 2.0), ((4, 4), 3, 6.0)]:
        W, A, B = (
            rng.standard_normal((d, k)),
            rng.standard_normal((r, k)),
            rng.standard_normal((d, r)),
        )
        m = rng.uniform(0.5, 2.0, d)
        V = W + (alpha / r) * B @ A
        rows = np.linalg.norm(V, axis=1, keepdims=True)  # (d, 1)
        wrong = [
            (
                m[:, None] * V / np.linalg.norm(V, axis=0, keepdims=True),
                "the norms run over the wrong axis: one norm per output unit, the norm of each row of "
                "the (d_out, d_in) matrix (axis=1), not of each column",
            ),
            (
                m[:, None] * V / np.linalg.norm(W, axis=1, keepdims=True),
                "you divide by the norms of W: normalise the updated matrix V = W + (alpha / r) B A",
            ),
            (
                m[:, None] * (W + B @ A) / np.linalg.norm(W + B @ A, axis=1, keepdims=True),
                "the LoRA update is not scaled by alpha / r",
            ),
            (
                m[:, None] * V / np.linalg.norm(V),
                "one norm for the whole matrix: DoRA normalises every output unit (row) separately",
            ),
            (V / rows, "the lengths m are not applied: every row has length 1"),
            (m[:, None] * V, "V is not divided by its row norms"),
            (
                m[None, :k] * V / rows if k <= d else None,
                "m scales the columns: it holds one length per output unit, so it multiplies rows "
                "(m[:, None])",
            ),
        ]
        right = m[:, None] * V / rows
        wrong = [(w, h) for w, h in wrong if w is not None and not np.allclose(w, right)]
        what = f"W {d} x {k}, r = {r}, alpha = {alpha:g}"
        cases.append((what, (W, A, B, m, alpha), (right, wrong)))
    return cases


def dora_weight(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(W, A, B, m, alpha)``: DoRA's weight ``m * V / ||V||`` with ``V = W + (alpha / r) B A``,
    one norm per output unit (row of W); compared with :func:`course_lib.peft.reference.dora_weight`.

    >>> dora_weight(ref.dora_weight).passed
    True
    >>> print(dora_weight(lambda W, A, B, m, a: m[:, None] * (V := ref.lora_weight(W, A, B, a))
    ...                   / np.linalg.norm(V, axis=0)))
    ❌ Not yet: DoRA's weight
       - on W 5 x 8, r = 2, alpha = 4: the norms run over the wrong axis: one norm per output unit, the norm of each row of the (d_out, d_in) matrix (axis=1), not of each column
    """

    def compare(got: Any, expected: tuple[np.ndarray, list]) -> str | None:
        want, wrong = expected
        return first_mistake(got, wrong) or diagnose(got, want)

    return check_cases("DoRA's weight", fn, _dora_cases(), compare=compare, require=require)


# ------------------------------------------------------ the prefix's share of attention (derive)
def _share(q, k, pk, *, causal=True, scale=True, prefix_only=False, counts=False, maxes=False):
    """The share of each token's attention on the prefix, with one thing changed."""
    T, dk = q.shape[-2:]
    P = pk.shape[-2]
    c = np.sqrt(dk) if scale else 1.0
    s_p = q @ np.swapaxes(np.broadcast_to(pk, (*q.shape[:-2], P, dk)), -1, -2) / c  # (..., T, P)
    s_t = q @ np.swapaxes(k, -1, -2) / c  # (..., T, T)
    if causal:
        s_t = np.where(np.tril(np.ones((T, T), bool)), s_t, -np.inf)
    if counts:
        return np.broadcast_to(P / (P + np.arange(1, T + 1)), s_p.shape[:-1]).copy()
    if prefix_only:
        return np.ones(s_p.shape[:-1])
    reduce = (lambda a: a.max(-1)) if maxes else (lambda a: np.logaddexp.reduce(a, axis=-1))
    return 1.0 / (1.0 + np.exp(reduce(s_t) - reduce(s_p)))  # sigma(LSE_prefix - LSE_tokens)


def prefix_share(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(q, k, pk)``: the share of each token's attention that goes to the prefix, (B, h, T).

    ``q``, ``k`` (B, h, T, d_head) come from the tokens, ``pk`` (h, P, d_head) is the trained
    prefix's keys; causal, scaled by 1/sqrt(d_head), the prefix seen by every token.

    >>> prefix_share(_share).passed
    True
    >>> print(prefix_share(lambda q, k, pk: _share(q, k, pk, causal=False)))
    ❌ Not yet: the prefix's share of attention
       - on B = 2, h = 2, T = 5 tokens, P = 3 prefix positions, d_head = 4: the tokens' part has no causal mask: token i competes only with tokens 0 .. i (and the prefix)
    """
    rng = seeded(SEED + 4)
    cases = []
    for B, h, T, P, dk in [(2, 2, 5, 3, 4), (1, 3, 4, 1, 2), (3, 1, 6, 4, 8)]:
        q, k = rng.standard_normal((B, h, T, dk)), rng.standard_normal((B, h, T, dk))
        pk = rng.standard_normal((h, P, dk))
        args = (q, k, pk)
        wrong = [
            (
                _share(*args, causal=False),
                "the tokens' part has no causal mask: token i competes only with tokens 0 .. i "
                "(and the prefix)",
            ),
            (_share(*args, scale=False), "the scores are not divided by sqrt(d_head)"),
            (
                _share(*args, counts=True),
                "P / (P + i + 1) counts keys and ignores the scores: that is the share only when "
                "every score is equal",
            ),
            (
                _share(*args, prefix_only=True),
                "a softmax over the prefix alone always sums to 1: the prefix competes with the tokens",
            ),
            (
                _share(*args, maxes=True),
                "the largest score of each group is not enough: compare the log-sum-exp of the "
                "prefix's scores with that of the tokens' scores",
            ),
            (1 - _share(*args), "that is the tokens' share, 1 minus the prefix's"),
        ]
        what = f"B = {B}, h = {h}, T = {T} tokens, P = {P} prefix positions, d_head = {dk}"
        cases.append((what, args, (_share(*args), wrong)))

    def compare(got: Any, expected: tuple[np.ndarray, list]) -> str | None:
        want, wrong = expected
        return first_mistake(got, wrong) or diagnose(got, want)

    return check_cases(
        "the prefix's share of attention", fn, cases, compare=compare, require=require
    )


# ------------------------------------------------------------------ explanations of predictions
ALPHA_RATIO_EXPLANATION = (
    "after one Adam step every entry of B is +-lr, so a row of BA is a signed sum of r rows of A "
    "(each of length about 1): its length grows like sqrt(r); times alpha / r the update goes like "
    "alpha / sqrt(r), so rank 16's first step is 1/sqrt(16) = 1/4 of rank 1's. A prediction of "
    "1/16 keeps the alpha / r and forgets that BA grows with r; a prediction of 1 assumes the "
    "scale alpha / r exactly cancels the rank; 4 is what alpha = 2r gives (2 sqrt(r))"
)


def written_code_explanation(reach: dict[int, float]) -> str:
    """Why the written 16-letter code answers only some letters (chapter 8's reach by distance)."""
    near = ", ".join(f"{d}: {a:.2f}" for d, a in reach.items())
    return (
        "the model answers a query by finding its letter among the lines above and copying what "
        f"followed, and chapter 8 measured how far back it finds it (accuracy by distance {near}). "
        "Of 16 lines only the last few are within that reach, so about a quarter of the letters "
        "come out right. A prediction near 1 assumes the model reads every line; one near 1/26 "
        "assumes it cannot use the lines at all (that is the zero-shot model)"
    )
