"""bench_capture.py - time added per TE fuser call by fusertrace_capture, against the same calls
without the hook, in one run.

    PYTHONPATH=recorder/python:tests/python/standin /usr/bin/python3 bench/bench_capture.py \
        [--lib build/recorder/libfusertrace_rec.so] [--calls 20000] [--rounds 7] [--device cpu|cuda]

Workload: OperationFuser.maybe_fuse_ops of the TE stand-in on a grouped MLP (GroupedLinear(G),
ScaledSwiGLU, GroupedLinear(G); 3G parameters), grad enabled, one MXFP8 recipe object, split
sizes as an int64 tensor on --device: the cache-hit call a training step makes per fuser. The
stand-in's maybe_fuse_ops does what TE's does on a hit (boundary scan, key compare, dict lookup),
so the baseline is of the same order as TE's.

Variants, interleaved round by round (ns per call; best and median of rounds: the machine's noise
only ever adds time, so the best round is the estimate and the median shows the spread):
  baseline        the original maybe_fuse_ops, no wrapper
  dormant         wrapper installed, capture disabled
  C recorder      capture on, libfusertrace_rec.so (splits as FUSERTRACE_SPLITS, default host)
  C rec splits=off
  C rec splits=async  (CUDA only: pinned copy + event per call)
  JSONL           capture on, JSON Lines fallback
  hook, no writer capture on, records discarded: the hook's own cost (what any writer adds on
                  top; the C recorder's packing adds a few hundred ns)
Each prints the added ns per call (variant - baseline) and the ratio variant / baseline.

A second table (--workload standalone or both, the default) times standalone te.ops modules
called directly, outside a Sequential, as TE runs them: each call of a BasicLinear and of a
ConstantScale (the two called in turn, no_grad, on --device) builds a transient
OperationFuser([op]) that the hook declares, records and ends. Its baseline is the same calls with
no wrapper installed at all (the stand-in's own methods, put back for those rounds), so the added
figure includes the __init__ and weak-reference bookkeeping of every transient fuser. The same
calls through persistent fusers (one OperationFuser([op]) per op, made once per round) are timed
in the same rounds, against their own hook-less baseline, so that what a transient fuser adds on
top of a persistent one's record shows. --json FILE writes every row's best and added ns.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.environ.get("FUSERTRACE_LIB"))
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workload", choices=("persistent", "standalone", "both"), default="both")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with this thread's CPU clock instead of the wall clock (a shared, "
                         "loaded machine: preemption then does not count)")
    ns = ap.parse_args()

    import torch
    import fusertrace_capture as fc
    from fusertrace_capture import _capture, _writer
    import transformer_engine.pytorch as te
    from transformer_engine.pytorch.ops import fuser as fuser_mod
    from transformer_engine.common.recipe import MXFP8BlockScaling

    dev = torch.device(ns.device)
    g, d, t = ns.groups, 64, 256
    m = te.ops.Sequential(te.ops.GroupedLinear(g, d, 4 * d, bias=False, device=dev),
                          te.ops.ScaledSwiGLU(glu_interleave_size=32),
                          te.ops.GroupedLinear(g, 2 * d, d, bias=True, device=dev))
    m._module_groups = m._make_module_groups(m._modules.values())
    fz = m._module_groups[0]
    x = torch.randn(t, d, device=dev)
    splits = torch.full((g,), t // g, dtype=torch.int64, device=dev)
    probs = torch.rand(t, device=dev)
    extra = [[splits], [probs], [splits]]
    recipe = MXFP8BlockScaling()

    orig = fuser_mod.OperationFuser.maybe_fuse_ops
    cls, fn_cls = fuser_mod.OperationFuser, fuser_mod._OperationFuserAutogradFunction
    names = ("__init__", "maybe_fuse_ops", "_apply_fusions")
    plain = {k: cls.__dict__[k] for k in names if k in cls.__dict__}
    plain_fn = {k: fn_cls.__dict__[k] for k in ("forward", "backward")}
    _capture.patch(fuser_mod)
    hooked = {k: cls.__dict__[k] for k in plain}
    hooked_fn = {k: fn_cls.__dict__[k] for k in plain_fn}
    wrapped = fuser_mod.OperationFuser.maybe_fuse_ops

    def wrappers(on: bool) -> None:
        """Install the hook's wrappers, or put TE's (the stand-in's) own methods back."""
        for k in plain:
            setattr(cls, k, (hooked if on else plain)[k])
        for k in plain_fn:
            setattr(fn_cls, k, (hooked_fn if on else plain_fn)[k])
    n = ns.calls

    clock = time.thread_time_ns if ns.cpu_time else time.perf_counter_ns
    if ns.cpu_time and dev.type == "cpu":
        torch.set_num_threads(1)  # this thread's clock then sees all of torch's work

    def timed(fn) -> float:
        fn(fz, True, recipe, x, extra)  # warm (first call declares / builds)
        t0 = clock()
        for _ in range(n):
            fn(fz, True, recipe, x, extra)
        return (clock() - t0) / n

    lib_path, why = _writer.find_library(ns.lib)
    tmp = tempfile.TemporaryDirectory()
    k = [0]

    class NullWriter:
        kind = "null"
        path = None

        def call(self, *args):
            pass

        def backward(self, *args):
            pass

        def fuser(self, *args, **kw):
            pass

        def fuser_like(self, *args):
            pass

        def call_like(self, *args):
            pass

        def recipe(self, *args):
            pass

        def end(self, *args):
            pass

        def flush(self):
            pass

        def close(self):
            pass

    def capture_run(null=False, **kw):
        def run():
            k[0] += 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cap = fc.enable(os.path.join(tmp.name, str(k[0])), **kw)
            if null:
                wrapped(fz, True, recipe, x, extra)  # declares the fuser and recipe
                cap.writer = NullWriter()
            try:
                return timed(wrapped)
            finally:
                fc.disable()
        return run

    variants = [("baseline", lambda: timed(orig)), ("dormant", lambda: timed(wrapped))]
    if lib_path:
        variants.append(("C recorder", capture_run(lib=lib_path)))
        variants.append(("C rec splits=off", capture_run(lib=lib_path, splits="off")))
        if dev.type == "cuda":
            variants.append(("C rec splits=async", capture_run(lib=lib_path, splits="async")))
    else:
        print(f"# C recorder not available: {why}")
    variants.append(("JSONL", capture_run(jsonl=True)))
    variants.append(("hook, no writer", capture_run(null=True, jsonl=True)))

    res = {name: [] for name, _ in variants}
    for _ in range(ns.rounds if ns.workload != "standalone" else 0):
        for name, fn in variants:
            res[name].append(fn())

    clock_name = "thread CPU" if ns.cpu_time else "wall"
    if ns.workload != "standalone":
        print(f"# bench_capture: torch {torch.__version__}, python {sys.version.split()[0]}, "
              f"device {dev}, G={g}, {n} calls x {ns.rounds} rounds, {clock_name} time")
        table(variants, res)

    out = {}
    if ns.workload != "standalone":
        out["persistent"] = summary(variants, res)
    if ns.workload != "persistent":
        lin, scale = te.ops.BasicLinear(d, d, device=dev), te.ops.ConstantScale(0.5)
        xs = torch.randn(t, d, device=dev)

        def transient() -> float:
            with torch.no_grad():
                lin(scale(xs))  # warm
                t0 = clock()
                for _ in range(n // 2):
                    lin(scale(xs))
                return (clock() - t0) / (2 * (n // 2))

        def persistent() -> float:  # fusers made after this round's wrappers are set
            fl, fs = fuser_mod.OperationFuser([lin]), fuser_mod.OperationFuser([scale])
            with torch.no_grad():
                fl(fs(xs))  # warm (first call declares and builds)
                t0 = clock()
                for _ in range(n // 2):
                    fl(fs(xs))
                return (clock() - t0) / (2 * (n // 2))

        def unhooked(fn):
            def run():
                wrappers(False)
                try:
                    return fn()
                finally:
                    wrappers(True)
            return run

        def cap_standalone(fn, **kw):
            def run():
                k[0] += 1
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fc.enable(os.path.join(tmp.name, str(k[0])), **kw)
                try:
                    return fn()
                finally:
                    fc.disable()
            return run

        # each row's added time is against the no-hook row of its own kind (same run)
        sv = [("transient, no hook", unhooked(transient)), ("transient, dormant", transient)]
        if lib_path:
            sv.append(("transient, C recorder", cap_standalone(transient, lib=lib_path)))
        sv.append(("transient, JSONL", cap_standalone(transient, jsonl=True)))
        sv.append(("persistent, no hook", unhooked(persistent)))
        if lib_path:
            sv.append(("persistent, C recorder", cap_standalone(persistent, lib=lib_path)))
        sv.append(("persistent, JSONL", cap_standalone(persistent, jsonl=True)))
        sres = {name: [] for name, _ in sv}
        for _ in range(ns.rounds):
            for name, fn in sv:
                sres[name].append(fn())
        print(f"# bench_capture standalone: BasicLinear({d}, {d}) and ConstantScale called in "
              f"turn (no_grad, {t} rows), {2 * (n // 2)} calls x {ns.rounds} rounds, "
              f"{clock_name} time; transient: a new OperationFuser([op]) per call, as TE runs "
              f"a standalone op; persistent: one OperationFuser([op]) per op, made once")
        table(sv, sres, lambda name: name.split(",")[0] + ", no hook")
        out["standalone"] = summary(sv, sres, lambda name: name.split(",")[0] + ", no hook")
    if ns.json:
        with open(ns.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1, sort_keys=True)
    tmp.cleanup()
    return 0


def table(variants, res, base_of=None) -> None:
    """Best and median ns per call, each against the baseline row (base_of(name) names it;
    default: the first row)."""
    print(f"{'variant':<24}{'best ns':>9}{'added':>8}{'ratio':>7}{'median ns':>11}{'added':>8}")
    for name, _ in variants:
        b = base_of(name) if base_of else variants[0][0]
        base, base_med = min(res[b]), statistics.median(res[b])
        best, med = min(res[name]), statistics.median(res[name])
        print(f"{name:<24}{best:>9.0f}{best - base:>8.0f}{best / base:>7.2f}{med:>11.0f}"
              f"{med - base_med:>8.0f}")


def summary(variants, res, base_of=None) -> dict:
    """{variant: {"best_ns", "added_ns", "median_added_ns"}} for --json."""
    out = {}
    for name, _ in variants:
        b = base_of(name) if base_of else variants[0][0]
        best, med = min(res[name]), statistics.median(res[name])
        out[name] = {"best_ns": best, "added_ns": best - min(res[b]),
                     "median_added_ns": med - statistics.median(res[b])}
    return out


if __name__ == "__main__":
    sys.exit(main())
