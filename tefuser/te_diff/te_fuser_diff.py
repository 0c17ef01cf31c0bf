"""te_fuser_diff.py - cross-check the te-* policies against TransformerEngine's own OperationFuser.

A manual tool (not run by ctest: it needs a TE git checkout and PyTorch). For each TE ref it
reads transformer_engine/pytorch/ops/fuser.py and transformer_engine/common/recipe/__init__.py
from the checkout at run time (nothing of TE is copied into fusertrace), executes them with the
imports they need stubbed (op base classes, FP8GlobalStateManager, the autograd function, and
pydantic's dataclass replaced by the standard one), and drives TE's real OperationFuser.__call__
/ maybe_fuse_ops with the calls of a fusertrace trace:

- one OperationFuser per trace fuser, over stub basic ops that count reset_recipe_state and
  pre_first_fuser_forward and own one parameter whose requires_grad is set from the call's op_rg;
- one real recipe object per recorded (obj, type): a later recipe record with the same obj sets
  its recorded attributes on the same object, so mutations happen as in the captured run;
- FP8GlobalStateManager reports FP8 enabled with that recipe, or disabled for recipe null;
- grad mode through torch.set_grad_enabled, the input a tensor with the call's input_rg.

A build is counted by a joint (forward-backward) fusion function appended to TE's registry,
which runs exactly once per build; a reset is counted when every basic op's reset_recipe_state
ran. The per-call decisions are compared with `fusertrace replay --per-call` for the policy that
models each ref; every mismatch is printed as seq, fuser, policy, TE's and the model's decision.
On calls that reuse a plan, the model's plan text must also equal the one it built at the call
whose plan TE is using (TE's _forward_ops list is traced back to the build that made it), so a
store that restores the wrong entry is caught too.

Refs and the policy each is checked against (defaults):
  37e660a36^           te-pre3410       (before PR 3410)
  37e660a36            te-3410-commit1  (PR 3410, first commit)
  refs/pull/3410/head  te-3410          (PR 3410 head)

Usage (python with PyTorch, e.g. Debian's python3-torch):
  python3 tefuser/te_diff/te_fuser_diff.py --te-repo TE_GIT_DIR --cli build/cli/fusertrace \
      [TRACE.jsonl|TRACE.ftdb ...] [--edge] [--scenarios STEPS] [--random N [--seed S]] \
      [--ref REF=POLICY ...] [--quiet]
  e.g. traces/*.jsonl --edge --scenarios 3 --random 1000 --quiet
--edge adds hand-made traces (boundary moves, DelayedScaling history around type switches, the
NVTE_BACKWARD_OVERRIDE default, one recipe object shared and mutated across fusers); --scenarios
every `fusertrace synth` scenario with steps=STEPS; --random N synth traces with a random
scenario and random keys (recipes, detours, rht flips, backward_override and amax_history_len
changes, evals, frozen layers, CUDA graphs, pipeline stages). JSONL traces are imported first;
every trace is exported back from its .ftdb so that TE and the replayer see the same records. Exit status 1 when any decision differs, 2 on a usage or tool
error.
"""
import argparse, ast, dataclasses, enum, functools, json, os, random, subprocess, sys, tempfile
import types

import torch

DEFAULT_REFS = [("37e660a36^", "te-pre3410"), ("37e660a36", "te-3410-commit1"),
                ("refs/pull/3410/head", "te-3410")]


def die(msg):
    print(f"te_fuser_diff: {msg}", file=sys.stderr)
    sys.exit(2)


@functools.lru_cache(None)
def git_show(repo, ref, path):
    return subprocess.check_output(["git", "-C", repo, "show", f"{ref}:{path}"], text=True)


