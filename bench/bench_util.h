/*
 * bench_util.h - small pieces the benchmark programs share: thread CPU time, a sink that only
 * counts, and removing a trace with its SQLite side files. Header-only (each bench_*.c is its
 * own program); static functions, so a program that uses only some of them gets no warning.
 */
#ifndef FT_BENCH_UTIL_H
#define FT_BENCH_UTIL_H

#include "ft_recorder.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* CPU time of the calling thread in nanoseconds: benchmarks run on shared machines, where wall
 * time also counts time spent descheduled. 0 if the clock is unavailable. */
static inline uint64_t bench_thread_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double bench_thread_seconds(void)
{
    return (double)bench_thread_ns() * 1e-9;
}

/* ---- a sink that counts calls and backwards and drops everything ------------------------- */
typedef struct bench_count {
    uint64_t calls, backwards; /* records received */
} bench_count;

static inline int bench_count_header(void *ctx, const ft_header *h)
{
    (void)ctx, (void)h;
    return FT_OK;
}
static inline int bench_count_fuser(void *ctx, const ft_fuser_def *f)
{
    (void)ctx, (void)f;
    return FT_OK;
}
static inline int bench_count_recipe(void *ctx, const ft_recipe_def *d)
{
    (void)ctx, (void)d;
    return FT_OK;
}
static inline int bench_count_call(void *ctx, const ft_call *c)
{
    (void)c;
    ((bench_count *)ctx)->calls++;
    return FT_OK;
}
static inline int bench_count_backward(void *ctx, const ft_backward *b)
{
    (void)b;
    ((bench_count *)ctx)->backwards++;
    return FT_OK;
}

/* Zero n and point s at it. */
static inline void bench_count_sink(bench_count *n, ft_sink *s)
{
    memset(n, 0, sizeof *n);
    *s = (ft_sink){.ctx = n,
                   .header_fn = bench_count_header,
                   .fuser_fn = bench_count_fuser,
                   .recipe_fn = bench_count_recipe,
                   .call_fn = bench_count_call,
                   .backward_fn = bench_count_backward};
}

#endif /* FT_BENCH_UTIL_H */
