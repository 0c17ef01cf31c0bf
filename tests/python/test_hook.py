"""In-process tests of fusertrace_capture on the TE stand-in (FT_STANDIN_TE as set, default 3410):
what is recorded per fuser, recipe and call, that TE's behaviour is unchanged, and how the
capture degrades. Writes JSON Lines (read back directly) unless a test says otherwise."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest
import warnings

import torch

import fusertrace_capture as fc
from fusertrace_capture import _capture, _describe, _writer
import transformer_engine.pytorch as te
from transformer_engine import STANDIN_BEHAVIOUR
from transformer_engine.common.recipe import (DelayedScaling, Float8CurrentScaling, Format,
                                              MXFP8BlockScaling, NVFP4BlockScaling)

import ftutil


def mlp(g=4, d=64):
    return te.ops.Sequential(te.ops.GroupedLinear(g, d, 4 * d, bias=False),
                             te.ops.ScaledSwiGLU(glu_interleave_size=32),
                             te.ops.GroupedLinear(g, 2 * d, d, bias=True))


def mlp_inputs(t=16, d=64, rg=False, splits=(4, 0, 8, 4)):
    x = torch.randn(t, d, requires_grad=rg)
    s = torch.tensor(splits, dtype=torch.int64)
    p = torch.rand(t)
    return x, s, p


class CaptureCase(unittest.TestCase):
    """Each test captures into its own folder with the JSON Lines writer."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name
        self.cap = fc.enable(self.out, jsonl=True, splits="host")
        te.FP8GlobalStateManager.set_autocast_state((False, False, None, None, False, False))

    def tearDown(self):
        fc.disable()
        fc.set_step(None)
        fc.set_phase(None)
        self.tmp.cleanup()

    def records(self, t=None):
        fc.disable()
        recs = ftutil.read_jsonl(os.path.join(self.out, "rank0.jsonl"))
        return [r for r in recs if t is None or r["t"] == t]


class TestDescribe(unittest.TestCase):
    def test_op_attrs_grouped_linear(self):
        op = te.ops.GroupedLinear(8, 64, 128, bias=True, scale_bias=True, dtype=torch.bfloat16)
        d = _describe.op_description(op)
        self.assertEqual(d["type"], "GroupedLinear")
        self.assertEqual(d["attrs"], {"num_groups": 8, "in_features": 64, "out_features": 128,
                                      "bias": True, "scale_bias": True,
                                      "single_grouped_weight": False, "dtype": "bfloat16"})

    def test_op_attrs_gated_activations(self):
        d = _describe.op_description(te.ops.ScaledClampedQGeGLU(
            32, activation_recompute_in_mlp=True, limit=5.0, alpha=1.5, glu_linear_offset=0.5))
        self.assertEqual(d["attrs"], {"glu_interleave_size": 32,
                                      "activation_recompute_in_mlp": True, "limit": 5.0,
                                      "alpha": 1.5, "glu_linear_offset": 0.5})
        d = _describe.op_description(te.ops.ScaledSwiGLU())
        self.assertEqual(d["attrs"], {"glu_interleave_size": None,
                                      "activation_recompute_in_mlp": False})

    def test_op_attrs_linear_and_small_ops(self):
        d = _describe.op_description(te.ops.BasicLinear(16, 32, tensor_parallel_mode="row",
                                                        userbuffers_options={"comm": 1}))
        self.assertEqual(d["attrs"]["tensor_parallel_mode"], "row")
        self.assertEqual(d["attrs"]["userbuffers"], {"comm": 1})  # TE's options, as they are
        self.assertIsNone(_describe.op_description(te.ops.BasicLinear(16, 32))["attrs"]
                          ["userbuffers"])
        self.assertEqual(d["attrs"]["dtype"], "float32")
        self.assertEqual(_describe.op_description(te.ops.AddExtraInput(in_place=True))["attrs"],
                         {"in_place": True})
        self.assertEqual(_describe.op_description(te.ops.ConstantScale(0.25))["attrs"],
                         {"scale": 0.25})
        self.assertEqual(_describe.op_description(te.ops.Bias(12))["attrs"], {"size": 12})
        self.assertEqual(_describe.op_description(te.ops.ReLU()), {"type": "ReLU", "attrs": {}})

    def test_recipe_attrs_every_field_enums_by_name(self):
        a = _describe.recipe_attrs(NVFP4BlockScaling(disable_rht=True))
        self.assertIs(a["disable_rht"], True)
        self.assertEqual(a["fp4_format"], "E2M1")
        self.assertIsNone(a["backward_override"])
        self.assertNotIn("fp4_quant_fwd_inp", a)  # derived in __post_init__, not a field
        a = _describe.recipe_attrs(Float8CurrentScaling(fp8_format=Format.E4M3))
        self.assertEqual(a["fp8_format"], "E4M3")
        self.assertEqual(a["fp8_gemm_fprop"], {"use_split_accumulator": False})
        a = _describe.recipe_attrs(DelayedScaling(amax_compute_algo=torch.amax))
        self.assertIn("amax", a["amax_compute_algo"])
        json.dumps(a)  # JSON-able

    def test_header_env_has_gates_and_flags(self):
        os.environ["NVTE_TEST_FLAG_FOR_CAPTURE"] = "7"
        try:
            h = _describe.header(3, 8)
        finally:
            del os.environ["NVTE_TEST_FLAG_FOR_CAPTURE"]
        self.assertEqual((h["rank"], h["world_size"]), (3, 8))
        self.assertEqual(h["env"]["NVTE_TEST_FLAG_FOR_CAPTURE"], "7")
        self.assertEqual(h["env"]["world_size"], 8)
        self.assertIn("NVTE_CUTEDSL_FUSED_GROUPED_MLP", h["env"])
        # what the process did not have is null: no CUDA device, no cuDNN frontend package
        self.assertIsNone(h["env"]["device_cc"])
        self.assertIsNone(h["env"]["cudnn_frontend"])
        self.assertEqual(h["env"]["cublaslt"], "13.4.0")
        self.assertTrue(h["te_version"].startswith("2.20"))
        self.assertEqual(h["torch_version"], torch.__version__)


