"""The capture state and the wrappers around TransformerEngine's OperationFuser.

What is wrapped (transformer_engine/pytorch/ops/fuser.py, TE 2.20 / PR #3410):
- OperationFuser.__init__ is left alone: a fuser gets its stream id when it is declared, at its
  first call (ids thus increase along the stream; NVTX names a first build by it). A declared
  fuser is watched with a weak reference: when TE drops it (a standalone op's transient
  OperationFuser([op]) right after its call) a `fuser_end` record says so. Ops are described once
  per op object (the description is kept until one of the attributes the model reads changes),
  and a fuser whose label and ops repeat an earlier one's is declared as "like" that one: no JSON
  is made or parsed per transient fuser.
- OperationFuser.maybe_fuse_ops: timed (fuse_ns) and recorded after it returns; the attributes
  of its ops that the model reads are compared with the fuser's declaration at every call, and a
  change redeclares the fuser (a new id with "of": the previous one).
- OperationFuser._apply_fusions (a staticmethod that every plan build calls three times):
  counted, which is how `rebuilt` is detected; TE's own decision is untouched. When a TE
  build lacks it, `rebuilt` falls back to watching the fuser's plan cache (_fused_ops_cache
  grew) or, without a cache, the identity of its _forward_ops list.
- _OperationFuserAutogradFunction.forward/backward: tag the autograd context with the call's seq
  and record a `backward` record when that context's backward runs.
With FUSERTRACE_NVTX=1 (enable(nvtx=True)) each plan build is also an NVTX range, "fusertrace:
plan build (fuser N)", from its first fusion pass until maybe_fuse_ops returns, so that Nsight
Systems shows it next to the kernels it delays (a marker instead, after the call, when builds are
inferred from the plan cache). Off by default; without NVTX in torch (a CPU build) it warns once.
Every wrapper calls the original with the same arguments and returns its result unchanged; a
failure inside the capture disables the capture with one warning and never reaches TE.
"""
from __future__ import annotations

import atexit
import collections
import ctypes
import functools
import itertools
import json
import os
import signal
import sys
import threading
import warnings
import weakref
from array import array
from time import perf_counter_ns
from typing import Optional

from . import _describe
from ._writer import (CF_GRAD, CF_GRAPH, CF_HAS_FUSE_NS, CF_HAS_GRAPH, CF_HAS_MB, CF_HAS_NS,
                      CF_HAS_PHASE, CF_HAS_REBUILT, CF_HAS_RECIPE, CF_HAS_SPLITS, CF_HAS_STEP,
                      CF_INPUT_RG, CF_REBUILT, CRecorder, JsonlWriter, WriterError, find_library)

FUSER_MODULE = "transformer_engine.pytorch.ops.fuser"
SPLIT_MODES = ("off", "host", "async")

# Caller-provided context, read on every call: [step, mb, phase (bytes)]; None when unknown.
_CTX: list = [None, None, None]
class _Builds(threading.local):
    """Plan builds seen so far in this thread (incremented by the _apply_fusions wrapper), so
    that a build in one thread never marks another thread's call as rebuilt; and, while NVTX
    marks builds, the fuser whose maybe_fuse_ops runs and whether its build range is open."""

    n = 0
    nvtx_fuser = None
    nvtx_open = False


_BUILDS = _Builds()
_ACTIVE: list = [None]  # [the enabled _Capture or None]
# (range_push, range_pop, mark) of torch.cuda.nvtx while FUSERTRACE_NVTX=1 marks TE's plan
# builds, else None
_NVTX: list = [None]


def nvtx_functions():
    """torch.cuda.nvtx's range_push, range_pop and mark, checked once; (None, why) when this
    torch has no NVTX (a CPU build)."""
    nv = getattr(getattr(sys.modules.get("torch"), "cuda", None), "nvtx", None)
    fns = tuple(getattr(nv, name, None) for name in ("range_push", "range_pop", "mark"))
    if None in fns:
        return None, "torch.cuda.nvtx is not there"
    try:
        fns[0]("fusertrace: NVTX check")
        fns[1]()
    except Exception as e:  # pylint: disable=broad-except
        return None, str(e)
    return fns, None


