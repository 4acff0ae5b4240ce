"""Learning from human feedback (Chapter 10): PPO against DPO over seeds, with seconds per step.

All runs start from the same SFT policy (the chapter's 2-layer GPT of width 32, 60 SFT steps on
300 words) and are section 10.6's seed study (:func:`course_lib.feedback.study.seed_study`):
per seed, PPO with GAE and a value head, PPO with the leave-one-out baseline (both 40
iterations against the exact judge, beta 0.05) and DPO (60 steps on 1656 comparisons, beta 0.1).
A PPO iteration samples 4 answers for each of 16 prompts (8 sampling steps), scores them,
evaluates the policy (and its values) and the frozen reference, and takes 2 gradient steps on the
clipped objective; a DPO step is one gradient step on 64 comparisons (the policy's forward and
backward on chosen and rejected answers; the reference's log-probabilities are computed once,
before training, and that time is counted in the first step's share).

One row per method: mean, standard deviation (over seeds, ddof 0), min and max of the share of
sampled answers right on 200 held-out words, the lowest greedy accuracy, the mean KL to the SFT
model (nats per answer), and the mean seconds per PPO iteration or DPO step, so that time per
step can be read against what the steps buy and how reliably.

``--quick``: one seed, 2 iterations and 2 steps, 10 SFT steps.
"""

from __future__ import annotations

import time

from course_lib.feedback import pipeline as P
from course_lib.feedback import study
from course_lib.feedback import tasks as T

TITLE = (
    "Feedback: PPO vs DPO over 3 seeds, seconds per PPO iteration and per DPO step (tiny GPT, CPU)"
)


def run(quick: bool = False) -> list[dict]:
    words = T.reverse_words()
    policy = P.make_policy(0)
    P.train_sft(
        policy,
        [w + "=" for w in words[:300]],
        [w[::-1] + "." for w in words[:300]],
        steps=10 if quick else 60,
    )
    test = words[1000:1200]
    pairs = T.preference_pairs(words[300:600], k=4, seed=1)
    sampled = round(P.sampled_accuracy(policy, test), 3)
    start = {
        "method": "SFT (start)",
        "runs": 1,
        "accuracy_mean": sampled,
        "accuracy_std": 0.0,
        "accuracy_min": sampled,
        "accuracy_max": sampled,
        "kl_mean": 0.0,
        "greedy_min": round(P.accuracy(policy, test), 3),
        "seconds_per_step": 0.0,
    }
    rows = study.seed_study(
        policy,
        words[:600],
        pairs,
        test,
        seeds=(0,) if quick else (0, 1, 2),
        ppo_iterations=2 if quick else 40,
        dpo_steps=2 if quick else 60,
        timer=time.perf_counter,
    )
    return [start, *study.summarise(rows)]


def summary(rows: list[dict]) -> str:
    ppo = next(r for r in rows if r["method"] == "PPO (GAE)")
    dpo = next(r for r in rows if r["method"] == "DPO")
    ratio = ppo["seconds_per_step"] / max(dpo["seconds_per_step"], 1e-12)
    return f"one PPO iteration costs {ratio:.1f} DPO steps"
