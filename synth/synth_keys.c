/*
 * synth_keys.c - the scenarios of `fusertrace synth` and their keys.
 *
 * Every scenario is one row of defaults for the same generator (synth.c and its parts), so every
 * scenario accepts every key; a row only names the keys whose defaults differ from the base column
 * of the key table. Adding a scenario is one row; adding a key is one row plus one synth_cfg field.
 * The "key=default: meaning" text that `synth --list` prints is generated from these tables once
 * (call_once), so the listing and the behaviour cannot disagree.
 */
#include "synth_int.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

/* ---- keys --------------------------------------------------------------------------------- */
enum { K_INT, K_BOOL, K_F64, K_STR };

typedef struct key_def {
    const char *name;
    int kind;        /* K_* */
    size_t off;      /* offset of the field in synth_cfg */
    int64_t lo, hi;  /* allowed range (K_INT, K_F64) */
    const char *def; /* base default (text) */
    const char *meaning /* one line for --list */;
} key_def;

#define OFF(f) offsetof(synth_cfg, f)
#define BIG    INT64_C(1000000000)

static const key_def keys[] = {
    {"layers", K_INT, OFF(layers), 1, 4096, "4", "transformer layers, split evenly over stages"},
    {"experts", K_INT, OFF(experts), 1, 4096, "8", "experts per grouped MLP (num_groups)"},
    {"tokens", K_INT, OFF(tokens), 0, BIG, "1024",
     "routed tokens per microbatch and MoE layer (sum of m_splits)"},
    {"hidden", K_INT, OFF(hidden), 1, 1 << 20, "512",
     "model width (fc1 in, fc2 out; multiples of 64 keep grouped-MLP fusion eligible)"},
    {"ffn", K_INT, OFF(ffn), 1, 1 << 20, "1024", "expert FFN width (fc1 out = 2*ffn, fc2 in)"},
    {"dense_ffn", K_INT, OFF(dense_ffn), 1, 1 << 20, "2048",
     "FFN width of dense layers and of the shared expert"},
    {"dense_layers", K_INT, OFF(dense_layers), 0, 4096, "0",
     "the first N layers use a dense MLP instead of experts"},
    {"shared_expert", K_BOOL, OFF(shared_expert), 0, 1, "1",
     "MoE layers also run a dense shared-expert MLP (its own fuser)"},
    {"tp", K_INT, OFF(tp), 1, 1024, "1",
     "tensor-parallel size of dense MLPs (column fc1, row fc2 when > 1)"},
    {"skew", K_F64, OFF(skew), 0, 8, "1.0",
     "Zipf exponent of per-layer expert popularity (0 = uniform)"},
    {"drift", K_F64, OFF(drift), 0, 4, "0.0",
     "per-step random walk of expert popularity (log-normal sigma; 0 = fixed routing)"},
    {"routing", K_STR, OFF(routing), 0, 0, "zipf",
     "expert routing family: zipf (fixed Zipf(skew) popularity), drift (zipf whose popularity "
     "random-walks per step by drift, 0.1 if drift=0), hot (hot experts take hot_share of the "
     "tokens), balanced (aux-loss balanced: gamma(alpha) weights drawn afresh per microbatch "
     "around uniform), drop (balanced, then tokens over capacity dropped)"},
    {"alpha", K_F64, OFF(alpha), 0, 1000, "0.5",
     "gamma shape of the balanced/drop per-microbatch expert weights (small = uneven)"},
    {"hot", K_INT, OFF(hot), 1, 4096, "2", "routing=hot: number of hot experts"},
    {"hot_share", K_F64, OFF(hot_share), 0, 1, "0.5",
     "routing=hot: share of the tokens routed to the hot experts"},
    {"capacity", K_F64, OFF(capacity), 0, 64, "1.0",
     "routing=drop: capacity factor; an expert keeps at most ceil(capacity * tokens / experts)"},
    {"standalone", K_F64, OFF(standalone), 0, 1, "0.0",
     "share of the calls (0 .. 0.9) made through standalone te.ops modules called directly, "
     "outside the Sequential: an RMSNorm and a router BasicLinear per layer, in turn"},
    {"standalone_fusers", K_STR, OFF(standalone_fusers), 0, 0, "transient",
     "transient: a new OperationFuser([op]) per standalone call, dropped right after it (TE); "
     "persistent: one fuser per standalone module (the same calls, for comparison)"},
    {"steps", K_INT, OFF(steps), 0, BIG, "4", "training steps"},
    {"microbatches", K_INT, OFF(microbatches), 1, 65536, "4", "microbatches per step"},
    {"stages", K_INT, OFF(stages), 1, 1024, "1",
     "pipeline stages, one device each (device = stage), 1F1B schedule"},
    {"virtual_stages", K_INT, OFF(virtual_stages), 1, 64, "1",
     "model chunks per stage: interleaved 1F1B (Megatron virtual pipeline) when > 1"},
    {"recompute", K_BOOL, OFF(recompute), 0, 1, "0",
     "full activation recompute (no_grad forward, recompute with grad in backward)"},
    {"recompute_layers", K_INT, OFF(recompute_layers), 1, 4096, "1",
     "layers per checkpointed chunk"},
    {"eval_every", K_INT, OFF(eval_every), 0, BIG, "0",
     "an eval pass (no_grad) after every N-th step, 0 = never"},
    {"eval_microbatches", K_INT, OFF(eval_microbatches), 1, 65536, "2",
     "microbatches of one eval pass"},
    {"graphs", K_BOOL, OFF(graphs), 0, 1, "0",
     "CUDA graphs: step 0 runs graph_warmup eager iterations and a capture (graph=true), later "
     "training steps replay graphs and never reach the fuser; evals run eager"},
    {"graph_warmup", K_INT, OFF(graph_warmup), 0, 1000, "3", "warm-up iterations before capture"},
    {"eval_recipe", K_STR, OFF(eval_recipe), 0, 0, "same",
     "recipe at eval: same (the training object), bf16, or a recipe spec"},
    {"recipe", K_STR, OFF(recipe), 0, 0, "mxfp8",
     "training recipe spec TYPE[:attr=value...]; TYPE = bf16 delayed current mxfp8 block nvfp4 "
     "custom"},
    {"layer_recipes", K_STR, OFF(layer_recipes), 0, 0, "",
     "comma list of per-layer recipe specs, cycled over layers (overrides recipe)"},
    {"bf16_first", K_INT, OFF(bf16_first), 0, 4096, "0", "the first N layers run in BF16"},
    {"bf16_last", K_INT, OFF(bf16_last), 0, 4096, "0", "the last N layers run in BF16"},
    {"switch_step", K_INT, OFF(switch_step), -1, BIG, "-1",
     "from this step on the global recipe is a new switch_recipe object (-1 = never)"},
    {"switch_recipe", K_STR, OFF(switch_recipe), 0, 0, "nvfp4", "recipe spec after switch_step"},
    {"rht_flip_every", K_INT, OFF(rht_flip_every), 0, BIG, "0",
     "flip NVFP4 disable_rht on the same object every N steps (scenario S1), 0 = never"},
    {"detour_every", K_INT, OFF(detour_every), 0, BIG, "0",
     "every N steps run detour_steps steps under detour_recipe, then a new object (S2)"},
    {"detour_steps", K_INT, OFF(detour_steps), 1, BIG, "1", "length of one detour in steps"},
    {"detour_recipe", K_STR, OFF(detour_recipe), 0, 0, "mxfp8",
     "recipe spec of the detour (bf16 for S2')"},
    {"detour_flip_rht", K_BOOL, OFF(detour_flip_rht), 0, 1, "1",
     "the object after a detour has NVFP4 disable_rht flipped"},
    {"bo_every", K_INT, OFF(bo_every), 0, BIG, "0",
     "move backward_override to the next of bo_values every N steps, 0 = never"},
    {"bo_values", K_STR, OFF(bo_values), 0, 0, "none,high_precision,dequantized",
     "backward_override values cycled by bo_every"},
    {"bo_mutate", K_BOOL, OFF(bo_mutate), 0, 1, "0",
     "1: mutate the same recipe object; 0: one object per value"},
    {"amax_every", K_INT, OFF(amax_every), 0, BIG, "0",
     "move DelayedScaling amax_history_len to the next of amax_lens every N steps"},
    {"amax_lens", K_STR, OFF(amax_lens), 0, 0, "1024,16", "amax_history_len values cycled"},
    {"amax_mutate", K_BOOL, OFF(amax_mutate), 0, 1, "1",
     "1: mutate the same recipe object; 0: one object per length"},
    {"frozen_layers", K_INT, OFF(frozen_layers), 0, 4096, "0",
     "the first N layers are frozen (op_rg false; their backward does not run)"},
    {"frozen_ops", K_STR, OFF(frozen_ops), 0, 0, "all",
     "what frozen means: all parameters, or fc1 (first linear and attention only)"},
    {"unfreeze_step", K_INT, OFF(unfreeze_step), -1, BIG, "-1",
     "frozen layers train from this step on (-1 = never)"},
    {"cc", K_STR, OFF(cc), 0, 0, "10.0", "env device_cc"},
    {"cudnn_frontend", K_STR, OFF(cudnn_frontend), 0, 0, "1.27.0", "env cudnn_frontend"},
    {"cublaslt", K_STR, OFF(cublaslt), 0, 0, "13.4.0", "env cublaslt"},
    {"fused_mlp", K_INT, OFF(fused_mlp), 0, 1 << 30, "1", "env NVTE_CUTEDSL_FUSED_GROUPED_MLP"},
    {"disable_wgrad", K_INT, OFF(disable_wgrad), 0, 1 << 30, "0",
     "env NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP"},
    {"te_version", K_STR, OFF(te_version), 0, 0, "2.20.0", "header te_version"},
    {"stage_only", K_INT, OFF(stage_only), -1, 1023, "-1",
     "write only this pipeline stage's records, as its rank would record them (seq, ns and "
     "splits as in the full stream); -1 = every stage"},
    {"rank", K_INT, OFF(rank), -1, 1 << 30, "-1", "header rank (-1 = stage_only if set, else 0)"},
    {"world_size", K_INT, OFF(world_size), 0, 1 << 30, "0",
     "header world_size and env world_size (0 = stages)"},
    {"timestamps", K_BOOL, OFF(timestamps), 0, 1, "1", "emit ns timestamps"},
    {"captured", K_STR, OFF(captured), 0, 0, "none",
     "model a capture from this TE: te-pre3410 or te-3410 adds rebuilt and a modelled fuse_ns "
     "(docs/fuser-model.md); none omits both"},
};

