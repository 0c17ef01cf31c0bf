/*
 * synth_pipeline.c - the generator's passes: one pipeline stage's forward or backward of one
 * microbatch (with full activation recompute: the checkpointed chunks recomputed with grad,
 * then their backward), Megatron's 1F1B schedule per stage (plain or interleaved over virtual
 * stages), the stages interleaved by a noise-free timing model, and the CUDA-graph warm-up and
 * capture; and the records they emit (a fuser declared before its first call, the timing model's
 * timestamps with noise from the timing stream, the captured TE's rebuilt and a modelled
 * fuse_ns). Standalone modules (key standalone) run before a layer's Sequential fusers, as many
 * calls as keep their share of the calls; with transient fusers each call declares a new fuser
 * (its recipe declared first, so that the declaration stands right before the call, as the
 * capture hook writes it) and ends it right after, as TE drops OperationFuser([op]) when __call__
 * returns. Limits: stages interleave at the granularity of one stage's forward or backward of
 * one microbatch.
 */
#include "synth_int.h"

/* ---- records ------------------------------------------------------------------------------ */
static int64_t stamp(gen *g, int64_t t)
{
    if (t <= g->last_ns) t = g->last_ns + 1;
    g->last_ns = t;
    return t;
}

/* d with +-5% noise from the timing stream (never the routing stream, so that the timestamps
 * and captured keys do not move split sizes). */
static int64_t jitter(gen *g, int64_t d)
{
    return d + (int64_t)((double)d * 0.1 * (rng_unif(&g->rt) - 0.5));
}

/* Whether the captured TE version built a plan for this call, and a modelled fuse_ns: a
 * dict/slot hit costs a few microseconds of Python, a reset_recipe_state sweep and a plan build
 * cost per basic op (figures of the order issue #2897 profiles; not measurements). */
static int captured_rebuilt(gen *g, sfuser *f, const robj *rec, int grad, int input_rg,
                            const uint8_t *op_rg, int64_t *fuse_ns)
{
    uint32_t n = g->n_ops[f->kind], first_rg = n;
    for (uint32_t i = 0; i < n && first_rg == n; i++)
        if (op_rg[i]) first_rg = i;
    const uint32_t fb = ft_te_boundary(n, grad, input_rg, first_rg);
    /* synth's RT_* are ft_recipe_type - 1 (FT_RT_NONE = 0 is no recipe); bo codes are ft_bo */
    const int type = rec ? rec->type + 1 : FT_RT_NONE;
    int reset;
    int build = ft_te_cache_call(f->cap, type, synth_bo_code(rec), synth_hist_len(rec), fb, &reset);
    *fuse_ns = 4000 + (reset ? 30000 * (int64_t)n : 0) + (build ? 150000 + 20000 * (int64_t)n : 0);
    return build;
}

