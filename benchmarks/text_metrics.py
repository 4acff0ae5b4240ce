"""Corpus BLEU: this course's implementation against sacrebleu.corpus_bleu, side by side (Chapter 3).

The target (issue 4): corpus BLEU over 10,000 generated sentence pairs with 4 references each at
least as fast as ``sacrebleu.corpus_bleu`` with the same tokenization, with the same score. Both
are timed on the same corpus in the same process, alternately, best of five runs (wall-clock
time decides; the process CPU time is reported too, since the course machines are shared); our
timing includes converting sacrebleu's reference layout (one list per stream) to the notes'.
"""

from __future__ import annotations

import sacrebleu

from course_lib.measure import timed
from course_lib.text_metrics import corpus_bleu
from course_lib.text_metrics.dataset import synthetic_corpus

TITLE = "Corpus BLEU-4 (no smoothing): course_lib.text_metrics vs sacrebleu.corpus_bleu"
TOKENIZERS = ("13a", "none", "char")


def _timed(fn) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process, result) of one call."""
    t = timed(fn)
    return t.wall, t.cpu, t.result


def run(quick: bool = False) -> list[dict]:
    n = 1000 if quick else 10_000
    repeats = 1 if quick else 5
    candidates, references = synthetic_corpus(n, 4, seed=0)
    streams = [list(s) for s in zip(*references, strict=True)]  # sacrebleu's layout
    rows = []
    for tok in TOKENIZERS:

        def theirs_fn(tok=tok):
            return sacrebleu.corpus_bleu(candidates, streams, tokenize=tok, smooth_method="none")

        def ours_fn(tok=tok):
            return corpus_bleu(
                candidates, [list(r) for r in zip(*streams, strict=True)], tokenize=tok
            )

        best = {"theirs": [float("inf")] * 2, "ours": [float("inf")] * 2}
        results = {}
        for _ in range(repeats):  # alternate, so that both see the same machine load
            for name, fn in (("theirs", theirs_fn), ("ours", ours_fn)):
                wall, cpu, results[name] = _timed(fn)
                best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
        theirs, ours = results["theirs"], results["ours"]
        rows.append(
            {
                "tokenize": tok,
                "sentences": n,
                "references": 4,
                "sacrebleu_s": round(best["theirs"][0], 3),
                "ours_s": round(best["ours"][0], 3),
                "speedup": round(best["theirs"][0] / best["ours"][0], 2),
                "sacrebleu_cpu_s": round(best["theirs"][1], 3),
                "ours_cpu_s": round(best["ours"][1], 3),
                "sacrebleu_BLEU": round(theirs.score, 6),
                "ours_BLEU": round(100 * ours.score, 6),
                "abs_diff": float(f"{abs(theirs.score - 100 * ours.score):.1e}"),
                "same_counts": theirs.counts == list(ours.matches)
                and theirs.totals == list(ours.totals)
                and theirs.sys_len == ours.c
                and theirs.ref_len == ours.r,
            }
        )
    return rows


def summary(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        fast = r["ours_s"] <= r["sacrebleu_s"]
        same = r["abs_diff"] <= 1e-9 and r["same_counts"]
        lines.append(
            f"tokenize={r['tokenize']}: {'MET' if fast and same else 'NOT MET'} "
            f"({r['speedup']}x sacrebleu's speed; score difference {r['abs_diff']:.1e} "
            f"on the 0-100 scale; identical n-gram statistics: {r['same_counts']})"
        )
    return "target (at least as fast as sacrebleu, same score within 1e-9):\n  " + "\n  ".join(
        lines
    )
