"""Chapter 11: Long sequences: Transformer-XL, sparse, Longformer, BigBird, FlashAttention.

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other (the
patterns as masks, sliding-window, block-sparse and blockwise "flash" attention, Transformer-XL's
relative shift and four-term score); ``spec`` lists them for the conformance suite; ``checks``
holds their input checks; ``transformer_xl`` the segment recurrence (a small PyTorch model);
``longformer`` Longformer's attention layer (checked against Hugging Face); ``reach`` how far
information travels through stacked sparse layers; ``task`` associative recall at a distance,
trained under each pattern; ``exercises`` the checkers; ``widget`` the pattern explorer. Nothing is imported eagerly: ``from course_lib.long_sequences import reference``.
"""
