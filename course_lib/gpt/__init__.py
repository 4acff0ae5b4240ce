"""Chapter 8: GPT: generative pre-training and fine-tuning.

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other; ``spec``
lists them for the conformance suite; ``config`` (model and training recipes), ``params``
(parameter layouts), ``model`` (the ``nn.Module``), ``hf`` (parity with transformers' GPT-2),
``data`` (tokenisers and batches), ``train`` (trainer, checkpoints, command line, DDP),
``pretrained`` (the shipped checkpoint), ``sampling`` (generation, KV cache), ``finetune`` and
``datasets`` (eqs. 22-24 on State of the Union addresses), ``exercises`` (the checkers) and
``widget`` (the next-token explorer). Nothing is imported eagerly:
``from course_lib.gpt import reference``.
"""
