/*
 * ft_kernels_cuda.h - native bf16 entry points of the CUDA back end (kernels/cuda/), next to the
 * float32 emulation contract of ft_kernels.h (whose ft_cuda_* functions it also implements).
 *
 * ft_kernels.h stores every tensor as float32 so that the CPU and CUDA back ends can be compared
 * value for value. That is right for numerics and wrong for speed. The functions here take the
 * storage a training run has: bf16 activations and weights (uint16_t bit patterns), float32
 * probabilities, int64 row splits, all DEVICE pointers (splits too: nothing is read back to the
 * host, so every launch can be captured in a CUDA graph). Shapes follow ft_gemm / ft_mlp.
 *
 * The grouped GEMM is one persistent sm_90a kernel (TMA loads, wgmma, warp-specialised; see
 * gemm_wgmma.cu) with the FC1 epilogue (bias, activation x probs) fused. Limits: n_groups <=
 * FT_CUDA_MAX_GROUPS; k1, n1, k2, n2 multiples of 8 (16-byte rows for TMA); interleaved GLU needs
 * n1 % 64 == 0. Outside them AUTO falls back to the SIMT kernel (FT_EUNSUPPORTED when WGMMA is
 * asked for). Device code is built for sm_90a only (H100/H200).
 *
 * Coverage of the float32 contract (ft_kernels.h): ft_cuda_gemm (exact fp32 SIMT GEMM),
 * ft_cuda_act_forward/backward and ft_cuda_quantize (every format, usage, RHT, SR; bit-exact to
 * ft_cpu_quantize) are complete. ft_cuda_mlp_forward/backward run every format on both paths,
 * step for step as ft_cpu_mlp_* (kernels/cuda/mlp.cu); they read the splits back to the host
 * once per call (not graph safe) and leave FP8 delayed scaling with amax histories to the CPU
 * (FT_EUNSUPPORTED).
 */
#ifndef FT_KERNELS_CUDA_H
#define FT_KERNELS_CUDA_H

#include "ft_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FT_CUDA_MAX_GROUPS 1024

/* ==== device memory and timing helpers (so C tests and benches need no CUDA headers) ===== */

int ft_cuda_malloc(void **p, size_t bytes, ft_err *err);
void ft_cuda_free(void *p);
int ft_cuda_memset(void *p, int byte, size_t bytes, ft_err *err);
int ft_cuda_h2d(void *dst, const void *src, size_t bytes, ft_err *err);
int ft_cuda_d2h(void *dst, const void *src, size_t bytes, ft_err *err);
int ft_cuda_sync(ft_err *err);
/* ft_cuda_device_info: see ft_kernels.h */

typedef struct ft_cuda_timer ft_cuda_timer; /* a pair of CUDA events */
int ft_cuda_timer_new(ft_cuda_timer **t, ft_err *err);
void ft_cuda_timer_free(ft_cuda_timer *t);
int ft_cuda_timer_start(ft_cuda_timer *t, void *stream, ft_err *err);
int ft_cuda_timer_stop(ft_cuda_timer *t, void *stream, float *ms, ft_err *err); /* syncs */

/* ==== bf16 grouped GEMM ================================================================== */

/* Which implementation ft_cuda_bf16_gemm runs. AUTO = WGMMA where its limits hold, else SIMT. */
typedef enum ft_cuda_impl {
    FT_CUDA_IMPL_AUTO = 0,
    FT_CUDA_IMPL_WGMMA, /* persistent TMA + wgmma kernel (sm_90a) */
    FT_CUDA_IMPL_SIMT   /* plain tiled fp32 FMA kernel: slow, simple, any shape */
} ft_cuda_impl;