static int emit_call(gen *g, uint32_t fi, robj *rec, int grad, int input_rg, const uint8_t *op_rg,
                     const int64_t *splits, int64_t step, int64_t mb, const char *phase, int64_t *t,
                     int64_t *seq_out)
{
    sfuser *f = &g->fusers[fi];
    int rc, keep = g->c.stage_only < 0 || f->stage == g->c.stage_only;
    if (f->transient) { /* a new OperationFuser([op]) for this call */
        f->id = g->next_id++;
        f->declared = 0;
        if (keep && rec && !rec->decl && (rc = synth_recipe_declare(g, rec))) return rc;
        if (f->cap) ft_te_cache_init(f->cap, g->captured == 1 ? FT_TE_PRE3410 : FT_TE_3410);
    }
    if (keep && !f->declared) {
        ft_fuser_def fd = {f->id, f->label, g->ops_json[f->kind], g->n_ops[f->kind], 0, 0};
        rc = g->sink->fuser_fn(g->sink->ctx, &fd);
        if (rc) return synth_sink_fail(g, rc, "fuser declaration", g->seq);
        f->declared = 1;
    }
    if (keep && rec && !rec->decl && (rc = synth_recipe_declare(g, rec))) return rc;
    ft_call c;
    c.seq = g->seq++;
    c.fuser = f->id;
    c.recipe = rec ? rec->decl : 0;
    c.flags = FT_CF_HAS_STEP | FT_CF_HAS_MB | FT_CF_HAS_PHASE;
    if (grad) c.flags |= FT_CF_GRAD;
    if (input_rg) c.flags |= FT_CF_INPUT_RG;
    if (rec) c.flags |= FT_CF_HAS_RECIPE;
    if (g->c.graphs) c.flags |= FT_CF_HAS_GRAPH | (g->graph_phase ? FT_CF_GRAPH : 0u);
    c.device = f->stage;
    c.n_op_rg = g->n_ops[f->kind];
    c.op_rg = op_rg;
    c.n_splits = 0;
    c.m_splits = NULL;
    if (splits) {
        c.flags |= FT_CF_HAS_SPLITS;
        c.n_splits = (uint32_t)g->c.experts;
        c.m_splits = splits;
    }
    c.step = step;
    c.mb = mb;
    c.phase = phase;
    c.ns = 0;
    c.fuse_ns = 0;
    int64_t fuse = 0; /* model time of the fusion decision, noise-free */
    if (f->cap) {
        c.flags |= FT_CF_HAS_REBUILT | FT_CF_HAS_FUSE_NS;
        if (captured_rebuilt(g, f, rec, grad, input_rg, op_rg, &fuse)) c.flags |= FT_CF_REBUILT;
        c.fuse_ns = jitter(g, fuse);
    }
    if (g->c.timestamps) {
        c.flags |= FT_CF_HAS_NS;
        c.ns = stamp(g, *t + jitter(g, g->dur_fwd[f->kind] / 10));
    }
    *t += g->dur_fwd[f->kind] + fuse;
    /* another rank's stage: numbered, timed and modelled as in the full stream, not written */
    if (keep && (rc = g->sink->call_fn(g->sink->ctx, &c)))
        return synth_sink_fail(g, rc, "call", c.seq);
    if (seq_out) *seq_out = c.seq;
    if (f->transient) { /* TE drops the fuser when the call returns */
        const ft_fuser_end e = {g->seq++, f->id};
        if (keep && g->sink->end_fn && (rc = g->sink->end_fn(g->sink->ctx, &e)))
            return synth_sink_fail(g, rc, "fuser end", e.seq);
    }
    return FT_OK;
}

/* The standalone calls owed to the share for one pass of layer L (0 without standalone ops). */
static uint32_t standalone_calls(gen *g, slayer *L)
{
    if (g->c.standalone <= 0.0) return 0;
    L->sa_acc += g->sa_ratio * (double)L->n_fusers;
    uint32_t n = (uint32_t)L->sa_acc;
    L->sa_acc -= (double)n;
    return n < SA_MAX ? n : SA_MAX;
}

/* Layer l's standalone calls k < n of microbatch m (RMSNorm and router in turn, across passes,
 * from module k0); where bwd is non-NULL, the seqs of those whose backward runs. */
static int emit_standalone(gen *g, uint32_t l, uint32_t k0, uint32_t n, robj *rec, int grad,
                           int64_t step, int64_t mb, const char *phase, int64_t *t, int64_t *bwd)
{
    slayer *L = &g->layers[l];
    for (uint32_t k = 0; k < n; k++) {
        int64_t seq;
        int rc = emit_call(g, L->sa_fuser[(k0 + k) & 1], rec, grad, grad && L->input_rg, L->sa_rg,
                           NULL, step, mb, phase, t, &seq);
        if (rc) return rc;
        if (bwd) bwd[k] = grad && L->sa_bwd ? seq : -1;
    }
    return FT_OK;
}

