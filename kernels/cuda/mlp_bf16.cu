// mlp_bf16.cu - the grouped MLP in bf16 storage as a training step runs it
// (ft_cuda_bf16_mlp_forward/backward, ft_kernels_cuda.h), the step `replay --gpu-time` times
// (nx.cu's ft_cuda_nx_time): the wgmma GEMMs with the FC1 epilogues (gemm_wgmma.cu), the
// activation kernels (mlp.cu) and the packed quantizers (quant_packed.cu), in the order a fused
// or an unfused plan launches them, and the quantized copies' buffers (ft_cuda_bf16_mlp_q).
//
// Limits: the GEMMs read bf16 operands (sm_90a has no MXFP8/NVFP4 tensor cores, and the wgmma
// kernel no FP8 path), so the quantized copies are written for their cost and not read;
// quantizations the packed quantizers lack are timed as their nearest kernel (FT_NX_PROXY_*).
#include "ft_cuda_int.cuh"

#include <string.h>

namespace
{

// One quantized tensor of the step: what runs, and where it goes.
struct qtensor {
    uint8_t on;         // the step quantizes this tensor
    uint8_t col;        // and makes its columnwise copy
    uint8_t col_as_row; // the copy is a second rowwise cast (FT_NX_PROXY_FP8_COL)
    ft_qcfg cfg;        // the packed quantizer's config (rht acts on the columnwise copy only)
    ft_qpacked rw, cw;  // rowwise, columnwise buffers
};

} // namespace

struct ft_cuda_bf16_mlp_q {
    qtensor t[FT_MLP_N_TENSORS];
    int64_t *wsplits[2]; // device [G]: n1, n2 rows per expert (each expert's weight is a group)
    float *z_amax;       // device [2G]: the NVFP4 FC1 epilogue's group amaxes (rowwise, RHT copy)
    uint32_t G;
    void *mem[64]; // every allocation, for ft_cuda_bf16_mlp_q_free
    int n_mem;
};

namespace
{

int check_step(const ft_cuda_bf16_mlp *m, ft_err *err)
{
    if (m->n_groups < 1 || m->n_groups > FT_CUDA_MAX_GROUPS)
        return ft_err_set(err, FT_EINVAL, "cuda mlp: n_groups %u outside 1..%d", m->n_groups,
                          FT_CUDA_MAX_GROUPS);
    if (m->t < 0 || m->k1 <= 0 || m->n1 <= 0 || m->k2 <= 0 || m->n2 <= 0)
        return ft_err_set(err, FT_EINVAL,
                          "cuda mlp: bad shape t=%lld k1=%lld n1=%lld k2=%lld n2=%lld",
                          (long long)m->t, (long long)m->k1, (long long)m->n1, (long long)m->k2,
                          (long long)m->n2);
    if (m->scale_bias && !m->probs)
        return ft_err_set(err, FT_EINVAL, "cuda mlp: scale_bias needs probs");
    const ft_qfmt f = m->quant.fmt;
    if ((unsigned)f >= FT_QF_COUNT) return ft_err_set(err, FT_EINVAL, "cuda mlp: unknown format");
    if (f != FT_QF_NONE && !m->q)
        return ft_err_set(err, FT_EINVAL,
                          "cuda mlp: a quantized step needs its buffers (ft_cuda_bf16_mlp_q_new)");
    if (m->quant.delayed)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "cuda mlp: FP8 delayed scaling with amax histories runs on the CPU");
    if (m->path == FT_MLP_FUSED && f != FT_QF_NONE && f != FT_QF_MXFP8 && f != FT_QF_NVFP4)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "cuda mlp: the fused FC1 epilogue quantizes z with MXFP8 or NVFP4 only");
    return ft_cu_check_act(&m->act, m->n1, m->k2, err);
}

