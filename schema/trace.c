/*
 * trace.c - the trace handle: create (DDL from trace.sql, WAL), open (application_id, format
 * version, small tables, chunk index, digests), the row writers used by the recorder, lookups,
 * meta and sizes. Limits: the small tables are held in memory (they are small by design, and
 * held to ft_limits.h); chunk data is read on demand by the reader.
 *
 * How a trace is opened for reading (nothing is ever created beside it):
 * - A finished trace (rollback mode in the SQLite header, the state a closed recording or
 *   `seal` leaves) is opened with SQLite's immutable=1: no lock, no -shm, and no side file
 *   (-wal, -journal) can change what is read. One found beside it is named in the notice.
 * - A trace in WAL mode was not closed: it is being recorded, or the recorder stopped. Its -wal
 *   is checked first, frame by frame (header and cumulative checksums, salts, as SQLite's WAL
 *   format defines them): a frame of the current WAL generation that fails its checksum or is
 *   cut short is reported as damage (SQLite would silently drop it and every commit after it),
 *   unless the -wal is still changing (a writer is active), which is rechecked a few times.
 *   With its -shm present (a live or killed recorder) the trace is read with its WAL, read-only
 *   (SQLite creates no file then). Without a -shm, or beside a -journal, only the main file is
 *   read (immutable) and the notice says how many commits the -wal holds that were not read:
 *   `fusertrace seal` folds them in. The recorder checkpoints after every chunk, so the main
 *   file alone holds every committed chunk but the last one at most.
 *
 * Writing: declarations are written in the transaction of the next chunk (one savepoint each,
 * so a refused declaration changes nothing), and the digests once per commit; after each commit
 * a passive checkpoint copies it into the main file. Close commits state 'complete', folds the
 * WAL in (checkpoint TRUNCATE), closes the connection and only then, when SQLite removed the
 * -wal, switches the header's two file-format bytes to rollback mode in one 2-byte write: a
 * kill at any moment leaves either a WAL-mode trace (read as above) or a finished one, and never
 * a hot journal (SQLite's own switch writes page 1 through a rollback journal).
 */
#define _POSIX_C_SOURCE 200809L
#include "trace_int.h"
#include "ft_hmap.h"
#include "ft_limits.h"
#include "trace_sql.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FT_CREATED_BY "fusertrace 0.1.0"

enum { N_STMT = 8 };
enum { ST_META, ST_OPLIST, ST_FUSER, ST_RECIPE, ST_CHUNK, ST_SAVE, ST_RELEASE, ST_UNDO };
static const char *const stmt_sql[N_STMT] = {
    "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
    "INSERT INTO oplists(id, hash, n_ops, ops) VALUES (?,?,?,?)",
    "INSERT INTO fusers(id, stream_id, label, oplist, decl_pos, decl_no) VALUES (?,?,?,?,?,?)",
    "INSERT INTO recipes(id, stream_id, type, obj, attrs, decl_pos, decl_no) "
    "VALUES (?,?,?,?,?,?,?)",
    "INSERT INTO chunks(id, first_seq, n_records, n_calls, codec, raw_bytes, checksum, data) "
    "VALUES (?,?,?,?,?,?,?,?)",
    "SAVEPOINT w",
    "RELEASE w",
    "ROLLBACK TO w",
};

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
static const char *const dg_table[N_DG] = {"meta", "oplists", "fusers", "recipes", "chunks"};
static const char *const dg_key[N_DG] = {"digest.meta", "digest.oplists", "digest.fusers",
                                         "digest.recipes", "digest.chunks"};

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
    size_t n_fusers, fusers_cap;
    ft_hmap fuser_map;      /* stream id -> index */
    ft_recipe_def *recipes; /* [n_recipes] */
    decl *recipe_decl;
    size_t n_recipes, recipes_cap;
    ft_hmap recipe_map;    /* stream id -> index */
    ft_hmap pair_map;      /* hash(obj, attrs) -> index */
    ft_chunk_info *chunks; /* [n_chunks] */
    size_t n_chunks, chunks_cap;
    uint64_t n_calls, n_bwd;
    uint64_t dg[N_DG]; /* digest chains */
    ft_chunk_limits lim;
    ft_buf scratch;
    sqlite3_stmt *st[N_STMT]; /* prepared on first use (writers) */
    int in_txn;               /* a write transaction is open */
    unsigned dirty;           /* digests (1 << DG_*) changed in the open transaction */
    int broken;               /* a commit failed: memory and file disagree, no more writes */
    int wal_read;             /* opened with its -wal (a trace not closed) */
    char *notice;             /* what a reader should be told, NULL if nothing */
};

/* ---- small helpers ------------------------------------------------------------------------ */
int ft_sql_status(int sqlite_rc)
{
    switch (sqlite_rc & 0xff) {
    case SQLITE_OK:
        return FT_OK;
    case SQLITE_NOMEM:
        return FT_ENOMEM;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_FORMAT:
    case SQLITE_RANGE:
        return FT_ECORRUPT; /* damage: the file's pages or structure */
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return FT_EIO; /* the environment: disk, permissions, another process */
    default:
        return FT_ESQL;
    }
}

static int sql_fail(ft_trace *t, int rc, const char *what)
{
    return ft_err_set(&t->err, ft_sql_status(rc), "%s: %s: %s", t->path, what,
                      t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc));
}

static int exec(ft_trace *t, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(t->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        ft_err_set(&t->err, ft_sql_status(rc), "%s: %s: %s", t->path, sql,
                   msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return t->err.rc;
    }
    return FT_OK;
}

static int grow(void **p, size_t *cap, size_t n, size_t sz)
{
    if (n <= *cap) return FT_OK;
    size_t c = *cap ? *cap : 16;
    while (c < n)
        c *= 2;
    void *q = ft_realloc(*p, c * sz);
    if (!q) return FT_ENOMEM;
    *p = q;
    *cap = c;
    return FT_OK;
}

static void put64(ft_buf *b, uint64_t v)
{
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    ft_buf_append(b, x, 8);
}

static void putstr(ft_buf *b, const char *s)
{
    if (s) {
        ft_buf_append(b, "s", 1);
        ft_buf_append(b, s, strlen(s) + 1);
    } else {
        ft_buf_append(b, "n", 1);
    }
}

/* Hash of the serialized row in t->scratch (FT_ENOMEM if building it failed). */
static int scratch_hash(ft_trace *t, size_t expect_min, uint64_t *out)
{
    if (t->scratch.len < expect_min) return FT_ENOMEM;
    *out = ft_hash64(t->scratch.data, t->scratch.len);
    return FT_OK;
}

static int row_oplist(ft_trace *t, const oplist *o, uint64_t *h)
{
    t->scratch.len = 0;
    put64(&t->scratch, (uint64_t)o->id);
    put64(&t->scratch, o->hash);
    put64(&t->scratch, o->n_ops);
    putstr(&t->scratch, o->ops);
    return scratch_hash(t, 26 + strlen(o->ops), h);
}

static int row_fuser(ft_trace *t, int64_t id, const ft_fuser_def *f, int64_t oplist_id,
                     const decl *d, uint64_t *h)
{
    t->scratch.len = 0;
    put64(&t->scratch, (uint64_t)id);
    put64(&t->scratch, (uint64_t)f->id);
    putstr(&t->scratch, f->label);
    put64(&t->scratch, (uint64_t)oplist_id);
    put64(&t->scratch, d->pos);
    put64(&t->scratch, d->no);
    return scratch_hash(t, 41 + (f->label ? strlen(f->label) + 1 : 0), h);
}

static int row_recipe(ft_trace *t, int64_t id, const ft_recipe_def *r, const decl *d, uint64_t *h)
{
    t->scratch.len = 0;
    put64(&t->scratch, (uint64_t)id);
    put64(&t->scratch, (uint64_t)r->id);
    putstr(&t->scratch, r->type);
    put64(&t->scratch, (uint64_t)r->obj);
    putstr(&t->scratch, r->attrs_json);
    put64(&t->scratch, d->pos);
    put64(&t->scratch, d->no);
    return scratch_hash(t, 44 + strlen(r->type) + strlen(r->attrs_json), h);
}

static int row_chunk(ft_trace *t, const ft_chunk_info *c, uint64_t *h)
{
    t->scratch.len = 0;
    put64(&t->scratch, c->id);
    put64(&t->scratch, (uint64_t)c->first_seq);
    put64(&t->scratch, c->n_records);
    put64(&t->scratch, c->n_calls);
    put64(&t->scratch, c->codec);
    put64(&t->scratch, c->raw_bytes);
    put64(&t->scratch, c->checksum);
    return scratch_hash(t, 56, h);
}

static int is_digest_key(const char *k)
{
    return !strncmp(k, "digest.", 7);
}

/* The meta digest over (key, value) pairs sorted by key, digest keys excluded. */
static int meta_digest(ft_trace *t, const meta_kv *kv, size_t n, uint64_t *out)
{
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) {
        if (is_digest_key(kv[i].key)) continue;
        t->scratch.len = 0;
        putstr(&t->scratch, kv[i].key);
        putstr(&t->scratch, kv[i].value);
        uint64_t r;
        int rc = scratch_hash(t, 4, &r);
        if (rc) return rc;
        h = ft_hash_mix(h, r);
    }
    *out = h;
    return FT_OK;
}