/* ---- scenarios ---------------------------------------------------------------------------- */
typedef struct scen_def {
    const char *name;
    const char *summary;
    const char *overrides; /* "key=value\n" lines over the base defaults */
} scen_def;

static const scen_def scens[] = {
    {"demo",
     "small MoE run: recompute, evals, BF16 first/last layers, NVFP4 with disable_rht detours "
     "through MXFP8 (policies differ visibly); a few thousand calls",
     "layers=6\nsteps=16\nmicrobatches=8\nrecompute=1\neval_every=4\nrecipe=nvfp4\n"
     "bf16_first=1\nbf16_last=1\ndetour_every=6\n"},
    {"recompute",
     "full activation recompute at scale, 64 experts, MXFP8 (steps=4096 gives ~1M calls)",
     "layers=8\nexperts=64\ntokens=4096\nhidden=1024\nffn=2048\nsteps=64\nmicrobatches=8\n"
     "recompute=1\n"},
    {"eval-interleave", "training alternating with BF16 evaluation every other step",
     "steps=8\neval_every=2\neval_microbatches=2\neval_recipe=bf16\n"},
    {"rht-switch",
     "NVFP4 with disable_rht mutated on the same object (S1) and changed across an MXFP8 detour "
     "(S2), with recompute (S3)",
     "steps=12\nrecipe=nvfp4\nrht_flip_every=2\ndetour_every=5\nrecompute=1\n"},
    {"backward-override", "MXFP8 training whose backward_override changes every 2 steps",
     "steps=8\nbo_every=2\nrecompute=1\n"},
    {"amax-history", "DelayedScaling whose amax_history_len changes every 2 steps",
     "steps=8\nrecipe=delayed\namax_every=2\n"},
    {"frozen", "the first 2 layers frozen until step 3, then trained (the boundary f moves)",
     "steps=6\nfrozen_layers=2\nunfreeze_step=3\n"},
    {"pipeline-2dev", "2 pipeline stages on devices 0 and 1, 1F1B schedule, recompute",
     "layers=4\nsteps=3\nmicrobatches=6\nstages=2\nrecompute=1\n"},
    {"cuda-graphs",
     "training under CUDA graphs (warm-up, capture, then replays without fuser calls) with eager "
     "BF16 evals",
     "steps=6\ngraphs=1\neval_every=3\neval_recipe=bf16\n"},
    {"moe-standalone",
     "a Sequential MoE model with standalone te.ops modules (RMSNorm, router) called directly: a "
     "transient fuser per call; MXFP8 with Float8CurrentScaling detours",
     "layers=4\nsteps=8\nrecompute=1\nstandalone=0.5\ndetour_every=3\ndetour_recipe=current\n"},
    {"recipe-zoo", "a different recipe per layer (every type and variant), BF16 eval",
     "layers=8\nsteps=4\neval_every=2\neval_recipe=bf16\n"
     "layer_recipes=bf16,mxfp8,nvfp4,nvfp4:disable_rht=true,delayed,current,block,custom\n"},
};

