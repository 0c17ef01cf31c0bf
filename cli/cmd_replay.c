/*
 * cmd_replay.c - `fusertrace replay TRACE...`: replay traces (one per rank) under plan-cache
 * policies and print one reduced report (text table, JSON or CSV); with --numerics, also run the
 * sampled grouped-MLP calls' chosen and fresh plans (ft_numerics.h) and add the numerics section.
 */
#include "cli.h"
#include "ft_replay.h"
#include "ft_report.h"
#include "ft_numerics.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: fusertrace replay TRACE... [--policy LIST|all] [--capacity N] [--env K=V]...\n"
        "                         [--json | --csv] [--per-call FILE] [--explain]\n"
        "                         [--captured POLICY] [--threads N]\n"
        "                         [--numerics cpu|cuda [--sample N | --all] [--shrink K]\n"
        "                          [--seed S]]\n"
        "\n"
        "Replays every call of the traces (one per rank, reduced into one report) through a\n"
        "model of TransformerEngine's fusion-plan cache under each policy, in one pass.\n"
        "  --policy LIST    comma-separated policies, or all (default)\n"
        "  --capacity N     LRU capacity of dict stores per fuser (default unbounded)\n"
        "  --env K=V        override a key of the trace's env (device_cc, NVTE_*, ...)\n"
        "  --json, --csv    machine-readable summary (CSV: summary and per-step rows)\n"
        "  --per-call FILE  one JSON line per call and policy (- for stdout)\n"
        "  --explain        for every build, name the key component that changed\n"
        "  --captured P     the policy the captured run used (default: the header's\n"
        "                   fuser_cache field, else its te_version)\n"
        "  --threads N      worker threads, one trace each (default: one per core); with\n"
        "                   --numerics, threads running sampled calls (results do not\n"
        "                   depend on it)\n"
        "  --numerics B     numerical replay on back end cpu or cuda: for sampled grouped-MLP\n"
        "                   calls, run every policy's chosen plan and quantizer state and the\n"
        "                   fresh plan (forward, and backward for grad calls) against a float64\n"
        "                   reference; reports the harmless and quant bands per policy. cuda\n"
        "                   runs what the CUDA back end supports on the device, the rest on the\n"
        "                   CPU reference (the report counts both); no device: exit 3\n"
        "  --sample N       at most N calls per trace (default 64), in call order: the first\n"
        "                   call of every situation (what the fresh plan and each policy's\n"
        "                   choice run, which raise), then more of each up to N/8\n"
        "  --all            every grouped-MLP call\n"
        "  --shrink K       divide hidden sizes and split sizes by K (default 1: the real\n"
        "                   sizes, slow on the CPU for large models; 8 or 16 for a quick look)\n"
        "  --seed S         input seed (default 1)\n"
        "\npolicies:\n");
    for (uint32_t i = 0; i < ft_policy_count(); i++)
        fprintf(f, "  %-16s %s\n", ft_policy_name(i), ft_policy_summary(i));
}

static int parse_u32(const char *flag, const char *s, uint32_t *out)
{
    int64_t v;
    if (ft_parse_i64(s, &v) || v < 0 || v > UINT32_MAX) {
        fprintf(stderr, "fusertrace replay: %s wants a non-negative integer, got '%s'\n", flag, s);
        return FT_EXIT_INPUT;
    }
    *out = (uint32_t)v;
    return FT_EXIT_OK;
}