static int emit_backward(gen *g, int64_t call, const sfuser *f, int64_t *t)
{
    int kind = f->kind;
    ft_backward b;
    b.seq = g->seq++;
    b.call = call;
    b.has_ns = g->c.timestamps != 0;
    b.ns = b.has_ns ? stamp(g, *t + jitter(g, g->dur_fwd[kind] / 5)) : 0;
    *t += 2 * g->dur_fwd[kind];
    if (g->c.stage_only >= 0 && f->stage != g->c.stage_only) return FT_OK;
    int rc = g->sink->backward_fn(g->sink->ctx, &b);
    if (rc) return synth_sink_fail(g, rc, "backward", b.seq);
    return FT_OK;
}

/* ---- one stage's forward / backward of one microbatch ------------------------------------- */
static int chunk_forward(gen *g, uint32_t ch, uint32_t m, int64_t step, int eval, int64_t *t)
{
    int grad = !eval && !g->c.recompute;
    const char *phase = eval ? "eval" : g->graph_phase ? g->graph_phase : "fwd";
    int64_t mb = g->graph_phase ? g->graph_iter : (int64_t)m;
    uint32_t M = (uint32_t)g->c.microbatches, E = (uint32_t)g->c.experts;
    for (uint32_t l = g->chunk_lo[ch]; l < g->chunk_lo[ch + 1]; l++) {
        slayer *L = &g->layers[l];
        robj *rec = eval ? synth_eval_recipe(g, l, step) : synth_train_recipe(g, l, step);
        if (!eval) g->fwd_rec[(size_t)l * M + m] = rec;
        const uint32_t n_sa = standalone_calls(g, L), k0 = L->sa_next;
        L->sa_next = (k0 + n_sa) & 1;
        if (!eval) {
            g->sa_n[(size_t)l * M + m] = (uint8_t)n_sa;
            g->sa_k0[(size_t)l * M + m] = (uint8_t)k0;
        }
        int rc = emit_standalone(g, l, k0, n_sa, rec, grad, step, mb, phase, t,
                                 eval ? NULL : g->sa_bwd + ((size_t)l * M + m) * SA_MAX);
        if (rc) return rc;
        for (uint32_t k = 0; k < L->n_fusers; k++) {
            const int64_t *sp = NULL;
            if (L->moe && k == 0) {
                int64_t *dst = eval ? g->eval_splits : g->splits + ((size_t)l * M + m) * E;
                synth_route_draw(g, L, dst);
                sp = dst;
            }
            int64_t seq;
            rc = emit_call(g, L->fuser[k], rec, grad, grad && L->input_rg,
                           grad ? L->rg_train[k] : L->rg_nograd[k], sp, step, mb, phase, t, &seq);
            if (rc) return rc;
            if (!eval) g->bwd_seq[((size_t)l * M + m) * 2 + k] = grad && L->bwd[k] ? seq : -1;
        }
    }
    return FT_OK;
}

static int layer_backward(gen *g, uint32_t l, uint32_t m, int64_t *t)
{
    slayer *L = &g->layers[l];
    const size_t lm = (size_t)l * g->c.microbatches + m;
    for (uint32_t k = L->n_fusers; k-- > 0;) {
        int64_t call = g->bwd_seq[lm * 2 + k];
        if (call < 0) continue;
        int rc = emit_backward(g, call, &g->fusers[L->fuser[k]], t);
        if (rc) return rc;
    }
    for (uint32_t k = g->sa_n[lm]; k-- > 0;) { /* the standalone ops ran first: backward last */
        int64_t call = g->sa_bwd[lm * SA_MAX + k];
        if (call < 0) continue;
        int rc = emit_backward(g, call, &g->fusers[L->sa_fuser[(g->sa_k0[lm] + k) & 1]], t);
        if (rc) return rc;
    }
    return FT_OK;
}

