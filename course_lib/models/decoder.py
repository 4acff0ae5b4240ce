"""Chapter 5's blocks and decoder-only model, under the name the later chapters import.

They live in :mod:`course_lib.block.module`; this module only re-exports them, so that the
dependencies run one way: ``course_lib.models`` uses ``course_lib.block``, never the reverse.

>>> from course_lib.models.decoder import DecoderOnlyModel
>>> DecoderOnlyModel.__module__
'course_lib.block.module'
"""

from course_lib.block.module import DecoderOnlyModel, TransformerBlock, encoder_layer_parameters

__all__ = ["DecoderOnlyModel", "TransformerBlock", "encoder_layer_parameters"]
