"""What the capture records about ops, recipes and the environment.

Op attributes follow the fusertrace conventions (only what TE's fusion gates or the numerics
read; absent means TE's default). They are read from the attribute names of TE 2.20 (PR #3410
state, docs/fuser-model.md, "Ops"); an attribute a given TE build does not have is left out,
never guessed.
"""
from __future__ import annotations

import dataclasses
import enum
import operator
import os
import socket
import sys
import time
from typing import Any, Optional

_DTYPES = {"torch.bfloat16": "bfloat16", "torch.float16": "float16", "torch.float32": "float32"}


def _dtype_name(t) -> Optional[str]:
    if t is None:
        return None
    return _DTYPES.get(str(getattr(t, "dtype", "")), None)


def _first_param(op, names):
    for n in names:
        p = getattr(op, n, None)
        if p is not None:
            return p
    return None


def _attr(op, out: dict, key: str, *names, conv=None) -> None:
    """out[key] = first attribute of op named in names (default: key) that exists."""
    for n in names or (key,):
        if hasattr(op, n):
            v = getattr(op, n)
            out[key] = conv(v) if conv is not None else v
            return


def _grouped_linear(op) -> dict:
    a: dict = {}
    _attr(op, a, "num_groups", conv=int)
    _attr(op, a, "in_features", conv=int)
    _attr(op, a, "out_features", conv=int)
    _attr(op, a, "bias", "use_bias", conv=bool)
    _attr(op, a, "scale_bias", "_scale_bias", conv=bool)
    _attr(op, a, "single_grouped_weight", conv=bool)
    w = _first_param(op, ("weight0", "weight"))
    dt = _dtype_name(w)
    if dt:
        a["dtype"] = dt
    return a


def _glu(op) -> dict:
    a: dict = {}
    if hasattr(op, "glu_interleave_size"):
        v = op.glu_interleave_size
        a["glu_interleave_size"] = None if v is None else int(v)
    _attr(op, a, "activation_recompute_in_mlp", conv=bool)
    src = getattr(op, "_clamped", op)  # ScaledClampedQGeGLU keeps them in a ClampedSwiGLU
    for k in ("limit", "alpha", "glu_linear_offset"):
        _attr(src, a, k, conv=float)
    return a


def _basic_linear(op) -> dict:
    a: dict = {}
    _attr(op, a, "in_features", conv=int)
    _attr(op, a, "out_features", conv=int)
    if hasattr(op, "tensor_parallel_mode"):
        m = op.tensor_parallel_mode
        a["tensor_parallel_mode"] = None if m is None else str(m)
    _attr(op, a, "tensor_parallel_size", conv=int)
    _attr(op, a, "sequence_parallel", conv=bool)
    if hasattr(op, "_userbuffers_options"):
        # TE's own value: a dict enables Userbuffers (the fusions test `is not None`), None not
        a["userbuffers"] = json_value(op._userbuffers_options)
    dt = _dtype_name(getattr(op, "weight", None))
    if dt:
        a["dtype"] = dt
    return a


def _in_place(op) -> dict:
    a: dict = {}
    _attr(op, a, "in_place", "_in_place", conv=bool)
    return a


def _constant_scale(op) -> dict:
    a: dict = {}
    _attr(op, a, "scale", conv=float)
    return a


def _collective(op) -> dict:
    """process_group_size: AllGather and ReduceScatter keep it; AllReduce asks torch.distributed
    at run time, so it is read here the same way (absent when torch.distributed is not up)."""
    a: dict = {}
    if hasattr(op, "process_group_size"):
        a["process_group_size"] = int(op.process_group_size)
        return a
    torch = sys.modules.get("torch")
    try:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            a["process_group_size"] = int(dist.get_world_size(getattr(op, "process_group", None)))
    except Exception:  # pylint: disable=broad-except
        pass
    return a


def _bias(op) -> dict:
    a: dict = {}
    _attr(op, a, "size", "_size", "local_size", conv=int)
    return a


_GLU_TYPES = ("ScaledSwiGLU", "ScaledClampedQGeGLU", "ScaledSReLU", "SwiGLU", "ClampedSwiGLU",
              "ScaledSiTUGLU", "SiTUGLU")
_OP_ATTRS = {"GroupedLinear": _grouped_linear, "BasicLinear": _basic_linear,
             "AddExtraInput": _in_place, "MakeExtraOutput": _in_place,
             "ConstantScale": _constant_scale, "Bias": _bias, "AllGather": _collective,
             "AllReduce": _collective, "ReduceScatter": _collective}
_OP_ATTRS.update({t: _glu for t in _GLU_TYPES})


