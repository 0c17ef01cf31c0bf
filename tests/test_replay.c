/*
 * test_replay.c - the policy registry and replay engine against TE's own behaviour.
 *
 * - TE's PR 3410 tests as traces (docs/fuser-model.md, "PR 3410's head"): grad off/on/off and
 * off/on/off/on on one Identity op.
 * - The disable_rht scenarios S1-S6 (docs/fuser-model.md, "The disable_rht scenarios") with the
 * expected builds, resets and stale classes.
 * - LRU capacity, per-call output format, policy list parsing, batch boundaries.
 * - Canned traces: every traces/NAME.jsonl with a traces/NAME.golden is imported and replayed
 *   under every policy and compared with its golden counts, line by policy name. FT_PRINT_GOLDEN=1
 *   prints the current counts in golden format instead of comparing (review the diff, then
 *   commit).
 *
 * Scenarios are emitted through the ft_sink interface, so the same code feeds the in-memory
 * collector used here and the recorder (traces in FT_BINARY_DIR, replayed through the reader).
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ft_recorder.h"
#include "ft_replayer.h"
#include "ft_report.h"
#include "ft_synth.h"
#include "test_util.h"

#include <dirent.h>
#include <sys/wait.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- an in-memory trace: a sink that collects records into one batch ------------------------ */
#define MAXF 128
#define MAXR 32
#define MAXC 8192

typedef struct mini {
    ft_header hdr;
    char *strs[256]; /* owned copies */
    uint32_t n_strs;
    ft_fuser_def fusers[MAXF];
    uint32_t nf;
    ft_recipe_def recipes[MAXR];
    uint32_t nr;
    uint32_t n;
    uint8_t kind[MAXC];
    int64_t seq[MAXC], step[MAXC], mb[MAXC], ns[MAXC], fuse_ns[MAXC], bwd[MAXC], tok[MAXC];
    uint32_t fuser[MAXC], flags[MAXC], first_rg[MAXC], rg_off[MAXC + 1];
    int32_t recipe[MAXC], device[MAXC], phase[MAXC];
    uint8_t rg[MAXC * 4];
    ft_err err;
} mini;

static const char *keep(mini *m, const char *s)
{
    if (!s) return NULL;
    assert_true(m->n_strs < 256);
    return m->strs[m->n_strs++] = ft_strdup(s);
}

static void mini_free(mini *m)
{
    for (uint32_t i = 0; i < m->n_strs; i++)
        ft_free(m->strs[i]);
    ft_free(m);
}

static int m_header(void *ctx, const ft_header *h)
{
    mini *m = ctx;
    m->hdr.te_version = keep(m, h->te_version);
    m->hdr.env_json = keep(m, h->env_json ? h->env_json : "{}");
    /* what else the model reads from the header: te_fusions (extra), rank and world size */
    m->hdr.extra_json = keep(m, h->extra_json ? h->extra_json : "{}");
    m->hdr.has_rank = h->has_rank;
    m->hdr.rank = h->rank;
    m->hdr.has_world_size = h->has_world_size;
    m->hdr.world_size = h->world_size;
    return FT_OK;
}

static int m_fuser(void *ctx, const ft_fuser_def *f)
{
    mini *m = ctx;
    if (m->nf >= MAXF) return FT_ERANGE;
    ft_fuser_def *d = &m->fusers[m->nf++];
    d->id = f->id;
    d->label = keep(m, f->label);
    d->ops_json = keep(m, f->ops_json);
    d->has_of = f->has_of;
    d->of = f->of;
    json_t *a = json_loads(f->ops_json, 0, NULL);
    d->n_ops = (uint32_t)json_array_size(a);
    json_decref(a);
    return FT_OK;
}

static int m_recipe(void *ctx, const ft_recipe_def *r)
{
    mini *m = ctx;
    if (m->nr >= MAXR) return FT_ERANGE;
    ft_recipe_def *d = &m->recipes[m->nr++];
    d->id = r->id;
    d->type = keep(m, r->type);
    d->obj = r->obj;
    d->attrs_json = keep(m, r->attrs_json);
    return FT_OK;
}

static int dense(const mini *m, int64_t id, int fuser)
{
    uint32_t n = fuser ? m->nf : m->nr;
    for (uint32_t i = 0; i < n; i++)
        if ((fuser ? m->fusers[i].id : m->recipes[i].id) == id) return (int)i;
    return -1;
}

static int m_call(void *ctx, const ft_call *c)
{
    mini *m = ctx;
    uint32_t i = m->n;
    if (i >= MAXC || m->rg_off[i] + c->n_op_rg > sizeof m->rg) return FT_ERANGE;
    int u = dense(m, c->fuser, 1);
    int r = (c->flags & FT_CF_HAS_RECIPE) ? dense(m, c->recipe, 0) : -1;
    if (u < 0 || ((c->flags & FT_CF_HAS_RECIPE) && r < 0)) return FT_EINVAL;
    m->kind[i] = FT_REC_CALL;
    m->seq[i] = c->seq;
    m->fuser[i] = (uint32_t)u;
    m->recipe[i] = r;
    m->flags[i] = c->flags;
    m->device[i] = c->device;
    m->step[i] = c->step;
    m->mb[i] = c->mb;
    m->ns[i] = c->ns;
    m->fuse_ns[i] = c->fuse_ns;
    m->phase[i] = -1;
    m->bwd[i] = 0;
    m->first_rg[i] = c->n_op_rg;
    for (uint32_t k = 0; k < c->n_op_rg; k++) {
        m->rg[m->rg_off[i] + k] = c->op_rg[k];
        if (c->op_rg[k] && m->first_rg[i] == c->n_op_rg) m->first_rg[i] = k;
    }
    m->rg_off[i + 1] = m->rg_off[i] + c->n_op_rg;
    m->tok[i] = 0;
    for (uint32_t k = 0; (c->flags & FT_CF_HAS_SPLITS) && k < c->n_splits; k++)
        m->tok[i] += c->m_splits[k];
    m->n++;
    return FT_OK;
}

static int m_backward(void *ctx, const ft_backward *b)
{
    mini *m = ctx;
    uint32_t i = m->n;
    if (i >= MAXC) return FT_ERANGE;
    memset(&m->fuser[i], 0, sizeof m->fuser[i]);
    m->kind[i] = FT_REC_BACKWARD;
    m->seq[i] = b->seq;
    m->bwd[i] = b->call;
    m->recipe[i] = -1;
    m->flags[i] = 0;
    m->first_rg[i] = 0;
    m->rg_off[i + 1] = m->rg_off[i];
    m->tok[i] = 0;
    m->n++;
    return FT_OK;
}

static const ft_err *m_error(void *ctx)
{
    return &((mini *)ctx)->err;
}

static mini *mini_new(ft_sink *s)
{
    mini *m = ft_calloc(1, sizeof *m);
    assert_non_null(m);
    *s = (ft_sink){m, m_header, m_fuser, m_recipe, m_call, m_backward, m_error, NULL};
    return m;
}

/* Replay records [lo, hi) of m as one batch. */
static void mini_batch(const mini *m, uint32_t lo, uint32_t hi, ft_batch *b)
{
    static uint32_t off[MAXC + 1];
    memset(b, 0, sizeof *b);
    b->n = hi - lo;
    b->kind = m->kind + lo;
    b->seq = m->seq + lo;
    b->fuser = m->fuser + lo;
    b->recipe = m->recipe + lo;
    b->flags = m->flags + lo;
    b->device = m->device + lo;
    b->first_rg = m->first_rg + lo;
    for (uint32_t i = lo; i <= hi; i++)
        off[i - lo] = m->rg_off[i] - m->rg_off[lo];
    b->op_rg_off = off;
    b->op_rg = m->rg + m->rg_off[lo];
    b->step = m->step + lo;
    b->mb = m->mb + lo;
    b->phase = m->phase + lo;
    b->ns = m->ns + lo;
    b->fuse_ns = m->fuse_ns + lo;
    b->bwd_call = m->bwd + lo;
    b->n_tokens = m->tok + lo;
}

/* Replay m under opts (all policies if opts->policies is NULL), batches of `chunk` records; as
 * the push driver does, every view goes to opts->observers' batch_fn. */
static void mini_replay(const mini *m, const ft_replay_opts *opts, uint32_t chunk,
                        ft_replay_result *res)
{
    ft_replay *r = NULL;
    ft_err err = {0};
    ft_replay_opts o = opts ? *opts : (ft_replay_opts){0};
    for (uint32_t k = 0; k < o.n_observers; k++)
        o.needs |= o.observers[k]->needs;
    int rc = ft_replay_new(m->fusers, m->nf, m->recipes, m->nr, &m->hdr, &o, &r, &err);
    if (rc) fail_msg("ft_replay_new: %s", ft_err_msg(&err));
    if (!chunk) chunk = MAXC;
    for (uint32_t lo = 0; lo < m->n; lo += chunk) {
        ft_batch b;
        const ft_replay_view *v = NULL;
        uint32_t hi = lo + chunk < m->n ? lo + chunk : m->n;
        mini_batch(m, lo, hi, &b);
        rc = ft_replay_batch(r, &b, &v, &err);
        if (rc) fail_msg("ft_replay_batch: %s", ft_err_msg(&err));
        assert_true(!o.needs || v);
        for (uint32_t k = 0; v && k < o.n_observers; k++)
            if ((rc = o.observers[k]->batch_fn(o.observers[k]->ctx, v, &err)))
                fail_msg("observer: %s", ft_err_msg(&err));
    }
    ft_replay_get(r, res);
    ft_replay_free(r);
}

/* opts watched by one observer */
static void watch(ft_replay_opts *o, const ft_replay_observer **one, const ft_replay_observer *obs)
{
    one[0] = obs;
    o->observers = one;
    o->n_observers = 1;
}

static const ft_policy_result *pol(const ft_replay_result *res, const char *name)
{
    uint32_t idx;
    assert_int_equal(ft_policy_find(name, &idx, NULL), FT_OK);
    for (uint32_t p = 0; p < res->n_policies; p++)
        if (res->pol[p].policy == idx) return &res->pol[p];
    fail_msg("policy %s not in result", name);
    return NULL;
}

