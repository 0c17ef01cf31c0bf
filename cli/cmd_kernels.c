/*
 * cmd_kernels.c - `fusertrace kernels quantize`: fake-quantize one float32 tensor the way
 * TransformerEngine would, for checking quantization error and cross-checking other
 * implementations (docs/fuser-model.md, "Inspecting one tensor").
 *
 * Input: exactly ROWS*COLS row-major little-endian float32 values on stdin. Output: the
 * dequantized values in the same layout on stdout (columnwise results transposed back; with
 * --rht the values stay in the rotated basis), or with --stats a few lines of error figures
 * (against the rotated bf16 input when --rht).
 */
#include "cli.h"
#include "ft_kernels.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int host_is_le(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void swap32(float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t b[4], t;
        memcpy(b, &v[i], 4);
        t = b[0], b[0] = b[3], b[3] = t;
        t = b[1], b[1] = b[2], b[2] = t;
        memcpy(&v[i], b, 4);
    }
}

typedef struct quantize_opts {
    ft_qcfg q;
    uint32_t rows, cols;
    uint64_t seed;
    int stats, have_seed, pow2, fp32, columnwise, rht, two_d, sr;
} quantize_opts;

static int parse_format(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    static const struct {
        const char *name;
        int fmt;
    } formats[] = {{"mxfp8", FT_QF_MXFP8},
                   {"nvfp4", FT_QF_NVFP4},
                   {"fp8-current", FT_QF_FP8_CURRENT},
                   {"fp8-block", FT_QF_FP8_BLOCK}};
    for (size_t i = 0; i < FT_ARRAY_LEN(formats); i++)
        if (!strcmp(v, formats[i].name)) {
            ((ft_qcfg *)field)->fmt = formats[i].fmt;
            return FT_OK;
        }
    return ft_err_set(err, FT_EINVAL, "unknown format '%s' (mxfp8, nvfp4, fp8-current, fp8-block)",
                      v);
}

static int parse_fp8(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    if (!strcmp(v, "e4m3"))
        ((ft_qcfg *)field)->fp8 = FT_FP8_E4M3;
    else if (!strcmp(v, "e5m2"))
        ((ft_qcfg *)field)->fp8 = FT_FP8_E5M2;
    else
        return ft_err_set(err, FT_EINVAL, "wants e4m3 or e5m2, got '%s'", v);
    return FT_OK;
}

static int parse_seed(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    quantize_opts *q = (quantize_opts *)((char *)field - offsetof(quantize_opts, seed));
    q->have_seed = 1;
    return cli_parse_u64(o, v, field, err);
}

static void init(void *opts)
{
    quantize_opts *o = opts;
    o->q.fmt = FT_QF_COUNT;
    o->q.fp8 = FT_FP8_E4M3;
}

#define Q offsetof(quantize_opts, q)
static const cli_opt options[] = {
    {"format", 0, "F", "mxfp8, nvfp4, fp8-current or fp8-block (required)", parse_format, Q},
    {"rows", 0, "R", "rows of the tensor (required)", cli_parse_count,
     offsetof(quantize_opts, rows)},
    {"cols", 0, "C", "columns of the tensor (required)", cli_parse_count,
     offsetof(quantize_opts, cols)},
    {"columnwise", 0, NULL, "quantize along columns (results transposed back)", cli_parse_flag,
     offsetof(quantize_opts, columnwise)},
    {"rht", 0, NULL,
     "random Hadamard transform (nvfp4 --columnwise only); values stay in\n"
     "the rotated basis",
     cli_parse_flag, offsetof(quantize_opts, rht)},
    {"2d", 0, NULL, "2D scaling blocks", cli_parse_flag, offsetof(quantize_opts, two_d)},
    {"sr", 0, NULL, "stochastic rounding", cli_parse_flag, offsetof(quantize_opts, sr)},
    {"seed", 0, "S", "the stochastic rounding seed (with --sr)", parse_seed,
     offsetof(quantize_opts, seed)},
    {"fp8", 0, "e4m3|e5m2", "the FP8 element format (default e4m3)", parse_fp8, Q},
    {"pow2-scales", 0, NULL, "power-of-2 scales (fp8-block's default)", cli_parse_flag,
     offsetof(quantize_opts, pow2)},
    {"fp32-scales", 0, NULL, "float32 scales (fp8-current's default)", cli_parse_flag,
     offsetof(quantize_opts, fp32)},
    {"stats", 0, NULL, "print error figures instead of the values", cli_parse_flag,
     offsetof(quantize_opts, stats)},
};
#undef Q

/* The bf16 RHT of every 16-row chunk of each column: the reference --stats compares against. */
static void rht_columns(float *x, int64_t rows, int64_t cols)
{
    float v[16];
    for (int64_t c = 0; c < cols; c++)
        for (int64_t i0 = 0; i0 + 16 <= rows; i0 += 16) {
            for (int k = 0; k < 16; k++)
                v[k] = x[(i0 + k) * cols + c];
            ft_rht16(v);
            for (int k = 0; k < 16; k++)
                x[(i0 + k) * cols + c] = v[k];
        }
}

