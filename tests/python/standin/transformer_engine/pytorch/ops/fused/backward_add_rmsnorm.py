"""Stand-in for ops/fused/backward_add_rmsnorm.py: the class and its registered function under TE's names
(Backward of extra output + RMSNorm), so that the capture records TE's registry as TE has it. The stand-in runs no fused
kernels: its function leaves the ops unfused."""
from __future__ import annotations

from ..op import FusedOperation


class BackwardAddRMSNorm(FusedOperation):
    """Backward of extra output + RMSNorm (not fused by the stand-in)."""

    @staticmethod
    def fuse_backward_ops(ops, **unused):  # pylint: disable=unused-argument
        return list(ops)
