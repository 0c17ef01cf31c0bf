"""Stand-in basic ops with TE 2.20's constructor signatures and attribute names.

Only the attributes TE's fusion gates read (and the capture hook records) are mirrored; the math
is a plain, unquantized PyTorch version of each op, enough for a real training loop.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import torch
import torch.nn.functional as F

from ..op import BasicOperation


def _dtype(dtype):
    return torch.get_default_dtype() if dtype is None else dtype


class Identity(BasicOperation):
    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return input_


class ConstantScale(BasicOperation):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return input_ * self.scale


class Dropout(BasicOperation):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.dropout_probability: float = p

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return F.dropout(input_, self.dropout_probability, self.training)


def _group_size(group) -> int:
    """torch.distributed.get_world_size(group), 1 when torch.distributed is not initialized (TE
    itself requires it for the collectives)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(group)
    return 1


class AllGather(BasicOperation):
    """Gather along the first dim; one process: identity."""

    def __init__(self, process_group=None) -> None:
        super().__init__()
        self.process_group = process_group
        self.process_group_size: int = _group_size(process_group)

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return input_


class ReduceScatter(BasicOperation):
    """Reduce and scatter along the first dim; one process: identity."""

    def __init__(self, process_group=None) -> None:
        super().__init__()
        self.process_group = process_group
        self.process_group_size: int = _group_size(process_group)

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return input_


class AllReduce(BasicOperation):
    """Sum over processes; TE asks for the group's size at run time (no attribute)."""

    def __init__(self, process_group=None, reduce_in_backward: bool = True) -> None:
        super().__init__()
        self.process_group = process_group
        self._reduce_in_backward: bool = reduce_in_backward

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return input_


class Bias(BasicOperation):
    def __init__(self, size: int, *, device=None, dtype=None, tensor_parallel: bool = False,
                 tensor_parallel_group=None) -> None:
        super().__init__()
        self._size = size
        self.tensor_parallel: bool = tensor_parallel
        self.tensor_parallel_group = tensor_parallel_group
        self.tensor_parallel_size: int = 1
        self.local_size: int = size
        self.bias = torch.nn.Parameter(torch.zeros(size, device=device, dtype=_dtype(dtype)))

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return input_ + self.bias


class BasicLinear(BasicOperation):
    def __init__(self, in_features: int, out_features: int, *, device=None, dtype=None,
                 tensor_parallel_mode: Optional[str] = None, tensor_parallel_group=None,
                 sequence_parallel: bool = False, rng_state_tracker_function=None,
                 accumulate_into_main_grad: bool = False,
                 userbuffers_options: Optional[dict[str, Any]] = None) -> None:
        super().__init__()
        self.in_features: int = in_features
        self.out_features: int = out_features
        self.tensor_parallel_mode: Optional[str] = tensor_parallel_mode
        self.tensor_parallel_group = tensor_parallel_group
        self.tensor_parallel_size: int = 1
        self.sequence_parallel: bool = sequence_parallel
        self._with_quantized_weight: bool = False
        self._accumulate_into_main_grad: bool = accumulate_into_main_grad
        self._userbuffers_options: Optional[dict[str, Any]] = userbuffers_options
        weight = torch.empty(out_features, in_features, device=device, dtype=_dtype(dtype))
        torch.nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
        self.weight = torch.nn.Parameter(weight)

    def num_quantizers(self, mode: str) -> int:
        return 2 if mode == "forward" else 1

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return input_ @ self.weight.t()


class GroupedLinear(BasicOperation):
    """y_g = x_g W_g^T (+ b_g) over row splits; extra inputs: split sizes (and scales)."""

    num_extra_inputs: int = 1

    def __init__(self, num_groups: int, in_features: int, out_features: int, *,
                 bias: bool = True, device=None, dtype=None, rng_state_tracker_function=None,
                 accumulate_into_main_grad: bool = False, single_grouped_weight: bool = False,
                 single_grouped_bias: bool = False, delay_wgrad_compute: bool = False,
                 scale_bias: bool = False) -> None:
        self._scale_bias: bool = scale_bias and bias
        if self._scale_bias:
            self.num_extra_inputs = 2
        super().__init__()
        self.num_groups: int = num_groups
        self.in_features: int = in_features
        self.out_features: int = out_features
        self.single_grouped_weight: bool = single_grouped_weight
        self.single_grouped_bias: bool = single_grouped_bias
        self.use_bias: bool = bias
        self._with_quantized_weight: bool = False
        self._accumulate_into_main_grad: bool = accumulate_into_main_grad
        dtype = _dtype(dtype)
        for g in range(num_groups):
            w = torch.empty(out_features, in_features, device=device, dtype=dtype)
            torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))
            self.register_parameter(f"weight{g}", torch.nn.Parameter(w))
        for g in range(num_groups):
            b = None
            if bias:
                b = torch.nn.Parameter(torch.zeros(out_features, device=device, dtype=dtype))
            self.register_parameter(f"bias{g}", b)

    def has_bias(self) -> bool:
        return self.use_bias

    def num_quantizers(self, mode: str) -> int:
        return 2 * self.num_groups if mode == "forward" else self.num_groups

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        splits = extra_inputs[0].tolist()
        scales = extra_inputs[1] if self._scale_bias else None
        xs = torch.split(input_, splits)
        ss = torch.split(scales, splits) if scales is not None else [None] * len(xs)
        ys = []
        for g, (x, s) in enumerate(zip(xs, ss)):
            y = x @ getattr(self, f"weight{g}").t()
            if self.use_bias:
                b = getattr(self, f"bias{g}")
                y = y + (b * s[:, None] if s is not None else b)
            ys.append(y)
        return torch.cat(ys) if ys else input_.new_zeros(0, self.out_features)


