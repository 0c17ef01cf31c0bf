/*
 * ft_kernels.h - grouped-MLP math for fusertrace: number formats, quantization emulation, grouped
 * GEMM, activations and the grouped MLP forward/backward (docs/fuser-model.md, "Grouped-MLP math").
 *
 * One contract, two back ends:
 *   ft_cpu_*   plain C11 reference (kernels/cpu/), host pointers, always built;
 *   ft_cuda_*  CUDA (kernels/cuda/), same descriptors with DEVICE pointers (splits included, so
 *              launches are CUDA-graph safe) and a cudaStream_t passed as void * (NULL = default
 *              stream). They live in the plugin libfusertrace_cuda.so, which cpu/cuda_loader.c
 *              loads on the first call; without it, a device or a CUDA build they return
 *              FT_ENODEV saying which.
 * Usable from C11 and from .cu files (extern "C").
 *
 * Conventions
 * - Matrices are row-major float32. "bf16 values" means float32 holding a value exactly
 *   representable in bf16 (ft_bf16_round applied); the reference keeps float32 storage and rounds
 *   where TE would store bf16, so fused and unfused paths differ where TE's do.
 * - Tokens are rows. A grouped tensor is [t][cols] with n_groups row splits (empty groups
 *   allowed, sum(splits) <= t); rows past the sum are padding: outputs there are left untouched.
 * - Quantized tensors are consumed "fake-quantized": quantize, dequantize to float32 in TE's
 *   dequantization order, then multiply in fp32. Exact to TE's values up to GEMM accumulation
 *   order.
 * - Weights are [n_groups][n][k] (out_features x in_features per expert); biases [n_groups][n].
 * - Every function returns FT_OK or a negative FT_E* code and writes detail into err (may be
 *   NULL). The kernels are math only: TE's run-time errors are the fuser model's (tefuser/).
 */
#ifndef FT_KERNELS_H
#define FT_KERNELS_H

#include "ft_common.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== scalar number formats (exact; shared by both back ends' tests) ====================== */

/* bf16 round-to-nearest-even; NaN stays NaN, overflow rounds to +-inf as a bf16 cast does. */
float ft_bf16_round(float x);
uint16_t ft_bf16_bits(float x); /* the bf16 bit pattern of ft_bf16_round(x) */
float ft_bf16_value(uint16_t bits);
void ft_bf16_round_n(float *x, size_t n); /* in place */

typedef enum ft_fp8 { FT_FP8_E4M3 = 0, FT_FP8_E5M2 = 1 } ft_fp8;
#define FT_E4M3_MAX 448.0f
#define FT_E5M2_MAX 57344.0f
#define FT_E2M1_MAX 6.0f

float ft_fp8_max(ft_fp8 f);
/* RNE with saturation to +-max (satfinite: +-inf -> +-max); NaN -> the format's NaN code.
 * E4M3 (fn): bias 7, subnormals down to 2^-9, max 448. E5M2: bias 15, 2^-16, max 57344. */
uint8_t ft_fp8_encode(ft_fp8 f, float x);
float ft_fp8_decode(ft_fp8 f, uint8_t code);
float ft_fp8_round(ft_fp8 f, float x); /* decode(encode(x)) */

/* E2M1 (FP4): values {0,.5,1,1.5,2,3,4,6}, 4-bit code with sign in bit 3. x is clamped to +-6
 * first; RNE midpoints .25->0 .75->1 1.25->1 1.75->2 2.5->2 3.5->4 5->4. */
uint8_t ft_e2m1_encode(float x);
/* Stochastic: between adjacent magnitudes lo < |x| < hi rounds up iff
 * rbits * 2^-32 < (|x| - lo) / (hi - lo). */
uint8_t ft_e2m1_encode_sr(float x, uint32_t rbits);
float ft_e2m1_decode(uint8_t code);

/* E8M0 (MXFP8 scale): TE's float_to_e8m0 (exponent of v rounded up; 0 -> 0, inf -> 254,
 * NaN -> 255, v <= 2^-127 -> 0). The block's dequantization factor is 2^(code-127) and its
 * quantization multiplier TE's exp2f_rcp(code) = 2^(127-code) (code 254 -> 2^-127). */
