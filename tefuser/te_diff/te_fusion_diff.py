"""te_fusion_diff.py - cross-check the fuser model against TransformerEngine's own fusion functions.

A manual tool (not run by ctest: it needs a TE git checkout). It reads TE's fusion functions
(fuse_grouped_mlp_ops and the forward/backward fuse_*_ops) from a TE git repository at a given
ref, runs them on stub op classes that carry the attributes the functions read, applies the
passes as OperationFuser._apply_fusions does, and compares the resulting plan text with the C
model's (plan_driver) on random op lists, recipes, environments and headers, and on the fusers of
capture streams (--trace). No TE code is copied into fusertrace; it is read from the checkout at
run time. Import-time registration (is_supported) is re-stated here from docs/fuser-model.md
("The grouped-MLP gate"), since it depends on cuDNN imports; the registry's order and names are
TE's own (ops/fused/__init__.py and grouped_mlp.py, read with ast) and are first compared with the
model's rule rows.

What the cases vary: tensor parallelism (modes, recorded TP sizes or the world's, TP groups of
one), Userbuffers (TE's options dict, None, or the legacy bool), ReduceScatter/AllReduce/
AllGather with and without a recorded process_group_size, the world size in the env or only in
the header, and a captured registry (te_fusions) that reorders, drops or adds (unknown)
functions; TE runs the registry's functions in its order, an unknown one as a function that
fuses nothing.

Build the driver, then run:
  cc -std=c11 -I tefuser -I common -I schema tefuser/te_diff/plan_driver.c -lm \
     build/tefuser/libft_tefuser.a build/common/libft_common.a -ljansson -lxxhash -o plan_driver
  python3 tefuser/te_diff/te_fusion_diff.py --te-repo TE_GIT_DIR --driver ./plan_driver \
     [--ref refs/pull/3410/head] [--seed N] [--cases N] [--trace CAPTURE.jsonl ...]
Exit status 1 when any case differs.
"""
import argparse, ast, functools, json, random, subprocess, sys
ARGS=None
FUSED_MOD="transformer_engine.pytorch.ops.fused."
PASSES=("forward_backward","forward","backward")
@functools.lru_cache(None)
def src(path):
    return subprocess.check_output(["git", "-C", ARGS.te_repo, "show",
                                    f"{ARGS.ref}:transformer_engine/pytorch/ops/{path}"], text=True)
@functools.lru_cache(None)
def extract_c(path, names): return extract(path, list(names))
def extract(path, names):
    tree=ast.parse(src(path)); out=[]
    for node in ast.walk(tree):
        if isinstance(node,ast.FunctionDef) and node.name in names:
            node.decorator_list=[]; out.append(ast.unparse(node))
    return out

# ---- TE's registry, read from its source ----------------------------------------------------
def te_registry():
    """TE's registration, in order: [(pass, full name, condition or None)], from the register_*
    calls of ops/fused/__init__.py (module of each class from its import) and the conditional,
    prepending ones at the end of ops/fused/grouped_mlp.py."""
    kinds={"register_forward_backward_fusion":"forward_backward","register_forward_fusion":"forward",
           "register_backward_fusion":"backward"}
    lists={p:[] for p in PASSES}
    def calls(stmts, cond, modof, module):
        for st in stmts:
            if isinstance(st,ast.If):
                c=ast.unparse(st.test)
                calls(st.body, c, modof, module)
            elif isinstance(st,ast.Expr) and isinstance(st.value,ast.Call) and getattr(st.value.func,"id",None) in kinds:
                call=st.value; arg=ast.unparse(call.args[0])
                cls=arg.split(".")[0]
                mod=modof.get(cls, module)
                name=FUSED_MOD+mod+"."+arg
                prepend=any(k.arg=="prepend" and ast.literal_eval(k.value) for k in call.keywords)
                lst=lists[kinds[call.func.id]]
                (lst.insert(0,(name,cond)) if prepend else lst.append((name,cond)))
    tree=ast.parse(src("fused/__init__.py"))
    modof={}
    for st in tree.body:
        if isinstance(st,ast.ImportFrom) and st.level==1 and st.module:
            for a in st.names: modof[a.asname or a.name]=st.module
    calls(tree.body, None, modof, "")
    calls(ast.parse(src("fused/grouped_mlp.py")).body, None, {}, "grouped_mlp")
    return lists

