/*
 * nx.c - the numerics problem on the CPU (ft_cpu_nx_*, ft_kernels.h "numerical replay: one
 * problem, two back ends"): the inputs of one call drawn from the seed streams, the float64
 * reference (ft_cpu_mlp_ref), every configuration's run through ft_cpu_mlp_forward/backward, and
 * its figures against the reference and the base run. Also the memory and work estimates of a
 * problem, which both back ends share (plain arithmetic, in builds without CUDA too).
 *
 * A context serves one thread at a time. The runs' outputs are compared with the float64
 * reference itself (the CUDA back end stores it rounded to float32), and with the base run's
 * float32 outputs (kept until the next problem).
 */
#include "ft_kernels.h"
#include "nx_int.h"

#include <math.h>
#include <string.h>

enum { O_Y = 0, O_DX, O_DW1, O_DW2, O_N };

struct ft_nx {
    ft_nx_problem p;
    int64_t *splits;                   /* [n_groups] owned copy (p.splits points here) */
    ft_mlp m;                          /* the problem as the kernels take it */
    float *x, *w1, *b1, *w2, *b2, *pr; /* inputs (bf16 values); b1, b2, pr may be NULL */
    float *dy;                         /* [t][n2] output gradient (grad problems) */
    float *h, *z;                      /* a run's saved FC1 output and FC2 input */
    double *ref[O_N];                  /* float64 reference: y, dx, dW1, dW2 */
    float *out[O_N];                   /* the last run's outputs */
    float *base[O_N];                  /* the base run's outputs (has_base) */
    int64_t cnt[O_N];                  /* elements of each output */
    int have, has_base;
    int ran;       /* a run completed since the problem was set */
    int last_base; /* the last completed run's outputs are in base (a base run), else in out */
    uint32_t n_slots;
    ft_nx_figs figs[FT_NX_MAX_SLOTS];
    uint64_t bytes;          /* held now */
    int profile;             /* time the phases into ms */
    double ms[FT_NX_PHASES]; /* inputs, reference, -, -, comparison, other (the runs) */
};

/* ---- context and problem ------------------------------------------------------------------ */

int ft_cpu_nx_new(ft_nx **out, ft_err *err)
{
    *out = ft_calloc(1, sizeof **out);
    return *out ? FT_OK : ft_err_set(err, FT_ENOMEM, "numerics cpu: no memory");
}

static void release(ft_nx *nx)
{
    void *all[] = {nx->splits,  nx->x,       nx->w1,      nx->b1,     nx->w2,     nx->b2,
                   nx->pr,      nx->dy,      nx->h,       nx->z,      nx->ref[0], nx->ref[1],
                   nx->ref[2],  nx->ref[3],  nx->out[0],  nx->out[1], nx->out[2], nx->out[3],
                   nx->base[0], nx->base[1], nx->base[2], nx->base[3]};
    for (size_t i = 0; i < FT_ARRAY_LEN(all); i++)
        ft_free(all[i]);
    nx->splits = NULL;
    nx->x = nx->w1 = nx->b1 = nx->w2 = nx->b2 = nx->pr = nx->dy = nx->h = nx->z = NULL;
    for (int o = 0; o < O_N; o++)
        nx->ref[o] = NULL, nx->out[o] = nx->base[o] = NULL;
    nx->bytes = 0;
    nx->have = nx->has_base = nx->ran = nx->last_base = 0;
    nx->n_slots = 0;
}

void ft_cpu_nx_free(ft_nx *nx)
{
    if (!nx) return;
    release(nx);
    ft_free(nx);
}

static void *alloc(ft_nx *nx, int64_t n, size_t elem)
{
    const size_t bytes = (size_t)(n > 0 ? n : 1) * elem;
    void *p = ft_malloc(bytes);
    if (p) nx->bytes += bytes;
    return p;
}

/* n values of stream (seed, i) into a new array. */
static float *draw(ft_nx *nx, int64_t n, float scale, uint64_t seed, int probs)
{
    float *v = alloc(nx, n, sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++)
        v[i] = nx_input(seed, (uint64_t)i, scale, probs);
    return v;
}

static void phase_add(ft_nx *nx, int k, uint64_t t0)
{
    if (nx->profile) nx->ms[k] += (double)(ft_now_ns() - t0) * 1e-6;
}

/* The inputs of p drawn into nx (arrays of the right size for the problem, the runs and the
 * base run). */
