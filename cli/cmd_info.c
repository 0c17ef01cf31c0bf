/*
 * cmd_info.c - `fusertrace info TRACE [--json]`: what a trace holds. The small tables give the
 * header, fusers, op lists and recipes; one pass over the chunks (split sizes not decoded) gives
 * per-device, per-step, per-phase and per-recipe counts and the time span; the chunk index and
 * the file give the sizes.
 */
#include "cli.h"
#include "ft_trace.h"
#include "ft_hmap.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

typedef struct phase_count {
    char *name;
    uint64_t n;
} phase_count;

typedef struct stats {
    uint64_t calls, bwd, grad, with_splits, tokens, rebuilt_known, rebuilt, graph, no_recipe;
    uint64_t *fuser_calls;  /* [n_fusers] */
    uint64_t *recipe_calls; /* [n_recipes] */
    ft_hmap devices;        /* device -> index into dev_* */
    int32_t dev_id[256];
    uint64_t dev_n[256];
    uint32_t n_dev;
    uint64_t dev_other; /* calls on devices beyond the 256 listed */
    ft_hmap steps, mbs; /* distinct values (value -> 1) */
    int has_step;
    int64_t step_min, step_max;
    phase_count *phases;
    uint32_t n_phases;
    uint64_t no_phase;
    int has_ns;
    int64_t ns_min, ns_max;
    uint64_t fuse_ns_n;
    int64_t fuse_ns_sum;
} stats;

static int count_phase(stats *s, const char *name)
{
    for (uint32_t i = 0; i < s->n_phases; i++)
        if (!strcmp(s->phases[i].name, name)) {
            s->phases[i].n++;
            return FT_OK;
        }
    phase_count *p = ft_realloc(s->phases, (s->n_phases + 1) * sizeof *p);
    if (!p) return FT_ENOMEM;
    s->phases = p;
    if (!(p[s->n_phases].name = ft_strdup(name))) return FT_ENOMEM;
    p[s->n_phases++].n = 1;
    return FT_OK;
}

static int gather(ft_trace *t, stats *s, ft_err *err)
{
    ft_reader *r = NULL;
    int rc = ft_reader_open(t, 0, &r);
    if (rc) {
        *err = *ft_trace_error(t);
        return rc;
    }
    const ft_batch *b;
    while (!(rc = ft_reader_next(r, &b)) && b) {
        for (uint32_t i = 0; i < b->n && !rc; i++) {
            uint32_t fl = b->flags[i];
            if (fl & FT_CF_HAS_NS) {
                if (!s->has_ns || b->ns[i] < s->ns_min) s->ns_min = b->ns[i];
                if (!s->has_ns || b->ns[i] > s->ns_max) s->ns_max = b->ns[i];
                s->has_ns = 1;
            }
            if (b->kind[i] != FT_REC_CALL) {
                s->bwd++;
                continue;
            }
            s->calls++;
            s->fuser_calls[b->fuser[i]]++;
            if (b->recipe[i] >= 0)
                s->recipe_calls[b->recipe[i]]++;
            else
                s->no_recipe++;
            if (fl & FT_CF_GRAD) s->grad++;
            if (fl & FT_CF_HAS_SPLITS) {
                s->with_splits++;
                s->tokens += (uint64_t)b->n_tokens[i];
            }
            if (fl & FT_CF_HAS_REBUILT) {
                s->rebuilt_known++;
                if (fl & FT_CF_REBUILT) s->rebuilt++;
            }
            if ((fl & FT_CF_HAS_GRAPH) && (fl & FT_CF_GRAPH)) s->graph++;
            if (fl & FT_CF_HAS_FUSE_NS) {
                s->fuse_ns_n++;
                s->fuse_ns_sum += b->fuse_ns[i];
            }
            uint32_t d = ft_hmap_get(&s->devices, (uint64_t)(int64_t)b->device[i]);
            if (d == UINT32_MAX && s->n_dev < FT_ARRAY_LEN(s->dev_id)) {
                d = s->n_dev++;
                s->dev_id[d] = b->device[i];
                s->dev_n[d] = 0;
                if ((rc = ft_hmap_put(&s->devices, (uint64_t)(int64_t)b->device[i], d))) break;
            }
            if (d == UINT32_MAX)
                s->dev_other++;
            else
                s->dev_n[d]++;
            if (fl & FT_CF_HAS_STEP) {
                if (!s->has_step || b->step[i] < s->step_min) s->step_min = b->step[i];
                if (!s->has_step || b->step[i] > s->step_max) s->step_max = b->step[i];
                s->has_step = 1;
                if ((rc = ft_hmap_put(&s->steps, (uint64_t)b->step[i], 1))) break;
            }
            if ((fl & FT_CF_HAS_MB) && (rc = ft_hmap_put(&s->mbs, (uint64_t)b->mb[i], 1))) break;
            if (fl & FT_CF_HAS_PHASE)
                rc = count_phase(s, b->phases[b->phase[i]]);
            else
                s->no_phase++;
        }
        if (rc) break;
    }
    if (rc == FT_ENOMEM)
        ft_err_set(err, rc, "out of memory");
    else if (rc)
        *err = *ft_trace_error(t);
    ft_reader_close(r);
    return rc;
}

