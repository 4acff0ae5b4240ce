"""Exercise checkers of Chapter 8: ``from course_lib.gpt import exercises as check``.

The two exercises are the chapter's signature algorithms, written by the learner and checked on
inputs the learner did not choose:

* :func:`sampling_probs`: the distribution a token is drawn from (temperature, top-k, top-p),
  compared with :func:`course_lib.gpt.sampling.next_token_probs`, and then dropped into a
  generation loop that must give the library's tokens for the same seed;
* :func:`cached_step`: one new token through a whole GPT with a KV cache, compared with
  recomputing the whole window without a cache.

Each checker says in plain words what is wrong and names known mistakes (temperature applied
after the softmax, top-p keeping one token too few, a cache position off by one, ...).

>>> from course_lib.gpt.sampling import next_token_probs
>>> sampling_probs(next_token_probs).passed
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from course_lib.checker import Outcome, call, check_cases, diagnose, first_mistake, to_array
from course_lib.gpt.config import GPTConfig
from course_lib.gpt.model import GPT

__all__ = ["cached_step", "muon_update", "sampling_probs"]

#: Seed of this chapter's checker inputs.
SEED = 8


# ------------------------------------------------------------------- temperature, top-k, top-p
def _keep_top_k(z: torch.Tensor, k: int) -> torch.Tensor:
    return z.masked_fill(z < torch.topk(z, k).values[-1], -math.inf)


def _keep_top_p(z: torch.Tensor, p: float, one_fewer: bool = False) -> torch.Tensor:
    probs = torch.softmax(z, -1)
    order = probs.argsort(descending=True)
    before = torch.cumsum(probs[order], 0) - probs[order]  # mass of the tokens ranked above
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order] = (before + probs[order] < p) if one_fewer else (before < p)
    keep[order[0]] = True
    return z.masked_fill(~keep, -math.inf)


def _wrong_distributions(
    logits: torch.Tensor, t: float, k: int | None, p: float | None
) -> list[tuple[np.ndarray, str]]:
    """What the known mistakes produce on these arguments, most telling first."""
    out = []
    z = logits if k is None else _keep_top_k(logits, k)
    if t > 0:
        if t != 1:
            plain = torch.softmax(z if p is None else _keep_top_p(z, p), -1)
            out.append((plain.numpy(), "the temperature had no effect: divide the *logits* by T "
                        "before the softmax (dividing the probabilities by T and renormalising "
                        "changes nothing)"))  # fmt: skip
            out.append((torch.softmax(z, -1).numpy() / t, "you divided the probabilities by T "
                        "after the softmax: divide the logits by T, then take the softmax"))  # fmt: skip
            times = z * t if p is None else _keep_top_p(z * t, p)
            out.append((torch.softmax(times, -1).numpy(), "you multiplied the logits by T: "
                        "divide them (T < 1 must sharpen the distribution)"))  # fmt: skip
        if p is not None:
            out.append((torch.softmax(z / t, -1).numpy(), "top_p had no effect: drop the "
                        "tokens outside the nucleus (logit -inf) before the softmax"))  # fmt: skip
            out.append((torch.softmax(_keep_top_p(z / t, p, one_fewer=True), -1).numpy(),
                        "top-p kept one token too few: keep the most probable tokens until "
                        "their mass *reaches* p, including the token that crosses it"))  # fmt: skip
            if t != 1:
                nucleus = _keep_top_p(z, p).isfinite()
                out.append((torch.softmax((z / t).masked_fill(~nucleus, -math.inf), -1).numpy(),
                             "you chose the top-p nucleus before applying the temperature: "
                             "divide by T first, then cut at mass p"))  # fmt: skip
            kept = _keep_top_p(z / t, p).isfinite()
            unnorm = torch.softmax(z / t, -1).masked_fill(~kept, 0.0)
            out.append((unnorm.numpy(), "you zeroed the dropped tokens after the softmax but did "
                        "not renormalise: the kept probabilities must add up to 1"))  # fmt: skip
        if k is not None:
            zz = logits / t if p is None else _keep_top_p(logits / t, p)
            out.append((torch.softmax(zz, -1).numpy(), "top_k had no effect: set every logit "
                        "below the k-th largest to -inf before the softmax"))  # fmt: skip
            unnorm = torch.softmax(logits / t, -1).masked_fill(~z.isfinite(), 0.0)
            out.append((unnorm.numpy(), "you zeroed the tokens outside the top k after the "
                        "softmax but did not renormalise: the k kept probabilities must add up "
                        "to 1"))  # fmt: skip
            for kk, what in ((k + 1, "one too many"), (k - 1, "one too few")):
                if 1 <= kk <= logits.numel():
                    zz = _keep_top_k(logits, kk) / t
                    if p is not None:
                        zz = _keep_top_p(zz, p)
                    out.append((torch.softmax(zz, -1).numpy(), f"top-k kept {what}: keep exactly "
                                "the k largest logits"))  # fmt: skip
    return out


def sampling_probs(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(logits, temperature, top_k, top_p)`` is the distribution of the next token.

    ``logits`` is a float64 tensor (V,); ``top_k`` and ``top_p`` may be None. Top-k keeps the k
    largest logits, the temperature divides them, and top-p keeps the fewest most probable
    tokens of that distribution whose mass reaches p; temperature 0 is greedy (probability 1
    on the largest logit). The cases are compared with the library's
    :func:`~course_lib.gpt.sampling.next_token_probs`; then the function is run inside a
    generation loop, which must draw the library's tokens for the same seed.
    """
    from course_lib.gpt.sampling import generate, next_token_probs

    g = torch.Generator().manual_seed(SEED)
    logits = [
        torch.randn(v, generator=g, dtype=torch.float64) * s for v, s in ((6, 1.5), (12, 2.0))
    ]
    settings = [
        (1.0, None, None), (0.5, None, None), (2.0, None, None), (1.0, 3, None),
        (1.0, None, 0.8), (0.7, 4, None), (0.5, None, 0.9), (1.5, None, 0.7),
        (0.8, 5, 0.9), (0.0, None, None),
    ]  # fmt: skip
    cases = []
    for i, (t, k, p) in enumerate(settings):
        x = logits[i % 2]
        desc = f"logits of {x.numel()} tokens with temperature={t}, top_k={k}, top_p={p}"
        cases.append((desc, (x.clone(), t, k, p), (x, t, k, p)))

    def compare(got: object, case: tuple) -> str | None:
        x, t, k, p = case
        want = next_token_probs(x, t, k, p).numpy()
        arr = to_array(got)
        if arr is not None and arr.shape == want.shape:
            if t == 0 and not np.all(np.isfinite(arr)):
                return ("temperature 0 means greedy: put probability 1 on the largest logit "
                        "(dividing the logits by 0 gives NaN)")  # fmt: skip
            if not np.allclose(arr, want, atol=1e-9):
                if abs(arr.sum() - 1) > 1e-6 and np.all(np.isfinite(arr)):
                    hint = first_mistake(arr, _wrong_distributions(x, t, k, p), atol=1e-9)
                    return hint or f"the probabilities add up to {arr.sum():.4g}, not 1"
                hint = first_mistake(arr, _wrong_distributions(x, t, k, p), atol=1e-9)
                if hint:
                    return hint
        return diagnose(got, want, atol=1e-9)

    outcome = check_cases("temperature, top-k and top-p", fn, cases, compare=compare)
    if outcome.passed:  # the same seed must draw the same tokens inside a generation loop
        model = GPT(GPTConfig(vocab_size=13, context_length=24, n_layers=1, n_heads=2,
                              d_model=8), seed=SEED).double()  # fmt: skip
        with torch.no_grad():
            for prm in model.parameters():
                prm.add_(torch.randn(prm.shape, generator=g, dtype=torch.float64))
        kw = {"temperature": 0.9, "top_k": 6, "top_p": 0.9}
        want = generate(model, [1, 2, 3], 16, seed=SEED, use_cache=False, **kw)
        ids, draw = [1, 2, 3], torch.Generator().manual_seed(SEED)
        problem = None
        with torch.no_grad():
            for _ in range(16):
                probs, problem = call(fn, model(torch.tensor([ids]))[0, -1], kw["temperature"],
                                      kw["top_k"], kw["top_p"])  # fmt: skip
                if problem:
                    break
                ids.append(int(torch.multinomial(torch.as_tensor(probs).float(), 1,
                                                 generator=draw)))  # fmt: skip
        if problem or ids != want:
            outcome = Outcome(outcome.title, False, [
                "inside a generation loop (a random 1-layer GPT, 16 tokens, seed 8, "
                f"torch.multinomial): {problem or f'drew {ids[3:]}, the library drew {want[3:]}'}"
            ])  # fmt: skip
        else:
            outcome.details.append("in a generation loop it draws the library's 16 tokens")
    if require and not outcome.passed:
        raise AssertionError(str(outcome))
    return outcome