typedef struct ft_cuda_bf16_gemm {
    ft_gemm_kind kind;
    uint32_t n_groups;
    const int64_t *splits;   /* device [n_groups] rows per group; sum <= m */
    int64_t m;               /* token rows */
    int64_t n, k;            /* each W_g is [n][k] */
    const uint16_t *a;       /* FPROP: X[m][k]; DGRAD, WGRAD: dY[m][n] */
    const uint16_t *b;       /* FPROP, DGRAD: W[n_groups][n][k]; WGRAD: X[m][k] */
    uint16_t *c;             /* FPROP: Y[m][n]; DGRAD: dX[m][k]; WGRAD: dW[n_groups][n][k] */
    const uint16_t *bias;    /* FPROP: [n_groups][n] or NULL */
    const float *bias_scale; /* FPROP: [m] per-row bias multiplier or NULL */
    /* FPROP only: fused FC1 epilogue. With act != NULL, c receives h = A W^T + bias (bf16) and
     * z[m][k2] = probs * act(h) (bf16; the activation reads the bf16-rounded h, as the unfused
     * reference does). */
    const ft_act *act;
    const float *probs; /* [m] or NULL (p = 1) */
    uint16_t *z;
    /* FPROP with act: the fused GroupedMLP's MXFP8 FC1 epilogue (quantize on store; the CPU's
     * FT_MLP_FUSED MXFP8 path). With z_mxfp8, z = p * act(acc + bias) is evaluated on the fp32
     * accumulator (h is still stored bf16) and stored MXFP8 fake-quantized along rows (1x32
     * blocks, E8M0 scales, element type z_fp8); zc, when not NULL, receives the columnwise copy
     * (32x1 blocks down the tokens, restarting at each group's first row). Both are bf16 arrays:
     * bf16 holds every FP8 value times a power of two exactly (for block amaxes >= 2^-118).
     * WGMMA only (the SIMT path returns FT_EUNSUPPORTED). */
    uint8_t z_mxfp8;
    ft_fp8 z_fp8;
    uint16_t *zc;
    /* FPROP with act: the fused NVFP4 FC1 epilogue. NVFP4 block scales depend on each group's
     * amax, which no tile knows before the whole group is done, so TE's fused op (and the CPU's
     * FT_MLP_FUSED NVFP4 path) store bf16 z and group-quantize it afterwards. With z_nvfp4, z =
     * bf16(p * act(acc + bias)) from the fp32 accumulator, and z_amax[2][n_groups] receives (by
     * atomic max: zero it first) each group's amax of z rowwise (z_amax[g]) and of its
     * columnwise RHT copy (z_amax[n_groups + g]; 16-row chunks from the group's first row, zero
     * padded): the figures the group quantization needs before it can cast, so
     * ft_cuda_bf16_quantize takes them (ft_qpacked.amax_given) and skips its amax pass. WGMMA
     * only; exclusive with z_mxfp8. */
    uint8_t z_nvfp4;
    float *z_amax;
    ft_cuda_impl impl;
} ft_cuda_bf16_gemm;

int ft_cuda_bf16_gemm_run(const ft_cuda_bf16_gemm *g, void *stream, ft_err *err);

/* ==== bf16 grouped MLP (no quantization; FC1 epilogue fused) ============================== */

typedef struct ft_cuda_bf16_mlp {
    uint32_t n_groups;
    const int64_t *splits; /* device [n_groups] */
    int64_t t, k1, n1, k2, n2;
    ft_act act;
    uint8_t scale_bias;
    const uint16_t *x, *w1, *b1, *w2, *b2; /* b1, b2 may be NULL */
    const float *probs;                    /* [t] or NULL */
    /* 1: the fused MXFP8 FC1 epilogue (ft_cuda_bf16_gemm.z_mxfp8): z is stored MXFP8
     * fake-quantized for FC2, and zc (if given) columnwise for the dW2 wgrad. The other operands
     * (x, W1, W2, dy, dh) are used as given: pass them fake-quantized to emulate the whole
     * recipe (ft_cuda_mlp_forward does all of it in float32 storage). */
    uint8_t z_mxfp8;
    ft_fp8 z_fp8;
    ft_cuda_impl impl;
} ft_cuda_bf16_mlp;

typedef struct ft_cuda_bf16_mlp_out {
    uint16_t *h;  /* [t][n1] */
    uint16_t *z;  /* [t][k2] */
    uint16_t *y;  /* [t][n2] */
    uint16_t *zc; /* [t][k2] columnwise MXFP8 copy of z (z_mxfp8 only; NULL: none) */
} ft_cuda_bf16_mlp_out;

typedef struct ft_cuda_bf16_mlp_grads {
    uint16_t *dz;  /* [t][k2] scratch: FC2 dgrad output */
    uint16_t *dh;  /* [t][n1] scratch */
    uint16_t *dx;  /* [t][k1] */
    uint16_t *dw1; /* [G][n1][k1] */
    uint16_t *dw2; /* [G][n2][k2] */
    float *db1;    /* [G][n1] or NULL */
    float *db2;    /* [G][n2] or NULL */
    float *dprobs; /* [t] or NULL */
} ft_cuda_bf16_mlp_grads;

int ft_cuda_bf16_mlp_forward(const ft_cuda_bf16_mlp *m, const ft_cuda_bf16_mlp_out *out,
                             void *stream, ft_err *err);
/* dy[t][n2]; fwd holds h and z of the forward. Rows past sum(splits) of dx, dprobs are left
 * untouched. */
int ft_cuda_bf16_mlp_backward(const ft_cuda_bf16_mlp *m, const ft_cuda_bf16_mlp_out *fwd,
                              const uint16_t *dy, const ft_cuda_bf16_mlp_grads *g, void *stream,
                              ft_err *err);

/* ==== bf16 activation backward (dGLU / dSReLU with dprobs), used by the MLP backward ======= */

int ft_cuda_bf16_act_backward(const ft_act *a, int64_t rows, int64_t k2, const uint16_t *h,
                              const float *probs, const uint16_t *dz, uint16_t *dh, float *dprobs,
                              void *stream, ft_err *err);

/* bf16 values uniform in [-scale, scale) drawn on the device from seed (benchmark inputs: the
 * host need not generate and copy gigabytes). Same values for the same (n, scale, seed). */
int ft_cuda_bf16_fill_random(uint16_t *p, int64_t n, float scale, uint64_t seed, void *stream,
                             ft_err *err);

/* ==== packed quantization (bf16 in -> codes + scales out; quant_packed.cu) ================= */