// Quantize tensor src[rows][cols] (groups: splits, G) into its buffers; amax (may be NULL): the
// group amaxes of the rowwise / columnwise copies known already (cast only).
int quantize(const ft_cuda_bf16_mlp_q *q, int tensor, const uint16_t *src, int64_t rows,
             int64_t cols, const int64_t *splits, uint32_t G, const float *amax_row,
             const float *amax_col, cudaStream_t st, ft_err *err)
{
    const qtensor *t = &q->t[tensor];
    if (!t->on) return FT_OK;
    ft_qpacked rw = t->rw, cw = t->cw;
    if (amax_row) rw.amax = (float *)amax_row, rw.amax_given = 1;
    if (amax_col) cw.amax = (float *)amax_col, cw.amax_given = 1;
    if (!t->col_as_row)
        return ft_cuda_bf16_quantize(&t->cfg, src, rows, cols, splits, G, &rw, t->col ? &cw : NULL,
                                     st, err);
    int rc = ft_cuda_bf16_quantize(&t->cfg, src, rows, cols, splits, G, &rw, NULL, st, err);
    if (!rc && t->col) {
        // TE's columnwise FP8 copy is the transposed cast with the same per-tensor scale: a
        // second cast of the same bytes (the rowwise amaxes, where the format has them)
        if (rw.amax && !amax_col) cw.amax = rw.amax, cw.amax_given = 1;
        rc = ft_cuda_bf16_quantize(&t->cfg, src, rows, cols, splits, G, &cw, NULL, st, err);
    }
    return rc;
}

void *q_alloc(ft_cuda_bf16_mlp_q *q, size_t bytes, cudaStream_t st, int *rc, ft_err *err)
{
    void *p = NULL;
    if (*rc) return NULL;
    if (q->n_mem >= (int)(sizeof q->mem / sizeof q->mem[0])) {
        *rc = ft_err_set(err, FT_ENOMEM, "cuda mlp: too many quantized buffers");
        return NULL;
    }
    if (cudaMallocAsync(&p, bytes ? bytes : 16, st) != cudaSuccess) {
        cudaGetLastError();
        *rc = ft_err_set(err, FT_ENOMEM,
                         "cuda mlp: out of device memory for the quantized copies (%.2f GB)",
                         (double)bytes * 1e-9);
        return NULL;
    }
    q->mem[q->n_mem++] = p;
    return p;
}

int q_buffers(ft_cuda_bf16_mlp_q *q, ft_qpacked *o, const ft_qcfg *cfg, int columnwise,
              int64_t rows, int64_t cols, uint32_t G, cudaStream_t st, ft_err *err)
{
    ft_qpacked_sizes sz;
    int rc = ft_qpacked_layout(cfg, columnwise, rows, cols, G, &sz, err);
    memset(o, 0, sizeof *o);
    o->data = (uint8_t *)q_alloc(q, sz.data, st, &rc, err);
    if (sz.scales) o->scales = q_alloc(q, sz.scales, st, &rc, err);
    if (sz.amax) o->amax = (float *)q_alloc(q, sz.amax, st, &rc, err);
    return rc;
}

__global__ void fill_i64_kernel(int64_t *p, int n, int64_t v)
{
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        p[i] = v;
}

ft_cuda_bf16_gemm gemm_of(const ft_cuda_bf16_mlp *m, ft_gemm_kind kind, int64_t n, int64_t k,
                          const uint16_t *a, const uint16_t *b, uint16_t *c)
{
    ft_cuda_bf16_gemm g;
    memset(&g, 0, sizeof g);
    g.kind = kind;
    g.n_groups = m->n_groups;
    g.splits = m->splits;
    g.m = m->t;
    g.n = n;
    g.k = k;
    g.a = a;
    g.b = b;
    g.c = c;
    return g;
}

} // namespace