static int inputs(ft_nx *nx, ft_err *err)
{
    const ft_nx_problem *p = &nx->p;
    const int64_t t = p->t, k1 = p->k1, n1 = p->n1, k2 = p->k2, n2 = p->n2, G = p->n_groups;
    nx->x = draw(nx, t * k1, 1.0f, p->xseed + NX_X, 0);
    nx->w1 = draw(nx, G * n1 * k1, p->w1_scale, p->wseed + NX_W1, 0);
    if (p->bias1) nx->b1 = draw(nx, G * n1, NX_BIAS_SCALE, p->wseed + NX_B1, 0);
    nx->w2 = draw(nx, G * n2 * k2, p->w2_scale, p->wseed + NX_W2, 0);
    if (p->bias2) nx->b2 = draw(nx, G * n2, NX_BIAS_SCALE, p->wseed + NX_B2, 0);
    if (p->scaled) nx->pr = draw(nx, t, 1.0f, p->xseed + NX_PROBS, 1);
    if (p->grad) nx->dy = draw(nx, t * n2, 1.0f, p->xseed + NX_DY, 0);
    nx->h = alloc(nx, t * n1, sizeof *nx->h);
    nx->z = alloc(nx, t * k2, sizeof *nx->z);
    int ok = nx->x && nx->w1 && (!p->bias1 || nx->b1) && nx->w2 && (!p->bias2 || nx->b2) &&
             (!p->scaled || nx->pr) && (!p->grad || nx->dy) && nx->h && nx->z;
    const int n_out = p->inputs_only ? 0 : p->grad ? O_N : 1;
    for (int o = 0; o < n_out && ok; o++) {
        nx->ref[o] = alloc(nx, nx->cnt[o], sizeof(double));
        nx->out[o] = alloc(nx, nx->cnt[o], sizeof(float));
        nx->base[o] = alloc(nx, nx->cnt[o], sizeof(float));
        ok = nx->ref[o] && nx->out[o] && nx->base[o];
    }
    if (!ok)
        return ft_err_set(err, FT_ENOMEM,
                          "numerics cpu: no memory for the inputs and the float64 reference "
                          "(%.2f GB); a larger --shrink helps",
                          (double)nx->bytes * 1e-9);
    ft_mlp m = {.n_groups = p->n_groups,
                .splits = nx->splits,
                .t = t,
                .k1 = k1,
                .n1 = n1,
                .k2 = k2,
                .n2 = n2,
                .act = p->act,
                .scale_bias = p->scale_bias,
                .x = nx->x,
                .w1 = nx->w1,
                .b1 = nx->b1,
                .w2 = nx->w2,
                .b2 = nx->b2,
                .probs = nx->pr};
    nx->m = m;
    return FT_OK;
}

int ft_cpu_nx_problem(ft_nx *nx, const ft_nx_problem *p, ft_err *err)
{
    if (!nx || !p || !p->splits || p->n_groups < 1)
        return ft_err_set(err, FT_EINVAL, "numerics cpu: bad problem (no groups)");
    if (p->t < 0 || p->k1 < 1 || p->n1 < 1 || p->k2 < 1 || p->n2 < 1)
        return ft_err_set(err, FT_EINVAL, "numerics cpu: bad shape");
    int64_t used = 0;
    for (uint32_t g = 0; g < p->n_groups; g++) {
        if (p->splits[g] < 0) return ft_err_set(err, FT_EINVAL, "numerics cpu: split %u < 0", g);
        used += p->splits[g];
    }
    if (used > p->t) return ft_err_set(err, FT_EINVAL, "numerics cpu: splits exceed t");
    release(nx);
    nx->p = *p;
    nx->splits = alloc(nx, p->n_groups, sizeof *nx->splits);
    if (!nx->splits) return ft_err_set(err, FT_ENOMEM, "numerics cpu: no memory");
    memcpy(nx->splits, p->splits, p->n_groups * sizeof *nx->splits);
    nx->p.splits = nx->splits;
    const int64_t G = p->n_groups;
    nx->cnt[O_Y] = p->t * p->n2, nx->cnt[O_DX] = p->t * p->k1;
    nx->cnt[O_DW1] = G * p->n1 * p->k1, nx->cnt[O_DW2] = G * p->n2 * p->k2;
    uint64_t t0 = ft_now_ns();
    int rc = inputs(nx, err);
    phase_add(nx, 0, t0);
    if (rc) {
        release(nx);
        return rc;
    }
    t0 = ft_now_ns();
    ft_mlp_ref r = {
        .y = nx->ref[O_Y], .dx = nx->ref[O_DX], .dw1 = nx->ref[O_DW1], .dw2 = nx->ref[O_DW2]};
    if (!p->inputs_only) rc = ft_cpu_mlp_ref(&nx->m, p->grad ? nx->dy : NULL, &r, err);
    phase_add(nx, 1, t0);
    if (rc) {
        release(nx);
        return rc;
    }
    nx->have = 1;
    return FT_OK;
}

/* ---- runs and their figures --------------------------------------------------------------- */

