"""The other two subword algorithms users meet, compared with BPE on the same text.

* **WordPiece** (Schuster and Nakajima 2012; BERT's release) grows the vocabulary like BPE, but
  merges the pair that most raises the likelihood of the training text under a unigram model of
  the pieces, a gain of about ``count(ab) * log(count(ab) N / (count(a) count(b)))``: frequency
  times pointwise mutual information (PMI). The Hugging Face course teaches a simplification
  that drops the frequency and scores a pair by the ratio ``count(ab) / (count(a) count(b))``
  alone (``course_lib.bpe.wordpiece`` implements it, for chapters 7 and 9). Hugging Face's
  *library* computes neither: ``tokenizers.trainers.WordPieceTrainer`` wraps the library's
  BPE trainer (``src/models/wordpiece/trainer.rs``), so it merges by frequency, with the
  ``##`` prefix.
  BERT's release marks word-internal pieces with ``##`` (GNMT instead marks word *starts* with
  ``_``); encoding is greedy longest-match from the left.
* **Unigram** (SentencePiece; Kudo 2018) goes the other way: it starts from a large set of
  candidate pieces, fits a unigram language model over them with EM (each word's segmentations
  form a lattice), and prunes the pieces whose removal costs the least likelihood; encoding is
  the most probable segmentation (Viterbi). SentencePiece writes a space as ``▁``, kept with the
  word that follows, and ``Metaspace`` splits on white space only, not on punctuation.

The comparison trains, on the same text and to the same vocabulary size, the course's BPE,
chapter 9's WordPiece trainer twice, scoring pairs by frequency (what ``WordPieceTrainer``
computes; chapter 9 measures that the two share about 92% of their pieces) and by the ratio
(with a floor on the pair count, since the bare ratio fills a vocabulary with rare names), and
Hugging Face's ``UnigramTrainer``, and compares them on the same lines by tokens per word (with
and without the tokens that are white space only) and how much of their vocabulary they use.
The two WordPiece rows differ in the score alone, and both are deterministic: Hugging Face's
trainer breaks ties between equally frequent pairs differently from run to run, which moved its
tokens per word by 0.3% between two runs of this page.
"""

from __future__ import annotations

from collections import Counter

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, pre_tokenizers, trainers

from course_lib.bpe.analysis import tokenizer_from_merges
from course_lib.bpe.train import count_words, train_bpe_words
from course_lib.checks import check_int

__all__ = ["compare_subword_methods", "hf_tokenizer"]


def hf_tokenizer(method: str, text: str, vocab_size: int) -> HFTokenizer:
    """A Hugging Face tokenizer of ``method`` (``bpe``, ``wordpiece``, ``unigram``) trained on ``text``."""
    check_int(vocab_size, "vocab_size", low=300)
    if method == "bpe":
        tok = HFTokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )  # fmt: skip
    elif method == "wordpiece":
        tok = HFTokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size, special_tokens=["[UNK]"], show_progress=False
        )
    elif method == "unigram":
        tok = HFTokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size, unk_token="<unk>", special_tokens=["<unk>"], show_progress=False
        )
    else:
        raise ValueError(f"method must be one of 'bpe', 'wordpiece', 'unigram'; got {method!r}")
    tok.train_from_iterator(text.splitlines(keepends=True), trainer=trainer)
    return tok


def _spaces_only(token: str) -> bool:
    """A token that stands for white space only (a byte-level space or newline, or ``▁``)."""
    return token.strip(" \t\r\n▁") == ""


#: The pair-count floor of the ratio-scored WordPiece row: chapter 9's 20 stops short of 2,000
#: pieces on the first 300,000 characters of Shakespeare (at 1,659); 10 fills them.
RATIO_MIN_COUNT = 10


def compare_subword_methods(train_text: str, test_text: str, vocab_size: int = 2000) -> dict:
    """For BPE (ours), WordPiece (Hugging Face's trainer, and the ratio score), and Unigram, each
    encoding the lines of ``test_text``: tokens per word, the same without tokens that are white
    space only, and the share of the vocabulary used.

    >>> table = compare_subword_methods("a b ab abc " * 50, "ab abc", 300)
    >>> list(table)
    ['BPE (course)', 'WordPiece, frequency', 'WordPiece, ratio', 'Unigram']
    >>> sorted(table["Unigram"])
    ['tokens per word', 'vocabulary used', 'without white-space tokens']
    """
    from course_lib.bpe import wordpiece as wp

    if not isinstance(train_text, str) or not isinstance(test_text, str):
        raise TypeError("train_text and test_text must be str")
    lines = test_text.splitlines()
    words = len(test_text.split())
    if not words:
        raise ValueError("test_text has no words")
    ours = tokenizer_from_merges(train_bpe_words(count_words([train_text]), vocab_size - 256))
    ids = [i for line in lines for i in ours.encode(line)]
    out = {
        "BPE (course)": {
            "tokens per word": len(ids) / words,
            "without white-space tokens": sum(not _spaces_only(ours.decode([i])) for i in ids)
            / words,
            "vocabulary used": len(set(ids)) / len(ours.vocab),
        }
    }
    for label, kw in (
        ("WordPiece, frequency", {"score": "frequency"}),
        ("WordPiece, ratio", {"min_count": RATIO_MIN_COUNT}),
    ):
        vocab = wp.train_wordpiece(train_text, vocab_size, specials=[wp.UNK], **kw)
        pieces = [p for line in lines for p in wp.encode(line, vocab)]
        out[label] = {
            "tokens per word": len(pieces) / words,
            "without white-space tokens": len(pieces) / words,  # no white-space pieces
            "vocabulary used": len(set(pieces)) / len(vocab),
        }
    tok = hf_tokenizer("unigram", train_text, vocab_size)
    enc = tok.encode_batch(lines)
    all_ids = [i for e in enc for i in e.ids]
    tokens = [t for e in enc for t in e.tokens]
    out["Unigram"] = {
        "tokens per word": len(all_ids) / words,
        "without white-space tokens": sum(not _spaces_only(t) for t in tokens) / words,
        "vocabulary used": len(Counter(all_ids)) / tok.get_vocab_size(),
    }
    return out
