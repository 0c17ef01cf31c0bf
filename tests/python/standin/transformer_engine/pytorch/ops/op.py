"""Stand-in for transformer_engine.pytorch.ops.op: the op base classes.

Mirrors the members OperationFuser and the capture hook use: is_fused_op, num_extra_inputs /
num_extra_outputs, the extra-tensor channel lists, reset_recipe_state(recipe=...),
pre_first_fuser_forward(), pre_fuser_forward(requires_grad=...), basic_ops of fused ops, and
op(x) building a transient OperationFuser([op]). Forward math is plain PyTorch (op_forward
receives the op's extra inputs); backward comes from PyTorch autograd (see fuser.py).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Optional

import torch


@dataclass
class OperationContext:
    """Per-op state between forward and backward."""

    requires_grad: bool = True


class FusibleOperation(torch.nn.Module, metaclass=abc.ABCMeta):
    """Tensor operation supported by the operation fuser."""

    @property
    @abc.abstractmethod
    def is_fused_op(self) -> bool:
        """Whether this op is the fusion of one or more basic ops."""

    def pre_first_fuser_forward(self) -> None:
        """Preprocessing before the first fuser forward pass."""

    def pre_fuser_forward(self, *, requires_grad: bool) -> None:
        """Preprocessing before every fuser forward pass."""


class BasicOperation(FusibleOperation, metaclass=abc.ABCMeta):
    """Single tensor operation; holds parameters and recipe state."""

    num_extra_inputs: int = 0
    num_extra_outputs: int = 0

    def __init__(self) -> None:
        super().__init__()
        self._extra_input_channels: list[Optional[str]] = [None] * self.num_extra_inputs
        self._extra_output_channels: list[Optional[str]] = [None] * self.num_extra_outputs
        self._extra_output_to_caller: list[bool] = [True] * self.num_extra_outputs
        self._extra_tensor_channels_locked: bool = False
        self._fp8_metas: Optional[dict[str, Any]] = None
        self._quantizers: Optional[dict[str, list]] = None
        # Stand-in bookkeeping (not in TE): how often TE-visible hooks ran.
        self.n_reset_recipe_state = 0
        self.n_pre_first_fuser_forward = 0

    @property
    def is_fused_op(self) -> bool:
        return False

    def _lock_extra_tensor_channels(self) -> None:
        self._extra_tensor_channels_locked = True

    def num_quantizers(self, mode: str) -> int:  # pylint: disable=unused-argument
        return 0

    def reset_recipe_state(self, *, recipe) -> None:
        """TE's rules without the buffers: None clears, a class change rebuilds, else updates."""
        self.n_reset_recipe_state += 1
        if recipe is None:
            self._fp8_metas = None
            self._quantizers = None
            return
        metas = self._fp8_metas
        if metas is None or not isinstance(metas.get("recipe"), type(recipe)):
            self._fp8_metas = {"recipe": recipe, "built_from": recipe}
            self._quantizers = {"forward": [], "backward": []}
        else:
            metas["recipe"] = recipe

    def pre_first_fuser_forward(self) -> None:
        self.n_pre_first_fuser_forward += 1

    def op_forward(self, ctx: OperationContext, input_: torch.Tensor,
                   extra_inputs: tuple, **kwargs: Any) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no stand-in forward")

    def forward(self, input: torch.Tensor, *extra_inputs: torch.Tensor,  # pylint: disable=redefined-builtin
                **kwargs: Any):
        """Apply the op through a transient OperationFuser([self]), as TE does."""
        from .fuser import OperationFuser

        return OperationFuser([self])(input, *extra_inputs, basic_op_kwargs=[kwargs])


class FusedOperation(FusibleOperation):
    """Fusion of consecutive basic ops; runs them in order in the stand-in."""

    def __init__(self, basic_ops) -> None:
        super().__init__()
        self.basic_ops = torch.nn.ModuleList(basic_ops)

    @property
    def is_fused_op(self) -> bool:
        return True

    def pre_first_fuser_forward(self) -> None:
        for op in self.basic_ops:
            op.pre_first_fuser_forward()

    def pre_fuser_forward(self, *, requires_grad: bool) -> None:
        for op in self.basic_ops:
            op.pre_fuser_forward(requires_grad=requires_grad)
