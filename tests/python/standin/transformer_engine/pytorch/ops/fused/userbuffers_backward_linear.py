"""Stand-in for ops/fused/userbuffers_backward_linear.py: the class and its registered function under TE's names
(Linear backward with Userbuffers communication), so that the capture records TE's registry as TE has it. The stand-in runs no fused
kernels: its function leaves the ops unfused."""
from __future__ import annotations

from ..op import FusedOperation


class UserbuffersBackwardLinear(FusedOperation):
    """Linear backward with Userbuffers communication (not fused by the stand-in)."""

    @staticmethod
    def fuse_backward_ops(ops, **unused):  # pylint: disable=unused-argument
        return list(ops)
