/*
 * trace.c - the trace handle: create (DDL from trace.sql, WAL), open (application_id, format
 * version, small tables, chunk index, digests), the row writers used by the recorder, lookups,
 * meta and sizes. Limits: the small tables are held in memory (they are small by design); chunk
 * data is read on demand by the reader.
 */
#define _POSIX_C_SOURCE 200809L
#include "trace_int.h"
#include "ft_hmap.h"
#include "trace_sql.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FT_CREATED_BY "fusertrace 0.1.0"

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
};

/* ---- small helpers ------------------------------------------------------------------------ */
static int sql_fail(ft_trace *t, int rc, const char *what)
{
    return ft_err_set(&t->err, rc == SQLITE_NOMEM ? FT_ENOMEM : FT_ESQL, "%s: %s: %s", t->path,
                      what, sqlite3_errmsg(t->db));
}

static int exec(ft_trace *t, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(t->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        ft_err_set(&t->err, rc == SQLITE_NOMEM ? FT_ENOMEM : FT_ESQL, "%s: %s: %s", t->path, sql,
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

static int meta_put_db(ft_trace *t, const char *key, const char *value)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(t->db, "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", -1,
                                &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(t->db);
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) return sql_fail(t, rc, "writing meta");
    return FT_OK;
}

static int put_digest_db(ft_trace *t, int which, uint64_t value)
{
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, value);
    return meta_put_db(t, dg_key[which], hex);
}

/* ---- open --------------------------------------------------------------------------------- */
static void trace_free(ft_trace *t)
{
    if (!t) return;
    if (t->db) sqlite3_close(t->db);
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
        if (!ops || n_ops < 0 || n_ops > FT_MAX_OPS) {
            sqlite3_finalize(st);
            return corrupt_table(t, "oplists", "bad row");
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
    if (pragma_int(t, "PRAGMA application_id", &app, &src)) {
        if (src == SQLITE_NOTADB)
            return ft_err_set(&t->err, FT_ENOTTRACE,
                              "%s: not a fusertrace trace (not a SQLite "
                              "database)",
                              t->path);
        return ft_err_set(&t->err, FT_EIO, "%s: cannot read: %s", t->path, sqlite3_errmsg(t->db));
    }
    if (pragma_int(t, "PRAGMA user_version", &ver, &src))
        return ft_err_set(&t->err, FT_EIO, "%s: cannot read: %s", t->path, sqlite3_errmsg(t->db));
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

static int open_read(ft_trace *t)
{
    int rc = sqlite3_open_v2(t->path, &t->db, SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK)
        return ft_err_set(&t->err, FT_EIO, "%s: cannot open: %s", t->path,
                          t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc));
    sqlite3_busy_timeout(t->db, 5000);
    if ((rc = check_identity(t))) return rc;
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
    if (t->mode != FT_OPEN_CREATE)
        return ft_err_set(&t->err, FT_ESTATE, "%s: trace is open read-only", t->path);
    return FT_OK;
}

static int commit(ft_trace *t)
{
    return exec(t, "COMMIT");
}

static void rollback(ft_trace *t)
{
    sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
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
    if ((rc = exec(t, "BEGIN"))) return rc;
    for (size_t i = 0; i < FT_ARRAY_LEN(kv); i++)
        if (kv[i].value && (rc = meta_put_db(t, kv[i].key, kv[i].value))) goto fail;
    /* meta digest over the new state, computed on a copy */
    for (size_t i = 0; i < FT_ARRAY_LEN(kv); i++)
        if (kv[i].value && meta_set_mem(t, kv[i].key, kv[i].value)) {
            rc = ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
            goto fail_mem;
        }
    if ((rc = meta_digest(t, t->meta, t->n_meta, &t->dg[DG_META]))) {
        rc = ft_err_set(&t->err, rc, "%s: out of memory", t->path);
        goto fail_mem;
    }
    if ((rc = put_digest_db(t, DG_META, t->dg[DG_META]))) goto fail_mem;
    if ((rc = commit(t))) goto fail_mem;
    parse_header(t);
    return FT_OK;
fail_mem:
    /* the in-memory meta now disagrees with the file: refuse further writes */
    rollback(t);
    t->mode = FT_OPEN_READ;
    return rc;
fail:
    rollback(t);
    return rc;
}

int ft_trace_w_fuser(ft_trace *t, int64_t stream_id, const char *label, const char *ops_json,
                     uint32_t n_ops, uint64_t decl_pos)
{
    int rc = need_create(t);
    if (rc) return rc;
    if (ft_hmap_get(&t->fuser_map, (uint64_t)stream_id) != UINT32_MAX)
        return ft_err_set(&t->err, FT_EINVAL, "fuser id %" PRId64 " is already declared",
                          stream_id);
    uint64_t hash = ft_hash64(ops_json, strlen(ops_json));
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
    sqlite3_stmt *st = NULL;
    if ((rc = exec(t, "BEGIN"))) return rc;
    if (new_ol) {
        rc = sqlite3_prepare_v2(t->db, "INSERT INTO oplists(id, hash, n_ops, ops) VALUES (?,?,?,?)",
                                -1, &st, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, olid);
            sqlite3_bind_int64(st, 2, (int64_t)hash);
            sqlite3_bind_int64(st, 3, n_ops);
            sqlite3_bind_text(st, 4, ops_json, -1, SQLITE_STATIC);
            rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(t->db);
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_OK) {
            rc = sql_fail(t, rc, "writing oplists");
            goto fail;
        }
        oplist o = {olid, hash, n_ops, (char *)ops_json};
        if ((rc = row_oplist(t, &o, &h))) goto fail_nomem;
        dg_ol = ft_hash_mix(dg_ol, h);
        if ((rc = put_digest_db(t, DG_OPLISTS, dg_ol))) goto fail;
    }
    rc = sqlite3_prepare_v2(t->db,
                            "INSERT INTO fusers(id, stream_id, label, oplist, decl_pos, decl_no) "
                            "VALUES (?,?,?,?,?,?)",
                            -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, fid);
        sqlite3_bind_int64(st, 2, stream_id);
        if (label)
            sqlite3_bind_text(st, 3, label, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 3);
        sqlite3_bind_int64(st, 4, olid);
        sqlite3_bind_int64(st, 5, (int64_t)d.pos);
        sqlite3_bind_int64(st, 6, (int64_t)d.no);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(t->db);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        rc = sql_fail(t, rc, "writing fusers");
        goto fail;
    }
    ft_fuser_def f = {stream_id, label, ops_json, n_ops};
    if ((rc = row_fuser(t, fid, &f, olid, &d, &h))) goto fail_nomem;
    dg_fu = ft_hash_mix(dg_fu, h);
    if ((rc = put_digest_db(t, DG_FUSERS, dg_fu))) goto fail;
    /* memory first (can fail), then commit; a failed commit leaves extra memory rows, so the
     * handle refuses further writes in that case */
    if (new_ol && add_oplist_mem(t, olid, hash, n_ops, ops_json)) goto fail_nomem;
    if (new_ol) oi = (uint32_t)(t->n_ol - 1);
    if (add_fuser_mem(t, stream_id, label, oi, d)) {
        if (new_ol) {
            t->n_ol--;
            ft_free(t->ol[t->n_ol].ops);
            /* the hash map keeps a dangling index; the handle cannot write any more */
            t->mode = FT_OPEN_READ;
        }
        goto fail_nomem;
    }
    if ((rc = commit(t))) {
        rollback(t);
        t->mode = FT_OPEN_READ;
        return rc;
    }
    t->dg[DG_OPLISTS] = dg_ol;
    t->dg[DG_FUSERS] = dg_fu;
    return FT_OK;
fail_nomem:
    rc = ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
fail:
    rollback(t);
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
    sqlite3_stmt *st = NULL;
    if ((rc = exec(t, "BEGIN"))) return rc;
    rc = sqlite3_prepare_v2(t->db,
                            "INSERT INTO recipes(id, stream_id, type, obj, attrs, decl_pos, "
                            "decl_no) VALUES (?,?,?,?,?,?,?)",
                            -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, rid);
        sqlite3_bind_int64(st, 2, stream_id);
        sqlite3_bind_text(st, 3, type, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, obj);
        sqlite3_bind_text(st, 5, attrs_json, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, (int64_t)d.pos);
        sqlite3_bind_int64(st, 7, (int64_t)d.no);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(t->db);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        rc = sql_fail(t, rc, "writing recipes");
        goto fail;
    }
    ft_recipe_def r = {stream_id, type, obj, attrs_json};
    if (row_recipe(t, rid, &r, &d, &h)) {
        rc = ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        goto fail;
    }
    dg_re = ft_hash_mix(dg_re, h);
    if ((rc = put_digest_db(t, DG_RECIPES, dg_re))) goto fail;
    if (add_recipe_mem(t, stream_id, type, obj, attrs_json, d)) {
        /* the maps may hold the new ids; refuse further writes */
        t->mode = FT_OPEN_READ;
        rc = ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        goto fail;
    }
    if ((rc = commit(t))) {
        rollback(t);
        t->mode = FT_OPEN_READ;
        return rc;
    }
    t->dg[DG_RECIPES] = dg_re;
    return FT_OK;