F = "transformer_engine.pytorch.ops.fused."
TE_REGISTRY = {
    "forward_backward": [],  # the grouped-MLP ones only register with CUDA and cuDNN
    "forward": [F + "userbuffers_forward_linear.UserbuffersForwardLinear.fuse_forward_ops",
                F + "forward_linear_bias_add.ForwardLinearBiasAdd.fuse_forward_ops",
                F + "forward_linear_bias_activation.ForwardLinearBiasActivation.fuse_forward_ops",
                F + "forward_linear_scale_add.ForwardLinearScaleAdd.fuse_forward_ops"],
    "backward": [F + "userbuffers_backward_linear.UserbuffersBackwardLinear.fuse_backward_ops",
                 F + "backward_linear_add.BackwardLinearAdd.fuse_backward_ops",
                 F + "backward_linear_scale.BackwardLinearScale.fuse_backward_ops",
                 F + "backward_activation_bias.BackwardActivationBias.fuse_backward_ops",
                 F + "backward_add_rmsnorm.BackwardAddRMSNorm.fuse_backward_ops"]}


def _my_fusion(ops, **unused):  # a user's fusion function, registered after TE's
    return list(ops)


class TestCaptureFidelity(CaptureCase):
    """What the model reads comes from the capture: TE's registry, the availability checks,
    group sizes, Userbuffers options, recipe base classes."""

    def test_header_records_te_registry_in_order(self):
        x, s, p = mlp_inputs()
        mlp()(x, s, p, s)
        h = self.records("header")[0]
        self.assertEqual(h["te_fusions"], TE_REGISTRY)
        self.assertEqual(h["env"]["NVTE_CUTEDSL_FUSED_GROUPED_MLP"], "0")
        self.assertEqual(h["env"]["world_size"], 1)

    def test_collectives_and_userbuffers_recorded(self):
        seq = te.ops.Sequential(
            te.ops.BasicLinear(8, 8, userbuffers_options={"comm_name": "fc1"}),
            te.ops.Bias(8), te.ops.ReduceScatter(), te.ops.AllGather(), te.ops.AllReduce())
        seq(torch.randn(4, 8))
        ops = self.records("fuser")[0]["ops"]
        self.assertEqual(ops[0]["attrs"]["userbuffers"], {"comm_name": "fc1"})
        self.assertEqual(ops[2]["attrs"], {"process_group_size": 1})
        self.assertEqual(ops[3]["attrs"], {"process_group_size": 1})
        self.assertEqual(ops[4]["attrs"], {})  # no torch.distributed: TE would not run it either

    def test_recipe_subclass_records_te_base(self):
        import dataclasses  # noqa: PLC0415

        @dataclasses.dataclass(repr=False)
        class MyMXFP8(MXFP8BlockScaling):
            tag: str = "mine"

        m = mlp()
        x, s, p = mlp_inputs()
        for r in (MyMXFP8(), MXFP8BlockScaling()):
            with te.autocast(enabled=True, recipe=r):
                m(x, s, p, s)
        fc.disable()
        src = os.path.join(self.out, "rank0.jsonl")
        recs = [r for r in ftutil.read_jsonl(src) if r["t"] == "recipe"]
        # the replay keys plans by type(recipe) as TE does: the switch to the base class rebuilds
        calls = [r for r in ftutil.read_jsonl(src) if r["t"] == "call"]
        self.assertEqual([c["rebuilt"] for c in calls], [True, True])
        ftdb = os.path.join(self.out, "t.ftdb")
        ftutil.cli("import", src, "-o", ftdb)
        pol = "te-3410" if STANDIN_BEHAVIOUR == "3410" else "te-pre3410"
        out = ftutil.cli("replay", ftdb, "--policy", pol, "--per-call", "-").stdout
        lines = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        self.assertEqual([ln["build"] for ln in lines], [True, True])
        self.assertEqual(recs[0]["type"], "MyMXFP8")
        self.assertEqual(recs[0]["attrs"]["__te_base__"], "MXFP8BlockScaling")
        self.assertEqual(recs[0]["attrs"]["tag"], "mine")
        self.assertEqual(recs[1]["type"], "MXFP8BlockScaling")
        self.assertNotIn("__te_base__", recs[1]["attrs"])

    def test_op_attribute_change_redeclares_the_fuser(self):
        """A change of an attribute the model reads between two calls of one fuser is recorded
        as the same instance redeclared ("of"), and the replay keeps its plan cache: TE's own
        decision on the next call (no rebuild for a cached key at PR 3410's head) agrees."""
        lin = te.ops.BasicLinear(8, 8)
        seq = te.ops.Sequential(lin, te.ops.Bias(8))
        x = torch.randn(4, 8)
        seq(x)
        lin._userbuffers_options = {"comm_name": "qkv"}
        seq(x)
        seq(x)  # nothing changed since: no third declaration
        fc.disable()
        src = os.path.join(self.out, "rank0.jsonl")
        recs = ftutil.read_jsonl(src)
        fusers = [r for r in recs if r["t"] == "fuser"]
        self.assertEqual(len(fusers), 2)
        self.assertNotIn("of", fusers[0])
        self.assertEqual(fusers[1]["of"], fusers[0]["id"])
        self.assertIsNone(fusers[0]["ops"][0]["attrs"]["userbuffers"])
        self.assertEqual(fusers[1]["ops"][0]["attrs"]["userbuffers"], {"comm_name": "qkv"})
        calls = [r for r in recs if r["t"] == "call"]
        self.assertEqual([c["fuser"] for c in calls], [fusers[0]["id"]] + [fusers[1]["id"]] * 2)
        ftdb = os.path.join(self.out, "t.ftdb")
        ftutil.cli("import", src, "-o", ftdb)
        pol = "te-3410" if STANDIN_BEHAVIOUR == "3410" else "te-pre3410"
        p = ftutil.cli("replay", ftdb, "--policy", pol, "--per-call", "-")
        lines = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
        self.assertEqual([ln["build"] for ln in lines], [c["rebuilt"] for c in calls])
        self.assertEqual([ln["build"] for ln in lines], [True, False, False])
        self.assertIn(f"fuser {fusers[1]['id']} continues fuser {fusers[0]['id']} after its op "
                      "attributes changed (op 0 userbuffers)", p.stderr)
        # the export gives the link back
        self.assertEqual([r.get("of") for r in ftutil.export(ftdb) if r["t"] == "fuser"],
                         [None, fusers[0]["id"]])

    def test_replay_warns_of_unknown_fusion_and_assumes_nothing(self):
        """A capture from the hook carries every field the model reads (replay --explain lists
        nothing it assumed), and a fusion a user registered is named on the report's stderr."""
        te.ops.OperationFuser.forward_fusion_functions.append(_my_fusion)
        try:
            seq = te.ops.Sequential(
                te.ops.BasicLinear(8, 8, tensor_parallel_mode="column",
                                   userbuffers_options={"comm_name": "qkv"}), te.ops.Bias(8))
            seq(torch.randn(4, 8))
            m = mlp()
            x, s, p = mlp_inputs()
            with te.autocast(enabled=True, recipe=MXFP8BlockScaling()):
                m(x, s, p, s)
        finally:
            te.ops.OperationFuser.forward_fusion_functions.remove(_my_fusion)
        fc.disable()
        src = os.path.join(self.out, "rank0.jsonl")
        self.assertIn(__name__ + "._my_fusion", ftutil.read_jsonl(src)[0]["te_fusions"]["forward"])
        ftdb = os.path.join(self.out, "t.ftdb")
        ftutil.cli("import", src, "-o", ftdb)
        p = ftutil.cli("replay", ftdb, "--explain")
        self.assertIn(f"the model does not know fusion {__name__}._my_fusion that TE registered; "
                      "plans of fusers it could match may differ", p.stderr)
        self.assertNotIn(": note: ", p.stderr)


