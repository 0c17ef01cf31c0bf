/*
 * report.c - the replay summary as a text table, a JSON document or one tidy CSV.
 *
 * JSON: {"traces","calls","backwards","model":{...},"captured":{...},
 *        "policies":[{...,"steps":[..]}], "numerics":{...} (when it ran; report/numerics.c)}
 * CSV: one table; column `record` is "summary" (one row per policy) or "step" (hit rate per step
 * bucket, for plotting), so a plotting tool can filter on it.
 * Modeled framework time: where the trace carries captured `rebuilt` and `fuse_ns`, a policy's
 * time is builds x (captured mean fuse_ns of builds) + hits x (captured mean of non-builds); the
 * delta is against the captured total.
 */
#include "report_int.h"

#include <string.h>

static double ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 0.0;
}

/* a/b in percent, rounded down to 0.01 so that 99.998% does not print as 100.00% */
static double pct_floor(uint64_t a, uint64_t b)
{
    if (!b) return 0.0;
    if (a <= UINT64_MAX / 10000) return (double)(a * 10000 / b) / 100.0;
    return (double)(uint64_t)((double)a / (double)b * 10000.0) / 100.0; /* a is huge: no wrap */
}

double ft_report_modeled_ns(const ft_replay_result *r, const ft_policy_result *p)
{
    if (!r->cap_build_n) return -1.0;
    double mb = (double)r->cap_build_fuse_ns / (double)r->cap_build_n;
    double mh = r->cap_hit_n ? (double)r->cap_hit_fuse_ns / (double)r->cap_hit_n : 0.0;
    return (double)p->builds * mb + (double)p->hits * mh;
}

static double captured_total_ns(const ft_replay_result *r)
{
    return (double)(r->cap_build_fuse_ns + r->cap_hit_fuse_ns);
}

static double ns_per_build(const ft_replay_result *r)
{
    return r->model_builds ? (double)r->model_build_ns / (double)r->model_builds : 0.0;
}