def check_names(lists):
    """The model's rows (driver NAMES) against TE's registry: same functions, same pass, same
    order. Returns the number of differences."""
    out=subprocess.run([ARGS.driver],input="NAMES\n",capture_output=True,text=True).stdout.splitlines()
    model={p:[] for p in PASSES}
    for ln in out:
        if not ln: break
        p,n=ln.split("\t"); model[p].append(n)
    bad=0
    for p in PASSES:
        te=[n for n,_ in lists[p]]
        if te!=model[p]:
            bad+=1; print(f"NAMES {p}: TE {te}\n  model {model[p]}")
    return bad

# ---- stubs
class Op:
    def __init__(self, t, attrs): self.t=t; self.a=attrs
    def get_grad_output_quantizer(self): return self._gq
class FusedOperation:
    def __init__(self, ops): self.basic_ops=[o for o in ops if o is not None]
    def get_grad_output_quantizer(self): return self.basic_ops[-1].get_grad_output_quantizer()
def mk_fused(name, order):
    def init(self, **kw): FusedOperation.__init__(self,[kw.get(k) for k in order])
    return type(name,(FusedOperation,),{"__init__":init})
types = ["GroupedLinear","ScaledSwiGLU","ScaledClampedQGeGLU","ScaledSReLU","SwiGLU","BasicLinear","Bias","GELU","ReLU","SReLU","Identity","ConstantScale","AddExtraInput","MakeExtraOutput","RMSNorm","LayerNorm","ReduceScatter","AllReduce","AllGather","Quantize"]
cls = {t: type(t,(Op,),{}) for t in types}
class _Dist:
    ws=1
    @staticmethod
    def is_initialized(): return _Dist.ws>1 or True
    @staticmethod
    def get_world_size(): return _Dist.ws
class _Torch: float16="f16"; bfloat16="bf16"; float32="f32"
_Torch.distributed=_Dist
class FP8GSM:
    @staticmethod
    def is_fp8_enabled(): return False

FUSED_FILES={"UserbuffersForwardLinear":"userbuffers_forward_linear","ForwardLinearBiasAdd":"forward_linear_bias_add",
             "ForwardLinearBiasActivation":"forward_linear_bias_activation","ForwardLinearScaleAdd":"forward_linear_scale_add",
             "UserbuffersBackwardLinear":"userbuffers_backward_linear","BackwardLinearAdd":"backward_linear_add",
             "BackwardLinearScale":"backward_linear_scale","BackwardActivationBias":"backward_activation_bias",
             "BackwardAddRMSNorm":"backward_add_rmsnorm"}
