/*
 * stream_gen.h - the schema/recorder tests' MoE record stream and helpers: gen_stream runs synth's
 * generator (scenario `recompute`: L layers with a grouped-MLP fuser of E experts and, with
 * dense, a shared-expert dense fuser; M microbatches per step; full activation recompute whose
 * recompute repeats its forward's split sizes; synth's routing) cut at a call count, so there is
 * one MoE stream generator in the project; a small PRNG for the tests' random records; a sink
 * that folds a stream into a hash. Header-only so each test binary can include it.
 */
#ifndef FT_STREAM_GEN_H
#define FT_STREAM_GEN_H

#include "ft_recorder.h"
#include "ft_synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gen_params {
    uint64_t seed;
    uint32_t layers, experts, microbatches;
    uint64_t n_calls; /* stop after this many calls */
    int64_t tokens;   /* tokens per microbatch (times top-k) */
    int dense;        /* also a dense (shared-expert) fuser per layer */
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

/* ---- the stream: synth's generator (synth/), cut at n_calls ---------------------------------- */
typedef struct gen_cut {
    const ft_sink *down;
    uint64_t calls, limit;
} gen_cut;

static inline int gc_header(void *ctx, const ft_header *h)
{
    const gen_cut *g = ctx;
    return g->down->header_fn(g->down->ctx, h);
}

static inline int gc_fuser(void *ctx, const ft_fuser_def *f)
{
    const gen_cut *g = ctx;
    return g->down->fuser_fn(g->down->ctx, f);
}

static inline int gc_recipe(void *ctx, const ft_recipe_def *r)
{
    const gen_cut *g = ctx;
    return g->down->recipe_fn(g->down->ctx, r);
}

#define GEN_CUT_DONE 1000 /* the sink's "enough": not an FT_* status */

static inline int gc_call(void *ctx, const ft_call *c)
{
    gen_cut *g = ctx;
    if (g->calls >= g->limit) return GEN_CUT_DONE;
    g->calls++;
    return g->down->call_fn(g->down->ctx, c);
}

static inline int gc_backward(void *ctx, const ft_backward *b)
{
    gen_cut *g = ctx;
    if (g->calls >= g->limit) return GEN_CUT_DONE;
    return g->down->backward_fn(g->down->ctx, b);
}

static inline const ft_err *gc_error(void *ctx)
{
    const gen_cut *g = ctx;
    return g->down->error_fn ? g->down->error_fn(g->down->ctx) : NULL;
}

/* synth `recompute` with the shape of p (layers, experts, microbatches, routed tokens, the
 * shared-expert dense fuser when p->dense), layers alternating MXFP8 and NVFP4 recipes, header
 * te_version 2.20.2 and world_size 8, seed p->seed, cut after p->n_calls calls. Returns
 * the sink's status (or synth's) on failure. */
static inline int gen_stream(const gen_params *p, ft_sink *s)
{
    char layers[24], experts[24], mbs[24], tokens[24];
    snprintf(layers, sizeof layers, "%u", p->layers);
    snprintf(experts, sizeof experts, "%u", p->experts);
    snprintf(mbs, sizeof mbs, "%u", p->microbatches);
    snprintf(tokens, sizeof tokens, "%lld", (long long)p->tokens);
    ft_synth_param kv[] = {{"layers", layers},
                           {"experts", experts},
                           {"microbatches", mbs},
                           {"tokens", tokens},
                           {"steps", "1000000000"},
                           {"shared_expert", p->dense ? "1" : "0"},
                           {"layer_recipes", "mxfp8,nvfp4"},
                           {"te_version", "2.20.2"},
                           {"world_size", "8"}};
    gen_cut g = {s, 0, p->n_calls};
    ft_sink cut = {&g, gc_header, gc_fuser, gc_recipe, gc_call, gc_backward, gc_error, NULL};
    ft_err err = {0};
    int rc =
        ft_synth_run("recompute", kv, (uint32_t)(sizeof kv / sizeof kv[0]), p->seed, &cut, &err);
    return rc == GEN_CUT_DONE && g.calls == p->n_calls ? FT_OK : rc;
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

static inline int dgs_end(void *ctx, const ft_fuser_end *e)
{
    digest_sink *d = ctx;
    dg_u(d, 5000 + (uint64_t)e->seq);
    dg_u(d, (uint64_t)e->fuser);
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
    s->end_fn = dgs_end;
}

#endif /* FT_STREAM_GEN_H */
