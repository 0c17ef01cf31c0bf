/*
 * ft_recorder.h - the public recording API, the record sink interface, and JSONL import/export
 * (the synthetic scenario generator, which emits into a sink, is synth/ft_synth.h).
 *
 * Recording: ft_rec_open -> ft_rec_fuser / ft_rec_recipe declarations -> ft_rec_call /
 * ft_rec_backward / ft_rec_fuser_end appends -> ft_rec_close. Calls are buffered in columns and
 * written as one chunk per batch inside one SQLite transaction, so a chunk is all or nothing; a
 * process killed while recording leaves a trace holding every committed chunk. The ABI is plain
 * (integers, doubles, const char *, arrays with lengths) so the Python capture hook can call it
 * through ctypes.
 *
 * Threading contract: an ft_rec handle is NOT thread-safe; one thread at a time may call into it
 * (the capture hook holds a lock around each call). Different handles on different files may be
 * used concurrently from different threads.
 *
 * Sinks: anything that consumes a record stream (the recorder, the JSONL writer) is an ft_sink,
 * so import (JSONL -> recorder), export (reader -> JSONL) and synth (-> either) share one path.
 */
#ifndef FT_RECORDER_H
#define FT_RECORDER_H

#include "ft_common.h"
#include "ft_trace.h"

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- recorder ----------------------------------------------------------------------------- */
typedef struct ft_rec ft_rec;

typedef struct ft_rec_opts {
    uint32_t chunk_calls; /* records per chunk (0 = default 65536) */
    int zstd_level;       /* 0 = default */
} ft_rec_opts;

/* Create path (must not exist). The trace becomes visible under its name only when complete
 * when import uses a temporary name and renames; the live recorder writes in place so that a
 * killed process leaves the committed chunks. opts may be NULL. */
int ft_rec_open(const char *path, const ft_rec_opts *opts, ft_rec **out, ft_err *err);
/* Flush the pending chunk, write the small-table digest, close. NULL is a no-op. */
int ft_rec_close(ft_rec *r);
/* ft_rec_close with the failure's detail (file, step, OS cause such as "no space left on
 * device") copied into err, since the handle is gone afterwards. */
int ft_rec_close_err(ft_rec *r, ft_err *err);
/* Close without flushing pending records (error paths). */
void ft_rec_abort(ft_rec *r);
const ft_err *ft_rec_error(const ft_rec *r);

int ft_rec_header(ft_rec *r, const ft_header *h); /* before any declaration; at most once */
/* Declare a fuser instance with stream id `id`; ops_json as in ft_fuser_def (any key order,
 * canonicalised on store). Op lists are deduplicated by content. A declaration that repeats an
 * earlier fuser's label and ops costs almost nothing when its first call comes next (a compact
 * instance, docs/trace-file.md): TE's transient OperationFuser per call of a standalone op. */
int ft_rec_fuser(ft_rec *r, int64_t id, const char *label, const char *ops_json);
/* The same as ft_rec_fuser with the label and ops of the declared fuser `like` (which may have
 * ended), without any JSON: what the capture hook declares for a transient fuser over ops it has
 * described before. FT_EINVAL when `like` is not declared. */
int ft_rec_fuser_like(ft_rec *r, int64_t id, int64_t like);
/* The same OperationFuser instance as the earlier fuser `of`, redeclared because its ops changed
 * attributes after a call (capture-jsonl "of"): ops_json has as many ops; calls from now on name
 * id. FT_EINVAL when `of` is not declared before or its op count differs. */
int ft_rec_fuser_of(ft_rec *r, int64_t id, const char *label, const char *ops_json, int64_t of);
/* Declare a recipe state; a second declaration of the same (obj, attrs) is FT_EINVAL. */
int ft_rec_recipe(ft_rec *r, int64_t id, const char *type, int64_t obj, const char *attrs_json);
int ft_rec_call(ft_rec *r, const ft_call *c);
int ft_rec_backward(ft_rec *r, const ft_backward *b);
/* TE dropped the fuser e->fuser (its seq in the call sequence): a later record naming it, or any
 * declaration of its instance, is FT_EINVAL ("has ended"). */