static int chunk_backward(gen *g, uint32_t ch, uint32_t m, int64_t step, int64_t *t)
{
    uint32_t lo = g->chunk_lo[ch], hi = g->chunk_lo[ch + 1], M = (uint32_t)g->c.microbatches;
    uint32_t E = (uint32_t)g->c.experts;
    int rc;
    if (!g->c.recompute) {
        for (uint32_t l = hi; l-- > lo;)
            if ((rc = layer_backward(g, l, m, t))) return rc;
        return FT_OK;
    }
    /* checkpointed chunks of recompute_layers layers from the stage's first layer, in reverse:
     * a chunk whose layers need no grad has no backward, so it is not recomputed either */
    uint32_t rl = (uint32_t)g->c.recompute_layers;
    uint32_t n_chunks = (hi - lo + rl - 1) / rl;
    for (uint32_t ci = n_chunks; ci-- > 0;) {
        uint32_t clo = lo + ci * rl, chi = clo + rl < hi ? clo + rl : hi;
        int any = 0;
        for (uint32_t l = clo; l < chi; l++)
            for (uint32_t k = 0; k < g->layers[l].n_fusers; k++)
                any |= g->layers[l].bwd[k];
        if (!any) continue;
        for (uint32_t l = clo; l < chi; l++) {
            slayer *L = &g->layers[l];
            robj *rec = g->fwd_rec[(size_t)l * M + m]; /* the forward's object */
            const size_t lm = (size_t)l * M + m;
            rc = emit_standalone(g, l, g->sa_k0[lm], g->sa_n[lm], rec, 1, step, m, "recompute", t,
                                 g->sa_bwd + lm * SA_MAX);
            if (rc) return rc;
            for (uint32_t k = 0; k < L->n_fusers; k++) {
                const int64_t *sp = L->moe && k == 0 ? g->splits + ((size_t)l * M + m) * E : NULL;
                int64_t seq;
                rc = emit_call(g, L->fuser[k], rec, 1, L->input_rg, L->rg_train[k], sp, step, m,
                               "recompute", t, &seq);
                if (rc) return rc;
                g->bwd_seq[((size_t)l * M + m) * 2 + k] = L->bwd[k] ? seq : -1;
            }
        }
        for (uint32_t l = chi; l-- > clo;)
            if ((rc = layer_backward(g, l, m, t))) return rc;
    }
    return FT_OK;
}

/* ---- pipeline: 1F1B per stage, stages interleaved by a timing model ----------------------- */
#define OP(m, v, bwd) (((uint32_t)(m) << 7) | ((uint32_t)(v) << 1) | (uint32_t)(bwd))
#define OP_MB(op)     ((op) >> 7)
#define OP_V(op)      (((op) >> 1) & 63u)
#define OP_BWD(op)    ((op)&1u)

/* The k-th forward (or backward) of one stage in Megatron's interleaved order: microbatches in
 * groups of S, each group through every model chunk (backward: chunks in reverse). */
static uint32_t interleaved_op(uint32_t k, uint32_t S, uint32_t V, uint32_t M, int bwd)
{
    uint32_t group = k / (S * V), in = k % (S * V), g0 = group * S;
    uint32_t width = M - g0 < S ? M - g0 : S; /* a ragged last group when S does not divide M */
    uint32_t v = in / width, m = g0 + in % width;
    return OP(m, bwd ? V - 1 - v : v, bwd);
}

/* One stage's schedule of a pass: Megatron 1F1B (V == 1: S-s-1 warm-up forwards; interleaved:
 * 2(S-s-1) + (V-1)S), steady one-forward-one-backward, cool-down backwards; eval is forwards. */
static uint32_t stage_ops(uint32_t s, uint32_t S, uint32_t V, uint32_t M, int eval, uint32_t *o)
{
    uint32_t total = M * V, n = 0, w;
    if (eval) {
        for (uint32_t k = 0; k < total; k++)
            o[n++] = interleaved_op(k, S, V, M, 0);
        return n;
    }
    if (V == 1)
        w = S - s - 1;
    else
        w = M == S ? total : 2 * (S - s - 1) + (V - 1) * S;
    if (w > total) w = total;
    for (uint32_t k = 0; k < w; k++)
        o[n++] = interleaved_op(k, S, V, M, 0);
    for (uint32_t k = 0; k < total - w; k++) {
        o[n++] = interleaved_op(w + k, S, V, M, 0);
        o[n++] = interleaved_op(k, S, V, M, 1);
    }
    for (uint32_t k = total - w; k < total; k++)
        o[n++] = interleaved_op(k, S, V, M, 1);
    return n;
}

