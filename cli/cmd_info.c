/*
 * cmd_info.c - `fusertrace info TRACE [--json]`: what a trace holds. The small tables give the
 * header, fusers, op lists and recipes; one pass over the chunks (split sizes not decoded) gives
 * per-device, per-step, per-phase and per-recipe counts, the time span and the fuse time; the
 * chunk index and the file give the sizes.
 *
 * Exact and linear: every list is complete (no row cap), grouping goes through hash maps
 * (common/ft_hmap.h; string keys by their XXH3 with the string compared, a collision moving on
 * to the next seed), and totals that could exceed 64 bits (tokens, fuse time) are summed in 128
 * bits: JSON gives them as integers when they fit in int64, else as exact decimal strings.
 */
#include "cli.h"
#include "ft_hmap.h"
#include "ft_trace.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* ---- 128-bit sums --------------------------------------------------------------------------- */
typedef struct u128 {
    uint64_t hi, lo;
} u128;

static void u128_add(u128 *a, uint64_t v)
{
    a->lo += v;
    if (a->lo < v) a->hi++;
}

/* Decimal text of a (at most 40 digits). */
static void u128_str(u128 a, char out[48])
{
    char tmp[48];
    int n = 0;
    do {
        /* divide (hi, lo) by 10: hi first, then the remainder with lo in 32-bit halves */
        uint64_t r = a.hi % 10;
        a.hi /= 10;
        uint64_t x = (r << 32) | (a.lo >> 32);
        uint64_t q1 = x / 10;
        r = x % 10;
        x = (r << 32) | (a.lo & 0xffffffffu);
        uint64_t q0 = x / 10;
        r = x % 10;
        a.lo = (q1 << 32) | q0;
        tmp[n++] = (char)('0' + r);
    } while (a.hi || a.lo);
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
}

static double u128_double(u128 a)
{
    return (double)a.hi * 18446744073709551616.0 + (double)a.lo;
}

/* An exact JSON value: an integer when it fits int64, else a decimal string. */
static json_t *u128_json(u128 a)
{
    if (!a.hi && a.lo <= INT64_MAX) return json_integer((json_int_t)a.lo);
    char s[48];
    u128_str(a, s);
    return json_string(s);
}

/* ---- string interning over ft_hmap ---------------------------------------------------------- */
/* Index of the string equal to s among strs[0..*n), adding it when new (*is_new). The map holds
 * hash -> index; a hash whose string differs moves to the next seed. UINT32_MAX: no memory. */
typedef struct str_set {
    ft_hmap map;
    const char **strs; /* [n] borrowed */
    uint32_t n, cap;
} str_set;

static uint32_t str_set_find(str_set *s, const char *str, size_t len, int *is_new)
{
    uint64_t h = ft_hash64(str, len);
    *is_new = 0;
    for (uint64_t seed = 0;; seed++) {
        uint64_t k = ft_hash_mix(h, seed);
        uint32_t v = ft_hmap_get(&s->map, k);
        if (v == UINT32_MAX) {
            if (s->n == s->cap) {
                uint32_t c = s->cap ? s->cap * 2 : 64;
                const char **q = ft_realloc(s->strs, (size_t)c * sizeof *q);
                if (!q) return UINT32_MAX;
                s->strs = q;
                s->cap = c;
            }
            if (ft_hmap_put(&s->map, k, s->n)) return UINT32_MAX;
            s->strs[s->n] = str;
            *is_new = 1;
            return s->n++;
        }
        if (!strcmp(s->strs[v], str)) return v;
    }
}

static void str_set_free(str_set *s)
{
    ft_hmap_free(&s->map);
    ft_free(s->strs);
    memset(s, 0, sizeof *s);
}

/* ---- the pass over the chunks --------------------------------------------------------------- */
typedef struct phase_count {
    char *name;
    uint64_t n;
} phase_count;

