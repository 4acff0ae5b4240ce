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

__all__ = ["cached_step", "muon_ema", "next_token_loss", "sampling_probs"]

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


# ------------------------------------------------------------------- the next-token loss (bug)
def _scalar(got: object) -> tuple[float | None, str | None]:
    """The learner's loss as a float, or (None, what is wrong with it)."""
    if got is None:
        return None, "it returned None: did you forget a `return` statement?"
    if isinstance(got, bool | str | bytes):
        return None, f"return the loss, a number; got a {type(got).__name__}"
    arr = to_array(got)
    if arr is None:
        return None, f"return the loss, a number; got a {type(got).__name__}"
    if arr.size != 1:
        return None, (
            f"return one number, the mean over all predictions; got {arr.size} values of shape "
            f"{arr.shape} (the per-token losses?)"
        )
    value = float(arr.reshape(()))
    if not math.isfinite(value):
        return None, f"the loss is {value}: is a log taken of 0, or are the logits infinite?"
    return value, None


def _loss_mistakes(
    logits: torch.Tensor, x: torch.Tensor, y: torch.Tensor
) -> list[tuple[float, str]]:
    """What the known mistakes compute on one batch, with their names, most telling first."""
    V = logits.shape[-1]

    def ce(z: torch.Tensor, t: torch.Tensor, **kw: Any) -> float:
        return float(F.cross_entropy(z.reshape(-1, V), t.reshape(-1), **kw))

    return [
        (ce(logits[:, :-1], y[:, 1:]), "that is the colleague's loss, unchanged: its function "
         "already pairs logits at position i with the token at i + 1 of what it is given. "
         "What is at position i + 1 of y?"),
        (ce(logits[:, :-1], x[:, 1:]), "you dropped the last position's prediction: y already "
         "holds its target, so all L predictions can be scored"),
        (ce(logits, x), "you scored each position against its own input token, which a causal "
         "model can see: the targets are y, the next tokens"),
        (ce(logits[:, 1:], y[:, :-1]), "the shift goes the wrong way: position i predicts y[:, i]; "
         "with y already shifted, no slicing is needed"),
        (ce(logits, y, reduction="sum"), "that is the sum over the predictions: return the mean"),
        (ce(torch.softmax(logits, -1), y), "F.cross_entropy takes logits and applies the "
         "log-softmax itself: applying a softmax first squashes them twice"),
        (ce(logits[:, :-1], y[:, 1:], reduction="sum"), "that is the colleague's loss, summed "
         "instead of averaged"),
    ]  # fmt: skip


