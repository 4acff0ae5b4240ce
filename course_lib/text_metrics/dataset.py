"""The chapter's translation evaluation set (``data/translation_eval``) and synthetic corpora.

``python -m course_lib.text_metrics.dataset`` writes ``data/translation_eval/``: 50 German source
sentences, three English references each, and the outputs of six "systems". All sentences were
written for this course (``_sentences.py``); the systems are made from them by seeded, rule-based
edits, so the files are identical on every run:

* ``human``: a fourth, independent translation, held out of the references;
* ``good``, ``fair``, ``poor``: the human translation with a fraction 0.1, 0.25 and 0.5 of its
  words corrupted (each corrupted word is dropped, swapped with the next one, or replaced by a
  random word of the references' vocabulary);
* ``negated``: reference 1 with its meaning reversed by one edit (a negation removed, a word
  swapped for its opposite, "not" inserted after an auxiliary, or a number changed): fluent
  and wrong;
* ``scrambled``: the words of reference 1 in a random order: every word right, no sentence.

Beside the systems, ``paraphrased`` is the control for ``negated``: reference 1 with one
hand-written edit that keeps the meaning, where the negated system's edit reverses it
(``_sentences.PARAPHRASED``). It is not a system of the ranking (section 3.8 compares the two).

:func:`synthetic_corpus` makes large random corpora (for the benchmark and property tests) from a
bigram model of the same sentences.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.checks import check_int
from course_lib.paths import data_path
from course_lib.text_metrics._sentences import (
    ANTONYMS,
    AUXILIARIES,
    NEGATED_FORMS,
    NEGATIONS,
    NUMBERS,
    PARAPHRASED,
    SENTENCES,
)

__all__ = [
    "DATA_DIR",
    "SYSTEMS",
    "TranslationEval",
    "corrupt",
    "load_translation_eval",
    "make_translation_eval",
    "negate",
    "synthetic_corpus",
    "write_translation_eval",
]

DATA_DIR = "translation_eval"  # under course_lib.paths.data_dir()
SEED = 2023
N_REFERENCES = 3
#: System name -> (description, corruption rate of the human translation or None).
SYSTEMS: dict[str, tuple[str, float | None]] = {
    "human": ("an independent human translation, held out of the references", None),
    "good": ("the human translation with 10% of its words corrupted", 0.10),
    "fair": ("the human translation with 25% of its words corrupted", 0.25),
    "poor": ("the human translation with 50% of its words corrupted", 0.50),
    "negated": ("reference 1 with its meaning reversed by a single edit", None),
    "scrambled": ("the words of reference 1 in a random order", None),
}
#: The quality order a reader would give, by construction (best first). The two adversarial
#: systems are ranked by adequacy: "negated" says the opposite, "scrambled" says nothing.
HUMAN_ORDER = ("human", "good", "fair", "poor", "negated", "scrambled")
#: Control outputs, outside the ranking: name -> description.
CONTROLS = {
    "paraphrased": "reference 1 with one edit that keeps its meaning (the control for negated)"
}


@dataclass(frozen=True)
class TranslationEval:
    """Sources, per-sentence reference sets (the notes' layout) and system outputs."""

    sources: list[str]
    references: list[list[str]]  # references[i] = the references of sentence i
    systems: dict[str, list[str]]  # system name -> one output per sentence
    descriptions: dict[str, str]
    human_order: tuple[str, ...]
    paraphrased: list[str] = field(default_factory=list)  # the control for "negated"


def _split_punct(word: str) -> tuple[str, str]:
    core = word.rstrip(".,;:!?")
    return core, word[len(core) :]


def _match_case(new: str, old: str) -> str:
    return new[:1].upper() + new[1:] if old[:1].isupper() else new


def negate(sentence: str) -> str:
    """Reverse the meaning of an English sentence with one edit (first rule that applies).

    1. remove a negation ("not", "never") or undo a negated form ("cannot" -> "can");
    2. swap the first word that has an entry in the antonym table;
    3. insert "not" after the first auxiliary verb (after the subject in a question);
    4. change the first number word ("ten" -> "thirty").

    >>> negate("I could not sleep last night.")
    'I could sleep last night.'
    >>> negate("The museum is closed on Mondays.")
    'The museum is open on Mondays.'
    >>> negate("The train to Berlin is twenty minutes late today.")
    'The train to Berlin is not twenty minutes late today.'
    """
    words = sentence.split()
    lowered = [_split_punct(w)[0].lower() for w in words]
    for i, low in enumerate(lowered):
        core, tail = _split_punct(words[i])
        if low in NEGATIONS:
            rest = words[:i] + words[i + 1 :]
            if tail:  # keep punctuation attached to the removed word
                rest[i - 1] += tail
            return " ".join(rest)
        if low in NEGATED_FORMS:
            words[i] = _match_case(NEGATED_FORMS[low], core) + tail
            return " ".join(words)
    for i, low in enumerate(lowered):
        if low in ANTONYMS:
            core, tail = _split_punct(words[i])
            words[i] = _match_case(ANTONYMS[low], core) + tail
            return " ".join(words)
    for i, low in enumerate(lowered):
        if low in AUXILIARIES:
            at = i + 2 if i == 0 else i + 1  # a question: "Can you not ...", "Have you not ..."
            return " ".join([*words[:at], "not", *words[at:]])
    for i, low in enumerate(lowered):
        if low in NUMBERS:
            core, tail = _split_punct(words[i])
            words[i] = _match_case(NUMBERS[low], core) + tail
            return " ".join(words)
    raise ValueError(f"no rule reverses the meaning of {sentence!r}")


def corrupt(sentence: str, rate: float, rng: random.Random, vocabulary: Sequence[str]) -> str:
    """Corrupt each word with probability ``rate``: drop it, swap it with the next word, or
    replace it by a random vocabulary word (each with probability 1/3).

    >>> corrupt("a b c d", 0.0, random.Random(0), ["x"])
    'a b c d'
    >>> corrupt("a b c d", 1.0, random.Random(0), ["x"])  # swap a-b, then replace c and d
    'b a x x'
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate}")
    words = sentence.split()
    out: list[str] = []
    i = 0
    while i < len(words):
        if rng.random() < rate:
            op = rng.choice(("drop", "swap", "replace"))
            if op == "drop":
                i += 1
                continue
            if op == "swap" and i + 1 < len(words):
                out += [words[i + 1], words[i]]
                i += 2
                continue
            out.append(rng.choice(vocabulary))
            i += 1
            continue
        out.append(words[i])
        i += 1
    return " ".join(out) if out else words[0]


def _vocabulary() -> list[str]:
    return sorted({w.lower() for _, refs, _ in SENTENCES for r in refs for w in r.split()})


def make_translation_eval(seed: int = SEED) -> TranslationEval:
    """Build the evaluation set in memory (deterministic for a given seed)."""
    check_int(seed, "seed", low=0)
    vocab = _vocabulary()
    sources = [src for src, _, _ in SENTENCES]
    references = [list(refs) for _, refs, _ in SENTENCES]
    human = [h for _, _, h in SENTENCES]
    systems: dict[str, list[str]] = {"human": human}
    for k, (name, (_, rate)) in enumerate(SYSTEMS.items()):
        if rate is not None:
            rng = random.Random(seed + k)
            systems[name] = [corrupt(h, rate, rng, vocab) for h in human]
    systems["negated"] = [negate(refs[0]) for refs in references]
    rng = random.Random(seed + 100)
    scrambled = []
    for refs in references:
        words = refs[0].split()
        order = words[:]
        while order == words:
            rng.shuffle(order)
        scrambled.append(" ".join(order))
    systems["scrambled"] = scrambled
    return TranslationEval(
        sources,
        references,
        {name: systems[name] for name in SYSTEMS},
        {name: desc for name, (desc, _) in SYSTEMS.items()},
        HUMAN_ORDER,
        list(PARAPHRASED),
    )


def _write_lines(path: Path, lines: Sequence[str]) -> None:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def write_translation_eval(directory: Path | None = None, seed: int = SEED) -> list[Path]:
    """Write the evaluation set as line-aligned UTF-8 text files plus ``manifest.json``."""
    data = make_translation_eval(seed)
    directory = data_path(DATA_DIR, must_exist=False) if directory is None else Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = [directory / "source.de.txt"]
    _write_lines(written[0], data.sources)
    for j in range(N_REFERENCES):
        written.append(directory / f"reference.{j + 1}.en.txt")
        _write_lines(written[-1], [refs[j] for refs in data.references])
    for name, lines in data.systems.items():
        written.append(directory / f"system.{name}.en.txt")
        _write_lines(written[-1], lines)
    written.append(directory / "control.paraphrased.en.txt")
    _write_lines(written[-1], data.paraphrased)
    manifest = {
        "made_by": "python -m course_lib.text_metrics.dataset",
        "seed": seed,
        "sentences": len(data.sources),
        "references_per_sentence": N_REFERENCES,
        "languages": {"source": "de", "target": "en"},
        "systems": data.descriptions,
        "human_order": list(data.human_order),
        "controls": CONTROLS,
    }
    written.append(directory / "manifest.json")
    written[-1].write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return written


def _read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def load_translation_eval(directory: Path | None = None) -> TranslationEval:
    """Read ``data/translation_eval`` (written by :func:`write_translation_eval`)."""
    directory = data_path(DATA_DIR, must_exist=False) if directory is None else Path(directory)
    if not (directory / "manifest.json").exists():
        raise FileNotFoundError(
            f"no evaluation set in {directory}: run python -m course_lib.text_metrics.dataset"
        )
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    sources = _read_lines(directory / "source.de.txt")
    streams = [
        _read_lines(directory / f"reference.{j + 1}.en.txt")
        for j in range(manifest["references_per_sentence"])
    ]
    systems = {
        name: _read_lines(directory / f"system.{name}.en.txt") for name in manifest["systems"]
    }
    controls = {
        name: _read_lines(directory / f"control.{name}.en.txt")
        for name in manifest.get("controls", {})
    }
    for name, lines in (
        [("source", sources)]
        + [(f"reference {j + 1}", s) for j, s in enumerate(streams)]
        + list(systems.items())
        + list(controls.items())
    ):
        if len(lines) != manifest["sentences"]:
            raise ValueError(f"{name} has {len(lines)} lines, expected {manifest['sentences']}")
    return TranslationEval(
        sources,
        [list(refs) for refs in zip(*streams, strict=True)],
        systems,
        dict(manifest["systems"]),
        tuple(manifest["human_order"]),
        controls.get("paraphrased", []),
    )


def synthetic_corpus(
    n_sentences: int, n_references: int = 4, seed: int = 0
) -> tuple[list[str], list[list[str]]]:
    """A random corpus: candidates and ``n_references`` references per sentence.

    Each sentence joins two walks of a word-bigram model of the chapter's English sentences
    (about 20 words, with punctuation); its references are copies with 15% of the words
    corrupted and the candidate a copy with 30% corrupted (:func:`corrupt`).

    >>> cands, refs = synthetic_corpus(3, 2, seed=1)
    >>> len(cands), [len(r) for r in refs]
    (3, [2, 2, 2])
    """
    check_int(n_sentences, "n_sentences", low=1)
    check_int(n_references, "n_references", low=1)
    check_int(seed, "seed", low=0)
    rng = random.Random(seed)
    follow: dict[str, list[str]] = {}
    for _, refs, human in SENTENCES:
        for sentence in (*refs, human):
            words = ["<s>", *sentence.split(), "</s>"]
            for a, b in zip(words, words[1:], strict=False):
                follow.setdefault(a, []).append(b)
    vocab = _vocabulary()

    def walk() -> list[str]:
        out, word = [], "<s>"
        while len(out) < 30:
            word = rng.choice(follow[word])
            if word == "</s>":
                break
            out.append(word)
        return out

    candidates, references = [], []
    for _ in range(n_sentences):
        base = " ".join(walk() + ["and"] + walk())
        references.append([corrupt(base, 0.15, rng, vocab) for _ in range(n_references)])
        candidates.append(corrupt(base, 0.30, rng, vocab))
    return candidates, references


def main() -> None:
    for path in write_translation_eval():
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
