"""Stand-in for transformer_engine.pytorch.ops.Sequential: adjacent fusible ops are grouped into
one OperationFuser each, lazily on the first forward; each fuser takes its extra inputs from the
front of the remaining ones."""
from __future__ import annotations

import torch

from .fuser import OperationFuser
from .op import FusibleOperation


class Sequential(torch.nn.Module):
    """Sequential container of modules, fusing adjacent ops."""

    def __init__(self, *args: torch.nn.Module) -> None:
        super().__init__()
        self._module_groups = None
        for idx, module in enumerate(args):
            self.add_module(str(idx), module)

    def __getitem__(self, idx: int) -> torch.nn.Module:
        return list(self._modules.values())[idx]

    def __len__(self) -> int:
        return len(self._modules)

    @classmethod
    def _make_module_groups(cls, modules):
        groups = []
        for module in modules:
            if isinstance(module, FusibleOperation):
                if not groups or not isinstance(groups[-1], list):
                    groups.append([])
                groups[-1].append(module)
            else:
                groups.append(module)
        for idx, group in enumerate(groups):
            if isinstance(group, list):
                groups[idx] = OperationFuser(group)
        return groups

    def forward(self, input: torch.Tensor, *extra_inputs: torch.Tensor):  # pylint: disable=redefined-builtin
        if self._module_groups is None:
            self._module_groups = self._make_module_groups(self._modules.values())
        x = input
        for module_group in self._module_groups:
            if isinstance(module_group, OperationFuser):
                n = module_group.num_extra_inputs
                x = module_group(x, *extra_inputs[:n])
                extra_inputs = extra_inputs[n:]
            else:
                x = module_group(x)
        return x
