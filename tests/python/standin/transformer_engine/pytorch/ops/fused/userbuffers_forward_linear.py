"""Stand-in for ops/fused/userbuffers_forward_linear.py: the class and its registered function under TE's names
(Linear forward with Userbuffers communication), so that the capture records TE's registry as TE has it. The stand-in runs no fused
kernels: its function leaves the ops unfused."""
from __future__ import annotations

from ..op import FusedOperation


class UserbuffersForwardLinear(FusedOperation):
    """Linear forward with Userbuffers communication (not fused by the stand-in)."""

    @staticmethod
    def fuse_forward_ops(ops, **unused):  # pylint: disable=unused-argument
        return list(ops)