def make_ns(env):
    """{full name: fusion function} for TE's functions, run on the stubs; plus the grouped-MLP
    classes' import-time support under env."""
    ns=dict(cls); ns.update(torch=_Torch, FP8GlobalStateManager=FP8GSM, FusedOperation=FusedOperation, Optional=None)
    fe=env["fe"]
    ns["_cudnn_frontend_geglu_runtime_params"]=lambda: fe is not None and fe>=(1,24,0)
    ns["UserbuffersForwardLinear"]=mk_fused("UserbuffersForwardLinear",["linear","bias","reduce_scatter"])
    ns["UserbuffersBackwardLinear"]=mk_fused("UserbuffersBackwardLinear",["linear","bias","reduce_scatter"])
    ns["ForwardLinearBiasAdd"]=mk_fused("ForwardLinearBiasAdd",["linear","bias","add"])
    ns["ForwardLinearBiasActivation"]=mk_fused("ForwardLinearBiasActivation",["linear","bias","activation"])
    ns["ForwardLinearScaleAdd"]=mk_fused("ForwardLinearScaleAdd",["linear","scale","add"])
    ns["BackwardLinearAdd"]=mk_fused("BackwardLinearAdd",["backward_add","linear"])
    ns["BackwardLinearScale"]=mk_fused("BackwardLinearScale",["linear","scale"])
    ns["BackwardActivationBias"]=mk_fused("BackwardActivationBias",["bias","activation"])
    ns["BackwardAddRMSNorm"]=mk_fused("BackwardAddRMSNorm",["add","rmsnorm"])
    ns["_fusible_activations"]=(cls["GELU"],cls["ReLU"])
    code="from __future__ import annotations\n"
    code+="\n".join(extract_c("fused/grouped_mlp.py",("fuse_grouped_mlp_ops","validate_grouped_mlp_dims","is_glu_activation")))+"\n"
    exec(code, ns)
    funcs={}
    for c,f in FUSED_FILES.items():
        meth="fuse_forward_ops" if "fuse_forward_ops" in src(f"fused/{f}.py") else "fuse_backward_ops"
        d={}; exec("from __future__ import annotations\n"+extract_c(f"fused/{f}.py",(meth,))[0], ns, d)
        funcs[f"{FUSED_MOD}{f}.{c}.{meth}"]=d[meth]
    base_ok = env["flag"]>0 and env["cc"][0]==10 and fe is not None and fe>=(1,23,0)
    sup={"GroupedMLP_CuTeGEMMGLU": base_ok, "GroupedMLP_CuTeGEMMUnary": base_ok and fe>=(1,24,0)}
    def gm_cls(name, registered):
        class C(FusedOperation):
            @classmethod
            def is_supported(c): return registered
            def __init__(self, fc1, activation, fc2): FusedOperation.__init__(self,[fc1,activation,fc2])
        C.name=name
        return C
    gm=ns["fuse_grouped_mlp_ops"]
    def joint(clsname, acts):
        def f(ops, recipe, registered=True):
            kw={} if acts is None else {"activation_op_types":tuple(cls[a] for a in acts)}
            return gm(ops, recipe=recipe, fused_op_cls=gm_cls(clsname, registered), **kw)
        return f
    funcs[FUSED_MOD+"grouped_mlp.fuse_ops"]=joint("GroupedMLP_CuTeGEMMGLU",None)
    funcs[FUSED_MOD+"grouped_mlp.fuse_srelu_ops"]=joint("GroupedMLP_CuTeGEMMUnary",("ScaledSReLU",))
    return funcs, sup

def te_lists(env, header, registry):
    """The functions TE applies per pass: the captured te_fusions when the header has it (an
    unknown name fuses nothing), else TE's own registration under env."""
    funcs, sup = make_ns(env)
    out={}
    if "te_fusions" in header:
        for p in PASSES:
            out[p]=[funcs.get(n, lambda ops, recipe: list(ops)) for n in header["te_fusions"][p]]
        return out
    for p in PASSES:
        out[p]=[]
        for n,cond in registry[p]:
            if cond is not None and not sup[cond.split(".")[0]]: continue
            out[p].append(funcs[n])
    return out

class Recipe:
    def __init__(self,t,a): self.t=t; self.__dict__.update(a); self.backward_override=a.get("backward_override")
    def mxfp8(self): return self.t=="MXFP8BlockScaling"
    def nvfp4(self): return self.t=="NVFP4BlockScaling"

def world_of(env, header):
    return env["world"] if env.get("world") is not None else header.get("world_size", 1)

