/*
 * driver.c - the one trace driver. Pull form (ft_replay_cursor): one open trace through the
 * reader, batch by batch into the engine, the batch's view handed back to the caller (SQL's
 * `decisions` table reads rows straight out of it). Push form (ft_replay_run): a loop over the
 * pull form for every trace of an ft_replay_set, each view handed to every observer in order;
 * traces nobody observes run on a pool of threads, reduced into one result. The set opens each
 * trace once for every pass a command makes over it; nothing else replays a trace.
 */
#define _POSIX_C_SOURCE 200809L
#include "replayer_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const ft_replay_opts no_opts = {0};

/* ---- pull form ------------------------------------------------------------------------------ */
struct ft_replay_cursor {
    ft_trace *t;
    ft_replay *eng;
    ft_reader *rd;
    uint64_t t0; /* open time (wall_ns) */
};

void ft_replay_cursor_close(ft_replay_cursor *c)
{
    if (!c) return;
    ft_reader_close(c->rd);
    ft_replay_free(c->eng);
    ft_free(c);
}

int ft_replay_cursor_open(ft_trace *t, const ft_replay_opts *opts, ft_replay_cursor **out,
                          ft_err *err)
{
    ft_err local;
    if (!err) err = &local;
    if (!opts) opts = &no_opts;
    *out = NULL;
    ft_replay_cursor *c = ft_calloc(1, sizeof *c);
    if (!c) return ft_err_set(err, FT_ENOMEM, "replay: out of memory");
    c->t = t;
    c->t0 = ft_now_ns();
    const uint32_t n_fusers = ft_trace_n_fusers(t), n_recipes = ft_trace_n_recipes(t);
    /* the engine reads the trace's own tables (contiguous, fixed while the trace is open): a
     * cursor per thread or per SQL table costs no copy of the declarations */
    const ft_fuser_def *fusers = n_fusers ? ft_trace_fuser(t, 0) : NULL;
    const ft_recipe_def *recipes = n_recipes ? ft_trace_recipe(t, 0) : NULL;
    int rc =
        ft_replay_new(fusers, n_fusers, recipes, n_recipes, ft_trace_header(t), opts, &c->eng, err);
    if (rc) goto fail;
    rc = ft_reader_open(t, (opts->needs & FT_VIEW_SPLITS) ? FT_READ_SPLITS : FT_READ_CHECK_SPLITS,
                        &c->rd);
    if (rc) {
        ft_err_set(err, rc, "%s", ft_err_msg(ft_trace_error(t)));
        goto fail;
    }
    *out = c;
    return FT_OK;
fail:
    ft_replay_cursor_close(c);
    return rc;
}

int ft_replay_cursor_bound(ft_replay_cursor *c, int64_t seq_hi, ft_err *err)
{
    uint64_t first, n;
    ft_trace_seq_chunks(c->t, INT64_MIN, seq_hi, &first, &n);
    const uint64_t pos = ft_reader_pos(c->rd), end = first + n;
    int rc = ft_reader_range(c->rd, pos, end > pos ? end - pos : 0);
    if (rc) return ft_err_set(err, rc, "%s", ft_err_msg(ft_trace_error(c->t)));
    return FT_OK;
}

int ft_replay_cursor_next(ft_replay_cursor *c, const ft_replay_view **view, int *more, ft_err *err)
{
    const ft_batch *b;
    *view = NULL;
    *more = 0;
    int rc = ft_reader_next(c->rd, &b);
    if (rc) return ft_err_set(err, rc, "%s", ft_err_msg(ft_trace_error(c->t)));
    if (!b) return FT_OK;
    *more = 1;
    return ft_replay_batch(c->eng, b, view, err);
}

const ft_replay *ft_replay_cursor_engine(const ft_replay_cursor *c)
{
    return c->eng;
}

void ft_replay_cursor_result(const ft_replay_cursor *c, ft_replay_result *out)
{
    ft_replay_get(c->eng, out);
    out->wall_ns = ft_now_ns() - c->t0;
}

