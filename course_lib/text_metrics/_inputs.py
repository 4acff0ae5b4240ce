"""Input checks and tokenization of a corpus: candidates and their reference sets.

The corpus layout follows the notes: ``candidates[i]`` is one sentence and ``references[i]`` is
the list of its references (``S_i`` in eq. (7)). A sentence is either a str, tokenized with the
chosen tokenizer, or an already tokenized list of str, used as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from course_lib.checks import check_choice
from course_lib.text_metrics.tokenizers import TOKENIZERS, tokenize_many

SACREBLEU_HINT = (
    "references[i] must hold the references of candidates[i] (the notes' layout); sacrebleu's "
    "layout, one list per reference stream, is its transpose: use list(zip(*streams))"
)


def _is_tokens(x: object) -> bool:
    return isinstance(x, list | tuple) and all(isinstance(t, str) for t in x)


def _check_sentence(x: object, name: str) -> None:
    if isinstance(x, str) or _is_tokens(x):
        return
    raise TypeError(
        f"{name} must be a sentence (a str, or a list of str tokens), got {type(x).__name__}"
    )


def _check_sequence(x: object, name: str, what: str) -> None:
    if isinstance(x, str):
        raise TypeError(f"{name} must be a list of {what}, got a single str {x[:40]!r}")
    if not isinstance(x, Sequence):
        raise TypeError(f"{name} must be a list of {what}, got {type(x).__name__}")


def check_corpus(candidates: object, references: object) -> None:
    """Raise a clear error unless ``candidates`` and ``references`` form a corpus.

    >>> check_corpus(["a b"], [["a b", "a c"]])
    >>> check_corpus(["a b", "c"], [["a b"]])
    Traceback (most recent call last):
    ...
    ValueError: got 2 candidates but 1 reference sets: references[i] must hold the references of candidates[i] (the notes' layout); sacrebleu's layout, one list per reference stream, is its transpose: use list(zip(*streams))
    """
    _check_sequence(candidates, "candidates", "sentences")
    _check_sequence(references, "references", "reference sets (one list per candidate)")
    if len(candidates) == 0:
        raise ValueError("candidates is empty: a corpus needs at least one sentence")
    if len(candidates) != len(references):
        raise ValueError(
            f"got {len(candidates)} candidates but {len(references)} reference sets: "
            + SACREBLEU_HINT
        )
    for i, cand in enumerate(candidates):
        _check_sentence(cand, f"candidates[{i}]")
    for i, refs in enumerate(references):
        if isinstance(refs, str):
            raise TypeError(
                f"references[{i}] must be a list of references, got a single str "
                f"{refs[:40]!r}: wrap it in a list, [{refs[:20]!r}...]"
            )
        if not isinstance(refs, Sequence):
            raise TypeError(
                f"references[{i}] must be a list of references, got {type(refs).__name__}"
            )
        if len(refs) == 0:
            raise ValueError(
                f"references[{i}] is empty: candidate {i} has no reference to be compared with"
            )
        for j, ref in enumerate(refs):
            _check_sentence(ref, f"references[{i}][{j}]")


def tokenize_corpus(
    candidates: Sequence, references: Sequence, method: str, lowercase: bool
) -> tuple[list[list[str]], list[list[list[str]]]]:
    """Check the corpus, then tokenize every str in it (one pass per side for speed)."""
    check_choice(method, "tokenize", TOKENIZERS)
    if not isinstance(lowercase, bool):
        raise TypeError(f"lowercase must be True or False, got {lowercase!r}")
    check_corpus(candidates, references)
    return _tokenize_all(candidates, method, lowercase), _tokenize_refs(
        references, method, lowercase
    )


def _tokenize_all(sentences: Sequence, method: str, lowercase: bool) -> list[list[str]]:
    if all(type(s) is str for s in sentences):
        return tokenize_many(sentences, method, lowercase=lowercase)
    texts = [s for s in sentences if isinstance(s, str)]
    done = iter(tokenize_many(texts, method, lowercase=lowercase))
    return [next(done) if isinstance(s, str) else list(s) for s in sentences]


def _tokenize_refs(references: Sequence, method: str, lowercase: bool) -> list[list[list[str]]]:
    flat = [ref for refs in references for ref in refs]
    tokens = iter(_tokenize_all(flat, method, lowercase))
    return [[next(tokens) for _ in refs] for refs in references]


def check_weights(weights: object, name: str = "weights") -> tuple[float, ...]:
    """Check eq. (11)'s condition on the weights: each in [0, 1], summing to 1 (within 1e-9).

    >>> check_weights([0.5, 0.5])
    (0.5, 0.5)
    >>> check_weights([0.5, 0.6])
    Traceback (most recent call last):
    ...
    ValueError: weights must sum to 1 (eq. 11), got (0.5, 0.6) with sum 1.1
    """
    if hasattr(weights, "tolist") and not isinstance(weights, list | tuple):  # NumPy, PyTorch
        weights = weights.tolist()
    _check_sequence(weights, name, "numbers")
    if len(weights) == 0:
        raise ValueError(f"{name} is empty: give one weight per n-gram order, e.g. (0.25,) * 4")
    out = []
    for i, w in enumerate(weights):
        if isinstance(w, bool) or not isinstance(w, int | float) and not hasattr(w, "__float__"):
            raise TypeError(f"{name}[{i}] must be a number, got {type(w).__name__}")
        w = float(w)
        if not math.isfinite(w):
            raise ValueError(f"{name}[{i}] must be finite, got {w}")
        if w < 0 or w > 1:
            raise ValueError(f"{name}[{i}] = {w:g} is outside [0, 1] (eq. 11)")
        out.append(w)
    total = math.fsum(out)
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"{name} must sum to 1 (eq. 11), got {tuple(out)} with sum {total:g}")
    return tuple(out)
