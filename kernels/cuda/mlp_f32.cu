// mlp_f32.cu - the float32-contract grouped MLP of ft_kernels.h on the device, the numerics'
// device path (nx.cu): kernels/cpu/mlp.c step for step, with the same fake-quantized operands
// (ft_cuda_quantize_gs, bit-exact to the CPU quantizer) and the same places of bf16 rounding,
// but each operand divided by its group's factor into bf16, which holds the quotient exactly
// (MXFP8 codes x E8M0, NVFP4 E2M1 x E4M3 block scales, FP8 codes, FP8 block with power-of-two
// scales), then cuBLAS bf16 tensor-core GEMMs per group with fp32 accumulation and fp32 output
// and alpha = the product of the two operands' factors. Results equal the CPU reference's up to
// fp32 accumulation order. FP8 block scales that are not powers of two vary along K and are not
// exact in bf16: refused (FT_EUNSUPPORTED; TE's recipes and tefuser use power-of-two ones).
//
// The splits come from the caller's host copy. FP8 delayed scaling with amax histories
// (ft_mlp_quant.delayed) stays on the CPU back end. The bf16 weight operands are kept across
// calls (the weight cache of ft_fast), which the --gpu-time step's bf16 weights share.
#include "ft_cuda_int.cuh"

#include <cublas_v2.h>
#include <string.h>
#include <time.h>

namespace
{

__global__ void round_bf16_kernel(float *dst, const float *src, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = __bfloat162float(__float2bfloat16_rn(src[i]));
}

// dst = bf16(src) (dst may equal src)
int round_bf16(float *dst, const float *src, int64_t n, cudaStream_t st, ft_err *err)
{
    if (n <= 0) return FT_OK;
    round_bf16_kernel<<<cu_blocks(n, 256), 256, 0, st>>>(dst, src, n);
    return cu_launched(err, "round_bf16_kernel");
}

// bf16 operand: out[r][c] = bf16(v[r][c] / gs[group of r]) (gs NULL: 1; offs NULL: one group).
__global__ void expand_kernel(const float *v, int64_t rows, int64_t cols, const int64_t *offs,
                              int G, const float *gs, uint16_t *out)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * cols;
         i += (int64_t)gridDim.x * blockDim.x) {
        float s = 1.0f;
        if (gs) {
            const int64_t r = i / cols;
            s = (offs && r < offs[G]) ? gs[last_le(offs, G, r)] : gs[0];
            if (offs && r >= offs[G]) s = 1.0f; // padding rows: copied values
        }
        out[i] = f_to_bf16(s == 1.0f ? v[i] : __fdiv_rn(v[i], s));
    }
}

// alpha[g] = a[g] * b[g] (either NULL: 1)
__global__ void alpha_kernel(const float *a, const float *b, int G, float *alpha)
{
    for (int g = threadIdx.x; g < G; g += blockDim.x)
        alpha[g] = (a ? a[g] : 1.0f) * (b ? b[g] : 1.0f);
}

// c[r][j] += bias[g(r)][j] * (scale ? scale[r] : 1) over the rows of every group
__global__ void bias_rows_kernel(float *c, int64_t n, const int64_t *offs, int G, const float *bias,
                                 const float *scale)
{
    const int64_t used = offs[G];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < used * n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / n, j = i % n;
        const int g = last_le(offs, G, r);
        c[i] += bias[(int64_t)g * n + j] * (scale ? scale[r] : 1.0f);
    }
}

// Stream-ordered scratch buffers of one call, freed together (or one early with scratch_drop).
struct scratch {
    void *p[64];
    int n;
    cudaStream_t st;
};

void *scratch_bytes(scratch *s, size_t bytes, int *rc, ft_err *err)
{
    void *p = NULL;
    if (*rc) return NULL;
    if (s->n >= (int)(sizeof s->p / sizeof s->p[0])) {
        *rc = ft_err_set(err, FT_ENOMEM, "cuda mlp: too many scratch buffers");
        return NULL;
    }
    *rc = cu_fail(cudaMallocAsync(&p, bytes ? bytes : 16, s->st), err, "cudaMallocAsync");
    if (!*rc) s->p[s->n++] = p;
    return p;
}

