"""Chapter 7: tokenisation with byte-pair encoding.

From the ten-line listing of the notes (``toy``, ``readable``) to a fast byte-level trainer
(``train``), GPT-2's tokenizer (``tokenizer``, ``gpt2_files``), the corpus the chapter and
chapter 8 use (``corpus``), the alternatives WordPiece and Unigram (``alternatives``), the
measurements behind the plots and the widget (``analysis``, ``widget``) and the exercises.
BPE is a text algorithm: it exists once, in plain Python, with no NumPy/PyTorch mirror.
Nothing is imported eagerly: ``from course_lib.bpe import train``.
"""
