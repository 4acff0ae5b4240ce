"""Tokenizers for the text metrics (Chapter 3): ``none``, ``13a``, ``char``, ``rouge``, ``intl``.

BLEU and ROUGE count n-grams of *tokens*, so the score depends on how a sentence is cut into
tokens. The five tokenizers here reproduce established ones exactly:

* ``none``: split on whitespace (sacrebleu's ``tokenize="none"``);
* ``13a``: the tokenizer of the WMT script ``mteval-v13a.pl``, sacrebleu's default, which
  splits off punctuation (but keeps ``3.5`` and ``1,000`` together);
* ``char``: every non-whitespace character is a token (sacrebleu's ``tokenize="char"``);
* ``rouge``: lowercase, anything that is not ``a-z0-9`` separates tokens (the default tokenizer
  of Google's ``rouge-score`` package, without stemming);
* ``intl``: the international tokenizer of ``mteval-v14.pl`` (sacrebleu's ``tokenize="intl"``):
  splits off every Unicode punctuation mark (category P) unless it sits between digits, and every
  symbol (category S). Like the Perl script, it keeps a period after a number at the very end of
  a line ("in 1995." stays one token), which 13a splits.

:func:`tokenize_many` tokenizes a whole corpus at once and is what the corpus metrics use: for
``13a`` it runs each regular expression once over the joined corpus instead of once per line.

>>> tokenize("The cat sat on the mat.", "none")
['The', 'cat', 'sat', 'on', 'the', 'mat.']
>>> tokenize("The cat sat on the mat.", "13a")
['The', 'cat', 'sat', 'on', 'the', 'mat', '.']
>>> tokenize("It costs 3.5 dollars, or 1,000 cents.", "13a")
['It', 'costs', '3.5', 'dollars', ',', 'or', '1,000', 'cents', '.']
>>> tokenize("a cat", "char")
['a', 'c', 'a', 't']
>>> tokenize("The Cat's mat!", "rouge")
['the', 'cat', 's', 'mat']
>>> tokenize("«Bonjour», 3,5 €. In 1995.", "intl")
['«', 'Bonjour', '»', ',', '3,5', '€', '.', 'In', '1995.']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from course_lib.checks import check_choice

__all__ = ["TOKENIZERS", "tokenize", "tokenize_many"]

#: The tokenizer names accepted by every function of the chapter.
TOKENIZERS = ("none", "13a", "char", "rouge", "intl")

# mteval-v13a, as sacrebleu 2.x writes it (sacrebleu/tokenizers/tokenizer_re.py).
_PUNCT = re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])")  # each such character becomes ' c '
_CONTEXT = (
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),  # period and comma unless preceded by a digit
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),  # period and comma unless followed by a digit
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),  # dash when preceded by a digit
)
# The first expression pads single ASCII characters with spaces; str.translate does the same in
# C without a Python call per match. The table is computed from the expression itself.
_PAD = {c: f" {chr(c)} " for c in range(128) if _PUNCT.fullmatch(chr(c))}
_ROUGE_SPLIT = re.compile(r"[^a-z0-9]+")


def _check_text(text: object, name: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    return text


def _unescape_13a(line: str) -> str:
    """The language-independent part of 13a, applied to one line."""
    line = line.replace("<skipped>", "")
    line = line.replace("-\n", "")
    line = line.replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&")
        line = line.replace("&lt;", "<").replace("&gt;", ">")
    return line


def _split_13a(text: str) -> str:
    """The language-dependent part of 13a on already padded text (one line or many)."""
    text = text.translate(_PAD)
    for pattern, repl in _CONTEXT:
        text = pattern.sub(repl, text)
    return text


def tokenize(text: str, method: str = "13a", *, lowercase: bool = False) -> list[str]:
    """Cut one sentence into tokens with the tokenizer ``method`` (one of :data:`TOKENIZERS`).

    Trailing whitespace is stripped first and ``lowercase=True`` lowercases the text, as
    sacrebleu does before it tokenizes.

    >>> tokenize("Hello, world!")
    ['Hello', ',', 'world', '!']
    >>> tokenize("Hello, world!", "none", lowercase=True)
    ['hello,', 'world!']
    >>> tokenize("Hi", "bpe")
    Traceback (most recent call last):
    ...
    ValueError: method must be one of 'none', '13a', 'char', 'rouge', 'intl'; got 'bpe'
    """
    return tokenize_many([_check_text(text, "text")], method, lowercase=lowercase)[0]


def tokenize_many(
    lines: Sequence[str], method: str = "13a", *, lowercase: bool = False
) -> list[list[str]]:
    """Tokenize many sentences at once; the result has one token list per input line.

    >>> tokenize_many(["A b.", "C, d"], "13a")
    [['A', 'b', '.'], ['C', ',', 'd']]
    >>> tokenize_many([], "13a")
    []
    """
    check_choice(method, "method", TOKENIZERS)
    if isinstance(lines, str) or not isinstance(lines, Sequence):
        raise TypeError(f"lines must be a list of str, got {type(lines).__name__}")
    for i, line in enumerate(lines):
        if not isinstance(line, str):
            raise TypeError(f"lines[{i}] must be a str, got {type(line).__name__}")
    if not lines:
        return []
    if lowercase or method == "rouge":
        lines = [line.lower() for line in lines]
    if method == "none":
        return [line.split() for line in lines]
    if method == "char":
        return [list("".join(line.split())) for line in lines]
    if method == "rouge":
        return [_ROUGE_SPLIT.sub(" ", line).split() for line in lines]
    if method == "intl":
        return _tokenize_intl([line.rstrip() for line in lines])
    # 13a. Lines are joined by "\n" and padded with a space on each side, exactly as sacrebleu
    # pads each line, so no expression can match across a line boundary (every match is at most
    # two characters long and neither side of a boundary is a period, comma, digit or dash).
    stripped = [line.rstrip() for line in lines]
    joined = "\n".join(stripped)
    if joined.count("\n") == len(stripped) - 1:
        joined = _unescape_13a_joined(joined)
    else:  # some line has a newline of its own: unescape line by line (each rule applies once)
        joined = "\n".join([_unescape_13a(line) for line in stripped])
    padded = " " + joined.replace("\n", " \n ") + " "
    return [part.split() for part in _split_13a(padded).split("\n")]


def _unescape_13a_joined(text: str) -> str:
    """``<skipped>`` and the four HTML entities, on lines joined by ``"\\n"``."""
    text = text.replace("<skipped>", "")
    if "&" in text:
        text = text.replace("&quot;", '"').replace("&amp;", "&")
        text = text.replace("&lt;", "<").replace("&gt;", ">")
    return text


@cache
def _intl_rules(joined: bool) -> tuple:
    """mteval-v14's three substitutions, applied in this order (the ``regex`` module knows the
    Unicode categories: ``\\p{P}`` punctuation, ``\\p{S}`` symbols, ``\\P{N}`` anything but a
    number). With ``joined``, no match may contain the newline that separates two lines, so the
    substitutions over the joined corpus find exactly the matches they find line by line."""
    import regex  # only this tokenizer needs it (Unicode categories)

    not_number = r"[^\p{N}\n]" if joined else r"\P{N}"
    return (
        (regex.compile(rf"({not_number})(\p{{P}})"), r"\1 \2 "),  # punctuation after a non-digit
        (regex.compile(rf"(\p{{P}})({not_number})"), r" \1 \2"),  # punctuation before a non-digit
        (regex.compile(r"(\p{S})"), r" \1 "),  # every symbol
    )


def _tokenize_intl(lines: list[str]) -> list[list[str]]:
    """``intl`` on right-stripped lines: one pass of each rule over the corpus joined by newlines
    (a line with a newline of its own is tokenized on its own, as sacrebleu does)."""
    if any("\n" in line for line in lines):
        out = []
        for line in lines:
            for pattern, repl in _intl_rules(False):
                line = pattern.sub(repl, line)
            out.append(line.split())
        return out
    text = "\n".join(lines)
    for pattern, repl in _intl_rules(True):
        text = pattern.sub(repl, text)
    return [part.split() for part in text.split("\n")]
