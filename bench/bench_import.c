/*
 * bench_import.c - capture-jsonl import speed, lines per CPU second on one core, next to the JSON
 * parsers that could carry it and to Python's json.loads on the same lines in the same run.
 *
 * Input: a capture stream file (`--file X.jsonl`, plain or .zst is not needed: the bench reads
 * plain text), optionally repeated (`--repeat R`: the declarations once, then the call and
 * backward records R times with their seqs shifted, so the stream stays valid); or, without
 * --file, a generated 64-expert stream (grouped-MLP layers with full activation recompute; every
 * call carries its split sizes, step, mb, phase, ns, fuse_ns, rebuilt). Passes, best of REPS:
 *   scan         raw line scan (memchr for '\n'): the floor any line reader pays
 *   jansson      json_loadb + json_decref of every line
 *   yajl         yajl SAX parse of every line into no-op callbacks (when built with yajl)
 *   simdjson-dom simdjson DOM parse of every line (the whole tree)
 *   simdjson-od  simdjson On-Demand, every value of every line read
 *   import-gen   ft_jsonl_import, general path only (jansson), into a dropping sink
 *   import       ft_jsonl_import (fast path) into a dropping sink: parse + validate
 *   import+w     ft_jsonl_import into the JSONL writer sink writing to /dev/null
 *   import+rec   ft_jsonl_import into the recorder through its pre-validated sink (a new .ftdb
 *                in $TMPDIR or /tmp): what `fusertrace import` does
 *   json.loads   python3: json.loads of every line (bytes), time.process_time, best of REPS
 * Each pass prints lines per CPU second (CPU time moves less than wall time on a shared machine;
 * the recorder pass's CPU time excludes time waiting for the disk) and its ratio to json.loads.
 *
 * usage: bench_import [N_LINES (default 300000)] [EXPERTS (default 64)] [--pass NAME]
 *        bench_import --file X.jsonl [--repeat R] [--pass NAME]
 * --pass NAME runs that pass alone, without json.loads (for profiling).
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
#ifdef FT_HAVE_YAJL
#include <yajl/yajl_parse.h>
#endif

#define PADDING 64 /* simdjson reads up to 64 bytes past a line */

size_t bench_simdjson_dom(const char *s, size_t len);
size_t bench_simdjson_ondemand(const char *s, size_t len);

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

/* ---- a stream from a file, repeated -------------------------------------------------------- */
/* The value of the integer after `key` in line s, or -1. */
static int64_t int_after(const char *s, size_t len, const char *key, size_t *at, size_t *end)
{
    size_t k = strlen(key), i = 0;
    while (i + k <= len && memcmp(s + i, key, k))
        i++;
    if (i + k > len) return -1;
    const char *p = s + i;
    p += strlen(key);
    *at = (size_t)(p - s);
    int64_t v = 0;
    while (*at < len && s[*at] >= '0' && s[*at] <= '9')
        v = v * 10 + (s[(*at)++] - '0');
    *end = *at;
    *at = (size_t)(p - s);
    return v;
}

/* The stream of path with its records repeated `repeat` times; returns the number of lines. The
 * records must start as `fusertrace export` writes them: {"t":"call","seq":N, and
 * {"t":"backward","seq":N,"call":M. */
static size_t load_repeated(ft_buf *b, const char *path, int repeat)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    ft_buf in = {0};
    char tmp[1 << 16];
    size_t got;
    while ((got = fread(tmp, 1, sizeof tmp, f)) > 0)
        if (ft_buf_append(&in, tmp, got)) exit(3);
    fclose(f);
    const char *const call_pre = "{\"t\":\"call\",\"seq\":";
    const char *const bw_pre = "{\"t\":\"backward\",\"seq\":";
    int64_t max_seq = -1;
    for (int pass = 0; pass <= repeat; pass++) {
        const char *s = (const char *)in.data, *end = s + in.len;
        int64_t off = pass ? (int64_t)(pass - 1) * (max_seq + 1) : 0;
        while (s < end) {
            const char *nl = memchr(s, '\n', (size_t)(end - s));
            size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
            int is_call = !strncmp(s, call_pre, strlen(call_pre));
            int is_bw = !strncmp(s, bw_pre, strlen(bw_pre));
            size_t at, e;
            if (pass == 0) { /* find the largest seq */
                int64_t v = (is_call || is_bw) ? int_after(s, len, "\"seq\":", &at, &e) : -1;
                if (v > max_seq) max_seq = v;
            } else if (!is_call && !is_bw) {
                if (pass == 1) ft_buf_append(b, s, len), ft_buf_append(b, "\n", 1);
            } else {
                int64_t seq = int_after(s, len, "\"seq\":", &at, &e);
                ft_buf_append(b, s, at);
                ft_buf_printf(b, "%lld", (long long)(seq + off));
                size_t done = e;
                if (is_bw) {
                    size_t at2, e2;
                    int64_t c = int_after(s + done, len - done, "\"call\":", &at2, &e2);
                    if (c < 0) {
                        fprintf(stderr, "bench: backward without call: %.*s\n", (int)len, s);
                        exit(2);
                    }
                    ft_buf_append(b, s + done, at2);
                    ft_buf_printf(b, "%lld", (long long)(c + off));
                    done += e2;
                }
                ft_buf_append(b, s + done, len - done);
                ft_buf_append(b, "\n", 1);
            }
            s += len + 1;
        }
    }
    ft_buf_free(&in);
    size_t n = 0;
    for (size_t i = 0; i < b->len; i++)
        n += b->data[i] == '\n';
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

