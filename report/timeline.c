/*
 * timeline.c - `replay --timeline FILE.json`: the run in the Chrome trace event format (the JSON
 * object form, https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU),
 * which Perfetto and chrome://tracing load. An observer of the replay driver over its decisions
 * view; it only formats.
 *
 * - A process per trace (pid = its rank, or 1000000 + its position when the header names none),
 *   named "rank R: FILE"; a thread (track) per fuser (tid = dense fuser index + 1), named by its
 *   label and id.
 * - Each counted call a complete event ("X") at its captured time: ns from the trace's first
 *   call that has one, or, in a trace without captured ns, 1 us per seq (the process label says
 *   which). Its duration is the captured fuse_ns (0.8 us without), cut short where the fuser's
 *   next call starts, so that the slices of a track never overlap.
 * - Per policy, instant events ("i", thread scope) on the call's track: "build POLICY",
 *   "reset POLICY", "stale POLICY" (args: the class, and why a build happened).
 * - Counters ("C") per process: "step" when the training step changes, and "builds" (one series
 *   per policy, cumulative) after every call that built under some policy.
 * Memory: 48 bytes per fuser of the trace being written (its pending slice).
 */
#include "report_int.h"

#include <stdio.h>
#include <string.h>

typedef struct pending {
    int64_t ts, dur; /* ns on the timeline */
    int64_t seq, step;
    int32_t recipe;
    uint32_t f;
    uint8_t have, stale_any;
} pending;

struct ft_report_timeline {
    FILE *f;
    char name[256]; /* the output, for messages */
    int n_events;   /* written so far (for the separators) */
    /* the trace being written */
    int64_t pid;
    int ns_mode, t0_set;
    int64_t t0, last_ts, step;
    uint32_t n_fusers, n_pol;
    uint32_t pol[FT_MAX_POLICIES];
    uint64_t builds[FT_MAX_POLICIES];
    pending *pend;  /* [n_fusers] */
    uint8_t *named; /* [n_fusers] thread_name written */
    const ft_replay *engine;
    ft_replay_observer obs;
};

/* ns as microseconds with three decimals (JSON number). */
static void put_us(FILE *f, int64_t ns)
{
    const char *sign = ns < 0 ? "-" : "";
    const uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    fprintf(f, "%s%llu.%03llu", sign, (unsigned long long)(a / 1000),
            (unsigned long long)(a % 1000));
}

static void sep(ft_report_timeline *t)
{
    fputs(t->n_events++ ? ",\n" : "\n", t->f);
}

static void put_str(FILE *f, const char *s)
{
    ft_buf b = {0};
    if (!ft_buf_json_str(&b, s ? s : "", s ? strlen(s) : 0) && b.data)
        fwrite(b.data, 1, b.len, f);
    else
        fputs("\"\"", f);
    ft_buf_free(&b);
}

static int tl_begin(void *ctx, const ft_replay_input *in, const ft_replay *engine, ft_err *err)
{
    ft_report_timeline *t = ctx;
    const ft_header *h = ft_trace_header(in->trace);
    const uint32_t *idx;
    t->n_pol = ft_replay_policies(engine, &idx);
    memcpy(t->pol, idx, t->n_pol * sizeof *idx);
    memset(t->builds, 0, sizeof t->builds);
    t->engine = engine;
    t->pid = h && h->has_rank && h->rank >= 0 ? h->rank : 1000000 + (int64_t)in->index;
    t->n_fusers = ft_trace_n_fusers(in->trace);
    t->t0_set = 0;
    t->ns_mode = -1; /* decided by the first call */
    t->last_ts = 0;
    t->step = INT64_MIN;
    ft_free(t->pend);
    ft_free(t->named);
    t->pend = ft_calloc(t->n_fusers ? t->n_fusers : 1, sizeof *t->pend);
    t->named = ft_calloc(t->n_fusers ? t->n_fusers : 1, 1);
    if (!t->pend || !t->named) return ft_err_set(err, FT_ENOMEM, "out of memory");
    char name[1200];
    if (h && h->has_rank)
        snprintf(name, sizeof name, "rank %lld: %s", (long long)h->rank,
                 in->path ? in->path : "trace");
    else
        snprintf(name, sizeof name, "trace %u: %s", in->index, in->path ? in->path : "trace");
    sep(t);
    fprintf(t->f,
            "{\"ph\":\"M\",\"pid\":%lld,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":",
            (long long)t->pid);
    put_str(t->f, name);
    fputs("}}", t->f);
    sep(t);
    fprintf(t->f,
            "{\"ph\":\"M\",\"pid\":%lld,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{"
            "\"sort_index\":%u}}",
            (long long)t->pid, in->index);
    return FT_OK;
}

