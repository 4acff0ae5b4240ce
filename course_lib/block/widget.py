"""The parameter-count explorer of Chapter 5: where the parameters of a decoder-only model live.

:func:`parameter_breakdown` and :func:`render_html` are pure (tested without a browser);
:func:`explorer` only wires ipywidgets controls to them. Start from a row of the GPT-3 table
(slides ``003``) or from any configuration, and see the count split into embeddings,
attention, feed-forward and norms, next to the ``12 n_layers d_model^2`` rule of thumb.
"""

from __future__ import annotations

import html
from typing import Any

from course_lib.block.config import BlockConfig, DecoderConfig
from course_lib.block.counting import GPT3_SIZES, approx_parameters, count_parameters
from course_lib.checks import check_choice, check_int, check_real
from course_lib.interact import live_html

PRESETS = {r.name: r for r in GPT3_SIZES}


def parameter_breakdown(config: DecoderConfig) -> dict[str, int]:
    """The parameters of a decoder by component; the values add up to ``count_parameters``.

    >>> cfg = DecoderConfig(50257, 1024, 12, BlockConfig(768, 12, 3072, norm_position="pre"))
    >>> b = parameter_breakdown(cfg)
    >>> b["attention (all blocks)"], sum(b.values())  # GPT-2 small
    (28348416, 124439808)
    """
    if not isinstance(config, DecoderConfig):
        raise TypeError(f"config must be a DecoderConfig, got {type(config).__name__}")
    c, n = config.block, config.n_layers
    d, da, f = c.d_model, c.d_attn, c.d_ff
    attention = n * (4 * d * da + ((3 * da + d) if c.bias else 0))
    n_mats = 3 if c.gated else 2
    ffn = n * (n_mats * d * f + (((n_mats - 1) * f + d) if c.bias else 0))
    per_norm = 2 * d if c.norm_has_bias else d
    norms = n * c.n_norms * per_norm + (per_norm if config.final_norm else 0)
    out = {
        "token embedding": config.vocab_size * d,
        "position embedding": config.context_length * d,
        "attention (all blocks)": attention,
        "feed-forward (all blocks)": ffn,
        "norms": norms,
        "output projection": 0 if config.tie_embeddings else d * config.vocab_size,
    }
    assert sum(out.values()) == count_parameters(config)
    return out


def _fmt(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return str(int(n))


def render_html(config: DecoderConfig, nominal: float | None = None) -> str:
    """An HTML table of :func:`parameter_breakdown` with shares, the total and the rule of thumb.

    >>> cfg = DecoderConfig(100, 16, 2, BlockConfig(32, 4, 128))
    >>> "12 n d" in render_html(cfg) and "token embedding" in render_html(cfg)
    True
    """
    parts = parameter_breakdown(config)
    total = sum(parts.values())
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{v:,}</td>"
        f"<td style='text-align:right'>{100 * v / total:.1f}%</td>"
        f"<td><div style='background:#0072B2;height:10px;width:{200 * v / total:.0f}px'></div></td></tr>"
        for k, v in parts.items()
    )
    approx = approx_parameters(
        config.n_layers, config.d_model, config.vocab_size, config.context_length
    )
    lines = [
        f"<b>total: {total:,}</b> ({_fmt(total)})",
        f"rule of thumb 12 n d² + (V + n_ctx) d = {approx:,} "
        f"({100 * (approx / total - 1):+.2f}% against the exact count)",
    ]
    if nominal is not None:
        lines.append(
            f"nominal size: {_fmt(nominal)} (exact count {100 * (total / nominal - 1):+.1f}%)"
        )
    c = config.block
    if c.d_attn != c.d_model:
        lines.append(
            f"<span style='color:#A63D00'>n_heads × d_head = {c.d_attn} ≠ d_model = "
            f"{c.d_model}</span>"
        )
    return (
        "<div class='block-params'><table style='border-collapse:collapse'>"
        "<tr><th>component</th><th>parameters</th><th>share</th><th></th></tr>"
        f"{rows}</table><p>{'<br>'.join(lines)}</p></div>"
    )


def preset_config(name: str, vocab_size: int = 50257, context_length: int = 2048) -> DecoderConfig:
    """The GPT-3 row ``name`` as a pre-LN GELU decoder with the heads as printed.

    >>> preset_config("GPT-3 XL").block.d_attn  # 24 heads x 128, not 2048
    3072
    """
    check_choice(name, "name", PRESETS)
    r = PRESETS[name]
    block = BlockConfig(
        d_model=r.d_model,
        n_heads=r.n_heads,
        d_head=r.d_head,
        d_ff=4 * r.d_model,
        norm_position="pre",
        activation="gelu",
    )
    return DecoderConfig(vocab_size, context_length, r.n_layers, block)


def explorer(preset: str = "GPT-3 Small") -> Any:
    """An ipywidgets explorer: a GPT-3 preset or your own sizes, and where the parameters are."""
    import ipywidgets as w

    check_choice(preset, "preset", PRESETS)
    choose = w.Dropdown(options=list(PRESETS), value=preset, description="preset")
    layers = w.IntSlider(12, 1, 96, description="n_layers")
    width = w.IntSlider(768, 64, 12288, step=64, description="d_model")
    heads = w.IntSlider(12, 1, 96, description="n_heads")
    d_head = w.IntSlider(64, 8, 256, step=8, description="d_head")
    gated = w.Checkbox(False, description="gated FFN (GLU)")
    bias = w.Checkbox(True, description="biases")
    tied = w.Checkbox(True, description="tied output")
    state = {"nominal": None}

    def render() -> str:
        r = PRESETS[choose.value]
        if (layers.value, width.value, heads.value, d_head.value) != (
            r.n_layers, r.d_model, r.n_heads, r.d_head,
        ):  # fmt: skip
            state["nominal"] = None
        block = BlockConfig(
            d_model=width.value,
            n_heads=heads.value,
            d_head=d_head.value,
            d_ff=4 * width.value,
            norm_position="pre",
            activation="gelu",
            gated=gated.value,
            bias=bias.value,
        )
        cfg = DecoderConfig(50257, 2048, layers.value, block, tie_embeddings=tied.value)
        return render_html(cfg, state["nominal"])

    out = live_html([layers, width, heads, d_head, gated, bias, tied], render)

    def load(_: object = None) -> None:
        r = PRESETS[choose.value]
        for s, v in (
            (layers, r.n_layers),
            (width, r.d_model),
            (heads, r.n_heads),
            (d_head, r.d_head),
        ):
            s.value = v
        state["nominal"] = r.nominal
        out.value = render()

    choose.observe(load, names="value")
    load()
    return w.VBox(
        [choose, w.HBox([layers, width]), w.HBox([heads, d_head]), w.HBox([gated, bias, tied]), out]
    )


def residual_explorer(depth: int = 24, gain: float = 0.5) -> Any:
    """An ipywidgets explorer for section 5.3: the gradient at every layer of a deep chain, with
    and without residual connections (:func:`course_lib.block.residual.render_html`)."""
    import ipywidgets as w

    from course_lib.block.residual import render_html as residual_html

    check_int(depth, "depth", low=1, high=96)
    check_real(gain, "gain", low=0.05, high=8.0)
    layers = w.IntSlider(depth, 1, 96, description="layers")
    scale = w.FloatLogSlider(gain, base=2, min=-3, max=3, step=0.25, description="gain")
    out = live_html([layers, scale], lambda: residual_html(layers.value, scale.value))
    return w.VBox([w.HBox([layers, scale]), out])