class TestCalls(CaptureCase):
    def test_call_fields_and_rebuilt_match_te(self):
        m = mlp()
        x, s, p = mlp_inputs()
        r = MXFP8BlockScaling()
        seen_lists = []  # every plan list TE made (kept alive so identities stay unique)
        expect = []
        steps = [(True, r), (False, r), (True, r), (True, None), (True, r), (False, r)]
        for i, (grad, rec) in enumerate(steps):
            fc.set_step(i, 0)
            with torch.set_grad_enabled(grad), te.autocast(enabled=rec is not None, recipe=rec):
                m(x, s, p, s)
            fz = m._module_groups[0]
            new = all(fz._forward_ops is not l for l in seen_lists)
            seen_lists.append(fz._forward_ops)
            expect.append(new)
        calls = self.records("call")
        self.assertEqual([c["rebuilt"] for c in calls], expect)
        if STANDIN_BEHAVIOUR == "3410":
            self.assertEqual(expect, [True, True, False, True, False, False])
        else:
            self.assertEqual(expect, [True, True, True, True, True, True])
        c = calls[0]
        self.assertEqual(c["op_rg"], [True, False, True])  # p does not need grad here
        self.assertEqual(c["m_splits"], [4, 0, 8, 4])
        self.assertEqual((c["grad"], c["input_rg"], c["device"], c["step"], c["mb"]),
                         (True, False, 0, 0, 0))
        self.assertGreater(c["fuse_ns"], 0)
        self.assertIsNone(calls[3]["recipe"])
        self.assertEqual(calls[1]["grad"], False)
        self.assertEqual([c["seq"] for c in calls], sorted({c["seq"] for c in calls}))

    def test_fuser_declared_once_before_first_call(self):
        m = mlp()
        x, s, p = mlp_inputs()
        for _ in range(3):
            m(x, s, p, s)
        recs = self.records()
        fusers = [r for r in recs if r["t"] == "fuser"]
        self.assertEqual(len(fusers), 1)
        self.assertEqual([o["type"] for o in fusers[0]["ops"]],
                         ["GroupedLinear", "ScaledSwiGLU", "GroupedLinear"])
        first_call = next(i for i, r in enumerate(recs) if r["t"] == "call")
        self.assertLess(recs.index(fusers[0]), first_call)
        self.assertEqual(recs[0]["t"], "header")

    def test_transient_fusers_each_declared(self):
        op = te.ops.ConstantScale(2.0)
        x = torch.randn(4, 4)
        for _ in range(3):
            op(x)
        fusers = self.records("fuser")
        self.assertEqual(len(fusers), 3)
        self.assertEqual(len({f["id"] for f in fusers}), 3)

    def test_transient_fusers_end_when_dropped(self):
        """A standalone op's OperationFuser([op]) is dropped when its call returns: each gets a
        fuser_end right after its call, naming it; a persistent fuser's end comes when its
        module goes."""
        import gc  # noqa: PLC0415
        op = te.ops.ConstantScale(2.0)
        x = torch.randn(4, 4)
        with torch.no_grad():
            for _ in range(3):
                op(x)
        m = te.ops.Sequential(te.ops.BasicLinear(4, 4), te.ops.Bias(4))
        with torch.no_grad():
            m(x)
        del m
        gc.collect()
        recs = self.records()[1:]
        kinds = [r["t"] for r in recs]
        self.assertEqual(kinds, ["fuser", "call", "fuser_end"] * 4)
        for i in range(0, len(recs), 3):
            self.assertEqual(recs[i + 1]["fuser"], recs[i]["id"])
            self.assertEqual(recs[i + 2]["fuser"], recs[i]["id"])
            self.assertEqual(recs[i + 2]["seq"], recs[i + 1]["seq"] + 1)
        self.assertEqual(len({r["id"] for r in recs if r["t"] == "fuser"}), 4)

    def test_op_described_once_per_op_object(self):
        """Transient fusers over one op describe it once; an attribute the model reads that
        changes between them gives the next one a new description."""
        n = [0]
        orig = _describe.op_description

        def counting(op):
            n[0] += 1
            return orig(op)

        _describe.op_description = counting
        try:
            op = te.ops.ConstantScale(2.0)
            x = torch.randn(4, 4)
            for _ in range(5):
                op(x)
            self.assertEqual(n[0], 1)
            op.scale = 3.0  # read by the model: described again
            op(x)
            lin = te.ops.BasicLinear(4, 4)
            for _ in range(3):
                lin(x)
            lin.tensor_parallel_size = 2
            lin(x)
        finally:
            _describe.op_description = orig
        self.assertEqual(n[0], 4)
        fusers = self.records("fuser")
        self.assertEqual(len(fusers), 10)
        self.assertEqual(len({json.dumps(f["ops"]) for f in fusers[:5]}), 1)
        self.assertEqual(fusers[5]["ops"][0]["attrs"], {"scale": 3.0})
        self.assertEqual(fusers[9]["ops"][0]["attrs"]["tensor_parallel_size"], 2)

    def test_op_rg_frozen_and_extra_inputs(self):
        m = mlp()
        for prm in m[0].parameters():
            prm.requires_grad_(False)
        x, s, p = mlp_inputs()
        p.requires_grad_(True)
        m(x, s, p, s)
        with torch.no_grad():
            m(x, s, p, s)
        calls = self.records("call")
        self.assertEqual(calls[0]["op_rg"], [False, True, True])
        self.assertEqual(calls[1]["grad"], False)

    def test_backward_records_point_at_their_forward(self):
        m = mlp()
        x, s, p = mlp_inputs(rg=True)
        y1 = m(x, s, p, s)
        y2 = m(x, s, p, s)
        (y1.sum() + 2 * y2.sum()).backward()
        recs = self.records()
        calls = [r["seq"] for r in recs if r["t"] == "call"]
        bwd = [r for r in recs if r["t"] == "backward"]
        self.assertEqual(sorted(b["call"] for b in bwd), calls)
        self.assertTrue(all(b["seq"] > b["call"] for b in bwd))

    def test_rebuilt_is_per_thread(self):
        """A plan built in one thread while another thread's call is inside maybe_fuse_ops does
        not mark that call as rebuilt."""
        import threading  # noqa: PLC0415

        entered, built = threading.Event(), threading.Event()

        class Gate(list):  # extra inputs of op 0: blocks the boundary scan once
            armed = True

            def __iter__(self):
                if Gate.armed:
                    Gate.armed = False
                    entered.set()
                    built.wait(10)
                return iter(())

        b = te.ops.Sequential(te.ops.BasicLinear(8, 8), te.ops.ReLU())
        for prm in b.parameters():
            prm.requires_grad_(False)
        x = torch.randn(2, 8)
        b(x)  # builds B's plan
        fz_b = b._module_groups[0]
        t = threading.Thread(target=fz_b.maybe_fuse_ops, args=(True, None, x, [Gate(), []]))
        t.start()
        self.assertTrue(entered.wait(10))
        te.ops.Sequential(te.ops.ReLU())(x)  # a new fuser: builds in this thread
        built.set()
        t.join(10)
        calls = self.records("call")
        self.assertEqual([c["rebuilt"] for c in calls], [True, True, False])

    def test_step_and_phase_context(self):
        m = mlp()
        x, s, p = mlp_inputs()
        with fc.step(5, 2):
            with fc.phase("eval"):
                with fc.phase("inner"):
                    m(x, s, p, s)
                m(x, s, p, s)
            m(x, s, p, s)
        m(x, s, p, s)
        calls = self.records("call")
        self.assertEqual([c.get("phase") for c in calls], ["inner", "eval", None, None])
        self.assertEqual([(c.get("step"), c.get("mb")) for c in calls],
                         [(5, 2), (5, 2), (5, 2), (None, None)])

    def test_splits_off(self):
        fc.disable()
        fc.enable(self.out, jsonl=True, splits="off")
        m = mlp()
        m(*mlp_inputs()[:1], *mlp_inputs()[1:], mlp_inputs()[1])
        self.assertNotIn("m_splits", self.records("call")[0])

    def test_labels_from_module_names(self):
        model = torch.nn.Module()
        model.layer = torch.nn.Module()
        model.layer.mlp = mlp()
        fc.label_modules(model)
        x, s, p = mlp_inputs()
        model.layer.mlp(x, s, p, s)
        self.assertEqual(self.records("fuser")[0]["label"], "layer.mlp")


