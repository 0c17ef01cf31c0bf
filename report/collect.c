/*
 * collect.c - what the HTML report draws beyond the summary, gathered while the replay runs: an
 * observer of the trace driver (ft_replay_observer) that reads each batch's view and buckets
 * builds, resets and stale calls by seq and by step per policy, counts them per fuser label, per
 * phase and per trace (rank); and the inputs' identity (size, digest, header), with the check
 * that several traces are distinct ranks of one run. Counts cover the calls the replay's filter
 * matches (the view's match column). The causes of builds and stale hits are causes.c's.
 *
 * Memory is bounded: histograms have a fixed number of buckets whose width doubles as the run
 * outgrows them, and labels and phases beyond RD_MAX_GROUPS are counted together as "(others)".
 */
#define _DEFAULT_SOURCE /* timegm */
#include "report_int.h"
#include "ft_hmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <jansson.h>
#include <xxhash.h>

/* ---- histograms ------------------------------------------------------------------------------ */
static void hist_fold(rd_hist *h)
{
    uint32_t n = (h->n + 1) / 2;
    for (int k = 0; k < RD_HIST_KINDS; k++) {
        for (uint32_t b = 0; b < n; b++)
            h->v[k][b] = h->v[k][2 * b] + (2 * b + 1 < h->n ? h->v[k][2 * b + 1] : 0);
        for (uint32_t b = n; b < h->n; b++)
            h->v[k][b] = 0;
    }
    h->n = n;
    h->width *= 2;
}

/* The bucket of x (>= 0), folding until it fits. */
static uint32_t hist_bucket(rd_hist *h, int64_t x)
{
    while (x / h->width >= RD_BUCKETS)
        hist_fold(h);
    uint32_t b = (uint32_t)(x / h->width);
    if (b >= h->n) h->n = b + 1;
    return b;
}

/* Bring every policy's histogram to one width (the coarsest), so that they line up. */
void rd_hist_align(rd_hist *h, uint32_t n)
{
    int64_t w = 1;
    for (uint32_t p = 0; p < n; p++)
        if (h[p].width > w) w = h[p].width;
    uint32_t top = 0;
    for (uint32_t p = 0; p < n; p++) {
        while (h[p].width < w)
            hist_fold(&h[p]);
        if (h[p].n > top) top = h[p].n;
    }
    for (uint32_t p = 0; p < n; p++)
        h[p].n = top;
}

/* ---- groups (labels, phases) ----------------------------------------------------------------- */
static uint32_t group_find(rd_groups *g, const char *name, uint32_t n_pol)
{
    for (uint32_t i = 0; i < g->n; i++)
        if (!strcmp(g->name[i], name)) return i;
    if (g->n >= RD_MAX_GROUPS) {
        /* the last slot holds what does not fit */
        if (strcmp(g->name[RD_MAX_GROUPS - 1], "(others)")) {
            ft_free(g->name[RD_MAX_GROUPS - 1]);
            g->name[RD_MAX_GROUPS - 1] = ft_strdup("(others)");
        }
        return RD_MAX_GROUPS - 1;
    }
    char *s = ft_strdup(name);
    rd_counts *c = ft_realloc(g->c, (size_t)(g->n + 1) * n_pol * sizeof *c);
    char **nm = ft_realloc(g->name, (size_t)(g->n + 1) * sizeof *nm);
    if (c) g->c = c;
    if (nm) g->name = nm;
    if (!s || !c || !nm) {
        ft_free(s);
        return UINT32_MAX;
    }
    memset(&g->c[(size_t)g->n * n_pol], 0, n_pol * sizeof *c);
    g->name[g->n] = s;
    return g->n++;
}

static void groups_free(rd_groups *g)
{
    for (uint32_t i = 0; i < g->n; i++)
        ft_free(g->name[i]);
    ft_free(g->name);
    ft_free(g->c);
}

static void count_add(rd_counts *c, unsigned dec, unsigned stale)
{
    c->calls++;
    c->builds += (dec & FT_DEC_BUILD) != 0;
    c->resets += (dec & FT_DEC_RESET) != 0;
    c->stale[stale < FT_STALE_COUNT ? stale : FT_STALE_HARMLESS]++;
}