int synth_run_pass(gen *g, int64_t step, int eval)
{
    uint32_t S = g->n_stages, V = g->n_virtual, C = g->n_chunks;
    uint32_t M = (uint32_t)(eval ? g->c.eval_microbatches : g->c.microbatches);
    uint32_t cap = 2 * V *
                   (uint32_t)(g->c.microbatches > g->c.eval_microbatches ? g->c.microbatches
                                                                         : g->c.eval_microbatches);
    uint32_t total = 0;
    for (uint32_t s = 0; s < S; s++) {
        g->n_sops[s] = stage_ops(s, S, V, M, eval, g->ops + (size_t)s * cap);
        g->idx[s] = 0;
        g->free_at[s] = g->t;
        total += g->n_sops[s];
    }
    for (size_t i = 0; i < (size_t)C * M; i++)
        g->finF[i] = g->finB[i] = -1;
    int64_t end = g->t;
    for (uint32_t done = 0; done < total; done++) {
        int best = -1;
        int64_t best_start = 0;
        for (uint32_t s = 0; s < S; s++) {
            if (g->idx[s] == g->n_sops[s]) continue;
            uint32_t op = g->ops[(size_t)s * cap + g->idx[s]], m = OP_MB(op);
            uint32_t ch = OP_V(op) * S + s;
            int64_t dep;
            if (!OP_BWD(op))
                dep = ch == 0 ? g->t : g->finF[(size_t)(ch - 1) * M + m];
            else
                dep = ch + 1 == C ? g->finF[(size_t)ch * M + m] : g->finB[(size_t)(ch + 1) * M + m];
            if (dep < 0) continue;
            int64_t start = dep > g->free_at[s] ? dep : g->free_at[s];
            if (best < 0 || start < best_start) {
                best = (int)s;
                best_start = start;
            }
        }
        if (best < 0) /* a 1F1B schedule cannot deadlock; this is a bug, not bad input */
            return ft_err_set(g->err, FT_ESTATE, "synth %s: pipeline schedule stalled at step %lld",
                              g->scen, (long long)step);
        uint32_t s = (uint32_t)best, op = g->ops[(size_t)s * cap + g->idx[s]], m = OP_MB(op);
        uint32_t ch = OP_V(op) * S + s;
        int64_t t = best_start;
        int rc = OP_BWD(op) ? chunk_backward(g, ch, m, step, &t)
                            : chunk_forward(g, ch, m, step, eval, &t);
        if (rc) return rc;
        if (t == best_start) t++; /* a stage with nothing to do still takes a tick */
        (OP_BWD(op) ? g->finB : g->finF)[(size_t)ch * M + m] = t;
        g->free_at[s] = t;
        g->idx[s]++;
        if (t > end) end = t;
    }
    g->t = end + 200000; /* optimizer step / eval turnaround */
    return FT_OK;
}

/* CUDA graphs (docs/fuser-model.md, "Call patterns"; make_graphed_callables): eager warm-up
 * iterations and one capture run forward and backward with grad through the fuser, flagged graph;
 * stages one after another. */
int synth_graph_setup(gen *g, int64_t step)
{
    int64_t t = g->t;
    int rc = FT_OK;
    for (int64_t it = 0; it <= g->c.graph_warmup && !rc; it++) {
        g->graph_phase = it < g->c.graph_warmup ? "graph-warmup" : "graph-capture";
        g->graph_iter = it;
        for (uint32_t ch = 0; ch < g->n_chunks && !rc; ch++)
            rc = chunk_forward(g, ch, 0, step, 0, &t);
        for (uint32_t ch = g->n_chunks; ch-- > 0 && !rc;)
            rc = chunk_backward(g, ch, 0, step, &t);
    }
    g->graph_phase = NULL;
    g->t = t + 200000;
    return rc;
}
