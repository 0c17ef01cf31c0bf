"""Stand-in for NVIDIA TransformerEngine, for fusertrace's capture-hook tests.

TransformerEngine needs CUDA and cannot be installed where the tests run (Debian's python3-torch,
CPU only). This package mirrors exactly the TE 2.20 interfaces that fusertrace_capture touches:
module paths, class and method names, signatures and the attributes it reads; the numerics are
plain PyTorch on the CPU and nothing is quantized.

Version switch: FT_STANDIN_TE=3410 (default) behaves like TE PR #3410's head (plans cached in a
dict keyed by (recipe type, first_op_requiring_backward, backward_override)); FT_STANDIN_TE=pre3410
behaves like the base before it (one plan, rebuilt with a recipe-state reset whenever that key
changes). See docs/fuser-model.md, "The plan cache".
"""
import os

STANDIN_BEHAVIOUR = os.environ.get("FT_STANDIN_TE", "3410")
if STANDIN_BEHAVIOUR not in ("3410", "pre3410"):
    raise ImportError(f"FT_STANDIN_TE must be 3410 or pre3410, not {STANDIN_BEHAVIOUR!r}")

__version__ = "2.20.0+standin." + STANDIN_BEHAVIOUR