/* ---- text ------------------------------------------------------------------------------------ */
static int write_text(FILE *f, const ft_replay_result *r)
{
    fprintf(f, "fusertrace replay: %u trace%s, %llu calls, %llu backward records\n", r->n_traces,
            r->n_traces == 1 ? "" : "s", (unsigned long long)r->calls,
            (unsigned long long)r->backwards);
    fprintf(f, "\n%-16s %10s %10s %10s %7s %10s %9s %9s %9s %9s %9s %8s\n", "policy", "calls",
            "builds", "hits", "hit%", "resets", "harmless", "slower", "quant", "raises", "qdrift",
            "ns/call");
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        fprintf(
            f, "%-16s %10llu %10llu %10llu %6.2f%% %10llu %9llu %9llu %9llu %9llu %9llu %8.1f\n",
            ft_policy_name(q->policy), (unsigned long long)q->calls, (unsigned long long)q->builds,
            (unsigned long long)q->hits, pct_floor(q->hits, q->calls),
            (unsigned long long)q->resets, (unsigned long long)q->stale[FT_STALE_HARMLESS],
            (unsigned long long)q->stale[FT_STALE_SLOWER],
            (unsigned long long)q->stale[FT_STALE_QUANT],
            (unsigned long long)q->stale[FT_STALE_RAISES], (unsigned long long)q->qdrift,
            ratio(q->loop_ns, q->calls));
    }
    fprintf(f, "\nstale columns: calls that ran a plan other than a fresh build's, by consequence; "
               "qdrift: fresh plan, but quantizers differ from a fresh fuser's.\n");
    fprintf(f,
            "ns/call: measured key + lookup per call (oracle %.1f ns/call extra); plan build "
            "(fusion passes) %.0f ns each over %llu builds.\n",
            ratio(r->oracle_ns, r->calls), ns_per_build(r), (unsigned long long)r->model_builds);
    fprintf(f, "modeled plan-build time in this replayer (builds x ns/build):");
    for (uint32_t p = 0; p < r->n_policies; p++)
        fprintf(f, "%s %s %.3f ms", p ? "," : "", ft_policy_name(r->pol[p].policy),
                (double)r->pol[p].builds * ns_per_build(r) / 1e6);
    fprintf(f, "\n");
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        for (int i = 0; i < FT_MAX_RAISE_TEXTS; i++)
            if (q->raises[i].count)
                fprintf(f, "%s raises on %llu calls: \"%s\"\n", ft_policy_name(q->policy),
                        (unsigned long long)q->raises[i].count, q->raises[i].text);
        if (q->evictions)
            fprintf(f, "%s: %llu LRU evictions\n", ft_policy_name(q->policy),
                    (unsigned long long)q->evictions);
    }
    if (r->fresh_raises) {
        fprintf(f, "%llu calls raise in TE whatever the policy (their fresh plan raises):\n",
                (unsigned long long)r->fresh_raises);
        for (int i = 0; i < FT_MAX_RAISE_TEXTS; i++)
            if (r->fresh_raise_texts[i].count)
                fprintf(f, "  %llu x \"%s\"\n", (unsigned long long)r->fresh_raise_texts[i].count,
                        r->fresh_raise_texts[i].text);
    }
    int any_cap = 0;
    for (uint32_t p = 0; p < r->n_policies; p++)
        any_cap |= r->pol[p].cap_calls > 0;
    if (any_cap) {
        fprintf(f,
                "\ncaptured run: %s decisions expected; agreement of each policy with the "
                "captured `rebuilt`:\n",
                r->captured_policy >= 0 ? ft_policy_name((uint32_t)r->captured_policy)
                                        : "unknown TE version,");
        for (uint32_t p = 0; p < r->n_policies; p++) {
            const ft_policy_result *q = &r->pol[p];
            fprintf(f, "  %-16s %6.2f%% of %llu calls%s", ft_policy_name(q->policy),
                    100.0 * ratio(q->cap_agree, q->cap_calls), (unsigned long long)q->cap_calls,
                    (int)q->policy == r->captured_policy ? "  <- captured version" : "");
            if (q->first_disagree_seq >= 0)
                fprintf(f, " (first disagreement at seq %lld)", (long long)q->first_disagree_seq);
            fputc('\n', f);
        }
    }
    if (r->cap_build_n) {
        double cap = captured_total_ns(r);
        fprintf(f,
                "\nmodeled framework time (captured mean fuse_ns: build %.0f ns, hit %.0f ns; "
                "captured total %.3f ms):\n",
                ratio(r->cap_build_fuse_ns, r->cap_build_n),
                ratio(r->cap_hit_fuse_ns, r->cap_hit_n), cap / 1e6);
        for (uint32_t p = 0; p < r->n_policies; p++) {
            double m = ft_report_modeled_ns(r, &r->pol[p]);
            fprintf(f, "  %-16s %10.3f ms  (%+.3f ms vs captured)\n",
                    ft_policy_name(r->pol[p].policy), m / 1e6, (m - cap) / 1e6);
        }
    }
    return ferror(f) ? FT_EIO : FT_OK;
}