def next_token_loss(fn: Callable, *, require: bool = False) -> Outcome:
    """Find-the-bug exercise: ``fn(logits, x, y)`` is the mean cross-entropy of next-token
    prediction, where ``logits`` (B, L, V) is the model's output on the windows ``x`` (B, L) and
    ``y`` (B, L) holds, at each position, the token that follows in the text (``x`` moved by
    one). All L positions of every window are scored.

    The answer may be a 0-d tensor, a float or a NumPy number; it must match to 1e-6.

    >>> next_token_loss(lambda logits, x, y: F.cross_entropy(
    ...     logits.reshape(-1, logits.shape[-1]), y.reshape(-1))).passed
    True
    >>> from course_lib.gpt.accelerated import causal_lm_loss
    >>> "colleague's loss, unchanged" in next_token_loss(
    ...     lambda logits, x, y: causal_lm_loss(logits, y)).details[0]
    True
    """
    g = torch.Generator().manual_seed(SEED)
    cases = []
    for B, L, V, dtype in (
        (2, 5, 7, torch.float64),
        (3, 9, 11, torch.float32),
        (1, 2, 4, torch.float64),
    ):
        text = torch.randint(0, V, (B, L + 1), generator=g)
        x, y = text[:, :-1], text[:, 1:]  # (B, L) each: y is x moved by one
        logits = (2 * torch.randn(B, L, V, generator=g, dtype=torch.float64)).to(dtype)
        desc = f"logits of shape {(B, L, V)} ({str(dtype).removeprefix('torch.')})"
        cases.append((desc, (logits.clone(), x.clone(), y.clone()), (logits, x, y)))

    def compare(got: object, case: tuple) -> str | None:
        logits, x, y = case
        value, problem = _scalar(got)
        if problem:
            return problem
        z = logits.double()
        want = float(F.cross_entropy(z.reshape(-1, z.shape[-1]), y.reshape(-1)))
        if math.isclose(value, want, rel_tol=1e-5, abs_tol=1e-6):
            return None
        for wrong, hint in _loss_mistakes(z, x, y):
            if math.isclose(value, wrong, rel_tol=1e-5, abs_tol=1e-6):
                return f"you return {value:.6g}, the right loss is {want:.6g}: {hint}"
        return f"you return {value:.6g}, the right loss is {want:.6g}"

    def run(logits: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> Any:
        got, error = call(fn, logits, x, y)
        if error:
            if "positional argument" in error or "unexpected keyword" in error:
                error += ": the function must be loss_fn(logits, x, y)"
            raise _LearnerError(error)
        return got

    outcome = Outcome("the next-token loss", True, [])
    if not callable(fn):
        outcome = Outcome(outcome.title, False, [f"pass your function, got {type(fn).__name__}"])
    else:
        for desc, args, case in cases:
            try:
                got = run(*args)
            except _LearnerError as err:
                outcome = Outcome(outcome.title, False, [f"on {desc}: {err}"])
                break
            problem = compare(got, case)
            if problem:
                outcome = Outcome(outcome.title, False, [f"on {desc}: {problem}"])
                break
        else:
            outcome.details.append(f"passed all {len(cases)} batches (float64 and float32)")
    if require and not outcome.passed:
        raise AssertionError(str(outcome))
    return outcome


class _LearnerError(Exception):
    """The learner's function raised (its message already says how)."""


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


def _muon_ema_step(
    G: np.ndarray, M: np.ndarray, beta: float, *, variant: str = "right"
) -> tuple[np.ndarray, np.ndarray]:
    """One step of Muon in the EMA convention, or a named wrong version of it."""
    from course_lib.gpt.reference import newton_schulz

    scale = math.sqrt(max(1.0, G.shape[0] / G.shape[1]))
    m = beta * M + (1 - beta) * G  # momentum.lerp_(grad, 1 - beta)
    d = (1 - beta) * G + beta * m  # grad.lerp_(momentum, beta)
    if variant == "swapped":  # the lerp weights the wrong way round
        m = (1 - beta) * M + beta * G
        d = beta * G + (1 - beta) * m
    elif variant == "sum":  # the running-sum convention of the page
        m = beta * M + G
        d = G + beta * m
    elif variant == "plain":
        d = m
    elif variant == "old":
        return scale * newton_schulz(d), M
    U, _, Vt = np.linalg.svd(d, full_matrices=False)
    if variant == "svd":
        return scale * U @ Vt, m
    if variant == "no_scale":
        return newton_schulz(d), m
    if variant == "sign":
        return -scale * newton_schulz(d), m
    return scale * newton_schulz(d), m


#: The named mistakes of the EMA exercise, in the learner's words.
_MUON_MISTAKES = {
    "sum": "that is the running sum of section 8.11 (M <- beta M + G), not the moving average: "
    "your updates are right, since the two conventions give the same updates, but the momentum "
    "you return is 1 / (1 - beta) times the average's. momentum.lerp_(grad, 1 - beta) is "
    "M + (1 - beta) (G - M) = beta M + (1 - beta) G",
    "swapped": "the lerp weights are the wrong way round: a.lerp_(b, w) is a + w (b - a) = "
    "(1 - w) a + w b, so momentum.lerp_(grad, 1 - beta) keeps beta of the old momentum",
    "plain": "that is plain momentum: the reference steps along grad.lerp_(momentum, beta) = "
    "(1 - beta) G + beta M_new (Nesterov), not along M_new",
    "old": "return the *new* momentum, not the one you were given",
    "svd": "that is the exact polar factor U V^T (from an SVD): Muon uses five steps of the "
    "quintic (the page's newton_schulz), whose singular values land near 1, not at 1",
    "no_scale": "the update lacks the shape factor sqrt(max(1, m / n)) for a tall matrix",
    "sign": "the update has the wrong sign: return the direction that is *subtracted*",
}


def muon_ema(fn: Callable, *, require: bool = False) -> Outcome:
    """Derive exercise: ``fn(grad, momentum, beta)`` is one Muon step in the moving-average
    convention of the reference implementation (KellerJordan/Muon's ``muon_update``):
    ``momentum.lerp_(grad, 1 - beta)``, direction ``grad.lerp_(momentum, beta)``, five steps of
    the quintic, times ``sqrt(max(1, m / n))``. It returns ``(update, new_momentum)``, NumPy
    arrays (float64) or tensors of the gradient's shape.

    The checker feeds it a sequence of gradients from zero momentum, threading the momentum it
    returns, and compares each update with the running-sum Muon of
    :func:`course_lib.gpt.reference.muon_step` on the same gradients: the two conventions give
    the same updates (the exercise is to see why), while the momenta differ by 1 - beta.

    >>> muon_ema(lambda g, m, beta: _muon_ema_step(g, m, beta)).passed
    True
    >>> "running sum" in muon_ema(lambda g, m, beta: _muon_ema_step(g, m, beta, variant="sum")).details[0]
    True
    """
    from course_lib.gpt.reference import muon_step

    title = "Muon's update in the moving-average convention"
    rng = np.random.default_rng(SEED)
    runs = [((4, 6), 0.95), ((6, 4), 0.9), ((5, 5), 0.5)]

    def fail(problem: str) -> Outcome:
        out = Outcome(title, False, [problem])
        if require:
            raise AssertionError(str(out))
        return out

    if not callable(fn):
        return fail(f"pass your function, got {type(fn).__name__}")
    agree = True
    for shape, beta in runs:
        grads = [rng.standard_normal(shape) for _ in range(4)]
        M_ema, M_sum = np.zeros(shape), np.zeros(shape)
        wrong = {k: np.zeros(shape) for k in _MUON_MISTAKES}
        for t, G in enumerate(grads, 1):
            where = f"step {t} of gradients of shape {shape}, beta={beta}, from zero momentum"
            got, error = call(fn, G.copy(), M_ema.copy(), beta)
            if error:
                if "positional argument" in error or "unexpected keyword" in error:
                    error += ": the function must be my_muon(grad, momentum, beta)"
                return fail(f"on {where}: {error}")
            if got is None:
                return fail(f"on {where}: it returned None: did you forget a `return` statement?")
            if not isinstance(got, tuple | list) or len(got) != 2:
                return fail(f"on {where}: return a pair (update, new_momentum)")
            u, m = to_array(got[0]), to_array(got[1])
            if u is None or m is None:
                return fail(f"on {where}: the update and the momentum must be arrays of numbers")
            if u.shape != shape or m.shape != shape:
                return fail(
                    f"on {where}: the update and the momentum must have the gradient's shape "
                    f"{shape}, got {u.shape} and {m.shape}"
                )
            if not (np.all(np.isfinite(u)) and np.all(np.isfinite(m))):
                return fail(f"on {where}: the update or the momentum holds NaN or inf")
            w, M_sum = muon_step(np.zeros(shape), G, M_sum, 1.0, beta)
            same = np.allclose(-w, _muon_ema_step(G, M_ema, beta)[0], atol=1e-5)
            agree = agree and same  # the running-sum Muon's update on the same gradients
            want_u, M_ema = _muon_ema_step(G, M_ema, beta)  # to about 1e-7 the same update:
            # newton_schulz divides by the norm plus 1e-7, so the scale does not cancel exactly
            # what each named mistake returns after the same history
            named = []
            for k in _MUON_MISTAKES:
                wu, wrong[k] = _muon_ema_step(G, wrong[k], beta, variant=k)
                if np.allclose(u, wu, atol=1e-6) and np.allclose(m, wrong[k], atol=1e-6):
                    named.append(_MUON_MISTAKES[k])
            right_u = np.allclose(u, want_u, atol=1e-6)
            right_m = np.allclose(m, M_ema, atol=1e-6)
            if right_u and right_m:
                continue
            if named:
                return fail(f"on {where}: {named[0]}")
            if not right_m:
                return fail(f"on {where}: " + (diagnose(m, M_ema, atol=1e-6) or "the momentum is off")
                            + " (in the momentum)")  # fmt: skip
            return fail(f"on {where}: " + (diagnose(u, want_u, atol=1e-6) or "the update is off")
                        + " (in the update)")  # fmt: skip
    details = [f"passed {len(runs)} runs of 4 steps (wide, tall, square, to 1e-6)"]
    if agree:
        details.append(
            "your updates equal the running-sum Muon's of section 8.11 on the same gradients (to "
            "1e-5), while your momentum is 1 - beta times its momentum"
        )
    return Outcome(title, True, details)
