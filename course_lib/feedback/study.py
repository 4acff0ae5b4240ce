"""PPO against DPO from the same preference data, over seeds (Chapter 10, section 10.6).

Every run starts from one SFT policy (the chapter's 2-layer GPT of width 32, 60 SFT steps on 300
words) and is scored on 200 held-out words. The methods:

* ``PPO + learned RM``: a reward model trained (200 steps, its own seed) on the comparisons that
  DPO sees, then PPO (GAE, 40 iterations of 64 samples) against its score, for several KL
  coefficients beta. This is InstructGPT's pipeline, and the fair comparison with DPO.
* ``PPO + exact judge (RLVR)`` and ``PPO-LOO + exact judge (RLVR)``: the same PPO against the
  program that checks the answer (reward 1 or 0), with GAE or with the leave-one-out baseline of
  RLOO; "RL with verifiable rewards". A reference: no preference data, an oracle reward.
* ``DPO``: 60 steps of 64 comparisons on those same comparisons, for several beta.

The seed changes each method's own randomness (the reward model's batches, PPO's prompts and
samples, DPO's batches), so the spread over seeds measures the method, not the SFT model.
Every PPO run logs, per iteration, the mean reward it was trained on (the proxy), the share of its
samples the judge calls right and the KL to the SFT model; every DPO run logs, per step, the
chosen and rejected log-ratios. The shipped file ``data/feedback/seed_study.json`` was made by::

    OMP_NUM_THREADS=1 nice -n 10 python -m course_lib.feedback.study data/feedback/seed_study.json

>>> rows = summarise([{"method": "a", "beta": 0.1, "sampled": s, "greedy": 1.0, "kl": 0.2}
...                   for s in (0.5, 0.7)])
>>> rows[0]["sampled_mean"], rows[0]["sampled_se"], rows[0]["runs"]
(0.6, 0.1, 2)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from course_lib.feedback import accelerated as acc
from course_lib.feedback import pipeline as P
from course_lib.feedback import tasks as T
from course_lib.feedback.tasks import judge
from course_lib.gpt.model import GPT

__all__ = [
    "COMMAND",
    "CONFIG",
    "METHODS",
    "exact_reward",
    "load_study",
    "make_setting",
    "policy_kl",
    "run_study",
    "summarise",
]

RM, JUDGE, JUDGE_LOO, DPO = (
    "PPO + learned RM",
    "PPO + exact judge (RLVR)",
    "PPO-LOO + exact judge (RLVR)",
    "DPO",
)
#: The methods, in the order of the table.
METHODS = (RM, DPO, JUDGE, JUDGE_LOO)
#: The settings of the shipped study.
CONFIG: dict[str, Any] = {
    "seeds": [0, 1, 2, 3, 4],
    "sft_steps": 60,
    "rm_steps": 200,
    "ppo_iterations": 40,
    "prompts_per_batch": 16,
    "samples_per_prompt": 4,
    "dpo_steps": 60,
    "dpo_batch": 64,
    "rm_betas": [0.05, 0.2, 0.5, 1.0, 2.0],
    "judge_beta": 0.05,
    "dpo_betas": [0.1, 0.3, 1.0],
}
COMMAND = (
    "OMP_NUM_THREADS=1 nice -n 10 python -m course_lib.feedback.study data/feedback/seed_study.json"
)


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


def make_setting(sft_steps: int = 60) -> dict[str, Any]:
    """The chapter's SFT policy and data: the policy, the RL prompts, the comparisons, the test words."""
    words = T.reverse_words()
    sft_words, rm_words = words[:300], words[300:600]
    policy = P.make_policy(0)
    P.train_sft(policy, [w + "=" for w in sft_words], [w[::-1] + "." for w in sft_words], sft_steps)
    return {
        "policy": policy,
        "rl_words": sft_words + rm_words,
        "pairs": T.preference_pairs(rm_words, k=4, seed=1),
        "held_out_pairs": T.preference_pairs(words[1000:1200], k=4, seed=2),
        "test_words": words[1000:1200],
    }


def _rounded(xs: Sequence[float]) -> list[float]:
    return [round(float(x), 3) for x in xs]


def _evaluate(model: GPT, sft: GPT, test_words: Sequence[str]) -> dict[str, float]:
    return {
        "sampled": round(P.sampled_accuracy(model, test_words), 3),
        "greedy": round(P.accuracy(model, test_words), 3),
        "kl": round(policy_kl(model, sft, test_words), 3),
    }


