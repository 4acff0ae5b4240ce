"""Exercise checkers of Chapter 9: ``from course_lib.bert import exercises as check``.

Each checker runs the learner's function on named cases (:func:`course_lib.checker.check_cases`)
and says in plain words what is wrong, naming known mistakes (:func:`course_lib.checker.first_mistake`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from course_lib.checker import Outcome, check_cases, describe, guarded, seeded

__all__ = ["best_span", "corrupt", "head_losses", "wordpiece_encode"]

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


@guarded
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


def _corrupt_cases():
    """Batches the learner did not choose: ids 0..39, [CLS] = 1, [SEP] = 2, [PAD] = 0, [MASK] = 3."""
    rng = seeded(SEED)
    out = []
    for k, (B, L) in enumerate([(4, 12), (8, 30), (2, 50)]):
        tokens = rng.integers(4, 40, (B, L))
        tokens[:, 0], tokens[:, -1] = 1, 2
        tokens[0, -3:-1], tokens[0, -1] = 0, 0  # a padded row
        tokens[0, -4] = 2
        u = rng.random((B, L))
        u[:, 0] = rng.random(B) * 0.15  # draws that would choose [CLS] if specials were allowed
        random_ids = rng.integers(4, 40, (B, L))
        out.append((f"random batch {k + 1} {B}x{L}", (tokens, u, random_ids, 3, (0, 1, 2, 3))))
    return out


@guarded
def corrupt(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(tokens, u, random_ids, mask_id, special_ids)`` -> ``(inputs, labels)``: BERT's
    15% / 80-10-10 corruption from one uniform draw ``u`` per position, as
    :func:`course_lib.bert.masking.corrupt` with ``p = 0.15``.

    >>> from course_lib.bert.masking import corrupt as lib
    >>> corrupt(lambda t, u, r, m, s: lib(t, u, r, mask_id=m, special_ids=s)).passed
    True
    """
    from course_lib.bert.inputs import IGNORE
    from course_lib.bert.masking import corrupt as lib

    def wrong(t, u, r, m, s):
        """(inputs, labels) of the known mistakes, most telling first."""
        x, y = lib(t, u, r, mask_id=m, special_ids=s)
        x_all, y_all = lib(t, u, r, mask_id=m, special_ids=())
        chosen = y != IGNORE
        u_scaled = np.where(np.isin(t, s), 1.0, u)
        return [
            ((x_all, y_all), "you also choose special tokens ([CLS], [SEP], [PAD]): a special "
             "token is never chosen, whatever its draw"),
            ((np.where(chosen, np.where(u_scaled < 0.8, m, x), t), y),
             "the 80/10/10 split is of the *chosen* positions: compare u with 0.8 * 0.15 and "
             "0.9 * 0.15, not with 0.8 and 0.9"),
            ((np.where(chosen & (u_scaled < 0.015), m, np.where(chosen & (u_scaled < 0.135), r, t)), y),
             "[MASK] takes the lowest 80% of the chosen draws (u < 0.12), the random token the "
             "next 10% (0.12 <= u < 0.135); you swapped them"),
            ((x, np.where(x == m, t, IGNORE)), "the labels must be set at *every* chosen "
             "position (random and unchanged ones too), not only where [MASK] is shown"),
            ((x, t), "every position that is not chosen gets the label -100 (IGNORE), so that "
             "the loss skips it"),
            ((x, np.where(chosen, x, IGNORE)), "a label is the *original* token, not the "
             "corrupted input (the model must undo the corruption)"),
        ]  # fmt: skip

    def compare(got, want):
        args = next(a for _, a, w in cases if w is want)
        try:
            x, y = (np.asarray(v) for v in got)
        except (TypeError, ValueError):
            return f"return a pair (inputs, labels) of arrays, got {type(got).__name__}"
        if x.shape != want[0].shape or y.shape != want[1].shape:
            return f"inputs and labels must have the tokens' shape {want[0].shape}, got {x.shape} and {y.shape}"
        if np.array_equal(x, want[0]) and np.array_equal(y, want[1]):
            return None
        for (wx, wy), hint in wrong(*args):
            if np.array_equal(x, wx) and np.array_equal(y, wy):
                return hint
        bad = "inputs" if not np.array_equal(x, want[0]) else "labels"
        i = tuple(
            int(v[0]) for v in np.nonzero((x != want[0]) if bad == "inputs" else (y != want[1]))
        )
        t, u = args[0], args[1]
        return (f"your {bad} differ at position {i} (token {int(t[i])}, u = {u[i]:.4f}): "
                f"got {int((x if bad == 'inputs' else y)[i])}, expected {int(want[0 if bad == 'inputs' else 1][i])}")  # fmt: skip

    cases = [
        (d, a, lib(a[0], a[1], a[2], mask_id=a[3], special_ids=a[4])) for d, a in _corrupt_cases()
    ]
    return check_cases(
        "BERT's corruption from one draw", fn, cases, compare=compare, require=require
    )


