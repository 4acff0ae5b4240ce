"""Chapter 13: Parameter-efficient fine-tuning: LoRA, QLoRA, DoRA (part 1); prompt and prefix
tuning (part 2).

Modules: ``reference`` (NumPy, float64) and ``accelerated`` (PyTorch) mirror each other
(``lora_weight``, ``lora_linear``, ``dora_weight``, ``prefix_attention``); ``spec`` lists them for the conformance
suite; ``layer`` is the LoRA layer (``LoRALinear``, merge and unmerge); ``model`` the adapted
GPT-2-style decoder (LoRA, QLoRA, prompt tuning, prefix tuning with or without the MLP
reparameterisation, full fine-tuning); ``qlora`` NF4 weights with double quantisation; ``hf`` the
same weights in Hugging Face's GPT-2 with ``peft`` (parity); ``counting`` trainable parameters,
memory and QLoRA's budget; ``task`` the generated reverse/copy tasks and the training loops;
``compare`` and ``sweep`` part 1's shipped experiments (one run per method; the rank sweep with
alpha fixed); ``steer`` prompt and prefix tuning of chapter 8's GPT started from text, and the
secret-code task; ``elicit`` part 2's shipped study (the code and reversal, learning-rate grids);
``spectrum`` the top-r energy of an update; ``as_printed`` the notes' unscaled update;
``exercises`` the checkers; ``widget``, ``explorer`` and ``explorer_prompts`` the explorers. Nothing is imported eagerly: ``from course_lib.peft import reference``.
"""