/* ---- JSON ------------------------------------------------------------------------------------ */
static json_t *policy_json(const ft_replay_result *r, const ft_policy_result *q)
{
    json_t *o = json_object();
    json_t *st = json_object(), *steps = json_array(), *raises = json_array();
    for (int k = 0; k < FT_STALE_COUNT; k++)
        json_object_set_new(st, ft_stale_name((ft_stale)k), json_integer((json_int_t)q->stale[k]));
    for (uint32_t b = 0; b < q->steps.n; b++) {
        if (!q->steps.calls[b]) continue;
        json_t *s = json_object();
        json_object_set_new(s, "step", json_integer((json_int_t)((int64_t)b * q->steps.width)));
        json_object_set_new(
            s, "step_end",
            json_integer((json_int_t)((int64_t)b * q->steps.width + (q->steps.width - 1))));
        json_object_set_new(s, "calls", json_integer((json_int_t)q->steps.calls[b]));
        json_object_set_new(s, "hits", json_integer((json_int_t)q->steps.hits[b]));
        json_object_set_new(s, "hit_rate", json_real(ratio(q->steps.hits[b], q->steps.calls[b])));
        json_array_append_new(steps, s);
    }
    for (int i = 0; i < FT_MAX_RAISE_TEXTS; i++) {
        if (!q->raises[i].count) continue;
        json_t *x = json_object();
        json_object_set_new(x, "text", json_string(q->raises[i].text));
        json_object_set_new(x, "calls", json_integer((json_int_t)q->raises[i].count));
        json_array_append_new(raises, x);
    }
    json_object_set_new(o, "policy", json_string(ft_policy_name(q->policy)));
    json_object_set_new(o, "summary", json_string(ft_policy_summary(q->policy)));
    json_object_set_new(o, "calls", json_integer((json_int_t)q->calls));
    json_object_set_new(o, "builds", json_integer((json_int_t)q->builds));
    json_object_set_new(o, "hits", json_integer((json_int_t)q->hits));
    json_object_set_new(o, "hit_rate", json_real(ratio(q->hits, q->calls)));
    json_object_set_new(o, "resets", json_integer((json_int_t)q->resets));
    json_object_set_new(o, "stale", st);
    json_object_set_new(o, "qdrift", json_integer((json_int_t)q->qdrift));
    json_object_set_new(o, "raises", raises);
    json_object_set_new(o, "ns_per_call", json_real(ratio(q->loop_ns, q->calls)));
    json_object_set_new(o, "modeled_build_ns", json_real((double)q->builds * ns_per_build(r)));
    json_object_set_new(o, "max_plans_per_fuser", json_integer((json_int_t)q->max_entries));
    json_object_set_new(o, "evictions", json_integer((json_int_t)q->evictions));
    if (q->cap_calls) {
        json_t *c = json_object();
        json_object_set_new(c, "calls", json_integer((json_int_t)q->cap_calls));
        json_object_set_new(c, "agree", json_integer((json_int_t)q->cap_agree));
        json_object_set_new(c, "agreement", json_real(ratio(q->cap_agree, q->cap_calls)));
        json_object_set_new(c, "first_disagree_seq",
                            q->first_disagree_seq >= 0 ? json_integer(q->first_disagree_seq)
                                                       : json_null());
        json_object_set_new(o, "captured", c);
    }
    double m = ft_report_modeled_ns(r, q);
    if (m >= 0) {
        json_object_set_new(o, "modeled_fuse_ns", json_real(m));
        json_object_set_new(o, "modeled_delta_ns", json_real(m - captured_total_ns(r)));
    }
    json_object_set_new(o, "steps", steps);
    return o;
}

