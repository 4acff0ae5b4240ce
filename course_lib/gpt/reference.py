"""Chapter 8 (GPT): NumPy references, float64, written to be read next to Strabel's notes.

* :func:`gpt_forward`: eq. (21), ``h_0 = U W_e + W_p``, ``n`` pre-LN blocks with causal
  self-attention, a final norm and ``P(u) = softmax(h_n W_e^T)`` (returns the logits); with
  ``positions="rope"`` the table ``W_p`` is replaced by Chapter 6's rotary embedding of the
  queries and keys;
* :func:`causal_lm_loss`: eq. (20) turned into a loss, ``-L_1 / (number of predictions)``, each
  position predicting the *next* token (targets shifted by one);
* :func:`classifier_logits`: eq. (23), ``h^m W_y`` read at each sequence's last real token;
* :func:`fine_tune_loss`: eq. (24), ``L_3 = L_2 + lambda L_1`` written as losses (negated
  log-likelihoods, averaged).

Every function has a PyTorch twin of the same name and signature in
:mod:`course_lib.gpt.accelerated`, and a spec in :mod:`course_lib.gpt.spec`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from course_lib.block.reference import feed_forward, glu_feed_forward, layer_norm, rms_norm
from course_lib.checks import as_array, check_int, check_real, check_token_ids, fmt_shape
from course_lib.gpt.config import GPTConfig
from course_lib.gpt.params import check_params
from course_lib.positions.reference import rotary_embedding
from course_lib.softmax.reference import cross_entropy, softmax

__all__ = [
    "causal_lm_loss",
    "classifier_logits",
    "fine_tune_loss",
    "gpt_forward",
    "muon_step",
    "newton_schulz",
]

#: The quintic's coefficients (a, b, c) of the speed-run's Muon (Jordan et al., 2024): chosen so
#: that five steps raise every singular value of a normalised matrix into roughly [0.7, 1.2].
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


# ------------------------------------------------------------------------------ input checks
def _int_array(x: Any, name: str) -> np.ndarray:
    t = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers, got an array of dtype {t.dtype}")
    return t.astype(np.int64)


def check_token_array(tokens: Any, config: GPTConfig) -> np.ndarray:
    """Integer tokens (..., L), 1 <= L <= context_length, ids in [0, vocab_size)."""
    return check_token_ids(tokens, config)


def check_lengths(lengths: Any, batch: tuple[int, ...], L: int) -> np.ndarray:
    """One length per sequence, each in [1, L]."""
    n = _int_array(lengths, "lengths")
    if n.shape != batch:
        raise ValueError(
            f"lengths must have shape {fmt_shape(batch)} (one per sequence), got {fmt_shape(n.shape)}"
        )
    if n.size and (n.min() < 1 or n.max() > L):
        raise ValueError(f"lengths must lie in [1, {L}], got values from {n.min()} to {n.max()}")
    return n


# ------------------------------------------------------------------------------ the model
def _norm(z: np.ndarray, p: dict, prefix: str, c: GPTConfig) -> np.ndarray:
    if c.norm == "rms":
        return rms_norm(z, p[f"{prefix}_gain"], eps=c.eps)
    return layer_norm(z, p[f"{prefix}_gain"], p.get(f"{prefix}_bias"), eps=c.eps)


def _causal_self_attention(z: np.ndarray, p: dict, c: GPTConfig) -> np.ndarray:
    """Multi-head self-attention where position i sees positions 0..i only; z (..., L, d)."""
    L = z.shape[-2]
    future = np.triu(np.ones((L, L), dtype=bool), k=1)  # True above the diagonal
    heads = []
    for i in range(c.n_heads):
        q = z @ p["w_q"][i]  # (..., L, d_head)
        k = z @ p["w_k"][i]
        v = z @ p["w_v"][i]
        if c.bias:
            q, k, v = q + p["b_q"][i], k + p["b_k"][i], v + p["b_v"][i]
        if c.qk_norm:  # each query and key row divided by its root mean square
            q = q / np.sqrt(np.mean(q**2, axis=-1, keepdims=True) + c.eps)
            k = k / np.sqrt(np.mean(k**2, axis=-1, keepdims=True) + c.eps)
        if c.positions == "rope":  # rotate query and key m by the angles m w_j (Chapter 6)
            q = rotary_embedding(q, base=c.rope_base)
            k = rotary_embedding(k, base=c.rope_base)
        scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(c.d_head)  # (..., L, L)
        scores = np.where(future, -np.inf, scores)  # no position sees the future
        heads.append(softmax(scores, axis=-1) @ v)  # (..., L, d_head)
    out = np.concatenate(heads, axis=-1) @ p["w_o"]  # (..., L, d)
    return out + p["b_o"] if c.bias else out


def _mlp(z: np.ndarray, p: dict, c: GPTConfig) -> np.ndarray:
    if c.activation == "relu2" and not c.gated:  # ReLU squared: max(0, x)^2
        a = z @ p["w_1"] + (p["b_1"] if c.bias else 0)
        out = np.maximum(a, 0) ** 2 @ p["w_2"]
        return out + p["b_2"] if c.bias else out
    if c.gated:
        return glu_feed_forward(
            z, p["w_1"], p["w_2"], p["w_3"], p.get("b_1"), p.get("b_2"), p.get("b_3"),
            activation=c.activation,
        )  # fmt: skip
    return feed_forward(z, p["w_1"], p["w_2"], p.get("b_1"), p.get("b_2"), c.activation)


def final_hidden(tokens: Any, params: Any, config: GPTConfig) -> np.ndarray:
    """``h_n`` after the final norm, (..., L, d): everything of eq. (21) but the output layer."""
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    p = check_params(params, config, as_array)
    t = check_token_array(tokens, config)
    L = t.shape[-1]
    U = np.eye(config.vocab_size)[t]  # (..., L, V): one-hot rows
    h = U @ p["tok_emb"]  # (..., L, d): U W_e
    if config.positions == "learned":
        h = h + p["pos_emb"][:L]  # + W_p
    for blk in p["blocks"]:  # h_l = transformer_decoder(h_{l-1}), pre-LN
        h = h + _causal_self_attention(_norm(h, blk, "norm1", config), blk, config)
        h = h + _mlp(_norm(h, blk, "norm2", config), blk, config)
    return _norm(h, p, "final_norm", config)  # (..., L, d)


def gpt_forward(tokens: Any, params: Any, config: GPTConfig) -> np.ndarray:
    """Eq. (21): the logits ``h_n W_e^T`` of a GPT, (..., L, vocab_size).

    Args:
        tokens: integer token ids (..., L) with L <= ``config.context_length``.
        params: the nested parameters, flat names or one flat vector
            (:mod:`course_lib.gpt.params`).
        config: a :class:`~course_lib.gpt.config.GPTConfig`.

    The softmax of eq. (21) is left to the loss. Row i of the output depends on tokens 0..i only.

    >>> from course_lib.gpt.config import GPTConfig, count
    >>> cfg = GPTConfig(vocab_size=5, context_length=4, n_layers=1, n_heads=2, d_model=4)
    >>> theta = np.random.default_rng(0).standard_normal(count(cfg))
    >>> logits = gpt_forward([[0, 3, 1]], theta, cfg)
    >>> logits.shape, np.allclose(logits[0, :2], gpt_forward([[0, 3]], theta, cfg)[0])
    ((1, 3, 5), True)
    """
    h = final_hidden(tokens, params, config)
    p = check_params(params, config, as_array)
    if not config.tie_head:
        return h @ p["lm_head"].T  # (..., L, V): the model's own output matrix
    return h @ p["tok_emb"].T  # (..., L, V): the output layer is W_e transposed (tied)


# ------------------------------------------------------------------------------ the losses
def _shifted_targets(tokens: np.ndarray, lengths: Any) -> np.ndarray:
    """Targets of positions 0..L-2: the tokens 1..L-1; -100 (ignored) past each length."""
    targets = tokens[..., 1:].copy()  # (..., L-1)
    if lengths is not None:
        n = check_lengths(lengths, tokens.shape[:-1], tokens.shape[-1])
        target_pos = np.arange(1, tokens.shape[-1])  # position of each target in the sequence
        targets[target_pos >= n[..., None]] = -100
    return targets


def causal_lm_loss(logits: Any, tokens: Any, lengths: Any = None) -> np.ndarray:
    """Eq. (20) as a loss: the mean of ``-log P(u_(i+1) | u_0..u_i)`` over the predictions.

    ``logits`` (..., L, V) are the model's outputs on ``tokens`` (..., L); position i predicts
    token i+1, so the last position has no target and there are L-1 predictions per sequence.
    ``lengths`` (one per sequence, optional) leaves out targets at positions >= length (padding).

    >>> float(causal_lm_loss(np.zeros((1, 3, 4)), [[0, 1, 2]]))  # uniform over 4: ln 4
    1.3862943611198906
    """
    x = as_array(logits, "logits", min_ndim=2)
    t = _int_array(tokens, "tokens")
    if t.shape != x.shape[:-1]:
        raise ValueError(
            f"tokens must have the shape of logits without the last axis, {fmt_shape(x.shape[:-1])}, "
            f"got {fmt_shape(t.shape)}"
        )
    if t.shape[-1] < 2:
        raise ValueError("a causal LM loss needs sequences of at least 2 tokens (L >= 2)")
    return cross_entropy(x[..., :-1, :], _shifted_targets(t, lengths))


def classifier_logits(hidden: Any, w_y: Any, lengths: Any) -> np.ndarray:
    """Eq. (23): ``h^m W_y`` with ``h^m`` the final hidden state at each sequence's last token.

    ``hidden`` (B, L, d), ``w_y`` (d, C), ``lengths`` (B,): the last *real* token of sequence b
    is at position ``lengths[b] - 1`` (reading position L-1 of a padded sequence is the padding
    pitfall of Section 8.7). Returns (B, C); the softmax is left to the loss.

    >>> classifier_logits(np.arange(6.0).reshape(1, 3, 2), np.eye(2), [2])
    array([[2., 3.]])
    """
    h = as_array(hidden, "hidden", ndim=3)
    w = as_array(w_y, "w_y", ndim=2)
    if w.shape[0] != h.shape[-1]:
        raise ValueError(
            f"w_y must have {h.shape[-1]} rows to match hidden {fmt_shape(h.shape)}, got "
            f"{fmt_shape(w.shape)}"
        )
    n = check_lengths(lengths, h.shape[:1], h.shape[1])
    last = h[np.arange(h.shape[0]), n - 1]  # (B, d): h^m, the last real position
    return last @ w  # (B, C)


def fine_tune_loss(
    class_logits: Any, labels: Any, lm_logits: Any, tokens: Any, lengths: Any, lam: float = 0.5
) -> np.ndarray:
    """Eq. (24) as a loss: ``L_3 = L_2 + lambda L_1`` with both terms negated and averaged.

    ``L_2`` is the cross-entropy of eq. (22) of ``class_logits`` (B, C) against ``labels`` (B,);
    ``L_1`` the causal LM loss of the same sequences (``lm_logits`` (B, L, V), ``tokens`` (B, L),
    padding past ``lengths`` left out). ``lam = 0`` is plain fine-tuning.

    >>> float(fine_tune_loss(np.zeros((1, 2)), [0], np.zeros((1, 2, 4)), [[0, 1]], [2], lam=1.0))
    2.0794415416798357
    """
    lam = check_real(lam, "lam", low=0.0)
    l2 = cross_entropy(as_array(class_logits, "class_logits", ndim=2), _int_array(labels, "labels"))
    if lam == 0:
        return l2
    return l2 + lam * causal_lm_loss(lm_logits, tokens, lengths)


# ------------------------------------------------------------------------------ Muon
def _check_matrix(x: Any, name: str) -> np.ndarray:
    g = as_array(x, name, ndim=2)
    if not np.all(np.isfinite(g)):
        raise ValueError(f"{name} must be finite, got NaN or infinity")
    return g


def newton_schulz(grad: Any, steps: int = 5, eps: float = 1e-7) -> np.ndarray:
    """Push every singular value of a matrix towards 1, keeping its singular vectors.

    If ``G = U S V^T``, the polar factor ``U V^T`` is the orthogonal matrix nearest to ``G``.
    Muon approximates it without an SVD: scale ``X_0 = G / (||G||_F + eps)`` (so every singular
    value is at most 1), then repeat the odd quintic

        X_(k+1) = a X_k + b (X_k X_k^T) X_k + c (X_k X_k^T)^2 X_k,

    which maps each singular value s to ``p(s) = a s + b s^3 + c s^5`` and leaves U and V alone.
    With :data:`NS_COEFFICIENTS` the iteration is deliberately loose: after 5 steps the singular
    values sit in a band around 1 (about 0.7 to 1.2 for those not far below the largest), not at 1; Muon does not need more.

    Args:
        grad: a matrix (m, n).
        steps: the number of quintic steps (a non-negative int).
        eps: added to the norm so that a zero matrix stays zero.

    >>> x = newton_schulz(np.diag([3.0, 1.0]))
    >>> np.round(np.diag(x), 2)  # the singular values 3 and 1 both end near 1
    array([0.75, 1.13])
    """
    X = _check_matrix(grad, "grad").astype(np.float64)
    check_int(steps, "steps", low=0)
    check_real(eps, "eps", low=0.0)
    a, b, c = NS_COEFFICIENTS
    tall = X.shape[0] > X.shape[1]
    if tall:  # work on the wide side, so that X X^T is the smaller Gram matrix
        X = X.T
    X = X / (np.linalg.norm(X) + eps)  # Frobenius norm: every singular value <= 1
    for _ in range(steps):
        A = X @ X.T  # (m, m)
        X = a * X + (b * A + c * A @ A) @ X  # (m, n): s -> a s + b s^3 + c s^5
    return X.T if tall else X


def muon_step(
    weight: Any,
    grad: Any,
    momentum: Any,
    lr: float,
    beta: float = 0.95,
    nesterov: bool = True,
    steps: int = 5,
) -> tuple[np.ndarray, np.ndarray]:
    """One Muon step for one matrix: returns ``(new_weight, new_momentum)``.

    ``M <- beta M + G``; the direction is ``G + beta M`` (Nesterov) or ``M``;
    ``W <- W - lr * sqrt(max(1, m / n)) * newton_schulz(direction)``. The orthogonalised update
    has every singular value near 1, so each of its directions moves the weights by about the
    same amount; the factor ``sqrt(max(1, m/n))`` keeps the per-entry size of the update about
    the same for tall matrices (the write-up's scaling).

    >>> w, m = muon_step(np.zeros((2, 2)), np.diag([4.0, 1.0]), np.zeros((2, 2)), lr=0.1)
    >>> np.round(-w / 0.1, 2) + 0.0, m  # both directions moved by about the same amount
    (array([[0.74, 0.  ],
           [0.  , 0.74]]), array([[4., 0.],
           [0., 1.]]))
    """
    W = _check_matrix(weight, "weight")
    G = _check_matrix(grad, "grad")
    M = _check_matrix(momentum, "momentum")
    if G.shape != W.shape or M.shape != W.shape:
        raise ValueError(
            f"grad and momentum must have the weight's shape {fmt_shape(W.shape)}, got "
            f"{fmt_shape(G.shape)} and {fmt_shape(M.shape)}"
        )
    lr = check_real(lr, "lr", low=0.0)
    beta = check_real(beta, "beta", low=0.0, high=1.0, high_open=True)
    M = beta * M + G  # (m, n)
    direction = G + beta * M if nesterov else M
    scale = math.sqrt(max(1.0, W.shape[0] / W.shape[1]))
    return W - lr * scale * newton_schulz(direction, steps), M