int ft_rec_fuser_end(ft_rec *r, const ft_fuser_end *e);
/* Pre-validated appends, for a producer that has checked the record itself against everything
 * ft_rec_call / ft_rec_backward check (seq order, flag bits, declared fuser and recipe ids, op_rg
 * length and 0/1 values, split count against FT_LIM_SPLITS, non-negative splits whose sum fits
 * in int64, phase length against FT_LIM_PHASE_BYTES, a backward naming an earlier call): the
 * JSONL importer. The recorder skips those checks; it still refuses an undeclared id with
 * FT_ESTATE (a broken promise). Once used, the checked ft_rec_backward on the same handle is
 * FT_ESTATE (the recorder no longer knows every call seq). */
int ft_rec_call_prevalidated(ft_rec *r, const ft_call *c);
int ft_rec_backward_prevalidated(ft_rec *r, const ft_backward *b);
/* Commit the pending chunk now (the next call starts a new chunk). */
int ft_rec_flush(ft_rec *r);

/* ctypes-friendly flat form of ft_rec_call: no structs, phase may be NULL, m_splits may be NULL
 * when n_splits < 0 (absent). */
int ft_rec_call_flat(ft_rec *r, int64_t seq, int64_t fuser, int64_t recipe, uint32_t flags,
                     int32_t device, uint32_t n_op_rg, const uint8_t *op_rg, int32_t n_splits,
                     const int64_t *m_splits, int64_t step, int64_t mb, const char *phase,
                     int64_t ns, int64_t fuse_ns);

/* Append records packed back to back in buf[0, n_bytes), in order (the Python capture hook packs
 * records with struct and hands over a few hundred at a time: one ctypes call instead of one per
 * record). Each record starts 8-byte aligned, native byte order:
 *   offset size  field
 *   0      8     seq
 *   8      8     call: fuser id;  backward: seq of the forward call
 *   16     8     recipe id (call; read only with FT_CF_HAS_RECIPE)
 *   24     8     step          32  8  mb         40  8  ns        48  8  fuse_ns
 *   56     4     call: flags (FT_CF_*; HAS_SPLITS/HAS_PHASE follow the fields below);
 *                backward: 1 if ns is present
 *   60     4     device        64  4  n_op_rg    68  4  n_splits (int32, -1 = absent)
 *   72     4     phase length in bytes (read only with FT_CF_HAS_PHASE)
 *   76     4     kind: FT_REC_CALL, FT_REC_BACKWARD, FT_REC_END (offset 0: seq, 8: fuser id) or
 *                FT_PACKED_FUSER_LIKE (ft_rec_fuser_like: offset 0 the new fuser id, 8 like)
 *                or FT_PACKED_CALL_LIKE (a call, offset 8 its fuser, declared just before it as
 *                ft_rec_fuser_like(fuser, like) would, after the end of another fuser when one
 *                is given: a transient fuser's declaration and first call, and the previous
 *                one's end, in one record); every kind but the two calls ends here
 *   80     FT_PACKED_CALL_LIKE only: 8 bytes like, 8 the end's seq, 8 the ended fuser's id
 *          (negative: no end); what follows then starts at 104
 *   80     n_op_rg bytes of 0/1, zero-padded to a multiple of 8
 *          n_splits int64 split sizes
 *          with FT_CF_HAS_PHASE: the phase, a NUL, zero-padded to a multiple of 8
 * *n_done (may be NULL) = records appended. A bad length or kind is FT_EINVAL naming the record
 * and byte offset; a record the recorder rejects stops the batch with its message in err. */
#define FT_PACKED_FUSER_LIKE 3
#define FT_PACKED_CALL_LIKE  4
int ft_rec_append_packed(ft_rec *r, const void *buf, size_t n_bytes, uint32_t *n_done, ft_err *err);

