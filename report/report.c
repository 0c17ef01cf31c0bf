/*
 * report.c - the replay summary as a text table, a JSON document or one tidy CSV.
 *
 * JSON: {"report_version" (FT_REPORT_VERSION, what `diff` accepts),"traces","calls","backwards",
 *        "model":{...},"framework":{...},"stale_classes":{...},
 *        "captured":{...},"policies":[{...,"steps":[..]}],"recommendation":{...},
 *        "numerics":{...} (when it ran; report/numerics.c), "gpu_time":{...} (report/gputime.c)}
 * CSV: one table; column `record` is "summary" (one row per policy) or "step" (hit rate per step
 * bucket, for plotting), so a plotting tool can filter on it.
 * Modeled framework time: where the trace carries captured `rebuilt` and `fuse_ns`, a policy's
 * time is builds x (captured mean fuse_ns of builds) + hits x (captured mean of non-builds); the
 * delta is against the captured total.
 */
#include "report_int.h"

#include <math.h>
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

/* ---- names for people ------------------------------------------------------------------------ */
/* Column headings of the stale classes (short enough for the table). */
static const char *const stale_col[FT_STALE_COUNT] = {"fresh", "other-fusion", "unfused",
                                                      "other-quant", "raises"};

/* What each class means, and which numerics band measures it. */
static const char *const stale_explain[FT_STALE_COUNT] = {
    "",
    "extra or other fusions doing the same work with the same quantizers; the numbers can "
    "still differ where the two paths round to bf16 (the \"harmless band\" of --numerics)",
    "runs unfused where a fresh plan fuses, same quantization (the same band, plus the "
    "time of the unfused kernels)",
    "runs with quantizers other than a fresh plan's, e.g. RHT kept after disable_rht (the "
    "\"quant band\" of --numerics, which sits above the harmless one)",
    "TE raises when it runs this plan (its message is given)"};

void ft_report_opts_init(ft_report_opts *o)
{
    memset(o, 0, sizeof *o);
    o->build_ns = FT_REPORT_BUILD_NS;
    o->reset_ns = FT_REPORT_RESET_NS;
}

static const ft_report_opts *opts_or_default(const ft_report_opts *o, ft_report_opts *local)
{
    if (o) return o;
    ft_report_opts_init(local);
    return local;
}

double ft_report_framework_ns(const ft_replay_result *r, const ft_policy_result *p,
                              const ft_report_opts *o, int *assumed)
{
    ft_report_opts local;
    o = opts_or_default(o, &local);
    double m = ft_report_modeled_ns(r, p);
    if (assumed) *assumed = m < 0;
    if (m >= 0) return m;
    return (double)p->builds * o->build_ns + (double)p->resets * o->reset_ns;
}

static uint64_t n_stale(const ft_policy_result *q)
{
    return q->calls - q->stale[FT_STALE_NONE];
}

/* "N" with its noun, singular or plural. */
static void count_of(FILE *f, uint64_t n, const char *one, const char *many)
{
    fprintf(f, "%llu %s", (unsigned long long)n, n == 1 ? one : many);
}

/* The policy's name with its note, e.g. "te-3410-commit1 (historical: ...)", or its label when
 * it has no note ("mine (user-defined)"). */
static void policy_named(FILE *f, uint32_t policy)
{
    const char *note = ft_policy_note(policy), *label = ft_policy_label(policy);
    fprintf(f, "%s", ft_policy_name(policy));
    if (note)
        fprintf(f, " (%s)", note);
    else if (label)
        fprintf(f, " (%s)", label);
}

/* ---- text ------------------------------------------------------------------------------------ */
static void framework_legend(FILE *f, const ft_replay_result *r, const ft_report_opts *o)
{
    if (r->cap_build_n)
        fprintf(f,
                "framework-ms: TE's time in maybe_fuse_ops, modeled from the captured fuse_ns "
                "(mean %.0f ns per build over %llu builds, %.0f ns per other call).\n",
                ratio(r->cap_build_fuse_ns, r->cap_build_n), (unsigned long long)r->cap_build_n,
                ratio(r->cap_hit_fuse_ns, r->cap_hit_n));
    else
        fprintf(f,
                "framework-ms*: TE's time building plans, ASSUMED (the trace has no captured "
                "fuse_ns): %.0f ns per build and %.0f ns per reset (--build-ns, --reset-ns).\n",
                o->build_ns, o->reset_ns);
}