/* ---- --list text, built once ---------------------------------------------------------------- */
#define KEYS_TEXT_MAX 12288 /* bytes of one scenario's key listing (a test checks the fit) */
static ft_synth_scenario pub[FT_ARRAY_LEN(scens)];
static char pub_keys[FT_ARRAY_LEN(scens)][KEYS_TEXT_MAX];
static once_flag pub_once = ONCE_FLAG_INIT;

/* The default of key k in scenario s: the scenario's override if it names k, else the base. */
static const char *scen_default(const scen_def *s, const key_def *k, char *buf, size_t cap)
{
    size_t kl = strlen(k->name);
    const char *p = s->overrides;
    while (*p) {
        const char *eol = strchr(p, '\n');
        if (!eol) eol = p + strlen(p);
        if ((size_t)(eol - p) > kl && !strncmp(p, k->name, kl) && p[kl] == '=') {
            size_t n = (size_t)(eol - p) - kl - 1;
            if (n >= cap) n = cap - 1;
            memcpy(buf, p + kl + 1, n);
            buf[n] = '\0';
            return buf;
        }
        p = *eol ? eol + 1 : eol;
    }
    return k->def;
}

/* Static storage, no allocation: the listing cannot fail and holds nothing to free. */
static void build_pub(void)
{
    for (size_t s = 0; s < FT_ARRAY_LEN(scens); s++) {
        size_t len = 0;
        for (size_t k = 0; k < FT_ARRAY_LEN(keys); k++) {
            char tmp[SYNTH_STR_MAX];
            const char *d = scen_default(&scens[s], &keys[k], tmp, sizeof tmp);
            int n = snprintf(pub_keys[s] + len, KEYS_TEXT_MAX - len, "%s=%s: %s\n", keys[k].name, d,
                             keys[k].meaning);
            if (n < 0 || (size_t)n >= KEYS_TEXT_MAX - len) break; /* truncated: test fails */
            len += (size_t)n;
        }
        pub[s].name = scens[s].name;
        pub[s].summary = scens[s].summary;
        pub[s].keys = pub_keys[s];
    }
}

