/*
 * trace_write.c - writing a trace: ft_trace_open (reading is trace.c's, creating is here: DDL
 * from trace.sql, WAL), the row writers the recorder uses (header, fusers, recipes, chunks),
 * close (small traces rewritten with 512-byte pages), seal (finish a trace whose recording was
 * killed) and rewriting the digests.
 *
 * Writing: declarations are written in the transaction of the next chunk (one savepoint each,
 * so a refused declaration changes nothing), and the digests once per commit; after each commit
 * a passive checkpoint copies it into the main file. Close commits state 'complete', folds the
 * WAL in (checkpoint TRUNCATE), closes the connection and only then, when SQLite removed the
 * -wal, switches the header's two file-format bytes to rollback mode in one 2-byte write: a
 * kill at any moment leaves either a WAL-mode trace (read as above) or a finished one, and never
 * a hot journal (SQLite's own switch writes page 1 through a rollback journal).
 */
#define _GNU_SOURCE /* O_TMPFILE */
#include "ft_limits.h"
#include "trace_handle_int.h"
#include "trace_sql.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FT_CREATED_BY "fusertrace 0.1.0"

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

/* ---- statements --------------------------------------------------------------------------- */
/* The cached statement `which`, reset and unbound, or NULL (error set). */
static sqlite3_stmt *stmt(ft_trace *t, int which)
{
    if (!t->st[which]) {
        int rc = sqlite3_prepare_v2(t->db, stmt_sql[which], -1, &t->st[which], NULL);
        if (rc != SQLITE_OK) {
            trace_sql_fail(t, rc, "preparing a statement");
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
        return trace_sql_fail(t, rc, "writing meta");
    }
    return FT_OK;
}

static int put_digest_db(ft_trace *t, int which, uint64_t value)
{
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, value);
    return meta_put_db(t, trace_dg_key[which], hex);
}

static int write_digests_all(ft_trace *t)
{
    int rc = trace_meta_digest(t, t->meta, t->n_meta, &t->dg[DG_META]);
    if (rc) return ft_err_set(&t->err, rc, "%s: out of memory", t->path);
    for (int i = 0; i < N_DG; i++)
        if ((rc = put_digest_db(t, i, t->dg[i]))) return rc;
    return FT_OK;
}

/* The writer's connection, with URI names on (so that VACUUM INTO can name a memdb database)
 * unless the path itself would read as one. */
static int open_rw(const char *path, sqlite3 **db)
{
    int uri = strncmp(path, "file:", 5) ? SQLITE_OPEN_URI : 0;
    return sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE | uri, NULL);
}