/* ---- scenario emitters ---------------------------------------------------------------------- */
static const char *ENV_SM100 = "{\"NVTE_CUTEDSL_FUSED_GROUPED_MLP\":\"1\",\"cublaslt\":\"13.4.0\","
                               "\"cudnn_frontend\":\"1.27.0\",\"device_cc\":\"10.0\"}";

static const char *MLP_OPS =
    "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4,\"in_features\":64,"
    "\"out_features\":256,\"bias\":false,\"dtype\":\"bfloat16\"}},"
    "{\"type\":\"ScaledSwiGLU\",\"attrs\":{\"glu_interleave_size\":32}},"
    "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4,\"in_features\":128,"
    "\"out_features\":64,\"bias\":false,\"dtype\":\"bfloat16\"}}]";

static const char *NVFP4_RHT = "{\"backward_override\":null,\"disable_rht\":false}";
static const char *NVFP4_NORHT = "{\"backward_override\":null,\"disable_rht\":true}";
static const char *MXFP8 = "{\"backward_override\":null,\"fp8_format\":\"E4M3\"}";

static void emit_header(ft_sink *s, const char *te_version)
{
    ft_header h = {0};
    h.te_version = te_version;
    h.env_json = ENV_SM100;
    h.extra_json = "{}";
    assert_int_equal(s->header_fn(s->ctx, &h), FT_OK);
}

static void emit_fuser(ft_sink *s, int64_t id, const char *ops)
{
    json_t *a = json_loads(ops, 0, NULL);
    ft_fuser_def f = {id, "layer.mlp", ops, (uint32_t)json_array_size(a), 0, 0};
    json_decref(a);
    assert_int_equal(s->fuser_fn(s->ctx, &f), FT_OK);
}

static void emit_recipe(ft_sink *s, int64_t id, const char *type, int64_t obj, const char *attrs)
{
    ft_recipe_def r = {id, type, obj, attrs};
    assert_int_equal(s->recipe_fn(s->ctx, &r), FT_OK);
}

/* A call of fuser `fuser` with n_ops ops, recipe id (-1 = null), grad mode, the input requiring
 * grad, 4 groups of 32 tokens, at step `step`; rebuilt < 0 = not captured. */
static int64_t seq_ctr;
static void emit_call(ft_sink *s, int64_t fuser, uint32_t n_ops, int64_t recipe, int grad,
                      int64_t step, int rebuilt)
{
    static const uint8_t rg[3] = {1, 0, 1};
    static const int64_t splits[4] = {32, 32, 32, 32};
    ft_call c = {0};
    c.seq = seq_ctr++;
    c.fuser = fuser;
    c.recipe = recipe < 0 ? 0 : recipe;
    c.flags = (grad ? FT_CF_GRAD : 0) | FT_CF_INPUT_RG | (recipe >= 0 ? FT_CF_HAS_RECIPE : 0) |
              FT_CF_HAS_STEP | FT_CF_HAS_SPLITS;
    if (rebuilt >= 0)
        c.flags |= FT_CF_HAS_REBUILT | FT_CF_HAS_FUSE_NS | (rebuilt ? FT_CF_REBUILT : 0);
    c.fuse_ns = rebuilt > 0 ? 10000 : 100;
    c.n_op_rg = n_ops;
    c.op_rg = rg;
    c.n_splits = 4;
    c.m_splits = splits;
    c.step = step;
    assert_int_equal(s->call_fn(s->ctx, &c), FT_OK);
}

/* The disable_rht scenarios' setup: one grouped-MLP fuser; recipes R1 (NVFP4, RHT) id 1, R2 (NVFP4,
 * disable_rht) id 2, M (MXFP8) id 3, each its own object. */
static void emit_s_setup(ft_sink *s)
{
    seq_ctr = 0;
    emit_header(s, "2.20.0");
    emit_fuser(s, 7, MLP_OPS);
    emit_recipe(s, 1, "NVFP4BlockScaling", 1001, NVFP4_RHT);
    emit_recipe(s, 2, "NVFP4BlockScaling", 1002, NVFP4_NORHT);
    emit_recipe(s, 3, "MXFP8BlockScaling", 1003, MXFP8);
}

typedef struct expect {
    const char *policy;
    uint64_t builds, resets;
    uint64_t harmless, slower, quant, raises, qdrift;
} expect;

static void check(const ft_replay_result *res, const expect *e, size_t n, const char *scenario)
{
    for (size_t i = 0; i < n; i++) {
        const ft_policy_result *p = pol(res, e[i].policy);
        uint64_t got[7] = {p->builds,
                           p->resets,
                           p->stale[FT_STALE_HARMLESS],
                           p->stale[FT_STALE_SLOWER],
                           p->stale[FT_STALE_QUANT],
                           p->stale[FT_STALE_RAISES],
                           p->qdrift};
        uint64_t want[7] = {e[i].builds, e[i].resets, e[i].harmless, e[i].slower,
                            e[i].quant,  e[i].raises, e[i].qdrift};
        if (memcmp(got, want, sizeof got))
            fail_msg("%s %s: builds/resets/harmless/slower/quant/raises/qdrift got "
                     "%llu/%llu/%llu/%llu/%llu/%llu/%llu want %llu/%llu/%llu/%llu/%llu/%llu/%llu",
                     scenario, e[i].policy, (unsigned long long)got[0], (unsigned long long)got[1],
                     (unsigned long long)got[2], (unsigned long long)got[3],
                     (unsigned long long)got[4], (unsigned long long)got[5],
                     (unsigned long long)got[6], (unsigned long long)want[0],
                     (unsigned long long)want[1], (unsigned long long)want[2],
                     (unsigned long long)want[3], (unsigned long long)want[4],
                     (unsigned long long)want[5], (unsigned long long)want[6]);
        assert_int_equal(p->builds + p->hits, p->calls);
    }
}

/* ---- TE's PR 3410 tests --------------------------------------------------------------------- */
static void emit_identity(ft_sink *s, const int *grads, int n)
{
    seq_ctr = 0;
    emit_header(s, NULL);
    emit_fuser(s, 1, "[{\"type\":\"Identity\"}]");
    for (int i = 0; i < n; i++)
        emit_call(s, 1, 1, -1, grads[i], 0, -1);
}

static void test_te_pr_grad_off_on_off(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    static const int g[3] = {0, 1, 0};
    emit_identity(&s, g, 3);
    ft_replay_result res;
    mini_replay(m, NULL, 0, &res);
    /* OLD rebuilds and resets on every f change; commit 1 keyed on (type, bo) builds once */
    static const expect e[] = {
        {"te-pre3410", 3, 3, 0, 0, 0, 0, 0},
        {"te-3410-commit1", 1, 1, 0, 0, 0, 0, 0},
        {"te-3410", 2, 1, 0, 0, 0, 0, 0},
        {"rebuild-always", 3, 3, 0, 0, 0, 0, 0},
    };
    check(&res, e, FT_ARRAY_LEN(e), "grad off/on/off");
    mini_free(m);
}

static char *read_all(FILE *f)
{
    long n;
    fflush(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    char *buf = ft_malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    return buf;
}

static void test_te_pr_grad_off_on_off_on_restores_plans(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    static const int g[4] = {0, 1, 0, 1};
    emit_identity(&s, g, 4);
    uint32_t idx;
    assert_int_equal(ft_policy_find("te-3410", &idx, NULL), FT_OK);
    FILE *pc = tmpfile();
    assert_non_null(pc);
    ft_replay_opts o = {0};
    o.policies = &idx;
    o.n_policies = 1;
    ft_report_calls *w = NULL;
    ft_err err = {0};
    assert_int_equal(ft_report_calls_new(pc, NULL, &w, &err), FT_OK);
    const ft_replay_observer *one[1];
    watch(&o, one, ft_report_calls_observer(w));
    ft_replay_result res;
    mini_replay(m, &o, 0, &res);
    ft_report_calls_free(w);
    assert_int_equal(res.pol[0].builds, 2);
    assert_int_equal(res.pol[0].resets, 1);
    /* the repeats get the plans of the first two calls, without building */
    char *text = read_all(pc);
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    const char *plans[4] = {0};
    json_t *docs[4] = {0};
    for (int i = 0; i < 4; i++, line = strtok_r(NULL, "\n", &save)) {
        assert_non_null(line);
        docs[i] = json_loads(line, 0, NULL);
        assert_non_null(docs[i]);
        assert_int_equal(json_integer_value(json_object_get(docs[i], "seq")), i);
        assert_int_equal(json_integer_value(json_object_get(docs[i], "fuser")), 1);
        assert_string_equal(json_string_value(json_object_get(docs[i], "policy")), "te-3410");
        assert_true(json_is_boolean(json_object_get(docs[i], "build")));
        assert_int_equal(json_is_true(json_object_get(docs[i], "build")), i < 2);
        assert_int_equal(json_is_true(json_object_get(docs[i], "reset")), i == 0);
        assert_string_equal(json_string_value(json_object_get(docs[i], "stale")), "none");
        plans[i] = json_string_value(json_object_get(docs[i], "plan"));
        assert_non_null(plans[i]);
        assert_int_equal(json_object_size(docs[i]), 7);
    }
    assert_null(line);
    assert_string_equal(plans[2], plans[0]);
    assert_string_equal(plans[3], plans[1]);
    for (int i = 0; i < 4; i++)
        json_decref(docs[i]);
    ft_free(text);
    fclose(pc);
    mini_free(m);
}

typedef struct seen_call {
    int64_t seq;
    uint32_t slot, policy, plan, fresh, fuser;
    uint8_t dec, stale;
    ft_qstate q, fq;
} seen_call;

typedef struct seen {
    int n;
    seen_call c[32];
} seen;

/* Every (call, policy) of the views, call order then policy order. */
static int on_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    (void)err;
    seen *s = ctx;
    for (uint32_t j = 0; j < v->n; j++)
        for (uint32_t p = 0; p < v->n_pol && s->n < 32; p++) {
            const ft_view_policy *vp = &v->pol[p];
            seen_call *c = &s->c[s->n++];
            c->seq = v->seq[j];
            c->slot = p;
            c->policy = vp->policy;
            c->plan = vp->plan[j];
            c->fresh = v->fresh[j];
            c->fuser = v->fuser[j];
            c->dec = vp->dec[j];
            c->stale = vp->stale[j];
            c->q = *ft_replay_qstate(v->engine, vp->q[j]);
            c->fq = *ft_replay_qstate(v->engine, v->fresh_q[j]);
        }
    return FT_OK;
}