/* ---- meta in memory ----------------------------------------------------------------------- */
static meta_kv *meta_find(const ft_trace *t, const char *key)
{
    size_t lo = 0, hi = t->n_meta;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(t->meta[mid].key, key);
        if (!c) return &t->meta[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Insert or replace in the sorted in-memory meta. */
static int meta_set_mem(ft_trace *t, const char *key, const char *value)
{
    char *v = ft_strdup(value);
    if (!v) return FT_ENOMEM;
    meta_kv *kv = meta_find(t, key);
    if (kv) {
        ft_free(kv->value);
        kv->value = v;
        return FT_OK;
    }
    char *k = ft_strdup(key);
    if (!k || grow((void **)&t->meta, &t->meta_cap, t->n_meta + 1, sizeof *t->meta)) {
        ft_free(k);
        ft_free(v);
        return FT_ENOMEM;
    }
    size_t i = t->n_meta;
    while (i > 0 && strcmp(t->meta[i - 1].key, key) > 0) {
        t->meta[i] = t->meta[i - 1];
        i--;
    }
    t->meta[i].key = k;
    t->meta[i].value = v;
    t->n_meta++;
    return FT_OK;
}

/* The cached statement `which`, reset and unbound, or NULL (error set). */
static sqlite3_stmt *stmt(ft_trace *t, int which)
{
    if (!t->st[which]) {
        int rc = sqlite3_prepare_v2(t->db, stmt_sql[which], -1, &t->st[which], NULL);
        if (rc != SQLITE_OK) {
            sql_fail(t, rc, "preparing a statement");
            return NULL;
        }
    }
    return t->st[which];
}

/* Step a bound statement to completion and reset it; SQLite status. */
static int step_done(ft_trace *t, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    rc = rc == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(t->db);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

static int meta_put_db(ft_trace *t, const char *key, const char *value)
{
    sqlite3_stmt *st = stmt(t, ST_META);
    if (!st) return t->err.rc;
    int rc = sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = step_done(t, st);
    if (rc != SQLITE_OK) {
        sqlite3_reset(st);
        return sql_fail(t, rc, "writing meta");
    }
    return FT_OK;
}

static int put_digest_db(ft_trace *t, int which, uint64_t value)
{
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, value);
    return meta_put_db(t, dg_key[which], hex);
}

/* ---- open --------------------------------------------------------------------------------- */
static void finalize_all(ft_trace *t)
{
    for (int i = 0; i < N_STMT; i++) {
        sqlite3_finalize(t->st[i]);
        t->st[i] = NULL;
    }
}

static void trace_free(ft_trace *t)
{
    if (!t) return;
    finalize_all(t);
    if (t->db) sqlite3_close(t->db);
    ft_free(t->notice);
    for (size_t i = 0; i < t->n_meta; i++) {
        ft_free(t->meta[i].key);
        ft_free(t->meta[i].value);
    }
    ft_free(t->meta);
    for (size_t i = 0; i < t->n_ol; i++)
        ft_free(t->ol[i].ops);
    ft_free(t->ol);
    ft_hmap_free(&t->ol_map);
    for (size_t i = 0; i < t->n_fusers; i++)
        ft_free((char *)t->fusers[i].label);
    ft_free(t->fusers);
    ft_free(t->fuser_decl);
    ft_free(t->fuser_n_ops);
    ft_hmap_free(&t->fuser_map);
    for (size_t i = 0; i < t->n_recipes; i++) {
        ft_free((char *)t->recipes[i].type);
        ft_free((char *)t->recipes[i].attrs_json);
    }
    ft_free(t->recipes);
    ft_free(t->recipe_decl);
    ft_hmap_free(&t->recipe_map);
    ft_hmap_free(&t->pair_map);
    ft_free(t->chunks);
    ft_buf_free(&t->scratch);
    ft_free(t->path);
    ft_free(t);
}

static uint64_t pair_key(int64_t obj, const char *attrs)
{
    return ft_hash_mix(ft_hash64(attrs, strlen(attrs)), (uint64_t)obj);
}

/* Append in-memory rows (used by load and by the writers after a commit). */
static int add_oplist_mem(ft_trace *t, int64_t id, uint64_t hash, uint32_t n_ops, const char *ops)
{
    char *s = ft_strdup(ops);
    if (!s || grow((void **)&t->ol, &t->ol_cap, t->n_ol + 1, sizeof *t->ol) ||
        ft_hmap_put(&t->ol_map, hash, (uint32_t)t->n_ol)) {
        ft_free(s);
        return FT_ENOMEM;
    }
    t->ol[t->n_ol++] = (oplist){id, hash, n_ops, s};
    return FT_OK;
}

static int reserve_fusers(ft_trace *t)
{
    size_t cap = t->fusers_cap;
    if (t->n_fusers < cap) return FT_OK;
    if (grow((void **)&t->fusers, &cap, t->n_fusers + 1, sizeof *t->fusers)) return FT_ENOMEM;
    cap = t->fusers_cap;
    if (grow((void **)&t->fuser_decl, &cap, t->n_fusers + 1, sizeof *t->fuser_decl))
        return FT_ENOMEM;
    cap = t->fusers_cap;
    if (grow((void **)&t->fuser_n_ops, &cap, t->n_fusers + 1, sizeof *t->fuser_n_ops))
        return FT_ENOMEM;
    t->fusers_cap = cap;
    t->lim.fuser_n_ops = t->fuser_n_ops;
    return FT_OK;
}

static int add_fuser_mem(ft_trace *t, int64_t stream_id, const char *label, uint32_t ol_idx, decl d)
{
    char *l = NULL;
    if (label && !(l = ft_strdup(label))) return FT_ENOMEM;
    if (reserve_fusers(t) ||
        ft_hmap_put(&t->fuser_map, (uint64_t)stream_id, (uint32_t)t->n_fusers)) {
        ft_free(l);
        return FT_ENOMEM;
    }
    size_t i = t->n_fusers++;
    t->fusers[i] = (ft_fuser_def){stream_id, l, t->ol[ol_idx].ops, t->ol[ol_idx].n_ops};
    t->fuser_decl[i] = d;
    t->fuser_n_ops[i] = t->ol[ol_idx].n_ops;
    t->lim.n_fusers = (uint32_t)t->n_fusers;
    return FT_OK;
}

static int reserve_recipes(ft_trace *t)
{
    size_t cap = t->recipes_cap;
    if (t->n_recipes < cap) return FT_OK;
    if (grow((void **)&t->recipes, &cap, t->n_recipes + 1, sizeof *t->recipes)) return FT_ENOMEM;
    cap = t->recipes_cap;
    if (grow((void **)&t->recipe_decl, &cap, t->n_recipes + 1, sizeof *t->recipe_decl))
        return FT_ENOMEM;
    t->recipes_cap = cap;
    return FT_OK;
}

static int add_recipe_mem(ft_trace *t, int64_t stream_id, const char *type, int64_t obj,
                          const char *attrs, decl d)
{
    char *ty = ft_strdup(type), *at = ft_strdup(attrs);
    if (!ty || !at || reserve_recipes(t) ||
        ft_hmap_put(&t->recipe_map, (uint64_t)stream_id, (uint32_t)t->n_recipes) ||
        ft_hmap_put(&t->pair_map, pair_key(obj, attrs), (uint32_t)t->n_recipes)) {
        ft_free(ty);
        ft_free(at);
        return FT_ENOMEM;
    }
    size_t i = t->n_recipes++;
    t->recipes[i] = (ft_recipe_def){stream_id, ty, obj, at};
    t->recipe_decl[i] = d;
    t->lim.n_recipes = (uint32_t)t->n_recipes;
    return FT_OK;
}

static int corrupt_table(ft_trace *t, const char *table, const char *what)
{
    return ft_err_set(&t->err, FT_ECORRUPT, "%s: table %s is damaged: %s", t->path, table, what);
}

/* A row beyond ft_limits.h (or otherwise impossible): no recorder of this format wrote it. */
static int over_limit(ft_trace *t, const char *table, int64_t id, const char *what, uint64_t have,
                      uint64_t limit)
{
    return ft_err_set(&t->err, FT_ECORRUPT,
                      "%s: table %s is damaged: row %" PRId64 ": %s %" PRIu64
                      " exceeds the format's limit %" PRIu64,
                      t->path, table, id, what, have, limit);
}

static int load_meta(ft_trace *t)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(t->db, "SELECT key, value FROM meta ORDER BY key", -1, &st, NULL);
    if (rc != SQLITE_OK) return corrupt_table(t, "meta", sqlite3_errmsg(t->db));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        const char *v = (const char *)sqlite3_column_text(st, 1);
        if (!k || !v) {
            sqlite3_finalize(st);
            return corrupt_table(t, "meta", "NULL key or value");
        }
        size_t lim =
            !strcmp(k, "env") || !strcmp(k, "extra") ? FT_LIM_HDR_OBJ_BYTES : FT_LIM_HDR_STR_BYTES;
        if ((size_t)sqlite3_column_bytes(st, 1) > lim || strlen(k) > FT_LIM_HDR_STR_BYTES) {
            ft_err_set(&t->err, FT_ECORRUPT,
                       "%s: table meta is damaged: key '%.64s': %d bytes exceed the format's "
                       "limit %zu",
                       t->path, k, sqlite3_column_bytes(st, 1), lim);
            sqlite3_finalize(st);
            return FT_ECORRUPT;
        }
        if (meta_set_mem(t, k, v)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return corrupt_table(t, "meta", sqlite3_errmsg(t->db));
    return FT_OK;
}

static int load_oplists(ft_trace *t)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(t->db, "SELECT id, hash, n_ops, ops FROM oplists ORDER BY id", -1,
                                &st, NULL);
    if (rc != SQLITE_OK) return corrupt_table(t, "oplists", sqlite3_errmsg(t->db));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0), n_ops = sqlite3_column_int64(st, 2);
        const char *ops = (const char *)sqlite3_column_text(st, 3);
        if (!ops || n_ops < 0) {
            sqlite3_finalize(st);
            return corrupt_table(t, "oplists", "bad row");
        }
        if (n_ops > FT_LIM_OPS || (size_t)sqlite3_column_bytes(st, 3) > FT_LIM_OPS_BYTES) {
            int big = n_ops > FT_LIM_OPS;
            rc = over_limit(t, "oplists", id, big ? "ops" : "op list bytes",
                            big ? (uint64_t)n_ops : (uint64_t)sqlite3_column_bytes(st, 3),
                            big ? FT_LIM_OPS : FT_LIM_OPS_BYTES);
            sqlite3_finalize(st);
            return rc;
        }
        uint64_t h;
        oplist o = {id, (uint64_t)sqlite3_column_int64(st, 1), (uint32_t)n_ops, (char *)ops};
        if (row_oplist(t, &o, &h) || add_oplist_mem(t, id, o.hash, o.n_ops, ops)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
        t->dg[DG_OPLISTS] = ft_hash_mix(t->dg[DG_OPLISTS], h);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return corrupt_table(t, "oplists", sqlite3_errmsg(t->db));
    return FT_OK;
}

static int find_oplist(const ft_trace *t, int64_t id, uint32_t *idx)
{
    /* ids are 1..n in order when written by us; fall back to a scan */
    if (id >= 1 && (uint64_t)id <= t->n_ol && t->ol[id - 1].id == id) {
        *idx = (uint32_t)(id - 1);
        return 0;
    }
    for (size_t i = 0; i < t->n_ol; i++)
        if (t->ol[i].id == id) {
            *idx = (uint32_t)i;
            return 0;
        }
    return -1;
}

static int load_fusers(ft_trace *t)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        t->db, "SELECT id, stream_id, label, oplist, decl_pos, decl_no FROM fusers ORDER BY id", -1,
        &st, NULL);
    if (rc != SQLITE_OK) return corrupt_table(t, "fusers", sqlite3_errmsg(t->db));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0), sid = sqlite3_column_int64(st, 1);
        const char *label = (const char *)sqlite3_column_text(st, 2);
        int64_t olid = sqlite3_column_int64(st, 3);
        decl d = {(uint64_t)sqlite3_column_int64(st, 4), (uint64_t)sqlite3_column_int64(st, 5)};
        uint32_t oi;
        if (t->n_fusers >= FT_LIM_FUSERS ||
            (label && (size_t)sqlite3_column_bytes(st, 2) > FT_LIM_LABEL_BYTES)) {
            int many = t->n_fusers >= FT_LIM_FUSERS;
            rc =
                over_limit(t, "fusers", id, many ? "fusers" : "label bytes",
                           many ? (uint64_t)t->n_fusers + 1 : (uint64_t)sqlite3_column_bytes(st, 2),
                           many ? FT_LIM_FUSERS : FT_LIM_LABEL_BYTES);
            sqlite3_finalize(st);
            return rc;
        }
        if (find_oplist(t, olid, &oi) || ft_hmap_get(&t->fuser_map, (uint64_t)sid) != UINT32_MAX) {
            sqlite3_finalize(st);
            return corrupt_table(t, "fusers", "a row refers to a missing op list or repeats an id");
        }
        uint64_t h;
        ft_fuser_def f = {sid, label, t->ol[oi].ops, t->ol[oi].n_ops};
        if (row_fuser(t, id, &f, olid, &d, &h) || add_fuser_mem(t, sid, label, oi, d)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
        t->dg[DG_FUSERS] = ft_hash_mix(t->dg[DG_FUSERS], h);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return corrupt_table(t, "fusers", sqlite3_errmsg(t->db));
    return FT_OK;
}

