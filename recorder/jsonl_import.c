/*
 * jsonl_import.c - capture-jsonl v1 (docs/capture-format.md) -> any ft_sink.
 *
 * Input: plain JSON Lines, or a zstd-compressed stream (`.jsonl.zst`), told apart by the first
 * bytes (the zstd frame magic), not by the name, and decompressed as it is read
 * (ZSTD_decompressStream), never whole. A compressed stream that ends inside a frame, or whose
 * frame is damaged, is an error naming the line it was in.
 *
 * The stream is read line by line into one buffer that grows up to FT_LIM_LINE_BYTES
 * (ft_limits.h); a longer line is an error. Every line is parsed once:
 *   - `call` and `backward` lines (almost all of a stream) go through the fast path: simdjson
 *     On-Demand into a flat record (json_fast.h), checked here and handed to the sink;
 *   - every other line, and any line the fast path does not accept or whose record fails a check
 *     here, goes through the general path: jansson (json_loadb), checked field by field, which
 *     words the message. A bad line is therefore parsed twice, a good one once, and the messages
 *     are the general path's whatever the line.
 * Memory does not grow with the input except for what validation must remember: the declared
 * fuser ids (with their op counts), the declared recipe ids and (obj, attrs) pairs, and the seqs
 * of every call, which a later `backward` may name (common/ft_seqset.h: about one byte per call).
 *
 * Every failure is FT_EINVAL (or the sink's own status) with "NAME:LINE: field 'x': what is
 * wrong" in err. Header fields that the format does not name are kept in ft_header.extra_json;
 * unknown fields of other records are ignored with one warning per (record type, field name).
 * Optional fields must be absent rather than null (null is accepted only where the format says
 * "or null"), so that export gives back exactly what was imported. Everything accepted is within
 * the limits of ft_limits.h, so it records, verifies, exports and re-imports.
 *
 * The importer checks every record completely, so it can feed the recorder through its
 * pre-validated entries (ft_rec_sink_prevalidated): each record is checked once.
 * bench/bench_import.c measures both paths, bench/RESULTS.md has the figures.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_hmap.h"
#include "ft_limits.h"
#include "ft_recorder.h"
#include "ft_seqset.h"
#include "json_fast.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define MAX_WARNED 64 /* distinct unknown field names reported */

/* ---- small containers -------------------------------------------------------------------- */
/* A declared fuser: what its calls are checked against. */
typedef struct fuser_info {
    uint32_t n_ops;  /* basic ops: the length of op_rg */
    uint32_t groups; /* num_groups shared by its grouped ops: the length of m_splits (0: any) */
} fuser_info;

/* Declared recipe states, to reject a second declaration of one (obj, attrs) pair. */
typedef struct recipe_state {
    int64_t obj;
    uint64_t hash; /* of the canonical attrs text */
    char *attrs;   /* canonical attrs text */
    int64_t id;    /* the id it was declared under */
} recipe_state;