/* The view holds what --per-call writes, plus the quantizer states: in S1 the te-3410 call under
 * R2 still runs RHT quantizers while a fresh fuser would not. */
static void test_view_reports_decisions_and_qstate(void **state)
{
    (void)state;
    ft_sink sk;
    mini *m = mini_new(&sk);
    emit_s_setup(&sk);
    emit_call(&sk, 7, 3, 1, 1, 0, -1);
    emit_call(&sk, 7, 3, 2, 1, 1, -1);
    uint32_t idx[2];
    assert_int_equal(ft_policy_find("te-3410", &idx[0], NULL), FT_OK);
    assert_int_equal(ft_policy_find("recipe-hash", &idx[1], NULL), FT_OK);
    static seen sn;
    memset(&sn, 0, sizeof sn);
    ft_replay_opts o = {0};
    o.policies = idx;
    o.n_policies = 2;
    const ft_replay_observer obs = {.ctx = &sn, .needs = FT_VIEW_DECISIONS, .batch_fn = on_batch};
    const ft_replay_observer *one[1];
    watch(&o, one, &obs);
    ft_replay_result res;
    mini_replay(m, &o, 0, &res);
    assert_int_equal(sn.n, 4); /* 2 calls x 2 policies, call order then policy order */
    assert_int_equal(sn.c[0].seq, 0);
    assert_int_equal(sn.c[1].slot, 1);
    assert_int_equal(sn.c[2].seq, 1);
    assert_int_equal(sn.c[2].policy, idx[0]);
    assert_int_equal(sn.c[2].dec, 0); /* neither build nor reset */
    assert_int_equal(sn.c[2].stale, FT_STALE_QUANT);
    assert_int_not_equal(sn.c[2].plan, sn.c[2].fresh);
    assert_int_equal(sn.c[2].q.rht, 1);  /* Q(R1) kept */
    assert_int_equal(sn.c[2].fq.rht, 0); /* a fresh fuser under R2 */
    assert_int_equal(sn.c[3].dec, FT_DEC_BUILD | FT_DEC_RESET);
    assert_int_equal(sn.c[3].plan, sn.c[3].fresh);
    /* nobody asked: the engine records nothing and gives no view */
    ft_replay *r = NULL;
    ft_err err = {0};
    ft_replay_opts plain = {0};
    assert_int_equal(ft_replay_new(m->fusers, m->nf, m->recipes, m->nr, &m->hdr, &plain, &r, &err),
                     FT_OK);
    ft_batch b;
    mini_batch(m, 0, m->n, &b);
    const ft_replay_view *v = &(ft_replay_view){0};
    assert_int_equal(ft_replay_batch(r, &b, &v, &err), FT_OK);
    assert_null(v);
    ft_replay_free(r);
    mini_free(m);
}

/* The view's cause bits (FT_WHY_*) say what changed since the fuser's previous call, per build,
 * and the call columns carry the filter's verdict. */
typedef struct why_log {
    int n;
    int64_t seq[64];
    uint16_t why[64], changed[64];
    int32_t prev_recipe[64];
    uint8_t match[64];
} why_log;

static int why_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    (void)err;
    why_log *w = ctx;
    assert_non_null(v->changed);
    assert_non_null(v->pol[0].why);
    for (uint32_t j = 0; j < v->n && w->n < 64; j++, w->n++) {
        w->seq[w->n] = v->seq[j];
        w->why[w->n] = v->pol[0].why[j];
        w->changed[w->n] = v->changed[j];
        w->prev_recipe[w->n] = v->prev_recipe[j];
        w->match[w->n] = v->match ? v->match[j] : 2;
    }
    return FT_OK;
}

static void test_view_causes_and_filter(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    emit_s_setup(&s);
    /* R1, R1 grad, R1 grad, M grad, R2 grad */
    static const int64_t r[5] = {1, 1, 1, 3, 2};
    static const int g[5] = {0, 1, 1, 1, 1};
    for (int i = 0; i < 5; i++)
        emit_call(&s, 7, 3, r[i], g[i], i, -1);
    uint32_t idx;
    assert_int_equal(ft_policy_find("rebuild-always", &idx, NULL), FT_OK);
    static why_log w;
    memset(&w, 0, sizeof w);
    ft_replay_filter flt = {.has_steps = 1, .step_lo = 1, .step_hi = 3};
    ft_replay_opts o = {.policies = &idx, .n_policies = 1, .filter = &flt};
    const ft_replay_observer obs = {.ctx = &w, .needs = FT_VIEW_CAUSES, .batch_fn = why_batch};
    const ft_replay_observer *one[1];
    watch(&o, one, &obs);
    ft_replay_result res;
    mini_replay(m, &o, 2, &res); /* batches of 2: the previous call is carried across batches */
    assert_int_equal(w.n, 5);
    assert_int_equal(w.why[0], FT_WHY_FIRST);
    assert_int_equal(w.prev_recipe[0], -2);
    assert_int_equal(w.why[1], FT_WHY_F);
    assert_int_equal(w.why[2], FT_WHY_NOT_CACHED); /* rebuild-always: nothing changed */
    assert_int_equal(w.changed[2], 0);
    assert_int_equal(w.why[3], FT_WHY_TYPE);
    assert_int_equal(w.prev_recipe[3], 0); /* recipe id 1 is dense index 0 */
    assert_int_equal(w.why[4], FT_WHY_TYPE);
    /* steps 1..3 are counted, 0 and 4 are not: every call replayed, three counted */
    static const uint8_t want_match[5] = {0, 1, 1, 1, 0};
    for (int i = 0; i < 5; i++)
        assert_int_equal(w.match[i], want_match[i]);
    assert_int_equal(res.calls, 3);
    assert_int_equal(res.pol[0].calls, 3);
    assert_int_equal(res.pol[0].builds, 3);
    assert_int_equal(res.pol[0].resets, 3);
    mini_free(m);
}

/* ---- TE's plan-cache rule (tefuser's te_cache.c), against the engine on random calls -------- */
typedef struct ref_recipe {
    const char *type, *attrs;
    int type_id, bo, delayed;
    int64_t hist;
} ref_recipe;

static const ref_recipe REF_RECIPES[] = {
    {"DelayedScaling", "{\"amax_history_len\":1024,\"backward_override\":null}", 1, 0, 1, 1024},
    {"DelayedScaling", "{\"amax_history_len\":16,\"backward_override\":null}", 1, 0, 1, 16},
    {"Float8CurrentScaling", "{\"backward_override\":null}", 2, 0, 0, 0},
    {"Float8CurrentScaling", "{\"backward_override\":\"dequantized\"}", 2, 2, 0, 0},
    {"MXFP8BlockScaling", "{\"backward_override\":null}", 3, 0, 0, 0},
    {"NVFP4BlockScaling", "{\"backward_override\":null,\"disable_rht\":true}", 5, 0, 0, 0},
};

typedef struct ref_run {
    int n;
    uint8_t build[3][600], reset[3][600]; /* per policy slot (pre3410, 3410, commit1), call */
} ref_run;

static int ref_on_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    (void)err;
    ref_run *rr = ctx;
    for (uint32_t j = 0; j < v->n && rr->n < 600; j++, rr->n++)
        for (uint32_t p = 0; p < v->n_pol && p < 3; p++) {
            rr->build[p][rr->n] = (uint8_t)((v->pol[p].dec[j] & FT_DEC_BUILD) != 0);
            rr->reset[p][rr->n] = (uint8_t)((v->pol[p].dec[j] & FT_DEC_RESET) != 0);
        }
    return FT_OK;
}

static void test_te_cache_rule_matches_engine_on_random_calls(void **state)
{
    (void)state;
    unsigned seed = (unsigned)(getenv("FT_SEED") ? strtoul(getenv("FT_SEED"), NULL, 10) : 12345);
    printf("seed %u (FT_SEED to repeat)\n", seed);
    ft_sink s;
    mini *m = mini_new(&s);
    seq_ctr = 0;
    emit_header(&s, NULL);
    emit_fuser(&s, 1, MLP_OPS);
    emit_fuser(&s, 2, "[{\"type\":\"Identity\"},{\"type\":\"Bias\",\"attrs\":{\"size\":8}}]");
    for (size_t k = 0; k < FT_ARRAY_LEN(REF_RECIPES); k++)
        emit_recipe(&s, (int64_t)k, REF_RECIPES[k].type, 500 + (int64_t)k, REF_RECIPES[k].attrs);
    static const ft_te_ref refs[3] = {FT_TE_PRE3410, FT_TE_3410, FT_TE_3410_COMMIT1};
    ft_te_cache te[3][3]; /* [ref][fuser] */
    for (int k = 0; k < 3; k++)
        for (int fz = 0; fz < 3; fz++)
            ft_te_cache_init(&te[k][fz], refs[k]);
    static ref_run want;
    memset(&want, 0, sizeof want);
    const int n_calls = 600;
    for (int i = 0; i < n_calls; i++) {
        seed = seed * 1103515245u + 12345u;
        unsigned x = seed >> 8;
        int fz = 1 + (int)(x % 2), n_ops = fz == 1 ? 3 : 2;
        int rk = (int)((x >> 2) % (FT_ARRAY_LEN(REF_RECIPES) + 1)) - 1; /* -1 = no recipe */
        int grad = (x >> 6) & 1, in_rg = (x >> 7) & 1;
        uint8_t rg[3] = {(uint8_t)((x >> 8) & 1), (uint8_t)((x >> 9) & 1),
                         (uint8_t)((x >> 10) & 1)};
        ft_call c = {0};
        c.seq = seq_ctr++;
        c.fuser = fz;
        c.recipe = rk < 0 ? 0 : rk;
        c.flags = (grad ? FT_CF_GRAD : 0) | (in_rg ? FT_CF_INPUT_RG : 0) |
                  (rk >= 0 ? FT_CF_HAS_RECIPE : 0);
        c.n_op_rg = (uint32_t)n_ops;
        c.op_rg = rg;
        assert_int_equal(s.call_fn(s.ctx, &c), FT_OK);
        uint32_t first_rg = (uint32_t)n_ops;
        for (int k = n_ops - 1; k >= 0; k--)
            if (rg[k]) first_rg = (uint32_t)k;
        const uint32_t f = ft_te_boundary((uint32_t)n_ops, grad, in_rg, first_rg);
        const int type = rk < 0 ? FT_RT_NONE : REF_RECIPES[rk].type_id;
        const int bo = rk < 0 ? FT_BO_NONE : REF_RECIPES[rk].bo;
        const int64_t hist = rk >= 0 && REF_RECIPES[rk].delayed ? REF_RECIPES[rk].hist : 0;
        for (int k = 0; k < 3; k++) {
            int reset;
            want.build[k][i] = (uint8_t)ft_te_cache_call(&te[k][fz], type, bo, hist, f, &reset);
            want.reset[k][i] = (uint8_t)reset;
        }
    }
    uint32_t idx[3];
    assert_int_equal(ft_policy_find("te-pre3410", &idx[0], NULL), FT_OK);
    assert_int_equal(ft_policy_find("te-3410", &idx[1], NULL), FT_OK);
    assert_int_equal(ft_policy_find("te-3410-commit1", &idx[2], NULL), FT_OK);
    static ref_run got;
    memset(&got, 0, sizeof got);
    ft_replay_opts o = {0};
    o.policies = idx;
    o.n_policies = 3;
    const ft_replay_observer obs = {
        .ctx = &got, .needs = FT_VIEW_DECISIONS, .batch_fn = ref_on_batch};
    const ft_replay_observer *one[1];
    watch(&o, one, &obs);
    ft_replay_result res;
    mini_replay(m, &o, 97, &res);
    assert_int_equal(got.n, n_calls);
    static const char *const names[3] = {"te-pre3410", "te-3410", "te-3410-commit1"};
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < n_calls; i++)
            if (got.build[p][i] != want.build[p][i] || got.reset[p][i] != want.reset[p][i])
                fail_msg("%s, call %d: engine build/reset %d/%d, te_cache %d/%d", names[p], i,
                         got.build[p][i], got.reset[p][i], want.build[p][i], want.reset[p][i]);
    mini_free(m);
}

