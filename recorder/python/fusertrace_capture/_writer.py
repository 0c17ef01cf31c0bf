"""Trace writers: the C recorder through ctypes (rank{R}.ftdb) and a JSON Lines fallback
(rank{R}.jsonl, format docs/capture-format.md).

Both take the same calls: header(dict), fuser(id, label, ops_json), fuser_like(id, like, label,
ops_json) (a fuser with the label and ops of the earlier fuser `like`), recipe(id, type, obj,
attrs_json), call(...), call_like((like, label, ops_json), ...) (fuser_like, then call: a
transient fuser's declaration and first call), backward(seq, call, ns), end(seq, fuser), flush(),
close(). Neither is thread-safe; the capture state holds a lock around every use.

Durability: the C recorder commits calls in chunks inside SQLite transactions, so a killed
process leaves every committed chunk; flush() commits the pending one. The JSONL writer keeps up
to `flush_every` complete lines in memory and writes them with one os.write, so a killed process
loses at most those lines and never leaves half a record behind (short of a full disk).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import struct
from typing import Optional, Sequence

# Call flag bits: schema/ft_trace.h (FT_CF_*).
CF_GRAD = 1 << 0
CF_INPUT_RG = 1 << 1
CF_GRAPH = 1 << 2
CF_REBUILT = 1 << 3
CF_HAS_GRAPH = 1 << 4
CF_HAS_REBUILT = 1 << 5
CF_HAS_SPLITS = 1 << 6
CF_HAS_STEP = 1 << 7
CF_HAS_MB = 1 << 8
CF_HAS_PHASE = 1 << 9
CF_HAS_NS = 1 << 10
CF_HAS_FUSE_NS = 1 << 11
CF_HAS_RECIPE = 1 << 12

LIB_NAME = "libfusertrace_rec.so"
_ERR_MAX = 512  # FT_ERR_MAX in common/ft_common.h
_SYMBOLS = ("ft_rec_open", "ft_rec_header", "ft_rec_fuser", "ft_rec_fuser_of", "ft_rec_recipe",
            "ft_rec_call_flat",
            "ft_rec_backward", "ft_rec_flush", "ft_rec_close", "ft_rec_abort", "ft_rec_error",
            "ft_rec_append_packed")
# The fixed part of a packed record (ft_rec_append_packed in recorder/ft_recorder.h): seq,
# fuser|call, recipe, step, mb, ns, fuse_ns, flags, device, n_op_rg, n_splits, phase_len, kind.
_PACKED = struct.Struct("=qqqqqqqIiIiII")
assert _PACKED.size == 80
# FT_REC_*, FT_PACKED_FUSER_LIKE, FT_PACKED_CALL_LIKE
_REC_CALL, _REC_BACKWARD, _REC_END, _REC_FUSER_LIKE, _REC_CALL_LIKE = 0, 1, 2, 3, 4
# A fuser end: seq, fuser, zeros, n_splits (-1), phase length (0), kind.
_PACKED_END = struct.Struct("=qq52xiII")
assert _PACKED_END.size == 80
# A call of kind FT_PACKED_CALL_LIKE: the fixed part (kind 4); like, the end's seq and fuser
# (-1: no end); op_rg of up to 8 ops (struct pads the bytes with zeros to 8).
_PACKED_CALL_LIKE8 = struct.Struct("=qqqqqqqIiIiIIqqq8s")
assert _PACKED_CALL_LIKE8.size == 112
_ZEROS = b"\0" * 8


class WriterError(RuntimeError):
    """A writer failed; the message names the file and the recorder's detail."""


