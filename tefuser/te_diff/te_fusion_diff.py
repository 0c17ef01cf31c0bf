"""te_fusion_diff.py - cross-check the fuser model against TransformerEngine's own fusion functions.

A manual tool (not run by ctest: it needs a TE git checkout). It reads TE's fusion functions
(fuse_grouped_mlp_ops and the forward/backward fuse_*_ops) from a TE git repository at a given
ref, runs them on stub op classes that carry the attributes the functions read, applies the
passes as OperationFuser._apply_fusions does, and compares the resulting plan text with the C
model's (plan_driver) on random op lists, recipes and environments. No TE code is copied into
fusertrace; it is read from the checkout at run time. Import-time registration
(is_supported) is re-stated here from docs/fuser-model.md ("The grouped-MLP gate"), since it depends on cuDNN imports.

Build the driver, then run:
  cc -std=c11 -I tefuser -I common -I schema tefuser/te_diff/plan_driver.c \
     build/tefuser/libft_tefuser.a build/common/libft_common.a -ljansson -lxxhash -o plan_driver
  python3 tefuser/te_diff/te_fusion_diff.py --te-repo TE_GIT_DIR --driver ./plan_driver \
     [--ref refs/pull/3410/head] [--seed N] [--cases N]
Exit status 1 when any case differs.
"""
import argparse, ast, functools, json, random, subprocess, sys
ARGS=None
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
types = ["GroupedLinear","ScaledSwiGLU","ScaledClampedQGeGLU","ScaledSReLU","SwiGLU","BasicLinear","Bias","GELU","ReLU","SReLU","Identity","ConstantScale","AddExtraInput","MakeExtraOutput","RMSNorm","LayerNorm","ReduceScatter","Quantize"]
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

def make_ns(env):
    ns=dict(cls); ns.update(torch=_Torch, FP8GlobalStateManager=FP8GSM, FusedOperation=FusedOperation, Optional=None)
    fe=env["fe"]
    ns["_cudnn_frontend_geglu_runtime_params"]=lambda: fe>=(1,24,0)
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
    for f,names in [("fused/grouped_mlp.py",["fuse_grouped_mlp_ops","validate_grouped_mlp_dims","is_glu_activation"])]:
        code+="\n".join(extract_c(f,tuple(names)))+"\n"
    exec(code, ns)
    fwd=[];bwd=[]
    for f,n in [("fused/userbuffers_forward_linear.py","fuse_forward_ops"),("fused/forward_linear_bias_add.py","fuse_forward_ops"),("fused/forward_linear_bias_activation.py","fuse_forward_ops"),("fused/forward_linear_scale_add.py","fuse_forward_ops")]:
        d={}; exec("from __future__ import annotations\n"+extract_c(f,(n,))[0], ns, d); fwd.append(d[n])
    for f,n in [("fused/userbuffers_backward_linear.py","fuse_backward_ops"),("fused/backward_linear_add.py","fuse_backward_ops"),("fused/backward_linear_scale.py","fuse_backward_ops"),("fused/backward_activation_bias.py","fuse_backward_ops"),("fused/backward_add_rmsnorm.py","fuse_backward_ops")]:
        d={}; exec("from __future__ import annotations\n"+extract_c(f,(n,))[0], ns, d); bwd.append(d[n])
    base_ok = env["flag"]>0 and env["cc"][0]==10 and fe>=(1,23,0)
    class GLU(FusedOperation):
        name="GroupedMLP_CuTeGEMMGLU"
        @classmethod
        def is_supported(c): return base_ok
        def __init__(self, fc1, activation, fc2): FusedOperation.__init__(self,[fc1,activation,fc2])
    class UN(FusedOperation):
        name="GroupedMLP_CuTeGEMMUnary"
        @classmethod
        def is_supported(c): return base_ok and fe>=(1,24,0)
        def __init__(self, fc1, activation, fc2): FusedOperation.__init__(self,[fc1,activation,fc2])
    gm=ns["fuse_grouped_mlp_ops"]
    joint=[]
    if UN.is_supported(): joint.append(lambda ops, recipe: gm(ops, recipe=recipe, fused_op_cls=UN, activation_op_types=(cls["ScaledSReLU"],)))
    if GLU.is_supported(): joint.append(lambda ops, recipe: gm(ops, recipe=recipe, fused_op_cls=GLU))
    return joint,fwd,bwd

class Recipe:
    def __init__(self,t,a): self.t=t; self.__dict__.update(a); self.backward_override=a.get("backward_override")
    def mxfp8(self): return self.t=="MXFP8BlockScaling"
    def nvfp4(self): return self.t=="NVFP4BlockScaling"

