/*
 * synth.c - synthetic training-run call streams for what-if studies (`fusertrace synth`): the
 * generator's driver, its set-up and the header record (routing is synth_route.c's, recipe
 * objects and their schedule synth_recipes.c's, the passes and the records they emit
 * synth_pipeline.c's; each of those uses only the ones before it).
 *
 * One generic generator models a Megatron-style MoE training loop as TransformerEngine's
 * OperationFuser sees it (docs/fuser-model.md, "Call patterns"): L layers, each with its own fusers
 * (grouped MLP `GroupedLinear, ScaledSwiGLU, GroupedLinear`, and a dense `BasicLinear, Bias, GELU,
 * BasicLinear, Bias` for dense layers and shared experts); steps of microbatches over pipeline
 * stages with the 1F1B schedule, plain or interleaved over virtual stages (device = stage); full
 * activation recompute (no_grad forward, then in the backward the recompute with grad under the
 * same recipe object and split sizes, then its backward); eval passes; frozen layers; recipe
 * schedules (BF16 first/last layers, per-layer recipes, global switches, NVFP4 disable_rht mutated
 * in place or changed across a detour, backward_override and amax_history_len changes). Scenarios
 * (synth_keys.c) are rows of defaults for it.
 *
 * Records go to an ft_sink in stream order: header, then each fuser and recipe declaration right
 * before its first use, calls and backward records with one strictly increasing seq. Output is a
 * pure function of (scenario, keys, seed): the generator has its own PRNGs (xoshiro256** seeded by
 * splitmix64; one stream for routing, one for timestamp noise) and reads no clock. The seed moves
 * expert popularity, split sizes and timestamp noise; structure (which calls and backward
 * records, recipes, order) depends on the keys only, because the pipeline order comes from a
 * noise-free timing model.
 *
 * Routing (key routing): zipf, a fixed per-layer Zipf(skew) popularity with lognormal noise over a
 * random permutation of the experts; drift, the same popularity taking a lognormal step per
 * training step; hot, `hot` experts sharing hot_share of the tokens; balanced, per microbatch
 * fresh gamma(alpha) expert weights normalized (a Dirichlet draw around uniform, as under an
 * auxiliary load-balancing loss; alpha=0.5 leaves about 6% of 32 experts empty at 4096 tokens);
 * drop, balanced with every count clipped to ceil(capacity * tokens / experts), the rest dropped.
 * The recompute of a checkpointed forward repeats its forward's vector in every family.
 *
 * Limits: one stream holds every pipeline stage (one process would record one stage per rank);
 * pipeline stages interleave at the granularity of one stage's forward or backward of one
 * microbatch, ordered by a simple timing model; routed token counts are constant per microbatch
 * (before routing=drop drops tokens);
 * split sizes are multinomial-like rather than exact multinomial draws (per expert a Poisson
 * count for small means or a rounded normal with the binomial variance, then the surplus or
 * deficit moved token by token to experts picked by popularity), exact in their sum;
 * `fuse_ns`/`rebuilt` are emitted only with captured=te-pre3410|te-3410, where rebuilt follows
 * TE's plan-cache rule (tefuser/te_cache.c) exactly and fuse_ns is a modelled figure, not a
 * measurement.
 */
#include "synth_int.h"

#include <stdio.h>
#include <string.h>

static const char *const routing_names[] = {"zipf", "drift", "hot", "balanced", "drop"};

static const uint8_t RG_ONE[5] = {1, 1, 1, 1, 1}, RG_ZERO[5] = {0, 0, 0, 0, 0};
static const uint8_t RG_G_NOGRAD[3] = {1, 0, 1}; /* params need grad, probs computed no_grad */
static const uint8_t RG_G_FC1[3] = {0, 1, 1};    /* fc1 frozen */
static const uint8_t RG_G_FC1_NG[3] = {0, 0, 1};
static const uint8_t RG_D_TRAIN[5] = {1, 1, 0, 1, 1}; /* GELU has no parameter */
static const uint8_t RG_D_FC1[5] = {0, 0, 0, 1, 1};