float *scratch_f32(scratch *s, int64_t count, int *rc, ft_err *err)
{
    return (float *)scratch_bytes(s, (size_t)(count > 0 ? count : 1) * 4, rc, err);
}

void scratch_drop(scratch *s, const void *p, int *rc, ft_err *err)
{
    for (int i = 0; i < s->n; i++)
        if (s->p[i] == p) {
            int rf = cu_fail(cudaFreeAsync(s->p[i], s->st), err, "cudaFreeAsync");
            if (!*rc) *rc = rf;
            s->p[i] = s->p[--s->n];
            return;
        }
}

int scratch_free(scratch *s, int rc, ft_err *err)
{
    for (int i = 0; i < s->n; i++) {
        int rf = cu_fail(cudaFreeAsync(s->p[i], s->st), rc ? NULL : err, "cudaFreeAsync");
        if (!rc) rc = rf;
    }
    s->n = 0;
    return rc;
}

// The call's view: m with its device pointers, the splits on the host, rows in use.
struct job {
    const ft_mlp *m;
    int64_t hsplits[FT_CUDA_MAX_GROUPS];
    int64_t used;
    cudaStream_t st;
    ft_fast *fast;
    scratch ws;
};

void phase(job *j, int ph)
{
    ft_fast_phase(j->fast, ph, j->st);
}

int job_init(job *j, const ft_mlp *m, const int64_t *hsplits, ft_fast *fast, cudaStream_t st,
             ft_err *err)
{
    j->m = m;
    j->st = st;
    j->fast = fast;
    j->ws.n = 0;
    j->ws.st = st;
    if (!m || !fast || !hsplits)
        return ft_err_set(err, FT_EINVAL, "cuda mlp: no descriptor, context or host splits");
    if (m->n_groups < 1 || m->n_groups > FT_CUDA_MAX_GROUPS || !m->splits)
        return ft_err_set(err, FT_EINVAL, "cuda mlp: n_groups %u outside 1..%d", m->n_groups,
                          FT_CUDA_MAX_GROUPS);
    memcpy(j->hsplits, hsplits, m->n_groups * sizeof(int64_t));
    ft_mlp hm = *m;
    hm.splits = j->hsplits;
    int rc = ft_mlp_check(&hm, err);
    if (rc) return rc;
    if (m->quant.fmt == FT_QF_FP8_DELAYED && m->quant.delayed)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "cuda mlp: FP8 delayed scaling with amax histories runs on the CPU "
                          "back end only (the histories live on the host)");
    if (m->quant.fmt == FT_QF_FP8_BLOCK && !m->quant.pow2_scales)
        return ft_err_set(err, FT_EUNSUPPORTED,
                          "cuda mlp: FP8 block scales that are not powers of two are not exact in "
                          "bf16; the CPU back end runs them");
    j->used = 0;
    for (uint32_t g = 0; g < m->n_groups; g++)
        j->used += j->hsplits[g];
    return FT_OK;
}

// A GEMM operand: bf16 values with a factor per group.
struct opnd {
    const uint16_t *b;
    const float *gs; // [groups] or NULL (1)
};

// bf16 copy of v[rows][cols] divided by the factors gs (grouped by dsplits, or one group).
const uint16_t *expand(job *j, const float *v, int64_t rows, int64_t cols, const int64_t *dsplits,
                       const float *gs, int *rc, ft_err *err)
{
    uint16_t *b = (uint16_t *)scratch_bytes(&j->ws, (size_t)(rows * cols) * 2, rc, err);
    int64_t *offs = NULL;
    if (dsplits && gs) {
        offs = (int64_t *)scratch_bytes(&j->ws, (j->m->n_groups + 1) * sizeof(int64_t), rc, err);
        if (!*rc) *rc = ft_cu_offsets(dsplits, (int)j->m->n_groups, rows, offs, j->st, err);
    }
    if (*rc || rows * cols <= 0) return b;
    expand_kernel<<<cu_blocks(rows * cols, 256), 256, 0, j->st>>>(v, rows, cols, offs,
                                                                  (int)j->m->n_groups, gs, b);
    *rc = cu_launched(err, "expand_kernel");
    if (offs) scratch_drop(&j->ws, offs, rc, err);
    return b;
}