def te_plan(env, rtype, rattrs, opsj):
    _Dist.ws=env["world"]
    joint,fwd,bwd=make_ns(env)
    ops=[]
    for o in opsj:
        a=o.get("attrs",{}); op=cls[o["type"]](o["type"],a)
        # attribute names TE reads
        op.in_features=a.get("in_features"); op.out_features=a.get("out_features"); op.num_groups=a.get("num_groups")
        op.glu_interleave_size=a.get("glu_interleave_size")
        class C: pass
        c=C(); c.alpha=a.get("alpha",1.702); c.limit=a.get("limit",7.0); c.glu_linear_offset=a.get("glu_linear_offset",1.0); op._clamped=c
        mode=a.get("tensor_parallel_mode"); size=a.get("tensor_parallel_size", env["world"] if mode else 1)
        if size==1: mode=None
        op.tensor_parallel_mode=mode; op.tensor_parallel_size=size
        op._userbuffers_options={} if a.get("userbuffers") else None
        class W: pass
        w=W(); w.dtype={"bfloat16":"bf16","float16":"f16"}.get(a.get("dtype"),"f32"); op.weight=w
        op._in_place=a.get("in_place",False)
        op.process_group_size=a.get("process_group_size",env["world"])
        hasq = o["type"] in ("BasicLinear","GroupedLinear") or (o["type"]=="Quantize" and a.get("backward",False))
        op._gq = object() if (hasq and rtype!="None") else None
        ops.append(op)
    recipe=None if rtype=="None" else Recipe(rtype,rattrs)
    def apply(lst, funcs):
        lst=list(lst)
        for f in funcs: lst=f(lst, recipe=recipe)
        return lst
    j=apply(ops, joint)
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
    return f"fwd[{text(apply(j,fwd))}] bwd[{text(apply(j,bwd))}]"

def rand_op(r):
    t=r.choice(types+["BasicLinear","Bias","AddExtraInput","MakeExtraOutput","BasicLinear","GELU","ConstantScale","ReduceScatter","Bias"]*2)
    a={}
    if t=="GroupedLinear":
        a=dict(num_groups=r.choice([1,2,4]),in_features=r.choice([64,128,96]),out_features=r.choice([64,128,256]))
    elif t in("ScaledSwiGLU","ScaledClampedQGeGLU","SwiGLU"):
        a=dict(glu_interleave_size=r.choice([32,32,16,None]))
        if t=="ScaledClampedQGeGLU" and r.random()<0.5: a["limit"]=r.choice([7.0,6.0])
    elif t=="BasicLinear":
        a=dict(in_features=64,out_features=64,tensor_parallel_mode=r.choice([None,None,"column","row"]),userbuffers=r.random()<0.4,dtype=r.choice(["bfloat16","float32"]))
        if r.random()<0.2: a["tensor_parallel_size"]=r.choice([1,2])
    elif t in("AddExtraInput","MakeExtraOutput"): a=dict(in_place=r.random()<0.6)
    elif t=="ReduceScatter" and r.random()<0.3: a=dict(process_group_size=1)
    elif t=="Quantize": a=dict(backward=r.random()<0.5)
    return {"type":t,"attrs":a}

def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--te-repo", required=True)
    ap.add_argument("--ref", default="refs/pull/3410/head")
    ap.add_argument("--driver", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=2000)
    ARGS = ap.parse_args()
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
        env=dict(cc=r.choice([(10,0),(9,0)]),fe=r.choice([(1,23,0),(1,24,0),(1,27,0)]),flag=r.choice([0,1,1]),world=r.choice([1,4]))
        rtype=r.choice(["None","MXFP8BlockScaling","NVFP4BlockScaling","Float8CurrentScaling","DelayedScaling"])
        rattrs={}
        if rtype!="DelayedScaling" and rtype!="None": rattrs["backward_override"]=r.choice([None,None,"high_precision"])
        if rtype=="NVFP4BlockScaling": rattrs["disable_rht"]=r.random()<0.4
        cases.append((env,rtype,rattrs,ops))
    lines=[]
    for env,rtype,rattrs,ops in cases:
        ej=json.dumps({"device_cc":f"{env['cc'][0]}.{env['cc'][1]}","cudnn_frontend":".".join(map(str,env["fe"])),"NVTE_CUTEDSL_FUSED_GROUPED_MLP":str(env["flag"]),"world_size":str(env["world"])})
        lines.append("\t".join([ej,rtype,json.dumps(rattrs),json.dumps(ops)]))
    out=subprocess.run([ARGS.driver],input="\n".join(lines)+"\n",capture_output=True,text=True).stdout.splitlines()
    bad=0; fusedn=0
    for (env,rtype,rattrs,ops),c in zip(cases,out):
        te=te_plan(env,rtype,rattrs,ops)
        if any(x in te for x in ["Userbuffers","Forward","Backward","GroupedMLP"]): fusedn+=1
        if te!=c:
            bad+=1
            if bad<=5: print("MISMATCH\n te:",te,"\n c: ",c,"\n",env,rtype,rattrs,json.dumps(ops))
    print(f"seed {seed}: {len(cases)} cases, {fusedn} with a fusion, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
