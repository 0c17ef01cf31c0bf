"""Stand-in for transformer_engine.pytorch: autocast, FP8GlobalStateManager and ops."""
import transformer_engine_torch  # noqa: F401  (TE loads its extension here too)

from .quantization import FP8GlobalStateManager, autocast
from . import ops

__all__ = ["FP8GlobalStateManager", "autocast", "ops"]