def _nvtx_name(fuser) -> str:
    ft = fuser.__dict__.get("_ft_id")
    return f"fusertrace: plan build (fuser {ft[1] if ft else '?'})"


def _warn(msg: str) -> None:
    warnings.warn("fusertrace_capture: " + msg, RuntimeWarning, stacklevel=3)


# ---- the capture -------------------------------------------------------------------------------
def _unchanged(watch) -> bool:
    """Every watched attribute still has its value (an attribute gone counts as changed)."""
    try:
        for holder, get, snap in watch:
            if get(holder) != snap:
                return False
    except AttributeError:
        return False
    return True


class _Decl:
    """What declaring a fuser over a tuple of op objects takes (_Capture._decl_for)."""

    __slots__ = ("refs", "ops_json", "label", "like", "like_rec", "watch", "params", "gidx",
                 "rg_bytes")

    def valid(self, ops) -> bool:
        refs = self.refs
        if len(refs) != len(ops):
            return False
        for r, op in zip(refs, ops):
            if r() is not op:
                return False
        return _unchanged(self.watch)


class _Capture:
    """One enabled capture: a lazily opened writer for this rank, ids, and pending records."""

    def __init__(self, out_dir: str, *, splits: str, allow_sync: bool, backward: bool,
                 lib: Optional[str], force_jsonl: bool, flush_every: int,
                 flush_secs: float) -> None:
        if splits not in SPLIT_MODES:
            raise ValueError(f"splits must be one of {SPLIT_MODES}, not {splits!r}")
        self.out_dir = out_dir
        self.splits = splits
        self.allow_sync = allow_sync
        self.backward = backward
        self.lib = lib
        self.force_jsonl = force_jsonl
        self.flush_every = flush_every
        self._flush_ns = int(flush_secs * 1e9)
        self._last_flush = perf_counter_ns()
        self.lock = threading.RLock()
        self.writer = None
        self.path: Optional[str] = None
        self.closed = False
        self.seq = 0
        self._pinned_free: dict = {}  # (numel, dtype) -> pinned host tensors to reuse
        self._events: list = []  # CUDA events to reuse
        self._ids = itertools.count()  # fuser ids (next() on a count is atomic under the GIL)
        self._next_recipe = 0
        self._next_obj = 1
        self._recipes: dict = {}  # id(recipe) -> [ref, objno, __dict__ snapshot, recipe id]
        self._states: dict = {}  # (objno, attrs_json) -> recipe id
        self._pending: collections.deque = collections.deque()  # async split records, in order
        self._labels: dict = {}  # id(op) -> (weakref or None, module path)
        self._opdesc: dict = {}  # id(op) -> (weakref, description JSON, watch, params)
        self._like: dict = {}  # (label, ops JSON) -> the id first declared with them
        self._decls: dict = {}  # ids of a fuser's ops -> _Decl, what its declaration needs
        self._watched: dict = {}  # weakref to a declared fuser -> its current id
        # weak references to declared fusers that were collected, their ends not written yet:
        # deque.append is every watch's callback (C, atomic: no Python frame, no lock, in
        # whichever thread dropped the fuser); the ends are written under the lock before the
        # next record, at flush and at close, so in stream order
        self._ended: collections.deque = collections.deque()
        self._drop_cb = self._ended.append

    # -- ids and declarations (under the lock) --
    def new_fuser_id(self) -> int:
        return next(self._ids)

    def _open(self, fuser=None) -> None:
        rank, world = _describe.rank_and_world()
        os.makedirs(self.out_dir, exist_ok=True)
        base = os.path.join(self.out_dir, f"rank{rank}")
        n = 0
        while True:
            stem = base if n == 0 else f"{base}.{n}"
            if not (os.path.exists(stem + ".ftdb") or os.path.exists(stem + ".jsonl")):
                break
            n += 1
        if n:
            _warn(f"{base}.* exists; writing this run to {stem}.*")
        why = "FUSERTRACE_JSONL is set"
        writer = None
        if not self.force_jsonl:
            lib_path, why = find_library(self.lib)
            if lib_path:
                try:
                    writer = CRecorder(lib_path, stem + ".ftdb")
                except WriterError as e:
                    why = str(e)
        if writer is None:
            writer = JsonlWriter(stem + ".jsonl", self.flush_every)
            if not self.force_jsonl:
                _warn(f"C recorder not used ({why}); writing JSON Lines to {writer.path} "
                      "(convert with `fusertrace import`)")
        self.writer = writer
        self.path = writer.path
        h = _describe.header(rank, world, type(fuser) if fuser is not None else None)
        if fuser is not None:
            # Which plan cache this TE has (the replayer picks the matching policy from it):
            # PR 3410's dict of plans, or the single plan of the releases before it.
            cache = fuser.__dict__.get("_fused_ops_cache")
            h["fuser_cache"] = "dict" if isinstance(cache, dict) else "single"
        writer.header(h)

    def _writer(self, fuser=None):
        if self.writer is None:
            if self.closed:
                raise WriterError("capture is closed")
            self._open(fuser)
        return self.writer

    def _label(self, ops) -> Optional[str]:
        names = []
        for op in ops:
            ent = self._labels.get(id(op))
            if ent is None or (ent[0] is not None and ent[0]() is not op):
                return None
            names.append(ent[1])
        if len(names) < 2:
            return names[0] if names else None
        parts = [n.split(".") for n in names]
        common = []
        for seg in zip(*parts):
            if len(set(seg)) != 1:
                break
            common.append(seg[0])
        if len(names) == 1:
            return names[0]
        return ".".join(common) if common else ",".join(names)

    def _describe_op(self, op) -> tuple:
        """(description JSON, watch, parameters) of one op, made once per op object and again
        only after an attribute the model reads changed."""
        ent = self._opdesc.get(id(op))
        if ent is not None and ent[0]() is op and _unchanged(ent[2]):
            return ent[1], ent[2], ent[3]
        d = json.dumps(_describe.op_description(op), sort_keys=True, separators=(",", ":"))
        watch = _describe.attr_watch([op])
        params = list(op.parameters())
        try:
            self._opdesc[id(op)] = (weakref.ref(op), d, watch, params)
        except TypeError:  # not weak-referenceable: described afresh for each fuser
            pass
        return d, watch, params

    def _decl_for(self, ops) -> "_Decl":
        """What declaring a fuser over these ops takes: kept per tuple of op objects, so that
        the transient fusers over one op (one per call) share it while their ops keep the
        attributes the model reads."""
        key = id(ops[0]) if len(ops) == 1 else tuple(map(id, ops))
        dc = self._decls.get(key)
        if dc is not None:
            if len(ops) == 1:  # a standalone op's transient fuser: the common case, inline
                if dc.refs[0]() is ops[0] and _unchanged(dc.watch):
                    return dc
            elif dc.valid(ops):
                return dc
        descs, watch, op_params = [], [], []
        for op in ops:
            d, w, p = self._describe_op(op)
            descs.append(d)
            watch.extend(w)
            op_params.append(p)
        dc = _Decl()
        dc.ops_json = "[" + ",".join(descs) + "]"
        dc.label = self._label(ops)
        dc.like = self._like.get((dc.label, dc.ops_json))
        dc.like_rec = None if dc.like is None else (dc.like, dc.label, dc.ops_json)
        dc.watch = watch
        dc.params = op_params
        dc.gidx = next((i for i, d in enumerate(descs) if '"type":"GroupedLinear"' in d), -1)
        dc.rg_bytes = {}  # op_rg bytes by bit mask
        try:
            dc.refs = [weakref.ref(op) for op in ops]
            self._decls[key] = dc
        except TypeError:
            pass
        return dc

    def _declare(self, fuser) -> tuple:
        """Declare the fuser (at its first call) and cache what each call needs: (the fuser's
        call state, None or the (like, label, ops JSON) of a declaration left to the call's own
        record, which then declares it: a transient fuser's declaration and first call are one
        packed record)."""
        tid = fuser.__dict__.get("_ft_id")  # (capture, id) given before a first NVTX range
        if tid is not None and tid[0] is self:
            fid = tid[1]
        else:
            fid = next(self._ids)
            fuser._ft_id = (self, fid)
        ops = fuser._basic_ops
        dc = None
        if len(ops) == 1:  # a standalone op's transient fuser: the common case, inline
            op = ops[0]
            dc = self._decls.get(id(op))
            if dc is not None:
                if dc.refs[0]() is not op:
                    dc = None
                else:
                    try:
                        for holder, get, snap in dc.watch:
                            if get(holder) != snap:
                                dc = None
                                break
                    except AttributeError:
                        dc = None
        if dc is None:
            dc = self._decl_for(ops)
        like = dc.like
        deferred = None
        if self._pending:  # declared where it stands: after the records still waiting
            self._pending.append(("fuser", fid, dc.label, dc.ops_json, like))
        elif like is None:
            (self.writer or self._writer(fuser)).fuser(fid, dc.label, dc.ops_json)
        else:
            deferred = dc.like_rec
        if like is None:
            dc.like = self._like[(dc.label, dc.ops_json)] = fid
            dc.like_rec = (fid, dc.label, dc.ops_json)
        try:  # its end: when TE drops it
            ref = weakref.ref(fuser, self._drop_cb)
            self._watched[ref] = fid
        except TypeError:  # not weak-referenceable: its end is not recorded
            ref = None
        params = getattr(fuser, "_basic_op_params", None)
        if params is None or len(params) != len(ops):
            params = dc.params
        # the watch compares the model-read attributes; ref names the fuser for its end
        st = (self, fid, params, dc.gidx, dc.rg_bytes, dc.watch, ref)
        fuser._ft = st
        return st, deferred

    # -- fuser ends --
    def _flush_ended(self) -> None:
        """Write the ends of the fusers collected so far (under the lock, with a writer). A
        fuser's end is written before the next record: nothing else happened in the stream in
        between."""
        q = self._ended
        w = self.writer
        watched = self._watched
        while q:
            fid = watched.pop(q.popleft(), None)
            if fid is None:
                continue
            seq = self.seq
            self.seq = seq + 1
            if self._pending:
                self._pending.append(("end", seq, fid))
            else:
                w.end(seq, fid)

    def on_end(self, fid: int) -> None:
        """Record the end of fuser fid now."""
        with self.lock:
            if self.closed or self.writer is None:
                return
            if self._ended:
                self._flush_ended()
            seq = self.seq
            self.seq = seq + 1
            if self._pending:
                self._pending.append(("end", seq, fid))
            else:
                self.writer.end(seq, fid)

    def _redeclare(self, fuser, st) -> tuple:
        """The fuser's ops changed an attribute the model reads since the last call: declare the
        same instance again with the ops as they are now ("of": the previous id), so that the
        replay keeps its plan cache and sees the new attributes where TE would."""
        old = st[1]
        fid = self.new_fuser_id()
        ops = list(getattr(fuser, "_basic_ops"))
        ops_json = json.dumps([_describe.op_description(op) for op in ops], sort_keys=True,
                              separators=(",", ":"))
        w = self._writer(fuser)
        if self._pending:
            self._pending.append(("fuser_of", fid, self._label(ops), ops_json, old))
        else:
            w.fuser(fid, self._label(ops), ops_json, of=old)
        fuser._ft_id = (self, fid)
        for op in ops:  # the new attributes: described afresh for later fusers too
            self._opdesc.pop(id(op), None)
        if st[6] is not None and st[6] in self._watched:
            self._watched[st[6]] = fid  # its end names the id its calls name now
        st = (self, fid, st[2], st[3], st[4], _describe.attr_watch(ops), st[6])
        fuser._ft = st
        return st

    def _recipe_id(self, recipe) -> int:
        ent = self._recipes.get(id(recipe))
        if ent is not None and ent[0]() is recipe:
            try:
                if recipe.__dict__ == ent[2]:
                    return ent[3]
            except Exception:  # pylint: disable=broad-except
                pass
        attrs_json = json.dumps(_describe.recipe_attrs(recipe), sort_keys=True,
                                separators=(",", ":"))
        if ent is not None and ent[0]() is recipe:
            objno, ref = ent[1], ent[0]
        else:
            objno = self._next_obj
            self._next_obj += 1
            try:
                ref = weakref.ref(recipe)
            except TypeError:  # not weak-referenceable: keep it alive (ids stay unique)
                ref = (lambda r: (lambda: r))(recipe)
        rid = self._states.get((objno, attrs_json))
        if rid is None:
            rid = self._next_recipe
            self._next_recipe += 1
            self._writer().recipe(rid, type(recipe).__name__, objno, attrs_json)
            self._states[(objno, attrs_json)] = rid
        self._recipes[id(recipe)] = [ref, objno, dict(recipe.__dict__), rid]
        return rid

    # -- split sizes --
    def _splits(self, t):
        """How this call's split sizes are recorded: (address, n) of an int64 host array that
        stays valid during the call, (bytes, n), ("async", (pinned, event)) to be read when the
        copy is done, or (None, -1) when they are not recorded."""
        mode = self.splits
        if mode == "off" or t is None:
            return None, -1
        if isinstance(t, (list, tuple)):
            vals = [int(v) for v in t]
            return array("q", vals).tobytes(), len(vals)
        if not t.is_cuda:
            if t.dtype is _TORCH_INT64 and t.is_contiguous():
                return t.data_ptr(), t.numel()
            vals = t.reshape(-1).tolist()
            return array("q", vals).tobytes(), len(vals)
        if mode == "host":
            if self.allow_sync:  # blocking device sync, only when asked for
                vals = t.reshape(-1).tolist()
                return array("q", vals).tobytes(), len(vals)
            return None, -1
        torch = sys.modules["torch"]
        if _STREAM_CAPTURING[0]():
            return None, -1  # a copy would be captured into the graph
        key = (t.numel(), t.dtype)
        free = self._pinned_free.get(key)
        pinned = free.pop() if free else torch.empty(key[0], dtype=t.dtype, pin_memory=True)
        pinned.copy_(t.reshape(-1), non_blocking=True)
        ev = self._events.pop() if self._events else torch.cuda.Event()
        ev.record()
        return "async", (pinned, ev)

    # -- records --
    def on_call(self, fuser, grad, recipe, x, extra, t0: int, fuse_ns: int,
                rebuilt: bool) -> None:
        """Record one maybe_fuse_ops call (the hot path: keep it lean)."""
        with self.lock:
            if self.closed:
                return
            if self._ended:  # fusers dropped since the last record
                self._flush_ended()
            st = fuser.__dict__.get("_ft")
            rid = like = None
            if st is None or st[0] is not self:  # first call in this capture
                if self.writer is None:
                    self._writer(fuser)  # the header names the fuser's cache form
                if recipe is not None:  # a new recipe state is declared before the fuser
                    rid = self._recipe_id(recipe)
                st, like = self._declare(fuser)
            else:
                try:
                    for holder, get, snap in st[5]:
                        if get(holder) != snap:
                            st = self._redeclare(fuser, st)
                            break
                except AttributeError:  # an attribute went away: declare what is there now
                    st = self._redeclare(fuser, st)
            _, fid, params, gidx, rg_bytes, _, _ = st
            flags = _BASE_FLAGS
            if rebuilt:
                flags |= CF_REBUILT
            if recipe is not None:
                if rid is None:
                    rid = self._recipe_id(recipe)
                flags |= CF_HAS_RECIPE
            if grad:
                flags |= CF_GRAD
            if x.requires_grad:
                flags |= CF_INPUT_RG
            mask = 0
            bit = 1
            for ps, es in zip(params, extra):
                for p in ps:
                    if p.requires_grad:
                        mask |= bit
                        break
                else:
                    for e in es:
                        if e is not None and e.requires_grad:
                            mask |= bit
                            break
                bit <<= 1
            rg = rg_bytes.get(mask)
            if rg is None:
                rg = bytes((mask >> i) & 1 for i in range(len(params)))
                rg_bytes[mask] = rg
            device = x.get_device()  # -1 on the CPU
            if device >= 0:
                flags |= CF_HAS_GRAPH
                if _graph_capturing():
                    flags |= CF_GRAPH
            else:
                device = 0
            sp, n_sp = None, -1
            if gidx >= 0:
                ex = extra[gidx]
                if ex:
                    sp, n_sp = self._splits(ex[0])
                    if sp is not None:
                        flags |= CF_HAS_SPLITS
            step, mb, phase = _CTX
            if step is not None:
                flags |= CF_HAS_STEP
            else:
                step = 0
            if mb is not None:
                flags |= CF_HAS_MB
            else:
                mb = 0
            if phase is not None:
                flags |= CF_HAS_PHASE
            seq = self.seq
            self.seq = seq + 1
            if grad:  # for the backward record (only grad calls have one)
                fuser._ft_last_seq = seq
            if sp.__class__ is not str and not self._pending:
                if like is None:
                    self.writer.call(seq, fid, rid, flags, device, rg, sp, n_sp, step, mb, phase,
                                     t0, fuse_ns)
                else:  # its declaration rides on the call's record
                    self.writer.call_like(like, seq, fid, rid, flags, device, rg, sp, n_sp, step,
                                          mb, phase, t0, fuse_ns)
            else:
                if like is not None:  # declared where it stands, before its call
                    self._pending.append(("fuser", fid, like[1], like[2], like[0]))
                if sp.__class__ is int:  # the tensor may be gone by the time it is written
                    sp = ctypes.string_at(sp, 8 * n_sp)
                self._pending.append((seq, fid, rid, flags, device, rg, sp, n_sp, step, mb,
                                      phase, t0, fuse_ns))
                self._drain(False)
            if t0 - self._last_flush >= self._flush_ns:
                # Commit periodically, so that a killed process loses little.
                self._last_flush = t0
                self.writer.flush()

    def on_backward(self, call_seq: int) -> None:
        with self.lock:
            if self.closed:
                return
            w = self._writer()
            if self._ended:
                self._flush_ended()
            seq = self.seq
            self.seq = seq + 1
            rec = (seq, call_seq, perf_counter_ns())
            if self._pending:
                self._pending.append(rec)
                self._drain(False)
            else:
                w.backward(*rec)

    def _drain(self, wait: bool) -> None:
        """Write pending records in order, up to the first whose split copy is not done (all of
        them, waiting on the copies, when wait is true)."""
        w = self._writer()
        q = self._pending
        while q:
            rec = q[0]
            if rec[0].__class__ is str:  # a declaration or an end, kept in stream order
                if rec[0] == "end":
                    w.end(rec[1], rec[2])
                elif rec[0] == "fuser_of":
                    w.fuser(rec[1], rec[2], rec[3], of=rec[4])
                elif rec[4] is None:
                    w.fuser(rec[1], rec[2], rec[3])
                else:
                    w.fuser_like(rec[1], rec[4], rec[2], rec[3])
            elif len(rec) == 3:
                w.backward(*rec)
            elif rec[6] == "async":
                pinned, ev = rec[7]
                if not ev.query():
                    if not wait:
                        return
                    ev.synchronize()
                vals = pinned.tolist()
                w.call(*rec[:6], array("q", vals).tobytes(), len(vals), *rec[8:])
                self._pinned_free.setdefault((pinned.numel(), pinned.dtype), []).append(pinned)
                self._events.append(ev)
            else:
                w.call(*rec)
            q.popleft()

    def flush(self, wait: bool = False) -> None:
        with self.lock:
            if self.writer is None or self.closed:
                return
            if self._ended:
                self._flush_ended()
            self._drain(wait)
            self.writer.flush()

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            try:
                if self.writer is not None:
                    if self._ended:
                        self._flush_ended()
                    self._drain(True)
                    self.writer.close()
            finally:
                self.closed = True

    def abandon(self) -> None:
        """In a forked child: stop without touching the parent's file."""
        self.closed = True
        if self.writer is not None:
            self.writer.abandon()

    def fail(self, exc: BaseException) -> None:
        """A capture failure: warn once, stop capturing, keep what was written."""
        if _ACTIVE[0] is self:
            _ACTIVE[0] = None
        _warn(f"capture stopped after an error: {exc!r}")
        try:
            self.close()
        except Exception:  # pylint: disable=broad-except
            self.closed = True