static int load_recipes(ft_trace *t)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(t->db,
                                "SELECT id, stream_id, type, obj, attrs, decl_pos, decl_no "
                                "FROM recipes ORDER BY id",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) return corrupt_table(t, "recipes", sqlite3_errmsg(t->db));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0), sid = sqlite3_column_int64(st, 1);
        const char *type = (const char *)sqlite3_column_text(st, 2);
        int64_t obj = sqlite3_column_int64(st, 3);
        const char *attrs = (const char *)sqlite3_column_text(st, 4);
        decl d = {(uint64_t)sqlite3_column_int64(st, 5), (uint64_t)sqlite3_column_int64(st, 6)};
        if (!type || !attrs || ft_hmap_get(&t->recipe_map, (uint64_t)sid) != UINT32_MAX) {
            sqlite3_finalize(st);
            return corrupt_table(t, "recipes", "bad row");
        }
        uint64_t tb = (uint64_t)sqlite3_column_bytes(st, 2),
                 ab = (uint64_t)sqlite3_column_bytes(st, 4);
        if (t->n_recipes >= FT_LIM_RECIPES || tb > FT_LIM_TYPE_BYTES || ab > FT_LIM_ATTRS_BYTES) {
            if (t->n_recipes >= FT_LIM_RECIPES)
                rc = over_limit(t, "recipes", id, "recipes", t->n_recipes + 1, FT_LIM_RECIPES);
            else if (tb > FT_LIM_TYPE_BYTES)
                rc = over_limit(t, "recipes", id, "type bytes", tb, FT_LIM_TYPE_BYTES);
            else
                rc = over_limit(t, "recipes", id, "attrs bytes", ab, FT_LIM_ATTRS_BYTES);
            sqlite3_finalize(st);
            return rc;
        }
        uint64_t h;
        ft_recipe_def r = {sid, type, obj, attrs};
        if (row_recipe(t, id, &r, &d, &h) || add_recipe_mem(t, sid, type, obj, attrs, d)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
        t->dg[DG_RECIPES] = ft_hash_mix(t->dg[DG_RECIPES], h);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return corrupt_table(t, "recipes", sqlite3_errmsg(t->db));
    return FT_OK;
}

static int load_chunks(ft_trace *t)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(t->db,
                                "SELECT id, first_seq, n_records, n_calls, codec, raw_bytes, "
                                "checksum FROM chunks ORDER BY id",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) return corrupt_table(t, "chunks", sqlite3_errmsg(t->db));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t v[7];
        for (int c = 0; c < 7; c++)
            v[c] = sqlite3_column_int64(st, c);
        if (v[0] < 1 || v[2] < 1 || v[2] > FT_CHUNK_MAX_RECORDS || v[3] < 0 || v[3] > v[2] ||
            v[4] < 0 || v[4] > UINT32_MAX || v[5] < 0) {
            sqlite3_finalize(st);
            return corrupt_table(t, "chunks", "an index row is out of range");
        }
        if (grow((void **)&t->chunks, &t->chunks_cap, t->n_chunks + 1, sizeof *t->chunks)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
        ft_chunk_info *c = &t->chunks[t->n_chunks];
        *c = (ft_chunk_info){(uint64_t)v[0], v[1],           (uint32_t)v[2], (uint32_t)v[3],
                             (uint32_t)v[4], (uint64_t)v[5], (uint64_t)v[6]};
        if (t->n_chunks && c->first_seq <= t->chunks[t->n_chunks - 1].first_seq) {
            sqlite3_finalize(st);
            return corrupt_table(t, "chunks", "chunks are not in seq order");
        }
        uint64_t h;
        if (row_chunk(t, c, &h)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
        t->dg[DG_CHUNKS] = ft_hash_mix(t->dg[DG_CHUNKS], h);
        t->n_calls += c->n_calls;
        t->n_bwd += c->n_records - c->n_calls;
        t->n_chunks++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return corrupt_table(t, "chunks", sqlite3_errmsg(t->db));
    return FT_OK;
}

/* Compare the in-memory digest chains (computed while loading) with meta. */
static int compare_digests(ft_trace *t)
{
    int rc = meta_digest(t, t->meta, t->n_meta, &t->dg[DG_META]);
    if (rc) return ft_err_set(&t->err, rc, "%s: out of memory", t->path);
    for (int i = 0; i < N_DG; i++) {
        const meta_kv *kv = meta_find(t, dg_key[i]);
        char hex[17];
        snprintf(hex, sizeof hex, "%016" PRIx64, t->dg[i]);
        if (!kv) return corrupt_table(t, "meta", "a digest is missing");
        if (strcmp(kv->value, hex)) return corrupt_table(t, dg_table[i], "digest mismatch");
    }
    return FT_OK;
}

static void parse_header(ft_trace *t)
{
    static const struct {
        const char *key;
        size_t off;
    } str_fields[] = {
        {"te_version", offsetof(ft_header, te_version)},
        {"torch_version", offsetof(ft_header, torch_version)},
        {"host", offsetof(ft_header, host)},
        {"started_at", offsetof(ft_header, started_at)},
        {"env", offsetof(ft_header, env_json)},
        {"extra", offsetof(ft_header, extra_json)},
    };
    memset(&t->hdr, 0, sizeof t->hdr);
    for (size_t i = 0; i < FT_ARRAY_LEN(str_fields); i++) {
        const meta_kv *kv = meta_find(t, str_fields[i].key);
        *(const char **)((char *)&t->hdr + str_fields[i].off) = kv ? kv->value : NULL;
    }
    if (!t->hdr.env_json) t->hdr.env_json = "{}";
    if (!t->hdr.extra_json) t->hdr.extra_json = "{}";
    const meta_kv *kv = meta_find(t, "rank");
    if (kv && !ft_parse_i64(kv->value, &t->hdr.rank)) t->hdr.has_rank = 1;
    kv = meta_find(t, "world_size");
    if (kv && !ft_parse_i64(kv->value, &t->hdr.world_size)) t->hdr.has_world_size = 1;
}

static int pragma_int(ft_trace *t, const char *sql, int64_t *out, int *sqlrc)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(t->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        }
    }
    sqlite3_finalize(st);
    *sqlrc = rc;
    return rc == SQLITE_OK ? 0 : -1;
}