/* What the fuser model assumed or could not read in the captures (ft_model_note_at). */
static void model_notes_text(FILE *f, const ft_replay_result *r, const ft_report_opts *o)
{
    if (!o->notes || !o->notes->n_model) return;
    fprintf(f,
            "\nthe fuser model's notes on the capture%s (what it could not read, and what it "
            "did instead):\n",
            r->n_traces == 1 ? "" : "s");
    for (uint32_t i = 0; i < o->notes->n_model; i++) {
        const ft_report_model_note *n = &o->notes->model[i];
        fprintf(f, "  %s: %s", ft_report_note_kind(n->kind), n->text);
        if (r->n_traces > 1) fprintf(f, " (%u of %u traces)", n->n_traces, r->n_traces);
        fputc('\n', f);
    }
}

static int write_text(FILE *f, const ft_replay_result *r, const ft_report_opts *o)
{
    fprintf(f, "fusertrace replay: %u trace%s, %llu calls, %llu backward records\n", r->n_traces,
            r->n_traces == 1 ? "" : "s", (unsigned long long)r->calls,
            (unsigned long long)r->backwards);
    if (o->filter)
        fprintf(f, "counted: only the calls with %s (every call was replayed)\n", o->filter);
    int assumed = r->cap_build_n == 0;
    fprintf(f, "\n%-16s %9s %9s %9s %7s %9s %13s", "policy", "calls", "builds", "hits", "hit%",
            "resets", assumed ? "framework-ms*" : "framework-ms");
    for (int k = FT_STALE_HARMLESS; k < FT_STALE_COUNT; k++)
        fprintf(f, " %*s", k == FT_STALE_HARMLESS ? 12 : 11, stale_col[k]);
    fprintf(f, " %7s", "qdrift");
    if (o->timing) fprintf(f, " %8s", "ns/call");
    fputc('\n', f);
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        fprintf(f, "%-16s %9llu %9llu %9llu %6.2f%% %9llu %13.3f", ft_policy_name(q->policy),
                (unsigned long long)q->calls, (unsigned long long)q->builds,
                (unsigned long long)q->hits, pct_floor(q->hits, q->calls),
                (unsigned long long)q->resets, ft_report_framework_ns(r, q, o, NULL) / 1e6);
        for (int k = FT_STALE_HARMLESS; k < FT_STALE_COUNT; k++)
            fprintf(f, " %*llu", k == FT_STALE_HARMLESS ? 12 : 11, (unsigned long long)q->stale[k]);
        fprintf(f, " %7llu", (unsigned long long)q->qdrift);
        if (o->timing) fprintf(f, " %8.1f", ratio(q->loop_ns, q->calls));
        fputc('\n', f);
    }
    fputc('\n', f);
    framework_legend(f, r, o);
    fprintf(f, "stale calls: the policy ran a plan other than a fresh build's and the fresh build "
               "would not have done the same (calls that raise under every policy are counted "
               "apart); by consequence:\n");
    for (int k = FT_STALE_HARMLESS; k < FT_STALE_COUNT; k++)
        fprintf(f, "  %-12s %s: %s\n", stale_col[k], ft_report_stale_label((ft_stale)k),
                stale_explain[k]);
    fprintf(f, "qdrift: a fresh plan, but quantizers that differ from a fresh fuser's.\n");
    if (o->timing) {
        fprintf(f,
                "ns/call (this replayer, measured, varies run to run): key + lookup per call "
                "(oracle %.1f ns/call extra); plan build (fusion passes) %.0f ns each over "
                "%llu builds.\n",
                ratio(r->oracle_ns, r->calls), ns_per_build(r),
                (unsigned long long)r->model_builds);
    }
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
    report_transient_text(f, r); /* transient fusers by label (transient.c) */
    if (r->fresh_raises) {
        fprintf(f, "%llu calls raise in TE whatever the policy (their fresh plan raises):\n",
                (unsigned long long)r->fresh_raises);
        for (int i = 0; i < FT_MAX_RAISE_TEXTS; i++)
            if (r->fresh_raise_texts[i].count)
                fprintf(f, "  %llu x \"%s\"\n", (unsigned long long)r->fresh_raise_texts[i].count,
                        r->fresh_raise_texts[i].text);
    }
    report_causes_text(f, r, o->causes);
    if (o->n_per_trace > 1 && o->per_trace) {
        fprintf(f,
                "\nper trace (rank): builds / resets / stale calls under each policy\n%-6s %-28s "
                "%9s",
                "rank", "trace", "calls");
        for (uint32_t p = 0; p < r->n_policies; p++)
            fprintf(f, " %18s", ft_policy_name(r->pol[p].policy));
        fputc('\n', f);
        for (uint32_t k = 0; k < o->n_per_trace; k++) {
            const ft_replay_result *t = &o->per_trace[k];
            const char *name = o->trace_names ? o->trace_names[k] : "?";
            const char *base = strrchr(name, '/');
            char rank[24] = "-";
            if (o->trace_ranks && o->trace_ranks[k] >= 0)
                snprintf(rank, sizeof rank, "%lld", (long long)o->trace_ranks[k]);
            fprintf(f, "%-6s %-28.28s %9llu", rank, base ? base + 1 : name,
                    (unsigned long long)t->calls);
            for (uint32_t p = 0; p < t->n_policies; p++) {
                char cell[64];
                snprintf(cell, sizeof cell, "%llu/%llu/%llu", (unsigned long long)t->pol[p].builds,
                         (unsigned long long)t->pol[p].resets,
                         (unsigned long long)n_stale(&t->pol[p]));
                fprintf(f, " %18s", cell);
            }
            fputc('\n', f);
        }
    }
    int any_cap = 0;
    for (uint32_t p = 0; p < r->n_policies; p++)
        any_cap |= r->pol[p].cap_calls > 0;
    if (any_cap) {
        fprintf(f,
                "\ncaptured run: %s decisions expected; agreement of each policy with the "
                "captured `rebuilt`:\n",
                r->captured_policy >= 0 ? ft_policy_name((uint32_t)r->captured_policy)
                                        : "(unknown policy)");
        for (uint32_t p = 0; p < r->n_policies; p++) {
            const ft_policy_result *q = &r->pol[p];
            if (!q->cap_calls) continue;
            fprintf(f, "  %-16s %7.3f%% of %llu calls%s", ft_policy_name(q->policy),
                    100.0 * ratio(q->cap_agree, q->cap_calls), (unsigned long long)q->cap_calls,
                    (int)q->policy == r->captured_policy ? "  <- captured version" : "");
            if (q->first_disagree_seq >= 0)
                fprintf(f, " (first disagreement at seq %lld)", (long long)q->first_disagree_seq);
            fputc('\n', f);
        }
    }
    if (r->cap_build_n && !o->filter) { /* the captured total covers every call */
        double cap = captured_total_ns(r);
        fprintf(f, "\nframework time against the captured total of %.3f ms:\n", cap / 1e6);
        for (uint32_t p = 0; p < r->n_policies; p++) {
            double m = ft_report_modeled_ns(r, &r->pol[p]);
            fprintf(f, "  %-16s %10.3f ms  (%+.3f ms vs captured)\n",
                    ft_policy_name(r->pol[p].policy), m / 1e6, (m - cap) / 1e6);
        }
    }
    model_notes_text(f, r, o);
    return ferror(f) ? FT_EIO : FT_OK;
}