/* Relative L2 of a against b (n values) and, into *max_abs, the largest |a - b|. */
static double rel_ff(const float *a, const float *b, int64_t n, double *max_abs)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * b[i];
        *max_abs = nx_nanmax(*max_abs, fabs(d));
    }
    return nx_rel(num, den);
}

static double rel_fd(const float *a, const double *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return nx_rel(num, den);
}

/* The figures of the run in out[] (forward and, grad, backward outputs). */
static void figures(ft_nx *nx, ft_nx_figs *f)
{
    const int n_out = nx->p.grad ? O_N : 1;
    double d[O_N] = {0};
    for (int o = 0; o < n_out; o++) {
        f->out_err[o] = rel_fd(nx->out[o], nx->ref[o], nx->cnt[o]);
        for (int64_t i = 0; i < nx->cnt[o]; i++)
            f->nonfinite += !isfinite(nx->out[o][i]);
    }
    f->err = nx_worst(f->out_err, n_out);
    f->has_base = (uint8_t)nx->has_base;
    if (!nx->has_base) return;
    for (int o = 0; o < n_out; o++)
        d[o] = rel_ff(nx->out[o], nx->base[o], nx->cnt[o], &f->div_max_abs);
    f->div = nx_worst(d, n_out);
}

int ft_cpu_nx_run(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, unsigned flags, ft_err *err)
{
    if (!nx || !nx->have) return ft_err_set(err, FT_EINVAL, "numerics cpu: no problem set");
    if (nx->p.inputs_only)
        return ft_err_set(err, FT_EINVAL, "numerics cpu: the problem was set without a reference");
    if (nx->n_slots >= FT_NX_MAX_SLOTS)
        return ft_err_set(err, FT_ERANGE, "numerics cpu: more than %d runs in one call",
                          FT_NX_MAX_SLOTS);
    ft_nx_figs *f = &nx->figs[nx->n_slots++];
    memset(f, 0, sizeof *f);
    ft_mlp m = nx->m;
    m.path = path;
    m.quant = *q;
    uint64_t t0 = ft_now_ns();
    ft_err kerr = {0};
    ft_mlp_fwd fw = {nx->h, nx->z, nx->out[O_Y]};
    int rc = ft_cpu_mlp_forward(&m, &fw, &kerr);
    if (!rc && nx->p.grad) {
        ft_mlp_bwd b = {nx->out[O_DX], nx->out[O_DW1], NULL, nx->out[O_DW2], NULL, NULL};
        rc = ft_cpu_mlp_backward(&m, &fw, nx->dy, &b, &kerr);
    }
    phase_add(nx, 5, t0);
    if (rc == FT_ENOMEM) return ft_err_set(err, FT_ENOMEM, "numerics cpu: %s", ft_err_msg(&kerr));
    if (rc) { /* the kernel refuses the configuration: the slot holds why */
        f->rc = rc;
        ft_strlcpy(f->msg, ft_err_msg(&kerr), sizeof f->msg);
        return FT_OK;
    }
    t0 = ft_now_ns();
    figures(nx, f);
    phase_add(nx, 4, t0);
    nx->ran = 1;
    nx->last_base = (flags & FT_NX_BASE) != 0;
    if (flags & FT_NX_BASE) { /* keep this run's outputs: swap them into base */
        for (int o = 0; o < O_N; o++) {
            float *b = nx->base[o];
            nx->base[o] = nx->out[o];
            nx->out[o] = b;
        }
        nx->has_base = 1;
    }
    return FT_OK;
}

int ft_cpu_nx_collect(ft_nx *nx, ft_nx_figs *figs, uint32_t n, ft_err *err)
{
    if (!nx || n > nx->n_slots)
        return ft_err_set(err, FT_EINVAL, "numerics cpu: %u figures asked, %u runs", n,
                          nx ? nx->n_slots : 0);
    if (n) memcpy(figs, nx->figs, n * sizeof *figs);
    return FT_OK;
}

/* The last completed run's outputs (a refused run leaves them as they were). */
int ft_cpu_nx_download(ft_nx *nx, int which, float *host, ft_err *err)
{
    if (!nx || !nx->have || !nx->ran || which < 0 || which >= (nx->p.grad ? O_N : 1))
        return ft_err_set(err, FT_EINVAL, "numerics cpu: bad download");
    const float *src = nx->last_base ? nx->base[which] : nx->out[which];
    memcpy(host, src, (size_t)nx->cnt[which] * sizeof *host);
    return FT_OK;
}

int ft_cpu_nx_reference(ft_nx *nx, int which, float *host, ft_err *err)
{
    if (!nx || !nx->have || nx->p.inputs_only || which < 0 || which >= (nx->p.grad ? O_N : 1))
        return ft_err_set(err, FT_EINVAL, "numerics cpu: bad download");
    for (int64_t i = 0; i < nx->cnt[which]; i++)
        host[i] = (float)nx->ref[which][i];
    return FT_OK;
}

