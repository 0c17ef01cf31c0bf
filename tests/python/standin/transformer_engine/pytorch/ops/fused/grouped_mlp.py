"""Stand-in for ops/fused/grouped_mlp.py: the two joint grouped-MLP fused ops with TE's
import-time registration. is_supported() is TE's check as far as the stand-in can make it (the
env flag NVTE_CUTEDSL_FUSED_GROUPED_MLP > 0 and a CUDA device of compute capability 10.x; the
cuDNN frontend wrappers are not importable here), cached like TE's; fuse_ops and fuse_srelu_ops are
registered with prepend=True only when it passes, as TE does. Nothing is fused on the CPU."""
from __future__ import annotations

import functools
import os

import torch

from ..fuser import register_forward_backward_fusion
from ..op import FusedOperation


class _GroupedMLP_CuTeGEMMBase(FusedOperation):
    """Joint fused op for GroupedLinear + activation + GroupedLinear."""

    @classmethod
    @functools.lru_cache(maxsize=None)
    def is_supported(cls) -> bool:
        if int(os.environ.get("NVTE_CUTEDSL_FUSED_GROUPED_MLP", "0")) <= 0:
            return False
        if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 10:
            return False
        return False  # the cuDNN frontend wrappers cannot be imported here


class GroupedMLP_CuTeGEMMGLU(_GroupedMLP_CuTeGEMMBase):
    """GroupedLinear + scaled GLU + GroupedLinear."""


class GroupedMLP_CuTeGEMMUnary(_GroupedMLP_CuTeGEMMBase):
    """GroupedLinear + scaled unary activation + GroupedLinear."""


def fuse_ops(ops, *, recipe=None, **unused):  # pylint: disable=unused-argument
    return list(ops)


def fuse_srelu_ops(ops, *, recipe=None, **unused):  # pylint: disable=unused-argument
    return list(ops)


if GroupedMLP_CuTeGEMMGLU.is_supported():
    register_forward_backward_fusion(fuse_ops, prepend=True)
if GroupedMLP_CuTeGEMMUnary.is_supported():
    register_forward_backward_fusion(fuse_srelu_ops, prepend=True)
