"""Exercise checkers of Chapter 9: ``from course_lib.bert import exercises as check``.

Each checker runs the learner's function on named cases (:func:`course_lib.checker.check_cases`)
and says in plain words what is wrong, naming known mistakes (:func:`course_lib.checker.first_mistake`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from course_lib.checker import Outcome, check_cases, guarded, seeded

__all__ = [
    "best_span", "corrupt", "greedy_counterexample", "head_losses", "padding_mask",
    "wordpiece_encode",
]  # fmt: skip

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
    cases = [(d, (s, e, m), (s, e, m)) for d, (s, e), m in _span_cases()]

    def compare(got, args):
        s, e, m = args
        want = _brute_span(s, e, m)
        try:
            i, j = (int(v) for v in got)
        except (TypeError, ValueError):
            return f"return a pair of positions (i, j), got {got!r}"
        if not (0 <= i < len(s) and 0 <= j < len(s)):
            return f"positions must lie in 0..{len(s) - 1}, got ({i}, {j})"
        best = s[want[0]] + e[want[1]]
        if 0 <= i <= j < min(i + m, len(s)) and s[i] + e[j] >= best - 1e-9 * (1 + abs(best)):
            return None  # the best span, or one tied with it
        if (i, j) == (int(np.argmax(s)), int(np.argmax(e))):
            return (
                f"you took the best start and the best end separately, ({i}, {j}): search the "
                "pairs (i, j) with i <= j < i + max_tokens together"
            )
        if j < i:
            return f"you return a span whose end comes before its start ({i}, {j}): require i <= j"
        if j - i + 1 > m:
            return f"your span ({i}, {j}) has {j - i + 1} tokens, more than max_tokens = {m}"
        i0 = int(np.argmax(s))
        greedy = (i0, i0 + int(np.argmax(e[i0 : i0 + m])))
        if (i, j) == greedy:
            return (
                f"you fixed the best start {i0} first and then the best end after it: a start "
                "with a lower score can win with a better end; score every pair"
            )
        if m > 1 and (i, j) == _brute_span(s, e, m - 1) and want[1] - want[0] + 1 == m:
            return (
                f"your spans stop at max_tokens - 1 = {m - 1} tokens: j < i + max_tokens "
                f"allows spans of {m} tokens, like ({want[0]}, {want[1]})"
            )
        pairs = [(a, b) for a in range(len(s)) for b in range(a, min(a + m, len(s)))]
        if (i, j) == max(pairs, key=lambda ab: s[ab[0]] * e[ab[1]]):
            return (
                "you multiplied the start and end scores: they are logits (log-probabilities up "
                "to a constant), so a span's score is their sum"
            )
        return (
            f"you return ({i}, {j}) with score {s[i] + e[j]:.4g}, but ({want[0]}, {want[1]}) "
            f"scores {s[want[0]] + e[want[1]]:.4g}"
        )

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

    def as_ids(v, name: str) -> np.ndarray:
        from course_lib.checks import is_tensor

        if is_tensor(v):
            v = v.detach().cpu().numpy()
        a = np.asarray(v) if isinstance(v, np.ndarray | list | tuple) else None
        if a is None or a.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be an array of integer ids, got {type(v).__name__}")
        if a.dtype.kind == "f" and not (np.all(np.isfinite(a)) and np.all(a == np.round(a))):
            raise ValueError(f"{name} must hold whole ids, got values such as {a.ravel()[0]!r}")
        return a.astype(np.int64)

    def compare(got, want):
        args = next(a for _, a, w in cases if w is want)
        if got is None:
            return "the function returned None: did you forget a `return` statement?"
        if not isinstance(got, tuple | list) or len(got) != 2:
            return f"return a pair (inputs, labels) of arrays, got {type(got).__name__}"
        try:
            x, y = as_ids(got[0], "inputs"), as_ids(got[1], "labels")
        except ValueError as err:
            return str(err)
        if x.shape != want[0].shape or y.shape != want[1].shape:
            return f"inputs and labels must have the tokens' shape {want[0].shape}, got {x.shape} and {y.shape}"
        if np.array_equal(x, want[0]) and np.array_equal(y, want[1]):
            return None
        for (wx, wy), hint in wrong(*args):
            if np.array_equal(x, wx) and np.array_equal(y, wy):
                return hint
        bad, mine, theirs = (("inputs", x, want[0]) if not np.array_equal(x, want[0])
                             else ("labels", y, want[1]))  # fmt: skip
        i = tuple(int(v[0]) for v in np.nonzero(mine != theirs))
        t, u = args[0], args[1]
        return (f"your {bad} differ at position {i} (token {int(t[i])}, u = {u[i]:.4f}): "
                f"got {int(mine[i])}, expected {int(theirs[i])}")  # fmt: skip

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


def _one_number(v) -> float:
    """A learner's loss as a float: a number or a one-element tensor or array."""
    from course_lib.checks import is_tensor

    if is_tensor(v):
        if v.numel() != 1:
            raise ValueError(
                f"each function must return one number, got a tensor of shape {tuple(v.shape)}"
            )
        return float(v.detach().double())
    if isinstance(v, bool | str | bytes) or v is None:
        raise TypeError(f"each function must return one number (a 0-dim tensor), got {v!r}")
    a = np.asarray(v) if isinstance(v, np.ndarray | np.generic | int | float) else None
    if a is None or a.size != 1 or a.dtype.kind not in "iuf":
        raise TypeError(
            f"each function must return one number (a 0-dim tensor), got {type(v).__name__}"
        )
    return float(a)


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
        for name, f in zip(("classification_loss", "span_loss", "tagging_loss"),
                           (classification_loss, span_loss, tagging_loss), strict=True):  # fmt: skip
            if not callable(f):
                raise TypeError(f"{name} must be a function, got {type(f).__name__}")
        args = [v.clone() for v in args]  # a loss that writes into its inputs harms no other
        cls, y, st, en, s, e, tags, t = args
        return (classification_loss(cls, y), span_loss(st, en, s, e), tagging_loss(tags, t))

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
             "not -z[y]": float(-cls.gather(1, y[:, None]).mean()),
             "you took the softmax but not its log: the cross-entropy is -log softmax(z)[y], "
             "not -softmax(z)[y]": float(-torch.softmax(cls, -1).gather(1, y[:, None]).mean()),
             "you summed over the inputs: the loss is the *mean* over the batch":
             float(nll(cls, y).sum())},
            {"the span loss is the *mean* of the start and end losses, not their sum":
             float(nll(st, s).mean() + nll(en, e).mean()),
             "you used only the start scores: the end position has its own loss":
             float(nll(st, s).mean()),
             "you scored the start with the end positions and the end with the start ones":
             float((nll(st, e).mean() + nll(en, s).mean()) / 2)},
            {"the mean must be over the tagged positions only: skip every tag of -100 "
             "(you divided by all B*L positions)": float((nll(tags, t) * (t != -100)).sum() / t.numel()),
             "you counted the positions tagged -100 as class 0: leave them out of the loss":
             float(nll(tags, t.clamp(min=0)).mean()),
             "you averaged each row over its tagged positions, then the rows: take one mean over "
             "all tagged positions of the batch":
             float(((nll(tags, t) * (t != -100)).sum(1) / (t != -100).sum(1)).mean())},
        ]  # fmt: skip
        try:
            values = [_one_number(v) for v in got]
        except (TypeError, ValueError) as err:
            return str(err)
        for name, v, w, hints in zip(names, values, want, mistakes, strict=True):
            if not math.isclose(v, w, rel_tol=1e-5, abs_tol=1e-7):
                if math.isnan(v):
                    return f"{name} returns NaN: is a -inf score multiplied by 0 somewhere?"
                hint = next((h for h, x in hints.items() if math.isclose(v, x, rel_tol=1e-5)), "")
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


