#!/usr/bin/env python3
"""Regenerate the seed inputs of fuzz_chunk and fuzz_packed (tests/fuzz/corpus/{chunk,packed}/).

chunk seeds: every chunk of a few small synthetic traces (fusertrace synth), turned into the
fuzz_chunk input format (fuzz_chunk.c header), in built mode with and without split sizes and
in raw mode; plus the chunks of the packed seeds recorded through libfusertrace_rec (fusers of
0 and 12 ops, chunks without split sizes, extreme values), which synth never writes.
packed seeds: record batches in the ft_rec_append_packed layout (ft_recorder.h) against
fuzz_packed.c's declarations, plus edge cases.
Usage: make_seeds.py BUILD_DIR SCRATCH_DIR   (run from the repository root; BUILD_DIR holds
cli/fusertrace and recorder/libfusertrace_rec.so)
"""
import ctypes
import hashlib
import os
import sqlite3
import struct
import subprocess
import sys

CORPUS = "tests/fuzz/corpus"


def put(kind, data):
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(CORPUS, kind, name), "wb") as f:
        f.write(data)


def unzstd(frame):
    return subprocess.run(["zstd", "-d", "-c", "-q"], input=frame, check=True,
                          stdout=subprocess.PIPE).stdout


def chunk_seeds(cli, scratch):
    runs = [("demo", ["steps=2", "microbatches=2"]),
            ("recompute", ["steps=2", "microbatches=2"]),
            ("pipeline-2dev", ["steps=1", "microbatches=4"]),
            ("recipe-zoo", ["steps=2", "microbatches=2"]),
            ("cuda-graphs", ["steps=3", "microbatches=1"])]
    for name, sets in runs:
        path = os.path.join(scratch, "seed_%s.ftdb" % name)
        if os.path.exists(path):
            os.unlink(path)
        args = [cli, "synth", name, "-o", path]
        for s in sets:
            args += ["--set", s]
        subprocess.run(args, check=True)
        trace_chunks(path)
        os.unlink(path)
    # edge cases: no input, limits only, a header with no records, a main section only
    put("chunk", b"")
    put("chunk", bytes([1, 0, 0, 0]))
    hdr = b"FTC1" + struct.pack("<IIqIqII", 0, 0, 0, 0, 0, 0, 0) + bytes(64)
    put("chunk", bytes([1, 1, 1, 0, 3, 0]) + struct.pack("<I", len(hdr)) + hdr)


def trace_chunks(path):
    """Add every chunk of the trace at path as chunk seeds."""
    db = sqlite3.connect(path)
    n_ops = [r[0] for r in db.execute(
        "SELECT o.n_ops FROM fusers f JOIN oplists o ON o.id = f.oplist ORDER BY f.id")]
    n_recipes = db.execute("SELECT count(*) FROM recipes").fetchone()[0]
    lim = struct.pack("<BH", len(n_ops), n_recipes) + b"".join(
        struct.pack("<H", k) for k in n_ops)
    for first_seq, n_rec, n_calls, raw, checksum, data in db.execute(
            "SELECT first_seq, n_records, n_calls, raw_bytes, checksum, data FROM chunks"):
        main_raw, main_z, sp_raw, sp_z = struct.unpack_from("<4I", data, 4)
        main = unzstd(data[20:20 + main_z])
        sp = unzstd(data[20 + main_z:]) if sp_z else b""
        assert len(main) == main_raw and len(sp) == sp_raw
        body = struct.pack("<I", len(main)) + main + sp
        put("chunk", bytes([1]) + lim + body)
        put("chunk", bytes([0]) + lim + body)
        row = struct.pack("<qIIQq", first_seq, n_rec, n_calls, raw, checksum)
        put("chunk", bytes([3]) + lim + row + data)
    db.close()


# ---- packed ------------------------------------------------------------------------------
CALL, BWD = 0, 1
GRAD, INPUT_RG, HAS_SPLITS, HAS_STEP, HAS_MB, HAS_PHASE, HAS_NS, HAS_FUSE_NS, HAS_RECIPE = (
    1, 2, 1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12)