/* ---- create ------------------------------------------------------------------------------- */
static int create(ft_trace *t)
{
    /* a side file without its trace was left by a killed process: SQLite would apply a stale
     * -wal or -journal to the new file of the same name */
    static const char *const side[] = {"-wal", "-journal", "-shm"};
    struct stat sb;
    if (!stat(t->path, &sb))
        return ft_err_set(&t->err, FT_EINVAL, "%s: cannot create: it exists", t->path);
    for (size_t i = 0; i < FT_ARRAY_LEN(side); i++)
        if (trace_side_stat(t->path, side[i], NULL))
            return ft_err_set(&t->err, FT_EINVAL,
                              "%s: cannot create: a stale %s%s (left by a killed process) is "
                              "beside it; remove it first",
                              t->path, t->path, side[i]);
    int fd = open(t->path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return ft_err_set(&t->err, errno == EEXIST ? FT_EINVAL : FT_EIO, "%s: cannot create: %s",
                          t->path, strerror(errno));
    close(fd);
    int rc = open_rw(t->path, &t->db);
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
    if (rc != SQLITE_OK) return trace_sql_fail(t, rc, "cannot switch to WAL mode");
    if ((rc = trace_exec(t, "PRAGMA synchronous=NORMAL"))) return rc;
    if ((rc = trace_exec(t, "BEGIN"))) return rc;
    if ((rc = trace_exec(t, ft_trace_sql))) goto fail;
    int64_t app = 0, ver = 0;
    int src;
    if (trace_pragma_int(t, "PRAGMA application_id", &app, &src) ||
        trace_pragma_int(t, "PRAGMA user_version", &ver, &src) || app != FT_APPLICATION_ID ||
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
        if (trace_meta_set(t, keys[i], vals[i])) {
            rc = ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
            goto fail;
        }
    }
    if ((rc = write_digests_all(t))) goto fail;
    if ((rc = trace_exec(t, "COMMIT"))) goto fail;
    trace_parse_header(t);
    return FT_OK;
fail:
    sqlite3_exec(t->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* ---- open --------------------------------------------------------------------------------- */
void ft_trace_remove(const char *path)
{
    size_t n = strlen(path) + sizeof "-journal";
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
    int rc = mode == FT_OPEN_READ ? trace_open_read(t) : create(t);
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
    return rc == SQLITE_OK ? FT_OK : trace_sql_fail(t, rc, what);
}

/* Open the write transaction if none is, then a savepoint for one change. */
static int change_begin(ft_trace *t)
{
    int rc;
    if (!t->in_txn) {
        if ((rc = trace_exec(t, "BEGIN"))) return rc;
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
        if ((rc = trace_meta_digest(t, t->meta, t->n_meta, &t->dg[DG_META])))
            return break_handle(t, ft_err_set(&t->err, rc, "%s: out of memory", t->path));
    }
    for (int i = 0; i < N_DG; i++)
        if ((t->dirty & (1u << i)) && (rc = put_digest_db(t, i, t->dg[i])))
            return break_handle(t, rc);
    rc = sqlite3_exec(t->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK) return break_handle(t, trace_sql_fail(t, rc, what));
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
        if (kv[i].value && trace_meta_set(t, kv[i].key, kv[i].value))
            return break_handle(t, ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path));
    t->dirty |= 1u << DG_META;
    trace_parse_header(t);
    return FT_OK;
}

/* meta "fuser_of" as canonical JSON text: {"stream id": of, ...} in declaration order of the
 * continuing fusers (keys sorted is not needed: the digest covers the text as written). */
static char *fuser_of_text(const ft_trace *t)
{
    ft_buf b = {0};
    int rc = ft_buf_printf(&b, "{");
    int first = 1;
    for (size_t i = 0; i < t->n_fusers && !rc; i++) {
        if (!t->fusers[i].has_of) continue;
        rc = ft_buf_printf(&b, "%s\"%" PRId64 "\":%" PRId64, first ? "" : ",", t->fusers[i].id,
                           t->fusers[i].of);
        first = 0;
    }
    if (!rc) rc = ft_buf_printf(&b, "}");
    char *out = rc ? NULL : ft_strndup((const char *)b.data, b.len);
    ft_buf_free(&b);
    return out;
}

int ft_trace_w_fuser_of(ft_trace *t, int64_t stream_id, int64_t of)
{
    int rc = need_create(t);
    if (rc) return rc;
    const uint32_t i = ft_hmap_get(&t->fuser_map, (uint64_t)stream_id);
    const uint32_t j = ft_hmap_get(&t->fuser_map, (uint64_t)of);
    if (i == UINT32_MAX || j == UINT32_MAX || j >= i)
        return ft_err_set(&t->err, FT_EINVAL,
                          "fuser %" PRId64 ": field 'of': %" PRId64 " is not a fuser declared "
                          "before it",
                          stream_id, of);
    if (t->fusers[i].has_of)
        return ft_err_set(&t->err, FT_EINVAL, "fuser %" PRId64 ": already continues fuser %" PRId64,
                          stream_id, t->fusers[i].of);
    if (t->fusers[i].n_ops != t->fusers[j].n_ops)
        return ft_err_set(&t->err, FT_EINVAL,
                          "fuser %" PRId64 ": field 'of': has %u ops but fuser %" PRId64
                          " has %u (an instance keeps its ops; only their attributes change)",
                          stream_id, t->fusers[i].n_ops, of, t->fusers[j].n_ops);
    t->fusers[i].has_of = 1;
    t->fusers[i].of = of;
    char *text = fuser_of_text(t);
    if (!text) {
        t->fusers[i].has_of = 0;
        return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
    }
    if ((rc = change_begin(t))) goto out;
    if ((rc = meta_put_db(t, "fuser_of", text))) {
        change_undo(t);
        goto out;
    }
    if ((rc = change_end(t))) {
        rc = break_handle(t, rc);
        goto out;
    }
    if (trace_meta_set(t, "fuser_of", text)) {
        rc = break_handle(t, ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path));
        goto out;
    }
    t->dirty |= 1u << DG_META;
out:
    if (rc) t->fusers[i].has_of = 0;
    ft_free(text);
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
            rc = trace_sql_fail(t, rc, "writing oplists");
            goto fail;
        }
        oplist o = {olid, hash, n_ops, (char *)ops_json};
        if (trace_row_oplist(t, &o, &h)) goto fail_nomem;
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
        rc = trace_sql_fail(t, rc, "writing fusers");
        goto fail;
    }
    ft_fuser_def f = {stream_id, label, ops_json, n_ops, 0, 0};
    if (trace_row_fuser(t, fid, &f, olid, &d, &h)) goto fail_nomem;
    dg_fu = ft_hash_mix(dg_fu, h);
    if ((rc = change_end(t))) return break_handle(t, rc);
    /* the rows are in the transaction: memory must follow, or the handle cannot go on */
    if (new_ol && trace_add_oplist(t, olid, hash, n_ops, ops_json))
        return break_handle(t, ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path));
    if (new_ol) oi = (uint32_t)(t->n_ol - 1);
    if (trace_add_fuser(t, stream_id, label, oi, d))
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
    uint32_t j = ft_hmap_get(&t->pair_map, trace_pair_key(obj, attrs_json));
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
        rc = trace_sql_fail(t, rc, "writing recipes");
        goto fail;
    }
    ft_recipe_def r = {stream_id, type, obj, attrs_json};
    if (trace_row_recipe(t, rid, &r, &d, &h)) {
        rc = ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
        goto fail;
    }
    if ((rc = change_end(t))) return break_handle(t, rc);
    if (trace_add_recipe(t, stream_id, type, obj, attrs_json, d))
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
    if (trace_grow((void **)&t->chunks, &t->chunks_cap, t->n_chunks + 1, sizeof *t->chunks))
        return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
    info->id = t->n_chunks + 1;
    uint64_t h;
    if (trace_row_chunk(t, info, &h))
        return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
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
        return break_handle(t, trace_sql_fail(t, rc, what));
    }
    if (info->n_ends) { /* the trace's fuser ends, in the chunk's transaction */
        char ends[24];
        snprintf(ends, sizeof ends, "%" PRIu64, t->n_ends + info->n_ends);
        if ((rc = meta_put_db(t, "n_fuser_ends", ends))) return break_handle(t, rc);
        if (trace_meta_set(t, "n_fuser_ends", ends))
            return break_handle(t, ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path));
        t->dirty |= 1u << DG_META;
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
    t->n_bwd += info->n_records - info->n_calls - info->n_ends;
    t->n_ends += info->n_ends;
    /* copy the commit into the main file, so that the file alone (a copy) holds it; passive:
     * never waits for a reader, and a reader's snapshot only defers it to the next commit */
    sqlite3_wal_checkpoint_v2(t->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return FT_OK;
}

