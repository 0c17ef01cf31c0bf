/*
 * jsonl_import.c - capture-jsonl v1 (spec/capture-jsonl.md) -> any ft_sink.
 *
 * The stream is read line by line into one buffer that grows up to FT_JSONL_MAX_LINE bytes; a
 * longer line is an error. Each line is parsed with jansson (json_loadb), validated strictly and
 * handed to the sink as one record, then freed. Memory therefore does not grow with the input
 * except for what validation must remember: the declared fuser ids (with their op counts), the
 * declared recipe ids and (obj, attrs) pairs, and the call seqs that a later `backward` may name,
 * kept as runs of consecutive seqs in a window of at most 16 MiB (see seq_runs).
 *
 * Every failure is FT_EINVAL (or the sink's own status) with "NAME:LINE: field 'x': what is
 * wrong" in err. Header fields that the format does not name are kept in ft_header.extra_json;
 * unknown fields of other records are ignored with one warning per (record type, field name).
 * Optional fields must be absent rather than null (null is accepted only where the format says
 * "or null"), so that export gives back exactly what was imported.
 *
 * Speed is bounded by jansson's own parse (one heap node per JSON value); bench/bench_import.c
 * measures both, bench/RESULTS.md has the figures.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_recorder.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FT_JSONL_MAX_LINE (1u << 20) /* bytes per line, newline excluded */
#define MAX_OPS           4096       /* basic ops per fuser */
#define MAX_WARNED        64         /* distinct unknown field names reported */

/* ---- small containers -------------------------------------------------------------------- */
/* Open-addressing map int64 key -> uint64 value (fuser op count and groups, state indices). */
typedef struct idmap {
    int64_t *keys;  /* [cap] */
    uint64_t *vals; /* [cap] */
    uint8_t *used;  /* [cap] */
    size_t n, cap;  /* entries, slots (power of two) */
} idmap;

static uint64_t mix64(uint64_t x)
{
    return ft_hash_mix(0x5bd1e995u, x);
}

static int idmap_find(const idmap *m, int64_t key, uint64_t *val)
{
    if (!m->cap) return 0;
    size_t mask = m->cap - 1;
    for (size_t i = mix64((uint64_t)key) & mask;; i = (i + 1) & mask) {
        if (!m->used[i]) return 0;
        if (m->keys[i] == key) {
            if (val) *val = m->vals[i];
            return 1;
        }
    }
}

static int idmap_put(idmap *m, int64_t key, uint64_t val);

static int idmap_grow(idmap *m)
{
    idmap g = {0};
    g.cap = m->cap ? m->cap * 2 : 64;
    g.keys = ft_malloc(g.cap * sizeof *g.keys);
    g.vals = ft_malloc(g.cap * sizeof *g.vals);
    g.used = ft_calloc(g.cap, 1);
    if (!g.keys || !g.vals || !g.used) {
        ft_free(g.keys);
        ft_free(g.vals);
        ft_free(g.used);
        return FT_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i]) idmap_put(&g, m->keys[i], m->vals[i]);
    ft_free(m->keys);
    ft_free(m->vals);
    ft_free(m->used);
    *m = g;
    return FT_OK;
}

/* Insert a key known to be absent. */
static int idmap_put(idmap *m, int64_t key, uint64_t val)
{
    if ((m->n + 1) * 4 > m->cap * 3) {
        int rc = idmap_grow(m);
        if (rc) return rc;
    }
    size_t mask = m->cap - 1;
    size_t i = mix64((uint64_t)key) & mask;
    while (m->used[i])
        i = (i + 1) & mask;
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return FT_OK;
}

static void idmap_free(idmap *m)
{
    ft_free(m->keys);
    ft_free(m->vals);
    ft_free(m->used);
    memset(m, 0, sizeof *m);
}

/* Declared recipe states, to reject a second declaration of one (obj, attrs) pair. */
typedef struct recipe_state {
    int64_t obj;
    uint64_t hash; /* of the canonical attrs text */
    char *attrs;   /* canonical attrs text */
    int64_t id;    /* the id it was declared under */
} recipe_state;

/* Call seqs as runs [start, start + len), appended in increasing order, for checking that a
 * backward names an earlier call. To keep memory bounded the set holds at most MAX_RUNS runs
 * (16 MiB); when full, the older half is forgotten and seqs below `forgot_below` can no longer
 * be checked here (runs_has answers RUNS_UNKNOWN; `fusertrace verify` still checks them). A
 * backward normally names a call of the same training step, far inside the window. */
#ifndef FT_JSONL_MAX_RUNS
#define FT_JSONL_MAX_RUNS (1u << 20)
#endif
enum { RUNS_NO = 0, RUNS_YES = 1, RUNS_UNKNOWN = 2 };

typedef struct seq_runs {
    int64_t *start; /* [cap] */
    int64_t *len;   /* [cap] */
    size_t n, cap;
    int forgot;           /* some runs were dropped */
    int64_t forgot_below; /* every seq below this one is outside the window */
} seq_runs;