/* ---- the recommendation -------------------------------------------------------------------- */
/* Whether TE could adopt the policy: a proposal or a TE version. The policy row says which are
 * not (its note: "historical: ...", "baseline: ..."); those appear only among the others. */
static int adoptable(uint32_t policy)
{
    return ft_policy_note(policy) == NULL;
}

void ft_report_recommend(const ft_replay_result *r, ft_recommend *out)
{
    memset(out, 0, sizeof *out);
    out->captured = -1;
    uint64_t best = UINT64_MAX;
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        if ((int)q->policy == r->captured_policy) out->captured = (int)p;
        if (!q->calls || n_stale(q) || !adoptable(q->policy)) continue;
        if (q->builds < best) {
            best = q->builds;
            out->n_best = 0;
        }
        if (q->builds == best) out->best[out->n_best++] = p; /* registry order among ties */
    }
}

/* "raises in TE on N ("text"); other quantization on M" for a policy's stale calls. */
static void stale_breakdown(FILE *f, const ft_policy_result *q)
{
    const char *sep = "";
    for (int k = FT_STALE_COUNT - 1; k > FT_STALE_NONE; k--) {
        if (!q->stale[k]) continue;
        fprintf(f, "%s%s on %llu", sep, ft_report_stale_label((ft_stale)k),
                (unsigned long long)q->stale[k]);
        if (k == FT_STALE_RAISES && q->raises[0].count) fprintf(f, " (\"%s\")", q->raises[0].text);
        sep = "; ";
    }
}

/* "A fewer X (a instead of b)", "B more X (...)" or "as many X (a)". */
static void compare_count(FILE *f, uint64_t a, uint64_t b, const char *what)
{
    if (a == b)
        fprintf(f, "as many %s (%llu)", what, (unsigned long long)a);
    else
        fprintf(f, "%llu %s %s (%llu instead of %llu)", (unsigned long long)(a < b ? b - a : a - b),
                a < b ? "fewer" : "more", what, (unsigned long long)a, (unsigned long long)b);
}

/* "Why nothing fuses": the fused op, how many fusers, and every check that blocks it with the
 * value it read and where that came from. */
