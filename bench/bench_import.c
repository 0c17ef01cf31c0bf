/*
 * bench_import.c - capture-jsonl import speed, lines per second on one core.
 *
 * Generates a realistic 64-expert stream in memory (grouped-MLP layers with full activation
 * recompute: a no-grad forward, a recompute with grad and a backward per layer and microbatch;
 * every call carries 64 skewed split sizes, step, mb, phase, ns, fuse_ns, rebuilt), then times,
 * best of several runs:
 *   scan       raw line scan (memchr for '\n'): the floor any line reader pays
 *   jansson    json_loadb + json_decref of every line: the parse-only baseline
 *   import     ft_jsonl_import into a sink that drops records (parse + validate)
 *   import+w   ft_jsonl_import into the JSONL writer sink writing to /dev/null
 *   import+rec ft_jsonl_import into the recorder (a new .ftdb in $TMPDIR or /tmp)
 * and prints lines/s (wall) and lines per CPU second, with each pass's ratio to the jansson
 * parse-only baseline in CPU time (CPU time moves less than wall time on a shared machine; the
 * recorder pass's CPU time excludes time waiting for the disk).
 *
 * usage: bench_import [N_LINES (default 300000)] [EXPERTS (default 64)]
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_util.h"
#include "ft_recorder.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REPS 3

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* The stream, generated into b. Returns the number of lines. */
static size_t generate(ft_buf *b, size_t n_lines, int experts)
{
    const int layers = 16, mbs = 4, tokens = 8192;
    size_t n = 0;
    ft_buf_printf(b, "{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":1,"
                     "\"te_version\":\"2.20.2\",\"rank\":0,\"world_size\":8,\"env\":{"
                     "\"device_cc\":\"10.0\",\"cudnn_frontend\":\"1.27.0\","
                     "\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\"}}\n");
    n++;
    for (int l = 0; l < layers; l++, n++)
        ft_buf_printf(b,
                      "{\"t\":\"fuser\",\"id\":%d,\"label\":\"decoder.layers.%d.mlp.experts\","
                      "\"ops\":[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":%d,"
                      "\"in_features\":4096,\"out_features\":2048,\"bias\":false,\"dtype\":"
                      "\"bfloat16\"}},{\"type\":\"ScaledSwiGLU\",\"attrs\":{"
                      "\"glu_interleave_size\":32}},{\"type\":\"GroupedLinear\",\"attrs\":{"
                      "\"num_groups\":%d,\"in_features\":1024,\"out_features\":4096,\"bias\":"
                      "false,\"dtype\":\"bfloat16\"}}]}\n",
                      l, l, experts, experts);
    ft_buf_printf(b, "{\"t\":\"recipe\",\"id\":0,\"type\":\"MXFP8BlockScaling\",\"obj\":"
                     "140051234,\"attrs\":{\"fp8_format\":\"E4M3\",\"backward_override\":null}}\n");
    n++;
    int64_t seq = 0, ns = 1000000000;
    int64_t *splits = malloc(sizeof *splits * (size_t)experts);
    double *w = malloc(sizeof *w * (size_t)experts);
    for (int step = 0; n < n_lines; step++) {
        for (int mb = 0; mb < mbs && n < n_lines; mb++) {
            for (int pass = 0; pass < 2 && n < n_lines; pass++) {
                for (int l = 0; l < layers && n < n_lines; l++) {
                    int layer = pass ? layers - 1 - l : l;
                    double sum = 0;
                    for (int e = 0; e < experts; e++)
                        sum += w[e] = urand() * urand() * urand();
                    int64_t left = tokens;
                    for (int e = 0; e < experts; e++) {
                        splits[e] = (int64_t)(tokens * w[e] / sum);
                        left -= splits[e];
                    }
                    splits[0] += left;
                    ft_buf_printf(b,
                                  "{\"t\":\"call\",\"seq\":%lld,\"fuser\":%d,\"recipe\":0,"
                                  "\"grad\":%s,\"input_rg\":true,\"op_rg\":[true,false,true],"
                                  "\"device\":0,\"m_splits\":[",
                                  (long long)seq, layer, pass ? "true" : "false");
                    for (int e = 0; e < experts; e++)
                        ft_buf_printf(b, "%s%lld", e ? "," : "", (long long)splits[e]);
                    ft_buf_printf(b,
                                  "],\"step\":%d,\"mb\":%d,\"phase\":\"%s\",\"ns\":%lld,"
                                  "\"fuse_ns\":%d,\"rebuilt\":%s}\n",
                                  step, mb, pass ? "recompute" : "fwd", (long long)ns,
                                  1000 + (int)(urand() * 3000), pass ? "true" : "false");
                    n++;
                    seq++;
                    ns += 150000;
                    if (pass && n < n_lines) {
                        ft_buf_printf(
                            b, "{\"t\":\"backward\",\"seq\":%lld,\"call\":%lld,\"ns\":%lld}\n",
                            (long long)seq, (long long)(seq - 1), (long long)ns);
                        n++;
                        seq++;
                        ns += 300000;
                    }
                }
            }
        }
    }
    free(splits);
    free(w);
    return n;
}

