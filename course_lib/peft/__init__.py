"""Chapter 13: Parameter-efficient fine-tuning: LoRA, QLoRA, prompt and prefix tuning.

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other
(``lora_weight``, ``lora_linear``); ``spec`` lists them for the conformance suite; ``layer`` is the
LoRA layer (``LoRALinear``, merge and unmerge); ``model`` the adapted GPT-2-style decoder (LoRA,
QLoRA, prompt and prefix tuning, full fine-tuning); ``qlora`` NF4 weights with double
quantisation; ``hf`` the same weights in Hugging Face's GPT-2 with ``peft`` (parity); ``counting``
trainable parameters and memory; ``task`` the generated copy/reverse task and the training loops;
``as_printed`` the notes' unscaled update; ``exercises`` the checkers; ``widget`` the explorer.
Nothing is imported eagerly: ``from course_lib.peft import reference``.
"""
