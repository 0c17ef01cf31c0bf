"""Stand-in for ops/fused/forward_linear_scale_add.py: the class and its registered function under TE's names
(Linear + constant scale + in-place add), so that the capture records TE's registry as TE has it. The stand-in runs no fused
kernels: its function leaves the ops unfused."""
from __future__ import annotations

from ..op import FusedOperation


class ForwardLinearScaleAdd(FusedOperation):
    """Linear + constant scale + in-place add (not fused by the stand-in)."""

    @staticmethod
    def fuse_forward_ops(ops, **unused):  # pylint: disable=unused-argument
        return list(ops)
