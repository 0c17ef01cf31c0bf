/*
 * trace.c - the trace handle: open for reading (the file probed, opened as it must be read, the
 * small tables and the chunk index loaded in one read transaction, the digests checked), the
 * in-memory tables that the writers extend too, lookups, meta and sizes. Limits: the small
 * tables are held in memory (they are small by design, and held to ft_limits.h); chunk data is
 * read on demand by the reader (reader.c).
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
 * The rest of the handle: trace_probe.c (the file's header, its side files, the -wal scan),
 * trace_write.c (create, the row writers, close and seal), trace_digest.c (the digest chains);
 * what they share is in trace_handle_int.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_limits.h"
#include "trace_handle_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* " (CAUSE)" for an I/O failure: the OS error SQLite kept (a full disk reads "disk I/O error"
 * from SQLite on some paths), or for SQLITE_FULL (no page limit is ever set on a trace, so
 * it is the disk), else "". */
static const char *os_cause(const ft_trace *t, int rc, char *buf, size_t cap)
{
    buf[0] = '\0';
    int e = t->db ? sqlite3_system_errno(t->db) : 0;
    if ((rc & 0xff) == SQLITE_FULL) e = ENOSPC;
    if (((rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_FULL) && e > 0)
        snprintf(buf, cap, " (%s)", strerror(e));
    return buf;
}

int trace_sql_fail(ft_trace *t, int rc, const char *what)
{
    char cause[96];
    return ft_err_set(&t->err, ft_sql_status(rc), "%s: %s: %s%s", t->path, what,
                      t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc),
                      os_cause(t, rc, cause, sizeof cause));
}

int trace_exec(ft_trace *t, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(t->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        char cause[96];
        ft_err_set(&t->err, ft_sql_status(rc), "%s: %s: %s%s", t->path, sql,
                   msg ? msg : sqlite3_errstr(rc), os_cause(t, rc, cause, sizeof cause));
        sqlite3_free(msg);
        return t->err.rc;
    }
    return FT_OK;
}

int trace_grow(void **p, size_t *cap, size_t n, size_t sz)
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