# ------------------------------------------------------------------------------ padding mask
def _padding_cases():
    """Boolean masks (B, L), True for real tokens: padding of different lengths, none, and a
    batch whose first row is all padding's complement (every token real)."""
    lengths = [([5, 3, 1], 6), ([7, 7], 7), ([2, 4, 6, 3], 9)]
    out = []
    for k, (lens, L) in enumerate(lengths):
        m = np.arange(L)[None, :] < np.array(lens)[:, None]  # (B, L)
        out.append((f"batch {k + 1}: lengths {lens} padded to {L}", (m,), m))
    return out


def _as_mask(got, shape4: tuple[int, int, int, int]) -> tuple[np.ndarray | None, str | None]:
    """The learner's mask broadcast to (B, h, L, L) as booleans, or (None, what is wrong)."""
    from course_lib.checks import is_tensor

    if got is None:
        return None, "the function returned None: did you forget a `return` statement?"
    if is_tensor(got):
        got = got.detach().cpu().numpy()
    if isinstance(got, str | bytes) or not hasattr(got, "__len__") and not hasattr(got, "shape"):
        return None, f"return an array (or a tensor) of booleans, got {type(got).__name__}"
    try:
        a = np.asarray(got)
    except Exception:  # noqa: BLE001 - whatever the learner returned
        return None, f"return an array (or a tensor) of booleans, got {type(got).__name__}"
    if a.dtype.kind == "f" and np.all((a == 0) | np.isneginf(a)):
        a = a == 0  # an additive mask: 0 where allowed, -inf where hidden
    elif a.dtype.kind in "biuf":
        if a.dtype.kind == "f" and np.isnan(a).any():
            return None, "your mask contains NaN: return True/False (or 1/0) per query and key"
        if not np.all((a == 0) | (a == 1)):
            return None, "return True/False (or 1/0) per query and key, not other numbers"
        a = a.astype(bool)
    else:
        return None, f"return an array of booleans, got an array of {a.dtype}"
    B, h, L, _ = shape4
    try:
        return np.broadcast_to(a, shape4), None
    except ValueError:
        hint = ""
        if a.shape == (B, L):
            hint = ": add the head and query axes, (B, 1, 1, L), so that it lines up with the keys"
        return None, (f"your mask has shape {a.shape}, which does not broadcast against attention "
                      f"scores (B, h, L, L) = {shape4}{hint}")  # fmt: skip


