"""BERT as ``torch.nn.Module``s: the encoder with its MLM head, and the three encoder-task heads.

:class:`Bert` holds the parameters of :mod:`course_lib.bert.config` as ``nn.Parameter``s and runs
the cores of :mod:`course_lib.bert.accelerated` (what the conformance suite checks against the
NumPy reference). The task heads are the ones of the handwritten notes' "encoder-only
Transformer" picture, each a small layer on top of the encoder's hidden states H (B, L, d):

* :class:`SequenceClassifier`: the ``[CLS]`` vector through BERT's pooler ``tanh(W h + b)``, then
  a linear layer to C classes; loss cross-entropy over sequences.
* :class:`SpanPredictor`: a linear layer d -> 2 gives a start and an end score per position;
  loss the mean of the two cross-entropies over positions (extractive question answering).
* :class:`TokenTagger`: a linear layer d -> C per position; loss cross-entropy over real tokens
  (sequence labelling, e.g. BIO entity tags).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.bert.accelerated import _inputs, encode, maps, mlm_head, mlm_loss
from course_lib.bert.config import BertConfig, init_parameters
from course_lib.bert.inputs import IGNORE, check_labels
from course_lib.checks import check_int, check_real

__all__ = ["Bert", "SequenceClassifier", "SpanPredictor", "TokenTagger"]


class Bert(nn.Module):
    """The encoder and its tied MLM head; ``forward`` returns the hidden states (B, L, d).

    >>> from course_lib.bert.config import bert_block
    >>> m = Bert(BertConfig(vocab_size=9, max_len=6, n_layers=1, block=bert_block(8, 2)))
    >>> m(torch.tensor([[1, 2, 3]])).shape, m.mlm(torch.tensor([[1, 2, 3]])).shape
    (torch.Size([1, 3, 8]), torch.Size([1, 3, 9]))
    """

    def __init__(
        self, config: BertConfig, params: Any = None, seed: int = 0, dropout: float = 0.0,
        dtype: torch.dtype = torch.float32,
    ):  # fmt: skip
        super().__init__()
        if not isinstance(config, BertConfig):
            raise TypeError(f"config must be a BertConfig, got {type(config).__name__}")
        self.config = config
        self.p_drop = check_real(dropout, "dropout", low=0.0, high=1.0)
        p = init_parameters(config, seed) if params is None else params
        t = lambda v: nn.Parameter(torch.as_tensor(np.asarray(v), dtype=dtype).clone())  # noqa: E731
        self.top = nn.ParameterDict({k: t(v) for k, v in p.items() if k != "blocks"})
        self.blocks = nn.ModuleList(
            nn.ParameterDict({k: t(v) for k, v in blk.items()}) for blk in p["blocks"]
        )

    def parameter_dict(self) -> dict[str, Any]:
        """The parameters in the dict form the functions of the chapter take (no copies)."""
        return {**dict(self.top), "blocks": [dict(b) for b in self.blocks]}

    def numpy_parameters(self) -> dict[str, Any]:
        """A float64 NumPy copy, for :mod:`course_lib.bert.reference`."""
        n = lambda v: v.detach().cpu().double().numpy()  # noqa: E731
        return {
            **{k: n(v) for k, v in self.top.items()},
            "blocks": [{k: n(v) for k, v in b.items()} for b in self.blocks],
        }

    def _drop(self):
        if self.training and self.p_drop > 0:
            return lambda z: F.dropout(z, self.p_drop, True)
        return None

    def forward(self, tokens, segments=None, attention_mask=None) -> torch.Tensor:
        p = self.parameter_dict()
        t, s, m = _inputs(tokens, segments, attention_mask, p, self.config)
        return encode(t, s, m, p, self.config, self._drop())  # (B, L, d)

    def mlm(self, tokens, segments=None, attention_mask=None) -> torch.Tensor:
        """Masked-LM logits (B, L, V)."""
        return mlm_head(self(tokens, segments, attention_mask), self.parameter_dict(), self.config)

    def mlm_loss(self, tokens, labels, segments=None, attention_mask=None) -> torch.Tensor:
        """The masked-LM loss: ``masked_lm_loss(self.mlm(tokens, ...), labels)``, computed faster.

        ``labels`` (B, L) hold the original token at the chosen positions and ``IGNORE`` elsewhere
        (:func:`course_lib.bert.masking.mask_tokens`). The head runs only at the labelled
        positions (:func:`course_lib.bert.accelerated.mlm_loss`): the same value and gradients as
        the full logits, without the (B, L, V) logits that the loss would mostly skip.
        """
        p = self.parameter_dict()
        t, s, m = _inputs(tokens, segments, attention_mask, p, self.config)
        if not isinstance(labels, torch.Tensor):
            labels = torch.as_tensor(labels, device=t.device)
        y = check_labels(labels, (*t.shape, self.config.vocab_size))
        if y.device != t.device:
            raise ValueError(f"labels are on {y.device} but the tokens are on {t.device}")
        return mlm_loss(encode(t, s, m, p, self.config, self._drop()), y, p, self.config)

    def attention_maps(self, tokens, segments=None, attention_mask=None) -> torch.Tensor:
        """Every head's attention weights in every block (B, R, h, L, L) (no dropout)."""
        p = self.parameter_dict()
        t, s, m = _inputs(tokens, segments, attention_mask, p, self.config)
        return maps(t, s, m, p, self.config)


