"""Run a training script with the capture enabled:

    python3 -m fusertrace_capture.run [-o DIR] [--splits off|host|async] script.py [ARGS...]
    python3 -m fusertrace_capture.run [-o DIR] -m package.module [ARGS...]
    torchrun --nproc-per-node 8 -m fusertrace_capture.run -o traces/ train.py [ARGS...]

DIR defaults to $FUSERTRACE_CAPTURE, else ./fusertrace-traces. The script runs as __main__ with
sys.argv set to [script, ARGS...], as `python3 script.py ARGS` would. Its exit status is kept;
when it ends well but nothing was captured (TransformerEngine never imported, or no fuser call
ever ran), the runner says why on stderr and exits 1.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys

import fusertrace_capture
from fusertrace_capture import _capture


def _nothing_captured(cap) -> str:
    """Why the run captured no fuser call, or "" when it captured some."""
    if cap is not None and cap.seq > 0:
        return ""
    if _capture.FUSER_MODULE not in sys.modules:
        if "transformer_engine" in sys.modules:
            return ("transformer_engine was imported, but not its operation fuser "
                    f"({_capture.FUSER_MODULE}): the script ran no te.ops module")
        return ("transformer_engine was never imported: the script did not use TE (is it the "
                "training script, and does this interpreter see TE?)")
    fuser = getattr(sys.modules[_capture.FUSER_MODULE], "OperationFuser", None)
    if fuser is None or not fuser.__dict__.get("_ft_patched"):
        return ("TE's OperationFuser was not found to wrap (an unsupported TE version?): see the "
                "warnings above")
    return ("TE's operation fuser never ran: no te.ops.Sequential (or fusible op) was called "
            "while the capture was on")


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
    cap = fusertrace_capture.enable(ns.out, splits=ns.splits, jsonl=ns.jsonl or None)
    try:
        if ns.module is not None:
            sys.argv = [ns.module] + rest
            runpy.run_module(ns.module, run_name="__main__", alter_sys=True)
        else:
            script = rest[0]
            sys.argv = list(rest)
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise  # the script's own failure, as it is
    why = _nothing_captured(cap)
    if why:
        print(f"fusertrace_capture.run: nothing was captured into {ns.out}: {why}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
