"""Stand-in for transformer_engine.common.recipe: the recipe dataclasses of TE 2.20.

TE declares them with pydantic's dataclass; the standard library's is used here (pydantic is not
part of the test environment). Field names, defaults, the environment-variable defaults read
once at import, the type predicates and the repr-cache invalidation follow TE.
"""
from __future__ import annotations

import abc
import os
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, NamedTuple, Optional

_BACKWARD_OVERRIDES = (None, "high_precision", "dequantized")


class _FormatHelper(NamedTuple):
    max_fwd: float
    max_bwd: float


class Format(Enum):
    """FP8/FP4 formats."""

    E2M1 = _FormatHelper(max_fwd=6, max_bwd=6)
    E4M3 = _FormatHelper(max_fwd=448, max_bwd=448)
    E5M2 = _FormatHelper(max_fwd=57344, max_bwd=57344)
    HYBRID = _FormatHelper(max_fwd=448, max_bwd=57344)


@dataclass(frozen=True)
class MMParams:
    """GEMM options."""

    use_split_accumulator: bool = True


@dataclass(frozen=True)
class QParams:
    """Quantization options."""

    power_2_scale: bool = False
    amax_epsilon: float = 0.0
    random_hadamard_transform: bool = False
    stochastic_rounding: bool = False
    fp4_2d_quantization: bool = False


class Recipe:
    """Base recipe class."""

    _cached_repr: Optional[str] = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "_cached_repr":
            object.__setattr__(self, "_cached_repr", None)
        object.__setattr__(self, name, value)

    @abc.abstractmethod
    def _make_repr(self) -> str:
        """Text form of the recipe."""

    def __repr__(self) -> str:
        if self._cached_repr is None:
            self._cached_repr = self._make_repr()
        return self._cached_repr

    @classmethod
    def nvfp4(cls):
        return issubclass(cls, NVFP4BlockScaling)

    @classmethod
    def mxfp8(cls):
        return issubclass(cls, MXFP8BlockScaling)

    @classmethod
    def delayed(cls):
        return issubclass(cls, DelayedScaling)

    @classmethod
    def float8_current_scaling(cls):
        return issubclass(cls, Float8CurrentScaling)

    @classmethod
    def float8_per_tensor_scaling(cls):
        return issubclass(cls, (DelayedScaling, Float8CurrentScaling))

    @classmethod
    def float8_block_scaling(cls):
        return issubclass(cls, Float8BlockScaling)

    @classmethod
    def custom(cls):
        return issubclass(cls, CustomRecipe)


def _generic_repr(self) -> str:
    fields = ", ".join(f"{k}={v}" for k, v in vars(self).items() if k != "_cached_repr")
    return f"recipe_type={type(self).__name__}, {fields}"


@dataclass(repr=False)
class DelayedScaling(Recipe):
    """Delayed scaling."""

    margin: int = 0
    fp8_format: Format = Format.HYBRID
    amax_history_len: int = 1024
    amax_compute_algo: Any = "max"
    scaling_factor_compute_algo: Optional[Callable] = None
    reduce_amax: bool = True
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = os.getenv("NVTE_BACKWARD_OVERRIDE", None)

    def __post_init__(self) -> None:
        assert self.fp8_format != Format.E5M2, "Pure E5M2 training is not supported."
        assert self.backward_override is None, "DelayedScaling does not support backward_override"

    _make_repr = _generic_repr


@dataclass(repr=False)
class Float8CurrentScaling(Recipe):
    """Per-tensor current scaling."""

    use_power_2_scales: bool = os.getenv("NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES", "0") == "1"
    fp8_format: Format = Format.HYBRID
    fp8_quant_fwd_inp = QParams(power_2_scale=use_power_2_scales, amax_epsilon=0.0)
    fp8_quant_fwd_weight = QParams(power_2_scale=use_power_2_scales, amax_epsilon=0.0)
    fp8_quant_bwd_grad = QParams(power_2_scale=use_power_2_scales, amax_epsilon=0.0)
    fp8_gemm_fprop: MMParams = MMParams(use_split_accumulator=False)
    fp8_gemm_dgrad: MMParams = MMParams(use_split_accumulator=True)
    fp8_gemm_wgrad: MMParams = MMParams(use_split_accumulator=True)
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = os.getenv("NVTE_BACKWARD_OVERRIDE", None)

    def __post_init__(self) -> None:
        assert self.fp8_format != Format.E5M2, "Pure E5M2 training is not supported."
        assert self.backward_override in _BACKWARD_OVERRIDES

    _make_repr = _generic_repr


