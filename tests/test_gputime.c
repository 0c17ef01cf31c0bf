/*
 * test_gputime.c - GPU time's bookkeeping (numerics/gputime.c, report/gputime.c) on the CPU: the
 * CUDA row of the back-end table is replaced, at link time (-Wl,--wrap=nx_backend_of), by a fake
 * device whose timer returns scripted times (and refuses one configuration), while its problems,
 * runs and figures are the CPU back end's. Checked against a count made here from the replay's
 * views and tefuser's model: the per-policy sums per round of the chosen and the fresh plans,
 * the raise, untimed and stale counts, the steps, the median and spread of the rounds, the stale
 * difference; that numerics on or off changes neither the timing nor the numerics; merging two
 * traces; the text, JSON and HTML sections; the refusals without a device (the library's and the
 * CLI's exit 3 before any output); the sampled calls spread over several fake devices (--devices)
 * giving the one device's report.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ft_numerics.h"
#include "ft_recorder.h"
#include "ft_report.h"
#include "ft_synth.h"
#include "numerics_int.h"
#include "test_util.h"

#include <jansson.h>

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the fake device ------------------------------------------------------------------------ */

const nx_backend *__real_nx_backend_of(ft_numerics_backend be);
const nx_backend *__wrap_nx_backend_of(ft_numerics_backend be);

typedef struct fake {
    ft_nx *cpu; /* the CPU back end's context: problems, runs, figures */
    int grad;   /* the current problem runs the backward */
    int device; /* the fake device it lives on */
    uint64_t problems, inputs_only, timed;
} fake;

/* The fake node: how many devices it has, the problems each was given and the current device of
 * each thread (which every context call checks, as the CUDA back end's own contexts make theirs
 * current). */
#define FAKE_MAX_DEV 4
static int g_n_dev = 1;
static atomic_uint_fast64_t g_dev_problems[FAKE_MAX_DEV];
static _Thread_local int g_cur_dev = -1;

static fake *as_fake(ft_nx *nx)
{
    return (fake *)(void *)nx;
}

static int fake_open_on(int device, ft_nx **out, ft_err *err)
{
    assert_true(device >= 0 && device < g_n_dev);
    fake *f = calloc(1, sizeof *f);
    if (!f) return ft_err_set(err, FT_ENOMEM, "fake: no memory");
    f->device = device;
    int rc = ft_cpu_nx_new(&f->cpu, err);
    if (rc) {
        free(f);
        return rc;
    }
    *out = (ft_nx *)(void *)f;
    return FT_OK;
}

static int fake_open(ft_nx **out, ft_err *err)
{
    return fake_open_on(0, out, err);
}

static int fake_set_device(int device, ft_err *err)
{
    if (device < 0 || device >= g_n_dev) return ft_err_set(err, FT_EINVAL, "fake: no device");
    g_cur_dev = device;
    return FT_OK;
}

static void fake_close(ft_nx *nx)
{
    fake *f = as_fake(nx);
    ft_cpu_nx_free(f->cpu);
    free(f);
}

static int fake_problem(ft_nx *nx, const ft_nx_problem *p, ft_err *err)
{
    fake *f = as_fake(nx);
    assert_int_equal(g_cur_dev, f->device); /* the slot made its device current */
    atomic_fetch_add(&g_dev_problems[f->device], 1);
    f->problems++;
    f->inputs_only += p->inputs_only;
    f->grad = p->grad;
    return ft_cpu_nx_problem(f->cpu, p, err);
}

static int fake_run(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, unsigned flags, ft_err *err)
{
    return ft_cpu_nx_run(as_fake(nx)->cpu, path, q, flags, err);
}

static int fake_collect(ft_nx *nx, ft_nx_figs *figs, uint32_t n, ft_err *err)
{
    return ft_cpu_nx_collect(as_fake(nx)->cpu, figs, n, err);
}

static int fake_memory(ft_nx *nx, uint64_t *held, uint64_t *pool_peak, ft_err *err)
{
    return ft_cpu_nx_memory(as_fake(nx)->cpu, held, pool_peak, err);
}

static void fake_profile(ft_nx *nx, int on, double ms[FT_NX_PHASES])
{
    ft_cpu_nx_profile(as_fake(nx)->cpu, on, ms);
}

static int fake_n_devices(void)
{
    return g_n_dev;
}

#define FAKE_GPU "FAKE-GPU <9000>"

static int fake_device_info(char *name, size_t cap, int *n_sm, ft_err *err)
{
    (void)err;
    ft_strlcpy(name, FAKE_GPU, cap);
    *n_sm = 1;
    return FT_OK;
}

static int fake_mem_info(uint64_t *free_b, uint64_t *total_b, ft_err *err)
{
    (void)err;
    *free_b = *total_b = (uint64_t)1 << 40;
    return FT_OK;
}