# ---- recipes: TE's own recipe module, pydantic's dataclass replaced by the standard one -------
def load_recipes(repo, ref, env=None):
    """The recipe module at ref. Dataclass defaults read NVTE_* variables (e.g.
    NVTE_BACKWARD_OVERRIDE) when the class is defined, so the trace's header env is applied
    while it loads, as in the captured process."""
    old_env = {k: os.environ.get(k) for k in os.environ if k.startswith("NVTE_")}
    for k in old_env: del os.environ[k]
    for k, v in (env or {}).items():
        if k.startswith("NVTE_"): os.environ[k] = str(v)
    pyd = types.ModuleType("pydantic")
    pyd_dc = types.ModuleType("pydantic.dataclasses")
    pyd_dc.dataclass = dataclasses.dataclass
    pyd.dataclasses = pyd_dc
    saved = {k: sys.modules.get(k) for k in ("pydantic", "pydantic.dataclasses")}
    sys.modules["pydantic"], sys.modules["pydantic.dataclasses"] = pyd, pyd_dc
    mod = types.ModuleType(f"te_recipe_{ref}")
    mod.__file__ = "transformer_engine/common/recipe/__init__.py"
    sys.modules[mod.__name__] = mod  # dataclasses looks the module up by name
    try:
        exec(compile(git_show(repo, ref, mod.__file__), mod.__file__, "exec"), mod.__dict__)
    finally:
        for k, v in saved.items():
            if v is None: sys.modules.pop(k, None)
            else: sys.modules[k] = v
        for k in [k for k in os.environ if k.startswith("NVTE_")]: del os.environ[k]
        os.environ.update({k: v for k, v in old_env.items() if v is not None})
    return mod


def set_recipe_attrs(obj, attrs):
    for k, v in attrs.items():
        cur = getattr(obj, k, None)
        if isinstance(cur, enum.Enum) and isinstance(v, str):
            v = type(cur)[v]
        setattr(obj, k, v)


def new_recipe(mod, rtype, attrs):
    cls = getattr(mod, rtype)
    try:
        obj = cls()
    except Exception:  # a required field or a __post_init__ check: take the class defaults
        obj = object.__new__(cls)
    set_recipe_attrs(obj, attrs)
    return obj


# ---- OperationFuser: TE's fuser.py with its relative imports stubbed --------------------------
class FusibleOperation(torch.nn.Module):
    is_fused_op = False


class BasicOperation(FusibleOperation):
    pass


class FusedOperation(FusibleOperation):
    is_fused_op = True


class OperationContext:
    pass


class StubOp(BasicOperation):
    """A basic op: one parameter, no extra tensors, counters for TE's hooks."""
    num_extra_inputs = 0
    num_extra_outputs = 0
    _extra_input_channels = ()
    _extra_output_channels = ()
    _extra_output_to_caller = ()

    def __init__(self, type_name):
        super().__init__()
        self.type_name = type_name
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.resets = 0
        self.first = 0

    def _lock_extra_tensor_channels(self):
        pass

    def reset_recipe_state(self, *, recipe=None):
        self.resets += 1

    def pre_first_fuser_forward(self):
        self.first += 1

    def pre_fuser_forward(self, *, requires_grad):
        pass


class FP8GSM:
    recipe = None

    @classmethod
    def is_fp8_enabled(cls):
        return cls.recipe is not None

    @classmethod
    def get_fp8_recipe(cls):
        return cls.recipe


class StubAutogradFunction:
    """Stands in for _OperationFuserAutogradFunction: no kernels run."""

    @staticmethod
    def forward(ctx, input_, *args):
        return input_

    @staticmethod
    def apply(input_, *args):
        return input_


def load_fuser(repo, ref, recipes):
    path = "transformer_engine/pytorch/ops/fuser.py"
    tree = ast.parse(git_show(repo, ref, path))
    provided = dict(FP8GlobalStateManager=FP8GSM, Recipe=recipes.Recipe,
                    DelayedScaling=recipes.DelayedScaling, BasicOperation=BasicOperation,
                    FusibleOperation=FusibleOperation, FusedOperation=FusedOperation,
                    OperationContext=OperationContext, prepare_for_saving=None,
                    restore_from_func_ctx=None)
    ns = {"__name__": f"te_fuser_{ref}"}
    body = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            for a in node.names:
                name = a.asname or a.name
                if name not in provided:
                    die(f"{ref}:{path}: relative import of {name!r} has no stub")
                ns[name] = provided[name]
            continue
        body.append(node)
    tree.body = body
    exec(compile(tree, f"{ref}:{path}", "exec"), ns)
    ns["_OperationFuserAutogradFunction"] = StubAutogradFunction
    fuser_cls = ns["OperationFuser"]
    for reg in ("forward_backward_fusion_functions", "forward_fusion_functions",
                "backward_fusion_functions"):
        if getattr(fuser_cls, reg):
            die(f"{ref}: {reg} is not empty after loading fuser.py")
    return fuser_cls