/* ---- the disable_rht scenarios ------------------------------------------------------------- */
static void run_s(const int64_t *recipes, const int *grads, int n, ft_replay_result *res)
{
    ft_sink s;
    mini *m = mini_new(&s);
    emit_s_setup(&s);
    for (int i = 0; i < n; i++)
        emit_call(&s, 7, 3, recipes[i], grads[i], i, -1);
    mini_replay(m, NULL, 0, res);
    mini_free(m);
}

static void test_scenario_s1_same_type_switch_keeps_fused_plan(void **state)
{
    (void)state;
    static const int64_t r[2] = {1, 2};
    static const int g[2] = {1, 1};
    ft_replay_result res;
    run_s(r, g, 2, &res);
    /* te-*: no reset, no rebuild: FUSED with Q(R1) under R2 (RHT applied despite R2) -> quant.
     * Policies that rebuild get the fresh UNFUSED plan, but reset(R2) is a same-class switch
     * that keeps the RHT quantizers: quantizer drift (S6: still sticky). */
    static const expect e[] = {
        {"te-pre3410", 1, 1, 0, 0, 1, 0, 0},      {"te-3410", 1, 1, 0, 0, 1, 0, 0},
        {"te-3410-commit1", 1, 1, 0, 0, 1, 0, 0}, {"rebuild-always", 2, 2, 0, 0, 0, 0, 1},
        {"recipe-hash", 2, 2, 0, 0, 0, 0, 1},     {"recipe-object", 2, 2, 0, 0, 0, 0, 1},
        {"fusion-attrs", 2, 2, 0, 0, 0, 0, 1},
    };
    check(&res, e, FT_ARRAY_LEN(e), "S1");
}

static void test_scenario_s2_type_round_trip_restores_stale_plan(void **state)
{
    (void)state;
    static const int64_t r[3] = {1, 3, 2};
    static const int g[3] = {1, 1, 1};
    ft_replay_result res;
    run_s(r, g, 3, &res);
    static const expect e[] = {
        {"te-pre3410", 3, 3, 0, 0, 0, 0, 0},      {"te-3410", 2, 3, 0, 0, 0, 1, 0},
        {"te-3410-commit1", 3, 3, 0, 0, 0, 0, 0}, {"rebuild-always", 3, 3, 0, 0, 0, 0, 0},
        {"recipe-hash", 3, 3, 0, 0, 0, 0, 0},     {"recipe-object", 3, 3, 0, 0, 0, 0, 0},
        {"fusion-attrs", 3, 3, 0, 0, 0, 0, 0},
    };
    check(&res, e, FT_ARRAY_LEN(e), "S2");
    const ft_policy_result *p = pol(&res, "te-3410");
    assert_int_equal(p->raises[0].count, 1);
    assert_non_null(strstr(p->raises[0].text, "non-RHT"));
}

static void test_scenario_s2_prime_bf16_round_trip(void **state)
{
    (void)state;
    static const int64_t r[3] = {1, -1, 2};
    static const int g[3] = {1, 1, 1};
    ft_replay_result res;
    run_s(r, g, 3, &res);
    static const expect e[] = {
        {"te-pre3410", 3, 3, 0, 0, 0, 0, 0},
        {"te-3410", 2, 3, 0, 0, 0, 1, 0},
        {"recipe-object", 3, 3, 0, 0, 0, 0, 0},
    };
    check(&res, e, FT_ARRAY_LEN(e), "S2'");
}

static void test_scenario_s3_grad_toggle_across_same_type(void **state)
{
    (void)state;
    static const int64_t r[3] = {1, 2, 2};
    static const int g[3] = {1, 0, 1};
    ft_replay_result res;
    run_s(r, g, 3, &res);
    /* OLD: rebuilds on each f change, quantizers stay Q(R1) (same-type reset): fresh UNFUSED
     * plans with drifted quantizers. NEW: step 3 restores the R1 FUSED plan -> quant; step 2 runs
     * a fresh plan on Q(R1). commit 1: one plan for both f -> steps 2 and 3 stale. */
    static const expect e[] = {
        {"te-pre3410", 3, 3, 0, 0, 0, 0, 2},      {"te-3410", 2, 1, 0, 0, 1, 0, 1},
        {"te-3410-commit1", 1, 1, 0, 0, 2, 0, 0}, {"recipe-hash", 3, 2, 0, 0, 0, 0, 2},
        {"recipe-object", 3, 2, 0, 0, 0, 0, 2},
    };
    check(&res, e, FT_ARRAY_LEN(e), "S3");
}

static void test_scenario_s4_stale_unfused_is_slower(void **state)
{
    (void)state;
    static const int64_t r[3] = {2, 3, 1};
    static const int g[3] = {1, 1, 1};
    ft_replay_result res;
    run_s(r, g, 3, &res);
    static const expect e[] = {
        {"te-pre3410", 3, 3, 0, 0, 0, 0, 0},      {"te-3410", 2, 3, 0, 1, 0, 0, 0},
        {"te-3410-commit1", 3, 3, 0, 0, 0, 0, 0}, {"recipe-hash", 3, 3, 0, 0, 0, 0, 0},
        {"recipe-object", 3, 3, 0, 0, 0, 0, 0},   {"fusion-attrs", 3, 3, 0, 0, 0, 0, 0},
    };
    check(&res, e, FT_ARRAY_LEN(e), "S4");
}

static void test_scenario_s6_object_key_survives_round_trips(void **state)
{
    (void)state;
    /* S2 then S4 repeated: object/hash keys never restore a stale plan; te-3410 does, twice. */
    static const int64_t r[6] = {1, 3, 2, 2, 3, 1};
    static const int g[6] = {1, 1, 1, 1, 1, 1};
    ft_replay_result res;
    run_s(r, g, 6, &res);
    for (const char *const *n =
             (const char *const[]){"recipe-object", "recipe-hash", "fusion-attrs", NULL};
         *n; n++) {
        const ft_policy_result *p = pol(&res, *n);
        assert_int_equal(p->stale[FT_STALE_NONE], 6);
        assert_int_equal(p->builds, 3); /* R1, M, R2 once each; repeats hit */
    }
    const ft_policy_result *p = pol(&res, "te-3410");
    assert_int_equal(p->stale[FT_STALE_RAISES], 2); /* steps 3 and 4 run R1's fused plan */
    assert_int_equal(p->stale[FT_STALE_SLOWER], 0);
}

/* A recipe object mutated in place (same obj, disable_rht flipped): recipe-object keeps its
 * plan (stale), recipe-hash rebuilds. */
static void test_scenario_mutated_object(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    seq_ctr = 0;
    emit_header(&s, NULL);
    emit_fuser(&s, 7, MLP_OPS);
    emit_recipe(&s, 1, "NVFP4BlockScaling", 555, NVFP4_RHT);
    emit_recipe(&s, 2, "NVFP4BlockScaling", 555, NVFP4_NORHT);
    emit_call(&s, 7, 3, 1, 1, 0, -1);
    emit_call(&s, 7, 3, 2, 1, 1, -1);
    ft_replay_result res;
    mini_replay(m, NULL, 0, &res);
    /* The mutated object keeps the QParams derived at construction (docs/fuser-model.md, "Recipes":
     * mutating disable_rht changes the fusion gate, not the quantizers), so a fresh fuser would
     * also run with RHT quantizers: the stale fused plan does the same quantization (harmless), and
     * the same-class reset under recipe-hash leaves no quantizer drift. */
    static const expect e[] = {
        {"recipe-object", 1, 1, 1, 0, 0, 0, 0},
        {"recipe-hash", 2, 2, 0, 0, 0, 0, 0},
    };
    check(&res, e, FT_ARRAY_LEN(e), "mutated object");
    mini_free(m);
}