_TORCH_INT64 = None
_BASE_FLAGS = CF_HAS_NS | CF_HAS_FUSE_NS | CF_HAS_REBUILT


def _graph_capturing() -> bool:
    if _STREAM_CAPTURING[0]():
        return True
    fn = _TE_GRAPH_CAPTURING[0]
    return bool(fn()) if fn is not None else False


def _no() -> bool:
    return False


_TE_GRAPH_CAPTURING: list = [None]  # TE's graph.is_graph_capturing (make_graphed_callables)
_STREAM_CAPTURING: list = [_no]  # torch's "current stream is capturing", bound at patch()


# ---- wrappers ---------------------------------------------------------------------------------
def _wrap_maybe_fuse_ops(orig, counted: bool):
    if counted:
        @functools.wraps(orig)
        def maybe_fuse_ops(self, is_grad_enabled, recipe, input_, extra_inputs):
            cap = _ACTIVE[0]
            if cap is None:
                return orig(self, is_grad_enabled, recipe, input_, extra_inputs)
            n0 = _BUILDS.n
            nv = _NVTX[0]
            t0 = perf_counter_ns()
            if nv is None:
                ret = orig(self, is_grad_enabled, recipe, input_, extra_inputs)
            else:
                # the _apply_fusions wrapper opens the build's range at the first fusion pass;
                # it closes when maybe_fuse_ops returns (or raises); the range names the id the
                # fuser's declaration will have
                tid = self.__dict__.get("_ft_id")
                if tid is None or tid[0] is not cap:
                    self._ft_id = (cap, cap.new_fuser_id())
                _BUILDS.nvtx_fuser = self
                try:
                    ret = orig(self, is_grad_enabled, recipe, input_, extra_inputs)
                finally:
                    _BUILDS.nvtx_fuser = None
                    if _BUILDS.nvtx_open:
                        _BUILDS.nvtx_open = False
                        nv[1]()
            t1 = perf_counter_ns()
            try:
                cap.on_call(self, is_grad_enabled, recipe, input_, extra_inputs, t0, t1 - t0,
                            _BUILDS.n != n0)
            except Exception as e:  # pylint: disable=broad-except
                cap.fail(e)
            return ret

        return maybe_fuse_ops

    @functools.wraps(orig)
    def maybe_fuse_ops_watch(self, is_grad_enabled, recipe, input_, extra_inputs):
        cap = _ACTIVE[0]
        if cap is None:
            return orig(self, is_grad_enabled, recipe, input_, extra_inputs)
        d = self.__dict__
        cache = d.get("_fused_ops_cache")
        before = len(cache) if isinstance(cache, dict) else d.get("_forward_ops")
        t0 = perf_counter_ns()
        ret = orig(self, is_grad_enabled, recipe, input_, extra_inputs)
        t1 = perf_counter_ns()
        try:
            if isinstance(cache, dict):
                rebuilt = len(cache) != before
            else:
                rebuilt = d.get("_forward_ops") is not before
            cap.on_call(self, is_grad_enabled, recipe, input_, extra_inputs, t0, t1 - t0,
                        rebuilt)  # declares the fuser at its first call: the marker names it
            if rebuilt and _NVTX[0] is not None:
                _NVTX[0][2](_nvtx_name(self))  # known only afterwards: a marker, not a range
        except Exception as e:  # pylint: disable=broad-except
            cap.fail(e)
        return ret

    return maybe_fuse_ops_watch


