"""Chapter 9's fast masked-LM loss (the head only at the labelled positions): the same loss and gradients.

``Bert.mlm_loss`` is what the benchmark (``benchmarks/bert.py``) times against
``BertForMaskedLM``; these tests make sure it is the same computation: equal to
``masked_lm_loss(Bert.mlm(...))`` and to Hugging Face's loss, and so are the gradients of every
parameter.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_lib.bert import accelerated as A
from course_lib.bert.config import BertConfig, bert_block, flatten, init_parameters, unflatten
from course_lib.bert.hf import _state, to_hf
from course_lib.bert.inputs import IGNORE
from course_lib.bert.masking import mask_tokens
from course_lib.bert.model import Bert

CFG = BertConfig(vocab_size=64, max_len=16, n_layers=2, block=bert_block(32, 4, 48))


def _bert(dtype=torch.float32, dropout: float = 0.0) -> Bert:
    """A model whose gains and biases are away from 1 and 0, so that every parameter matters."""
    rng = np.random.default_rng(1)
    theta = flatten(init_parameters(CFG, 0), CFG)
    params = unflatten(theta + 0.1 * rng.standard_normal(theta.shape), CFG)
    return Bert(CFG, params, dropout=dropout, dtype=dtype)


def _batch(seed: int = 0):
    """Masked tokens, labels (15% chosen, at least one), segments and a padding mask, (4, 14)."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(4, CFG.vocab_size, (4, 14))
    x, y = mask_tokens(tokens, rng, mask_id=3, vocab_size=CFG.vocab_size, special_ids=(0, 1, 2, 3))
    y[0, 1] = tokens[0, 1]  # make sure that every row but the last has a label
    y[1, 2] = tokens[1, 2]
    y[2, 0] = tokens[2, 0]
    segments = (np.arange(14) >= 6).astype(np.int64) * np.ones((4, 1), dtype=np.int64)
    mask = np.ones((4, 14), dtype=bool)
    mask[1, 9:] = False
    mask[2, 11:] = False
    y[~mask] = IGNORE  # padding carries no label
    y[3] = IGNORE  # a sequence without any label
    return tuple(torch.from_numpy(a) for a in (x, y, segments, mask))


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def test_the_fast_loss_equals_the_full_logits_loss_and_its_gradients_in_float64():
    x, y, s, m = _batch()
    model = _bert(torch.float64)
    full = A.masked_lm_loss(model.mlm(x, s, m), y)
    full.backward()
    want = _grads(model)
    model.zero_grad()
    fast = model.mlm_loss(x, y, s, m)
    fast.backward()
    assert fast.item() == pytest.approx(full.item(), rel=1e-13)
    for name, g in _grads(model).items():
        torch.testing.assert_close(g, want[name], rtol=1e-11, atol=1e-13, msg=name)
    live = {n: g for n, g in want.items() if not n.endswith(".b_k")}  # b_k: zero in exact maths
    assert all(g.abs().sum() > 0 for g in live.values()), "every parameter must get a gradient"


def test_the_fast_loss_and_every_gradient_equal_bert_for_masked_lm_in_float32():
    x, y, s, m = _batch(1)
    ours = _bert(torch.float32).train()
    theirs = to_hf(ours.numpy_parameters(), CFG, "masked_lm", dtype=torch.float32).train()
    loss = ours.mlm_loss(x, y, s, m)
    loss.backward()
    out = theirs(input_ids=x, token_type_ids=s, attention_mask=m.long(), labels=y)
    out.loss.backward()
    torch.testing.assert_close(loss, out.loss, rtol=1e-6, atol=1e-6)

    g = {n: p.grad for n, p in ours.named_parameters()}  # "top.tok_emb", "blocks.0.w_q", ...
    grads = {k[4:]: v for k, v in g.items() if k.startswith("top.")}
    grads["blocks"] = [
        {k.split(".", 2)[2]: v for k, v in g.items() if k.startswith(f"blocks.{r}.")}
        for r in range(CFG.n_layers)
    ]
    want = _state(grads, "bert.")  # our gradients in Hugging Face's names and layouts
    want.update({
        "cls.predictions.transform.dense.weight": grads["mlm_w"].t(),
        "cls.predictions.transform.dense.bias": grads["mlm_b"],
        "cls.predictions.transform.LayerNorm.weight": grads["mlm_norm_gain"],
        "cls.predictions.transform.LayerNorm.bias": grads["mlm_norm_bias"],
        "cls.predictions.bias": grads["mlm_out_bias"],
    })  # fmt: skip
    theirs_g = {n: p.grad for n, p in theirs.named_parameters()}
    assert set(theirs_g) == set(want), "every parameter of BertForMaskedLM must be compared"
    top = max(float(gt.abs().max()) for gt in theirs_g.values())
    for name, gt in theirs_g.items():
        if name.endswith("key.bias"):  # q . b_k shifts a query's logits alike: softmax ignores it
            assert float(gt.abs().max()) < 1e-6 * top and float(want[name].abs().max()) < 1e-6 * top
            continue
        scale = float(gt.abs().max())
        assert scale > 1e-3 * top, f"{name} got (almost) no gradient: the test would miss it"
        torch.testing.assert_close(want[name], gt, rtol=1e-4, atol=1e-5 * scale, msg=name)


def test_the_fast_loss_with_dropout_draws_the_same_masks():
    x, y, s, m = _batch(2)
    model = _bert(torch.float64, dropout=0.3).train()
    torch.manual_seed(5)
    full = A.masked_lm_loss(model.mlm(x, s, m), y)
    torch.manual_seed(5)
    fast = model.mlm_loss(x, y, s, m)
    assert fast.item() == pytest.approx(full.item(), rel=1e-13)
    torch.manual_seed(6)
    assert model.mlm_loss(x, y, s, m).item() != pytest.approx(full.item(), rel=1e-6)


def test_mlm_still_returns_every_positions_logits_and_accepts_numpy_labels():
    x, y, s, m = _batch()
    model = _bert()
    assert model.mlm(x).shape == (*x.shape, CFG.vocab_size)
    loss = model.mlm_loss(x.numpy(), y.numpy(), s.numpy(), m.numpy())
    assert loss.item() == pytest.approx(model.mlm_loss(x, y, s, m).item(), rel=1e-6)


def test_the_fast_loss_gives_clear_errors():
    x, y, _, _ = _batch()
    model = _bert()
    with pytest.raises(ValueError, match=r"labels must have shape \(4, 14\)"):
        model.mlm_loss(x, y[:, :5])
    with pytest.raises(ValueError, match=r"labels must be in \[0, 63\] or -100"):
        model.mlm_loss(x, torch.full_like(y, 64))
    with pytest.raises(ValueError, match="labels are all -100"):
        model.mlm_loss(x, torch.full_like(y, IGNORE))
    with pytest.raises(TypeError, match="labels must hold integers"):
        model.mlm_loss(x, y.double())
    with pytest.raises(ValueError, match="17 positions but the model has only max_len = 16"):
        model.mlm_loss(torch.zeros(1, 17, dtype=torch.long), torch.zeros(1, 17, dtype=torch.long))