static int runs_add(seq_runs *r, int64_t seq)
{
    if (r->n && r->start[r->n - 1] + r->len[r->n - 1] == seq) {
        r->len[r->n - 1]++;
        return FT_OK;
    }
    if (r->n == FT_JSONL_MAX_RUNS) { /* forget the older half */
        size_t keep = r->n / 2, drop = r->n - keep;
        memmove(r->start, r->start + drop, keep * sizeof *r->start);
        memmove(r->len, r->len + drop, keep * sizeof *r->len);
        r->n = keep;
        r->forgot = 1;
        r->forgot_below = r->start[0];
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        if (cap > FT_JSONL_MAX_RUNS) cap = FT_JSONL_MAX_RUNS;
        int64_t *s = ft_realloc(r->start, cap * sizeof *s);
        if (!s) return FT_ENOMEM;
        r->start = s;
        int64_t *l = ft_realloc(r->len, cap * sizeof *l);
        if (!l) return FT_ENOMEM;
        r->len = l;
        r->cap = cap;
    }
    r->start[r->n] = seq;
    r->len[r->n] = 1;
    r->n++;
    return FT_OK;
}

static int runs_has(const seq_runs *r, int64_t seq)
{
    if (r->forgot && seq < r->forgot_below) return RUNS_UNKNOWN;
    size_t lo = 0, hi = r->n;
    while (lo < hi) { /* first run with start > seq */
        size_t mid = lo + (hi - lo) / 2;
        if (r->start[mid] > seq)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (!lo) return RUNS_NO;
    return seq - r->start[lo - 1] < r->len[lo - 1] ? RUNS_YES : RUNS_NO;
}

/* ---- importer state ---------------------------------------------------------------------- */
typedef struct importer {
    const char *name; /* input name for messages */
    FILE *in;
    FILE *warn;
    ft_sink *sink;
    ft_err *err;
    uint64_t line; /* 1-based number of the current line */
    /* line reader */
    char *buf; /* [cap], grows up to FT_JSONL_MAX_LINE + 1 */
    size_t cap;
    size_t beg, end; /* unread bytes are buf[beg, end) */
    int eof;
    /* validation state */
    int have_header;
    int have_seq;
    int64_t last_seq;
    idmap fusers;  /* id -> op count */
    idmap recipes; /* declared recipe ids */
    idmap states;  /* hash of (obj, attrs) -> index into rstates */
    recipe_state *rstates;
    size_t n_rstates, cap_rstates;
    seq_runs calls;
    /* per-line scratch */
    uint8_t *op_rg;
    size_t cap_op_rg;
    int64_t *splits;
    size_t cap_splits;
    /* unknown-field warnings already given, as "type.field" */
    char *warned[MAX_WARNED];
    size_t n_warned;
    int warned_overflow;
    int warned_window; /* a backward named a call older than the seq window */
} importer;

/* Set the error as "NAME:LINE: field 'F': <fmt>" (field may be NULL). */
static int fail(importer *im, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int fail(importer *im, const char *field, const char *fmt, ...)
{
    char what[FT_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (field)
        return ft_err_set(im->err, FT_EINVAL, "%s:%" PRIu64 ": field '%s': %s", im->name, im->line,
                          field, what);
    return ft_err_set(im->err, FT_EINVAL, "%s:%" PRIu64 ": %s", im->name, im->line, what);
}

static int fail_nomem(importer *im)
{
    return ft_err_set(im->err, FT_ENOMEM, "%s:%" PRIu64 ": out of memory", im->name, im->line);
}

/* A sink rejected a record: keep its status, prefix its detail with where we are. */
static int fail_sink(importer *im, int rc, const char *what)
{
    const ft_err *se = im->sink->error_fn ? im->sink->error_fn(im->sink->ctx) : NULL;
    const char *detail = se && se->msg[0] ? se->msg : ft_strerror(rc);
    return ft_err_set(im->err, rc, "%s:%" PRIu64 ": %s rejected by the output: %s", im->name,
                      im->line, what, detail);
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a fractional number";
    case JSON_TRUE:
        return "true";
    case JSON_FALSE:
        return "false";
    case JSON_NULL:
        return "null";
    }
    return "an unknown value";
}

/* ---- field accessors --------------------------------------------------------------------- */
/* Each returns FT_OK, or FT_EINVAL with the message set. `present` (may be NULL for required
 * fields) reports whether an optional field was there. */

static int get_int(importer *im, const json_t *obj, const char *key, int required, int64_t min,
                   int64_t max, int64_t *out, int *present)
{
    json_t *v = json_object_get(obj, key);
    if (present) *present = v != NULL;
    if (!v) return required ? fail(im, key, "missing") : FT_OK;
    if (!json_is_integer(v)) return fail(im, key, "expected an integer, got %s", type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < min || x > max)
        return fail(im, key, "%" JSON_INTEGER_FORMAT " is out of range [%" PRId64 ", %" PRId64 "]",
                    x, min, max);
    *out = (int64_t)x;
    return FT_OK;
}

static int get_bool(importer *im, const json_t *obj, const char *key, int required, int *out,
                    int *present)
{
    json_t *v = json_object_get(obj, key);
    if (present) *present = v != NULL;
    if (!v) return required ? fail(im, key, "missing") : FT_OK;
    if (!json_is_boolean(v)) return fail(im, key, "expected true or false, got %s", type_name(v));
    *out = json_is_true(v);
    return FT_OK;
}

static int get_str(importer *im, const json_t *obj, const char *key, int required, int nonempty,
                   const char **out)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v) return required ? fail(im, key, "missing") : FT_OK;
    if (!json_is_string(v)) return fail(im, key, "expected a string, got %s", type_name(v));
    if (nonempty && json_string_length(v) == 0) return fail(im, key, "must not be empty");
    *out = json_string_value(v);
    return FT_OK;
}