static int write_json(FILE *f, const ft_replay_result *r, const ft_numerics_result *nres)
{
    json_t *root = json_object(), *pols = json_array(), *model = json_object();
    json_t *cap = json_object();
    if (!root || !pols || !model || !cap) {
        json_decref(root);
        json_decref(pols);
        json_decref(model);
        json_decref(cap);
        return FT_ENOMEM;
    }
    json_object_set_new(root, "traces", json_integer(r->n_traces));
    json_object_set_new(root, "calls", json_integer((json_int_t)r->calls));
    json_object_set_new(root, "backwards", json_integer((json_int_t)r->backwards));
    json_object_set_new(root, "fusers", json_integer((json_int_t)r->n_fusers));
    json_object_set_new(root, "recipes", json_integer((json_int_t)r->n_recipes));
    json_object_set_new(model, "builds", json_integer((json_int_t)r->model_builds));
    json_object_set_new(model, "ns_per_build", json_real(ns_per_build(r)));
    json_object_set_new(model, "oracle_ns_per_call", json_real(ratio(r->oracle_ns, r->calls)));
    json_object_set_new(model, "wall_ns", json_integer((json_int_t)r->wall_ns));
    json_object_set_new(root, "model", model);
    json_object_set_new(cap, "policy",
                        r->captured_policy >= 0
                            ? json_string(ft_policy_name((uint32_t)r->captured_policy))
                            : json_null());
    json_object_set_new(cap, "builds_timed", json_integer((json_int_t)r->cap_build_n));
    json_object_set_new(cap, "hits_timed", json_integer((json_int_t)r->cap_hit_n));
    json_object_set_new(cap, "build_mean_ns",
                        json_real(ratio(r->cap_build_fuse_ns, r->cap_build_n)));
    json_object_set_new(cap, "hit_mean_ns", json_real(ratio(r->cap_hit_fuse_ns, r->cap_hit_n)));
    json_object_set_new(cap, "total_fuse_ns", json_real(captured_total_ns(r)));
    json_object_set_new(root, "captured", cap);
    json_t *fr = json_object(), *frt = json_array();
    for (int i = 0; i < FT_MAX_RAISE_TEXTS; i++) {
        if (!r->fresh_raise_texts[i].count) continue;
        json_t *x = json_object();
        json_object_set_new(x, "text", json_string(r->fresh_raise_texts[i].text));
        json_object_set_new(x, "calls", json_integer((json_int_t)r->fresh_raise_texts[i].count));
        json_array_append_new(frt, x);
    }
    json_object_set_new(fr, "calls", json_integer((json_int_t)r->fresh_raises));
    json_object_set_new(fr, "texts", frt);
    json_object_set_new(root, "fresh_raises", fr);
    for (uint32_t p = 0; p < r->n_policies; p++)
        json_array_append_new(pols, policy_json(r, &r->pol[p]));
    json_object_set_new(root, "policies", pols);
    if (nres) json_object_set_new(root, "numerics", report_numerics_json(nres));
    int rc = json_dumpf(root, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    fputc('\n', f);
    json_decref(root);
    return rc || ferror(f) ? FT_EIO : FT_OK;
}

/* ---- CSV ------------------------------------------------------------------------------------- */
static int write_csv(FILE *f, const ft_replay_result *r)
{
    fprintf(f, "record,policy,step,step_end,calls,builds,hits,hit_rate,resets,stale_harmless,"
               "stale_slower,stale_quant,stale_raises,qdrift,ns_per_call,captured_agreement,"
               "modeled_fuse_ns\n");
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        double m = ft_report_modeled_ns(r, q);
        fprintf(f, "summary,%s,,,%llu,%llu,%llu,%.6f,%llu,%llu,%llu,%llu,%llu,%llu,%.2f,",
                ft_policy_name(q->policy), (unsigned long long)q->calls,
                (unsigned long long)q->builds, (unsigned long long)q->hits,
                ratio(q->hits, q->calls), (unsigned long long)q->resets,
                (unsigned long long)q->stale[FT_STALE_HARMLESS],
                (unsigned long long)q->stale[FT_STALE_SLOWER],
                (unsigned long long)q->stale[FT_STALE_QUANT],
                (unsigned long long)q->stale[FT_STALE_RAISES], (unsigned long long)q->qdrift,
                ratio(q->loop_ns, q->calls));
        if (q->cap_calls) fprintf(f, "%.6f", ratio(q->cap_agree, q->cap_calls));
        fputc(',', f);
        if (m >= 0) fprintf(f, "%.0f", m);
        fputc('\n', f);
    }
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        for (uint32_t b = 0; b < q->steps.n; b++) {
            if (!q->steps.calls[b]) continue;
            fprintf(f, "step,%s,%lld,%lld,%llu,%llu,%llu,%.6f,,,,,,,,,\n",
                    ft_policy_name(q->policy), (long long)((int64_t)b * q->steps.width),
                    (long long)((int64_t)b * q->steps.width + (q->steps.width - 1)),
                    (unsigned long long)q->steps.calls[b],
                    (unsigned long long)(q->steps.calls[b] - q->steps.hits[b]),
                    (unsigned long long)q->steps.hits[b],
                    ratio(q->steps.hits[b], q->steps.calls[b]));
        }
    }
    return ferror(f) ? FT_EIO : FT_OK;
}

int ft_report_write(FILE *f, const ft_replay_result *r, const ft_numerics_result *nres, int format,
                    ft_err *err)
{
    int rc;
    switch (format) {
    case FT_REPORT_TEXT:
        rc = write_text(f, r);
        if (!rc && nres) {
            fputc('\n', f);
            return ft_report_numerics(f, nres, err);
        }
        break;
    case FT_REPORT_JSON:
        rc = write_json(f, r, nres);
        break;
    case FT_REPORT_CSV:
        if (nres) return ft_err_set(err, FT_EINVAL, "the numerics have no CSV form");
        rc = write_csv(f, r);
        break;
    default:
        return ft_err_set(err, FT_EINVAL, "unknown report format %d", format);
    }
    if (rc) ft_err_set(err, rc, "writing the report failed");
    return rc;
}

/* ---- plain-language reading ------------------------------------------------------------------ */
static const ft_policy_result *find_pol(const ft_replay_result *r, const char *name)
{
    uint32_t idx;
    if (ft_policy_find(name, &idx, NULL)) return NULL;
    for (uint32_t p = 0; p < r->n_policies; p++)
        if (r->pol[p].policy == idx) return &r->pol[p];
    return NULL;
}

static uint64_t n_stale(const ft_policy_result *q)
{
    return q->calls - q->stale[FT_STALE_NONE];
}

