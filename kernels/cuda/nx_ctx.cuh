// nx_ctx.cuh - the device numerics context (struct ft_nx) shared by nx.cu (the problem, the
// runs, the reference and the figures) and nx_time.cu (replay --gpu-time's timed step). Private
// to kernels/cuda.
#ifndef FT_NX_CTX_CUH
#define FT_NX_CTX_CUH

#include "ft_cuda_int.cuh"
#include "nx_int.h"
#include <cublas_v2.h>

// the outputs compared: y, and with gradients dx, dW1, dW2
enum { O_Y = 0, O_DX, O_DW1, O_DW2, O_N };

struct ft_nx {
    int dev; // the device everything of this context lives on
    cudaStream_t st;
    cublasHandle_t blas;
    ft_fast fast;
    float *zero;    // device 0.0f
    double *dconst; // device 1.0, 0.0
    // current problem
    ft_nx_problem p;
    int64_t hsplits[FT_CUDA_MAX_GROUPS];
    int have;
    int64_t *splits, *offs; // device [G], [G + 1]
    // inputs (float32, bf16 values)
    float *x, *w1, *b1, *w2, *b2, *pr, *dy;
    uint64_t wkey; // weights generated for this key (0: none)
    // reference outputs (float64 rounded to float32) and this run's outputs
    float *ref[O_N], *out[O_N];
    uint16_t *base[O_N];
    int has_base;
    float *h, *z; // forward's saved h and z
    int64_t cnt[O_N];
    // figures: [slots][O_N][S_N] on the device
    double *figs, *part;
    uint32_t n_slots;
    int slot_rc[FT_NX_MAX_SLOTS];
    uint8_t slot_base[FT_NX_MAX_SLOTS];
    char slot_msg[FT_NX_MAX_SLOTS][160];
    size_t bytes; // context-owned device bytes
};

// The context's device made the calling thread's current one (every entry point starts here,
// so a context can be used from any thread).
int nx_enter(const ft_nx *nx, ft_err *err);
// d[0..n) = the bf16 bits of the bf16-valued floats s[0..n), on the context's stream.
int nx_f2b(const ft_nx *nx, const float *s, uint16_t *d, int64_t n, ft_err *err);

#endif
