"""Generating text from a GPT (Chapter 8), with Chapter 2's sampling tools and a KV cache.

* :func:`next_token_probs`: the distribution the next token is drawn from: Chapter 2's
  :func:`~course_lib.softmax.accelerated.sampling_probs` (top-k, then temperature, then top-p),
  and temperature 0 as greedy decoding (all the mass on the first largest logit).
* :func:`generate`: append ``max_new_tokens`` tokens one at a time. With ``use_cache`` each step
  feeds only the new token and reuses every earlier key and value (:class:`KVCache`); without it
  each step recomputes the whole window. Both give the same tokens (``tests/test_gpt.py``).
  Once the text is longer than the model's context, the window slides: the last
  ``context_length`` tokens are read, and the cache is rebuilt because every position moved.
* :func:`complete`: text in, text out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from course_lib.checks import check_int, check_real
from course_lib.gpt.model import GPT
from course_lib.softmax.accelerated import sampling_probs

__all__ = ["complete", "generate", "next_token_probs"]


def next_token_probs(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """Probabilities over the vocabulary from the last position's logits (..., V).

    ``temperature`` 0 is greedy: probability 1 on the first largest logit.

    >>> next_token_probs(torch.tensor([1.0, 3.0, 2.0, 3.0]), temperature=0)
    tensor([0., 1., 0., 0.])
    >>> next_token_probs(torch.tensor([2.0, 1.0, 0.0]), top_k=1)
    tensor([1., 0., 0.])
    """
    t = check_real(temperature, "temperature", low=0.0)
    if t == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(logits.dtype)
    return sampling_probs(logits, temperature=t, top_k=top_k, top_p=top_p)


@torch.no_grad()
def generate(
    model: GPT,
    prompt: Sequence[int] | torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    use_cache: bool = True,
    return_logits: bool = False,
) -> Any:
    """The prompt's ids followed by ``max_new_tokens`` sampled ones (a list of ints).

    With ``return_logits`` also the (max_new_tokens, V) logits each new token was drawn from.
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a course_lib.gpt.model.GPT, got {type(model).__name__}")
    ids = [int(i) for i in (prompt.tolist() if isinstance(prompt, torch.Tensor) else prompt)]
    if not ids:
        raise ValueError("the prompt is empty: give at least one token to continue from")
    check_int(max_new_tokens, "max_new_tokens", low=0)
    ctx = model.config.context_length
    device = model.tok_emb.device
    g = torch.Generator(device=device).manual_seed(seed)
    was_training = model.training
    model.eval()
    cache = model.new_cache() if use_cache else None
    fed = 0  # how many of ids the cache holds
    steps = []
    for _ in range(max_new_tokens):
        if cache is None:
            logits = model(torch.tensor([ids[-ctx:]], device=device))[0, -1]
        else:
            if len(ids) > ctx:  # the window slid: every position moved, rebuild the cache
                cache, fed = model.new_cache(), max(0, len(ids) - ctx)
            new = torch.tensor([ids[fed:]], device=device)
            logits = model(new, cache)[0, -1]
            fed = len(ids)
        probs = next_token_probs(logits, temperature, top_k, top_p)
        nxt = (
            int(torch.multinomial(probs.float(), 1, generator=g))
            if temperature > 0
            else int(probs.argmax())
        )
        ids.append(nxt)
        steps.append(logits)
    model.train(was_training)
    if return_logits:
        return ids, (torch.stack(steps) if steps else torch.empty(0, model.config.vocab_size))
    return ids


def complete(
    model: GPT, tokenizer: Any, prompt: str, max_new_tokens: int = 200, **kwargs: Any
) -> str:
    """The text the model writes after ``prompt`` (the prompt itself not included)."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    if not prompt:
        raise ValueError("the prompt is empty: give at least one character to continue from")
    ids = tokenizer.encode(prompt)
    out = generate(model, ids, max_new_tokens, **kwargs)
    return tokenizer.decode(out[len(ids) :])
