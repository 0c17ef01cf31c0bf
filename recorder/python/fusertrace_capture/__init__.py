"""fusertrace_capture: record every TransformerEngine operation-fuser call of a training run.

One line turns it on, before or after TE is imported:

    import fusertrace_capture; fusertrace_capture.enable("traces/")

or, without touching the script, `FUSERTRACE_CAPTURE=traces/ python3 -m fusertrace_capture.run
train.py ARGS` (the environment variable alone also works wherever `fusertrace_capture` gets
imported, e.g. from a .pth file; see README.md). Each rank writes traces/rank{R}.ftdb through the
C recorder (libfusertrace_rec.so, found through $FUSERTRACE_LIB, next to this package, or where
`cmake --install` put it; _writer.find_library lists the places), or
traces/rank{R}.jsonl (capture-jsonl v1, for `fusertrace import`) with a warning when the library
is not available.

Environment (read by enable() when the argument is not given):
  FUSERTRACE_CAPTURE=DIR       enable at import, writing to DIR
  FUSERTRACE_SPLITS=off|host|async   split sizes (default host; see README.md)
  FUSERTRACE_ALLOW_SYNC=1      host mode may read split sizes from the GPU (a blocking sync)
  FUSERTRACE_BACKWARD=0        do not record backward records
  FUSERTRACE_LIB=PATH          the recorder library
  FUSERTRACE_JSONL=1           write JSON Lines even when the library is there
  FUSERTRACE_JSONL_FLUSH=N     JSON Lines: write every N lines (default 256)
  FUSERTRACE_FLUSH_SECS=S      commit what is recorded at least every S seconds (default 10)

Standard library only; it imports neither torch nor TE itself.
"""
from __future__ import annotations

import contextlib
import os
import weakref
from typing import Iterator, Optional

from . import _capture
from ._capture import SPLIT_MODES

__all__ = ["enable", "disable", "flush", "is_enabled", "trace_path", "set_step",
           "set_microbatch", "set_phase", "phase", "step", "label_modules", "SPLIT_MODES"]


def _env_flag(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    return v.strip().lower() not in ("0", "false", "no", "off")


def enable(out_dir: Optional[str] = None, *, splits: Optional[str] = None,
           allow_sync: Optional[bool] = None, backward: Optional[bool] = None,
           lib: Optional[str] = None, jsonl: Optional[bool] = None,
           nvtx: Optional[bool] = None):
    """Start capturing into out_dir (default $FUSERTRACE_CAPTURE); returns the capture.

    The trace file is opened at the first fuser call (so the rank is known by then). Calling
    enable() again with the same directory returns the running capture; with another directory
    it closes the running one first. nvtx (default $FUSERTRACE_NVTX, off) marks TE's plan builds
    as NVTX ranges for Nsight Systems."""
    if out_dir is None:
        out_dir = os.environ.get("FUSERTRACE_CAPTURE")
        if not out_dir:
            raise ValueError("enable() needs out_dir (or FUSERTRACE_CAPTURE)")
    cur = _capture._ACTIVE[0]
    if cur is not None:
        if os.path.abspath(cur.out_dir) == os.path.abspath(out_dir):
            return cur
        disable()
    if splits is None:
        splits = os.environ.get("FUSERTRACE_SPLITS", "host") or "host"
    if allow_sync is None:
        allow_sync = _env_flag("FUSERTRACE_ALLOW_SYNC", False)
    if backward is None:
        backward = _env_flag("FUSERTRACE_BACKWARD", True)
    if jsonl is None:
        jsonl = _env_flag("FUSERTRACE_JSONL", False)
    try:
        flush_every = int(os.environ.get("FUSERTRACE_JSONL_FLUSH", "256"))
    except ValueError:
        flush_every = 256
    try:
        flush_secs = float(os.environ.get("FUSERTRACE_FLUSH_SECS", "10"))
    except ValueError:
        flush_secs = 10.0
    cap = _capture._Capture(out_dir, splits=splits, allow_sync=allow_sync, backward=backward,
                            lib=lib, force_jsonl=jsonl, flush_every=flush_every,
                            flush_secs=flush_secs)
    if nvtx is None:
        nvtx = _env_flag("FUSERTRACE_NVTX", False)
    _capture._NVTX[0] = None
    if nvtx:
        fns, why = _capture.nvtx_functions()
        if fns is None:
            _capture._warn(f"FUSERTRACE_NVTX: no NVTX in this torch ({why}); builds are not "
                           "marked")
        _capture._NVTX[0] = fns
    _capture._ACTIVE[0] = cap
    _capture.install_patch()
    _capture.install_signal_handlers()
    return cap


def disable() -> None:
    """Stop capturing; write everything pending and close the trace."""
    cap = _capture._ACTIVE[0]
    _capture._ACTIVE[0] = None
    _capture._NVTX[0] = None
    if cap is not None:
        cap.close()


def flush() -> None:
    """Commit what has been recorded so far (async split copies that are not done yet stay
    pending)."""
    cap = _capture._ACTIVE[0]
    if cap is not None:
        cap.flush()


def is_enabled() -> bool:
    return _capture._ACTIVE[0] is not None


def trace_path() -> Optional[str]:
    """The file this rank writes (None before the first fuser call)."""
    cap = _capture._ACTIVE[0]
    return cap.path if cap is not None else None


# ---- caller context: step, microbatch, phase ----------------------------------------------------
def set_step(step: Optional[int], mb: Optional[int] = None) -> None:
    """Training step (and microbatch) recorded with the following calls; None clears."""
    _capture._CTX[0] = None if step is None else int(step)
    _capture._CTX[1] = None if mb is None else int(mb)


def set_microbatch(mb: Optional[int]) -> None:
    _capture._CTX[1] = None if mb is None else int(mb)


def set_phase(name: Optional[str]) -> None:
    """Phase word recorded with the following calls ("fwd", "recompute", "eval", ...)."""
    _capture._CTX[2] = None if name is None else str(name).encode("utf-8")


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """`with fusertrace_capture.phase("eval"): ...` records the calls inside with that phase and
    restores the previous phase afterwards."""
    prev = _capture._CTX[2]
    _capture._CTX[2] = str(name).encode("utf-8")
    try:
        yield
    finally:
        _capture._CTX[2] = prev


@contextlib.contextmanager
def step(step_: int, mb: Optional[int] = None) -> Iterator[None]:
    """`with fusertrace_capture.step(i): ...` (restores the previous step/microbatch after)."""
    prev = (_capture._CTX[0], _capture._CTX[1])
    set_step(step_, mb)
    try:
        yield
    finally:
        _capture._CTX[0], _capture._CTX[1] = prev


def label_modules(model, prefix: str = "") -> None:
    """Label the fusers built from model's ops with their module path (e.g. layers.3.mlp).

    Call it before the first forward: a fuser is labelled when it is declared (its first call),
    with the longest common module path of its ops."""
    cap = _capture._ACTIVE[0]
    if cap is None:
        return
    for name, mod in model.named_modules(prefix=prefix):
        try:
            ref = weakref.ref(mod)
        except TypeError:
            ref = None
        cap._labels[id(mod)] = (ref, name)


if os.environ.get("FUSERTRACE_CAPTURE"):
    enable()