def te_plan(env, header, registry, rtype, rattrs, opsj):
    _Dist.ws=world_of(env, header)
    lists=te_lists(env, header, registry)
    ops=[]
    for o in opsj:
        a=o.get("attrs",{}) or {}
        if o["type"] not in cls: cls[o["type"]]=type(o["type"],(Op,),{})  # an op no fusion knows
        op=cls[o["type"]](o["type"],a)
        # attribute names TE reads
        op.in_features=a.get("in_features"); op.out_features=a.get("out_features"); op.num_groups=a.get("num_groups")
        op.glu_interleave_size=a.get("glu_interleave_size")
        class C: pass
        c=C(); c.alpha=a.get("alpha",1.702); c.limit=a.get("limit",7.0); c.glu_linear_offset=a.get("glu_linear_offset",1.0); op._clamped=c
        # BasicLinear._canonicalize_tensor_parallelism: the group's size, 1 without a mode
        mode=a.get("tensor_parallel_mode"); size=a.get("tensor_parallel_size", _Dist.ws if mode else 1)
        if size==1: mode=None
        op.tensor_parallel_mode=mode; op.tensor_parallel_size=size
        ub=a.get("userbuffers")  # TE's userbuffers_options dict, None, or the legacy bool
        op._userbuffers_options=ub if isinstance(ub,dict) else ({} if ub is True else None)
        class W: pass
        w=W(); w.dtype={"bfloat16":"bf16","float16":"f16"}.get(a.get("dtype"),"f32"); op.weight=w
        op._in_place=a.get("in_place",False)
        op.process_group_size=a.get("process_group_size",_Dist.ws)
        hasq = o["type"] in ("BasicLinear","GroupedLinear") or (o["type"]=="Quantize" and a.get("backward",False))
        op._gq = object() if (hasq and rtype!="None") else None
        ops.append(op)
    recipe=None if rtype=="None" else Recipe(rtype,rattrs)
    def apply(lst, funcs):
        lst=list(lst)
        for f in funcs: lst=f(lst, recipe=recipe)
        return lst
    j=apply(ops, lists["forward_backward"])
    def text(lst):
        out=[]; idx=0
        for op in lst:
            if isinstance(op,FusedOperation):
                ids=[]
                for b in op.basic_ops:
                    assert b is ops[idx]; ids.append(idx); idx+=1
                nm=getattr(op,"name",type(op).__name__)
                out.append(f"{nm}({ids[0]})" if len(ids)==1 else f"{nm}({ids[0]}-{ids[-1]})")
            else:
                assert op is ops[idx]; out.append(f"{op.t}({idx})"); idx+=1
        assert idx==len(ops)
        return ",".join(out)
    return f"fwd[{text(apply(j,lists['forward']))}] bwd[{text(apply(j,lists['backward']))}]"

def rand_op(r):
    t=r.choice(types+["BasicLinear","Bias","AddExtraInput","MakeExtraOutput","BasicLinear","GELU","ConstantScale","ReduceScatter","Bias"]*2)
    a={}
    if t=="GroupedLinear":
        a=dict(num_groups=r.choice([1,2,4]),in_features=r.choice([64,128,96]),out_features=r.choice([64,128,256]))
    elif t in("ScaledSwiGLU","ScaledClampedQGeGLU","SwiGLU"):
        a=dict(glu_interleave_size=r.choice([32,32,16,None]))
        if t=="ScaledClampedQGeGLU" and r.random()<0.5: a["limit"]=r.choice([7.0,6.0])
    elif t=="BasicLinear":
        a=dict(in_features=64,out_features=64,tensor_parallel_mode=r.choice([None,None,"column","row"]),dtype=r.choice(["bfloat16","float32"]))
        a["userbuffers"]=r.choice([True,False,None,{},{"comm_name":"qkv"},{"comm_name":"proj","method":"ring_exchange"}])
        if r.random()<0.3: a["tensor_parallel_size"]=r.choice([1,2,8])
    elif t in("AddExtraInput","MakeExtraOutput"): a=dict(in_place=r.random()<0.6)
    elif t in("ReduceScatter","AllReduce","AllGather") and r.random()<0.5: a=dict(process_group_size=r.choice([1,8]))
    elif t=="Quantize": a=dict(backward=r.random()<0.5)
    return {"type":t,"attrs":a}

def rand_header(r, registry):
    """A header: the world size in it (or not), and sometimes a captured registry that reorders,
    drops or adds functions."""
    h={}
    if r.random()<0.5: h["world_size"]=r.choice([1,2,8])
    if r.random()<0.4:
        reg={}
        for p in PASSES:
            names=[n for n,_ in registry[p]]
            k=r.random()
            if k<0.3: r.shuffle(names)
            elif k<0.5: names=[n for n in names if r.random()<0.6]
            elif k<0.6: names.insert(r.randint(0,len(names)),"mypkg.fusions.fuse_nothing")
            reg[p]=names
        h["te_fusions"]=reg
    return h

def env_json(env):
    e={"device_cc":f"{env['cc'][0]}.{env['cc'][1]}","cudnn_frontend":".".join(map(str,env["fe"])) if env["fe"] else None,
       "NVTE_CUTEDSL_FUSED_GROUPED_MLP":str(env["flag"])}
    if env.get("world") is not None: e["world_size"]=env["world"]
    return json.dumps(e)