/* The scripted timer: dyadic milliseconds (sums of them are exact), by topology, backward and
 * format, growing by 1/8 per round; the fused MXFP8 forward alone is refused. */
static int refused(int fused, ft_qfmt fmt, int grad)
{
    return fused && fmt == FT_QF_MXFP8 && !grad;
}

static double script_ms(int fused, ft_qfmt fmt, int grad, uint32_t r)
{
    return (fused ? 2.0 : 3.0) + (grad ? 4.0 : 0.0) + 0.5 * (double)fmt + 0.125 * (double)r;
}

static int fake_time(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, uint32_t warmup,
                     uint32_t rounds, ft_nx_time *out, ft_err *err)
{
    (void)err;
    fake *f = as_fake(nx);
    memset(out, 0, sizeof *out);
    assert_int_equal(warmup, 2);
    assert_true(rounds >= 1 && rounds <= FT_NX_MAX_ROUNDS);
    f->timed++;
    const int fused = path == FT_MLP_FUSED;
    if (refused(fused, q->fmt, f->grad)) {
        out->rc = FT_EUNSUPPORTED;
        ft_strlcpy(out->msg, "fake: no fused MXFP8 forward", sizeof out->msg);
        return FT_OK;
    }
    out->n_rounds = rounds;
    for (uint32_t r = 0; r < rounds; r++)
        out->ms[r] = script_ms(fused, q->fmt, f->grad, r);
    if (q->fmt == FT_QF_FP8_DELAYED) out->proxies = FT_NX_PROXY_DELAYED;
    return FT_OK;
}

static const nx_backend fake_row = {.name = "cuda",
                                    .device = 1,
                                    .open = fake_open,
                                    .close = fake_close,
                                    .problem = fake_problem,
                                    .run = fake_run,
                                    .collect = fake_collect,
                                    .memory = fake_memory,
                                    .profile = fake_profile,
                                    .n_devices = fake_n_devices,
                                    .open_on = fake_open_on,
                                    .set_device = fake_set_device,
                                    .device_info = fake_device_info,
                                    .mem_info = fake_mem_info,
                                    .time = fake_time};

const nx_backend *__wrap_nx_backend_of(ft_numerics_backend be)
{
    return be == FT_NUMERICS_CUDA ? &fake_row : __real_nx_backend_of(be);
}

/* ---- a trace, and the count made here ------------------------------------------------------- */

static char g_dir[1024], g_trace[1200];

static int setup(void **state)
{
    (void)state;
    if (tu_dir_fresh(g_dir, sizeof g_dir, "test_gputime")) return -1;
    tu_dir_path(g_trace, sizeof g_trace, g_dir, "rs.ftdb");
    ft_rec *rec = NULL;
    ft_err err = {0};
    if (ft_rec_open(g_trace, NULL, &rec, &err)) return -1;
    ft_sink sink;
    ft_rec_sink(rec, &sink);
    const ft_synth_param sets[] = {{"layers", "2"},       {"experts", "4"},     {"tokens", "256"},
                                   {"hidden", "128"},     {"ffn", "64"},        {"steps", "8"},
                                   {"microbatches", "2"}, {"detour_every", "5"}};
    int rc = ft_synth_run("rht-switch", sets, FT_ARRAY_LEN(sets), 1, &sink, &err);
    if (ft_rec_close(rec) || rc) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return tu_dir_remove(g_dir);
}

/* What the bookkeeping should hold, counted call by call from the views. */
typedef struct expect {
    uint64_t calls, steps;
    uint32_t np;
    uint64_t timed[FT_MAX_POLICIES], stale[FT_MAX_POLICIES], raised[FT_MAX_POLICIES];
    uint64_t fresh_raised[FT_MAX_POLICIES], untimed[FT_MAX_POLICIES];
    double chosen[FT_MAX_POLICIES][FT_NX_MAX_ROUNDS], fresh[FT_MAX_POLICIES][FT_NX_MAX_ROUNDS];
} expect;

static ft_qfmt fmt_of(ft_qkind k)
{
    switch (k) {
    case FT_QK_FP8_DELAYED:
        return FT_QF_FP8_DELAYED;
    case FT_QK_FP8_CURRENT:
        return FT_QF_FP8_CURRENT;
    case FT_QK_FP8_BLOCK:
        return FT_QF_FP8_BLOCK;
    case FT_QK_MXFP8:
        return FT_QF_MXFP8;
    case FT_QK_NVFP4:
        return FT_QF_NVFP4;
    default:
        return FT_QF_NONE;
    }
}

/* A plan's situation as far as the count here needs it: topology and quantizers. */
typedef struct sitx {
    int fused;
    ft_quantizers z;
} sitx;

