"""The recipe of the chapter's shipped checkpoint: a longer masked-LM run of the small BERT.

::

    python -m course_lib.bert.pretrain_long           # pre-trains; minutes on one idle core
    python -m course_lib.bert.pretrain_long --from-comparison data/bert/comparison.json \\
        --work .cache/bert/compare                    # takes the comparison's identical run

The first pre-trains :data:`course_lib.bert.train.SMALL` on
the first 2,000,000 characters of Shakespeare and the first 1,100,000 characters of
*Moby-Dick* (:mod:`course_lib.bert.datasets`; the rest of each text is held out), cut into rows
``[CLS] ... [SEP]`` of two lengths. BERT's own recipe (Devlin et al. 2019, appendix A.2) spends
most steps on short rows, which are cheap and on which the model first learns to read its
neighbours, and enough steps at the full length to train every row of the position table:

* three steps in four draw 32 rows of 32 tokens (29,247 rows of Shakespeare and 14,265 of
  Moby-Dick, pooled: a batch is on average two thirds Shakespeare and one third Melville);
* one step in four draws 32 rows of 80 tokens, the model's whole context (11,249 and 5,486 rows
  of the same text), so positions 32-79 learn from the first steps on, at the full learning
  rate. (BERT put its long steps last, under a linear decay; under our cosine the last quarter
  of the steps gets under 3% of the learning rate's sum, too little to train 48 new rows.)

12,000 steps of AdamW (weight decay 0.01): the learning rate rises linearly to 2e-3 over 250
steps, then falls towards 0 along a half cosine; no dropout (a model this small underfits,
dropout only slows it down); fresh 15% / 80-10-10 masks every step, random replacements drawn
from the ordinary tokens only (:func:`~course_lib.bert.masking.mask_tokens`, section 9.4), the
loss computed by :meth:`~course_lib.bert.model.Bert.mlm_loss` (the head only at the chosen
positions); seed 0, one thread. The weights are saved atomically to ``data/bert/small_mlm.pt``
with the recipe, the losses, the held-out losses (:func:`held_out_loss`) and the seconds;
:func:`load_checkpoint` reads them back with ``weights_only=True``. The notebook trains 300
steps live and loads this file for the rest.

:func:`pretrain` is the one pre-training function of the chapter: the comparison of section 9.6
(:mod:`course_lib.bert.compare`) calls it with the same recipe for both objectives and two seeds,
so its masked-LM run of seed 0 is this checkpoint's run.

Short runs chose the peak learning rate (at 32 tokens, 5,000 steps, no dropout and a cosine
decay, 2e-3 gave a held-out loss 1.3 nats below the token frequencies against 0.6 for 1e-3 and
0.5 for 3e-3). A run of 12,000 steps on rows of 80 tokens only (the previous comparison's
recipe) stayed on the frequencies' plateau until about step 7,000 and ended only 0.5-0.7 nats
below them; ``data/README.md`` has the figures.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from course_lib.bert.data import CLS, MASK, PAD, SEP, pretraining_chunks, text_rows
from course_lib.bert.inputs import IGNORE
from course_lib.bert.masking import mask_tokens
from course_lib.bert.model import Bert
from course_lib.bert.train import SMALL, pretrain_mlm
from course_lib.checks import check_choice
from course_lib.paths import data_dir

__all__ = [
    "CHECKPOINT", "COMMAND", "RECIPE", "held_out_loss", "held_out_rows", "load_checkpoint", "main",
    "pretrain", "pretraining_rows", "pretraining_settings",
]  # fmt: skip

RECIPE = {
    "n_chars": 2_000_000,
    "moby_dick_chars": 1_100_000,
    "length": 80,
    "short_length": 32,
    "long_every": 4,
    "steps": 12000,
    "batch_size": 32,
    "lr": 2e-3,
    "warmup": 250,
    "schedule": "cosine",
    "dropout": 0.0,
    "seed": 0,
}
CHECKPOINT = data_dir() / "bert" / "small_mlm.pt"
COMMAND = "python -m course_lib.bert.pretrain_long"
#: Held-out positions are scored in two groups: the first 31 text positions (what rows of 32
#: tokens train) and the rest (what only full-length rows train).
SPLIT_AT = 32


def pretraining_settings(recipe: dict) -> dict:
    """The optimisation settings of a recipe, as keywords of ``pretrain_mlm`` (and of the causal
    pre-training of :mod:`course_lib.bert.compare`); a recipe without ``warmup``, ``schedule`` or
    ``dropout`` gets the defaults of :func:`~course_lib.bert.train.fit` and dropout 0.1.

    >>> pretraining_settings({"steps": 3, "batch_size": 8, "lr": 2e-3, "seed": 0})["schedule"]
    'constant'
    """
    keys = ("steps", "batch_size", "lr", "seed")
    return {**{k: recipe[k] for k in keys}, "warmup": recipe.get("warmup", 20),
            "schedule": recipe.get("schedule", "constant"),
            "dropout": recipe.get("dropout", 0.1), "long_every": recipe.get("long_every", 0)}  # fmt: skip


def pretraining_rows(recipe: dict, extra: int = 0) -> tuple[np.ndarray, np.ndarray | None]:
    """The recipe's rows: (short rows, full-length rows), each ``extra`` ids longer (the causal
    model's rows carry 2 more ids so that every position has a next token); the full-length
    rows are None for a recipe of one length."""
    n, m = recipe["n_chars"], recipe["moby_dick_chars"]
    full = pretraining_chunks(n, recipe["length"] + extra, moby_dick_chars=m)
    if not recipe.get("long_every"):
        return full, None
    return pretraining_chunks(n, recipe["short_length"] + extra, moby_dick_chars=m), full


def pretrain(
    recipe: dict = RECIPE, objective: str = "mlm", seed: int | None = None, device: str = "cpu"
):
    """Pre-train ``SMALL`` with ``recipe`` (seed ``seed``, or the recipe's): the masked LM
    (returns a :class:`Bert`) or the next-token LM (``"causal"``: a
    :class:`~course_lib.bert.compare.CausalBert`), and the losses step by step."""
    check_choice(objective, "objective", ("mlm", "causal"))
    settings = {**pretraining_settings({**recipe, "seed": recipe.get("seed", 0)})}
    if seed is not None:
        settings["seed"] = seed
    every = settings.pop("long_every")
    if objective == "mlm":
        rows, long_rows = pretraining_rows(recipe)
        return pretrain_mlm(rows, **settings, device=device, long_chunks=long_rows,
                            long_every=every)  # fmt: skip
    from course_lib.bert.compare import pretrain_causal

    rows, long_rows = pretraining_rows(recipe, extra=2)
    return pretrain_causal(rows, **settings, device=device, long_rows=long_rows, long_every=every)


def held_out_rows(length: int) -> np.ndarray:
    """500 rows of ``length`` ids of text no run trains on: 250 from the end of each book."""
    from course_lib.bert.datasets import moby_dick
    from course_lib.bpe.corpus import sample

    ends = [sample(2_300_000)[2_000_000:], moby_dick()[1_100_000:]]
    return np.concatenate([text_rows(e, length)[:250] for e in ends])


@torch.no_grad()
def held_out_loss(model: torch.nn.Module, objective: str, length: int, device: str = "cpu"):
    """Held-out LM loss in nats on :func:`held_out_rows` of ``length`` tokens: over every
    position, over the first ``SPLIT_AT - 1`` text positions and over the later ones, and the
    loss of the token frequencies of those rows (a model that ignores the context). The masked
    LM is scored on 15% of the text positions, all shown as ``[MASK]`` (nothing leaks); the
    causal one on the next token at every position."""
    check_choice(objective, "objective", ("mlm", "causal"))
    was_training = model.training
    model.eval()
    if objective == "causal":
        rows = held_out_rows(length + 2)
        x, y = torch.from_numpy(rows[:, :length].copy()), rows[:, 1 : length + 1]
        logits = model.lm(x.to(device)).cpu()  # (N, L, V): position i predicts token i + 1
        where = np.broadcast_to(np.arange(1, length + 1), y.shape)  # the target's position
    else:
        rows = held_out_rows(length)
        x, y = mask_tokens(rows, np.random.default_rng(5), mask_id=MASK, vocab_size=SMALL.vocab_size,
                           special_ids=(PAD, CLS, SEP, MASK), split=(1.0, 0.0, 0.0))  # fmt: skip
        logits = model.mlm(torch.from_numpy(x).to(device)).cpu()
        where = np.broadcast_to(np.arange(length), y.shape)
    model.train(was_training)
    keep = (y != IGNORE) & (y != SEP)
    nll = F.cross_entropy(
        logits[torch.from_numpy(keep)], torch.from_numpy(y[keep]), reduction="none"
    )
    early = torch.from_numpy(where[keep] < SPLIT_AT)
    freq = np.bincount(rows[:, 1:-1].ravel(), minlength=SMALL.vocab_size) + 1.0
    return {
        "loss": round(float(nll.mean()), 4),
        f"loss_positions_1_{SPLIT_AT - 1}": round(float(nll[early].mean()), 4),
        f"loss_positions_{SPLIT_AT}_on": round(float(nll[~early].mean()), 4)
        if length > SPLIT_AT
        else None,
        "token_frequencies": round(float(-np.log(freq / freq.sum())[y[keep]].mean()), 4),
    }


def load_checkpoint(path: str | os.PathLike = CHECKPOINT) -> tuple[Bert, list[float]]:
    """The shipped pre-trained small BERT (in eval mode) and the losses of its run."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run {COMMAND}")
    state = torch.load(path, weights_only=True, map_location="cpu")
    model = Bert(SMALL)
    model.load_state_dict(state["model"])
    return model.eval(), list(state["losses"])