static void unfused_text(FILE *f, const ft_report_unfused *u)
{
    fprintf(f, "- Why nothing fuses: %s never forms in ", u->fused);
    count_of(f, u->n_fusers, "fuser", "fusers");
    fprintf(f, " (e.g. %s) under any recipe of the trace; every check that blocks it:\n",
            u->example);
    for (uint32_t k = 0; k < u->n_blocks; k++) {
        const ft_unfused_block *b = &u->block[k];
        const int assumed = !strncmp(b->source, "assumed", 7);
        fprintf(f, "  - %s%s, needs %s (%s%s)\n",
                k < u->n_registration ? "TE does not register it: " : "its gate: ", b->what,
                b->need, assumed ? "" : "from ", b->source);
    }
    if (u->env_empty)
        fprintf(f, "  - The capture recorded an empty env: every env value above is one the model "
                   "assumed (TE's default); --env K=V sets one.\n");
}

/* No policy TE could adopt was replayed without a stale plan: say which were replayed and how. */
static void no_candidate(FILE *f, const ft_replay_result *r)
{
    int any = 0;
    for (uint32_t p = 0; p < r->n_policies; p++)
        any |= adoptable(r->pol[p].policy);
    if (!any) {
        fprintf(f, "- None of the replayed policies is one TE could adopt (");
        for (uint32_t p = 0; p < r->n_policies; p++) {
            fprintf(f, "%s", p ? "; " : "");
            policy_named(f, r->pol[p].policy);
        }
        fprintf(f, "): replay the others too (--policy all).\n");
        return;
    }
    fprintf(f, "- Every replayed policy that TE could adopt ran a stale plan; look at the stale "
               "calls above (rebuild-always never runs one, at the cost of a build per call).\n");
}

int ft_report_recommendation(FILE *f, const ft_replay_result *r, const ft_report_opts *o,
                             ft_err *err)
{
    ft_report_opts local;
    o = opts_or_default(o, &local);
    ft_recommend rec;
    ft_report_recommend(r, &rec);
    fprintf(f, "Recommendation:\n");
    if (!r->calls || !r->n_policies) {
        fprintf(f, "- Nothing to recommend: the trace holds no calls.\n");
        goto out;
    }
    if (!rec.n_best) {
        no_candidate(f, r);
        goto out;
    }
    const ft_policy_result *b = &r->pol[rec.best[0]];
    int assumed = 0;
    double fb = ft_report_framework_ns(r, b, o, &assumed);
    fprintf(f, "- Use ");
    policy_named(f, b->policy);
    fprintf(f,
            ": the fewest plan builds (%llu) among the policies TE could adopt that never ran a "
            "stale plan.",
            (unsigned long long)b->builds);
    if (rec.n_best > 1) {
        fprintf(f, " Tied with it: ");
        for (uint32_t i = 1; i < rec.n_best; i++) {
            fprintf(f, "%s", i > 1 ? (i + 1 == rec.n_best ? " and " : ", ") : "");
            policy_named(f, r->pol[rec.best[i]].policy);
        }
        fprintf(f, ".");
    }
    fputc('\n', f);
    if (rec.captured < 0) {
        fprintf(f,
                "- The captured run's policy is %s, so there is no saving to state "
                "(--captured POLICY names it).\n",
                r->captured_policy < 0 ? "unknown (no te_version or fuser_cache in the header)"
                                       : "not among the replayed ones");
    } else if ((uint32_t)rec.captured == rec.best[0] ||
               (r->pol[rec.captured].builds == b->builds && !n_stale(&r->pol[rec.captured]))) {
        fprintf(f, "- The captured run used %s, which is already as good: nothing to change.\n",
                ft_policy_name(r->pol[rec.captured].policy));
    } else {
        const ft_policy_result *c = &r->pol[rec.captured];
        double fc = ft_report_framework_ns(r, c, o, NULL);
        fprintf(f, "- Against %s, the policy of the captured run: ", ft_policy_name(c->policy));
        compare_count(f, b->builds, c->builds, "plan builds");
        fprintf(f, ", ");
        compare_count(f, b->resets, c->resets, "recipe-state resets");
        fprintf(f, ", and %.3f ms %s framework time (%s)", fabs(fc - fb) / 1e6,
                fb <= fc ? "less" : "more",
                assumed ? "assumed cost per build and reset" : "modeled from the captured fuse_ns");
        if (n_stale(c)) {
            fprintf(f, "; and no stale plan where %s ran one on ", ft_policy_name(c->policy));
            count_of(f, n_stale(c), "call", "calls");
        }
        fprintf(f, ".\n");
    }
    if (r->n_policies > 1) fprintf(f, "- What the others would have done:\n");
    for (uint32_t p = 0; p < r->n_policies; p++) {
        if (p == rec.best[0]) continue;
        const ft_policy_result *q = &r->pol[p];
        fprintf(f, "  - ");
        policy_named(f, q->policy);
        fprintf(f, ": ");
        count_of(f, q->builds, "build", "builds");
        if (n_stale(q)) {
            fprintf(f, ", but a stale plan on ");
            count_of(f, n_stale(q), "call", "calls");
            fprintf(f, ": ");
            stale_breakdown(f, q);
        } else if (q->builds <= b->builds && !adoptable(q->policy)) {
            if (q->builds == b->builds)
                fprintf(f, ", never stale: as few builds");
            else
                fprintf(f, ", never stale and %llu fewer builds than %s",
                        (unsigned long long)(b->builds - q->builds), ft_policy_name(b->policy));
            fprintf(f, ", but not a policy TE could adopt");
        } else if (q->builds == b->builds) {
            fprintf(f, ", never stale: as good");
        } else if (q->builds < b->builds) { /* only a what-if, which is not one to use */
            fprintf(f, ", never stale, %llu fewer builds than %s",
                    (unsigned long long)(b->builds - q->builds), ft_policy_name(b->policy));
        } else {
            fprintf(f, ", never stale, but %llu more builds than %s",
                    (unsigned long long)(q->builds - b->builds), ft_policy_name(b->policy));
        }
        fprintf(f, ".\n");
    }
    for (uint32_t i = 0; o->notes && i < o->notes->n; i++)
        unfused_text(f, &o->notes->u[i]);
    report_transient_recommend(f, r, b); /* transient fusers (transient.c) */
out:
    return ferror(f) ? ft_err_set(err, FT_EIO, "writing the recommendation failed") : FT_OK;
}

