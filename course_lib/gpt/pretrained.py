"""The chapter's pre-trained character-level GPT, shipped in ``data/gpt/`` (Chapter 8).

The checkpoint is the ``baseline`` recipe trained for 2000 steps on the first 1.1 MB of
Chapter 7's Shakespeare text (``data/README.md`` gives the command). :func:`export` turns a
training checkpoint into the shipped file: weights in float16 (half the bytes; loading casts them
back to float32), no optimiser state, the evaluation history kept. Run::

    python -m course_lib.gpt.pretrained OUT/ckpt.pt data/gpt/shakespeare_char.pt
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch

from course_lib.gpt.data import load_tokenizer
from course_lib.gpt.model import GPT
from course_lib.gpt.train import load_checkpoint, model_from_checkpoint

__all__ = ["SHIPPED", "export", "history", "load_pretrained"]

#: The shipped checkpoint's name under ``data/``.
SHIPPED = ("gpt", "shakespeare_char.pt")


def export(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Write ``src``'s model, tokenizer, recipe and history to ``dst`` with float16 weights (atomically)."""
    ckpt = load_checkpoint(src)
    small = {
        "version": ckpt["version"],
        "config": ckpt["config"],
        "model": {k: v.half() if v.is_floating_point() else v for k, v in ckpt["model"].items()},
        "tokenizer": ckpt["tokenizer"],
        "recipe": ckpt.get("recipe"),
        "trainer": None,
        "extra": {
            "history": ckpt.get("extra", {}).get("history", []),
            "steps": None if ckpt.get("trainer") is None else int(ckpt["trainer"]["step"]),
        },
    }
    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    torch.save(small, tmp)
    os.replace(tmp, dst)
    return dst


def load_pretrained() -> tuple[GPT, Any]:
    """The shipped model (float32, eval mode) and its character tokenizer."""
    from course_lib.paths import data_path

    ckpt = load_checkpoint(data_path(*SHIPPED))
    model = model_from_checkpoint(ckpt).float().eval()
    return model, load_tokenizer(ckpt["tokenizer"])


def history() -> list[dict[str, Any]]:
    """The shipped run's evaluation records (step, seconds, train_loss, val_loss, tokens_per_s)."""
    from course_lib.paths import data_path

    return list(load_checkpoint(data_path(*SHIPPED))["extra"].get("history", []))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m course_lib.gpt.pretrained SRC_CKPT DST")
    print(export(sys.argv[1], sys.argv[2]))
