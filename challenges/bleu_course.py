"""The course's entry to ``./course challenge bleu``: chapter 3's corpus BLEU.

An entry defines ``corpus_bleu(hypotheses, references) -> float``: sacrebleu's default corpus
BLEU (13a tokenisation, exponential smoothing, BLEU-4) on the 0-100 scale, with ``references``
given as sacrebleu takes them, one list of sentences per reference set.
"""

from course_lib.text_metrics.bleu import corpus_bleu as _bleu


def corpus_bleu(hypotheses: list[str], references: list[list[str]]) -> float:
    per_sentence = [list(refs) for refs in zip(*references, strict=True)]
    return 100 * _bleu(hypotheses, per_sentence, smoothing="exp").score
