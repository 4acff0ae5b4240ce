"""The chapter's generated data for the three encoder tasks, deterministic for a given seed.

The handwritten notes draw an encoder-only Transformer doing three kinds of task; each
generator here makes a small labelled set of one kind, in words chapter 7's tokenizer knows:

* :func:`negation_sentences` (sequence classification): "the music was not sweet" is negative,
  "the music was not foul" positive. The label is the *exclusive or* of two words, so a bag of
  words cannot read it; attention can.
* :func:`qa_stories` (span extraction): two (or more) people, where each lives and what each does; a
  question asks for one fact, the answer is a span of the story given as characters.
* :func:`tagged_sentences` (sequence labelling): sentences with people and places, one BIO tag
  per word (``B-PER``, ``I-PER``, ``B-LOC``, ``I-LOC``, ``O``).

The names are a fixed list of Shakespeare's characters and settings (not ``faker``, which this
environment does not install).

>>> negation_sentences(2, seed=0)
[('the king was not noble', 0), ('her letter is foul', 0)]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_lib.checks import check_choice, check_int

__all__ = [
    "TAGS", "QAExample", "bio_is_valid", "negation_sentences", "qa_stories", "tagged_sentences",
]  # fmt: skip

SUBJECTS = [
    "the play",
    "the feast",
    "the king",
    "this night",
    "the music",
    "his voice",
    "her letter",
    "the wine",
]
VERBS = ["was", "is", "seemed"]
GOOD = ["good", "sweet", "fair", "noble", "gentle", "merry"]
BAD = ["bad", "foul", "cruel", "vile", "dull", "sad"]
NEGATIONS = ["not", "never"]

FIRST = ["Portia", "Viola", "Romeo", "Juliet", "Hamlet", "Ophelia", "Orsino", "Rosalind", "Antonio", "Beatrice",
         "Benedick", "Olivia", "Sebastian", "Helena", "Lysander", "Hermia"]  # fmt: skip
LAST = ["Page", "Ford", "Capulet", "Montague", "Belch", "Aguecheek"]
PLACES = ["Verona", "Padua", "Venice", "Athens", "Rome", "Vienna", "Messina", "Mantua", "Elsinore", "Illyria",
          "Milan", "Navarre"]  # fmt: skip
TWO_WORD_PLACES = ["the Forest of Arden", "Bohemia Court"]
JOBS = ["baker", "soldier", "sailor", "tailor", "weaver", "jester", "merchant", "friar"]


def negation_sentences(n: int, seed: int = 0) -> list[tuple[str, int]]:
    """``n`` sentences "<subject> <verb> [not|never] <adjective>" with label 1 (positive) or 0.

    Half the sentences are negated; the label is positive exactly when the adjective is good
    and the sentence is not negated, or the adjective is bad and it is.
    """
    check_int(n, "n", low=1)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        good, negated = bool(rng.integers(2)), bool(rng.integers(2))
        adj = str(rng.choice(GOOD if good else BAD))
        neg = f" {rng.choice(NEGATIONS)}" if negated else ""
        out.append((f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)}{neg} {adj}", int(good != negated)))
    return out


@dataclass(frozen=True)
class QAExample:
    """A question, a story, and the answer as characters ``story[start:end]``."""

    question: str
    story: str
    start: int
    end: int

    @property
    def answer(self) -> str:
        return self.story[self.start : self.end]


def qa_stories(n: int, seed: int = 0, people: int = 2) -> list[QAExample]:
    """``n`` stories of ``people`` people, each with one question about where someone lives or what they do.

    >>> ex = qa_stories(1, seed=3)[0]
    >>> ex.question, ex.answer
    ('What does Viola do?', 'weaver')
    """
    check_int(n, "n", low=1)
    check_int(people, "people", low=1, high=len(JOBS))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        names = [str(p) for p in rng.choice(FIRST, size=people, replace=False)]
        places = [str(p) for p in rng.choice(PLACES, size=people, replace=False)]
        jobs = [str(j) for j in rng.choice(JOBS, size=people, replace=False)]
        story, spans = "", []
        for who, where, job in zip(names, places, jobs, strict=True):
            part = f"{who} lives in "
            a = len(story) + len(part)
            story += f"{part}{where} as a "
            b = len(story)
            story += f"{job}. "
            spans.append(((a, a + len(where)), (b, b + len(job))))
        k, ask_place = int(rng.integers(people)), bool(rng.integers(2))
        q = f"Where does {names[k]} live?" if ask_place else f"What does {names[k]} do?"
        s, e = spans[k][0] if ask_place else spans[k][1]
        out.append(QAExample(q, story.rstrip(), s, e))
    return out


TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def tagged_sentences(
    n: int, seed: int = 0, names: str = "all"
) -> list[tuple[list[str], list[str]]]:
    """``n`` sentences as (words, BIO tags): people (one or two words) meeting in places.

    ``names="train"`` draws people and places from every other name of the lists (the first,
    the third, ...), ``names="test"`` from the others: a tagger trained on the first and tested
    on the second must read the *context* ("met", "in", "left ... for"), since no test name was
    ever seen; ``"all"`` uses every name.

    >>> words, tags = tagged_sentences(1, seed=1)[0]
    >>> list(zip(words, tags))[:4]
    [('In', 'O'), ('Messina', 'B-LOC'), (',', 'O'), ('Portia', 'B-PER')]
    """
    check_int(n, "n", low=1)
    check_choice(names, "names", ("all", "train", "test"))
    rng = np.random.default_rng(seed)
    pick = {"all": slice(None), "train": slice(0, None, 2), "test": slice(1, None, 2)}[names]
    first, last, places, two = FIRST[pick], LAST[pick], PLACES[pick], TWO_WORD_PLACES[pick]

    def person() -> list[tuple[str, str]]:
        words = [str(rng.choice(first))] + ([str(rng.choice(last))] if rng.random() < 0.4 else [])
        return [(w, "B-PER" if i == 0 else "I-PER") for i, w in enumerate(words)]

    def place() -> list[tuple[str, str]]:
        name = str(rng.choice(two)) if rng.random() < 0.2 else str(rng.choice(places))
        return [(w, "B-LOC" if i == 0 else "I-LOC") for i, w in enumerate(name.split())]

    out = []
    for _ in range(n):
        form = int(rng.integers(3))
        if form == 0:
            parts = [*person(), ("met", "O"), *person(), ("in", "O"), *place()]
        elif form == 1:
            parts = [("In", "O"), *place(), (",", "O"), *person(), ("sang", "O")]
        else:
            parts = [*person(), ("left", "O"), *place(), ("for", "O"), *place()]
        parts.append((".", "O"))
        out.append(([w for w, _ in parts], [t for _, t in parts]))
    return out


def bio_is_valid(tags: list[str]) -> bool:
    """Whether a BIO sequence is well formed: every ``I-X`` follows ``B-X`` or ``I-X``.

    >>> bio_is_valid(["B-PER", "I-PER", "O"]), bio_is_valid(["O", "I-LOC"]), bio_is_valid(["B-PER", "I-LOC"])
    (True, False, False)
    """
    prev = "O"
    for t in tags:
        if t not in TAGS:
            raise ValueError(f"tags must be among {TAGS}, got {t!r}")
        if t.startswith("I-") and prev[2:] != t[2:]:
            return False
        prev = t
    return True
