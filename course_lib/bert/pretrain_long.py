"""The recipe of the chapter's shipped checkpoint: a longer masked-LM run of the small BERT.

``python -m course_lib.bert.pretrain_long`` pre-trains :data:`course_lib.bert.train.SMALL` on
rows of 32 tokens from the first 2,000,000 characters of Shakespeare and the first 1,100,000
characters of *Moby-Dick* (:mod:`course_lib.bert.datasets`; the rest of each text is held out).
The rows of both texts are pooled and every batch draws 32 of them at random, so the mix is that
of their sizes: 29,247 rows of Shakespeare and 14,265 of Moby-Dick, two thirds and one third.
12,000 steps of AdamW (weight decay 0.01): the learning rate rises linearly to 2e-3 over 250
steps, then falls towards 0 along a half cosine; no dropout (a model this small underfits, dropout
only slows it down); fresh 15% / 80-10-10 masks every step, the loss computed by
:meth:`~course_lib.bert.model.Bert.mlm_loss` (the head only at the chosen positions); seed 0,
one thread. (The shipped file was made before ``mask_tokens`` drew one number per position and
before the cosine's last step was moved off 0; ``data/README.md`` says so.) The weights are saved
atomically to ``data/bert/small_mlm.pt`` with the recipe, the losses and the seconds; :func:`load_checkpoint` reads them back with ``weights_only=True``. The
notebook trains 300 steps live and loads this file for the rest.

Short runs chose the recipe (held-out masked-LM loss below that of the token frequencies, the
notebook's measure of section 9.5): the old 3,000 steps at a constant 2e-3 with dropout 0.1
stayed 0.14 nats below them; at 5,000 steps, no dropout and a cosine decay, a peak of 2e-3 gave
1.3 nats against 0.6 for 1e-3 and 0.5 for 3e-3.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

from course_lib.bert.data import pretraining_chunks
from course_lib.bert.model import Bert
from course_lib.bert.train import SMALL, pretrain_mlm
from course_lib.paths import data_dir

__all__ = ["CHECKPOINT", "RECIPE", "load_checkpoint", "main", "pretraining_settings"]

RECIPE = {
    "n_chars": 2_000_000,
    "moby_dick_chars": 1_100_000,
    "length": 32,
    "steps": 12000,
    "batch_size": 32,
    "lr": 2e-3,
    "warmup": 250,
    "schedule": "cosine",
    "dropout": 0.0,
    "seed": 0,
}
CHECKPOINT = data_dir() / "bert" / "small_mlm.pt"


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
            "dropout": recipe.get("dropout", 0.1)}  # fmt: skip


def load_checkpoint(path: str | os.PathLike = CHECKPOINT) -> tuple[Bert, list[float]]:
    """The shipped pre-trained small BERT (in eval mode) and the losses of its run."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run python -m course_lib.bert.pretrain_long")
    state = torch.load(path, weights_only=True, map_location="cpu")
    model = Bert(SMALL)
    model.load_state_dict(state["model"])
    return model.eval(), list(state["losses"])


def main(path: str | os.PathLike = CHECKPOINT) -> None:
    torch.set_num_threads(1)
    r = RECIPE
    chunks = pretraining_chunks(r["n_chars"], r["length"], moby_dick_chars=r["moby_dick_chars"])
    t0 = time.perf_counter()
    model, losses = pretrain_mlm(chunks, **pretraining_settings(r))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    seconds = round(time.perf_counter() - t0, 1)
    command = "python -m course_lib.bert.pretrain_long"
    state = {"model": model.state_dict(), "recipe": r, "losses": losses, "command": command}
    torch.save({**state, "seconds": seconds}, tmp)
    os.replace(tmp, path)  # atomic: a reader never sees half a file
    print(
        json.dumps(
            {
                "rows": len(chunks),
                "seconds": seconds,
                "first": losses[:5],
                "last": losses[-5:],
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