/*
 * What a training run stores: x[rows][cols] bf16 (device) quantized into element codes plus
 * block scales, for one or both usages (rowwise: blocks along a row; columnwise: blocks down a
 * column, restarting at each group's first row). Decoding the result with ft_qpacked_decode gives
 * exactly ft_cpu_quantize's float32 output on the same (bf16-valued) input, bit for bit, for the
 * config whose columnwise flag names the usage.
 *
 * Layouts (one per format, the same row-major order as x for both usages; B = block size):
 *   data    codes [rows][cols]: 1 byte per element (FP8 E4M3/E5M2 as ft_fp8_encode), NVFP4 2 per
 *           byte (E2M1 as ft_e2m1_encode; low nibble = even column). Columnwise data is NOT
 *           transposed (TE stores FP8/NVFP4 columnwise data as [cols][rows]).
 *   scales  rowwise [rows][ceil(cols/B)]; columnwise [scale_rows][cols] where the block of group
 *           g that starts at row offs[g] + B*k is scale row (sum over groups h < g of
 *           ceil(split_h/B)) + k; scale_rows = rows/B + n_groups bounds that sum for any splits.
 *           MXFP8 (B = 32): E8M0 bytes (ft_e8m0_dequant gives the dequantization factor).
 *           NVFP4 (B = 16): E4M3 bytes d; the factor is (d * amax[g]) / (448 * 6), as TE.
 *           FP8 block (B = 128, rowwise only): float32 dequantization factors 1/scale.
 *           FP8 current scaling: none (the factor comes from amax[g]).
 *   amax    [n_groups] float32 per-group max |x| (NVFP4 columnwise with RHT: after the RHT),
 *           written for FP8 current scaling and NVFP4 (n_groups = 1 without splits).
 * Rows past sum(splits) are not written. NaN inputs (NaN-ignoring block amax, as the reference):
 * FP8 codes keep them; E2M1 has no NaN code, so a NaN in NVFP4 is stored as +-6 (code 7) and
 * does not decode to the reference's NaN.
 *
 * Formats: MXFP8 (E4M3/E5M2) rowwise and/or columnwise from one read of x; NVFP4 rowwise and
 * columnwise (with or without RHT; stochastic rounding with q->sr) - q->rht applies to the
 * columnwise output only; FP8 current scaling and FP8 block 1x128, rowwise only. Not done: 2D
 * tiles, FP8 delayed, FP8 block columnwise, NONE (FT_EUNSUPPORTED).
 * Limits: cols % 32 == 0; x, data and scales 16-byte aligned; n_groups <= FT_CUDA_MAX_GROUPS;
 * NVFP4 with RHT needs group sizes that are multiples of 16 (not checked on the device: the
 * splits stay there; a ragged group's last chunk is rotated with zero rows).
 */
typedef struct ft_qpacked {
    uint8_t *data; /* codes, layout above */
    void *scales;  /* scales, layout above; NULL where the format has none */
    float *amax;   /* [n_groups] per-group amax; NULL where the format has none */
    /* 1: amax already holds this call's per-group amaxes (FP8 current, NVFP4: e.g. from the
     * NVFP4 FC1 epilogue, ft_cuda_bf16_gemm.z_amax) and the amax pass is skipped */
    uint8_t amax_given;
} ft_qpacked;

/* Sizes of one usage's buffers in bytes (0: buffer not used) for ft_qpacked allocation. */
typedef struct ft_qpacked_sizes {
    size_t data, scales, amax;
    int64_t scale_rows, scale_cols; /* scales as [scale_rows][scale_cols] elements */
} ft_qpacked_sizes;

/* Sizes for format q (its columnwise flag ignored; columnwise: the usage). FT_EUNSUPPORTED for a
 * format/usage ft_cuda_bf16_quantize does not produce, FT_EINVAL for a bad shape. Host only. */
int ft_qpacked_layout(const ft_qcfg *q, int columnwise, int64_t rows, int64_t cols,
                      uint32_t n_groups, ft_qpacked_sizes *sz, ft_err *err);

/* Quantize bf16 x[rows][cols] (device) into rowwise and/or colwise (either may be NULL; device
 * pointers). splits: device [n_groups] or NULL (one group). Nothing is read back to the host,
 * so the call can be captured in a CUDA graph. SR counters, seeds and streams as ft_cpu_quantize
 * (stream id q->stream * 2 + usage). */
int ft_cuda_bf16_quantize(const ft_qcfg *q, const uint16_t *x, int64_t rows, int64_t cols,
                          const int64_t *splits, uint32_t n_groups, const ft_qpacked *rowwise,
                          const ft_qpacked *colwise, void *stream, ft_err *err);

/* Host: decode one usage's buffers (host copies; splits on the host) into float32 out[rows][cols]
 * as ft_cpu_quantize would write it. Rows past sum(splits) are copied from x (float32 bf16
 * values) when x is not NULL, else left untouched. */
int ft_qpacked_decode(const ft_qcfg *q, int columnwise, int64_t rows, int64_t cols,
                      const int64_t *splits, uint32_t n_groups, const ft_qpacked *p, const float *x,
                      float *out, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif /* FT_KERNELS_CUDA_H */
