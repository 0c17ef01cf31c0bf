/*
 * driver.c - the one trace driver: a trace file through the reader, batch by batch, into the
 * engine; several files on a pool of threads, reduced into one result. Observers
 * (ft_replay_observer: numerical replay, reports) see every call's decisions through it, so
 * nothing else walks a trace.
 */
#define _POSIX_C_SOURCE 200809L
#include "replayer_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ft_replay_trace(ft_trace *t, const ft_replay_opts *opts, ft_replay_result *out, ft_err *err)
{
    static const ft_replay_opts no_opts = {0};
    ft_err local;
    if (!err) err = &local;
    if (!opts) opts = &no_opts;
    const ft_replay_observer *obs = opts->observer;
    uint64_t t0 = ft_now_ns();
    uint32_t n_fusers = ft_trace_n_fusers(t), n_recipes = ft_trace_n_recipes(t);
    ft_fuser_def *fusers = ft_calloc(n_fusers ? n_fusers : 1, sizeof *fusers);
    ft_recipe_def *recipes = ft_calloc(n_recipes ? n_recipes : 1, sizeof *recipes);
    ft_replay *r = NULL;
    ft_reader *rd = NULL;
    int rc, begun = 0;
    if (!fusers || !recipes) {
        rc = ft_err_set(err, FT_ENOMEM, "replay: out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < n_fusers; i++)
        fusers[i] = *ft_trace_fuser(t, i);
    for (uint32_t i = 0; i < n_recipes; i++)
        recipes[i] = *ft_trace_recipe(t, i);
    rc = ft_replay_new(fusers, n_fusers, recipes, n_recipes, ft_trace_header(t), opts, &r, err);
    if (rc) goto done;
    if (obs && obs->begin_fn && (rc = obs->begin_fn(obs->ctx, r, err))) goto done;
    begun = 1;
    rc = ft_reader_open(t, obs && (obs->needs & FT_OBSERVE_SPLITS) ? FT_READ_SPLITS : 0, &rd);
    if (rc) {
        ft_err_set(err, rc, "%s", ft_err_msg(ft_trace_error(t)));
        goto done;
    }
    for (;;) {
        const ft_batch *b;
        rc = ft_reader_next(rd, &b);
        if (rc) {
            ft_err_set(err, rc, "%s", ft_err_msg(ft_trace_error(t)));
            goto done;
        }
        if (!b) break;
        rc = ft_replay_batch(r, b, err);
        if (rc) goto done;
    }
done:
    if (begun && obs && obs->end_fn) {
        int erc = obs->end_fn(obs->ctx, r, rc, err);
        if (!rc) rc = erc;
    }
    if (!rc) {
        ft_replay_get(r, out);
        out->wall_ns = ft_now_ns() - t0;
    }
    ft_reader_close(rd);
    ft_replay_free(r);
    ft_free(fusers);
    ft_free(recipes);
    return rc;
}

typedef struct trace_job {
    const char *const *paths;
    uint32_t n_paths, next;
    const ft_replay_opts *opts;
    ft_replay_result *results; /* [n_paths] */
    int *rcs;                  /* [n_paths] */
    ft_err *errs;              /* [n_paths] */
    pthread_mutex_t lock;
} trace_job;

static void replay_one(trace_job *j, uint32_t k)
{
    ft_trace *t = NULL;
    int rc = ft_trace_open(j->paths[k], FT_OPEN_READ, &t, &j->errs[k]);
    if (!rc) {
        rc = ft_replay_trace(t, j->opts, &j->results[k], &j->errs[k]);
        size_t n = strlen(j->paths[k]);
        const char *m = ft_err_msg(&j->errs[k]);
        if (rc && (strncmp(m, j->paths[k], n) || m[n] != ':')) { /* name the file once */
            char msg[FT_ERR_MAX];
            ft_strlcpy(msg, m, sizeof msg);
            ft_err_set(&j->errs[k], rc, "%s: %s", j->paths[k], msg);
        }
    }
    ft_trace_close(t);
    j->rcs[k] = rc;
}

static void *worker(void *arg)
{
    trace_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        uint32_t k = j->next++;
        pthread_mutex_unlock(&j->lock);
        if (k >= j->n_paths) return NULL;
        replay_one(j, k);
    }
}

int ft_replay_traces(const char *const *paths, uint32_t n_paths, const ft_replay_opts *opts,
                     ft_replay_result *out, ft_err *err)
{
    static const ft_replay_opts no_opts = {0};
    ft_err local;
    if (!err) err = &local;
    if (!opts) opts = &no_opts;
    ft_replay_result_init(out, opts->policies, opts->n_policies);
    if (!n_paths) return ft_err_set(err, FT_EINVAL, "no trace given");
    uint64_t t0 = ft_now_ns();
    trace_job j = {paths, n_paths, 0, opts, NULL, NULL, NULL, PTHREAD_MUTEX_INITIALIZER};
    j.results = ft_calloc(n_paths, sizeof *j.results);
    j.rcs = ft_calloc(n_paths, sizeof *j.rcs);
    j.errs = ft_calloc(n_paths, sizeof *j.errs);
    pthread_t *th = NULL;
    int rc = FT_OK;
    if (!j.results || !j.rcs || !j.errs) {
        rc = ft_err_set(err, FT_ENOMEM, "replay: out of memory");
        goto done;
    }
    uint32_t n_threads = opts->n_threads;
    if (!n_threads) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = nc > 0 ? (uint32_t)nc : 1;
    }
    if (opts->per_call || opts->explain || opts->observer)
        n_threads = 1; /* keep the streams and the observer's calls in trace order */
    if (n_threads > n_paths) n_threads = n_paths;
    if (n_threads <= 1) {
        worker(&j);
    } else {
        th = ft_calloc(n_threads, sizeof *th);
        uint32_t started = 0;
        if (th)
            for (; started < n_threads; started++)
                if (pthread_create(&th[started], NULL, worker, &j)) break;
        if (!started) worker(&j); /* no thread could start: do the work here */
        for (uint32_t i = 0; i < started; i++)
            pthread_join(th[i], NULL);
    }
    for (uint32_t k = 0; k < n_paths; k++) {
        if (j.rcs[k]) {
            rc = j.rcs[k];
            ft_err_set(err, rc, "%s", ft_err_msg(&j.errs[k]));
            goto done;
        }
    }
    for (uint32_t k = 0; k < n_paths; k++) {
        rc = ft_replay_result_merge(out, &j.results[k], err);
        if (rc) goto done;
        if (opts->per_trace) opts->per_trace[k] = j.results[k];
    }
    out->wall_ns = ft_now_ns() - t0;
done:
    ft_free(th);
    ft_free(j.results);
    ft_free(j.rcs);
    ft_free(j.errs);
    return rc;
}