def _kept_comparison_run(comparison: Path, work: Path, recipe: dict) -> tuple[Bert, list, float]:
    """The comparison's masked-LM run of seed 0, read back from its ``--work`` folder, after
    checking that it ran this recipe and is the run its JSON reports."""
    from course_lib.bert.compare import _thin

    res = json.loads(Path(comparison).read_text(encoding="utf-8"))
    want = {k: v for k, v in recipe.items() if k != "seed"}
    if res["pretraining"]["recipe"] != want or recipe["seed"] != 0:
        raise ValueError(f"{comparison} ran another recipe than {recipe}")
    kept = torch.load(Path(work) / "pretrain__mlm__0.pt", weights_only=True)
    if _thin(kept["losses"], 100) != res["pretraining"]["runs"]["pretrain/mlm/0"]["losses_per_100"]:
        raise ValueError(f"the run kept in {work} is not the one {comparison} reports")
    model = Bert(SMALL)
    model.load_state_dict(kept["state"])
    return model.eval(), list(kept["losses"]), kept["seconds"]


def main(argv: list[str] | None = None, recipe: dict = RECIPE) -> dict:
    import argparse

    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n")[0])
    ap.add_argument(
        "path", nargs="?", default=str(CHECKPOINT), help="where to write the checkpoint"
    )
    ap.add_argument("--from-comparison", metavar="JSON", default=None,
                    help="take the comparison's masked-LM run of seed 0 (the same pre-training) "
                    "from its --work folder instead of running it again")  # fmt: skip
    ap.add_argument("--work", default=".cache/bert/compare", help="the comparison's work folder")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    if a.from_comparison:
        model, losses, seconds = _kept_comparison_run(Path(a.from_comparison), Path(a.work), recipe)
        made_by = (f"{COMMAND} --from-comparison {a.from_comparison} --work {a.work}: the "
                   "pre-training mlm/0 of the comparison, the same function, recipe and seed")  # fmt: skip
    else:
        t0 = time.perf_counter()
        model, losses = pretrain(recipe)
        seconds = round(time.perf_counter() - t0, 1)
        made_by = COMMAND
    held = {n: held_out_loss(model, "mlm", n) for n in (recipe["length"], recipe["short_length"])}
    path = Path(a.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    state = {"model": model.state_dict(), "recipe": recipe, "losses": losses, "command": COMMAND,
             "made_by": made_by, "held_out": {f"rows_of_{n}": h for n, h in held.items()},
             "seconds": seconds}  # fmt: skip
    torch.save(state, tmp)
    os.replace(tmp, path)  # atomic: a reader never sees half a file
    report = {"seconds": seconds, "held_out": state["held_out"],
              "loss_per_1000_steps": [round(float(np.mean(losses[i : i + 1000])), 3)
                                      for i in range(0, len(losses), 1000)]}  # fmt: skip
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
