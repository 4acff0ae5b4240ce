"""Masked-LM training throughput: the course's BERT against ``transformers``' ``BertForMaskedLM``.

Both models have the same configuration and the same weights (copied in with
:func:`course_lib.bert.hf.to_hf`); one training step is forward, the MLM loss on the chosen
positions, backward and an AdamW update, on the same masked batch (``mask_tokens``: 15% of the
positions carry a label). CPU, float32, dropout off, eager attention on the Hugging Face side.

Each side computes its loss the way it trains: ours with :meth:`course_lib.bert.model.Bert.mlm_loss`,
which runs the MLM head (transform and the (d, V) output product) only at the labelled
positions; ``BertForMaskedLM(input_ids, labels=...)`` runs it at every position and lets the
cross-entropy skip the unlabelled ones. The loss and the gradients are the same
(``tests/test_bert_speed.py``). Reported: tokens per second (batch x length / the best step time,
interleaved rounds) and our speed relative to theirs (target: at least 1.0).
"""

from __future__ import annotations

import numpy as np
import torch

TITLE = "Masked-LM training step (forward + backward + AdamW) on the CPU: course BERT vs BertForMaskedLM"
THREADS = 1  # small models on a shared machine: one thread measures the code, not the scheduler


def _sizes(quick: bool):
    from course_lib.bert.config import BertConfig, bert_block

    if quick:
        return [("tiny", BertConfig(1024, 32, 1, bert_block(32, 2)), 8, 32)]
    return [
        ("course SMALL", BertConfig(1024, 80, 2, bert_block(64, 4)), 32, 32),
        ("4 x 256", BertConfig(8192, 128, 4, bert_block(256, 4)), 16, 128),
    ]


def _measure(name: str, cfg, B: int, L: int, rounds: int) -> dict:
    from course_lib.bert.hf import to_hf
    from course_lib.bert.masking import mask_tokens
    from course_lib.bert.model import Bert
    from course_lib.measure import best_times

    rng = np.random.default_rng(0)
    tokens = rng.integers(4, cfg.vocab_size, (B, L))
    x, y = mask_tokens(tokens, rng, mask_id=3, vocab_size=cfg.vocab_size, special_ids=(0, 1, 2, 3))
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    ours = Bert(cfg, seed=0).train()
    theirs = to_hf(ours.numpy_parameters(), cfg, "masked_lm", dtype=torch.float32).train()
    opt_o = torch.optim.AdamW(ours.parameters(), lr=1e-4)
    opt_t = torch.optim.AdamW(theirs.parameters(), lr=1e-4)

    def step_ours():
        loss = ours.mlm_loss(x, y)  # the head only at the labelled positions
        opt_o.zero_grad()
        loss.backward()
        opt_o.step()

    def step_theirs():
        loss = theirs(input_ids=x, labels=y).loss
        opt_t.zero_grad()
        loss.backward()
        opt_t.step()

    t = best_times({"ours": step_ours, "hf": step_theirs}, rounds=rounds)
    return {
        "model": name, "params": sum(p.numel() for p in ours.parameters()), "batch": B, "length": L,
        "course tokens/s": B * L / t["ours"], "transformers tokens/s": B * L / t["hf"],
        "speed-up": t["hf"] / t["ours"],
    }  # fmt: skip


def run(quick: bool = False) -> list[dict]:
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        return [_measure(*size, rounds=3 if quick else 5) for size in _sizes(quick)]
    finally:
        torch.set_num_threads(threads)
