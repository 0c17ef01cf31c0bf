/*
 * cmd_kernels.c - `fusertrace kernels quantize`: fake-quantize one float32 tensor the way
 * TransformerEngine would, for checking quantization error and cross-checking other
 * implementations (spec/te-fuser.md §4.6 "Conventions for inspecting one tensor").
 *
 * Input: exactly ROWS*COLS row-major little-endian float32 values on stdin. Output: the
 * dequantized values in the same layout on stdout (columnwise results transposed back; with
 * --rht the values stay in the rotated basis), or with --stats a few lines of error figures
 * (against the rotated bf16 input when --rht).
 */
#include "cli.h"
#include "ft_kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fusertrace kernels quantize --format mxfp8|nvfp4|fp8-current|fp8-block\n"
            "           --rows R --cols C [--columnwise] [--rht] [--2d] [--sr [--seed S]]\n"
            "           [--fp8 e4m3|e5m2] [--pow2-scales | --fp32-scales] [--stats]\n"
            "  Reads R*C row-major little-endian float32 values from stdin and writes the\n"
            "  quantized-then-dequantized values (same layout) to stdout, or error figures with\n"
            "  --stats. --rht (nvfp4 --columnwise only) leaves values in the rotated basis.\n"
            "  fp8-block defaults to power-of-2 scales (TE's default), fp8-current to fp32.\n");
}

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

static int parse_dim(const char *flag, const char *s, int64_t *out)
{
    if (!s || ft_parse_i64(s, out) || *out < 1 || *out > ((int64_t)1 << 31)) {
        fprintf(stderr, "fusertrace kernels quantize: %s needs a positive integer, got '%s'\n",
                flag, s ? s : "(nothing)");
        return 1;
    }
    return 0;
}

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