def _wrap_apply_fusions(orig):
    @functools.wraps(orig)
    def _apply_fusions(*args, **kwargs):
        _BUILDS.n += 1
        nv = _NVTX[0]
        if nv is not None and not _BUILDS.nvtx_open and _BUILDS.nvtx_fuser is not None:
            nv[0](_nvtx_name(_BUILDS.nvtx_fuser))
            _BUILDS.nvtx_open = True
        return orig(*args, **kwargs)

    return _apply_fusions


def _wrap_autograd(fn_cls) -> None:
    orig_fwd = fn_cls.__dict__.get("forward")
    orig_bwd = fn_cls.__dict__.get("backward")
    if not isinstance(orig_fwd, staticmethod) or not isinstance(orig_bwd, staticmethod):
        return
    fwd, bwd = orig_fwd.__func__, orig_bwd.__func__

    @functools.wraps(fwd)
    def forward(func_ctx, input_, fuser, *args):
        if func_ctx is not None and _ACTIVE[0] is not None:
            seq = fuser.__dict__.get("_ft_last_seq")
            if seq is not None:
                func_ctx._ft_call = seq
        return fwd(func_ctx, input_, fuser, *args)

    @functools.wraps(bwd)
    def backward(func_ctx, *grad_outputs):
        ret = bwd(func_ctx, *grad_outputs)
        cap = _ACTIVE[0]
        if cap is not None and cap.backward:
            call = getattr(func_ctx, "_ft_call", None)
            if call is not None:
                try:
                    cap.on_backward(call)
                except Exception as e:  # pylint: disable=broad-except
                    cap.fail(e)
        return ret

    fn_cls.forward = staticmethod(forward)
    fn_cls.backward = staticmethod(backward)


