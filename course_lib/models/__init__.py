"""Models as ``torch.nn.Module``s, composed from the PyTorch side of the course.

Each module's forward pass calls the chapters' PyTorch functions (``course_lib.<chapter>.accelerated``);
the NumPy references (``course_lib.<chapter>.reference``) run the same weights for the tests.
Chapter 5's modules live in :mod:`course_lib.block.module` (chapter 5 builds on them itself);
this package re-exports them for the chapters after it, and depends only on the chapters.

>>> from course_lib.models import DecoderOnlyModel, TransformerBlock
"""

from course_lib.block.module import DecoderOnlyModel, TransformerBlock, encoder_layer_parameters

__all__ = ["DecoderOnlyModel", "TransformerBlock", "encoder_layer_parameters"]