class TestRecipes(CaptureCase):
    def run_with(self, m, recipes):
        x, s, p = mlp_inputs()
        for r in recipes:
            with te.autocast(enabled=r is not None, recipe=r):
                m(x, s, p, s)

    def test_same_object_same_recipe_record(self):
        r = MXFP8BlockScaling()
        self.run_with(mlp(), [r, r, r])
        recipes = self.records("recipe")
        self.assertEqual(len(recipes), 1)
        self.assertEqual(recipes[0]["type"], "MXFP8BlockScaling")

    def test_mutation_gives_new_state_same_obj(self):
        r = NVFP4BlockScaling()
        m = mlp()
        self.run_with(m, [r])
        r.disable_rht = True
        self.run_with(m, [r])
        recs = self.records()
        recipes = [x for x in recs if x["t"] == "recipe"]
        calls = [x for x in recs if x["t"] == "call"]
        self.assertEqual(len(recipes), 2)
        self.assertEqual(recipes[0]["obj"], recipes[1]["obj"])
        self.assertEqual([x["attrs"]["disable_rht"] for x in recipes], [False, True])
        self.assertEqual([c["recipe"] for c in calls], [recipes[0]["id"], recipes[1]["id"]])

    def test_equal_objects_are_distinct(self):
        self.run_with(mlp(), [MXFP8BlockScaling(), MXFP8BlockScaling()])
        recipes = self.records("recipe")
        self.assertEqual(len(recipes), 2)
        self.assertNotEqual(recipes[0]["obj"], recipes[1]["obj"])
        self.assertEqual(recipes[0]["attrs"], recipes[1]["attrs"])

    def test_recycled_ids_get_new_identity(self):
        m = mlp()
        x, s, p = mlp_inputs()
        for _ in range(6):  # a fresh default recipe per autocast entry, freed after
            with te.autocast(recipe=None):
                m(x, s, p, s)
        recipes = self.records("recipe")
        self.assertEqual(len(recipes), 6)
        self.assertEqual(len({r["obj"] for r in recipes}), 6)

    def test_repr_cache_does_not_duplicate_records(self):
        r = DelayedScaling()
        m = mlp()
        self.run_with(m, [r])
        repr(r)  # fills Recipe._cached_repr, a non-field attribute
        self.run_with(m, [r])
        self.assertEqual(len(self.records("recipe")), 1)


