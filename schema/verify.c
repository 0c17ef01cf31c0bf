/*
 * verify.c - the full check of a trace: SQLite's own structure check, the schema against
 * trace.sql, the small-table digests (the open checked them against ft_limits.h), and every
 * chunk decoded with its split sizes (checksums, lengths, references), seq order within and
 * across chunks and backward -> call references.
 *
 * Memory is bounded by two chunks, whatever the trace's length: a backward event's call is
 * looked up exactly among the calls of its own chunk and of the one before (where the recorder
 * puts nearly all of them); one further back is checked against that chunk's seq range (the
 * chunk index gives first seqs, the pass records each chunk's last seq: 8 bytes per chunk).
 */
#include "ft_hmap.h"
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

int ft_trace_check_schema(ft_trace *t, ft_err *err)
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

long ft_utf8_bad_at(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    for (long i = 0; p[i];) {
        unsigned c = p[i], n = c < 0x80             ? 0
                               : (c & 0xe0) == 0xc0 ? 1
                               : (c & 0xf0) == 0xe0 ? 2
                               : (c & 0xf8) == 0xf0 ? 3
                                                    : 9;
        if (n == 9 || (n == 1 && c < 0xc2)) return i;
        uint32_t cp = n ? c & (0x3fu >> n) : c;
        for (unsigned k = 1; k <= n; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return i;
            cp = cp << 6 | (p[i + k] & 0x3fu);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += (long)n + 1;
    }
    return -1;
}

/* The small tables hold only what the capture stream can carry (the open checked the sizes). */
static int check_tables(ft_trace *t, ft_err *err)
{
    const char *p = ft_trace_path(t);
    const ft_header *h = ft_trace_header(t);
    const char *hs[] = {h->te_version, h->torch_version, h->host, h->started_at};
    for (size_t i = 0; i < FT_ARRAY_LEN(hs); i++)
        if (hs[i] && ft_utf8_bad_at(hs[i]) >= 0)
            return ft_err_set(err, FT_ECORRUPT, "%s: table meta: a header field is not UTF-8", p);
    if ((h->has_rank && (h->rank < 0 || h->rank > INT32_MAX)) ||
        (h->has_world_size && (h->world_size < 1 || h->world_size > INT32_MAX)) ||
        (h->has_rank && h->has_world_size && h->rank >= h->world_size))
        return ft_err_set(err, FT_ECORRUPT, "%s: table meta: rank or world_size out of range", p);
    for (uint32_t i = 0; i < ft_trace_n_fusers(t); i++) {
        const ft_fuser_def *f = ft_trace_fuser(t, i);
        if (f->id < 0 || (f->label && ft_utf8_bad_at(f->label) >= 0))
            return ft_err_set(err, FT_ECORRUPT,
                              "%s: table fusers: row %u: a negative id or a label not UTF-8", p,
                              i + 1);
    }
    for (uint32_t i = 0; i < ft_trace_n_recipes(t); i++) {
        const ft_recipe_def *r = ft_trace_recipe(t, i);
        if (r->id < 0 || !r->type[0] || ft_utf8_bad_at(r->type) >= 0)
            return ft_err_set(err, FT_ECORRUPT,
                              "%s: table recipes: row %u: a negative id or a type empty or not "
                              "UTF-8",
                              p, i + 1);
    }
    /* declarations in stream order: fusers and recipes each in increasing decl_no, the two
     * merging into 0, 1, 2, ... with decl_pos never decreasing and at most the record count */
    uint32_t nf = ft_trace_n_fusers(t), nr = ft_trace_n_recipes(t), fi = 0, ri = 0;
    uint64_t n_rec = ft_trace_n_calls(t) + ft_trace_n_backwards(t) + ft_trace_n_fuser_ends(t),
             last_pos = 0;
    for (uint64_t no = 0; fi < nf || ri < nr; no++) {
        uint64_t fpos = 0, fno = UINT64_MAX, rpos = 0, rno = UINT64_MAX;
        if (fi < nf) ft_trace_fuser_decl(t, fi, &fpos, &fno);
        if (ri < nr) ft_trace_recipe_decl(t, ri, &rpos, &rno);
        int fuser = fno == no;
        uint64_t pos = fuser ? fpos : rpos;
        if ((!fuser && rno != no) || pos < last_pos || pos > n_rec)
            return ft_err_set(
                err, FT_ECORRUPT, "%s: table %s: row %u: declaration %llu is out of stream order",
                p, fuser ? "fusers" : "recipes", fuser ? fi + 1 : ri + 1, (unsigned long long)no);
        last_pos = pos;
        fuser ? fi++ : ri++;
    }
    return FT_OK;
}

/* The record at stream position k uses only fusers and recipes declared before it. */
static int declared_before(ft_trace *t, const ft_batch *b, uint32_t i, uint64_t k)
{
    uint64_t pos, no;
    ft_trace_fuser_decl(t, b->fuser[i], &pos, &no);
    if (pos > k) return 0;
    if (b->recipe[i] >= 0) {
        ft_trace_recipe_decl(t, (uint32_t)b->recipe[i], &pos, &no);
        if (pos > k) return 0;
    }
    return 1;
}

/* Record i of a chunk holds only values the capture stream can carry. */
static const char *bad_value(const ft_batch *b, uint32_t i)
{
    uint32_t fl = b->flags[i];
    if (b->seq[i] < 0) return "seq";
    if ((fl & FT_CF_HAS_NS) && b->ns[i] < 0) return "ns";
    if (b->kind[i] == FT_REC_BACKWARD) return b->bwd_call[i] < 0 ? "call" : NULL;
    if (b->kind[i] == FT_REC_END) return NULL;
    if (b->device[i] < 0) return "device";
    if ((fl & FT_CF_HAS_STEP) && b->step[i] < 0) return "step";
    if ((fl & FT_CF_HAS_MB) && b->mb[i] < 0) return "mb";
    if ((fl & FT_CF_HAS_FUSE_NS) && b->fuse_ns[i] < 0) return "fuse_ns";
    return NULL;
}

/* Which fusers are alive as verify walks the records: a row's instance until an end names one of
 * its declarations, a compact instance from the call that declares it until its end. */
typedef struct lifetimes {
    uint32_t *root; /* [n_fusers] the row of the instance's first declaration (capture "of") */
    uint8_t *ended; /* [n_fusers] by root */
    ft_hmap live;   /* stream ids of the compact instances alive */
    int have_new;
    int64_t last_new; /* compact instances are declared with increasing stream ids */
} lifetimes;

static int lifetimes_init(ft_trace *t, lifetimes *L)
{
    const uint32_t nf = ft_trace_n_fusers(t);
    memset(L, 0, sizeof *L);
    L->root = ft_malloc((nf ? nf : 1) * sizeof *L->root);
    L->ended = ft_calloc(nf ? nf : 1, 1);
    if (!L->root || !L->ended) return FT_ENOMEM;
    for (uint32_t i = 0; i < nf; i++) {
        const ft_fuser_def *f = ft_trace_fuser(t, i);
        const uint32_t j = f->has_of ? ft_trace_fuser_index(t, f->of) : UINT32_MAX;
        L->root[i] = j < i ? L->root[j] : i; /* the loader checked `of` names an earlier row */
    }
    return FT_OK;
}

static void lifetimes_free(lifetimes *L)
{
    ft_free(L->root);
    ft_free(L->ended);
    ft_hmap_free(&L->live);
}

/* Record i (a call or an end) names a fuser that is alive; an end then ends it. NULL, or what
 * is wrong. */
static const char *check_alive(ft_trace *t, lifetimes *L, const ft_batch *b, uint32_t i, int *nomem)
{
    const uint32_t fl = b->flags[i];
    const int64_t sid = b->sid[i];
    if (fl & FT_CF_NEW_FUSER) {
        if (ft_trace_fuser_index(t, sid) != UINT32_MAX || (L->have_new && sid <= L->last_new))
            return "declares a compact instance whose id is declared already";
        L->have_new = 1;
        L->last_new = sid;
        if (ft_hmap_put(&L->live, (uint64_t)sid, 1)) *nomem = 1;
    } else if (fl & FT_CF_INSTANCE) {
        if (ft_hmap_get(&L->live, (uint64_t)sid) == UINT32_MAX)
            return "names a compact instance that is not alive (never declared, or ended)";
    } else if (L->ended[L->root[b->fuser[i]]]) {
        return "names a fuser that has ended";
    }
    if (b->kind[i] == FT_REC_END) {
        if (fl & FT_CF_INSTANCE)
            ft_hmap_del(&L->live, (uint64_t)sid);
        else
            L->ended[L->root[b->fuser[i]]] = 1;
    }
    return NULL;
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

/* The call seqs of one chunk (sorted, as seqs increase). */
typedef struct call_set {
    int64_t *seq;
    size_t n, cap;
    int64_t first; /* first record seq of the chunk */
    int valid;
} call_set;

static int call_set_add(call_set *c, int64_t v)
{
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 4096;
        int64_t *q = ft_realloc(c->seq, nc * sizeof *q);
        if (!q) return FT_ENOMEM;
        c->seq = q;
        c->cap = nc;
    }
    c->seq[c->n++] = v;
    return FT_OK;
}

/* Position of the chunk whose [first seq, last seq] holds v among chunks [0, n), or -1. */
static int64_t chunk_holding(ft_trace *t, const int64_t *last, uint64_t n, int64_t v)
{
    uint64_t lo = 0, hi = n; /* last chunk with first_seq <= v */
    if (!n || ft_trace_chunk(t, 0)->first_seq > v) return -1;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (ft_trace_chunk(t, mid)->first_seq <= v)
            lo = mid;
        else
            hi = mid;
    }
    return v <= last[lo] ? (int64_t)lo : -1;
}

