"""Exercise checkers of Chapter 9: ``from course_lib.bert import exercises as check``.

Each checker runs the learner's function on named cases (:func:`course_lib.checker.check_cases`)
and says in plain words what is wrong, naming known mistakes (:func:`course_lib.checker.first_mistake`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from course_lib.checker import Outcome, check_cases, diagnose, first_mistake, seeded

__all__ = ["best_span", "mask_positions", "wordpiece_encode"]

#: Seed of this chapter's checker inputs.
SEED = 9


def _span_cases():
    rng = seeded(SEED)
    cases = [
        (
            "a start after the best end",
            (np.array([0.0, 0.0, 0.0, 9.0]), np.array([0.0, 5.0, 0.0, 1.0])),
            3,
        ),
        (
            "a span longer than max_tokens",
            (np.array([6.0, 0.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 6.0])),
            2,
        ),
    ]
    for k in range(4):
        cases.append(
            (f"random scores {k + 1}", (rng.standard_normal(10), rng.standard_normal(10)), 3)
        )
    return cases


def _brute_span(s: np.ndarray, e: np.ndarray, max_tokens: int) -> tuple[int, int]:
    pairs = [(i, j) for i in range(len(s)) for j in range(i, min(i + max_tokens, len(s)))]
    return max(pairs, key=lambda ij: s[ij[0]] + e[ij[1]])


def best_span(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(start_logits, end_logits, max_tokens)`` returns the best (i, j): i <= j < i + max_tokens.

    >>> best_span(lambda s, e, m: max(((i, j) for i in range(len(s)) for j in range(i, min(i + m, len(s)))),
    ...                               key=lambda ij: s[ij[0]] + e[ij[1]])).passed
    True
    """
    cases = [(d, (s, e, m), _brute_span(s, e, m)) for d, (s, e), m in _span_cases()]

    def compare(got, want):
        try:
            i, j = (int(v) for v in got)
        except (TypeError, ValueError):
            return f"return a pair of positions (i, j), got {got!r}"
        (s, e, m) = next(args for _, args, w in cases if w == want)
        if (i, j) == want:
            return None
        if j < i:
            return f"you return a span whose end comes before its start ({i}, {j}): require i <= j"
        if j - i + 1 > m:
            return f"your span ({i}, {j}) has {j - i + 1} tokens, more than max_tokens = {m}"
        return f"you return ({i}, {j}) with score {s[i] + e[j]:.4g}, but ({want[0]}, {want[1]}) scores {s[want[0]] + e[want[1]]:.4g}"

    return check_cases(
        "best span from start/end scores", fn, cases, compare=compare, require=require
    )


def _mask_cases():
    rng = seeded(SEED)
    out = []
    for k in range(3):
        tokens = rng.integers(0, 8, (4, 12))
        tokens[:, 0], tokens[:, -1] = 1, 2  # [CLS] = 1, [SEP] = 2
        u = rng.random(tokens.shape)
        out.append(
            (f"random batch {k + 1}", (tokens, u, (1, 2)), (u < 0.15) & ~np.isin(tokens, (1, 2)))
        )
    return out


def mask_positions(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(tokens, u, special)``: which positions BERT chooses, given uniform draws ``u`` in [0, 1).

    A position is chosen when ``u < 0.15`` and its token is not a special token.

    >>> mask_positions(lambda t, u, s: (u < 0.15) & ~np.isin(t, s)).passed
    True
    """

    def compare(got, want):
        t, u, special = next(args for _, args, w in cases if w is want)
        hint = first_mistake(got, [
            (u < 0.15, "you also choose special tokens ([CLS], [SEP]): leave them out"),
            ((u < 0.15 * 0.8) & ~np.isin(t, special), "choose 15% of the positions; the 80/10/10 split comes after"),
            ((u > 0.85) & ~np.isin(t, special), "use u < 0.15, the positions whose draw falls in the first 15%"),
            ((u >= 0.15) & ~np.isin(t, special), "you choose the 85% that stay out of the loss, not the 15%"),
        ])  # fmt: skip
        return hint or diagnose(got, want.astype(float))

    cases = _mask_cases()
    return check_cases(
        "choosing the positions to predict", fn, cases, compare=compare, require=require
    )


#: The vocabulary of the WordPiece checker: short and long pieces, so that a shortest-match or a
#: no-``##`` answer differs from the right one.
_WP_VOCAB = frozenset(
    ["[UNK]", "u", "un", "a", "the", "there", "want", "##n", "##a", "##aff", "##f", "##able",
     "##ab", "##le", "##want", "##wan", "##t", "##ted", "##ed", "##e", "##d", "##re", "##fore",
     "aff", "able", "ed"]
)  # fmt: skip


def _wp_cases():
    from course_lib.bert.wordpiece import encode_word

    words = [
        ("a word in the vocabulary", "there"),
        ("a word of three pieces", "unaffable"),
        ("the longest piece first", "unwanted"),
        ("a word no piece can start", "xun"),
        ("a word whose end cannot be covered", "unaffablex"),
        ("a one-letter word", "a"),
        ("continuations only after the first piece", "therefore"),
    ]
    return [(d, (w, _WP_VOCAB), encode_word(w, _WP_VOCAB)) for d, w in words]


def _shortest_first(word: str, vocab) -> list[str]:
    out, start = [], 0
    while start < len(word):
        for end in range(start + 1, len(word) + 1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                out.append(piece)
                start = end
                break
        else:
            return ["[UNK]"]
    return out


def wordpiece_encode(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(word, vocab)``: WordPiece's greedy longest-match-first pieces of one word.

    Take the longest piece of ``vocab`` that starts the word, then repeatedly the longest
    ``##`` piece that continues it; return ``["[UNK]"]`` when some part cannot be matched.

    >>> from course_lib.bert.wordpiece import encode_word
    >>> wordpiece_encode(encode_word).passed
    True
    """

    def compare(got, want):
        word = next(args[0] for _, args, w in cases if w is want)
        if not isinstance(got, list | tuple) or not all(isinstance(p, str) for p in got):
            return f"return a list of str pieces, got {got!r}"
        got = list(got)
        if got == want:
            return None
        if want == ["[UNK]"] and "[UNK]" in got:
            return f"for {word!r} you return {got}: when any part of a word cannot be matched, the whole word is ['[UNK]']"
        if want == ["[UNK]"]:
            return f"{word!r} cannot be covered by the vocabulary, so the answer is ['[UNK]'], not {got}"
        if got == _shortest_first(word, _WP_VOCAB):
            return f"for {word!r} you take the shortest piece each time ({got}): take the longest, {want}"
        if [p.removeprefix("##") for p in got] == [p.removeprefix("##") for p in want]:
            return f"for {word!r} you return {got}: every piece after the first starts with '##', the first never does ({want})"
        return f"for {word!r} you return {got}, the expected pieces are {want}"

    cases = _wp_cases()
    return check_cases(
        "WordPiece encoding of one word", fn, cases, compare=compare, require=require
    )
