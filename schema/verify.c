/*
 * verify.c - the full check of a trace: SQLite's own structure check, the schema against
 * trace.sql, the small-table digests, and every chunk decoded with its split sizes (checksums,
 * lengths, references), seq order across chunks and backward -> call references.
 */
#include "trace_int.h"
#include "trace_sql.h"

#include <sqlite3.h>
#include <string.h>

/* Concatenated "type name sql" of every schema object, ordered by name. */
static int schema_text(sqlite3 *db, ft_buf *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT type, name, coalesce(sql, '') FROM sqlite_master "
                                "ORDER BY name",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        for (int c = 0; c < 3; c++) {
            const char *s = (const char *)sqlite3_column_text(st, c);
            if (ft_buf_append(out, s ? s : "", s ? strlen(s) + 1 : 1)) {
                sqlite3_finalize(st);
                return SQLITE_NOMEM;
            }
        }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int check_schema(ft_trace *t, ft_err *err)
{
    sqlite3 *ref = NULL;
    ft_buf a = {0}, b = {0};
    int rc = sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_exec(ref, ft_trace_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK) rc = schema_text(ref, &a);
    if (rc != SQLITE_OK) {
        rc = ft_err_set(err, FT_ESQL, "building the reference schema: %s",
                        ref ? sqlite3_errmsg(ref) : sqlite3_errstr(rc));
        goto done;
    }
    rc = schema_text(ft_trace_db(t), &b);
    if (rc != SQLITE_OK) {
        rc = ft_err_set(err, FT_ECORRUPT, "%s: cannot read the schema: %s", ft_trace_path(t),
                        sqlite3_errmsg(ft_trace_db(t)));
        goto done;
    }
    rc = FT_OK;
    if (a.len != b.len || memcmp(a.data, b.data, a.len))
        rc = ft_err_set(err, FT_ECORRUPT, "%s: schema differs from format %d's trace.sql",
                        ft_trace_path(t), FT_FORMAT_VERSION);
done:
    sqlite3_close(ref);
    ft_buf_free(&a);
    ft_buf_free(&b);
    return rc;
}

static int check_sqlite(ft_trace *t, ft_err *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(ft_trace_db(t), "PRAGMA quick_check", -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    int ok = rc == SQLITE_ROW;
    const char *msg = ok ? (const char *)sqlite3_column_text(st, 0) : NULL;
    if (ok && msg && !strcmp(msg, "ok")) {
        sqlite3_finalize(st);
        return FT_OK;
    }
    ft_err_set(err, FT_ECORRUPT, "%s: SQLite structure check failed: %s", ft_trace_path(t),
               msg ? msg : sqlite3_errmsg(ft_trace_db(t)));
    sqlite3_finalize(st);
    return FT_ECORRUPT;
}

/* Is v among the sorted call seqs? */
static int has_seq(const int64_t *s, size_t n, int64_t v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid] == v) return 1;
        if (s[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

int ft_trace_verify(ft_trace *t, ft_err *err)
{
    int rc = check_sqlite(t, err);
    if (!rc) rc = check_schema(t, err);
    if (!rc && (rc = ft_trace_check_digests(t))) *err = *ft_trace_error(t);
    if (rc) return rc;
    ft_reader *r = NULL;
    int64_t *calls = NULL;
    size_t n_calls = 0, cap = 0;
    if ((rc = ft_reader_open(t, FT_READ_SPLITS, &r))) {
        *err = *ft_trace_error(t);
        return rc;
    }
    int have_prev = 0;
    int64_t prev = 0;
    for (;;) {
        const ft_batch *b;
        if ((rc = ft_reader_next(r, &b))) {
            *err = *ft_trace_error(t);
            break;
        }
        if (!b) break;
        if (have_prev && b->seq[0] <= prev) {
            rc = ft_err_set(err, FT_ECORRUPT, "%s: chunk %llu: seq %lld does not follow %lld",
                            ft_trace_path(t), (unsigned long long)b->chunk_id, (long long)b->seq[0],
                            (long long)prev);
            break;
        }
        prev = b->seq[b->n - 1];
        have_prev = 1;
        for (uint32_t i = 0; i < b->n && !rc; i++) {
            if (b->kind[i] == FT_REC_CALL) {
                if (n_calls == cap) {
                    size_t nc = cap ? cap * 2 : 4096;
                    int64_t *q = ft_realloc(calls, nc * sizeof *q);
                    if (!q) {
                        rc = ft_err_set(err, FT_ENOMEM, "out of memory");
                        break;
                    }
                    calls = q;
                    cap = nc;
                }
                calls[n_calls++] = b->seq[i];
            } else if (!has_seq(calls, n_calls, b->bwd_call[i])) {
                rc = ft_err_set(err, FT_ECORRUPT,
                                "%s: chunk %llu: backward seq %lld refers to seq %lld, which is "
                                "not an earlier call",
                                ft_trace_path(t), (unsigned long long)b->chunk_id,
                                (long long)b->seq[i], (long long)b->bwd_call[i]);
            }
        }
        if (rc) break;
    }
    ft_free(calls);
    ft_reader_close(r);
    return rc;
}
