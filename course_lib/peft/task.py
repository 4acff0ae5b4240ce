"""The chapter's generated task: pre-train a small GPT to copy digits, fine-tune it to reverse them.

Everything here is generated from a seed; nothing is downloaded. Tokens are the digits 0-9,
``=`` (10) and ``;`` (11). An example is ``d1 .. dn = a1 .. an ;``:

* **pre-training** (:func:`copy_stream`): the answer copies the digits; examples are packed end to
  end into windows of the model's context, so every position is trained (a language model's
  pre-training on a stream of documents);
* **fine-tuning** (:func:`reverse_examples`): the answer is the digits reversed, one example per
  sequence; the loss and the accuracy count only the answer digits.

The pre-trained model copies; the fine-tuning question is how cheaply each method teaches it to
reverse. :func:`pretrain` and :func:`fine_tune` are the two training loops (Adam, fixed seeds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from course_lib.block.config import BlockConfig, DecoderConfig
from course_lib.checks import check_int, check_real
from course_lib.models.decoder import DecoderOnlyModel

__all__ = [
    "EQUALS",
    "SEMI",
    "Curve",
    "accuracy",
    "answer_loss",
    "base_config",
    "copy_examples",
    "copy_stream",
    "fine_tune",
    "measure_step",
    "pretrain",
    "reverse_examples",
]

EQUALS, SEMI = 10, 11
VOCAB = 12
N_DIGITS = 5


def base_config(d_model: int = 64, n_layers: int = 2, context_length: int = 32) -> DecoderConfig:
    """The chapter's GPT-2-style model: pre-LN, GELU (tanh), learned positions, tied embeddings."""
    block = BlockConfig(
        d_model=d_model, n_heads=4, d_ff=4 * d_model, norm_position="pre", activation="gelu_tanh"
    )
    return DecoderConfig(VOCAB, context_length, n_layers, block)


def _examples(n: int, gen: torch.Generator, reverse: bool, n_digits: int) -> torch.Tensor:
    digits = torch.randint(0, 10, (n, n_digits), generator=gen)
    answer = digits.flip(-1) if reverse else digits
    eq = torch.full((n, 1), EQUALS)
    semi = torch.full((n, 1), SEMI)
    return torch.cat([digits, eq, answer, semi], dim=1)  # (n, 2 n_digits + 2)


def copy_stream(n: int, length: int, seed: int, n_digits: int = N_DIGITS) -> torch.Tensor:
    """``n`` windows of ``length`` tokens cut at random offsets from a stream of copy examples.

    >>> copy_stream(1, 12, seed=0, n_digits=2)
    tensor([[ 9, 10,  4,  9, 11,  3,  0, 10,  3,  0, 11,  3]])
    """
    n, length = check_int(n, "n", low=1), check_int(length, "length", low=1)
    gen = torch.Generator().manual_seed(seed)
    per = 2 * n_digits + 2
    k = length // per + 2
    stream = _examples(n * k, gen, False, n_digits).view(n, k * per)  # (n, k * per)
    start = torch.randint(0, per, (n,), generator=gen)
    idx = start[:, None] + torch.arange(length)  # (n, length)
    return stream.gather(1, idx)


def copy_examples(n: int, seed: int, n_digits: int = N_DIGITS) -> torch.Tensor:
    """``n`` pre-training examples ``d1 .. dn = d1 .. dn ;``, one per row (n, 2 n_digits + 2).

    >>> copy_examples(1, seed=0, n_digits=3)
    tensor([[ 4,  9,  3, 10,  4,  9,  3, 11]])
    """
    n = check_int(n, "n", low=1)
    return _examples(n, torch.Generator().manual_seed(seed), False, n_digits)


def reverse_examples(n: int, seed: int, n_digits: int = N_DIGITS) -> torch.Tensor:
    """``n`` fine-tuning examples ``d1 .. dn = dn .. d1 ;`` (n, 2 n_digits + 2).

    >>> reverse_examples(1, seed=0, n_digits=3)
    tensor([[ 4,  9,  3, 10,  3,  9,  4, 11]])
    """
    n = check_int(n, "n", low=1)
    return _examples(n, torch.Generator().manual_seed(seed), True, n_digits)