/* A fused grouped MLP raises in TE when T % 128 != 0, whatever the policy: counted apart. */
static void test_fresh_plan_raises_counted_apart(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    emit_s_setup(&s);
    static const uint8_t rg[3] = {1, 0, 1};
    static const int64_t odd[4] = {30, 32, 32, 32}, good[4] = {32, 32, 32, 32}; /* T 126, 128 */
    for (int i = 0; i < 6; i++) {
        ft_call c = {0};
        c.seq = seq_ctr++;
        c.fuser = 7;
        c.recipe = 3; /* MXFP8: fused */
        c.flags = FT_CF_GRAD | FT_CF_INPUT_RG | FT_CF_HAS_RECIPE | FT_CF_HAS_SPLITS;
        c.n_op_rg = 3;
        c.op_rg = rg;
        c.n_splits = 4;
        c.m_splits = i % 2 ? odd : good;
        assert_int_equal(s.call_fn(s.ctx, &c), FT_OK);
    }
    ft_replay_result res;
    mini_replay(m, NULL, 4, &res);
    assert_int_equal(res.fresh_raises, 3);
    assert_int_equal(res.fresh_raise_texts[0].count, 3);
    assert_non_null(strstr(res.fresh_raise_texts[0].text, "Unsupported input shape"));
    for (uint32_t p = 0; p < res.n_policies; p++)
        assert_int_equal(res.pol[p].stale[FT_STALE_NONE], 6);
    mini_free(m);
}

/* A call whose fresh plan raises too is not stale under any policy, even where the policy runs
 * another plan that raises (issue 21): synth rht-switch with 64 experts, where the fresh plans of
 * 64 calls raise and te-3410-commit1 and recipe-object run other raising plans on them. Only
 * te-3410's restored fused plan raises where the fresh plan runs. */
typedef struct fresh_raise_log {
    uint64_t n_fresh_raises, stale_on_them;
} fresh_raise_log;

static int fresh_raise_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    (void)err;
    fresh_raise_log *w = ctx;
    assert_non_null(v->fresh_raises);
    for (uint32_t j = 0; j < v->n; j++) {
        if (!v->fresh_raises[j]) continue;
        w->n_fresh_raises++;
        for (uint32_t p = 0; p < v->n_pol; p++)
            w->stale_on_them += v->pol[p].stale[j] != FT_STALE_NONE;
    }
    return FT_OK;
}

static void test_calls_raising_whatever_the_key_are_not_stale(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    const ft_synth_param sets[] = {{"experts", "64"}};
    ft_err err = {0};
    seq_ctr = 0;
    assert_int_equal(ft_synth_run("rht-switch", sets, 1, 7, &s, &err), FT_OK);
    static fresh_raise_log w;
    memset(&w, 0, sizeof w);
    const ft_replay_observer obs = {
        .ctx = &w, .needs = FT_VIEW_DECISIONS, .batch_fn = fresh_raise_batch};
    const ft_replay_observer *one[1];
    ft_replay_opts o = {0};
    watch(&o, one, &obs);
    ft_replay_result res;
    mini_replay(m, &o, 500, &res);
    assert_int_equal(res.fresh_raises, 64);
    assert_int_equal(w.n_fresh_raises, 64);
    assert_int_equal(w.stale_on_them, 0);
    assert_int_equal(pol(&res, "te-3410-commit1")->stale[FT_STALE_RAISES], 0);
    assert_int_equal(pol(&res, "recipe-object")->stale[FT_STALE_RAISES], 0);
    assert_int_equal(pol(&res, "te-3410-commit1")->raises[0].count, 0);
    /* te-3410 restores the disable_rht=False fused plan where a fresh build runs unfused */
    assert_int_equal(pol(&res, "te-3410")->stale[FT_STALE_RAISES], 64);
    /* under a filter the raises of the counted calls are still counted apart */
    ft_replay_filter flt = {.has_steps = 1, .step_lo = 8, .step_hi = 11};
    ft_replay_opts of = {.filter = &flt};
    ft_replay_result fres;
    mini_replay(m, &of, 500, &fres);
    assert_true(fres.fresh_raises > 0 && fres.fresh_raises <= 64);
    for (uint32_t p = 0; p < fres.n_policies; p++)
        assert_true(fres.pol[p].stale[FT_STALE_RAISES] <= res.pol[p].stale[FT_STALE_RAISES]);
    mini_free(m);
}

/* ---- LRU capacity --------------------------------------------------------------------------- */
static void test_lru_capacity_bounds_plans(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    emit_s_setup(&s);
    /* recompute pattern: no-grad forward, grad recompute, 5 microbatches */
    for (int i = 0; i < 10; i++)
        emit_call(&s, 7, 3, 3, i % 2, i / 2, -1);
    uint32_t idx;
    assert_int_equal(ft_policy_find("te-3410", &idx, NULL), FT_OK);
    ft_replay_opts o = {0};
    o.policies = &idx;
    o.n_policies = 1;
    ft_replay_result res;
    for (uint32_t cap = 0; cap <= 2; cap++) {
        o.capacity = cap;
        mini_replay(m, &o, 3, &res);
        const ft_policy_result *p = &res.pol[0];
        /* unbounded and capacity 2 keep both plans; capacity 1 evicts on every alternation */
        assert_int_equal(p->builds, cap == 1 ? 10 : 2);
        assert_int_equal(p->evictions, cap == 1 ? 9 : 0);
        assert_int_equal(p->max_entries, cap == 1 ? 1 : 2);
        assert_int_equal(p->resets, 1);
        /* per-step hit rate: step 0 holds the two builds */
        assert_int_equal(p->steps.calls[0], 2);
        assert_int_equal(p->steps.hits[0], 0);
        assert_int_equal(p->steps.hits[4], cap == 1 ? 0 : 2);
    }
    mini_free(m);
}

static void test_step_histogram_folds_long_runs(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    emit_s_setup(&s);
    /* 3000 steps, two calls each (no-grad forward, grad recompute) */
    for (int i = 0; i < 3000; i++) {
        emit_call(&s, 7, 3, i < 1500 ? 3 : 1, 0, i, -1);
        emit_call(&s, 7, 3, i < 1500 ? 3 : 1, 1, i, -1);
    }
    ft_replay_result res;
    mini_replay(m, NULL, 1000, &res);
    for (uint32_t p = 0; p < res.n_policies; p++) {
        const ft_step_hist *h = &res.pol[p].steps;
        assert_int_equal(h->width, 4); /* 3000 steps / 1024 buckets, rounded up to a power of 2 */
        assert_int_equal(h->n, 750);
        uint64_t calls = 0, hits = 0;
        for (uint32_t k = 0; k < h->n; k++) {
            assert_int_equal(h->calls[k], 8);
            calls += h->calls[k];
            hits += h->hits[k];
        }
        assert_int_equal(calls, 6000);
        assert_int_equal(hits, res.pol[p].hits);
    }
    /* te-3410: the four builds fall in bucket 0 (MXFP8) and bucket 375 (step 1500, NVFP4) */
    const ft_policy_result *q = pol(&res, "te-3410");
    assert_int_equal(q->builds, 4);
    assert_int_equal(q->steps.hits[0], 6);
    assert_int_equal(q->steps.hits[375], 6);
    mini_free(m);
}

/* ---- captured runs -------------------------------------------------------------------------- */
static void test_captured_agreement_and_modeled_time(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    emit_s_setup(&s);
    /* captured OLD decisions on a recompute pattern: every call rebuilt */
    for (int i = 0; i < 6; i++)
        emit_call(&s, 7, 3, 3, i % 2, i / 2, 1);
    ft_replay_result res;
    mini_replay(m, NULL, 2, &res);
    uint32_t old;
    assert_int_equal(ft_policy_find("te-pre3410", &old, NULL), FT_OK);
    assert_int_equal(res.captured_policy, (int)old); /* te_version 2.20.0 */
    const ft_policy_result *p = pol(&res, "te-pre3410");
    assert_int_equal(p->cap_calls, 6);
    assert_int_equal(p->cap_agree, 6);
    assert_int_equal(p->first_disagree_seq, -1);
    const ft_policy_result *q = pol(&res, "te-3410");
    assert_int_equal(q->cap_agree, 2);
    assert_int_equal(q->first_disagree_seq, 2);
    /* all captured calls were builds at 10000 ns: te-3410 would spend 2 x 10000 */
    assert_true(ft_report_modeled_ns(&res, q) == 20000.0);
    assert_true(ft_report_modeled_ns(&res, p) == 60000.0);
    mini_free(m);
}

static void test_captured_policy_from_version(void **state)
{
    (void)state;
    uint32_t old, neu;
    assert_int_equal(ft_policy_find("te-pre3410", &old, NULL), FT_OK);
    assert_int_equal(ft_policy_find("te-3410", &neu, NULL), FT_OK);
    /* tefuser names the ref, the policy rows say which policy reproduces it */
    static const struct {
        const char *version;
        int policy;
    } cases[] = {{"2.20.2", 0},      {"2.20.0.dev0+pr3410", 1},
                 {"2.21.0", 1},      {"2.21.0rc1", 1},
                 {"2.21.0.dev0", 1}, {"3.0", 1},
                 {"2.9", 0},         {"unknown", 0}};
    ft_te_ref ref;
    assert_int_equal(ft_te_captured_ref(NULL, NULL, &ref), 0);
    assert_int_equal(ft_te_captured_ref("{}", "", &ref), 0);
    for (size_t i = 0; i < FT_ARRAY_LEN(cases); i++) {
        assert_int_equal(ft_te_captured_ref(NULL, cases[i].version, &ref), 1);
        if (ft_policy_of_te_ref(ref) != (int)(cases[i].policy ? neu : old))
            fail_msg("te_version %s: policy %d", cases[i].version, ft_policy_of_te_ref(ref));
    }
    assert_int_equal(ft_te_captured_ref("{\"fuser_cache\":\"type\"}", "2.20.2", &ref), 1);
    assert_string_equal(ft_policy_name((uint32_t)ft_policy_of_te_ref(ref)), "te-3410-commit1");
    /* a header that says which plan cache the captured TE had wins over its version */
    ft_sink s;
    mini *m = mini_new(&s);
    ft_header h = {0};
    h.te_version = "2.20.2";
    h.env_json = "{}";
    h.extra_json = "{\"fuser_cache\":\"dict\"}";
    assert_int_equal(s.header_fn(s.ctx, &h), FT_OK);
    m->hdr.extra_json = h.extra_json;
    emit_fuser(&s, 1, "[{\"type\":\"Identity\"}]");
    ft_replay_result res;
    mini_replay(m, NULL, 0, &res);
    assert_int_equal(res.captured_policy, (int)neu);
    mini_free(m);
}