int ft_trace_verify(ft_trace *t, ft_err *err)
{
    ft_err local;
    if (!err) err = &local;
    int rc = check_sqlite(t, err);
    if (!rc) rc = ft_trace_check_schema(t, err);
    if (!rc && (rc = ft_trace_check_digests(t))) *err = *ft_trace_error(t);
    if (!rc) rc = check_tables(t, err);
    if (rc) return rc;
    ft_reader *r = NULL;
    uint64_t n_chunks = ft_trace_n_chunks(t), pos = 0;
    int64_t *last = ft_calloc(n_chunks ? n_chunks : 1, sizeof *last);
    call_set cs[2] = {{0}, {0}}; /* [pos & 1]: this chunk, the other: the one before */
    lifetimes life;
    if (lifetimes_init(t, &life) || !last) {
        lifetimes_free(&life);
        ft_free(last);
        return ft_err_set(err, FT_ENOMEM, "%s: out of memory", ft_trace_path(t));
    }
    if ((rc = ft_reader_open(t, FT_READ_SPLITS, &r))) {
        *err = *ft_trace_error(t);
        lifetimes_free(&life);
        ft_free(last);
        return rc;
    }
    uint64_t k = 0, n_ends = 0; /* stream position of the record; fuser ends seen */
    for (;; pos++) {
        const ft_batch *b;
        if ((rc = ft_reader_next(r, &b))) {
            *err = *ft_trace_error(t);
            break;
        }
        if (!b) break;
        if (pos && b->seq[0] <= last[pos - 1]) {
            rc = ft_err_set(err, FT_ECORRUPT, "%s: chunk %llu: seq %lld does not follow %lld",
                            ft_trace_path(t), (unsigned long long)b->chunk_id, (long long)b->seq[0],
                            (long long)last[pos - 1]);
            break;
        }
        for (uint32_t ph = 0; ph < b->n_phases && !rc; ph++)
            if (ft_utf8_bad_at(b->phases[ph]) >= 0)
                rc = ft_err_set(err, FT_ECORRUPT, "%s: chunk %llu: phase %u is not UTF-8",
                                ft_trace_path(t), (unsigned long long)b->chunk_id, ph);
        if (rc) break;
        call_set *cur = &cs[pos & 1], *prev = &cs[(pos + 1) & 1];
        cur->n = 0;
        cur->first = b->seq[0];
        cur->valid = 1;
        for (uint32_t i = 0; i < b->n && !rc; i++) {
            if (i && b->seq[i] <= b->seq[i - 1]) {
                rc = ft_err_set(err, FT_ECORRUPT, "%s: chunk %llu: seq %lld does not follow %lld",
                                ft_trace_path(t), (unsigned long long)b->chunk_id,
                                (long long)b->seq[i], (long long)b->seq[i - 1]);
                break;
            }
            const char *bad = bad_value(b, i);
            if (bad) {
                rc = ft_err_set(
                    err, FT_ECORRUPT, "%s: chunk %llu: seq %lld: field '%s' is negative",
                    ft_trace_path(t), (unsigned long long)b->chunk_id, (long long)b->seq[i], bad);
                break;
            }
            if (b->kind[i] != FT_REC_BACKWARD) {
                int nomem = 0;
                const char *dead = NULL;
                if (!declared_before(t, b, i, k + i))
                    rc = ft_err_set(err, FT_ECORRUPT,
                                    "%s: chunk %llu: %s seq %lld uses a fuser or recipe "
                                    "declared after it",
                                    ft_trace_path(t), (unsigned long long)b->chunk_id,
                                    b->kind[i] == FT_REC_END ? "fuser_end" : "call",
                                    (long long)b->seq[i]);
                else if ((dead = check_alive(t, &life, b, i, &nomem)))
                    rc = ft_err_set(err, FT_ECORRUPT, "%s: chunk %llu: %s seq %lld (fuser %lld) %s",
                                    ft_trace_path(t), (unsigned long long)b->chunk_id,
                                    b->kind[i] == FT_REC_END ? "fuser_end" : "call",
                                    (long long)b->seq[i], (long long)b->sid[i], dead);
                else if (nomem || (b->kind[i] == FT_REC_CALL && call_set_add(cur, b->seq[i])))
                    rc = ft_err_set(err, FT_ENOMEM, "%s: out of memory", ft_trace_path(t));
                n_ends += b->kind[i] == FT_REC_END;
                continue;
            }
            int64_t v = b->bwd_call[i];
            int ok;
            if (v >= b->seq[i])
                ok = 0;
            else if (v >= cur->first)
                ok = has_seq(cur->seq, cur->n, v);
            else if (prev->valid && v >= prev->first)
                ok = has_seq(prev->seq, prev->n, v);
            else
                ok = chunk_holding(t, last, pos, v) >= 0;
            if (!ok)
                rc = ft_err_set(err, FT_ECORRUPT,
                                "%s: chunk %llu: backward seq %lld refers to seq %lld, which is "
                                "not an earlier call",
                                ft_trace_path(t), (unsigned long long)b->chunk_id,
                                (long long)b->seq[i], (long long)v);
        }
        if (rc) break;
        last[pos] = b->seq[b->n - 1];
        k += b->n;
    }
    if (!rc && n_ends != ft_trace_n_fuser_ends(t))
        rc = ft_err_set(err, FT_ECORRUPT,
                        "%s: table meta: n_fuser_ends says %llu fuser ends, the chunks hold %llu",
                        ft_trace_path(t), (unsigned long long)ft_trace_n_fuser_ends(t),
                        (unsigned long long)n_ends);
    ft_free(cs[0].seq);
    ft_free(cs[1].seq);
    ft_free(last);
    lifetimes_free(&life);
    ft_reader_close(r);
    return rc;
}