def _answer_slice(tokens: torch.Tensor) -> slice:
    n_digits = (tokens.shape[-1] - 2) // 2
    return slice(n_digits, 2 * n_digits)  # positions whose next token is an answer digit


def answer_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the answer digits given everything before them."""
    s = _answer_slice(tokens)
    logits = model(tokens[:, :-1])[:, s]  # (B, n_digits, V)
    targets = tokens[:, 1:][:, s]  # (B, n_digits)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@torch.no_grad()
def accuracy(model: nn.Module, tokens: torch.Tensor) -> float:
    """The fraction of examples whose every answer digit is the model's top prediction.

    Teacher-forced, which here equals greedy decoding: if every top prediction is right, the
    greedy answer follows the same path.
    """
    was_training = model.training
    model.eval()
    s = _answer_slice(tokens)
    pred = model(tokens[:, :-1])[:, s].argmax(-1)  # (B, n_digits)
    model.train(was_training)
    return (pred == tokens[:, 1:][:, s]).all(dim=1).float().mean().item()


@dataclass
class Curve:
    """What a training run recorded: steps, training losses, evaluation accuracies."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)


def pretrain(
    config: DecoderConfig | None = None,
    steps: int = 400,
    batch: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
) -> tuple[DecoderOnlyModel, list[float]]:
    """Pre-train the base model on the copy stream; returns (model, losses)."""
    config = config or base_config()
    steps = check_int(steps, "steps", low=1)
    torch.manual_seed(seed)
    model = DecoderOnlyModel(config, generator=torch.Generator().manual_seed(seed))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * (1 - s / steps)
    )
    losses = []
    for step in range(steps):
        x = copy_stream(batch, config.context_length + 1, seed=10_000 * seed + step)
        loss = model.loss(x[:, :-1], x[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return model.eval(), losses


def fine_tune(
    model: nn.Module,
    steps: int = 150,
    batch: int = 32,
    lr: float = 3e-3,
    seed: int = 1,
    eval_every: int = 25,
    eval_examples: int = 256,
    callback: Callable[[int], None] | None = None,
) -> Curve:
    """Adam on the trainable parameters of ``model`` for the reversal task; returns the curve."""
    steps = check_int(steps, "steps", low=1)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    opt = torch.optim.Adam(params, lr=lr)
    held_out = reverse_examples(eval_examples, seed=-1 % 2**31)
    curve = Curve([0], [float("nan")], [accuracy(model, held_out)])
    model.train()
    for step in range(1, steps + 1):
        loss = answer_loss(model, reverse_examples(batch, seed=1_000_000 * seed + step))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % eval_every == 0 or step == steps:
            curve.steps.append(step)
            curve.loss.append(loss.item())
            curve.accuracy.append(accuracy(model, held_out))
        if callback is not None:
            callback(step)
    model.eval()
    return curve


def measure_step(model: nn.Module, batch: int = 32, seed: int = 7) -> dict[str, float]:
    """Time and memory of one Adam step on a copy of ``model`` (the model itself is not changed).

    Returns seconds per step (best of three, :func:`course_lib.measure.best_time`), the bytes of
    frozen weights, trained weights, gradients and optimiser state after the step
    (:func:`course_lib.peft.counting.measured_memory`), and the peak bytes of the tensors a step
    creates (:func:`course_lib.measure.peak_tensor_memory`: activations and temporaries).
    """
    import copy

    from course_lib.measure import best_time, peak_tensor_memory
    from course_lib.peft.counting import measured_memory

    model = copy.deepcopy(model).train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-4)
    x = reverse_examples(batch, seed=seed)

    def step() -> None:
        loss = answer_loss(model, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    seconds = best_time(step, repeats=3, warmup=1)
    opt.zero_grad(set_to_none=True)
    peak = peak_tensor_memory(step)
    return {"seconds": seconds, "peak step bytes": float(peak), **measured_memory(model, opt)}