/* ---- push form: one trace, its observers ---------------------------------------------------- */
/* Replay trace k of a command: every view to every observer; the observers that began end, also
 * on failure. */
static int drive(ft_trace *t, const char *path, uint32_t k, const ft_replay_opts *opts,
                 ft_replay_result *out, ft_err *err)
{
    ft_replay_opts o = *opts;
    for (uint32_t i = 0; i < opts->n_observers; i++)
        o.needs |= opts->observers[i]->needs;
    ft_replay_cursor *c = NULL;
    int rc = ft_replay_cursor_open(t, &o, &c, err);
    if (rc) return rc;
    const ft_replay_input in = {.index = k, .path = path, .trace = t};
    uint32_t begun = 0;
    for (; begun < o.n_observers && !rc; begun++) {
        const ft_replay_observer *ob = o.observers[begun];
        if (ob->begin_fn) rc = ob->begin_fn(ob->ctx, &in, c->eng, err);
    }
    for (int more = 1; !rc && more;) {
        const ft_replay_view *v;
        rc = ft_replay_cursor_next(c, &v, &more, err);
        for (uint32_t i = 0; !rc && v && i < o.n_observers; i++) {
            const ft_replay_observer *ob = o.observers[i];
            if (ob->batch_fn && (rc = ob->batch_fn(ob->ctx, v, err)) && !err->msg[0])
                ft_err_set(err, rc, "seqs %lld to %lld: the replay's observer stopped: %s",
                           (long long)v->batch->seq[0], (long long)v->batch->seq[v->batch->n - 1],
                           ft_strerror(rc));
        }
    }
    for (uint32_t i = 0; i < begun; i++) {
        const ft_replay_observer *ob = o.observers[i];
        if (!ob->end_fn) continue;
        int erc = ob->end_fn(ob->ctx, c->eng, rc, err);
        if (!rc) rc = erc;
    }
    if (!rc) ft_replay_cursor_result(c, out);
    ft_replay_cursor_close(c);
    return rc;
}

int ft_replay_trace(ft_trace *t, const ft_replay_opts *opts, ft_replay_result *out, ft_err *err)
{
    ft_err local;
    if (!err) err = &local;
    return drive(t, NULL, 0, opts ? opts : &no_opts, out, err);
}

/* ---- the traces of a command ---------------------------------------------------------------- */
struct ft_replay_set {
    uint32_t n;
    const char *const *paths; /* the caller's */
    ft_trace **t;             /* [n] */
};

/* err's message with path in front, unless it names path already (once is enough). */
static void name_file(ft_err *err, int rc, const char *path)
{
    size_t n = strlen(path);
    const char *m = ft_err_msg(err);
    if (!strncmp(m, path, n) && m[n] == ':') return;
    char msg[FT_ERR_MAX];
    ft_strlcpy(msg, m, sizeof msg);
    ft_err_set(err, rc, "%s: %s", path, msg);
}

void ft_replay_set_close(ft_replay_set *s)
{
    if (!s) return;
    for (uint32_t k = 0; k < s->n; k++)
        ft_trace_close(s->t[k]);
    ft_free(s->t);
    ft_free(s);
}

int ft_replay_set_open(const char *const *paths, uint32_t n_paths, ft_replay_set **out, ft_err *err)
{
    ft_err local;
    if (!err) err = &local;
    *out = NULL;
    if (!n_paths) return ft_err_set(err, FT_EINVAL, "no trace given");
    ft_replay_set *s = ft_calloc(1, sizeof *s);
    if (s) s->t = ft_calloc(n_paths, sizeof *s->t);
    if (!s || !s->t) {
        ft_free(s);
        return ft_err_set(err, FT_ENOMEM, "replay: out of memory");
    }
    s->n = n_paths;
    s->paths = paths;
    for (uint32_t k = 0; k < n_paths; k++) {
        int rc = ft_trace_open(paths[k], FT_OPEN_READ, &s->t[k], err);
        if (rc) {
            name_file(err, rc, paths[k]);
            ft_replay_set_close(s);
            return rc;
        }
    }
    *out = s;
    return FT_OK;
}

