/*
 * collect.c - what the HTML report draws beyond the summary, gathered while the replay runs: an
 * observer of the trace driver (ft_replay_observer) that buckets builds, resets and stale calls
 * by seq and by step per policy, and counts them per fuser label, per phase and per trace
 * (rank); a FILE that reads the --explain lines into counts of causes; and the inputs' identity
 * (size, digest, header), with the check that several traces are distinct ranks of one run.
 *
 * Memory is bounded: histograms have a fixed number of buckets whose width doubles as the run
 * outgrows them, and labels and phases beyond RD_MAX_GROUPS are counted together as "(others)".
 */
#define _GNU_SOURCE /* fopencookie */
#include "report_int.h"
#include "ft_hmap.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

static void count_add(rd_counts *c, const ft_replay_call *k)
{
    c->calls++;
    c->builds += k->build != 0;
    c->resets += k->reset != 0;
    c->stale[k->stale < FT_STALE_COUNT ? k->stale : FT_STALE_HARMLESS]++;
}

/* ---- the observer ---------------------------------------------------------------------------- */
static int obs_begin(void *ctx, const ft_replay *engine, ft_err *err)
{
    ft_report_data *d = ctx;
    return d->next && d->next->begin_fn ? d->next->begin_fn(d->next->ctx, engine, err) : FT_OK;
}

static int passes(const ft_report_data *d, const ft_replay_call *k)
{
    const ft_report_filter *f = &d->filter;
    if (f->fuser_glob && (k->fuser >= d->n_label_map || !d->fuser_ok[k->fuser])) return 0;
    if (f->phase && (!k->phase || strcmp(k->phase, f->phase))) return 0;
    if (f->has_steps && (k->step < f->step_lo || k->step > f->step_hi)) return 0;
    return 1;
}

static int obs_call(void *ctx, const ft_replay_call *k, ft_err *err)
{
    ft_report_data *d = ctx;
    uint32_t p = k->slot;
    if (p < d->n_pol && passes(d, k)) {
        count_add(&d->filt[p], k);
        if (k->stale == FT_STALE_NONE && k->q && k->fresh_q && !ft_qstate_equal(k->q, k->fresh_q))
            d->filt_qdrift[p]++;
        int64_t seq = k->seq < 0 ? 0 : k->seq;
        rd_hist *h = &d->seq[p];
        uint32_t b = hist_bucket(h, seq);
        h->v[0][b]++;
        h->v[1][b] += k->build != 0;
        h->v[2][b] += k->reset != 0;
        if (k->stale > FT_STALE_NONE && k->stale < FT_STALE_COUNT) h->v[2 + k->stale][b]++;
        if (k->step >= 0) {
            rd_hist *s = &d->step[p];
            uint32_t sb = hist_bucket(s, k->step);
            s->v[0][sb]++;
            s->v[1][sb] += k->build != 0;
            s->v[2][sb] += k->reset != 0;
        }
        if (k->fuser < d->n_label_map && d->label_map[k->fuser] != UINT32_MAX)
            count_add(&d->labels.c[(size_t)d->label_map[k->fuser] * d->n_pol + p], k);
        const char *ph = k->phase ? k->phase : "(none)";
        if (!d->last_phase || strcmp(d->last_phase, ph)) {
            d->last_phase_idx = group_find(&d->phases, ph, d->n_pol);
            d->last_phase =
                d->last_phase_idx == UINT32_MAX ? NULL : d->phases.name[d->last_phase_idx];
        }
        if (d->last_phase_idx != UINT32_MAX)
            count_add(&d->phases.c[(size_t)d->last_phase_idx * d->n_pol + p], k);
        if (d->n_inputs) count_add(&d->inputs[d->n_inputs - 1].pol[p], k);
    }
    return d->next && d->next->call_fn ? d->next->call_fn(d->next->ctx, k, err) : FT_OK;
}

static int obs_end(void *ctx, const ft_replay *engine, int rc, ft_err *err)
{
    ft_report_data *d = ctx;
    return d->next && d->next->end_fn ? d->next->end_fn(d->next->ctx, engine, rc, err) : FT_OK;
}

