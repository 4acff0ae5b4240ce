"""Corpus BLEU and chrF: this course's implementations against sacrebleu, side by side (Chapter 3).

The target: corpus BLEU (each tokenization), chrF and chrF++ over 10,000 generated sentence pairs
with 4 references each, at least as fast as sacrebleu, with the same score. Both
are timed on the same corpus in the same process, alternately, best of five runs (wall-clock
time decides; the process CPU time is reported too, since the course machines are shared); our
timing includes converting sacrebleu's reference layout (one list per stream) to the notes'.
"""

from __future__ import annotations

import sacrebleu
from sacrebleu.metrics import CHRF

from course_lib.measure import timed
from course_lib.text_metrics import corpus_bleu, corpus_chrf
from course_lib.text_metrics.dataset import synthetic_corpus

TITLE = "Corpus BLEU-4 (no smoothing), chrF and chrF++: course_lib.text_metrics vs sacrebleu"
TOKENIZERS = ("13a", "none", "char")


def _timed(fn) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process, result) of one call."""
    t = timed(fn)
    return t.wall, t.cpu, t.result


def _race(theirs_fn, ours_fn, repeats: int) -> tuple[dict, dict]:
    """Best wall and CPU seconds of each, alternating so that both see the same machine load."""
    best = {"theirs": [float("inf")] * 2, "ours": [float("inf")] * 2}
    results = {}
    for _ in range(repeats):
        for name, fn in (("theirs", theirs_fn), ("ours", ours_fn)):
            wall, cpu, results[name] = _timed(fn)
            best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
    return best, results


def _row(metric: str, n: int, best: dict, theirs_score: float, ours_score: float, same) -> dict:
    return {
        "metric": metric,
        "sentences": n,
        "references": 4,
        "sacrebleu_s": round(best["theirs"][0], 3),
        "ours_s": round(best["ours"][0], 3),
        "speedup": round(best["theirs"][0] / best["ours"][0], 2),
        "sacrebleu_cpu_s": round(best["theirs"][1], 3),
        "ours_cpu_s": round(best["ours"][1], 3),
        "sacrebleu_score": round(theirs_score, 6),
        "ours_score": round(ours_score, 6),
        "abs_diff": float(f"{abs(theirs_score - ours_score):.1e}"),
        "same_counts": same,
    }


def run(quick: bool = False) -> list[dict]:
    n = 200 if quick else 10_000
    repeats = 1 if quick else 5
    candidates, references = synthetic_corpus(n, 4, seed=0)
    streams = [list(s) for s in zip(*references, strict=True)]  # sacrebleu's layout
    ours_refs = [list(r) for r in zip(*streams, strict=True)]  # the notes' layout
    rows = []
    for tok in TOKENIZERS:
        best, res = _race(
            lambda tok=tok: sacrebleu.corpus_bleu(
                candidates, streams, tokenize=tok, smooth_method="none"
            ),
            lambda tok=tok: corpus_bleu(candidates, ours_refs, tokenize=tok),
            repeats,
        )
        theirs, ours = res["theirs"], res["ours"]
        same = (
            theirs.counts == list(ours.matches)
            and theirs.totals == list(ours.totals)
            and theirs.sys_len == ours.c
            and theirs.ref_len == ours.r
        )
        rows.append(_row(f"BLEU, tokenize={tok}", n, best, theirs.score, 100 * ours.score, same))
    for word_order, name in ((0, "chrF"), (2, "chrF++")):
        metric = CHRF(word_order=word_order)
        best, res = _race(
            lambda metric=metric: metric.corpus_score(candidates, streams),
            lambda wo=word_order: corpus_chrf(candidates, ours_refs, word_order=wo),
            repeats,
        )
        rows.append(_row(name, n, best, res["theirs"].score, 100 * res["ours"].score, "n/a"))
    return rows


def summary(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        fast = r["ours_s"] <= r["sacrebleu_s"]
        same = r["abs_diff"] <= 1e-9 * 100 and r["same_counts"] in (True, "n/a")
        lines.append(
            f"{r['metric']}: {'MET' if fast and same else 'NOT MET'} "
            f"({r['speedup']}x sacrebleu's speed; score difference {r['abs_diff']:.1e} "
            f"on the 0-100 scale; identical n-gram statistics: {r['same_counts']})"
        )
    return "target (at least as fast as sacrebleu, same score within 1e-9):\n  " + "\n  ".join(
        lines
    )