/* The fewest significant digits (1..17) with which every real in v reads back exactly, so that
 * 0.1 stays 0.1 rather than 0.10000000000000001. */
static int real_digits(const json_t *v, int depth)
{
    int p = 1;
    if (depth > 4096) return 17;
    if (json_is_real(v)) {
        double x = json_real_value(v);
        char tmp[40];
        for (p = 1; p < 17; p++) {
            snprintf(tmp, sizeof tmp, "%.*g", p, x);
            if (strtod(tmp, NULL) == x) break;
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            int q = real_digits(json_array_get(v, i), depth + 1);
            if (q > p) p = q;
        }
    } else if (json_is_object(v)) {
        const char *k;
        json_t *m;
        json_object_foreach((json_t *)v, k, m)
        {
            int q = real_digits(m, depth + 1);
            if (q > p) p = q;
        }
    }
    return p;
}

/* Canonical text of a JSON value: sorted keys, compact, reals with as many digits as they need
 * to round-trip (at most 17). Freed with free_dump. */
static char *dump_canonical(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY |
                             JSON_REAL_PRECISION(real_digits(v, 0)));
}

static void free_dump(char *s)
{
    json_malloc_t m;
    json_free_t f;
    json_get_alloc_funcs(&m, &f);
    if (s) f(s);
}

/* Warn once per (record type, field) about a field that the format does not name. */
static void warn_unknown(importer *im, const char *rec, const char *key)
{
    if (!im->warn) return;
    char tag[160];
    snprintf(tag, sizeof tag, "%s.%s", rec, key);
    for (size_t i = 0; i < im->n_warned; i++)
        if (!strcmp(im->warned[i], tag)) return;
    if (im->n_warned == MAX_WARNED) {
        if (!im->warned_overflow)
            fprintf(im->warn,
                    "%s:%" PRIu64 ": warning: more than %d unknown field names; no further "
                    "warnings\n",
                    im->name, im->line, MAX_WARNED);
        im->warned_overflow = 1;
        return;
    }
    char *copy = ft_strdup(tag);
    if (copy) im->warned[im->n_warned++] = copy;
    fprintf(im->warn,
            "%s:%" PRIu64 ": warning: field '%s' of a %s record is not in capture-jsonl v1; "
            "ignored (further occurrences not reported)\n",
            im->name, im->line, key, rec);
}

/* Report every key of obj that is not in known[] (NULL-terminated). Cheap when the object holds
 * only known keys: n_known_present is how many known keys were found. */
static void check_unknown(importer *im, const json_t *obj, const char *rec,
                          const char *const *known, size_t n_known_present)
{
    if (json_object_size(obj) == n_known_present) return;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        size_t k = 0;
        while (known[k] && strcmp(known[k], key))
            k++;
        if (!known[k]) warn_unknown(im, rec, key);
    }
}

static size_t count_present(const json_t *obj, const char *const *known)
{
    size_t n = 0;
    for (size_t k = 0; known[k]; k++)
        n += json_object_get(obj, known[k]) != NULL;
    return n;
}

/* ---- records ----------------------------------------------------------------------------- */
static const char *const header_known[] = {
    "t",          "format",     "version", "te_version", "torch_version", "host", "rank",
    "world_size", "started_at", "env",     NULL};