/* ---- close: compaction and the switch to rollback mode ------------------------------------ */
/* Small traces small: a finished trace of at most FT_SMALL_TRACE_BYTES is copied with 512-byte
 * pages (VACUUM INTO an in-memory database of SQLite's memdb VFS; the copy is in rollback mode),
 * and once the recording's connection is closed compact_finish writes the copy into an unnamed
 * file beside PATH (O_TMPFILE), syncs it and only then gives it a name (PATH.small-PID) that it
 * renames over PATH at once: a kill leaves no partial copy, at most (between the link and the
 * rename) a complete one, which the seal that finishes the trace removes (sweep_copies). The
 * fixed cost of a trace is a page per table and index, so 4096-byte
 * pages made a 240-call capture 40 KB; 512-byte pages make it about 10. Larger traces keep
 * 4096-byte pages (their chunk blobs read faster). A failure or a kill leaves the original trace
 * as it was. */
#define FT_SMALL_TRACE_BYTES (1u << 20)

typedef struct small_copy {
    unsigned char *data; /* [n] the compacted database (sqlite3_malloc'd), NULL when none */
    sqlite3_int64 n;
} small_copy;

static void compact_copy(ft_trace *t, small_copy *sc)
{
    sc->data = NULL;
    sc->n = 0;
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
    if (pages <= 0 || size <= 512 || pages * size > FT_SMALL_TRACE_BYTES) return;
    if (!strncmp(t->path, "file:", 5)) return; /* no URI names on this connection */
    char uri[96];
    snprintf(uri, sizeof uri, "file:/fusertrace-small-%ld-%p?vfs=memdb", (long)getpid(), (void *)t);
    sqlite3 *m = NULL; /* holds the memdb database open: VACUUM INTO fills it */
    if (sqlite3_open_v2(uri, &m, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
                        NULL) == SQLITE_OK) {
        char *sql = sqlite3_mprintf("PRAGMA page_size=512; VACUUM INTO %Q", uri);
        int rc = sql ? sqlite3_exec(t->db, sql, NULL, NULL, NULL) : SQLITE_NOMEM;
        sqlite3_free(sql);
        /* read on a connection opened after the copy was written: m's own pager saw the
         * database empty, with the default page size */
        sqlite3 *r = NULL;
        if (rc == SQLITE_OK &&
            sqlite3_open_v2(uri, &r, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) == SQLITE_OK)
            sc->data = sqlite3_serialize(r, "main", &sc->n, 0);
        sqlite3_close(r);
    }
    sqlite3_close(m); /* the trace stays as it is, with its larger pages, when there is no copy */
    if (sc->data && sc->n <= 0) {
        sqlite3_free(sc->data);
        sc->data = NULL;
    }
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The copy in place of the trace: written unnamed, synced, named, renamed, the folder synced.
 * 1 when it replaced it. Frees the copy. */
static int compact_finish(const char *path, small_copy *sc)
{
    char dir[4200], named[4200];
    ft_strlcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    const char *d = slash ? (dir[0] ? dir : "/") : ".";
    int ok =
        (size_t)snprintf(named, sizeof named, "%s.small-%ld", path, (long)getpid()) < sizeof named;
    int fd = ok ? open(d, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644) : -1, by_name = 0;
    if (ok && fd < 0) { /* a file system without O_TMPFILE: named from the start */
        unlink(named);  /* a copy a killed close of this pid left */
        fd = open(named, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        by_name = 1;
    }
    ok = fd >= 0 && !write_all(fd, sc->data, (size_t)sc->n) && !fsync(fd);
    if (ok && !by_name) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        unlink(named);
        ok = !linkat(AT_FDCWD, proc, AT_FDCWD, named, AT_SYMLINK_FOLLOW);
    }
    if (fd >= 0) close(fd);
    sqlite3_free(sc->data);
    sc->data = NULL;
    if (ok && !rename(named, path)) {
        int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd); /* durability of the name; the data is synced already */
            close(dfd);
        }
        return 1;
    }
    if (ok || by_name) unlink(named);
    return 0;
}

