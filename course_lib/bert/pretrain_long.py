"""The recipe of the chapter's shipped checkpoint: a longer masked-LM run of the small BERT.

``python -m course_lib.bert.pretrain_long`` pre-trains :data:`course_lib.bert.train.SMALL` on
rows of 32 tokens from the first 2,000,000 characters of Shakespeare and the first 1,100,000
characters of *Moby-Dick* (:mod:`course_lib.bert.datasets`; the rest of each text is held out).
The rows of both texts are pooled and every batch draws 32 of them at random, so the mix is that
of their sizes: 29,247 rows of Shakespeare and 14,265 of Moby-Dick, two thirds and one third. 3,000 steps (AdamW, learning
rate 2e-3 after a 20-step warm-up, weight decay 0.01, dropout 0.1, fresh 15% / 80-10-10 masks
every step, seed 0, one thread); the weights are saved atomically to ``data/bert/small_mlm.pt``
with the recipe and the losses; :func:`load_checkpoint` reads them back with
``weights_only=True``. The notebook trains 300 steps live and loads this file for the rest.
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

__all__ = ["CHECKPOINT", "RECIPE", "load_checkpoint", "main"]

RECIPE = {
    "n_chars": 2_000_000,
    "moby_dick_chars": 1_100_000,
    "length": 32,
    "steps": 3000,
    "batch_size": 32,
    "lr": 2e-3,
    "seed": 0,
}
CHECKPOINT = data_dir() / "bert" / "small_mlm.pt"


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
    model, losses = pretrain_mlm(
        chunks, steps=r["steps"], batch_size=r["batch_size"], lr=r["lr"], seed=r["seed"]
    )
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
