"""Evaluating generated text: n-grams, BLEU and ROUGE (Chapter 3).

Plain Python, written for speed (there is no array maths to mirror in NumPy and PyTorch):

* :mod:`~course_lib.text_metrics.tokenizers`: the ``none``, ``13a``, ``char``, ``rouge`` and ``intl``
  tokenizers;
* :mod:`~course_lib.text_metrics.ngrams`: n-gram sets and substring counts, eqs. (5)-(6);
* :mod:`~course_lib.text_metrics.bleu`: modified precision, brevity penalty and BLEU, eqs. (7)-(11);
* :mod:`~course_lib.text_metrics.stats`: BLEU's counts (eqs. 7, 9, 10) for whole corpora, fast;
* :mod:`~course_lib.text_metrics.rouge`: ROUGE-n as eq. (12) defines it, and its common variants;
* :mod:`~course_lib.text_metrics.lcs`: ROUGE-L and ROUGE-Lsum (longest common subsequences);
* :mod:`~course_lib.text_metrics.chrf`: chrF and chrF++ (character n-gram F-scores);
* :mod:`~course_lib.text_metrics.perplexity`: perplexity, and an add-k word-bigram model to score;
* :mod:`~course_lib.text_metrics.significance`: the paired bootstrap for a difference of BLEU;
* :mod:`~course_lib.text_metrics.dataset`: the chapter's translation evaluation set in ``data/``.
"""

from course_lib.text_metrics.bleu import (
    SMOOTHING,
    BleuResult,
    BleuStats,
    bleu_from_stats,
    brevity_penalty,
    clipped_counts,
    closest_reference_length,
    corpus_bleu,
    corpus_stats,
    effective_reference_length,
    modified_precision,
    sentence_bleu,
)
from course_lib.text_metrics.chrf import ChrfResult, corpus_chrf, sentence_chrf
from course_lib.text_metrics.lcs import (
    LCS_VARIANTS,
    corpus_rouge_l,
    lcs_indices,
    lcs_length,
    rouge_l,
    rouge_lsum,
)
from course_lib.text_metrics.ngrams import (
    ngram_counts,
    ngrams,
    substring_count,
    substring_count_as_printed,
)
from course_lib.text_metrics.perplexity import BigramLM, perplexity
from course_lib.text_metrics.rouge import (
    MEASURES,
    ROUGE_VARIANTS,
    RougeScore,
    corpus_rouge_n,
    rouge_n,
    rouge_n_pairs,
)
from course_lib.text_metrics.significance import PairedBootstrap, paired_bootstrap
from course_lib.text_metrics.tokenizers import TOKENIZERS, tokenize, tokenize_many

__all__ = [
    "LCS_VARIANTS",
    "MEASURES",
    "PairedBootstrap",
    "ROUGE_VARIANTS",
    "SMOOTHING",
    "TOKENIZERS",
    "BigramLM",
    "BleuResult",
    "BleuStats",
    "ChrfResult",
    "RougeScore",
    "bleu_from_stats",
    "brevity_penalty",
    "clipped_counts",
    "closest_reference_length",
    "corpus_bleu",
    "corpus_chrf",
    "corpus_rouge_l",
    "corpus_rouge_n",
    "corpus_stats",
    "effective_reference_length",
    "lcs_indices",
    "lcs_length",
    "modified_precision",
    "ngram_counts",
    "ngrams",
    "paired_bootstrap",
    "perplexity",
    "rouge_l",
    "rouge_lsum",
    "rouge_n",
    "rouge_n_pairs",
    "sentence_bleu",
    "sentence_chrf",
    "substring_count",
    "substring_count_as_printed",
    "tokenize",
    "tokenize_many",
]
