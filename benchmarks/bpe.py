"""Byte-pair encoding (Chapter 7): training and encoding speed against tiktoken and tokenizers.

Targets:

1. Training on the whole Shakespeare text (about 5 MB) to a vocabulary of 2000 within 2x the
   time of Hugging Face ``tokenizers`` training the same vocabulary size on the same text (both
   timed in this run; ``tokenizers`` runs on every core, the course's trainer on one).
2. Encoding the whole text: MB/s of the trained tokenizer and of GPT-2's, beside ``tiktoken``
   and ``tokenizers`` (reported, no target).
3. A small corpus (about 130 KB of English) to a vocabulary of 500 in under 0.3 s.
"""

from __future__ import annotations

from course_lib.bpe.alternatives import hf_tokenizer
from course_lib.bpe.analysis import tokenizer_from_merges
from course_lib.bpe.corpus import sample, shakespeare_text
from course_lib.bpe.gpt2_files import load_gpt2, load_tiktoken
from course_lib.bpe.train import count_words, train_bpe_words
from course_lib.measure import timed

TITLE = "Byte-pair encoding: training and encoding against Hugging Face tokenizers and tiktoken"
TRAIN_RATIO = 2.0
SMALL_TARGET_S = 0.3


def _row(task: str, implementation: str, mb: float, seconds: float, note: str = "") -> dict:
    return {
        "task": task,
        "implementation": implementation,
        "MB": round(mb, 3),
        "seconds": round(seconds, 3),
        "MB_per_s": round(mb / seconds, 2),
        "note": note,
    }


def _best(fn, repeats: int):
    runs = [timed(fn) for _ in range(repeats)]
    return min(r.wall for r in runs), runs[-1].result


def run(quick: bool = False) -> list[dict]:
    text = sample(400_000) if quick else shakespeare_text()
    mb = len(text.encode("utf-8")) / 1e6
    vocab = 600 if quick else 2000
    repeats = 1 if quick else 3
    rows = []
    ours_s, merges = _best(lambda: train_bpe_words(count_words([text]), vocab - 256), repeats)
    rows.append(
        _row(
            f"train to {vocab}", "course train_bpe (1 thread)", mb, ours_s, f"{len(merges)} merges"
        )
    )
    hf_s, hf = _best(lambda: hf_tokenizer("bpe", text, vocab), repeats)
    rows.append(
        _row(
            f"train to {vocab}", "HF tokenizers BpeTrainer", mb, hf_s, f"ratio {ours_s / hf_s:.2f}"
        )
    )
    trained = tokenizer_from_merges(merges)
    gpt2, tik = load_gpt2(), load_tiktoken()
    for name, fn in (
        ("course Tokenizer, trained merges", lambda: trained.encode(text)),
        ("course Tokenizer, GPT-2", lambda: load_gpt2().encode(text)),  # a fresh cache each time
        ("tiktoken, GPT-2", lambda: tik.encode(text, allowed_special="all")),
        ("HF tokenizers, trained merges", lambda: hf.encode_batch(text.splitlines(keepends=True))),
    ):
        seconds, _ = _best(fn, repeats)
        rows.append(_row("encode the text", name, mb, seconds))
    del gpt2
    small = sample(130_000)
    small_s, _ = _best(lambda: train_bpe_words(count_words([small]), 500 - 256), 3)
    rows.append(
        _row(
            "train 130 KB to 500", "course train_bpe (1 thread)", len(small.encode()) / 1e6, small_s
        )
    )
    return rows


def summary(rows: list[dict]) -> str:
    train = [r for r in rows if r["task"].startswith("train to")]
    ratio = train[0]["seconds"] / train[1]["seconds"]
    small = next(r for r in rows if r["task"].startswith("train 130"))
    enc = {r["implementation"]: r["seconds"] for r in rows if r["task"] == "encode the text"}
    speed = enc["course Tokenizer, GPT-2"] / enc["tiktoken, GPT-2"]
    return (
        f"encoding: tiktoken is {speed:.1f}x as fast as the course Tokenizer with GPT-2's merges\n"
        f"target 1: training takes {ratio:.2f}x the time of HF tokenizers (target <= {TRAIN_RATIO}x): "
        f"{'MET' if ratio <= TRAIN_RATIO else 'NOT MET'}\n"
        f"target 3: 130 KB to vocabulary 500 in {small['seconds']:.3f} s (target < {SMALL_TARGET_S} s): "
        f"{'MET' if small['seconds'] < SMALL_TARGET_S else 'NOT MET'}"
    )