@dataclass(repr=False)
class MXFP8BlockScaling(Recipe):
    """MXFP8 block scaling."""

    margin: int = 0
    fp8_format: Format = Format.E4M3
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = os.getenv("NVTE_BACKWARD_OVERRIDE", None)
    enable_2d_quantization: bool = False

    def __post_init__(self) -> None:
        assert self.fp8_format != Format.E5M2, "Pure E5M2 training is not supported."
        assert self.backward_override in _BACKWARD_OVERRIDES

    _make_repr = _generic_repr


@dataclass(repr=False)
class Float8BlockScaling(Recipe):
    """FP8 block scaling."""

    use_f32_scales: bool = os.getenv("NVTE_FP8_BLOCK_SCALING_FP32_SCALES", "0") == "1"
    fp8_format: Format = Format.E4M3
    fp8_quant_fwd_inp = QParams(power_2_scale=not use_f32_scales, amax_epsilon=0.0)
    fp8_quant_fwd_weight = QParams(power_2_scale=not use_f32_scales, amax_epsilon=0.0)
    fp8_quant_bwd_grad = QParams(power_2_scale=not use_f32_scales, amax_epsilon=0.0)
    x_block_scaling_dim: int = 1
    w_block_scaling_dim: int = 2
    grad_block_scaling_dim: int = 1
    fp8_gemm_fprop: MMParams = MMParams(use_split_accumulator=True)
    fp8_gemm_dgrad: MMParams = MMParams(use_split_accumulator=True)
    fp8_gemm_wgrad: MMParams = MMParams(use_split_accumulator=True)
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = os.getenv("NVTE_BACKWARD_OVERRIDE", None)

    def __post_init__(self) -> None:
        assert self.backward_override in _BACKWARD_OVERRIDES

    _make_repr = _generic_repr


@dataclass(repr=False)
class NVFP4BlockScaling(Recipe):
    """NVFP4 block scaling."""

    disable_rht: bool = os.getenv("NVTE_NVFP4_DISABLE_RHT", "0") == "1"
    disable_stochastic_rounding: bool = (
        os.getenv("NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING", "0") == "1"
    )
    disable_2d_quantization: bool = os.getenv("NVTE_NVFP4_DISABLE_2D_QUANTIZATION", "0") == "1"
    row_scaled_activation: bool = os.getenv("NVTE_NVFP4_ROW_SCALED_ACTIVATION", "0") == "1"
    nvfp4_4over6: str = os.getenv("NVTE_NVFP4_4OVER6", "none")
    nvfp4_4over6_e4m3_use_256: str = os.getenv("NVTE_NVFP4_4OVER6_E4M3_USE_256", "all")
    nvfp4_4over6_err_mode: str = os.getenv("NVTE_NVFP4_4OVER6_ERR_MODE", "MAE").upper()
    fp4_format: Format = Format.E2M1
    fp8_format: Format = Format.E4M3
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = os.getenv("NVTE_BACKWARD_OVERRIDE", None)

    def __post_init__(self) -> None:
        assert self.fp4_format == Format.E2M1
        assert self.fp8_format == Format.E4M3
        assert self.backward_override in _BACKWARD_OVERRIDES
        # Derived once at construction, as in TE: mutating disable_rht later changes the fusion
        # gate but not these.
        self.fp4_quant_fwd_inp = QParams(random_hadamard_transform=not self.disable_rht)
        self.fp4_quant_fwd_weight = QParams(fp4_2d_quantization=not self.disable_2d_quantization)
        self.fp4_quant_bwd_grad = QParams(
            random_hadamard_transform=not self.disable_rht,
            stochastic_rounding=not self.disable_stochastic_rounding,
        )

    _make_repr = _generic_repr


@dataclass(repr=False)
class CustomRecipe(Recipe):
    """User-provided quantizer factory."""

    qfactory: Callable[..., Any]
    fp8_format: Format = Format.HYBRID
    fp8_dpa: bool = False
    fp8_mha: bool = False
    backward_override: Optional[str] = os.getenv("NVTE_BACKWARD_OVERRIDE", None)
    quantization_alignment: int = 128

    def __post_init__(self) -> None:
        assert self.backward_override in _BACKWARD_OVERRIDES

    _make_repr = _generic_repr