def run_study(
    config: dict[str, Any] | None = None,
    methods: Sequence[str] = METHODS,
    timer: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """Run every (method, beta, seed) of ``config`` (default :data:`CONFIG`); return the record.

    The record holds the config, the SFT model's scores and one entry per run with its held-out
    scores (``sampled``, ``greedy``, ``kl``), its log and, with ``timer``, the seconds per PPO
    iteration or DPO step.
    """
    cfg = {**CONFIG, **(config or {})}
    if not set(methods) <= set(METHODS):
        raise ValueError(f"methods must be among {list(METHODS)}, got {list(methods)}")
    s = make_setting(cfg["sft_steps"])
    sft, test = s["policy"], s["test_words"]
    runs: list[dict[str, Any]] = []
    ppo_args = {
        "iterations": cfg["ppo_iterations"],
        "prompts_per_batch": cfg["prompts_per_batch"],
        "samples_per_prompt": cfg["samples_per_prompt"],
    }
    for seed in cfg["seeds"]:
        if RM in methods:
            rm, _ = P.train_reward_model(sft, s["pairs"], steps=cfg["rm_steps"], seed=seed)
            rm_accuracy = round(P.pair_accuracy(rm, s["held_out_pairs"]), 3)

            def rm_reward(ws: Sequence[str], rs: Sequence[str], rm: Any = rm) -> np.ndarray:
                with torch.no_grad():
                    return rm.score(ws, rs).numpy()

            for beta in cfg["rm_betas"]:
                start = timer() if timer else 0.0
                model, log = P.train_rl(
                    sft, s["rl_words"], rm_reward, beta=beta, seed=seed, **ppo_args
                )
                run = {"method": RM, "beta": beta, "seed": seed, "rm_pair_accuracy": rm_accuracy}
                if timer:
                    run["seconds_per_step"] = (timer() - start) / cfg["ppo_iterations"]
                run |= _evaluate(model, sft, test)
                run["log"] = {f: _rounded(getattr(log, f)) for f in ("reward", "accuracy", "kl")}
                runs.append(run)
        for method, adv in ((JUDGE, "gae"), (JUDGE_LOO, "loo")):
            if method not in methods:
                continue
            start = timer() if timer else 0.0
            model, log = P.train_rl(
                sft, s["rl_words"], exact_reward, beta=cfg["judge_beta"], seed=seed,
                advantage=adv, **ppo_args,
            )  # fmt: skip
            run = {"method": method, "beta": cfg["judge_beta"], "seed": seed}
            if timer:
                run["seconds_per_step"] = (timer() - start) / cfg["ppo_iterations"]
            run |= _evaluate(model, sft, test)
            run["log"] = {f: _rounded(getattr(log, f)) for f in ("reward", "accuracy", "kl")}
            runs.append(run)
        if DPO in methods:
            for beta in cfg["dpo_betas"]:
                start = timer() if timer else 0.0
                model, dlog = P.train_dpo(
                    sft, s["pairs"], beta=beta, steps=cfg["dpo_steps"], batch=cfg["dpo_batch"],
                    seed=seed,
                )  # fmt: skip
                run = {"method": DPO, "beta": beta, "seed": seed}
                if timer:
                    run["seconds_per_step"] = (timer() - start) / cfg["dpo_steps"]
                run |= _evaluate(model, sft, test)
                run["log"] = {f: _rounded(getattr(dlog, f)) for f in ("loss", "chosen", "rejected")}
                runs.append(run)
    return {
        "command": COMMAND,
        "config": cfg,
        "n_comparisons": len(s["pairs"]),
        "sft": _evaluate(sft, sft, test),
        "runs": runs,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def summarise(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (method, beta), in the order first seen: the number of seeds, the mean and
    standard error (ddof 1) of the sampled accuracy, its min and max, the mean greedy accuracy
    and the mean KL to the SFT model; rounded to 3 decimals."""
    out = []
    keys = dict.fromkeys((r["method"], r["beta"]) for r in runs)
    for method, beta in keys:
        mine = [r for r in runs if (r["method"], r["beta"]) == (method, beta)]
        a = np.array([r["sampled"] for r in mine], dtype=float)
        se = float(a.std(ddof=1) / np.sqrt(len(a))) if len(a) > 1 else float("nan")
        out.append(
            {
                "method": method,
                "beta": beta,
                "runs": len(mine),
                "sampled_mean": round(float(a.mean()), 3),
                "sampled_se": round(se, 3),
                "sampled_min": round(float(a.min()), 3),
                "sampled_max": round(float(a.max()), 3),
                "greedy_mean": round(float(np.mean([r["greedy"] for r in mine])), 3),
                "kl_mean": round(float(np.mean([r["kl"] for r in mine])), 3),
            }
        )
    return out


def load_study(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The shipped study (``data/feedback/seed_study.json``) or the JSON at ``path``."""
    if path is None:
        from course_lib.paths import data_path

        path = data_path("feedback", "seed_study.json")
    return json.loads(Path(path).read_text())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="where to write the JSON record")
    parser.add_argument("--quick", action="store_true", help="one seed, 2 iterations and steps")
    args = parser.parse_args(argv)
    quick = {"seeds": [0], "rm_steps": 5, "ppo_iterations": 2, "dpo_steps": 2}
    start = time.perf_counter()
    record = run_study(quick if args.quick else None)
    record["seconds"] = round(time.perf_counter() - start, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=None, separators=(",", ":")) + "\n")
    tmp.replace(out)
    for row in summarise(record["runs"]):
        print(row)
    print(f"{record['seconds']} s")


if __name__ == "__main__":
    main()