// Fake-quantize a grouped tensor src[rows][cols] (device splits dsplits) for (tensor, usage)
// into a bf16 operand; without quantization the operand is src in bf16.
opnd quant_act(job *j, int tensor, int columnwise, const float *src, int64_t rows, int64_t cols,
               const int64_t *dsplits, int *rc, ft_err *err)
{
    opnd o = {NULL, NULL};
    if (*rc) return o;
    phase(j, FT_PH_QUANT);
    const ft_mlp *m = j->m;
    if (m->quant.fmt == FT_QF_NONE) {
        o.b = expand(j, src, rows, cols, NULL, NULL, rc, err);
        return o;
    }
    float *dst = scratch_f32(&j->ws, rows * cols, rc, err);
    float *gs = scratch_f32(&j->ws, m->n_groups, rc, err);
    if (*rc) return o;
    ft_qcfg q;
    ft_mlp_qcfg(&m->quant, tensor, 0, columnwise, &q);
    *rc = ft_cuda_quantize_gs(&q, src, rows, cols, dsplits, m->n_groups, dst, gs, j->st, err);
    o.b = expand(j, dst, rows, cols, dsplits, gs, rc, err);
    o.gs = gs;
    scratch_drop(&j->ws, dst, rc, err);
    return o;
}

uint64_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

// The weight cache's key of (weights, usage, quantizer config).
uint64_t wkey(const ft_fast *f, const float *w, int tensor, int columnwise, int64_t n, int64_t k,
              uint32_t G, const ft_qcfg *q0)
{
    const uint64_t v[] = {f->wgen,
                          (uint64_t)(uintptr_t)w,
                          (uint64_t)tensor,
                          (uint64_t)columnwise,
                          (uint64_t)n,
                          (uint64_t)k,
                          G,
                          (uint64_t)q0->fmt,
                          (uint64_t)q0->fp8,
                          q0->two_d,
                          q0->pow2_scales,
                          fbits(q0->amax_epsilon),
                          fbits(q0->scale)};
    uint64_t key = 0x7e57;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        key = ft_hash_mix(key, v[i]);
    return key;
}

// The cache's entry for key: *hit = 1 when it holds the values already; else a fresh entry of
// bytes (least recently used ones evicted), or NULL when the cache has no room for it.
ft_fast_w *wslot(ft_fast *f, uint64_t key, size_t bytes, uint32_t G, cudaStream_t st, int *hit)
{
    *hit = 0;
    for (int i = 0; i < f->n_w; i++)
        if (f->w[i].key == key) {
            f->w[i].tick = ++f->tick;
            *hit = 1;
            return &f->w[i];
        }
    while (f->n_w && (f->n_w == 16 || f->wbytes + bytes > f->wcap)) {
        int lru = 0;
        for (int i = 1; i < f->n_w; i++)
            if (f->w[i].tick < f->w[lru].tick) lru = i;
        cudaFreeAsync(f->w[lru].b, st);
        cudaFreeAsync(f->w[lru].gs, st);
        f->wbytes -= f->w[lru].bytes;
        f->w[lru] = f->w[--f->n_w];
    }
    if (bytes > f->wcap) return NULL;
    ft_fast_w e = {key, ++f->tick, NULL, NULL, bytes};
    if (cudaMallocAsync((void **)&e.b, bytes, st) == cudaSuccess &&
        cudaMallocAsync((void **)&e.gs, G * sizeof(float), st) == cudaSuccess) {
        f->w[f->n_w] = e;
        f->wbytes += bytes;
        return &f->w[f->n_w++];
    }
    cudaGetLastError(); // no room: the caller's scratch instead
    if (e.b) cudaFreeAsync(e.b, st);
    return NULL;
}