uint8_t ft_e8m0_from_float(float v);
float ft_e8m0_dequant(uint8_t code); /* 2^(code-127) */
float ft_e8m0_quant(uint8_t code);   /* exp2f_rcp */

/* Counter-based RNG (splitmix64 finaliser over seed, stream and counter): 32 random bits that
 * depend only on the three arguments, so any element's bits are reproducible in any order and on
 * any back end. */
uint32_t ft_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter);

/* RHT (NVFP4): M = diag(s) * H16 / 4 with TE's fixed sign vector s (+1/-1 entries below), H16
 * the Sylvester Hadamard matrix. ft_rht16 replaces v (16 values along the token axis) with
 * bf16(bf16(v) * M), accumulated in fp32 (butterfly order; TE's tensor-core order is
 * unspecified). M is orthogonal: M^T M = I. */
extern const int8_t ft_rht_signs[16];
void ft_rht16(float v[16]);

/* ==== quantization ======================================================================== */

typedef enum ft_qfmt {
    FT_QF_NONE = 0,    /* no quantization: values pass through unchanged */
    FT_QF_FP8_DELAYED, /* per-tensor scale from an amax history (ft_delayed) */
    FT_QF_FP8_CURRENT, /* per-tensor (per-group) amax of this call */
    FT_QF_FP8_BLOCK,   /* 1x128 blocks (128x128 tiles with two_d), FP32 or power-of-2 scales */
    FT_QF_MXFP8,       /* 1x32 blocks (32x32 with two_d), E8M0 scales */
    FT_QF_NVFP4,       /* 1x16 blocks (16x16 with two_d), E4M3 scales, FP32 per-group scale */
    FT_QF_COUNT
} ft_qfmt;

const char *ft_qfmt_name(ft_qfmt f); /* "none", "fp8-delayed", "fp8-current", "fp8-block",
                                        "mxfp8", "nvfp4" */
/* Side of a format's scaling block: MXFP8 32, NVFP4 16, FP8 block 128; 0 for per-tensor scales. */
int ft_qfmt_block(ft_qfmt f);

/* One quantizer usage. Rowwise blocks run along a row (the last dim); columnwise blocks run
 * down a column (TE's columnwise usage = the rowwise rule on the transpose). With two_d both
 * usages share the same tiles. */
typedef struct ft_qcfg {
    ft_qfmt fmt;
    ft_fp8 fp8;          /* element type of the FP8 formats and MXFP8 (E4M3 or E5M2) */
    uint8_t columnwise;  /* 1: columnwise usage */
    uint8_t two_d;       /* square tiles: MXFP8 32, NVFP4 16, FP8 block 128 */
    uint8_t rht;         /* NVFP4 columnwise only: RHT of each 16-row chunk first; the output
                            stays in the rotated basis; group sizes must be multiples of 16 */
    uint8_t sr;          /* NVFP4: stochastic rounding with ft_rng_bits(seed, stream, index) */
    uint8_t pow2_scales; /* FP8 current/block: scale rounded down to a power of two */
    float amax_epsilon;  /* FP8 current/block: amax floor (TE default 0) */
    float scale;         /* FP8 delayed: the scale in use (ft_delayed.scale) */
    uint64_t seed;       /* SR: seed of this call (TE: Philox state per launch) */
    uint64_t stream;     /* SR: stream id (distinct per tensor/usage within a call) */
} ft_qcfg;

/* Figures of one quantization. ft_cpu_quantize fills amax, n_sat and n_nan; ft_quant_error
 * fills the error figures. */
typedef struct ft_qstats {
    float amax;      /* max |source| over the whole tensor (after RHT when rht) */
    int64_t n_sat;   /* elements clamped to the element format's max */
    int64_t n_nan;   /* NaN/Inf in the output */
    double max_abs;  /* max |x - xq| */
    double rel_l2;   /* ||x - xq||_2 / ||x||_2 (0 when x == 0) */
    double snr_db;   /* 10 log10(||x||^2 / ||x - xq||^2); +inf when exact */
    int64_t n_flush; /* nonzero inputs quantized to zero */
} ft_qstats;