class TestReplayTe(CaptureCase):
    """replay_te in process on a captured stream: real recipe objects per recorded identity,
    mutations applied by setattr, decisions equal to the captured ones."""

    def test_identity_and_mutation(self):
        from fusertrace_capture import replay_te  # noqa: PLC0415
        import io  # noqa: PLC0415

        m = mlp()
        x, s, p = mlp_inputs()
        r1, r2 = NVFP4BlockScaling(), MXFP8BlockScaling()
        seq = [r1, r2, r1, None, r1]
        for i, r in enumerate(seq):
            if i == 2:
                r1.disable_rht = True  # same object, new state
            with torch.set_grad_enabled(i % 2 == 0), te.autocast(enabled=r is not None,
                                                                   recipe=r):
                m(x, s, p, s)
        recs = self.records()
        factory = replay_te.RecipeFactory()
        for r in recs:
            if r["t"] == "recipe":
                factory.declare(r)
        ids = [c["recipe"] for c in recs if c["t"] == "call"]
        objs = [factory.get(i) for i in ids]
        self.assertIs(objs[0], objs[2])
        self.assertIs(objs[2], objs[4])
        self.assertIsNot(objs[0], objs[1])
        self.assertIsNone(objs[3])
        self.assertTrue(objs[4].disable_rht)
        self.assertIsInstance(objs[1], MXFP8BlockScaling)
        out = io.StringIO()
        tot = replay_te.replay(iter(recs), out)
        self.assertEqual(tot["calls"], 5)
        self.assertEqual(tot["agree"], 5)
        rows = [json.loads(line) for line in out.getvalue().splitlines()]
        self.assertEqual([r["build"] for r in rows], [c["rebuilt"] for c in recs
                                                      if c["t"] == "call"])
        self.assertTrue(rows[0]["reset"] and rows[1]["reset"])


class TestBehaviour(unittest.TestCase):
    def train(self, capture_dir):
        torch.manual_seed(0)
        m = mlp()
        x, s, p = mlp_inputs(rg=True)
        p.requires_grad_(True)
        if capture_dir:
            fc.enable(capture_dir, jsonl=True)
        try:
            outs = []
            for grad in (True, False, True):
                with torch.set_grad_enabled(grad), te.autocast(recipe=MXFP8BlockScaling()):
                    outs.append(m(x, s, p, s))
            outs[0].sum().backward()
            (outs[2] ** 2).sum().backward()
            fz = m._module_groups[0]
            counts = [op.n_reset_recipe_state for op in fz._basic_ops]
            return outs, [t.grad.clone() for t in (x, p, *m.parameters())], counts
        finally:
            fc.disable()

    def test_results_identical_with_and_without_capture(self):
        with tempfile.TemporaryDirectory() as d:
            o1, g1, c1 = self.train(None)
            o2, g2, c2 = self.train(d)
            self.assertTrue(os.path.exists(os.path.join(d, "rank0.jsonl")))
        self.assertEqual(c1, c2)
        for a, b in zip(o1 + g1, o2 + g2):
            self.assertTrue(torch.equal(a, b))

    def test_writer_failure_stops_capture_not_training(self):
        with tempfile.TemporaryDirectory() as d:
            cap = fc.enable(d, jsonl=True)
            m = mlp()
            x, s, p = mlp_inputs()
            m(x, s, p, s)

            def broken(*a, **k):
                raise OSError("disk full (simulated)")

            cap.writer.call = broken
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                y = m(x, s, p, s)
                m(x, s, p, s)
            self.assertEqual(y.shape, (16, 64))
            self.assertFalse(fc.is_enabled())
            self.assertTrue(any("capture stopped" in str(x.message) for x in w))
            recs = ftutil.read_jsonl(os.path.join(d, "rank0.jsonl"))
            self.assertEqual(sum(r["t"] == "call" for r in recs), 1)

    def test_fuser_used_across_two_captures_is_declared_in_each(self):
        m = mlp()
        x, s, p = mlp_inputs()
        with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
            for d in (d1, d2):
                fc.enable(d, jsonl=True)
                te.ops.ReLU()(x)  # a fuser created and declared first in this capture
                m(x, s, p, s)
                fc.disable()
                recs = ftutil.read_jsonl(os.path.join(d, "rank0.jsonl"))
                ids = [r["id"] for r in recs if r["t"] == "fuser"]
                self.assertEqual(len(ids), 2)
                self.assertEqual(len(set(ids)), 2)
                self.assertEqual({r["fuser"] for r in recs if r["t"] == "call"}, set(ids))

    def test_second_run_in_same_folder_gets_new_file(self):
        with tempfile.TemporaryDirectory() as d:
            for _ in range(2):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fc.enable(d, jsonl=True)
                    m = mlp()
                    x, s, p = mlp_inputs()
                    m(x, s, p, s)
                    fc.disable()
            self.assertEqual(sorted(os.listdir(d)), ["rank0.1.jsonl", "rank0.jsonl"])


