"""An example recipe in Python: ``./course race recipes/example.py``.

The file is read, never run: only the literal ``RECIPE = {...}`` below counts (the fields of
course_lib.gpt.config.Recipe, on top of the course's recipe named by ``base``). This one tries
the course's ``fast`` recipe with a larger Muon learning rate and a shorter warm-up.
"""

RECIPE = {
    "name": "example",
    "base": "fast",
    "muon_lr": 0.03,
    "warmup_steps": 30,
}