int cmd_replay(int argc, char **argv)
{
    const char **paths = ft_calloc((size_t)argc + 1, sizeof *paths);
    ft_env_kv *env = ft_calloc((size_t)argc + 1, sizeof *env);
    char **env_keys = ft_calloc((size_t)argc + 1, sizeof *env_keys);
    uint32_t n_paths = 0, n_env = 0, pol[FT_MAX_POLICIES], n_pol = 0;
    int format = FT_REPORT_TEXT, explain = 0, status = FT_EXIT_OK;
    const char *per_call_path = NULL;
    FILE *per_call = NULL;
    ft_replay_opts o = {0};
    ft_err err = {0};
    const char *numerics = NULL;
    int sample_set = 0, all = 0;
    ft_numerics_opts no = {.shrink = 1, .sample = 64, .seed = 1};
    ft_replay_result *res = ft_malloc(sizeof *res);
    ft_numerics_result *nres = ft_malloc(sizeof *nres);
    if (!paths || !env || !env_keys || !res || !nres) {
        fprintf(stderr, "fusertrace replay: out of memory\n");
        status = FT_EXIT_INTERNAL;
        goto done;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            goto done;
        } else if (!strcmp(a, "--policy") && has_val) {
            int rc = ft_policy_parse_list(argv[++i], pol, &n_pol, &err);
            if (rc) {
                fprintf(stderr, "fusertrace replay: --policy: %s\n", ft_err_msg(&err));
                status = FT_EXIT_INPUT;
                goto done;
            }
        } else if (!strcmp(a, "--capacity") && has_val) {
            if ((status = parse_u32(a, argv[++i], &o.capacity))) goto done;
        } else if (!strcmp(a, "--threads") && has_val) {
            if ((status = parse_u32(a, argv[++i], &o.n_threads))) goto done;
        } else if (!strcmp(a, "--env") && has_val) {
            const char *kv = argv[++i], *eq = strchr(kv, '=');
            if (!eq || eq == kv) {
                fprintf(stderr, "fusertrace replay: --env wants KEY=VALUE, got '%s'\n", kv);
                status = FT_EXIT_INPUT;
                goto done;
            }
            env_keys[n_env] = ft_strndup(kv, (size_t)(eq - kv));
            if (!env_keys[n_env]) {
                status = FT_EXIT_INTERNAL;
                goto done;
            }
            env[n_env].key = env_keys[n_env];
            env[n_env].value = eq + 1;
            n_env++;
        } else if (!strcmp(a, "--json")) {
            format = FT_REPORT_JSON;
        } else if (!strcmp(a, "--csv")) {
            format = FT_REPORT_CSV;
        } else if (!strcmp(a, "--per-call") && has_val) {
            per_call_path = argv[++i];
        } else if (!strcmp(a, "--explain")) {
            explain = 1;
        } else if (!strcmp(a, "--captured") && has_val) {
            uint32_t idx;
            o.captured = argv[++i];
            if (ft_policy_find(o.captured, &idx, &err)) {
                fprintf(stderr, "fusertrace replay: --captured: %s\n", ft_err_msg(&err));
                status = FT_EXIT_INPUT;
                goto done;
            }
        } else if (!strcmp(a, "--numerics") && has_val) {
            numerics = argv[++i];
            if (strcmp(numerics, "cpu") && strcmp(numerics, "cuda")) {
                fprintf(stderr, "fusertrace replay: --numerics wants cpu or cuda, got '%s'\n",
                        numerics);
                status = FT_EXIT_INPUT;
                goto done;
            }
        } else if (!strcmp(a, "--sample") && has_val) {
            if ((status = parse_u32(a, argv[++i], &no.sample))) goto done;
            if (!no.sample) {
                fprintf(stderr, "fusertrace replay: --sample wants N >= 1 (--all for every "
                                "call)\n");
                status = FT_EXIT_INPUT;
                goto done;
            }
            sample_set = 1;
        } else if (!strcmp(a, "--all")) {
            all = 1;
        } else if (!strcmp(a, "--shrink") && has_val) {
            if ((status = parse_u32(a, argv[++i], &no.shrink))) goto done;
            if (!no.shrink) {
                fprintf(stderr, "fusertrace replay: --shrink wants K >= 1\n");
                status = FT_EXIT_INPUT;
                goto done;
            }
        } else if (!strcmp(a, "--seed") && has_val) {
            int64_t v;
            if (ft_parse_i64(argv[++i], &v) || v < 0) {
                fprintf(stderr,
                        "fusertrace replay: --seed wants a non-negative integer, got '%s'\n",
                        argv[i]);
                status = FT_EXIT_INPUT;
                goto done;
            }
            no.seed = (uint64_t)v;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "fusertrace replay: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            status = FT_EXIT_INPUT;
            goto done;
        } else {
            paths[n_paths++] = a;
        }
    }
    if (!n_paths) {
        fprintf(stderr, "fusertrace replay: no trace given\n");
        usage(stderr);
        status = FT_EXIT_INPUT;
        goto done;
    }
    if (!numerics && (sample_set || all || no.shrink != 1 || no.seed != 1)) {
        fprintf(stderr, "fusertrace replay: --sample, --all, --shrink and --seed go with "
                        "--numerics cpu|cuda\n");
        status = FT_EXIT_INPUT;
        goto done;
    }
    if (sample_set && all) {
        fprintf(stderr, "fusertrace replay: --sample and --all exclude each other\n");
        status = FT_EXIT_INPUT;
        goto done;
    }
    if (numerics && format == FT_REPORT_CSV) {
        fprintf(stderr, "fusertrace replay: --numerics has no CSV form (use --json or text)\n");
        status = FT_EXIT_INPUT;
        goto done;
    }
    if (all) no.sample = 0;
    if (numerics) {
        no.backend = strcmp(numerics, "cuda") ? FT_NUMERICS_CPU : FT_NUMERICS_CUDA;
        no.n_threads = o.n_threads;
    }
    if (per_call_path) {
        per_call = strcmp(per_call_path, "-") ? fopen(per_call_path, "w") : stdout;
        if (!per_call) {
            fprintf(stderr, "fusertrace replay: cannot write '%s'\n", per_call_path);
            status = FT_EXIT_INTERNAL;
            goto done;
        }
    }
    o.policies = n_pol ? pol : NULL;
    o.n_policies = n_pol;
    o.env = env;
    o.n_env = n_env;
    o.per_call = per_call;
    o.explain = explain ? stdout : NULL;
    int rc = numerics ? ft_numerics_replay_traces(paths, n_paths, &o, &no, res, nres, &err)
                      : ft_replay_traces(paths, n_paths, &o, res, &err);
    if (rc) {
        fprintf(stderr, "fusertrace replay: %s\n", ft_err_msg(&err));
        status = cli_exit_code(rc);
        goto done;
    }
    if (explain) fputc('\n', stdout);
    rc = ft_report_write(stdout, res, numerics ? nres : NULL, format, &err);
    if (!rc && format == FT_REPORT_TEXT) {
        fputc('\n', stdout);
        rc = ft_report_reading(stdout, res, &err);
    }
    if (rc) {
        fprintf(stderr, "fusertrace replay: %s\n", ft_err_msg(&err));
        status = FT_EXIT_INTERNAL;
    }
done:
    if (per_call && per_call != stdout && fclose(per_call)) {
        fprintf(stderr, "fusertrace replay: writing '%s' failed\n", per_call_path);
        status = FT_EXIT_INTERNAL;
    }
    for (uint32_t k = 0; env_keys && k < n_env; k++)
        ft_free(env_keys[k]);
    ft_free(env_keys);
    ft_free(env);
    ft_free(paths);
    ft_free(res);
    ft_free(nres);
    return status;
}
