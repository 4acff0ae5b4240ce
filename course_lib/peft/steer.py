"""Prompt and prefix tuning of chapter 8's GPT, started from a real prompt or from random text.

:class:`SoftPrompt` freezes a :class:`~course_lib.gpt.model.GPT` (learned positions or RoPE: the
Shakespeare model of ``data/gpt/shakespeare_char.pt`` or the in-context model of
``data/gpt/incontext_char.pt``) and trains, in front of every input, either

* ``method="prompt"``: ``n`` input vectors, started at the token embeddings of a text
  (Lester et al., 2021: "initialise from the vocabulary"), or
* ``method="prefix"``: ``n`` keys and values per layer and head, started at the keys and values
  the frozen model computes for that text (Li and Liang, 2021, section 7.2: "initialise with the
  activations of real words").

Either way the trained vectors start as exactly the discrete prompt written as text: the model's
first output equals the frozen model's on ``text + input``. Started from a random string of the
same length instead, they start at a prompt that means nothing.

The prompt occupies positions ``0 .. n-1`` and the input ``n .. n+L-1`` (as in ``peft``); with
RoPE, a prefix's keys are stored already rotated to their positions, like a KV cache's.

>>> from course_lib.gpt.config import GPTConfig
>>> from course_lib.gpt.model import GPT
>>> gpt = GPT(GPTConfig(vocab_size=11, context_length=16, n_layers=2, n_heads=2, d_model=8,
...                     positions="rope"), seed=0)
>>> text, x = torch.tensor([3, 1, 4, 1]), torch.tensor([[5, 9]])
>>> for method in ("prompt", "prefix"):
...     soft = SoftPrompt(gpt, method, text)
...     same = torch.allclose(soft(x), gpt(torch.cat([text[None], x], 1))[:, 4:], atol=1e-6)
...     print(method, soft.trainable_parameters(), same)
prompt 32 True
prefix 128 True
"""

from __future__ import annotations

import copy
import random
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.checks import check_int
from course_lib.gpt import accelerated as acc
from course_lib.gpt.model import GPT

__all__ = [
    "CODE_LETTERS",
    "frozen_blocks",
    "INITS",
    "METHODS",
    "SoftPrompt",
    "code_loss_accuracy",
    "code_queries",
    "make_codes",
    "prompt_hidden",
    "random_text",
    "start_text",
    "steer_code",
    "written_code",
]

METHODS = ("prompt", "prefix")
#: What the trained vectors start from: a real prompt written as text, or random characters.
INITS = ("text", "random")
#: Letters per secret code in the steering task (chapter 8's episodes use 4).
CODE_LETTERS = 16


def frozen_blocks(model: GPT, h: torch.Tensor) -> torch.Tensor:
    """Run ``model``'s blocks and final norm over input vectors ``h`` (B, T, d) at positions
    ``0 .. T-1`` (learned positions added, or RoPE): the final hidden states (B, T, d).

    What the model does after looking up its token embeddings, for vectors that need not be any
    token's embedding (prompt tuning's trained prompt in front of the embeddings).
    """
    c, p = model.config, model.parameter_dict()
    T = h.shape[-2]
    rope = None
    if c.positions == "learned":
        h = h + p["pos_emb"][:T]  # (B, T, d)
    else:
        rope = acc.rope_tables(0, T, c.d_head, c.rope_base, h.dtype, h.device)
    for i, blk in enumerate(p["blocks"]):
        h = h + acc._attention(acc._norm(h, blk, "norm1", c), blk, c, None, i, 0, rope)
        h = h + acc._mlp(acc._norm(h, blk, "norm2", c), blk, c)
    return acc._norm(h, p, "final_norm", c)