/* application_id and user_version. */
static int check_identity(ft_trace *t)
{
    int64_t app = 0, ver = 0;
    int src;
    if (pragma_int(t, "PRAGMA application_id", &app, &src) ||
        pragma_int(t, "PRAGMA user_version", &ver, &src)) {
        int rc = ft_sql_status(src);
        if (rc == FT_ECORRUPT)
            return ft_err_set(&t->err, rc, "%s: damaged: %s", t->path, sqlite3_errmsg(t->db));
        return ft_err_set(&t->err, rc == FT_ESQL ? FT_EIO : rc, "%s: cannot read: %s", t->path,
                          sqlite3_errmsg(t->db));
    }
    if (app != FT_APPLICATION_ID)
        return ft_err_set(&t->err, FT_ENOTTRACE,
                          "%s: not a fusertrace trace (application_id 0x%" PRIx64 ")", t->path,
                          (uint64_t)(uint32_t)app);
    if (ver > FT_FORMAT_VERSION)
        return ft_err_set(&t->err, FT_EVERSION,
                          "%s: written by a newer fusertrace (format %" PRId64
                          "); this build reads format %d",
                          t->path, ver, FT_FORMAT_VERSION);
    if (ver < 1)
        return ft_err_set(&t->err, FT_EVERSION,
                          "%s: unknown trace format %" PRId64 "; this build reads format %d",
                          t->path, ver, FT_FORMAT_VERSION);
    return FT_OK;
}

/* ---- the file, its header and its side files ---------------------------------------------- */
typedef struct probe {
    int wal_mode;       /* header bytes 18/19 are 2 (WAL): the trace was not closed */
    uint32_t page_size; /* from the header */
    uint64_t db_bytes;
    int has_wal, has_shm, has_journal;
    uint64_t wal_bytes;
} probe;

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static int side_stat(const char *path, const char *suffix, uint64_t *bytes)
{
    char buf[4200];
    struct stat sb;
    snprintf(buf, sizeof buf, "%s%s", path, suffix);
    if (stat(buf, &sb)) return 0;
    if (bytes) *bytes = (uint64_t)sb.st_size;
    return 1;
}

/* Read the first n bytes of the main file through SQLite's VFS: its unix VFS keeps a file that
 * this process has open elsewhere (a recorder) open until its locks are released, where a plain
 * close() would drop that connection's POSIX locks. Returns bytes read, -1 when the file
 * cannot be read, -2 out of memory. */
static int vfs_read_head(const char *path, uint8_t *buf, int n)
{
    sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
    if (!vfs) return -1;
    sqlite3_file *f = ft_calloc(1, (size_t)vfs->szOsFile);
    if (!f) return -2;
    int flags = 0, got = -1;
    if (vfs->xOpen(vfs, path, f, SQLITE_OPEN_READONLY | SQLITE_OPEN_MAIN_DB, &flags) == SQLITE_OK) {
        sqlite3_int64 size = 0;
        if (f->pMethods->xFileSize(f, &size) == SQLITE_OK) {
            got = size < n ? (int)size : n;
            if (got > 0 && f->pMethods->xRead(f, buf, got, 0) != SQLITE_OK) got = -1;
        }
    }
    if (f->pMethods) f->pMethods->xClose(f);
    ft_free(f);
    return got;
}

static int probe_file(ft_trace *t, probe *pr)
{
    static const char magic[16] = "SQLite format 3";
    memset(pr, 0, sizeof *pr);
    struct stat sb;
    if (stat(t->path, &sb)) {
        if (errno == ENOENT) return ft_err_set(&t->err, FT_ENOTFOUND, "%s: no such file", t->path);
        return ft_err_set(&t->err, FT_EIO, "%s: cannot open: %s", t->path, strerror(errno));
    }
    if (S_ISDIR(sb.st_mode))
        return ft_err_set(&t->err, FT_EINVAL, "%s: is a directory, not a trace", t->path);
    if (!S_ISREG(sb.st_mode))
        return ft_err_set(&t->err, FT_EINVAL, "%s: not a regular file, not a trace", t->path);
    if (access(t->path, R_OK))
        return ft_err_set(&t->err, FT_EIO, "%s: cannot open: %s", t->path, strerror(errno));
    uint8_t h[100];
    int n = vfs_read_head(t->path, h, (int)sizeof h);
    if (n == -2) return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
    if (n < 0) return ft_err_set(&t->err, FT_EIO, "%s: cannot read its header", t->path);
    if (n == 0) return ft_err_set(&t->err, FT_ENOTTRACE, "%s: empty file, not a trace", t->path);
    if (memcmp(h, magic, (size_t)n < sizeof magic ? (size_t)n : sizeof magic))
        return ft_err_set(&t->err, FT_ENOTTRACE,
                          "%s: not a fusertrace trace (not a SQLite database)", t->path);
    if (n < 100)
        return ft_err_set(&t->err, FT_ECORRUPT,
                          "%s: damaged: cut short (%d bytes, less than its header)", t->path, n);
    uint32_t ps = (uint32_t)h[16] << 8 | h[17];
    if (ps == 1) ps = 65536;
    if (ps < 512 || (ps & (ps - 1)))
        return ft_err_set(&t->err, FT_ECORRUPT, "%s: damaged: bad header (page size %u)", t->path,
                          ps);
    if (h[18] != h[19] || (h[18] != 1 && h[18] != 2))
        return ft_err_set(&t->err, FT_ECORRUPT, "%s: damaged: bad header (file format %u/%u)",
                          t->path, h[18], h[19]);
    pr->wal_mode = h[18] == 2;
    pr->page_size = ps;
    pr->db_bytes = (uint64_t)sb.st_size;
    if (pr->db_bytes % ps)
        return ft_err_set(&t->err, FT_ECORRUPT,
                          "%s: damaged: cut short (%" PRIu64 " bytes, not whole pages of %u)",
                          t->path, pr->db_bytes, ps);
    uint32_t n_pages = get_be32(h + 28);
    if (!pr->wal_mode && get_be32(h + 24) == get_be32(h + 92) &&
        (uint64_t)n_pages * ps > pr->db_bytes)
        return ft_err_set(&t->err, FT_ECORRUPT,
                          "%s: damaged: cut short (its header says %u pages of %u bytes, the "
                          "file holds %" PRIu64 ")",
                          t->path, n_pages, ps, pr->db_bytes / ps);
    pr->has_wal = side_stat(t->path, "-wal", &pr->wal_bytes);
    pr->has_shm = side_stat(t->path, "-shm", NULL);
    pr->has_journal = side_stat(t->path, "-journal", NULL);
    return FT_OK;
}

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

static void wal_sum(int big_endian, const uint8_t *p, size_t n, uint32_t *s0, uint32_t *s1)
{
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint32_t a = big_endian ? get_be32(p + i) : get_le32(p + i);
        uint32_t b = big_endian ? get_be32(p + i + 4) : get_le32(p + i + 4);
        *s0 += a + *s1;
        *s1 += b + *s0;
    }
}

static size_t read_full(FILE *f, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t k = fread(buf + got, 1, n - got, f);
        if (!k) break;
        got += k;
    }
    return got;
}

static int scan_wal(const char *path, uint32_t page_size, wal_scan *ws)
{
    memset(ws, 0, sizeof *ws);
    char wp[4200];
    snprintf(wp, sizeof wp, "%s-wal", path);
    FILE *f = fopen(wp, "rb");
    if (!f) return FT_OK; /* gone meanwhile: nothing to read */
    uint8_t h[32];
    size_t n = read_full(f, h, sizeof h);
    uint8_t *fr = NULL;
    if (n == 0) goto done;
    if (n < sizeof h) {
        ws->damaged = 1;
        snprintf(ws->why, sizeof ws->why, "cut short inside its header");
        goto done;
    }
    uint32_t magic = get_be32(h), s0 = 0, s1 = 0;
    if ((magic & 0xfffffffeu) != 0x377f0682u || get_be32(h + 4) != 3007000u) {
        ws->damaged = 1;
        snprintf(ws->why, sizeof ws->why, "not a SQLite WAL");
        goto done;
    }
    int be = magic & 1;
    wal_sum(be, h, 24, &s0, &s1);
    if (s0 != get_be32(h + 24) || s1 != get_be32(h + 28)) {
        ws->damaged = 1;
        snprintf(ws->why, sizeof ws->why, "its header fails its checksum");
        goto done;
    }
    if (get_be32(h + 8) != page_size) {
        ws->damaged = 1;
        snprintf(ws->why, sizeof ws->why, "page size %u, the trace's is %u", get_be32(h + 8),
                 page_size);
        goto done;
    }
    size_t fsz = 24 + (size_t)page_size;
    if (!(fr = ft_malloc(fsz))) {
        fclose(f);
        return FT_ENOMEM;
    }
    for (;;) {
        n = read_full(f, fr, fsz);
        if (n == 0) break;
        int same_gen = n >= 16 && !memcmp(fr + 8, h + 16, 8);
        if (!same_gen) break; /* the end, or frames left from an earlier generation */
        if (n < fsz) {
            ws->damaged = 1;
            snprintf(ws->why, sizeof ws->why, "frame %" PRIu64 " is cut short", ws->frames + 1);
            break;
        }
        uint32_t a = s0, b = s1;
        wal_sum(be, fr, 8, &a, &b);
        wal_sum(be, fr + 24, page_size, &a, &b);
        if (a != get_be32(fr + 16) || b != get_be32(fr + 20) || get_be32(fr) == 0) {
            ws->damaged = 1;
            snprintf(ws->why, sizeof ws->why, "frame %" PRIu64 " fails its checksum",
                     ws->frames + 1);
            break;
        }
        s0 = a;
        s1 = b;
        ws->frames++;
        ws->tail++;
        if (get_be32(fr + 4)) {
            ws->commits++;
            ws->tail = 0;
        }
    }
done:
    ft_free(fr);
    fclose(f);
    return FT_OK;
}

/* scan_wal, again while the -wal keeps changing (a writer is appending to it): damage is only
 * reported when two scans a moment apart agree on the file. */
static int scan_wal_settled(const char *path, uint32_t page_size, wal_scan *ws)
{
    for (int attempt = 0;; attempt++) {
        struct stat a, b;
        char wp[4200];
        snprintf(wp, sizeof wp, "%s-wal", path);
        int ha = !stat(wp, &a);
        int rc = scan_wal(path, page_size, ws);
        if (rc || !ws->damaged) return rc;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        int hb = !stat(wp, &b);
        int still = ha && hb && a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
                    a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
        if (still || attempt == 5) {
            if (!still) ws->damaged = 0; /* a writer is active: read what SQLite reads */
            return FT_OK;
        }
    }
}

