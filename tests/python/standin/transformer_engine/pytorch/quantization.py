"""Stand-in for transformer_engine.pytorch.quantization: the global autocast state.

As in TE, autocast(enabled=True, recipe=None) substitutes a freshly built default recipe on every
entry (TE picks MXFP8, current scaling or delayed scaling by device; on the CPU stand-in it is
DelayedScaling), and get_fp8_recipe() is only consulted by the fuser when is_fp8_enabled().
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Optional

from ..common.recipe import DelayedScaling, Recipe


class FP8GlobalStateManager:
    """Global quantization state (class attributes, as in TE)."""

    FP8_ENABLED = False
    FP8_CALIBRATION = False
    FP8_RECIPE: Optional[Recipe] = None
    FP8_DISTRIBUTED_GROUP = None
    IS_FIRST_FP8_MODULE = False
    FP8_GRAPH_CAPTURING = False
    AUTOCAST_DEPTH = 0

    @classmethod
    def is_fp8_enabled(cls) -> bool:
        return cls.FP8_ENABLED

    @classmethod
    def get_fp8_recipe(cls) -> Recipe:
        if cls.FP8_RECIPE is not None:
            return cls.FP8_RECIPE
        return get_default_fp8_recipe()

    @classmethod
    def with_fp8_parameters(cls) -> bool:
        return False

    @classmethod
    def fp8_graph_capturing(cls) -> bool:
        return cls.FP8_GRAPH_CAPTURING

    @classmethod
    def get_autocast_state(cls):
        return (cls.FP8_ENABLED, cls.FP8_CALIBRATION, cls.FP8_RECIPE, cls.FP8_DISTRIBUTED_GROUP,
                cls.IS_FIRST_FP8_MODULE, cls.FP8_GRAPH_CAPTURING)

    @classmethod
    def set_autocast_state(cls, state) -> None:
        (cls.FP8_ENABLED, cls.FP8_CALIBRATION, cls.FP8_RECIPE, cls.FP8_DISTRIBUTED_GROUP,
         cls.IS_FIRST_FP8_MODULE, cls.FP8_GRAPH_CAPTURING) = state

    @classmethod
    def autocast_enter(cls, enabled=False, calibrating=False, fp8_recipe=None,
                       fp8_group=None, _graph=False) -> None:
        fp8_recipe = get_default_fp8_recipe() if fp8_recipe is None else fp8_recipe
        cls.FP8_ENABLED = enabled
        cls.FP8_CALIBRATION = calibrating
        cls.FP8_RECIPE = fp8_recipe
        cls.FP8_DISTRIBUTED_GROUP = fp8_group
        cls.FP8_GRAPH_CAPTURING = _graph
        if cls.AUTOCAST_DEPTH == 0:
            cls.IS_FIRST_FP8_MODULE = True
        cls.AUTOCAST_DEPTH += 1

    @classmethod
    def autocast_exit(cls, enabled: bool, _graph: bool) -> None:
        cls.AUTOCAST_DEPTH -= 1


def get_default_fp8_recipe() -> Recipe:
    """A fresh default recipe (a new object on every call, as in TE)."""
    return DelayedScaling()


@contextmanager
def autocast(enabled: bool = True, calibrating: bool = False, recipe: Optional[Recipe] = None,
             amax_reduction_group=None, _graph: bool = False):
    """Enable quantization for the ops run inside (TE's te.autocast)."""
    state = FP8GlobalStateManager.get_autocast_state()
    FP8GlobalStateManager.autocast_enter(enabled=enabled, calibrating=calibrating,
                                         fp8_recipe=recipe, fp8_group=amax_reduction_group,
                                         _graph=_graph)
    try:
        yield
    finally:
        FP8GlobalStateManager.set_autocast_state(state)
        FP8GlobalStateManager.autocast_exit(enabled, _graph=_graph)
