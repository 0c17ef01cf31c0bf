/*
 * bench_cuda.c - times the CUDA grouped MLP (bf16, forward fc1+SwiGLU+fc2 and backward) and the
 * quantization kernels on MoE shapes. The baselines (torch._grouped_mm + SwiGLU, autograd) are
 * measured in the same device run by bench/gpu/torch_baseline.py, which bench/gpu/run.sh runs
 * next to this program; the routing (splits) is the same formula in both.
 *
 * Packed quantization (bf16 in, codes + scales out) is timed against a device-to-device copy of
 * the same input in the same run (bytes read + written; the copy moves 2 x its size).
 *
 * Usage: bench_cuda [iters]. Prints one line per case: median ms, TFLOP/s (or TB/s).
 * FT_BENCH_ONLY=NAMES picks shapes (and "quant"), FT_BENCH_NO_INTERLEAVE skips the interleaved
 * GLU layout, FT_BENCH_NO_CUBLAS the cuBLAS fc1 baselines.
 * Without a CUDA build or device it says so and exits 0.
 */
#include "ft_kernels.h"
#ifdef FT_HAVE_CUDA
#include "ft_kernels_cuda.h"
#include <cublas_v2.h>
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FT_HAVE_CUDA

typedef struct shape {
    const char *name;
    uint32_t g;
    int64_t t, hidden, ffn;
} shape;

/* Skewed routing, multiples of 16: weight of expert e is 1/(1 + e % 8); rounding remainder to
 * expert 0. Same formula in torch_baseline.py. */