#ifdef FT_HAVE_YAJL
static int y_null(void *c)
{
    (void)c;
    return 1;
}
static int y_bool(void *c, int b)
{
    *(long *)c += b;
    return 1;
}
static int y_int(void *c, long long v)
{
    *(long *)c += (long)v;
    return 1;
}
static int y_double(void *c, double v)
{
    *(long *)c += (long)v;
    return 1;
}
static int y_str(void *c, const unsigned char *s, size_t n)
{
    (void)s;
    *(long *)c += (long)n;
    return 1;
}
static int y_map(void *c)
{
    (void)c;
    return 1;
}
static size_t yajl_only(const char *s, size_t len)
{
    static const yajl_callbacks cb = {y_null, y_bool, y_int, y_double, NULL, y_str,
                                      y_map,  y_str,  y_map, y_map,    y_map};
    long acc = 0;
    size_t n = 0;
    const char *end = s + len;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl) break;
        yajl_handle h = yajl_alloc(&cb, NULL, &acc);
        if (yajl_parse(h, (const unsigned char *)s, (size_t)(nl - s)) != yajl_status_ok ||
            yajl_complete_parse(h) != yajl_status_ok) {
            fprintf(stderr, "bench: yajl parse error\n");
            exit(3);
        }
        yajl_free(h);
        n++;
        s = nl + 1;
    }
    return n + (acc == 42);
}
#endif

static void import_into(const char *s, size_t len, ft_sink *sink, unsigned flags)
{
    FILE *in = fmemopen((void *)s, len, "r");
    ft_err err = {0, ""};
    int rc = ft_jsonl_import_ex(in, "bench", sink, NULL, flags, &err);
    fclose(in);
    if (rc) {
        fprintf(stderr, "bench: import failed: %s\n", err.msg);
        exit(3);
    }
}

enum { P_SCAN, P_JANSSON, P_YAJL, P_DOM, P_OD, P_IMPORT_GEN, P_IMPORT, P_WRITER, P_REC, N_PASSES };
static const char *const pass_name[] = {"scan",         "jansson",     "yajl",
                                        "simdjson-dom", "simdjson-od", "import-gen",
                                        "import",       "import+w",    "import+rec"};

/* CPU time of this process in seconds: on a shared machine it moves less than wall time. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Run pass p once; returns CPU seconds, or -1 when the pass is not built. */
static double run_pass(int p, const char *s, size_t len, size_t n_lines)
{
    double c0 = cpu_s();
    size_t n = n_lines;
    switch (p) {
    case P_SCAN:
        n = scan(s, len);
        break;
    case P_JANSSON:
        n = jansson_only(s, len);
        break;
    case P_YAJL:
#ifdef FT_HAVE_YAJL
        n = yajl_only(s, len);
        if (n == n_lines + 1) n = n_lines;
        break;
#else
        return -1;
#endif
    case P_DOM:
        n = bench_simdjson_dom(s, len);
        break;
    case P_OD:
        n = bench_simdjson_ondemand(s, len);
        break;
    case P_IMPORT_GEN:
    case P_IMPORT: {
        bench_count cnt;
        ft_sink sink;
        bench_count_sink(&cnt, &sink);
        import_into(s, len, &sink, p == P_IMPORT_GEN ? FT_JSONL_NO_FAST_PATH : 0);
        break;
    }
    case P_WRITER: {
        FILE *out = fopen("/dev/null", "w");
        ft_jsonl_writer *w = NULL;
        if (!out || ft_jsonl_writer_new(out, &w)) exit(3);
        ft_sink sink;
        ft_jsonl_writer_sink(w, &sink);
        import_into(s, len, &sink, 0);
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
        ft_rec_sink_prevalidated(r, &sink);
        import_into(s, len, &sink, 0);
        if (ft_rec_close(r)) exit(3);
        unlink(path);
        break;
    }
    }
    if (n != n_lines) {
        fprintf(stderr, "bench: pass %s saw %zu lines of %zu\n", pass_name[p], n, n_lines);
        exit(3);
    }
    return cpu_s() - c0;
}

