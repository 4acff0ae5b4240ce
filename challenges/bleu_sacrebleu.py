"""sacrebleu's corpus BLEU, the bar of ``./course challenge bleu`` (correct and timed)."""

import sacrebleu


def corpus_bleu(hypotheses: list[str], references: list[list[str]]) -> float:
    return sacrebleu.corpus_bleu(hypotheses, references).score