/* ---- importer state ---------------------------------------------------------------------- */
typedef struct importer {
    const char *name; /* input name for messages */
    FILE *in;
    FILE *warn;
    int fast; /* use the fast path */
    ft_sink *sink;
    ft_err *err;
    uint64_t line; /* 1-based number of the current line */
    /* line reader */
    char *buf;       /* [cap + FT_JFAST_PADDING], cap grows up to FT_LIM_LINE_BYTES + 1 */
    size_t cap;      /* bytes the lines may use (the padding after them is the fast path's) */
    size_t beg, end; /* unread bytes are buf[beg, end) */
    int eof;
    /* zstd input (a compressed stream) */
    ZSTD_DStream *zd; /* NULL for plain input */
    uint8_t *zbuf;    /* [zcap] compressed bytes read, zin.src */
    size_t zcap;
    ZSTD_inBuffer zin;
    size_t zlast; /* ZSTD_decompressStream's last hint: 0 when a frame has just ended */
    int zeof;     /* the compressed input has ended */
    /* validation state */
    int have_header;
    int have_seq;
    int64_t last_seq;
    ft_hmap fusers; /* id -> index into finfo */
    fuser_info *finfo;
    size_t n_finfo, cap_finfo;
    ft_hmap recipes; /* declared recipe ids (value 0) */
    ft_hmap states;  /* hash of (obj, attrs) -> index into rstates */
    recipe_state *rstates;
    size_t n_rstates, cap_rstates;
    ft_seqset calls; /* seqs of the calls so far */
    ft_jfast *jf;    /* the fast path's parser */
    /* per-line scratch */
    uint8_t *op_rg;
    size_t cap_op_rg;
    int64_t *splits;
    size_t cap_splits;
    /* unknown-field warnings already given, as "type.field" */
    char *warned[MAX_WARNED];
    size_t n_warned;
    int warned_overflow;
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

/* A text field within its limit in bytes (ft_limits.h). */
static int check_bytes(importer *im, const char *field, size_t n, size_t limit)
{
    if (n > limit) return fail(im, field, "%zu bytes, more than the limit %zu", n, limit);
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
    const char *const str_key[] = {"te_version", "torch_version", "host", "started_at"};
    const char **const str_val[] = {&h.te_version, &h.torch_version, &h.host, &h.started_at};
    for (size_t i = 0; i < FT_ARRAY_LEN(str_key); i++) {
        if ((rc = get_str(im, o, str_key[i], 0, 0, str_val[i]))) return rc;
        if (*str_val[i] &&
            (rc = check_bytes(im, str_key[i], strlen(*str_val[i]), FT_LIM_HDR_STR_BYTES)))
            return rc;
    }
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
    if ((env && (rc = check_bytes(im, "env", strlen(env), FT_LIM_HDR_OBJ_BYTES))) ||
        (rc = check_bytes(im, "(fields not in the format)", strlen(extra), FT_LIM_HDR_OBJ_BYTES)))
        goto out;
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
    if (ft_hmap_get(&im->fusers, (uint64_t)f.id) != UINT32_MAX)
        return fail(im, "id", "fuser %" PRId64 " is already declared", f.id);
    if (im->n_finfo == FT_LIM_FUSERS)
        return fail(im, "id", "more than %u fusers declared (the limit)", FT_LIM_FUSERS);
    if ((rc = get_str(im, o, "label", 0, 0, &f.label))) return rc;
    if (f.label && (rc = check_bytes(im, "label", strlen(f.label), FT_LIM_LABEL_BYTES))) return rc;
    json_t *ops = json_object_get(o, "ops");
    if (!ops) return fail(im, "ops", "missing");
    if (!json_is_array(ops)) return fail(im, "ops", "expected an array, got %s", type_name(ops));
    size_t n = json_array_size(ops);
    uint32_t groups = 0; /* num_groups shared by the grouped ops, 0 if none (or they differ) */
    int mixed = 0;
    if (n == 0) return fail(im, "ops", "must hold at least one op");
    if (n > FT_LIM_OPS) return fail(im, "ops", "%zu ops, more than the limit %d", n, FT_LIM_OPS);
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
    if ((rc = check_bytes(im, "ops", strlen(ops_json), FT_LIM_OPS_BYTES))) {
        free_dump(ops_json);
        return rc;
    }
    if (im->n_finfo == im->cap_finfo) {
        size_t cap = im->cap_finfo ? im->cap_finfo * 2 : 64;
        fuser_info *q = ft_realloc(im->finfo, cap * sizeof *q);
        if (!q) {
            free_dump(ops_json);
            return fail_nomem(im);
        }
        im->finfo = q;
        im->cap_finfo = cap;
    }
    f.ops_json = ops_json;
    f.n_ops = (uint32_t)n;
    rc = im->sink->fuser_fn ? im->sink->fuser_fn(im->sink->ctx, &f) : FT_OK;
    free_dump(ops_json);
    if (rc) return fail_sink(im, rc, "fuser");
    if (ft_hmap_put(&im->fusers, (uint64_t)f.id, (uint32_t)im->n_finfo)) return fail_nomem(im);
    im->finfo[im->n_finfo++] = (fuser_info){(uint32_t)n, groups};
    return FT_OK;
}

static const char *const recipe_known[] = {"t", "id", "type", "obj", "attrs", NULL};

static int do_recipe(importer *im, json_t *o)
{
    int rc;
    ft_recipe_def r;
    memset(&r, 0, sizeof r);
    if ((rc = get_int(im, o, "id", 1, 0, INT64_MAX, &r.id, NULL))) return rc;
    if (ft_hmap_get(&im->recipes, (uint64_t)r.id) != UINT32_MAX)
        return fail(im, "id", "recipe %" PRId64 " is already declared", r.id);
    if (im->n_rstates == FT_LIM_RECIPES)
        return fail(im, "id", "more than %u recipe states declared (the limit)", FT_LIM_RECIPES);
    if ((rc = get_str(im, o, "type", 1, 1, &r.type))) return rc;
    if ((rc = check_bytes(im, "type", strlen(r.type), FT_LIM_TYPE_BYTES))) return rc;
    if ((rc = get_int(im, o, "obj", 1, INT64_MIN, INT64_MAX, &r.obj, NULL))) return rc;
    json_t *a = json_object_get(o, "attrs");
    if (!a) return fail(im, "attrs", "missing");
    if (!json_is_object(a)) return fail(im, "attrs", "expected an object, got %s", type_name(a));
    check_unknown(im, o, "recipe", recipe_known, count_present(o, recipe_known));

    char *attrs = dump_canonical(a);
    if (!attrs) return fail_nomem(im);
    if ((rc = check_bytes(im, "attrs", strlen(attrs), FT_LIM_ATTRS_BYTES))) {
        free_dump(attrs);
        return rc;
    }
    uint64_t hash = ft_hash64(attrs, strlen(attrs));
    int64_t skey = (int64_t)ft_hash_mix(hash, (uint64_t)r.obj);
    uint32_t at = ft_hmap_get(&im->states, (uint64_t)skey);
    int in_map = at != UINT32_MAX;
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
    if (!rc && ft_hmap_put(&im->recipes, (uint64_t)r.id, 0)) rc = FT_ENOMEM;
    if (!rc && !in_map && ft_hmap_put(&im->states, (uint64_t)skey, (uint32_t)im->n_rstates))
        rc = FT_ENOMEM;
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

/* Hand a checked call to the sink and remember its seq. */
static int put_call(importer *im, const ft_call *c)
{
    int rc = im->sink->call_fn ? im->sink->call_fn(im->sink->ctx, c) : FT_OK;
    if (rc) return fail_sink(im, rc, "call");
    if (ft_seqset_add(&im->calls, c->seq)) return fail_nomem(im);
    im->have_seq = 1;
    im->last_seq = c->seq;
    return FT_OK;
}

static int put_backward(importer *im, const ft_backward *b)
{
    int rc = im->sink->backward_fn ? im->sink->backward_fn(im->sink->ctx, b) : FT_OK;
    if (rc) return fail_sink(im, rc, "backward");
    im->have_seq = 1;
    im->last_seq = b->seq;
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
    char field[48];

    if ((rc = get_seq(im, o, &c.seq))) return rc;
    n_known++;
    if ((rc = get_int(im, o, "fuser", 1, 0, INT64_MAX, &c.fuser, NULL))) return rc;
    n_known++;
    uint32_t fi = ft_hmap_get(&im->fusers, (uint64_t)c.fuser);
    if (fi == UINT32_MAX) return fail(im, "fuser", "fuser %" PRId64 " is not declared", c.fuser);
    uint32_t n_ops = im->finfo[fi].n_ops, groups = im->finfo[fi].groups;

    json_t *r = json_object_get(o, "recipe");
    if (!r) return fail(im, "recipe", "missing (use null when quantization is disabled)");
    n_known++;
    if (!json_is_null(r)) {
        if (!json_is_integer(r))
            return fail(im, "recipe", "expected an integer or null, got %s", type_name(r));
        c.recipe = json_integer_value(r);
        if (ft_hmap_get(&im->recipes, (uint64_t)c.recipe) == UINT32_MAX)
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
        if (n > FT_LIM_SPLITS)
            return fail(im, "m_splits", "%zu entries, more than the limit %d", n, FT_LIM_SPLITS);
        int64_t sum = 0;
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
            if (x > INT64_MAX - sum)
                return fail(im, "m_splits", "the split sizes add up to more than %" PRId64,
                            INT64_MAX);
            sum += x;
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
    if (c.phase && (rc = check_bytes(im, "phase", strlen(c.phase), FT_LIM_PHASE_BYTES))) return rc;
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
    return put_call(im, &c);
}

static const char *const backward_known[] = {"t", "seq", "call", "ns", NULL};

static int do_backward(importer *im, json_t *o)
{
    int rc;
    ft_backward b;
    memset(&b, 0, sizeof b);
    if ((rc = get_seq(im, o, &b.seq))) return rc;
    if ((rc = get_int(im, o, "call", 1, 0, INT64_MAX, &b.call, NULL))) return rc;
    if (!ft_seqset_has(&im->calls, b.call))
        return fail(im, "call", "%" PRId64 " is not the seq of an earlier call record", b.call);
    if ((rc = get_int(im, o, "ns", 0, 0, INT64_MAX, &b.ns, &b.has_ns))) return rc;
    check_unknown(im, o, "backward", backward_known, count_present(o, backward_known));
    return put_backward(im, &b);
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

/* The fast path (json_fast.h): 1 when the line is a plain call or backward record that passes
 * every check of do_call / do_backward, handed to the sink with the outcome in *rc; 0 when the
 * general path must take it (nothing has happened then). The checks are do_call's and
 * do_backward's on values that the parser has already typed; their messages are the general
 * path's, which is why any failure here falls back to it rather than saying anything. */
static int fast_line(importer *im, const char *s, size_t len, int *rc)
{
    ft_jfast_rec f;
    if (!im->jf || !im->have_header || !ft_jfast_parse(im->jf, s, len, &f)) return 0;
    if (!(f.present & FT_JF_SEQ) || f.seq < 0 || (im->have_seq && f.seq <= im->last_seq)) return 0;
    if (f.kind == FT_JF_BACKWARD) {
        if (!(f.present & FT_JF_CALLREF) || f.call < 0 || !ft_seqset_has(&im->calls, f.call))
            return 0;
        if ((f.present & FT_JF_NS) && f.ns < 0) return 0;
        ft_backward b = {f.seq, f.call, (f.present & FT_JF_NS) != 0, f.ns};
        *rc = put_backward(im, &b);
        return 1;
    }
    const uint32_t need =
        FT_JF_FUSER | FT_JF_RECIPE | FT_JF_GRAD | FT_JF_INPUT_RG | FT_JF_OP_RG | FT_JF_DEVICE;
    if ((f.present & need) != need || f.fuser < 0 || f.device < 0 || f.device > INT32_MAX) return 0;
    uint32_t fi = ft_hmap_get(&im->fusers, (uint64_t)f.fuser);
    if (fi == UINT32_MAX || f.n_op_rg != im->finfo[fi].n_ops) return 0;
    ft_call c;
    memset(&c, 0, sizeof c);
    c.seq = f.seq;
    c.fuser = f.fuser;
    if (!f.recipe_null) {
        if (ft_hmap_get(&im->recipes, (uint64_t)f.recipe) == UINT32_MAX) return 0;
        c.recipe = f.recipe;
        c.flags |= FT_CF_HAS_RECIPE;
    }
    c.flags |= (f.grad ? FT_CF_GRAD : 0) | (f.input_rg ? FT_CF_INPUT_RG : 0);
    c.n_op_rg = f.n_op_rg;
    c.op_rg = f.op_rg;
    c.device = (int32_t)f.device;
    if (f.present & FT_JF_M_SPLITS) {
        uint32_t groups = im->finfo[fi].groups;
        if ((groups && f.n_splits != groups) || f.n_splits > FT_LIM_SPLITS) return 0;
        int64_t sum = 0;
        for (uint32_t i = 0; i < f.n_splits; i++) {
            int64_t x = f.m_splits[i];
            if (x < 0 || x > INT64_MAX - sum) return 0;
            sum += x;
        }
        c.flags |= FT_CF_HAS_SPLITS;
        c.n_splits = f.n_splits;
        c.m_splits = f.m_splits;
    }
    if (f.present & FT_JF_STEP) {
        if (f.step < 0) return 0;
        c.flags |= FT_CF_HAS_STEP;
        c.step = f.step;
    }
    if (f.present & FT_JF_MB) {
        if (f.mb < 0) return 0;
        c.flags |= FT_CF_HAS_MB;
        c.mb = f.mb;
    }
    if (f.present & FT_JF_PHASE) {
        if (f.phase_len > FT_LIM_PHASE_BYTES) return 0;
        c.flags |= FT_CF_HAS_PHASE;
        c.phase = f.phase;
    }
    if (f.present & FT_JF_GRAPH) c.flags |= FT_CF_HAS_GRAPH | (f.graph ? FT_CF_GRAPH : 0);
    if (f.present & FT_JF_NS) {
        if (f.ns < 0) return 0;
        c.flags |= FT_CF_HAS_NS;
        c.ns = f.ns;
    }
    if (f.present & FT_JF_FUSE_NS) {
        if (f.fuse_ns < 0) return 0;
        c.flags |= FT_CF_HAS_FUSE_NS;
        c.fuse_ns = f.fuse_ns;
    }
    if (f.present & FT_JF_REBUILT) c.flags |= FT_CF_HAS_REBUILT | (f.rebuilt ? FT_CF_REBUILT : 0);
    *rc = put_call(im, &c);
    return 1;
}

static int do_line(importer *im, const char *s, size_t len)
{
    if (len == 0) return fail(im, NULL, "empty line (every line must hold one JSON object)");
    const char *nul = memchr(s, '\0', len);
    if (nul) return fail(im, NULL, "column %zu: NUL byte", (size_t)(nul - s) + 1);
    int rc;
    if (fast_line(im, s, len, &rc)) return rc;

    json_error_t je;
    json_t *o = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) return parse_error(im, s, len, &je);
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

/* ---- input ------------------------------------------------------------------------------ */
/* A zstd frame (or a skippable frame) starts with one of these little-endian magic numbers. */
static int is_zstd(const uint8_t *p, size_t n)
{
    if (n < 4) return 0;
    uint32_t m = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return m == ZSTD_MAGICNUMBER || (m & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START;
}

/* A failure of the compressed stream, named by the line it was in. */
static int fail_zstd(importer *im, const char *what)
{
    return ft_err_set(im->err, FT_EINVAL, "%s:%" PRIu64 ": compressed input (zstd): %s", im->name,
                      im->line + 1, what);
}

static int fail_read(importer *im)
{
    return ft_err_set(im->err, FT_EIO, "%s: read error after line %" PRIu64 ": %s", im->name,
                      im->line, strerror(errno));
}

/* Decompress into buf[end, cap) until some bytes come out or the input ends (im->eof). At the end
 * of the compressed input, a frame still in progress is given the chance to flush what it holds
 * (its last output may not have fitted); one that then has nothing more is truncated. */
static int fill_zstd(importer *im)
{
    for (;;) {
        if (im->zin.pos == im->zin.size && !im->zeof) {
            size_t got = fread(im->zbuf, 1, im->zcap, im->in);
            if (got == 0) {
                if (ferror(im->in)) return fail_read(im);
                im->zeof = 1;
            }
            im->zin.src = im->zbuf;
            im->zin.size = got;
            im->zin.pos = 0;
        }
        int at_end = im->zin.pos == im->zin.size && im->zeof;
        if (at_end && im->zlast == 0) { /* the last frame ended: the stream is complete */
            im->eof = 1;
            return FT_OK;
        }
        ZSTD_outBuffer out = {im->buf + im->end, im->cap - im->end, 0};
        size_t r = ZSTD_decompressStream(im->zd, &out, &im->zin);
        if (ZSTD_isError(r)) return fail_zstd(im, ZSTD_getErrorName(r));
        im->zlast = r;
        im->end += out.pos;
        if (out.pos) return FT_OK;
        if (at_end && r != 0) return fail_zstd(im, "truncated (the stream ends inside a frame)");
    }
}

/* More bytes into buf[end, cap), or im->eof. */
static int fill(importer *im)
{
    if (im->zd) return fill_zstd(im);
    size_t got = fread(im->buf + im->end, 1, im->cap - im->end, im->in);
    im->end += got;
    if (got == 0) {
        if (ferror(im->in)) return fail_read(im);
        im->eof = 1;
    }
    return FT_OK;
}

/* Read the first bytes; a compressed stream moves them to the zstd input and decompresses. */
static int open_input(importer *im)
{
    size_t got = fread(im->buf, 1, im->cap, im->in);
    if (got == 0 && ferror(im->in)) return fail_read(im);
    if (!is_zstd((const uint8_t *)im->buf, got)) {
        im->end = got;
        if (got < im->cap) im->eof = feof(im->in) ? 1 : 0;
        return FT_OK;
    }
    im->zd = ZSTD_createDStream();
    im->zcap = ZSTD_DStreamInSize() > im->cap ? ZSTD_DStreamInSize() : im->cap;
    im->zbuf = ft_malloc(im->zcap);
    if (!im->zd || !im->zbuf) return fail_nomem(im);
    size_t r = ZSTD_initDStream(im->zd);
    if (ZSTD_isError(r)) return fail_zstd(im, ZSTD_getErrorName(r));
    memcpy(im->zbuf, im->buf, got);
    im->zin = (ZSTD_inBuffer){im->zbuf, got, 0};
    im->zlast = 1;
    im->zeof = got < im->cap && feof(im->in);
    return FT_OK;
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
            if (im->cap == FT_LIM_LINE_BYTES + 1) {
                im->line++;
                return fail(im, NULL, "line longer than %u bytes", FT_LIM_LINE_BYTES);
            }
            size_t cap = im->cap * 4 < FT_LIM_LINE_BYTES + 1 ? im->cap * 4 : FT_LIM_LINE_BYTES + 1;
            char *p = ft_realloc(im->buf, cap + FT_JFAST_PADDING);
            if (!p) return fail_nomem(im);
            im->buf = p;
            im->cap = cap;
        }
        int rc = fill(im);
        if (rc) return rc;
    }
}

int ft_jsonl_import_ex(FILE *in, const char *name, ft_sink *sink, FILE *warn, unsigned flags,
                       ft_err *err)
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
    im.buf = ft_malloc(im.cap + FT_JFAST_PADDING);
    if (!im.buf) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", im.name);
    if (!(flags & FT_JSONL_NO_FAST_PATH)) {
        im.jf = ft_jfast_new();
        if (!im.jf) {
            ft_free(im.buf);
            return ft_err_set(err, FT_ENOMEM, "%s: out of memory", im.name);
        }
    }

    int rc = open_input(&im);
    const char *s = NULL;
    size_t len = 0;
    while (!rc && (rc = next_line(&im, &s, &len)) == 1) {
        im.line++;
        rc = do_line(&im, s, len);
    }
    if (rc == 0 && !im.have_header)
        rc =
            ft_err_set(err, FT_EINVAL, "%s:1: field 't': no header record (empty stream)", im.name);

    ft_free(im.buf);
    ZSTD_freeDStream(im.zd);
    ft_free(im.zbuf);
    ft_jfast_free(im.jf);
    ft_hmap_free(&im.fusers);
    ft_free(im.finfo);
    ft_hmap_free(&im.recipes);
    ft_hmap_free(&im.states);
    for (size_t i = 0; i < im.n_rstates; i++)
        ft_free(im.rstates[i].attrs);
    ft_free(im.rstates);
    ft_seqset_free(&im.calls);
    ft_free(im.op_rg);
    ft_free(im.splits);
    for (size_t i = 0; i < im.n_warned; i++)
        ft_free(im.warned[i]);
    return rc;
}

int ft_jsonl_import(FILE *in, const char *name, ft_sink *sink, FILE *warn, ft_err *err)
{
    return ft_jsonl_import_ex(in, name, sink, warn, 0, err);
}