int ft_cpu_nx_memory(ft_nx *nx, uint64_t *held, uint64_t *pool_peak, ft_err *err)
{
    (void)err;
    if (held) *held = nx ? nx->bytes : 0;
    if (pool_peak) *pool_peak = 0;
    return FT_OK;
}

void ft_cpu_nx_profile(ft_nx *nx, int on, double ms[FT_NX_PHASES])
{
    if (!nx) return;
    if (ms)
        for (int i = 0; i < FT_NX_PHASES; i++)
            ms[i] = nx->ms[i];
    if (on >= 0) {
        nx->profile = on;
        memset(nx->ms, 0, sizeof nx->ms);
    }
}

int ft_cpu_nx_time(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, uint32_t warmup,
                   uint32_t rounds, ft_nx_time *out, ft_err *err)
{
    (void)nx, (void)path, (void)q, (void)warmup, (void)rounds;
    if (out) memset(out, 0, sizeof *out);
    return ft_err_set(err, FT_EUNSUPPORTED,
                      "numerics cpu: timing runs on the CUDA back end (the device's own kernels)");
}

/* ---- estimates (both back ends) ------------------------------------------------------------ */

float ft_nx_gauss(uint64_t seed, uint64_t i)
{
    return nx_gauss(seed, i);
}

void ft_nx_bytes(const ft_nx_problem *p, uint64_t *bytes)
{
    const uint64_t t = (uint64_t)p->t, G = p->n_groups, k1 = (uint64_t)p->k1, n1 = (uint64_t)p->n1,
                   k2 = (uint64_t)p->k2, n2 = (uint64_t)p->n2;
    const uint64_t w = G * (n1 * k1 + n2 * k2), act = t * (k1 + n2);
    const uint64_t outs = act + w;                     /* y, dx, dW1, dW2 */
    const uint64_t ctx = 4 * (act + w + t * (n1 + k2)) /* inputs, h, z (float32) */
                         + 4 * outs * 2                /* reference and this run (float32) */
                         + 2 * outs;                   /* base run (bf16) */
    const uint64_t wmax = n1 * k1 > n2 * k2 ? n1 * k1 : n2 * k2, omax = n2 > k1 ? n2 : k1;
    const uint64_t ref = 8 * (t * (k1 + n2 + 2 * n1 + 2 * k2 + omax) + 2 * wmax);
    /* a run's scratch: bf16 weights of one usage, an activation's float32 and bf16 copies (and
     * RHT's padded copies), dz, dh */
    const uint64_t amax_cols = k1 > n1 ? k1 : n1;
    const uint64_t run =
        2 * G * n1 * k1 + 10 * (t + 16 * G) * amax_cols + 4 * t * (k2 + 2 * n1) + 4 * wmax;
    /* the reference's work space first takes the runs' output buffers (idle while it runs) */
    const uint64_t ref_pool = ref > 4 * outs ? ref - 4 * outs : 0;
    *bytes = ctx + (ref_pool > run ? ref_pool : run);
}

void ft_nx_flops(const ft_nx_problem *p, double *ref_flops, double *run_flops)
{
    int64_t used = 0;
    for (uint32_t g = 0; g < p->n_groups; g++)
        used += p->splits[g];
    const double fwd = 2.0 * (double)used * ((double)p->k1 * p->n1 + (double)p->k2 * p->n2);
    const double f = p->grad ? 3.0 * fwd : fwd;
    if (ref_flops) *ref_flops = f;
    if (run_flops) *run_flops = f;
}

void ft_nx_time_bytes(const ft_nx_problem *p, uint64_t *bytes)
{
    const uint64_t t = (uint64_t)p->t, G = p->n_groups, k1 = (uint64_t)p->k1, n1 = (uint64_t)p->n1,
                   k2 = (uint64_t)p->k2, n2 = (uint64_t)p->n2;
    const uint64_t w = G * (n1 * k1 + n2 * k2);
    /* bf16: x, dy, h, z, zc, y, dz, dh, dx, the weights (when the cache has no room for them),
     * dW1, dW2; float32: bias grads, dprobs */
    const uint64_t bf16 = 2 * (t * (2 * k1 + 2 * n2 + 2 * n1 + 3 * k2) + 2 * w + G * (n1 + n2));
    const uint64_t f32 = 4 * (G * (n1 + n2) + t);
    /* the quantized copies, both usages: at most a byte per element plus the scales */
    const uint64_t q = 2 * (t * (k1 + k2 + n2 + n1) + w) * 9 / 8 + 64 * G;
    *bytes = bf16 + f32 + q;
}