# The attributes a fusion gate or run-time check of the model reads, per op class: the capture
# compares them at every call of a fuser (only these, to stay cheap) and redeclares the fuser when
# one changed (docs/capture-format.md, "of"). They are resolved once per declaration to the
# objects that hold them (the op's own __dict__, a ClampedSwiGLU it keeps, the weight tensor for
# the dtype), so that a call costs one C-level attrgetter per holder. An attribute replaced by
# another value is seen; a dict mutated in place (userbuffers options) is not.
_WATCH = {
    "BasicLinear": ("tensor_parallel_mode", "tensor_parallel_size", "sequence_parallel",
                    "_userbuffers_options", "in_features", "out_features"),
    "GroupedLinear": ("num_groups", "in_features", "out_features", "use_bias", "_scale_bias",
                      "single_grouped_weight"),
    "AddExtraInput": ("_in_place",), "MakeExtraOutput": ("_in_place",), "ConstantScale": ("scale",),
    "AllGather": ("process_group_size",), "ReduceScatter": ("process_group_size",),
}
_GLU_WATCH = ("glu_interleave_size", "activation_recompute_in_mlp", "limit", "alpha",
              "glu_linear_offset")
for _t in _GLU_TYPES:
    _WATCH[_t] = _GLU_WATCH
_WEIGHT = {"BasicLinear": "weight", "GroupedLinear": "weight0"}  # whose dtype the model reads


def attr_watch(ops) -> list:
    """[(holder, getter, snapshot)] over the ops' model-read attributes."""
    out = []

    def add(holder, names):
        names = [n for n in names if n in getattr(holder, "__dict__", {})]
        if names:
            get = operator.attrgetter(*names)
            out.append((holder, get, get(holder)))

    for op in ops:
        t = type(op).__name__
        add(op, _WATCH.get(t, ()))
        sub = getattr(op, "_modules", {}).get("_clamped")  # ScaledClampedQGeGLU's parameters
        if sub is not None:
            add(sub, _GLU_WATCH)
        w = getattr(op, "_parameters", {}).get(_WEIGHT.get(t, ""))
        if w is not None:
            out.append((w, _DTYPE_OF, w.dtype))
    return out


_DTYPE_OF = operator.attrgetter("dtype")


def op_description(op) -> dict:
    """{"type": class name, "attrs": {...}} for one basic op."""
    name = type(op).__name__
    fn = _OP_ATTRS.get(name)
    attrs = {}
    if fn is not None:
        try:
            attrs = fn(op)
        except Exception:  # pylint: disable=broad-except
            attrs = {}
    return {"type": name, "attrs": attrs}


def json_value(v: Any) -> Any:
    """A JSON-able form of a recipe attribute: enums by name, None as null, nested dataclasses
    as objects, callables by qualified name, anything else by repr."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else repr(v)
    if isinstance(v, enum.Enum):
        return v.name
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: json_value(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if callable(v):
        mod = getattr(v, "__module__", None) or ""
        qn = getattr(v, "__qualname__", None) or type(v).__name__
        return f"{mod}.{qn}" if mod else qn
    return repr(v)


RECIPE_MODULE = "transformer_engine.common.recipe"
TE_RECIPES = ("DelayedScaling", "Float8CurrentScaling", "MXFP8BlockScaling", "Float8BlockScaling",
              "NVFP4BlockScaling", "CustomRecipe")
BASE_KEY = "__te_base__"  # the attrs key that carries a subclass's TE recipe class


def recipe_base(recipe) -> Optional[str]:
    """The TE recipe class a user subclass derives from (the first of TE's six in its MRO), or
    None when the recipe's own class is TE's (or no TE class is in its MRO)."""
    t = type(recipe)
    if t.__name__ in TE_RECIPES and t.__module__ == RECIPE_MODULE:
        return None
    for c in t.__mro__[1:]:
        if c.__name__ in TE_RECIPES and c.__module__ == RECIPE_MODULE:
            return c.__name__
    return None


def recipe_attrs(recipe) -> dict:
    """Every dataclass field of the recipe, by name (docs/fuser-model.md, "Recipes"), and for a
    user subclass of a TE recipe class its TE base under __te_base__ (what TE's issubclass-based
    predicates see; the recipe record's type stays the subclass's own name)."""
    if dataclasses.is_dataclass(recipe):
        a = {f.name: json_value(getattr(recipe, f.name, None))
             for f in dataclasses.fields(recipe)}
    else:
        a = {k: json_value(v) for k, v in vars(recipe).items() if not k.startswith("_")}
    base = recipe_base(recipe)
    if base is not None:
        a[BASE_KEY] = base
    return a


# ---- header ----------------------------------------------------------------------------------
# NVTE flags a fusion rule reads whose TE default is "0": recorded explicitly when unset so that
# the replayer does not have to know TE's defaults.
_GATE_DEFAULTS = {"NVTE_CUTEDSL_FUSED_GROUPED_MLP": "0",
                  "NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP": "0"}


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the world size: torch.distributed when initialized, else the
    launcher's RANK / WORLD_SIZE, else 0 / 1."""
    torch = sys.modules.get("torch")
    try:
        dist = torch.distributed if torch is not None else None
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), int(dist.get_world_size())
    except Exception:  # pylint: disable=broad-except
        pass

    def env_int(name: str, default: int) -> int:
        try:
            return int(os.environ.get(name, default))
        except ValueError:
            return default

    return env_int("RANK", 0), env_int("WORLD_SIZE", 1)