static int do_header(importer *im, json_t *o)
{
    int rc;
    const char *format = NULL;
    int64_t version = 0;
    ft_header h;
    memset(&h, 0, sizeof h);
    char *env = NULL, *extra = NULL;
    json_t *extra_obj = NULL;

    if ((rc = get_str(im, o, "format", 1, 0, &format))) return rc;
    if (strcmp(format, "fusertrace-capture"))
        return fail(im, "format", "expected \"fusertrace-capture\", got \"%.64s\"", format);
    json_t *vv = json_object_get(o, "version");
    if (!vv) return fail(im, "version", "missing");
    if (!json_is_integer(vv))
        return fail(im, "version", "expected an integer, got %s", type_name(vv));
    version = json_integer_value(vv);
    if (version != 1)
        return fail(im, "version", "unsupported version %" PRId64 " (this build reads 1)", version);
    if ((rc = get_str(im, o, "te_version", 0, 0, &h.te_version))) return rc;
    if ((rc = get_str(im, o, "torch_version", 0, 0, &h.torch_version))) return rc;
    if ((rc = get_str(im, o, "host", 0, 0, &h.host))) return rc;
    if ((rc = get_str(im, o, "started_at", 0, 0, &h.started_at))) return rc;
    if ((rc = get_int(im, o, "rank", 0, 0, INT32_MAX, &h.rank, &h.has_rank))) return rc;
    if ((rc = get_int(im, o, "world_size", 0, 1, INT32_MAX, &h.world_size, &h.has_world_size)))
        return rc;
    if (h.has_rank && h.has_world_size && h.rank >= h.world_size)
        return fail(im, "rank", "%" PRId64 " is not below world_size %" PRId64, h.rank,
                    h.world_size);

    json_t *e = json_object_get(o, "env");
    if (e) {
        if (!json_is_object(e)) return fail(im, "env", "expected an object, got %s", type_name(e));
        const char *key;
        json_t *v;
        json_object_foreach(e, key, v)
        {
            if (!json_is_string(v)) {
                char f[96];
                snprintf(f, sizeof f, "env.%.80s", key);
                return fail(im, f, "expected a string, got %s", type_name(v));
            }
        }
    }

    /* header fields the format does not name are kept in extra_json */
    extra_obj = json_object();
    if (!extra_obj) return fail_nomem(im);
    {
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v)
        {
            size_t k = 0;
            while (header_known[k] && strcmp(header_known[k], key))
                k++;
            if (!header_known[k] && json_object_set(extra_obj, key, v)) {
                rc = fail_nomem(im);
                goto out;
            }
        }
    }
    env = e ? dump_canonical(e) : NULL; /* an absent env is the empty object */
    extra = dump_canonical(extra_obj);
    if ((e && !env) || !extra) {
        rc = fail_nomem(im);
        goto out;
    }
    h.env_json = env ? env : "{}";
    h.extra_json = extra;
    rc = im->sink->header_fn ? im->sink->header_fn(im->sink->ctx, &h) : FT_OK;
    if (rc) rc = fail_sink(im, rc, "header");
out:
    json_decref(extra_obj);
    free_dump(env);
    free_dump(extra);
    return rc;
}

static const char *const fuser_known[] = {"t", "id", "label", "ops", NULL};

static int do_fuser(importer *im, json_t *o)
{
    int rc;
    ft_fuser_def f;
    memset(&f, 0, sizeof f);
    if ((rc = get_int(im, o, "id", 1, 0, INT64_MAX, &f.id, NULL))) return rc;
    if (idmap_find(&im->fusers, f.id, NULL))
        return fail(im, "id", "fuser %" PRId64 " is already declared", f.id);
    if ((rc = get_str(im, o, "label", 0, 0, &f.label))) return rc;
    json_t *ops = json_object_get(o, "ops");
    if (!ops) return fail(im, "ops", "missing");
    if (!json_is_array(ops)) return fail(im, "ops", "expected an array, got %s", type_name(ops));
    size_t n = json_array_size(ops);
    uint32_t groups = 0; /* num_groups shared by the grouped ops, 0 if none (or they differ) */
    int mixed = 0;
    if (n == 0) return fail(im, "ops", "must hold at least one op");
    if (n > MAX_OPS) return fail(im, "ops", "%zu ops, more than the limit %d", n, MAX_OPS);
    for (size_t i = 0; i < n; i++) {
        json_t *op = json_array_get(ops, i);
        char field[48];
        if (!json_is_object(op)) {
            snprintf(field, sizeof field, "ops[%zu]", i);
            return fail(im, field, "expected an object, got %s", type_name(op));
        }
        json_t *t = json_object_get(op, "type");
        snprintf(field, sizeof field, "ops[%zu].type", i);
        if (!t) return fail(im, field, "missing");
        if (!json_is_string(t)) return fail(im, field, "expected a string, got %s", type_name(t));
        if (json_string_length(t) == 0) return fail(im, field, "must not be empty");
        json_t *a = json_object_get(op, "attrs");
        if (a && !json_is_object(a)) {
            snprintf(field, sizeof field, "ops[%zu].attrs", i);
            return fail(im, field, "expected an object, got %s", type_name(a));
        }
        json_t *g = a ? json_object_get(a, "num_groups") : NULL;
        if (g) {
            snprintf(field, sizeof field, "ops[%zu].attrs.num_groups", i);
            if (!json_is_integer(g))
                return fail(im, field, "expected an integer, got %s", type_name(g));
            json_int_t v = json_integer_value(g);
            if (v < 1 || v > INT32_MAX)
                return fail(im, field, "%" JSON_INTEGER_FORMAT " is out of range [1, %d]", v,
                            INT32_MAX);
            if (groups == 0)
                groups = (uint32_t)v;
            else if (groups != (uint32_t)v)
                mixed = 1;
        }
    }
    if (mixed) groups = 0; /* grouped ops disagree: m_splits lengths are not checked */
    check_unknown(im, o, "fuser", fuser_known, count_present(o, fuser_known));

    char *ops_json = dump_canonical(ops);
    if (!ops_json) return fail_nomem(im);
    f.ops_json = ops_json;
    f.n_ops = (uint32_t)n;
    rc = im->sink->fuser_fn ? im->sink->fuser_fn(im->sink->ctx, &f) : FT_OK;
    free_dump(ops_json);
    if (rc) return fail_sink(im, rc, "fuser");
    if (idmap_put(&im->fusers, f.id, (uint64_t)n | (uint64_t)groups << 32)) return fail_nomem(im);
    return FT_OK;
}