/* "GroupedLinear > ScaledSwiGLU > GroupedLinear" for an op list. */
static void describe_ops(const char *ops_json, char *out, size_t cap)
{
    out[0] = '\0';
    json_t *j = json_loads(ops_json, 0, NULL);
    size_t len = 0;
    for (size_t i = 0; j && i < json_array_size(j) && len + 1 < cap; i++) {
        const char *ty = json_string_value(json_object_get(json_array_get(j, i), "type"));
        int n = snprintf(out + len, cap - len, "%s%s", i ? " > " : "", ty ? ty : "?");
        if (n < 0) break;
        len += (size_t)n;
    }
    if (j && json_array_size(j) == 0) snprintf(out, cap, "(no ops)");
    json_decref(j);
}

typedef struct type_row {
    const char *type;
    uint32_t variants, objects;
    uint64_t calls;
} type_row;

static uint32_t recipe_types(ft_trace *t, const stats *s, type_row *rows, uint32_t cap)
{
    uint32_t n = 0, nr = ft_trace_n_recipes(t);
    for (uint32_t i = 0; i < nr; i++) {
        const ft_recipe_def *r = ft_trace_recipe(t, i);
        uint32_t k = 0;
        while (k < n && strcmp(rows[k].type, r->type))
            k++;
        if (k == n) {
            if (n == cap) continue;
            rows[n++] = (type_row){r->type, 0, 0, 0};
        }
        int new_variant = 1, new_object = 1;
        for (uint32_t j = 0; j < i; j++) {
            const ft_recipe_def *q = ft_trace_recipe(t, j);
            if (strcmp(q->type, r->type)) continue;
            if (!strcmp(q->attrs_json, r->attrs_json)) new_variant = 0;
            if (q->obj == r->obj) new_object = 0;
        }
        rows[k].variants += (uint32_t)new_variant;
        rows[k].objects += (uint32_t)new_object;
        rows[k].calls += s->recipe_calls[i];
    }
    return n;
}

typedef struct oplist_row {
    const char *ops;
    uint32_t fusers;
    uint64_t calls;
} oplist_row;

static uint32_t oplist_rows(ft_trace *t, const stats *s, oplist_row *rows, uint32_t cap)
{
    uint32_t n = 0, nf = ft_trace_n_fusers(t);
    for (uint32_t i = 0; i < nf; i++) {
        const ft_fuser_def *f = ft_trace_fuser(t, i);
        uint32_t k = 0;
        while (k < n && strcmp(rows[k].ops, f->ops_json))
            k++;
        if (k == n) {
            if (n == cap) continue;
            rows[n++] = (oplist_row){f->ops_json, 0, 0};
        }
        rows[k].fusers++;
        rows[k].calls += s->fuser_calls[i];
    }
    return n;
}

#define MAX_ROWS 4096

