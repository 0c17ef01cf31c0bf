"""Stand-in for transformer_engine.pytorch.ops.fuser: OperationFuser and its autograd function.

The plan-cache logic of maybe_fuse_ops follows docs/fuser-model.md, "PR 3410's head" (TE PR #3410 head)
by default, section 1.3 (the base before it) with FT_STANDIN_TE=pre3410. Names, signatures and
the attributes the capture hook may look at (_basic_ops, _basic_op_params, _forward_ops,
_backward_ops, _fused_ops_cache, first_op_requiring_backward, recipe_type, backward_override,
_apply_fusions, _map_to_basic_ops) are TE's. The forward runs the forward plan's basic ops with
PyTorch; the backward differentiates that graph with torch.autograd.grad.
"""
from __future__ import annotations

import itertools
from typing import Any, Optional

import torch

from .. import quantization
from ...common.recipe import DelayedScaling
from ... import STANDIN_BEHAVIOUR
from .op import BasicOperation, FusedOperation, OperationContext

_PRE_3410 = STANDIN_BEHAVIOUR == "pre3410"


class _OperationFuserAutogradFunction(torch.autograd.Function):
    """Autograd function for a pipeline of operations."""

    # pylint: disable=unused-argument
    @staticmethod
    def forward(func_ctx, input_, fuser, basic_op_kwargs, set_output_requires_grad,
                *params_and_extra_inputs):
        n_params = len(fuser._flat_basic_op_params)
        extra = list(params_and_extra_inputs[n_params:])
        if func_ctx is None:
            with torch.no_grad():
                return fuser._run_forward(input_, extra, basic_op_kwargs)
        with torch.enable_grad():
            x = input_.detach().requires_grad_(input_.requires_grad)
            leaf_extra = [t.detach().requires_grad_(True)
                          if t is not None and t.requires_grad else t for t in extra]
            out = fuser._run_forward(x, leaf_extra, basic_op_kwargs)
        func_ctx.fuser = fuser
        func_ctx.graph = (x, leaf_extra, out)
        func_ctx.n_params = n_params
        # TE saves the backward plan that is current at forward time.
        func_ctx.backward_ops = fuser._backward_ops
        func_ctx.is_first_module = False
        return out.detach()

    @staticmethod
    def backward(func_ctx, grad_output):
        x, leaf_extra, out = func_ctx.graph
        params = func_ctx.fuser._flat_basic_op_params
        targets = [x] + list(params) + [t for t in leaf_extra if t is not None]
        need = [t for t in targets if t.requires_grad]
        grads = torch.autograd.grad(out, need, grad_output, allow_unused=True) if need else ()
        by_id = {id(t): g for t, g in zip(need, grads)}
        grad_input = by_id.get(id(x))
        grad_params = [by_id.get(id(p)) for p in params]
        grad_extra = [by_id.get(id(t)) if t is not None else None for t in leaf_extra]
        func_ctx.graph = None
        return (grad_input, None, None, None, *grad_params, *grad_extra)