// Fake-quantize every expert's weight w[G][n][k] for a usage into a bf16 operand (one expert at a
// time through one float32 buffer), into the weight cache when it has room.
opnd quant_weights(job *j, int tensor, int columnwise, const float *w, int64_t n, int64_t k,
                   int *rc, ft_err *err)
{
    opnd o = {NULL, NULL};
    if (*rc) return o;
    phase(j, FT_PH_QUANT);
    const ft_mlp *m = j->m;
    const uint32_t G = m->n_groups;
    ft_fast *f = j->fast;
    const size_t bbytes = (size_t)G * (size_t)(n * k) * 2;
    ft_qcfg q0;
    ft_mlp_qcfg(&m->quant, tensor, 0, columnwise, &q0);
    int hit = 0;
    ft_fast_w *slot =
        wslot(f, wkey(f, w, tensor, columnwise, n, k, G, &q0), bbytes, G, j->st, &hit);
    if (hit) {
        o.b = slot->b;
        o.gs = m->quant.fmt == FT_QF_NONE ? NULL : slot->gs; // NONE: factors are 1
        return o;
    }
    if (m->quant.fmt == FT_QF_NONE) {
        if (slot) {
            if ((int64_t)G * n * k > 0) {
                expand_kernel<<<cu_blocks((int64_t)G * n * k, 256), 256, 0, j->st>>>(
                    w, (int64_t)G * n, k, NULL, 1, NULL, slot->b);
                *rc = cu_launched(err, "expand_kernel");
            }
            if (*rc) slot->key = 0; // never found again
            o.b = slot->b;
        } else {
            o.b = expand(j, w, (int64_t)G * n, k, NULL, NULL, rc, err);
        }
        return o;
    }
    float *dst = scratch_f32(&j->ws, n * k, rc, err);
    uint16_t *b = NULL;
    float *gs = NULL;
    if (slot) {
        b = slot->b, gs = slot->gs;
    } else {
        b = (uint16_t *)scratch_bytes(&j->ws, bbytes, rc, err);
        gs = scratch_f32(&j->ws, G, rc, err);
    }
    for (uint32_t g = 0; g < G && !*rc; g++) {
        ft_qcfg q;
        ft_mlp_qcfg(&m->quant, tensor, g, columnwise, &q);
        const size_t off = (size_t)g * (size_t)(n * k);
        *rc = ft_cuda_quantize_gs(&q, w + off, n, k, NULL, 0, dst, gs + g, j->st, err);
        if (!*rc && n * k > 0) {
            expand_kernel<<<cu_blocks(n * k, 256), 256, 0, j->st>>>(dst, n, k, NULL, 1, gs + g,
                                                                    b + off);
            *rc = cu_launched(err, "expand_kernel");
        }
    }
    if (*rc && slot) slot->key = 0; // never found again
    scratch_drop(&j->ws, dst, rc, err);
    o.b = b, o.gs = gs;
    return o;
}

