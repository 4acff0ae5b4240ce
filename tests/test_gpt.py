"""Chapter 8 (GPT): hand-derived values, parity with NumPy, Chapter 5 and transformers, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_lib.block import reference as block_ref
from course_lib.gpt import accelerated as acc
from course_lib.gpt import exercises as check
from course_lib.gpt import reference as ref
from course_lib.gpt.config import RECIPES, GPTConfig, count
from course_lib.gpt.model import GPT
from course_lib.models import DecoderOnlyModel

SMALL = GPTConfig(vocab_size=13, context_length=9, n_layers=2, n_heads=2, d_model=8)
VARIANTS = [
    SMALL,
    GPTConfig(13, 9, 2, 2, 8, activation="gelu_tanh"),
    GPTConfig(13, 9, 2, 2, 8, positions="rope", norm="rms", bias=False),
    GPTConfig(13, 9, 1, 4, 8, positions="rope", activation="swish", gated=True),
]


def _noisy(model: GPT, scale: float = 0.3, seed: int = 1) -> GPT:
    """Weights far from the tiny initial ones, so that every term of the forward matters."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))
    return model


def _tokens(cfg: GPTConfig, shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    return torch.randint(0, cfg.vocab_size, shape, generator=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------------- the model (eq. 21)
@pytest.mark.parametrize("cfg", VARIANTS, ids=lambda c: f"{c.positions}-{c.norm}-{c.activation}")
def test_numpy_forward_equals_pytorch_forward(cfg):
    model = _noisy(GPT(cfg, seed=0).double())
    t = _tokens(cfg, (3, cfg.context_length))
    np.testing.assert_allclose(
        model(t).detach().numpy(), ref.gpt_forward(t.numpy(), model.numpy_parameters(), cfg),
        rtol=1e-10, atol=1e-10,
    )  # fmt: skip


def test_learned_position_gpt_is_chapter_5_decoder():
    """Same weights, same logits as Chapter 5's NumPy decoder and its DecoderOnlyModel."""
    model = _noisy(GPT(SMALL, seed=0).double())
    t = _tokens(SMALL, (2, 7))
    want = block_ref.decoder_forward(t.numpy(), model.numpy_parameters(), SMALL.decoder)
    np.testing.assert_allclose(model(t).detach().numpy(), want, rtol=1e-10, atol=1e-10)
    ch5 = DecoderOnlyModel.from_parameters(
        SMALL.decoder, model.numpy_parameters(), dtype=torch.float64
    )
    np.testing.assert_allclose(ch5(t).detach().numpy(), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh"])
def test_equals_transformers_gpt2_logits_and_loss(activation):
    from course_lib.gpt.hf import to_hf_gpt2

    cfg = GPTConfig(
        vocab_size=50, context_length=16, n_layers=3, n_heads=4, d_model=32, activation=activation
    )
    model = _noisy(GPT(cfg, seed=0), scale=0.1).eval()
    hf = to_hf_gpt2(model)
    t = _tokens(cfg, (2, 16))
    out = hf(t, labels=t)
    torch.testing.assert_close(model(t), out.logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(model.loss(t), out.loss, rtol=1e-5, atol=1e-6)


def test_transformers_refuses_what_gpt2_does_not_have():
    from course_lib.gpt.hf import to_hf_gpt2

    with pytest.raises(ValueError, match="positions='rope'"):
        to_hf_gpt2(GPT(GPTConfig(5, 4, 1, 1, 4, positions="rope", norm="rms", bias=False)))


@pytest.mark.parametrize("cfg", VARIANTS[:3], ids=["learned", "gelu_tanh", "rope"])
def test_no_position_sees_the_future(cfg):
    model = _noisy(GPT(cfg, seed=0))
    t = _tokens(cfg, (1, cfg.context_length))
    for j in range(cfg.context_length):
        changed = t.clone()
        changed[0, j] = (changed[0, j] + 1) % cfg.vocab_size
        diff = (model(changed) - model(t)).abs().amax(-1)[0]  # (L,)
        assert torch.all(diff[:j] == 0), f"positions before {j} changed when token {j} did"
        assert diff[j] > 0


def test_loss_at_initialisation_is_near_ln_vocab():
    cfg = GPTConfig(vocab_size=65, context_length=64, n_layers=4, n_heads=4, d_model=128)
    model = GPT(cfg, seed=0)
    loss = float(model.loss(_tokens(cfg, (8, 64))).detach())
    assert abs(loss - math.log(65)) < 0.05


def test_causal_lm_loss_is_the_shifted_cross_entropy_by_hand():
    logits = torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    t = torch.tensor([[1, 2, 3, 4], [0, 0, 1, 1]])
    by_hand = -np.mean(
        [
            torch.log_softmax(logits[b, i], -1)[t[b, i + 1]].item()
            for b in range(2)
            for i in range(3)
        ]
    )
    assert float(acc.causal_lm_loss(logits, t)) == pytest.approx(by_hand, rel=1e-12)
    assert float(ref.causal_lm_loss(logits.numpy(), t.numpy())) == pytest.approx(by_hand, rel=1e-12)
    # with lengths, predictions of padding are left out: sequence 1 has 2 real tokens, 1 target
    kept = [(0, 0), (0, 1), (0, 2), (1, 0)]
    want = -np.mean([torch.log_softmax(logits[b, i], -1)[t[b, i + 1]].item() for b, i in kept])
    assert float(acc.causal_lm_loss(logits, t, torch.tensor([4, 2]))) == pytest.approx(
        want, rel=1e-12
    )
    assert float(ref.causal_lm_loss(logits.numpy(), t.numpy(), [4, 2])) == pytest.approx(
        want, rel=1e-12
    )


def test_parameter_count_matches_chapter_5_and_the_recipe():
    from course_lib.block.counting import count_parameters

    assert count(SMALL) == count_parameters(SMALL.decoder) == GPT(SMALL).count_parameters()
    base = RECIPES["baseline"].model_config(65)
    assert count(base) == 809_856  # 4 x 198,272 per block + 65 x 128 + 64 x 128 + 256


# ------------------------------------------------------------------------------- bad input
def test_clear_errors_for_bad_tokens():
    model = GPT(SMALL, seed=0)
    with pytest.raises(ValueError, match="context_length = 9"):
        model(torch.zeros(1, 10, dtype=torch.long))
    with pytest.raises(ValueError, match="L >= 1"):
        model(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[0, 12\]"):
        model(torch.tensor([[3, 13]]))
    with pytest.raises(TypeError, match="integers"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="context_length = 9"):
        ref.gpt_forward(np.zeros((1, 10), dtype=int), model.numpy_parameters(), SMALL)
    cache = model.new_cache()
    model(torch.zeros(1, 6, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="after 6 cached ones"):
        model(torch.zeros(1, 4, dtype=torch.long), cache)


def test_clear_errors_for_bad_parameters():
    p = GPT(SMALL, seed=0).numpy_parameters()
    p["blocks"][1]["w_q"] = np.zeros((2, 8, 3))
    with pytest.raises(ValueError, match=r"blocks.1.w_q must have shape \(2, 8, 4\)"):
        ref.gpt_forward([[1]], p, SMALL)
    with pytest.raises(ValueError, match="flat vector of length"):
        acc.gpt_forward(torch.tensor([[1]]), torch.zeros(5), SMALL)
    with pytest.raises(ValueError, match="even head width"):
        GPTConfig(5, 4, 1, 1, 3, positions="rope")


# ------------------------------------------------------------------------------- exercises
# Two solutions written independently of the checkers' and the chapter's code: NumPy for the
# filters, and the library's own cached model behind the exercise's list-of-(k, v) interface.
def _probs(logits, t=1.0, k=None, p=None):
    z = logits.numpy().astype(np.float64).copy()
    if k is not None:
        z[z < np.sort(z)[-k]] = -np.inf
    if t == 0:
        return torch.from_numpy(np.eye(len(z))[np.argmax(z)])
    z = z / t
    if p is not None:
        q = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        order = np.argsort(-q)
        z[order[np.cumsum(q[order]) - q[order] >= p]] = -np.inf
    return torch.from_numpy(np.exp(z - z.max()) / np.exp(z - z.max()).sum())


def _step(token, p, c, cache):
    model = GPT.from_parameters(c, p, dtype=torch.float64)
    kv = acc.KVCache(c.n_layers)
    if cache:
        kv.layers = [(k[None], v[None]) for k, v in cache]  # (1, h, T, d_head)
    logits = model(torch.tensor([[token]]), kv)[0, -1]
    cache[:] = [(k[0], v[0]) for k, v in kv.layers]
    return logits


def _with(step_kw):
    """A learner's step that makes one of the named mistakes."""
    return lambda token, p, c, cache: check._step(token, p, c, cache, **step_kw)


def test_sampling_checker_accepts_solutions_and_names_mistakes():
    from course_lib.gpt.sampling import next_token_probs

    assert check.sampling_probs(_probs) and check.sampling_probs(next_token_probs)

    def probs_over_t(logits, t, k=None, p=None):
        return (
            F.one_hot(logits.argmax(), logits.numel()).double()
            if t == 0
            else (torch.softmax(logits, -1) / t)
        )

    def one_fewer(logits, t, k=None, p=None):
        z = _probs(logits, t, k, None)
        if p is None or t == 0:
            return z
        order = z.argsort(descending=True)
        z[order[torch.cumsum(z[order], 0) >= p]] = 0
        return z / z.sum()

    for wrong, words in ((probs_over_t, "after the softmax"), (one_fewer, "one token too few"),
                         (lambda lg, t, k, p: _probs(lg, 1.0 if t else 0, k, p), "no effect"),
                         (lambda lg, t, k, p: _probs(lg, t, k, p) if t else torch.softmax(lg / t, -1), "NaN")):  # fmt: skip
        verdict = check.sampling_probs(wrong)
        assert not verdict and words in str(verdict), str(verdict)
    not_yet = check.sampling_probs(lambda *a: (_ for _ in ()).throw(NotImplementedError))
    assert "not implemented" in str(not_yet)


def test_kv_cache_checker_compares_with_recomputation_and_names_mistakes():
    assert check.cached_step(_step)
    for kw, words in (({"shift": 1}, "off by one"), ({"zero": True}, "position 0"),
                      ({"first_key_only": True}, "only the first key"),
                      ({"scale": False}, "sqrt(d_head)")):  # fmt: skip
        verdict = check.cached_step(_with(kw))
        assert not verdict and words in str(verdict), str(verdict)
    empty = check.cached_step(lambda token, p, c, cache: check._step(token, p, c, []))
    assert not empty and "stayed empty" in str(empty)


def _ce(logits, x, y):
    """The find-the-bug exercise solved from its text."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def test_next_token_loss_checker_accepts_every_form_of_the_fix():
    import numpy as np

    assert check.next_token_loss(_ce)
    assert check.next_token_loss(lambda lg, x, y: float(_ce(lg, x, y)))
    assert check.next_token_loss(lambda lg, x, y: np.float32(_ce(lg, x, y).item()))
    assert check.next_token_loss(lambda lg, x, y: _ce(lg.float(), x, y))
    by_hand = lambda lg, x, y: -torch.log_softmax(lg, -1).gather(-1, y[..., None]).mean()  # noqa: E731
    assert check.next_token_loss(by_hand)


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (lambda lg, x, y: acc.causal_lm_loss(lg, y), "colleague's loss, unchanged"),
        (lambda lg, x, y: acc.causal_lm_loss(lg, x), "dropped the last position"),
        (lambda lg, x, y: _ce(lg, x, x), "its own input token"),
        (lambda lg, x, y: _ce(lg[:, 1:], x, y[:, :-1]), "the wrong way"),
        (lambda lg, x, y: _ce(lg, x, y) * y.numel(), "the sum"),
        (lambda lg, x, y: _ce(torch.softmax(lg, -1), x, y), "softmax first"),
        (
            lambda lg, x, y: F.cross_entropy(
                lg.reshape(-1, lg.shape[-1]), y.reshape(-1), reduction="none"
            ),
            "the per-token losses",
        ),
        (lambda lg, x, y: None, "forget a `return`"),
        (lambda lg, x, y: 1 / 0, "ZeroDivisionError"),
        (lambda lg, y: 0.0, "must be loss_fn(logits, x, y)"),
        (lambda lg, x, y: "2.3", "a number"),
        (lambda lg, x, y: float("nan"), "the loss is nan"),
        (None, "pass your function"),
    ],
)
def test_next_token_loss_checker_names_the_mistake_and_answers_garbage(fn, words):
    verdict = check.next_token_loss(fn)
    assert not verdict and words in str(verdict), str(verdict)


def test_classifier_reads_the_last_real_token_whatever_the_padding():
    model = _noisy(GPT(SMALL, seed=0).double())
    seqs = [[1, 2, 3, 4, 5], [6, 7], [8, 9, 10]]
    lengths = torch.tensor([len(s) for s in seqs])
    batch = torch.zeros(3, 5, dtype=torch.long)
    for b, s in enumerate(seqs):
        batch[b, : len(s)] = torch.tensor(s)
    w_y = torch.randn(8, 3, dtype=torch.float64)
    got = acc.classifier_logits(model.hidden(batch), w_y, lengths)
    alone = torch.stack([model.hidden(torch.tensor([s]))[0, -1] @ w_y for s in seqs])
    torch.testing.assert_close(got, alone.detach())
    np.testing.assert_allclose(
        ref.classifier_logits(model.hidden(batch).detach().numpy(), w_y.numpy(), lengths.numpy()),
        alone.detach().numpy(),
    )
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, 5\]"):
        acc.classifier_logits(model.hidden(batch), w_y, torch.tensor([6, 2, 3]))


def test_fine_tune_loss_is_l2_plus_lambda_l1_by_hand():
    g = torch.Generator().manual_seed(0)
    cls, lm = (
        torch.randn(2, 3, generator=g, dtype=torch.float64),
        torch.randn(2, 4, 6, generator=g, dtype=torch.float64),
    )
    labels, toks, n = (
        torch.tensor([2, 0]),
        torch.tensor([[1, 2, 3, 4], [5, 0, 0, 0]]),
        torch.tensor([4, 2]),
    )
    l2 = -(torch.log_softmax(cls, -1)[[0, 1], labels]).mean()
    lp = torch.log_softmax(lm, -1)
    l1 = -torch.stack([lp[0, 0, 2], lp[0, 1, 3], lp[0, 2, 4], lp[1, 0, 0]]).mean()
    torch.testing.assert_close(acc.fine_tune_loss(cls, labels, lm, toks, n, lam=0.7), l2 + 0.7 * l1)
    assert float(
        ref.fine_tune_loss(
            cls.numpy(), labels.numpy(), lm.numpy(), toks.numpy(), n.numpy(), lam=0.7
        )
    ) == pytest.approx(float(l2 + 0.7 * l1))


# ------------------------------------------------------------------------------- data, widget
def test_tokenizers_round_trip_and_refuse_unknown_characters(small_text):
    from course_lib.gpt.data import BPETokenizer, CharTokenizer, load_tokenizer

    for tok in (
        CharTokenizer.train(small_text),
        BPETokenizer.train(small_text[:3000], vocab_size=300),
    ):
        again = load_tokenizer(tok.to_dict())
        assert again.decode(again.encode(small_text[:500])) == small_text[:500]
        assert again.encode(small_text[:200]) == tok.encode(small_text[:200])
    bpe = BPETokenizer.train(small_text[:3000], vocab_size=300)
    assert len(bpe.encode(small_text[3000:4000])) < 1000 and bpe.decode(bpe.encode("~é")) == "~é"
    with pytest.raises(ValueError, match="unknown character"):
        CharTokenizer.train("abc").encode("abd")


def test_windows_are_consecutive_and_cover_the_split():
    from course_lib.gpt.data import random_windows, split_ids, validation_windows

    train_ids, val_ids = split_ids(torch.arange(1000))
    assert len(train_ids) == 900 and int(val_ids[0]) == 900
    x, y = random_windows(train_ids, 8, 16, torch.Generator().manual_seed(0))
    assert torch.equal(y, x + 1) and int(y.max()) < 900
    vx, vy = validation_windows(val_ids, 16)
    assert (
        vx.shape == (6, 16)
        and torch.equal(vx.flatten(), val_ids[:96])
        and torch.equal(vy.flatten(), val_ids[1:97])
    )
    with pytest.raises(ValueError, match="fewer than context_length"):
        random_windows(torch.arange(5), 1, 5, torch.Generator())


def test_widget_table_is_pure_and_filters_as_chapter_2():
    from course_lib.gpt.data import CharTokenizer
    from course_lib.gpt.widget import next_token_table, render_html

    model, tok = _noisy(GPT(SMALL, seed=0), scale=1.0), CharTokenizer("abcdefghijklm")
    rows = next_token_table(model, tok, "abc", temperature=1.0, top_k=3, rows=13)
    assert sum(b > 0 for _, _, b in rows) == 3 and [a for _, a, _ in rows] == sorted(
        (a for _, a, _ in rows), reverse=True
    )
    assert sum(b for _, _, b in rows) == pytest.approx(1.0)
    assert next_token_table(model, tok, "abc", temperature=0, rows=2)[0][2] == 1.0
    assert "<table>" in render_html(model, tok, "abc", new_tokens=5)
    with pytest.raises(ValueError, match="prompt is empty"):
        next_token_table(model, tok, "")


def test_export_halves_the_weights_and_loads_back(tmp_path):
    from course_lib.gpt.data import CharTokenizer
    from course_lib.gpt.pretrained import export
    from course_lib.gpt.train import load_model, save_checkpoint

    model = GPT(SMALL, seed=0)
    src = save_checkpoint(
        tmp_path / "full.pt", model, CharTokenizer("abcdefghijklm"), RECIPES["baseline"]
    )
    dst = export(src, tmp_path / "small.pt")
    loaded, _ = load_model(dst)
    t = _tokens(SMALL, (1, 6))
    torch.testing.assert_close(loaded(t), model(t).detach(), rtol=1e-2, atol=1e-3)
    assert next(loaded.parameters()).dtype == torch.float32


def test_shipped_checkpoint_loads_and_writes_shakespeare():
    from course_lib.gpt.pretrained import history, load_pretrained
    from course_lib.gpt.sampling import complete

    model, tok = load_pretrained()
    assert model.config == RECIPES["baseline"].model_config(tok.vocab_size)
    assert history()[-1]["val_loss"] < 2.2
    assert len(complete(model, tok, "KING.\n", 20, temperature=0)) == 20


# ------------------------------------------------------------------------------- sampling
def test_kv_cache_generation_equals_uncached_generation():
    from course_lib.gpt.sampling import generate

    model = _noisy(GPT(SMALL, seed=0).double())
    for kw in ({"temperature": 0}, {"temperature": 1.0, "top_k": 5, "seed": 3}):
        # 14 new tokens after 3: the window slides past context_length = 9
        a, la = generate(model, [1, 2, 3], 14, use_cache=True, return_logits=True, **kw)
        b, lb = generate(model, [1, 2, 3], 14, use_cache=False, return_logits=True, **kw)
        assert a == b
        torch.testing.assert_close(la, lb, rtol=1e-10, atol=1e-10)


def test_cached_forward_equals_full_forward_chunk_by_chunk():
    cfg = VARIANTS[2]  # RoPE: the cached positions must continue, not restart
    model = _noisy(GPT(cfg, seed=0).double())
    t = _tokens(cfg, (2, 9))
    cache = model.new_cache()
    parts = [model(t[:, a:b], cache) for a, b in ((0, 4), (4, 5), (5, 9))]
    torch.testing.assert_close(torch.cat(parts, dim=1), model(t), rtol=1e-10, atol=1e-10)


def test_sampling_keeps_the_right_tokens():
    from course_lib.gpt.sampling import next_token_probs

    logits = torch.log(torch.tensor([0.05, 0.4, 0.1, 0.3, 0.15]))
    assert next_token_probs(logits, top_k=2).nonzero().flatten().tolist() == [1, 3]
    # top-p 0.75: 0.4 + 0.3 = 0.7 < 0.75, so the nucleus needs the third, 0.15
    assert next_token_probs(logits, top_p=0.75).nonzero().flatten().tolist() == [1, 3, 4]
    torch.testing.assert_close(
        next_token_probs(logits, top_p=0.75)[[1, 3, 4]], torch.tensor([0.4, 0.3, 0.15]) / 0.85
    )
    assert next_token_probs(logits, temperature=0).tolist() == [0, 1, 0, 0, 0]
    hot = next_token_probs(logits, temperature=1e6)
    torch.testing.assert_close(hot, torch.full((5,), 0.2), rtol=1e-4, atol=1e-5)


def test_sampled_frequencies_follow_the_distribution():
    from course_lib.gpt.sampling import generate

    cfg = GPTConfig(vocab_size=4, context_length=4, n_layers=1, n_heads=1, d_model=4)
    model = _noisy(GPT(cfg, seed=0), scale=1.0)
    with torch.no_grad():
        p = torch.softmax(model(torch.tensor([[2]]))[0, -1], -1)
    n = 400
    draws = [generate(model, [2], 1, seed=s, use_cache=False)[-1] for s in range(n)]
    freq = torch.bincount(torch.tensor(draws), minlength=4).float() / n
    assert torch.all((freq - p).abs() < 4 * torch.sqrt(p * (1 - p) / n) + 1e-3)


def test_generation_errors():
    from course_lib.gpt.data import CharTokenizer
    from course_lib.gpt.sampling import complete, generate

    model = GPT(SMALL, seed=0)
    tok = CharTokenizer("abcdefghijklm")
    with pytest.raises(ValueError, match="prompt is empty"):
        complete(model, tok, "")
    with pytest.raises(ValueError, match="prompt is empty"):
        generate(model, [], 3)
    with pytest.raises(ValueError, match=r"unknown character 'z' \(U\+007A\) at index 2"):
        complete(model, tok, "abz")


# ------------------------------------------------------------------------------- training
from course_lib.gpt.config import Recipe  # noqa: E402

TINY = Recipe(
    name="tiny", n_layers=1, n_heads=2, d_model=16, context_length=16, batch_size=4,
    warmup_steps=2, decay_steps=8,
)  # fmt: skip


@pytest.fixture(scope="module")
def small_text():
    from course_lib.bpe.corpus import sample

    return sample(6000)


def test_learning_rate_schedule_by_hand():
    from course_lib.gpt.train import learning_rate

    r = RECIPES["baseline"]
    assert learning_rate(0, r) == pytest.approx(1e-5)  # (0 + 1) / 100 of 1e-3
    assert learning_rate(99, r) == pytest.approx(1e-3)
    mid = (100 + 2000) / 2  # half-way through the cosine: the mean of lr and min_lr
    assert learning_rate(int(mid), r) == pytest.approx(5.5e-4)
    assert learning_rate(2000, r) == learning_rate(9999, r) == pytest.approx(1e-4)


def test_training_lowers_the_loss_and_resume_equals_an_uninterrupted_run(small_text, tmp_path):
    from course_lib.gpt.train import train

    whole = train(small_text, "char", TINY, max_steps=8, eval_interval=4, progress=False)
    assert whole["history"][-1]["val_loss"] < whole["history"][0]["val_loss"] + 0.5
    first = train(
        small_text, "char", TINY, max_steps=4, eval_interval=4, out=tmp_path, progress=False
    )
    assert (
        first["history"] == whole["history"][:1]
        or first["history"][0]["val_loss"] == whole["history"][0]["val_loss"]
    )
    resumed = train(
        small_text,
        "char",
        TINY,
        max_steps=8,
        eval_interval=4,
        out=tmp_path,
        resume=True,
        progress=False,
    )
    for a, b in zip(resumed["history"], whole["history"], strict=True):
        assert a["train_loss"] == b["train_loss"] and a["val_loss"] == b["val_loss"]
    for (k, v), w in zip(
        resumed["model"].state_dict().items(), whole["model"].state_dict().values(), strict=True
    ):
        torch.testing.assert_close(v, w, rtol=0, atol=0, msg=k)


def test_checkpoint_round_trip_and_clear_errors(small_text, tmp_path):
    from course_lib.gpt.data import CharTokenizer
    from course_lib.gpt.train import (
        load_checkpoint,
        load_model,
        model_from_checkpoint,
        save_checkpoint,
    )

    model, tok = _noisy(GPT(SMALL, seed=0)), CharTokenizer("abcdefghijklm")
    path = save_checkpoint(tmp_path / "m.pt", model, tok)
    loaded, tok2 = load_model(path)
    t = _tokens(SMALL, (1, 5))
    torch.testing.assert_close(loaded(t), model(t).detach())
    assert tok2.chars == tok.chars and not list(tmp_path.glob("*.tmp*"))  # atomic: no leftovers
    (tmp_path / "bad.pt").write_bytes(path.read_bytes()[:200])  # truncated
    with pytest.raises(ValueError, match="corrupt or not a course checkpoint"):
        load_checkpoint(tmp_path / "bad.pt")
    torch.save({"x": object()}, tmp_path / "code.pt")  # needs unpickling code: refused
    with pytest.raises(ValueError, match="corrupt or not a course checkpoint"):
        load_checkpoint(tmp_path / "code.pt")
    with pytest.raises(ValueError, match="made for another model.*d_model"):
        model_from_checkpoint(load_checkpoint(path), GPTConfig(13, 9, 2, 2, 16))
    ckpt = load_checkpoint(path)
    ckpt["model"]["blocks.0.w_q"] = torch.zeros(1)
    with pytest.raises(ValueError, match=r"blocks.0.w_q has shape \(1,\)"):
        model_from_checkpoint(ckpt)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "none.pt")


def _cli(args, env=None, torchrun=False):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable)
    cmd = (
        [str(exe.parent / "torchrun"), "--standalone", "--nproc_per_node=2"]
        if torchrun
        else [str(exe)]
    )
    cmd += ["-m", "course_lib.gpt.train", *args, "--no-progress"]
    e = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    e.pop("WORLD_SIZE", None)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=e, timeout=300)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_command_line_prints_json_lines_and_ddp_equals_one_process(small_text, tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(small_text, encoding="utf-8")
    args = [
        "--text",
        str(path),
        "--tokenizer",
        "char",
        "--recipe",
        "baseline",
        "--max-steps",
        "2",
        "--eval-interval",
        "1",
    ]
    single = _cli(args)
    assert [r["step"] for r in single[:-1]] == [1, 2]
    assert set(single[0]) == {"step", "seconds", "train_loss", "val_loss", "tokens_per_s"}
    assert single[-1]["summary"] and single[-1]["steps"] == 2 and single[-1]["processes"] == 1
    ddp = _cli(args, torchrun=True)
    assert ddp[-1]["processes"] == 2
    for a, b in zip(ddp[:-1], single[:-1], strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], abs=2e-4)
        assert a["val_loss"] == pytest.approx(b["val_loss"], abs=2e-4)


# ------------------------------------------------------------------------------- fine-tuning
def test_fine_tuning_learns_a_separable_task_and_pads_safely():
    from course_lib.gpt.data import CharTokenizer
    from course_lib.gpt.finetune import GPTClassifier, encode_examples, fine_tune

    tok = CharTokenizer(" abcdefghijkl")
    g = np.random.default_rng(0)
    texts = [
        "".join(g.choice(list("abcdef" if y else "ghijkl"), g.integers(3, 9))) for y in (0, 1) * 40
    ]
    labels = torch.tensor([0, 1] * 40)
    t, n = encode_examples(tok, texts, SMALL.context_length)
    assert t.shape == (80, 8) and int(n.max()) == 8 and int(n.min()) >= 3
    assert encode_examples(tok, ["az", "abc"], 5)[0].tolist() == [
        [1, 0, 0],
        [1, 2, 3],
    ]  # z unknown -> " "
    clf = GPTClassifier(GPT(SMALL, seed=0), 2)
    res = fine_tune(clf, (t, n, labels), (t, n, labels), lam=0.5, steps=60, batch_size=16, lr=3e-3)
    assert res["accuracy"] > 0.9


def test_input_transformations_are_figure_1_of_the_gpt_paper():
    from course_lib.gpt.finetune import transform_inputs

    s, d, e = "<s>", "$", "<e>"
    assert transform_inputs("classification", ("ab",), s, d, e) == [[s, "a", "b", e]]
    assert transform_inputs("entailment", ("ab", "c"), s, d, e) == [[s, "a", "b", d, "c", e]]
    assert transform_inputs("similarity", ([1, 2], [3]), 0, 9, 8) == [
        [0, 1, 2, 9, 3, 8],
        [0, 3, 9, 1, 2, 8],
    ]
    assert transform_inputs("multiple_choice", ("q", ["x", "yz"]), s, d, e) == [
        [s, "q", d, "x", e],
        [s, "q", d, "y", "z", e],
    ]
    with pytest.raises(ValueError, match="task"):
        transform_inputs("translation", ("a",), s, d, e)
    with pytest.raises(ValueError, match=r"needs 2 input\(s\) \(premise, hypothesis\)"):
        transform_inputs("entailment", ("a",), s, d, e)
    with pytest.raises(ValueError, match="non-empty list of answers"):
        transform_inputs("multiple_choice", ("q", []), s, d, e)


def test_task_logits_read_the_extract_token_and_combine_per_task():
    from course_lib.gpt.finetune import add_special_tokens, task_logits, transform_inputs

    base = _noisy(GPT(SMALL, seed=0).double())
    gpt = add_special_tokens(base, 3)
    start, delim, extract = 13, 14, 15
    t = _tokens(SMALL, (1, 4))
    torch.testing.assert_close(gpt(t)[..., :13], base(t))  # old tokens: same logits
    a, b = [1, 2, 3], [4, 5]
    w = torch.randn(SMALL.d_model, 3, dtype=torch.float64)
    # classification and entailment: h^m at the extract token, as if run alone
    seq = transform_inputs("entailment", (a, b), start, delim, extract)
    alone = gpt.hidden(torch.tensor(seq))[0, -1] @ w
    torch.testing.assert_close(task_logits(gpt, "entailment", seq, w), alone)
    # similarity: the sum of both orders, so swapping the texts changes nothing
    ab = task_logits(gpt, "similarity", transform_inputs("similarity", (a, b), 13, 14, 15), w)
    ba = task_logits(gpt, "similarity", transform_inputs("similarity", (b, a), 13, 14, 15), w)
    torch.testing.assert_close(ab, ba, rtol=0, atol=1e-12)
    # multiple choice: one score per answer; padding of the shorter answers does not matter
    answers = [[1], [2, 3, 4], [5, 6]]
    w1 = w[:, :1]
    scores = task_logits(
        gpt, "multiple_choice", transform_inputs("multiple_choice", (a, answers), 13, 14, 15), w1
    )
    for k, ans in enumerate(answers):
        one = transform_inputs("multiple_choice", (a, [ans]), 13, 14, 15)
        torch.testing.assert_close(scores[k : k + 1], task_logits(gpt, "multiple_choice", one, w1))
    with pytest.raises(ValueError, match=r"w_y of shape \(d, 1\)"):
        task_logits(gpt, "multiple_choice", [[13, 1, 15]], w)
    with pytest.raises(ValueError, match="two orders"):
        task_logits(gpt, "similarity", [[13, 1, 15]], w)


def test_state_of_the_union_pieces_are_labelled_by_party():
    from course_lib.gpt.datasets import sotu_paragraphs

    pieces = sotu_paragraphs()  # ./course setup always fetches the tarball
    labels = [y for _, y, _ in pieces]
    assert len(pieces) > 20_000 and 0.4 < np.mean(labels) < 0.6
    assert all(200 <= len(t) <= 600 for t, _, _ in pieces[:1000])
    with pytest.raises(ValueError, match="label must be one of"):
        sotu_paragraphs(label="president")


def test_era_split_is_balanced_labelled_by_year_and_keeps_addresses_apart():
    from course_lib.gpt.datasets import ERA_YEAR, sotu_split

    train, test = sotu_split(400, 100, label="era", seed=1, balance=True)
    assert len(train) == 400 and len(test) == 100
    assert sum(y for _, y, _ in train) == 200 and sum(y for _, y, _ in test) == 50
    assert all(y == int(year >= ERA_YEAR) for _, y, year in train + test)
    assert {yr % 2 for _, _, yr in train} == {0} and {yr % 2 for _, _, yr in test} == {1}
    assert sotu_split(400, 100, label="era", seed=1, balance=True) == (train, test)
    with pytest.raises(ValueError, match="not enough pieces"):
        sotu_split(10**6, 10, label="era", balance=True)


def test_naive_bayes_scores_by_hand_and_reads_only_the_first_characters():
    from course_lib.gpt.finetune import naive_bayes_accuracy

    train = [("ab", 0), ("ab", 0), ("ba", 1)]
    # bigram "ab": class 0 count 2 of 2, class 1 count 0 of 1, vocabulary {ab, ba} = 2
    # P(0) P(ab|0) = 2/3 * 3/4 = 0.5 > P(1) P(ab|1) = 1/3 * 1/3: "ab" is class 0
    assert naive_bayes_accuracy(train, [("ab", 0)], n=2) == 1.0
    assert naive_bayes_accuracy(train, [("ba", 1)], n=2) == 1.0
    # the label lives after the first two characters: with width=2 every text looks the same
    far = [("xxab", 0), ("xxab", 0), ("xxba", 1), ("xxba", 1)]
    assert naive_bayes_accuracy(far, far, n=2) == 1.0
    assert naive_bayes_accuracy(far, far, n=2, width=2) == 0.5
    with pytest.raises(ValueError, match="two labels"):
        naive_bayes_accuracy([("ab", 0)], [("ab", 0)])


def test_shipped_fine_tuning_results_have_every_setting_and_their_command():
    import json

    from course_lib.paths import data_path

    for name, label in (("finetune_results.json", "party"), ("finetune_era.json", "era")):
        ft = json.loads(data_path("gpt", name).read_text())
        assert ft["command"].startswith("python -m course_lib.gpt.finetune data/gpt/" + name)
        settings = {(r["start"], r["lambda"]) for r in ft["results"]}
        assert settings == {(s, lam) for s in ("pre-trained", "scratch") for lam in (0.0, 0.5)}
        assert all(0.0 <= r["accuracy"] <= 1.0 for r in ft["results"])
        assert all(r.get("label", "party") == label for r in ft["results"])


def test_race_takes_turns_and_times_each_recipe_to_the_reference_loss(small_text):
    import dataclasses

    from course_lib.gpt.config import RECIPES
    from course_lib.gpt.race import ablation_recipes, race

    tiny = {"n_layers": 1, "d_model": 16, "n_heads": 2, "batch_size": 4, "context_length": 16}
    recipes = [
        dataclasses.replace(r, **tiny, decay_steps=4, warmup_steps=1) for r in ablation_recipes()
    ]
    assert [r.name for r in recipes] == ["baseline", "+ schedule", "+ RoPE", "modern"]
    assert ablation_recipes()[-1] == RECIPES["modern"]
    seen = []
    out = race(small_text, recipes, provisional_target=100.0, chunk=2, max_steps=8, log=seen.append)
    # turns: every recipe's first evaluation comes before any recipe's second
    assert [r["recipe"] for r in seen[:4]] == [r.name for r in recipes]
    base = out["rows"][0]
    assert base["reached_at_step"] == 4 and out["target"] == base["final_val_loss"]
    assert base["speed_up"] == 1.0
    for row in out["rows"]:
        hist = row["history"]
        assert [h["step"] for h in hist] == list(range(2, 2 * len(hist) + 1, 2))
        if row["reached_at_step"] is not None:
            first = next(h for h in hist if h["val_loss"] <= out["target"])
            assert (row["reached_at_step"], row["seconds_to_target"]) == (
                first["step"],
                first["seconds"],
            )
        else:
            assert hist[-1]["step"] == 8
    with pytest.raises(ValueError, match="distinct"):
        race(small_text, [recipes[0], recipes[0]], provisional_target=1.0)


def test_shipped_race_meets_the_target_and_modern_is_the_last_row():
    import json

    from course_lib.paths import data_path

    res = json.loads(data_path("gpt", "race.json").read_text())
    names = [r["recipe"] for r in res["rows"]]
    assert names == ["baseline", "+ schedule", "+ RoPE", "modern"]
    assert res["rows"][0]["reached_at_step"] == 2000
    assert res["rows"][-1]["speed_up"] >= 1.5
    assert res["command"] == "python -m course_lib.gpt.race data/gpt/race.json"


def test_shared_rope_tables_equal_chapter_6_rotary_embedding():
    from course_lib.positions.accelerated import rotary_embedding

    x = torch.randn(2, 3, 7, 8, dtype=torch.float64)
    cos, sin = acc.rope_tables(5, 7, 8, 10000.0, torch.float64, x.device)
    want = rotary_embedding(x, torch.arange(5, 12), base=10000.0)
    torch.testing.assert_close(acc._rotate(x, cos, sin), want, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------ in-context learning
def test_episodes_follow_the_template_and_are_deterministic():
    import random

    from course_lib.gpt import incontext as icl

    code = icl.make_code(random.Random(0))
    assert len(code) == icl.N_INPUTS and all(x.islower() and y.isupper() for x, y in code.items())
    assert code == icl.make_code(random.Random(0))
    prompt, answer = icl.episode(code, 3, random.Random(1))
    *shots, query = prompt.split("\n")
    assert len(shots) == 3 and query in code and code[query] == answer
    for s in shots:  # every shot is an entry of the code: its letter, then the letter's code
        assert s == icl.line(s[0], code[s[0]]).rstrip("\n") == s[0] + code[s[0]]
    assert icl.episode({"q": "Z"}, 0, random.Random(0)) == ("q", "Z")
    with pytest.raises(ValueError, match="n_shots"):
        icl.episode(code, -1, random.Random(0))


def test_ideal_accuracy_by_hand():
    from course_lib.gpt.incontext import ideal_accuracy

    assert ideal_accuracy(0) == pytest.approx(1 / 26)
    # one shot: the query is its letter with probability 1/4, otherwise a guess
    assert ideal_accuracy(1) == pytest.approx(1 / 4 + 3 / 4 / 26)
    assert ideal_accuracy(2) == pytest.approx(1 - 9 / 16 + 9 / 16 / 26)
    assert all(ideal_accuracy(k) < ideal_accuracy(k + 1) for k in range(12))


def test_pretraining_text_keeps_the_text_and_adds_episodes_after_each_paragraph():
    from course_lib.gpt.incontext import is_episode, pretraining_text

    text = "First.\n\nSecond one.\n\nThird"
    mixed = pretraining_text(text, seed=3, per_paragraph=1)
    assert mixed == pretraining_text(text, seed=3, per_paragraph=1)
    assert mixed != pretraining_text(text, seed=4, per_paragraph=1)
    parts = mixed.split("\n\n")
    assert parts[0::2] == text.split("\n\n")
    for ep in parts[1::2]:
        lines = ep.split("\n")
        assert is_episode(ep) and 1 <= len(lines) <= 16
        pairs = {ln[0]: ln[1] for ln in lines}  # one code per episode: each letter one output
        assert all(ln == ln[0] + pairs[ln[0]] for ln in lines) and len(pairs) <= 4
    assert len(pretraining_text(text, seed=3, per_paragraph=2).split("\n\n")) == 9
    assert not is_episode("First.") and not is_episode("kR\nk")


def test_incontext_training_runs_and_evaluates(small_text):
    from course_lib.gpt import incontext as icl

    tiny = Recipe(
        name="tiny", n_layers=1, n_heads=2, d_model=16, context_length=32, batch_size=4,
        warmup_steps=2, decay_steps=10,
    )  # fmt: skip
    res = icl.train_incontext(small_text, tiny, max_steps=10, progress=False, eval_interval=5)
    assert res["history"][-1]["val_loss"] < res["history"][0]["val_loss"]
    assert set(res["accuracy"]) == set(icl.SHOTS)
    assert all(0 <= a <= 1 for a in res["accuracy"].values())
    with pytest.raises(ValueError, match="8 shots need"):
        short = GPT(GPTConfig(res["tokenizer"].vocab_size, 16, 1, 1, 8))
        icl.accuracy_by_shots(short, res["tokenizer"], shots=(8,), n_episodes=2)


def test_shipped_incontext_model_learns_from_its_prompt():
    from course_lib.gpt import incontext as icl

    model, tok, extra = icl.load_incontext()
    acc_ = icl.accuracy_by_shots(model.double(), tok, shots=(0, 1, 8), n_episodes=200)
    assert acc_[0] < 0.12  # no shot: a guess among 26 letters
    assert acc_[1] > acc_[0] + 0.1 and acc_[8] > acc_[1] + 0.2
    assert set(extra["accuracy"]) == {str(k) for k in icl.SHOTS}


@pytest.mark.parametrize("positions", ["learned", "rope"])
def test_attention_maps_are_the_weights_the_model_uses(positions):
    from course_lib.gpt.incontext import _maps_and_hidden

    cfg = GPTConfig(vocab_size=11, context_length=8, n_layers=2, n_heads=2, d_model=8,
                    positions=positions)  # fmt: skip
    model = _noisy(GPT(cfg, seed=0).double())
    toks = _tokens(cfg, (3, 8))
    maps, hidden = _maps_and_hidden(model, toks)
    with torch.no_grad():
        assert torch.allclose(hidden, model.hidden(toks), atol=1e-10)
    for w in maps:  # (B, h, L, L): rows are distributions over the earlier positions only
        assert w.shape == (3, 2, 8, 8) and torch.allclose(w.sum(-1), torch.ones_like(w[..., 0]))
        assert torch.all(w.triu(1) == 0)


def test_distance_episodes_show_the_query_once_at_its_distance():
    import random

    from course_lib.gpt.incontext import episode_at_distance, make_code

    rnd = random.Random(0)
    for dist in range(1, 9):
        code = make_code(rnd)
        prompt, answer = episode_at_distance(code, 8, dist, rnd)
        lines, q = prompt.split("\n")[:-1], prompt[-1]
        assert len(lines) == 8 and [ln[0] for ln in lines].count(q) == 1
        assert lines[8 - dist] == q + answer and answer == code[q]
    with pytest.raises(ValueError, match="at most n_shots"):
        episode_at_distance(code, 2, 3, rnd)


def test_nats_per_character_converts_the_same_total():
    from course_lib.gpt.units import nats_per_character

    assert nats_per_character(2.0, 10, 25) == pytest.approx(0.8)  # 20 nats over 25 characters
    with pytest.raises(ValueError):
        nats_per_character(2.0, 0, 25)


def test_distinctive_words_by_hand_and_bad_labels():
    from course_lib.gpt.datasets import distinctive_words

    rows = [("the treaty and the tariff", 0)] * 4 + [("the jobs and the treaty", 1)] * 2
    rows += [("tonight the jobs", 1)] * 2
    # fractions of pieces: tariff 4/4 vs 0/4, jobs 0/4 vs 4/4, tonight 0/4 vs 2/4, treaty 4/4 vs 2/4
    words = distinctive_words(rows, min_pieces=2, top=3)
    assert words[0][0] == "tariff" and words[1][:2] == ["jobs", "tonight"]
    assert distinctive_words(rows, width=3, min_pieces=2)[0] == ["the"]  # only "the" fits
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        distinctive_words([("a", 2)])


def test_shipped_char_vs_bpe_rows_convert_per_token_to_per_character():
    import json

    from course_lib.paths import data_path

    units = json.loads(data_path("gpt", "char_vs_bpe.json").read_text())
    assert "course_lib.gpt.units" in units["command"]
    assert sorted((r["tokenizer"], r["seed"]) for r in units["rows"]) == [
        ("bpe", 0), ("bpe", 1), ("char", 0), ("char", 1)
    ]  # fmt: skip
    for r in units["rows"]:
        assert r["history"][-1]["step"] == units["steps"]
        for h in r["history"]:
            per_char = h["val_loss_per_token"] / r["characters_per_token"]
            assert h["val_loss_per_char"] == pytest.approx(per_char, abs=2e-3)


def test_incontext_explorer_shows_the_episode_and_the_models_next_characters():
    from course_lib.gpt.explorer_practice import model_and_tokenizer
    from course_lib.gpt.widget import episode_rows, render_episode

    model, tok = model_and_tokenizer()
    prompt, answer, rows = episode_rows(model, tok, 4, 0)
    assert prompt.count("\n") == 4 and answer.isupper() and len(answer) == 1
    assert len(rows) == 5 and sum(p for _, p in rows) <= 1 + 1e-9
    assert [p for _, p in rows] == sorted((p for _, p in rows), reverse=True)
    assert episode_rows(model, tok, 4, 0) == (prompt, answer, rows)  # the same episode each time
    page = render_episode(model, tok, 0, 1)
    assert "the prompt does not show it" in page and "<table>" in page
    with pytest.raises(ValueError, match="shots"):
        episode_rows(model, tok, -1, 0)