/* ---- the observer ---------------------------------------------------------------------------- */
static int add_input(ft_report_data *d, ft_trace *t, const char *path, FILE *warn, ft_err *err);

static int obs_begin(void *ctx, const ft_replay_input *in, const ft_replay *engine, ft_err *err)
{
    (void)engine;
    return add_input(ctx, in->trace, in->path, NULL, err); /* the command warned already */
}

/* Call j of v under policy slot p, into every breakdown. */
static void count_call(ft_report_data *d, const ft_replay_view *v, uint32_t j, uint32_t p)
{
    const ft_view_policy *vp = &v->pol[p];
    const unsigned dec = vp->dec[j], stale = vp->stale[j];
    const uint32_t fuser = v->fuser[j];
    const int64_t seq = v->seq[j] < 0 ? 0 : v->seq[j], step = v->step[j];
    rd_hist *h = &d->seq[p];
    uint32_t b = hist_bucket(h, seq);
    h->v[0][b]++;
    h->v[1][b] += (dec & FT_DEC_BUILD) != 0;
    h->v[2][b] += (dec & FT_DEC_RESET) != 0;
    if (stale > FT_STALE_NONE && stale < FT_STALE_COUNT) h->v[2 + stale][b]++;
    if (step >= 0) {
        rd_hist *s = &d->step[p];
        uint32_t sb = hist_bucket(s, step);
        s->v[0][sb]++;
        s->v[1][sb] += (dec & FT_DEC_BUILD) != 0;
        s->v[2][sb] += (dec & FT_DEC_RESET) != 0;
    }
    if (fuser < d->n_label_map && d->label_map[fuser] != UINT32_MAX)
        count_add(&d->labels.c[(size_t)d->label_map[fuser] * d->n_pol + p], dec, stale);
    const int32_t ph = v->phase[j];
    const char *name = ph >= 0 && (uint32_t)ph < v->batch->n_phases ? v->batch->phases[ph] : NULL;
    if (!name) name = "(none)";
    if (!d->last_phase || strcmp(d->last_phase, name)) {
        d->last_phase_idx = group_find(&d->phases, name, d->n_pol);
        d->last_phase = d->last_phase_idx == UINT32_MAX ? NULL : d->phases.name[d->last_phase_idx];
    }
    if (d->last_phase_idx != UINT32_MAX)
        count_add(&d->phases.c[(size_t)d->last_phase_idx * d->n_pol + p], dec, stale);
    if (d->n_inputs) count_add(&d->inputs[d->n_inputs - 1].pol[p], dec, stale);
}

static int obs_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    (void)err;
    ft_report_data *d = ctx;
    const uint32_t np = v->n_pol < d->n_pol ? v->n_pol : d->n_pol;
    for (uint32_t j = 0; j < v->n; j++) {
        const int counted = !v->match || v->match[j];
        for (uint32_t p = 0; p < np; p++) {
            if (counted) count_call(d, v, j, p);
        }
    }
    return FT_OK;
}

/* ---- inputs ---------------------------------------------------------------------------------- */
static int file_digest(const char *path, uint64_t *bytes, uint64_t *digest, ft_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) return ft_err_set(err, FT_EIO, "%s: cannot read it to take its digest", path);
    XXH3_state_t *st = XXH3_createState();
    if (!st) {
        fclose(f);
        return ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    XXH3_64bits_reset(st);
    static char buf[1 << 16];
    size_t n;
    uint64_t total = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        XXH3_64bits_update(st, buf, n);
        total += n;
    }
    int bad = ferror(f);
    fclose(f);
    *digest = XXH3_64bits_digest(st);
    *bytes = total;
    XXH3_freeState(st);
    return bad ? ft_err_set(err, FT_EIO, "%s: read error while taking its digest", path) : FT_OK;
}

/* Seconds since 1970 of an RFC 3339 UTC time as the capture hook writes it
 * ("2026-12-01T10:00:00Z"), or -1. */
static int64_t utc_seconds(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    char z = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &z) != 7 ||
        z != 'Z')
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm);
}

