"""Ground truth from the installed TransformerEngine: feed a trace's calls to TE's real
OperationFuser.maybe_fuse_ops and write what TE decided, per call, in the JSON-lines format of
`fusertrace replay --per-call`:

    {"seq":N,"fuser":F,"policy":"te-installed","build":true,"reset":false,"rebuilt":true}

(`rebuilt` is the captured flag, when the trace has it). Usage, where TE is installed:

    python3 -m fusertrace_capture.replay_te TRACE [-o OUT.jsonl] [--fusertrace PATH] [--summary]

TRACE is a .ftdb (read through `fusertrace export TRACE`, found via --fusertrace, $FUSERTRACE_BIN
or PATH) or a capture stream (.jsonl, read directly). How each call is rebuilt:
- one OperationFuser per recorded fuser, over stand-in basic ops (subclasses of TE's
  BasicOperation, one parameter each) whose parameter requires_grad is set to the call's op_rg;
  the input tensor's requires_grad is the call's input_rg; grad mode is passed as recorded;
- recipes are real objects of TE's recipe classes, built from the recorded attributes; the same
  recorded object identity gives the same Python object, and a new attribute state of the same
  object is applied to it by setattr (as a mutation in the captured run would have been);
- `build`: TE ran its fusion passes (OperationFuser._apply_fusions was called); `reset`: TE
  called reset_recipe_state on the ops.
The fusion functions TE has registered see only stand-in ops, so plan topology is not
reproduced; the decisions (build, reset) depend only on TE's cache logic, which is what this
checks against fusertrace's model.
"""
from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import shutil
import subprocess
import sys
from typing import Iterator, Optional


def _records_jsonl(path: str) -> Iterator[dict]:
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}:{n}: not JSON: {e}") from None


def _find_fusertrace(explicit: Optional[str]) -> str:
    for cand in (explicit, os.environ.get("FUSERTRACE_BIN"), shutil.which("fusertrace")):
        if cand and os.path.exists(cand):
            return cand
    raise SystemExit("replay_te: the `fusertrace` binary is needed to read .ftdb traces "
                     "(use --fusertrace PATH or FUSERTRACE_BIN, or pass a .jsonl stream)")


