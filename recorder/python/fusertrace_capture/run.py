"""Run a training script with the capture enabled:

    python3 -m fusertrace_capture.run [-o DIR] [--splits off|host|async] script.py [ARGS...]
    python3 -m fusertrace_capture.run [-o DIR] -m package.module [ARGS...]
    torchrun --nproc-per-node 8 -m fusertrace_capture.run -o traces/ train.py [ARGS...]

DIR defaults to $FUSERTRACE_CAPTURE, else ./fusertrace-traces. The script runs as __main__ with
sys.argv set to [script, ARGS...], as `python3 script.py ARGS` would.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys

import fusertrace_capture


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python3 -m fusertrace_capture.run",
        description="Run a script with TransformerEngine's op-fuser calls captured.")
    ap.add_argument("-o", "--out", default=os.environ.get("FUSERTRACE_CAPTURE")
                    or "fusertrace-traces", help="trace folder (one file per rank)")
    ap.add_argument("--splits", choices=fusertrace_capture.SPLIT_MODES, default=None,
                    help="how split sizes are read (default $FUSERTRACE_SPLITS or host)")
    ap.add_argument("--jsonl", action="store_true", help="write JSON Lines, not .ftdb")
    ap.add_argument("-m", dest="module", help="run a module instead of a script")
    ap.add_argument("script", nargs="?", help="the training script")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    ns = ap.parse_args(argv)
    if ns.module is None and ns.script is None:
        ap.error("a script or -m MODULE is required")
    fusertrace_capture.enable(ns.out, splits=ns.splits, jsonl=ns.jsonl or None)
    if ns.module is not None:
        rest = ([ns.script] if ns.script is not None else []) + ns.args
        sys.argv = [ns.module] + rest
        runpy.run_module(ns.module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [ns.script] + ns.args
        sys.path.insert(0, os.path.dirname(os.path.abspath(ns.script)))
        runpy.run_path(ns.script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