/* ---- per-step state ----------------------------------------------------------------------- */
/* Per-layer requires_grad state for this step: frozen layers, the boundary inputs. */
static void grad_state(gen *g, int64_t step)
{
    const synth_cfg *c = &g->c;
    int fc1 = !strcmp(c->frozen_ops, "fc1");
    int before = 0; /* some earlier layer holds a trainable parameter */
    for (uint32_t l = 0; l < g->n_layers; l++) {
        slayer *L = &g->layers[l];
        int frozen =
            (int64_t)l < c->frozen_layers && (c->unfreeze_step < 0 || step < c->unfreeze_step);
        L->input_rg = before;
        int any = 0;
        for (uint32_t k = 0; k < L->n_fusers; k++) {
            int grouped = g->fusers[L->fuser[k]].kind == FK_GROUPED;
            if (!frozen) {
                L->rg_train[k] = grouped ? RG_ONE : RG_D_TRAIN;
                L->rg_nograd[k] = grouped ? RG_G_NOGRAD : RG_D_TRAIN;
            } else if (fc1) {
                L->rg_train[k] = grouped ? RG_G_FC1 : RG_D_FC1;
                L->rg_nograd[k] = grouped ? RG_G_FC1_NG : RG_D_FC1;
            } else {
                L->rg_train[k] = L->rg_nograd[k] = RG_ZERO;
            }
            int op_any = 0;
            for (uint32_t i = 0; i < g->n_ops[g->fusers[L->fuser[k]].kind]; i++)
                op_any |= L->rg_train[k][i];
            L->bwd[k] = L->input_rg || op_any; /* f < n under grad (ft_te_boundary) */
            any |= op_any;
        }
        L->sa_rg = frozen && !fc1 ? RG_ZERO : RG_ONE; /* a norm's or router's weight */
        L->sa_bwd = L->input_rg || L->sa_rg[0];
        before |= any;
    }
}