static const char *const recipe_known[] = {"t", "id", "type", "obj", "attrs", NULL};

static int do_recipe(importer *im, json_t *o)
{
    int rc;
    ft_recipe_def r;
    memset(&r, 0, sizeof r);
    if ((rc = get_int(im, o, "id", 1, 0, INT64_MAX, &r.id, NULL))) return rc;
    if (idmap_find(&im->recipes, r.id, NULL))
        return fail(im, "id", "recipe %" PRId64 " is already declared", r.id);
    if ((rc = get_str(im, o, "type", 1, 1, &r.type))) return rc;
    if ((rc = get_int(im, o, "obj", 1, INT64_MIN, INT64_MAX, &r.obj, NULL))) return rc;
    json_t *a = json_object_get(o, "attrs");
    if (!a) return fail(im, "attrs", "missing");
    if (!json_is_object(a)) return fail(im, "attrs", "expected an object, got %s", type_name(a));
    check_unknown(im, o, "recipe", recipe_known, count_present(o, recipe_known));

    char *attrs = dump_canonical(a);
    if (!attrs) return fail_nomem(im);
    uint64_t hash = ft_hash64(attrs, strlen(attrs));
    int64_t skey = (int64_t)ft_hash_mix(hash, (uint64_t)r.obj);
    uint64_t at;
    int in_map = idmap_find(&im->states, skey, &at);
    if (in_map) {
        /* the map holds one state per key; on a (practically impossible) 64-bit key collision
         * fall back to scanning them all */
        recipe_state *s = &im->rstates[at];
        int same = s->obj == r.obj && s->hash == hash && !strcmp(s->attrs, attrs);
        for (size_t i = 0; !same && i < im->n_rstates; i++) {
            s = &im->rstates[i];
            same = s->obj == r.obj && s->hash == hash && !strcmp(s->attrs, attrs);
        }
        if (same) {
            free_dump(attrs);
            return fail(im, "attrs",
                        "recipe state (obj %" PRId64 ", these attrs) is already declared as id "
                        "%" PRId64,
                        r.obj, s->id);
        }
    }
    if (im->n_rstates == UINT32_MAX) {
        free_dump(attrs);
        return fail(im, "id", "more than %u recipe states", UINT32_MAX);
    }
    if (im->n_rstates == im->cap_rstates) {
        size_t cap = im->cap_rstates ? im->cap_rstates * 2 : 16;
        recipe_state *p = ft_realloc(im->rstates, cap * sizeof *p);
        if (!p) {
            free_dump(attrs);
            return fail_nomem(im);
        }
        im->rstates = p;
        im->cap_rstates = cap;
    }
    char *copy = ft_strdup(attrs);
    if (!copy) {
        free_dump(attrs);
        return fail_nomem(im);
    }
    r.attrs_json = attrs;
    rc = im->sink->recipe_fn ? im->sink->recipe_fn(im->sink->ctx, &r) : FT_OK;
    free_dump(attrs);
    if (!rc && idmap_put(&im->recipes, r.id, 0)) rc = FT_ENOMEM;
    if (!rc && !in_map && idmap_put(&im->states, skey, (uint32_t)im->n_rstates)) rc = FT_ENOMEM;
    if (rc) {
        ft_free(copy);
        return rc == FT_ENOMEM ? fail_nomem(im) : fail_sink(im, rc, "recipe");
    }
    im->rstates[im->n_rstates++] = (recipe_state){r.obj, hash, copy, r.id};
    return FT_OK;
}

/* The seq shared by calls and backwards: present, >= 0 and above the previous one. */
static int get_seq(importer *im, const json_t *o, int64_t *seq)
{
    int rc = get_int(im, o, "seq", 1, 0, INT64_MAX, seq, NULL);
    if (rc) return rc;
    if (im->have_seq && *seq <= im->last_seq)
        return fail(im, "seq", "%" PRId64 " does not increase (previous record had %" PRId64 ")",
                    *seq, im->last_seq);
    return FT_OK;
}

static int grow(importer *im, void **p, size_t *cap, size_t n, size_t elem)
{
    if (n <= *cap) return FT_OK;
    size_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    void *q = ft_realloc(*p, c * elem);
    if (!q) return fail_nomem(im);
    *p = q;
    *cap = c;
    return FT_OK;
}

static const char *const call_known[] = {
    "t",    "seq", "fuser", "recipe", "grad", "input_rg", "op_rg",   "device", "m_splits",
    "step", "mb",  "phase", "graph",  "ns",   "fuse_ns",  "rebuilt", NULL};