/* ---- the measured passes ------------------------------------------------------------------ */
static size_t scan(const char *s, size_t len)
{
    size_t n = 0;
    const char *end = s + len;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl) break;
        n++;
        s = nl + 1;
    }
    return n;
}

static size_t jansson_only(const char *s, size_t len)
{
    size_t n = 0;
    const char *end = s + len;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl) break;
        json_error_t je;
        json_t *o = json_loadb(s, (size_t)(nl - s), JSON_REJECT_DUPLICATES, &je);
        if (!o) {
            fprintf(stderr, "bench: parse error %s\n", je.text);
            exit(3);
        }
        json_decref(o);
        n++;
        s = nl + 1;
    }
    return n;
}

static void import_into(const char *s, size_t len, ft_sink *sink)
{
    FILE *in = fmemopen((void *)s, len, "r");
    ft_err err = {0, ""};
    int rc = ft_jsonl_import(in, "bench", sink, NULL, &err);
    fclose(in);
    if (rc) {
        fprintf(stderr, "bench: import failed: %s\n", err.msg);
        exit(3);
    }
}

enum { P_SCAN, P_JANSSON, P_IMPORT, P_WRITER, P_REC, N_PASSES };
static const char *const pass_name[] = {"scan", "jansson", "import", "import+w", "import+rec"};

/* CPU time of this process in seconds: on a shared machine it moves less than wall time. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Run pass p once; returns wall seconds, *cpu gets CPU seconds. */
static double run_pass(int p, const char *s, size_t len, double *cpu)
{
    double c0 = cpu_s();
    uint64_t t0 = ft_now_ns();
    switch (p) {
    case P_SCAN:
        if (!scan(s, len)) exit(3);
        break;
    case P_JANSSON:
        jansson_only(s, len);
        break;
    case P_IMPORT: {
        bench_count n;
        ft_sink sink;
        bench_count_sink(&n, &sink);
        import_into(s, len, &sink);
        break;
    }
    case P_WRITER: {
        FILE *out = fopen("/dev/null", "w");
        ft_jsonl_writer *w = NULL;
        if (!out || ft_jsonl_writer_new(out, &w)) exit(3);
        ft_sink sink;
        ft_jsonl_writer_sink(w, &sink);
        import_into(s, len, &sink);
        ft_jsonl_writer_free(w);
        fclose(out);
        break;
    }
    case P_REC: {
        char path[256];
        const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, sizeof path, "%s/bench_import_%d.ftdb", dir, (int)getpid());
        unlink(path);
        ft_rec *r = NULL;
        ft_err err = {0, ""};
        if (ft_rec_open(path, NULL, &r, &err)) {
            fprintf(stderr, "bench: %s\n", err.msg);
            exit(3);
        }
        ft_sink sink;
        ft_rec_sink(r, &sink);
        import_into(s, len, &sink);
        if (ft_rec_close(r)) exit(3);
        unlink(path);
        break;
    }
    }
    *cpu = cpu_s() - c0;
    return (double)(ft_now_ns() - t0) / 1e9;
}

int main(int argc, char **argv)
{
    int64_t n_lines = 300000, experts = 64;
    if (argc > 1 && (ft_parse_i64(argv[1], &n_lines) || n_lines < 100)) {
        fprintf(stderr, "usage: bench_import [N_LINES >= 100] [EXPERTS]\n");
        return 2;
    }
    if (argc > 2 && (ft_parse_i64(argv[2], &experts) || experts < 1 || experts > 4096)) {
        fprintf(stderr, "usage: bench_import [N_LINES >= 100] [EXPERTS 1..4096]\n");
        return 2;
    }
    ft_buf b = {0};
    size_t n = generate(&b, (size_t)n_lines, (int)experts);
    printf("bench_import: %zu lines, %d experts, %.1f MB, %.0f bytes/line; best of %d, one "
           "core\n",
           n, (int)experts, (double)b.len / 1e6, (double)b.len / (double)n, REPS);

    double best[N_PASSES], best_cpu[N_PASSES];
    int n_passes = N_PASSES;
    for (int p = 0; p < n_passes; p++) {
        best[p] = best_cpu[p] = 1e30;
        for (int r = 0; r < REPS; r++) {
            double cpu, t = run_pass(p, (const char *)b.data, b.len, &cpu);
            if (t < best[p]) best[p] = t;
            if (cpu < best_cpu[p]) best_cpu[p] = cpu;
        }
    }
    printf("%-11s %12s %10s %12s %14s\n", "pass", "lines/s", "MB/s", "lines/cpu-s",
           "vs jansson(cpu)");
    for (int p = 0; p < n_passes; p++)
        printf("%-11s %12.0f %10.1f %12.0f %14.2fx\n", pass_name[p], (double)n / best[p],
               (double)b.len / 1e6 / best[p], (double)n / best_cpu[p],
               best_cpu[P_JANSSON] / best_cpu[p]);
    double rate = (double)n / best_cpu[P_IMPORT];
    printf("target: import >= 500000 lines/s on one core: %s (import %.0f lines per CPU second)\n",
           rate >= 500000 ? "met" : "MISSED", rate);
    ft_buf_free(&b);
    return 0;
}
