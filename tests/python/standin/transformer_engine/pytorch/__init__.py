"""Stand-in for transformer_engine.pytorch: autocast, FP8GlobalStateManager and ops."""
from .quantization import FP8GlobalStateManager, autocast
from . import ops

__all__ = ["FP8GlobalStateManager", "autocast", "ops"]