static int same_sit(const sitx *a, const sitx *b, int grad)
{
    ft_quantizers x = a->z, y = b->z;
    if (!grad) x.rht = y.rht = x.sr = y.sr = 0, x.bwd_e5m2 = y.bwd_e5m2 = 0;
    return a->fused == b->fused && x.kind == y.kind && x.fwd_e5m2 == y.fwd_e5m2 &&
           x.bwd_e5m2 == y.bwd_e5m2 && x.rht == y.rht && x.sr == y.sr && x.two_d == y.two_d &&
           x.pow2_scales == y.pow2_scales;
}

static void count_view(const ft_replay_view *v, uint32_t rounds, expect *e, ft_hmap *steps)
{
    const ft_model *m = ft_replay_model(v->engine);
    for (uint32_t j = 0; j < v->n; j++) {
        ft_grouped_mlp gm;
        if (!ft_model_grouped_mlp(m, v->fuser[j], &gm)) continue;
        if (v->splits_off[j + 1] == v->splits_off[j]) continue;
        e->calls++;
        if (v->step[j] >= 0) assert_int_equal(ft_hmap_put(steps, (uint64_t)v->step[j], 1), FT_OK);
        const int grad = v->f[j] <= gm.first + 2;
        const char *fr = NULL;
        const ft_qstate *fq = ft_replay_qstate(v->engine, v->fresh_q[j]);
        ft_model_run_raises(m, v->fuser[j], v->recipe[j], v->fresh[j], fq, v->n_tokens[j], v->f[j],
                            &fr);
        sitx fs = {ft_model_plan_fused_mlp(m, v->fresh[j]) ? 1 : 0, {0}};
        ft_model_quantizers(m, v->recipe[j], fq, &fs.z);
        for (uint32_t p = 0; p < v->n_pol; p++) {
            const char *cr = NULL;
            const ft_qstate *cq = ft_replay_qstate(v->engine, v->pol[p].q[j]);
            ft_model_run_raises(m, v->fuser[j], v->recipe[j], v->pol[p].plan[j], cq, v->n_tokens[j],
                                v->f[j], &cr);
            sitx cs = {ft_model_plan_fused_mlp(m, v->pol[p].plan[j]) ? 1 : 0, {0}};
            ft_model_quantizers(m, v->recipe[j], cq, &cs.z);
            if (cr) {
                e->raised[p]++;
                continue;
            }
            if (fr) {
                e->fresh_raised[p]++;
                continue;
            }
            const ft_qfmt cf = fmt_of(cs.z.kind), ff = fmt_of(fs.z.kind);
            if (refused(cs.fused, cf, grad) || refused(fs.fused, ff, grad)) {
                e->untimed[p]++;
                continue;
            }
            e->timed[p]++;
            e->stale[p] += !same_sit(&cs, &fs, grad);
            for (uint32_t r = 0; r < rounds; r++) {
                e->chosen[p][r] += script_ms(cs.fused, cf, grad, r);
                e->fresh[p][r] += script_ms(fs.fused, ff, grad, r);
            }
        }
    }
}

static void count_trace(const char *path, uint32_t rounds, expect *e)
{
    memset(e, 0, sizeof *e);
    ft_trace *t = NULL;
    ft_err err = {0};
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    ft_replay_opts ro = {.needs = FT_VIEW_DECISIONS | FT_VIEW_SPLITS};
    ft_replay_cursor *c = NULL;
    assert_int_equal(ft_replay_cursor_open(t, &ro, &c, &err), FT_OK);
    ft_hmap steps = {0};
    for (int more = 1; more;) {
        const ft_replay_view *v = NULL;
        assert_int_equal(ft_replay_cursor_next(c, &v, &more, &err), FT_OK);
        if (v) {
            e->np = v->n_pol;
            count_view(v, rounds, e, &steps);
        }
    }
    e->steps = steps.n;
    ft_hmap_free(&steps);
    ft_replay_cursor_close(c);
    ft_trace_close(t);
}

/* GPU time (and, unless time_only, numerics) of the trace on the fake device. */
static ft_numerics_result *run_gt(const char *path, uint32_t sample, int time_only, uint32_t rounds)
{
    ft_numerics_result *nr = ft_calloc(1, sizeof *nr);
    assert_non_null(nr);
    ft_trace *t = NULL;
    ft_err err = {0};
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    ft_replay_opts ro = {0};
    ft_numerics_opts no = {.shrink = 2,
                           .sample = sample,
                           .seed = 3,
                           .backend = FT_NUMERICS_CUDA,
                           .gpu_time = 1,
                           .time_only = (uint8_t)time_only,
                           .time_rounds = rounds};
    int rc = ft_numerics_replay_trace(t, &ro, &no, NULL, nr, &err);
    if (rc) print_error("%s\n", ft_err_msg(&err));
    assert_int_equal(rc, FT_OK);
    ft_trace_close(t);
    return nr;
}