@guarded
def padding_mask(fn: Callable, *, require: bool = False) -> Outcome:
    """``fn(attention_mask)``: from a boolean (B, L) array, True for real tokens, the mask that
    broadcasts against attention scores (B, h, L, L), True where query i may attend to key j:
    every real key, for every query (BERT hides only padding keys).

    >>> padding_mask(lambda m: np.asarray(m)[:, None, None, :]).passed
    True
    >>> print(padding_mask(lambda m: np.asarray(m)[:, None, :, None]).details[0])  # doctest: +ELLIPSIS
    on batch 1: ...: you hid padding *queries*, not padding *keys*...
    """
    h = 4

    def compare(got, m):
        B, L = m.shape
        mask, problem = _as_mask(got, (B, h, L, L))
        if problem:
            return problem
        want = np.broadcast_to(m[:, None, None, :], (B, h, L, L))
        if np.array_equal(mask, want):
            return None
        causal = want & np.tri(L, dtype=bool)
        mistakes = [
            (np.broadcast_to(m[:, None, :, None], want.shape),
             "you hid padding *queries*, not padding *keys*: a real token still attends to the "
             "padding; the keys run along the last axis, so index it: attention_mask[:, None, None, :]"),
            (~want, "your mask is True at the padding: it must be True where attention is *allowed*, "
             "and attention_mask is True for the real tokens"),
            (causal, "your mask also hides the keys after each query: that is GPT's causal mask, "
             "and BERT hides only padding"),
            (want & np.broadcast_to(m[:, None, :, None], want.shape),
             "you hide padding queries as well as padding keys: a padded query's row then has no "
             "key at all, its softmax is 0/0 = NaN, and the NaN reaches every token through the "
             "next block's values; hide the keys only"),
        ]  # fmt: skip
        for wrong, hint in mistakes:
            if np.array_equal(mask, wrong):
                return hint
        b, hh, i, j = (int(v[0]) for v in np.nonzero(mask != want))
        return (f"row {b}, query {i}, key {j}: your mask says {bool(mask[b, hh, i, j])}, it should say "
                f"{bool(want[b, hh, i, j])} (key {j} is {'a real token' if m[b, j] else 'padding'})")  # fmt: skip

    cases = _padding_cases()
    return check_cases("BERT's padding mask", fn, cases, compare=compare, require=require)