def _canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _b(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else s.encode("utf-8")


# ---- C recorder -------------------------------------------------------------------------------
class _FtErr(ctypes.Structure):
    _fields_ = [("rc", ctypes.c_int), ("msg", ctypes.c_char * _ERR_MAX)]


class _FtHeader(ctypes.Structure):  # schema/ft_trace.h: ft_header
    _fields_ = [
        ("te_version", ctypes.c_char_p),
        ("torch_version", ctypes.c_char_p),
        ("host", ctypes.c_char_p),
        ("started_at", ctypes.c_char_p),
        ("has_rank", ctypes.c_int),
        ("has_world_size", ctypes.c_int),
        ("rank", ctypes.c_int64),
        ("world_size", ctypes.c_int64),
        ("env_json", ctypes.c_char_p),
        ("extra_json", ctypes.c_char_p),
    ]


_lib_cache: dict = {}


def _candidates(explicit: Optional[str]) -> list:
    """(origin, path) of the places the recorder library may be, in the order they are tried."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    if explicit:
        out.append(("argument", explicit))
    env = os.environ.get("FUSERTRACE_LIB")
    if env:
        out.append(("FUSERTRACE_LIB", env))
    out.append(("package", os.path.join(here, LIB_NAME)))
    out.append(("package parent", os.path.join(os.path.dirname(here), LIB_NAME)))
    # `cmake --install` writes the libdir it installed the library into beside this file
    try:
        from . import _installed  # type: ignore[attr-defined]
        out.append(("install libdir", os.path.join(_installed.LIBDIR, LIB_NAME)))
    except ImportError:
        pass
    # an installed tree: PREFIX/lib/pythonX.Y/site-packages/fusertrace_capture -> PREFIX/lib
    site = os.path.dirname(here)
    out.append(("install tree", os.path.join(os.path.dirname(os.path.dirname(site)), LIB_NAME)))
    # a checkout built with ./ft.sh: recorder/python/fusertrace_capture -> build/recorder
    root = os.path.dirname(os.path.dirname(site))
    out.append(("build tree", os.path.join(root, "build", "recorder", LIB_NAME)))
    # the dynamic linker's search path (e.g. /usr/local/lib after ldconfig)
    found = ctypes.util.find_library("fusertrace_rec")
    if found:
        out.append(("linker path", found))
    return out


def find_library(explicit: Optional[str] = None) -> tuple[Optional[str], str]:
    """(path, "") of the recorder library to use, or (None, why not).

    Looked up in order: `explicit`, $FUSERTRACE_LIB, next to the package, next to its parent
    folder, the libdir `cmake --install` recorded, the lib folder of the tree the package is
    installed in, a checkout's build/recorder, the dynamic linker's path. A library that lacks
    the recorder's symbols (e.g. a placeholder build) is refused."""
    reasons = []
    seen = set()
    for origin, path in _candidates(explicit):
        if path in seen:
            continue
        seen.add(path)
        if os.sep in path and not os.path.exists(path):
            if origin in ("argument", "FUSERTRACE_LIB"):
                reasons.append(f"{origin} {path}: no such file")
            continue
        lib, why = _load(path)
        if lib is not None:
            return path, ""
        reasons.append(f"{origin} {path}: {why}")
    if not reasons:
        reasons.append(f"{LIB_NAME} not found (install fusertrace with `./ft.sh install`, set "
                       "FUSERTRACE_LIB or copy it next to the package)")
    return None, "; ".join(reasons)


def _load(path: str):
    if path in _lib_cache:
        return _lib_cache[path]
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        res = (None, str(e))
        _lib_cache[path] = res
        return res
    missing = [s for s in _SYMBOLS if not hasattr(lib, s)]
    if missing:
        res = (None, "lacks " + ", ".join(missing))
        _lib_cache[path] = res
        return res
    c_rec = ctypes.c_void_p
    lib.ft_rec_open.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(c_rec),
                                ctypes.POINTER(_FtErr)]
    lib.ft_rec_open.restype = ctypes.c_int
    lib.ft_rec_close.argtypes = [c_rec]
    lib.ft_rec_close.restype = ctypes.c_int
    lib.ft_rec_abort.argtypes = [c_rec]
    lib.ft_rec_abort.restype = None
    lib.ft_rec_error.argtypes = [c_rec]
    lib.ft_rec_error.restype = ctypes.POINTER(_FtErr)
    lib.ft_rec_header.argtypes = [c_rec, ctypes.POINTER(_FtHeader)]
    lib.ft_rec_header.restype = ctypes.c_int
    lib.ft_rec_fuser.argtypes = [c_rec, ctypes.c_int64, ctypes.c_char_p, ctypes.c_char_p]
    lib.ft_rec_fuser.restype = ctypes.c_int
    lib.ft_rec_fuser_of.argtypes = [c_rec, ctypes.c_int64, ctypes.c_char_p, ctypes.c_char_p,
                                    ctypes.c_int64]
    lib.ft_rec_fuser_of.restype = ctypes.c_int
    lib.ft_rec_recipe.argtypes = [c_rec, ctypes.c_int64, ctypes.c_char_p, ctypes.c_int64,
                                  ctypes.c_char_p]
    lib.ft_rec_recipe.restype = ctypes.c_int
    # op_rg is passed as a bytes object (c_char_p hands C a pointer to its buffer, no copy);
    # m_splits as the address of an int64 array (see CRecorder.call).
    lib.ft_rec_call_flat.argtypes = [
        c_rec, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint32, ctypes.c_int32,
        ctypes.c_uint32, ctypes.c_char_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64,
        ctypes.c_int64, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64]
    lib.ft_rec_call_flat.restype = ctypes.c_int
    lib.ft_rec_flush.argtypes = [c_rec]
    lib.ft_rec_flush.restype = ctypes.c_int
    lib.ft_rec_append_packed.argtypes = [c_rec, ctypes.c_void_p, ctypes.c_size_t,
                                         ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(_FtErr)]
    lib.ft_rec_append_packed.restype = ctypes.c_int
    res = (lib, "")
    _lib_cache[path] = res
    return res