_NOT_FOUND = object()


def _cudnn_frontend_version():
    """What TE's version("nvidia-cudnn-frontend") gives: the version, _NOT_FOUND when the package
    is not installed (TE's PackageNotFoundError), None when it cannot be told."""
    try:
        from importlib.metadata import version, PackageNotFoundError  # noqa: PLC0415
        try:
            return version("nvidia-cudnn-frontend")
        except PackageNotFoundError:
            return _NOT_FOUND
    except ImportError:
        pass
    mod = sys.modules.get("cudnn")
    v = getattr(mod, "__version__", None) if mod is not None else None
    return str(v) if v else None


def _cublaslt_version() -> Optional[str]:
    tex = sys.modules.get("transformer_engine_torch")
    fn = getattr(tex, "get_cublasLt_version", None) if tex is not None else None
    if fn is None:
        return None
    try:
        v = int(fn())
    except Exception:  # pylint: disable=broad-except
        return None
    return f"{v // 10000}.{(v // 100) % 100}.{v % 100}"


def _device_cc():
    """The compute capability TE's get_device_compute_capability() sees: "M.m", _NOT_FOUND when
    there is no CUDA device, None when CUDA is not initialized yet (asking would initialize it)."""
    torch = sys.modules.get("torch")
    try:
        if torch is None:
            return None
        if not torch.cuda.is_available():
            return _NOT_FOUND
        if torch.cuda.is_initialized():
            major, minor = torch.cuda.get_device_capability()
            return f"{major}.{minor}"
    except Exception:  # pylint: disable=broad-except
        pass
    return None


# The cuDNN frontend wrappers the grouped-MLP is_supported() checks import (ops/fused/
# grouped_mlp.py); recorded only when the cudnn module is already loaded (never imported here).
CUDNN_WRAPPERS = ("grouped_gemm_glu_wrapper_sm100", "grouped_gemm_dglu_wrapper_sm100",
                  "grouped_gemm_srelu_wrapper_sm100", "grouped_gemm_dsrelu_wrapper_sm100",
                  "grouped_gemm_quant_wrapper_sm100", "grouped_gemm_wgrad_wrapper_sm100")


def _cudnn_wrappers() -> dict:
    mod = sys.modules.get("cudnn")
    if mod is None:
        return {}
    out = {}
    for name in CUDNN_WRAPPERS:
        try:
            ok = getattr(mod, name, None) is not None
        except Exception:  # pylint: disable=broad-except
            ok = False
        out["cudnn." + name] = 1 if ok else 0
    return out


def environment(world_size: int) -> dict:
    """The header's env: device_cc, cudnn_frontend, cublaslt, world_size, the cuDNN wrappers and
    every NVTE_* variable (strings; numbers and null where the capture knows: null means the
    process did not have it, an absent key that it could not be told)."""
    env: dict = {}
    cc = _device_cc()
    if cc is not None:
        env["device_cc"] = None if cc is _NOT_FOUND else cc
    fe = _cudnn_frontend_version()
    if fe is not None:
        env["cudnn_frontend"] = None if fe is _NOT_FOUND else fe
    lt = _cublaslt_version()
    if lt:
        env["cublaslt"] = lt
    env["world_size"] = int(world_size)
    env.update(_cudnn_wrappers())
    env.update(_GATE_DEFAULTS)
    for k, v in os.environ.items():
        if k.startswith("NVTE_"):
            env[k] = v
    return env


_PASSES = (("forward_backward", "forward_backward_fusion_functions"),
           ("forward", "forward_fusion_functions"), ("backward", "backward_fusion_functions"))


def _function_name(f) -> str:
    """A registered fusion function as TE holds it: module.qualname (functools.partial and other
    callables by their repr)."""
    mod = getattr(f, "__module__", None)
    qn = getattr(f, "__qualname__", None)
    if mod and qn:
        return f"{mod}.{qn}"
    return repr(f)


def fusion_registry(fuser_cls) -> Optional[dict]:
    """TE's registered fusion passes, in order, from OperationFuser's class-level lists (the
    registry TE filled at import: the grouped-MLP joint fusions only when is_supported())."""
    if fuser_cls is None:
        return None
    out = {}
    for key, attr in _PASSES:
        funcs = getattr(fuser_cls, attr, None)
        if not isinstance(funcs, list):
            return None
        out[key] = [_function_name(f) for f in funcs]
    return out


def header(rank: int, world_size: int, fuser_cls=None) -> dict:
    torch = sys.modules.get("torch")
    te = sys.modules.get("transformer_engine")
    te_version = getattr(te, "__version__", None) if te is not None else None
    h = {
        "te_version": str(te_version) if te_version else None,
        "torch_version": str(torch.__version__) if torch is not None else None,
        "host": socket.gethostname(),
        "rank": rank,
        "world_size": world_size,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "env": environment(world_size),
        "capture": "fusertrace_capture",
        "pid": os.getpid(),
    }
    reg = fusion_registry(fuser_cls)
    if reg is not None:
        h["te_fusions"] = reg
    return h