// C = A op B per group (ft_gemm semantics, accumulate 0); hs: the splits on the host.
int gemm(job *j, ft_gemm_kind kind, const int64_t *dsplits, const int64_t *hs, int64_t m_rows,
         int64_t n, int64_t k, opnd a, opnd b, float *c, const float *bias, const float *bias_scale,
         ft_err *err)
{
    const uint32_t G = j->m->n_groups;
    phase(j, FT_PH_GEMM);
    int rc = FT_OK;
    float *alpha = scratch_f32(&j->ws, G, &rc, err);
    if (rc) return rc;
    alpha_kernel<<<1, 256, 0, j->st>>>(a.gs, b.gs, (int)G, alpha);
    rc = cu_launched(err, "alpha_kernel");
    cublasHandle_t h = (cublasHandle_t)j->fast->blas;
    if (!rc && cublasSetStream(h, j->st) != CUBLAS_STATUS_SUCCESS)
        rc = ft_err_set(err, FT_ECUDA, "cublasSetStream failed");
    if (!rc && cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE) != CUBLAS_STATUS_SUCCESS)
        rc = ft_err_set(err, FT_ECUDA, "cublasSetPointerMode failed");
    int64_t r0 = 0;
    for (uint32_t g = 0; g < G && !rc; g++) {
        const int64_t s = hs[g] > 0 ? hs[g] : 0;
        cublasStatus_t cs = CUBLAS_STATUS_SUCCESS;
        const float *al = alpha + g, *be = j->fast->zero;
        if (kind == FT_GEMM_FPROP && s > 0) {
            // row-major C[s][n] = A[s][k] W_g[n][k]^T: column-major C^T = W_g^T-op A
            cs = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)s, (int)k, al,
                              b.b + (size_t)g * n * k, CUDA_R_16BF, (int)k, a.b + r0 * k,
                              CUDA_R_16BF, (int)k, be, c + r0 * n, CUDA_R_32F, (int)n,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        } else if (kind == FT_GEMM_DGRAD && s > 0) {
            // C[s][k] = A[s][n] W_g[n][k]
            cs = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)k, (int)s, (int)n, al,
                              b.b + (size_t)g * n * k, CUDA_R_16BF, (int)k, a.b + r0 * n,
                              CUDA_R_16BF, (int)n, be, c + r0 * k, CUDA_R_32F, (int)k,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        } else if (kind == FT_GEMM_WGRAD) {
            float *cg = c + (size_t)g * n * k;
            if (s == 0) {
                rc = cu_fail(cudaMemsetAsync(cg, 0, (size_t)(n * k) * 4, j->st), err, "memset");
            } else {
                // C_g[n][k] = A_g[s][n]^T B_g[s][k]
                cs = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, (int)k, (int)n, (int)s, al,
                                  b.b + r0 * k, CUDA_R_16BF, (int)k, a.b + r0 * n, CUDA_R_16BF,
                                  (int)n, be, cg, CUDA_R_32F, (int)k, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT);
            }
        }
        if (cs != CUBLAS_STATUS_SUCCESS)
            rc = ft_err_set(err, FT_ECUDA, "cublasGemmEx (bf16, group %u): status %d", g, (int)cs);
        r0 += s;
    }
    if (!rc && bias && kind == FT_GEMM_FPROP && r0 > 0) {
        int64_t *offs = (int64_t *)scratch_bytes(&j->ws, (G + 1) * sizeof(int64_t), &rc, err);
        if (!rc) rc = ft_cu_offsets(dsplits, (int)G, m_rows, offs, j->st, err);
        if (!rc) {
            bias_rows_kernel<<<cu_blocks(r0 * n, 256), 256, 0, j->st>>>(c, n, offs, (int)G, bias,
                                                                        bias_scale);
            rc = cu_launched(err, "bias_rows_kernel");
        }
        if (offs) scratch_drop(&j->ws, offs, &rc, err);
    }
    scratch_drop(&j->ws, alpha, &rc, err);
    return rc;
}

int64_t pad16(int64_t v)
{
    return (v + 15) / 16 * 16;
}

// dW[G][n][k] from the columnwise-quantized a[t][n] (tensor ta) and b[t][k] (tensor tb) over
// each group's tokens; with RHT each group is first copied into zero-padded 16-row multiples.
int wgrad(job *j, int ta, const float *a, int64_t n, int tb, const float *b, int64_t k, float *dw,
          ft_err *err)
{
    const ft_mlp *m = j->m;
    const int rht = m->quant.fmt == FT_QF_NVFP4 && m->quant.rht;
    int rc = FT_OK;
    int64_t tp = m->t;
    const int64_t *splits = m->splits, *hs = j->hsplits;
    int64_t ps[FT_CUDA_MAX_GROUPS];
    if (rht) {
        phase(j, FT_PH_OTHER);
        tp = 0;
        for (uint32_t g = 0; g < m->n_groups; g++)
            tp += ps[g] = pad16(j->hsplits[g]);
        float *dps = scratch_f32(&j->ws, 2 * (int64_t)m->n_groups, &rc, err); // int64 [G]
        float *ca = scratch_f32(&j->ws, tp * n, &rc, err);
        float *cb = scratch_f32(&j->ws, tp * k, &rc, err);
        if (rc) return rc;
        rc = cu_fail(
            cudaMemcpyAsync(dps, ps, m->n_groups * sizeof(int64_t), cudaMemcpyHostToDevice, j->st),
            err, "cudaMemcpy splits H2D");
        if (!rc) rc = cu_fail(cudaMemsetAsync(ca, 0, (size_t)(tp * n) * 4, j->st), err, "memset");
        if (!rc) rc = cu_fail(cudaMemsetAsync(cb, 0, (size_t)(tp * k) * 4, j->st), err, "memset");
        int64_t r0 = 0, p0 = 0;
        for (uint32_t g = 0; g < m->n_groups && !rc; g++) {
            const int64_t s = j->hsplits[g];
            if (s > 0)
                rc = cu_fail(cudaMemcpyAsync(ca + p0 * n, a + r0 * n, (size_t)(s * n) * 4,
                                             cudaMemcpyDeviceToDevice, j->st),
                             err, "cudaMemcpy D2D");
            if (s > 0 && !rc)
                rc = cu_fail(cudaMemcpyAsync(cb + p0 * k, b + r0 * k, (size_t)(s * k) * 4,
                                             cudaMemcpyDeviceToDevice, j->st),
                             err, "cudaMemcpy D2D");
            r0 += s;
            p0 += ps[g];
        }
        // the H2D copy above read ps before returning (pageable source), so ps may go now
        if (rc) return rc;
        a = ca, b = cb, splits = (const int64_t *)dps, hs = ps;
    }
    opnd qa = quant_act(j, ta, 1, a, tp, n, splits, &rc, err);
    opnd qb = quant_act(j, tb, 1, b, tp, k, splits, &rc, err);
    if (rc) return rc;
    rc = gemm(j, FT_GEMM_WGRAD, splits, hs, tp, n, k, qa, qb, dw, NULL, NULL, err);
    phase(j, FT_PH_OTHER);
    if (!rc) rc = round_bf16(dw, dw, (int64_t)m->n_groups * n * k, j->st, err);
    return rc;
}

} // namespace

