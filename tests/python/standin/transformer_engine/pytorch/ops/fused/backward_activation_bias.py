"""Stand-in for ops/fused/backward_activation_bias.py: the class and its registered function under TE's names
(Backward of bias + activation), so that the capture records TE's registry as TE has it. The stand-in runs no fused
kernels: its function leaves the ops unfused."""
from __future__ import annotations

from ..op import FusedOperation


class BackwardActivationBias(FusedOperation):
    """Backward of bias + activation (not fused by the stand-in)."""

    @staticmethod
    def fuse_backward_ops(ops, **unused):  # pylint: disable=unused-argument
        return list(ops)
