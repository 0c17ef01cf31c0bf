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


def _split(argv):
    """(the runner's own options, the script or module's part): the runner's options end at
    the script name or at -m MODULE; everything after belongs to the script."""
    own = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-o", "--out", "--splits"):
            own += argv[i:i + 2]
            i += 2
        elif a.startswith(("--out=", "--splits=")) or a in ("--jsonl", "-h", "--help"):
            own.append(a)
            i += 1
        elif a == "-m":
            own += argv[i:i + 2]
            return own, argv[i + 2:]
        else:
            return own, argv[i:]
    return own, []


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python3 -m fusertrace_capture.run",
        usage="python3 -m fusertrace_capture.run [-o DIR] [--splits MODE] [--jsonl] "
              "(script.py | -m module) [ARGS...]",
        description="Run a script with TransformerEngine's op-fuser calls captured.")
    ap.add_argument("-o", "--out", default=os.environ.get("FUSERTRACE_CAPTURE")
                    or "fusertrace-traces", help="trace folder (one file per rank)")
    ap.add_argument("--splits", choices=fusertrace_capture.SPLIT_MODES, default=None,
                    help="how split sizes are read (default $FUSERTRACE_SPLITS or host)")
    ap.add_argument("--jsonl", action="store_true", help="write JSON Lines, not .ftdb")
    ap.add_argument("-m", dest="module", help="run a module instead of a script")
    own, rest = _split(sys.argv[1:] if argv is None else argv)
    ns = ap.parse_args(own)
    if ns.module is None and not rest:
        ap.error("a script or -m MODULE is required")
    fusertrace_capture.enable(ns.out, splits=ns.splits, jsonl=ns.jsonl or None)
    if ns.module is not None:
        sys.argv = [ns.module] + rest
        runpy.run_module(ns.module, run_name="__main__", alter_sys=True)
    else:
        script = rest[0]
        sys.argv = list(rest)
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
