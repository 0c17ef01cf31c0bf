/*
 * trace_handle_int.h - private to the trace handle's files: trace.c (open for reading, the
 * in-memory tables, lookups, the digest check), trace_probe.c (the file, its header, its side
 * files and the -wal scan), trace_write.c (ft_trace_open, create, the row writers, close and
 * seal) and trace_digest.c (how rows are hashed into the digest chains). trace_write.c builds on
 * trace.c; both use trace_probe.c and trace_digest.c, which use neither. Not part of any
 * contract; reader.c and verify.c see the handle only through trace_int.h.
 */
#ifndef FT_TRACE_HANDLE_INT_H
#define FT_TRACE_HANDLE_INT_H

#include "ft_hmap.h"
#include "trace_int.h"

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

/* Everything declared here is private to the library: hidden from libfusertrace_rec.so's
 * exported symbols, which stay the ft_* API. */
#pragma GCC visibility push(hidden)

enum { N_STMT = 8 }; /* the statements the writers prepare on first use (trace_write.c) */

typedef struct meta_kv {
    char *key, *value;
} meta_kv;

typedef struct oplist {
    int64_t id;
    uint64_t hash;
    uint32_t n_ops;
    char *ops;
} oplist;

typedef struct decl {
    uint64_t pos; /* records before the declaration */
    uint64_t no;  /* ordinal among all declarations */
} decl;

enum { DG_META, DG_OPLISTS, DG_FUSERS, DG_RECIPES, DG_CHUNKS, N_DG };
extern const char *const trace_dg_key[N_DG]; /* the meta key of each digest (trace_digest.c) */

struct ft_trace {
    sqlite3 *db;
    char *path;
    int mode; /* FT_OPEN_READ / FT_OPEN_CREATE */
    ft_err err;
    meta_kv *meta; /* [n_meta] sorted by key */
    size_t n_meta, meta_cap;
    ft_header hdr; /* strings point into meta values */
    oplist *ol;    /* [n_ol] */
    size_t n_ol, ol_cap;
    ft_hmap ol_map;       /* content hash -> oplist index */
    ft_fuser_def *fusers; /* [n_fusers] */
    decl *fuser_decl;
    uint32_t *fuser_n_ops;
    int64_t *fuser_sid; /* [n_fusers] stream ids (the decoder's ft_batch.sid) */
    size_t n_fusers, fusers_cap;
    ft_hmap fuser_map;      /* stream id -> index */
    ft_recipe_def *recipes; /* [n_recipes] */
    decl *recipe_decl;
    size_t n_recipes, recipes_cap;
    ft_hmap recipe_map;    /* stream id -> index */
    ft_hmap pair_map;      /* hash(obj, attrs) -> index */
    ft_chunk_info *chunks; /* [n_chunks] */
    size_t n_chunks, chunks_cap;
    uint64_t n_calls, n_bwd, n_ends; /* n_bwd: backward records (records - calls - ends) */
    uint64_t dg[N_DG];               /* digest chains */
    ft_chunk_limits lim;
    ft_buf scratch;
    sqlite3_stmt *st[N_STMT]; /* prepared on first use (writers) */
    int in_txn;               /* a write transaction is open */
    unsigned dirty;           /* digests (1 << DG_*) changed in the open transaction */
    int broken;               /* a commit failed: memory and file disagree, no more writes */
    int wal_read;             /* opened with its -wal (a trace not closed) */
    int main_only;            /* read the main file alone, immutable, whatever lies beside it */
    char *notice;             /* what a reader should be told, NULL if nothing */
};

