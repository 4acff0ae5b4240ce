"""Tasks a program can judge exactly, generated deterministically (Chapter 10).

InstructGPT's preferences come from people; here they come from a program, so that every
"human" judgement is exact and the same on every run.

* **Reversing a word** (the RLHF task): the prompt is a four-letter word over ``a``-``f`` and
  ``=``, the right response the word reversed and a full stop: ``"abcd="`` -> ``"dcba."``.
  :func:`judge` says whether a response is exactly right; :func:`grade` gives partial credit
  (the labeller's ranking); :func:`flawed_reward` is a proxy with two flaws a policy can exploit.
* **Digit sums** (the distillation task): the prompt is three digits and ``=``, the label the sum
  of the digits modulo 10; the teacher's rationale is the running sum modulo 10: ``"352="`` ->
  label ``"0"``, rationale ``"3,8,0"``.

>>> VOCAB.encode("ab="), VOCAB.decode([2, 3, 1])
([2, 3, 1], 'ab=')
>>> judge("abcd", "dcba."), judge("abcd", "dcb."), grade("abcd", "dcbf.")
(True, False, 0.75)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from course_lib.checks import check_int

__all__ = [
    "DIGITS",
    "LETTERS",
    "VOCAB",
    "CharVocab",
    "corruptions",
    "digit_example",
    "digit_strings",
    "flawed_reward",
    "grade",
    "judge",
    "preference_pairs",
    "reverse_words",
]

LETTERS = "abcdef"
DIGITS = "0123456789"
WORD_LENGTH = 4


@dataclass(frozen=True)
class CharVocab:
    """One token per character; ``"."`` (id 0) ends a response and pads."""

    chars: str

    def __post_init__(self) -> None:
        if len(set(self.chars)) != len(self.chars) or not self.chars.startswith("."):
            raise ValueError(f"chars must be distinct and start with '.', got {self.chars!r}")

    @property
    def size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        bad = sorted(set(text) - set(self.chars))
        if bad:
            raise ValueError(f"text {text!r} holds characters outside the vocabulary: {bad}")
        return [self.chars.index(c) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.chars[int(i)] for i in ids)


#: The reversal task's vocabulary (".=" then the letters).
VOCAB = CharVocab(".=" + LETTERS)
#: The digit task's vocabulary ("." "=" "?" "," then the digits).
DIGIT_VOCAB = CharVocab(".=?," + DIGITS)


def reverse_words(n: int | None = None, seed: int = 0) -> list[str]:
    """All 6^4 = 1296 four-letter words over ``a``-``f`` in a seeded random order (or the first n)."""
    words = ["".join(w) for w in itertools.product(LETTERS, repeat=WORD_LENGTH)]
    order = np.random.default_rng(seed).permutation(len(words))
    out = [words[i] for i in order]
    return out if n is None else out[: check_int(n, "n", low=0, high=len(out))]


def judge(word: str, response: str) -> bool:
    """Exactly right: the word reversed, then a full stop, nothing else."""
    return response == word[::-1] + "."


def grade(word: str, response: str) -> float:
    """Partial credit in [0, 1]: the share of positions that match the right answer.

    Positions are compared up to the longer of the two answers (the text before the first full
    stop), so a missing or an extra letter costs; a response that never stops loses 0.25.
    """
    target = word[::-1]
    body, stopped = (response.split(".", 1)[0], True) if "." in response else (response, False)
    n = max(len(target), len(body))
    hits = sum(a == b for a, b in zip(target, body, strict=False))
    return hits / n - (0 if stopped else 0.25)


def flawed_reward(word: str, response: str) -> float:
    """A proxy reward with two flaws: it checks only the first four letters and it likes length.

    ``hits(first four letters) / 4 + 0.1 * len(body)``: the kind of bias a learned reward model
    picks up (longer answers were preferred in its data) and a policy with no KL leash exploits.
    """
    target = word[::-1]
    body = response.split(".", 1)[0]
    hits = sum(a == b for a, b in zip(target, body[: len(target)], strict=False))
    return hits / len(target) + 0.1 * len(body)


def corruptions(word: str, rng: np.random.Generator) -> list[str]:
    """Wrong answers of the kinds a weak model makes: copied, swapped, a wrong letter, short, long."""
    r = word[::-1]
    i = int(rng.integers(len(r) - 1))
    swapped = r[:i] + r[i + 1] + r[i] + r[i + 2 :]
    j = int(rng.integers(len(r)))
    other = LETTERS[(LETTERS.index(r[j]) + 1 + int(rng.integers(len(LETTERS) - 1))) % len(LETTERS)]
    wrong_letter = r[:j] + other + r[j + 1 :]
    extra = LETTERS[int(rng.integers(len(LETTERS)))]
    return [w + "." for w in (word, swapped, wrong_letter, r[:-1], r + extra)]


def preference_pairs(words: Sequence[str], k: int = 4, seed: int = 0) -> list[tuple[str, str, str]]:
    """(word, chosen, rejected) comparisons: per prompt, the right answer and ``k - 1`` wrong ones,
    ranked by :func:`grade`; every pair of different grades is kept (InstructGPT's K choose 2).

    >>> preference_pairs(["abcd"], k=2, seed=0)[0][:2]
    ('abcd', 'dcba.')
    """
    check_int(k, "k", low=2, high=6)
    rng = np.random.default_rng(seed)
    out = []
    for w in words:
        wrong = corruptions(w, rng)
        pick = rng.choice(len(wrong), size=k - 1, replace=False)
        cands = [w[::-1] + "."] + [wrong[int(p)] for p in pick]
        scores = [grade(w, c) for c in cands]
        for a, b in itertools.combinations(range(k), 2):
            if scores[a] == scores[b] or cands[a] == cands[b]:
                continue
            hi, lo = (a, b) if scores[a] > scores[b] else (b, a)
            out.append((w, cands[hi], cands[lo]))
    return out


def digit_strings(n_digits: int = 3, seed: int = 0) -> list[str]:
    """Every string of ``n_digits`` digits, in a seeded random order.

    >>> len(digit_strings(3)), digit_strings(3)[:2] == digit_strings(3, seed=0)[:2]
    (1000, True)
    """
    check_int(n_digits, "n_digits", low=1, high=5)
    all_ = ["".join(p) for p in itertools.product(DIGITS, repeat=n_digits)]
    order = np.random.default_rng(seed).permutation(len(all_))
    return [all_[i] for i in order]


def digit_example(digits: str) -> tuple[str, str]:
    """The teacher's (label, rationale) for the digit-sum task: the sum mod 10 and the running sums.

    >>> digit_example("3529")
    ('9', '3,8,0,9')
    """
    if not digits or any(c not in DIGITS for c in digits):
        raise ValueError(f"digits must be a non-empty string of 0-9, got {digits!r}")
    sums = np.cumsum([int(c) for c in digits]) % 10
    return str(sums[-1]), ",".join(str(s) for s in sums)
