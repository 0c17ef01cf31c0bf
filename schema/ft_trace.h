/*
 * ft_trace.h - the trace file (.ftdb): records, open/create/verify, and the streaming reader.
 *
 * A trace is a SQLite database defined by schema/trace.sql (application_id and user_version
 * identify it). Small tables hold what repeats rarely (meta, op lists, fusers, recipes); calls and
 * backward events live in zstd-compressed columnar chunks (layout: schema/chunk.h). Every byte of
 * recorded content is covered by a checksum: each chunk by its own, the small tables by a digest
 * kept in meta. Readers check both and name what is damaged.
 *
 * This header is the contract shared by the recorder (writes), the JSONL import/export, synth and
 * the replayer (reads). Records mirror the capture stream, version 1 (docs/capture-format.md).
 *
 * Threading: an ft_trace or ft_reader handle is used by one thread at a time; distinct handles on
 * distinct files (or read-only handles on one file) may be used from different threads.
 */
#ifndef FT_TRACE_H
#define FT_TRACE_H

#include "ft_common.h"
#include "ft_decl.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PRAGMA user_version of traces this build writes; it reads formats 1 and 2 */
#define FT_FORMAT_VERSION 2
#define FT_APPLICATION_ID 0x46545243 /* 'FTRC', PRAGMA application_id */

/* ---- records (the in-memory form of capture-jsonl v1) ------------------------------------- */

/* Call flag bits (ft_call.flags, ft_batch.flags[]). HAS_* bits mark optional fields present. */
enum {
    FT_CF_GRAD = 1u << 0,     /* torch.is_grad_enabled() */
    FT_CF_INPUT_RG = 1u << 1, /* input.requires_grad */
    FT_CF_GRAPH = 1u << 2,    /* inside CUDA graph capture / warm-up (valid if HAS_GRAPH) */
    FT_CF_REBUILT = 1u << 3,  /* captured run built a plan (valid if HAS_REBUILT) */
    FT_CF_HAS_GRAPH = 1u << 4,
    FT_CF_HAS_REBUILT = 1u << 5,
    FT_CF_HAS_SPLITS = 1u << 6, /* m_splits present (possibly empty) */
    FT_CF_HAS_STEP = 1u << 7,
    FT_CF_HAS_MB = 1u << 8,
    FT_CF_HAS_PHASE = 1u << 9,
    FT_CF_HAS_NS = 1u << 10,
    FT_CF_HAS_FUSE_NS = 1u << 11,
    FT_CF_HAS_RECIPE = 1u << 12, /* recipe is not null */
    /* the stored form's (ft_batch.flags only, never in an ft_call): the call or end names a
     * compact instance of ft_batch.fuser[i] (same label and ops, no fusers row), whose stream id
     * is ft_batch.sid[i]; FT_CF_NEW_FUSER: the call declares it (the capture stream's fuser
     * record stood right before the call) */
    FT_CF_INSTANCE = 1u << 13,
    FT_CF_NEW_FUSER = 1u << 14,
};
#define FT_CF_CALL_BITS ((1u << 13) - 1u) /* the bits an ft_call may carry */

/* Record kinds in the call stream. FT_REC_END: TE dropped the fuser (capture-jsonl fuser_end);
 * no later record names it. */
enum { FT_REC_CALL = 0, FT_REC_BACKWARD = 1, FT_REC_END = 2 };

/* One fuser invocation. Stream ids (fuser, recipe) are the ids declared in the capture stream. */
typedef struct ft_call {
    int64_t seq;             /* strictly increasing within the stream (shared with backward) */
    int64_t fuser;           /* declared fuser id */
    int64_t recipe;          /* declared recipe id; meaningful only if FT_CF_HAS_RECIPE */
    uint32_t flags;          /* FT_CF_* */
    int32_t device;          /* CUDA device index of the input */
    uint32_t n_op_rg;        /* == the fuser's op count */
    const uint8_t *op_rg;    /* [n_op_rg] 0/1: op i has a parameter/extra input needing grad */
    uint32_t n_splits;       /* valid if HAS_SPLITS */
    const int64_t *m_splits; /* [n_splits] tokens per group, each >= 0 */
    int64_t step, mb;        /* valid if HAS_STEP / HAS_MB */
    const char *phase;       /* valid if HAS_PHASE: "fwd", "recompute", "eval", ... */
    int64_t ns;              /* monotonic timestamp, ns; valid if HAS_NS */
    int64_t fuse_ns;         /* captured time deciding/building the plan, ns; HAS_FUSE_NS */
} ft_call;

/* The backward pass of an earlier call ran. */
typedef struct ft_backward {
    int64_t seq;  /* position in the same sequence as calls */
    int64_t call; /* seq of the forward call whose saved plan ran backward */
    int has_ns;   /* ns present */
    int64_t ns;
} ft_backward;

/* A fuser's end: TE dropped the OperationFuser (its Python object was collected), so no record
 * after this one names it or any declaration of its instance (capture "of"). */
