// nx_time.cu - replay --gpu-time's timed step on the numerics context: the bf16 grouped MLP of
// mlp_bf16.cu, forward and backward, on the current problem's inputs, timed with events over
// rounds run back to back after untimed warm-up runs.
#include "nx_ctx.cuh"
#include <string.h>

namespace
{

// The step's device buffers of one ft_cuda_nx_time, from the pool.
struct tbufs {
    uint16_t *x, *dy, *b1, *b2, *h, *z, *zc, *y, *dz, *dh, *dx, *dw1, *dw2, *own1, *own2;
    float *db1, *db2, *dp;
};

// The bf16 inputs (from the problem's float32 bf16 values), outputs and gradients.
int time_buffers(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, tbufs *b, ft_err *err)
{
    const ft_nx_problem *p = &nx->p;
    const int64_t t = p->t, k1 = p->k1, n1 = p->n1, k2 = p->k2, n2 = p->n2, G = p->n_groups;
    const int grad = p->grad, zc = grad && path == FT_MLP_FUSED && q->fmt == FT_QF_MXFP8;
    struct {
        void **p;
        int64_t bytes; // 0: not wanted
    } a[] = {{(void **)&b->x, t * k1 * 2},
             {(void **)&b->dy, grad ? t * n2 * 2 : 0},
             {(void **)&b->b1, p->bias1 ? G * n1 * 2 : 0},
             {(void **)&b->b2, p->bias2 ? G * n2 * 2 : 0},
             {(void **)&b->h, t * n1 * 2},
             {(void **)&b->z, t * k2 * 2},
             {(void **)&b->zc, zc ? t * k2 * 2 : 0},
             {(void **)&b->y, t * n2 * 2},
             {(void **)&b->dz, grad ? t * k2 * 2 : 0},
             {(void **)&b->dh, grad ? t * n1 * 2 : 0},
             {(void **)&b->dx, grad ? t * k1 * 2 : 0},
             {(void **)&b->dw1, grad ? G * n1 * k1 * 2 : 0},
             {(void **)&b->dw2, grad ? G * n2 * k2 * 2 : 0},
             {(void **)&b->db1, grad && p->bias1 ? G * n1 * 4 : 0},
             {(void **)&b->db2, grad && p->bias2 ? G * n2 * 4 : 0},
             {(void **)&b->dp, grad && p->scaled ? t * 4 : 0}};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
        if (a[i].bytes <= 0) continue;
        if (cudaMallocAsync(a[i].p, (size_t)a[i].bytes, nx->st) != cudaSuccess) {
            cudaGetLastError();
            return ft_err_set(err, FT_ENOMEM,
                              "numerics cuda: out of device memory for the timed step's buffers "
                              "(%.2f GB more); a larger --shrink helps",
                              (double)a[i].bytes * 1e-9);
        }
    }
    int rc = nx_f2b(nx, nx->x, b->x, t * k1, err);
    if (!rc && grad) rc = nx_f2b(nx, nx->dy, b->dy, t * n2, err);
    if (!rc && p->bias1) rc = nx_f2b(nx, nx->b1, b->b1, G * n1, err);
    if (!rc && p->bias2) rc = nx_f2b(nx, nx->b2, b->b2, G * n2, err);
    return rc;
}

void time_release(ft_nx *nx, tbufs *b)
{
    void *all[] = {b->x,  b->dy, b->b1,  b->b2,  b->h,    b->z,    b->zc,  b->y,   b->dz,
                   b->dh, b->dx, b->dw1, b->dw2, b->own1, b->own2, b->db1, b->db2, b->dp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) cudaFreeAsync(all[i], nx->st);
    memset(b, 0, sizeof *b);
}

} // namespace