/* ---- registry ------------------------------------------------------------------------------- */
static void test_registry_parse_list(void **state)
{
    (void)state;
    uint32_t idx[FT_MAX_POLICIES], n;
    ft_err err = {0};
    assert_int_equal(ft_policy_parse_list("all", idx, &n, &err), FT_OK);
    assert_int_equal(n, ft_policy_count());
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(idx[i], i); /* registry order */
    assert_int_equal(ft_policy_parse_list("te-3410,rebuild-always", idx, &n, &err), FT_OK);
    assert_int_equal(n, 2);
    assert_string_equal(ft_policy_name(idx[0]), "te-3410");
    assert_string_equal(ft_policy_name(idx[1]), "rebuild-always");
    assert_int_equal(ft_policy_parse_list("te-3410,nope", idx, &n, &err), FT_ENOTFOUND);
    assert_non_null(strstr(err.msg, "nope"));
    assert_non_null(strstr(err.msg, "recipe-hash"));
    assert_int_equal(ft_policy_parse_list("te-3410,,x", idx, &n, &err), FT_EINVAL);
    assert_int_equal(ft_policy_parse_list("te-3410,te-3410", idx, &n, &err), FT_EINVAL);
    for (uint32_t i = 0; i < ft_policy_count(); i++) {
        assert_non_null(ft_policy_summary(i));
        assert_int_equal(ft_policy_find(ft_policy_name(i), &idx[0], NULL), FT_OK);
        assert_int_equal(idx[0], i);
    }
    /* the rows' notes and TE refs */
    uint32_t k;
    assert_int_equal(ft_policy_find("rebuild-always", &k, NULL), FT_OK);
    assert_non_null(strstr(ft_policy_note(k), "baseline"));
    assert_int_equal(ft_policy_find("te-3410-commit1", &k, NULL), FT_OK);
    assert_non_null(strstr(ft_policy_note(k), "historical"));
    assert_int_equal(ft_policy_of_te_ref(FT_TE_3410_COMMIT1), (int)k);
    assert_int_equal(ft_policy_find("fusion-attrs", &k, NULL), FT_OK);
    assert_null(ft_policy_note(k));
    assert_null(ft_policy_note(ft_policy_count()));
}

/* ---- batch boundaries and merging ----------------------------------------------------------- */
static void test_replay_batch_split_and_merge_agree(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    emit_s_setup(&s);
    static const int64_t rs[] = {1, 3, 2, -1, 1, 2, 3};
    for (int i = 0; i < 70; i++)
        emit_call(&s, 7, 3, rs[i % 7], (i / 7) % 2, i / 7, -1);
    ft_backward bw = {seq_ctr++, 1, 0, 0};
    assert_int_equal(s.backward_fn(s.ctx, &bw), FT_OK);
    static ft_replay_result whole, split, merged;
    mini_replay(m, NULL, 0, &whole);
    mini_replay(m, NULL, 5, &split);
    assert_int_equal(whole.calls, 70);
    assert_int_equal(whole.backwards, 1);
    for (uint32_t p = 0; p < whole.n_policies; p++) {
        assert_int_equal(whole.pol[p].builds, split.pol[p].builds);
        assert_int_equal(whole.pol[p].resets, split.pol[p].resets);
        assert_memory_equal(whole.pol[p].stale, split.pol[p].stale, sizeof whole.pol[p].stale);
    }
    ft_replay_result_init(&merged, NULL, 0);
    ft_err err = {0};
    assert_int_equal(ft_replay_result_merge(&merged, &whole, &err), FT_OK);
    assert_int_equal(ft_replay_result_merge(&merged, &split, &err), FT_OK);
    assert_int_equal(merged.n_traces, 2);
    assert_int_equal(merged.pol[2].builds, 2 * whole.pol[2].builds);
    assert_int_equal(merged.pol[2].steps.calls[3], 2 * whole.pol[2].steps.calls[3]);
    mini_free(m);
}

static void test_replay_rejects_bad_batch(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    emit_s_setup(&s);
    emit_call(&s, 7, 3, 1, 1, 0, -1);
    m->fuser[0] = 9; /* no such fuser */
    ft_replay *r = NULL;
    ft_err err = {0};
    assert_int_equal(ft_replay_new(m->fusers, m->nf, m->recipes, m->nr, &m->hdr, NULL, &r, &err),
                     FT_OK);
    ft_batch b;
    mini_batch(m, 0, 1, &b);
    b.chunk_id = 42;
    assert_int_equal(ft_replay_batch(r, &b, NULL, &err), FT_ECORRUPT);
    assert_non_null(strstr(err.msg, "chunk 42"));
    ft_replay_free(r);
    mini_free(m);
}

/* Every allocation failure on the way through setup, batches and results is reported and leaks
 * nothing (the engine and the model both allocate through ft_malloc). */
static void alloc_failures(const mini *m, const ft_replay_opts *o)
{
    int ok = 0;
    for (long n = 0; n < 2000 && !ok; n++) {
        long live = ft_alloc_live();
        ft_replay *r = NULL;
        ft_err err = {0};
        ft_alloc_fail_after(n);
        int rc = ft_replay_new(m->fusers, m->nf, m->recipes, m->nr, &m->hdr, o, &r, &err);
        for (uint32_t lo = 0; !rc && lo < m->n; lo += 5) {
            ft_batch b;
            mini_batch(m, lo, lo + 5 < m->n ? lo + 5 : m->n, &b);
            rc = ft_replay_batch(r, &b, NULL, &err);
        }
        ft_alloc_fail_after(-1);
        if (rc && !err.msg[0]) fail_msg("allocation %ld: rc %d without a message", n, rc);
        ok = rc == FT_OK;
        ft_replay_free(r);
        assert_int_equal(ft_alloc_live(), live);
    }
    assert_true(ok); /* eventually enough allocations succeed */
}

static void test_replay_alloc_failures_leak_nothing(void **state)
{
    (void)state;
    ft_sink s;
    mini *m = mini_new(&s);
    emit_s_setup(&s);
    static const int64_t rs[] = {1, 3, 2, -1, 1, 2, 3};
    for (int i = 0; i < 28; i++)
        emit_call(&s, 7, 3, rs[i % 7], i % 2, i, i % 3 ? 1 : -1);
    /* plain, and with the view, its causes and a filter (their own allocations) */
    const ft_replay_filter flt = {.phase = "fwd"};
    const ft_replay_opts plain = {.capacity = 1};
    const ft_replay_opts viewed = {.capacity = 1, .needs = FT_VIEW_CAUSES, .filter = &flt};
    alloc_failures(m, &plain);
    alloc_failures(m, &viewed);
    mini_free(m);
}

static void test_explain_names_changed_component(void **state)
{
    (void)state;
    static const int64_t r[3] = {1, 1, 3};
    static const int g[3] = {0, 1, 1};
    ft_sink s;
    mini *m = mini_new(&s);
    emit_s_setup(&s);
    for (int i = 0; i < 3; i++)
        emit_call(&s, 7, 3, r[i], g[i], i, -1);
    uint32_t idx;
    assert_int_equal(ft_policy_find("te-pre3410", &idx, NULL), FT_OK);
    FILE *ex = tmpfile();
    ft_replay_opts o = {0};
    o.policies = &idx;
    o.n_policies = 1;
    ft_report_calls *w = NULL;
    ft_err err = {0};
    assert_int_equal(ft_report_calls_new(NULL, ex, &w, &err), FT_OK);
    const ft_replay_observer *one[1];
    watch(&o, one, ft_report_calls_observer(w));
    ft_replay_result res;
    mini_replay(m, &o, 0, &res);
    ft_report_calls_free(w);
    char *text = read_all(ex);
    assert_non_null(strstr(text, "seq=0 fuser=7 (layer.mlp): reset+build because first sight"));
    assert_non_null(strstr(text, "seq=1 fuser=7 (layer.mlp): reset+build because f 3 -> 0"));
    assert_non_null(strstr(text, "recipe type NVFP4BlockScaling -> MXFP8BlockScaling"));
    ft_free(text);
    fclose(ex);
    mini_free(m);
}

/* ---- canned traces with golden counts ------------------------------------------------------- */
#define GOLDEN_FIELDS "builds resets hits harmless slower quant raises qdrift"

static void golden_line(char *buf, size_t cap, const ft_policy_result *p)
{
    snprintf(buf, cap, "%s %llu %llu %llu %llu %llu %llu %llu %llu", ft_policy_name(p->policy),
             (unsigned long long)p->builds, (unsigned long long)p->resets,
             (unsigned long long)p->hits, (unsigned long long)p->stale[FT_STALE_HARMLESS],
             (unsigned long long)p->stale[FT_STALE_SLOWER],
             (unsigned long long)p->stale[FT_STALE_QUANT],
             (unsigned long long)p->stale[FT_STALE_RAISES], (unsigned long long)p->qdrift);
}