/* ---- JSON ------------------------------------------------------------------------------------ */
static json_t *policy_json(const ft_replay_result *r, const ft_policy_result *q,
                           const ft_report_opts *o)
{
    json_t *js = json_object();
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
    const char *note = ft_policy_note(q->policy);
    json_object_set_new(js, "policy", json_string(ft_policy_name(q->policy)));
    json_object_set_new(js, "summary", json_string(ft_policy_summary(q->policy)));
    if (note) json_object_set_new(js, "note", json_string(note));
    if (ft_policy_label(q->policy))
        json_object_set_new(js, "label", json_string(ft_policy_label(q->policy)));
    json_object_set_new(js, "spec", json_string(ft_policy_spec(q->policy)));
    json_object_set_new(js, "calls", json_integer((json_int_t)q->calls));
    json_object_set_new(js, "builds", json_integer((json_int_t)q->builds));
    json_object_set_new(js, "hits", json_integer((json_int_t)q->hits));
    json_object_set_new(js, "hit_rate", json_real(ratio(q->hits, q->calls)));
    json_object_set_new(js, "resets", json_integer((json_int_t)q->resets));
    json_object_set_new(js, "stale", st);
    json_object_set_new(js, "qdrift", json_integer((json_int_t)q->qdrift));
    json_object_set_new(js, "raises", raises);
    json_object_set_new(js, "framework_ns", json_real(ft_report_framework_ns(r, q, o, NULL)));
    if (o->timing) {
        json_object_set_new(js, "ns_per_call", json_real(ratio(q->loop_ns, q->calls)));
        json_object_set_new(js, "modeled_build_ns", json_real((double)q->builds * ns_per_build(r)));
    }
    json_object_set_new(js, "max_plans_per_fuser", json_integer((json_int_t)q->max_entries));
    if (r->transient_groups) /* transient.c */
        json_object_set_new(js, "transient_builds", json_integer((json_int_t)q->transient_builds));
    json_object_set_new(js, "evictions", json_integer((json_int_t)q->evictions));
    if (q->cap_calls) {
        json_t *c = json_object();
        json_object_set_new(c, "calls", json_integer((json_int_t)q->cap_calls));
        json_object_set_new(c, "agree", json_integer((json_int_t)q->cap_agree));
        json_object_set_new(c, "agreement", json_real(ratio(q->cap_agree, q->cap_calls)));
        json_object_set_new(c, "first_disagree_seq",
                            q->first_disagree_seq >= 0 ? json_integer(q->first_disagree_seq)
                                                       : json_null());
        json_object_set_new(js, "captured", c);
    }
    double m = ft_report_modeled_ns(r, q);
    if (m >= 0) {
        json_object_set_new(js, "modeled_fuse_ns", json_real(m));
        if (!o->filter)
            json_object_set_new(js, "modeled_delta_ns", json_real(m - captured_total_ns(r)));
    }
    if (o->causes) json_object_set_new(js, "causes", report_causes_json(o->causes, q->policy));
    json_object_set_new(js, "steps", steps);
    return js;
}