/* Python's json.loads over the same lines, best of REPS in CPU seconds (-1 if python3 fails). */
static double python_json_loads(const char *s, size_t len, size_t n_lines)
{
    char path[256];
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/bench_import_%d.jsonl", dir, (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(s, 1, len, f) != len || fclose(f)) exit(3);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, sys, time\n"
             "ls = open(sys.argv[1], \"rb\").read().split(b\"\\n\")\n"
             "ls = ls[:-1] if ls and not ls[-1] else ls\n"
             "best = 1e30\n"
             "for r in range(%d):\n"
             "    t = time.process_time()\n"
             "    for l in ls: json.loads(l)\n"
             "    best = min(best, time.process_time() - t)\n"
             "print(len(ls), best)' %s",
             REPS, path);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    double t = -1;
    if (!p || fscanf(p, "%zu %lf", &n, &t) != 2) t = -1;
    if (p) pclose(p);
    unlink(path);
    if (t > 0 && n != n_lines) {
        fprintf(stderr, "bench: python saw %zu lines of %zu\n", n, n_lines);
        exit(3);
    }
    return t;
}

int main(int argc, char **argv)
{
    int64_t n_lines = 300000, experts = 64, repeat = 1;
    const char *file = NULL, *only = NULL;
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--file") && i + 1 < argc) {
            file = argv[++i];
        } else if (!strcmp(argv[i], "--pass") && i + 1 < argc) {
            only = argv[++i];
        } else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            if (ft_parse_i64(argv[++i], &repeat) || repeat < 1 || repeat > 100000) goto usage;
        } else if (pos == 0 && !ft_parse_i64(argv[i], &n_lines) && n_lines >= 100) {
            pos++;
        } else if (pos == 1 && !ft_parse_i64(argv[i], &experts) && experts >= 1 &&
                   experts <= 4096) {
            pos++;
        } else {
            goto usage;
        }
    }
    ft_buf b = {0};
    size_t n;
    if (file) {
        n = load_repeated(&b, file, (int)repeat);
        printf("bench_import: %s x%d: %zu lines, %.1f MB, %.0f bytes/line; best of %d, one "
               "core\n",
               file, (int)repeat, n, (double)b.len / 1e6, (double)b.len / (double)n, REPS);
    } else {
        n = generate(&b, (size_t)n_lines, (int)experts);
        printf("bench_import: %zu generated lines, %d experts, %.1f MB, %.0f bytes/line; best of "
               "%d, one core\n",
               n, (int)experts, (double)b.len / 1e6, (double)b.len / (double)n, REPS);
    }
    if (ft_buf_reserve(&b, PADDING)) exit(3);
    memset(b.data + b.len, ' ', PADDING);

    double py = only ? -1 : python_json_loads((const char *)b.data, b.len, n);
    double best[N_PASSES];
    for (int p = 0; p < N_PASSES; p++) {
        best[p] = 1e30;
        if (only && strcmp(only, pass_name[p])) {
            best[p] = -1;
            continue;
        }
        for (int r = 0; r < REPS; r++) {
            double cpu = run_pass(p, (const char *)b.data, b.len, n);
            if (cpu < 0) {
                best[p] = -1;
                break;
            }
            if (cpu < best[p]) best[p] = cpu;
        }
    }
    printf("%-13s %14s %10s %14s\n", "pass", "lines/cpu-s", "MB/cpu-s", "vs json.loads");
    if (py > 0)
        printf("%-13s %14.0f %10.1f %13.2fx\n", "json.loads", (double)n / py,
               (double)b.len / 1e6 / py, 1.0);
    else
        printf("%-13s %14s\n", "json.loads", "(python3 failed)");
    for (int p = 0; p < N_PASSES; p++) {
        if (best[p] < 0) {
            printf("%-13s %14s\n", pass_name[p], "(not built)");
            continue;
        }
        printf("%-13s %14.0f %10.1f", pass_name[p], (double)n / best[p],
               (double)b.len / 1e6 / best[p]);
        if (py > 0)
            printf(" %13.2fx\n", py / best[p]);
        else
            printf("\n");
    }
    if (only) {
        ft_buf_free(&b);
        return 0;
    }
    double rate = (double)n / best[P_REC];
    printf("target: import >= 500000 lines/s on one core and >= 6x json.loads: %s "
           "(import+rec %.0f lines per CPU second, %.2fx json.loads)\n",
           rate >= 500000 && (py <= 0 || py / best[P_REC] >= 6) ? "met" : "MISSED", rate,
           py > 0 ? py / best[P_REC] : 0.0);
    ft_buf_free(&b);
    return 0;

usage:
    fprintf(stderr, "usage: bench_import [N_LINES >= 100] [EXPERTS 1..4096] [--pass NAME]\n"
                    "       bench_import --file X.jsonl [--repeat R] [--pass NAME]\n");
    return 2;
}