# ------------------------------------------------------------------------------ the KV cache
def _step(
    token: int,
    p: dict,
    c: GPTConfig,
    cache: list,
    *,
    shift: int = 0,
    zero: bool = False,
    first_key_only: bool = False,
    scale: bool = True,
) -> torch.Tensor:
    """One token through the GPT with a list cache; the flags reproduce named mistakes."""
    pos = 0 if zero else (cache[0][0].shape[1] if cache else 0) + shift
    x = p["tok_emb"][token] + p["pos_emb"][min(pos, c.context_length - 1)]  # (d,)
    for i, blk in enumerate(p["blocks"]):
        z = F.layer_norm(x, (c.d_model,), blk["norm1_gain"], blk["norm1_bias"])
        q, k, v = (torch.einsum("d,hde->he", z, blk[f"w_{n}"]) + blk[f"b_{n}"] for n in "qkv")
        if i < len(cache):
            cache[i] = (torch.cat([cache[i][0], k[:, None]], 1),
                        torch.cat([cache[i][1], v[:, None]], 1))  # fmt: skip
        else:
            cache.append((k[:, None], v[:, None]))
        keys, values = cache[i]  # (h, T, d_head) each
        if first_key_only:
            keys, values = keys[:, :1], values[:, :1]
        s = torch.einsum("he,hte->ht", q, keys) / (math.sqrt(c.d_head) if scale else 1.0)
        a = torch.einsum("ht,hte->he", torch.softmax(s, -1), values)  # (h, d_head)
        x = x + a.reshape(-1) @ blk["w_o"] + blk["b_o"]
        z = F.layer_norm(x, (c.d_model,), blk["norm2_gain"], blk["norm2_bias"])
        x = x + F.gelu(z @ blk["w_1"] + blk["b_1"]) @ blk["w_2"] + blk["b_2"]
    x = F.layer_norm(x, (c.d_model,), p["final_norm_gain"], p["final_norm_bias"])
    return x @ p["tok_emb"].T  # (V,)