def prompt_hidden(model: GPT, prompt: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The final hidden states of ``tokens`` (B, L) after the vectors ``prompt`` (n, d): (B, L, d).

    Prompt tuning's forward: the prompt is placed before the token embeddings and the frozen
    blocks run over both; positions (learned or RoPE) count from the prompt's first vector.
    """
    B, n = tokens.shape[0], prompt.shape[0]
    h = torch.cat([prompt.expand(B, -1, -1), model.tok_emb[tokens]], dim=1)  # (B, n + L, d)
    return frozen_blocks(model, h)[:, n:]  # (B, L, d): the real tokens only


class SoftPrompt(nn.Module):
    """A frozen GPT with a trained prompt or prefix in front of its input; tokens -> logits.

    Args:
        model: chapter 8's GPT (copied and frozen; the caller's model is not modified).
        method: ``"prompt"`` (trained input vectors) or ``"prefix"`` (trained keys and values).
        text: token ids (n,) the trained vectors start from: a real prompt, or random tokens.
    """

    def __init__(self, model: GPT, method: str, text: Any) -> None:
        super().__init__()
        if not isinstance(model, GPT):
            raise TypeError(f"model must be chapter 8's GPT, got {type(model).__name__}")
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        text = acc.check_tokens(text, model.config, model.tok_emb.device)
        if text.ndim != 1:
            raise ValueError(
                f"text must be one sequence of token ids (n,), got {tuple(text.shape)}"
            )
        self.model = copy.deepcopy(model).eval().requires_grad_(False)
        self.method = method
        self.n = check_int(text.shape[0], "len(text)", low=1)
        with torch.no_grad():
            if method == "prompt":
                start = self.model.tok_emb[text].clone()  # (n, d)
            else:
                cache = self.model.new_cache()
                self.model(text[None], cache)  # fills the cache with the text's keys and values
                kv = [torch.stack([k[0], v[0]]) for k, v in cache.layers]  # (2, h, n, dk) each
                start = torch.stack(kv)  # (layers, 2, h, n, dk)
        self.vectors = nn.Parameter(start)

    def trainable_parameters(self) -> int:
        return self.vectors.numel()

    def forward(self, tokens: Any) -> torch.Tensor:
        """Token ids (B, L) -> logits (B, L, V) of the real tokens."""
        m, c = self.model, self.model.config
        t = acc.check_tokens(tokens, c, m.tok_emb.device, start=self.n)
        if t.ndim != 2:
            raise ValueError(f"tokens must be a batch (B, L), got shape {tuple(t.shape)}")
        if self.method == "prompt":
            h = prompt_hidden(m, self.vectors, t)
        else:
            B = t.shape[0]
            cache = acc.KVCache(c.n_layers)
            cache.layers = [
                (kv[0].expand(B, -1, -1, -1), kv[1].expand(B, -1, -1, -1)) for kv in self.vectors
            ]
            h = acc.hidden_states(t, m.parameter_dict(), c, cache)  # positions n .. n+L-1
        return F.linear(h, m.tok_emb if c.tie_head else m.lm_head)

    def extra_repr(self) -> str:
        return f"method={self.method!r}, n={self.n}, trainable={self.trainable_parameters():,}"


# ---------------------------------------------------------------------------- the steering task
def make_codes(n: int, seed: int, n_letters: int = CODE_LETTERS) -> list[dict[str, str]]:
    """``n`` secret codes of ``n_letters`` lower-case letters each (chapter 8's kind, larger).

    >>> make_codes(1, seed=0, n_letters=3)
    [{'m': 'B', 'y': 'I', 'n': 'Q'}]
    """
    from course_lib.gpt import incontext as icl

    check_int(n, "n", low=1)
    check_int(n_letters, "n_letters", low=1, high=len(icl.INPUTS))
    rnd = random.Random(seed)
    return [
        {x: rnd.choice(icl.OUTPUTS) for x in rnd.sample(icl.INPUTS, n_letters)} for _ in range(n)
    ]


def written_code(code: dict[str, str], seed: int) -> str:
    """The code written as chapter 8's episode text, every letter once, in an order from ``seed``.

    >>> written_code({"a": "B", "c": "D"}, seed=0)
    '\\n\\naB\\ncD\\n'
    """
    from course_lib.gpt.incontext import line

    keys = sorted(code)
    random.Random(seed).shuffle(keys)
    return "\n\n" + "".join(line(x, code[x]) for x in keys)


def random_text(n: int, seed: int, tokenizer: Any) -> str:
    """``n`` characters drawn uniformly from the tokenizer's vocabulary (a prompt meaning nothing)."""
    check_int(n, "n", low=1)
    rnd = random.Random(seed)
    vocab = [tokenizer.decode([i]) for i in range(tokenizer.vocab_size)]
    return "".join(rnd.choice(vocab) for _ in range(n))


def start_text(init: str, text: str, seed: int, tokenizer: Any) -> torch.Tensor:
    """The token ids the trained vectors start from: ``text`` itself (``init="text"``) or as many
    random characters (``init="random"``, drawn from ``seed``)."""
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    chars = text if init == "text" else random_text(len(text), seed, tokenizer)
    return torch.tensor(tokenizer.encode(chars), dtype=torch.long)


def code_queries(code: dict[str, str], tokenizer: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Every letter of ``code`` as a one-character input (N, 1) and its code letter (N,)."""
    keys = sorted(code)
    x = torch.tensor([tokenizer.encode(k) for k in keys], dtype=torch.long)
    y = torch.tensor([tokenizer.encode(code[k])[0] for k in keys], dtype=torch.long)
    return x, y


def code_loss_accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[Any, float]:
    """Cross-entropy of the code letters after the queries, and the share answered right."""
    logits = model(x)[:, -1]  # (N, V): the next character after each query
    accuracy = (logits.argmax(-1) == y).double().mean().item()
    return F.cross_entropy(logits, y), accuracy


def steer_code(
    soft: SoftPrompt,
    x: torch.Tensor,
    y: torch.Tensor,
    steps: int,
    lr: float,
    eval_every: int = 10,
) -> dict[str, list]:
    """Adam on ``soft``'s vectors, every query in every step; the curve at step 0 and every
    ``eval_every`` steps: ``{"steps", "loss", "accuracy"}`` (the loss before that step's update)."""
    check_int(steps, "steps", low=1)
    opt = torch.optim.Adam([soft.vectors], lr=lr)
    curve: dict[str, list] = {"steps": [], "loss": [], "accuracy": []}
    for step in range(steps + 1):
        loss, acc = code_loss_accuracy(soft, x, y)
        if step % eval_every == 0 or step == steps:
            curve["steps"].append(step)
            curve["loss"].append(round(loss.item(), 4))
            curve["accuracy"].append(round(acc, 4))
        if step == steps:
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return curve