/* ---- explain lines --------------------------------------------------------------------------- */
/* "[explain] POLICY seq=N fuser=F (label): build because A -> B, C -> D" */
static void explain_line(ft_report_data *d, const char *line)
{
    if (strncmp(line, "[explain] ", 10)) return;
    const char *pol = line + 10, *sp = strchr(pol, ' ');
    const char *because = strstr(line, " because ");
    if (!sp || !because) return;
    uint32_t p = 0;
    while (p < d->n_pol && (strlen(ft_policy_name(d->policy[p])) != (size_t)(sp - pol) ||
                            strncmp(ft_policy_name(d->policy[p]), pol, (size_t)(sp - pol))))
        p++;
    if (p == d->n_pol) return;
    const char *c = because + 9;
    while (*c) {
        const char *end = strstr(c, ", ");
        size_t len = end ? (size_t)(end - c) : strlen(c);
        /* the cause's name: up to " -> " or " (" */
        size_t name = len;
        for (size_t i = 0; i + 1 < len; i++)
            if ((c[i] == ' ' && c[i + 1] == '-') || (c[i] == ' ' && c[i + 1] == '(')) {
                name = i;
                break;
            }
        /* "f 3 -> 0": the name is its first word */
        if (name > 2 && c[0] == 'f' && c[1] == ' ') name = 1;
        uint32_t k = 0;
        while (k < d->n_causes && (strlen(d->causes[k]) != name || strncmp(d->causes[k], c, name)))
            k++;
        if (k == d->n_causes && k < RD_MAX_CAUSES) {
            char *s = ft_strndup(c, name);
            if (s) d->causes[d->n_causes++] = s;
        }
        if (k < d->n_causes) d->cause_n[k][p]++;
        if (!end) break;
        c = end + 2;
    }
}

static ssize_t explain_write(void *cookie, const char *buf, size_t size)
{
    ft_report_data *d = cookie;
    if (d->explain_fwd) fwrite(buf, 1, size, d->explain_fwd);
    for (size_t i = 0; i < size; i++) {
        if (buf[i] == '\n') {
            d->line[d->line_len < sizeof d->line ? d->line_len : sizeof d->line - 1] = 0;
            explain_line(d, d->line);
            d->line_len = 0;
        } else if (d->line_len + 1 < sizeof d->line) {
            d->line[d->line_len++] = buf[i];
        }
    }
    return (ssize_t)size;
}

FILE *ft_report_data_explain(ft_report_data *d, FILE *forward)
{
    if (d->explain_f) return d->explain_f;
    cookie_io_functions_t io = {.read = NULL, .write = explain_write, .seek = NULL, .close = NULL};
    d->explain_fwd = forward;
    d->explain_f = fopencookie(d, "w", io);
    if (d->explain_f) setvbuf(d->explain_f, NULL, _IOLBF, 0);
    return d->explain_f;
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
    if (!d->no_digest) {
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
    uint8_t *ok = ft_realloc(d->fuser_ok, nf ? nf : 1);
    if (!ok) return ft_err_set(err, FT_ENOMEM, "out of memory");
    d->fuser_ok = ok;
    for (uint32_t i = 0; i < nf; i++) {
        const char *label = ft_trace_fuser(t, i)->label;
        ok[i] = d->filter.fuser_glob && label && !fnmatch(d->filter.fuser_glob, label, 0);
    }
    return FT_OK;
}

int ft_report_check_inputs(const char *const *paths, uint32_t n_paths, FILE *warn, int64_t *ranks,
                           ft_err *err)
{
    for (uint32_t i = 0; ranks && i < n_paths; i++)
        ranks[i] = -1;
    if (n_paths < 2) return FT_OK;
    ft_report_data *d = NULL;
    int rc = ft_report_data_new(NULL, 0, &d, err);
    if (rc) return rc;
    d->no_digest = 1;
    for (uint32_t i = 0; i < n_paths && !rc; i++) {
        ft_trace *t = NULL;
        if ((rc = ft_trace_open(paths[i], FT_OPEN_READ, &t, err))) break;
        rc = add_input(d, t, paths[i], warn, err);
        if (ranks && ft_trace_header(t)->has_rank) ranks[i] = ft_trace_header(t)->rank;
        ft_trace_close(t);
    }
    ft_report_data_free(d);
    return rc;
}

/* ---- why nothing fuses ------------------------------------------------------------------------
 */
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
}