typedef struct stats {
    uint64_t calls, bwd, grad, with_splits, rebuilt_known, rebuilt, graph, no_recipe;
    uint64_t ends, compact; /* fuser ends; compact instances (a transient fuser per call) */
    u128 tokens;
    uint64_t *fuser_calls;   /* [n_fusers] (a compact instance's counted to its template) */
    uint64_t *fuser_compact; /* [n_fusers] compact instances of each row (its template) */
    uint64_t *recipe_calls;  /* [n_recipes] */
    ft_hmap devices;         /* device -> index into dev_* */
    int32_t *dev_id;         /* [n_dev] */
    uint64_t *dev_n;         /* [n_dev] */
    uint32_t n_dev, dev_cap;
    ft_hmap steps, mbs; /* distinct values (value -> 1) */
    int has_step;
    int64_t step_min, step_max;
    str_set phase_set;   /* phase name -> index into phases */
    phase_count *phases; /* [phase_set.n] */
    uint32_t phase_cap;
    uint32_t *bmap; /* [batch n_phases] batch phase index -> phases index */
    uint32_t bmap_cap;
    uint64_t no_phase;
    int has_ns;
    int64_t ns_min, ns_max;
    uint64_t fuse_ns_n;
    u128 fuse_ns_pos, fuse_ns_neg; /* sums of the positive values and of the negatives' sizes */
} stats;

static int add_device(stats *s, int32_t dev, uint32_t *out)
{
    uint32_t d = ft_hmap_get(&s->devices, (uint64_t)(int64_t)dev);
    if (d == UINT32_MAX) {
        if (s->n_dev == s->dev_cap) {
            uint32_t c = s->dev_cap ? s->dev_cap * 2 : 16;
            int32_t *a = ft_realloc(s->dev_id, (size_t)c * sizeof *a);
            if (!a) return FT_ENOMEM;
            s->dev_id = a;
            uint64_t *b = ft_realloc(s->dev_n, (size_t)c * sizeof *b);
            if (!b) return FT_ENOMEM;
            s->dev_n = b;
            s->dev_cap = c;
        }
        d = s->n_dev;
        if (ft_hmap_put(&s->devices, (uint64_t)(int64_t)dev, d)) return FT_ENOMEM;
        s->dev_id[d] = dev;
        s->dev_n[d] = 0;
        s->n_dev++;
    }
    *out = d;
    return FT_OK;
}

/* Map this batch's phase dictionary onto the trace-wide phase list. */
static int map_phases(stats *s, const ft_batch *b)
{
    if (b->n_phases > s->bmap_cap) {
        uint32_t *q = ft_realloc(s->bmap, (size_t)b->n_phases * sizeof *q);
        if (!q) return FT_ENOMEM;
        s->bmap = q;
        s->bmap_cap = b->n_phases;
    }
    for (uint32_t i = 0; i < b->n_phases; i++) {
        int is_new;
        uint32_t k = str_set_find(&s->phase_set, b->phases[i], strlen(b->phases[i]), &is_new);
        if (k == UINT32_MAX) return FT_ENOMEM;
        if (is_new) {
            char *name = ft_strdup(b->phases[i]);
            if (!name) return FT_ENOMEM;
            s->phase_set.strs[k] = name; /* the batch's string dies with the batch */
            if (k == s->phase_cap) {
                uint32_t c = s->phase_cap ? s->phase_cap * 2 : 64;
                phase_count *p = ft_realloc(s->phases, (size_t)c * sizeof *p);
                if (!p) {
                    ft_free(name);
                    s->phase_set.n--; /* keep the set and the list in step for the free */
                    return FT_ENOMEM;
                }
                s->phases = p;
                s->phase_cap = c;
            }
            s->phases[k] = (phase_count){name, 0};
        }
        s->bmap[i] = k;
    }
    return FT_OK;
}