/* "file:PATH?QUERY" with PATH escaped as a URI path. */
static char *file_uri(const char *path, const char *query)
{
    ft_buf b = {0};
    ft_buf_append(&b, "file:", 5);
    if (path[0] == '/') ft_buf_append(&b, "//", 2);
    for (const char *p = path; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f)
            ft_buf_printf(&b, "%%%02X", c);
        else
            ft_buf_append(&b, p, 1);
    }
    ft_buf_printf(&b, "?%s", query);
    if (ft_buf_append(&b, "", 1)) {
        ft_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

static void set_notice(ft_trace *t, const probe *pr, const wal_scan *ws)
{
    const char *state = ft_trace_meta(t, "state");
    ft_buf b = {0};
    if (state && (!strcmp(state, "complete") || !strcmp(state, "recovered"))) {
        int side = (pr->has_wal && pr->wal_bytes) || pr->has_journal;
        if (side)
            ft_buf_printf(&b,
                          "%s: ignored the %s beside it: the trace was closed, so no side file "
                          "can change it",
                          t->path, pr->has_journal ? "-journal" : "-wal");
    } else {
        ft_buf_printf(&b,
                      "%s: the recording was not closed (it is still running, or it stopped): "
                      "it holds %" PRIu64 " calls and %" PRIu64 " backward events in %" PRIu64
                      " chunks",
                      t->path, t->n_calls, t->n_bwd, (uint64_t)t->n_chunks);
        if (t->wal_read)
            ft_buf_printf(&b, ", read with the -wal beside it");
        else if (ws->commits)
            ft_buf_printf(&b,
                          "; the -wal beside it holds %" PRIu64
                          " more commits that were not read ('fusertrace seal' folds them in)",
                          ws->commits);
        else if (pr->has_wal && pr->wal_bytes)
            ft_buf_printf(&b, "; a -wal beside it may hold more ('fusertrace seal' folds it in)");
        if (ws->tail)
            ft_buf_printf(&b,
                          "; its -wal ends in %" PRIu64 " frames of no commit (a write was "
                          "interrupted)",
                          ws->tail);
    }
    if (b.len && !ft_buf_append(&b, "", 1))
        t->notice = (char *)b.data;
    else
        ft_buf_free(&b);
}

/* Open the database read-only as the header comment of this file says. */
static int open_db_read(ft_trace *t, probe *pr, wal_scan *ws)
{
    int rc = probe_file(t, pr);
    if (rc) return rc;
    memset(ws, 0, sizeof *ws);
    int use_wal = 0;
    if (pr->wal_mode && pr->has_wal && pr->wal_bytes) {
        if ((rc = scan_wal_settled(t->path, pr->page_size, ws)))
            return ft_err_set(&t->err, rc, "%s: out of memory", t->path);
        if (ws->damaged)
            return ft_err_set(&t->err, FT_ECORRUPT,
                              "%s-wal: damaged: %s (the -wal was cut or changed, or the "
                              "recording's last write was interrupted, e.g. by a full disk); "
                              "SQLite would drop it and every commit after it silently. "
                              "'fusertrace seal --force' keeps what comes before it",
                              t->path, ws->why);
        use_wal = pr->has_shm && !pr->has_journal;
    }
    char *uri = file_uri(t->path, use_wal ? "mode=ro" : "immutable=1");
    if (!uri) return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
    rc = sqlite3_open_v2(uri, &t->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    ft_free(uri);
    if (rc != SQLITE_OK)
        return ft_err_set(&t->err, ft_sql_status(rc) == FT_ENOMEM ? FT_ENOMEM : FT_EIO,
                          "%s: cannot open: %s", t->path,
                          t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc));
    t->wal_read = use_wal;
    sqlite3_busy_timeout(t->db, 5000);
    return FT_OK;
}

/* Load the small tables and the chunk index in one read transaction and check the digests. */
static int load_all(ft_trace *t)
{
    int rc = check_identity(t);
    if (rc) return rc;
    /* chunks are read through the OS page cache without a copy into SQLite's own cache */
    if ((rc = exec(t, "PRAGMA mmap_size=1073741824"))) return rc;
    /* one read transaction so every table is seen at the same commit */
    if ((rc = exec(t, "BEGIN"))) return rc;
    if (!(rc = load_meta(t)) && !(rc = load_oplists(t)) && !(rc = load_fusers(t)) &&
        !(rc = load_recipes(t)) && !(rc = load_chunks(t)))
        rc = compare_digests(t);
    sqlite3_exec(t->db, "COMMIT", NULL, NULL, NULL);
    if (rc) return rc;
    parse_header(t);
    return FT_OK;
}

static int open_read(ft_trace *t)
{
    probe pr;
    wal_scan ws;
    int rc = open_db_read(t, &pr, &ws);
    if (rc) return rc;
    if ((rc = load_all(t))) {
        /* read without the -wal (no -shm beside it) after a checkpoint the recorder could not
         * finish, the main file alone is inconsistent: the -wal has the rest */
        if (rc == FT_ECORRUPT && !t->wal_read && ws.commits) {
            char msg[FT_ERR_MAX];
            ft_strlcpy(msg, ft_err_msg(&t->err), sizeof msg);
            ft_err_set(&t->err, rc,
                       "%s (read without the -wal beside it, which holds %" PRIu64
                       " commits: 'fusertrace seal' folds them in)",
                       msg, ws.commits);
        }
        return rc;
    }
    set_notice(t, &pr, &ws);
    return FT_OK;
}

static int write_digests_all(ft_trace *t)
{
    int rc = meta_digest(t, t->meta, t->n_meta, &t->dg[DG_META]);
    if (rc) return ft_err_set(&t->err, rc, "%s: out of memory", t->path);
    for (int i = 0; i < N_DG; i++)
        if ((rc = put_digest_db(t, i, t->dg[i]))) return rc;
    return FT_OK;
}

static int open_create(ft_trace *t)
{
    /* a side file without its trace was left by a killed process: SQLite would apply a stale
     * -wal or -journal to the new file of the same name */
    static const char *const side[] = {"-wal", "-journal", "-shm"};
    struct stat sb;
    if (!stat(t->path, &sb))
        return ft_err_set(&t->err, FT_EINVAL, "%s: cannot create: it exists", t->path);
    for (size_t i = 0; i < FT_ARRAY_LEN(side); i++)
        if (side_stat(t->path, side[i], NULL))
            return ft_err_set(&t->err, FT_EINVAL,
                              "%s: cannot create: a stale %s%s (left by a killed process) is "
                              "beside it; remove it first",
                              t->path, t->path, side[i]);
    int fd = open(t->path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return ft_err_set(&t->err, errno == EEXIST ? FT_EINVAL : FT_EIO, "%s: cannot create: %s",
                          t->path, strerror(errno));
    close(fd);
    int rc = sqlite3_open_v2(t->path, &t->db, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK)
        return ft_err_set(&t->err, FT_EIO, "%s: cannot open: %s", t->path,
                          t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc));
    sqlite3_busy_timeout(t->db, 5000);
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(t->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        const char *m = (const char *)sqlite3_column_text(st, 0);
        rc = m && !strcmp(m, "wal") ? SQLITE_OK : SQLITE_ERROR;
    } else if (rc == SQLITE_OK) {
        rc = sqlite3_errcode(t->db);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) return sql_fail(t, rc, "cannot switch to WAL mode");
    if ((rc = exec(t, "PRAGMA synchronous=NORMAL"))) return rc;
    if ((rc = exec(t, "BEGIN"))) return rc;
    if ((rc = exec(t, ft_trace_sql))) goto fail;
    int64_t app = 0, ver = 0;
    int src;
    if (pragma_int(t, "PRAGMA application_id", &app, &src) ||
        pragma_int(t, "PRAGMA user_version", &ver, &src) || app != FT_APPLICATION_ID ||
        ver != FT_FORMAT_VERSION) {
        rc = ft_err_set(&t->err, FT_ESTATE,
                        "trace.sql tags files as 0x%" PRIx64 " format %" PRId64
                        ", the library expects 0x%x format %d",
                        (uint64_t)app, ver, FT_APPLICATION_ID, FT_FORMAT_VERSION);
        goto fail;
    }
    char ver_s[16];
    snprintf(ver_s, sizeof ver_s, "%d", FT_FORMAT_VERSION);
    static const char *const keys[] = {"format_version", "created_by", "state"};
    const char *vals[] = {ver_s, FT_CREATED_BY, "recording"};
    for (int i = 0; i < 3; i++) {
        if ((rc = meta_put_db(t, keys[i], vals[i]))) goto fail;
        if (meta_set_mem(t, keys[i], vals[i])) {
            rc = ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
            goto fail;
        }
    }
    if ((rc = write_digests_all(t))) goto fail;
    if ((rc = exec(t, "COMMIT"))) goto fail;
    parse_header(t);
    return FT_OK;
fail:
    sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

void ft_trace_remove(const char *path)
{
    size_t n = strlen(path) + 8;
    char *p = ft_malloc(n);
    unlink(path);
    if (!p) return;
    snprintf(p, n, "%s-wal", path);
    unlink(p);
    snprintf(p, n, "%s-shm", path);
    unlink(p);
    snprintf(p, n, "%s-journal", path);
    unlink(p);
    ft_free(p);
}

int ft_trace_open(const char *path, int mode, ft_trace **out, ft_err *err)
{
    *out = NULL;
    if (!path || (mode != FT_OPEN_READ && mode != FT_OPEN_CREATE))
        return ft_err_set(err, FT_EINVAL, "ft_trace_open: bad arguments");
    ft_trace *t = ft_calloc(1, sizeof *t);
    if (!t || !(t->path = ft_strdup(path))) {
        ft_free(t);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
    }
    t->mode = mode;
    int rc = mode == FT_OPEN_READ ? open_read(t) : open_create(t);
    if (rc) {
        if (err) *err = t->err;
        int created = mode == FT_OPEN_CREATE && t->db;
        trace_free(t);
        if (created) ft_trace_remove(path);
        return rc;
    }
    *out = t;
    return FT_OK;
}

int ft_trace_close(ft_trace *t)
{
    if (!t) return FT_OK;
    int rc = FT_OK;
    finalize_all(t);
    if (t->db && sqlite3_close(t->db) != SQLITE_OK) rc = FT_ESQL;
    t->db = NULL;
    trace_free(t);
    return rc;
}

const ft_err *ft_trace_error(const ft_trace *t)
{
    return &t->err;
}

/* ---- writers ------------------------------------------------------------------------------ */
static int need_create(ft_trace *t)
{
    if (t->broken)
        return ft_err_set(&t->err, FT_ESTATE, "%s: an earlier write failed; no more writes",
                          t->path);
    if (t->mode != FT_OPEN_CREATE)
        return ft_err_set(&t->err, FT_ESTATE, "%s: trace is open read-only", t->path);
    return FT_OK;
}

static int run_stmt(ft_trace *t, int which, const char *what)
{
    sqlite3_stmt *st = stmt(t, which);
    if (!st) return t->err.rc;
    int rc = step_done(t, st);
    return rc == SQLITE_OK ? FT_OK : sql_fail(t, rc, what);
}

/* Open the write transaction if none is, then a savepoint for one change. */
static int change_begin(ft_trace *t)
{
    int rc;
    if (!t->in_txn) {
        if ((rc = exec(t, "BEGIN"))) return rc;
        t->in_txn = 1;
    }
    return run_stmt(t, ST_SAVE, "opening a savepoint");
}

static int change_end(ft_trace *t)
{
    return run_stmt(t, ST_RELEASE, "releasing a savepoint");
}

/* Undo the change since change_begin (the earlier ones of the transaction stay). */
static void change_undo(ft_trace *t)
{
    ft_err keep = t->err;
    if (run_stmt(t, ST_UNDO, "rolling back a savepoint") ||
        run_stmt(t, ST_RELEASE, "releasing a savepoint"))
        t->broken = 1;
    t->err = keep;
}

/* The handle's memory now disagrees with the file: no more writes. */
static int break_handle(ft_trace *t, int rc)
{
    if (t->in_txn) sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
    t->in_txn = 0;
    t->broken = 1;
    return rc;
}

/* Write the changed digests and commit the open transaction. */
static int txn_commit(ft_trace *t, const char *what)
{
    if (!t->in_txn) return FT_OK;
    int rc = FT_OK;
    if (t->dirty & (1u << DG_META)) {
        if ((rc = meta_digest(t, t->meta, t->n_meta, &t->dg[DG_META])))
            return break_handle(t, ft_err_set(&t->err, rc, "%s: out of memory", t->path));
    }
    for (int i = 0; i < N_DG; i++)
        if ((t->dirty & (1u << i)) && (rc = put_digest_db(t, i, t->dg[i])))
            return break_handle(t, rc);
    rc = sqlite3_exec(t->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return break_handle(t, sql_fail(t, rc, what));
    t->in_txn = 0;
    t->dirty = 0;
    return FT_OK;
}

int ft_trace_w_commit(ft_trace *t)
{
    int rc = need_create(t);
    return rc ? rc : txn_commit(t, "committing declarations");
}

int ft_trace_w_header(ft_trace *t, const ft_header *h)
{
    int rc = need_create(t);
    if (rc) return rc;
    char rank[24], ws[24];
    snprintf(rank, sizeof rank, "%" PRId64, h->rank);
    snprintf(ws, sizeof ws, "%" PRId64, h->world_size);
    const struct {
        const char *key, *value;
    } kv[] = {
        {"te_version", h->te_version},
        {"torch_version", h->torch_version},
        {"host", h->host},
        {"started_at", h->started_at},
        {"rank", h->has_rank ? rank : NULL},
        {"world_size", h->has_world_size ? ws : NULL},
        {"env", h->env_json && strcmp(h->env_json, "{}") ? h->env_json : NULL},
        {"extra", h->extra_json && strcmp(h->extra_json, "{}") ? h->extra_json : NULL},
    };
    for (size_t i = 0; i < FT_ARRAY_LEN(kv); i++) {
        size_t lim = i >= 6 ? FT_LIM_HDR_OBJ_BYTES : FT_LIM_HDR_STR_BYTES;
        if (kv[i].value && strlen(kv[i].value) > lim)
            return ft_err_set(&t->err, FT_ERANGE,
                              "header field '%s': %zu bytes, more than the "
                              "limit %zu",
                              kv[i].key, strlen(kv[i].value), lim);
    }
    if ((rc = change_begin(t))) return rc;
    for (size_t i = 0; i < FT_ARRAY_LEN(kv); i++)
        if (kv[i].value && (rc = meta_put_db(t, kv[i].key, kv[i].value))) {
            change_undo(t);
            return rc;
        }
    if ((rc = change_end(t))) return break_handle(t, rc);
    for (size_t i = 0; i < FT_ARRAY_LEN(kv); i++)
        if (kv[i].value && meta_set_mem(t, kv[i].key, kv[i].value))
            return break_handle(t, ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path));
    t->dirty |= 1u << DG_META;
    parse_header(t);
    return FT_OK;
}

int ft_trace_w_fuser(ft_trace *t, int64_t stream_id, const char *label, const char *ops_json,
                     uint32_t n_ops, uint64_t decl_pos)
{
    int rc = need_create(t);
    if (rc) return rc;
    if (ft_hmap_get(&t->fuser_map, (uint64_t)stream_id) != UINT32_MAX)
        return ft_err_set(&t->err, FT_EINVAL, "fuser id %" PRId64 " is already declared",
                          stream_id);
    if (t->n_fusers >= FT_LIM_FUSERS)
        return ft_err_set(&t->err, FT_ERANGE, "fuser id %" PRId64 ": more than %u fusers",
                          stream_id, FT_LIM_FUSERS);
    size_t ops_len = strlen(ops_json), label_len = label ? strlen(label) : 0;
    if (n_ops > FT_LIM_OPS || ops_len > FT_LIM_OPS_BYTES)
        return ft_err_set(&t->err, FT_ERANGE,
                          "fuser %" PRId64 ": field 'ops': %u ops in %zu bytes, more than the "
                          "limit of %d ops in %u bytes",
                          stream_id, n_ops, ops_len, FT_LIM_OPS, FT_LIM_OPS_BYTES);
    if (label_len > FT_LIM_LABEL_BYTES)
        return ft_err_set(&t->err, FT_ERANGE,
                          "fuser %" PRId64 ": field 'label': %zu bytes, more than the limit %u",
                          stream_id, label_len, FT_LIM_LABEL_BYTES);
    uint64_t hash = ft_hash64(ops_json, ops_len);
    uint32_t oi = ft_hmap_get(&t->ol_map, hash);
    int new_ol = 0;
    if (oi == UINT32_MAX) {
        new_ol = 1;
    } else if (strcmp(t->ol[oi].ops, ops_json)) {
        return ft_err_set(&t->err, FT_EUNSUPPORTED,
                          "fuser %" PRId64 ": op list hash collides with another op list",
                          stream_id);
    }
    decl d = {decl_pos, (uint64_t)(t->n_fusers + t->n_recipes)};
    int64_t fid = (int64_t)t->n_fusers + 1;
    int64_t olid = new_ol ? (int64_t)t->n_ol + 1 : t->ol[oi].id;
    uint64_t dg_ol = t->dg[DG_OPLISTS], dg_fu = t->dg[DG_FUSERS], h;
    sqlite3_stmt *st;
    if ((rc = change_begin(t))) return rc;
    if (new_ol) {
        if (!(st = stmt(t, ST_OPLIST))) goto fail_rc;
        sqlite3_bind_int64(st, 1, olid);
        sqlite3_bind_int64(st, 2, (int64_t)hash);
        sqlite3_bind_int64(st, 3, n_ops);
        sqlite3_bind_text(st, 4, ops_json, (int)ops_len, SQLITE_STATIC);
        if ((rc = step_done(t, st)) != SQLITE_OK) {
            rc = sql_fail(t, rc, "writing oplists");
            goto fail;
        }
        oplist o = {olid, hash, n_ops, (char *)ops_json};
        if (row_oplist(t, &o, &h)) goto fail_nomem;
        dg_ol = ft_hash_mix(dg_ol, h);
    }
    if (!(st = stmt(t, ST_FUSER))) goto fail_rc;
    sqlite3_bind_int64(st, 1, fid);
    sqlite3_bind_int64(st, 2, stream_id);
    if (label)
        sqlite3_bind_text(st, 3, label, (int)label_len, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 3);
    sqlite3_bind_int64(st, 4, olid);
    sqlite3_bind_int64(st, 5, (int64_t)d.pos);
    sqlite3_bind_int64(st, 6, (int64_t)d.no);
    if ((rc = step_done(t, st)) != SQLITE_OK) {
        rc = sql_fail(t, rc, "writing fusers");
        goto fail;
    }
    ft_fuser_def f = {stream_id, label, ops_json, n_ops};
    if (row_fuser(t, fid, &f, olid, &d, &h)) goto fail_nomem;
    dg_fu = ft_hash_mix(dg_fu, h);
    if ((rc = change_end(t))) return break_handle(t, rc);
    /* the rows are in the transaction: memory must follow, or the handle cannot go on */
    if (new_ol && add_oplist_mem(t, olid, hash, n_ops, ops_json))
        return break_handle(t, ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path));
    if (new_ol) oi = (uint32_t)(t->n_ol - 1);
    if (add_fuser_mem(t, stream_id, label, oi, d))
        return break_handle(t, ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path));
    t->dg[DG_OPLISTS] = dg_ol;
    t->dg[DG_FUSERS] = dg_fu;
    t->dirty |= (new_ol ? 1u << DG_OPLISTS : 0) | 1u << DG_FUSERS;
    return FT_OK;
fail_nomem:
    rc = ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
    goto fail;
fail_rc:
    rc = t->err.rc;
fail:
    change_undo(t);
    return rc;
}