extern "C" int ft_cuda_nx_time(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, uint32_t warmup,
                               uint32_t rounds, ft_nx_time *out, ft_err *err)
{
    memset(out, 0, sizeof *out);
    if (!nx || !nx->have || !q) return ft_err_set(err, FT_EINVAL, "numerics cuda: no problem set");
    if (nx_enter(nx, err)) return FT_ECUDA;
    if (rounds < 1 || rounds > FT_NX_MAX_ROUNDS)
        return ft_err_set(err, FT_EINVAL, "numerics cuda: %u timed rounds (1 to %d)", rounds,
                          FT_NX_MAX_ROUNDS);
    const ft_nx_problem *p = &nx->p;
    const uint32_t G = p->n_groups;
    // the kernels' refusals, decided on the host as for the runs (ft_mlp_check)
    ft_mlp hm;
    memset(&hm, 0, sizeof hm);
    hm.n_groups = G;
    hm.splits = nx->hsplits;
    hm.t = p->t, hm.k1 = p->k1, hm.n1 = p->n1, hm.k2 = p->k2, hm.n2 = p->n2;
    hm.act = p->act;
    hm.scale_bias = p->scale_bias;
    hm.path = path;
    hm.quant = *q;
    hm.x = nx->x, hm.w1 = nx->w1, hm.b1 = p->bias1 ? nx->b1 : NULL, hm.w2 = nx->w2;
    hm.b2 = p->bias2 ? nx->b2 : NULL, hm.probs = p->scaled ? nx->pr : NULL;
    ft_err kerr;
    ft_err_clear(&kerr);
    int krc = ft_mlp_check(&hm, &kerr);
    if (!krc && q->delayed)
        krc = ft_err_set(&kerr, FT_EUNSUPPORTED,
                         "cuda mlp: FP8 delayed scaling with amax histories runs on the CPU");
    if (krc && krc != FT_EINVAL && krc != FT_EUNSUPPORTED)
        return ft_err_set(err, krc, "%s", ft_err_msg(&kerr));
    if (krc) {
        out->rc = krc;
        ft_strlcpy(out->msg, ft_err_msg(&kerr), sizeof out->msg);
        return FT_OK;
    }
    ft_fast_phase(&nx->fast, FT_PH_OTHER, nx->st);
    tbufs b;
    memset(&b, 0, sizeof b);
    cudaEvent_t ev[3][FT_NX_MAX_ROUNDS];
    int n_ev = 0;
    int rc = time_buffers(nx, path, q, &b, err);
    const uint16_t *w1 = NULL, *w2 = NULL;
    // both weights from the cache only where it holds them together (making one may evict the
    // other, whose buffer the step needs)
    const int cache =
        2.0 * (double)G * (double)(p->n1 * p->k1 + p->n2 * p->k2) <= (double)nx->fast.wcap;
    if (!rc)
        rc = ft_fast_bf16_weights(&nx->fast, nx->w1, FT_MLP_W1, p->n1, p->k1, G, cache, nx->st, &w1,
                                  &b.own1, err);
    if (!rc)
        rc = ft_fast_bf16_weights(&nx->fast, nx->w2, FT_MLP_W2, p->n2, p->k2, G, cache, nx->st, &w2,
                                  &b.own2, err);
    ft_cuda_bf16_mlp m;
    memset(&m, 0, sizeof m);
    m.n_groups = G;
    m.splits = nx->splits;
    m.t = p->t, m.k1 = p->k1, m.n1 = p->n1, m.k2 = p->k2, m.n2 = p->n2;
    m.act = p->act;
    m.scale_bias = p->scale_bias;
    m.x = b.x, m.w1 = w1, m.b1 = b.b1, m.w2 = w2, m.b2 = b.b2;
    m.probs = p->scaled ? nx->pr : NULL;
    m.path = path;
    m.quant = *q;
    m.grad = p->grad;
    if (!rc && q->fmt != FT_QF_NONE)
        rc = ft_cuda_bf16_mlp_q_new(&m, nx->st, &m.q, &out->proxies, err);
    const ft_cuda_bf16_mlp_out fo = {b.h, b.z, b.y, b.zc};
    const ft_cuda_bf16_mlp_grads go = {b.dz, b.dh, b.dx, b.dw1, b.dw2, b.db1, b.db2, b.dp};
    for (; n_ev < (int)rounds && !rc; n_ev++)
        for (int k = 0; k < 3 && !rc; k++) {
            rc = cu_fail(cudaEventCreate(&ev[k][n_ev]), err, "cudaEventCreate");
            if (rc) // the round's events made so far are destroyed below
                for (int j = 0; j < k; j++)
                    cudaEventDestroy(ev[j][n_ev]);
        }
    if (rc && n_ev) n_ev--;
    // untimed warm-up runs, then the rounds back to back (events between them), one wait
    for (uint32_t i = 0; i < warmup + rounds && !rc; i++) {
        const int r = (int)i - (int)warmup;
        if (r >= 0) rc = cu_fail(cudaEventRecord(ev[0][r], nx->st), err, "cudaEventRecord");
        if (!rc) rc = ft_cuda_bf16_mlp_forward(&m, &fo, nx->st, err);
        if (!rc && r >= 0) rc = cu_fail(cudaEventRecord(ev[1][r], nx->st), err, "cudaEventRecord");
        if (!rc && p->grad) rc = ft_cuda_bf16_mlp_backward(&m, &fo, b.dy, &go, nx->st, err);
        if (!rc && r >= 0) rc = cu_fail(cudaEventRecord(ev[2][r], nx->st), err, "cudaEventRecord");
        if (rc && i == 0 && (rc == FT_EUNSUPPORTED || rc == FT_EINVAL)) {
            // refused by a kernel's limits before it launched: nothing to time
            out->rc = rc;
            ft_strlcpy(out->msg, ft_err_msg(err), sizeof out->msg);
            ft_err_clear(err);
            rc = FT_OK;
            break;
        }
    }
    int rs = cu_fail(cudaStreamSynchronize(nx->st), rc ? NULL : err, "cudaStreamSynchronize");
    if (!rc) rc = rs;
    for (int r = 0; r < (int)rounds && !rc && !out->rc; r++) {
        float all = 0, fwd = 0;
        rc = cu_fail(cudaEventElapsedTime(&all, ev[0][r], ev[2][r]), err, "cudaEventElapsedTime");
        if (!rc)
            rc = cu_fail(cudaEventElapsedTime(&fwd, ev[0][r], ev[1][r]), err,
                         "cudaEventElapsedTime");
        out->ms[r] = all, out->fwd_ms[r] = fwd;
    }
    if (!rc && !out->rc) out->n_rounds = rounds;
    for (int r = 0; r < n_ev; r++)
        for (int k = 0; k < 3; k++)
            cudaEventDestroy(ev[k][r]);
    ft_cuda_bf16_mlp_q_free(m.q, nx->st);
    time_release(nx, &b);
    return rc;
}