typedef struct ft_fuser_end {
    int64_t seq;   /* position in the same sequence as calls */
    int64_t fuser; /* declared fuser id */
} ft_fuser_end;

/* The stream header; fields absent in the source are NULL / has_* = 0. env_json and
 * extra_json are canonical JSON objects ("{}" when empty); extra_json holds header fields that
 * the format does not name, kept so export gives them back. */
typedef struct ft_header {
    const char *te_version, *torch_version, *host, *started_at;
    int has_rank, has_world_size;
    int64_t rank, world_size;
    const char *env_json;
    const char *extra_json;
} ft_header;

/* ---- the trace handle --------------------------------------------------------------------- */
typedef struct ft_trace ft_trace;

enum {
    /* read-only; checks application_id, user_version, small-table digests and ft_limits.h.
     * Creates no file beside the trace: a closed trace is read as it is (side files ignored), one
     * not closed with its -wal when that is safe (schema/trace.c says when) */
    FT_OPEN_READ = 0,
    FT_OPEN_CREATE = 1, /* create a new file (fails if it exists); WAL, explicit transactions */
};

/* Open or create. On failure *out is NULL, and if err is non-NULL it names the file and
 * problem (e.g. "t.ftdb: not a fusertrace trace (application_id 0x0)"). */
int ft_trace_open(const char *path, int mode, ft_trace **out, ft_err *err);
int ft_trace_close(ft_trace *t); /* NULL is a no-op */
/* Remove a trace file with the side files SQLite may leave beside it (-wal, -shm, -journal):
 * a stale WAL beside a new file of the same name would be replayed into it. Missing files are
 * fine. */
void ft_trace_remove(const char *path);
const ft_err *ft_trace_error(const ft_trace *t);
/* What a reader should tell its user about how the trace was read, NULL if nothing: that the
 * recording was not closed (with how many calls the trace holds, and whether a -wal beside it
 * may hold more), or that a side file beside a closed trace was ignored. Names the file. */
const char *ft_trace_notice(const ft_trace *t);
/* 1 when the trace was read with its -wal (a recording not closed, its -shm beside it), 0 when
 * from its main file alone (immutable): what another connection to the file must do to see
 * the same content. */
int ft_trace_wal_read(const ft_trace *t);

/* Seal a trace whose recording was not closed (killed, or the machine stopped): fold a
 * leftover -wal into the main file, mark it state 'recovered' and leave one self-contained
 * file, as a close does. Whether the trace was closed is read from the main file alone
 * (immutable) before anything opens it for writing: a closed trace is left byte for byte as it
 * is, and a -wal or -journal beside it is neither applied nor removed (was_closed, ignored_*);
 * one whose close was killed before its header switch is finished only when its -wal holds
 * nothing the main file lacks (else FT_EINVAL: move the side file away). A file that is not a
 * trace is refused before anything touches it. A damaged -wal is refused (FT_ECORRUPT) unless
 * force, which keeps what comes before the damage. FT_ESTATE when another process has the
 * trace open. */
typedef struct ft_seal_info {
    int was_closed;                          /* the trace was closed already */
    int ignored_wal, ignored_journal;        /* a side file beside the closed trace, not read */
    uint64_t wal_commits;                    /* commits the -wal held */
    int wal_damaged;                         /* the -wal was damaged (only with force) */
    uint64_t n_calls, n_backwards, n_chunks; /* what the sealed trace holds */
} ft_seal_info;
int ft_trace_seal(const char *path, int force, ft_seal_info *out, ft_err *err);

/* Small tables, loaded at open. Indices are dense row indices 0..n-1 in declaration order;
 * calls in batches refer to fusers and recipes by these indices. Strings live as long as t. */
const ft_header *ft_trace_header(const ft_trace *t);
uint32_t ft_trace_n_fusers(const ft_trace *t);
const ft_fuser_def *ft_trace_fuser(const ft_trace *t, uint32_t idx);
uint32_t ft_trace_n_recipes(const ft_trace *t);
const ft_recipe_def *ft_trace_recipe(const ft_trace *t, uint32_t idx);
/* Totals from the chunk index (no decoding). */
uint64_t ft_trace_n_calls(const ft_trace *t);
uint64_t ft_trace_n_backwards(const ft_trace *t);
uint64_t ft_trace_n_fuser_ends(const ft_trace *t); /* meta "n_fuser_ends"; 0 in format 1 */
uint64_t ft_trace_n_chunks(const ft_trace *t);

/* Full check: schema, small-table digest, every chunk's checksum and decode, every reference
 * (fuser/recipe ids, backward->call seqs, op_rg lengths) and seq order. FT_OK or the first
 * problem (detail in err). */
int ft_trace_verify(ft_trace *t, ft_err *err);
/* The schema alone (verify's first check after SQLite's own): every table, index and view the
 * file defines is trace.sql's, so nothing of its own (a view named `calls`, say) can stand in
 * for what a reader expects. FT_OK or FT_ECORRUPT "PATH: schema differs ...". */
int ft_trace_check_schema(ft_trace *t, ft_err *err);