int ft_trace_w_recipe(ft_trace *t, int64_t stream_id, const char *type, int64_t obj,
                      const char *attrs_json, uint64_t decl_pos)
{
    int rc = need_create(t);
    if (rc) return rc;
    if (ft_hmap_get(&t->recipe_map, (uint64_t)stream_id) != UINT32_MAX)
        return ft_err_set(&t->err, FT_EINVAL, "recipe id %" PRId64 " is already declared",
                          stream_id);
    if (t->n_recipes >= FT_LIM_RECIPES)
        return ft_err_set(&t->err, FT_ERANGE, "recipe id %" PRId64 ": more than %u recipes",
                          stream_id, FT_LIM_RECIPES);
    size_t type_len = strlen(type), attrs_len = strlen(attrs_json);
    if (type_len > FT_LIM_TYPE_BYTES)
        return ft_err_set(&t->err, FT_ERANGE,
                          "recipe %" PRId64 ": field 'type': %zu bytes, more than the limit %d",
                          stream_id, type_len, FT_LIM_TYPE_BYTES);
    if (attrs_len > FT_LIM_ATTRS_BYTES)
        return ft_err_set(&t->err, FT_ERANGE,
                          "recipe %" PRId64 ": field 'attrs': %zu bytes, more than the limit %u",
                          stream_id, attrs_len, FT_LIM_ATTRS_BYTES);
    uint32_t j = ft_hmap_get(&t->pair_map, pair_key(obj, attrs_json));
    if (j != UINT32_MAX && t->recipes[j].obj == obj &&
        !strcmp(t->recipes[j].attrs_json, attrs_json))
        return ft_err_set(&t->err, FT_EINVAL,
                          "recipe id %" PRId64 ": (obj %" PRId64
                          ", attrs) already declared as recipe id %" PRId64,
                          stream_id, obj, t->recipes[j].id);
    decl d = {decl_pos, (uint64_t)(t->n_fusers + t->n_recipes)};
    int64_t rid = (int64_t)t->n_recipes + 1;
    uint64_t h, dg_re = t->dg[DG_RECIPES];
    if ((rc = change_begin(t))) return rc;
    sqlite3_stmt *st = stmt(t, ST_RECIPE);
    if (!st) {
        rc = t->err.rc;
        goto fail;
    }
    sqlite3_bind_int64(st, 1, rid);
    sqlite3_bind_int64(st, 2, stream_id);
    sqlite3_bind_text(st, 3, type, (int)type_len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, obj);
    sqlite3_bind_text(st, 5, attrs_json, (int)attrs_len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, (int64_t)d.pos);
    sqlite3_bind_int64(st, 7, (int64_t)d.no);
    if ((rc = step_done(t, st)) != SQLITE_OK) {
        rc = sql_fail(t, rc, "writing recipes");
        goto fail;
    }
    ft_recipe_def r = {stream_id, type, obj, attrs_json};
    if (row_recipe(t, rid, &r, &d, &h)) {
        rc = ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        goto fail;
    }
    if ((rc = change_end(t))) return break_handle(t, rc);
    if (add_recipe_mem(t, stream_id, type, obj, attrs_json, d))
        return break_handle(t, ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path));
    t->dg[DG_RECIPES] = ft_hash_mix(dg_re, h);
    t->dirty |= 1u << DG_RECIPES;
    return FT_OK;