int ft_report_find_unfused(const char *const *paths, uint32_t n_paths, const ft_env_kv *env,
                           uint32_t n_env, ft_report_notes *out, ft_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = FT_OK;
    for (uint32_t p = 0; p < n_paths && !rc; p++) {
        ft_trace *t = NULL;
        ft_model *m = NULL;
        if ((rc = ft_trace_open(paths[p], FT_OPEN_READ, &t, err))) break;
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
        /* fusers with the same op list answer the same: each distinct list is asked once */
        ft_hmap seen = {0};
        uint8_t *verdict = rc ? NULL : ft_calloc(nf ? nf : 1, 1); /* per first fuser: 1 blocked */
        ft_unfused_why *whys = rc ? NULL : ft_calloc(nf ? nf : 1, sizeof *whys);
        if (!rc && (!verdict || !whys)) rc = ft_err_set(err, FT_ENOMEM, "out of memory");
        for (uint32_t u = 0; !rc && u < nf; u++) {
            uint64_t h = ft_hash64(fd[u].ops_json, strlen(fd[u].ops_json));
            uint32_t rep = ft_hmap_get(&seen, h);
            if (rep != UINT32_MAX && !strcmp(fd[rep].ops_json, fd[u].ops_json)) {
                if (!verdict[rep]) continue;
            } else {
                if (rep == UINT32_MAX && ft_hmap_put(&seen, h, u)) {
                    rc = ft_err_set(err, FT_ENOMEM, "out of memory");
                    break;
                }
                ft_unfused_why w;
                int blocked = 1, any = 0;
                /* blocked under every recipe of the trace (and none) */
                for (int32_t r = nr ? 0 : -1; r < (int32_t)nr && blocked; r++) {
                    if (!ft_model_why_unfused(m, u, r, &w))
                        blocked = 0;
                    else if (!any++)
                        whys[u] = w;
                }
                verdict[u] = (uint8_t)(blocked && any);
                if (!verdict[u]) continue;
                rep = u;
            }
            const ft_unfused_why first = whys[rep];
            char ex[128];
            if (fd[u].label)
                ft_strlcpy(ex, fd[u].label, sizeof ex);
            else
                snprintf(ex, sizeof ex, "fuser %lld", (long long)fd[u].id);
            add_note(out, &first, ex);
        }
        ft_hmap_free(&seen);
        ft_free(verdict);
        ft_free(whys);
        ft_model_free(m);
        ft_free(fd);
        ft_free(rd);
        ft_trace_close(t);
    }
    return rc;
}

/* ---- filters --------------------------------------------------------------------------------- */
void ft_report_data_filter(ft_report_data *d, const ft_report_filter *flt)
{
    d->filter = *flt;
}

void ft_report_data_apply_filter(const ft_report_data *d, ft_replay_result *r)
{
    uint64_t calls = 0;
    for (uint32_t p = 0; p < r->n_policies && p < d->n_pol; p++) {
        ft_policy_result *q = &r->pol[p];
        const rd_counts *c = &d->filt[p];
        q->calls = c->calls;
        q->builds = c->builds;
        q->hits = c->calls - c->builds;
        q->resets = c->resets;
        for (int k = 0; k < FT_STALE_COUNT; k++)
            q->stale[k] = c->stale[k];
        q->qdrift = d->filt_qdrift[p];
        memset(q->raises, 0, sizeof q->raises);
        q->cap_calls = q->cap_agree = 0;
        q->first_disagree_seq = -1;
        /* steps from the filtered histogram */
        const rd_hist *h = &d->step[p];
        memset(&q->steps, 0, sizeof q->steps);
        q->steps.width = h->width;
        q->steps.n = h->n < FT_STEP_BUCKETS ? h->n : FT_STEP_BUCKETS;
        for (uint32_t b = 0; b < q->steps.n; b++) {
            q->steps.calls[b] = h->v[0][b];
            q->steps.hits[b] = h->v[0][b] - h->v[1][b];
        }
        if (c->calls > calls) calls = c->calls;
    }
    r->calls = calls;
    r->fresh_raises = 0;
    memset(r->fresh_raise_texts, 0, sizeof r->fresh_raise_texts);
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
    d->obs.ctx = d;
    d->obs.begin_fn = obs_begin;
    d->obs.call_fn = obs_call;
    d->obs.end_fn = obs_end;
    *out = d;
    return FT_OK;
}

static const ft_replay_observer *data_observer(ft_report_data *d, const ft_replay_observer *next)
{
    d->next = next;
    d->obs.needs = next ? next->needs : 0;
    return &d->obs;
}

void ft_report_data_free(ft_report_data *d)
{
    if (!d) return;
    if (d->explain_f) fclose(d->explain_f);
    groups_free(&d->labels);
    groups_free(&d->phases);
    for (uint32_t k = 0; k < d->n_causes; k++)
        ft_free(d->causes[k]);
    ft_free(d->label_map);
    ft_free(d->fuser_ok);
    ft_free(d->inputs);
    ft_free(d);
}

int ft_report_replay(const char *const *paths, uint32_t n_paths, const ft_replay_opts *opts,
                     ft_report_data *d, FILE *warn, ft_replay_result *out, ft_err *err)
{
    ft_replay_opts o = *opts;
    o.observer = data_observer(d, opts->observer);
    ft_replay_result *one = ft_malloc(sizeof *one);
    if (!one) return ft_err_set(err, FT_ENOMEM, "out of memory");
    ft_replay_result_init(out, o.policies, o.n_policies);
    int rc = FT_OK;
    for (uint32_t i = 0; i < n_paths && !rc; i++) {
        ft_trace *t = NULL;
        if ((rc = ft_trace_open(paths[i], FT_OPEN_READ, &t, err))) break;
        rc = add_input(d, t, paths[i], warn, err);
        if (!rc) rc = ft_replay_trace(t, &o, one, err);
        if (!rc) rc = ft_replay_result_merge(out, one, err);
        ft_trace_close(t);
    }
    if (d->explain_f) fflush(d->explain_f);
    ft_free(one);
    return rc;
}