/* The recommendation as data: the tied best policies, and what the first saves against the
 * captured run's policy. */
static json_t *recommendation_json(const ft_replay_result *r, const ft_report_opts *o)
{
    ft_recommend rec;
    ft_report_recommend(r, &rec);
    json_t *js = json_object(), *best = json_array();
    for (uint32_t i = 0; i < rec.n_best; i++)
        json_array_append_new(best, json_string(ft_policy_name(r->pol[rec.best[i]].policy)));
    json_object_set_new(js, "policies", best);
    json_object_set_new(js, "drawn_from",
                        json_string("policies TE could adopt (no historical or "
                                    "baseline note) that never ran a stale plan"));
    json_object_set_new(js, "against",
                        rec.captured >= 0 ? json_string(ft_policy_name(r->pol[rec.captured].policy))
                                          : json_null());
    if (rec.n_best && rec.captured >= 0) {
        const ft_policy_result *b = &r->pol[rec.best[0]], *c = &r->pol[rec.captured];
        json_t *sv = json_object();
        json_object_set_new(sv, "builds",
                            json_integer((json_int_t)c->builds - (json_int_t)b->builds));
        json_object_set_new(sv, "resets",
                            json_integer((json_int_t)c->resets - (json_int_t)b->resets));
        json_object_set_new(sv, "framework_ns",
                            json_real(ft_report_framework_ns(r, c, o, NULL) -
                                      ft_report_framework_ns(r, b, o, NULL)));
        json_object_set_new(sv, "stale_calls", json_integer((json_int_t)n_stale(c)));
        json_object_set_new(js, "saves", sv);
    }
    json_t *tr = rec.n_best ? report_transient_recommend_json(r, &r->pol[rec.best[0]]) : NULL;
    if (tr) json_object_set_new(js, "transient", tr);
    return js;
}