static int do_call(importer *im, json_t *o)
{
    int rc, b, has;
    size_t n_known = 1; /* "t" */
    ft_call c;
    memset(&c, 0, sizeof c);
    uint64_t finfo = 0; /* op count | num_groups << 32 */
    char field[48];

    if ((rc = get_seq(im, o, &c.seq))) return rc;
    n_known++;
    if ((rc = get_int(im, o, "fuser", 1, 0, INT64_MAX, &c.fuser, NULL))) return rc;
    n_known++;
    if (!idmap_find(&im->fusers, c.fuser, &finfo))
        return fail(im, "fuser", "fuser %" PRId64 " is not declared", c.fuser);
    uint32_t n_ops = (uint32_t)finfo, groups = (uint32_t)(finfo >> 32);

    json_t *r = json_object_get(o, "recipe");
    if (!r) return fail(im, "recipe", "missing (use null when quantization is disabled)");
    n_known++;
    if (!json_is_null(r)) {
        if (!json_is_integer(r))
            return fail(im, "recipe", "expected an integer or null, got %s", type_name(r));
        c.recipe = json_integer_value(r);
        if (!idmap_find(&im->recipes, c.recipe, NULL))
            return fail(im, "recipe", "recipe %" PRId64 " is not declared", c.recipe);
        c.flags |= FT_CF_HAS_RECIPE;
    }
    if ((rc = get_bool(im, o, "grad", 1, &b, NULL))) return rc;
    n_known++;
    if (b) c.flags |= FT_CF_GRAD;
    if ((rc = get_bool(im, o, "input_rg", 1, &b, NULL))) return rc;
    n_known++;
    if (b) c.flags |= FT_CF_INPUT_RG;

    json_t *rg = json_object_get(o, "op_rg");
    if (!rg) return fail(im, "op_rg", "missing");
    n_known++;
    if (!json_is_array(rg)) return fail(im, "op_rg", "expected an array, got %s", type_name(rg));
    size_t n_rg = json_array_size(rg);
    if (n_rg != n_ops)
        return fail(im, "op_rg", "has %zu entries but fuser %" PRId64 " has %" PRIu32 " ops", n_rg,
                    c.fuser, n_ops);
    if ((rc = grow(im, (void **)&im->op_rg, &im->cap_op_rg, n_rg, 1))) return rc;
    for (size_t i = 0; i < n_rg; i++) {
        json_t *v = json_array_get(rg, i);
        if (!json_is_boolean(v)) {
            snprintf(field, sizeof field, "op_rg[%zu]", i);
            return fail(im, field, "expected true or false, got %s", type_name(v));
        }
        im->op_rg[i] = json_is_true(v);
    }
    c.n_op_rg = (uint32_t)n_rg;
    c.op_rg = im->op_rg;

    int64_t dev = 0;
    if ((rc = get_int(im, o, "device", 1, 0, INT32_MAX, &dev, NULL))) return rc;
    n_known++;
    c.device = (int32_t)dev;

    json_t *ms = json_object_get(o, "m_splits");
    if (ms) {
        n_known++;
        if (!json_is_array(ms))
            return fail(im, "m_splits", "expected an array, got %s", type_name(ms));
        size_t n = json_array_size(ms);
        if (groups && n != groups)
            return fail(im, "m_splits",
                        "has %zu entries but fuser %" PRId64 " has num_groups %" PRIu32, n, c.fuser,
                        groups);
        if ((rc = grow(im, (void **)&im->splits, &im->cap_splits, n, sizeof(int64_t)))) return rc;
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(ms, i);
            if (!json_is_integer(v)) {
                snprintf(field, sizeof field, "m_splits[%zu]", i);
                return fail(im, field, "expected an integer, got %s", type_name(v));
            }
            json_int_t x = json_integer_value(v);
            if (x < 0) {
                snprintf(field, sizeof field, "m_splits[%zu]", i);
                return fail(im, field, "negative split %" JSON_INTEGER_FORMAT, x);
            }
            im->splits[i] = x;
        }
        c.flags |= FT_CF_HAS_SPLITS;
        c.n_splits = (uint32_t)n;
        c.m_splits = im->splits;
    }
    if ((rc = get_int(im, o, "step", 0, 0, INT64_MAX, &c.step, &has))) return rc;
    if (has) c.flags |= FT_CF_HAS_STEP, n_known++;
    if ((rc = get_int(im, o, "mb", 0, 0, INT64_MAX, &c.mb, &has))) return rc;
    if (has) c.flags |= FT_CF_HAS_MB, n_known++;
    if ((rc = get_str(im, o, "phase", 0, 0, &c.phase))) return rc;
    if (c.phase) c.flags |= FT_CF_HAS_PHASE, n_known++;
    if ((rc = get_bool(im, o, "graph", 0, &b, &has))) return rc;
    if (has) c.flags |= FT_CF_HAS_GRAPH | (b ? FT_CF_GRAPH : 0), n_known++;
    if ((rc = get_int(im, o, "ns", 0, 0, INT64_MAX, &c.ns, &has))) return rc;
    if (has) c.flags |= FT_CF_HAS_NS, n_known++;
    if ((rc = get_int(im, o, "fuse_ns", 0, 0, INT64_MAX, &c.fuse_ns, &has))) return rc;
    if (has) c.flags |= FT_CF_HAS_FUSE_NS, n_known++;
    if ((rc = get_bool(im, o, "rebuilt", 0, &b, &has))) return rc;
    if (has) c.flags |= FT_CF_HAS_REBUILT | (b ? FT_CF_REBUILT : 0), n_known++;
    check_unknown(im, o, "call", call_known, n_known);

    rc = im->sink->call_fn ? im->sink->call_fn(im->sink->ctx, &c) : FT_OK;
    if (rc) return fail_sink(im, rc, "call");
    if (runs_add(&im->calls, c.seq)) return fail_nomem(im);
    im->have_seq = 1;
    im->last_seq = c.seq;
    return FT_OK;
}

