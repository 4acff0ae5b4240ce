"""Where a GPT's parameters live: nested dicts, flat vectors and checks (no array maths).

A GPT's parameters come in three forms, all under Chapter 5's names (:func:`~course_lib.gpt.config.gpt_layout`):

* *flat names*: ``{"tok_emb": ..., "blocks.0.w_q": ..., ...}``, as ``nn.Module.state_dict``;
* *nested*: ``{"tok_emb": ..., "blocks": [{"w_q": ...}, ...], ...}``, what the forward passes read;
* one *flat vector* of length :func:`~course_lib.gpt.config.count`, in layout order (for
  ``gradcheck`` and the conformance suite).

>>> from course_lib.gpt.config import GPTConfig
>>> cfg = GPTConfig(vocab_size=5, context_length=4, n_layers=2, n_heads=1, d_model=2)
>>> p = unflatten(list(range(count(cfg))), cfg)
>>> sorted(p), len(p["blocks"]), p["blocks"][1]["w_q"].shape
(['blocks', 'final_norm_bias', 'final_norm_gain', 'pos_emb', 'tok_emb'], 2, (1, 2, 2))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from course_lib.checks import fmt_shape
from course_lib.gpt.config import GPTConfig, count, gpt_layout

__all__ = ["check_params", "flatten_names", "nest", "unflatten"]


def nest(flat: Mapping[str, Any], config: GPTConfig) -> dict[str, Any]:
    """Flat names (``blocks.0.w_q``) to the nested form; every name of the layout must be there."""
    out: dict[str, Any] = {"blocks": [{} for _ in range(config.n_layers)]}
    for name, _ in gpt_layout(config):
        if name not in flat:
            raise ValueError(f"parameters are missing {name!r} (the model's layout needs it)")
        value = flat[name]
        if name.startswith("blocks."):
            _, r, base = name.split(".", 2)
            out["blocks"][int(r)][base] = value
        else:
            out[name] = value
    extra = sorted(set(flat) - {n for n, _ in gpt_layout(config)})
    if extra:
        raise ValueError(f"parameters have names the model does not know: {extra[:5]}")
    return out


def flatten_names(p: Mapping[str, Any]) -> dict[str, Any]:
    """The nested form back to flat names."""
    flat = {k: v for k, v in p.items() if k != "blocks"}
    for r, blk in enumerate(p["blocks"]):
        flat.update({f"blocks.{r}.{k}": v for k, v in blk.items()})
    return flat


def unflatten(theta: Any, config: GPTConfig) -> dict[str, Any]:
    """One flat vector (NumPy array, list or tensor) to the nested form, as views."""
    if not hasattr(theta, "reshape"):
        theta = np.asarray(theta, dtype=np.float64)
    n = count(config)
    if theta.ndim != 1 or theta.shape[0] != n:
        raise ValueError(
            f"params must be a flat vector of length {n} for this config, got shape "
            f"{fmt_shape(theta.shape)}"
        )
    flat, start = {}, 0
    for name, shape in gpt_layout(config):
        size = int(np.prod(shape))
        flat[name] = theta[start : start + size].reshape(shape)
        start += size
    return nest(flat, config)


def check_params(
    params: Any, config: GPTConfig, convert: Callable[[Any, str], Any]
) -> dict[str, Any]:
    """The nested parameters, each converted by ``convert(value, name)`` and its shape checked.

    Accepts the nested form, flat names or a flat vector.
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    if not isinstance(params, Mapping):
        params = unflatten(params, config)
    elif "blocks" not in params:
        params = nest(params, config)
    elif len(params["blocks"]) != config.n_layers:
        raise ValueError(
            f"params hold {len(params['blocks'])} blocks but the config has "
            f"n_layers = {config.n_layers}"
        )
    flat = flatten_names(params)
    out = {}
    for name, shape in gpt_layout(config):
        if name not in flat:
            raise ValueError(f"params are missing {name!r} (the model's layout needs it)")
        v = convert(flat[name], name)
        if tuple(v.shape) != tuple(shape):
            raise ValueError(
                f"parameter {name} must have shape {fmt_shape(shape)}, got {fmt_shape(v.shape)}"
            )
        out[name] = v
    return nest(out, config)
