"""Every chapter's checkers across the grader's boundary, with a right answer and with fresh inputs.

``./course grade`` runs a checker in the grader's process and the learner's function in the
submission's: the checker gets a proxy, its arguments cross as plain data and the result comes
back as plain data (course_lib/checker.py's docstring has the rules). Here each checker of all
13 chapters gets a right answer through :class:`tools.grade_remote.Loopback`, which sends every
call and reply through that format exactly as a grading run does, on the notebook's fixed inputs
and on two other runs' fresh ones; it must pass each time. A new checker must be added to
``RIGHT`` (the test lists the checkers of every ``exercises.py`` and fails on one it misses).
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest

import course_lib
from course_lib import checker
from tools.grade_remote import Loopback


def _matmul():
    return {
        "outer_product_sum": [lambda X, Y: np.asarray(X) @ np.asarray(Y)],
        "linear_weight": [lambda W: np.asarray(W).T.copy()],
        "layer_flops": [lambda b, L, di, do: 2 * b * L * di * do + b * L * do],
    }


def _softmax():
    from course_lib.softmax import reference as ref
    from course_lib.softmax.exercises import _top_p_mask

    def smoothed(z, t, eps):
        q = np.full(np.shape(z), eps / np.size(z))
        q[t] += 1 - eps
        return ref.softmax(np.asarray(z, dtype=float)) - q

    return {
        "stable_softmax": [ref.softmax],
        "softmax_jacobian": [ref.softmax_jacobian],
        "smoothed_ce_gradient": [smoothed],
        "top_p": [_top_p_mask],
    }


def _text_metrics():
    from course_lib.text_metrics import clipped_counts, rouge_n
    from course_lib.text_metrics.exercises import _reference_bp

    return {
        "clipped_matches": [clipped_counts],
        "corpus_brevity_penalty": [_reference_bp],
        "rouge_n_eq12": [lambda c, r, n: rouge_n(c, r, n, tokenize="none")],
    }


def _attention():
    from course_lib.attention.exercises import _causal, _cross

    def heads(w, h):
        parts = np.split(np.asarray(w), 3)
        return tuple(p.reshape(h, p.shape[0] // h, p.shape[1]).transpose(0, 2, 1) for p in parts)

    return {
        "cross_attention": [_cross],
        "previous_token_head": [lambda L: (10 * np.eye(L, k=-1), 10 * np.eye(L))],
        "torch_head_weights": [heads],
        "causal_attention": [_causal],
    }


def _block():
    import course_lib.block.reference as ref
    from course_lib.block.counting import count_parameters
    from course_lib.block.exercises import (
        DECODER_CONFIG,
        PRE_LN_CONFIG,
        _gpt_config,
        _layer_norm_grad,
    )

    def decoder(y, m, p):
        causal = np.tril(np.ones((y.shape[-2],) * 2, bool))
        return ref.decoder_block(y, m, p, DECODER_CONFIG, self_mask=causal)

    return {
        "layer_norm": [lambda x, g, b, eps=1e-5: ref.layer_norm(x, g, b, eps)],
        "layer_norm_backward": [lambda x, g, dy, eps=1e-5: _layer_norm_grad(x, g, dy, eps)],
        "pre_ln_block": [lambda x, p: ref.transformer_block(x, p, PRE_LN_CONFIG)],
        "decoder_block": [decoder],
        "gpt_parameters": [lambda n, d, V, C: count_parameters(_gpt_config(n, d, V, C))],
    }


def _positions():
    from course_lib.positions.exercises import _rotary
    from course_lib.positions.reference import rotary_embedding, sinusoidal_encoding, skew

    return {
        "sinusoidal_table": [sinusoidal_encoding],
        "rotary": [rotary_embedding],
        "skew_step": [skew],
        "rotary_half": [lambda x, p: _rotary(x, p, layout="concatenated")],
        "scheme_prediction": ["ALiBi", "alibi"],
    }


def _bpe():
    from course_lib.bpe.exercises import _gpt2
    from course_lib.bpe.toy import merge_vocab
    from course_lib.bpe.train import GPT2_PATTERN

    _, tik = _gpt2()
    return {
        "gpt2_pattern": [GPT2_PATTERN],
        "gpt2_tokenizer": [
            lambda text, allowed_special=frozenset(): tik.encode(
                text, allowed_special=allowed_special
            ),
            lambda ids: tik.decode(list(ids)),
        ],
        "frequency_vs_rank": [" 1000000"],
        "merge_vocab": [merge_vocab],
        "special_tokens": [
            lambda text, allowed_special=frozenset(): tik.encode(
                text, allowed_special=set(allowed_special)
            )
        ],
    }


def _gpt():
    import torch.nn.functional as F

    from course_lib.gpt.exercises import _muon_ema_step, _step
    from course_lib.gpt.sampling import next_token_probs

    return {
        "sampling_probs": [next_token_probs],
        "cached_step": [_step],  # fills the cache it is given, in place
        "muon_ema": [_muon_ema_step],
        "next_token_loss": [
            lambda logits, x, y: F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
            )
        ],
    }


def _bert():
    from course_lib.bert.masking import corrupt
    from course_lib.bert.wordpiece import encode_word

    def span(s, e, m):
        pairs = [(i, j) for i in range(len(s)) for j in range(i, min(i + m, len(s)))]
        return max(pairs, key=lambda ij: s[ij[0]] + e[ij[1]])

    def ce(z, y):
        import torch.nn.functional as F

        return F.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1), ignore_index=-100)

    return {
        "corrupt": [lambda t, u, r, m, s: corrupt(t, u, r, mask_id=m, special_ids=s)],
        "head_losses": [ce, lambda s, e, a, b: (ce(s, a) + ce(e, b)) / 2, ce],
        "best_span": [span],
        "wordpiece_encode": [encode_word],
        "padding_mask": [lambda m: np.asarray(m)[:, None, None, :]],
        "greedy_counterexample": ["abc", {"ab", "a", "##bc"}],
    }


def _feedback():
    import torch

    from course_lib.feedback import ppo

    return {
        "loo_advantages": [lambda t: ppo.loo_advantages(torch.as_tensor(t)).numpy()],
        "masked_gae": [
            lambda r, v, m, g, lam: ppo.advantages_and_returns(r, v, m, g, lam, False)[0]
        ],
    }


def _long_sequences():
    from course_lib.long_sequences.exercises import _update

    def by_loop(q, k, v, w):
        out = np.zeros_like(v)
        for i in range(len(q)):
            j = np.arange(max(0, i - w), min(len(q), i + w + 1))
            x = k[j] @ q[i] / np.sqrt(q.shape[1])
            out[i] = np.exp(x - x.max()) @ v[j] / np.exp(x - x.max()).sum()
        return out

    return {"window_attention": [by_loop], "online_softmax_update": [_update]}


def _number_formats():
    import torch

    import course_lib.number_formats.reference as ref

    def int8_in_float32(W, B):
        blocks = W.float().view(-1, B)  # (n_blocks, B)
        scale = blocks.abs().amax(dim=1) / 127
        safe = torch.where(scale > 0, scale, 1.0)
        return torch.round(blocks / safe[:, None]).to(torch.int8).view(W.shape), scale

    def nf4(W, B):
        blocks = np.asarray(W, dtype=float).reshape(-1, B)
        absmax = np.abs(blocks).max(axis=1)
        x = blocks / np.where(absmax > 0, absmax, 1.0)[:, None]
        return np.abs(x[..., None] - ref.nf4_codebook()).argmin(axis=-1).reshape(-1), absmax

    def to_bf16_bits(bits):
        if (bits >> 23) & 0xFF == 0xFF and bits & 0x7FFFFF:
            return (bits >> 16) | 0x40
        return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16

    return {
        "decode_bfloat16": [lambda bits: float(ref.decode(bits, "bfloat16"))],
        "absmax_int8_in_float32": [int8_in_float32],
        "nf4_codes": [nf4],
        "round_to_bfloat16": [to_bf16_bits],
    }


def _peft():
    from course_lib.peft import reference as ref
    from course_lib.peft.counting import qlora_budget
    from course_lib.peft.spectrum import top_r_energy

    def gb(n, d, f, L, r):
        return sum(v for k, v in qlora_budget(n, d, f, L, r).items() if k != "trained") / 1e9

    def prefix_share(q, k, pk):  # the prefix's share of each token's causal attention
        q, k, pk = (np.asarray(a, dtype=float) for a in (q, k, pk))
        T, d = q.shape[-2:]
        tokens = q @ k.swapaxes(-1, -2) / np.sqrt(d)  # (B, h, T, T)
        tokens = np.where(np.tri(T, dtype=bool), tokens, -np.inf)
        scores = np.concatenate([q @ pk.swapaxes(-1, -2) / np.sqrt(d), tokens], axis=-1)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        return p[..., : pk.shape[-2]].sum(-1) / p.sum(-1)

    return {
        "prefix_attention": [ref.prefix_attention],
        "qlora_gb": [gb],
        "top_r_energy": [top_r_energy],
        "lora_merge": [ref.lora_weight],
        "dora_weight": [ref.dora_weight],
        "prefix_share": [prefix_share],
    }


RIGHT = {
    "matmul": _matmul, "softmax": _softmax, "text_metrics": _text_metrics, "attention": _attention,
    "block": _block, "positions": _positions, "bpe": _bpe, "gpt": _gpt, "bert": _bert,
    "feedback": _feedback, "long_sequences": _long_sequences, "number_formats": _number_formats,
    "peft": _peft,
}  # fmt: skip
HELPERS = {
    "encode_by_frequency", "attend_in_blocks", "UNSEEN", "DECODER_CONFIG", "PRE_LN_CONFIG",
    "written_code_explanation",
}  # fmt: skip


def _chapters() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.iter_modules(course_lib.__path__)
        if m.ispkg and importlib.util.find_spec(f"course_lib.{m.name}.exercises")
    )


@pytest.mark.slow
def test_every_checker_has_a_right_answer_here():
    for chapter in _chapters():
        module = importlib.import_module(f"course_lib.{chapter}.exercises")
        checkers = {n for n in module.__all__ if callable(getattr(module, n))} - HELPERS
        assert chapter in RIGHT, f"course_lib.{chapter}.exercises: add its checkers to RIGHT"
        assert checkers == set(RIGHT[chapter]()), (chapter, checkers ^ set(RIGHT[chapter]()))


@pytest.mark.slow
@pytest.mark.parametrize("chapter", sorted(RIGHT))
def test_a_right_answer_passes_across_the_boundary_on_any_runs_inputs(chapter):
    module = importlib.import_module(f"course_lib.{chapter}.exercises")
    failures = []
    for run_seed in (None, 1, 2):
        checker.fresh_inputs(run_seed)
        try:
            for name, answers in RIGHT[chapter]().items():
                link = Loopback()
                outcome = getattr(module, name)(*[link.proxy(a) for a in answers])
                if not outcome.passed:
                    failures.append((run_seed, name, str(outcome)))
        finally:
            checker.fresh_inputs(None)
    assert not failures, failures


def test_a_wrong_answer_fails_across_the_boundary_with_the_notebooks_message():
    from course_lib.matmul import exercises as check

    def wrong(X, Y):
        return 2 * (np.asarray(X) @ np.asarray(Y))

    here = check.outer_product_sum(wrong)
    there = check.outer_product_sum(Loopback().proxy(wrong))
    assert not there.passed and there.details == here.details


def test_a_learners_exception_reads_as_in_a_notebook():
    from course_lib.matmul import exercises as check

    def broken(X, Y):
        return X @ Y @ Y.T @ undefined_name  # noqa: F821

    here, there = check.outer_product_sum(broken), check.outer_product_sum(Loopback().proxy(broken))
    assert there.details == here.details and "NameError" in there.details[0]


@pytest.mark.slow
def test_memory_is_measured_in_the_submissions_process(tmp_path):
    """Chapter 11's checker measures what the learner's function allocates; graded, that
    function runs in another process, whose resident growth the grader reads from outside."""
    import nbformat

    from tools.grade import Limits, grade_class, read_sheet
    from tools.handouts import worksheet

    chapter = nbformat.read(checker_root() / "notebooks" / "11_long_sequences.ipynb", as_version=4)
    hand, key = worksheet(chapter), worksheet(chapter, solutions=True)
    dense = nbformat.from_dict(key)
    at = max(i for i, c in enumerate(dense.cells) if "def window_attention" in c.source)
    dense.cells.insert(at + 1, nbformat.v4.new_code_cell(
        "def window_attention(q, k, v, w):\n"
        "    s = q @ k.T / np.sqrt(q.shape[1])  # (L, L): what the exercise asks to avoid\n"
        "    i = np.arange(len(q))\n"
        "    s = np.where(np.abs(i[:, None] - i[None, :]) <= w, s, -np.inf)\n"
        "    p = np.exp(s - s.max(-1, keepdims=True))\n"
        "    return (p / p.sum(-1, keepdims=True)) @ v"
    ))  # fmt: skip
    paths = [tmp_path / "key.ipynb", tmp_path / "dense.ipynb"]
    nbformat.write(key, paths[0])
    nbformat.write(dense, paths[1])
    rows = grade_class(read_sheet(hand), paths, Limits(cell_timeout=30, total_timeout=120), 1)
    label = "ex-long_sequences-window"
    assert rows[0].results[label] == (True, "")
    assert not rows[1].results[label][0] and "(L, L) matrices" in rows[1].results[label][1]


def checker_root():
    from pathlib import Path

    return Path(__file__).resolve().parent.parent