class CRecorder:
    """Writes rank{R}.ftdb through libfusertrace_rec.so.

    Calls and backward records are packed into a buffer (struct, a fraction of a microsecond
    each) and handed to ft_rec_append_packed every `batch` records, on flush() and before any
    declaration, so the stream order is kept and one ctypes call serves many records. A fuser's
    end is held until the next record: a transient fuser's end, the next one's declaration and
    its first call then make one packed record (call_like); any other record packs it first."""

    kind = "ftdb"

    def __init__(self, lib_path: str, path: str, batch: int = 256) -> None:
        lib, why = _load(lib_path)
        if lib is None:
            raise WriterError(f"{lib_path}: {why}")
        self._lib = lib
        self.path = path
        err = _FtErr()
        handle = ctypes.c_void_p()
        rc = lib.ft_rec_open(path.encode(), None, ctypes.byref(handle), ctypes.byref(err))
        if rc != 0 or not handle.value:
            raise WriterError(f"{path}: {err.msg.decode(errors='replace') or f'rc {rc}'}")
        self._h = handle
        self._buf = bytearray()
        self._n = 0
        self._batch = max(1, batch)
        self._pad: dict = {}  # op_rg / phase bytes -> padded form
        self._append = lib.ft_rec_append_packed
        self._done = ctypes.c_uint32()
        self._err = _FtErr()
        self._end_seq, self._end_fid = 0, -1  # a fuser end not packed yet (-1: none)

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            e = self._lib.ft_rec_error(self._h)
            msg = e.contents.msg.decode(errors="replace") if e else ""
            raise WriterError(f"{self.path}: {what}: {msg or f'rc {rc}'}")

    def _pack_end(self) -> None:
        """Pack the end held back for the next record."""
        self._buf += _PACKED_END.pack(self._end_seq, self._end_fid, -1, 0, _REC_END)
        self._end_fid = -1
        self._n += 1

    def _send(self) -> None:
        """Hand the packed records to the recorder."""
        if self._end_fid >= 0:
            self._pack_end()
        if not self._n:
            return
        buf, n = self._buf, self._n
        self._buf, self._n = bytearray(), 0
        arr = (ctypes.c_char * len(buf)).from_buffer(buf)
        rc = self._append(self._h, arr, len(buf), ctypes.byref(self._done),
                          ctypes.byref(self._err))
        if rc != 0:
            raise WriterError(f"{self.path}: {self._err.msg.decode(errors='replace')} "
                              f"({self._done.value} of {n} records written)")

    def header(self, h: dict) -> None:
        known = ("te_version", "torch_version", "host", "started_at", "rank", "world_size", "env")
        extra = {k: v for k, v in h.items() if k not in known}
        hs = _FtHeader(
            te_version=_b(h.get("te_version")), torch_version=_b(h.get("torch_version")),
            host=_b(h.get("host")), started_at=_b(h.get("started_at")),
            has_rank=int(h.get("rank") is not None),
            has_world_size=int(h.get("world_size") is not None),
            rank=h.get("rank") or 0, world_size=h.get("world_size") or 0,
            env_json=_canon(h.get("env") or {}).encode(), extra_json=_canon(extra).encode())
        self._check(self._lib.ft_rec_header(self._h, ctypes.byref(hs)), "header")

    def fuser(self, fid: int, label: Optional[str], ops_json: str,
              of: Optional[int] = None) -> None:
        self._send()
        if of is None:
            rc = self._lib.ft_rec_fuser(self._h, fid, _b(label), ops_json.encode())
        else:
            rc = self._lib.ft_rec_fuser_of(self._h, fid, _b(label), ops_json.encode(), of)
        self._check(rc, f"fuser {fid}")

    def fuser_like(self, fid: int, like: int, label: Optional[str], ops_json: str) -> None:
        """A fuser with the label and ops of `like` (packed: no JSON crosses into C)."""
        if self._end_fid >= 0:
            self._pack_end()
        self._buf += _PACKED.pack(fid, like, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, _REC_FUSER_LIKE)
        self._n += 1
        if self._n >= self._batch:
            self._send()

    def end(self, seq: int, fid: int) -> None:
        if self._end_fid >= 0:
            self._pack_end()
            if self._n >= self._batch:
                self._send()
        self._end_seq, self._end_fid = seq, fid

    def recipe(self, rid: int, rtype: str, obj: int, attrs_json: str) -> None:
        self._send()
        self._check(self._lib.ft_rec_recipe(self._h, rid, rtype.encode(), obj,
                                            attrs_json.encode()), f"recipe {rid}")

    def call(self, seq, fuser, recipe, flags, device, op_rg: bytes, splits, n_splits, step, mb,
             phase: Optional[bytes], ns, fuse_ns) -> None:
        """splits: None, the address of n_splits int64 values valid during the call, or bytes
        holding them."""
        if self._end_fid >= 0:
            self._pack_end()
        pad = self._pad
        rg = pad.get(op_rg)
        if rg is None:
            rg = pad[op_rg] = op_rg + _ZEROS[:(-len(op_rg)) & 7]
        buf = self._buf
        buf += _PACKED.pack(seq, fuser, -1 if recipe is None else recipe, step, mb, ns, fuse_ns,
                            flags, device, len(op_rg), n_splits,
                            0 if phase is None else len(phase), _REC_CALL)
        buf += rg
        if splits is not None:
            buf += ctypes.string_at(splits, 8 * n_splits) if splits.__class__ is int else splits
        if phase is not None:
            ph = pad.get(phase)
            if ph is None:
                ph = pad[phase] = phase + _ZEROS[:8 - (len(phase) & 7)]
            buf += ph
        self._n += 1
        if self._n >= self._batch:
            self._send()

    def call_like(self, decl: tuple, seq, fuser, recipe, flags, device, op_rg: bytes, splits,
                  n_splits, step, mb, phase: Optional[bytes], ns, fuse_ns) -> None:
        """A fuser declared like decl[0] (decl: (like, label, ops JSON)), then its call: one
        packed record."""
        if not 0 < len(op_rg) <= 8 or splits is not None or phase is not None:
            self.fuser_like(fuser, decl[0], decl[1], decl[2])
            self.call(seq, fuser, recipe, flags, device, op_rg, splits, n_splits, step, mb,
                      phase, ns, fuse_ns)
            return
        self._buf += _PACKED_CALL_LIKE8.pack(seq, fuser, -1 if recipe is None else recipe, step,
                                             mb, ns, fuse_ns, flags, device, len(op_rg),
                                             n_splits, 0, _REC_CALL_LIKE, decl[0], self._end_seq,
                                             self._end_fid, op_rg)
        self._end_fid = -1
        self._n += 1
        if self._n >= self._batch:
            self._send()

    def backward(self, seq: int, call: int, ns: Optional[int]) -> None:
        if self._end_fid >= 0:
            self._pack_end()
        self._buf += _PACKED.pack(seq, call, 0, 0, 0, 0 if ns is None else ns, 0,
                                  0 if ns is None else 1, 0, 0, -1, 0, _REC_BACKWARD)
        self._n += 1
        if self._n >= self._batch:
            self._send()

    def flush(self) -> None:
        self._send()
        self._check(self._lib.ft_rec_flush(self._h), "flush")

    def close(self) -> None:
        if self._h is None:
            return
        try:
            self._send()
        finally:
            h, self._h = self._h, None
            rc = self._lib.ft_rec_close(h)
        if rc != 0:
            raise WriterError(f"{self.path}: close failed (rc {rc})")

    def abandon(self) -> None:
        """Forget the handle without touching the file (a forked child)."""
        self._h = None
        self._buf, self._n, self._end_fid = bytearray(), 0, -1