/* ---- set-up ------------------------------------------------------------------------------- */
static int version_ok(const char *v)
{
    if (!*v) return 0;
    for (const char *p = v; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              *p == '.' || *p == '+' || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

static int build_ops(gen *g)
{
    const synth_cfg *c = &g->c;
    ft_buf b = {0};
    int rc = ft_buf_printf(
        &b,
        "[{\"attrs\":{\"bias\":false,\"dtype\":\"bfloat16\",\"in_features\":%lld,"
        "\"num_groups\":%lld,\"out_features\":%lld,\"scale_bias\":false,"
        "\"single_grouped_weight\":false},\"type\":\"GroupedLinear\"},"
        "{\"attrs\":{\"activation_recompute_in_mlp\":false,\"glu_interleave_size\":32},"
        "\"type\":\"ScaledSwiGLU\"},"
        "{\"attrs\":{\"bias\":false,\"dtype\":\"bfloat16\",\"in_features\":%lld,"
        "\"num_groups\":%lld,\"out_features\":%lld,\"scale_bias\":false,"
        "\"single_grouped_weight\":false},\"type\":\"GroupedLinear\"}]",
        (long long)c->hidden, (long long)c->experts, (long long)(2 * c->ffn), (long long)c->ffn,
        (long long)c->experts, (long long)c->hidden);
    rc = rc ? rc : ft_buf_append(&b, "", 1);
    if (rc) goto oom;
    g->ops_json[FK_GROUPED] = (char *)b.data;
    g->n_ops[FK_GROUPED] = 3;
    memset(&b, 0, sizeof b);
    int tp = c->tp > 1;
    long long f_local = (long long)(c->dense_ffn / c->tp);
    rc = ft_buf_printf(
        &b,
        "[{\"attrs\":{\"dtype\":\"bfloat16\",\"in_features\":%lld,\"out_features\":%lld,"
        "\"sequence_parallel\":false,\"tensor_parallel_mode\":%s,\"tensor_parallel_size\":%lld,"
        "\"userbuffers\":false},\"type\":\"BasicLinear\"},"
        "{\"attrs\":{\"size\":%lld},\"type\":\"Bias\"},"
        "{\"attrs\":{},\"type\":\"GELU\"},"
        "{\"attrs\":{\"dtype\":\"bfloat16\",\"in_features\":%lld,\"out_features\":%lld,"
        "\"sequence_parallel\":false,\"tensor_parallel_mode\":%s,\"tensor_parallel_size\":%lld,"
        "\"userbuffers\":false},\"type\":\"BasicLinear\"},"
        "{\"attrs\":{\"size\":%lld},\"type\":\"Bias\"}]",
        (long long)c->hidden, f_local, tp ? "\"column\"" : "null", (long long)c->tp, f_local,
        f_local, (long long)c->hidden, tp ? "\"row\"" : "null", (long long)c->tp,
        (long long)c->hidden);
    rc = rc ? rc : ft_buf_append(&b, "", 1);
    if (rc) goto oom;
    g->ops_json[FK_DENSE] = (char *)b.data;
    g->n_ops[FK_DENSE] = 5;
    /* the standalone modules: an RMSNorm (no attribute the model reads) and a router linear */
    memset(&b, 0, sizeof b);
    rc = ft_buf_printf(&b, "[{\"attrs\":{},\"type\":\"RMSNorm\"}]");
    rc = rc ? rc : ft_buf_append(&b, "", 1);
    if (rc) goto oom;
    g->ops_json[FK_NORM] = (char *)b.data;
    g->n_ops[FK_NORM] = 1;
    memset(&b, 0, sizeof b);
    rc = ft_buf_printf(&b,
                       "[{\"attrs\":{\"dtype\":\"bfloat16\",\"in_features\":%lld,"
                       "\"out_features\":%lld,\"sequence_parallel\":false,"
                       "\"tensor_parallel_mode\":null,\"tensor_parallel_size\":1,"
                       "\"userbuffers\":false},\"type\":\"BasicLinear\"}]",
                       (long long)c->hidden, (long long)c->experts);
    rc = rc ? rc : ft_buf_append(&b, "", 1);
    if (rc) goto oom;
    g->ops_json[FK_ROUTER] = (char *)b.data;
    g->n_ops[FK_ROUTER] = 1;
    g->dur_fwd[FK_NORM] = 5000 + (int64_t)(2.0 * (double)c->tokens * (double)c->hidden / 1e6);
    g->dur_fwd[FK_ROUTER] =
        8000 + (int64_t)(2.0 * (double)c->tokens * (double)c->hidden * (double)c->experts / 1e6);
    /* modelled durations: about 1 PFLOP/s plus 20 us of framework and launch overhead */
    g->dur_fwd[FK_GROUPED] =
        20000 + (int64_t)(6.0 * (double)c->tokens * (double)c->hidden * (double)c->ffn / 1e6);
    g->dur_fwd[FK_DENSE] = 20000 + (int64_t)(4.0 * (double)c->tokens * (double)c->hidden *
                                             (double)c->dense_ffn / (double)c->tp / 1e6);
    return FT_OK;
oom:
    ft_buf_free(&b);
    return ft_err_set(g->err, FT_ENOMEM, "synth %s: out of memory", g->scen);
}

static int build_model(gen *g)
{
    const synth_cfg *c = &g->c;
    uint32_t L = g->n_layers, S = g->n_stages, C = g->n_chunks, E = (uint32_t)c->experts;
    g->layers = ft_calloc(L, sizeof *g->layers);
    g->fusers = ft_calloc(4 * (size_t)L, sizeof *g->fusers);
    g->chunk_lo = ft_calloc(C + 1, sizeof *g->chunk_lo);
    g->scratch_u32 = ft_malloc(2 * (size_t)E * sizeof *g->scratch_u32);
    g->scratch_z = ft_malloc((size_t)E * sizeof *g->scratch_z);
    if (!g->layers || !g->fusers || !g->chunk_lo || !g->scratch_u32 || !g->scratch_z) goto oom;
    /* model chunks get L/C layers each, the first L%C one more; chunk c runs on stage c % S */
    for (uint32_t ch = 0, l = 0; ch < C; ch++) {
        g->chunk_lo[ch] = l;
        l += L / C + (ch < L % C);
        g->chunk_lo[ch + 1] = l;
    }
    for (uint32_t ch = 0; ch < C; ch++)
        for (uint32_t l = g->chunk_lo[ch]; l < g->chunk_lo[ch + 1]; l++)
            g->layers[l].stage = (int32_t)(ch % S);
    for (uint32_t l = 0; l < L; l++) {
        slayer *ly = &g->layers[l];
        ly->moe = (int64_t)l >= c->dense_layers;
        uint32_t want = ly->moe ? (c->shared_expert ? 2 : 1) : 1;
        for (uint32_t k = 0; k < want; k++) {
            sfuser *f = &g->fusers[g->n_fusers];
            f->id = g->n_fusers + 1;
            f->kind = ly->moe && k == 0 ? FK_GROUPED : FK_DENSE;
            f->stage = ly->stage;
            if (g->captured) {
                if (!(f->cap = ft_malloc(sizeof *f->cap))) goto oom;
                ft_te_cache_init(f->cap, g->captured == 1 ? FT_TE_PRE3410 : FT_TE_3410);
            }
            snprintf(f->label, sizeof f->label, "decoder.layers.%u.mlp%s", l,
                     !ly->moe ? ""
                     : k == 0 ? ".experts"
                              : ".shared_experts");
            ly->fuser[k] = g->n_fusers++;
        }
        ly->n_fusers = want;
        for (uint32_t k = 0; k < 2 && c->standalone > 0.0; k++) {
            sfuser *f = &g->fusers[g->n_fusers];
            f->id = g->n_fusers + 1;
            f->kind = k ? FK_ROUTER : FK_NORM;
            f->stage = ly->stage;
            f->transient = !strcmp(c->standalone_fusers, "transient");
            if (g->captured) {
                if (!(f->cap = ft_malloc(sizeof *f->cap))) goto oom;
                ft_te_cache_init(f->cap, g->captured == 1 ? FT_TE_PRE3410 : FT_TE_3410);
            }
            snprintf(f->label, sizeof f->label, "decoder.layers.%u.%s", l,
                     k ? "mlp.router" : "input_layernorm");
            ly->sa_fuser[k] = g->n_fusers++;
        }
        if (!ly->moe) continue;
        ly->pop = ft_malloc(E * (5 * sizeof(double) + 2 * sizeof(uint32_t)));
        if (!ly->pop) goto oom;
        ly->lam = ly->pop + E;
        ly->sd = ly->lam + E;
        ly->elam = ly->sd + E;
        ly->aprob = ly->elam + E;
        ly->alias = (uint32_t *)(ly->aprob + E);
        ly->order = ly->alias + E;
        synth_route_layer(g, ly);
    }
    size_t M = (size_t)c->microbatches,
           cap = 2 * (size_t)g->n_virtual *
                 (size_t)(c->microbatches > c->eval_microbatches ? c->microbatches
                                                                 : c->eval_microbatches);
    size_t EM =
        (size_t)(c->microbatches > c->eval_microbatches ? c->microbatches : c->eval_microbatches);
    g->splits = ft_malloc((size_t)L * M * E * sizeof *g->splits);
    g->eval_splits = ft_malloc(E * sizeof *g->eval_splits);
    g->bwd_seq = ft_malloc((size_t)L * M * 2 * sizeof *g->bwd_seq);
    g->fwd_rec = ft_calloc((size_t)L * M, sizeof *g->fwd_rec);
    g->sa_n = ft_calloc((size_t)L * M, 1);
    g->sa_bwd = ft_malloc((size_t)L * M * SA_MAX * sizeof *g->sa_bwd);
    g->sa_k0 = ft_calloc((size_t)L * M, 1);
    g->next_id = 4 * (int64_t)L + 1; /* past every sfuser's id */
    g->ops = ft_malloc((size_t)S * cap * sizeof *g->ops);
    g->n_sops = ft_malloc(S * sizeof *g->n_sops);
    g->idx = ft_malloc(S * sizeof *g->idx);
    g->finF = ft_malloc((size_t)C * EM * sizeof *g->finF);
    g->finB = ft_malloc((size_t)C * EM * sizeof *g->finB);
    g->free_at = ft_malloc(S * sizeof *g->free_at);
    if (!g->splits || !g->eval_splits || !g->bwd_seq || !g->fwd_rec || !g->sa_n || !g->sa_bwd ||
        !g->sa_k0 || !g->ops || !g->n_sops || !g->idx || !g->finF || !g->finB || !g->free_at)
        goto oom;
    return build_ops(g);
oom:
    return ft_err_set(g->err, FT_ENOMEM, "synth %s: out of memory", g->scen);
}

static int check_cfg(gen *g)
{
    const synth_cfg *c = &g->c;
    const struct {
        int bad;
        const char *key, *why;
    } rules[] = {
        {c->stages * c->virtual_stages > c->layers, "virtual_stages",
         "times stages must not exceed layers"},
        {c->graphs && c->recompute, "graphs", "cannot be combined with recompute"},
        {c->stage_only >= c->stages, "stage_only", "must be below stages"},
        {c->dense_ffn % c->tp != 0, "tp", "must divide dense_ffn"},
        {strcmp(c->frozen_ops, "all") && strcmp(c->frozen_ops, "fc1"), "frozen_ops",
         "must be all or fc1"},
        {strcmp(c->captured, "none") && strcmp(c->captured, "te-pre3410") &&
             strcmp(c->captured, "te-3410"),
         "captured", "must be none, te-pre3410 or te-3410"},
        {c->standalone > 0.9, "standalone", "must be at most 0.9"},
        {strcmp(c->standalone_fusers, "transient") && strcmp(c->standalone_fusers, "persistent"),
         "standalone_fusers", "must be transient or persistent"},
    };
    for (size_t i = 0; i < FT_ARRAY_LEN(rules); i++)
        if (rules[i].bad)
            return ft_err_set(g->err, FT_EINVAL, "synth %s: key '%s' %s", g->scen, rules[i].key,
                              rules[i].why);
    g->captured = !strcmp(c->captured, "te-pre3410") ? 1 : !strcmp(c->captured, "te-3410") ? 2 : 0;
    g->routing = -1;
    for (int i = 0; i < (int)FT_ARRAY_LEN(routing_names); i++)
        if (!strcmp(c->routing, routing_names[i])) g->routing = i;
    if (g->routing < 0)
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key 'routing' must be zipf, drift, hot, balanced or drop",
                          g->scen);
    if (g->routing >= R_BALANCED && !(c->alpha > 0.0))
        return ft_err_set(g->err, FT_EINVAL, "synth %s: key 'alpha' must be > 0 for routing=%s",
                          g->scen, c->routing);
    if (g->routing == R_DROP && !(c->capacity > 0.0))
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key 'capacity' must be > 0 for routing=drop", g->scen);
    if (g->routing == R_HOT && c->hot >= c->experts)
        return ft_err_set(g->err, FT_EINVAL,
                          "synth %s: key 'hot' must be below 'experts' (%lld) for routing=hot",
                          g->scen, (long long)c->experts);
    g->drift_sigma = g->routing == R_DRIFT && c->drift == 0.0 ? 0.1 : c->drift;
    g->sa_ratio = c->standalone / (1.0 - c->standalone);
    const struct {
        const char *key, *v;
    } vers[] = {{"cc", c->cc},
                {"cudnn_frontend", c->cudnn_frontend},
                {"cublaslt", c->cublaslt},
                {"te_version", c->te_version}};
    for (size_t i = 0; i < FT_ARRAY_LEN(vers); i++)
        if (!version_ok(vers[i].v))
            return ft_err_set(g->err, FT_EINVAL,
                              "synth %s: key '%s': '%s' is not a version (digits, letters, . + _ "
                              "-)",
                              g->scen, vers[i].key, vers[i].v);
    double cells =
        (double)c->layers *
        (double)(c->microbatches > c->eval_microbatches ? c->microbatches : c->eval_microbatches) *
        (double)c->experts;
    if (cells > (double)(INT64_C(1) << 26))
        return ft_err_set(g->err, FT_ERANGE,
                          "synth %s: keys 'layers' x 'microbatches' x 'experts' = %.0f exceeds "
                          "2^26 split cells",
                          g->scen, cells);
    return FT_OK;
}

static int emit_header(gen *g, const ft_synth_param *params, uint32_t n_params, uint64_t seed)
{
    const synth_cfg *c = &g->c;
    int64_t ws = c->world_size ? c->world_size : c->stages;
    char env[1024], extra[1024];
    snprintf(env, sizeof env,
             "{\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"%lld\","
             "\"NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP\":\"%lld\",\"cublaslt\":\"%s\","
             "\"cudnn_frontend\":\"%s\",\"device_cc\":\"%s\",\"world_size\":\"%lld\"}",
             (long long)c->fused_mlp, (long long)c->disable_wgrad, c->cublaslt, c->cudnn_frontend,
             c->cc, (long long)ws);
    /* provenance: the scenario, seed and the keys set (values as resolved, so JSON-safe) */
    ft_buf set = {0};
    int rc = ft_buf_append(&set, "", 1);
    for (uint32_t i = 0; i < n_params && !rc; i++) {
        set.len--; /* drop the terminator */
        const char *v = params[i].value;
        rc = ft_buf_printf(&set, "%s%s=%s", i ? " " : "", params[i].key, v);
        rc = rc ? rc : ft_buf_append(&set, "", 1);
    }
    if (rc) {
        ft_buf_free(&set);
        return ft_err_set(g->err, FT_ENOMEM, "synth %s: out of memory", g->scen);
    }
    /* values were validated by synth_cfg_resolve; numeric ones may hold only what strtoll and
     * strtod accept, so drop anything that would need escaping */
    for (size_t i = 0; i < set.len; i++)
        if (set.data[i] &&
            (set.data[i] < 0x20 || set.data[i] > 0x7e || set.data[i] == '"' || set.data[i] == '\\'))
            set.data[i] = '?';
    int n = snprintf(extra, sizeof extra,
                     n_params ? "{\"synth_scenario\":\"%s\",\"synth_seed\":\"%llu\","
                                "\"synth_set\":\"%s\"}"
                              : "{\"synth_scenario\":\"%s\",\"synth_seed\":\"%llu\"}",
                     g->scen, (unsigned long long)seed, (const char *)set.data);
    if (n < 0 || (size_t)n >= sizeof extra)
        snprintf(extra, sizeof extra, "{\"synth_scenario\":\"%s\",\"synth_seed\":\"%llu\"}",
                 g->scen, (unsigned long long)seed);
    ft_buf_free(&set);
    ft_header h;
    memset(&h, 0, sizeof h);
    h.te_version = c->te_version;
    h.has_rank = h.has_world_size = 1;
    h.rank = c->rank >= 0 ? c->rank : c->stage_only >= 0 ? c->stage_only : 0;
    h.world_size = ws;
    h.env_json = env;
    h.extra_json = extra;
    rc = g->sink->header_fn(g->sink->ctx, &h);
    if (rc) return synth_sink_fail(g, rc, "header", 0);
    return FT_OK;
}

static void gen_free(gen *g)
{
    if (g->layers)
        for (uint32_t l = 0; l < g->n_layers; l++)
            ft_free(g->layers[l].pop);
    ft_free(g->layers);
    for (uint32_t i = 0; g->fusers && i < g->n_fusers; i++)
        ft_free(g->fusers[i].cap);
    ft_free(g->fusers);
    ft_free(g->chunk_lo);
    ft_free(g->scratch_u32);
    ft_free(g->scratch_z);
    for (int k = 0; k < FK_N; k++)
        ft_free(g->ops_json[k]);
    ft_free(g->sa_n);
    ft_free(g->sa_bwd);
    ft_free(g->sa_k0);
    for (uint32_t i = 0; i < g->n_objs; i++)
        ft_free(g->objs[i]);
    ft_free(g->objs);
    for (uint32_t i = 0; i < g->n_decls; i++)
        ft_free(g->decls[i].attrs);
    ft_free(g->decls);
    ft_free(g->zoo);
    ft_free(g->splits);
    ft_free(g->eval_splits);
    ft_free(g->bwd_seq);
    ft_free(g->fwd_rec);
    ft_free(g->ops);
    ft_free(g->n_sops);
    ft_free(g->idx);
    ft_free(g->finF);
    ft_free(g->finB);
    ft_free(g->free_at);
}

/* ---- public ------------------------------------------------------------------------------- */
int ft_synth_run(const char *name, const ft_synth_param *params, uint32_t n_params, uint64_t seed,
                 ft_sink *sink, ft_err *err)
{
    if (!sink || !sink->header_fn || !sink->fuser_fn || !sink->recipe_fn || !sink->call_fn ||
        !sink->backward_fn)
        return ft_err_set(err, FT_EINVAL, "synth: incomplete sink");
    gen *g = ft_calloc(1, sizeof *g);
    if (!g) return ft_err_set(err, FT_ENOMEM, "synth: out of memory");
    uint32_t si;
    int rc = synth_cfg_resolve(name, params, n_params, &g->c, &si, err);
    if (rc) goto done;
    g->scen = ft_synth_scenario_at(si)->name;
    g->sink = sink;
    g->err = err;
    g->n_layers = (uint32_t)g->c.layers;
    g->n_stages = (uint32_t)g->c.stages;
    g->n_virtual = (uint32_t)g->c.virtual_stages;
    g->n_chunks = g->n_stages * g->n_virtual;
    synth_rng_seed(&g->r, seed);
    synth_rng_seed(&g->rt, seed ^ 0x5eed7153a11d0c5ull);
    synth_route_once();
    synth_recipes_once();
    if ((rc = check_cfg(g)) || (rc = synth_setup_recipes(g)) || (rc = build_model(g))) goto done;
    if ((rc = emit_header(g, params, n_params, seed))) goto done;
    g->t = INT64_C(1000000000); /* 1 s after the capture clock's origin */
    for (int64_t step = 0; step < g->c.steps; step++) {
        if ((rc = synth_schedule_step(g, step))) goto done;
        grad_state(g, step);
        if (g->drift_sigma > 0.0 && step > 0) synth_drift_routing(g);
        if (g->c.graphs ? step == 0 && (rc = synth_graph_setup(g, step))
                        : (rc = synth_run_pass(g, step, 0)))
            goto done;
        if (g->c.eval_every && (step + 1) % g->c.eval_every == 0 &&
            (rc = synth_run_pass(g, step, 1)))
            goto done;
    }
done:
    gen_free(g);
    ft_free(g);
    return rc;
}
