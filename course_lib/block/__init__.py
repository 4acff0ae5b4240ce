"""Chapter 5: the Transformer block (LayerNorm, RMSNorm, feed-forward and GLU, post-LN, pre-LN and parallel
blocks, the decoder stack, parameter counts and the GPT-3 table, and the encoder-decoder Transformer with
cross-attention in ``encoder_decoder``).

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other; ``spec``
lists them for the conformance suite; ``exercises`` holds the checkers; ``widget`` the notebook's
interactive front-ends. Nothing is imported eagerly: ``from course_lib.block import reference``.
"""
