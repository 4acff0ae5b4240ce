"""Chapter 9's WordPiece tokenizer, where chapter 9's code imports it from.

The trainer and the encoder live with chapter 7's tokenizers, in
:mod:`course_lib.bpe.wordpiece` (chapter 7 compares WordPiece with BPE and Unigram, and a
chapter's folder only uses earlier chapters'); this module names the same objects.

>>> from course_lib.bpe import wordpiece as home
>>> encode_word is home.encode_word
True
"""

from __future__ import annotations

from course_lib.bpe.wordpiece import (
    PREFIX,
    SPECIALS,
    UNK,
    WordPiece,
    encode,
    encode_word,
    merge_score,
    pre_tokenize,
    train_wordpiece,
)

__all__ = [
    "PREFIX",
    "SPECIALS",
    "UNK",
    "WordPiece",
    "encode",
    "encode_word",
    "merge_score",
    "pre_tokenize",
    "train_wordpiece",
]
