"""Stand-in for transformer_engine.pytorch.ops."""
from .basic import (
    AddExtraInput, AllGather, AllReduce, BasicLinear, Bias, ClampedSwiGLU, ConstantScale, Dropout,
    GELU, GroupedLinear, Identity, LayerNorm, MakeExtraOutput, ReduceScatter, ReLU, RMSNorm,
    ScaledClampedQGeGLU, ScaledSReLU, ScaledSwiGLU, SwiGLU,
)
from .fuser import (OperationFuser, register_backward_fusion, register_forward_backward_fusion,
                    register_forward_fusion)
from .op import BasicOperation, FusedOperation, FusibleOperation, OperationContext
from .sequential import Sequential
from . import fused  # registers the stand-in fusions, as TE's ops/fused/__init__.py does