uint32_t ft_replay_set_count(const ft_replay_set *s)
{
    return s->n;
}

ft_trace *ft_replay_set_trace(const ft_replay_set *s, uint32_t k)
{
    return k < s->n ? s->t[k] : NULL;
}

const char *ft_replay_set_path(const ft_replay_set *s, uint32_t k)
{
    return k < s->n ? s->paths[k] : NULL;
}

typedef struct trace_job {
    const ft_replay_set *set;
    uint32_t next;
    const ft_replay_opts *opts;
    ft_replay_result *results; /* [n] */
    int *rcs;                  /* [n] */
    ft_err *errs;              /* [n] */
    pthread_mutex_t lock;
} trace_job;

static void *worker(void *arg)
{
    trace_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        uint32_t k = j->next++;
        pthread_mutex_unlock(&j->lock);
        if (k >= j->set->n) return NULL;
        const char *path = j->set->paths[k];
        j->rcs[k] = drive(j->set->t[k], path, k, j->opts, &j->results[k], &j->errs[k]);
        if (j->rcs[k]) name_file(&j->errs[k], j->rcs[k], path);
    }
}

/* One thread per trace (at most n_threads) when nothing observes, else in trace order here. */
static void run_jobs(trace_job *j)
{
    const ft_replay_opts *opts = j->opts;
    uint32_t n_threads = opts->n_threads;
    if (!n_threads) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = nc > 0 ? (uint32_t)nc : 1;
    }
    if (opts->n_observers) n_threads = 1; /* the observers see the traces in order */
    if (n_threads > j->set->n) n_threads = j->set->n;
    if (n_threads <= 1) {
        worker(j);
        return;
    }
    pthread_t *th = ft_calloc(n_threads, sizeof *th);
    uint32_t started = 0;
    if (th)
        for (; started < n_threads; started++)
            if (pthread_create(&th[started], NULL, worker, j)) break;
    if (!started) worker(j); /* no thread could start: do the work here */
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    ft_free(th);
}

int ft_replay_run(const ft_replay_set *s, const ft_replay_opts *opts, ft_replay_result *out,
                  ft_err *err)
{
    ft_err local;
    if (!err) err = &local;
    if (!opts) opts = &no_opts;
    ft_replay_result_init(out, opts->policies, opts->n_policies);
    const uint32_t n = s->n;
    uint64_t t0 = ft_now_ns();
    trace_job j = {s, 0, opts, NULL, NULL, NULL, PTHREAD_MUTEX_INITIALIZER};
    j.results = ft_calloc(n, sizeof *j.results);
    j.rcs = ft_calloc(n, sizeof *j.rcs);
    j.errs = ft_calloc(n, sizeof *j.errs);
    int rc = FT_OK;
    if (!j.results || !j.rcs || !j.errs) {
        rc = ft_err_set(err, FT_ENOMEM, "replay: out of memory");
        goto done;
    }
    run_jobs(&j);
    for (uint32_t k = 0; k < n; k++) {
        if (j.rcs[k]) {
            rc = j.rcs[k];
            ft_err_set(err, rc, "%s", ft_err_msg(&j.errs[k]));
            goto done;
        }
    }
    for (uint32_t k = 0; k < n; k++) {
        rc = ft_replay_result_merge(out, &j.results[k], err);
        if (rc) goto done;
        if (opts->per_trace) opts->per_trace[k] = j.results[k];
    }
    out->wall_ns = ft_now_ns() - t0;
done:
    ft_free(j.results);
    ft_free(j.rcs);
    ft_free(j.errs);
    return rc;
}

int ft_replay_traces(const char *const *paths, uint32_t n_paths, const ft_replay_opts *opts,
                     ft_replay_result *out, ft_err *err)
{
    ft_err local;
    if (!err) err = &local;
    ft_replay_result_init(out, opts ? opts->policies : NULL, opts ? opts->n_policies : 0);
    ft_replay_set *s = NULL;
    int rc = ft_replay_set_open(paths, n_paths, &s, err);
    if (!rc) rc = ft_replay_run(s, opts, out, err);
    ft_replay_set_close(s);
    return rc;
}