class TestWriters(unittest.TestCase):
    def test_jsonl_flushes_every_n_complete_lines(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.jsonl")
            w = _writer.JsonlWriter(path, flush_every=4)
            w.header({"rank": 0})
            for i in range(6):
                w.backward(i, 0, None)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            self.assertTrue(text.endswith("\n"))
            self.assertEqual(len(text.splitlines()), 5)  # header + 4
            w.close()
            self.assertEqual(len(ftutil.read_jsonl(path)), 7)

    def test_library_lookup_reports_why(self):
        path, why = _writer.find_library("/nonexistent/libfusertrace_rec.so")
        if path is None:
            self.assertIn("/nonexistent/libfusertrace_rec.so", why)
        libc = "libc.so.6"
        lib, why2 = _writer._load(libc)
        self.assertIsNone(lib)
        self.assertIn("ft_rec_open", why2)

    def test_fallback_warns_when_no_library(self):
        with tempfile.TemporaryDirectory() as d:
            old = os.environ.get("FUSERTRACE_LIB")
            os.environ["FUSERTRACE_LIB"] = os.path.join(d, "missing.so")
            try:
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    fc.enable(d, lib=os.path.join(d, "missing.so"))
                    m = mlp()
                    x, s, p = mlp_inputs()
                    m(x, s, p, s)
                    fc.disable()
            finally:
                if old is None:
                    del os.environ["FUSERTRACE_LIB"]
                else:
                    os.environ["FUSERTRACE_LIB"] = old
            if _writer.find_library()[0] is None:
                self.assertTrue(any("JSON Lines" in str(x.message) for x in w))
                self.assertTrue(os.path.exists(os.path.join(d, "rank0.jsonl")))


@unittest.skipIf(ftutil.recorder_usable(), f"C recorder: {ftutil.recorder_usable()}")
class TestTransientInTrace(unittest.TestCase):
    """Through the C recorder: transient fusers become compact instances (one fusers row per
    label and op list), their ends are in the trace, and export gives every declaration back."""

    def test_standalone_ops_compact_with_ends(self):
        with tempfile.TemporaryDirectory() as d:
            fc.enable(d, lib=ftutil.LIB, splits="host")
            norm, lin = te.ops.ConstantScale(0.5), te.ops.BasicLinear(8, 8)
            x = torch.randn(2, 8)
            with torch.no_grad():
                for _ in range(200):
                    lin(norm(x))
            fc.disable()
            ftdb = os.path.join(d, "rank0.ftdb")
            self.assertIn("ok (400 calls, 0 backward events, 400 fuser ends",
                          ftutil.cli("verify", ftdb).stdout)
            info = ftutil.cli("info", ftdb).stdout
            self.assertIn("fusers       400 instances (398 compact", info)
            recs = ftutil.export(ftdb)
            self.assertEqual(sum(r["t"] == "fuser" for r in recs), 400)
            self.assertEqual(sum(r["t"] == "fuser_end" for r in recs), 400)
            replay = ftutil.cli("replay", ftdb, "--policy", "te-3410,shared-oplist").stdout
            self.assertIn("transient fusers: 400 instances under 2 labels", replay)


@unittest.skipIf(ftutil.recorder_usable(), f"C recorder: {ftutil.recorder_usable()}")
class TestPackedRecords(unittest.TestCase):
    """ft_rec_append_packed checks every length and names the record that is wrong."""

    def setUp(self):
        import ctypes  # noqa: PLC0415
        self.ct = ctypes
        self.tmp = tempfile.TemporaryDirectory()
        self.w = _writer.CRecorder(ftutil.LIB, os.path.join(self.tmp.name, "t.ftdb"))
        self.w.header({"rank": 0, "world_size": 1, "env": {}})
        self.w.fuser(0, None, '[{"type":"ReLU","attrs":{}},{"type":"ReLU","attrs":{}}]')

    def tearDown(self):
        self.w.close()
        self.tmp.cleanup()

    def append(self, data: bytes):
        done, err = self.ct.c_uint32(), _writer._FtErr()
        rc = self.w._lib.ft_rec_append_packed(self.w._h, data, len(data),
                                              self.ct.byref(done), self.ct.byref(err))
        return rc, done.value, err.msg.decode()

    def call(self, seq, fuser=0, n_rg=2, n_sp=-1, kind=0, tail=None):
        head = _writer._PACKED.pack(seq, fuser, -1, 0, 0, 0, 0, 0, 0, n_rg, n_sp, 0, kind)
        return head + (tail if tail is not None else b"\1\0" + b"\0" * 6)

    def test_good_batch(self):
        rc, done, _ = self.append(self.call(0) + self.call(1, n_sp=1, tail=b"\1\1" + bytes(6)
                                                          + (7).to_bytes(8, "little")))
        self.assertEqual((rc, done), (0, 2))

    def test_truncated_record(self):
        rc, done, msg = self.append(self.call(0) + bytes(40))
        self.assertNotEqual(rc, 0)
        self.assertEqual(done, 1)
        self.assertIn("record 1 at byte 88", msg)

    def test_unknown_kind(self):
        rc, _, msg = self.append(self.call(0, kind=7))
        self.assertNotEqual(rc, 0)
        self.assertIn("unknown kind 7", msg)

    def test_lengths_past_the_end(self):
        rc, _, msg = self.append(self.call(0, n_sp=5))
        self.assertNotEqual(rc, 0)
        self.assertIn("exceed", msg)

    def test_random_buffers_are_rejected_or_taken(self):
        """Seeded random records (lengths, kinds, flags, truncation): every buffer is either
        taken or refused with a message; under ASan (run_tests.sh on a sanitizer build) any
        out-of-bounds read fails the run."""
        import random  # noqa: PLC0415
        seed = int(os.environ.get("FT_TEST_SEED", "12345"))
        rng = random.Random(seed)
        seq = 1000
        for i in range(300):
            n_rg, n_sp = rng.choice([0, 1, 2, 3, 9]), rng.choice([-2, -1, 0, 1, 4, 1 << 20])
            flags = rng.getrandbits(13)
            plen = rng.choice([0, 3, 8, 1 << 16])
            kind = rng.choice([0, 0, 0, 1, 2, 4])
            head = _writer._PACKED.pack(seq, rng.choice([0, 1]), rng.choice([-1, 0]), 0, 0, 0,
                                        0, flags, 0, n_rg, n_sp, plen, kind)
            body = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 8, 16, 40])))
            data = (head + body)[:rng.choice([len(head) + len(body), 40, 80, 81])]
            rc, _, msg = self.append(data)
            self.assertTrue(rc == 0 or msg, f"seed {seed} case {i}: rc {rc} without message")
            seq += 10

    def test_fuser_like_and_end(self):
        like = _writer._PACKED.pack(5, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 3)
        end = _writer._PACKED.pack(1, 5, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 2)
        rc, done, msg = self.append(self.call(0) + like + self.call(0 + 10, fuser=5) + end)
        self.assertNotEqual(rc, 0)  # the end's seq 1 after seq 10: refused, the rest taken
        self.assertEqual(done, 3)
        self.assertIn("does not increase", msg)
        rc, done, msg = self.append(_writer._PACKED.pack(6, 99, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 3))
        self.assertNotEqual(rc, 0)
        self.assertIn("fuser 99 is not declared", msg)

    def test_call_like_carries_end_and_declaration(self):
        """A call_like after an end packs the end, the declaration and the call as one record
        (kind 4); the trace holds all three where they stood."""
        w = self.w
        ops = '[{"type":"ReLU","attrs":{}},{"type":"ReLU","attrs":{}}]'
        w.call(0, 0, None, 0, 0, b"\0\0", None, -1, 0, 0, None, 5, 1)
        w.end(1, 0)
        n0, b0 = w._n, len(w._buf)
        w.call_like((0, None, ops), 2, 1, None, 0, 0, b"\1\0", None, -1, 0, 0, None, 6, 1)
        self.assertEqual(w._n, n0 + 1)  # one packed record for the three
        self.assertEqual(len(w._buf) - b0, 112)
        w.end(3, 1)
        w.close()
        recs = ftutil.export(w.path)
        self.assertEqual([(r["t"], r.get("id", r.get("fuser"))) for r in recs[1:]],
                         [("fuser", 0), ("call", 0), ("fuser_end", 0), ("fuser", 1), ("call", 1),
                          ("fuser_end", 1)])
        self.assertEqual(recs[5]["op_rg"], [True, False])
        self.assertEqual(recs[3]["seq"], 1)

    def test_call_like_truncated_and_bad_like(self):
        head = _writer._PACKED.pack(0, 1, -1, 0, 0, 0, 0, 0, 0, 2, -1, 0, 4)
        rc, done, msg = self.append(head + (0).to_bytes(8, "little"))
        self.assertNotEqual(rc, 0)
        self.assertEqual(done, 0)
        self.assertIn("a record of kind 4 needs 104", msg)
        tail = b"".join(v.to_bytes(8, "little", signed=True) for v in (99, 0, -1))
        rc, done, msg = self.append(head + tail + b"\1\0" + bytes(6))
        self.assertNotEqual(rc, 0)
        self.assertIn("fuser 99 is not declared", msg)

    def test_recorder_rejection_names_record(self):
        rc, done, msg = self.append(self.call(0) + self.call(1, fuser=9))
        self.assertNotEqual(rc, 0)
        self.assertEqual(done, 1)
        self.assertIn("packed record 1", msg)