def _run(step: Callable, tokens: list[int], p: dict, c: GPTConfig, **kw: Any) -> Any:
    cache: list = []
    rows = []
    for t in tokens:
        rows.append(step(t, p, c, cache, **kw))
    return torch.stack(rows), cache


def cached_step(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(token, p, c, cache)``: the logits (V,) of one new token, with a KV cache.

    ``p`` is a GPT's :meth:`~course_lib.gpt.model.GPT.parameter_dict` (learned positions,
    LayerNorm, GELU, biases), ``c`` its config and ``cache`` a list, empty before the first
    token, that the function fills in place with one ``(k, v)`` per layer, each
    (h, T, d_head). Feeding a sequence token by token must give the logits of recomputing the
    whole window without a cache, ``model(tokens)``, at every position.
    """
    g = torch.Generator().manual_seed(SEED)
    cases = []
    for n_layers, n_heads, d, L in ((1, 1, 4, 3), (2, 2, 8, 7)):
        cfg = GPTConfig(vocab_size=11, context_length=8, n_layers=n_layers, n_heads=n_heads,
                        d_model=d)  # fmt: skip
        model = GPT(cfg, seed=SEED).double()
        with torch.no_grad():
            for prm in model.parameters():
                prm.add_(0.5 * torch.randn(prm.shape, generator=g, dtype=torch.float64))
        tokens = torch.randint(0, 11, (L,), generator=g).tolist()
        desc = f"{L} tokens through a GPT of {n_layers} layer(s), {n_heads} head(s), d_model {d}"
        cases.append((desc, (model, tokens), (model, tokens)))

    def run_learner(model: GPT, tokens: list[int]) -> Any:
        with torch.no_grad():
            return _run(fn, tokens, model.parameter_dict(), model.config)

    def compare(got: object, case: tuple) -> str | None:
        model, tokens = case
        logits, cache = got
        c = model.config
        with torch.no_grad():
            want = model(torch.tensor([tokens]))[0]  # (L, V): no cache, the whole window
            if to_array(logits) is not None and to_array(logits).shape == tuple(want.shape):
                if not np.allclose(to_array(logits), want.numpy(), atol=1e-9):
                    if not cache:
                        return ("the cache stayed empty: append each layer's (k, v) to the list "
                                "you were given, in place, so the next token finds them")  # fmt: skip
                    p = model.parameter_dict()
                    mistakes = [
                        (_run(_step, tokens, p, c, shift=1)[0].numpy(), "the position is off "
                         "by one: the new token's position is the number of tokens already "
                         "cached (0 for the first), not one more"),
                        (_run(_step, tokens, p, c, zero=True)[0].numpy(), "every token got "
                         "position 0: the new token sits at position len(cache) (the keys "
                         "cached so far)"),
                        (_run(_step, tokens, p, c, first_key_only=True)[0].numpy(), "the new "
                         "query saw only the first key: a causal mask on a single query "
                         "(is_causal=True with one query row) keeps key 0 only, but the newest "
                         "token may see every cached key and itself"),
                        (_run(_step, tokens, p, c, scale=False)[0].numpy(), "the scores are "
                         "not divided by sqrt(d_head)"),
                    ]  # fmt: skip
                    hint = first_mistake(logits, mistakes, atol=1e-9)
                    if hint:
                        return hint
            problem = diagnose(logits, want.numpy(), atol=1e-9)
            if problem:
                return f"{problem} (compared with recomputing the window without a cache)"
            shape = (c.n_heads, len(tokens), c.d_head)
            if len(cache) != c.n_layers or any(
                tuple(kv[0].shape) != shape or tuple(kv[1].shape) != shape for kv in cache
            ):
                return (f"the logits are right but the cache is not: after {len(tokens)} tokens "
                        f"it must hold {c.n_layers} (k, v) pairs, each of shape {shape}")  # fmt: skip
        return None

    return check_cases("one token with a KV cache", run_learner, cases, compare=compare,
                       require=require)  # fmt: skip


# ------------------------------------------------------------------------------ Muon's update
def _ns(
    X: np.ndarray, steps: int = 5, coeffs: tuple[float, float, float] | None = None
) -> np.ndarray:
    from course_lib.gpt.reference import NS_COEFFICIENTS

    a, b, c = NS_COEFFICIENTS if coeffs is None else coeffs
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return X


def _muon_mistakes(G: np.ndarray, M: np.ndarray, beta: float) -> list[tuple[Any, str]]:
    """What the known mistakes return, ``(update, momentum)`` flattened into one vector."""
    from course_lib.gpt.reference import NS_COEFFICIENTS, newton_schulz

    def pack(u: np.ndarray, m: np.ndarray) -> np.ndarray:
        return np.concatenate([u.ravel(), m.ravel()])

    m_new = beta * M + G
    d = G + beta * m_new
    scale = math.sqrt(max(1.0, G.shape[0] / G.shape[1]))
    U, _, Vt = np.linalg.svd(d, full_matrices=False)
    ema = beta * M + (1 - beta) * G
    a, b, c = NS_COEFFICIENTS
    return [
        (
            pack(scale * newton_schulz(m_new), m_new),
            "that is plain momentum: Muon's direction is Nesterov's, G + beta * M_new, not M_new",
        ),  # fmt: skip
        (
            pack(scale * newton_schulz(G + beta * ema), ema),
            "the momentum is beta * M + G (a "
            "running sum, as in SGD), not the average beta * M + (1 - beta) * G",
        ),  # fmt: skip
        (
            pack(newton_schulz(d), m_new),
            "the update lacks the shape factor sqrt(max(1, m / n)) for a tall matrix",
        ),  # fmt: skip
        (
            pack(scale * newton_schulz(G), m_new),
            "you orthogonalised the gradient alone: "
            "orthogonalise the momentum's direction G + beta * M_new",
        ),  # fmt: skip
        (
            pack(scale * U @ Vt, m_new),
            "that is the exact polar factor U V^T (from an SVD): Muon "
            "uses five steps of the quintic, whose singular values land near 1, not at 1",
        ),  # fmt: skip
        (
            pack(scale * _ns(d), m_new),
            "you iterated without first dividing by the Frobenius "
            "norm: the quintic only pulls singular values towards 1 when they start at most 1",
        ),  # fmt: skip
        (
            pack(scale * _ns(d / np.linalg.norm(d), coeffs=(c, b, a)), m_new),
            "the coefficients "
            "are reversed: X <- a X + b (X X^T) X + c (X X^T)^2 X with (a, b, c) = "
            f"{NS_COEFFICIENTS}",
        ),  # fmt: skip
        (
            pack(scale * newton_schulz(d), M),
            "return the *new* momentum beta * M + G, not the old one",
        ),  # fmt: skip
    ]


def muon_update(fn: Callable, *, require: bool = False) -> Outcome:
    """Exercise: ``fn(grad, momentum, beta)`` returns Muon's ``(update, new_momentum)``.

    ``new_momentum = beta * momentum + grad``; ``update`` is the Nesterov direction
    ``grad + beta * new_momentum``, divided by its Frobenius norm, sent through five steps of
    the quintic ``X <- a X + b (X X^T) X + c (X X^T)^2 X`` with
    :data:`~course_lib.gpt.reference.NS_COEFFICIENTS`, times ``sqrt(max(1, m / n))``: the
    step is ``W <- W - lr * update``. Compared with :func:`course_lib.gpt.reference.muon_step`.

    >>> from course_lib.gpt.reference import muon_step
    >>> def right(g, m, beta):
    ...     w, m2 = muon_step(np.zeros_like(g), g, m, 1.0, beta)
    ...     return -w, m2
    >>> muon_update(right).passed
    True
    """
    from course_lib.gpt.reference import muon_step

    rng = np.random.default_rng(SEED)
    cases = []
    for shape, beta in (((4, 6), 0.95), ((6, 4), 0.95), ((5, 5), 0.9), ((8, 3), 0.5)):
        G, M = rng.standard_normal(shape), rng.standard_normal(shape)
        desc = f"a gradient of shape {shape} with beta={beta}"
        cases.append((desc, (G.copy(), M.copy(), beta), (G, M, beta)))

    def compare(got: object, case: tuple) -> str | None:
        G, M, beta = case
        w, m_new = muon_step(np.zeros_like(G), G, M, 1.0, beta)
        want = np.concatenate([(-w).ravel(), m_new.ravel()])
        if not isinstance(got, tuple | list) or len(got) != 2:
            return "return a pair (update, new_momentum)"
        u, m = to_array(got[0]), to_array(got[1])
        if u is None or m is None:
            return "both the update and the momentum must be arrays of numbers"
        if u.shape != G.shape or m.shape != G.shape:
            return (
                f"the update and the momentum must have the gradient's shape {G.shape}, got "
                f"{u.shape} and {m.shape}"
            )
        packed = np.concatenate([u.ravel(), m.ravel()])
        if np.allclose(packed, want, atol=1e-8):
            return None
        if np.allclose(-packed[: G.size], want[: G.size], atol=1e-8):
            return "the update has the wrong sign: return the direction that is *subtracted*"
        return first_mistake(packed, _muon_mistakes(G, M, beta), atol=1e-8) or diagnose(
            u, want[: G.size].reshape(G.shape), atol=1e-8
        )

    return check_cases("Muon's update", fn, cases, compare=compare, require=require)