static void write_slice(ft_report_timeline *t, uint32_t u, const pending *p, int64_t next_ts)
{
    int64_t dur = p->dur;
    if (next_ts >= p->ts && p->ts + dur > next_ts) dur = next_ts - p->ts; /* never overlap */
    const ft_recipe_model *rm = ft_model_recipe(ft_replay_model(t->engine), p->recipe);
    sep(t);
    fprintf(t->f, "{\"ph\":\"X\",\"pid\":%lld,\"tid\":%u,\"ts\":", (long long)t->pid, u + 1);
    put_us(t->f, p->ts);
    fputs(",\"dur\":", t->f);
    put_us(t->f, dur);
    fprintf(t->f,
            ",\"name\":\"call\",\"cat\":\"call\",\"args\":{\"seq\":%lld,\"step\":%lld,"
            "\"recipe\":\"%s\",\"f\":%u,\"stale\":%s}}",
            (long long)p->seq, (long long)p->step, rm ? ft_recipe_type_name(rm->type) : "?", p->f,
            p->stale_any ? "true" : "false");
}

static void thread_name(ft_report_timeline *t, uint32_t u)
{
    const ft_fuser_def *fd = ft_replay_fuser(t->engine, u);
    char name[256];
    snprintf(name, sizeof name, "%s (fuser %lld)", fd && fd->label ? fd->label : "fuser",
             fd ? (long long)fd->id : -1LL);
    sep(t);
    fprintf(t->f,
            "{\"ph\":\"M\",\"pid\":%lld,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":",
            (long long)t->pid, u + 1);
    put_str(t->f, name);
    fputs("}}", t->f);
    sep(t);
    fprintf(t->f,
            "{\"ph\":\"M\",\"pid\":%lld,\"tid\":%u,\"name\":\"thread_sort_index\",\"args\":{"
            "\"sort_index\":%u}}",
            (long long)t->pid, u + 1, u + 1);
    t->named[u] = 1;
}

static void instant(ft_report_timeline *t, uint32_t u, int64_t ts, const char *what, uint32_t p,
                    const char *detail_key, const char *detail)
{
    const char *name = ft_policy_name(t->pol[p]);
    sep(t);
    fprintf(t->f, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%lld,\"tid\":%u,\"ts\":", (long long)t->pid,
            u + 1);
    put_us(t->f, ts);
    fprintf(t->f, ",\"name\":\"%s %s\",\"cat\":\"%s\",\"args\":{\"policy\":\"%s\"", what, name,
            what, name);
    if (detail) fprintf(t->f, ",\"%s\":\"%s\"", detail_key, detail);
    fputs("}}", t->f);
}

/* "f, recipe type" for a build's FT_WHY_* bits. */
static void why_text(unsigned why, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (unsigned bit = 1; bit < (1u << FT_WHY_COUNT) && off < cap; bit <<= 1)
        if (why & bit)
            off += (size_t)snprintf(buf + off, cap - off, "%s%s", off ? ", " : "",
                                    report_cause_name(bit));
}

static void counter_builds(ft_report_timeline *t, int64_t ts)
{
    sep(t);
    fprintf(t->f, "{\"ph\":\"C\",\"pid\":%lld,\"tid\":0,\"ts\":", (long long)t->pid);
    put_us(t->f, ts);
    fputs(",\"name\":\"builds\",\"args\":{", t->f);
    for (uint32_t p = 0; p < t->n_pol; p++)
        fprintf(t->f, "%s\"%s\":%llu", p ? "," : "", ft_policy_name(t->pol[p]),
                (unsigned long long)t->builds[p]);
    fputs("}}", t->f);
}

/* The call's time on the timeline (ns). */
static int64_t call_ts(ft_report_timeline *t, const ft_replay_view *v, uint32_t j)
{
    const ft_batch *b = v->batch;
    const uint32_t i = v->row[j];
    const int has_ns = (b->flags[i] & FT_CF_HAS_NS) != 0;
    if (t->ns_mode < 0) t->ns_mode = has_ns;
    if (!t->ns_mode) return v->seq[j] * 1000;
    if (!has_ns) return t->last_ts; /* a call without ns in a timed trace: where the last one was */
    if (!t->t0_set) {
        t->t0 = b->ns[i];
        t->t0_set = 1;
    }
    return b->ns[i] - t->t0;
}