static int run_quantize(void *opts_v, int n_args, char **args, ft_err *err)
{
    (void)n_args, (void)args;
    quantize_opts *o = opts_v;
    ft_qcfg q = o->q;
    int64_t rows = o->rows, cols = o->cols;
    int stats = o->stats, have_seed = o->have_seed;
    if (o->pow2 && o->fp32)
        return ft_err_set(err, FT_EINVAL, "--pow2-scales and --fp32-scales exclude each other");
    int pow2 = o->pow2 ? 1 : o->fp32 ? 0 : -1;
    q.columnwise = (uint8_t)o->columnwise;
    q.rht = (uint8_t)o->rht;
    q.two_d = (uint8_t)o->two_d;
    q.sr = (uint8_t)o->sr;
    if (q.fmt == FT_QF_COUNT || rows == 0 || cols == 0)
        return cli_usage_error(err, "--format, --rows and --cols are required");
    if (have_seed && !q.sr)
        return ft_err_set(err, FT_EINVAL, "--seed is only meaningful with --sr");
    if (q.rht && !q.columnwise)
        return ft_err_set(err, FT_EINVAL,
                          "--rht applies to columnwise data only; add --columnwise");
    if (q.fmt == FT_QF_FP8_BLOCK)
        q.pow2_scales = pow2 != 0;
    else
        q.pow2_scales = pow2 == 1;
    if (pow2 >= 0 && q.fmt != FT_QF_FP8_BLOCK && q.fmt != FT_QF_FP8_CURRENT)
        return ft_err_set(err, FT_EINVAL,
                          "--pow2-scales/--fp32-scales apply to fp8-current and fp8-block");
    if (q.fp8 == FT_FP8_E5M2 && q.fmt == FT_QF_NVFP4)
        return ft_err_set(err, FT_EINVAL, "--fp8 does not apply to nvfp4 (E2M1 data, E4M3 scales)");
    q.seed = o->seed;

    if (rows > ((int64_t)1 << 32) / cols)
        return ft_err_set(err, FT_EINVAL, "%lld x %lld values is too many (limit 2^32)",
                          (long long)rows, (long long)cols);
    size_t n = (size_t)(rows * cols);
    float *x = ft_malloc(n * sizeof *x), *out = ft_malloc(n * sizeof *out);
    int rc = FT_OK;
    if (!x || !out) {
        rc = ft_err_set(err, FT_ENOMEM, "no memory for %zu values", n);
        goto done;
    }
    size_t got = fread(x, sizeof *x, n, stdin);
    if (got != n) {
        rc = ft_err_set(err, ferror(stdin) ? FT_EIO : FT_EINVAL,
                        "stdin: read %zu float32 values, expected %lld x %lld = %zu%s", got,
                        (long long)rows, (long long)cols, n, ferror(stdin) ? " (read error)" : "");
        goto done;
    }
    if (fgetc(stdin) != EOF) {
        rc = ft_err_set(err, FT_EINVAL, "stdin: more than %lld x %lld = %zu float32 values",
                        (long long)rows, (long long)cols, n);
        goto done;
    }
    if (!host_is_le()) swap32(x, n);

    ft_qstats st;
    if ((rc = ft_cpu_quantize(&q, x, rows, cols, NULL, 0, out, &st, err))) goto done;
    if (stats) {
        if (q.rht) rht_columns(x, rows, cols);
        ft_quant_error(x, out, n, &st);
        printf("format %s%s%s%s%s rows %lld cols %lld\n", ft_qfmt_name(q.fmt),
               q.columnwise ? " columnwise" : " rowwise", q.two_d ? " 2d" : "", q.rht ? " rht" : "",
               q.sr ? " sr" : "", (long long)rows, (long long)cols);
        printf("amax %.9g\n", (double)st.amax);
        printf("max_abs %.9g\n", st.max_abs);
        printf("rel_l2 %.9g\n", st.rel_l2);
        printf("snr_db %.4f\n", st.snr_db);
        printf("saturated %lld\n", (long long)st.n_sat);
        printf("flushed_to_zero %lld\n", (long long)st.n_flush);
        printf("nonfinite %lld\n", (long long)st.n_nan);
    } else {
        if (!host_is_le()) swap32(out, n);
        if (fwrite(out, sizeof *out, n, stdout) != n)
            rc = ft_err_set(err, FT_EIO, "writing stdout failed: %s", strerror(errno));
    }
done:
    ft_free(x);
    ft_free(out);
    return rc;
}

static const cli_cmd quantize = {
    .name = "quantize",
    .synopsis = "--format mxfp8|nvfp4|fp8-current|fp8-block --rows R --cols C [--columnwise]\n"
                "           [--rht] [--2d] [--sr [--seed S]] [--fp8 e4m3|e5m2]\n"
                "           [--pow2-scales | --fp32-scales] [--stats] < IN.f32 > OUT.f32",
    .summary = "fake-quantize one float32 tensor the way TE would",
    .about = "Reads R*C row-major little-endian float32 values from stdin and writes the\n"
             "quantized-then-dequantized values (same layout) to stdout, or error figures with\n"
             "--stats. fp8-block defaults to power-of-2 scales (TE's default), fp8-current to\n"
             "fp32.",
    CLI_OPTS(quantize_opts, options),
    .init_fn = init,
    .min_args = 0,
    .max_args = 0,
    .run_fn = run_quantize,
};
static const cli_cmd *const subs[] = {&quantize};

const cli_cmd cmd_kernels = {
    .name = "kernels",
    .synopsis = "quantize [...]",
    .summary = "grouped-MLP kernels and quantizers",
    .subs = subs,
    .n_subs = FT_ARRAY_LEN(subs),
};