/* Why traces a and b look like different runs, or NULL. Each rank stamps its own start time and
 * the ranks of a multi-node run sit on different hosts, so: another TE version or world size, start
 * times more than 10 minutes apart, or other hosts for single-process runs. */
static const char *other_run(const rd_input *a, const rd_input *b, char *buf, size_t cap)
{
    if (strcmp(a->te_version, b->te_version)) {
        snprintf(buf, cap, "TE version '%s' and '%s'", a->te_version, b->te_version);
        return buf;
    }
    if (a->has_world_size && b->has_world_size && a->world_size != b->world_size) {
        snprintf(buf, cap, "world size %lld and %lld", (long long)a->world_size,
                 (long long)b->world_size);
        return buf;
    }
    if (strcmp(a->started_at, b->started_at)) {
        int64_t ta = utc_seconds(a->started_at), tb = utc_seconds(b->started_at);
        if (ta < 0 || tb < 0 || (ta > tb ? ta - tb : tb - ta) > 600) {
            snprintf(buf, cap, "start times '%s' and '%s'", a->started_at, b->started_at);
            return buf;
        }
    }
    int single =
        (!a->has_world_size || a->world_size <= 1) && (!b->has_world_size || b->world_size <= 1);
    if (single && strcmp(a->host, b->host)) {
        snprintf(buf, cap, "single-process runs on hosts '%s' and '%s'", a->host, b->host);
        return buf;
    }
    return NULL;
}

static void copy_field(char *dst, size_t cap, const char *s)
{
    ft_strlcpy(dst, s ? s : "", cap);
}

static int add_input(ft_report_data *d, ft_trace *t, const char *path, FILE *warn, ft_err *err)
{
    rd_input *in = ft_realloc(d->inputs, (size_t)(d->n_inputs + 1) * sizeof *in);
    if (!in) return ft_err_set(err, FT_ENOMEM, "out of memory");
    d->inputs = in;
    rd_input *x = &in[d->n_inputs];
    memset(x, 0, sizeof *x);
    copy_field(x->path, sizeof x->path, path);
    if (!d->no_digest && path) {
        int rc = file_digest(path, &x->bytes, &x->digest, err);
        if (rc) return rc;
    }
    const ft_header *h = ft_trace_header(t);
    x->has_rank = h->has_rank;
    x->rank = h->rank;
    x->has_world_size = h->has_world_size;
    x->world_size = h->world_size;
    copy_field(x->host, sizeof x->host, h->host);
    copy_field(x->te_version, sizeof x->te_version, h->te_version);
    copy_field(x->started_at, sizeof x->started_at, h->started_at);
    x->calls = ft_trace_n_calls(t);
    for (uint32_t i = 0; i < d->n_inputs; i++) {
        const rd_input *o = &in[i];
        if (x->has_rank && o->has_rank && x->rank == o->rank)
            return ft_err_set(err, FT_EINVAL, "%s and %s are both rank %lld: one trace per rank",
                              o->path, x->path, (long long)x->rank);
    }
    char why[2 * sizeof x->host + 64];
    if (d->n_inputs && other_run(&in[0], x, why, sizeof why)) {
        char msg[2 * sizeof x->path + sizeof why + 64];
        snprintf(msg, sizeof msg, "%s and %s look like different runs: %s", in[0].path, x->path,
                 why);
        if (warn) fprintf(warn, "fusertrace replay: warning: %s\n", msg);
        if (d->n_warnings < RD_MAX_WARNINGS)
            ft_strlcpy(d->warnings[d->n_warnings++], msg, sizeof d->warnings[0]);
    }
    d->n_inputs++;
    /* labels of this trace's fusers: dense index -> label group */
    uint32_t nf = ft_trace_n_fusers(t);
    uint32_t *map = ft_realloc(d->label_map, (nf ? nf : 1) * sizeof *map);
    if (!map) return ft_err_set(err, FT_ENOMEM, "out of memory");
    d->label_map = map;
    d->n_label_map = nf;
    for (uint32_t i = 0; i < nf; i++) {
        const ft_fuser_def *fd = ft_trace_fuser(t, i);
        char buf[64];
        const char *name = fd->label;
        if (!name) {
            snprintf(buf, sizeof buf, "(fuser %lld, no label)", (long long)fd->id);
            name = buf;
        }
        map[i] = group_find(&d->labels, name, d->n_pol);
    }
    return FT_OK;
}