/* ---- streaming reader: one decoded chunk at a time ---------------------------------------- */
/* A batch is one chunk decoded column by column. Arrays are valid until the next
 * ft_reader_next or ft_reader_close. Entries for a backward record: fuser/recipe/device/op_rg
 * are 0/-1/0/empty and bwd_call holds the referenced seq. */
typedef struct ft_batch {
    uint64_t chunk_id;         /* chunk row id, for messages */
    uint32_t n;                /* records in this batch */
    const uint8_t *kind;       /* [n] FT_REC_CALL / FT_REC_BACKWARD / FT_REC_END */
    const int64_t *seq;        /* [n] */
    const uint32_t *fuser;     /* [n] dense fuser index: the record's fuser, or for a compact
                                * instance (FT_CF_INSTANCE) the fuser it repeats (its template:
                                * label, ops, model) */
    const int64_t *sid;        /* [n] stream id of the record's fuser (calls and ends; 0 for a
                                * backward record): for a compact instance its own */
    const int32_t *recipe;     /* [n] dense recipe index, -1 when null */
    const uint32_t *flags;     /* [n] FT_CF_* */
    const int32_t *device;     /* [n] */
    const uint32_t *first_rg;  /* [n] smallest i with op_rg[i] set, n_ops if none (derived) */
    const uint32_t *op_rg_off; /* [n+1] offsets into op_rg */
    const uint8_t *op_rg;      /* [op_rg_off[n]] 0/1 per op */
    const int64_t *step, *mb;  /* [n] valid where HAS_STEP / HAS_MB */
    const int32_t *phase;      /* [n] index into phases[], -1 when absent */
    const char *const *phases; /* [n_phases] distinct phase strings of this batch */
    uint32_t n_phases;
    const int64_t *ns, *fuse_ns; /* [n] valid where HAS_NS / HAS_FUSE_NS */
    const int64_t *bwd_call;     /* [n] backward records: seq of the forward call */
    const int64_t *n_tokens;     /* [n] sum of m_splits (always decoded; 0 when absent) */
    /* split sizes: decoded only if the reader was opened with FT_READ_SPLITS, else NULL */
    const uint32_t *splits_off; /* [n+1] offsets into splits */
    const int64_t *splits;      /* [splits_off[n]] */
} ft_batch;

typedef struct ft_reader ft_reader;
/* FT_READ_SPLITS: decode split sizes into the batch. FT_READ_CHECK_SPLITS: without them,
 * still decompress the split section and check its checksum, so that a reader that needs no
 * split sizes (info, replay) reports the damage verify would (FT_ECORRUPT naming the chunk). */
enum { FT_READ_SPLITS = 1u << 0, FT_READ_CHECK_SPLITS = 1u << 1 };

int ft_reader_open(ft_trace *t, unsigned read_flags, ft_reader **out);
/* *out_batch = next chunk, or NULL at the end (returns FT_OK). On damage returns FT_ECORRUPT
 * with a message naming the chunk id (in ft_trace_error). */
int ft_reader_next(ft_reader *r, const ft_batch **out_batch);
/* Restrict to chunks [first, first+count) by position (for splitting work over threads). */
int ft_reader_range(ft_reader *r, uint64_t first_chunk, uint64_t n_chunks);
/* The position of the chunk the next ft_reader_next decodes. */
uint64_t ft_reader_pos(const ft_reader *r);
/* The chunk positions [*first, *first + *n) that can hold records with lo <= seq <= hi (for
 * ft_reader_range): chunks are in seq order, and chunk p holds the seqs from its first record's up
 * to, not including, chunk p+1's. *n is 0 when no chunk can. No decoding. */
void ft_trace_seq_chunks(const ft_trace *t, int64_t lo, int64_t hi, uint64_t *first, uint64_t *n);
void ft_reader_close(ft_reader *r);

/* Fill an ft_call / ft_backward view of record i of a batch (pointers into the batch). Split
 * sizes are filled only when the reader was opened with FT_READ_SPLITS (else n_splits is 0 and
 * m_splits NULL even where FT_CF_HAS_SPLITS is set). */
void ft_batch_call(const ft_trace *t, const ft_batch *b, uint32_t i, ft_call *out);
void ft_batch_backward(const ft_batch *b, uint32_t i, ft_backward *out);
void ft_batch_fuser_end(const ft_batch *b, uint32_t i, ft_fuser_end *out);

/* ---- meta and sizes (info) ---------------------------------------------------------------- */
/* Value of meta key, NULL if absent. String lives as long as t. */
const char *ft_trace_meta(const ft_trace *t, const char *key);
typedef struct ft_trace_sizes {
    uint64_t file_bytes;      /* database file plus WAL on disk */
    uint64_t chunk_raw_bytes; /* decoded chunk bytes, summed */
    uint64_t chunk_zip_bytes; /* compressed chunk bytes, summed */
} ft_trace_sizes;
int ft_trace_sizes_get(ft_trace *t, ft_trace_sizes *out);

#ifdef __cplusplus
}
#endif
#endif /* FT_TRACE_H */