void ft_fast_phase(ft_fast *f, int ph, cudaStream_t st)
{
    if (!f->profile || ph == f->phase) return;
    cudaStreamSynchronize(st);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    if (f->t_mark && f->phase >= 0 && f->phase < FT_PH_COUNT)
        f->ms[f->phase] += (double)(now - f->t_mark) * 1e-6;
    f->t_mark = now;
    f->phase = ph;
}

void ft_fast_forget(ft_fast *f, cudaStream_t st)
{
    for (int i = 0; i < f->n_w; i++) {
        cudaFreeAsync(f->w[i].b, st);
        cudaFreeAsync(f->w[i].gs, st);
    }
    f->n_w = 0;
    f->wbytes = 0;
    f->wgen++;
}

int ft_cu_mlp_f32_forward(const ft_mlp *m, const int64_t *hsplits, ft_fast *fast, ft_mlp_fwd *out,
                          cudaStream_t st, ft_err *err)
{
    job j;
    int rc = job_init(&j, m, hsplits, fast, st, err);
    if (rc) return rc;
    if (!out || !out->h || !out->z || !out->y)
        return ft_err_set(err, FT_EINVAL, "cuda mlp forward: NULL output array");
    const int64_t t = m->t, n1 = m->n1, k2 = m->k2, n2 = m->n2;
    const int fused = m->path == FT_MLP_FUSED;
    // FC1 into a zeroed fp32 accumulator (padding rows stay 0, as the reference clears them)
    opnd xq = quant_act(&j, FT_MLP_X, 0, m->x, t, m->k1, m->splits, &rc, err);
    opnd w1q = quant_weights(&j, FT_MLP_W1, 0, m->w1, n1, m->k1, &rc, err);
    float *acc = scratch_f32(&j.ws, t * n1, &rc, err);
    phase(&j, FT_PH_OTHER);
    if (!rc) rc = cu_fail(cudaMemsetAsync(acc, 0, (size_t)(t * n1) * 4, j.st), err, "memset");
    if (!rc)
        rc = gemm(&j, FT_GEMM_FPROP, m->splits, j.hsplits, t, n1, m->k1, xq, w1q, acc, m->b1, NULL,
                  err);
    phase(&j, FT_PH_OTHER);
    if (!rc) rc = round_bf16(out->h, acc, t * n1, j.st, err);
    // activation: fused evaluates it on the fp32 accumulator, unfused on the stored bf16 h; the
    // fused MXFP8 epilogue quantizes z from fp32 (no bf16 rounding)
    const bool rnd = !(fused && m->quant.fmt == FT_QF_MXFP8);
    if (!rc)
        rc = ft_cu_act_fwd_f32(&m->act, t, k2, fused ? acc : out->h, m->probs, out->z, rnd, j.st,
                               err);
    if (!rc) scratch_drop(&j.ws, acc, &rc, err);
    if (!rc) scratch_drop(&j.ws, xq.b, &rc, err), scratch_drop(&j.ws, w1q.b, &rc, err);
    // FC2
    opnd zq = quant_act(&j, FT_MLP_Z, 0, out->z, t, k2, m->splits, &rc, err);
    opnd w2q = quant_weights(&j, FT_MLP_W2, 0, m->w2, n2, k2, &rc, err);
    phase(&j, FT_PH_OTHER);
    if (!rc) rc = cu_fail(cudaMemsetAsync(out->y, 0, (size_t)(t * n2) * 4, j.st), err, "memset");
    if (!rc)
        rc = gemm(&j, FT_GEMM_FPROP, m->splits, j.hsplits, t, n2, k2, zq, w2q, out->y, m->b2,
                  m->scale_bias ? m->probs : NULL, err);
    phase(&j, FT_PH_OTHER);
    if (!rc) rc = round_bf16(out->y, out->y, j.used * n2, j.st, err);
    return scratch_free(&j.ws, rc, err);
}

