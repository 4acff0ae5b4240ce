"""Characters against BPE tokens: one GPT recipe trained on each, compared per character (Chapter 8).

A loss in nats per *token* depends on what a token is: a BPE token covers several characters, so
its loss is larger even when the model is better. To compare a character-level and a BPE model
the loss is converted to nats per character,

    nats per character = nats per token * (tokens in the validation split / its characters),

which is the same total of ``-log P`` over the same validation text, spread over its characters.
:func:`compare` trains the ``baseline`` recipe (same model size, steps, batch of windows) once
with each tokenizer and seed and writes the histories with both units::

    OMP_NUM_THREADS=1 python -m course_lib.gpt.units data/gpt/units.json [--steps 2000] [--seeds 0 1]

At an equal number of steps and tokens per window, a BPE window covers more characters, so the
BPE model reads more text in the same compute and sees a longer context: the file records the
characters per token so that a reader can account for it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from course_lib.checks import check_int

__all__ = ["compare", "nats_per_character"]


def nats_per_character(nats_per_token: float, n_tokens: int, n_characters: int) -> float:
    """Convert a mean loss per token into the same total per character.

    >>> nats_per_character(3.0, 100, 250)
    1.2
    """
    check_int(n_tokens, "n_tokens", low=1)
    check_int(n_characters, "n_characters", low=1)
    return float(nats_per_token) * n_tokens / n_characters


def compare(
    text: str,
    steps: int = 2000,
    seeds: Sequence[int] = (0,),
    eval_interval: int = 250,
    tokenizers: Sequence[str] = ("char", "bpe"),
) -> dict[str, Any]:
    """Train ``baseline`` on ``text`` with each tokenizer and seed; losses in both units."""
    from course_lib.gpt.data import split_ids
    from course_lib.gpt.train import make_tokenizer, train

    check_int(steps, "steps", low=1)
    rows = []
    for kind in tokenizers:
        tok = make_tokenizer(kind, text)
        _, val_ids = split_ids(tok.encode(text))
        per_char = len(val_ids) / len(tok.decode(val_ids))  # tokens per validation character
        for seed in seeds:
            run = train(text, tok, "baseline", max_steps=steps, eval_interval=eval_interval,
                        seed=seed, progress=False, log=lambda r: print(json.dumps(r), flush=True))  # fmt: skip
            rows.append({
                "tokenizer": kind,
                "vocab_size": tok.vocab_size,
                "seed": seed,
                "characters_per_token": round(1 / per_char, 4),
                "history": [
                    {"step": r["step"], "val_loss_per_token": r["val_loss"],
                     "val_loss_per_char": round(r["val_loss"] * per_char, 4)}
                    for r in run["history"]
                ],
            })  # fmt: skip
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "history"}
                             | {"final": rows[-1]["history"][-1]}), flush=True)  # fmt: skip
    return {"recipe": "baseline", "steps": steps, "seeds": list(seeds), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    import argparse

    from course_lib.gpt.data import shakespeare_file

    parser = argparse.ArgumentParser(prog="python -m course_lib.gpt.units")
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--tokenizers", nargs="+", default=["char", "bpe"], choices=["char", "bpe"])
    args = parser.parse_args(argv)
    text = shakespeare_file().read_text(encoding="utf-8")
    result = compare(text, args.steps, args.seeds, tokenizers=args.tokenizers)
    result["command"] = "python -m course_lib.gpt.units " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