static int gather(ft_trace *t, const char *path, stats *s, ft_err *err)
{
    ft_reader *r = NULL;
    int rc = ft_reader_open(t, FT_READ_CHECK_SPLITS, &r);
    if (rc) {
        *err = *ft_trace_error(t);
        return rc;
    }
    const ft_batch *b;
    while (!(rc = ft_reader_next(r, &b)) && b) {
        if ((rc = map_phases(s, b))) break;
        for (uint32_t i = 0; i < b->n && !rc; i++) {
            uint32_t fl = b->flags[i];
            if (fl & FT_CF_HAS_NS) {
                if (!s->has_ns || b->ns[i] < s->ns_min) s->ns_min = b->ns[i];
                if (!s->has_ns || b->ns[i] > s->ns_max) s->ns_max = b->ns[i];
                s->has_ns = 1;
            }
            if (b->kind[i] != FT_REC_CALL) {
                if (b->kind[i] == FT_REC_BACKWARD)
                    s->bwd++;
                else
                    s->ends++;
                continue;
            }
            s->calls++;
            s->fuser_calls[b->fuser[i]]++;
            if (fl & FT_CF_NEW_FUSER) {
                s->compact++;
                s->fuser_compact[b->fuser[i]]++;
            }
            if (b->recipe[i] >= 0)
                s->recipe_calls[b->recipe[i]]++;
            else
                s->no_recipe++;
            if (fl & FT_CF_GRAD) s->grad++;
            if (fl & FT_CF_HAS_SPLITS) {
                s->with_splits++;
                u128_add(&s->tokens, (uint64_t)b->n_tokens[i]);
            }
            if (fl & FT_CF_HAS_REBUILT) {
                s->rebuilt_known++;
                if (fl & FT_CF_REBUILT) s->rebuilt++;
            }
            if ((fl & FT_CF_HAS_GRAPH) && (fl & FT_CF_GRAPH)) s->graph++;
            if (fl & FT_CF_HAS_FUSE_NS) {
                int64_t v = b->fuse_ns[i];
                s->fuse_ns_n++;
                if (v >= 0)
                    u128_add(&s->fuse_ns_pos, (uint64_t)v);
                else
                    u128_add(&s->fuse_ns_neg, 0 - (uint64_t)v);
            }
            uint32_t d;
            if ((rc = add_device(s, b->device[i], &d))) break;
            s->dev_n[d]++;
            if (fl & FT_CF_HAS_STEP) {
                if (!s->has_step || b->step[i] < s->step_min) s->step_min = b->step[i];
                if (!s->has_step || b->step[i] > s->step_max) s->step_max = b->step[i];
                s->has_step = 1;
                if ((rc = ft_hmap_put(&s->steps, (uint64_t)b->step[i], 1))) break;
            }
            if ((fl & FT_CF_HAS_MB) && (rc = ft_hmap_put(&s->mbs, (uint64_t)b->mb[i], 1))) break;
            if (fl & FT_CF_HAS_PHASE)
                s->phases[s->bmap[b->phase[i]]].n++;
            else
                s->no_phase++;
        }
        if (rc) break;
    }
    if (rc == FT_ENOMEM)
        ft_err_set(err, rc, "%s: out of memory", path);
    else if (rc)
        *err = *ft_trace_error(t);
    ft_reader_close(r);
    return rc;
}

/* Span max - min in ns, exact (the difference of two int64 fits in uint64). */
static uint64_t span_ns(int64_t lo, int64_t hi)
{
    return (uint64_t)hi - (uint64_t)lo;
}

/* Mean fuse time in ns (0 when none). */
static double fuse_mean(const stats *s)
{
    if (!s->fuse_ns_n) return 0.0;
    return (u128_double(s->fuse_ns_pos) - u128_double(s->fuse_ns_neg)) / (double)s->fuse_ns_n;
}

/* The exact total fuse time as text (negative when the negatives outweigh). */
static void fuse_total_str(const stats *s, char out[52])
{
    u128 p = s->fuse_ns_pos, n = s->fuse_ns_neg;
    int neg = p.hi < n.hi || (p.hi == n.hi && p.lo < n.lo);
    u128 a = neg ? n : p, b = neg ? p : n, d;
    d.lo = a.lo - b.lo;
    d.hi = a.hi - b.hi - (a.lo < b.lo);
    out[0] = '-';
    u128_str(d, out + neg);
}

static json_t *fuse_total_json(const stats *s)
{
    char buf[52];
    fuse_total_str(s, buf);
    int64_t v;
    if (!ft_parse_i64(buf, &v)) return json_integer(v);
    return json_string(buf);
}