def patch(module) -> bool:
    """Install the wrappers on a loaded transformer_engine.pytorch.ops.fuser (idempotent)."""
    global _TORCH_INT64  # pylint: disable=global-statement
    cls = getattr(module, "OperationFuser", None)
    if cls is None:
        _warn(f"{module.__name__} has no OperationFuser; nothing is captured")
        return False
    if cls.__dict__.get("_ft_patched"):
        return True
    torch = sys.modules.get("torch")
    _TORCH_INT64 = getattr(torch, "int64", None)
    cuda = getattr(torch, "cuda", None)
    _STREAM_CAPTURING[0] = getattr(getattr(torch, "_C", None), "_cuda_isCurrentStreamCapturing",
                                   None) or getattr(cuda, "is_current_stream_capturing", _no)
    counted = isinstance(cls.__dict__.get("_apply_fusions"), staticmethod)
    if counted:
        cls._apply_fusions = staticmethod(_wrap_apply_fusions(cls.__dict__["_apply_fusions"]
                                                              .__func__))
    else:
        _warn("OperationFuser._apply_fusions not found; `rebuilt` is inferred from the plan "
              "cache")
    cls.maybe_fuse_ops = _wrap_maybe_fuse_ops(cls.maybe_fuse_ops, counted)
    fn_cls = getattr(module, "_OperationFuserAutogradFunction", None)
    if fn_cls is not None:
        _wrap_autograd(fn_cls)
    try:
        from transformer_engine.pytorch.graph import is_graph_capturing  # noqa: PLC0415
        _TE_GRAPH_CAPTURING[0] = is_graph_capturing
    except Exception:  # pylint: disable=broad-except
        _TE_GRAPH_CAPTURING[0] = None
    cls._ft_patched = True
    return True


