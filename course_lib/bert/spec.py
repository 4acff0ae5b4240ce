"""Conformance specs of Chapter 9: one :class:`~course_lib.conformance.Spec` per mirrored function.

The model functions take their parameters as one flat vector here (the form both sides accept
besides a dict), so that the suite converts them to the dtype under test and ``gradcheck``
differentiates with respect to every parameter at once. Token and segment ids are integer
arrays and the padding mask a boolean one; the suite passes them through unchanged.
"""

from __future__ import annotations

from hypothesis import strategies as st

from course_lib.bert.config import BertConfig, bert_block, count_parameters
from course_lib.bert.inputs import IGNORE
from course_lib.conformance import Case, Spec, batch_shapes, seeded_rng


@st.composite
def model_inputs(draw: st.DrawFn, with_mask: bool = True) -> Case:
    """tokens (..., L), segments or None, a flat parameter vector, a small config[, a padding mask]."""
    h, dk = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    cfg = BertConfig(
        vocab_size=draw(st.integers(2, 7)),
        max_len=draw(st.integers(1, 5)),
        n_layers=draw(st.integers(1, 2)),
        block=bert_block(h * dk, h, draw(st.integers(1, 6))),
        n_segments=draw(st.integers(1, 2)),
    )
    rng = seeded_rng(draw)
    shape = (*draw(batch_shapes), draw(st.integers(1, cfg.max_len)))
    tokens = rng.integers(0, cfg.vocab_size, shape)
    segments = rng.integers(0, cfg.n_segments, shape) if draw(st.booleans()) else None
    theta = 0.5 * rng.standard_normal(count_parameters(cfg))
    if not with_mask:
        return Case((tokens, segments, theta, cfg))
    mask = None
    if draw(st.booleans()):
        mask = rng.random(shape) < 0.7
        mask[..., 0] = True  # [CLS] is never padding
    return Case((tokens, segments, theta, cfg, mask))


@st.composite
def loss_inputs(draw: st.DrawFn) -> Case:
    """logits (..., L, V) and labels (..., L) with some positions IGNORE, at least one kept."""
    rng = seeded_rng(draw)
    shape = (*draw(batch_shapes), draw(st.integers(1, 5)))
    V = draw(st.integers(2, 6))
    logits = 2 * rng.standard_normal((*shape, V))
    labels = rng.integers(0, V, shape)
    labels[rng.random(shape) < 0.5] = IGNORE
    labels.reshape(-1)[0] = 0
    return Case((logits, labels))


_TOL = {"float64": (1e-9, 1e-10), "float32": (1e-3, 1e-4)}

#: The mirrored functions of this chapter and how to check them (see course_lib.conformance).
SPECS: list[Spec] = [
    Spec(
        topic="bert", name="bert_embeddings", inputs=model_inputs(with_mask=False), tolerance=_TOL
    ),
    Spec(topic="bert", name="bert_encoder", inputs=model_inputs(), tolerance=_TOL),
    Spec(topic="bert", name="mlm_logits", inputs=model_inputs(), tolerance=_TOL),
    Spec(topic="bert", name="attention_maps", inputs=model_inputs(), tolerance=_TOL),
    Spec(topic="bert", name="masked_lm_loss", inputs=loss_inputs(), tolerance=_TOL),
]

__all__ = ["SPECS", "loss_inputs", "model_inputs"]