static int write_json(FILE *f, const ft_replay_result *r, const ft_numerics_result *nres,
                      const ft_report_opts *o)
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
    json_object_set_new(root, "report_version", json_integer(FT_REPORT_VERSION));
    if (o->prov) json_object_set_new(root, "provenance", report_prov_json(o->prov, r, o));
    json_object_set_new(root, "traces", json_integer(r->n_traces));
    json_object_set_new(root, "calls", json_integer((json_int_t)r->calls));
    json_object_set_new(root, "backwards", json_integer((json_int_t)r->backwards));
    json_object_set_new(root, "fusers", json_integer((json_int_t)r->n_fusers));
    json_object_set_new(root, "recipes", json_integer((json_int_t)r->n_recipes));
    if (o->filter) json_object_set_new(root, "filter", json_string(o->filter));
    json_object_set_new(model, "builds", json_integer((json_int_t)r->model_builds));
    if (o->timing) {
        json_object_set_new(model, "ns_per_build", json_real(ns_per_build(r)));
        json_object_set_new(model, "oracle_ns_per_call", json_real(ratio(r->oracle_ns, r->calls)));
        json_object_set_new(model, "wall_ns", json_integer((json_int_t)r->wall_ns));
    }
    json_object_set_new(root, "model", model);
    json_t *fw = json_object();
    json_object_set_new(fw, "basis", json_string(r->cap_build_n ? "captured" : "assumed"));
    if (!r->cap_build_n) {
        json_object_set_new(fw, "build_ns", json_real(o->build_ns));
        json_object_set_new(fw, "reset_ns", json_real(o->reset_ns));
    }
    json_object_set_new(root, "framework", fw);
    json_t *classes = json_object();
    for (int k = 0; k < FT_STALE_COUNT; k++) {
        json_t *c = json_object();
        json_object_set_new(c, "label", json_string(ft_report_stale_label((ft_stale)k)));
        if (k) json_object_set_new(c, "meaning", json_string(stale_explain[k]));
        json_object_set_new(classes, ft_stale_name((ft_stale)k), c);
    }
    json_object_set_new(root, "stale_classes", classes);
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
        json_array_append_new(pols, policy_json(r, &r->pol[p], o));
    json_object_set_new(root, "policies", pols);
    if (o->n_per_trace > 1 && o->per_trace) {
        json_t *pt = json_array();
        for (uint32_t k = 0; k < o->n_per_trace; k++) {
            const ft_replay_result *t = &o->per_trace[k];
            json_t *x = json_object(), *ps = json_array();
            json_object_set_new(x, "trace", json_string(o->trace_names ? o->trace_names[k] : ""));
            json_object_set_new(x, "rank",
                                o->trace_ranks && o->trace_ranks[k] >= 0
                                    ? json_integer(o->trace_ranks[k])
                                    : json_null());
            json_object_set_new(x, "calls", json_integer((json_int_t)t->calls));
            for (uint32_t p = 0; p < t->n_policies; p++) {
                json_t *y = json_object(), *st = json_object();
                json_object_set_new(y, "policy", json_string(ft_policy_name(t->pol[p].policy)));
                json_object_set_new(y, "builds", json_integer((json_int_t)t->pol[p].builds));
                json_object_set_new(y, "resets", json_integer((json_int_t)t->pol[p].resets));
                for (int c = 0; c < FT_STALE_COUNT; c++)
                    json_object_set_new(st, ft_stale_name((ft_stale)c),
                                        json_integer((json_int_t)t->pol[p].stale[c]));
                json_object_set_new(y, "stale", st);
                json_array_append_new(ps, y);
            }
            json_object_set_new(x, "policies", ps);
            json_array_append_new(pt, x);
        }
        json_object_set_new(root, "per_trace", pt);
    }
    if (nres && !nres->time_only) json_object_set_new(root, "numerics", report_numerics_json(nres));
    if (nres && nres->gt.on) json_object_set_new(root, "gpu_time", report_gputime_json(nres));
    if (r->transient_groups) json_object_set_new(root, "transient", report_transient_json(r));
    json_object_set_new(root, "recommendation", recommendation_json(r, o));
    if (o->notes && o->notes->n) {
        json_t *un = json_array();
        for (uint32_t i = 0; i < o->notes->n; i++) {
            const ft_report_unfused *u = &o->notes->u[i];
            json_t *x = json_object();
            json_object_set_new(x, "fused", json_string(u->fused));
            json_object_set_new(x, "reason", json_string(u->reason));
            json_object_set_new(x, "fusers", json_integer((json_int_t)u->n_fusers));
            json_object_set_new(x, "example", json_string(u->example));
            json_t *bl = json_array();
            for (uint32_t k = 0; k < u->n_blocks; k++) {
                json_t *b = json_object();
                json_object_set_new(b, "check",
                                    json_string(k < u->n_registration ? "registration" : "gate"));
                json_object_set_new(b, "value", json_string(u->block[k].what));
                json_object_set_new(b, "needs", json_string(u->block[k].need));
                json_object_set_new(b, "source", json_string(u->block[k].source));
                json_array_append_new(bl, b);
            }
            json_object_set_new(x, "blocks", bl);
            json_object_set_new(x, "env_empty", json_boolean(u->env_empty));
            json_array_append_new(un, x);
        }
        json_object_set_new(root, "unfused", un);
    }
    if (o->notes && o->notes->n_model) {
        json_t *mn = json_array();
        for (uint32_t i = 0; i < o->notes->n_model; i++) {
            const ft_report_model_note *n = &o->notes->model[i];
            json_t *x = json_object();
            json_object_set_new(x, "kind", json_string(ft_report_note_kind(n->kind)));
            json_object_set_new(x, "field", json_string(n->field));
            json_object_set_new(x, "text", json_string(n->text));
            json_object_set_new(x, "traces", json_integer(n->n_traces));
            json_array_append_new(mn, x);
        }
        json_object_set_new(root, "model_notes", mn);
    }
    int rc = json_dumpf(root, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    fputc('\n', f);
    json_decref(root);
    return rc || ferror(f) ? FT_EIO : FT_OK;
}

