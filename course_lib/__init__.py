"""course_lib: the library behind the Transformers notebook course.

A folder per chapter (``course_lib.matmul``, ``course_lib.attention``, ...), shared modules at the
root. Every numerical building block of a chapter exists twice, under the same name and
signature:

* ``course_lib.<chapter>.reference``: a NumPy reference written to be read next to the equation
  it implements (float64, loops where a loop teaches);
* ``course_lib.<chapter>.accelerated``: a PyTorch implementation that is batched,
  device-agnostic, dtype-preserving and autograd-friendly.

Each chapter's ``spec.py`` lists the pairs, and one test suite (``course_lib.conformance``)
checks that they agree.
"""

from course_lib.device import describe_device, device_for, get_device
from course_lib.seed import seed_everything

__all__ = ["describe_device", "device_for", "get_device", "seed_everything"]
__version__ = "0.1.0"
