#!/usr/bin/env python3
"""Regenerate the seed inputs of fuzz_chunk and fuzz_packed (tests/fuzz/corpus/{chunk,packed}/).

chunk seeds: every chunk of a few small synthetic traces (fusertrace synth), turned into the
fuzz_chunk input format (fuzz_chunk.c header), in built mode with and without split sizes and
in raw mode. packed seeds: record batches in the ft_rec_append_packed layout
(ft_recorder.h) against fuzz_packed.c's declarations, plus edge cases.
Usage: make_seeds.py FUSERTRACE_BINARY SCRATCH_DIR   (run from the repository root)
"""
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
        os.unlink(path)
    # edge cases: no input, limits only, a header with no records, a main section only
    put("chunk", b"")
    put("chunk", bytes([1, 0, 0, 0]))
    hdr = b"FTC1" + struct.pack("<IIqIqII", 0, 0, 0, 0, 0, 0, 0) + bytes(64)
    put("chunk", bytes([1, 1, 1, 0, 3, 0]) + struct.pack("<I", len(hdr)) + hdr)


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
    cli, scratch = sys.argv[1], sys.argv[2]
    chunk_seeds(cli, scratch)
    packed_seeds()


if __name__ == "__main__":
    main()
