"""Learning from human feedback (Chapter 10): PPO against DPO over seeds, with seconds per step.

The runs of section 10.6's study (:func:`course_lib.feedback.study.run_study`) over three seeds
at the default learning rates (1e-3; the study itself sweeps them), timed: from each seed's SFT
policy (the chapter's 2-layer GPT of width 32, 60 SFT steps on 300 words), PPO with GAE against a reward model trained on DPO's comparisons (at each beta of the
study), PPO against the exact judge with GAE and with the leave-one-out baseline (40 iterations,
beta 0.05), and DPO (60 steps of 64 comparisons, at each beta). A PPO iteration samples 4 answers
for each of 16 prompts (8 sampling steps), scores them, evaluates the policy (and its values)
and the frozen reference, and takes 2 gradient steps on the clipped objective; a DPO step is one
gradient step on 64 comparisons (the reference's log-probabilities are computed once, before
training, and counted in the first step's share). The reward model's own training is not timed.

One row per (method, beta): mean and standard error (over seeds) of the exact probability of the
right answer on 200 held-out words, the worst and best seed, the mean greedy accuracy and KL to
the SFT model, and the mean seconds per PPO iteration or DPO step.

``--quick``: one seed, 2 iterations and 2 steps.
"""

from __future__ import annotations

import time

import numpy as np

from course_lib.feedback import study

TITLE = "Feedback: PPO vs DPO on the same comparisons, seconds per PPO iteration and DPO step (CPU)"


def run(quick: bool = False) -> list[dict]:
    cfg = {"seeds": [0, 1, 2], "ppo_lrs": [1e-3], "dpo_lrs": [1e-3]}
    if quick:
        cfg |= {"seeds": [0], "rm_steps": 5, "ppo_iterations": 2, "dpo_steps": 2}
    record = study.run_study(cfg, timer=time.perf_counter)
    rows = study.summarise(record["runs"])
    for row in rows:
        mine = [
            r["seconds_per_step"]
            for r in record["runs"]
            if (r["method"], r["beta"]) == (row["method"], row["beta"])
        ]
        row["seconds_per_step"] = round(float(np.mean(mine)), 4)
    # one table: a column that only some methods have (a reward model's pair accuracy, DPO's
    # implicit one) is empty (None) in the other rows
    columns = dict.fromkeys(key for row in rows for key in row)
    return [{key: row.get(key) for key in columns} for row in rows]


def summary(rows: list[dict]) -> str:
    ppo = next(r for r in rows if r["method"] == study.JUDGE)
    dpo = next(r for r in rows if r["method"] == study.DPO)
    ratio = ppo["seconds_per_step"] / max(dpo["seconds_per_step"], 1e-12)
    return f"one PPO iteration (exact judge, GAE) costs {ratio:.1f} DPO steps"