static int print_json(ft_trace *t, const char *path, const stats *s, const ft_trace_sizes *sz,
                      const type_row *tr, uint32_t n_tr, const oplist_row *orows, uint32_t n_or)
{
    const ft_header *h = ft_trace_header(t);
    json_t *o = json_object(), *hdr = json_object(), *env = json_loads(h->env_json, 0, NULL);
    json_object_set_new(o, "path", json_string(path));
    json_object_set_new(o, "format_version", json_integer(FT_FORMAT_VERSION));
    const char *state = ft_trace_meta(t, "state"), *by = ft_trace_meta(t, "created_by");
    json_object_set_new(o, "state", state ? json_string(state) : json_null());
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
    json_object_set_new(o, "grad_calls", json_integer((json_int_t)s->grad));
    json_object_set_new(o, "calls_with_splits", json_integer((json_int_t)s->with_splits));
    json_object_set_new(o, "tokens", json_integer((json_int_t)s->tokens));
    json_object_set_new(o, "calls_without_recipe", json_integer((json_int_t)s->no_recipe));
    json_object_set_new(o, "rebuilt_known", json_integer((json_int_t)s->rebuilt_known));
    json_object_set_new(o, "rebuilt", json_integer((json_int_t)s->rebuilt));
    json_object_set_new(o, "graph_calls", json_integer((json_int_t)s->graph));
    json_object_set_new(o, "fusers", json_integer(ft_trace_n_fusers(t)));
    json_t *ol = json_array();
    for (uint32_t i = 0; i < n_or; i++) {
        char desc[1024];
        describe_ops(orows[i].ops, desc, sizeof desc);
        json_t *r = json_object();
        json_object_set_new(r, "ops", json_string(desc));
        json_object_set_new(r, "fusers", json_integer(orows[i].fusers));
        json_object_set_new(r, "calls", json_integer((json_int_t)orows[i].calls));
        json_array_append_new(ol, r);
    }
    json_object_set_new(o, "op_lists", ol);
    json_object_set_new(o, "recipes", json_integer(ft_trace_n_recipes(t)));
    json_t *rt = json_array();
    for (uint32_t i = 0; i < n_tr; i++) {
        json_t *r = json_object();
        json_object_set_new(r, "type", json_string(tr[i].type));
        json_object_set_new(r, "variants", json_integer(tr[i].variants));
        json_object_set_new(r, "objects", json_integer(tr[i].objects));
        json_object_set_new(r, "calls", json_integer((json_int_t)tr[i].calls));
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
    for (uint32_t i = 0; i < s->n_phases; i++)
        json_object_set_new(ph, s->phases[i].name, json_integer((json_int_t)s->phases[i].n));
    json_object_set_new(o, "phases", ph);
    json_object_set_new(o, "calls_without_phase", json_integer((json_int_t)s->no_phase));
    json_t *ts = json_object();
    json_object_set_new(ts, "first_ns", s->has_ns ? json_integer(s->ns_min) : json_null());
    json_object_set_new(ts, "last_ns", s->has_ns ? json_integer(s->ns_max) : json_null());
    json_object_set_new(
        ts, "seconds", s->has_ns ? json_real((double)(s->ns_max - s->ns_min) * 1e-9) : json_null());
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
                       const type_row *tr, uint32_t n_tr, const oplist_row *orows, uint32_t n_or)
{
    const ft_header *h = ft_trace_header(t);
    const char *state = ft_trace_meta(t, "state"), *by = ft_trace_meta(t, "created_by");
    printf("trace        %s (format %d, %s, %s)\n", path, FT_FORMAT_VERSION, by ? by : "?",
           state && !strcmp(state, "complete") ? "complete" : "incomplete: recording stopped");
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
    printf("calls        %" PRIu64 " (%" PRIu64 " with grad, %" PRIu64 " with split sizes, %" PRIu64
           " tokens, %" PRIu64 " without recipe, %" PRIu64 " in CUDA graphs)\n",
           s->calls, s->grad, s->with_splits, s->tokens, s->no_recipe, s->graph);
    if (s->rebuilt_known)
        printf("rebuilt      %" PRIu64 " of %" PRIu64 " calls that say\n", s->rebuilt,
               s->rebuilt_known);
    printf("backward     %" PRIu64 " events\n", s->bwd);
    printf("fusers       %u instances, %u op lists\n", ft_trace_n_fusers(t), n_or);
    for (uint32_t i = 0; i < n_or; i++) {
        char desc[1024];
        describe_ops(orows[i].ops, desc, sizeof desc);
        printf("  %-40s %u fusers, %" PRIu64 " calls\n", desc, orows[i].fusers, orows[i].calls);
    }
    printf("recipes      %u states, %u types\n", ft_trace_n_recipes(t), n_tr);
    for (uint32_t i = 0; i < n_tr; i++)
        printf("  %-24s %u variants, %u objects, %" PRIu64 " calls\n", tr[i].type, tr[i].variants,
               tr[i].objects, tr[i].calls);
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
    for (uint32_t i = 0; i < s->n_phases; i++)
        printf(" %s %" PRIu64 "%s", s->phases[i].name, s->phases[i].n,
               i + 1 < s->n_phases ? "," : "");
    if (s->no_phase) printf("%s none %" PRIu64, s->n_phases ? "," : "", s->no_phase);
    printf("%s\n", s->n_phases || s->no_phase ? "" : " -");
    if (s->has_ns)
        printf("time span    %.6f s (ns %" PRId64 " .. %" PRId64 ")\n",
               (double)(s->ns_max - s->ns_min) * 1e-9, s->ns_min, s->ns_max);
    else
        printf("time span    - (no timestamps)\n");
    printf("size         %" PRIu64 " bytes on disk, %.2f bytes/call, %" PRIu64 " chunks: %" PRIu64
           " bytes decoded -> %" PRIu64 " stored (ratio %.2f)\n",
           sz->file_bytes, s->calls ? (double)sz->file_bytes / (double)s->calls : 0.0,
           ft_trace_n_chunks(t), sz->chunk_raw_bytes, sz->chunk_zip_bytes,
           sz->chunk_zip_bytes ? (double)sz->chunk_raw_bytes / (double)sz->chunk_zip_bytes : 0.0);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fusertrace info TRACE [--json]\n"
               "  calls, backward events, fusers and op lists, recipes by type and variant,\n"
               "  ranks, devices, steps, phases, time span, bytes on disk and per call\n");
}