fail:
    change_undo(t);
    return rc;
}

int ft_trace_w_chunk(ft_trace *t, ft_chunk_info *info, const void *data, size_t len)
{
    int rc = need_create(t);
    if (rc) return rc;
    if (len > INT32_MAX)
        return ft_err_set(&t->err, FT_ERANGE, "%s: chunk of %zu bytes is too large", t->path, len);
    if (grow((void **)&t->chunks, &t->chunks_cap, t->n_chunks + 1, sizeof *t->chunks))
        return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
    info->id = t->n_chunks + 1;
    uint64_t h;
    if (row_chunk(t, info, &h)) return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
    uint64_t dg = ft_hash_mix(t->dg[DG_CHUNKS], h);
    if ((rc = change_begin(t))) return break_handle(t, rc);
    sqlite3_stmt *st = stmt(t, ST_CHUNK);
    if (!st) return break_handle(t, t->err.rc);
    sqlite3_bind_int64(st, 1, (int64_t)info->id);
    sqlite3_bind_int64(st, 2, info->first_seq);
    sqlite3_bind_int64(st, 3, info->n_records);
    sqlite3_bind_int64(st, 4, info->n_calls);
    sqlite3_bind_int64(st, 5, info->codec);
    sqlite3_bind_int64(st, 6, (int64_t)info->raw_bytes);
    sqlite3_bind_int64(st, 7, (int64_t)info->checksum);
    sqlite3_bind_blob(st, 8, data, (int)len, SQLITE_STATIC);
    if ((rc = step_done(t, st)) != SQLITE_OK) {
        char what[64];
        snprintf(what, sizeof what, "writing chunk %" PRIu64, info->id);
        return break_handle(t, sql_fail(t, rc, what));
    }
    if ((rc = change_end(t))) return break_handle(t, rc);
    uint64_t keep = t->dg[DG_CHUNKS];
    t->dg[DG_CHUNKS] = dg;
    t->dirty |= 1u << DG_CHUNKS;
    char what[64];
    snprintf(what, sizeof what, "committing chunk %" PRIu64, info->id);
    if ((rc = txn_commit(t, what))) {
        t->dg[DG_CHUNKS] = keep;
        return rc;
    }
    t->chunks[t->n_chunks++] = *info;
    t->n_calls += info->n_calls;
    t->n_bwd += info->n_records - info->n_calls;
    /* copy the commit into the main file, so that the file alone (a copy) holds it; passive:
     * never waits for a reader, and a reader's snapshot only defers it to the next commit */
    sqlite3_wal_checkpoint_v2(t->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return FT_OK;
}

/* Fold the WAL into the main file, close the connection and, when SQLite removed the -wal (no
 * other connection had the file open), switch the header to rollback mode with one 2-byte
 * write (file-format bytes 18 and 19, 2 -> 1), so that no journal is ever involved. */
/* Small traces small: a finished trace of at most FT_SMALL_TRACE_BYTES is copied into
 * PATH.small-PID with 512-byte pages (VACUUM INTO; the copy is in rollback mode), which
 * compact_finish renames over PATH once the recording's connection is closed. The fixed cost of
 * a trace is a page per table and index, so 4096-byte pages made a 240-call capture 40 KB; 512-byte
 * pages make it about 10. Larger traces keep 4096-byte pages (their chunk blobs read faster). A
 * failure or a kill leaves the original trace as it was (and at worst the copy beside it). */
#define FT_SMALL_TRACE_BYTES (1u << 20)

static int compact_copy(ft_trace *t, char *copy, size_t cap)
{
    copy[0] = '\0';
    sqlite3_stmt *st = NULL;
    int64_t pages = 0, size = 0;
    if (sqlite3_prepare_v2(t->db, "PRAGMA page_count", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        pages = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(t->db, "PRAGMA page_size", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        size = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (pages <= 0 || size <= 512 || pages * size > FT_SMALL_TRACE_BYTES) return 0;
    if ((size_t)snprintf(copy, cap, "%s.small-%ld", t->path, (long)getpid()) >= cap) {
        copy[0] = '\0';
        return 0;
    }
    unlink(copy); /* a copy a killed close of this pid left */
    char *sql = sqlite3_mprintf("PRAGMA page_size=512; VACUUM INTO %Q", copy);
    int rc = sql ? sqlite3_exec(t->db, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
    sqlite3_free(sql);
    if (rc != SQLITE_OK) { /* the trace stays as it is, with its larger pages */
        unlink(copy);
        copy[0] = '\0';
        return 0;
    }
    return 1;
}

/* The copy in place of the trace: synced, renamed, the folder synced. 1 when it replaced it. */
static int compact_finish(const char *path, const char *copy)
{
    int fd = open(copy, O_RDONLY | O_CLOEXEC);
    int ok = fd >= 0 && !fsync(fd);
    if (fd >= 0) close(fd);
    if (ok && !rename(copy, path)) {
        char dir[4200];
        ft_strlcpy(dir, path, sizeof dir);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        int dfd = open(slash ? (dir[0] ? dir : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd); /* durability of the name; the data is synced already */
            close(dfd);
        }
        return 1;
    }
    unlink(copy);
    return 0;
}

static int fold_wal_and_close(ft_trace *t)
{
    int n_log = 0, n_ckpt = 0;
    int rc = sqlite3_wal_checkpoint_v2(t->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &n_log, &n_ckpt);
    int folded = rc == SQLITE_OK;
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) return sql_fail(t, rc, "folding the WAL in");
    finalize_all(t);
    char copy[4200];
    const int compact = folded && compact_copy(t, copy, sizeof copy);
    rc = sqlite3_close(t->db);
    t->db = NULL;
    if (rc != SQLITE_OK)
        return ft_err_set(&t->err, ft_sql_status(rc), "%s: closing: %s", t->path,
                          sqlite3_errstr(rc));
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", t->path);
    struct stat sb;
    if (!folded || !stat(wal, &sb)) { /* another connection: stays in WAL mode */
        if (compact) unlink(copy);
        return FT_OK;
    }
    char shm[4200];
    snprintf(shm, sizeof shm, "%s-shm", t->path);
    if (compact && compact_finish(t->path, copy)) { /* the copy is in rollback mode already */
        unlink(shm);
        return FT_OK;
    }
    int fd = open(t->path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return ft_err_set(&t->err, FT_EIO, "%s: reopening to mark it closed: %s", t->path,
                          strerror(errno));
    uint8_t v[2];
    rc = FT_OK;
    if (pread(fd, v, 2, 18) != 2) {
        rc = ft_err_set(&t->err, FT_EIO, "%s: reading its header: %s", t->path, strerror(errno));
    } else if (v[0] == 2 && v[1] == 2) {
        static const uint8_t rollback[2] = {1, 1};
        if (pwrite(fd, rollback, 2, 18) != 2 || fsync(fd))
            rc =
                ft_err_set(&t->err, FT_EIO, "%s: writing its header: %s", t->path, strerror(errno));
    }
    if (close(fd) && !rc)
        rc = ft_err_set(&t->err, FT_EIO, "%s: closing: %s", t->path, strerror(errno));
    /* a -shm left by a killed recorder (seal) means nothing beside a rollback-mode file */
    if (!rc) unlink(shm);
    return rc;
}

static int finish_as(ft_trace *t, const char *state)
{
    int rc = need_create(t);
    if (rc) return rc;
    if ((rc = change_begin(t))) return break_handle(t, rc);
    if ((rc = meta_put_db(t, "state", state)) || (rc = change_end(t))) return break_handle(t, rc);
    if (meta_set_mem(t, "state", state))
        return break_handle(t, ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path));
    t->dirty |= 1u << DG_META;
    if ((rc = txn_commit(t, "committing the close"))) return rc;
    rc = fold_wal_and_close(t);
    t->mode = FT_OPEN_READ; /* the connection is gone: nothing more to write */
    return rc;
}

int ft_trace_w_finish(ft_trace *t)
{
    return finish_as(t, "complete");
}

int ft_trace_seal(const char *path, int force, ft_seal_info *out, ft_err *err)
{
    memset(out, 0, sizeof *out);
    ft_trace *t = ft_calloc(1, sizeof *t);
    if (!t || !(t->path = ft_strdup(path))) {
        ft_free(t);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
    }
    probe pr;
    wal_scan ws = {0};
    int rc = probe_file(t, &pr);
    if (!rc && pr.wal_mode && pr.has_wal && pr.wal_bytes) {
        if ((rc = scan_wal_settled(path, pr.page_size, &ws)))
            ft_err_set(&t->err, rc, "%s: out of memory", path);
        else if (ws.damaged && !force)
            rc = ft_err_set(&t->err, FT_ECORRUPT,
                            "%s-wal: damaged: %s; 'seal --force' keeps what comes before the "
                            "damage and drops the rest",
                            path, ws.why);
    }
    out->wal_commits = ws.commits;
    out->wal_damaged = ws.damaged;
    if (!rc) {
        /* read-write, as SQLite opens any database: the WAL is applied, and a hot journal
         * (left by an older build's close) is rolled back */
        rc = sqlite3_open_v2(path, &t->db, SQLITE_OPEN_READWRITE, NULL);
        if (rc != SQLITE_OK)
            rc = ft_err_set(&t->err, FT_EIO, "%s: cannot open for writing: %s", path,
                            t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc));
    }
    if (!rc) {
        sqlite3_busy_timeout(t->db, 5000);
        /* nobody else may have it open: a recorder still writing would race with the seal */
        if (!(rc = exec(t, "PRAGMA locking_mode=EXCLUSIVE")) && !(rc = exec(t, "BEGIN EXCLUSIVE")))
            rc = exec(t, "COMMIT");
        if (rc == FT_EIO)
            rc = ft_err_set(&t->err, FT_ESTATE,
                            "%s: another process has it open (a recorder still writing?); seal "
                            "it once the recording stopped",
                            path);
    }
    if (!rc && !(rc = load_all(t))) {
        const char *state = ft_trace_meta(t, "state");
        out->was_closed = state && (!strcmp(state, "complete") || !strcmp(state, "recovered"));
        out->n_calls = t->n_calls;
        out->n_backwards = t->n_bwd;
        out->n_chunks = t->n_chunks;
        t->mode = FT_OPEN_CREATE;
        /* a closed trace in rollback mode is left untouched (a write would need a journal) */
        if (!out->was_closed || pr.wal_mode)
            rc = finish_as(t, out->was_closed ? state : "recovered");
    }
    if (rc && err) *err = t->err;
    trace_free(t);
    return rc;
}

/* ---- lookups ------------------------------------------------------------------------------ */
uint32_t ft_trace_fuser_index(const ft_trace *t, int64_t stream_id)
{
    return ft_hmap_get(&t->fuser_map, (uint64_t)stream_id);
}

uint32_t ft_trace_recipe_index(const ft_trace *t, int64_t stream_id)
{
    return ft_hmap_get(&t->recipe_map, (uint64_t)stream_id);
}

void ft_trace_fuser_decl(const ft_trace *t, uint32_t idx, uint64_t *pos, uint64_t *no)
{
    *pos = t->fuser_decl[idx].pos;
    *no = t->fuser_decl[idx].no;
}

void ft_trace_recipe_decl(const ft_trace *t, uint32_t idx, uint64_t *pos, uint64_t *no)
{
    *pos = t->recipe_decl[idx].pos;
    *no = t->recipe_decl[idx].no;
}

uint32_t ft_trace_n_oplists(const ft_trace *t)
{
    return (uint32_t)t->n_ol;
}

const ft_chunk_limits *ft_trace_limits(const ft_trace *t)
{
    return &t->lim;
}

const ft_chunk_info *ft_trace_chunk(const ft_trace *t, uint64_t pos)
{
    return pos < t->n_chunks ? &t->chunks[pos] : NULL;
}

ft_err *ft_trace_err(ft_trace *t)
{
    return &t->err;
}

const char *ft_trace_path(const ft_trace *t)
{
    return t->path;
}

struct sqlite3 *ft_trace_db(ft_trace *t)
{
    return t->db;
}

const ft_header *ft_trace_header(const ft_trace *t)
{
    return &t->hdr;
}

uint32_t ft_trace_n_fusers(const ft_trace *t)
{
    return (uint32_t)t->n_fusers;
}

const ft_fuser_def *ft_trace_fuser(const ft_trace *t, uint32_t idx)
{
    return idx < t->n_fusers ? &t->fusers[idx] : NULL;
}

uint32_t ft_trace_n_recipes(const ft_trace *t)
{
    return (uint32_t)t->n_recipes;
}

const ft_recipe_def *ft_trace_recipe(const ft_trace *t, uint32_t idx)
{
    return idx < t->n_recipes ? &t->recipes[idx] : NULL;
}

uint64_t ft_trace_n_calls(const ft_trace *t)
{
    return t->n_calls;
}

uint64_t ft_trace_n_backwards(const ft_trace *t)
{
    return t->n_bwd;
}

uint64_t ft_trace_n_chunks(const ft_trace *t)
{
    return t->n_chunks;
}

const char *ft_trace_notice(const ft_trace *t)
{
    return t->notice;
}

const char *ft_trace_meta(const ft_trace *t, const char *key)
{
    const meta_kv *kv = meta_find(t, key);
    return kv ? kv->value : NULL;
}

/* Recompute every digest from the file (a second, independent read of the small tables). */
int ft_trace_check_digests(ft_trace *t)
{
    ft_trace *u = ft_calloc(1, sizeof *u);
    if (!u || !(u->path = ft_strdup(t->path))) {
        ft_free(u);
        return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
    }
    u->db = t->db;
    int rc = exec(u, "BEGIN");
    if (!rc) {
        if (!(rc = load_meta(u)) && !(rc = load_oplists(u)) && !(rc = load_fusers(u)) &&
            !(rc = load_recipes(u)) && !(rc = load_chunks(u)))
            rc = compare_digests(u);
        sqlite3_exec(u->db, "COMMIT", NULL, NULL, NULL);
    }
    if (rc) t->err = u->err;
    u->db = NULL;
    trace_free(u);
    return rc;
}

int ft_trace_redigest(const char *path, ft_err *err)
{
    ft_trace *u = ft_calloc(1, sizeof *u);
    if (!u || !(u->path = ft_strdup(path))) {
        ft_free(u);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
    }
    int rc = sqlite3_open_v2(path, &u->db, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK)
        rc = ft_err_set(&u->err, FT_EIO, "%s: cannot open: %s", path, sqlite3_errstr(rc));
    else if (!(rc = exec(u, "BEGIN"))) {
        if (!(rc = load_meta(u)) && !(rc = load_oplists(u)) && !(rc = load_fusers(u)) &&
            !(rc = load_recipes(u)) && !(rc = load_chunks(u)) && !(rc = write_digests_all(u)))
            rc = exec(u, "COMMIT");
        if (rc) sqlite3_exec(u->db, "ROLLBACK", NULL, NULL, NULL);
    }
    if (rc && err) *err = u->err;
    trace_free(u);
    return rc;
}

static uint64_t file_size(const char *path, const char *suffix)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s%s", path, suffix);
    struct stat sb;
    return stat(buf, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

int ft_trace_sizes_get(ft_trace *t, ft_trace_sizes *out)
{
    memset(out, 0, sizeof *out);
    out->file_bytes = file_size(t->path, "") + (t->wal_read ? file_size(t->path, "-wal") : 0);
    for (size_t i = 0; i < t->n_chunks; i++)
        out->chunk_raw_bytes += t->chunks[i].raw_bytes;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(t->db, "SELECT coalesce(sum(length(data)), 0) FROM chunks", -1, &st,
                                NULL);
    if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        out->chunk_zip_bytes = (uint64_t)sqlite3_column_int64(st, 0);
    else
        rc = SQLITE_ERROR;
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) return sql_fail(t, rc, "reading chunk sizes");
    return FT_OK;
}