# ---- patching at import time ------------------------------------------------------------------
class _PatchingLoader:
    """Delegates to the real loader, then patches the module it executed."""

    def __init__(self, loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        patch(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _Finder:
    """A meta-path finder that only waits for FUSER_MODULE to be imported."""

    def find_spec(self, name, path, target=None):
        if name != FUSER_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


_FINDER = _Finder()


def install_patch() -> None:
    """Patch TE now if its fuser module is loaded, else when it gets imported."""
    mod = sys.modules.get(FUSER_MODULE)
    if mod is not None:
        patch(mod)
        return
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


# ---- process lifetime -------------------------------------------------------------------------
_PREV_HANDLERS: dict = {}


def _on_signal(signum, frame):
    cap = _ACTIVE[0]
    prev = _PREV_HANDLERS.get(signum)
    dying = prev in (signal.SIG_DFL, None) and signum != signal.SIGINT
    if cap is not None:
        try:
            if dying:
                cap.close()
            else:
                cap.flush()
        except Exception:  # pylint: disable=broad-except
            pass
    if callable(prev):
        return prev(signum, frame)
    if prev == signal.SIG_DFL or prev is None:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    return None


def install_signal_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        _warn("enable() called outside the main thread: no SIGTERM/SIGINT flush")
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        cur = signal.getsignal(sig)
        if cur is _on_signal:
            continue
        _PREV_HANDLERS[sig] = cur
        signal.signal(sig, _on_signal)


def _at_exit() -> None:
    cap = _ACTIVE[0]
    if cap is not None:
        try:
            cap.close()
        except Exception as e:  # pylint: disable=broad-except
            sys.stderr.write(f"fusertrace_capture: closing the trace failed: {e}\n")


def _after_fork_in_child() -> None:
    cap = _ACTIVE[0]
    _ACTIVE[0] = None
    if cap is not None:
        cap.abandon()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
