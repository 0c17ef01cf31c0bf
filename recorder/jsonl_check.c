/*
 * jsonl_check.c - the capture-jsonl importer's validation (docs/capture-format.md): every field of
 * the five record types checked against the format, the declarations seen so far and the limits
 * of ft_limits.h, then handed to the sink; the fast path's records (json_fast.h) get the same
 * checks on values the parser has already typed. Reading and parsing the lines is
 * jsonl_import.c's.
 *
 * Every failure is FT_EINVAL (or the sink's own status) with "NAME:LINE: field 'x': what is
 * wrong" in err. Header fields that the format does not name are kept in ft_header.extra_json;
 * unknown fields of other records are ignored with one warning per (record type, field name).
 * Optional fields must be absent rather than null (null is accepted only where the format says
 * "or null"), so that export gives back exactly what was imported. Everything accepted is within
 * the limits of ft_limits.h, so it records, verifies, exports and re-imports.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_limits.h"
#include "jsonl_import_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------------------------- */
/* A sink rejected a record: keep its status, prefix its detail with where we are. */
static int fail_sink(importer *im, int rc, const char *what)
{
    const ft_err *se = im->sink->error_fn ? im->sink->error_fn(im->sink->ctx) : NULL;
    const char *detail = se && se->msg[0] ? se->msg : ft_strerror(rc);
    return ft_err_set(im->err, rc, "%s:%" PRIu64 ": %s rejected by the output: %s", im->name,
                      im->line, what, detail);
}

const char *imp_type_name(const json_t *v)
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

/* ---- field accessors ---------------------------------------------------------------------- */
/* Each returns FT_OK, or FT_EINVAL with the message set. `present` (may be NULL for required
 * fields) reports whether an optional field was there. */

static int get_int(importer *im, const json_t *obj, const char *key, int required, int64_t min,
                   int64_t max, int64_t *out, int *present)
{
    json_t *v = json_object_get(obj, key);
    if (present) *present = v != NULL;
    if (!v) return required ? imp_fail(im, key, "missing") : FT_OK;
    if (!json_is_integer(v))
        return imp_fail(im, key, "expected an integer, got %s", imp_type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < min || x > max)
        return imp_fail(im, key,
                        "%" JSON_INTEGER_FORMAT " is out of range [%" PRId64 ", %" PRId64 "]", x,
                        min, max);
    *out = (int64_t)x;
    return FT_OK;
}

static int get_bool(importer *im, const json_t *obj, const char *key, int required, int *out,
                    int *present)
{
    json_t *v = json_object_get(obj, key);
    if (present) *present = v != NULL;
    if (!v) return required ? imp_fail(im, key, "missing") : FT_OK;
    if (!json_is_boolean(v))
        return imp_fail(im, key, "expected true or false, got %s", imp_type_name(v));
    *out = json_is_true(v);
    return FT_OK;
}

static int get_str(importer *im, const json_t *obj, const char *key, int required, int nonempty,
                   const char **out)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v) return required ? imp_fail(im, key, "missing") : FT_OK;
    if (!json_is_string(v)) return imp_fail(im, key, "expected a string, got %s", imp_type_name(v));
    if (nonempty && json_string_length(v) == 0) return imp_fail(im, key, "must not be empty");
    *out = json_string_value(v);
    return FT_OK;
}