int ft_report_reading(FILE *f, const ft_replay_result *r, ft_err *err)
{
    if (!r->n_policies || !r->calls) {
        fprintf(f, "- The trace holds no calls.\n");
        return ferror(f) ? ft_err_set(err, FT_EIO, "writing the reading failed") : FT_OK;
    }
    /* fewest builds overall, and among policies that never ran a stale plan */
    const ft_policy_result *least = NULL, *least_safe = NULL, *most = NULL;
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        if (!least || q->builds < least->builds) least = q;
        if (!most || q->builds > most->builds) most = q;
        if (!n_stale(q) && (!least_safe || q->builds < least_safe->builds)) least_safe = q;
    }
    fprintf(f, "- Fewest plan builds: ");
    int first = 1;
    for (uint32_t p = 0; p < r->n_policies; p++)
        if (r->pol[p].builds == least->builds) {
            fprintf(f, "%s%s", first ? "" : ", ", ft_policy_name(r->pol[p].policy));
            first = 0;
        }
    fprintf(f, " (%llu builds for %llu calls, %.2f%% hits); most: %s (%llu).\n",
            (unsigned long long)least->builds, (unsigned long long)least->calls,
            pct_floor(least->hits, least->calls), ft_policy_name(most->policy),
            (unsigned long long)most->builds);
    if (least_safe && least_safe->builds == least->builds && n_stale(least))
        fprintf(f, "- %s builds as few and never runs a stale plan.\n",
                ft_policy_name(least_safe->policy));
    else if (least_safe && least_safe->builds != least->builds)
        fprintf(f, "- Fewest builds without ever running a stale plan: %s (%llu builds).\n",
                ft_policy_name(least_safe->policy), (unsigned long long)least_safe->builds);
    const ft_policy_result *old = find_pol(r, "te-pre3410"), *neu = find_pol(r, "te-3410");
    if (old && neu)
        fprintf(f,
                "- TE PR 3410 (te-3410) builds %llu plans where TE before it (te-pre3410) "
                "builds %llu, and resets recipe state %llu times instead of %llu.\n",
                (unsigned long long)neu->builds, (unsigned long long)old->builds,
                (unsigned long long)neu->resets, (unsigned long long)old->resets);
    int any = 0;
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        if (!n_stale(q)) continue;
        any = 1;
        fprintf(f, "- %s ran a stale plan (not what a fresh build would give) on %llu calls:",
                ft_policy_name(q->policy), (unsigned long long)n_stale(q));
        const char *sep = "";
        if (q->stale[FT_STALE_RAISES]) {
            fprintf(f, " %llu would raise in TE", (unsigned long long)q->stale[FT_STALE_RAISES]);
            if (q->raises[0].count) fprintf(f, " (\"%s\")", q->raises[0].text);
            sep = ";";
        }
        if (q->stale[FT_STALE_QUANT]) {
            fprintf(f, "%s %llu would run with a different quantization than a fresh plan", sep,
                    (unsigned long long)q->stale[FT_STALE_QUANT]);
            sep = ";";
        }
        if (q->stale[FT_STALE_SLOWER]) {
            fprintf(f,
                    "%s %llu would run unfused where the fused grouped MLP was possible "
                    "(slower)",
                    sep, (unsigned long long)q->stale[FT_STALE_SLOWER]);
            sep = ";";
        }
        if (q->stale[FT_STALE_HARMLESS])
            fprintf(f, "%s %llu differ harmlessly (same work)", sep,
                    (unsigned long long)q->stale[FT_STALE_HARMLESS]);
        fprintf(f, ".\n");
    }
    if (!any) fprintf(f, "- No policy ran a stale plan on this trace.\n");
    if (r->fresh_raises)
        fprintf(f,
                "- %llu calls would raise in TE under every policy: their fresh plan itself "
                "raises (\"%s\").\n",
                (unsigned long long)r->fresh_raises, r->fresh_raise_texts[0].text);
    int drift = 0;
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        if (!q->qdrift) continue;
        if (!drift++)
            fprintf(f, "- Quantizer drift: a fresh plan ran with quantizers left over from an "
                       "earlier recipe of the same type (reset_recipe_state keeps RHT/SR/2D flags "
                       "on a same-type switch; DelayedScaling history length) on:");
        fprintf(f, "%s %s %llu", drift > 1 ? "," : "", ft_policy_name(q->policy),
                (unsigned long long)q->qdrift);
    }
    if (drift) fprintf(f, " calls.\n");
    return ferror(f) ? ft_err_set(err, FT_EIO, "writing the reading failed") : FT_OK;
}