int ft_report_check_inputs(const ft_replay_set *set, FILE *warn, int64_t *ranks, ft_err *err)
{
    const uint32_t n_paths = ft_replay_set_count(set);
    for (uint32_t i = 0; ranks && i < n_paths; i++)
        ranks[i] = -1;
    if (n_paths < 2) return FT_OK;
    ft_report_data *d = NULL;
    int rc = ft_report_data_new(NULL, 0, &d, err);
    if (rc) return rc;
    d->no_digest = 1;
    for (uint32_t i = 0; i < n_paths && !rc; i++) {
        ft_trace *t = ft_replay_set_trace(set, i);
        rc = add_input(d, t, ft_replay_set_path(set, i), warn, err);
        if (ranks && ft_trace_header(t)->has_rank) ranks[i] = ft_trace_header(t)->rank;
    }
    ft_report_data_free(d);
    return rc;
}

/* ---- provenance of the JSON report ---------------------------------------------------------- */
#ifndef FT_TOOL_VERSION
#define FT_TOOL_VERSION "unknown"
#endif

struct ft_report_prov {
    char *command;
    ft_report_data *d; /* its inputs only */
};

int ft_report_prov_new(const ft_replay_set *set, const char *command, ft_report_prov **out,
                       ft_err *err)
{
    *out = NULL;
    ft_report_prov *p = ft_calloc(1, sizeof *p);
    if (!p) return ft_err_set(err, FT_ENOMEM, "out of memory");
    int rc = ft_report_data_new(NULL, 0, &p->d, err);
    if (!rc && command && !(p->command = ft_strdup(command)))
        rc = ft_err_set(err, FT_ENOMEM, "out of memory");
    for (uint32_t i = 0; !rc && i < ft_replay_set_count(set); i++)
        rc = add_input(p->d, ft_replay_set_trace(set, i), ft_replay_set_path(set, i), NULL, err);
    if (rc) {
        ft_report_prov_free(p);
        return rc;
    }
    *out = p;
    return FT_OK;
}

void ft_report_prov_free(ft_report_prov *p)
{
    if (!p) return;
    ft_report_data_free(p->d);
    ft_free(p->command);
    ft_free(p);
}

json_t *report_prov_json(const ft_report_prov *p, const ft_replay_result *r,
                         const ft_report_opts *o)
{
    json_t *js = json_object(), *in = json_array(), *opt = json_object(), *pols = json_array();
    json_object_set_new(js, "tool", json_string("fusertrace " FT_TOOL_VERSION));
    json_object_set_new(js, "command", p->command ? json_string(p->command) : json_null());
    for (uint32_t i = 0; i < p->d->n_inputs; i++) {
        const rd_input *x = &p->d->inputs[i];
        json_t *t = json_object();
        char hex[24];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)x->digest);
        json_object_set_new(t, "path", json_string(x->path));
        json_object_set_new(t, "bytes", json_integer((json_int_t)x->bytes));
        json_object_set_new(t, "xxh3_64", json_string(hex));
        json_object_set_new(t, "rank", x->has_rank ? json_integer(x->rank) : json_null());
        json_object_set_new(t, "host", x->host[0] ? json_string(x->host) : json_null());
        json_object_set_new(t, "te_version",
                            x->te_version[0] ? json_string(x->te_version) : json_null());
        json_object_set_new(t, "started_at",
                            x->started_at[0] ? json_string(x->started_at) : json_null());
        json_object_set_new(t, "calls", json_integer((json_int_t)x->calls));
        json_array_append_new(in, t);
    }
    json_object_set_new(js, "inputs", in);
    for (uint32_t k = 0; k < r->n_policies; k++)
        json_array_append_new(pols, json_string(ft_policy_name(r->pol[k].policy)));
    json_object_set_new(opt, "policies", pols);
    json_object_set_new(opt, "framework", json_string(r->cap_build_n ? "captured" : "assumed"));
    if (!r->cap_build_n) {
        json_object_set_new(opt, "build_ns", json_real(o->build_ns));
        json_object_set_new(opt, "reset_ns", json_real(o->reset_ns));
    }
    json_object_set_new(opt, "captured_policy",
                        r->captured_policy >= 0
                            ? json_string(ft_policy_name((uint32_t)r->captured_policy))
                            : json_null());
    json_object_set_new(opt, "filter", o->filter ? json_string(o->filter) : json_null());
    json_object_set_new(js, "options", opt);
    return js;
}