class _ActivationOperation(BasicOperation):
    def __init__(self, *, cache_quantized_input: bool = False) -> None:
        super().__init__()
        self.cache_quantized_input: bool = cache_quantized_input


class ReLU(_ActivationOperation):
    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return F.relu(input_)


class GELU(_ActivationOperation):
    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return F.gelu(input_)


def _halves(x: torch.Tensor, interleave: Optional[int]):
    """(act half, gate half) of h; with interleave size k, blocks of k alternate."""
    if not interleave:
        return x.chunk(2, dim=-1)
    shape = x.shape[:-1] + (x.shape[-1] // (2 * interleave), 2, interleave)
    x = x.reshape(shape)
    return (x[..., 0, :].reshape(x.shape[:-3] + (-1,)),
            x[..., 1, :].reshape(x.shape[:-3] + (-1,)))


class SwiGLU(BasicOperation):
    def __init__(self, *, cache_quantized_input: bool = False,
                 glu_interleave_size: Optional[int] = None) -> None:
        super().__init__()
        self.cache_quantized_input: bool = cache_quantized_input
        self.glu_interleave_size: Optional[int] = glu_interleave_size

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        a, b = _halves(input_, self.glu_interleave_size)
        return F.silu(a) * b


class ClampedSwiGLU(BasicOperation):
    def __init__(self, *, limit: float = 7.0, alpha: float = 1.702,
                 glu_linear_offset: float = 1.0, cache_quantized_input: bool = False,
                 glu_interleave_size: Optional[int] = None) -> None:
        super().__init__()
        self.limit: float = limit
        self.alpha: float = alpha
        self.glu_linear_offset: float = glu_linear_offset
        self.cache_quantized_input: bool = cache_quantized_input
        self.glu_interleave_size: Optional[int] = glu_interleave_size

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        a, b = _halves(input_, self.glu_interleave_size)
        a = a.clamp(max=self.limit)
        b = b.clamp(-self.limit, self.limit) + self.glu_linear_offset
        return a * torch.sigmoid(self.alpha * a) * b


class _ScaledGLU(BasicOperation):
    num_extra_inputs: int = 1

    def __init__(self, glu_interleave_size: Optional[int] = None, *,
                 activation_recompute_in_mlp: bool = False) -> None:
        super().__init__()
        self.glu_interleave_size: Optional[int] = glu_interleave_size
        self.activation_recompute_in_mlp: bool = activation_recompute_in_mlp

    def _act(self, a, b):
        return F.silu(a) * b

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        a, b = _halves(input_, self.glu_interleave_size)
        return self._act(a, b) * extra_inputs[0][:, None]


class ScaledSwiGLU(_ScaledGLU):
    pass


class ScaledClampedQGeGLU(_ScaledGLU):
    def __init__(self, glu_interleave_size: Optional[int] = None, *,
                 activation_recompute_in_mlp: bool = False, limit: float = 7.0,
                 alpha: float = 1.702, glu_linear_offset: float = 1.0) -> None:
        super().__init__(glu_interleave_size,
                         activation_recompute_in_mlp=activation_recompute_in_mlp)
        self._clamped = ClampedSwiGLU(limit=limit, alpha=alpha,
                                      glu_linear_offset=glu_linear_offset)

    def _act(self, a, b):
        c = self._clamped
        a = a.clamp(max=c.limit)
        return a * torch.sigmoid(c.alpha * a) * (b.clamp(-c.limit, c.limit) + c.glu_linear_offset)


class ScaledSReLU(BasicOperation):
    num_extra_inputs: int = 1

    def __init__(self, *, activation_recompute_in_mlp: bool = False) -> None:
        super().__init__()
        self.activation_recompute_in_mlp: bool = activation_recompute_in_mlp

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return F.relu(input_).square() * extra_inputs[0][:, None]


class AddExtraInput(BasicOperation):
    num_extra_inputs: int = 1

    def __init__(self, *, in_place: bool = False) -> None:
        super().__init__()
        self._in_place = in_place

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return input_ + extra_inputs[0]


class MakeExtraOutput(BasicOperation):
    """Declared for attribute capture; extra outputs are not run by the stand-in fuser."""

    num_extra_outputs: int = 1

    def __init__(self, *, in_place: bool = False) -> None:
        super().__init__()
        self._in_place: bool = in_place


class LayerNorm(BasicOperation):
    def __init__(self, normalized_shape, *, eps: float = 1e-5, device=None, dtype=None,
                 zero_centered_gamma: bool = False, sm_margin: int = 0) -> None:
        super().__init__()
        n = normalized_shape if isinstance(normalized_shape, int) else normalized_shape[-1]
        self.eps: float = eps
        self.zero_centered_gamma: bool = zero_centered_gamma
        self.weight = torch.nn.Parameter(torch.ones(n, device=device, dtype=_dtype(dtype)))
        self.bias = torch.nn.Parameter(torch.zeros(n, device=device, dtype=_dtype(dtype)))

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        return F.layer_norm(input_, self.weight.shape, self.weight, self.bias, self.eps)


class RMSNorm(BasicOperation):
    def __init__(self, normalized_shape, *, eps: float = 1e-5, device=None, dtype=None,
                 zero_centered_gamma: bool = False, sm_margin: int = 0) -> None:
        super().__init__()
        n = normalized_shape if isinstance(normalized_shape, int) else normalized_shape[-1]
        self.eps: float = eps
        self.zero_centered_gamma: bool = zero_centered_gamma
        self.weight = torch.nn.Parameter(torch.ones(n, device=device, dtype=_dtype(dtype)))

    def op_forward(self, ctx, input_, extra_inputs, **kwargs):
        rms = input_.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
        return input_ * rms * self.weight