int ft_cu_mlp_f32_backward(const ft_mlp *m, const int64_t *hsplits, ft_fast *fast,
                           const ft_mlp_fwd *fwd, const float *dy, ft_mlp_bwd *out, cudaStream_t st,
                           ft_err *err)
{
    job j;
    int rc = job_init(&j, m, hsplits, fast, st, err);
    if (rc) return rc;
    if (!fwd || !fwd->h || !fwd->z || !dy || !out || !out->dx || !out->dw1 || !out->dw2)
        return ft_err_set(err, FT_EINVAL, "cuda mlp backward: NULL input or output array");
    const int64_t t = m->t, k1 = m->k1, n1 = m->n1, k2 = m->k2, n2 = m->n2;
    const uint32_t G = m->n_groups;
    const int fused = m->path == FT_MLP_FUSED, mx = fused && m->quant.fmt == FT_QF_MXFP8;
    phase(&j, FT_PH_OTHER);
    int64_t *offs = (int64_t *)scratch_f32(&j.ws, 2 * ((int64_t)G + 1), &rc, err);
    if (!rc) rc = ft_cu_offsets(m->splits, (int)G, t, offs, j.st, err);
    // FC2 backward: db2, dz = dY x W2 (columnwise); padding rows of dz are 0
    if (!rc && out->db2) {
        rc = ft_cu_colsum_f32(dy, n2, offs, (int)G, m->scale_bias ? m->probs : NULL, out->db2, j.st,
                              err);
        if (!rc) rc = round_bf16(out->db2, out->db2, (int64_t)G * n2, j.st, err);
    }
    opnd dyq = quant_act(&j, FT_MLP_DY, 0, dy, t, n2, m->splits, &rc, err);
    opnd w2c = quant_weights(&j, FT_MLP_W2, 1, m->w2, n2, k2, &rc, err);
    phase(&j, FT_PH_OTHER);
    float *dz = scratch_f32(&j.ws, t * k2, &rc, err);
    float *dh32 = scratch_f32(&j.ws, t * n1, &rc, err);
    float *dp = scratch_f32(&j.ws, t, &rc, err);
    if (!rc) rc = cu_fail(cudaMemsetAsync(dz, 0, (size_t)(t * k2) * 4, j.st), err, "memset");
    if (!rc)
        rc =
            gemm(&j, FT_GEMM_DGRAD, m->splits, j.hsplits, t, n2, k2, dyq, w2c, dz, NULL, NULL, err);
    phase(&j, FT_PH_OTHER);
    if (!rc) scratch_drop(&j.ws, dyq.b, &rc, err), scratch_drop(&j.ws, w2c.b, &rc, err);
    if (!rc && !fused) rc = round_bf16(dz, dz, t * k2, j.st, err);
    // activation backward on the saved bf16 h (dh kept in fp32 here)
    if (!rc)
        rc = ft_cu_act_bwd_f32(&m->act, t, k2, fwd->h, m->probs, dz, dh32, dp, false, j.st, err);
    if (!rc && m->scale_bias)
        rc = ft_cu_dprobs_bias_f32(dy, n2, m->b2, offs, (int)G, t, dp, j.st, err);
    if (!rc && out->dprobs && m->probs)
        rc =
            cu_fail(cudaMemcpyAsync(out->dprobs, dp, (size_t)t * 4, cudaMemcpyDeviceToDevice, j.st),
                    err, "cudaMemcpy D2D");
    // dh: fp32 for the fused MXFP8 kernel, else bf16; db1 sums the fused path's fp32 dh
    float *dh = mx ? dh32 : scratch_f32(&j.ws, t * n1, &rc, err);
    if (!rc && !mx) rc = round_bf16(dh, dh32, t * n1, j.st, err);
    if (!rc && out->db1) {
        rc = ft_cu_colsum_f32(fused ? dh32 : dh, n1, offs, (int)G, NULL, out->db1, j.st, err);
        if (!rc) rc = round_bf16(out->db1, out->db1, (int64_t)G * n1, j.st, err);
    }
    if (!rc) scratch_drop(&j.ws, dz, &rc, err);
    // FC1 backward: dx = dH x W1 (columnwise)
    opnd dhq = quant_act(&j, FT_MLP_DH, 0, dh, t, n1, m->splits, &rc, err);
    opnd w1c = quant_weights(&j, FT_MLP_W1, 1, m->w1, n1, k1, &rc, err);
    phase(&j, FT_PH_OTHER);
    if (!rc) rc = cu_fail(cudaMemsetAsync(out->dx, 0, (size_t)(t * k1) * 4, j.st), err, "memset");
    if (!rc)
        rc = gemm(&j, FT_GEMM_DGRAD, m->splits, j.hsplits, t, n1, k1, dhq, w1c, out->dx, NULL, NULL,
                  err);
    phase(&j, FT_PH_OTHER);
    if (!rc) rc = round_bf16(out->dx, out->dx, j.used * k1, j.st, err);
    if (!rc) scratch_drop(&j.ws, dhq.b, &rc, err), scratch_drop(&j.ws, w1c.b, &rc, err);
    // wgrads: columnwise x columnwise over each group's tokens
    if (!rc) rc = wgrad(&j, FT_MLP_DY, dy, n2, FT_MLP_Z, fwd->z, k2, out->dw2, err);
    if (!rc) rc = wgrad(&j, FT_MLP_DH, dh, n1, FT_MLP_X, m->x, k1, out->dw1, err);
    return scratch_free(&j.ws, rc, err);
}

