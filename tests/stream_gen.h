/*
 * stream_gen.h - a deterministic MoE training-loop record stream for the schema/recorder tests
 * and benchmarks: L layers with a grouped-MLP fuser (E experts) and a dense fuser, M
 * microbatches per step, full activation recompute (checkpointed forward under no_grad, then a
 * recompute with grad that repeats the forward's split sizes, then the backward event), skewed
 * expert routing (fixed per-layer popularity plus sampling noise, sum = tokens * top-k), a
 * recipe per layer group and an occasional mutated recipe. Header-only so each test binary can
 * include it.
 */
#ifndef FT_STREAM_GEN_H
#define FT_STREAM_GEN_H

#include "ft_recorder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gen_params {
    uint64_t seed;
    uint32_t layers, experts, microbatches;
    uint64_t n_calls; /* stop after this many calls */
    int64_t tokens;   /* tokens per microbatch (times top-k) */
    int dense;        /* also a dense fuser per layer */
} gen_params;

typedef struct gen_rng {
    uint64_t s;
} gen_rng;

static inline uint64_t gen_next(gen_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double gen_unif(gen_rng *r)
{
    return (double)(gen_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static inline double gen_normal(gen_rng *r)
{
    double u = gen_unif(r) + 1e-12, v = gen_unif(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Per-layer routing: popularity weights (Zipf-like, shuffled per layer). */
static inline void gen_splits(gen_rng *r, const double *w, uint32_t e, int64_t T, int64_t *out)
{
    int64_t sum = 0;
    uint32_t big = 0;
    for (uint32_t i = 0; i < e; i++) {
        double mu = (double)T * w[i];
        double x = mu + sqrt(mu * (1.0 - w[i])) * gen_normal(r);
        int64_t v = x < 0 ? 0 : (int64_t)(x + 0.5);
        out[i] = v;
        sum += v;
        if (out[i] > out[big]) big = i;
    }
    out[big] += T - sum;
    if (out[big] < 0) { /* extremely unlikely; spread the deficit */
        int64_t d = -out[big];
        out[big] = 0;
        for (uint32_t i = 0; i < e && d; i++) {
            int64_t take = out[i] < d ? out[i] : d;
            out[i] -= take;
            d -= take;
        }
    }
}

static inline int gen_stream(const gen_params *p, ft_sink *s)
{
    gen_rng rng = {p->seed};
    uint32_t L = p->layers, E = p->experts, M = p->microbatches;
    int rc;
    ft_header h = {0};
    h.te_version = "2.20.2";
    h.has_rank = h.has_world_size = 1;
    h.rank = 0;
    h.world_size = 8;
    h.env_json = "{\"device_cc\":\"9.0\",\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\"}";
    h.extra_json = "{}";
    if ((rc = s->header_fn(s->ctx, &h))) return rc;
    char ops[1024], label[64];
    snprintf(ops, sizeof ops,
             "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":%u,\"in_features\":4096,"
             "\"out_features\":2048,\"bias\":false,\"dtype\":\"bfloat16\"}},"
             "{\"type\":\"ScaledSwiGLU\",\"attrs\":{\"glu_interleave_size\":32,\"limit\":7.0}},"
             "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":%u,\"in_features\":1024,"
             "\"out_features\":4096,\"bias\":false,\"dtype\":\"bfloat16\"}}]",
             E, E);
    const char *dense_ops = "[{\"type\":\"BasicLinear\",\"attrs\":{\"in_features\":4096}},"
                            "{\"type\":\"Bias\",\"attrs\":{\"size\":4096}},{\"type\":\"GELU\"},"
                            "{\"type\":\"BasicLinear\",\"attrs\":{\"in_features\":4096}},"
                            "{\"type\":\"Bias\",\"attrs\":{\"size\":4096}}]";
    uint32_t nf = p->dense ? 2 : 1;
    for (uint32_t l = 0; l < L; l++) {
        snprintf(label, sizeof label, "decoder.layers.%u.mlp", l);
        ft_fuser_def f = {(int64_t)(l * nf + 1), label, ops, 3};
        if ((rc = s->fuser_fn(s->ctx, &f))) return rc;
        if (p->dense) {
            snprintf(label, sizeof label, "decoder.layers.%u.dense", l);
            ft_fuser_def g = {(int64_t)(l * nf + 2), label, dense_ops, 5};
            if ((rc = s->fuser_fn(s->ctx, &g))) return rc;
        }
    }
    ft_recipe_def r1 = {1, "MXFP8BlockScaling", 1401,
                        "{\"fp8_format\":\"E4M3\",\"backward_override\":null}"};
    ft_recipe_def r2 = {2, "NVFP4BlockScaling", 1402,
                        "{\"disable_rht\":false,\"backward_override\":null}"};
    if ((rc = s->recipe_fn(s->ctx, &r1)) || (rc = s->recipe_fn(s->ctx, &r2))) return rc;
    /* per-layer popularity */
    double *w = malloc(sizeof(double) * L * E);
    int64_t *splits = malloc(sizeof(int64_t) * (size_t)L * M * E);
    if (!w || !splits) {
        free(w);
        free(splits);
        return FT_ENOMEM;
    }
    for (uint32_t l = 0; l < L; l++) {
        double tot = 0;
        for (uint32_t i = 0; i < E; i++) {
            uint32_t rank = (uint32_t)((i * 2654435761u + l * 40503u) % E);
            w[l * E + i] = 1.0 / pow(1.0 + rank, 0.8);
            tot += w[l * E + i];
        }
        for (uint32_t i = 0; i < E; i++)
            w[l * E + i] /= tot;
    }
    int64_t seq = 0, ns = 1000000;
    uint64_t calls = 0;
    uint8_t rg3[3] = {1, 0, 1}, rg5[5] = {1, 1, 0, 1, 1};
    for (int64_t step = 0; calls < p->n_calls && !rc; step++) {
        if (step == 49) { /* the NVFP4 recipe object is mutated: disable_rht */
            ft_recipe_def rr = {3, "NVFP4BlockScaling", 1402,
                                "{\"disable_rht\":true,\"backward_override\":null}"};
            if ((rc = s->recipe_fn(s->ctx, &rr))) break;
        }
        int64_t recipe_id = (step >= 49 && ((step - 49) / 50) % 2 == 0) ? 3 : 2;
        for (int pass = 0; pass < 2 && !rc; pass++) {
            for (uint32_t mb = 0; mb < M && !rc; mb++) {
                for (uint32_t li = 0; li < L && !rc; li++) {
                    uint32_t l = pass == 0 ? li : L - 1 - li;
                    for (uint32_t k = 0; k < nf && !rc; k++) {
                        uint32_t fk = pass == 0 ? k : nf - 1 - k;
                        int moe = fk == 0;
                        ft_call c = {0};
                        c.seq = seq++;
                        c.fuser = (int64_t)(l * nf + fk + 1);
                        c.recipe = (l == 0 || l == L - 1) ? 1 : recipe_id;
                        c.flags = FT_CF_INPUT_RG | FT_CF_HAS_STEP | FT_CF_HAS_MB | FT_CF_HAS_PHASE |
                                  FT_CF_HAS_NS | FT_CF_HAS_RECIPE | FT_CF_HAS_FUSE_NS;
                        if (pass == 1) c.flags |= FT_CF_GRAD;
                        c.device = 0;
                        c.n_op_rg = moe ? 3 : 5;
                        c.op_rg = moe ? rg3 : rg5;
                        int64_t *sp = &splits[((size_t)l * M + mb) * E];
                        if (moe) {
                            if (pass == 0) gen_splits(&rng, &w[l * E], E, p->tokens, sp);
                            c.flags |= FT_CF_HAS_SPLITS;
                            c.n_splits = E;
                            c.m_splits = sp;
                        }
                        c.step = step;
                        c.mb = mb;
                        c.phase = pass == 0 ? "fwd" : "recompute";
                        ns += 20000 + (int64_t)(gen_next(&rng) % 5000);
                        c.ns = ns;
                        c.fuse_ns = 2000 + (int64_t)(gen_next(&rng) % 700);
                        if ((rc = s->call_fn(s->ctx, &c))) break;
                        calls++;
                        if (pass == 1) {
                            ft_backward b = {seq++, c.seq, 1, ns + 15000};
                            if ((rc = s->backward_fn(s->ctx, &b))) break;
                        }
                        if (calls >= p->n_calls) goto out;
                    }
                }
            }
        }
    }
out:
    free(w);
    free(splits);
    return rc;
}

/* ---- a sink that folds every record into a hash (for comparing streams) ------------------ */
typedef struct digest_sink {
    uint64_t h;
    uint64_t n_calls, n_bwd, n_fusers, n_recipes, n_headers;
} digest_sink;

static inline void dg_u(digest_sink *d, uint64_t v)
{
    d->h = ft_hash_mix(d->h, v);
}

static inline void dg_s(digest_sink *d, const char *s)
{
    dg_u(d, s ? ft_hash64(s, strlen(s)) : 0x5eedull);
}

static inline int dgs_header(void *ctx, const ft_header *h)
{
    digest_sink *d = ctx;
    d->n_headers++;
    dg_s(d, h->te_version);
    dg_s(d, h->torch_version);
    dg_s(d, h->host);
    dg_s(d, h->started_at);
    dg_u(d, (uint64_t)h->has_rank * 7 + (uint64_t)(h->has_rank ? h->rank : 0));
    dg_u(d, (uint64_t)h->has_world_size * 7 + (uint64_t)(h->has_world_size ? h->world_size : 0));
    return FT_OK;
}

static inline int dgs_fuser(void *ctx, const ft_fuser_def *f)
{
    digest_sink *d = ctx;
    d->n_fusers++;
    dg_u(d, 1000 + (uint64_t)f->id);
    dg_s(d, f->label);
    dg_u(d, f->n_ops);
    return FT_OK;
}

static inline int dgs_recipe(void *ctx, const ft_recipe_def *r)
{
    digest_sink *d = ctx;
    d->n_recipes++;
    dg_u(d, 2000 + (uint64_t)r->id);
    dg_s(d, r->type);
    dg_u(d, (uint64_t)r->obj);
    return FT_OK;
}

static inline int dgs_call(void *ctx, const ft_call *c)
{
    digest_sink *d = ctx;
    uint32_t f = c->flags;
    d->n_calls++;
    dg_u(d, (uint64_t)c->seq);
    dg_u(d, (uint64_t)c->fuser);
    dg_u(d, (f & FT_CF_HAS_RECIPE) ? (uint64_t)c->recipe : 0xabcdull);
    dg_u(d, f);
    dg_u(d, (uint64_t)c->device);
    dg_u(d, c->n_op_rg);
    for (uint32_t i = 0; i < c->n_op_rg; i++)
        dg_u(d, c->op_rg[i]);
    if (f & FT_CF_HAS_SPLITS) {
        dg_u(d, c->n_splits);
        for (uint32_t i = 0; i < c->n_splits; i++)
            dg_u(d, (uint64_t)c->m_splits[i]);
    }
    if (f & FT_CF_HAS_STEP) dg_u(d, (uint64_t)c->step);
    if (f & FT_CF_HAS_MB) dg_u(d, (uint64_t)c->mb);
    if (f & FT_CF_HAS_PHASE) dg_s(d, c->phase);
    if (f & FT_CF_HAS_NS) dg_u(d, (uint64_t)c->ns);
    if (f & FT_CF_HAS_FUSE_NS) dg_u(d, (uint64_t)c->fuse_ns);
    return FT_OK;
}

static inline int dgs_backward(void *ctx, const ft_backward *b)
{
    digest_sink *d = ctx;
    d->n_bwd++;
    dg_u(d, 3000 + (uint64_t)b->seq);
    dg_u(d, (uint64_t)b->call);
    dg_u(d, b->has_ns ? (uint64_t)b->ns : 0x77ull);
    return FT_OK;
}

static inline void digest_sink_init(digest_sink *d, ft_sink *s)
{
    memset(d, 0, sizeof *d);
    s->ctx = d;
    s->header_fn = dgs_header;
    s->fuser_fn = dgs_fuser;
    s->recipe_fn = dgs_recipe;
    s->call_fn = dgs_call;
    s->backward_fn = dgs_backward;
    s->error_fn = NULL;
}

#endif /* FT_STREAM_GEN_H */