static const char *const backward_known[] = {"t", "seq", "call", "ns", NULL};

static int do_backward(importer *im, json_t *o)
{
    int rc;
    ft_backward b;
    memset(&b, 0, sizeof b);
    if ((rc = get_seq(im, o, &b.seq))) return rc;
    if ((rc = get_int(im, o, "call", 1, 0, INT64_MAX, &b.call, NULL))) return rc;
    int known = runs_has(&im->calls, b.call);
    if (known == RUNS_NO)
        return fail(im, "call", "%" PRId64 " is not the seq of an earlier call record", b.call);
    if (known == RUNS_UNKNOWN && im->warn && !im->warned_window) {
        im->warned_window = 1;
        fprintf(im->warn,
                "%s:%" PRIu64 ": warning: field 'call': %" PRId64 " is older than the %u call "
                "runs the importer remembers; references this old are not checked on import "
                "(run `fusertrace verify`)\n",
                im->name, im->line, b.call, FT_JSONL_MAX_RUNS / 2);
    }
    if ((rc = get_int(im, o, "ns", 0, 0, INT64_MAX, &b.ns, &b.has_ns))) return rc;
    check_unknown(im, o, "backward", backward_known, count_present(o, backward_known));
    rc = im->sink->backward_fn ? im->sink->backward_fn(im->sink->ctx, &b) : FT_OK;
    if (rc) return fail_sink(im, rc, "backward");
    im->have_seq = 1;
    im->last_seq = b.seq;
    return FT_OK;
}

/* ---- lines ------------------------------------------------------------------------------- */
/* Byte offset of the first invalid UTF-8 sequence in s[0, n), or n if it is all valid. */
static size_t utf8_invalid_at(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned min;
        if (c >= 0xc2 && c <= 0xdf)
            len = 2, min = 0x80;
        else if (c >= 0xe0 && c <= 0xef)
            len = 3, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4)
            len = 4, min = 0x10000;
        else
            return i;
        if (n - i < len) return i;
        unsigned cp = c & (0x3fu >> (len - 1));
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
        i += len;
    }
    return n;
}

/* Best guess at the key whose value starts before byte `pos` (for parse errors that jansson
 * reports without naming the key): the last `"key":` before pos. */
static void guess_key(const char *s, size_t pos, char *out, size_t cap)
{
    out[0] = '\0';
    size_t i = pos;
    while (i > 0) {
        i--;
        if (s[i] != ':') continue;
        size_t j = i;
        while (j > 0 && (s[j - 1] == ' ' || s[j - 1] == '\t'))
            j--;
        if (j == 0 || s[j - 1] != '"') continue;
        size_t end = j - 1, k = end;
        while (k > 0 && s[k - 1] != '"')
            k--;
        if (k == 0) return;
        size_t len = end - k;
        if (len >= cap) len = cap - 1;
        memcpy(out, s + k, len);
        out[len] = '\0';
        return;
    }
}

static int parse_error(importer *im, const char *s, size_t len, const json_error_t *je)
{
    size_t pos = je->position > 0 ? (size_t)je->position : 0;
    if (pos > len) pos = len;
    char key[64];
    switch (json_error_code(je)) {
    case json_error_invalid_utf8: {
        size_t at = utf8_invalid_at((const unsigned char *)s, len);
        if (at >= len) at = pos;
        guess_key(s, at, key, sizeof key);
        return fail(im, key[0] ? key : NULL, "column %zu: invalid UTF-8", at + 1);
    }
    case json_error_null_character:
        guess_key(s, pos, key, sizeof key);
        return fail(im, key[0] ? key : NULL, "NUL character (\\u0000) in a string");
    case json_error_numeric_overflow:
        guess_key(s, pos, key, sizeof key);
        return fail(im, key[0] ? key : NULL, "column %zu: number out of range (%s)", pos + 1,
                    je->text);
    case json_error_duplicate_key: {
        /* jansson's text is: duplicate object key near '"KEY"' */
        const char *q = strstr(je->text, "'\"");
        size_t n = 0;
        if (q) {
            q += 2;
            while (q[n] && q[n] != '"' && n + 1 < sizeof key)
                n++;
            memcpy(key, q, n);
        }
        key[n] = '\0';
        return fail(im, n ? key : NULL, "column %zu: appears twice in the record", pos + 1);
    }
    case json_error_out_of_memory:
        return fail_nomem(im);
    default: {
        size_t at = utf8_invalid_at((const unsigned char *)s, len);
        guess_key(s, at < len ? at : pos, key, sizeof key);
        if (at < len) return fail(im, key[0] ? key : NULL, "column %zu: invalid UTF-8", at + 1);
        if (key[0])
            return fail(im, NULL, "column %zu: invalid JSON (at or after field '%s'): %s", pos + 1,
                        key, je->text);
        return fail(im, NULL, "column %zu: invalid JSON: %s", pos + 1, je->text);
    }
    }
}