/* Fold the WAL into the main file, close the connection and, when SQLite removed the -wal (no
 * other connection had the file open), switch the header to rollback mode with one 2-byte
 * write (file-format bytes 18 and 19, 2 -> 1), so that no journal is ever involved. */
static int fold_wal_and_close(ft_trace *t)
{
    int n_log = 0, n_ckpt = 0;
    int rc = sqlite3_wal_checkpoint_v2(t->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &n_log, &n_ckpt);
    int folded = rc == SQLITE_OK;
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) return trace_sql_fail(t, rc, "folding the WAL in");
    trace_finalize_all(t);
    small_copy sc = {NULL, 0};
    if (folded) compact_copy(t, &sc);
    rc = sqlite3_close(t->db);
    t->db = NULL;
    if (rc != SQLITE_OK) {
        sqlite3_free(sc.data);
        return ft_err_set(&t->err, ft_sql_status(rc), "%s: closing: %s", t->path,
                          sqlite3_errstr(rc));
    }
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", t->path);
    struct stat sb;
    if (!folded || !stat(wal, &sb)) { /* another connection: stays in WAL mode */
        sqlite3_free(sc.data);
        return FT_OK;
    }
    char shm[4200];
    snprintf(shm, sizeof shm, "%s-shm", t->path);
    if (sc.data && compact_finish(t->path, &sc)) { /* the copy is in rollback mode already */
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
    if (trace_meta_set(t, "state", state))
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

/* ---- seal and redigest -------------------------------------------------------------------- */
/* The copies a close killed between naming its compacted copy and renaming it left beside path:
 * exactly PATH.small-PID (PID plain digits) of a process that is gone. At worst (a PID of
 * another namespace) a live close loses its copy, and keeps its trace uncompacted. */
static void sweep_copies(const char *path)
{
    char dir[4200];
    ft_strlcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash) *slash = '\0';
    DIR *d = opendir(slash ? (dir[0] ? dir : "/") : ".");
    if (!d) return;
    size_t nb = strlen(base);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *s = e->d_name;
        if (strncmp(s, base, nb) || strncmp(s + nb, ".small-", 7)) continue;
        s += nb + 7;
        long pid = 0;
        int digits = 0;
        for (; *s >= '0' && *s <= '9' && digits < 10; s++, digits++)
            pid = pid * 10 + (*s - '0');
        if (*s || !digits || e->d_name[nb + 7] == '0' || pid > INT_MAX || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char full[8400];
        snprintf(full, sizeof full, "%s/%s", slash ? (dir[0] ? dir : "") : ".", e->d_name);
        unlink(full);
    }
    closedir(d);
}