/* Fake-quantize x[rows][cols] into out (same layout; out may equal x). Row splits (NULL = one
 * group of all rows) delimit groups quantized independently: per-group global amax (NVFP4,
 * FP8 current), and columnwise blocks restart at each group's first row (last block of a group
 * may be partial; so may the last rowwise block of a row). Rows past sum(splits) are copied.
 * st may be NULL. Errors: FT_EINVAL (bad config, splits, RHT group not a multiple of 16),
 * FT_ENOMEM. */
int ft_cpu_quantize(const ft_qcfg *q, const float *x, int64_t rows, int64_t cols,
                    const int64_t *splits, uint32_t n_groups, float *out, ft_qstats *st,
                    ft_err *err);

/* Error figures of xq against x (n values); keeps st->amax, n_sat, n_nan. */
void ft_quant_error(const float *x, const float *xq, size_t n, ft_qstats *st);

/* Delayed scaling: amax history of one quantizer (TE DelayedScaling, amax_compute_algo "max" or
 * "most_recent"). scale starts at 1; after each use, ft_delayed_update(amax of that use) pushes
 * the amax and recomputes scale = fp8_max / amax_window / 2^margin (kept when the window amax is
 * 0 or not finite). */
typedef struct ft_delayed {
    float *hist;         /* [len] ring of amaxes */
    int64_t len;         /* amax_history_len */
    int64_t pos;         /* next slot */
    int64_t n_seen;      /* updates so far */
    float scale;         /* scale to quantize with now */
    float margin;        /* DelayedScaling.margin */
    ft_fp8 fp8;          /* element type */
    uint8_t most_recent; /* 1: amax_compute_algo "most_recent", 0: "max" */
} ft_delayed;
int ft_delayed_init(ft_delayed *d, int64_t len, ft_fp8 fp8, float margin, int most_recent,
                    ft_err *err);
void ft_delayed_update(ft_delayed *d, float amax);
void ft_delayed_free(ft_delayed *d);

/* ==== grouped GEMM (fp32 accumulation) ==================================================== */

typedef enum ft_gemm_kind {
    FT_GEMM_FPROP = 0, /* C[m][n] = A[m][k] * W_g^T (+ bias_g, * bias_scale[r]) */
    FT_GEMM_DGRAD,     /* C[m][k] = A[m][n] * W_g */
    FT_GEMM_WGRAD      /* C_g[n][k] = sum over rows r of group g: A[r][n]^T B[r][k] */
} ft_gemm_kind;

typedef struct ft_gemm {
    ft_gemm_kind kind;
    uint32_t n_groups;
    const int64_t *splits;   /* [n_groups] rows per group; sum <= m */
    int64_t m;               /* token rows of A (and of C for FPROP/DGRAD) */
    int64_t n, k;            /* each W_g is [n][k] */
    const float *a;          /* FPROP: X[m][k]; DGRAD, WGRAD: dY[m][n] */
    const float *b;          /* FPROP, DGRAD: W[n_groups][n][k]; WGRAD: X[m][k] */
    float *c;                /* FPROP: Y[m][n]; DGRAD: dX[m][k]; WGRAD: dW[n_groups][n][k] */
    const float *bias;       /* FPROP: [n_groups][n] or NULL */
    const float *bias_scale; /* FPROP: [m] per-row bias multiplier (scale_bias) or NULL */
    uint8_t accumulate;      /* 1: C += result (empty WGRAD groups then leave C_g as is) */
} ft_gemm;

/* Empty WGRAD groups give dW_g = 0 (unless accumulate). One CBLAS (OpenBLAS) sgemm per group. */
int ft_cpu_gemm(const ft_gemm *g, ft_err *err);
/* Threads each BLAS call may use (callers that run several GEMMs on threads of their own set 1). */
void ft_cpu_blas_threads(int n);
/* FLOP/s of a 256^3 float64 GEMM on this machine now (BLAS's current threads; about 10 ms). */
double ft_cpu_gemm_rate(void);