/* ---- meta in memory ----------------------------------------------------------------------- */
meta_kv *trace_meta_find(const ft_trace *t, const char *key)
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
int trace_meta_set(ft_trace *t, const char *key, const char *value)
{
    char *v = ft_strdup(value);
    if (!v) return FT_ENOMEM;
    meta_kv *kv = trace_meta_find(t, key);
    if (kv) {
        ft_free(kv->value);
        kv->value = v;
        return FT_OK;
    }
    char *k = ft_strdup(key);
    if (!k || trace_grow((void **)&t->meta, &t->meta_cap, t->n_meta + 1, sizeof *t->meta)) {
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

/* ---- the in-memory tables ----------------------------------------------------------------- */
void trace_finalize_all(ft_trace *t)
{
    for (int i = 0; i < N_STMT; i++) {
        sqlite3_finalize(t->st[i]);
        t->st[i] = NULL;
    }
}

void trace_free(ft_trace *t)
{
    if (!t) return;
    trace_finalize_all(t);
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
    ft_free(t->fuser_sid);
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

uint64_t trace_pair_key(int64_t obj, const char *attrs)
{
    return ft_hash_mix(ft_hash64(attrs, strlen(attrs)), (uint64_t)obj);
}

/* Append in-memory rows (used by load and by the writers after a commit). */
int trace_add_oplist(ft_trace *t, int64_t id, uint64_t hash, uint32_t n_ops, const char *ops)
{
    char *s = ft_strdup(ops);
    if (!s || trace_grow((void **)&t->ol, &t->ol_cap, t->n_ol + 1, sizeof *t->ol) ||
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
    if (trace_grow((void **)&t->fusers, &cap, t->n_fusers + 1, sizeof *t->fusers)) return FT_ENOMEM;
    cap = t->fusers_cap;
    if (trace_grow((void **)&t->fuser_decl, &cap, t->n_fusers + 1, sizeof *t->fuser_decl))
        return FT_ENOMEM;
    cap = t->fusers_cap;
    if (trace_grow((void **)&t->fuser_n_ops, &cap, t->n_fusers + 1, sizeof *t->fuser_n_ops))
        return FT_ENOMEM;
    cap = t->fusers_cap;
    if (trace_grow((void **)&t->fuser_sid, &cap, t->n_fusers + 1, sizeof *t->fuser_sid))
        return FT_ENOMEM;
    t->fusers_cap = cap;
    t->lim.fuser_n_ops = t->fuser_n_ops;
    t->lim.fuser_sid = t->fuser_sid;
    return FT_OK;
}

int trace_add_fuser(ft_trace *t, int64_t stream_id, const char *label, uint32_t ol_idx, decl d)
{
    char *l = NULL;
    if (label && !(l = ft_strdup(label))) return FT_ENOMEM;
    if (reserve_fusers(t) ||
        ft_hmap_put(&t->fuser_map, (uint64_t)stream_id, (uint32_t)t->n_fusers)) {
        ft_free(l);
        return FT_ENOMEM;
    }
    size_t i = t->n_fusers++;
    t->fusers[i] = (ft_fuser_def){stream_id, l, t->ol[ol_idx].ops, t->ol[ol_idx].n_ops, 0, 0};
    t->fuser_decl[i] = d;
    t->fuser_n_ops[i] = t->ol[ol_idx].n_ops;
    t->fuser_sid[i] = stream_id;
    t->lim.n_fusers = (uint32_t)t->n_fusers;
    return FT_OK;
}

static int reserve_recipes(ft_trace *t)
{
    size_t cap = t->recipes_cap;
    if (t->n_recipes < cap) return FT_OK;
    if (trace_grow((void **)&t->recipes, &cap, t->n_recipes + 1, sizeof *t->recipes))
        return FT_ENOMEM;
    cap = t->recipes_cap;
    if (trace_grow((void **)&t->recipe_decl, &cap, t->n_recipes + 1, sizeof *t->recipe_decl))
        return FT_ENOMEM;
    t->recipes_cap = cap;
    return FT_OK;
}

int trace_add_recipe(ft_trace *t, int64_t stream_id, const char *type, int64_t obj,
                     const char *attrs, decl d)
{
    char *ty = ft_strdup(type), *at = ft_strdup(attrs);
    if (!ty || !at || reserve_recipes(t) ||
        ft_hmap_put(&t->recipe_map, (uint64_t)stream_id, (uint32_t)t->n_recipes) ||
        ft_hmap_put(&t->pair_map, trace_pair_key(obj, attrs), (uint32_t)t->n_recipes)) {
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

/* ---- loading ------------------------------------------------------------------------------ */
int trace_corrupt_table(ft_trace *t, const char *table, const char *what)
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
    if (rc != SQLITE_OK) return trace_corrupt_table(t, "meta", sqlite3_errmsg(t->db));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        const char *v = (const char *)sqlite3_column_text(st, 1);
        if (!k || !v) {
            sqlite3_finalize(st);
            return trace_corrupt_table(t, "meta", "NULL key or value");
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
        if (trace_meta_set(t, k, v)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return trace_corrupt_table(t, "meta", sqlite3_errmsg(t->db));
    return FT_OK;
}

static int load_oplists(ft_trace *t)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(t->db, "SELECT id, hash, n_ops, ops FROM oplists ORDER BY id", -1,
                                &st, NULL);
    if (rc != SQLITE_OK) return trace_corrupt_table(t, "oplists", sqlite3_errmsg(t->db));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0), n_ops = sqlite3_column_int64(st, 2);
        const char *ops = (const char *)sqlite3_column_text(st, 3);
        if (!ops || n_ops < 0) {
            sqlite3_finalize(st);
            return trace_corrupt_table(t, "oplists", "bad row");
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
        if (trace_row_oplist(t, &o, &h) || trace_add_oplist(t, id, o.hash, o.n_ops, ops)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
        t->dg[DG_OPLISTS] = ft_hash_mix(t->dg[DG_OPLISTS], h);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return trace_corrupt_table(t, "oplists", sqlite3_errmsg(t->db));
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
    if (rc != SQLITE_OK) return trace_corrupt_table(t, "fusers", sqlite3_errmsg(t->db));
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
            return trace_corrupt_table(t, "fusers",
                                       "a row refers to a missing op list or repeats an id");
        }
        uint64_t h;
        ft_fuser_def f = {sid, label, t->ol[oi].ops, t->ol[oi].n_ops, 0, 0};
        if (trace_row_fuser(t, id, &f, olid, &d, &h) || trace_add_fuser(t, sid, label, oi, d)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
        t->dg[DG_FUSERS] = ft_hash_mix(t->dg[DG_FUSERS], h);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return trace_corrupt_table(t, "fusers", sqlite3_errmsg(t->db));
    return FT_OK;
}

static int load_recipes(ft_trace *t)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(t->db,
                                "SELECT id, stream_id, type, obj, attrs, decl_pos, decl_no "
                                "FROM recipes ORDER BY id",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) return trace_corrupt_table(t, "recipes", sqlite3_errmsg(t->db));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0), sid = sqlite3_column_int64(st, 1);
        const char *type = (const char *)sqlite3_column_text(st, 2);
        int64_t obj = sqlite3_column_int64(st, 3);
        const char *attrs = (const char *)sqlite3_column_text(st, 4);
        decl d = {(uint64_t)sqlite3_column_int64(st, 5), (uint64_t)sqlite3_column_int64(st, 6)};
        if (!type || !attrs || ft_hmap_get(&t->recipe_map, (uint64_t)sid) != UINT32_MAX) {
            sqlite3_finalize(st);
            return trace_corrupt_table(t, "recipes", "bad row");
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
        if (trace_row_recipe(t, id, &r, &d, &h) || trace_add_recipe(t, sid, type, obj, attrs, d)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
        t->dg[DG_RECIPES] = ft_hash_mix(t->dg[DG_RECIPES], h);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return trace_corrupt_table(t, "recipes", sqlite3_errmsg(t->db));
    return FT_OK;
}

static int load_chunks(ft_trace *t)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(t->db,
                                "SELECT id, first_seq, n_records, n_calls, codec, raw_bytes, "
                                "checksum FROM chunks ORDER BY id",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) return trace_corrupt_table(t, "chunks", sqlite3_errmsg(t->db));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t v[7];
        for (int c = 0; c < 7; c++)
            v[c] = sqlite3_column_int64(st, c);
        if (v[0] < 1 || v[2] < 1 || v[2] > FT_CHUNK_MAX_RECORDS || v[3] < 0 || v[3] > v[2] ||
            v[4] < 0 || v[4] > UINT32_MAX || v[5] < 0) {
            sqlite3_finalize(st);
            return trace_corrupt_table(t, "chunks", "an index row is out of range");
        }
        if (trace_grow((void **)&t->chunks, &t->chunks_cap, t->n_chunks + 1, sizeof *t->chunks)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
        ft_chunk_info *c = &t->chunks[t->n_chunks];
        *c = (ft_chunk_info){(uint64_t)v[0], v[1],           (uint32_t)v[2], (uint32_t)v[3],
                             (uint32_t)v[4], (uint64_t)v[5], (uint64_t)v[6], 0};
        if (t->n_chunks && c->first_seq <= t->chunks[t->n_chunks - 1].first_seq) {
            sqlite3_finalize(st);
            return trace_corrupt_table(t, "chunks", "chunks are not in seq order");
        }
        uint64_t h;
        if (trace_row_chunk(t, c, &h)) {
            sqlite3_finalize(st);
            return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        }
        t->dg[DG_CHUNKS] = ft_hash_mix(t->dg[DG_CHUNKS], h);
        t->n_calls += c->n_calls;
        t->n_bwd += c->n_records - c->n_calls;
        t->n_chunks++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return trace_corrupt_table(t, "chunks", sqlite3_errmsg(t->db));
    return FT_OK;
}

/* The five loaders in table order (trace_handle_int.h). */
/* meta "fuser_of" (written by ft_trace_w_fuser_of): which fusers continue an earlier one. Absent
 * in traces without op attribute changes, and in every trace written before it existed. */
static int load_fuser_of(ft_trace *t)
{
    const meta_kv *kv = trace_meta_find(t, "fuser_of");
    if (!kv) return FT_OK;
    /* {"SID":OF,...}: integers only, as ft_trace_w_fuser_of writes it */
    const char *p = kv->value;
    int ok = *p++ == '{';
    while (ok && *p != '}') {
        char *end;
        if (*p != '"') break; /* not past the end of a value cut short ("{") */
        p++;
        long long sid = strtoll(p, &end, 10);
        if (end == p || *end != '"' || end[1] != ':') break;
        p = end + 2;
        long long of = strtoll(p, &end, 10);
        if (end == p) break;
        p = end;
        const uint32_t i = ft_hmap_get(&t->fuser_map, (uint64_t)sid);
        const uint32_t j = ft_hmap_get(&t->fuser_map, (uint64_t)of);
        if (i == UINT32_MAX || j == UINT32_MAX || j >= i || t->fusers[i].has_of ||
            t->fusers[i].n_ops != t->fusers[j].n_ops) {
            ok = 0;
            break;
        }
        t->fusers[i].has_of = 1;
        t->fusers[i].of = of;
        if (*p == ',')
            p++;
        else if (*p != '}')
            break;
    }
    ok = ok && *p == '}' && !p[1];
    if (ok) return FT_OK;
    return trace_corrupt_table(t, "meta",
                               "fuser_of does not name earlier fusers of the same op count");
}

/* meta "n_fuser_ends" (format 2): how many of the records that are not calls are fuser ends.
 * Absent: none. */
static int load_n_ends(ft_trace *t)
{
    const meta_kv *kv = trace_meta_find(t, "n_fuser_ends");
    if (!kv) return FT_OK;
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(kv->value, &end, 10);
    if (errno || end == kv->value || *end || kv->value[0] == '-' || v > t->n_bwd)
        return trace_corrupt_table(t, "meta", "n_fuser_ends is not a count of its records");
    t->n_ends = v;
    t->n_bwd -= v;
    return FT_OK;
}

int trace_load_tables(ft_trace *t)
{
    int rc;
    if (!(rc = load_meta(t)) && !(rc = load_oplists(t)) && !(rc = load_fusers(t)) &&
        !(rc = load_fuser_of(t)) && !(rc = load_recipes(t)) && !(rc = load_chunks(t)))
        rc = load_n_ends(t);
    return rc;
}

void trace_parse_header(ft_trace *t)
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
        const meta_kv *kv = trace_meta_find(t, str_fields[i].key);
        *(const char **)((char *)&t->hdr + str_fields[i].off) = kv ? kv->value : NULL;
    }
    if (!t->hdr.env_json) t->hdr.env_json = "{}";
    if (!t->hdr.extra_json) t->hdr.extra_json = "{}";
    const meta_kv *kv = trace_meta_find(t, "rank");
    if (kv && !ft_parse_i64(kv->value, &t->hdr.rank)) t->hdr.has_rank = 1;
    kv = trace_meta_find(t, "world_size");
    if (kv && !ft_parse_i64(kv->value, &t->hdr.world_size)) t->hdr.has_world_size = 1;
}

int trace_pragma_int(ft_trace *t, const char *sql, int64_t *out, int *sqlrc)
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
    if (trace_pragma_int(t, "PRAGMA application_id", &app, &src) ||
        trace_pragma_int(t, "PRAGMA user_version", &ver, &src)) {
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
                          "); this build reads formats 1 to %d",
                          t->path, ver, FT_FORMAT_VERSION);
    if (ver < 1)
        return ft_err_set(&t->err, FT_EVERSION,
                          "%s: unknown trace format %" PRId64 "; this build reads formats 1 to %d",
                          t->path, ver, FT_FORMAT_VERSION);
    return FT_OK;
}

/* ---- the digests -------------------------------------------------------------------------- */
static const char *const dg_table[N_DG] = {"meta", "oplists", "fusers", "recipes", "chunks"};

/* Compare the in-memory digest chains (computed while loading) with meta. */
static int compare_digests(ft_trace *t)
{
    int rc = trace_meta_digest(t, t->meta, t->n_meta, &t->dg[DG_META]);
    if (rc) return ft_err_set(&t->err, rc, "%s: out of memory", t->path);
    for (int i = 0; i < N_DG; i++) {
        const meta_kv *kv = trace_meta_find(t, trace_dg_key[i]);
        char hex[17];
        snprintf(hex, sizeof hex, "%016" PRIx64, t->dg[i]);
        if (!kv) return trace_corrupt_table(t, "meta", "a digest is missing");
        if (strcmp(kv->value, hex)) return trace_corrupt_table(t, dg_table[i], "digest mismatch");
    }
    return FT_OK;
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
    int rc = trace_exec(u, "BEGIN");
    if (!rc) {
        if (!(rc = trace_load_tables(u))) rc = compare_digests(u);
        sqlite3_exec(u->db, "COMMIT", NULL, NULL, NULL);
    }
    if (rc) t->err = u->err;
    u->db = NULL;
    trace_free(u);
    return rc;
}

/* ---- open --------------------------------------------------------------------------------- */
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
                          "%s: ignored the %s beside it: the trace was closed, so fusertrace "
                          "reads it without side files; plain SQLite (sqlite3 %s) would apply "
                          "it to the trace: remove it, or open the trace as "
                          "file:%s?immutable=1",
                          t->path, pr->has_journal ? "-journal" : "-wal", t->path, t->path);
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
    int rc = trace_probe_file(t, pr);
    if (rc) return rc;
    memset(ws, 0, sizeof *ws);
    int use_wal = 0;
    if (!t->main_only && pr->wal_mode && pr->has_wal && pr->wal_bytes) {
        if ((rc = trace_scan_wal(t->path, pr->page_size, ws)))
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
int trace_load_all(ft_trace *t)
{
    int rc = check_identity(t);
    if (rc) return rc;
    /* no memory map: the pages of a mapped file that a read touched count as the process's
     * resident memory until it exits (reading every chunk of a 10^8-call trace would hold as
     * much as the file), and a file cut or overwritten while it is read would raise SIGBUS in
     * the reader, where read() gives SQLite an error it reports; SQLite's small page cache keeps
     * the memory of a read bounded at no cost in speed (bench/RESULTS.md) */
    if ((rc = trace_exec(t, "PRAGMA mmap_size=0"))) return rc;
    /* one read transaction so every table is seen at the same commit */
    if ((rc = trace_exec(t, "BEGIN"))) return rc;
    if (!(rc = trace_load_tables(t))) rc = compare_digests(t);
    sqlite3_exec(t->db, "COMMIT", NULL, NULL, NULL);
    if (rc) return rc;
    trace_parse_header(t);
    return FT_OK;
}

int trace_open_read(ft_trace *t)
{
    probe pr;
    wal_scan ws;
    int rc = open_db_read(t, &pr, &ws);
    if (rc) return rc;
    if ((rc = trace_load_all(t))) {
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

int ft_trace_close(ft_trace *t)
{
    if (!t) return FT_OK;
    int rc = FT_OK;
    trace_finalize_all(t);
    if (t->db && sqlite3_close(t->db) != SQLITE_OK) rc = FT_ESQL;
    t->db = NULL;
    trace_free(t);
    return rc;
}

int ft_trace_wal_read(const ft_trace *t)
{
    return t->wal_read;
}

const ft_err *ft_trace_error(const ft_trace *t)
{
    return &t->err;
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

uint64_t ft_trace_n_fuser_ends(const ft_trace *t)
{
    return t->n_ends;
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
    const meta_kv *kv = trace_meta_find(t, key);
    return kv ? kv->value : NULL;
}

/* ---- sizes -------------------------------------------------------------------------------- */
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
    if (rc != SQLITE_OK) return trace_sql_fail(t, rc, "reading chunk sizes");
    return FT_OK;
}
