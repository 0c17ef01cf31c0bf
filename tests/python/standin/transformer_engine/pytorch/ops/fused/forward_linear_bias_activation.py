"""Stand-in for ops/fused/forward_linear_bias_activation.py: BasicLinear + Bias run as one op (not
row tensor-parallel), so that plans contain a FusedOperation and _map_to_basic_ops is used. The
dtype gate of TE's version is left out (the stand-in computes in float32)."""
from __future__ import annotations

from ..basic import BasicLinear, Bias
from ..op import FusedOperation


class ForwardLinearBiasActivation(FusedOperation):
    """BasicLinear followed by Bias, run as one op."""

    @staticmethod
    def fuse_forward_ops(ops, *, recipe=None, **unused):  # pylint: disable=unused-argument
        out = []
        window = list(ops)
        while window:
            if (len(window) >= 2 and isinstance(window[0], BasicLinear)
                    and isinstance(window[1], Bias) and window[0].tensor_parallel_mode != "row"):
                out.append(ForwardLinearBiasActivation(window[:2]))
                window = window[2:]
            else:
                out.append(window.pop(0))
        return out