/* ==== activations (docs/fuser-model.md, "Activations"; math in fp32)
 * ============================================== */

typedef enum ft_act_kind {
    FT_ACT_SWIGLU = 0,     /* f(u,v) = u sigma(u) v */
    FT_ACT_CLAMPED_QGEGLU, /* u_c sigma(alpha u_c) (clamp(v,-L,L) + o), u_c = min(u, L) */
    FT_ACT_SRELU,          /* unary: max(x,0)^2 */
    FT_ACT_COUNT
} ft_act_kind;

typedef struct ft_act {
    ft_act_kind kind;
    int32_t interleave; /* GLU: 0 (h = [act | gate]) or 32 (col t*64 + half*32 + l); SReLU: 0 */
    float limit;        /* ClampedQGeGLU L (TE default 7) */
    float alpha;        /* ClampedQGeGLU alpha (1.702) */
    float offset;       /* ClampedQGeGLU glu_linear_offset (1) */
} ft_act;

const char *ft_act_name(ft_act_kind k);
static inline int ft_act_is_glu(ft_act_kind k)
{
    return k == FT_ACT_SWIGLU || k == FT_ACT_CLAMPED_QGEGLU;
}

/* z[r][j] = p_r * f(h_r)_j for h[rows][n1], z[rows][k2], n1 = 2*k2 (GLU) or k2; probs NULL
 * means p = 1. */
int ft_cpu_act_forward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                       const float *probs, float *z, ft_err *err);
/* dh = (dz * p) .* f'(h); dprobs[r] = sum_j dz[r][j] f_j(h_r) with the UNSCALED activation
 * (written, not accumulated; may be NULL). */
int ft_cpu_act_backward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                        const float *probs, const float *dz, float *dh, float *dprobs, ft_err *err);

/* ==== grouped MLP (docs/fuser-model.md; FC1 -> scaled activation -> FC2) ====================== */

/* Quantized tensors of the MLP, for ft_mlp_qcfg and the delayed-scaling states. */
enum { FT_MLP_X = 0, FT_MLP_W1, FT_MLP_Z, FT_MLP_W2, FT_MLP_DY, FT_MLP_DH, FT_MLP_N_TENSORS };

/* The quantizer state the MLP runs with (what the fuser's quantizers hold, not the recipe). */
typedef struct ft_mlp_quant {
    ft_qfmt fmt;         /* FT_QF_NONE: bf16 GEMMs */
    ft_fp8 fp8_fwd;      /* x, z, W element type (E4M3) */
    ft_fp8 fp8_bwd;      /* dy, dh element type (E5M2 under HYBRID) */
    uint8_t rht;         /* NVFP4: RHT on the columnwise copies of x, z, dy, dh */
    uint8_t sr;          /* NVFP4: stochastic rounding of dy, dh */
    uint8_t two_d;       /* weights in 2D tiles (NVFP4 16x16, MXFP8 32x32); FP8 block weights
                            are always 128x128 */
    uint8_t pow2_scales; /* FP8 current/block */
    uint64_t seed;       /* SR seed of this call */
    ft_delayed *delayed; /* FP8 delayed: [FT_MLP_N_TENSORS * n_groups] states (tensor-major),
                            read and updated by the call; NULL: every scale is 1 */
} ft_mlp_quant;

/* The ft_qcfg the MLP uses for tensor (FT_MLP_*) of group g in the given usage. */
void ft_mlp_qcfg(const ft_mlp_quant *q, int tensor, uint32_t group, int columnwise, ft_qcfg *out);