/* What the main file alone says, before anything could apply a side file to it: read immutable
 * (no lock, nothing created, no -wal or -journal read). *closed: its state is complete or
 * recovered. A WAL-mode file whose main file alone does not read (a checkpoint the recorder
 * could not finish) is not closed: its -wal has the rest. Anything else that does not read (not
 * a trace, a newer format, damage) is refused here, before a write could touch it. */
static int seal_look(const char *path, probe *pr, int *closed, ft_seal_info *out, ft_err *err)
{
    *closed = 0;
    ft_trace *u = ft_calloc(1, sizeof *u);
    if (!u || !(u->path = ft_strdup(path))) {
        ft_free(u);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
    }
    u->main_only = 1;
    int rc = trace_probe_file(u, pr);
    if (!rc) rc = trace_open_read(u);
    if (rc == FT_ECORRUPT && pr->wal_mode && u->db) {
        rc = FT_OK; /* read with its -wal below */
    } else if (!rc) {
        const char *state = ft_trace_meta(u, "state");
        *closed = state && (!strcmp(state, "complete") || !strcmp(state, "recovered"));
        out->n_calls = u->n_calls;
        out->n_backwards = u->n_bwd;
        out->n_chunks = u->n_chunks;
    }
    if (rc && err) *err = u->err;
    trace_free(u);
    return rc;
}

