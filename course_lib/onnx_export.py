"""A course model as one ONNX file that the website runs in the reader's browser (chapters 8, 9).

The website's live views (``tools/live_pages.py``) run the course's trained models with
``onnxruntime-web``: no server, no kernel, no second implementation of the model in JavaScript.
:func:`export_graph` turns a ``torch.nn.Module`` whose ``forward`` takes token ids (1, L) into
such a file:

* ``torch.onnx.export`` traces the module (the TorchScript exporter: 3 s for chapter 8's GPT
  where the ``torch.export`` one took 54 s on the course's 2-core machine, and both give the same
  numbers to 1e-5), with the sequence length L free;
* every float32 weight that float16 holds exactly (the shipped checkpoints store float16) is
  stored as float16 and cast back to float32 inside the graph: half the bytes, the same numbers;
* ``metadata`` (what the page needs besides the weights: the kind of model, its tokenizer, its
  sizes) is written as JSON into the model's ``metadata_props`` under the key ``course``, which
  :func:`read_metadata` and the page's script read back.

>>> import torch
>>> class Double(torch.nn.Module):
...     def forward(self, tokens):
...         return tokens.float() * 2
>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "double.onnx"
>>> _ = export_graph(Double(), torch.tensor([[1, 2, 3]]), path, outputs=("twice",),
...                  dynamic={"twice": {1: "L"}}, metadata={"kind": "toy"})
>>> read_metadata(path)
{'kind': 'toy'}
"""

from __future__ import annotations

import io
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["METADATA_KEY", "OPSET", "export_graph", "read_metadata", "run"]

#: The ``metadata_props`` key under which the page finds the model's description (JSON).
METADATA_KEY = "course"
#: ONNX opset of the exported graphs (LayerNormalization needs 17; onnxruntime 1.30 runs 18).
OPSET = 18


def export_graph(
    module: Any,
    example: Any,
    path: str | os.PathLike,
    *,
    outputs: Sequence[str],
    dynamic: Mapping[str, Mapping[int, str]],
    metadata: Mapping[str, Any],
    input_name: str = "tokens",
) -> Path:
    """Write ``module`` traced on ``example`` (int64 ids (1, L)) as an ONNX file at ``path``.

    ``outputs`` names the module's outputs in order; ``dynamic`` gives each output's free axes
    (the input's axis 1 is always free, named ``L``); ``metadata`` must be JSON-serialisable.
    The file is written atomically. Returns ``path``.
    """
    import onnx
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    x = torch.as_tensor(example)
    if x.dtype != torch.int64 or x.ndim != 2 or x.shape[0] != 1:
        raise ValueError(
            f"example must be int64 token ids of shape (1, L), got {x.dtype} {tuple(x.shape)}"
        )
    try:
        meta = json.dumps(dict(metadata), ensure_ascii=False, separators=(",", ":"))
    except TypeError as err:
        raise TypeError(f"metadata must be JSON-serialisable: {err}") from None
    buffer = io.BytesIO()
    _register_symbolics()
    was_training = module.training
    module.eval()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            # the TorchScript exporter is deprecated in favour of torch.export's, which is 20x
            # slower here; the input checks that read values warn that tracing ignores them
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                (x,),
                buffer,
                dynamo=False,
                input_names=[input_name],
                output_names=list(outputs),
                dynamic_axes={input_name: {1: "L"}, **{k: dict(v) for k, v in dynamic.items()}},
                opset_version=OPSET,
            )
    finally:
        module.train(was_training)
    model = onnx.load_from_string(buffer.getvalue())
    _store_half(model)
    model.producer_name = "course_lib"
    del model.metadata_props[:]
    model.metadata_props.add(key=METADATA_KEY, value=meta)
    onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(model.SerializeToString())
    os.replace(tmp, path)
    return path


def _rms_norm(g: Any, x: Any, shape: Any, weight: Any, eps: Any) -> Any:
    """``aten::rms_norm`` in ONNX ops (opset 18 has no RMSNormalization; the TorchScript
    exporter has no rule for it): ``x / sqrt(mean(x^2 over the normalised axes) + eps) * w``."""
    import torch
    from torch.onnx import symbolic_helper as sh

    dims = sh._maybe_get_const(shape, "is")
    eps_value = sh._maybe_get_const(eps, "f")
    if sh._is_value(eps_value) or eps_value is None:
        eps_value = torch.finfo(torch.float32).eps  # rms_norm's default for float32
    axes = g.op("Constant", value_t=torch.tensor(list(range(-len(dims), 0)), dtype=torch.int64))
    square = g.op("Mul", x, x)
    mean = g.op("ReduceMean", square, axes, keepdims_i=1)
    denom = g.op("Sqrt", g.op("Add", mean, g.op("Constant", value_t=torch.tensor(eps_value))))
    y = g.op("Div", x, denom)
    return y if sh._is_none(weight) else g.op("Mul", y, weight)


def _register_symbolics() -> None:
    import torch

    torch.onnx.register_custom_op_symbolic("aten::rms_norm", _rms_norm, OPSET)


def _store_half(model: Any, min_size: int = 64) -> int:
    """Store each float32 initializer that float16 holds exactly as float16 and a Cast back to
    float32 in front of the graph; returns how many were converted."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    graph = model.graph
    casts, n = [], 0
    for init in graph.initializer:
        if init.data_type != onnx.TensorProto.FLOAT:
            continue
        a = numpy_helper.to_array(init)
        if a.size < min_size:
            continue
        h = a.astype(np.float16)
        if not np.array_equal(h.astype(np.float32), a):
            continue
        name = init.name
        half = numpy_helper.from_array(h, name=f"{name}__f16")
        init.CopyFrom(half)
        casts.append(
            onnx.helper.make_node(
                "Cast", [half.name], [name], to=onnx.TensorProto.FLOAT, name=f"{name}__cast"
            )
        )
        n += 1
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(casts + nodes)
    return n


def read_metadata(path: str | os.PathLike | bytes) -> dict[str, Any]:
    """The description :func:`export_graph` wrote into a file (or its bytes)."""
    import onnx

    data = path if isinstance(path, bytes) else Path(path).read_bytes()
    model = onnx.load_from_string(data)
    for prop in model.metadata_props:
        if prop.key == METADATA_KEY:
            return json.loads(prop.value)
    raise ValueError(
        f"this ONNX file has no {METADATA_KEY!r} metadata: it was not written by course_lib's "
        "export (course_lib.gpt.live.export or course_lib.bert.live.export)"
    )


def run(path: str | os.PathLike | bytes, ids: Sequence[int]) -> dict[str, Any]:
    """Run an exported file with onnxruntime (one thread) on ``ids``: ``{output name: array}``."""
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    data = path if isinstance(path, bytes) else Path(path).read_bytes()
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    feeds = {session.get_inputs()[0].name: np.asarray([list(ids)], dtype=np.int64)}
    return dict(zip(names, session.run(names, feeds), strict=True))