/* ---- why nothing fuses ---------------------------------------------------------------------- */
static void add_note(ft_report_notes *out, const ft_unfused_why *w, const char *example)
{
    for (uint32_t i = 0; i < out->n; i++)
        if (!strcmp(out->u[i].fused, w->fused) && !strcmp(out->u[i].reason, w->reason)) {
            out->u[i].n_fusers++;
            return;
        }
    if (out->n >= FT_REPORT_MAX_NOTES) return;
    ft_report_unfused *u = &out->u[out->n++];
    ft_strlcpy(u->fused, w->fused, sizeof u->fused);
    ft_strlcpy(u->reason, w->reason, sizeof u->reason);
    ft_strlcpy(u->example, example, sizeof u->example);
    u->n_fusers = 1;
    u->n_blocks = w->n_blocks;
    u->n_registration = w->n_registration;
    memcpy(u->block, w->block, sizeof u->block);
    u->env_empty = w->env_empty;
}

const char *ft_report_note_kind(ft_model_note_kind k)
{
    switch (k) {
    case FT_NOTE_ASSUMED:
        return "assumed";
    case FT_NOTE_UNKNOWN_FUSION:
        return "unknown fusion";
    case FT_NOTE_REGISTRY:
        return "registry";
    case FT_NOTE_ATTR_CHANGE:
        return "op attributes changed";
    default:
        return "?";
    }
}

/* The model's notes on one trace, each distinct note once over the traces. */
static void add_model_notes(ft_report_notes *out, const ft_model *m)
{
    for (uint32_t i = 0; i < ft_model_n_notes(m); i++) {
        const ft_model_note *n = ft_model_note_at(m, i);
        uint32_t k = 0;
        while (k < out->n_model && !(out->model[k].kind == n->kind &&
                                     !strcmp(out->model[k].field, n->field ? n->field : "") &&
                                     !strcmp(out->model[k].text, n->text)))
            k++;
        if (k < out->n_model) {
            out->model[k].n_traces++;
            continue;
        }
        if (out->n_model == FT_REPORT_MAX_MODEL_NOTES) continue;
        ft_report_model_note *x = &out->model[out->n_model++];
        x->kind = n->kind;
        ft_strlcpy(x->field, n->field ? n->field : "", sizeof x->field);
        ft_strlcpy(x->text, n->text, sizeof x->text);
        x->n_traces = 1;
    }
}

/* Why fuser u's fusions never form under any recipe of its trace (and none): 1 and *w (the first
 * recipe's answer), or 0 when it fuses under some recipe. */
static int blocked_everywhere(const ft_model *m, uint32_t u, uint32_t nr, ft_unfused_why *w,
                              ft_unfused_why *scratch)
{
    int any = 0;
    for (int32_t r = nr ? 0 : -1; r < (int32_t)nr; r++) {
        if (!ft_model_why_unfused(m, u, r, any ? scratch : w)) return 0;
        any = 1;
    }
    return any;
}

/* The notes of one trace: fusers with the same op list answer the same, so each distinct list is
 * asked once and its answer (blocked or not) shared. */
