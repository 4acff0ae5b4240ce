"""The configuration of a GPT model and of a training recipe (Chapter 8).

* :class:`GPTConfig` is a decoder-only Transformer (Strabel's notes, eq. 21) in Chapter 5's terms:
  a pre-LN stack of :class:`~course_lib.block.config.BlockConfig` blocks with causal
  self-attention, a final norm and the output layer tied to the token embedding, plus the one
  choice Chapter 5 does not make: where positions come from (``"learned"``, GPT's table ``W_p``,
  or ``"rope"``, Chapter 6's rotary embedding applied to queries and keys).
* :func:`gpt_layout` lists every parameter with its shape, under Chapter 5's names
  (``tok_emb``, ``pos_emb``, ``blocks.0.w_q``, ...), so a learned-position GPT *is* a
  :class:`~course_lib.block.config.DecoderConfig` model and Chapter 5's NumPy decoder reads its
  weights unchanged.
* :class:`Recipe` is a training recipe (model and optimiser); :data:`RECIPES` holds the ones the
  chapter races: ``baseline`` (nanoGPT's CPU setting for character-level Shakespeare), ``modern``
  (section 8.10: the earlier chapters' changes), ``speedrun`` (section 8.11: every idea of the
  speed-run on ``modern``) and ``fast``, the fastest measured (the speed-run's ideas that paid).

>>> cfg = GPTConfig(vocab_size=65, context_length=64, n_layers=4, n_heads=4, d_model=128)
>>> cfg.d_ff, cfg.decoder.block.norm_position, count(cfg)
(512, 'pre', 809856)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from course_lib.block.config import BlockConfig, DecoderConfig
from course_lib.block.params import layout
from course_lib.checks import check_bool, check_choice, check_int, check_real

__all__ = ["POSITIONS", "RECIPES", "GPTConfig", "Recipe", "count", "gpt_layout"]

POSITIONS = ("learned", "rope")
OPTIMIZERS = ("adamw", "muon")


@dataclass(frozen=True)
class GPTConfig:
    """A GPT: token embedding, ``n_layers`` pre-LN blocks, final norm, tied output layer.

    Attributes:
        vocab_size, context_length, n_layers, n_heads, d_model: the sizes (V, the longest
            sequence the model reads, the number of blocks, heads and the residual width).
        d_ff: the feed-forward width; default ``4 * d_model`` (GPT), or ``8/3 * d_model``
            rounded up to a multiple of 8 when ``gated`` (same parameter count, as in LLaMA).
        norm: ``"layer"`` (LayerNorm, GPT-2) or ``"rms"`` (RMSNorm).
        activation: ``"gelu"`` (exact), ``"gelu_tanh"`` (GPT-2's approximation), ``"relu"``,
            ``"swish"``.
        gated: a gated feed-forward (with ``swish``: SwiGLU).
        bias: biases in every projection and LayerNorm.
        positions: ``"learned"`` (a table ``W_p`` added to the token embeddings, eq. 21) or
            ``"rope"`` (queries and keys rotated, Chapter 6; the model then has no ``pos_emb``).
        rope_base: the base of RoPE's frequencies.
        eps: the norms' epsilon.
        qk_norm: RMS-normalise every head's queries and keys (no gain) before the scores, so
            no logit can grow without bound (QK-norm; the speed-run's recipe).
        tie_head: the output layer is ``W_e`` transposed (GPT); ``False`` gives the model its
            own output matrix ``lm_head`` (V, d).
        zero_init: start the two projections that write into the residual stream (``w_o`` and
            the feed-forward's output) at zero, so every block starts as the identity.

    ``activation`` may also be ``"relu2"``, ReLU squared (the speed-run's feed-forward).

    >>> GPTConfig(vocab_size=10, context_length=8, n_layers=1, n_heads=3, d_model=8)
    Traceback (most recent call last):
    ...
    ValueError: n_heads=3 does not divide d_model=8: pass d_head explicitly or change n_heads
    """

    vocab_size: int
    context_length: int
    n_layers: int
    n_heads: int
    d_model: int
    d_ff: int | None = None
    norm: str = "layer"
    activation: str = "gelu"
    gated: bool = False
    bias: bool = True
    positions: str = "learned"
    rope_base: float = 10000.0
    eps: float = 1e-5
    qk_norm: bool = False
    tie_head: bool = True
    zero_init: bool = False

    def __post_init__(self) -> None:
        check_int(self.vocab_size, "vocab_size", low=1)
        check_int(self.context_length, "context_length", low=1)
        check_int(self.n_layers, "n_layers", low=1)
        check_bool(self.gated, "gated")
        for name in ("qk_norm", "tie_head", "zero_init"):
            check_bool(getattr(self, name), name)
        if self.activation == "relu2" and self.gated:
            raise ValueError("activation='relu2' is for the plain feed-forward, not gated=True")
        if self.d_ff is None:
            d_ff = 4 * self.d_model
            if self.gated:
                d_ff = -(-(8 * self.d_model) // 3 // 8) * 8
            object.__setattr__(self, "d_ff", d_ff)
        check_choice(self.positions, "positions", POSITIONS)
        check_real(self.rope_base, "rope_base", low=1.0, low_open=True)
        self.decoder  # noqa: B018 (validates the block's fields)
        if self.positions == "rope" and self.d_model // self.n_heads % 2:
            raise ValueError(
                f"positions='rope' needs an even head width, got d_model // n_heads = "
                f"{self.d_model // self.n_heads}"
            )

    @property
    def block(self) -> BlockConfig:
        """The configuration every block shares (Chapter 5), pre-LN."""
        return BlockConfig(
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=self.d_ff,  # type: ignore[arg-type]
            norm_position="pre",
            norm=self.norm,
            # ReLU squared has ReLU's parameters; only the forward passes square it
            activation="relu" if self.activation == "relu2" else self.activation,
            gated=self.gated,
            bias=self.bias,
            eps=self.eps,
        )

    @property
    def decoder(self) -> DecoderConfig:
        """The same model as Chapter 5's :class:`DecoderConfig` (tied, with a final norm)."""
        return DecoderConfig(
            vocab_size=self.vocab_size,
            context_length=self.context_length,
            n_layers=self.n_layers,
            block=self.block,
            tie_embeddings=True,
            final_norm=True,
        )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (what a ``weights_only`` checkpoint may hold)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> GPTConfig:
        if not isinstance(d, dict):
            raise ValueError(f"a GPT config must be a dict, got {type(d).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown GPT config fields {unknown}")
        return cls(**d)


def gpt_layout(config: GPTConfig) -> list[tuple[str, tuple[int, ...]]]:
    """Every parameter's name and shape: Chapter 5's decoder layout, without ``pos_emb`` for RoPE.

    >>> [n for n, _ in gpt_layout(GPTConfig(5, 4, 1, 1, 2, positions="rope"))][:3]
    ['tok_emb', 'blocks.0.norm1_gain', 'blocks.0.norm1_bias']
    """
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    out = layout(config.decoder)
    if config.positions == "rope":
        out = [(n, s) for n, s in out if n != "pos_emb"]
    if not config.tie_head:
        out.append(("lm_head", (config.vocab_size, config.d_model)))
    return out


def count(config: GPTConfig) -> int:
    """The number of parameters (the tied output layer counted once).

    >>> count(GPTConfig(vocab_size=5, context_length=4, n_layers=1, n_heads=1, d_model=2))
    96
    """
    total = 0
    for _, shape in gpt_layout(config):
        n = 1
        for s in shape:
            n *= s
        total += n
    return total


@dataclass(frozen=True)
class Recipe:
    """A training recipe: the model's shape and the optimiser's schedule.

    The learning rate rises linearly from 0 over ``warmup_steps``, then follows a half cosine
    from ``lr`` down to ``min_lr`` at ``decay_steps``, and stays there. AdamW decays only the
    matrices (weights and embeddings), never biases or gains.

    With ``optimizer="muon"`` the blocks' matrices are trained by Muon instead
    (:class:`course_lib.gpt.optim.Muon`, learning rate ``muon_lr``, momentum
    ``muon_momentum``, on the same schedule's shape) and AdamW keeps the embeddings, the output
    layer and the gains at ``lr``. ``qk_norm``, ``tie_head``, ``zero_init`` and
    ``activation="relu2"`` are the model's fields of :class:`GPTConfig`. ``compile`` runs the
    training step's forward pass through ``torch.compile``.
    """

    name: str
    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    context_length: int = 64
    batch_size: int = 12
    lr: float = 1e-3
    min_lr: float = 1e-4
    betas: tuple[float, float] = (0.9, 0.99)
    weight_decay: float = 0.1
    warmup_steps: int = 100
    decay_steps: int = 2000
    clip: float = 1.0
    norm: str = "layer"
    activation: str = "gelu"
    gated: bool = False
    bias: bool = True
    positions: str = "learned"
    qk_norm: bool = False
    tie_head: bool = True
    zero_init: bool = False
    optimizer: str = "adamw"
    muon_lr: float = 0.02
    muon_momentum: float = 0.95
    compile: bool = False

    def __post_init__(self) -> None:
        check_choice(self.optimizer, "optimizer", OPTIMIZERS)
        check_real(self.muon_lr, "muon_lr", low=0.0, low_open=True)
        check_real(self.muon_momentum, "muon_momentum", low=0.0, high=1.0, high_open=True)
        check_bool(self.compile, "compile")

    def model_config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig(
            vocab_size=vocab_size,
            context_length=self.context_length,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            d_model=self.d_model,
            norm=self.norm,
            activation=self.activation,
            gated=self.gated,
            bias=self.bias,
            positions=self.positions,
            qk_norm=self.qk_norm,
            tie_head=self.tie_head,
            zero_init=self.zero_init,
        )

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Recipe:
        """The inverse of :meth:`to_dict`; fields a recipe of an older file lacks take defaults.

        >>> Recipe.from_dict({"name": "old", "betas": [0.9, 0.99]}).optimizer
        'adamw'
        """
        if not isinstance(d, dict):
            raise TypeError(f"a recipe must be a dict, got {type(d).__name__}")
        d = dict(d)
        unknown = sorted(set(d) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"unknown recipe fields {unknown}")
        if "betas" in d:
            d["betas"] = tuple(d["betas"])
        return cls(**d)


#: The recipes chapter 8 races (``benchmarks/gpt.py``, ``course_lib.gpt.race``); all keep the
#: model's size.
RECIPES: dict[str, Recipe] = {
    # nanoGPT's "shakespeare_char" config as its README shrinks it for a CPU
    "baseline": Recipe(name="baseline"),
    # section 8.10: RoPE instead of a learned table, RMSNorm, no biases, a larger learning rate
    # that decays sooner: each change is measured in the chapter's ablation table
    "modern": Recipe(
        name="modern",
        lr=3e-3,
        min_lr=3e-4,
        warmup_steps=50,
        decay_steps=1000,
        norm="rms",
        bias=False,
        positions="rope",
    ),
}
# section 8.11: the speed-run's ideas all on top of ``modern``: Muon for the blocks' matrices,
# QK-norm, ReLU squared, zero-initialised output projections and an untied head
RECIPES["speedrun"] = dataclasses.replace(
    RECIPES["modern"],
    name="speedrun",
    optimizer="muon",
    muon_lr=0.02,
    qk_norm=True,
    activation="relu2",
    zero_init=True,
    tie_head=False,
)
# the fastest recipe measured (section 8.11's race; benchmarks/nanogpt_race.py): the speed-run's
# ideas that paid on ``modern`` (Muon, QK-norm, ReLU squared), without the two that did not (zero
# initialisation, the untied head), and the learning rate decayed over the 400 steps such a run
# needs instead of 1000
RECIPES["fast"] = dataclasses.replace(
    RECIPES["modern"],
    name="fast",
    optimizer="muon",
    muon_lr=0.02,
    qk_norm=True,
    activation="relu2",
    decay_steps=400,
)