/* ---- CSV ------------------------------------------------------------------------------------- */
static int write_csv(FILE *f, const ft_replay_result *r, const ft_report_opts *o)
{
    fprintf(f,
            "record,policy,step,step_end,calls,builds,hits,hit_rate,resets,stale_harmless,"
            "stale_slower,stale_quant,stale_raises,qdrift,captured_agreement,framework_ns,"
            "framework_basis%s\n",
            o->timing ? ",ns_per_call" : "");
    const char *basis = r->cap_build_n ? "captured" : "assumed";
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        fprintf(f, "summary,%s,,,%llu,%llu,%llu,%.6f,%llu,%llu,%llu,%llu,%llu,%llu,",
                ft_policy_name(q->policy), (unsigned long long)q->calls,
                (unsigned long long)q->builds, (unsigned long long)q->hits,
                ratio(q->hits, q->calls), (unsigned long long)q->resets,
                (unsigned long long)q->stale[FT_STALE_HARMLESS],
                (unsigned long long)q->stale[FT_STALE_SLOWER],
                (unsigned long long)q->stale[FT_STALE_QUANT],
                (unsigned long long)q->stale[FT_STALE_RAISES], (unsigned long long)q->qdrift);
        if (q->cap_calls) fprintf(f, "%.6f", ratio(q->cap_agree, q->cap_calls));
        fprintf(f, ",%.0f,%s", ft_report_framework_ns(r, q, o, NULL), basis);
        if (o->timing) fprintf(f, ",%.2f", ratio(q->loop_ns, q->calls));
        fputc('\n', f);
    }
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        for (uint32_t b = 0; b < q->steps.n; b++) {
            if (!q->steps.calls[b]) continue;
            fprintf(f, "step,%s,%lld,%lld,%llu,%llu,%llu,%.6f,,,,,,,,,%s\n",
                    ft_policy_name(q->policy), (long long)((int64_t)b * q->steps.width),
                    (long long)((int64_t)b * q->steps.width + (q->steps.width - 1)),
                    (unsigned long long)q->steps.calls[b],
                    (unsigned long long)(q->steps.calls[b] - q->steps.hits[b]),
                    (unsigned long long)q->steps.hits[b],
                    ratio(q->steps.hits[b], q->steps.calls[b]), o->timing ? "," : "");
        }
    }
    ft_recommend rec;
    ft_report_recommend(r, &rec);
    for (uint32_t i = 0; i < rec.n_best; i++)
        fprintf(f, "recommended,%s,,,,,,,,,,,,,,,%s\n", ft_policy_name(r->pol[rec.best[i]].policy),
                o->timing ? "," : "");
    return ferror(f) ? FT_EIO : FT_OK;
}

int ft_report_write_opts(FILE *f, const ft_replay_result *r, const ft_numerics_result *nres,
                         int format, const ft_report_opts *o, ft_err *err)
{
    ft_report_opts local;
    o = opts_or_default(o, &local);
    int rc;
    switch (format) {
    case FT_REPORT_TEXT:
        rc = write_text(f, r, o);
        if (!rc && nres) {
            fputc('\n', f);
            if (!nres->time_only && (rc = ft_report_numerics(f, nres, err))) return rc;
            if (!nres->time_only && nres->gt.on) fputc('\n', f);
            return nres->gt.on ? ft_report_gputime(f, nres, err) : FT_OK;
        }
        break;
    case FT_REPORT_JSON:
        rc = write_json(f, r, nres, o);
        break;
    case FT_REPORT_CSV:
        if (nres) return ft_err_set(err, FT_EINVAL, "the numerics have no CSV form");
        rc = write_csv(f, r, o);
        break;
    default:
        return ft_err_set(err, FT_EINVAL, "unknown report format %d", format);
    }
    if (rc) ft_err_set(err, rc, "writing the report failed");
    return rc;
}

int ft_report_write(FILE *f, const ft_replay_result *r, const ft_numerics_result *nres, int format,
                    ft_err *err)
{
    return ft_report_write_opts(f, r, nres, format, NULL, err);
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

int ft_report_reading(FILE *f, const ft_replay_result *r, ft_err *err)
{
    if (!r->n_policies || !r->calls) {
        fprintf(f, "- The trace holds no calls.\n");
        return ferror(f) ? ft_err_set(err, FT_EIO, "writing the reading failed") : FT_OK;
    }
    /* fewest builds overall */
    const ft_policy_result *least = NULL, *most = NULL;
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        if (!least || q->builds < least->builds) least = q;
        if (!most || q->builds > most->builds) most = q;
    }
    fprintf(f, "- Fewest plan builds: ");
    int first = 1;
    for (uint32_t p = 0; p < r->n_policies; p++)
        if (r->pol[p].builds == least->builds) {
            fprintf(f, "%s", first ? "" : ", ");
            policy_named(f, r->pol[p].policy);
            first = 0;
        }
    fprintf(f, " (%llu builds for %llu calls, %.2f%% hits); most: %s (%llu).\n",
            (unsigned long long)least->builds, (unsigned long long)least->calls,
            pct_floor(least->hits, least->calls), ft_policy_name(most->policy),
            (unsigned long long)most->builds);
    const ft_policy_result *old = find_pol(r, "te-pre3410"), *neu = find_pol(r, "te-3410");
    if (old && neu) {
        fprintf(f, "- TE with PR 3410 (te-3410) against TE before it (te-pre3410): ");
        compare_count(f, neu->builds, old->builds, "plan builds");
        fprintf(f, " and ");
        compare_count(f, neu->resets, old->resets, "recipe-state resets");
        fprintf(f, ".\n");
    }
    int any = 0;
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        if (!n_stale(q)) continue;
        any = 1;
        fprintf(f, "- %s ran a stale plan (not what a fresh build would give) on ",
                ft_policy_name(q->policy));
        count_of(f, n_stale(q), "call", "calls");
        fprintf(f, ": ");
        stale_breakdown(f, q);
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