/* ---- sinks -------------------------------------------------------------------------------- */
typedef struct ft_sink ft_sink;
struct ft_sink {
    void *ctx;
    int (*header_fn)(void *ctx, const ft_header *h);
    int (*fuser_fn)(void *ctx, const ft_fuser_def *f);
    int (*recipe_fn)(void *ctx, const ft_recipe_def *rd);
    int (*call_fn)(void *ctx, const ft_call *c);
    int (*backward_fn)(void *ctx, const ft_backward *b);
    const ft_err *(*error_fn)(void *ctx);            /* detail of the last failure */
    int (*end_fn)(void *ctx, const ft_fuser_end *e); /* a fuser's end; NULL: ends are dropped */
};

/* A sink that records into r. */
void ft_rec_sink(ft_rec *r, ft_sink *out);
/* A sink that records into r through the pre-validated entries: only for ft_jsonl_import, which
 * checks every record before it reaches the sink. */
void ft_rec_sink_prevalidated(ft_rec *r, ft_sink *out);

/* A sink that writes capture-jsonl v1 to f (records in the order given). */
typedef struct ft_jsonl_writer ft_jsonl_writer;
int ft_jsonl_writer_new(FILE *f, ft_jsonl_writer **out);
/* The same, compressed as it is written: one zstd frame with a content checksum, at zstd_level
 * (1..22; 0 = FT_JSONL_ZSTD_LEVEL), streamed (ZSTD_compressStream2), so memory stays small. */
#define FT_JSONL_ZSTD_LEVEL 12
int ft_jsonl_writer_new_zstd(FILE *f, int zstd_level, ft_jsonl_writer **out);
void ft_jsonl_writer_sink(ft_jsonl_writer *w, ft_sink *out);
/* End the output: a compressing writer compresses what it holds and ends its frame (without
 * this the stream is truncated); for a plain writer it does nothing. FT_OK, or FT_EIO / FT_ENOMEM
 * with the detail in ft_jsonl_writer_error. The caller still flushes and closes f. */
int ft_jsonl_writer_finish(ft_jsonl_writer *w);
const ft_err *ft_jsonl_writer_error(const ft_jsonl_writer *w);
void ft_jsonl_writer_free(ft_jsonl_writer *w);

/* ---- import / export ---------------------------------------------------------------------- */
/* Parse capture-jsonl v1 from `in` (named `name` in messages) into sink, streaming: memory holds
 * the declarations and about one byte per call seq (for checking backward references). `in` may
 * be zstd-compressed (told by its first bytes). Bad input -> FT_EINVAL with "NAME:LINE: field 'x':
 * what is wrong" in err. Warnings (unknown fields ignored) go to warn (may be NULL). Every record
 * is checked in full before it reaches the sink, so the sink may be ft_rec_sink_prevalidated. */
int ft_jsonl_import(FILE *in, const char *name, ft_sink *sink, FILE *warn, ft_err *err);
/* flags for ft_jsonl_import_ex */
#define FT_JSONL_NO_FAST_PATH 1u /* parse every line with the general (jansson) path */
/* ft_jsonl_import with flags; FT_JSONL_NO_FAST_PATH is for tests and benchmarks, which compare
 * the two paths: they accept the same input and give the same records and messages. */
int ft_jsonl_import_ex(FILE *in, const char *name, ft_sink *sink, FILE *warn, unsigned flags,
                       ft_err *err);
/* Replay every record of t, in stream order with declarations where they stood, into sink. */
int ft_trace_export(ft_trace *t, ft_sink *sink, ft_err *err);
/* The small tables' JSON (op lists with their op counts, recipe attrs, header env and extra) is
 * exactly what the recorder writes, so the export of the trace imports again; FT_ECORRUPT
 * naming the table and row otherwise. ft_trace_export checks it first; `verify` runs it. */
int ft_trace_check_json(ft_trace *t, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif /* FT_RECORDER_H */