class TestActivation(unittest.TestCase):
    SCRIPT = ("import torch, transformer_engine.pytorch as te\n"
              "m = te.ops.Sequential(te.ops.BasicLinear(8, 8), te.ops.Bias(8))\n"
              "m(torch.randn(2, 8))\n")

    def run_py(self, code, env_extra):
        env = ftutil.env_for(STANDIN_BEHAVIOUR, FUSERTRACE_JSONL="1", **env_extra)
        return subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env,
                              capture_output=True, text=True, timeout=120)

    def test_env_variable_then_import_before_te(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.run_py("import fusertrace_capture\n" + self.SCRIPT,
                            {"FUSERTRACE_CAPTURE": d})
            self.assertEqual(p.returncode, 0, p.stderr)
            recs = ftutil.read_jsonl(os.path.join(d, "rank0.jsonl"))
            self.assertEqual(sum(r["t"] == "call" for r in recs), 1)

    def test_enable_after_te_import(self):
        with tempfile.TemporaryDirectory() as d:
            code = ("import transformer_engine.pytorch, fusertrace_capture\n"
                    f"fusertrace_capture.enable({d!r})\n" + self.SCRIPT)
            p = self.run_py(code, {})
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(len(ftutil.read_jsonl(os.path.join(d, "rank0.jsonl"))), 3)

    def test_runner_with_module(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "ft_user_mod.py"), "w", encoding="utf-8") as f:
                f.write("import sys\n" + self.SCRIPT + "assert sys.argv[1:] == ['--x', '1']\n")
            env = ftutil.env_for(STANDIN_BEHAVIOUR, FUSERTRACE_JSONL="1")
            env["PYTHONPATH"] = d + os.pathsep + env.get("PYTHONPATH", "")
            out = os.path.join(d, "traces")
            p = subprocess.run([sys.executable, "-W", "ignore", "-m", "fusertrace_capture.run",
                                "-o", out, "-m", "ft_user_mod", "--x", "1"], env=env,
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(len(ftutil.read_jsonl(os.path.join(out, "rank0.jsonl"))), 3)

    def test_rank_from_launcher_environment(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.run_py("import fusertrace_capture\n" + self.SCRIPT,
                            {"FUSERTRACE_CAPTURE": d, "RANK": "5", "WORLD_SIZE": "8"})
            self.assertEqual(p.returncode, 0, p.stderr)
            h = ftutil.read_jsonl(os.path.join(d, "rank5.jsonl"))[0]
            self.assertEqual((h["rank"], h["world_size"]), (5, 8))

    def test_forked_child_does_not_write(self):
        with tempfile.TemporaryDirectory() as d:
            code = ("import os, fusertrace_capture\n" + self.SCRIPT +
                    "pid = os.fork()\n"
                    "if pid == 0:\n"
                    "    m(torch.randn(2, 8)); os._exit(0)\n"
                    "os.waitpid(pid, 0)\n"
                    "m(torch.randn(2, 8))\n")
            p = self.run_py(code, {"FUSERTRACE_CAPTURE": d})
            self.assertEqual(p.returncode, 0, p.stderr)
            recs = ftutil.read_jsonl(os.path.join(d, "rank0.jsonl"))
            self.assertEqual([r["seq"] for r in recs if r["t"] == "call"], [0, 1])


class TestNvtx(unittest.TestCase):
    """FUSERTRACE_NVTX=1: each plan build is one NVTX range, opened at the build's first fusion
    pass and closed when maybe_fuse_ops returns; Debian's CPU torch has no NVTX, so torch's
    functions are replaced by recorders here (and without them the capture warns and goes on)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.log = []
        self.saved = {k: getattr(torch.cuda.nvtx, k) for k in ("range_push", "range_pop", "mark")}

    def tearDown(self):
        fc.disable()
        for k, v in self.saved.items():
            setattr(torch.cuda.nvtx, k, v)
        self.tmp.cleanup()

    def fake_nvtx(self):
        torch.cuda.nvtx.range_push = lambda name: self.log.append(("push", name))
        torch.cuda.nvtx.range_pop = lambda: self.log.append(("pop", None))
        torch.cuda.nvtx.mark = lambda name: self.log.append(("mark", name))

    def run_steps(self):
        m = mlp()
        x, s, p = mlp_inputs()
        r = MXFP8BlockScaling()
        for grad, rec in [(True, r), (False, r), (True, r), (True, None), (True, r)]:
            with torch.set_grad_enabled(grad), te.autocast(enabled=rec is not None, recipe=rec):
                m(x, s, p, s)
        fc.disable()
        recs = ftutil.read_jsonl(os.path.join(self.tmp.name, "rank0.jsonl"))
        return [r for r in recs if r["t"] == "call"]

    def test_builds_are_ranges(self):
        self.fake_nvtx()
        old = os.environ.get("FUSERTRACE_NVTX")
        os.environ["FUSERTRACE_NVTX"] = "1"
        try:
            fc.enable(self.tmp.name, jsonl=True)
        finally:
            if old is None:
                del os.environ["FUSERTRACE_NVTX"]
            else:
                os.environ["FUSERTRACE_NVTX"] = old
        self.assertEqual(self.log, [("push", "fusertrace: NVTX check"), ("pop", None)])
        self.log.clear()
        calls = self.run_steps()
        builds = sum(c["rebuilt"] for c in calls)
        self.assertGreater(builds, 0)
        pushes = [name for kind, name in self.log if kind == "push"]
        self.assertEqual(len(pushes), builds)  # one range per build, not per fusion pass
        self.assertEqual(sum(kind == "pop" for kind, _ in self.log), builds)
        self.assertEqual(set(pushes), {"fusertrace: plan build (fuser 0)"})
        # every range is closed before the next opens
        depth = 0
        for kind, _ in self.log:
            depth += {"push": 1, "pop": -1}.get(kind, 0)
            self.assertIn(depth, (0, 1))
        self.assertEqual(depth, 0)

    def test_off_by_default(self):
        self.fake_nvtx()
        fc.enable(self.tmp.name, jsonl=True)
        self.run_steps()
        self.assertEqual(self.log, [])

    def test_cpu_torch_warns_and_captures(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fc.enable(self.tmp.name, jsonl=True, nvtx=True)
        self.assertTrue(any("FUSERTRACE_NVTX: no NVTX" in str(x.message) for x in w))
        self.assertEqual(len(self.run_steps()), 5)


if __name__ == "__main__":
    unittest.main()
