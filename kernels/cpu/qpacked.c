/*
 * qpacked.c - host side of the packed quantization layout of ft_kernels_cuda.h (codes + scales
 * written by ft_cuda_bf16_quantize): buffer sizes, and a decoder back to the float32 values that
 * ft_cpu_quantize writes, so the packed kernels can be checked bit for bit against the reference.
 *
 * The decoder repeats the reference's last step, q * deq with the same float operations (deq from
 * the stored scale, or from the group amax where the reference derives it from that), so equal
 * codes and scales give equal bits.
 */
#include "formats_int.h"
#include "ft_kernels_cuda.h"

int ft_qpacked_layout(const ft_qcfg *q, int columnwise, int64_t rows, int64_t cols,
                      uint32_t n_groups, ft_qpacked_sizes *sz, ft_err *err)
{
    memset(sz, 0, sizeof *sz);
    if (!q) return ft_err_set(err, FT_EINVAL, "packed quantize: no quantizer config");
    if (rows < 0 || cols < 0 || cols % 32 || (rows > 0 && cols > INT64_MAX / 4 / rows))
        return ft_err_set(err, FT_EINVAL,
                          "packed quantize: shape %lld x %lld (cols must be a multiple of 32)",
                          (long long)rows, (long long)cols);
    const int ok = q->fmt == FT_QF_MXFP8 || q->fmt == FT_QF_NVFP4 ||
                   (!columnwise && (q->fmt == FT_QF_FP8_CURRENT || q->fmt == FT_QF_FP8_BLOCK));
    if (!ok || q->two_d)
        return ft_err_set(err, FT_EUNSUPPORTED, "packed quantize: no %s%s %s kernel",
                          ft_qfmt_name(q->fmt), q->two_d ? " 2D" : "",
                          columnwise ? "columnwise" : "rowwise");
    const uint32_t G = n_groups ? n_groups : 1;
    const int64_t n = rows * cols, bs = (int64_t)ft_qfmt_block(q->fmt);
    sz->data = (size_t)(q->fmt == FT_QF_NVFP4 ? n / 2 : n);
    if (bs) {
        sz->scale_rows = columnwise ? rows / bs + (int64_t)G : rows;
        sz->scale_cols = columnwise ? cols : (cols + bs - 1) / bs;
        const size_t elem = q->fmt == FT_QF_FP8_BLOCK ? sizeof(float) : 1;
        sz->scales = (size_t)(sz->scale_rows * sz->scale_cols) * elem;
    }
    if (q->fmt == FT_QF_NVFP4 || q->fmt == FT_QF_FP8_CURRENT) sz->amax = G * sizeof(float);
    return FT_OK;
}

/* Element value of code index i (before the block's dequantization factor). */
static float code_value(const ft_qcfg *q, const uint8_t *data, int64_t i)
{
    if (q->fmt == FT_QF_NVFP4) return ft_e2m1_decode((uint8_t)(data[i / 2] >> (4 * (i & 1))));
    return ft_fp8_decode(q->fp8, data[i]);
}

/* Dequantization factor of the block holding element (r, c); srow: its scale row. */
static float block_deq(const ft_qcfg *q, int columnwise, const ft_qpacked *p, int64_t cols,
                       int64_t r, int64_t c, int64_t srow, float gamax)
{
    const int64_t bs = (int64_t)ft_qfmt_block(q->fmt);
    /* FP8 current has no blocks (bs 0) and no scales: si is not used (nor computed: c / 0) */
    const int64_t si =
        columnwise ? srow * cols + c : (bs ? r * ((cols + bs - 1) / bs) + c / bs : 0);
    switch (q->fmt) {
    case FT_QF_MXFP8:
        return ft_e8m0_dequant(((const uint8_t *)p->scales)[si]);
    case FT_QF_NVFP4: {
        return nvfp4_dequant(ft_fp8_decode(FT_FP8_E4M3, ((const uint8_t *)p->scales)[si]), gamax);
    }
    case FT_QF_FP8_BLOCK:
        return ((const float *)p->scales)[si];
    default: /* FP8 current */
        return 1.0f /
               fp8_scale_from_amax(gamax, ft_fp8_max(q->fp8), q->pow2_scales, q->amax_epsilon);
    }
}

int ft_qpacked_decode(const ft_qcfg *q, int columnwise, int64_t rows, int64_t cols,
                      const int64_t *splits, uint32_t n_groups, const ft_qpacked *p, const float *x,
                      float *out, ft_err *err)
{
    ft_qpacked_sizes sz;
    int rc = ft_qpacked_layout(q, columnwise, rows, cols, n_groups, &sz, err);
    if (rc) return rc;
    if (splits && n_groups == 0)
        return ft_err_set(err, FT_EINVAL, "packed decode: splits given with 0 groups");
    if (rows * cols > 0 &&
        (!p || !p->data || !out || (sz.scales && !p->scales) || (sz.amax && !p->amax)))
        return ft_err_set(err, FT_EINVAL, "packed decode: NULL buffer");
    int64_t one = rows;
    if (!splits) {
        splits = &one;
        n_groups = 1;
    }
    const int64_t bs = (int64_t)ft_qfmt_block(q->fmt);
    int64_t row0 = 0, srow0 = 0;
    for (uint32_t g = 0; g < n_groups; g++) {
        const int64_t s = splits[g];
        if (s < 0 || s > rows - row0)
            return ft_err_set(err, FT_EINVAL,
                              "packed decode: split %u = %lld is negative or overruns %lld rows", g,
                              (long long)s, (long long)rows);
        const float gamax = sz.amax ? p->amax[g] : 0.0f;
        for (int64_t r = row0; r < row0 + s; r++) {
            const int64_t srow = bs ? srow0 + (r - row0) / bs : 0;
            for (int64_t c = 0; c < cols; c++) {
                float deq = block_deq(q, columnwise, p, cols, r, c, srow, gamax);
                out[r * cols + c] = code_value(q, p->data, r * cols + c) * deq;
            }
        }
        row0 += s;
        srow0 += bs ? (s + bs - 1) / bs : 0;
    }
    if (x && row0 < rows)
        memcpy(out + row0 * cols, x + row0 * cols, (size_t)((rows - row0) * cols) * sizeof *out);
    return FT_OK;
}