static int trace_unfused(ft_trace *t, const ft_model *m, ft_report_notes *out, ft_err *err)
{
    const uint32_t nf = ft_trace_n_fusers(t), nr = ft_trace_n_recipes(t);
    ft_hmap seen = {0}; /* op-list hash -> the first fuser with it */
    uint8_t *blocked = ft_calloc(nf ? nf : 1, 1);
    ft_unfused_why *w = ft_malloc(2 * sizeof *w);
    int rc = blocked && w ? FT_OK : ft_err_set(err, FT_ENOMEM, "out of memory");
    for (uint32_t u = 0; !rc && u < nf; u++) {
        const ft_fuser_def *fd = ft_trace_fuser(t, u);
        const uint64_t h = ft_hash64(fd->ops_json, strlen(fd->ops_json));
        uint32_t rep = ft_hmap_get(&seen, h);
        if (rep == UINT32_MAX || strcmp(ft_trace_fuser(t, rep)->ops_json, fd->ops_json)) {
            if (rep == UINT32_MAX && ft_hmap_put(&seen, h, u)) {
                rc = ft_err_set(err, FT_ENOMEM, "out of memory");
                break;
            }
            rep = u;
            blocked[u] = (uint8_t)blocked_everywhere(m, u, nr, w, w + 1);
        }
        if (!blocked[rep]) continue;
        /* the representative's answer (asked again only for a list seen before) */
        if (rep != u) blocked_everywhere(m, rep, nr, w, w + 1);
        char ex[128];
        if (fd->label)
            ft_strlcpy(ex, fd->label, sizeof ex);
        else
            snprintf(ex, sizeof ex, "fuser %lld", (long long)fd->id);
        add_note(out, w, ex);
    }
    ft_hmap_free(&seen);
    ft_free(blocked);
    ft_free(w);
    return rc;
}

int ft_report_find_unfused(const ft_replay_set *set, const ft_env_kv *env, uint32_t n_env,
                           ft_report_notes *out, ft_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = FT_OK;
    for (uint32_t p = 0; p < ft_replay_set_count(set) && !rc; p++) {
        ft_trace *t = ft_replay_set_trace(set, p);
        ft_model *m = NULL;
        uint32_t nf = ft_trace_n_fusers(t), nr = ft_trace_n_recipes(t);
        ft_fuser_def *fd = ft_calloc(nf ? nf : 1, sizeof *fd);
        ft_recipe_def *rd = ft_calloc(nr ? nr : 1, sizeof *rd);
        if (!fd || !rd) rc = ft_err_set(err, FT_ENOMEM, "out of memory");
        for (uint32_t i = 0; !rc && i < nf; i++)
            fd[i] = *ft_trace_fuser(t, i);
        for (uint32_t i = 0; !rc && i < nr; i++)
            rd[i] = *ft_trace_recipe(t, i);
        if (!rc) {
            const ft_header *h = ft_trace_header(t);
            const ft_model_capture cap = {h->env_json,       h->extra_json, h->has_rank,
                                          h->has_world_size, h->rank,       h->world_size};
            rc = ft_model_new(fd, nf, rd, nr, &cap, env, n_env, &m, err);
        }
        if (!rc) rc = trace_unfused(t, m, out, err);
        if (!rc) add_model_notes(out, m);
        ft_model_free(m);
        ft_free(fd);
        ft_free(rd);
    }
    return rc;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */
int ft_report_data_new(const uint32_t *policies, uint32_t n_policies, ft_report_data **out,
                       ft_err *err)
{
    *out = NULL;
    ft_report_data *d = ft_calloc(1, sizeof *d);
    if (!d) return ft_err_set(err, FT_ENOMEM, "out of memory");
    if (!policies || !n_policies) n_policies = ft_policy_count();
    if (n_policies > FT_MAX_POLICIES) n_policies = FT_MAX_POLICIES;
    d->n_pol = n_policies;
    for (uint32_t p = 0; p < n_policies; p++) {
        d->policy[p] = policies ? policies[p] : p;
        d->seq[p].width = d->step[p].width = 1;
    }
    d->last_phase_idx = UINT32_MAX;
    d->obs = (ft_replay_observer){
        .ctx = d, .needs = FT_VIEW_DECISIONS, .begin_fn = obs_begin, .batch_fn = obs_batch};
    *out = d;
    return FT_OK;
}

const ft_replay_observer *ft_report_data_observer(ft_report_data *d)
{
    return &d->obs;
}

void ft_report_data_free(ft_report_data *d)
{
    if (!d) return;
    groups_free(&d->labels);
    groups_free(&d->phases);
    ft_free(d->label_map);
    ft_free(d->inputs);
    ft_free(d);
}