def run_cases(cases, registry, label):
    lines=["\t".join([env_json(env),rtype,json.dumps(rattrs),json.dumps(ops),json.dumps(hdr)]) for env,hdr,rtype,rattrs,ops in cases]
    out=subprocess.run([ARGS.driver],input="\n".join(lines)+"\n",capture_output=True,text=True).stdout.splitlines()
    bad=0; fusedn=0; ubn=0
    for (env,hdr,rtype,rattrs,ops),c in zip(cases,out):
        te=te_plan(env,hdr,registry,rtype,rattrs,ops)
        if any(x in te for x in ["Userbuffers","Forward","Backward","GroupedMLP"]): fusedn+=1
        if "Userbuffers" in te: ubn+=1
        if te!=c:
            bad+=1
            if bad<=5: print("MISMATCH\n te:",te,"\n c: ",c,"\n",env,hdr,rtype,rattrs,json.dumps(ops))
    print(f"{label}: {len(cases)} cases, {fusedn} with a fusion, {ubn} with Userbuffers, {bad} mismatches")
    return bad

def trace_cases(path):
    """Every fuser of a capture stream under no recipe and under each declared recipe, with the
    stream's own header."""
    hdr={}; env={}; fusers=[]; recipes=[]
    for ln in open(path):
        o=json.loads(ln)
        if o["t"]=="header":
            env=o.get("env",{}); hdr={k:o[k] for k in ("world_size","te_fusions") if k in o}
        elif o["t"]=="fuser": fusers.append(o["ops"])
        elif o["t"]=="recipe": recipes.append((o["type"],o["attrs"]))
    cc=str(env.get("device_cc") or "0.0").split(".")
    fe=env.get("cudnn_frontend")
    e=dict(cc=(int(cc[0]),int(cc[1]) if len(cc)>1 else 0),fe=tuple(int(x) for x in fe.split("."))[:3] if fe else None,
           flag=int(env.get("NVTE_CUTEDSL_FUSED_GROUPED_MLP",0)),
           world=int(env["world_size"]) if env.get("world_size") is not None else None)
    return [(e,hdr,rt,ra,ops) for ops in fusers for rt,ra in [("None",{})]+recipes]

def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--te-repo", required=True)
    ap.add_argument("--ref", default="refs/pull/3410/head")
    ap.add_argument("--driver", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--trace", action="append", default=[])
    ARGS = ap.parse_args()
    registry=te_registry()
    bad=check_names(registry)
    for t in ARGS.trace:
        bad+=run_cases(trace_cases(t), registry, t)
    seed, N = ARGS.seed, ARGS.cases
    r=random.Random(seed); cases=[]
    for i in range(N):
        n=r.randint(1,8)
        # bias toward grouped MLP windows
        ops=[rand_op(r) for _ in range(n)]
        if r.random()<0.3:
            k=r.randint(0,max(0,n-1)); G=r.choice([1,4])
            act=r.choice(["ScaledSwiGLU","ScaledSReLU","ScaledClampedQGeGLU"])
            n1=256 if act!="ScaledSReLU" else 128
            ops[k:k]=[{"type":"GroupedLinear","attrs":{"num_groups":G,"in_features":64,"out_features":n1}},{"type":act,"attrs":{"glu_interleave_size":32} if act!="ScaledSReLU" else {}},{"type":"GroupedLinear","attrs":{"num_groups":G,"in_features":128,"out_features":64}}]
        env=dict(cc=r.choice([(10,0),(9,0)]),fe=r.choice([(1,23,0),(1,24,0),(1,27,0)]),flag=r.choice([0,1,1]),world=r.choice([1,4,8,None]))
        hdr=rand_header(r, registry)
        if env["world"] is not None and "world_size" in hdr: hdr["world_size"]=env["world"]  # they must agree
        rtype=r.choice(["None","MXFP8BlockScaling","NVFP4BlockScaling","Float8CurrentScaling","DelayedScaling"])
        rattrs={}
        if rtype!="DelayedScaling" and rtype!="None": rattrs["backward_override"]=r.choice([None,None,"high_precision"])
        if rtype=="NVFP4BlockScaling": rattrs["disable_rht"]=r.random()<0.4
        cases.append((env,hdr,rtype,rattrs,ops))
    bad+=run_cases(cases, registry, f"seed {seed}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