static int do_line(importer *im, const char *s, size_t len)
{
    if (len == 0) return fail(im, NULL, "empty line (every line must hold one JSON object)");
    const char *nul = memchr(s, '\0', len);
    if (nul) return fail(im, NULL, "column %zu: NUL byte", (size_t)(nul - s) + 1);

    json_error_t je;
    json_t *o = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) return parse_error(im, s, len, &je);
    int rc;
    if (!json_is_object(o)) {
        rc = fail(im, NULL, "expected a JSON object, got %s", type_name(o));
        goto out;
    }
    json_t *t = json_object_get(o, "t");
    if (!t) {
        rc = fail(im, "t", "missing (the record type)");
        goto out;
    }
    if (!json_is_string(t)) {
        rc = fail(im, "t", "expected a string, got %s", type_name(t));
        goto out;
    }
    const char *type = json_string_value(t);
    int is_header = !strcmp(type, "header");
    if (!im->have_header && !is_header) {
        rc = fail(im, "t", "the first record must be the header, got \"%.32s\"", type);
        goto out;
    }
    if (is_header) {
        rc = im->have_header ? fail(im, "t", "a second header record") : do_header(im, o);
        if (!rc) im->have_header = 1;
    } else if (!strcmp(type, "call")) {
        rc = do_call(im, o);
    } else if (!strcmp(type, "backward")) {
        rc = do_backward(im, o);
    } else if (!strcmp(type, "fuser")) {
        rc = do_fuser(im, o);
    } else if (!strcmp(type, "recipe")) {
        rc = do_recipe(im, o);
    } else {
        rc = fail(im, "t", "unknown record type \"%.32s\"", type);
    }
out:
    json_decref(o);
    return rc;
}

/* Next line (without its newline) into s and len; returns 1 for a line, 0 at the end, <0 on error.
 */
static int next_line(importer *im, const char **s, size_t *len)
{
    for (;;) {
        char *nl = memchr(im->buf + im->beg, '\n', im->end - im->beg);
        if (nl) {
            *s = im->buf + im->beg;
            *len = (size_t)(nl - *s);
            im->beg += *len + 1;
            return 1;
        }
        if (im->eof) {
            if (im->beg == im->end) return 0;
            *s = im->buf + im->beg; /* last line without '\n' */
            *len = im->end - im->beg;
            im->beg = im->end;
            return 1;
        }
        if (im->beg) {
            memmove(im->buf, im->buf + im->beg, im->end - im->beg);
            im->end -= im->beg;
            im->beg = 0;
        }
        if (im->end == im->cap) {
            if (im->cap == FT_JSONL_MAX_LINE + 1) {
                im->line++;
                return fail(im, NULL, "line longer than %u bytes", FT_JSONL_MAX_LINE);
            }
            size_t cap = im->cap * 4 < FT_JSONL_MAX_LINE + 1 ? im->cap * 4 : FT_JSONL_MAX_LINE + 1;
            char *p = ft_realloc(im->buf, cap);
            if (!p) return fail_nomem(im);
            im->buf = p;
            im->cap = cap;
        }
        size_t got = fread(im->buf + im->end, 1, im->cap - im->end, im->in);
        im->end += got;
        if (got == 0) {
            if (ferror(im->in))
                return ft_err_set(im->err, FT_EIO, "%s: read error after line %" PRIu64 ": %s",
                                  im->name, im->line, strerror(errno));
            im->eof = 1;
        }
    }
}

int ft_jsonl_import(FILE *in, const char *name, ft_sink *sink, FILE *warn, ft_err *err)
{
    importer im;
    memset(&im, 0, sizeof im);
    im.name = name ? name : "<input>";
    im.in = in;
    im.warn = warn;
    im.sink = sink;
    im.err = err;
    if (!in || !sink) return ft_err_set(err, FT_EINVAL, "%s: no input or no sink", im.name);
    im.cap = 64 * 1024;
    im.buf = ft_malloc(im.cap);
    if (!im.buf) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", im.name);

    int rc;
    const char *s = NULL;
    size_t len = 0;
    while ((rc = next_line(&im, &s, &len)) == 1) {
        im.line++;
        rc = do_line(&im, s, len);
        if (rc) break;
    }
    if (rc == 0 && !im.have_header)
        rc =
            ft_err_set(err, FT_EINVAL, "%s:1: field 't': no header record (empty stream)", im.name);

    ft_free(im.buf);
    idmap_free(&im.fusers);
    idmap_free(&im.recipes);
    idmap_free(&im.states);
    for (size_t i = 0; i < im.n_rstates; i++)
        ft_free(im.rstates[i].attrs);
    ft_free(im.rstates);
    ft_free(im.calls.start);
    ft_free(im.calls.len);
    ft_free(im.op_rg);
    ft_free(im.splits);
    for (size_t i = 0; i < im.n_warned; i++)
        ft_free(im.warned[i]);
    return rc;
}