def _records_export(path: str, fusertrace: str) -> Iterator[dict]:
    proc = subprocess.Popen([fusertrace, "export", path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    n = 0
    for line in proc.stdout:
        n += 1
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                proc.kill()
                raise SystemExit(f"fusertrace export {path}: line {n}: not JSON: {e}") from None
    err = proc.stderr.read() if proc.stderr else ""
    if proc.wait() != 0:
        raise SystemExit(f"fusertrace export {path} failed ({proc.returncode}): {err.strip()}")


def records(path: str, fusertrace: Optional[str] = None) -> Iterator[dict]:
    """The capture records of a trace, in stream order."""
    if path.endswith(".jsonl") or path == "-":
        if path == "-":
            return (json.loads(line) for line in sys.stdin if line.strip())
        return _records_jsonl(path)
    return _records_export(path, _find_fusertrace(fusertrace))


# ---- recipes ----------------------------------------------------------------------------------
def _field_value(recipe_mod, f: dataclasses.Field, value):
    """The Python value of a recorded attribute for dataclass field f."""
    default = f.default if f.default is not dataclasses.MISSING else None
    if isinstance(default, enum.Enum) and isinstance(value, str):
        return type(default)[value]
    if value is not None and isinstance(value, str) and "Format" in str(f.type):
        fmt = getattr(recipe_mod, "Format", None)
        if fmt is not None and value in fmt.__members__:
            return fmt[value]
    if isinstance(value, dict) and default is not None and dataclasses.is_dataclass(default):
        return type(default)(**value)
    return value


class RecipeFactory:
    """Real recipe objects of the installed TE, one per recorded object identity."""

    def __init__(self) -> None:
        import transformer_engine.common.recipe as recipe_mod  # noqa: PLC0415
        self._mod = recipe_mod
        self._decl: dict = {}  # recipe id -> (type, obj, attrs)
        self._objs: dict = {}  # obj -> (python object, attrs currently applied)

    def declare(self, rec: dict) -> None:
        self._decl[rec["id"]] = (rec["type"], rec["obj"], rec.get("attrs") or {})

    def _settable(self, cls, attrs: dict) -> dict:
        fields = {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(
            cls) else {}
        out = {}
        for k, v in attrs.items():
            f = fields.get(k)
            if f is None or not f.init:
                continue
            if f.name == "qfactory" or (isinstance(v, str) and "Callable" in str(f.type)
                                        and v not in ("max", "most_recent")):
                continue  # callables are recorded by name only; TE's default stands
            out[k] = _field_value(self._mod, f, v)
        return out

    def get(self, rid: Optional[int]):
        if rid is None:
            return None
        rtype, obj, attrs = self._decl[rid]
        cur = self._objs.get(obj)
        if cur is not None and cur[1] == attrs:
            return cur[0]
        cls = getattr(self._mod, rtype, None)
        if cls is None:
            raise SystemExit(f"replay_te: the installed TE has no recipe class {rtype}")
        kwargs = self._settable(cls, attrs)
        if cur is None:
            if rtype == "CustomRecipe":
                kwargs.setdefault("qfactory", lambda *a, **k: None)
            try:
                r = cls(**kwargs)
            except Exception:  # pylint: disable=broad-except
                # A state TE's constructor rejects (it was reached by mutation): set it directly.
                r = cls.__new__(cls)
                for k, v in kwargs.items():
                    object.__setattr__(r, k, v)
        else:
            r = cur[0]
            old = self._settable(cls, cur[1])
            for k, v in kwargs.items():
                if old.get(k, object()) != v:
                    setattr(r, k, v)
        self._objs[obj] = (r, attrs)
        return r


# ---- fusers -----------------------------------------------------------------------------------
def _make_op_class():
    import torch  # noqa: PLC0415
    from transformer_engine.pytorch.ops.op import BasicOperation  # noqa: PLC0415

    class ReplayOp(BasicOperation):
        """A basic op with one parameter; counts reset_recipe_state and never quantizes."""

        def __init__(self, type_name: str) -> None:
            super().__init__()
            self.type_name = type_name
            self.weight = torch.nn.Parameter(torch.zeros(1))
            self.n_resets = 0

        def reset_recipe_state(self, *, recipe=None) -> None:  # pylint: disable=unused-argument
            self.n_resets += 1

        def op_forward(self, *args, **kwargs):
            raise NotImplementedError("replay_te ops do not run")

        def op_backward(self, *args, **kwargs):
            raise NotImplementedError("replay_te ops do not run")

    return ReplayOp


def replay(recs: Iterator[dict], out, policy: str = "te-installed") -> dict:
    """Run every call through TE; write one JSON line per call to out; return totals."""
    import torch  # noqa: PLC0415
    from transformer_engine.pytorch.ops import fuser as fuser_mod  # noqa: PLC0415

    cls = fuser_mod.OperationFuser
    raw = cls.__dict__.get("_apply_fusions")
    if not isinstance(raw, staticmethod):
        raise SystemExit("replay_te: OperationFuser._apply_fusions not found in this TE")
    builds = [0]
    inner = raw.__func__

    def counting(*args, **kwargs):
        builds[0] += 1
        return inner(*args, **kwargs)

    op_cls = _make_op_class()
    recipes = RecipeFactory()
    fusers: dict = {}  # id -> (OperationFuser, ops)
    inputs = {False: torch.zeros(1), True: torch.zeros(1, requires_grad=True)}
    tot = {"calls": 0, "builds": 0, "resets": 0, "with_rebuilt": 0, "agree": 0}
    cls._apply_fusions = staticmethod(counting)
    try:
        for rec in recs:
            t = rec.get("t")
            if t == "fuser":
                ops = [op_cls(o.get("type", "?")) for o in rec["ops"]]
                fusers[rec["id"]] = (cls(ops), ops)
            elif t == "recipe":
                recipes.declare(rec)
            elif t == "call":
                fz, ops = fusers[rec["fuser"]]
                for op, rg in zip(ops, rec["op_rg"]):
                    op.weight.requires_grad_(bool(rg))
                recipe = recipes.get(rec.get("recipe"))
                b0 = builds[0]
                r0 = ops[0].n_resets
                fz.maybe_fuse_ops(bool(rec["grad"]), recipe, inputs[bool(rec["input_rg"])],
                                  [[] for _ in ops])
                build = builds[0] != b0
                reset = ops[0].n_resets != r0
                line = {"seq": rec["seq"], "fuser": rec["fuser"], "policy": policy,
                        "build": build, "reset": reset}
                tot["calls"] += 1
                tot["builds"] += build
                tot["resets"] += reset
                if "rebuilt" in rec:
                    line["rebuilt"] = bool(rec["rebuilt"])
                    tot["with_rebuilt"] += 1
                    tot["agree"] += line["rebuilt"] == build
                out.write(json.dumps(line, separators=(",", ":")) + "\n")
    finally:
        cls._apply_fusions = raw
    return tot


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m fusertrace_capture.replay_te",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help=".ftdb trace or .jsonl capture stream ('-' = stdin)")
    ap.add_argument("-o", "--out", default="-", help="per-call JSON lines (default stdout)")
    ap.add_argument("--fusertrace", help="path of the fusertrace binary")
    ap.add_argument("--policy", default="te-installed", help="policy name written per line")
    ap.add_argument("--summary", action="store_true",
                    help="print totals and agreement with the captured rebuilt flags to stderr")
    ns = ap.parse_args(argv)
    try:
        import transformer_engine  # noqa: PLC0415
    except ImportError as e:
        print(f"replay_te: TransformerEngine is not importable here: {e}", file=sys.stderr)
        return 3
    out = sys.stdout if ns.out == "-" else open(ns.out, "w", encoding="utf-8")
    try:
        tot = replay(records(ns.trace, ns.fusertrace), out, ns.policy)
    finally:
        if out is not sys.stdout:
            out.close()
    if ns.summary:
        ver = getattr(transformer_engine, "__version__", "?")
        agree = (f"{tot['agree']}/{tot['with_rebuilt']} calls agree with the captured rebuilt"
                 if tot["with_rebuilt"] else "no captured rebuilt flags")
        print(f"replay_te: TE {ver}: {tot['calls']} calls, {tot['builds']} builds, "
              f"{tot['resets']} resets; {agree}", file=sys.stderr)
    return 0 if tot["agree"] == tot["with_rebuilt"] else 1


if __name__ == "__main__":
    sys.exit(main())