/* Plan topology being emulated. FUSED = GroupedMLP_CuTeGEMM{GLU,Unary} (MXFP8 or NVFP4 only);
 * UNFUSED = GroupedLinear -> Scaled activation op -> GroupedLinear. Differences kept:
 * - FUSED MXFP8: the FC1 epilogue computes p*f(h) from the fp32 accumulator (+b1) and quantizes
 *   z from fp32 (h is stored bf16 for the backward); the dGLU kernel quantizes dh from fp32.
 * - FUSED NVFP4: z and dh are rounded to bf16 and then group-quantized (RHT columnwise).
 * - UNFUSED: every op output is bf16 (h, z, dz, dh) and quantized by the next op.
 * The kernels compute every configuration they are given; when TE itself would raise (T % 128,
 * the non-RHT NVFP4 group quantize, the NVFP4 bgrad of a plain FC2 bias) is the fuser model's
 * business (tefuser: ft_model_run_raises, ft_model_fused_mlp_raises). */
typedef enum ft_mlp_path { FT_MLP_UNFUSED = 0, FT_MLP_FUSED = 1 } ft_mlp_path;

typedef struct ft_mlp {
    uint32_t n_groups;
    const int64_t *splits; /* [n_groups] tokens per expert; sum <= t */
    int64_t t;             /* token rows */
    int64_t k1, n1;        /* FC1: x[t][k1], W1[G][n1][k1], b1[G][n1] */
    int64_t k2, n2;        /* FC2: z[t][k2], W2[G][n2][k2], b2[G][n2]; n1 = 2*k2 (GLU) or k2 */
    ft_act act;
    uint8_t scale_bias; /* FC2 bias multiplied by probs (needs probs) */
    ft_mlp_path path;
    ft_mlp_quant quant;
    const float *x;     /* [t][k1] bf16 values */
    const float *w1;    /* [G][n1][k1] */
    const float *b1;    /* [G][n1] or NULL */
    const float *w2;    /* [G][n2][k2] */
    const float *b2;    /* [G][n2] or NULL */
    const float *probs; /* [t] or NULL (unscaled activation: p = 1, no dprobs) */
} ft_mlp;

typedef struct ft_mlp_fwd {
    float *h; /* [t][n1] FC1 output as saved for the backward (bf16 values) */
    float *z; /* [t][k2] FC2 input before quantization (FUSED MXFP8: fp32, else bf16 values) */
    float *y; /* [t][n2] output (bf16 values) */
} ft_mlp_fwd;

typedef struct ft_mlp_bwd {
    float *dx;     /* [t][k1] (bf16 values) */
    float *dw1;    /* [G][n1][k1] */
    float *db1;    /* [G][n1] or NULL to skip */
    float *dw2;    /* [G][n2][k2] */
    float *db2;    /* [G][n2] or NULL to skip */
    float *dprobs; /* [t] or NULL to skip (fp32) */
} ft_mlp_bwd;

/* The checks both MLP calls start with, on m with HOST splits: shapes, splits, operands, and a
 * fused path without MXFP8 or NVFP4 quantizers (FT_EINVAL naming the field). */
int ft_mlp_check(const ft_mlp *m, ft_err *err);

/* Forward; fills every array of out. Validates shapes (FT_EINVAL naming the field). */
int ft_cpu_mlp_forward(const ft_mlp *m, ft_mlp_fwd *out, ft_err *err);
/* Backward from dy[t][n2] (bf16 values) given this path's forward output. Weight and bias grads
 * of empty groups are 0. */
int ft_cpu_mlp_backward(const ft_mlp *m, const ft_mlp_fwd *fwd, const float *dy, ft_mlp_bwd *out,
                        ft_err *err);

/* Float64 reference: exact math, no quantization, no bf16 rounding (path and quant ignored).
 * Any pointer may be NULL to skip that output; dy NULL skips the backward. */
typedef struct ft_mlp_ref {
    double *h, *z, *y;                           /* [t][n1], [t][k2], [t][n2] */
    double *dx, *dw1, *db1, *dw2, *db2, *dprobs; /* as ft_mlp_bwd */
} ft_mlp_ref;
int ft_cpu_mlp_ref(const ft_mlp *m, const float *dy, ft_mlp_ref *out, ft_err *err);

/* ==== CUDA back end (kernels/cuda/; FT_ENODEV without a CUDA build or device) =============== */

int ft_cuda_device_count(void);
/* The calling thread's current device (0 <= device < ft_cuda_device_count()): what the functions
 * that say "the current device" act on. FT_EINVAL for an id out of range. */