N_OPS = {1: 3, 2: 1, 5: 0, 9: 12}


def pad8(b):
    return b + bytes(-len(b) % 8)


def call(seq, fuser, flags, recipe=0, step=0, mb=0, ns=0, fuse_ns=0, device=0, rg=None,
         splits=None, phase=None):
    rg = rg if rg is not None else [i % 2 for i in range(N_OPS[fuser])]
    if splits is not None:
        flags |= HAS_SPLITS
    if phase is not None:
        flags |= HAS_PHASE
    ph = phase.encode() if phase is not None else b""
    rec = struct.pack("<7qIiIiII", seq, fuser, recipe, step, mb, ns, fuse_ns, flags, device,
                      len(rg), -1 if splits is None else len(splits), len(ph), CALL)
    rec += pad8(bytes(rg))
    rec += b"".join(struct.pack("<q", v) for v in (splits or []))
    if phase is not None:
        rec += pad8(ph + b"\0")
    return rec


def bwd(seq, of, ns=None):
    return struct.pack("<7qIiIiII", seq, of, 0, 0, 0, ns or 0, 0, 1 if ns is not None else 0, 0,
                       0, 0, 0, BWD)


def record_packed(lib, scratch, name, chunk_calls, recs):
    """Record recs (packed bytes) like fuzz_packed does and add the trace's chunks as seeds."""
    path = os.path.join(scratch, "seed_packed_%s.ftdb" % name)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    lib.ft_rec_open.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p]
    lib.ft_rec_fuser.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p,
                                 ctypes.c_char_p]
    lib.ft_rec_recipe.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p,
                                  ctypes.c_int64, ctypes.c_char_p]
    lib.ft_rec_append_packed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                         ctypes.c_void_p, ctypes.c_void_p]
    lib.ft_rec_close.argtypes = [ctypes.c_void_p]
    opts = (ctypes.c_uint32 * 2)(chunk_calls, 0)
    rec = ctypes.c_void_p()
    assert lib.ft_rec_open(path.encode(), opts, ctypes.byref(rec), None) == 0
    ops = {1: '[{"type":"GroupedLinear","attrs":{"num_groups":4}},{"type":"ScaledSwiGLU"},'
              '{"type":"GroupedLinear","attrs":{"num_groups":4}}]',
           2: '[{"type":"BasicLinear"}]', 5: '[]',
           9: "[" + ",".join('{"type":"%s"}' % t for t in (
               "LayerNorm", "BasicLinear", "Bias", "GELU", "BasicLinear", "Bias", "Dropout",
               "AddExtraInput", "RMSNorm", "BasicLinear", "SiLU", "Identity")) + "]"}
    for fid, js in ops.items():
        assert lib.ft_rec_fuser(rec, fid, None, js.encode()) == 0
    for rid, obj, typ, attrs in ((1, 100, "NVFP4BlockScaling", '{"disable_rht":false}'),
                                 (2, 100, "NVFP4BlockScaling", '{"disable_rht":true}'),
                                 (3, 200, "MXFP8BlockScaling", "{}")):
        assert lib.ft_rec_recipe(rec, rid, typ.encode(), obj, attrs.encode()) == 0
    buf = b"".join(recs)
    assert lib.ft_rec_append_packed(rec, buf, len(buf), None, None) == 0
    assert lib.ft_rec_close(rec) == 0
    trace_chunks(path)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)