# ---- driving one trace through one ref ---------------------------------------------------------
class Build:
    """A joint fusion function appended to TE's registry: runs once per plan build."""
    count = 0

    @classmethod
    def fn(cls, ops, *, recipe):
        cls.count += 1
        return ops


def run_te(records, fuser_cls, recipes):
    fuser_cls.forward_backward_fusion_functions[:] = [Build.fn]
    fusers, ops_of, recipe_decl, objs, out, firsts = {}, {}, {}, {}, {}, {}
    plan_src, keep = {}, []  # id(forward plan list) -> seq of the call that built it
    for rec in records:
        t = rec.get("t")
        if t == "fuser" and "of" in rec:
            # the same OperationFuser after its ops changed attributes (the stubs have none)
            ops_of[rec["id"]] = ops_of[rec["of"]]
            fusers[rec["id"]] = fusers[rec["of"]]
        elif t == "fuser":
            ops = [StubOp(o["type"]) for o in rec["ops"]]
            ops_of[rec["id"]] = ops
            fusers[rec["id"]] = fuser_cls(ops)
        elif t == "recipe":
            recipe_decl[rec["id"]] = rec
        elif t == "call":
            ops = ops_of[rec["fuser"]]
            recipe = None
            if rec.get("recipe") is not None:
                d = recipe_decl[rec["recipe"]]
                key = (d["obj"], d["type"])
                if key not in objs:
                    objs[key] = new_recipe(recipes, d["type"], d.get("attrs", {}))
                else:
                    set_recipe_attrs(objs[key], d.get("attrs", {}))
                recipe = objs[key]
            FP8GSM.recipe = recipe
            for op, rg in zip(ops, rec["op_rg"]):
                op.weight.requires_grad_(bool(rg))
            x = torch.zeros(1, requires_grad=bool(rec["input_rg"]))
            r0 = [op.resets for op in ops]
            b0 = Build.count
            with torch.set_grad_enabled(bool(rec["grad"])):
                fusers[rec["fuser"]](x)
            dr = {op.resets - r for op, r in zip(ops, r0)}
            if len(dr) > 1 or dr - {0, 1}:
                die(f"seq {rec['seq']}: reset_recipe_state ran {sorted(dr)} times "
                                 "on the ops of one fuser")
            built = Build.count - b0 > 0
            plan = fusers[rec["fuser"]]._forward_ops
            if built:
                keep.append(plan)  # keeps ids unique
                plan_src[id(plan)] = rec["seq"]
            out[rec["seq"]] = (rec["fuser"], built, dr == {1}, plan_src[id(plan)])
            firsts[rec["fuser"]] = [op.first for op in ops]
    FP8GSM.recipe = None
    bad_first = [u for u, f in firsts.items() if f and f != [1] * len(f)]
    return out, bad_first


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        die(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


# ---- hand-made edge cases (calls the synthesizer does not produce) ----------------------------
def edge_traces():
    """(name, JSONL text) pairs: boundaries, defaults, the NVTE_BACKWARD_OVERRIDE default,
    DelayedScaling history around type switches, shared recipe objects."""
    def trace(env, fusers, recipes, calls):
        out = [dict(t="header", format="fusertrace-capture", version=1, env=env)]
        attrs = {"BasicLinear": {"in_features": 64, "out_features": 64},
                 "GroupedLinear": {"num_groups": 2, "in_features": 64, "out_features": 64}}
        out += [dict(t="fuser", id=i + 1, ops=[{"type": o, "attrs": attrs.get(o, {})}
                                                for o in ops])
                for i, ops in enumerate(fusers)]
        out += [dict(t="recipe", id=i + 1, type=t, obj=o, attrs=a)
                for i, (t, o, a) in enumerate(recipes)]
        for seq, (u, r, g, irg, org) in enumerate(calls):
            out.append(dict(t="call", seq=seq, fuser=u, recipe=r, grad=g, input_rg=irg,
                            op_rg=org, device=0))
        return "\n".join(json.dumps(x, separators=(",", ":")) for x in out) + "\n"
    env = {"device_cc": "10.0"}
    F3 = ["BasicLinear", "GELU", "BasicLinear"]
    yield "edge-boundary", trace(env, [F3], [], [
        (1, None, False, False, [False, False, False]),  # f = n
        (1, None, True, False, [False, False, False]),   # f = n again: same key
        (1, None, True, False, [False, False, True]),    # f = 2
        (1, None, True, False, [False, True, True]),     # f = 1
        (1, None, True, True, [False, False, False]),    # f = 0
        (1, None, False, True, [True, True, True]),      # grad off: f = n
        (1, None, True, False, [False, False, True]),
        (1, None, True, False, [False, False, False])])
    D = "DelayedScaling"
    yield "edge-delayed-history", trace(env, [F3], [
        (D, 1, {}), (D, 2, {"amax_history_len": 1024}), (D, 2, {"amax_history_len": 16}),
        ("MXFP8BlockScaling", 3, {}), (D, 4, {"amax_history_len": 16}),
        (D, 4, {"amax_history_len": 1024}), ("Float8CurrentScaling", 5, {})], [
        (1, 1, True, True, [True] * 3), (1, 2, True, True, [True] * 3),
        (1, 2, False, True, [True] * 3), (1, 3, True, True, [True] * 3),
        (1, 3, False, True, [True] * 3), (1, 4, True, True, [True] * 3),
        (1, 5, True, True, [True] * 3), (1, 5, False, True, [True] * 3),
        (1, 6, True, True, [True] * 3), (1, 7, True, True, [True] * 3),
        (1, 6, True, True, [True] * 3), (1, None, True, True, [True] * 3),
        (1, 5, True, True, [True] * 3), (1, 1, False, True, [True] * 3)])
    M = "MXFP8BlockScaling"
    yield "edge-override-env-default", trace(
        dict(env, NVTE_BACKWARD_OVERRIDE="high_precision"), [F3], [
            (M, 1, {}), (M, 2, {"backward_override": None}),
            (M, 3, {"backward_override": "high_precision"}), (M, 1, {"backward_override": None}),
            ("NVFP4BlockScaling", 4, {})], [
            (1, 1, True, True, [True] * 3), (1, 2, True, True, [True] * 3),
            (1, 3, True, True, [True] * 3), (1, 4, True, True, [True] * 3),
            (1, 5, True, True, [True] * 3), (1, 4, False, True, [True] * 3),
            (1, 2, False, True, [True] * 3)])
    yield "edge-shared-object", trace(env, [F3, ["GroupedLinear"], F3], [
        ("NVFP4BlockScaling", 7, {"disable_rht": False}),
        ("NVFP4BlockScaling", 7, {"disable_rht": True}), (M, 8, {})], [
        (1, 1, False, False, [True] * 3), (2, 1, False, False, [True]),
        (3, None, False, False, [True] * 3), (1, 1, True, False, [True] * 3),
        (2, 2, True, False, [False]), (3, 2, True, False, [False, True, True]),
        (1, 3, True, False, [True] * 3), (2, 3, False, False, [True]),
        (1, 2, True, False, [True] * 3), (2, 2, True, False, [True]),
        (3, 1, False, False, [True] * 3), (3, 1, True, False, [False, False, False])])


# ---- random synthetic traces -------------------------------------------------------------------
SCENARIOS = ["demo", "recompute", "eval-interleave", "rht-switch", "backward-override",
             "amax-history", "frozen", "pipeline-2dev", "cuda-graphs", "recipe-zoo"]
RECIPES = ["bf16", "delayed", "current", "mxfp8", "block", "nvfp4", "nvfp4:disable_rht=true",
           "custom", "delayed:amax_history_len=16", "mxfp8:backward_override=high_precision",
           "nvfp4:backward_override=dequantized"]


def random_keys(r):
    k = dict(steps=r.randint(2, 6), microbatches=r.randint(1, 3), layers=r.randint(2, 4),
             experts=4, tokens=64, recompute=r.randint(0, 1), recompute_layers=r.randint(1, 2),
             eval_every=r.choice([0, 1, 2, 3]), eval_microbatches=r.randint(1, 2),
             eval_recipe=r.choice(["same", "bf16"] + RECIPES),
             recipe=r.choice(RECIPES + ["delayed", "delayed:amax_history_len=16"]),
             bf16_first=r.randint(0, 1), bf16_last=r.randint(0, 1),
             switch_step=r.choice([-1, -1, 1, 2, 3]), switch_recipe=r.choice(RECIPES),
             rht_flip_every=r.choice([0, 0, 1, 2]), detour_every=r.choice([0, 0, 2, 3]),
             detour_steps=r.randint(1, 2), detour_recipe=r.choice(RECIPES),
             detour_flip_rht=r.randint(0, 1), bo_every=r.choice([0, 0, 1, 2]),
             bo_mutate=r.randint(0, 1), amax_every=r.choice([0, 0, 1, 2]),
             amax_mutate=r.randint(0, 1), frozen_layers=r.choice([0, 0, 1, 2]),
             frozen_ops=r.choice(["all", "fc1"]), unfreeze_step=r.choice([-1, 1, 2, 3]),
             graphs=r.choice([0, 0, 1]), graph_warmup=r.randint(1, 3),
             stages=r.choice([1, 1, 2]), shared_expert=r.randint(0, 1),
             dense_layers=r.randint(0, 1), tp=r.choice([1, 2]))
    # keep to combinations the synthesizer accepts
    base = k["recipe"].split(":")[0]
    if base != "delayed": k["amax_every"] = 0
    if base == "delayed" and "backward_override" not in k["recipe"]: k["bo_every"] = 0
    if base != "nvfp4": k["rht_flip_every"] = 0
    if k["graphs"]: k["recompute"] = 0
    if k["detour_every"] and k["detour_steps"] >= k["detour_every"]: k["detour_steps"] = 1
    if r.random() < 0.3:
        k["layer_recipes"] = ",".join(r.choice(RECIPES) for _ in range(r.randint(1, 4)))
    if k["stages"] > 1 and r.random() < 0.5 and k["layers"] >= 4: k["virtual_stages"] = 2
    if k["stages"] > 1 and r.random() < 0.3: k["stage_only"] = r.randint(0, 1)
    if k["recipe"].startswith("delayed") or r.random() < 0.2:
        k["amax_lens"] = r.choice(["1024,16", "16,32,16", "8"])
    return k


def synth(cli, scenario, keys, seed, out):
    cmd = [cli, "synth", scenario, "--seed", str(seed), "--jsonl", out]
    for k, v in keys.items():
        cmd += ["--set", f"{k}={v}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode == 0, p.stderr.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", help="JSONL or .ftdb traces")
    ap.add_argument("--te-repo", required=True, help="TE git directory (bare is fine)")
    ap.add_argument("--cli", required=True, help="path of the fusertrace binary")
    ap.add_argument("--ref", action="append", default=[], metavar="REF=POLICY",
                    help="ref and the policy that models it (repeatable; default: the three "
                    "refs of PR 3410)")
    ap.add_argument("--edge", action="store_true", help="also check the built-in edge cases")
    ap.add_argument("--write-edge", metavar="DIR",
                    help="write the edge cases as DIR/te-NAME.jsonl and exit (traces/ holds "
                    "them as canned traces with golden counts)")
    ap.add_argument("--scenarios", type=int, default=0, metavar="STEPS",
                    help="also check every synth scenario with steps=STEPS (0: none)")
    ap.add_argument("--random", type=int, default=0, metavar="N",
                    help="also check N random synth traces (random scenario and keys)")
    ap.add_argument("--seed", type=int, default=1, help="seed of --random")
    ap.add_argument("--quiet", action="store_true", help="print only mismatches and totals")
    ap.add_argument("--max-print", type=int, default=20, help="mismatches printed per trace")
    a = ap.parse_args()
    refs = [tuple(r.split("=", 1)) for r in a.ref] or DEFAULT_REFS
    if a.write_edge:
        for name, text in edge_traces():
            with open(os.path.join(a.write_edge, f"te-{name}.jsonl"), "w") as f: f.write(text)
        return 0
    total_bad = 0
    totals = {ref: [0, 0, 0, 0] for ref, _ in refs}  # calls, mismatches, builds, resets
    n_traces = skipped = 0
    with tempfile.TemporaryDirectory() as tmp:
        todo = [(t, t) for t in a.traces]
        if a.edge:
            for name, text in edge_traces():
                path = os.path.join(tmp, name + ".jsonl")
                with open(path, "w") as f: f.write(text)
                todo.append((name, path))
        for sc in SCENARIOS if a.scenarios else []:
            path = os.path.join(tmp, f"{sc}.jsonl")
            ok, msg = synth(a.cli, sc, {"steps": a.scenarios}, 1, path)
            if not ok: die(f"synth {sc}: {msg}")
            todo.append((f"synth {sc} steps={a.scenarios}", path))
        r = random.Random(a.seed)
        for i in range(a.random):
            sc, keys, seed = r.choice(SCENARIOS), random_keys(r), r.randint(1, 1 << 30)
            path = os.path.join(tmp, f"rand{i}.jsonl")
            ok, msg = synth(a.cli, sc, keys, seed, path)
            if not ok:  # a key combination the synthesizer rejects
                skipped += 1
                continue
            todo.append((f"synth {sc} --seed {seed} " +
                         " ".join(f"--set {k}={v}" for k, v in keys.items()), path))
        for ti, (name, trace) in enumerate(todo):
            db = trace
            if not trace.endswith(".ftdb"):
                db = os.path.join(tmp, f"t{ti}.ftdb")
                run([a.cli, "import", trace, "-o", db])
            records = [json.loads(l) for l in run([a.cli, "export", db]).splitlines() if l]
            env = next((x.get("env") or {} for x in records if x.get("t") == "header"), {})
            pc = os.path.join(tmp, f"t{ti}.pc")
            run([a.cli, "replay", db, "--policy", ",".join(p for _, p in refs), "--per-call", pc])
            model = {}
            with open(pc) as f:
                for l in f:
                    j = json.loads(l)
                    model[(j["policy"], j["seq"])] = (j["fuser"], j["build"], j["reset"],
                                                      j["plan"])
            n_traces += 1
            for ref, pol in refs:
                recipes = load_recipes(a.te_repo, ref, env)
                te, bad_first = run_te(records, load_fuser(a.te_repo, ref, recipes), recipes)
                bad = 0
                for seq, (u, b, rs, src) in te.items():
                    m = model.get((pol, seq))
                    # the plan in use must be the one the model built at TE's building call
                    if m is not None and m[:3] == (u, b, rs) and m[3] == model[(pol, src)][3]:
                        continue
                    bad += 1
                    if bad <= a.max_print:
                        got = "absent" if m is None else f"build={m[1]} reset={m[2]}"
                        if m is not None and m[:3] == (u, b, rs):
                            got += f" plan {m[3]}, not the plan built at seq {src}"
                        print(f"MISMATCH [{name}] {ref} ({pol}) seq {seq} fuser {u}: "
                              f"TE build={b} reset={rs}, model {got}")
                extra = sum(1 for (p, s) in model if p == pol and s not in te)
                bad += extra
                if extra: print(f"MISMATCH [{name}] {pol}: {extra} calls the model has, TE not")
                for u in bad_first:
                    print(f"NOTE [{name}] {ref}: fuser {u}: pre_first_fuser_forward ran "
                          "other than once per op")
                nb = sum(1 for v in te.values() if v[1])
                nr = sum(1 for v in te.values() if v[2])
                if not a.quiet or bad:
                    print(f"[{name}] {ref} ({pol}): {len(te)} calls, TE {nb} builds {nr} resets, "
                          f"{bad} mismatches")
                t = totals[ref]
                t[0] += len(te); t[1] += bad; t[2] += nb; t[3] += nr
                total_bad += bad
    if skipped: print(f"{skipped} random key sets rejected by synth (not checked)")
    for ref, pol in refs:
        t = totals[ref]
        print(f"total {ref} ({pol}): {n_traces} traces, {t[0]} calls ({t[2]} builds, "
              f"{t[3]} resets), {t[1]} mismatches")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