int ft_cuda_set_device(int device, ft_err *err);
/* Device name and multiprocessor count of the current device. */
int ft_cuda_device_info(char *name, size_t cap, int *n_sm, ft_err *err);
/* The float32 contract's quantizer and activations on the device (DEVICE pointers), exact to
 * ft_cpu_quantize / ft_cpu_act_*: the kernels the numerics' device path quantizes and activates
 * with (ft_cuda_nx_run), exposed for their tests. */
int ft_cuda_quantize(const ft_qcfg *q, const float *x, int64_t rows, int64_t cols,
                     const int64_t *splits, uint32_t n_groups, float *out, void *stream,
                     ft_err *err);
int ft_cuda_act_forward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                        const float *probs, float *z, void *stream, ft_err *err);
int ft_cuda_act_backward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                         const float *probs, const float *dz, float *dh, float *dprobs,
                         void *stream, ft_err *err);

/* ==== numerical replay: one problem, two back ends (cpu/nx.c, cuda/nx.cu) ================= */
/*
 * The problem of one sampled call: its inputs, the float64 reference and every configuration's
 * run, with only figures coming back. Both back ends take the same problem and give the same
 * figures from the same inputs; numerics/ drives either through one table of these functions.
 * The CPU back end (ft_cpu_nx_*) runs ft_cpu_mlp_*; the CUDA back end (ft_cuda_nx_*, in the
 * plugin) keeps everything on the device.
 *
 * Inputs are bf16 values of ft_nx_gauss streams (kernels/nx_int.h writes them once for both):
 * x = gauss(xseed + 1), probs = bf16(0.5 + 0.45 tanh(gauss(xseed + 6))), dy = gauss(xseed + 7)
 * over [t] rows; W1 = gauss(wseed + 2) * w1_scale, b1 = gauss(wseed + 3) * 0.1, W2 =
 * gauss(wseed + 4) * w2_scale, b2 = gauss(wseed + 5) * 0.1, each rounded to bf16 (the device
 * keeps weights while wseed and the shape stay, as they do across calls of one fuser).
 *
 * A run is one configuration (path, quantizer state) forward and (grad) backward through the
 * float32-contract MLP. Its outputs (y, dx, dW1, dW2) are compared with the reference and with
 * the base run of the call (the first run with FT_NX_BASE that ran): relative L2, worst output
 * (the metric of kernels/nx_int.h). CPU: the reference is float64 (ft_cpu_mlp_ref), the base is
 * kept in float32. CUDA: operands fake-quantized exactly as ft_cuda_quantize does, expanded
 * exactly into bf16 with the per-group factor as the GEMM's alpha, cuBLAS bf16 tensor-core GEMMs,
 * fp32 accumulation (FP8 block scales that are not powers of two are not exact in bf16: the CUDA
 * back end refuses them, FT_EUNSUPPORTED; TE's recipes and tefuser use power-of-two ones); the
 * reference is float64 math through cuBLAS DGEMM per expert, stored as float32; the base is kept
 * in bf16 (exact: every output is bf16-valued).
 *
 * Timing (ft_*_nx_time, replay --gpu-time): the CUDA back end runs the problem's grouped MLP as a
 * training step runs it, in bf16 storage on the project's own kernels (ft_kernels_cuda.h,
 * ft_cuda_bf16_mlp_forward/backward: the persistent wgmma GEMMs, the FC1 epilogues, the packed
 * quantizers), warmup times untimed, then rounds times between CUDA events. It needs the
 * problem's inputs only (a problem set with inputs_only skips the reference, and then refuses
 * runs). The CPU back end refuses timing (FT_EUNSUPPORTED).
 */
#define FT_NX_MAX_SLOTS  32 /* runs per call */
#define FT_NX_PHASES     6  /* profile: inputs, reference, quantization, GEMMs, comparison, other */
#define FT_NX_MAX_ROUNDS 16 /* timed rounds per ft_*_nx_time */
enum { FT_NX_BASE = 1 };