int ft_fast_bf16_weights(ft_fast *f, const float *w, int tensor, int64_t n, int64_t k, uint32_t G,
                         int cache, cudaStream_t st, const uint16_t **out, uint16_t **own,
                         ft_err *err)
{
    *out = NULL;
    *own = NULL;
    ft_mlp_quant none;
    memset(&none, 0, sizeof none);
    ft_qcfg q0;
    ft_mlp_qcfg(&none, tensor, 0, 0, &q0);
    const int64_t cnt = (int64_t)G * n * k;
    int hit = 0;
    ft_fast_w *slot =
        cache ? wslot(f, wkey(f, w, tensor, 0, n, k, G, &q0), (size_t)cnt * 2, G, st, &hit) : NULL;
    if (hit) {
        *out = slot->b;
        return FT_OK;
    }
    uint16_t *b = slot ? slot->b : NULL;
    int rc = FT_OK;
    if (!b) {
        rc = cu_fail(cudaMallocAsync((void **)&b, (size_t)(cnt > 0 ? cnt : 1) * 2, st), err,
                     "cudaMallocAsync (bf16 weights)");
        if (rc) return ft_err_set(err, FT_ENOMEM, "cuda: no device memory for bf16 weights");
        *own = b;
    }
    if (cnt > 0) {
        expand_kernel<<<cu_blocks(cnt, 256), 256, 0, st>>>(w, (int64_t)G * n, k, NULL, 1, NULL, b);
        rc = cu_launched(err, "expand_kernel");
    }
    if (rc && slot) slot->key = 0;
    *out = b;
    return rc;
}
