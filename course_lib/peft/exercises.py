"""Exercise checkers of Chapter 13: ``from course_lib.peft import exercises as check``.

Each checker runs the learner's function on inputs it draws itself (:func:`course_lib.checker.
check_cases`), compares with the library (:mod:`course_lib.peft.reference`,
:mod:`course_lib.peft.counting`, :mod:`course_lib.peft.spectrum`) and names known mistakes
(:func:`course_lib.checker.first_mistake`, :func:`course_lib.checker.diagnose_number`).
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
    guarded,
    seeded,
)
from course_lib.peft import reference as ref
from course_lib.peft.counting import NF4_DQ_BITS, qlora_budget  # noqa: F401 (doctest)
from course_lib.peft.spectrum import top_r_energy as _energy

__all__ = ["prefix_attention", "qlora_gb", "top_r_energy"]

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


@guarded
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


#: LLaMA-7B and LLaMA-65B: parameters, width, feed-forward width, layers.
LLAMA = {
    "LLaMA-7B": (6_738_415_616, 4096, 11008, 32),
    "LLaMA-65B": (65_285_660_672, 8192, 22016, 80),
}


@guarded
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
        compare=lambda got, e: diagnose_number_close(got, e[0], e[1]),
        require=require,
    )


def diagnose_number_close(got: Any, want: float, mistakes: dict[str, float]) -> str | None:
    """:func:`diagnose_number` with a relative tolerance of 1e-4 (GB from rounded inputs)."""
    try:
        value = float(got)
    except (TypeError, ValueError):
        return diagnose_number(got, want)
    if np.isclose(value, want, rtol=1e-4):
        return None
    for hint, wrong in mistakes.items():
        if np.isclose(value, wrong, rtol=1e-4):
            return f"you return {value:.6g}, the right value is {want:.6g}: {hint}"
    return f"you return {value:.6g}, the right value is {want:.6g}"


@guarded
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
        compare=lambda got, e: diagnose_number_close(got, e[0], e[1]),
        require=require,
    )