static int info_main(int argc, char **argv)
{
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return FT_EXIT_OK;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "fusertrace info: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return FT_EXIT_INPUT;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return FT_EXIT_INPUT;
    }
    ft_trace *t = NULL;
    ft_err err = {0};
    int rc = ft_trace_open(path, FT_OPEN_READ, &t, &err);
    if (rc) {
        fprintf(stderr, "fusertrace info: %s\n", ft_err_msg(&err));
        return rc == FT_EIO ? FT_EXIT_INPUT : cli_exit_code(rc);
    }
    stats s = {0};
    type_row *tr = ft_calloc(MAX_ROWS, sizeof *tr);
    oplist_row *orows = ft_calloc(MAX_ROWS, sizeof *orows);
    s.fuser_calls = ft_calloc(ft_trace_n_fusers(t) + 1, sizeof *s.fuser_calls);
    s.recipe_calls = ft_calloc(ft_trace_n_recipes(t) + 1, sizeof *s.recipe_calls);
    ft_trace_sizes sz;
    if (!tr || !orows || !s.fuser_calls || !s.recipe_calls) {
        rc = ft_err_set(&err, FT_ENOMEM, "out of memory");
    } else if (!(rc = gather(t, &s, &err)) && (rc = ft_trace_sizes_get(t, &sz))) {
        err = *ft_trace_error(t);
    }
    if (!rc) {
        uint32_t n_tr = recipe_types(t, &s, tr, MAX_ROWS);
        uint32_t n_or = oplist_rows(t, &s, orows, MAX_ROWS);
        if (json)
            rc = print_json(t, path, &s, &sz, tr, n_tr, orows, n_or);
        else
            print_text(t, path, &s, &sz, tr, n_tr, orows, n_or);
        if (rc) ft_err_set(&err, rc, "writing the output failed");
    }
    if (rc) fprintf(stderr, "fusertrace info: %s\n", ft_err_msg(&err));
    for (uint32_t i = 0; i < s.n_phases; i++)
        ft_free(s.phases[i].name);
    ft_free(s.phases);
    ft_hmap_free(&s.devices);
    ft_hmap_free(&s.steps);
    ft_hmap_free(&s.mbs);
    ft_free(s.fuser_calls);
    ft_free(s.recipe_calls);
    ft_free(tr);
    ft_free(orows);
    ft_trace_close(t);
    return rc == FT_EIO ? FT_EXIT_INTERNAL : cli_exit_code(rc);
}

const cli_cmd cmd_info = {.name = "info",
                          .synopsis = "TRACE [--json]",
                          .summary = "what a trace holds",
                          .legacy_fn = info_main};