/* A text field within its limit in bytes (ft_limits.h). */
static int check_bytes(importer *im, const char *field, size_t n, size_t limit)
{
    if (n > limit) return imp_fail(im, field, "%zu bytes, more than the limit %zu", n, limit);
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

/* ---- records ------------------------------------------------------------------------------ */
static const char *const header_known[] = {
    "t",          "format",     "version", "te_version", "torch_version", "host", "rank",
    "world_size", "started_at", "env",     NULL};

/* te_fusions (kept with the fields the format does not name): TE's registered fusion functions
 * per pass, {"forward_backward": [name, ...], "forward": [...], "backward": [...]}. */
static int check_te_fusions(importer *im, const json_t *reg)
{
    static const char *const passes[] = {"forward_backward", "forward", "backward"};
    if (!reg) return FT_OK;
    if (!json_is_object(reg))
        return imp_fail(im, "te_fusions", "expected an object, got %s", imp_type_name(reg));
    for (size_t p = 0; p < FT_ARRAY_LEN(passes); p++) {
        char f[64];
        snprintf(f, sizeof f, "te_fusions.%s", passes[p]);
        const json_t *list = json_object_get(reg, passes[p]);
        if (!list) return imp_fail(im, f, "missing");
        if (!json_is_array(list))
            return imp_fail(im, f, "expected an array, got %s", imp_type_name(list));
        for (size_t i = 0; i < json_array_size(list); i++) {
            const json_t *name = json_array_get(list, i);
            if (!json_is_string(name) || !*json_string_value(name)) {
                snprintf(f, sizeof f, "te_fusions.%s[%zu]", passes[p], i);
                return imp_fail(im, f, "expected a function name, got %s",
                                json_is_string(name) ? "an empty string" : imp_type_name(name));
            }
        }
    }
    return FT_OK;
}

int imp_header(importer *im, json_t *o)
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
        return imp_fail(im, "format", "expected \"fusertrace-capture\", got \"%.64s\"", format);
    json_t *vv = json_object_get(o, "version");
    if (!vv) return imp_fail(im, "version", "missing");
    if (!json_is_integer(vv))
        return imp_fail(im, "version", "expected an integer, got %s", imp_type_name(vv));
    version = json_integer_value(vv);
    if (version != 1)
        return imp_fail(im, "version", "unsupported version %" PRId64 " (this build reads 1)",
                        version);
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
        return imp_fail(im, "rank", "%" PRId64 " is not below world_size %" PRId64, h.rank,
                        h.world_size);

    json_t *e = json_object_get(o, "env");
    if (e) {
        if (!json_is_object(e))
            return imp_fail(im, "env", "expected an object, got %s", imp_type_name(e));
        const char *key;
        json_t *v;
        json_object_foreach(e, key, v)
        {
            /* TE reads os.environ (strings); captures also write numbers, and null for what the
             * process did not have (cudnn_frontend not installed, no CUDA device) */
            if (!json_is_string(v) && !json_is_number(v) && !json_is_null(v)) {
                char f[96];
                snprintf(f, sizeof f, "env.%.80s", key);
                return imp_fail(im, f, "expected a string, a number or null, got %s",
                                imp_type_name(v));
            }
        }
    }
    if ((rc = check_te_fusions(im, json_object_get(o, "te_fusions")))) return rc;

    /* header fields the format does not name are kept in extra_json */
    extra_obj = json_object();
    if (!extra_obj) return imp_fail_nomem(im);
    {
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v)
        {
            size_t k = 0;
            while (header_known[k] && strcmp(header_known[k], key))
                k++;
            if (!header_known[k] && json_object_set(extra_obj, key, v)) {
                rc = imp_fail_nomem(im);
                goto out;
            }
        }
    }
    env = e ? dump_canonical(e) : NULL; /* an absent env is the empty object */
    extra = dump_canonical(extra_obj);
    if ((e && !env) || !extra) {
        rc = imp_fail_nomem(im);
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

static const char *const fuser_known[] = {"t", "id", "label", "ops", "of", NULL};

int imp_fuser(importer *im, json_t *o)
{
    int rc;
    ft_fuser_def f;
    memset(&f, 0, sizeof f);
    if ((rc = get_int(im, o, "id", 1, 0, INT64_MAX, &f.id, NULL))) return rc;
    if ((rc = imp_fuser_check_id(im, f.id))) return rc;
    if ((rc = get_str(im, o, "label", 0, 0, &f.label))) return rc;
    if (f.label && (rc = check_bytes(im, "label", strlen(f.label), FT_LIM_LABEL_BYTES))) return rc;
    json_t *ops = json_object_get(o, "ops");
    if (!ops) return imp_fail(im, "ops", "missing");
    if (!json_is_array(ops))
        return imp_fail(im, "ops", "expected an array, got %s", imp_type_name(ops));
    size_t n = json_array_size(ops);
    uint32_t groups = 0; /* num_groups shared by the grouped ops, 0 if none (or they differ) */
    int mixed = 0;
    if (n == 0) return imp_fail(im, "ops", "must hold at least one op");
    if (n > FT_LIM_OPS)
        return imp_fail(im, "ops", "%zu ops, more than the limit %d", n, FT_LIM_OPS);
    for (size_t i = 0; i < n; i++) {
        json_t *op = json_array_get(ops, i);
        char field[48];
        if (!json_is_object(op)) {
            snprintf(field, sizeof field, "ops[%zu]", i);
            return imp_fail(im, field, "expected an object, got %s", imp_type_name(op));
        }
        json_t *t = json_object_get(op, "type");
        snprintf(field, sizeof field, "ops[%zu].type", i);
        if (!t) return imp_fail(im, field, "missing");
        if (!json_is_string(t))
            return imp_fail(im, field, "expected a string, got %s", imp_type_name(t));
        if (json_string_length(t) == 0) return imp_fail(im, field, "must not be empty");
        json_t *a = json_object_get(op, "attrs");
        if (a && !json_is_object(a)) {
            snprintf(field, sizeof field, "ops[%zu].attrs", i);
            return imp_fail(im, field, "expected an object, got %s", imp_type_name(a));
        }
        json_t *g = a ? json_object_get(a, "num_groups") : NULL;
        if (g) {
            snprintf(field, sizeof field, "ops[%zu].attrs.num_groups", i);
            if (!json_is_integer(g))
                return imp_fail(im, field, "expected an integer, got %s", imp_type_name(g));
            json_int_t v = json_integer_value(g);
            if (v < 1 || v > INT32_MAX)
                return imp_fail(im, field, "%" JSON_INTEGER_FORMAT " is out of range [1, %d]", v,
                                INT32_MAX);
            if (groups == 0)
                groups = (uint32_t)v;
            else if (groups != (uint32_t)v)
                mixed = 1;
        }
    }
    if (mixed) groups = 0; /* grouped ops disagree: m_splits lengths are not checked */
    /* of: the same OperationFuser instance as an earlier fuser, its op attributes changed */
    if ((rc = get_int(im, o, "of", 0, 0, INT64_MAX, &f.of, &f.has_of))) return rc;
    if (f.has_of) {
        fuser_info fo;
        if (!imp_fuser_live(im, f.of, &fo))
            return imp_fuser_declared(im, f.of)
                       ? imp_fuser_missing(im, "of", f.of)
                       : imp_fail(im, "of", "fuser %" PRId64 " is not declared before", f.of);
        if (fo.n_ops != n)
            return imp_fail(im, "of",
                            "fuser %" PRId64 " has %u ops, this one %zu (an instance keeps its "
                            "ops; only their attributes change)",
                            f.of, fo.n_ops, n);
    }
    const size_t n_present = count_present(o, fuser_known);
    check_unknown(im, o, "fuser", fuser_known, n_present);

    char *ops_json = dump_canonical(ops);
    if (!ops_json) return imp_fail_nomem(im);
    if ((rc = check_bytes(im, "ops", strlen(ops_json), FT_LIM_OPS_BYTES))) {
        free_dump(ops_json);
        return rc;
    }
    f.ops_json = ops_json;
    f.n_ops = (uint32_t)n;
    rc = imp_fuser_put(im, &f, groups);
    /* a line without unknown fields serves the next one that differs only in its id */
    if (!rc && json_object_size(o) == n_present)
        imp_fuser_cache(im, im->cur, im->cur_len, &f, groups);
    free_dump(ops_json);
    return rc;
}

static const char *const recipe_known[] = {"t", "id", "type", "obj", "attrs", NULL};

int imp_recipe(importer *im, json_t *o)
{
    int rc;
    ft_recipe_def r;
    memset(&r, 0, sizeof r);
    if ((rc = get_int(im, o, "id", 1, 0, INT64_MAX, &r.id, NULL))) return rc;
    if (ft_hmap_get(&im->recipes, (uint64_t)r.id) != UINT32_MAX)
        return imp_fail(im, "id", "recipe %" PRId64 " is already declared", r.id);
    if (im->n_rstates == FT_LIM_RECIPES)
        return imp_fail(im, "id", "more than %u recipe states declared (the limit)",
                        FT_LIM_RECIPES);
    if ((rc = get_str(im, o, "type", 1, 1, &r.type))) return rc;
    if ((rc = check_bytes(im, "type", strlen(r.type), FT_LIM_TYPE_BYTES))) return rc;
    if ((rc = get_int(im, o, "obj", 1, INT64_MIN, INT64_MAX, &r.obj, NULL))) return rc;
    json_t *a = json_object_get(o, "attrs");
    if (!a) return imp_fail(im, "attrs", "missing");
    if (!json_is_object(a))
        return imp_fail(im, "attrs", "expected an object, got %s", imp_type_name(a));
    check_unknown(im, o, "recipe", recipe_known, count_present(o, recipe_known));

    char *attrs = dump_canonical(a);
    if (!attrs) return imp_fail_nomem(im);
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
            return imp_fail(im, "attrs",
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
            return imp_fail_nomem(im);
        }
        im->rstates = p;
        im->cap_rstates = cap;
    }
    char *copy = ft_strdup(attrs);
    if (!copy) {
        free_dump(attrs);
        return imp_fail_nomem(im);
    }
    r.attrs_json = attrs;
    rc = im->sink->recipe_fn ? im->sink->recipe_fn(im->sink->ctx, &r) : FT_OK;
    free_dump(attrs);
    if (!rc && ft_hmap_put(&im->recipes, (uint64_t)r.id, 0)) rc = FT_ENOMEM;
    if (!rc && !in_map && ft_hmap_put(&im->states, (uint64_t)skey, (uint32_t)im->n_rstates))
        rc = FT_ENOMEM;
    if (rc) {
        ft_free(copy);
        return rc == FT_ENOMEM ? imp_fail_nomem(im) : fail_sink(im, rc, "recipe");
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
        return imp_fail(im, "seq",
                        "%" PRId64 " does not increase (previous record had %" PRId64 ")", *seq,
                        im->last_seq);
    return FT_OK;
}

static int grow(importer *im, void **p, size_t *cap, size_t n, size_t elem)
{
    if (n <= *cap) return FT_OK;
    size_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    void *q = ft_realloc(*p, c * elem);
    if (!q) return imp_fail_nomem(im);
    *p = q;
    *cap = c;
    return FT_OK;
}

/* Hand a checked call to the sink and remember its seq. */
static int put_call(importer *im, const ft_call *c)
{
    int rc = im->sink->call_fn ? im->sink->call_fn(im->sink->ctx, c) : FT_OK;
    if (rc) return fail_sink(im, rc, "call");
    if (ft_seqset_add(&im->calls, c->seq)) return imp_fail_nomem(im);
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

int imp_call(importer *im, json_t *o)
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
    fuser_info fo;
    if (!imp_fuser_live(im, c.fuser, &fo)) return imp_fuser_missing(im, "fuser", c.fuser);
    uint32_t n_ops = fo.n_ops, groups = fo.groups;

    json_t *r = json_object_get(o, "recipe");
    if (!r) return imp_fail(im, "recipe", "missing (use null when quantization is disabled)");
    n_known++;
    if (!json_is_null(r)) {
        if (!json_is_integer(r))
            return imp_fail(im, "recipe", "expected an integer or null, got %s", imp_type_name(r));
        c.recipe = json_integer_value(r);
        if (ft_hmap_get(&im->recipes, (uint64_t)c.recipe) == UINT32_MAX)
            return imp_fail(im, "recipe", "recipe %" PRId64 " is not declared", c.recipe);
        c.flags |= FT_CF_HAS_RECIPE;
    }
    if ((rc = get_bool(im, o, "grad", 1, &b, NULL))) return rc;
    n_known++;
    if (b) c.flags |= FT_CF_GRAD;
    if ((rc = get_bool(im, o, "input_rg", 1, &b, NULL))) return rc;
    n_known++;
    if (b) c.flags |= FT_CF_INPUT_RG;

    json_t *rg = json_object_get(o, "op_rg");
    if (!rg) return imp_fail(im, "op_rg", "missing");
    n_known++;
    if (!json_is_array(rg))
        return imp_fail(im, "op_rg", "expected an array, got %s", imp_type_name(rg));
    size_t n_rg = json_array_size(rg);
    if (n_rg != n_ops)
        return imp_fail(im, "op_rg", "has %zu entries but fuser %" PRId64 " has %" PRIu32 " ops",
                        n_rg, c.fuser, n_ops);
    if ((rc = grow(im, (void **)&im->op_rg, &im->cap_op_rg, n_rg, 1))) return rc;
    for (size_t i = 0; i < n_rg; i++) {
        json_t *v = json_array_get(rg, i);
        if (!json_is_boolean(v)) {
            snprintf(field, sizeof field, "op_rg[%zu]", i);
            return imp_fail(im, field, "expected true or false, got %s", imp_type_name(v));
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
            return imp_fail(im, "m_splits", "expected an array, got %s", imp_type_name(ms));
        size_t n = json_array_size(ms);
        if (groups && n != groups)
            return imp_fail(im, "m_splits",
                            "has %zu entries but fuser %" PRId64 " has num_groups %" PRIu32, n,
                            c.fuser, groups);
        if (n > FT_LIM_SPLITS)
            return imp_fail(im, "m_splits", "%zu entries, more than the limit %d", n,
                            FT_LIM_SPLITS);
        int64_t sum = 0;
        if ((rc = grow(im, (void **)&im->splits, &im->cap_splits, n, sizeof(int64_t)))) return rc;
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(ms, i);
            if (!json_is_integer(v)) {
                snprintf(field, sizeof field, "m_splits[%zu]", i);
                return imp_fail(im, field, "expected an integer, got %s", imp_type_name(v));
            }
            json_int_t x = json_integer_value(v);
            if (x < 0) {
                snprintf(field, sizeof field, "m_splits[%zu]", i);
                return imp_fail(im, field, "negative split %" JSON_INTEGER_FORMAT, x);
            }
            if (x > INT64_MAX - sum)
                return imp_fail(im, "m_splits", "the split sizes add up to more than %" PRId64,
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

int imp_backward(importer *im, json_t *o)
{
    int rc;
    ft_backward b;
    memset(&b, 0, sizeof b);
    if ((rc = get_seq(im, o, &b.seq))) return rc;
    if ((rc = get_int(im, o, "call", 1, 0, INT64_MAX, &b.call, NULL))) return rc;
    if (!ft_seqset_has(&im->calls, b.call))
        return imp_fail(im, "call", "%" PRId64 " is not the seq of an earlier call record", b.call);
    if ((rc = get_int(im, o, "ns", 0, 0, INT64_MAX, &b.ns, &b.has_ns))) return rc;
    check_unknown(im, o, "backward", backward_known, count_present(o, backward_known));
    return put_backward(im, &b);
}

static const char *const end_known[] = {"t", "seq", "fuser", NULL};

int imp_fuser_end(importer *im, json_t *o)
{
    ft_fuser_end e;
    int rc = get_seq(im, o, &e.seq);
    if (!rc) rc = get_int(im, o, "fuser", 1, 0, INT64_MAX, &e.fuser, NULL);
    if (rc) return rc;
    if (!imp_fuser_live(im, e.fuser, NULL)) return imp_fuser_missing(im, "fuser", e.fuser);
    check_unknown(im, o, "fuser_end", end_known, count_present(o, end_known));
    return imp_fuser_put_end(im, &e);
}

/* ---- the fast path ------------------------------------------------------------------------ */
/* The checks are imp_call's and imp_backward's on values that the parser has already typed; their
 * messages are the general path's, which is why any failure here falls back to it rather than
 * saying anything. */
int imp_fast_record(importer *im, const ft_jfast_rec *f, int *rc)
{
    if (!(f->present & FT_JF_SEQ) || f->seq < 0 || (im->have_seq && f->seq <= im->last_seq))
        return 0;
    if (f->kind == FT_JF_END) {
        if (!(f->present & FT_JF_FUSER) || !imp_fuser_live(im, f->fuser, NULL)) return 0;
        const ft_fuser_end e = {f->seq, f->fuser};
        *rc = imp_fuser_put_end(im, &e);
        return 1;
    }
    if (f->kind == FT_JF_BACKWARD) {
        if (!(f->present & FT_JF_CALLREF) || f->call < 0 || !ft_seqset_has(&im->calls, f->call))
            return 0;
        if ((f->present & FT_JF_NS) && f->ns < 0) return 0;
        ft_backward b = {f->seq, f->call, (f->present & FT_JF_NS) != 0, f->ns};
        *rc = put_backward(im, &b);
        return 1;
    }
    const uint32_t need =
        FT_JF_FUSER | FT_JF_RECIPE | FT_JF_GRAD | FT_JF_INPUT_RG | FT_JF_OP_RG | FT_JF_DEVICE;
    if ((f->present & need) != need || f->fuser < 0 || f->device < 0 || f->device > INT32_MAX)
        return 0;
    fuser_info fo;
    if (!imp_fuser_live(im, f->fuser, &fo) || f->n_op_rg != fo.n_ops) return 0;
    ft_call c;
    memset(&c, 0, sizeof c);
    c.seq = f->seq;
    c.fuser = f->fuser;
    if (!f->recipe_null) {
        if (ft_hmap_get(&im->recipes, (uint64_t)f->recipe) == UINT32_MAX) return 0;
        c.recipe = f->recipe;
        c.flags |= FT_CF_HAS_RECIPE;
    }
    c.flags |= (f->grad ? FT_CF_GRAD : 0) | (f->input_rg ? FT_CF_INPUT_RG : 0);
    c.n_op_rg = f->n_op_rg;
    c.op_rg = f->op_rg;
    c.device = (int32_t)f->device;
    if (f->present & FT_JF_M_SPLITS) {
        uint32_t groups = fo.groups;
        if ((groups && f->n_splits != groups) || f->n_splits > FT_LIM_SPLITS) return 0;
        int64_t sum = 0;
        for (uint32_t i = 0; i < f->n_splits; i++) {
            int64_t x = f->m_splits[i];
            if (x < 0 || x > INT64_MAX - sum) return 0;
            sum += x;
        }
        c.flags |= FT_CF_HAS_SPLITS;
        c.n_splits = f->n_splits;
        c.m_splits = f->m_splits;
    }
    if (f->present & FT_JF_STEP) {
        if (f->step < 0) return 0;
        c.flags |= FT_CF_HAS_STEP;
        c.step = f->step;
    }
    if (f->present & FT_JF_MB) {
        if (f->mb < 0) return 0;
        c.flags |= FT_CF_HAS_MB;
        c.mb = f->mb;
    }
    if (f->present & FT_JF_PHASE) {
        if (f->phase_len > FT_LIM_PHASE_BYTES) return 0;
        c.flags |= FT_CF_HAS_PHASE;
        c.phase = f->phase;
    }
    if (f->present & FT_JF_GRAPH) c.flags |= FT_CF_HAS_GRAPH | (f->graph ? FT_CF_GRAPH : 0);
    if (f->present & FT_JF_NS) {
        if (f->ns < 0) return 0;
        c.flags |= FT_CF_HAS_NS;
        c.ns = f->ns;
    }
    if (f->present & FT_JF_FUSE_NS) {
        if (f->fuse_ns < 0) return 0;
        c.flags |= FT_CF_HAS_FUSE_NS;
        c.fuse_ns = f->fuse_ns;
    }
    if (f->present & FT_JF_REBUILT) c.flags |= FT_CF_HAS_REBUILT | (f->rebuilt ? FT_CF_REBUILT : 0);
    *rc = put_call(im, &c);
    return 1;
}
