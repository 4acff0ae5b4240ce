"""Conformance specs of Chapter 13: one :class:`~course_lib.conformance.Spec` per mirrored function.

Inputs: a weight ``W`` (d, k), LoRA factors ``A`` (r, k) and ``B`` (d, r) with ``r <= min(d, k)``,
and a ``alpha`` that differs from ``r`` (a scale bug hides when ``alpha = r``).
"""

from __future__ import annotations

from hypothesis import strategies as st

from course_lib.conformance import Case, Spec, batch_shapes, dims, seeded_rng

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = []

alphas = st.sampled_from([0.5, 3.0, 16.0])


@st.composite
def lora_factors(draw: st.DrawFn, with_x: bool = False) -> Case:
    rng = seeded_rng(draw)
    d, k = draw(dims), draw(dims)
    r = draw(st.integers(1, min(d, k)))
    W, A, B = (rng.standard_normal(s) for s in ((d, k), (r, k), (d, r)))
    alpha = draw(alphas)
    if not with_x:
        return Case((W, A, B, alpha))
    x = rng.standard_normal((*draw(batch_shapes), k))
    b = rng.standard_normal(d) if draw(st.booleans()) else None
    return Case((x, W, A, B, alpha, b))


SPECS.append(Spec("peft", "lora_weight", lora_factors(), dtypes=("float64", "float32", "bfloat16")))
SPECS.append(
    Spec(
        "peft",
        "lora_linear",
        lora_factors(with_x=True),
        dtypes=("float64", "float32", "bfloat16"),
        tolerance={"bfloat16": (5e-2, 2e-1)},  # sums of up to 6 products, each rounded to bf16
    )
)


@st.composite
def dora_factors(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    d, k = draw(dims), draw(dims)
    r = draw(st.integers(1, min(d, k)))
    W, A, B = (rng.standard_normal(s) for s in ((d, k), (r, k), (d, r)))
    m = rng.uniform(0.5, 2.0, d)  # positive lengths
    return Case((W, A, B, m, draw(alphas)))


SPECS.append(Spec("peft", "dora_weight", dora_factors(), dtypes=("float64", "float32")))


@st.composite
def prefix_inputs(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    T, P, dk = draw(st.integers(1, 6)), draw(st.integers(0, 4)), draw(st.integers(1, 8))
    lead = draw(batch_shapes)
    q, k, v = (rng.standard_normal((*lead, T, dk)) for _ in range(3))
    pk, pv = rng.standard_normal((P, dk)), rng.standard_normal((P, dk))
    return Case((q, k, v, pk, pv))


SPECS.append(Spec("peft", "prefix_attention", prefix_inputs()))