# ---- JSON Lines fallback ----------------------------------------------------------------------
class JsonlWriter:
    """Writes rank{R}.jsonl (capture-jsonl v1), flushing every `flush_every` lines."""

    kind = "jsonl"

    def __init__(self, path: str, flush_every: int = 256) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self._lines: list[str] = []
        self._flush_every = max(1, flush_every)

    def _put(self, line: str) -> None:
        self._lines.append(line)
        if len(self._lines) >= self._flush_every:
            self.flush()

    def header(self, h: dict) -> None:
        rec = {"t": "header", "format": "fusertrace-capture", "version": 1}
        rec.update({k: v for k, v in h.items() if v is not None})
        self._put(_canon(rec))
        self.flush()

    def fuser(self, fid: int, label: Optional[str], ops_json: str,
              of: Optional[int] = None) -> None:
        lab = "" if label is None else ',"label":' + json.dumps(label)
        if of is not None:
            lab += ',"of":%d' % of
        self._put('{"t":"fuser","id":%d%s,"ops":%s}' % (fid, lab, ops_json))

    def fuser_like(self, fid: int, like: int, label: Optional[str], ops_json: str) -> None:
        self.fuser(fid, label, ops_json)

    def call_like(self, decl: tuple, seq, fuser, *call) -> None:
        self.fuser(fuser, decl[1], decl[2])
        self.call(seq, fuser, *call)

    def end(self, seq: int, fid: int) -> None:
        self._put('{"t":"fuser_end","seq":%d,"fuser":%d}' % (seq, fid))

    def recipe(self, rid: int, rtype: str, obj: int, attrs_json: str) -> None:
        self._put('{"t":"recipe","id":%d,"type":%s,"obj":%d,"attrs":%s}'
                  % (rid, json.dumps(rtype), obj, attrs_json))

    def call(self, seq, fuser, recipe, flags, device, op_rg: bytes, splits, n_splits, step, mb,
             phase: Optional[bytes], ns, fuse_ns) -> None:
        parts = ['{"t":"call","seq":%d,"fuser":%d,"recipe":%s,"grad":%s,"input_rg":%s,'
                 '"op_rg":[%s],"device":%d'
                 % (seq, fuser, "null" if recipe is None else recipe,
                    "true" if flags & CF_GRAD else "false",
                    "true" if flags & CF_INPUT_RG else "false",
                    ",".join("true" if b else "false" for b in op_rg), device)]
        if flags & CF_HAS_SPLITS:
            parts.append(',"m_splits":[%s]' % ",".join(map(str, splits_list(splits, n_splits))))
        if flags & CF_HAS_STEP:
            parts.append(',"step":%d' % step)
        if flags & CF_HAS_MB:
            parts.append(',"mb":%d' % mb)
        if flags & CF_HAS_PHASE:
            parts.append(',"phase":' + json.dumps(phase.decode()))
        if flags & CF_HAS_GRAPH:
            parts.append(',"graph":' + ("true" if flags & CF_GRAPH else "false"))
        if flags & CF_HAS_NS:
            parts.append(',"ns":%d' % ns)
        if flags & CF_HAS_FUSE_NS:
            parts.append(',"fuse_ns":%d' % fuse_ns)
        if flags & CF_HAS_REBUILT:
            parts.append(',"rebuilt":' + ("true" if flags & CF_REBUILT else "false"))
        parts.append("}")
        self._put("".join(parts))

    def backward(self, seq: int, call: int, ns: Optional[int]) -> None:
        tail = "" if ns is None else ',"ns":%d' % ns
        self._put('{"t":"backward","seq":%d,"call":%d%s}' % (seq, call, tail))

    def flush(self) -> None:
        if not self._lines or self._fd is None:
            return
        data = ("\n".join(self._lines) + "\n").encode("utf-8")
        self._lines = []
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def close(self) -> None:
        if self._fd is None:
            return
        self.flush()
        fd, self._fd = self._fd, None
        os.close(fd)

    def abandon(self) -> None:
        self._lines = []
        self._fd = None


def splits_list(splits, n: int) -> Sequence[int]:
    """The int64 values of `splits`: bytes (native order) or the address of an array."""
    if splits is None or n <= 0:
        return []
    if splits.__class__ is int:
        return (ctypes.c_int64 * n).from_address(splits)[:]
    return memoryview(splits).cast("q").tolist()