uint32_t ft_synth_n_scenarios(void)
{
    return (uint32_t)FT_ARRAY_LEN(scens);
}

const ft_synth_scenario *ft_synth_scenario_at(uint32_t i)
{
    if (i >= FT_ARRAY_LEN(scens)) return NULL;
    call_once(&pub_once, build_pub);
    return &pub[i];
}

/* ---- value parsing -------------------------------------------------------------------------- */
static const key_def *key_find(const char *name)
{
    for (size_t k = 0; k < FT_ARRAY_LEN(keys); k++)
        if (!strcmp(keys[k].name, name)) return &keys[k];
    return NULL;
}

/* A string value may hold printable ASCII except quote and backslash, so it can go into JSON
 * text (env, header) without escaping. */
static int str_ok(const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\') return 0;
    return 1;
}

static int key_set(synth_cfg *cfg, const key_def *k, const char *v, const char *scen, ft_err *err)
{
    char *field = (char *)cfg + k->off;
    switch (k->kind) {
    case K_INT:
    case K_BOOL: {
        int64_t x;
        if (k->kind == K_BOOL && (!strcmp(v, "true") || !strcmp(v, "false")))
            x = !strcmp(v, "true");
        else if (ft_parse_i64(v, &x))
            return ft_err_set(err, FT_EINVAL, "synth %s: key '%s': '%s' is not %s", scen, k->name,
                              v, k->kind == K_BOOL ? "0, 1, true or false" : "an integer");
        if (x < k->lo || x > k->hi)
            return ft_err_set(err, FT_ERANGE, "synth %s: key '%s': %s is out of range [%lld, %lld]",
                              scen, k->name, v, (long long)k->lo, (long long)k->hi);
        memcpy(field, &x, sizeof x);
        return FT_OK;
    }
    case K_F64: {
        double x;
        if (ft_parse_f64(v, &x) || !isfinite(x))
            return ft_err_set(err, FT_EINVAL, "synth %s: key '%s': '%s' is not a number", scen,
                              k->name, v);
        if (x < (double)k->lo || x > (double)k->hi)
            return ft_err_set(err, FT_ERANGE, "synth %s: key '%s': %s is out of range [%lld, %lld]",
                              scen, k->name, v, (long long)k->lo, (long long)k->hi);
        memcpy(field, &x, sizeof x);
        return FT_OK;
    }
    default:
        if (strlen(v) >= SYNTH_STR_MAX)
            return ft_err_set(err, FT_EINVAL, "synth %s: key '%s': value longer than %d bytes",
                              scen, k->name, SYNTH_STR_MAX - 1);
        if (!str_ok(v))
            return ft_err_set(err, FT_EINVAL,
                              "synth %s: key '%s': value holds a quote, backslash or non-printable "
                              "byte",
                              scen, k->name);
        ft_strlcpy(field, v, SYNTH_STR_MAX);
        return FT_OK;
    }
}

