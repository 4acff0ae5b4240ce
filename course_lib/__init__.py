"""course_lib: the library behind the Transformers notebook course.

Every numerical building block exists twice, under the same name and signature:

* ``course_lib.reference.<topic>``: a NumPy reference written to be read next to the equation it
  implements (float64, loops where a loop teaches);
* ``course_lib.accelerated.<topic>``: a PyTorch implementation that is batched, device-agnostic,
  dtype-preserving and autograd-friendly.

``course_lib.conformance`` registers each pair so that one test suite checks they agree.
"""

from course_lib.device import describe_device, get_device
from course_lib.seed import seed_everything

__all__ = ["describe_device", "get_device", "seed_everything"]
__version__ = "0.1.0"