/* "GroupedLinear > ScaledSwiGLU > GroupedLinear" for an op list, whole. */
static char *describe_ops(const char *ops_json)
{
    ft_buf b = {0};
    json_t *j = json_loads(ops_json, 0, NULL);
    for (size_t i = 0; j && i < json_array_size(j); i++) {
        const char *ty = json_string_value(json_object_get(json_array_get(j, i), "type"));
        ft_buf_printf(&b, "%s%s", i ? " > " : "", ty ? ty : "?");
    }
    if (!j || json_array_size(j) == 0) ft_buf_printf(&b, "(no ops)");
    json_decref(j);
    if (ft_buf_append(&b, "", 1)) {
        ft_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

/* ---- grouping the small tables ------------------------------------------------------------ */
typedef struct type_row {
    const char *type;
    uint32_t variants, objects;
    uint64_t calls;
} type_row;

typedef struct oplist_row {
    const char *ops;
    char *desc;
    uint64_t fusers; /* rows and compact instances */
    uint64_t calls;
} oplist_row;

typedef struct groups {
    type_row *tr;
    uint32_t n_tr;
    oplist_row *orows;
    uint32_t n_or;
} groups;

/* Recipe types with their distinct attribute sets (variants) and objects; fusers by op list
 * (fusers of one op list share its text, so the text's address is the key). */
static int info_group(ft_trace *t, const stats *s, groups *g)
{
    uint32_t nr = ft_trace_n_recipes(t), nf = ft_trace_n_fusers(t);
    str_set types = {0}, variants = {0};
    ft_hmap objects = {0}, lists = {0};
    ft_buf key = {0};
    int rc = FT_ENOMEM;
    g->tr = ft_calloc((size_t)nr + 1, sizeof *g->tr);
    g->orows = ft_calloc((size_t)nf + 1, sizeof *g->orows);
    if (!g->tr || !g->orows) goto done;
    for (uint32_t i = 0; i < nr; i++) {
        const ft_recipe_def *r = ft_trace_recipe(t, i);
        int is_new;
        uint32_t k = str_set_find(&types, r->type, strlen(r->type), &is_new);
        if (k == UINT32_MAX) goto done;
        if (is_new) g->tr[g->n_tr++] = (type_row){r->type, 0, 0, 0};
        /* a variant: (type, attrs); the recipe's own strings live as long as t */
        key.len = 0;
        if (ft_buf_printf(&key, "%u:%s", k, r->attrs_json)) goto done;
        uint64_t h = ft_hash64(key.data, key.len);
        uint32_t v = UINT32_MAX;
        for (uint64_t seed = 0;; seed++) {
            uint64_t hk = ft_hash_mix(h, seed);
            v = ft_hmap_get(&variants.map, hk);
            if (v == UINT32_MAX) {
                if (ft_hmap_put(&variants.map, hk, i)) goto done;
                g->tr[k].variants++;
                break;
            }
            const ft_recipe_def *q = ft_trace_recipe(t, v);
            if (!strcmp(q->type, r->type) && !strcmp(q->attrs_json, r->attrs_json)) break;
        }
        /* an object: (type, obj) */
        uint64_t ho = ft_hash_mix(ft_hash_mix(0x6f626a, k), (uint64_t)r->obj);
        for (uint64_t seed = 0;; seed++) {
            uint64_t hk = ft_hash_mix(ho, seed);
            v = ft_hmap_get(&objects, hk);
            if (v == UINT32_MAX) {
                if (ft_hmap_put(&objects, hk, i)) goto done;
                g->tr[k].objects++;
                break;
            }
            const ft_recipe_def *q = ft_trace_recipe(t, v);
            if (!strcmp(q->type, r->type) && q->obj == r->obj) break;
        }
        g->tr[k].calls += s->recipe_calls[i];
    }
    for (uint32_t i = 0; i < nf; i++) {
        const ft_fuser_def *f = ft_trace_fuser(t, i);
        uint64_t hk = (uint64_t)(uintptr_t)f->ops_json;
        uint32_t k = ft_hmap_get(&lists, hk);
        if (k == UINT32_MAX) {
            k = g->n_or++;
            if (ft_hmap_put(&lists, hk, k)) goto done;
            g->orows[k] = (oplist_row){f->ops_json, NULL, 0, 0};
            if (!(g->orows[k].desc = describe_ops(f->ops_json))) goto done;
        }
        g->orows[k].fusers += 1 + s->fuser_compact[i];
        g->orows[k].calls += s->fuser_calls[i];
    }
    rc = FT_OK;
done:
    ft_buf_free(&key);
    str_set_free(&types);
    str_set_free(&variants);
    ft_hmap_free(&objects);
    ft_hmap_free(&lists);
    return rc;
}

static void groups_free(groups *g)
{
    for (uint32_t i = 0; i < g->n_or; i++)
        ft_free(g->orows[i].desc);
    ft_free(g->orows);
    ft_free(g->tr);
}

/* ---- output ------------------------------------------------------------------------------- */
static int print_json(ft_trace *t, const char *path, const stats *s, const ft_trace_sizes *sz,
                      const groups *g)
{
    const ft_header *h = ft_trace_header(t);
    json_t *o = json_object(), *hdr = json_object(), *env = json_loads(h->env_json, 0, NULL);
    json_object_set_new(o, "path", json_string(path));
    const char *fv = ft_trace_meta(t, "format_version");
    int64_t fvi = 0;
    json_object_set_new(o, "format_version",
                        fv && !ft_parse_i64(fv, &fvi) ? json_integer(fvi) : json_null());
    const char *state = ft_trace_meta(t, "state"), *by = ft_trace_meta(t, "created_by");
    const char *notice = ft_trace_notice(t);
    json_object_set_new(o, "state", state ? json_string(state) : json_null());
    json_object_set_new(
        o, "closed",
        json_boolean(state && (!strcmp(state, "complete") || !strcmp(state, "recovered"))));
    json_object_set_new(o, "notice", notice ? json_string(notice) : json_null());
    json_object_set_new(o, "created_by", by ? json_string(by) : json_null());
    json_object_set_new(hdr, "te_version",
                        h->te_version ? json_string(h->te_version) : json_null());
    json_object_set_new(hdr, "torch_version",
                        h->torch_version ? json_string(h->torch_version) : json_null());
    json_object_set_new(hdr, "host", h->host ? json_string(h->host) : json_null());
    json_object_set_new(hdr, "started_at",
                        h->started_at ? json_string(h->started_at) : json_null());
    json_object_set_new(hdr, "rank", h->has_rank ? json_integer(h->rank) : json_null());
    json_object_set_new(hdr, "world_size",
                        h->has_world_size ? json_integer(h->world_size) : json_null());
    json_object_set_new(hdr, "env", env ? env : json_object());
    json_object_set_new(o, "header", hdr);
    json_object_set_new(o, "calls", json_integer((json_int_t)s->calls));
    json_object_set_new(o, "backward_events", json_integer((json_int_t)s->bwd));
    json_object_set_new(o, "fuser_ends", json_integer((json_int_t)s->ends));
    json_object_set_new(o, "grad_calls", json_integer((json_int_t)s->grad));
    json_object_set_new(o, "calls_with_splits", json_integer((json_int_t)s->with_splits));
    json_object_set_new(o, "tokens", u128_json(s->tokens));
    json_object_set_new(o, "calls_without_recipe", json_integer((json_int_t)s->no_recipe));
    json_object_set_new(o, "rebuilt_known", json_integer((json_int_t)s->rebuilt_known));
    json_object_set_new(o, "rebuilt", json_integer((json_int_t)s->rebuilt));
    json_object_set_new(o, "graph_calls", json_integer((json_int_t)s->graph));
    json_t *fz = json_object();
    json_object_set_new(fz, "calls", json_integer((json_int_t)s->fuse_ns_n));
    json_object_set_new(fz, "total_ns", fuse_total_json(s));
    json_object_set_new(fz, "mean_ns", s->fuse_ns_n ? json_real(fuse_mean(s)) : json_null());
    json_object_set_new(o, "fuse_time", fz);
    json_object_set_new(o, "fusers", json_integer((json_int_t)(ft_trace_n_fusers(t) + s->compact)));
    json_object_set_new(o, "compact_fusers", json_integer((json_int_t)s->compact));
    json_t *ol = json_array();
    for (uint32_t i = 0; i < g->n_or; i++) {
        json_t *r = json_object();
        json_object_set_new(r, "ops", json_string(g->orows[i].desc));
        json_object_set_new(r, "fusers", json_integer((json_int_t)g->orows[i].fusers));
        json_object_set_new(r, "calls", json_integer((json_int_t)g->orows[i].calls));
        json_array_append_new(ol, r);
    }
    json_object_set_new(o, "op_lists", ol);
    json_object_set_new(o, "recipes", json_integer(ft_trace_n_recipes(t)));
    json_t *rt = json_array();
    for (uint32_t i = 0; i < g->n_tr; i++) {
        json_t *r = json_object();
        json_object_set_new(r, "type", json_string(g->tr[i].type));
        json_object_set_new(r, "variants", json_integer(g->tr[i].variants));
        json_object_set_new(r, "objects", json_integer(g->tr[i].objects));
        json_object_set_new(r, "calls", json_integer((json_int_t)g->tr[i].calls));
        json_array_append_new(rt, r);
    }
    json_object_set_new(o, "recipe_types", rt);
    json_t *dv = json_object();
    for (uint32_t i = 0; i < s->n_dev; i++) {
        char k[16];
        snprintf(k, sizeof k, "%d", s->dev_id[i]);
        json_object_set_new(dv, k, json_integer((json_int_t)s->dev_n[i]));
    }
    json_object_set_new(o, "devices", dv);
    json_t *st = json_object();
    json_object_set_new(st, "distinct", json_integer(s->steps.n));
    json_object_set_new(st, "min", s->has_step ? json_integer(s->step_min) : json_null());
    json_object_set_new(st, "max", s->has_step ? json_integer(s->step_max) : json_null());
    json_object_set_new(o, "steps", st);
    json_object_set_new(o, "microbatches", json_integer(s->mbs.n));
    json_t *ph = json_object();
    for (uint32_t i = 0; i < s->phase_set.n; i++)
        json_object_set_new(ph, s->phases[i].name, json_integer((json_int_t)s->phases[i].n));
    json_object_set_new(o, "phases", ph);
    json_object_set_new(o, "calls_without_phase", json_integer((json_int_t)s->no_phase));
    json_t *ts = json_object();
    uint64_t span = s->has_ns ? span_ns(s->ns_min, s->ns_max) : 0;
    json_object_set_new(ts, "first_ns", s->has_ns ? json_integer(s->ns_min) : json_null());
    json_object_set_new(ts, "last_ns", s->has_ns ? json_integer(s->ns_max) : json_null());
    json_object_set_new(ts, "seconds", s->has_ns ? json_real((double)span * 1e-9) : json_null());
    json_object_set_new(o, "time_span", ts);
    json_object_set_new(o, "chunks", json_integer((json_int_t)ft_trace_n_chunks(t)));
    json_object_set_new(o, "bytes_on_disk", json_integer((json_int_t)sz->file_bytes));
    json_object_set_new(o, "bytes_per_call",
                        json_real(s->calls ? (double)sz->file_bytes / (double)s->calls : 0.0));
    json_object_set_new(o, "chunk_raw_bytes", json_integer((json_int_t)sz->chunk_raw_bytes));
    json_object_set_new(o, "chunk_stored_bytes", json_integer((json_int_t)sz->chunk_zip_bytes));
    json_object_set_new(o, "compression_ratio",
                        json_real(sz->chunk_zip_bytes
                                      ? (double)sz->chunk_raw_bytes / (double)sz->chunk_zip_bytes
                                      : 0.0));
    int rc = json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    printf("\n");
    json_decref(o);
    return rc ? FT_EIO : FT_OK;
}

static void print_text(ft_trace *t, const char *path, const stats *s, const ft_trace_sizes *sz,
                       const groups *g)
{
    const ft_header *h = ft_trace_header(t);
    const char *state = ft_trace_meta(t, "state"), *by = ft_trace_meta(t, "created_by");
    const char *st = !state                        ? "no state"
                     : !strcmp(state, "complete")  ? "complete"
                     : !strcmp(state, "recovered") ? "recovered: sealed after the recording stopped"
                                                   : "not closed: recording stopped or running";
    const char *fv = ft_trace_meta(t, "format_version"); /* the trace's own: 1 or 2 */
    printf("trace        %s (format %s, %s, %s)\n", path, fv ? fv : "?", by ? by : "?", st);
    printf("header       te %s, torch %s, host %s, started %s\n",
           h->te_version ? h->te_version : "-", h->torch_version ? h->torch_version : "-",
           h->host ? h->host : "-", h->started_at ? h->started_at : "-");
    if (h->has_rank || h->has_world_size) {
        printf("ranks        rank ");
        h->has_rank ? printf("%" PRId64, h->rank) : printf("-");
        printf(" of ");
        h->has_world_size ? printf("%" PRId64 "\n", h->world_size) : printf("-\n");
    } else {
        printf("ranks        -\n");
    }
    printf("env          %s\n", h->env_json);
    char tok[48];
    u128_str(s->tokens, tok);
    printf("calls        %" PRIu64 " (%" PRIu64 " with grad, %" PRIu64 " with split sizes, %s"
           " tokens, %" PRIu64 " without recipe, %" PRIu64 " in CUDA graphs)\n",
           s->calls, s->grad, s->with_splits, tok, s->no_recipe, s->graph);
    if (s->rebuilt_known)
        printf("rebuilt      %" PRIu64 " of %" PRIu64 " calls that say\n", s->rebuilt,
               s->rebuilt_known);
    if (s->fuse_ns_n) {
        char tot[52];
        fuse_total_str(s, tot);
        printf("fuse time    %s ns over %" PRIu64 " calls (mean %.1f ns)\n", tot, s->fuse_ns_n,
               fuse_mean(s));
    }
    printf("backward     %" PRIu64 " events\n", s->bwd);
    if (s->ends) printf("fuser ends   %" PRIu64 " (TE dropped the fuser)\n", s->ends);
    if (s->compact)
        printf("fusers       %" PRIu64 " instances (%" PRIu64 " compact: they repeat an earlier "
               "fuser's label and ops), %u op lists\n",
               ft_trace_n_fusers(t) + s->compact, s->compact, g->n_or);
    else
        printf("fusers       %u instances, %u op lists\n", ft_trace_n_fusers(t), g->n_or);
    for (uint32_t i = 0; i < g->n_or; i++)
        printf("  %-40s %" PRIu64 " fusers, %" PRIu64 " calls\n", g->orows[i].desc,
               g->orows[i].fusers, g->orows[i].calls);
    printf("recipes      %u states, %u types\n", ft_trace_n_recipes(t), g->n_tr);
    for (uint32_t i = 0; i < g->n_tr; i++)
        printf("  %-24s %u variants, %u objects, %" PRIu64 " calls\n", g->tr[i].type,
               g->tr[i].variants, g->tr[i].objects, g->tr[i].calls);
    printf("devices     ");
    for (uint32_t i = 0; i < s->n_dev; i++)
        printf(" %d (%" PRIu64 " calls)%s", s->dev_id[i], s->dev_n[i], i + 1 < s->n_dev ? "," : "");
    printf("%s\n", s->n_dev ? "" : " -");
    if (s->has_step)
        printf("steps        %" PRId64 "..%" PRId64 " (%u distinct), %u microbatches\n",
               s->step_min, s->step_max, s->steps.n, s->mbs.n);
    else
        printf("steps        -\n");
    printf("phases      ");
    uint32_t n_ph = s->phase_set.n;
    for (uint32_t i = 0; i < n_ph; i++)
        printf(" %s %" PRIu64 "%s", s->phases[i].name, s->phases[i].n, i + 1 < n_ph ? "," : "");
    if (s->no_phase) printf("%s none %" PRIu64, n_ph ? "," : "", s->no_phase);
    printf("%s\n", n_ph || s->no_phase ? "" : " -");
    if (s->has_ns)
        printf("time span    %.6f s (ns %" PRId64 " .. %" PRId64 ")\n",
               (double)span_ns(s->ns_min, s->ns_max) * 1e-9, s->ns_min, s->ns_max);
    else
        printf("time span    - (no timestamps)\n");
    printf("size         %" PRIu64 " bytes on disk, %.2f bytes/call, %" PRIu64 " chunks: %" PRIu64
           " bytes decoded -> %" PRIu64 " stored (ratio %.2f)\n",
           sz->file_bytes, s->calls ? (double)sz->file_bytes / (double)s->calls : 0.0,
           ft_trace_n_chunks(t), sz->chunk_raw_bytes, sz->chunk_zip_bytes,
           sz->chunk_zip_bytes ? (double)sz->chunk_raw_bytes / (double)sz->chunk_zip_bytes : 0.0);
}

static void stats_free(stats *s)
{
    for (uint32_t i = 0; i < s->phase_set.n; i++)
        ft_free(s->phases[i].name);
    ft_free(s->phases);
    str_set_free(&s->phase_set);
    ft_free(s->bmap);
    ft_hmap_free(&s->devices);
    ft_free(s->dev_id);
    ft_free(s->dev_n);
    ft_hmap_free(&s->steps);
    ft_hmap_free(&s->mbs);
    ft_free(s->fuser_calls);
    ft_free(s->fuser_compact);
    ft_free(s->recipe_calls);
}

typedef struct info_opts {
    int json;
} info_opts;

static const cli_opt options[] = {
    {"json", 0, NULL, "as JSON (an array of objects when several traces are given)", cli_parse_flag,
     offsetof(info_opts, json)},
};

/* One trace: FT_OK, or the status with its message already printed. */
static int info_one(const char *path, int json)
{
    ft_trace *t = NULL;
    ft_err err = {0};
    int rc = cli_in_check(path, CLI_IN_TRACE, &err);
    if (!rc) rc = ft_trace_open(path, FT_OPEN_READ, &t, &err);
    if (rc) {
        fprintf(stderr, "%s: %s\n", cli_prog(), ft_err_msg(&err));
        return rc;
    }
    if (ft_trace_notice(t)) fprintf(stderr, "%s: %s\n", cli_prog(), ft_trace_notice(t));
    stats s = {0};
    groups g = {0};
    s.fuser_calls = ft_calloc((size_t)ft_trace_n_fusers(t) + 1, sizeof *s.fuser_calls);
    s.fuser_compact = ft_calloc((size_t)ft_trace_n_fusers(t) + 1, sizeof *s.fuser_compact);
    s.recipe_calls = ft_calloc((size_t)ft_trace_n_recipes(t) + 1, sizeof *s.recipe_calls);
    ft_trace_sizes sz;
    if (!s.fuser_calls || !s.fuser_compact || !s.recipe_calls) {
        rc = ft_err_set(&err, FT_ENOMEM, "%s: out of memory", path);
    } else if (!(rc = gather(t, path, &s, &err)) && (rc = ft_trace_sizes_get(t, &sz))) {
        err = *ft_trace_error(t);
    }
    if (!rc && (rc = info_group(t, &s, &g))) ft_err_set(&err, rc, "%s: out of memory", path);
    if (!rc) {
        if (json)
            rc = print_json(t, path, &s, &sz, &g);
        else
            print_text(t, path, &s, &sz, &g);
        if (!rc && (fflush(stdout) || ferror(stdout))) rc = FT_EIO;
        if (rc) ft_err_set(&err, FT_EIO, "writing stdout failed");
    }
    if (rc) fprintf(stderr, "%s: %s\n", cli_prog(), ft_err_msg(&err));
    stats_free(&s);
    groups_free(&g);
    ft_trace_close(t);
    return rc;
}

/* Every trace in turn; the status of the worst failure (its message printed). */
static int run(void *opts_v, int n_args, char **args, ft_err *err)
{
    (void)err;
    const info_opts *o = opts_v;
    int worst = FT_OK;
    if (o->json && n_args > 1) printf("[\n");
    for (int i = 0; i < n_args; i++) {
        if (i) printf(o->json ? ",\n" : "\n");
        int rc = info_one(args[i], o->json);
        if (cli_exit_code(rc) > cli_exit_code(worst)) worst = rc;
    }
    if (o->json && n_args > 1) printf("]\n");
    return worst;
}

const cli_cmd cmd_info = {
    .name = "info",
    .synopsis = "TRACE... [--json]",
    .summary = "what a trace holds",
    .about = "Calls, backward events, fusers and op lists, recipes by type and variant, ranks,\n"
             "devices, steps, phases, time span, bytes on disk and per call, for each trace.",
    CLI_OPTS(info_opts, options),
    .min_args = 1,
    .max_args = CLI_ANY,
    .run_fn = run,
};
