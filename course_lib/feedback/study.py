"""PPO against DPO from the same preference data, over seeds (Chapter 10, sections 10.5-10.6).

For each seed the study builds its own setting: an SFT policy (the chapter's 2-layer GPT of
width 32, weights and batches drawn with the seed, 60 SFT steps on 300 words) and its own
preference comparisons (:func:`~course_lib.feedback.tasks.preference_pairs` of 300 other words,
drawn with ``1 + 10 * seed``; seed 0 is the chapter's on-page setting). From that setting, every
method, each at every learning rate of its grid:

* ``PPO + learned RM``: a reward model trained (200 steps) on the seed's comparisons, then PPO
  (GAE, 40 iterations of 64 samples) against its score, for several KL coefficients beta. This
  is InstructGPT's pipeline, and the fair comparison with DPO: the same comparisons.
* ``PPO + exact judge (RLVR)`` and ``PPO-LOO + exact judge (RLVR)``: the same PPO against the
  program that checks the answer (reward 1 or 0), with GAE or with the leave-one-out baseline of
  RLOO; "RL with verifiable rewards". A reference: no preference data, an oracle reward.
* ``DPO``: 60 steps of 64 comparisons on those same comparisons, for several beta.

Every run is scored by the exact probability of the right answer
(:func:`~course_lib.feedback.pipeline.right_answer_probability`, the expected share of sampled
answers right, with no sampling noise) on 200 validation words, which choose each (method,
beta)'s learning rate (:func:`select`), and on 200 test words, which the chapter reports; by
its greedy accuracy and its KL to its SFT model on the test words; the reward models by their
accuracy on held-out comparisons, and DPO by its implicit reward's accuracy on the same ones
(TRL's ``rewards/accuracies``). The spread over seeds therefore includes the SFT model and the
comparisons, not only the method's own randomness. Every PPO run logs, per iteration, the mean
reward it was trained on (the proxy), the share of its batch the judge calls right, the KL of
its batch to the SFT model and the exact probability of the right answer on the test words;
every DPO run logs, per step, the loss and the chosen and rejected log-ratios. The shipped file
``data/feedback/seed_study.json`` was made by::

    OMP_NUM_THREADS=1 nice -n 10 python -m course_lib.feedback.study data/feedback/seed_study.json

>>> rows = summarise([{"method": "a", "beta": 0.1, "lr": 1e-3, "p_right": s, "p_right_val": s,
...                    "greedy": 1.0, "kl": 0.2} for s in (0.5, 0.7)])
>>> rows[0]["p_right_mean"], rows[0]["p_right_se"], rows[0]["runs"]
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
    "select",
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
    "ppo_lrs": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2],
    "dpo_lrs": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2],
    "kl_samples": 4,
}
COMMAND = (
    "OMP_NUM_THREADS=1 nice -n 10 python -m course_lib.feedback.study data/feedback/seed_study.json"
)


def exact_reward(words: Sequence[str], responses: Sequence[str]) -> np.ndarray:
    """1 for an exactly right answer, else 0: the judge as a reward function."""
    return np.array([float(judge(w, r)) for w, r in zip(words, responses, strict=True)])


@P.one_thread
@torch.no_grad()
def policy_kl(
    model: GPT, reference: GPT, words: Sequence[str], seed: int = 0, samples: int = 1
) -> float:
    """Mean over ``words`` of sum_t log pi(y_t)/pi_ref(y_t) on ``samples`` of the model's own
    samples per word (nats): the k1 estimate of KL(pi || pi_ref) per answer."""
    prompts = [w + "=" for w in words for _ in range(samples)]
    tokens, mask = P.sample(model, prompts, seed=seed)
    logp = P.sequence_logprobs(model, tokens, P.PROMPT_LEN)  # (B, T)
    logp_ref = P.sequence_logprobs(reference, tokens, P.PROMPT_LEN)  # (B, T)
    return float((acc.kl_penalty(logp, logp_ref) * mask).sum(1).mean())


def make_setting(seed: int = 0, sft_steps: int = 60) -> dict[str, Any]:
    """One seed's SFT policy and data: the policy, the RL prompts, the comparisons, the held-out
    comparisons, the validation and the test words.

    The SFT weights and batches are drawn with ``seed``, the comparisons with ``1 + 10 * seed``
    (seed 0 is the chapter's on-page setting); the word splits and the held-out comparisons are
    the same for every seed.
    """
    words = T.reverse_words()
    sft_words, rm_words = words[:300], words[300:600]
    policy = P.make_policy(seed)
    P.train_sft(
        policy, [w + "=" for w in sft_words], [w[::-1] + "." for w in sft_words], sft_steps,
        seed=seed,
    )  # fmt: skip
    return {
        "policy": policy,
        "rl_words": sft_words + rm_words,
        "pairs": T.preference_pairs(rm_words, k=4, seed=1 + 10 * seed),
        "held_out_pairs": T.preference_pairs(words[1000:1200], k=4, seed=2),
        "val_words": words[600:800],
        "test_words": words[1000:1200],
    }


def _rounded(xs: Sequence[float]) -> list[float]:
    return [round(float(x), 4) for x in xs]


def _evaluate(model: GPT, s: dict[str, Any], kl_samples: int) -> dict[str, float]:
    test = s["test_words"]
    return {
        "p_right": round(P.right_answer_probability(model, test), 4),
        "p_right_val": round(P.right_answer_probability(model, s["val_words"]), 4),
        "greedy": round(P.accuracy(model, test), 3),
        "kl": round(policy_kl(model, s["policy"], test, samples=kl_samples), 3),
    }


def run_study(
    config: dict[str, Any] | None = None,
    methods: Sequence[str] = METHODS,
    timer: Callable[[], float] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run every (method, beta, learning rate, seed) of ``config`` (default :data:`CONFIG`).

    Returns the record: the config, each seed's SFT scores and one entry per run with its scores
    (``p_right``, ``p_right_val``, ``greedy``, ``kl``; ``rm_pair_accuracy`` or
    ``implicit_accuracy`` on the held-out comparisons), its log and, with ``timer``, the seconds
    per PPO iteration or DPO step. ``progress`` gets one line per finished run.
    """
    cfg = {**CONFIG, **(config or {})}
    if not set(methods) <= set(METHODS):
        raise ValueError(f"methods must be among {list(METHODS)}, got {list(methods)}")
    runs: list[dict[str, Any]] = []
    sft_scores: list[dict[str, Any]] = []
    ppo_args = {
        "iterations": cfg["ppo_iterations"],
        "prompts_per_batch": cfg["prompts_per_batch"],
        "samples_per_prompt": cfg["samples_per_prompt"],
    }

    def finish(run: dict[str, Any], model: GPT, log: dict[str, list[float]], start: float) -> None:
        if timer:
            steps = cfg["dpo_steps"] if run["method"] == DPO else cfg["ppo_iterations"]
            run["seconds_per_step"] = (timer() - start) / max(steps, 1)
        run |= _evaluate(model, s, cfg["kl_samples"])
        run["log"] = log
        runs.append(run)
        if progress:
            progress(
                f"{run['method']} beta={run['beta']} lr={run['lr']} seed={run['seed']}:"
                f" p_right {run['p_right']:.3f}, KL {run['kl']:.2f}"
            )

    for seed in cfg["seeds"]:
        s = make_setting(seed, cfg["sft_steps"])
        sft, test = s["policy"], s["test_words"]
        sft_scores.append({"seed": seed, **_evaluate(sft, s, cfg["kl_samples"])})
        rl = {"eval_words": test, "seed": seed, **ppo_args}
        if RM in methods:
            rm, _ = P.train_reward_model(sft, s["pairs"], steps=cfg["rm_steps"], seed=seed)
            rm_accuracy = round(P.pair_accuracy(rm, s["held_out_pairs"]), 4)

            def rm_reward(ws: Sequence[str], rs: Sequence[str], rm: Any = rm) -> np.ndarray:
                with torch.no_grad():
                    return rm.score(ws, rs).numpy()

            for beta in cfg["rm_betas"]:
                for lr in cfg["ppo_lrs"]:
                    start = timer() if timer else 0.0
                    model, log = P.train_rl(sft, s["rl_words"], rm_reward, beta=beta, lr=lr, **rl)
                    run = {"method": RM, "beta": beta, "lr": lr, "seed": seed}
                    run["rm_pair_accuracy"] = rm_accuracy
                    fields = ("reward", "accuracy", "kl", "p_right")
                    finish(run, model, {f: _rounded(getattr(log, f)) for f in fields}, start)
        for method, adv in ((JUDGE, "gae"), (JUDGE_LOO, "loo")):
            if method not in methods:
                continue
            for lr in cfg["ppo_lrs"]:
                start = timer() if timer else 0.0
                model, log = P.train_rl(
                    sft, s["rl_words"], exact_reward, beta=cfg["judge_beta"], lr=lr,
                    advantage=adv, **rl,
                )  # fmt: skip
                run = {"method": method, "beta": cfg["judge_beta"], "lr": lr, "seed": seed}
                fields = ("reward", "accuracy", "kl", "p_right")
                finish(run, model, {f: _rounded(getattr(log, f)) for f in fields}, start)
        if DPO in methods:
            for beta in cfg["dpo_betas"]:
                for lr in cfg["dpo_lrs"]:
                    start = timer() if timer else 0.0
                    model, dlog = P.train_dpo(
                        sft, s["pairs"], beta=beta, steps=cfg["dpo_steps"],
                        batch=cfg["dpo_batch"], lr=lr, seed=seed,
                    )  # fmt: skip
                    run = {"method": DPO, "beta": beta, "lr": lr, "seed": seed}
                    run["implicit_accuracy"] = round(
                        P.implicit_reward_accuracy(model, sft, s["held_out_pairs"]), 4
                    )
                    fields = ("loss", "chosen", "rejected")
                    finish(run, model, {f: _rounded(getattr(dlog, f)) for f in fields}, start)
    return {
        "command": COMMAND,
        "config": cfg,
        "n_comparisons": len(s["pairs"]),
        "n_held_out_comparisons": len(s["held_out_pairs"]),
        "sft": sft_scores,
        "runs": runs,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def _mean(xs: Sequence[float]) -> float:
    return round(float(np.mean(xs)), 4)


def summarise(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (method, beta, learning rate), in the order first seen: the number of seeds,
    the mean and standard error (ddof 1) of the exact probability of the right answer on the
    test words, its min and max over seeds, its mean on the validation words, the mean greedy
    accuracy, KL to the SFT model and (where the runs have one) held-out pair accuracy; rounded
    to 4 decimals."""
    out = []
    keys = dict.fromkeys((r["method"], r["beta"], r.get("lr")) for r in runs)
    for method, beta, lr in keys:
        mine = [r for r in runs if (r["method"], r["beta"], r.get("lr")) == (method, beta, lr)]
        a = np.array([r["p_right"] for r in mine], dtype=float)
        se = float(a.std(ddof=1) / np.sqrt(len(a))) if len(a) > 1 else float("nan")
        row = {
            "method": method,
            "beta": beta,
            "lr": lr,
            "runs": len(mine),
            "p_right_mean": round(float(a.mean()), 4),
            "p_right_se": round(se, 4),
            "p_right_min": round(float(a.min()), 4),
            "p_right_max": round(float(a.max()), 4),
            "p_right_val_mean": _mean([r["p_right_val"] for r in mine]),
            "greedy_mean": _mean([r["greedy"] for r in mine]),
            "kl_mean": _mean([r["kl"] for r in mine]),
        }
        for field in ("rm_pair_accuracy", "implicit_accuracy"):
            if all(field in r for r in mine):
                row[field + "_mean"] = _mean([r[field] for r in mine])
        out.append(row)
    return out


def select(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (method, beta), the row of :func:`summarise` whose learning rate scored best on the
    validation words (mean over seeds), with ``lr_grid`` (the rates tried) and ``lr_at_edge``
    (True when the best rate is the smallest or the largest of the grid)."""
    out = []
    for key in dict.fromkeys((r["method"], r["beta"]) for r in rows):
        mine = [r for r in rows if (r["method"], r["beta"]) == key]
        grid = sorted(r["lr"] for r in mine)
        best = max(mine, key=lambda r: r["p_right_val_mean"])
        edge = len(grid) > 1 and best["lr"] in (grid[0], grid[-1])
        out.append({**best, "lr_grid": grid, "lr_at_edge": edge})
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
    quick = {"seeds": [0], "rm_steps": 5, "ppo_iterations": 2, "dpo_steps": 2, "ppo_lrs": [1e-3],
             "dpo_lrs": [1e-3]}  # fmt: skip
    start, cpu = time.perf_counter(), time.process_time()
    record = run_study(quick if args.quick else None, progress=lambda line: print(line, flush=True))
    record["seconds"] = round(time.perf_counter() - start, 1)
    record["cpu_seconds"] = round(time.process_time() - cpu, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=None, separators=(",", ":")) + "\n")
    tmp.replace(out)
    for row in select(summarise(record["runs"])):
        print(row)
    print(f"{record['seconds']} s wall, {record['cpu_seconds']} s CPU")


if __name__ == "__main__":
    main()