static void test_canned_traces_match_golden(void **state)
{
    (void)state;
    const char *dir = FT_SOURCE_DIR "/traces";
    int print = getenv("FT_PRINT_GOLDEN") != NULL;
    DIR *d = opendir(dir);
    if (!d) skip();
    struct dirent *de;
    int checked = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 7 || strcmp(de->d_name + len - 6, ".jsonl")) continue;
        char path[1024], gpath[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        snprintf(gpath, sizeof gpath, "%s/%.*s.golden", dir, (int)(len - 6), de->d_name);
        FILE *g = fopen(gpath, "r");
        /* every canned stream has its golden counts: none is skipped */
        if (!g && !print)
            fail_msg("%s has no golden file %s (FT_PRINT_GOLDEN=write makes it)", path, gpath);
        FILE *in = fopen(path, "r");
        assert_non_null(in);
        ft_sink s;
        mini *m = mini_new(&s);
        ft_err err = {0};
        int rc = ft_jsonl_import(in, path, &s, NULL, &err);
        fclose(in);
        if (rc) fail_msg("%s: %s", path, ft_err_msg(&err));
        ft_replay_result res;
        if (print) {
            /* print mode goes on past streams the model rejects, naming them */
            ft_replay *r = NULL;
            if (ft_replay_new(m->fusers, m->nf, m->recipes, m->nr, &m->hdr, NULL, &r, &err)) {
                printf("# %s: not replayable: %s\n", de->d_name, ft_err_msg(&err));
                mini_free(m);
                if (g) fclose(g);
                continue;
            }
            ft_replay_free(r);
        }
        mini_replay(m, NULL, 7, &res);
        if (print) {
            /* FT_PRINT_GOLDEN=write rewrites the golden files; any other value prints them */
            FILE *o = strcmp(getenv("FT_PRINT_GOLDEN"), "write") ? stdout : fopen(gpath, "w");
            assert_non_null(o);
            fprintf(o, "# %.*s.golden: policy " GOLDEN_FIELDS "\n", (int)(len - 6), de->d_name);
            for (uint32_t p = 0; p < res.n_policies; p++) {
                char line[256];
                golden_line(line, sizeof line, &res.pol[p]);
                fprintf(o, "%s\n", line);
            }
            if (o != stdout) fclose(o);
        } else {
            /* lines are matched by policy name: a new policy adds a line, shifts none */
            char want[256], got[256];
            uint8_t lined[FT_MAX_POLICIES] = {0};
            while (fgets(want, sizeof want, g)) {
                want[strcspn(want, "\n")] = '\0';
                if (want[0] == '#' || !want[0]) continue;
                char name[64];
                ft_strlcpy(name, want, sizeof name);
                name[strcspn(name, " ")] = '\0';
                uint32_t idx, p = 0;
                if (ft_policy_find(name, &idx, NULL))
                    fail_msg("%s: golden line for unknown policy '%s'", gpath, name);
                while (p < res.n_policies && res.pol[p].policy != idx)
                    p++;
                assert_true(p < res.n_policies);
                if (lined[p]++) fail_msg("%s: two golden lines for policy '%s'", gpath, name);
                golden_line(got, sizeof got, &res.pol[p]);
                if (strcmp(want, got))
                    fail_msg("%s: golden '%s', replay gives '%s'", gpath, want, got);
            }
            for (uint32_t p = 0; p < res.n_policies; p++)
                if (!lined[p])
                    fail_msg("%s has no line for policy %s (FT_PRINT_GOLDEN=write adds it)", gpath,
                             ft_policy_name(res.pol[p].policy));
            checked++;
        }
        if (g) fclose(g);
        mini_free(m);
    }
    closedir(d);
    if (!print) assert_true(checked > 0);
}

/* ---- full path: recorder -> .ftdb -> reader -> replay --------------------------------------- */
static void test_trace_file_replay_matches_in_memory(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/test_replay_%ld.ftdb", FT_BINARY_DIR, (long)getpid());
    remove(path);
    ft_rec *rec = NULL;
    ft_err err = {0};
    ft_rec_opts ro = {5, 0}; /* several chunks */
    assert_int_equal(ft_rec_open(path, &ro, &rec, &err), FT_OK);
    ft_sink rs, ms;
    ft_rec_sink(rec, &rs);
    mini *m = mini_new(&ms);
    static const int64_t r[] = {1, 3, 2, 2, 3, 1, -1, 2};
    for (int pass = 0; pass < 2; pass++) {
        ft_sink *s = pass ? &ms : &rs;
        emit_s_setup(s);
        for (int i = 0; i < 40; i++)
            emit_call(s, 7, 3, r[i % 8], i % 3 != 0, i / 4, i % 2);
    }
    assert_int_equal(ft_rec_close(rec), FT_OK);
    ft_replay_result file, mem;
    const char *paths[2] = {path, path};
    ft_replay_opts o = {0};
    o.n_threads = 2;
    assert_int_equal(ft_replay_traces(paths, 2, &o, &file, &err), FT_OK);
    mini_replay(m, NULL, 0, &mem);
    assert_int_equal(file.n_traces, 2);
    assert_int_equal(file.calls, 2 * mem.calls);
    for (uint32_t p = 0; p < mem.n_policies; p++) {
        assert_int_equal(file.pol[p].builds, 2 * mem.pol[p].builds);
        assert_int_equal(file.pol[p].resets, 2 * mem.pol[p].resets);
        assert_int_equal(file.pol[p].qdrift, 2 * mem.pol[p].qdrift);
        for (int k = 0; k < FT_STALE_COUNT; k++)
            assert_int_equal(file.pol[p].stale[k], 2 * mem.pol[p].stale[k]);
        assert_int_equal(file.pol[p].cap_agree, 2 * mem.pol[p].cap_agree);
    }
    const char *bad[1] = {FT_SOURCE_DIR "/no/such/trace.ftdb"};
    assert_int_not_equal(ft_replay_traces(bad, 1, &o, &file, &err), FT_OK);
    assert_non_null(strstr(err.msg, "trace.ftdb"));
    mini_free(m);
    remove(path);
}

/* ---- the driver: push observers, pull cursor ------------------------------------------------ */
typedef struct drive_log {
    int begins, ends, batches, fail_at; /* fail_at: the batch whose batch_fn fails, -1 never */
    int64_t next_seq;                   /* the seq the next view must start at */
    uint32_t calls, trace_index[4];
    int end_rc;
} drive_log;

static int log_begin(void *ctx, const ft_replay_input *in, const ft_replay *eng, ft_err *err)
{
    (void)err;
    drive_log *d = ctx;
    assert_non_null(eng);
    assert_non_null(in->trace);
    if (d->begins < 4) d->trace_index[d->begins] = in->index;
    d->begins++;
    d->next_seq = 0;
    return FT_OK;
}

static int log_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    (void)err;
    drive_log *d = ctx;
    if (d->batches++ == d->fail_at) return FT_EINVAL;
    for (uint32_t j = 0; j < v->n; j++) {
        assert_int_equal(v->seq[j], d->next_seq); /* every call, in order, once */
        assert_int_equal(v->seq[j], v->batch->seq[v->row[j]]);
        d->next_seq = v->seq[j] + 1;
    }
    d->calls += v->n;
    return FT_OK;
}

static int log_end(void *ctx, const ft_replay *eng, int rc, ft_err *err)
{
    (void)eng;
    (void)err;
    drive_log *d = ctx;
    d->ends++;
    d->end_rc = rc;
    return FT_OK;
}

/* Observers see begin, every view (all calls, in order), end per trace; one that fails stops the
 * replay with a message naming where, and still ends; the pull form bounded by a seq decodes only
 * what can hold it. */
static void test_driver_observers_and_cursor(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/test_replay_drive_%ld.ftdb", FT_BINARY_DIR, (long)getpid());
    remove(path);
    ft_rec *rec = NULL;
    ft_err err = {0};
    ft_rec_opts ro = {8, 0}; /* 5 chunks */
    assert_int_equal(ft_rec_open(path, &ro, &rec, &err), FT_OK);
    ft_sink rs;
    ft_rec_sink(rec, &rs);
    emit_s_setup(&rs);
    for (int i = 0; i < 40; i++)
        emit_call(&rs, 7, 3, 1 + i % 3, i % 2, i / 4, -1);
    assert_int_equal(ft_rec_close(rec), FT_OK);

    static drive_log a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.fail_at = b.fail_at = -1;
    const ft_replay_observer oa = {&a, FT_VIEW_DECISIONS, log_begin, log_batch, log_end};
    const ft_replay_observer ob = {&b, FT_VIEW_CAUSES, log_begin, log_batch, log_end};
    const ft_replay_observer *both[2] = {&oa, &ob};
    ft_replay_opts o = {.observers = both, .n_observers = 2};
    const char *paths[2] = {path, path};
    ft_replay_result res, per[2];
    o.per_trace = per;
    assert_int_equal(ft_replay_traces(paths, 2, &o, &res, &err), FT_OK);
    assert_int_equal(a.begins, 2);
    assert_int_equal(a.ends, 2);
    assert_int_equal(a.end_rc, FT_OK);
    assert_int_equal(a.batches, 10);
    assert_int_equal(a.calls, 80);
    assert_int_equal(a.trace_index[1], 1);
    assert_int_equal(b.calls, 80);
    assert_int_equal(res.calls, 80);
    assert_int_equal(per[1].calls, 40);

    /* the second observer fails on its third batch: the replay stops, both end with the status */
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.fail_at = -1;
    b.fail_at = 2;
    o.per_trace = NULL;
    assert_int_equal(ft_replay_traces(paths, 1, &o, &res, &err), FT_EINVAL);
    assert_non_null(strstr(err.msg, "observer stopped"));
    assert_non_null(strstr(err.msg, path));
    assert_int_equal(a.batches, 3);
    assert_int_equal(a.ends, 1);
    assert_int_equal(b.ends, 1);
    assert_int_equal(b.end_rc, FT_EINVAL);

    /* pull form: seqs up to 12 lie in the first two chunks */
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    ft_replay_opts po = {.needs = FT_VIEW_DECISIONS};
    ft_replay_cursor *c = NULL;
    assert_int_equal(ft_replay_cursor_open(t, &po, &c, &err), FT_OK);
    assert_int_equal(ft_replay_cursor_bound(c, 12, &err), FT_OK);
    uint32_t n_views = 0, n_calls = 0;
    for (int more = 1; more;) {
        const ft_replay_view *v = NULL;
        assert_int_equal(ft_replay_cursor_next(c, &v, &more, &err), FT_OK);
        if (!more) break;
        assert_non_null(v);
        assert_int_equal(v->n_pol, ft_policy_count());
        n_views++;
        n_calls += v->n;
    }
    assert_int_equal(n_views, 2);
    assert_int_equal(n_calls, 16);
    ft_replay_cursor_result(c, &res);
    assert_int_equal(res.calls, 16);
    ft_replay_cursor_close(c);
    ft_trace_close(t);
    remove(path);
}

/* Causes across a redeclaration (`of`): the redeclared fuser's first call continues its
 * OperationFuser, so a build there is caused by the op attributes (FT_WHY_OPS), not first sight;
 * and every call names the build whose plan it runs (a hit: the last build under its key). */