/* Approximately N(0, 1): the sum of four 16-bit uniforms of ft_hash_mix(seed, i). */
float ft_nx_gauss(uint64_t seed, uint64_t i);

typedef struct ft_nx_problem {
    uint32_t n_groups;
    const int64_t *splits; /* HOST [n_groups]; sum <= t */
    int64_t t, k1, n1, k2, n2;
    ft_act act;
    uint8_t bias1, bias2, scaled, scale_bias; /* scaled: probabilities exist */
    uint8_t grad;                             /* run the backward */
    uint8_t inputs_only; /* 1: the inputs only, no reference (timing); runs are then refused */
    uint64_t wseed, xseed;
    float w1_scale, w2_scale; /* weight scales (1 / sqrt(in_features)) */
} ft_nx_problem;

typedef struct ft_nx_figs {
    int rc; /* FT_OK, or the kernel's refusal of the configuration (FT_EINVAL, FT_EUNSUPPORTED;
               text in msg) */
    char msg[160];
    uint8_t has_base;   /* div, div_max_abs are against a base run */
    double err;         /* worst relative L2 vs the reference over y (and dx, dW1, dW2) */
    double out_err[4];  /* per output: y, dx, dW1, dW2 */
    double div;         /* worst relative L2 vs the base run */
    double div_max_abs; /* largest |difference| from the base run (NaN if any) */
    uint64_t nonfinite; /* NaN/Inf output elements */
} ft_nx_figs;

/* A back end's context, made by that back end's _new and passed only to its own functions. The
 * CPU's serves one thread at a time; the CUDA one holds the device's buffers (one per process
 * is enough). */
typedef struct ft_nx ft_nx;

/* Device (CUDA) or host (CPU) bytes a problem needs at most (context buffers plus the larger of
 * the reference's and a run's scratch, as the device lays them out). Host only; in every
 * build. */
void ft_nx_bytes(const ft_nx_problem *p, uint64_t *bytes);
/* Floating-point operations of the reference (float64) and of one run (fp32 accumulation). */
void ft_nx_flops(const ft_nx_problem *p, double *ref_flops, double *run_flops);
/* Device bytes one ft_cuda_nx_time of the problem adds at most (bf16 operands, outputs and
 * gradients, the quantized copies). Host only; in every build. */
void ft_nx_time_bytes(const ft_nx_problem *p, uint64_t *bytes);

/* Quantizations the packed quantizers do not write, timed as the nearest kernel they have. */
enum {
    FT_NX_PROXY_DELAYED = 1u << 0, /* FP8 delayed scaling as FP8 current (amax pass + cast) */
    FT_NX_PROXY_2D = 1u << 1,      /* 2D weight tiles as 1D blocks (the same bytes) */
    FT_NX_PROXY_FP8_COL = 1u << 2, /* FP8 (current, block) columnwise copies as a second rowwise
                                      cast of the tensor (TE transposes; the same bytes) */
};

/* One configuration's timing. */
typedef struct ft_nx_time {
    int rc; /* FT_OK, or the kernels' refusal of the configuration (FT_EINVAL, FT_EUNSUPPORTED;
               text in msg): nothing was timed */
    char msg[160];
    uint32_t n_rounds;               /* timed rounds */
    double ms[FT_NX_MAX_ROUNDS];     /* each round's forward (+ backward) on the device */
    double fwd_ms[FT_NX_MAX_ROUNDS]; /* of which the forward */
    unsigned proxies;                /* FT_NX_PROXY_* the configuration needed */
} ft_nx_time;

/* The CPU back end. */
int ft_cpu_nx_new(ft_nx **out, ft_err *err);
void ft_cpu_nx_free(ft_nx *nx);
/* Set the call: inputs and reference (figures and outputs of earlier runs are dropped). Errors:
 * FT_EINVAL (bad problem), FT_ENOMEM. */
int ft_cpu_nx_problem(ft_nx *nx, const ft_nx_problem *p, ft_err *err);
/* One run into the next slot (0, 1, ...). A configuration the kernels refuse is not run: its
 * slot holds the refusal. Errors: FT_ENOMEM, FT_ERANGE (more than FT_NX_MAX_SLOTS runs). */