fail:
    rollback(t);
    return rc;
}

int ft_trace_w_chunk(ft_trace *t, ft_chunk_info *info, const void *data, size_t len)
{
    int rc = need_create(t);
    if (rc) return rc;
    if (grow((void **)&t->chunks, &t->chunks_cap, t->n_chunks + 1, sizeof *t->chunks))
        return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
    info->id = t->n_chunks + 1;
    uint64_t h;
    if (row_chunk(t, info, &h)) return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
    uint64_t dg = ft_hash_mix(t->dg[DG_CHUNKS], h);
    sqlite3_stmt *st = NULL;
    if ((rc = exec(t, "BEGIN"))) return rc;
    rc = sqlite3_prepare_v2(t->db,
                            "INSERT INTO chunks(id, first_seq, n_records, n_calls, codec, "
                            "raw_bytes, checksum, data) VALUES (?,?,?,?,?,?,?,?)",
                            -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (int64_t)info->id);
        sqlite3_bind_int64(st, 2, info->first_seq);
        sqlite3_bind_int64(st, 3, info->n_records);
        sqlite3_bind_int64(st, 4, info->n_calls);
        sqlite3_bind_int64(st, 5, info->codec);
        sqlite3_bind_int64(st, 6, (int64_t)info->raw_bytes);
        sqlite3_bind_int64(st, 7, (int64_t)info->checksum);
        sqlite3_bind_blob(st, 8, data, (int)len, SQLITE_STATIC);
        rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(t->db);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        rc = sql_fail(t, rc, "writing chunks");
        goto fail;
    }
    if ((rc = put_digest_db(t, DG_CHUNKS, dg))) goto fail;
    if ((rc = commit(t))) goto fail;
    t->dg[DG_CHUNKS] = dg;
    t->chunks[t->n_chunks++] = *info;
    t->n_calls += info->n_calls;
    t->n_bwd += info->n_records - info->n_calls;
    return FT_OK;
fail:
    rollback(t);
    return rc;
}

int ft_trace_w_finish(ft_trace *t)
{
    int rc = need_create(t);
    if (rc) return rc;
    if ((rc = exec(t, "BEGIN"))) return rc;
    if ((rc = meta_put_db(t, "state", "complete"))) goto fail;
    if (meta_set_mem(t, "state", "complete")) {
        rc = ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        goto fail;
    }
    if ((rc = meta_digest(t, t->meta, t->n_meta, &t->dg[DG_META]))) goto fail;
    if ((rc = put_digest_db(t, DG_META, t->dg[DG_META]))) goto fail;
    if ((rc = commit(t))) goto fail;
    if ((rc = exec(t, "PRAGMA wal_checkpoint(TRUNCATE)"))) return rc;
    return exec(t, "PRAGMA journal_mode=DELETE");
fail:
    rollback(t);
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
    out->file_bytes = file_size(t->path, "") + file_size(t->path, "-wal");
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