/* A closed trace in WAL mode (a close killed after its last commit reached the main file,
 * before the header switch): its -wal may only hold what the main file has already, and a
 * -journal has nothing to do with it. */
static int seal_closed_wal(const char *path, const probe *pr, ft_err *err)
{
    if (pr->has_journal)
        return ft_err_set(err, FT_EINVAL,
                          "%s: closed, but a %s-journal is beside it, which this trace never "
                          "writes (another database's?): seal will not let SQLite roll it into "
                          "the trace; move it away and run seal again",
                          path, path);
    if (!pr->has_wal || !pr->wal_bytes) return FT_OK;
    int r = trace_wal_redundant(path, pr->page_size);
    if (r < 0) return ft_err_set(err, r, "%s: out of memory", path);
    if (!r)
        return ft_err_set(err, FT_EINVAL,
                          "%s: closed, but the %s-wal beside it holds pages the trace does not "
                          "(a stale copy, or another database's): seal will not apply it; the "
                          "trace reads without it ('fusertrace verify'); move it away and run "
                          "seal again",
                          path, path);
    return FT_OK;
}

int ft_trace_seal(const char *path, int force, ft_seal_info *out, ft_err *err)
{
    memset(out, 0, sizeof *out);
    probe pr;
    int closed;
    int rc = seal_look(path, &pr, &closed, out, err);
    if (rc) return rc;
    if (closed && !pr.wal_mode) { /* finished: nothing to do, and nothing beside it is read */
        out->was_closed = 1;
        out->ignored_wal = pr.has_wal && pr.wal_bytes;
        out->ignored_journal = pr.has_journal;
        return FT_OK;
    }
    if (closed && (rc = seal_closed_wal(path, &pr, err))) return rc;
    sweep_copies(path);
    ft_trace *t = ft_calloc(1, sizeof *t);
    if (!t || !(t->path = ft_strdup(path))) {
        ft_free(t);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", path);
    }
    wal_scan ws = {0};
    if (pr.wal_mode && pr.has_wal && pr.wal_bytes) {
        if ((rc = trace_scan_wal(path, pr.page_size, &ws)))
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
        rc = open_rw(path, &t->db);
        if (rc != SQLITE_OK)
            rc = ft_err_set(&t->err, FT_EIO, "%s: cannot open for writing: %s", path,
                            t->db ? sqlite3_errmsg(t->db) : sqlite3_errstr(rc));
    }
    if (!rc) {
        sqlite3_busy_timeout(t->db, 5000);
        /* nobody else may have it open: a recorder still writing would race with the seal */
        if (!(rc = trace_exec(t, "PRAGMA locking_mode=EXCLUSIVE")) &&
            !(rc = trace_exec(t, "BEGIN EXCLUSIVE")))
            rc = trace_exec(t, "COMMIT");
        if (rc == FT_EIO)
            rc = ft_err_set(&t->err, FT_ESTATE,
                            "%s: another process has it open (a recorder still writing?); seal "
                            "it once the recording stopped",
                            path);
    }
    if (!rc && !(rc = trace_load_all(t))) {
        const char *state = ft_trace_meta(t, "state");
        out->was_closed = state && (!strcmp(state, "complete") || !strcmp(state, "recovered"));
        out->n_calls = t->n_calls;
        out->n_backwards = t->n_bwd;
        out->n_chunks = t->n_chunks;
        t->mode = FT_OPEN_CREATE;
        rc = finish_as(t, out->was_closed ? state : "recovered");
    }
    if (rc && err) *err = t->err;
    trace_free(t);
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
    else if (!(rc = trace_exec(u, "BEGIN"))) {
        if (!(rc = trace_load_tables(u)) && !(rc = write_digests_all(u)))
            rc = trace_exec(u, "COMMIT");
        if (rc) sqlite3_exec(u->db, "ROLLBACK", NULL, NULL, NULL);
    }
    if (rc && err) *err = u->err;
    trace_free(u);
    return rc;
}