extern "C" int ft_cuda_bf16_mlp_q_new(const ft_cuda_bf16_mlp *m, void *stream,
                                      ft_cuda_bf16_mlp_q **out, unsigned *proxies, ft_err *err)
{
    cudaStream_t st = (cudaStream_t)stream;
    *out = NULL;
    if (proxies) *proxies = 0;
    ft_cuda_bf16_mlp_q *q = (ft_cuda_bf16_mlp_q *)ft_calloc(1, sizeof *q);
    if (!q) return ft_err_set(err, FT_ENOMEM, "cuda mlp: no memory");
    const uint32_t G = m->n_groups;
    const ft_qfmt f = m->quant.fmt;
    const int fused = m->path == FT_MLP_FUSED, grad = m->grad != 0;
    int rc = FT_OK;
    unsigned px = 0;
    // rows, cols, groups of each tensor; which usages the step needs
    const int64_t rows[FT_MLP_N_TENSORS] = {
        m->t, (int64_t)G * m->n1, m->t, (int64_t)G * m->n2, m->t, m->t};
    const int64_t cols[FT_MLP_N_TENSORS] = {m->k1, m->k1, m->k2, m->k2, m->n2, m->n1};
    for (int k = 0; k < FT_MLP_N_TENSORS && !rc && f != FT_QF_NONE; k++) {
        qtensor *t = &q->t[k];
        const int bwd = k == FT_MLP_DY || k == FT_MLP_DH;
        // the fused MXFP8 epilogue writes both copies of z itself
        t->on = (!bwd || grad) && !(k == FT_MLP_Z && fused && f == FT_QF_MXFP8);
        t->col = (uint8_t)(t->on && grad);
        if (!t->on) continue;
        ft_mlp_qcfg(&m->quant, k, 0, 1, &t->cfg); // the columnwise config: rht where it applies
        if (t->cfg.fmt == FT_QF_FP8_DELAYED)
            t->cfg.fmt = FT_QF_FP8_CURRENT, px |= FT_NX_PROXY_DELAYED;
        if (t->cfg.two_d) t->cfg.two_d = 0, px |= FT_NX_PROXY_2D;
        if (t->col && (t->cfg.fmt == FT_QF_FP8_CURRENT || t->cfg.fmt == FT_QF_FP8_BLOCK))
            t->col_as_row = 1, px |= FT_NX_PROXY_FP8_COL;
        rc = q_buffers(q, &t->rw, &t->cfg, 0, rows[k], cols[k], G, st, err);
        if (!rc && t->col)
            rc = q_buffers(q, &t->cw, &t->cfg, t->col_as_row ? 0 : 1, rows[k], cols[k], G, st, err);
    }
    for (int w = 0; w < 2 && !rc && f != FT_QF_NONE; w++) {
        q->wsplits[w] = (int64_t *)q_alloc(q, G * sizeof(int64_t), st, &rc, err);
        if (!rc) {
            fill_i64_kernel<<<1, 256, 0, st>>>(q->wsplits[w], (int)G, w ? m->n2 : m->n1);
            rc = cu_launched(err, "fill_i64_kernel");
        }
    }
    if (!rc && fused && f == FT_QF_NVFP4)
        q->z_amax = (float *)q_alloc(q, 2 * G * sizeof(float), st, &rc, err);
    if (rc) {
        ft_cuda_bf16_mlp_q_free(q, stream);
        return rc;
    }
    if (proxies) *proxies = px;
    q->G = G;
    *out = q;
    return FT_OK;
}