static int cmd_quantize(int argc, char **argv)
{
    ft_qcfg q = {.fmt = FT_QF_COUNT, .fp8 = FT_FP8_E4M3};
    int64_t rows = 0, cols = 0, seed = 0;
    int stats = 0, have_seed = 0, pow2 = -1;
    const char *me = "fusertrace kernels quantize";

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return FT_EXIT_OK;
        } else if (!strcmp(a, "--format")) {
            i++;
            if (!v)
                q.fmt = FT_QF_COUNT;
            else if (!strcmp(v, "mxfp8"))
                q.fmt = FT_QF_MXFP8;
            else if (!strcmp(v, "nvfp4"))
                q.fmt = FT_QF_NVFP4;
            else if (!strcmp(v, "fp8-current"))
                q.fmt = FT_QF_FP8_CURRENT;
            else if (!strcmp(v, "fp8-block"))
                q.fmt = FT_QF_FP8_BLOCK;
            else {
                fprintf(stderr,
                        "%s: unknown --format '%s' (mxfp8, nvfp4, fp8-current, "
                        "fp8-block)\n",
                        me, v ? v : "");
                return FT_EXIT_INPUT;
            }
        } else if (!strcmp(a, "--rows")) {
            i++;
            if (parse_dim("--rows", v, &rows)) return FT_EXIT_INPUT;
        } else if (!strcmp(a, "--cols")) {
            i++;
            if (parse_dim("--cols", v, &cols)) return FT_EXIT_INPUT;
        } else if (!strcmp(a, "--seed")) {
            i++;
            if (!v || ft_parse_i64(v, &seed)) {
                fprintf(stderr, "%s: --seed needs an integer, got '%s'\n", me, v ? v : "");
                return FT_EXIT_INPUT;
            }
            have_seed = 1;
        } else if (!strcmp(a, "--fp8")) {
            i++;
            if (v && !strcmp(v, "e4m3"))
                q.fp8 = FT_FP8_E4M3;
            else if (v && !strcmp(v, "e5m2"))
                q.fp8 = FT_FP8_E5M2;
            else {
                fprintf(stderr, "%s: --fp8 needs e4m3 or e5m2, got '%s'\n", me, v ? v : "");
                return FT_EXIT_INPUT;
            }
        } else if (!strcmp(a, "--columnwise")) {
            q.columnwise = 1;
        } else if (!strcmp(a, "--rht")) {
            q.rht = 1;
        } else if (!strcmp(a, "--2d")) {
            q.two_d = 1;
        } else if (!strcmp(a, "--sr")) {
            q.sr = 1;
        } else if (!strcmp(a, "--pow2-scales")) {
            pow2 = 1;
        } else if (!strcmp(a, "--fp32-scales")) {
            pow2 = 0;
        } else if (!strcmp(a, "--stats")) {
            stats = 1;
        } else {
            fprintf(stderr, "%s: unknown argument '%s'\n", me, a);
            usage(stderr);
            return FT_EXIT_INPUT;
        }
    }
    if (q.fmt == FT_QF_COUNT || rows == 0 || cols == 0) {
        fprintf(stderr, "%s: --format, --rows and --cols are required\n", me);
        usage(stderr);
        return FT_EXIT_INPUT;
    }
    if (have_seed && !q.sr) {
        fprintf(stderr, "%s: --seed is only meaningful with --sr\n", me);
        return FT_EXIT_INPUT;
    }
    if (q.rht && !q.columnwise) {
        fprintf(stderr, "%s: --rht applies to columnwise data only; add --columnwise\n", me);
        return FT_EXIT_INPUT;
    }
    if (q.fmt == FT_QF_FP8_BLOCK)
        q.pow2_scales = pow2 != 0;
    else
        q.pow2_scales = pow2 == 1;
    if (pow2 >= 0 && q.fmt != FT_QF_FP8_BLOCK && q.fmt != FT_QF_FP8_CURRENT) {
        fprintf(stderr, "%s: --pow2-scales/--fp32-scales apply to fp8-current and fp8-block\n", me);
        return FT_EXIT_INPUT;
    }
    if (q.fp8 == FT_FP8_E5M2 && q.fmt == FT_QF_NVFP4) {
        fprintf(stderr, "%s: --fp8 does not apply to nvfp4 (E2M1 data, E4M3 scales)\n", me);
        return FT_EXIT_INPUT;
    }
    q.seed = (uint64_t)seed;

    if (rows > ((int64_t)1 << 32) / cols) {
        fprintf(stderr, "%s: %lld x %lld values is too many (limit 2^32)\n", me, (long long)rows,
                (long long)cols);
        return FT_EXIT_INPUT;
    }
    size_t n = (size_t)(rows * cols);
    float *x = ft_malloc(n * sizeof *x), *out = ft_malloc(n * sizeof *out);
    int ex = FT_EXIT_OK;
    if (!x || !out) {
        fprintf(stderr, "%s: no memory for %zu values\n", me, n);
        ex = FT_EXIT_INTERNAL;
        goto done;
    }
    size_t got = fread(x, sizeof *x, n, stdin);
    if (got != n) {
        fprintf(stderr, "%s: stdin: read %zu float32 values, expected %lld x %lld = %zu%s\n", me,
                got, (long long)rows, (long long)cols, n, ferror(stdin) ? " (read error)" : "");
        ex = FT_EXIT_INPUT;
        goto done;
    }
    int extra = fgetc(stdin);
    if (extra != EOF) {
        fprintf(stderr, "%s: stdin: more than %lld x %lld = %zu float32 values\n", me,
                (long long)rows, (long long)cols, n);
        ex = FT_EXIT_INPUT;
        goto done;
    }
    if (!host_is_le()) swap32(x, n);

    ft_err err = {0};
    ft_qstats st;
    int rc = ft_cpu_quantize(&q, x, rows, cols, NULL, 0, out, &st, &err);
    if (rc) {
        fprintf(stderr, "%s: %s\n", me, ft_err_msg(&err));
        ex = cli_exit_code(rc);
        goto done;
    }
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
        if (fwrite(out, sizeof *out, n, stdout) != n || fflush(stdout)) {
            fprintf(stderr, "%s: stdout: write failed\n", me);
            ex = FT_EXIT_INTERNAL;
        }
    }
done:
    ft_free(x);
    ft_free(out);
    return ex;
}

int cmd_kernels(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "quantize")) return cmd_quantize(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return FT_EXIT_OK;
    }
    fprintf(stderr, "fusertrace kernels: unknown or missing subcommand%s%s\n", argc >= 2 ? " " : "",
            argc >= 2 ? argv[1] : "");
    usage(stderr);
    return FT_EXIT_INPUT;
}