def training(steps, mbs, recompute):
    out, seq, ns = [], 1, 1000
    for step in range(steps):
        fwd = []
        for mb in range(mbs):
            for fuser, recipe in ((9, 3), (1, 1 + step % 2), (2, 3), (5, 0)):
                fl = GRAD | INPUT_RG | HAS_STEP | HAS_MB | HAS_NS | HAS_FUSE_NS
                if recipe:
                    fl |= HAS_RECIPE
                sp = [64 + 16 * ((mb + g) % 3) for g in range(4)] if fuser == 1 else None
                out.append(call(seq, fuser, fl, recipe, step, mb, ns, 500 + mb, 0, None, sp,
                                "fwd"))
                fwd.append((seq, fuser, recipe, mb, sp))
                seq += 1
                ns += 1500
        for s, fuser, recipe, mb, sp in reversed(fwd):
            if recompute:
                fl = GRAD | HAS_STEP | HAS_MB | HAS_NS | (HAS_RECIPE if recipe else 0)
                out.append(call(seq, fuser, fl, recipe, step, mb, ns, 0, 0, None, sp,
                                "recompute"))
                s = seq
                seq += 1
            out.append(bwd(seq, s, ns))
            seq += 1
            ns += 900
    return out


def packed_chunk_seeds(lib, scratch):
    fl = GRAD | HAS_STEP | HAS_NS | HAS_RECIPE
    record_packed(lib, scratch, "big", 16, [
        call(10, 9, fl, 3, step=1, ns=5, rg=[0] * 11 + [1]),
        call(11, 9, fl, 3, step=1, ns=6, rg=[1] * 12),
        bwd(12, 11, 9), bwd(13, 10),
        call(14, 5, HAS_NS, ns=-2**63),
        call(15, 5, HAS_NS | HAS_FUSE_NS, ns=2**63 - 1, fuse_ns=-1, device=-3, phase="eval"),
        bwd(2**62, 15, 0),
        call(2**63 - 1, 2, HAS_STEP | HAS_MB, step=-2**63, mb=2**63 - 1, rg=[1])])
    record_packed(lib, scratch, "splits", 8, [
        call(1, 1, HAS_MB, mb=0, splits=[5, 0, 7, 2**40]),
        call(2, 1, HAS_MB, mb=0, splits=[5, 0, 7, 2**40]),
        call(3, 1, HAS_MB, mb=1, splits=[1, 2, 3, 4]),
        call(4, 1, 0, splits=[]),
        call(5, 1, HAS_MB, mb=0, splits=[5, 0, 7, 2**40]),
        call(6, 9, 0, splits=[2**62, 2**62 - 1]),
        call(7, 1, HAS_MB, mb=1, splits=[4, 3, 2, 1])])
    record_packed(lib, scratch, "train", 5, training(1, 2, True))


def packed_seeds():
    recs = training(2, 2, False)
    put("packed", bytes([0]) + b"".join(recs))
    put("packed", bytes([3]) + b"".join(recs))
    put("packed", bytes([1]) + b"".join(training(1, 2, True)))
    put("packed", bytes([7]) + b"".join(training(2, 1, True)))
    # edge cases
    put("packed", bytes([0]))
    put("packed", bytes([0]) + call(1, 5, 0))  # empty fuser, nothing optional
    put("packed", bytes([0]) + call(-5, 2, HAS_RECIPE, 2, rg=[1], splits=[], phase=""))
    put("packed", bytes([2]) + call(1, 9, 0, splits=[0, 0, 2**62, 0], phase="x" * 40) +
        bwd(2, 1) + call(3, 9, HAS_STEP, step=-2**63, rg=[1] * 12, splits=[2**62, 0, 0, 0]))
    put("packed", bytes([0]) + call(9, 1, 0) + call(9, 1, 0))  # seq not increasing
    put("packed", bytes([0]) + call(1, 1, 0)[:-3])  # truncated record
    put("packed", bytes([0]) + bwd(4, 7))  # backward of an unknown call


def main():
    build, scratch = sys.argv[1], sys.argv[2]
    chunk_seeds(os.path.join(build, "cli", "fusertrace"), scratch)
    packed_chunk_seeds(ctypes.CDLL(os.path.join(build, "recorder", "libfusertrace_rec.so")),
                       scratch)
    packed_seeds()


if __name__ == "__main__":
    main()