static int tl_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    (void)err;
    ft_report_timeline *t = ctx;
    const ft_batch *b = v->batch;
    char why[256];
    for (uint32_t j = 0; j < v->n; j++) {
        if (v->match && !v->match[j]) continue;
        const uint32_t u = v->fuser[j], i = v->row[j];
        const int64_t ts = call_ts(t, v, j);
        t->last_ts = ts;
        if (!t->named[u]) thread_name(t, u);
        pending *pd = &t->pend[u];
        if (pd->have) write_slice(t, u, pd, ts);
        *pd = (pending){
            .have = 1,
            .ts = ts,
            .dur = (b->flags[i] & FT_CF_HAS_FUSE_NS) && b->fuse_ns[i] >= 0 ? b->fuse_ns[i] : 800,
            .seq = v->seq[j],
            .step = v->step[j],
            .recipe = v->recipe[j],
            .f = v->f[j]};
        if (v->step[j] >= 0 && v->step[j] != t->step) {
            t->step = v->step[j];
            sep(t);
            fprintf(t->f, "{\"ph\":\"C\",\"pid\":%lld,\"tid\":0,\"ts\":", (long long)t->pid);
            put_us(t->f, ts);
            fprintf(t->f, ",\"name\":\"step\",\"args\":{\"step\":%lld}}", (long long)t->step);
        }
        int built = 0;
        for (uint32_t p = 0; p < v->n_pol; p++) {
            const ft_view_policy *vp = &v->pol[p];
            if (vp->dec[j] & FT_DEC_RESET) instant(t, u, ts, "reset", p, NULL, NULL);
            if (vp->dec[j] & FT_DEC_BUILD) {
                if (vp->why) why_text(vp->why[j], why, sizeof why);
                instant(t, u, ts, "build", p, "why", vp->why ? why : NULL);
                t->builds[p]++;
                built = 1;
            }
            if (vp->stale[j] != FT_STALE_NONE) {
                instant(t, u, ts, "stale", p, "class", ft_stale_name((ft_stale)vp->stale[j]));
                pd->stale_any = 1;
            }
        }
        if (built) counter_builds(t, ts);
    }
    return ferror(t->f) ? ft_err_set(err, FT_EIO, "writing the timeline %s failed", t->name)
                        : FT_OK;
}

static int tl_end(void *ctx, const ft_replay *engine, int rc, ft_err *err)
{
    (void)engine;
    ft_report_timeline *t = ctx;
    if (rc) return FT_OK;
    for (uint32_t u = 0; u < t->n_fusers; u++)
        if (t->pend[u].have) write_slice(t, u, &t->pend[u], INT64_MIN);
    sep(t);
    fprintf(t->f,
            "{\"ph\":\"M\",\"pid\":%lld,\"tid\":0,\"name\":\"process_labels\",\"args\":{"
            "\"labels\":\"%s\"}}",
            (long long)t->pid,
            t->ns_mode == 1 ? "time: captured ns from the first call"
                            : "time: 1 us per call seq (no captured ns)");
    return ferror(t->f) ? ft_err_set(err, FT_EIO, "writing the timeline %s failed", t->name)
                        : FT_OK;
}

int ft_report_timeline_new(FILE *f, const char *name, ft_report_timeline **out, ft_err *err)
{
    *out = NULL;
    ft_report_timeline *t = ft_calloc(1, sizeof *t);
    if (!t) return ft_err_set(err, FT_ENOMEM, "out of memory");
    t->f = f;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "file");
    t->obs = (ft_replay_observer){.ctx = t,
                                  .needs = FT_VIEW_CAUSES,
                                  .begin_fn = tl_begin,
                                  .batch_fn = tl_batch,
                                  .end_fn = tl_end};
    fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"writer\":\"fusertrace replay "
          "--timeline\"},\"traceEvents\":[",
          f);
    *out = t;
    return FT_OK;
}

const ft_replay_observer *ft_report_timeline_observer(ft_report_timeline *t)
{
    return &t->obs;
}

int ft_report_timeline_finish(ft_report_timeline *t, ft_err *err)
{
    fputs("\n]}\n", t->f);
    return ferror(t->f) ? ft_err_set(err, FT_EIO, "writing the timeline %s failed", t->name)
                        : FT_OK;
}

void ft_report_timeline_free(ft_report_timeline *t)
{
    if (!t) return;
    ft_free(t->pend);
    ft_free(t->named);
    ft_free(t);
}
