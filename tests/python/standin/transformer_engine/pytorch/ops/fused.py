"""Stand-in fusions: one forward fusion (BasicLinear + Bias), registered at import like TE's
ops/fused/__init__.py, so that plans contain a FusedOperation and _map_to_basic_ops is used."""
from __future__ import annotations

from .basic import BasicLinear, Bias
from .fuser import register_forward_fusion
from .op import FusedOperation


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


register_forward_fusion(ForwardLinearBiasActivation.fuse_forward_ops)