/* ---- trace.c: the handle and its in-memory tables ----------------------------------------- */
/* Set the handle's error from a SQLite status: "PATH: WHAT: SQLite's message". */
int trace_sql_fail(ft_trace *t, int rc, const char *what);
/* sqlite3_exec with the error set as "PATH: SQL: message". */
int trace_exec(ft_trace *t, const char *sql);
/* Grow *p (of *cap elements of sz bytes) to hold n; FT_ENOMEM. */
int trace_grow(void **p, size_t *cap, size_t n, size_t sz);
meta_kv *trace_meta_find(const ft_trace *t, const char *key);
/* Insert or replace in the sorted in-memory meta; FT_ENOMEM. */
int trace_meta_set(ft_trace *t, const char *key, const char *value);
void trace_finalize_all(ft_trace *t);
void trace_free(ft_trace *t);
/* The pair_map key of a recipe state (obj, attrs). */
uint64_t trace_pair_key(int64_t obj, const char *attrs);
/* Append in-memory rows (the loaders, and the writers once the rows are in the transaction). */
int trace_add_oplist(ft_trace *t, int64_t id, uint64_t hash, uint32_t n_ops, const char *ops);
int trace_add_fuser(ft_trace *t, int64_t stream_id, const char *label, uint32_t ol_idx, decl d);
int trace_add_recipe(ft_trace *t, int64_t stream_id, const char *type, int64_t obj,
                     const char *attrs, decl d);
int trace_corrupt_table(ft_trace *t, const char *table, const char *what);
/* The small tables and the chunk index into memory, each table's digest chain computed on the
 * way; inside the caller's read transaction. */
int trace_load_tables(ft_trace *t);
/* check_identity, then trace_load_tables and the digest check in one read transaction. */
int trace_load_all(ft_trace *t);
/* Open t->path for reading as trace.c's header says (ft_trace_open's FT_OPEN_READ). */
int trace_open_read(ft_trace *t);
/* t->hdr from the in-memory meta. */
void trace_parse_header(ft_trace *t);
/* One integer PRAGMA; 0, or -1 with SQLite's status in *sqlrc. */
int trace_pragma_int(ft_trace *t, const char *sql, int64_t *out, int *sqlrc);

/* ---- trace_probe.c: the file, its header and its side files ------------------------------- */
typedef struct probe {
    int wal_mode;       /* header bytes 18/19 are 2 (WAL): the trace was not closed */
    uint32_t page_size; /* from the header */
    uint64_t db_bytes;
    int has_wal, has_shm, has_journal;
    uint64_t wal_bytes;
} probe;

/* What a -wal holds: its frames checked as SQLite's WAL format defines them (32-byte header:
 * magic, version, page size, checkpoint no, salts, checksum; frames of 24 header bytes (page,
 * database size after a commit or 0, salts, cumulative checksum) and one page). */
typedef struct wal_scan {
    uint64_t frames;  /* valid frames of the current generation */
    uint64_t commits; /* commit frames among them */
    uint64_t tail;    /* valid frames after the last commit (an interrupted write) */
    int damaged;      /* a frame of this generation fails its checksum or is cut short */
    char why[160];    /* what is damaged */
} wal_scan;

/* Whether PATH+suffix exists (its size in *bytes when it does and bytes is not NULL). */
int trace_side_stat(const char *path, const char *suffix, uint64_t *bytes);
/* The file and its header checked before SQLite sees it, and what lies beside it. */
int trace_probe_file(ft_trace *t, probe *pr);
/* The -wal scanned frame by frame; damage is only reported when two scans a moment apart agree
 * on the file (a writer may be appending). FT_ENOMEM is the only failure. */
int trace_scan_wal(const char *path, uint32_t page_size, wal_scan *ws);
/* Whether the -wal's valid commits hold nothing the main file lacks: the last version of every
 * page its committed frames write equals that page of the main file (applying it changes no
 * byte). 1 yes, 0 no (or unreadable), FT_ENOMEM. */
int trace_wal_redundant(const char *path, uint32_t page_size);

/* ---- trace_digest.c: the digest chains ---------------------------------------------------- */
/* Serialize one row into t->scratch and hash it into *h; FT_ENOMEM. */
int trace_row_oplist(ft_trace *t, const oplist *o, uint64_t *h);
int trace_row_fuser(ft_trace *t, int64_t id, const ft_fuser_def *f, int64_t oplist_id,
                    const decl *d, uint64_t *h);
int trace_row_recipe(ft_trace *t, int64_t id, const ft_recipe_def *r, const decl *d, uint64_t *h);
int trace_row_chunk(ft_trace *t, const ft_chunk_info *c, uint64_t *h);
/* The meta digest over (key, value) pairs sorted by key, digest keys excluded. */
int trace_meta_digest(ft_trace *t, const meta_kv *kv, size_t n, uint64_t *out);

#pragma GCC visibility pop

#endif /* FT_TRACE_HANDLE_INT_H */