def _ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    labels = check_labels(torch.as_tensor(labels, device=logits.device), tuple(logits.shape))
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1).long(), ignore_index=IGNORE
    )


class SequenceClassifier(nn.Module):
    """``[CLS]`` -> pooler ``tanh(W h_0 + b)`` -> linear -> C class scores (B, C)."""

    def __init__(self, bert: Bert, n_classes: int, seed: int = 0):
        super().__init__()
        check_int(n_classes, "n_classes", low=2)
        d = bert.config.d_model
        g = torch.Generator().manual_seed(seed)
        self.bert = bert
        self.pooler = nn.Linear(d, d)
        self.out = nn.Linear(d, n_classes)
        for lin in (self.pooler, self.out):
            nn.init.normal_(lin.weight, std=0.02, generator=g)
            nn.init.zeros_(lin.bias)

    def forward(self, tokens, segments=None, attention_mask=None) -> torch.Tensor:
        h = self.bert(tokens, segments, attention_mask)  # (B, L, d)
        return self.out(torch.tanh(self.pooler(h[..., 0, :])))  # (B, C): read at [CLS]

    def loss(self, logits: torch.Tensor, labels) -> torch.Tensor:
        return _ce(logits[..., None, :], torch.as_tensor(labels)[..., None])


class SpanPredictor(nn.Module):
    """A start and an end score per position, (B, L) each; padding gets ``-inf``."""

    def __init__(self, bert: Bert, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.bert = bert
        self.qa = nn.Linear(bert.config.d_model, 2)
        nn.init.normal_(self.qa.weight, std=0.02, generator=g)
        nn.init.zeros_(self.qa.bias)

    def forward(
        self, tokens, segments=None, attention_mask=None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.qa(self.bert(tokens, segments, attention_mask))  # (B, L, 2)
        if attention_mask is not None:
            z = z.masked_fill(~torch.as_tensor(attention_mask)[..., None], float("-inf"))
        return z[..., 0], z[..., 1]  # (B, L), (B, L)

    def loss(self, start_logits, end_logits, starts, ends) -> torch.Tensor:
        """The mean of the start and the end cross-entropies (as Hugging Face's BertForQuestionAnswering)."""
        return (_ce(start_logits[:, None], torch.as_tensor(starts)[:, None])
                + _ce(end_logits[:, None], torch.as_tensor(ends)[:, None])) / 2  # fmt: skip


class TokenTagger(nn.Module):
    """One of C tags per position: (B, L, C); labels ``IGNORE`` on [CLS], [SEP] and padding."""

    def __init__(self, bert: Bert, n_tags: int, seed: int = 0):
        super().__init__()
        check_int(n_tags, "n_tags", low=2)
        g = torch.Generator().manual_seed(seed)
        self.bert = bert
        self.out = nn.Linear(bert.config.d_model, n_tags)
        nn.init.normal_(self.out.weight, std=0.02, generator=g)
        nn.init.zeros_(self.out.bias)

    def forward(self, tokens, segments=None, attention_mask=None) -> torch.Tensor:
        return self.out(self.bert(tokens, segments, attention_mask))  # (B, L, C)

    def loss(self, logits, labels) -> torch.Tensor:
        return _ce(logits, labels)