# ------------------------------------------------------------------- greedy longest-match
def _segmentable(word: str, vocab: set[str]) -> list[str] | None:
    """Some cut of ``word`` into pieces of ``vocab`` (first piece plain, the rest with ``##``),
    by dynamic programming, or None."""
    best: list[list[str] | None] = [None] * (len(word) + 1)
    best[0] = []
    for end in range(1, len(word) + 1):
        for start in range(end):
            if best[start] is None:
                continue
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                best[end] = [*best[start], piece]
                break
    return best[len(word)]


@guarded
def greedy_counterexample(word, vocab, *, require: bool = False) -> Outcome:
    """A word and a vocabulary (at most six pieces) for which greedy longest-match returns
    ``["[UNK]"]`` although the word can be cut into pieces of the vocabulary.

    >>> greedy_counterexample("abc", {"ab", "a", "##bc"}).passed
    True
    >>> print(greedy_counterexample("abc", {"abc"}).details[0])  # doctest: +ELLIPSIS
    greedy longest-match covers 'abc' as ['abc']...
    """
    from course_lib.bert.wordpiece import encode_word

    title = "a word that greedy longest-match cannot cut, though a cut exists"

    def verdict(problem: str | None, found: str = "") -> Outcome:
        outcome = Outcome(title, problem is None, [problem or found])
        if require and not outcome.passed:
            raise AssertionError(str(outcome))
        return outcome

    if word is None or vocab is None:
        return verdict("write your word and your vocabulary first (replace None), then run")
    if not isinstance(word, str) or not word or any(c.isspace() for c in word):
        return verdict(f"the word must be a non-empty str without spaces, got {word!r}")
    if isinstance(vocab, str | bytes) or not hasattr(vocab, "__iter__"):
        return verdict(
            f"the vocabulary must be a set (or list) of str pieces, got {type(vocab).__name__}"
        )
    try:
        pieces = list(vocab)
    except Exception:  # noqa: BLE001 - whatever the learner passed
        return verdict("the vocabulary could not be read as a collection of pieces")
    if not all(isinstance(p, str) and p for p in pieces):
        return verdict("every piece of the vocabulary must be a non-empty str")
    vocab = set(pieces) - {"[UNK]"}
    if len(vocab) > 6:
        return verdict(
            f"use at most six pieces (you have {len(vocab)}): a small example shows it best"
        )
    greedy = encode_word(word, vocab)
    cut = _segmentable(word, vocab)
    if greedy != ["[UNK]"]:
        return verdict(f"greedy longest-match covers {word!r} as {greedy}: pick a longest first "
                       "piece that leaves a rest no '##' piece starts")  # fmt: skip
    if cut is None:
        marked = vocab | {"##" + p for p in vocab if not p.startswith("##")}
        if _segmentable(word, marked) is not None:
            return verdict("no cut works with these pieces: a piece that continues a word must be "
                           "written with '##' (and the first one without)")  # fmt: skip
        return verdict(f"no cut of {word!r} into these pieces exists at all, so ['[UNK]'] is the "
                       "right answer there: greedy must fail where another cut would succeed")  # fmt: skip
    return verdict(None, f"greedy gives ['[UNK]'], but {cut} covers {word!r}")