int ft_cpu_nx_run(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, unsigned flags, ft_err *err);
/* figs[0..n) of the runs so far (n <= runs). */
int ft_cpu_nx_collect(ft_nx *nx, ft_nx_figs *figs, uint32_t n, ft_err *err);
/* Host copies of the last completed run's output / of the reference rounded to float32 (which:
 * 0 y, 1 dx, 2 dW1, 3 dW2; the last three for grad problems). */
int ft_cpu_nx_download(ft_nx *nx, int which, float *host, ft_err *err);
int ft_cpu_nx_reference(ft_nx *nx, int which, float *host, ft_err *err);
/* Host bytes the context holds now (pool_peak: 0, there is no pool). */
int ft_cpu_nx_memory(ft_nx *nx, uint64_t *held, uint64_t *pool_peak, ft_err *err);
/* Profiling: on = 1 times the phases (0 off, -1 unchanged; a change clears the figures); ms (may
 * be NULL) receives the milliseconds per phase (the runs count as other). */
void ft_cpu_nx_profile(ft_nx *nx, int on, double ms[FT_NX_PHASES]);
/* Timing runs on the CUDA back end only: FT_EUNSUPPORTED, saying so (out cleared). */
int ft_cpu_nx_time(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, uint32_t warmup,
                   uint32_t rounds, ft_nx_time *out, ft_err *err);

/* The CUDA back end: the same contract (FT_ENODEV without a device or a CUDA build), plus CUDA
 * failures (FT_ECUDA, FT_ENOMEM for device memory). ft_cuda_nx_run decides the kernels'
 * refusals on the host before anything runs; ft_cuda_nx_collect waits for the device. */
int ft_cuda_nx_new(ft_nx **out, ft_err *err);
/* A context on device `device` (its own stream, cuBLAS handle and weight cache; ft_cuda_nx_new's
 * is on the current device). Every ft_cuda_nx_* call on it makes its device the calling thread's
 * current one, so contexts on several devices can be driven from one thread or one each. */
int ft_cuda_nx_new_on(int device, ft_nx **out, ft_err *err);
void ft_cuda_nx_free(ft_nx *nx);
int ft_cuda_nx_problem(ft_nx *nx, const ft_nx_problem *p, ft_err *err);
int ft_cuda_nx_run(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, unsigned flags, ft_err *err);
int ft_cuda_nx_collect(ft_nx *nx, ft_nx_figs *figs, uint32_t n, ft_err *err);
int ft_cuda_nx_download(ft_nx *nx, int which, float *host, ft_err *err);
int ft_cuda_nx_reference(ft_nx *nx, int which, float *host, ft_err *err);
/* Device bytes the context holds now, and the most the stream-ordered pool has held since it
 * was created (runs' scratch, the reference's work space, the weight cache). */
int ft_cuda_nx_memory(ft_nx *nx, uint64_t *held, uint64_t *pool_peak, ft_err *err);
/* Profiling: on = 1 synchronises at each phase and adds its wall time (0 off, -1 unchanged; a
 * change clears the figures); ms (may be NULL) receives the milliseconds per phase. */
void ft_cuda_nx_profile(ft_nx *nx, int on, double ms[FT_NX_PHASES]);
/* Free and total memory of the current device. */
int ft_cuda_mem_info(uint64_t *free_b, uint64_t *total_b, ft_err *err);
/* The problem's training step under (path, q) on the device's own kernels (see above): warmup
 * untimed runs, then rounds (1..FT_NX_MAX_ROUNDS) timed ones into out. A configuration the
 * kernels refuse is not run: out->rc says why and the call returns FT_OK. The bf16 weights come
 * from the context's weight cache (the one the runs' weight operands live in); the other buffers
 * from the device's pool, returned before the call ends. Errors: FT_EINVAL (no problem, bad
 * rounds), FT_ENOMEM (device memory), FT_ECUDA. */
int ft_cuda_nx_time(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, uint32_t warmup,
                    uint32_t rounds, ft_nx_time *out, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif /* FT_KERNELS_H */
