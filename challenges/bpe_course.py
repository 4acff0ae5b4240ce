"""The course's entry to ``./course challenge bpe``: chapter 7's fast trainer.

An entry defines ``train_bpe(input_path, vocab_size, special_tokens) -> (vocab, merges)`` as in
CS336's assignment 1: ``vocab`` maps ids to bytes, ``merges`` lists the merged pairs of bytes in
the order they were learned (ties broken towards the lexicographically greater pair).
"""

from course_lib.bpe.train import train_bpe  # noqa: F401