static void assert_matches(const ft_numerics_result *nr, const expect *e, uint32_t rounds)
{
    const ft_gputime_result *g = &nr->gt;
    assert_true(g->on);
    assert_string_equal(g->device, FAKE_GPU);
    assert_int_equal(g->rounds, rounds);
    assert_int_equal(g->warmup, 2);
    assert_int_equal(g->calls, e->calls);
    assert_int_equal(g->steps, e->steps);
    assert_int_equal(ft_gputime_steps(g), e->steps);
    assert_int_equal(g->n_policies, e->np);
    assert_true(g->timed > 0 && g->refused > 0);
    assert_string_equal(g->refuse_text, "fake: no fused MXFP8 forward");
    uint64_t any_stale = 0;
    for (uint32_t p = 0; p < e->np; p++) {
        const ft_gputime_policy *q = &g->pol[p];
        print_message("%-16s timed %llu stale %llu raised %llu fresh_raised %llu untimed %llu "
                      "chosen %.3f fresh %.3f ms/step\n",
                      nr->pol[p].name, (unsigned long long)q->calls,
                      (unsigned long long)q->stale_calls, (unsigned long long)q->raised,
                      (unsigned long long)q->fresh_raised, (unsigned long long)q->untimed,
                      ft_gputime_ms(g, p, 0, 0), ft_gputime_ms(g, p, 1, 0));
        assert_int_equal(q->calls, e->timed[p]);
        assert_int_equal(q->stale_calls, e->stale[p]);
        assert_int_equal(q->raised, e->raised[p]);
        assert_int_equal(q->fresh_raised, e->fresh_raised[p]);
        assert_int_equal(q->untimed, e->untimed[p]);
        assert_int_equal(q->calls + q->raised + q->fresh_raised + q->untimed, g->calls);
        any_stale += q->stale_calls;
        for (uint32_t r = 0; r < rounds; r++) {
            assert_true(q->chosen_ms[r] == e->chosen[p][r]); /* dyadic: exact sums */
            assert_true(q->fresh_ms[r] == e->fresh[p][r]);
        }
        /* the rounds grow: the median is the middle one, the spread the first and last */
        const double s = (double)e->steps;
        const uint32_t mid = rounds / 2;
        assert_true(ft_gputime_ms(g, p, 0, 0) == e->chosen[p][mid] / s);
        assert_true(ft_gputime_ms(g, p, 0, 1) == e->chosen[p][0] / s);
        assert_true(ft_gputime_ms(g, p, 0, 2) == e->chosen[p][rounds - 1] / s);
        assert_true(ft_gputime_ms(g, p, 1, 0) == e->fresh[p][mid] / s);
        assert_true(fabs(ft_gputime_ms(g, p, 2, 0) - (e->chosen[p][mid] - e->fresh[p][mid]) / s) <
                    1e-12);
        /* both sums grow by the same step per round: the difference does not spread */
        assert_true(fabs(ft_gputime_ms(g, p, 2, 1) - ft_gputime_ms(g, p, 2, 2)) < 1e-9);
    }
    assert_true(any_stale > 0); /* the trace has stale plans that cost GPU time */
    uint64_t any_raised = 0;
    for (uint32_t p = 0; p < e->np; p++)
        any_raised += e->raised[p];
    assert_true(any_raised > 0); /* and stale plans TE raises on (not timed) */
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* Every call sampled: every situation met is timed or refused, and the sums are the count's. */
static void test_gputime_sums_match_the_calls(void **state)
{
    (void)state;
    expect e;
    count_trace(g_trace, 5, &e);
    ft_numerics_result *nr = run_gt(g_trace, 0, 1, 5);
    assert_int_equal(nr->gt.timed + nr->gt.refused, nr->gt.situations);
    assert_true(nr->time_only);
    assert_matches(nr, &e, 5);
    /* rebuild-always never runs a stale plan: it costs nothing */
    for (uint32_t p = 0; p < nr->n_policies; p++)
        if (!strcmp(nr->pol[p].name, "rebuild-always")) {
            assert_int_equal(nr->gt.pol[p].stale_calls, 0);
            assert_true(ft_gputime_ms(&nr->gt, p, 2, 0) == 0.0);
        }
    ft_free(nr);
}

/* An even number of rounds: the median is the mean of the middle two. */
static void test_gputime_median_of_even_rounds(void **state)
{
    (void)state;
    ft_numerics_result *nr = run_gt(g_trace, 0, 1, 4);
    const ft_gputime_result *g = &nr->gt;
    const double s = (double)ft_gputime_steps(g);
    for (uint32_t p = 0; p < g->n_policies; p++)
        assert_true(fabs(ft_gputime_ms(g, p, 0, 0) -
                         0.5 * (g->pol[p].chosen_ms[1] + g->pol[p].chosen_ms[2]) / s) < 1e-12);
    ft_free(nr);
}

/* A small sample times fewer situations: the calls of the others are untimed, every counted call
 * is still in exactly one class, and only the sampled calls' situations were timed. */
static void test_gputime_small_sample_leaves_calls_untimed(void **state)
{
    (void)state;
    ft_numerics_result *all = run_gt(g_trace, 0, 1, 3);
    ft_numerics_result *one = run_gt(g_trace, 1, 1, 3);
    /* --sample 1 runs one call, plus the first call of each policy's own stale situation */
    assert_true(one->calls_run >= 1 && one->calls_run < all->calls_run);
    assert_int_equal(one->gt.calls, all->gt.calls);
    assert_true(one->gt.timed + one->gt.refused < one->gt.situations);
    uint64_t untimed = 0;
    for (uint32_t p = 0; p < one->n_policies; p++) {
        const ft_gputime_policy *q = &one->gt.pol[p];
        assert_int_equal(q->calls + q->raised + q->fresh_raised + q->untimed, one->gt.calls);
        assert_int_equal(q->raised, all->gt.pol[p].raised);
        assert_true(q->calls <= all->gt.pol[p].calls);
        untimed += q->untimed;
    }
    assert_true(untimed > 0);
    ft_free(all);
    ft_free(one);
}

/* With the numerics on, the timing is the same, and the numerics are those of a run without it
 * (same sampled calls; the fake device computes on the CPU back end). */
static void test_gputime_with_numerics(void **state)
{
    (void)state;
    ft_numerics_result *alone = run_gt(g_trace, 12, 1, 5);
    ft_numerics_result *both = run_gt(g_trace, 12, 0, 5);
    assert_false(both->time_only);
    assert_int_equal(both->calls_run, alone->calls_run);
    assert_int_equal(both->gt.calls, alone->gt.calls);
    assert_int_equal(both->gt.timed, alone->gt.timed);
    for (uint32_t p = 0; p < both->n_policies; p++)
        assert_memory_equal(&both->gt.pol[p], &alone->gt.pol[p], sizeof both->gt.pol[p]);
    /* the numerics without GPU time, on the CPU back end */
    ft_trace *t = NULL;
    ft_err err = {0};
    assert_int_equal(ft_trace_open(g_trace, FT_OPEN_READ, &t, &err), FT_OK);
    ft_numerics_result *cpu = ft_calloc(1, sizeof *cpu);
    assert_non_null(cpu);
    ft_replay_opts ro = {0};
    ft_numerics_opts no = {.shrink = 2, .sample = 12, .seed = 3, .n_threads = 1};
    assert_int_equal(ft_numerics_replay_trace(t, &ro, &no, NULL, cpu, &err), FT_OK);
    ft_trace_close(t);
    assert_false(cpu->gt.on);
    assert_int_equal(both->calls_run, cpu->calls_run);
    assert_int_equal(both->mlp_runs, cpu->mlp_runs);
    assert_true(both->harmless_band.n == cpu->harmless_band.n &&
                both->harmless_band.sum == cpu->harmless_band.sum);
    assert_true(both->quant_band.n == cpu->quant_band.n &&
                both->quant_band.sum == cpu->quant_band.sum);
    for (uint32_t p = 0; p < both->n_policies; p++) {
        assert_int_equal(both->pol[p].same, cpu->pol[p].same);
        assert_int_equal(both->pol[p].quant, cpu->pol[p].quant);
        assert_int_equal(both->pol[p].raised, cpu->pol[p].raised);
        assert_true(both->pol[p].err.sum == cpu->pol[p].err.sum);
    }
    ft_free(alone);
    ft_free(both);
    ft_free(cpu);
}

/* The numerics and GPU time of the trace on fake devices `ids` (n 0: every one of the node's
 * n_dev), as the JSON report writes them with the times that vary run to run zeroed. */
static char *report_on_devices(int n_dev, const int *ids, uint32_t n, uint64_t *problems)
{
    g_n_dev = n_dev;
    for (int d = 0; d < FAKE_MAX_DEV; d++)
        atomic_store(&g_dev_problems[d], 0);
    ft_numerics_result *nr = ft_calloc(1, sizeof *nr);
    ft_replay_result *rr = ft_calloc(1, sizeof *rr);
    assert_true(nr && rr);
    ft_trace *t = NULL;
    ft_err err = {0};
    assert_int_equal(ft_trace_open(g_trace, FT_OPEN_READ, &t, &err), FT_OK);
    ft_replay_opts ro = {0};
    /* an info stream: the estimate pass runs first, as on the command line */
    FILE *info = tmpfile();
    assert_non_null(info);
    ft_numerics_opts no = {.shrink = 2,
                           .sample = 24,
                           .seed = 3,
                           .backend = FT_NUMERICS_CUDA,
                           .gpu_time = 1,
                           .devices = ids,
                           .n_devices = n,
                           .info = info};
    int rc = ft_numerics_replay_trace(t, &ro, &no, rr, nr, &err);
    if (rc) print_error("%s\n", ft_err_msg(&err));
    assert_int_equal(rc, FT_OK);
    fclose(info);
    ft_trace_close(t);
    for (int d = 0; d < FAKE_MAX_DEV; d++)
        problems[d] = atomic_load(&g_dev_problems[d]);
    assert_int_equal(nr->n_threads, n ? n : (uint32_t)n_dev);
    nr->wall_ns = nr->gt.timing_ns = 0;
    nr->n_threads = 0;
    nr->est_lo_s = nr->est_hi_s = 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ft_report_opts opts;
    ft_report_opts_init(&opts);
    assert_int_equal(ft_report_write_opts(f, rr, nr, FT_REPORT_JSON, &opts, &err), FT_OK);
    assert_int_equal(ft_report_numerics(f, nr, &err), FT_OK);
    fclose(f);
    g_n_dev = 1;
    ft_free(nr);
    ft_free(rr);
    return buf;
}

/* Sampled calls spread over several devices: every device gets calls, each on its own context
 * (made current by the thread that drives it), and the report is the one device's, byte for
 * byte; ids out of range or named twice are refused. */
static void test_gputime_devices_same_report(void **state)
{
    (void)state;
    uint64_t p1[FAKE_MAX_DEV], p3[FAKE_MAX_DEV], pall[FAKE_MAX_DEV], p2[FAKE_MAX_DEV];
    const int zero[] = {0}, three[] = {0, 1, 2}, two[] = {2, 0};
    char *one = report_on_devices(3, zero, 1, p1);
    char *many = report_on_devices(3, three, 3, p3);
    char *all = report_on_devices(3, NULL, 0, pall);
    char *pair = report_on_devices(3, two, 2, p2);
    assert_true(p1[0] > 0 && p1[1] == 0 && p1[2] == 0);
    for (int d = 0; d < 3; d++) {
        assert_true(p3[d] > 0);
        assert_int_equal(p3[d], pall[d]); /* the assignment is fixed by the calls */
    }
    assert_true(p2[0] > 0 && p2[1] == 0 && p2[2] > 0);
    assert_int_equal(p3[0] + p3[1] + p3[2], p1[0]);
    assert_string_equal(one, many);
    assert_string_equal(one, all);
    assert_string_equal(one, pair);
    free(one);
    free(many);
    free(all);
    free(pair);

    g_n_dev = 2;
    ft_err err = {0};
    const int bad[] = {0, 2}, twice[] = {1, 1};
    assert_int_equal(ft_numerics_devices_check(FT_NUMERICS_CUDA, bad, 2, &err), FT_EINVAL);
    assert_non_null(strstr(ft_err_msg(&err), "device 2"));
    assert_non_null(strstr(ft_err_msg(&err), "sees 2 CUDA devices"));
    assert_int_equal(ft_numerics_devices_check(FT_NUMERICS_CUDA, twice, 2, &err), FT_EINVAL);
    assert_non_null(strstr(ft_err_msg(&err), "twice"));
    assert_int_equal(ft_numerics_devices_check(FT_NUMERICS_CUDA, bad, 1, &err), FT_OK);
    assert_int_equal(ft_numerics_devices_check(FT_NUMERICS_CPU, bad, 2, &err), FT_OK);
    g_n_dev = 1;
}

/* Two traces (ranks): counts, steps and sums add up; the per-step figures stay. */
static void test_gputime_merges_traces(void **state)
{
    (void)state;
    ft_numerics_result *one = run_gt(g_trace, 0, 1, 5);
    ft_numerics_result *two = ft_calloc(1, sizeof *two);
    assert_non_null(two);
    const char *paths[2] = {g_trace, g_trace};
    ft_replay_opts ro = {0};
    ft_numerics_opts no = {
        .shrink = 2, .seed = 3, .backend = FT_NUMERICS_CUDA, .gpu_time = 1, .time_only = 1};
    ft_err err = {0};
    assert_int_equal(ft_numerics_replay_traces(paths, 2, &ro, &no, NULL, two, &err), FT_OK);
    assert_int_equal(two->gt.traces, 2);
    assert_int_equal(two->gt.calls, 2 * one->gt.calls);
    assert_int_equal(two->gt.steps, 2 * one->gt.steps);
    assert_int_equal(two->gt.situations, 2 * one->gt.situations);
    for (uint32_t p = 0; p < one->n_policies; p++) {
        assert_int_equal(two->gt.pol[p].calls, 2 * one->gt.pol[p].calls);
        for (int w = 0; w < 3; w++)
            assert_true(fabs(ft_gputime_ms(&two->gt, p, w, 0) - ft_gputime_ms(&one->gt, p, w, 0)) <
                        1e-12);
    }
    ft_free(one);
    ft_free(two);
}

/* The report's sections: the label with the GPU's name (escaped in HTML), the per-policy
 * figures in text, JSON (equal to ft_gputime_ms) and HTML; no numerics section when they did not
 * run. */
static void test_gputime_report_fields(void **state)
{
    (void)state;
    ft_numerics_result *nr = run_gt(g_trace, 0, 1, 5);
    ft_replay_result *rr = ft_calloc(1, sizeof *rr);
    assert_non_null(rr);
    ft_replay_result_init(rr, NULL, 0);
    ft_err err = {0};
    /* text */
    char *text = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&text, &len);
    assert_non_null(mf);
    assert_int_equal(ft_report_gputime(mf, nr, &err), FT_OK);
    fclose(mf);
    assert_non_null(strstr(text, "gpu time: measured on fusertrace's kernels on GPU " FAKE_GPU));
    assert_non_null(strstr(text, "chosen ms/step [spread]"));
    assert_non_null(strstr(text, "stale cost ms/step"));
    assert_non_null(strstr(text, "shapes shrunk by --shrink 2"));
    assert_non_null(strstr(text, "refused (first): fake: no fused MXFP8 forward"));
    char row[160];
    const ft_gputime_result *g = &nr->gt;
    snprintf(row, sizeof row, "%.3f [%.3f, %.3f]", ft_gputime_ms(g, 0, 0, 0),
             ft_gputime_ms(g, 0, 0, 1), ft_gputime_ms(g, 0, 0, 2));
    assert_non_null(strstr(text, row));
    free(text);
    /* JSON: the one document has gpu_time and, time only, no numerics */
    mf = open_memstream(&text, &len);
    assert_non_null(mf);
    assert_int_equal(ft_report_write(mf, rr, nr, FT_REPORT_JSON, &err), FT_OK);
    fclose(mf);
    json_error_t je;
    json_t *o = json_loadb(text, len, 0, &je);
    assert_non_null(o);
    assert_null(json_object_get(o, "numerics"));
    json_t *gt = json_object_get(o, "gpu_time");
    assert_true(json_is_object(gt));
    assert_string_equal(json_string_value(json_object_get(gt, "label")),
                        "measured on fusertrace's kernels on GPU " FAKE_GPU);
    assert_string_equal(json_string_value(json_object_get(gt, "per")), "step");
    assert_int_equal(json_integer_value(json_object_get(gt, "steps")), (json_int_t)g->steps);
    assert_int_equal(json_integer_value(json_object_get(gt, "rounds")), 5);
    assert_non_null(
        strstr(json_string_value(json_object_get(gt, "extrapolation")), "stand for the others"));
    json_t *pols = json_object_get(gt, "policies");
    assert_int_equal(json_array_size(pols), g->n_policies);
    static const char *const keys[3] = {"chosen_ms_per_step", "fresh_ms_per_step",
                                        "stale_cost_ms_per_step"};
    for (uint32_t p = 0; p < g->n_policies; p++) {
        json_t *x = json_array_get(pols, p);
        assert_string_equal(json_string_value(json_object_get(x, "policy")), nr->pol[p].name);
        assert_int_equal(json_integer_value(json_object_get(x, "calls_timed")),
                         (json_int_t)g->pol[p].calls);
        assert_int_equal(json_integer_value(json_object_get(x, "untimed")),
                         (json_int_t)g->pol[p].untimed);
        for (int w = 0; w < 3; w++) {
            json_t *ms = json_object_get(x, keys[w]);
            const double med = json_real_value(json_object_get(ms, "median"));
            assert_true(fabs(med - ft_gputime_ms(g, p, w, 0)) <= 1e-5 * (1 + fabs(med)));
            assert_true(json_real_value(json_object_get(ms, "min")) <=
                        json_real_value(json_object_get(ms, "max")));
            assert_int_equal(json_array_size(json_object_get(ms, "rounds")), 5);
        }
    }
    json_decref(o);
    free(text);
    /* HTML */
    mf = open_memstream(&text, &len);
    assert_non_null(mf);
    assert_int_equal(ft_report_html(mf, rr, nr, NULL, NULL, NULL, &err), FT_OK);
    fclose(mf);
    assert_non_null(strstr(text, "<section id=\"gputime\">"));
    assert_non_null(strstr(text, "on GPU FAKE-GPU &lt;9000&gt;"));
    assert_non_null(strstr(text, "id=\"chart-gputime\""));
    assert_null(strstr(text, "<section id=\"numerics\">"));
    free(text);
    ft_free(rr);
    ft_free(nr);
}

