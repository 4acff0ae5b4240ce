"""PPO against DPO from one SFT model, over several seeds (Chapter 10).

:func:`seed_study` trains each method once per seed from the same SFT policy and records what
it reaches on held-out words: the share of sampled answers that are right, and how far the
policy moved from the SFT model (the KL per answer, estimated on its own samples). The seed
changes only the method's own randomness (PPO's prompts and samples, DPO's batches), so the
spread over seeds measures the method's stability, not the SFT model's. With ``timer`` it also
records the seconds per PPO iteration or DPO step (``benchmarks/feedback.py``); the notebook
calls it without.

>>> summarise([{"method": "a", "accuracy": 0.5, "kl": 0.1}, {"method": "a", "accuracy": 0.7, "kl": 0.3}])
[{'method': 'a', 'runs': 2, 'accuracy_mean': 0.6, 'accuracy_std': 0.1, 'accuracy_min': 0.5, 'accuracy_max': 0.7, 'kl_mean': 0.2}]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from course_lib.feedback import accelerated as acc
from course_lib.feedback import pipeline as P
from course_lib.feedback.tasks import judge
from course_lib.gpt.model import GPT

__all__ = ["exact_reward", "policy_kl", "seed_study", "summarise"]


def exact_reward(words: Sequence[str], responses: Sequence[str]) -> np.ndarray:
    """1 for an exactly right answer, else 0: the judge as a reward function."""
    return np.array([float(judge(w, r)) for w, r in zip(words, responses, strict=True)])


@P.one_thread
@torch.no_grad()
def policy_kl(model: GPT, reference: GPT, words: Sequence[str], seed: int = 0) -> float:
    """Mean over ``words`` of sum_t log pi(y_t)/pi_ref(y_t) on the model's own samples (nats)."""
    tokens, mask = P.sample(model, [w + "=" for w in words], seed=seed)
    logp = P.sequence_logprobs(model, tokens, P.PROMPT_LEN)  # (B, T)
    logp_ref = P.sequence_logprobs(reference, tokens, P.PROMPT_LEN)  # (B, T)
    return float((acc.kl_penalty(logp, logp_ref) * mask).sum(1).mean())


def seed_study(
    sft: GPT,
    rl_words: Sequence[str],
    pairs: Sequence[tuple[str, str, str]],
    test_words: Sequence[str],
    seeds: Sequence[int] = (0, 1, 2),
    ppo_iterations: int = 40,
    dpo_steps: int = 60,
    methods: Sequence[str] = ("PPO (GAE)", "PPO (leave-one-out)", "DPO"),
    timer: Callable[[], float] | None = None,
) -> list[dict[str, Any]]:
    """One row per (method, seed): held-out sampled and greedy accuracy, KL to the SFT model, and with
    ``timer`` (e.g. ``time.perf_counter``) the seconds per iteration or step.

    PPO trains against the exact judge with beta = 0.05 (section 10.4's run), DPO on ``pairs``
    with beta = 0.1 (section 10.6's run).
    """
    known = {"PPO (GAE)", "PPO (leave-one-out)", "DPO"}
    if not set(methods) <= known:
        raise ValueError(f"methods must be among {sorted(known)}, got {list(methods)}")
    rows = []
    for method in methods:
        for seed in seeds:
            start = timer() if timer else 0.0
            if method == "DPO":
                model, _ = P.train_dpo(sft, pairs, beta=0.1, steps=dpo_steps, seed=seed)
                n = dpo_steps
            else:
                adv = "gae" if method == "PPO (GAE)" else "loo"
                model, _ = P.train_rl(
                    sft, rl_words, exact_reward, beta=0.05, iterations=ppo_iterations,
                    seed=seed, advantage=adv,
                )  # fmt: skip
                n = ppo_iterations
            row: dict[str, Any] = {"method": method, "seed": seed}
            if timer:
                row["seconds_per_step"] = (timer() - start) / n
            row["accuracy"] = P.sampled_accuracy(model, test_words)
            row["greedy_accuracy"] = P.accuracy(model, test_words)
            row["kl"] = policy_kl(model, sft, test_words)
            rows.append(row)
    return rows


def summarise(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per method: the number of runs, mean, standard deviation (ddof 0), min and max of the
    accuracy, the lowest greedy accuracy, the mean KL, and the mean seconds per step where timed; rounded to 3 decimals."""
    out = []
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        a = np.array([r["accuracy"] for r in mine])
        s = {
            "method": method,
            "runs": len(mine),
            "accuracy_mean": round(float(a.mean()), 3),
            "accuracy_std": round(float(a.std()), 3),
            "accuracy_min": round(float(a.min()), 3),
            "accuracy_max": round(float(a.max()), 3),
            "kl_mean": round(float(np.mean([r["kl"] for r in mine])), 3),
        }
        if all("greedy_accuracy" in r for r in mine):
            s["greedy_min"] = round(float(min(r["greedy_accuracy"] for r in mine)), 3)
        if all("seconds_per_step" in r for r in mine):
            s["seconds_per_step"] = round(float(np.mean([r["seconds_per_step"] for r in mine])), 4)
        out.append(s)
    return out


if __name__ == "__main__":  # a quick look: python -m course_lib.feedback.study
    from course_lib.feedback import tasks as T

    words = T.reverse_words()
    sft = P.make_policy(0)
    P.train_sft(sft, [w + "=" for w in words[:300]], [w[::-1] + "." for w in words[:300]], 60)
    pairs = T.preference_pairs(words[300:600], k=4, seed=1)
    rows = seed_study(sft, words[:600], pairs, words[1000:1200], timer=time.perf_counter)
    for r in summarise(rows):
        print(r)