static void make_splits(uint32_t g, int64_t t, int64_t *s)
{
    double wsum = 0.0;
    for (uint32_t e = 0; e < g; e++)
        wsum += 1.0 / (1.0 + (double)(e % 8));
    int64_t used = 0;
    for (uint32_t e = 0; e < g; e++) {
        int64_t v = (int64_t)((double)t * (1.0 / (1.0 + (double)(e % 8))) / wsum) / 16 * 16;
        s[e] = v;
        used += v;
    }
    s[0] += t - used;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* n bf16 values uniform in [-scale, scale), drawn on the device (the host would spend seconds
 * of device-machine time generating and copying the weights of a 32-expert layer). */
static void *dev_rand(int64_t n, float scale, uint64_t seed, ft_err *err)
{
    void *d = NULL;
    if (ft_cuda_malloc(&d, (size_t)n * 2, err) ||
        ft_cuda_bf16_fill_random(d, n, scale, seed, NULL, err)) {
        ft_cuda_free(d);
        return NULL;
    }
    return d;
}

typedef int (*run_fn)(void *ctx, ft_err *err);

static float time_median(run_fn fn, void *ctx, int iters, ft_cuda_timer *tm, ft_err *err)
{
    float ms[64];
    if (iters > 64) iters = 64;
    for (int i = 0; i < 2; i++)
        if (fn(ctx, err)) return -1.0f;
    for (int i = 0; i < iters; i++) {
        if (ft_cuda_timer_start(tm, NULL, err) || fn(ctx, err) ||
            ft_cuda_timer_stop(tm, NULL, &ms[i], err))
            return -1.0f;
    }
    qsort(ms, (size_t)iters, sizeof ms[0], cmp_float);
    return ms[iters / 2];
}

typedef struct mlp_ctx {
    ft_cuda_bf16_mlp m;
    ft_cuda_bf16_mlp_out out;
    ft_cuda_bf16_mlp_grads gr;
    const uint16_t *dy;
    ft_cuda_bf16_gemm fc1, fc1act, fc2;
    ft_cuda_bf16_gemm fc1mx; /* fc1act with the MXFP8 quantize-on-store epilogue */
    ft_cuda_bf16_gemm fc1nv; /* fc1act with the NVFP4 epilogue (bf16 z, group amaxes) */
    ft_cuda_bf16_gemm part;  /* one backward GEMM at a time */
} mlp_ctx;

static int run_fwd(void *c, ft_err *err)
{
    mlp_ctx *x = c;
    return ft_cuda_bf16_mlp_forward(&x->m, &x->out, NULL, err);
}

static int run_bwd(void *c, ft_err *err)
{
    mlp_ctx *x = c;
    return ft_cuda_bf16_mlp_backward(&x->m, &x->out, x->dy, &x->gr, NULL, err);
}

static int run_fc1(void *c, ft_err *err)
{
    mlp_ctx *x = c;
    return ft_cuda_bf16_gemm_run(&x->fc1, NULL, err);
}

/* cuBLAS baselines of FC1 (h = x W1_g^T per group), row-major via the usual swap: column-major
 * C^T[n1][rows] = W1_g (op T) x x_g^T. */
typedef struct cublas_ctx {
    cublasHandle_t h;
    uint32_t g;
    int64_t k1, n1;
    const int64_t *splits; /* host */
    const uint16_t *x, *w1;
    uint16_t *out;
    void **ptrs_dev; /* [3 g] A, B, C pointers for the grouped-batched call */
    int *m, *n, *k, *lda, *ldb, *ldc, *gsize;
    cublasOperation_t *ta, *tb;
    float *alpha, *beta;
    int n_nonempty;
} cublas_ctx;

static int run_cublas_loop(void *c, ft_err *err)
{
    cublas_ctx *x = c;
    const float one = 1.0f, zero = 0.0f;
    int64_t r0 = 0;
    for (uint32_t e = 0; e < x->g; e++) {
        const int64_t rows = x->splits[e];
        if (rows > 0) {
            cublasStatus_t st =
                cublasGemmEx(x->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)x->n1, (int)rows, (int)x->k1,
                             &one, x->w1 + (size_t)e * x->n1 * x->k1, CUDA_R_16BF, (int)x->k1,
                             x->x + r0 * x->k1, CUDA_R_16BF, (int)x->k1, &zero, x->out + r0 * x->n1,
                             CUDA_R_16BF, (int)x->n1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
            if (st != CUBLAS_STATUS_SUCCESS)
                return ft_err_set(err, FT_ECUDA, "cublasGemmEx: status %d", (int)st);
        }
        r0 += rows;
    }
    return FT_OK;
}

static int run_cublas_grouped(void *c, ft_err *err)
{
    cublas_ctx *x = c;
    void **p = x->ptrs_dev;
    const int n = x->n_nonempty;
    cublasStatus_t st = cublasGemmGroupedBatchedEx(
        x->h, x->ta, x->tb, x->m, x->n, x->k, x->alpha, (const void *const *)p, CUDA_R_16BF, x->lda,
        (const void *const *)(p + n), CUDA_R_16BF, x->ldb, x->beta, p + 2 * n, CUDA_R_16BF, x->ldc,
        n, x->gsize, CUBLAS_COMPUTE_32F);
    if (st != CUBLAS_STATUS_SUCCESS)
        return ft_err_set(err, FT_ECUDA, "cublasGemmGroupedBatchedEx: status %d", (int)st);
    return FT_OK;
}

static int bench_cublas(const char *name, uint32_t g, int64_t k1, int64_t n1, const int64_t *splits,
                        const uint16_t *x, const uint16_t *w1, uint16_t *out, int iters,
                        ft_cuda_timer *tm, ft_err *err)
{
    cublas_ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.k1 = k1;
    c.n1 = n1;
    c.splits = splits;
    c.x = x;
    c.w1 = w1;
    c.out = out;
    if (cublasCreate(&c.h) != CUBLAS_STATUS_SUCCESS)
        return ft_err_set(err, FT_ECUDA, "cublasCreate failed");
    int rc = FT_OK;
    size_t ng = g;
    void **host_ptrs = calloc(3 * ng, sizeof *host_ptrs);
    c.m = calloc(ng, sizeof(int));
    c.n = calloc(ng, sizeof(int));
    c.k = calloc(ng, sizeof(int));
    c.lda = calloc(ng, sizeof(int));
    c.ldb = calloc(ng, sizeof(int));
    c.ldc = calloc(ng, sizeof(int));
    c.gsize = calloc(ng, sizeof(int));
    c.ta = calloc(ng, sizeof *c.ta);
    c.tb = calloc(ng, sizeof *c.tb);
    c.alpha = calloc(ng, sizeof(float));
    c.beta = calloc(ng, sizeof(float));
    if (!host_ptrs || !c.m || !c.n || !c.k || !c.lda || !c.ldb || !c.ldc || !c.gsize || !c.ta ||
        !c.tb || !c.alpha || !c.beta)
        rc = FT_ENOMEM;
    int64_t r0 = 0, total = 0;
    int ne = 0;
    for (uint32_t e = 0; !rc && e < g; e++) {
        if (splits[e] > 0) {
            c.ta[ne] = CUBLAS_OP_T;
            c.tb[ne] = CUBLAS_OP_N;
            c.m[ne] = (int)n1;
            c.n[ne] = (int)splits[e];
            c.k[ne] = (int)k1;
            c.lda[ne] = c.ldb[ne] = (int)k1;
            c.ldc[ne] = (int)n1;
            c.gsize[ne] = 1;
            c.alpha[ne] = 1.0f;
            c.beta[ne] = 0.0f;
            ne++;
        }
        total += splits[e];
    }
    c.n_nonempty = ne;
    for (uint32_t e = 0, i = 0; !rc && e < g; e++) {
        if (splits[e] > 0) {
            host_ptrs[i] = (void *)(w1 + (size_t)e * n1 * k1);
            host_ptrs[ne + i] = (void *)(x + r0 * k1);
            host_ptrs[2 * ne + i] = (void *)(out + r0 * n1);
            i++;
        }
        r0 += splits[e];
    }
    if (!rc) rc = ft_cuda_malloc((void **)&c.ptrs_dev, 3 * ng * sizeof(void *), err);
    if (!rc) rc = ft_cuda_h2d(c.ptrs_dev, host_ptrs, 3 * (size_t)ne * sizeof(void *), err);
    const double f = 2.0 * (double)total * (double)n1 * (double)k1;
    if (!rc) {
        float ms = time_median(run_cublas_loop, &c, iters, tm, err);
        if (ms > 0)
            printf("RESULT cublas %s fc1 per-expert cublasGemmEx %.3f ms %.1f TFLOP/s\n", name, ms,
                   f / ms / 1e9);
        else
            printf("RESULT cublas %s per-expert FAILED: %s\n", name, ft_err_msg(err));
        ms = time_median(run_cublas_grouped, &c, iters, tm, err);
        if (ms > 0)
            printf("RESULT cublas %s fc1 cublasGemmGroupedBatchedEx %.3f ms %.1f TFLOP/s\n", name,
                   ms, f / ms / 1e9);
        else
            printf("RESULT cublas %s grouped FAILED: %s\n", name, ft_err_msg(err));
        ft_err_clear(err);
    }
    ft_cuda_free(c.ptrs_dev);
    cublasDestroy(c.h);
    free(host_ptrs);
    free(c.m);
    free(c.n);
    free(c.k);
    free(c.lda);
    free(c.ldb);
    free(c.ldc);
    free(c.gsize);
    free(c.ta);
    free(c.tb);
    free(c.alpha);
    free(c.beta);
    return rc;
}

static int run_fc1act(void *c, ft_err *err)
{
    mlp_ctx *x = c;
    return ft_cuda_bf16_gemm_run(&x->fc1act, NULL, err);
}

static int run_fc1mx(void *c, ft_err *err)
{
    mlp_ctx *x = c;
    return ft_cuda_bf16_gemm_run(&x->fc1mx, NULL, err);
}

static int run_fc1nv(void *c, ft_err *err)
{
    mlp_ctx *x = c;
    return ft_cuda_bf16_gemm_run(&x->fc1nv, NULL, err);
}

static int run_fc2(void *c, ft_err *err)
{
    mlp_ctx *x = c;
    return ft_cuda_bf16_gemm_run(&x->fc2, NULL, err);
}

static int run_part(void *c, ft_err *err)
{
    mlp_ctx *x = c;
    return ft_cuda_bf16_gemm_run(&x->part, NULL, err);
}

static int run_actbwd(void *c, ft_err *err)
{
    mlp_ctx *x = c;
    return ft_cuda_bf16_act_backward(&x->m.act, x->m.t, x->m.k2, x->out.h, x->m.probs, x->gr.dz,
                                     x->gr.dh, x->gr.dprobs, NULL, err);
}

/* Backward pieces one by one: dgrad/wgrad of both GEMMs and the activation backward. */
static void bench_bwd_parts(mlp_ctx *c, const char *name, int iters, ft_cuda_timer *tm, ft_err *err)
{
    const int64_t t = c->m.t, k1 = c->m.k1, n1 = c->m.n1, k2 = c->m.k2, n2 = c->m.n2;
    struct {
        const char *what;
        ft_gemm_kind kind;
        int64_t n, k;
        const uint16_t *a, *b;
        uint16_t *out;
    } parts[4] = {{"dgrad2", FT_GEMM_DGRAD, n2, k2, c->dy, c->m.w2, c->gr.dz},
                  {"wgrad2", FT_GEMM_WGRAD, n2, k2, c->dy, c->out.z, c->gr.dw2},
                  {"dgrad1", FT_GEMM_DGRAD, n1, k1, c->gr.dh, c->m.w1, c->gr.dx},
                  {"wgrad1", FT_GEMM_WGRAD, n1, k1, c->gr.dh, c->m.x, c->gr.dw1}};
    printf("BWDPARTS ft %s", name);
    for (int i = 0; i < 4; i++) {
        c->part = c->fc1;
        c->part.kind = parts[i].kind;
        c->part.n = parts[i].n;
        c->part.k = parts[i].k;
        c->part.a = parts[i].a;
        c->part.b = parts[i].b;
        c->part.c = parts[i].out;
        float ms = time_median(run_part, c, iters, tm, err);
        double f = 2.0 * (double)t * (double)parts[i].n * (double)parts[i].k;
        printf(" | %s %.3f ms %.1f TFLOP/s", parts[i].what, ms, f / ms / 1e9);
    }
    float ms = time_median(run_actbwd, c, iters, tm, err);
    printf(" | act-bwd %.3f ms\n", ms);
    ft_err_clear(err);
}

static int bench_mlp(const shape *s, int interleave, int iters, ft_cuda_timer *tm, ft_err *err)
{
    const uint32_t G = s->g;
    const int64_t t = s->t, k1 = s->hidden, k2 = s->ffn, n1 = 2 * k2, n2 = s->hidden;
    int64_t splits[256];
    make_splits(G, t, splits);
    mlp_ctx c;
    memset(&c, 0, sizeof c);
    int rc = FT_OK;
    void *bufs[24] = {0};
    int nb = 0;
    c.m.n_groups = G;
    c.m.t = t;
    c.m.k1 = k1;
    c.m.n1 = n1;
    c.m.k2 = k2;
    c.m.n2 = n2;
    c.m.act = (ft_act){FT_ACT_SWIGLU, interleave, 0, 0, 0};
#define ALLOC(dst, bytes)                                                                          \
    do {                                                                                           \
        void *p_ = NULL;                                                                           \
        rc = ft_cuda_malloc(&p_, (size_t)(bytes), err);                                            \
        bufs[nb++] = p_;                                                                           \
        (dst) = p_;                                                                                \
    } while (0)
    void *dsp = NULL;
    ALLOC(dsp, G * 8);
    if (!rc) rc = ft_cuda_h2d(dsp, splits, G * 8, err);
    c.m.splits = dsp;
    bufs[nb++] = (void *)(c.m.x = dev_rand(t * k1, 1.0f, 1, err));
    bufs[nb++] = (void *)(c.m.w1 = dev_rand(G * n1 * k1, 0.05f, 2, err));
    bufs[nb++] = (void *)(c.m.w2 = dev_rand(G * n2 * k2, 0.05f, 3, err));
    bufs[nb++] = (void *)(c.dy = dev_rand(t * n2, 1.0f, 4, err));
    if (!c.m.x || !c.m.w1 || !c.m.w2 || !c.dy) rc = rc ? rc : FT_ENOMEM;
    float *probs = NULL;
    if (!rc) ALLOC(probs, t * 4);
    if (!rc) rc = ft_cuda_memset(probs, 0x3f, (size_t)t * 4, err); /* ~0.75 */
    c.m.probs = probs;
    if (!rc) ALLOC(c.out.h, t * n1 * 2);
    if (!rc) ALLOC(c.out.z, t * k2 * 2);
    if (!rc) ALLOC(c.out.y, t * n2 * 2);
    if (!rc) ALLOC(c.gr.dz, t * k2 * 2);
    if (!rc) ALLOC(c.gr.dh, t * n1 * 2);
    if (!rc) ALLOC(c.gr.dx, t * k1 * 2);
    if (!rc) ALLOC(c.gr.dw1, G * n1 * k1 * 2);
    if (!rc) ALLOC(c.gr.dw2, G * n2 * k2 * 2);
    if (!rc) ALLOC(c.gr.dprobs, t * 4);
    uint16_t *zc = NULL;
    if (!rc) ALLOC(zc, t * k2 * 2);
    float *zamax = NULL;
    if (!rc) ALLOC(zamax, G * 8);
#undef ALLOC
    if (!rc) {
        c.fc1.kind = FT_GEMM_FPROP;
        c.fc1.n_groups = G;
        c.fc1.splits = dsp;
        c.fc1.m = t;
        c.fc1.n = n1;
        c.fc1.k = k1;
        c.fc1.a = c.m.x;
        c.fc1.b = c.m.w1;
        c.fc1.c = c.out.h;
        const double f1 = 2.0 * (double)t * (double)n1 * (double)k1;
        const double ffwd = f1 + 2.0 * (double)t * (double)n2 * (double)k2;
        c.fc1act = c.fc1;
        c.fc1act.act = &c.m.act;
        c.fc1act.probs = c.m.probs;
        c.fc1act.z = c.out.z;
        c.fc2 = c.fc1;
        c.fc2.n = n2;
        c.fc2.k = k2;
        c.fc2.a = c.out.z;
        c.fc2.b = c.m.w2;
        c.fc2.c = c.out.y;
        const double f2 = 2.0 * (double)t * (double)n2 * (double)k2;
        /* the headline figures first, in torch_baseline.py's order (fc1, fwd, bwd): the card
         * slows down over minutes of back-to-back GEMMs, so what runs later in a process runs on
         * a warmer card */
        float ms_fc1 = time_median(run_fc1, &c, iters, tm, err);
        float ms_fwd = time_median(run_fwd, &c, iters, tm, err);
        float ms_bwd = time_median(run_bwd, &c, iters, tm, err);
        if (ms_fc1 < 0 || ms_fwd < 0 || ms_bwd < 0) {
            rc = err->rc ? err->rc : FT_ECUDA;
        } else {
            printf("RESULT ft %s il=%d fc1 %.3f ms %.1f TFLOP/s | fwd %.3f ms %.1f TFLOP/s | "
                   "bwd %.3f ms %.1f TFLOP/s\n",
                   s->name, interleave, ms_fc1, f1 / ms_fc1 / 1e9, ms_fwd, ffwd / ms_fwd / 1e9,
                   ms_bwd, 2.0 * ffwd / ms_bwd / 1e9);
        }
        float ms_fc1a = time_median(run_fc1act, &c, iters, tm, err);
        float ms_fc1p = time_median(run_fc1, &c, iters, tm, err);
        float ms_fc2 = time_median(run_fc2, &c, iters, tm, err);
        /* fc1 without the activation again, right after fc1+act: the card's clocks drop under
         * its power cap over the first seconds, so the first fc1 above ran faster */
        if (ms_fc1a > 0 && ms_fc2 > 0 && ms_fc1p > 0)
            printf("PARTS ft %s il=%d fc1+act %.3f ms %.1f TFLOP/s | fc1 again %.3f ms | "
                   "fc2 %.3f ms %.1f TFLOP/s\n",
                   s->name, interleave, ms_fc1a, f1 / ms_fc1a / 1e9, ms_fc1p, ms_fc2,
                   f2 / ms_fc2 / 1e9);
        /* the fused MXFP8 epilogue: z quantized on store, rowwise and columnwise copies, against
         * the bf16 epilogue timed right before and after it */
        c.fc1mx = c.fc1act;
        c.fc1mx.z_mxfp8 = 1;
        c.fc1mx.z_fp8 = FT_FP8_E4M3;
        c.fc1mx.zc = zc;
        float ms_mx = time_median(run_fc1mx, &c, iters, tm, err);
        c.fc1nv = c.fc1act;
        c.fc1nv.z_nvfp4 = 1;
        c.fc1nv.z_amax = zamax;
        float ms_nv = time_median(run_fc1nv, &c, iters, tm, err);
        float ms_fc1b = time_median(run_fc1act, &c, iters, tm, err);
        if (ms_mx > 0 && ms_fc1a > 0 && ms_fc1b > 0)
            printf("MXFP8 ft %s il=%d fc1+act+mxfp8 row+col %.3f ms %.1f TFLOP/s | fc1+act "
                   "bf16 %.3f / %.3f ms before / after | %.2fx time\n",
                   s->name, interleave, ms_mx, f1 / ms_mx / 1e9, ms_fc1a, ms_fc1b,
                   2.0 * ms_mx / (ms_fc1a + ms_fc1b));
        else
            printf("MXFP8 ft %s FAILED: %s\n", s->name, ft_err_msg(err));
        if (ms_nv > 0 && ms_fc1a > 0 && ms_fc1b > 0)
            printf("NVFP4 ft %s il=%d fc1+act+nvfp4 amaxes %.3f ms %.1f TFLOP/s | %.2fx the "
                   "bf16 fc1+act time\n",
                   s->name, interleave, ms_nv, f1 / ms_nv / 1e9, 2.0 * ms_nv / (ms_fc1a + ms_fc1b));
        ft_err_clear(err);
        if (!rc && interleave == 0) bench_bwd_parts(&c, s->name, iters, tm, err);
        if (!rc && interleave == 0 && !getenv("FT_BENCH_NO_CUBLAS"))
            rc = bench_cublas(s->name, G, k1, n1, splits, c.m.x, c.m.w1, c.out.h, iters, tm, err);
    }
    for (int i = 0; i < nb; i++)
        ft_cuda_free(bufs[i]);
    return rc;
}

typedef struct q_ctx {
    ft_qcfg q;
    float *x, *out;
    int64_t rows, cols;
} q_ctx;

static int run_q(void *c, ft_err *err)
{
    q_ctx *x = c;
    return ft_cuda_quantize(&x->q, x->x, x->rows, x->cols, NULL, 0, x->out, NULL, err);
}

static int bench_quant(int iters, ft_cuda_timer *tm, ft_err *err)
{
    q_ctx c;
    memset(&c, 0, sizeof c);
    c.rows = 32768;
    c.cols = 7168;
    size_t bytes = (size_t)(c.rows * c.cols) * 4;
    int rc = ft_cuda_malloc((void **)&c.x, bytes, err);
    if (!rc) rc = ft_cuda_malloc((void **)&c.out, bytes, err);
    if (!rc) rc = ft_cuda_memset(c.x, 0x3e, bytes, err);
    struct {
        const char *name;
        ft_qfmt fmt;
        int col, rht;
        double passes; /* reads of x (amax pass) */
    } cfg[] = {
        {"fp8-current", FT_QF_FP8_CURRENT, 0, 0, 2}, {"fp8-block-1x128", FT_QF_FP8_BLOCK, 0, 0, 1},
        {"mxfp8-row", FT_QF_MXFP8, 0, 0, 1},         {"mxfp8-col", FT_QF_MXFP8, 1, 0, 1},
        {"nvfp4-row", FT_QF_NVFP4, 0, 0, 2},         {"nvfp4-col-rht", FT_QF_NVFP4, 1, 1, 2}};
    for (size_t i = 0; !rc && i < sizeof cfg / sizeof cfg[0]; i++) {
        memset(&c.q, 0, sizeof c.q);
        c.q.fmt = cfg[i].fmt;
        c.q.columnwise = (uint8_t)cfg[i].col;
        c.q.rht = (uint8_t)cfg[i].rht;
        float ms = time_median(run_q, &c, iters, tm, err);
        if (ms < 0) {
            rc = err->rc ? err->rc : FT_ECUDA;
            break;
        }
        double moved = (double)bytes * (1.0 + cfg[i].passes); /* fp32 in (x passes) + fp32 out */
        printf("RESULT quant %s fp32 %lldx%lld %.3f ms %.2f TB/s (%.0f%% of 4.3)\n", cfg[i].name,
               (long long)c.rows, (long long)c.cols, ms, moved / ms / 1e9,
               100.0 * moved / ms / 1e9 / 4.3);
    }
    ft_cuda_free(c.x);
    ft_cuda_free(c.out);
    return rc;
}

/* ---- packed quantization (bf16 in -> codes + scales out) against a device copy ------------- */

typedef struct qp_ctx {
    ft_qcfg q;
    const uint16_t *x;
    int64_t rows, cols;
    const int64_t *splits; /* device or NULL */
    uint32_t g;
    ft_qpacked *row, *col;
    void *copy_dst;
} qp_ctx;

static int run_qp(void *c, ft_err *err)
{
    qp_ctx *x = c;
    return ft_cuda_bf16_quantize(&x->q, x->x, x->rows, x->cols, x->splits, x->g, x->row, x->col,
                                 NULL, err);
}

static int run_copy(void *c, ft_err *err)
{
    qp_ctx *x = c;
    cudaError_t e = cudaMemcpyAsync(x->copy_dst, x->x, (size_t)(x->rows * x->cols) * 2,
                                    cudaMemcpyDeviceToDevice, NULL);
    if (e != cudaSuccess)
        return ft_err_set(err, FT_ECUDA, "cudaMemcpyAsync: %s", cudaGetErrorString(e));
    return FT_OK;
}

/* Allocates one usage's buffers; *written: bytes the kernel writes (codes + scales actually
 * used when every group is a multiple of the block). */
static int qp_alloc(const ft_qcfg *q, int col, int64_t rows, int64_t cols, uint32_t g,
                    ft_qpacked *o, double *written, ft_err *err)
{
    ft_qpacked_sizes sz;
    memset(o, 0, sizeof *o);
    int rc = ft_qpacked_layout(q, col, rows, cols, g, &sz, err);
    if (!rc) rc = ft_cuda_malloc((void **)&o->data, sz.data, err);
    if (!rc && sz.scales) rc = ft_cuda_malloc(&o->scales, sz.scales, err);
    if (!rc && sz.amax) rc = ft_cuda_malloc((void **)&o->amax, sz.amax, err);
    const double elem =
        sz.scale_rows ? (double)sz.scales / (double)(sz.scale_rows * sz.scale_cols) : 0.0;
    const double srows = col ? (double)(sz.scale_rows - (g ? g : 1)) : (double)sz.scale_rows;
    *written += (double)sz.data + srows * (double)sz.scale_cols * elem;
    return rc;
}

static void qp_release(ft_qpacked *o)
{
    ft_cuda_free(o->data);
    ft_cuda_free(o->scales);
    ft_cuda_free(o->amax);
    memset(o, 0, sizeof *o);
}

static int bench_qpacked(int iters, ft_cuda_timer *tm, ft_err *err)
{
    const struct {
        const char *name;
        int64_t rows, cols;
        uint32_t g; /* 0: no splits */
    } shapes[] = {{"deepseek-x", 32768, 7168, 0}, {"qwen3-x-128g", 32768, 2048, 128}};
    const struct {
        const char *name;
        ft_qfmt fmt;
        ft_fp8 fp8;
        int row, col, rht, sr;
        int reads; /* passes over x */
    } cfg[] = {
        {"mxfp8-e4m3 row+col", FT_QF_MXFP8, FT_FP8_E4M3, 1, 1, 0, 0, 1},
        {"mxfp8-e4m3 row", FT_QF_MXFP8, FT_FP8_E4M3, 1, 0, 0, 0, 1},
        {"mxfp8-e5m2 col", FT_QF_MXFP8, FT_FP8_E5M2, 0, 1, 0, 0, 1},
        {"nvfp4 row (amax+cast)", FT_QF_NVFP4, FT_FP8_E4M3, 1, 0, 0, 0, 2},
        {"nvfp4 col rht (amax+cast)", FT_QF_NVFP4, FT_FP8_E4M3, 0, 1, 1, 0, 2},
        {"nvfp4 col rht sr (amax+cast)", FT_QF_NVFP4, FT_FP8_E4M3, 0, 1, 1, 1, 2},
        {"fp8-current (amax+cast)", FT_QF_FP8_CURRENT, FT_FP8_E4M3, 1, 0, 0, 0, 2},
        {"fp8-block-1x128", FT_QF_FP8_BLOCK, FT_FP8_E4M3, 1, 0, 0, 0, 1},
    };
    int rc = FT_OK;
    for (size_t s = 0; !rc && s < sizeof shapes / sizeof shapes[0]; s++) {
        qp_ctx c;
        memset(&c, 0, sizeof c);
        c.rows = shapes[s].rows;
        c.cols = shapes[s].cols;
        c.g = shapes[s].g;
        const double in_bytes = (double)(c.rows * c.cols) * 2;
        void *dsp = NULL;
        c.x = dev_rand(c.rows * c.cols, 4.0f, 7, err);
        if (!c.x) rc = err->rc ? err->rc : FT_ENOMEM;
        if (!rc) rc = ft_cuda_malloc(&c.copy_dst, (size_t)in_bytes, err);
        if (!rc && c.g) {
            int64_t splits[256];
            make_splits(c.g, c.rows, splits);
            rc = ft_cuda_malloc(&dsp, c.g * sizeof(int64_t), err);
            if (!rc) rc = ft_cuda_h2d(dsp, splits, c.g * sizeof(int64_t), err);
            c.splits = dsp;
        }
        float ms_copy = rc ? -1.0f : time_median(run_copy, &c, iters, tm, err);
        if (ms_copy < 0) rc = rc ? rc : (err->rc ? err->rc : FT_ECUDA);
        if (!rc)
            printf("RESULT qpacked %s copy baseline (cudaMemcpy D2D, bf16 %lldx%lld) %.3f ms "
                   "%.2f TB/s\n",
                   shapes[s].name, (long long)c.rows, (long long)c.cols, ms_copy,
                   2.0 * in_bytes / ms_copy / 1e9);
        for (size_t i = 0; !rc && i < sizeof cfg / sizeof cfg[0]; i++) {
            ft_qpacked row, col;
            double written = 0.0;
            memset(&c.q, 0, sizeof c.q);
            c.q.fmt = cfg[i].fmt;
            c.q.fp8 = cfg[i].fp8;
            c.q.rht = (uint8_t)cfg[i].rht;
            c.q.sr = (uint8_t)cfg[i].sr;
            c.q.seed = 1;
            memset(&row, 0, sizeof row);
            memset(&col, 0, sizeof col);
            if (cfg[i].row) rc = qp_alloc(&c.q, 0, c.rows, c.cols, c.g, &row, &written, err);
            if (!rc && cfg[i].col) rc = qp_alloc(&c.q, 1, c.rows, c.cols, c.g, &col, &written, err);
            c.row = cfg[i].row ? &row : NULL;
            c.col = cfg[i].col ? &col : NULL;
            float ms = rc ? -1.0f : time_median(run_qp, &c, iters, tm, err);
            if (ms < 0) {
                printf("RESULT qpacked %s %s FAILED: %s\n", shapes[s].name, cfg[i].name,
                       ft_err_msg(err));
                rc = err->rc ? err->rc : FT_ECUDA;
            } else {
                const double moved = in_bytes * cfg[i].reads + written;
                printf("RESULT qpacked %s %s %.3f ms %.2f TB/s (%.0f%% of 4.3) %.2fx copy\n",
                       shapes[s].name, cfg[i].name, ms, moved / ms / 1e9,
                       100.0 * moved / ms / 1e9 / 4.3, (moved / ms) / (2.0 * in_bytes / ms_copy));
            }
            qp_release(&row);
            qp_release(&col);
        }
        ft_cuda_free((void *)c.x);
        ft_cuda_free(c.copy_dst);
        ft_cuda_free(dsp);
    }
    return rc;
}

int main(int argc, char **argv)
{
    int iters = 10;
    if (argc > 1) {
        char *end = NULL;
        long v = strtol(argv[1], &end, 10);
        if (!end || *end || v < 1 || v > 64) {
            fprintf(stderr, "bench_cuda: iterations must be 1..64, got '%s'\n", argv[1]);
            return 2;
        }
        iters = (int)v;
    }
    if (ft_cuda_device_count() <= 0) {
        printf("bench_cuda: no CUDA device, nothing to time\n");
        return 0;
    }
    ft_err err;
    ft_err_clear(&err);
    char name[256];
    int n_sm = 0;
    ft_cuda_timer *tm = NULL;
    if (ft_cuda_device_info(name, sizeof name, &n_sm, &err) || ft_cuda_timer_new(&tm, &err)) {
        fprintf(stderr, "bench_cuda: %s\n", ft_err_msg(&err));
        return 1;
    }
    printf("device %s, %d SMs, %d iterations (median)\n", name, n_sm, iters);
    const shape shapes[] = {{"deepseek-v3", 32, 32768, 7168, 2048},
                            {"mixtral", 8, 16384, 4096, 14336},
                            {"qwen3-30b-a3b", 128, 32768, 2048, 768},
                            {"gpt-oss", 32, 16384, 2880, 2880},
                            {"decode-deepseek", 32, 256, 7168, 2048}};
    const char *only = getenv("FT_BENCH_ONLY");
    int rc = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        if (only && !strstr(only, shapes[i].name)) continue;
        const int il_max = getenv("FT_BENCH_NO_INTERLEAVE") ? 0 : 32;
        for (int il = 0; il <= il_max; il += 32) {
            if (bench_mlp(&shapes[i], il, iters, tm, &err)) {
                printf("RESULT ft %s il=%d FAILED: %s\n", shapes[i].name, il, ft_err_msg(&err));
                ft_err_clear(&err);
                rc = 1;
            }
        }
    }
    if (!only || strstr(only, "quant")) {
        if (bench_quant(iters, tm, &err)) {
            printf("RESULT quant FAILED: %s\n", ft_err_msg(&err));
            rc = 1;
        }
        ft_err_clear(&err);
        if (bench_qpacked(iters, tm, &err)) {
            printf("RESULT qpacked FAILED: %s\n", ft_err_msg(&err));
            rc = 1;
        }
    }
    ft_cuda_timer_free(tm);
    return rc;
}

#else

int main(void)
{
    printf("bench_cuda: built without CUDA, nothing to time\n");
    return 0;
}

#endif