static void import_trace(const char *name, char *out, size_t cap);
static void test_view_causes_follow_the_instance_and_name_sources(void **state)
{
    (void)state;
    char path[1200];
    import_trace("op-attr-change", path, sizeof path);
    ft_err err = {0};
    ft_trace *t = NULL;
    assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
    uint32_t idx[2];
    assert_int_equal(ft_policy_find("fusion-attrs", &idx[0], NULL), FT_OK);
    assert_int_equal(ft_policy_find("te-3410", &idx[1], NULL), FT_OK);
    ft_replay_opts po = {.policies = idx, .n_policies = 2, .needs = FT_VIEW_CAUSES};
    ft_replay_cursor *c = NULL;
    assert_int_equal(ft_replay_cursor_open(t, &po, &c, &err), FT_OK);
    int seen3 = 0;
    for (int more = 1; more;) {
        const ft_replay_view *v = NULL;
        assert_int_equal(ft_replay_cursor_next(c, &v, &more, &err), FT_OK);
        if (!more) break;
        for (uint32_t j = 0; j < v->n; j++) {
            const ft_view_policy *fa = &v->pol[0], *te = &v->pol[1];
            assert_non_null(fa->src_seq);
            if (fa->dec[j] & FT_DEC_BUILD) assert_int_equal(fa->src_seq[j], v->seq[j]);
            if (!(te->dec[j] & FT_DEC_BUILD)) assert_true(te->src_seq[j] < v->seq[j]);
            if (v->seq[j] != 3) continue;
            seen3 = 1;
            /* seq 3: the first call of declaration 2 (of 1): same recipe and f as seq 2 */
            assert_int_equal(v->prev_recipe[j], v->recipe[j]);
            assert_int_equal(v->changed[j], FT_WHY_OPS);
            assert_true(fa->dec[j] & FT_DEC_BUILD);
            assert_int_equal(fa->why[j], FT_WHY_OPS);
            /* te-3410 keeps the plan built at seq 0 (grad on, the same key) */
            assert_false(te->dec[j] & FT_DEC_BUILD);
            assert_int_equal(te->src_seq[j], 0);
            assert_int_equal(te->src_f[j], v->f[j]);
            assert_int_equal(te->src_recipe[j], v->recipe[j]);
        }
    }
    assert_true(seen3);
    ft_replay_cursor_close(c);
    ft_trace_close(t);
    remove(path);
}

/* ---- the replay and demo commands --------------------------------------------------------- */
/* Import traces/NAME.jsonl into a trace in FT_BINARY_DIR; path into out. */
static void import_trace(const char *name, char *out, size_t cap)
{
    char src[1024];
    snprintf(src, sizeof src, "%s/traces/%s.jsonl", FT_SOURCE_DIR, name);
    snprintf(out, cap, "%s/test_replay_%s_%ld.ftdb", FT_BINARY_DIR, name, (long)getpid());
    remove(out);
    FILE *in = fopen(src, "r");
    assert_non_null(in);
    ft_rec *rec = NULL;
    ft_err err = {0};
    assert_int_equal(ft_rec_open(out, NULL, &rec, &err), FT_OK);
    ft_sink sink;
    ft_rec_sink(rec, &sink);
    int rc = ft_jsonl_import(in, src, &sink, NULL, &err);
    fclose(in);
    if (rc) fail_msg("%s: %s", src, ft_err_msg(&err));
    assert_int_equal(ft_rec_close(rec), FT_OK);
}

/* Run `fusertrace ARGS 2>&1`; its output as an ft_malloc'd string, exit status into *status. */
static char *run_cli(const char *args, int *status)
{
    if (!tu_cli()) return NULL;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", tu_cli(), args);
    ft_buf b = {0};
    *status = tu_sh_buf(cmd, &b);
    return (char *)b.data;
}

static void test_cli_replay_formats_and_flags(void **state)
{
    (void)state;
    if (!getenv("FT_CLI")) skip();
    char path[1024], args[4096], pc[1100];
    import_trace("rht-round-trips", path, sizeof path);
    int st;
    /* JSON: all seven policies, two traces reduced into one report (ranks 0 and 1 of a 2-rank
     * run: two traces of one rank are refused) */
    char path1[1100], path2[1100];
    snprintf(path1, sizeof path1, "%s.rank0.ftdb", path);
    snprintf(path2, sizeof path2, "%s.rank1.ftdb", path);
    remove(path1);
    remove(path2);
    snprintf(args, sizeof args,
             "for r in 0 1; do sed \"1s/\\\"rank\\\":0,\\\"world_size\\\":1/\\\"rank\\\":$r,"
             "\\\"world_size\\\":2/\" '%s/traces/rht-round-trips.jsonl' | '%s' import - -o "
             "'%s.rank'$r.ftdb || exit 1; done",
             FT_SOURCE_DIR, tu_cli(), path);
    assert_int_equal(tu_sh(args, NULL, 0), 0);
    snprintf(args, sizeof args, "replay '%s' '%s' --json", path1, path2);
    char *out = run_cli(args, &st);
    assert_int_equal(st, 0);
    json_t *doc = json_loads(out, 0, NULL);
    if (!doc) fail_msg("not JSON: %s", out);
    assert_int_equal(json_integer_value(json_object_get(doc, "traces")), 2);
    assert_int_equal(json_integer_value(json_object_get(doc, "calls")), 32);
    json_t *pols = json_object_get(doc, "policies");
    assert_int_equal(json_array_size(pols), ft_policy_count());
    json_t *te = json_array_get(pols, 2);
    assert_string_equal(json_string_value(json_object_get(te, "policy")), "te-3410");
    assert_int_equal(json_integer_value(json_object_get(te, "builds")), 10);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(te, "stale"), "raises")),
                     4);
    assert_true(json_array_size(json_object_get(te, "steps")) > 0);
    json_decref(doc);
    ft_free(out);
    /* --env: on SM 9.0 the grouped MLP never fuses, so nothing is stale */
    snprintf(args, sizeof args, "replay '%s' --json --policy te-3410 --env device_cc=9.0", path);
    out = run_cli(args, &st);
    assert_int_equal(st, 0);
    doc = json_loads(out, 0, NULL);
    assert_non_null(doc);
    te = json_array_get(json_object_get(doc, "policies"), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(te, "stale"), "none")), 16);
    json_decref(doc);
    ft_free(out);
    /* CSV: summary rows then step rows */
    snprintf(args, sizeof args, "replay '%s' --csv --policy te-pre3410,te-3410", path);
    out = run_cli(args, &st);
    assert_int_equal(st, 0);
    assert_true(!strncmp(out, "record,policy,step,", 19));
    assert_non_null(strstr(out, "\nsummary,te-pre3410,,,16,10,6,"));
    assert_non_null(strstr(out, "\nstep,te-3410,0,0,2,"));
    ft_free(out);
    /* per-call lines and explanations */
    snprintf(pc, sizeof pc, "%s.calls.jsonl", path);
    snprintf(args, sizeof args, "replay '%s' --policy te-3410 --per-call '%s' --explain", path, pc);
    out = run_cli(args, &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "[explain] te-3410 seq=2 fuser=0 (layers.0.mlp): reset+build "
                                "because recipe type NVFP4BlockScaling -> MXFP8BlockScaling"));
    ft_free(out);
    FILE *f = fopen(pc, "r");
    assert_non_null(f);
    char line[1024];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *d = json_loads(line, 0, NULL);
        assert_non_null(d);
        assert_non_null(json_object_get(d, "plan"));
        json_decref(d);
        lines++;
    }
    fclose(f);
    assert_int_equal(lines, 16);
    remove(pc);
    /* bad input: exit 2 with a message */
    snprintf(args, sizeof args, "replay '%s' --policy nope", path);
    out = run_cli(args, &st);
    assert_int_equal(st, 2);
    assert_non_null(strstr(out, "unknown policy 'nope'"));
    ft_free(out);
    out = run_cli("replay /no/such.ftdb", &st);
    assert_int_not_equal(st, 0);
    ft_free(out);
    snprintf(args, sizeof args, "replay '%s' --env novalue", path);
    out = run_cli(args, &st);
    assert_int_equal(st, 2);
    ft_free(out);
    snprintf(args, sizeof args, "replay '%s' '%s'", path, path);
    out = run_cli(args, &st);
    assert_int_equal(st, 2);
    assert_non_null(strstr(out, "are both rank 0"));
    ft_free(out);
    remove(path);
    remove(path1);
    remove(path2);
}

static void test_cli_demo_explains(void **state)
{
    (void)state;
    if (!getenv("FT_CLI")) skip();
    int st;
    char *out = run_cli("demo", &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "te-pre3410"));
    assert_non_null(strstr(out, "What it means:"));
    assert_non_null(strstr(out, "Fewest plan builds"));
    ft_free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_te_pr_grad_off_on_off),
        cmocka_unit_test(test_te_pr_grad_off_on_off_on_restores_plans),
        cmocka_unit_test(test_view_reports_decisions_and_qstate),
        cmocka_unit_test(test_view_causes_and_filter),
        cmocka_unit_test(test_te_cache_rule_matches_engine_on_random_calls),
        cmocka_unit_test(test_scenario_s1_same_type_switch_keeps_fused_plan),
        cmocka_unit_test(test_scenario_s2_type_round_trip_restores_stale_plan),
        cmocka_unit_test(test_scenario_s2_prime_bf16_round_trip),
        cmocka_unit_test(test_scenario_s3_grad_toggle_across_same_type),
        cmocka_unit_test(test_scenario_s4_stale_unfused_is_slower),
        cmocka_unit_test(test_scenario_s6_object_key_survives_round_trips),
        cmocka_unit_test(test_scenario_mutated_object),
        cmocka_unit_test(test_fresh_plan_raises_counted_apart),
        cmocka_unit_test(test_lru_capacity_bounds_plans),
        cmocka_unit_test(test_step_histogram_folds_long_runs),
        cmocka_unit_test(test_captured_agreement_and_modeled_time),
        cmocka_unit_test(test_captured_policy_from_version),
        cmocka_unit_test(test_registry_parse_list),
        cmocka_unit_test(test_replay_batch_split_and_merge_agree),
        cmocka_unit_test(test_replay_rejects_bad_batch),
        cmocka_unit_test(test_replay_alloc_failures_leak_nothing),
        cmocka_unit_test(test_explain_names_changed_component),
        cmocka_unit_test(test_calls_raising_whatever_the_key_are_not_stale),
        cmocka_unit_test(test_view_causes_follow_the_instance_and_name_sources),
        cmocka_unit_test(test_canned_traces_match_golden),
        cmocka_unit_test(test_trace_file_replay_matches_in_memory),
        cmocka_unit_test(test_driver_observers_and_cursor),
        cmocka_unit_test(test_cli_replay_formats_and_flags),
        cmocka_unit_test(test_cli_demo_explains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