int synth_cfg_resolve(const char *name, const ft_synth_param *params, uint32_t n_params,
                      synth_cfg *cfg, uint32_t *scenario_idx, ft_err *err)
{
    const scen_def *s = NULL;
    if (!name) return ft_err_set(err, FT_EINVAL, "synth: no scenario named");
    for (size_t i = 0; i < FT_ARRAY_LEN(scens); i++)
        if (!strcmp(scens[i].name, name)) {
            s = &scens[i];
            *scenario_idx = (uint32_t)i;
        }
    if (!s)
        return ft_err_set(err, FT_ENOTFOUND,
                          "synth: unknown scenario '%s' (`fusertrace synth --list` lists them)",
                          name);
    memset(cfg, 0, sizeof *cfg);
    for (size_t k = 0; k < FT_ARRAY_LEN(keys); k++) {
        char tmp[SYNTH_STR_MAX];
        int rc = key_set(cfg, &keys[k], scen_default(s, &keys[k], tmp, sizeof tmp), name, err);
        if (rc) return rc; /* a bad table row: caught by the tests */
    }
    for (uint32_t i = 0; i < n_params; i++) {
        if (!params[i].key || !params[i].value)
            return ft_err_set(err, FT_EINVAL, "synth %s: parameter %u has no key or value", name,
                              i);
        const key_def *k = key_find(params[i].key);
        if (!k)
            return ft_err_set(err, FT_ENOTFOUND, "synth %s: unknown key '%s'", name, params[i].key);
        int rc = key_set(cfg, k, params[i].value, name, err);
        if (rc) return rc;
    }
    return FT_OK;
}
