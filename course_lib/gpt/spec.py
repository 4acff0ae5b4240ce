"""Conformance specs of Chapter 8: one :class:`~course_lib.conformance.Spec` per mirrored function.

The model takes its parameters as one flat vector here (both sides accept it besides a dict),
so the suite converts them to the dtype under test and ``gradcheck`` differentiates with respect
to all of them at once. Every variant the chapter uses can be drawn: learned positions or RoPE,
LayerNorm or RMSNorm, GELU, its tanh form or SwiGLU, with or without biases.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from course_lib.conformance import Case, Spec, batch_shapes, seeded_rng
from course_lib.gpt.config import GPTConfig, count

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = []


@st.composite
def gpt_configs(draw: st.DrawFn) -> GPTConfig:
    h = draw(st.integers(1, 2))
    gated = draw(st.booleans())
    return GPTConfig(
        vocab_size=draw(st.integers(2, 7)),
        context_length=draw(st.integers(1, 5)),
        n_layers=draw(st.integers(1, 2)),
        n_heads=h,
        d_model=h * draw(st.sampled_from([2, 4])),
        d_ff=draw(st.integers(1, 6)),
        norm=draw(st.sampled_from(["layer", "rms"])),
        activation="swish" if gated else draw(st.sampled_from(["gelu", "gelu_tanh", "relu"])),
        gated=gated,
        bias=draw(st.booleans()),
        positions=draw(st.sampled_from(["learned", "rope"])),
    )


@st.composite
def forward_inputs(draw: st.DrawFn) -> Case:
    """Integer tokens (..., L), a flat parameter vector and a small configuration."""
    cfg = draw(gpt_configs())
    rng = seeded_rng(draw)
    L = draw(st.integers(1, cfg.context_length))
    tokens = rng.integers(0, cfg.vocab_size, (*draw(batch_shapes), L))
    return Case((tokens, 0.5 * rng.standard_normal(count(cfg)), cfg))


@st.composite
def lm_loss_inputs(draw: st.DrawFn) -> Case:
    """Logits (..., L, V), tokens (..., L) with L >= 2, and (sometimes) one length per sequence."""
    rng = seeded_rng(draw)
    batch, L, V = draw(batch_shapes), draw(st.integers(2, 6)), draw(st.integers(2, 6))
    logits = 2 * rng.standard_normal((*batch, L, V))
    tokens = rng.integers(0, V, (*batch, L))
    if draw(st.booleans()):
        lengths = rng.integers(2, L + 1, batch)  # at least one target per sequence
        return Case((logits, tokens), {"lengths": np.asarray(lengths)})
    return Case((logits, tokens))


@st.composite
def classifier_inputs(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    B, L, d, C = (draw(st.integers(1, 4)) for _ in range(4))
    return Case(
        (rng.standard_normal((B, L, d)), rng.standard_normal((d, C)), rng.integers(1, L + 1, B))
    )


@st.composite
def fine_tune_inputs(draw: st.DrawFn) -> Case:
    rng = seeded_rng(draw)
    B, L, V, C = draw(st.integers(1, 3)), draw(st.integers(2, 5)), draw(st.integers(2, 5)), 3
    return Case(
        (
            rng.standard_normal((B, C)),
            rng.integers(0, C, B),
            rng.standard_normal((B, L, V)),
            rng.integers(0, V, (B, L)),
            rng.integers(2, L + 1, B),
        ),
        {"lam": draw(st.sampled_from([0.0, 0.3, 1.0]))},
    )


_MODEL_TOL = {"float64": (1e-9, 1e-10), "float32": (1e-3, 1e-4)}
SPECS.append(Spec(topic="gpt", name="gpt_forward", inputs=forward_inputs(), tolerance=_MODEL_TOL))
SPECS.append(Spec(topic="gpt", name="causal_lm_loss", inputs=lm_loss_inputs()))
SPECS.append(Spec(topic="gpt", name="classifier_logits", inputs=classifier_inputs()))
SPECS.append(Spec(topic="gpt", name="fine_tune_loss", inputs=fine_tune_inputs()))


@st.composite
def matrix_inputs(draw: st.DrawFn) -> Case:
    """A matrix (m, n), wide or tall, and a number of Newton-Schulz steps."""
    rng = seeded_rng(draw)
    m, n = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    return Case((rng.standard_normal((m, n)),), {"steps": draw(st.integers(0, 5))})


@st.composite
def muon_inputs(draw: st.DrawFn) -> Case:
    """A weight, its gradient and its momentum (m, n), a learning rate and Muon's settings."""
    rng = seeded_rng(draw)
    shape = (draw(st.integers(1, 6)), draw(st.integers(1, 6)))
    w, g, m = (rng.standard_normal(shape) for _ in range(3))
    kw = {"beta": draw(st.sampled_from([0.0, 0.9, 0.95])), "nesterov": draw(st.booleans())}
    return Case((w, g, m, draw(st.sampled_from([0.01, 0.1]))), kw)


# five quintic steps amplify float32's rounding (the polynomial's slope reaches about 3.4)
_NS_TOL = {"float64": (1e-9, 1e-10), "float32": (2e-3, 2e-4)}
SPECS.append(
    Spec(
        topic="gpt",
        name="newton_schulz",
        inputs=matrix_inputs(),
        tolerance=_NS_TOL,
        gradcheck=False,
    )
)
SPECS.append(
    Spec(
        topic="gpt",
        name="muon_step",
        inputs=muon_inputs(),
        tolerance=_NS_TOL,
        gradcheck=False,
        float_args=(0, 1, 2),
    )
)