def _loss_cases():
    import torch

    g = torch.Generator().manual_seed(SEED)
    out = []
    for k, (B, L, C) in enumerate([(3, 7, 2), (5, 11, 5)]):
        real = (
            torch.arange(L)[None] < torch.tensor([L, L - 2, L - 3, L, L - 1][:B])[:, None]
        )  # (B, L)
        cls = torch.randn(B, C, generator=g, dtype=torch.float64)
        y = torch.randint(0, C, (B,), generator=g)
        st, en = (torch.randn(B, L, generator=g, dtype=torch.float64).masked_fill(~real, float("-inf"))
                  for _ in range(2))  # fmt: skip
        s = torch.randint(1, L - 3, (B,), generator=g)
        e = s + torch.randint(0, 2, (B,), generator=g)
        tags = torch.randn(B, L, C, generator=g, dtype=torch.float64)
        t = torch.randint(0, C, (B, L), generator=g)
        t[:, 0] = -100  # [CLS]
        t[~real] = -100  # padding
        out.append((f"random batch {k + 1} (B={B}, L={L}, C={C})", (cls, y, st, en, s, e, tags, t)))
    return out


@guarded
def head_losses(classification_loss: Callable, span_loss: Callable, tagging_loss: Callable,
                *, require: bool = False) -> Outcome:  # fmt: skip
    """The three task heads' losses, against :mod:`course_lib.bert.model`'s heads:

    * ``classification_loss(logits (B, C), labels (B,))``: mean cross-entropy over inputs;
    * ``span_loss(start (B, L), end (B, L), starts (B,), ends (B,))``: the mean of the start and
      the end cross-entropies (padding scores are ``-inf``);
    * ``tagging_loss(logits (B, L, C), tags (B, L))``: mean cross-entropy over the positions
      whose tag is not -100.

    >>> import torch.nn.functional as F
    >>> ce = lambda z, y: F.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1), ignore_index=-100)
    >>> head_losses(ce, lambda s, e, a, b: (ce(s, a) + ce(e, b)) / 2, ce).passed
    True
    """
    import torch

    from course_lib.bert.model import SequenceClassifier, SpanPredictor, TokenTagger

    def nll(z, y):  # the mistakes below, written with the same reductions
        return -torch.log_softmax(z, -1).gather(-1, y[..., None].clamp(min=0))[..., 0]

    def both(a, args):
        cls, y, st, en, s, e, tags, t = args
        got = (classification_loss(cls, y), span_loss(st, en, s, e), tagging_loss(tags, t))
        return got

    def expected(args):
        cls, y, st, en, s, e, tags, t = args
        return (float(SequenceClassifier.loss(None, cls, y)), float(SpanPredictor.loss(None, st, en, s, e)),
                float(TokenTagger.loss(None, tags, t)))  # fmt: skip

    def compare(got, want):
        args = next(a for _, a, w in cases if w is want)
        cls, y, st, en, s, e, tags, t = args
        names = ("classification_loss", "span_loss", "tagging_loss")
        mistakes = [
            {"you did not take the log of a softmax: the cross-entropy is -log softmax(z)[y], "
             "not -z[y]": float(-cls.gather(1, y[:, None]).mean())},
            {"the span loss is the *mean* of the start and end losses, not their sum":
             float(nll(st, s).mean() + nll(en, e).mean()),
             "you used only the start scores: the end position has its own loss":
             float(nll(st, s).mean())},
            {"the mean must be over the tagged positions only: skip every tag of -100 "
             "(you divided by all B*L positions)": float((nll(tags, t) * (t != -100)).sum() / t.numel())},
        ]  # fmt: skip
        try:
            values = [float(v) for v in got]
        except (TypeError, ValueError):
            return "each function must return one number (a 0-dim tensor), got " + ", ".join(
                describe(v) for v in got
            )
        for name, v, w, hints in zip(names, values, want, mistakes, strict=True):
            if abs(v - w) > 1e-9 * max(1.0, abs(w)):
                hint = next(
                    (h for h, x in hints.items() if abs(v - x) < 1e-9 * max(1.0, abs(x))), ""
                )
                return f"{name} returns {v:.6g}, expected {w:.6g}" + (f": {hint}" if hint else "")
        return None

    cases = [(d, a, expected(a)) for d, a in _loss_cases()]
    return check_cases("the three heads' losses", lambda *a: both(None, a), cases, compare=compare,
                       require=require)  # fmt: skip


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


@guarded
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