/* The CPU back end cannot time; the options are checked. */
static void test_gputime_refused_on_the_cpu(void **state)
{
    (void)state;
    ft_err err = {0};
    ft_nx *cpu = NULL;
    assert_int_equal(ft_cpu_nx_new(&cpu, &err), FT_OK);
    const int64_t splits[2] = {64, 32};
    ft_nx_problem p = {.n_groups = 2,
                       .splits = splits,
                       .t = 128,
                       .k1 = 32,
                       .n1 = 64,
                       .k2 = 32,
                       .n2 = 32,
                       .act = {FT_ACT_SWIGLU, 0, 0, 0, 0},
                       .grad = 1,
                       .inputs_only = 1,
                       .wseed = 1,
                       .xseed = 2,
                       .w1_scale = 0.1f,
                       .w2_scale = 0.1f};
    assert_int_equal(ft_cpu_nx_problem(cpu, &p, &err), FT_OK);
    ft_mlp_quant q = {0};
    ft_nx_time t;
    assert_int_equal(ft_cpu_nx_time(cpu, FT_MLP_UNFUSED, &q, 2, 5, &t, &err), FT_EUNSUPPORTED);
    assert_non_null(strstr(ft_err_msg(&err), "CUDA back end"));
    assert_int_equal(t.n_rounds, 0);
    /* a problem without reference runs nothing */
    assert_int_equal(ft_cpu_nx_run(cpu, FT_MLP_UNFUSED, &q, FT_NX_BASE, &err), FT_EINVAL);
    float host[1];
    assert_int_equal(ft_cpu_nx_reference(cpu, 0, host, &err), FT_EINVAL);
    ft_cpu_nx_free(cpu);
    /* GPU time on the CPU back end, time only without GPU time, too many rounds */
    ft_trace *tr = NULL;
    assert_int_equal(ft_trace_open(g_trace, FT_OPEN_READ, &tr, &err), FT_OK);
    ft_numerics_result *nr = ft_calloc(1, sizeof *nr);
    assert_non_null(nr);
    ft_replay_opts ro = {0};
    const ft_numerics_opts bad[3] = {
        {.shrink = 2, .backend = FT_NUMERICS_CPU, .gpu_time = 1},
        {.shrink = 2, .backend = FT_NUMERICS_CUDA, .time_only = 1},
        {.shrink = 2, .backend = FT_NUMERICS_CUDA, .gpu_time = 1, .time_rounds = 99}};
    const int want[3] = {FT_EUNSUPPORTED, FT_EINVAL, FT_EINVAL};
    for (int k = 0; k < 3; k++) {
        ft_err_clear(&err);
        assert_int_equal(ft_numerics_replay_trace(tr, &ro, &bad[k], NULL, nr, &err), want[k]);
        print_message("refused: %s\n", ft_err_msg(&err));
    }
    ft_trace_close(tr);
    ft_free(nr);
}