extern "C" int ft_cuda_bf16_mlp_q_copy(const ft_cuda_bf16_mlp_q *q, int tensor, int columnwise,
                                       ft_qcfg *cfg, ft_qpacked *out, ft_err *err)
{
    if (!q || tensor < 0 || tensor >= FT_MLP_N_TENSORS)
        return ft_err_set(err, FT_EINVAL, "cuda mlp: no such quantized tensor");
    const qtensor *t = &q->t[tensor];
    if (!t->on || (columnwise && (!t->col || t->col_as_row)))
        return ft_err_set(err, FT_ENOTFOUND, "cuda mlp: the step writes no such copy");
    *cfg = t->cfg;
    cfg->columnwise = (uint8_t)(columnwise != 0);
    if (!columnwise) cfg->rht = 0; // the RHT acts on the columnwise copy only
    *out = columnwise ? t->cw : t->rw;
    // the NVFP4 FC1 epilogue's amaxes stand in for the cast's own
    if (tensor == FT_MLP_Z && q->z_amax)
        out->amax = q->z_amax + (columnwise && t->cfg.rht ? q->G : 0);
    return FT_OK;
}

extern "C" void ft_cuda_bf16_mlp_q_free(ft_cuda_bf16_mlp_q *q, void *stream)
{
    if (!q) return;
    for (int i = 0; i < q->n_mem; i++)
        cudaFreeAsync(q->mem[i], (cudaStream_t)stream);
    ft_free(q);
}

extern "C" int ft_cuda_bf16_mlp_forward(const ft_cuda_bf16_mlp *m, const ft_cuda_bf16_mlp_out *out,
                                        void *stream, ft_err *err)
{
    cudaStream_t st = (cudaStream_t)stream;
    int rc = check_step(m, err);
    if (rc) return rc;
    const uint32_t G = m->n_groups;
    const ft_qfmt f = m->quant.fmt;
    const int fused = m->path == FT_MLP_FUSED;
    const int mx = fused && f == FT_QF_MXFP8, nv = fused && f == FT_QF_NVFP4;
    const ft_cuda_bf16_mlp_q *q = m->q;
    if (f != FT_QF_NONE) {
        rc = quantize(q, FT_MLP_X, m->x, m->t, m->k1, m->splits, G, NULL, NULL, st, err);
        if (!rc)
            rc = quantize(q, FT_MLP_W1, m->w1, (int64_t)G * m->n1, m->k1, q->wsplits[0], G, NULL,
                          NULL, st, err);
    }
    // FC1: the activation (and z's MXFP8 quantization or NVFP4 amaxes) in its epilogue, or after
    ft_cuda_bf16_gemm g1 = gemm_of(m, FT_GEMM_FPROP, m->n1, m->k1, m->x, m->w1, out->h);
    g1.bias = m->b1;
    if (fused) {
        g1.act = &m->act;
        g1.probs = m->probs;
        g1.z = out->z;
        g1.z_mxfp8 = (uint8_t)mx;
        g1.z_fp8 = m->quant.fp8_fwd;
        g1.zc = mx && m->grad ? out->zc : NULL;
        g1.z_nvfp4 = (uint8_t)nv;
        g1.z_amax = nv ? q->z_amax : NULL;
        if (nv)
            rc = cu_fail(cudaMemsetAsync(q->z_amax, 0, 2 * G * sizeof(float), st), err,
                         "cudaMemsetAsync");
    }
    if (!rc) rc = ft_cuda_bf16_gemm_run(&g1, stream, err);
    if (!rc && !fused)
        rc = ft_cuda_bf16_act_forward(&m->act, m->t, m->k2, out->h, m->probs, out->z, st, err);
    // z's quantization (the NVFP4 epilogue's amaxes: a cast only), W2's
    if (!rc && f != FT_QF_NONE && !mx) {
        const int rht = q->t[FT_MLP_Z].cfg.rht;
        rc = quantize(q, FT_MLP_Z, out->z, m->t, m->k2, m->splits, G, nv ? q->z_amax : NULL,
                      nv ? q->z_amax + (rht ? G : 0) : NULL, st, err);
    }
    if (!rc && f != FT_QF_NONE)
        rc = quantize(q, FT_MLP_W2, m->w2, (int64_t)G * m->n2, m->k2, q->wsplits[1], G, NULL, NULL,
                      st, err);
    if (rc) return rc;
    ft_cuda_bf16_gemm g2 = gemm_of(m, FT_GEMM_FPROP, m->n2, m->k2, out->z, m->w2, out->y);
    g2.bias = m->b2;
    g2.bias_scale = m->scale_bias ? m->probs : NULL;
    return ft_cuda_bf16_gemm_run(&g2, stream, err);
}