class OperationFuser:
    """Manages forward and backward passes for a pipeline of operations."""

    forward_backward_fusion_functions: list = []
    forward_fusion_functions: list = []
    backward_fusion_functions: list = []

    def __init__(self, ops: list) -> None:
        basic_ops = []
        for op in ops:
            if op.is_fused_op:
                basic_ops.extend(op.basic_ops)
            else:
                basic_ops.append(op)
        self._num_basic_ops: int = len(basic_ops)
        self._basic_ops: list[BasicOperation] = basic_ops
        self._basic_op_num_extra_inputs = [op.num_extra_inputs for op in basic_ops]
        self._external_extra_input_slots = [
            (i, j) for i, op in enumerate(basic_ops) for j in range(op.num_extra_inputs)
            if op._extra_input_channels[j] is None
        ]
        self.num_extra_inputs = len(self._external_extra_input_slots)
        for op in self._basic_ops:
            op._lock_extra_tensor_channels()

        self._forward_ops: list
        self._backward_ops: list
        if not _PRE_3410:
            self._fused_ops_cache: dict = {}

        self.recipe_type = None
        self.backward_override = None
        self._last_amax_history_len = 0
        self.first_op_requiring_backward = 0

        self._basic_op_params = [list(op.parameters()) for op in self._basic_ops]
        self._basic_op_num_params = list(map(len, self._basic_op_params))
        self._flat_basic_op_params = sum(self._basic_op_params, [])

    @staticmethod
    def _apply_fusions(ops, fusion_funcs, recipe):
        fused_ops = list(ops)
        for func in fusion_funcs:
            fused_ops = func(fused_ops, recipe=recipe)
        return fused_ops

    @staticmethod
    def _map_to_basic_ops(fused_ops, basic_ops):
        def raise_mismatch_error():
            raise RuntimeError(
                "Found mismatch after fusing operations "
                f"(basic_ops={[o.__class__.__name__ for o in basic_ops]}, "
                f"fused_ops={[o.__class__.__name__ for o in fused_ops]})")

        out = []
        idx = 0
        for op in fused_ops:
            if isinstance(op, FusedOperation):
                idxs = []
                for basic_op in op.basic_ops:
                    if idx >= len(basic_ops) or basic_op is not basic_ops[idx]:
                        raise_mismatch_error()
                    idxs.append(idx)
                    idx += 1
                out.append((op, idxs))
            else:
                if idx >= len(basic_ops) or op is not basic_ops[idx]:
                    raise_mismatch_error()
                out.append((op, [idx]))
                idx += 1
        if idx != len(basic_ops):
            raise_mismatch_error()
        return out

    def _build_plan(self, recipe):
        joint_ops = OperationFuser._apply_fusions(
            self._basic_ops, OperationFuser.forward_backward_fusion_functions, recipe=recipe)
        self._forward_ops = OperationFuser._map_to_basic_ops(
            OperationFuser._apply_fusions(
                joint_ops, OperationFuser.forward_fusion_functions, recipe=recipe),
            self._basic_ops)
        self._backward_ops = OperationFuser._map_to_basic_ops(
            OperationFuser._apply_fusions(
                joint_ops, OperationFuser.backward_fusion_functions, recipe=recipe),
            self._basic_ops)

    def _first_op_requiring_backward(self, is_grad_enabled, input_, extra_inputs) -> int:
        if not is_grad_enabled:
            return self._num_basic_ops
        if input_.requires_grad:
            return 0
        for op_idx in range(self._num_basic_ops):
            op_inputs = itertools.chain(self._basic_op_params[op_idx], extra_inputs[op_idx])
            if any(t is not None and t.requires_grad for t in op_inputs):
                return op_idx
        return self._num_basic_ops

    def _reset(self, recipe) -> None:
        for op in self._basic_ops:
            op.reset_recipe_state(recipe=recipe)
        if self.recipe_type is None:
            for op in self._basic_ops:
                op.pre_first_fuser_forward()

    def maybe_fuse_ops(self, is_grad_enabled: bool, recipe, input_: torch.Tensor,
                       extra_inputs: list):
        """Attempt to fuse operations if necessary."""
        first_op_requiring_backward = self._first_op_requiring_backward(
            is_grad_enabled, input_, extra_inputs)
        recipe_type = type(recipe)
        backward_override = recipe.backward_override if recipe is not None else None

        if _PRE_3410:  # docs/fuser-model.md, "Before PR 3410"
            fusion_params = (recipe_type, first_op_requiring_backward, backward_override)
            need_reset = fusion_params != (self.recipe_type, self.first_op_requiring_backward,
                                           self.backward_override)
            if (not need_reset and recipe is not None and recipe.delayed()
                    and self._last_amax_history_len != recipe.amax_history_len):
                need_reset = True
            if not need_reset:
                return
            self._reset(recipe)
            self._build_plan(recipe)
            (self.recipe_type, self.first_op_requiring_backward,
             self.backward_override) = fusion_params
            self._last_amax_history_len = (
                recipe.amax_history_len if isinstance(recipe, DelayedScaling) else 0)
            return

        # docs/fuser-model.md, "PR 3410's head"
        self.first_op_requiring_backward = first_op_requiring_backward
        recipe_params = (recipe_type, backward_override)
        need_reset = recipe_params != (self.recipe_type, self.backward_override)
        if (not need_reset and recipe is not None and recipe.delayed()
                and self._last_amax_history_len != recipe.amax_history_len):
            need_reset = True
        if need_reset:
            self._reset(recipe)
            self.recipe_type, self.backward_override = recipe_params
            self._last_amax_history_len = (
                recipe.amax_history_len if isinstance(recipe, DelayedScaling) else 0)
        fusion_params = (recipe_type, first_op_requiring_backward, backward_override)
        cached_ops = self._fused_ops_cache.get(fusion_params)
        if cached_ops is not None:
            self._forward_ops, self._backward_ops = cached_ops
            return
        self._build_plan(recipe)
        self._fused_ops_cache[fusion_params] = (self._forward_ops, self._backward_ops)

    def _run_forward(self, x, extra_inputs, basic_op_kwargs):
        per_op: list[list[Optional[torch.Tensor]]] = [
            [None] * n for n in self._basic_op_num_extra_inputs]
        for tensor, (op_idx, input_idx) in zip(extra_inputs, self._external_extra_input_slots):
            per_op[op_idx][input_idx] = tensor
        for _, idxs in self._forward_ops:
            for i in idxs:
                op = self._basic_ops[i]
                x = op.op_forward(OperationContext(i >= self.first_op_requiring_backward), x,
                                  tuple(per_op[i]), **basic_op_kwargs[i])
        return x

    def __call__(self, input: torch.Tensor, *extra_inputs: torch.Tensor,  # pylint: disable=redefined-builtin
                 basic_op_kwargs: Optional[list[dict[str, Any]]] = None):
        if len(extra_inputs) != self.num_extra_inputs:
            raise ValueError(
                f"Expected {self.num_extra_inputs} extra inputs but got {len(extra_inputs)}")
        if basic_op_kwargs is None:
            basic_op_kwargs = [{}] * self._num_basic_ops
        basic_op_extra_inputs: list[list[Optional[torch.Tensor]]] = [
            [None] * op.num_extra_inputs for op in self._basic_ops]
        for tensor, (op_idx, input_idx) in zip(extra_inputs, self._external_extra_input_slots):
            basic_op_extra_inputs[op_idx][input_idx] = tensor

        recipe = None
        if quantization.FP8GlobalStateManager.is_fp8_enabled():
            recipe = quantization.FP8GlobalStateManager.get_fp8_recipe()
        is_grad_enabled = torch.is_grad_enabled()

        self.maybe_fuse_ops(is_grad_enabled, recipe, input, basic_op_extra_inputs)

        for idx, op in enumerate(self._basic_ops):
            op.pre_fuser_forward(requires_grad=idx >= self.first_op_requiring_backward)

        args = (input, self, basic_op_kwargs, is_grad_enabled, *self._flat_basic_op_params,
                *extra_inputs)
        if not is_grad_enabled:
            return _OperationFuserAutogradFunction.forward(None, *args)
        return _OperationFuserAutogradFunction.apply(*args)


def register_forward_backward_fusion(op_fusion_func, prepend: bool = False) -> None:
    if prepend:
        OperationFuser.forward_backward_fusion_functions.insert(0, op_fusion_func)
    else:
        OperationFuser.forward_backward_fusion_functions.append(op_fusion_func)


def register_forward_fusion(op_fusion_func, prepend: bool = False) -> None:
    if prepend:
        OperationFuser.forward_fusion_functions.insert(0, op_fusion_func)
    else:
        OperationFuser.forward_fusion_functions.append(op_fusion_func)


def register_backward_fusion(op_fusion_func, prepend: bool = False) -> None:
    if prepend:
        OperationFuser.backward_fusion_functions.insert(0, op_fusion_func)
    else:
        OperationFuser.backward_fusion_functions.append(op_fusion_func)