/* The CLI without a device (a CPU build, or no GPU): exit 3 with a message naming --gpu-time,
 * before any output; with one, the section is there. */
static void test_gputime_cli_without_device(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char cmd[4096], err_path[1300], out[8192];
    tu_dir_path(err_path, sizeof err_path, g_dir, "err.txt");
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --gpu-time --shrink 8 --sample 4 2>'%s'", cli,
             g_trace, err_path);
    int rc = tu_sh(cmd, out, sizeof out);
    char *msg = tu_read_file(err_path, NULL);
    assert_non_null(msg);
    if (rc == 3) {
        print_message("no device: %s", msg);
        assert_non_null(strstr(msg, "--gpu-time"));
        assert_non_null(strstr(msg, "CUDA device"));
        assert_string_equal(out, "");
    } else {
        if (rc) print_error("exit %d: %s\n", rc, msg);
        assert_int_equal(rc, 0);
        assert_non_null(strstr(out, "gpu time: measured on fusertrace's kernels on GPU "));
    }
    free(msg);
    /* --gpu-time with the CPU numerics, or with CSV: usage errors (exit 2) */
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --gpu-time --numerics cpu 2>/dev/null", cli,
             g_trace);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "'%s' replay '%s' --gpu-time --csv 2>/dev/null", cli, g_trace);
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gputime_sums_match_the_calls),
        cmocka_unit_test(test_gputime_median_of_even_rounds),
        cmocka_unit_test(test_gputime_small_sample_leaves_calls_untimed),
        cmocka_unit_test(test_gputime_with_numerics),
        cmocka_unit_test(test_gputime_merges_traces),
        cmocka_unit_test(test_gputime_devices_same_report),
        cmocka_unit_test(test_gputime_report_fields),
        cmocka_unit_test(test_gputime_refused_on_the_cpu),
        cmocka_unit_test(test_gputime_cli_without_device),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