extern "C" int ft_cuda_bf16_mlp_backward(const ft_cuda_bf16_mlp *m, const ft_cuda_bf16_mlp_out *fwd,
                                         const uint16_t *dy, const ft_cuda_bf16_mlp_grads *gr,
                                         void *stream, ft_err *err)
{
    cudaStream_t st = (cudaStream_t)stream;
    int rc = check_step(m, err);
    if (rc) return rc;
    const uint32_t G = m->n_groups;
    const ft_qfmt f = m->quant.fmt;
    const int mx = m->path == FT_MLP_FUSED && f == FT_QF_MXFP8;
    if (f != FT_QF_NONE)
        rc = quantize(m->q, FT_MLP_DY, dy, m->t, m->n2, m->splits, G, NULL, NULL, st, err);
    // dz = dy W2, then dh and dprobs
    ft_cuda_bf16_gemm g = gemm_of(m, FT_GEMM_DGRAD, m->n2, m->k2, dy, m->w2, gr->dz);
    if (!rc) rc = ft_cuda_bf16_gemm_run(&g, stream, err);
    if (!rc)
        rc = ft_cuda_bf16_act_backward(&m->act, m->t, m->k2, fwd->h, m->probs, gr->dz, gr->dh,
                                       m->probs ? gr->dprobs : NULL, stream, err);
    if (!rc && f != FT_QF_NONE)
        rc = quantize(m->q, FT_MLP_DH, gr->dh, m->t, m->n1, m->splits, G, NULL, NULL, st, err);
    // dW2 = dy^T z (wgrad takes z's columnwise usage), dx = dh W1, dW1 = dh^T x
    g = gemm_of(m, FT_GEMM_WGRAD, m->n2, m->k2, dy, (mx && fwd->zc) ? fwd->zc : fwd->z, gr->dw2);
    if (!rc) rc = ft_cuda_bf16_gemm_run(&g, stream, err);
    g = gemm_of(m, FT_GEMM_DGRAD, m->n1, m->k1, gr->dh, m->w1, gr->dx);
    if (!rc) rc = ft_cuda_bf16_gemm_run(&g, stream, err);
    g = gemm_of(m, FT_GEMM_WGRAD, m->n1, m->k1, gr->dh, m->x, gr->dw1);
    if (!rc) rc = ft_cuda_bf16_gemm_run(&g, stream, err);
    if (rc) return rc;
    // bias grads and the scale_bias part of dprobs need row offsets
    if (!gr->db1 && !gr->db2 && !(m->scale_bias && m->b2 && gr->dprobs)) return FT_OK;
    int64_t *offs = NULL;
    rc = cu_fail(cudaMallocAsync((void **)&offs, (G + 1) * sizeof(int64_t), st), err,
                 "cudaMallocAsync");
    if (rc) return rc;
    rc = ft_cu_offsets(m->splits, (int)G, m->t, offs, st, err);
    if (!rc && gr->db1) rc = ft_cu_colsum_bf16(gr->dh, m->n1, offs, (int)G, NULL, gr->db1, st, err);
    if (!rc && gr->db2)
        rc = ft_cu_colsum_bf16(dy, m->n2, offs, (int)G, m->scale_bias ? m->probs : NULL, gr->db2,
                               st, err);
    if (!rc && m->scale_bias && m->b2 && gr->dprobs)
        rc = ft_cu_dprobs_bias_bf16(dy, m->n2, m->b2, offs, (int)G, m->t, gr->dprobs, st, err);
    int rc2 = cu_fail(cudaFreeAsync(offs, st), err, "cudaFreeAsync");
    return rc ? rc : rc2;
}
