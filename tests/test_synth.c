/*
 * test_synth.c - the synthetic scenario generator (synth/) and `fusertrace synth`.
 *
 * A collecting sink keeps every record the generator emits; the tests check the stream's
 * invariants (declarations before use, seq order, backward references, split sums), each
 * scenario's characteristic pattern, determinism per seed, key handling, and failure paths
 * (sink errors, allocation failures) without leaks. Randomized inputs print their seed.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_recorder.h"
#include "ft_synth.h"
#include "test_util.h"

#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- collecting sink ---------------------------------------------------------------------- */
enum { R_HEADER, R_FUSER, R_RECIPE, R_CALL, R_BWD, R_END };

typedef struct rec {
    int kind;
    int64_t seq, id, fuser, recipe, obj, step, mb, call, ns;
    uint32_t flags;
    int32_t device;
    uint32_t n_op_rg, n_splits, n_ops;
    uint8_t op_rg[8];
    int64_t *splits;
    char phase[16];
    char *text;  /* fuser ops / recipe attrs / header env */
    char *text2; /* recipe type / fuser label / header extra */
} rec;

typedef struct coll {
    rec *r;
    size_t n, cap;
    size_t fail_at; /* fail the record with this index (1-based), 0 = never */
    ft_err err;
    int64_t header_rank, header_ws;
    size_t *sidx, n_sidx; /* indices of call/backward records, by seq (find_call) */
} coll;

static char *xstrdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    assert_non_null(p);
    memcpy(p, s, n);
    return p;
}

static rec *push(coll *c, int kind)
{
    if (c->fail_at && c->n + 1 == c->fail_at) return NULL;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 1024;
        c->r = realloc(c->r, c->cap * sizeof *c->r);
        assert_non_null(c->r);
    }
    rec *r = &c->r[c->n++];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    return r;
}

static int sink_fail(coll *c)
{
    ft_err_set(&c->err, FT_EIO, "test sink: refused record %zu", c->fail_at);
    return FT_EIO;
}

static int c_header(void *ctx, const ft_header *h)
{
    coll *c = ctx;
    rec *r = push(c, R_HEADER);
    if (!r) return sink_fail(c);
    r->text = xstrdup(h->env_json);
    r->text2 = xstrdup(h->extra_json);
    r->text2 = r->text2 ? r->text2 : xstrdup("{}");
    c->header_rank = h->has_rank ? h->rank : -1;
    c->header_ws = h->has_world_size ? h->world_size : -1;
    assert_non_null(h->te_version);
    return FT_OK;
}

static int c_fuser(void *ctx, const ft_fuser_def *f)
{
    coll *c = ctx;
    rec *r = push(c, R_FUSER);
    if (!r) return sink_fail(c);
    r->id = f->id;
    r->n_ops = f->n_ops;
    r->text = xstrdup(f->ops_json);
    r->text2 = xstrdup(f->label);
    return FT_OK;
}

static int c_recipe(void *ctx, const ft_recipe_def *d)
{
    coll *c = ctx;
    rec *r = push(c, R_RECIPE);
    if (!r) return sink_fail(c);
    r->id = d->id;
    r->obj = d->obj;
    r->text = xstrdup(d->attrs_json);
    r->text2 = xstrdup(d->type);
    return FT_OK;
}

static int c_call(void *ctx, const ft_call *k)
{
    coll *c = ctx;
    rec *r = push(c, R_CALL);
    if (!r) return sink_fail(c);
    r->seq = k->seq;
    r->fuser = k->fuser;
    r->recipe = (k->flags & FT_CF_HAS_RECIPE) ? k->recipe : -1;
    r->flags = k->flags;
    r->device = k->device;
    r->step = k->step;
    r->mb = k->mb;
    r->ns = k->ns;
    assert_true(k->n_op_rg <= 8);
    r->n_op_rg = k->n_op_rg;
    memcpy(r->op_rg, k->op_rg, k->n_op_rg);
    if (k->flags & FT_CF_HAS_SPLITS) {
        r->n_splits = k->n_splits;
        r->splits = malloc((k->n_splits + 1) * sizeof *r->splits);
        assert_non_null(r->splits);
        memcpy(r->splits, k->m_splits, k->n_splits * sizeof *r->splits);
    }
    if (k->flags & FT_CF_HAS_PHASE) snprintf(r->phase, sizeof r->phase, "%s", k->phase);
    return FT_OK;
}

static int c_bwd(void *ctx, const ft_backward *b)
{
    coll *c = ctx;
    rec *r = push(c, R_BWD);
    if (!r) return sink_fail(c);
    r->seq = b->seq;
    r->call = b->call;
    r->ns = b->has_ns ? b->ns : -1;
    return FT_OK;
}

static int c_end(void *ctx, const ft_fuser_end *e)
{
    coll *c = ctx;
    rec *r = push(c, R_END);
    if (!r) return sink_fail(c);
    r->seq = e->seq;
    r->fuser = e->fuser;
    r->ns = -1;
    return FT_OK;
}

static const ft_err *c_error(void *ctx)
{
    return &((coll *)ctx)->err;
}

static void coll_sink(coll *c, ft_sink *s)
{
    s->ctx = c;
    s->header_fn = c_header;
    s->fuser_fn = c_fuser;
    s->recipe_fn = c_recipe;
    s->call_fn = c_call;
    s->backward_fn = c_bwd;
    s->error_fn = c_error;
    s->end_fn = c_end;
}

static void coll_free(coll *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->r[i].splits);
        free(c->r[i].text);
        free(c->r[i].text2);
    }
    free(c->r);
    free(c->sidx);
    memset(c, 0, sizeof *c);
}

/* Run scenario with "key=value" strings (NULL-terminated varargs). */
static int run(coll *c, const char *scen, uint64_t seed, ft_err *err, ...)
{
    ft_synth_param p[32];
    char buf[32][128];
    uint32_t n = 0;
    va_list ap;
    va_start(ap, err);
    for (const char *kv; (kv = va_arg(ap, const char *)) != NULL; n++) {
        assert_true(n < 32);
        snprintf(buf[n], sizeof buf[n], "%s", kv);
        char *eq = strchr(buf[n], '=');
        assert_non_null(eq);
        *eq = '\0';
        p[n].key = buf[n];
        p[n].value = eq + 1;
    }
    va_end(ap);
    ft_sink s;
    coll_sink(c, &s);
    return ft_synth_run(scen, p, n, seed, &s, err);
}

/* Stable digest of a stream, for determinism checks. */
static uint64_t digest(const coll *c)
{
    uint64_t h = 1;
    for (size_t i = 0; i < c->n; i++) {
        const rec *r = &c->r[i];
        int64_t v[] = {r->kind, r->seq,  r->id, r->fuser, r->recipe, r->obj,     r->step,
                       r->mb,   r->call, r->ns, r->flags, r->device, r->n_op_rg, r->n_splits};
        h = ft_hash64_seed(v, sizeof v, h);
        h = ft_hash64_seed(r->op_rg, r->n_op_rg, h);
        if (r->splits) h = ft_hash64_seed(r->splits, r->n_splits * sizeof *r->splits, h);
        h = ft_hash64_seed(r->phase, strlen(r->phase), h);
        if (r->text) h = ft_hash64_seed(r->text, strlen(r->text), h);
        if (r->text2) h = ft_hash64_seed(r->text2, strlen(r->text2), h);
    }
    return h;
}

static const rec *find_decl(const coll *c, int kind, int64_t id, size_t before)
{
    for (size_t i = 0; i < before; i++)
        if (c->r[i].kind == kind && c->r[i].id == id) return &c->r[i];
    return NULL;
}

/* The call record with this seq, NULL if none (binary search over an index of seq records). */
static const rec *find_call(const coll *cc, int64_t seq)
{
    coll *c = (coll *)cc; /* the index is built lazily */
    if (!c->sidx) {
        c->sidx = malloc((c->n + 1) * sizeof *c->sidx);
        assert_non_null(c->sidx);
        for (size_t i = 0; i < c->n; i++)
            if (c->r[i].kind >= R_CALL) c->sidx[c->n_sidx++] = i;
    }
    size_t lo = 0, hi = c->n_sidx;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const rec *r = &c->r[c->sidx[mid]];
        if (r->seq == seq) return r->kind == R_CALL ? r : NULL;
        if (r->seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int canonical(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j) return 0;
    char *d = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    int ok = d && !strcmp(d, text);
    free(d);
    json_decref(j);
    return ok;
}

static json_t *attrs_of(const coll *c, int64_t recipe_id)
{
    const rec *d = find_decl(c, R_RECIPE, recipe_id, c->n);
    assert_non_null(d);
    json_error_t je;
    json_t *j = json_loads(d->text, 0, &je);
    assert_non_null(j);
    return j;
}

/* Every stream invariant of capture-jsonl v1 that synth promises. */
static void check_stream(const coll *c, int64_t tokens)
{
    assert_true(c->n > 1);
    assert_int_equal(c->r[0].kind, R_HEADER);
    assert_true(canonical(c->r[0].text));
    assert_true(canonical(c->r[0].text2));
    int64_t last_seq = -1, last_ns = -1;
    char *bwd_seen = calloc(c->n + 1, 1); /* by record index of the call */
    assert_non_null(bwd_seen);
    for (size_t i = 1; i < c->n; i++) {
        const rec *r = &c->r[i];
        assert_int_not_equal(r->kind, R_HEADER);
        if (r->kind == R_FUSER) {
            assert_null(find_decl(c, R_FUSER, r->id, i));
            assert_true(canonical(r->text));
            json_error_t je;
            json_t *ops = json_loads(r->text, 0, &je);
            assert_non_null(ops);
            assert_int_equal(json_array_size(ops), r->n_ops);
            json_decref(ops);
            continue;
        }
        if (r->kind == R_RECIPE) {
            assert_null(find_decl(c, R_RECIPE, r->id, i));
            assert_true(canonical(r->text));
            for (size_t j = 1; j < i; j++) /* one declaration per (obj, attrs) */
                if (c->r[j].kind == R_RECIPE && c->r[j].obj == r->obj)
                    assert_string_not_equal(c->r[j].text, r->text);
            continue;
        }
        assert_true(r->seq > last_seq);
        last_seq = r->seq;
        if (r->ns >= 0) {
            assert_true(r->ns > last_ns);
            last_ns = r->ns;
        }
        if (r->kind == R_BWD) {
            const rec *k = find_call(c, r->call);
            assert_non_null(k);
            assert_true(k->flags & FT_CF_GRAD);
            assert_string_not_equal(k->phase, "eval");
            size_t ki = (size_t)(k - c->r);
            assert_false(bwd_seen[ki]); /* a saved plan runs backward once */
            bwd_seen[ki] = 1;
            continue;
        }
        if (r->kind == R_END) { /* a transient fuser: declared, called once right before */
            assert_non_null(find_decl(c, R_FUSER, r->fuser, i));
            assert_int_equal(c->r[i - 1].kind, R_CALL);
            assert_true(c->r[i - 1].fuser == r->fuser);
            continue;
        }
        const rec *f = find_decl(c, R_FUSER, r->fuser, i);
        assert_non_null(f);                                        /* declared before use */
        for (size_t j = i - 1; j > 0 && c->r[j].seq < r->seq; j--) /* not ended before */
            if (c->r[j].kind == R_END && c->r[j].fuser == r->fuser) fail_msg("call after end");
        if (r->recipe >= 0) assert_non_null(find_decl(c, R_RECIPE, r->recipe, i));
        assert_int_equal(r->n_op_rg, f->n_ops);
        assert_true(r->flags & FT_CF_HAS_STEP);
        assert_true(r->flags & FT_CF_HAS_MB);
        assert_true(r->flags & FT_CF_HAS_PHASE);
        assert_true(!strcmp(r->phase, "fwd") || !strcmp(r->phase, "recompute") ||
                    !strcmp(r->phase, "eval") || !strcmp(r->phase, "graph-warmup") ||
                    !strcmp(r->phase, "graph-capture"));
        if (!strncmp(r->phase, "graph-", 6))
            assert_true((r->flags & FT_CF_HAS_GRAPH) && (r->flags & FT_CF_GRAPH));
        int grouped = strstr(f->text, "GroupedLinear") != NULL;
        assert_int_equal(!!(r->flags & FT_CF_HAS_SPLITS), grouped);
        if (grouped) {
            int64_t sum = 0;
            for (uint32_t s = 0; s < r->n_splits; s++) {
                assert_true(r->splits[s] >= 0);
                sum += r->splits[s];
            }
            assert_int_equal(sum, tokens);
        }
        if (!strcmp(r->phase, "eval")) assert_false(r->flags & FT_CF_GRAD);
        if (!strcmp(r->phase, "recompute")) assert_true(r->flags & FT_CF_GRAD);
    }
    free(bwd_seen);
}

/* ---- tests -------------------------------------------------------------------------------- */
static const char *const required[] = {"demo",       "recompute",         "eval-interleave",
                                       "rht-switch", "backward-override", "amax-history",
                                       "frozen",     "pipeline-2dev",     "recipe-zoo"};

static void test_synth_scenarios_listed(void **state)
{
    (void)state;
    uint32_t n = ft_synth_n_scenarios();
    assert_true(n >= FT_ARRAY_LEN(required));
    assert_null(ft_synth_scenario_at(n));
    for (size_t i = 0; i < FT_ARRAY_LEN(required); i++) {
        int found = 0;
        for (uint32_t j = 0; j < n; j++)
            found |= !strcmp(ft_synth_scenario_at(j)->name, required[i]);
        assert_true(found);
    }
    /* every scenario lists the same keys, each line "key=default: meaning", none cut off */
    size_t lines0 = 0;
    for (uint32_t j = 0; j < n; j++) {
        const ft_synth_scenario *s = ft_synth_scenario_at(j);
        assert_true(strlen(s->summary) > 10);
        size_t lines = 0;
        for (const char *p = s->keys; *p;) {
            const char *eol = strchr(p, '\n');
            assert_non_null(eol);
            const char *eq = strchr(p, '='), *colon = strstr(p, ": ");
            assert_true(eq && eq < eol && colon && colon < eol);
            lines++;
            p = eol + 1;
        }
        if (j == 0) lines0 = lines;
        assert_int_equal(lines, lines0);
        assert_non_null(strstr(s->keys, "\ntimestamps="));
    }
    assert_true(lines0 >= 20);
}

/* The defaults that --list prints are the ones the generator uses: setting every key to its
 * listed default gives the identical stream. */
static void test_synth_list_defaults_match(void **state)
{
    (void)state;
    for (uint32_t j = 0; j < ft_synth_n_scenarios(); j++) {
        const ft_synth_scenario *s = ft_synth_scenario_at(j);
        ft_synth_param p[128];
        char buf[128][300];
        uint32_t n = 0;
        for (const char *q = s->keys; *q; n++) {
            assert_true(n < 128);
            const char *eol = strchr(q, '\n');
            const char *colon = strstr(q, ": ");
            size_t len = (size_t)(colon - q);
            memcpy(buf[n], q, len);
            buf[n][len] = '\0';
            char *eq = strchr(buf[n], '=');
            *eq = '\0';
            p[n].key = buf[n];
            p[n].value = eq + 1;
            q = eol + 1;
        }
        /* keep the big scenario small: steps is listed too, override it last in both runs */
        p[n].key = "steps";
        p[n].value = "3";
        coll a = {0}, b = {0};
        ft_sink sa, sb;
        coll_sink(&a, &sa);
        coll_sink(&b, &sb);
        ft_err err = {0};
        ft_synth_param only_steps = {"steps", "3"};
        assert_int_equal(ft_synth_run(s->name, &only_steps, 1, 5, &sa, &err), FT_OK);
        int rc = ft_synth_run(s->name, p, n + 1, 5, &sb, &err);
        if (rc) fail_msg("%s: %s", s->name, ft_err_msg(&err));
        /* the header records the keys set, so compare from the first declaration on */
        free(a.r[0].text2);
        free(b.r[0].text2);
        a.r[0].text2 = b.r[0].text2 = NULL;
        assert_int_equal(a.n, b.n);
        assert_true(digest(&a) == digest(&b));
        coll_free(&a);
        coll_free(&b);
    }
}

static void test_synth_all_scenarios_valid(void **state)
{
    (void)state;
    for (uint32_t j = 0; j < ft_synth_n_scenarios(); j++) {
        const char *name = ft_synth_scenario_at(j)->name;
        coll c = {0};
        ft_err err = {0};
        long live = ft_alloc_live();
        int rc = run(&c, name, 11, &err, "steps=5", NULL);
        if (rc) fail_msg("%s: %s", name, ft_err_msg(&err));
        assert_int_equal(ft_alloc_live(), live);
        /* token count of the scenario, as listed */
        const char *t = strstr(ft_synth_scenario_at(j)->keys, "tokens=");
        int64_t tokens = strtoll(t + 7, NULL, 10);
        check_stream(&c, tokens);
        coll_free(&c);
    }
}

static void test_synth_deterministic_per_seed(void **state)
{
    (void)state;
    coll a = {0}, b = {0}, d = {0};
    ft_err err = {0};
    assert_int_equal(run(&a, "demo", 42, &err, NULL), FT_OK);
    assert_int_equal(run(&b, "demo", 42, &err, NULL), FT_OK);
    assert_int_equal(run(&d, "demo", 43, &err, NULL), FT_OK);
    assert_int_equal(a.n, b.n);
    assert_true(digest(&a) == digest(&b));
    /* another seed moves the splits but not the structure */
    assert_int_equal(a.n, d.n);
    int differ = 0;
    for (size_t i = 0; i < a.n; i++) {
        assert_int_equal(a.r[i].kind, d.r[i].kind);
        assert_int_equal(a.r[i].seq, d.r[i].seq);
        assert_int_equal(a.r[i].recipe, d.r[i].recipe);
        if (a.r[i].splits)
            differ |= memcmp(a.r[i].splits, d.r[i].splits, a.r[i].n_splits * sizeof(int64_t));
    }
    assert_true(differ);
    coll_free(&a);
    coll_free(&b);
    coll_free(&d);

    /* pipeline order comes from a noise-free timing model: the seed moves no record; and the
     * timestamp/captured keys draw from their own stream, so they move no split */
    assert_int_equal(run(&a, "pipeline-2dev", 1, &err, NULL), FT_OK);
    assert_int_equal(run(&d, "pipeline-2dev", 2, &err, NULL), FT_OK);
    assert_int_equal(run(&b, "pipeline-2dev", 1, &err, "timestamps=0", "captured=te-3410", NULL),
                     FT_OK);
    assert_int_equal(a.n, d.n);
    assert_int_equal(a.n, b.n);
    for (size_t i = 0; i < a.n; i++) {
        assert_int_equal(a.r[i].kind, d.r[i].kind);
        assert_int_equal(a.r[i].fuser, d.r[i].fuser);
        assert_int_equal(a.r[i].call, d.r[i].call);
        assert_int_equal(a.r[i].device, d.r[i].device);
        assert_int_equal(a.r[i].mb, d.r[i].mb);
        if (a.r[i].splits)
            assert_memory_equal(a.r[i].splits, b.r[i].splits, a.r[i].n_splits * sizeof(int64_t));
    }
    coll_free(&a);
    coll_free(&b);
    coll_free(&d);
}

/* The demo is small, has recompute, evals, BF16 layers and NVFP4 with and without RHT. */
static void test_synth_demo_shape(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "demo", 1, &err, NULL), FT_OK);
    size_t calls = 0, n_rec = 0, eval = 0, bf16 = 0, rht_on = 0, rht_off = 0, mx = 0;
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind == R_RECIPE) {
            if (!strcmp(r->text2, "MXFP8BlockScaling")) mx++;
            if (strstr(r->text, "\"disable_rht\":true")) rht_off++;
            if (strstr(r->text, "\"disable_rht\":false")) rht_on++;
        }
        if (r->kind != R_CALL) continue;
        calls++;
        n_rec += !strcmp(r->phase, "recompute");
        eval += !strcmp(r->phase, "eval");
        bf16 += r->recipe < 0;
    }
    assert_true(calls >= 1000 && calls <= 10000);
    assert_true(n_rec > 0 && eval > 0 && bf16 > 0);
    assert_true(rht_on > 0 && rht_off > 0 && mx > 0);
    check_stream(&c, 1024);
    coll_free(&c);
}

/* Recompute: the recompute call shares its forward's splits and recipe object; the backward
 * refers to the recompute call, never to the no_grad forward. */
static void test_synth_recompute_shares_forward(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "recompute", 3, &err, "steps=2", "experts=16", NULL), FT_OK);
    size_t n_rec = 0;
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind == R_BWD) {
            const rec *k = find_call(&c, r->call);
            assert_string_equal(k->phase, "recompute");
            continue;
        }
        if (r->kind != R_CALL || strcmp(r->phase, "recompute")) continue;
        n_rec++;
        assert_true(r->flags & FT_CF_GRAD);
        const rec *fwd = NULL;
        for (size_t j = i; j-- > 0;)
            if (c.r[j].kind == R_CALL && c.r[j].fuser == r->fuser && c.r[j].step == r->step &&
                c.r[j].mb == r->mb && !strcmp(c.r[j].phase, "fwd")) {
                fwd = &c.r[j];
                break;
            }
        assert_non_null(fwd);
        assert_false(fwd->flags & FT_CF_GRAD);
        assert_int_equal(fwd->recipe, r->recipe);
        assert_int_equal(fwd->n_splits, r->n_splits);
        if (r->n_splits) assert_memory_equal(fwd->splits, r->splits, r->n_splits * sizeof(int64_t));
    }
    assert_true(n_rec > 0);
    coll_free(&c);
}

/* moe-standalone: the standalone calls make their share of the calls, the RMSNorm and the router
 * take turns across layer passes (at a share under one call per pass too), every transient
 * fuser is declared right before its one call and ended right after it, and a recompute or a
 * backward names the module of its forward. */
static void test_synth_standalone_share(void **state)
{
    (void)state;
    const char *kvs[] = {"standalone=0.1", "standalone=0.5"};
    const double wants[] = {0.1, 0.5};
    for (int si = 0; si < 2; si++) {
        coll c = {0};
        ft_err err = {0};
        assert_int_equal(run(&c, "moe-standalone", 5, &err, "steps=60", kvs[si], NULL), FT_OK);
        size_t n_calls = 0, n_norm = 0, n_router = 0, n_fwd_norm = 0, n_rec_norm = 0;
        for (size_t i = 0; i < c.n; i++) {
            const rec *r = &c.r[i];
            if (r->kind != R_CALL) continue;
            n_calls++;
            const rec *d = &c.r[i - 1]; /* a transient fuser's declaration */
            if (d->kind != R_FUSER || d->id != r->fuser) continue;
            const int norm = strstr(d->text2, "input_layernorm") != NULL;
            if (!norm && !strstr(d->text2, "mlp.router")) continue; /* a Sequential's first */
            n_norm += norm;
            n_router += !norm;
            if (norm) n_fwd_norm += !strcmp(r->phase, "fwd");
            if (norm) n_rec_norm += !strcmp(r->phase, "recompute");
            assert_true(i + 1 < c.n);
            assert_int_equal(c.r[i + 1].kind, R_END);
            assert_int_equal(c.r[i + 1].fuser, r->fuser);
        }
        const double share = (double)(n_norm + n_router) / (double)n_calls;
        assert_true(share > wants[si] - 0.01 && share < wants[si] + 0.01);
        /* in turn: within one call of each other; the recompute repeats the forward's modules */
        assert_true(n_norm >= n_router && n_norm - n_router <= 2 * 4 * 8);
        assert_true(n_router > 0);
        assert_int_equal(n_fwd_norm, n_rec_norm);
        coll_free(&c);
    }
}

/* Recompute under a recipe schedule: the recompute uses the same object as the forward even
 * across detours (recompute happens in the same step). */
static void test_synth_recompute_same_object_under_schedule(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "rht-switch", 9, &err, NULL), FT_OK);
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind != R_CALL || strcmp(r->phase, "recompute")) continue;
        for (size_t j = i; j-- > 0;)
            if (c.r[j].kind == R_CALL && c.r[j].fuser == r->fuser && c.r[j].mb == r->mb &&
                c.r[j].step == r->step && !strcmp(c.r[j].phase, "fwd")) {
                assert_int_equal(c.r[j].recipe, r->recipe);
                break;
            }
    }
    coll_free(&c);
}

static int64_t obj_of(const coll *c, int64_t recipe)
{
    const rec *d = find_decl(c, R_RECIPE, recipe, c->n);
    return d ? d->obj : -1;
}

/* rht-switch: one NVFP4 object declared with both disable_rht values (S1), and after an MXFP8
 * detour a new NVFP4 object whose disable_rht differs from the one before (S2). */
static void test_synth_rht_switch_pattern(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "rht-switch", 2, &err, NULL), FT_OK);
    int s1 = 0, s2 = 0;
    for (size_t i = 0; i < c.n; i++)
        for (size_t j = 0; j < i; j++)
            if (c.r[i].kind == R_RECIPE && c.r[j].kind == R_RECIPE && c.r[i].obj == c.r[j].obj &&
                !strcmp(c.r[i].text2, "NVFP4BlockScaling") &&
                !!strstr(c.r[i].text, "\"disable_rht\":true") !=
                    !!strstr(c.r[j].text, "\"disable_rht\":true"))
                s1 = 1;
    /* S2: for one fuser, NVFP4 call (obj a) -> MXFP8 call -> NVFP4 call (obj b != a, rht flipped)
     */
    int64_t fuser = -1, last_nv = -1, mid_mx = 0;
    for (size_t i = 0; i < c.n && !s2; i++) {
        const rec *r = &c.r[i];
        if (r->kind != R_CALL || r->recipe < 0) continue;
        if (fuser < 0) fuser = r->fuser;
        if (r->fuser != fuser) continue;
        const rec *d = find_decl(&c, R_RECIPE, r->recipe, c.n);
        if (!strcmp(d->text2, "MXFP8BlockScaling")) {
            mid_mx = last_nv >= 0;
        } else if (!strcmp(d->text2, "NVFP4BlockScaling")) {
            if (mid_mx && obj_of(&c, last_nv) != d->obj) {
                const rec *p = find_decl(&c, R_RECIPE, last_nv, c.n);
                s2 = !!strstr(p->text, "\"disable_rht\":true") !=
                     !!strstr(d->text, "\"disable_rht\":true");
            }
            last_nv = r->recipe;
            mid_mx = 0;
        }
    }
    assert_true(s1);
    assert_true(s2);
    coll_free(&c);
}

static void test_synth_backward_override_changes(void **state)
{
    (void)state;
    for (int mutate = 0; mutate <= 1; mutate++) {
        coll c = {0};
        ft_err err = {0};
        assert_int_equal(
            run(&c, "backward-override", 4, &err, mutate ? "bo_mutate=1" : "bo_mutate=0", NULL),
            FT_OK);
        int64_t fuser = -1, changes = 0;
        char last[32] = "";
        int seen[3] = {0};
        int64_t objs[8];
        size_t n_objs = 0;
        for (size_t i = 0; i < c.n; i++) {
            const rec *r = &c.r[i];
            if (r->kind != R_CALL || r->recipe < 0) continue;
            if (fuser < 0) fuser = r->fuser;
            if (r->fuser != fuser) continue;
            json_t *a = attrs_of(&c, r->recipe);
            json_t *bo = json_object_get(a, "backward_override");
            assert_non_null(bo);
            const char *v = json_is_null(bo) ? "null" : json_string_value(bo);
            seen[0] |= !strcmp(v, "null");
            seen[1] |= !strcmp(v, "high_precision");
            seen[2] |= !strcmp(v, "dequantized");
            if (last[0] && strcmp(last, v)) changes++;
            snprintf(last, sizeof last, "%s", v);
            json_decref(a);
            int64_t o = obj_of(&c, r->recipe);
            int known = 0;
            for (size_t k = 0; k < n_objs; k++)
                known |= objs[k] == o;
            if (!known && n_objs < 8) objs[n_objs++] = o;
        }
        assert_true(seen[0] && seen[1] && seen[2]);
        assert_true(changes >= 2);
        assert_int_equal(n_objs, mutate ? 1 : 3);
        coll_free(&c);
    }
}

static void test_synth_amax_history_changes(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "amax-history", 4, &err, NULL), FT_OK);
    int64_t obj = -1;
    int saw1024 = 0, saw16 = 0;
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind != R_RECIPE) continue;
        assert_string_equal(r->text2, "DelayedScaling");
        if (obj < 0) obj = r->obj;
        assert_int_equal(r->obj, obj); /* mutated in place */
        saw1024 |= strstr(r->text, "\"amax_history_len\":1024") != NULL;
        saw16 |= strstr(r->text, "\"amax_history_len\":16,") != NULL;
    }
    assert_true(saw1024 && saw16);
    coll_free(&c);
}

/* frozen: layer 0's experts get no grad while frozen (no backward), then train; with
 * frozen_ops=fc1 the boundary of layer 0 sits after fc1 (op_rg 0,1,1). */
static void test_synth_frozen_boundary_moves(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "frozen", 5, &err, NULL), FT_OK);
    size_t frozen_calls = 0, trained_calls = 0;
    char *has_bwd = calloc(c.n, 1);
    assert_non_null(has_bwd);
    for (size_t i = 0; i < c.n; i++)
        if (c.r[i].kind == R_BWD) has_bwd[find_call(&c, c.r[i].call) - c.r] = 1;
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind != R_CALL || r->fuser != 1) continue; /* decoder.layers.0.mlp.experts */
        assert_false(r->flags & FT_CF_INPUT_RG);
        if (r->step < 3) {
            frozen_calls++;
            assert_int_equal(r->op_rg[0] | r->op_rg[1] | r->op_rg[2], 0);
            assert_false(has_bwd[i]);
        } else {
            trained_calls++;
            assert_true(r->op_rg[0] && r->op_rg[2]);
            assert_true(has_bwd[i]);
        }
    }
    assert_true(frozen_calls > 0 && trained_calls > 0);
    free(has_bwd);
    coll_free(&c);

    assert_int_equal(run(&c, "frozen", 5, &err, "frozen_ops=fc1", "steps=1", NULL), FT_OK);
    int seen = 0;
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind != R_CALL) continue;
        if (r->fuser == 1) {
            assert_int_equal(r->op_rg[0], 0);
            assert_int_equal(r->op_rg[1], 1);
            seen = 1;
        }
        if (r->fuser == 3) assert_true(r->flags & FT_CF_INPUT_RG); /* layer 1: input needs grad */
    }
    assert_true(seen);
    coll_free(&c);

    /* with recompute, a frozen layer has no backward, so its checkpoint is not recomputed */
    assert_int_equal(run(&c, "frozen", 5, &err, "recompute=1", NULL), FT_OK);
    size_t rec_frozen = 0, rec_after = 0;
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind != R_CALL || r->fuser != 1 || strcmp(r->phase, "recompute")) continue;
        if (r->step < 3)
            rec_frozen++;
        else
            rec_after++;
    }
    assert_int_equal(rec_frozen, 0);
    assert_true(rec_after > 0);
    check_stream(&c, 1024);
    coll_free(&c);
}

/* pipeline-2dev: per device, the order of forward (F) and backward (B) microbatches is 1F1B,
 * and a stage's work starts only after its dependency on the other stage finished. */
static void test_synth_pipeline_1f1b(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "pipeline-2dev", 8, &err, "steps=1", "microbatches=5", NULL), FT_OK);
    /* token per record: device, 'F'/'B', mb; consecutive equal tokens collapse */
    char seq[2][64][8];
    size_t n[2] = {0, 0};
    size_t first[2][2][8], last[2][2][8]; /* [dev][F/B][mb] record index range */
    memset(first, 0xff, sizeof first);
    memset(last, 0, sizeof last);
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i], *k = r;
        if (r->kind == R_BWD)
            k = find_call(&c, r->call);
        else if (r->kind != R_CALL)
            continue;
        int dev = k->device, back = r->kind == R_BWD || !strcmp(k->phase, "recompute");
        assert_true(dev == 0 || dev == 1);
        char tok[8];
        snprintf(tok, sizeof tok, "%c%d", back ? 'B' : 'F', (int)k->mb);
        if (!n[dev] || strcmp(seq[dev][n[dev] - 1], tok)) {
            assert_true(n[dev] < 64);
            snprintf(seq[dev][n[dev]++], 8, "%s", tok);
        }
        if (first[dev][back][k->mb] == (size_t)-1) first[dev][back][k->mb] = i;
        last[dev][back][k->mb] = i;
    }
    const char *want0[] = {"F0", "F1", "B0", "F2", "B1", "F3", "B2", "F4", "B3", "B4"};
    const char *want1[] = {"F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3", "F4", "B4"};
    assert_int_equal(n[0], 10);
    assert_int_equal(n[1], 10);
    for (size_t i = 0; i < 10; i++) {
        assert_string_equal(seq[0][i], want0[i]);
        assert_string_equal(seq[1][i], want1[i]);
    }
    for (int m = 0; m < 5; m++) {
        assert_true(first[1][0][m] > last[0][0][m]); /* F on stage 1 after F on stage 0 */
        assert_true(first[0][1][m] > last[1][1][m]); /* B on stage 0 after B on stage 1 */
    }
    coll_free(&c);
}

/* virtual_stages=2: Megatron's interleaved 1F1B per device (4 layers = 4 chunks of one layer,
 * chunk c on device c % 2, virtual index c / 2); tokens are F|B, virtual chunk, microbatch. */
static void test_synth_pipeline_interleaved(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(
        run(&c, "pipeline-2dev", 8, &err, "steps=1", "microbatches=4", "virtual_stages=2", NULL),
        FT_OK);
    char seq[2][64][32];
    size_t n[2] = {0, 0};
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i], *k = r;
        if (r->kind == R_BWD)
            k = find_call(&c, r->call);
        else if (r->kind != R_CALL)
            continue;
        const rec *f = find_decl(&c, R_FUSER, k->fuser, c.n);
        int layer = atoi(f->text2 + strlen("decoder.layers."));
        int dev = k->device, back = r->kind == R_BWD || !strcmp(k->phase, "recompute");
        assert_int_equal(dev, layer % 2);
        char tok[32];
        snprintf(tok, sizeof tok, "%c%d.%d", back ? 'B' : 'F', layer / 2, (int)k->mb);
        if (!n[dev] || strcmp(seq[dev][n[dev] - 1], tok)) {
            assert_true(n[dev] < 64);
            snprintf(seq[dev][n[dev]++], sizeof seq[0][0], "%s", tok);
        }
    }
    const char *want0[] = {"F0.0", "F0.1", "F1.0", "F1.1", "F0.2", "B1.0", "F0.3", "B1.1",
                           "F1.2", "B0.0", "F1.3", "B0.1", "B1.2", "B1.3", "B0.2", "B0.3"};
    const char *want1[] = {"F0.0", "F0.1", "F1.0", "B1.0", "F1.1", "B1.1", "F0.2", "B0.0",
                           "F0.3", "B0.1", "F1.2", "B1.2", "F1.3", "B1.3", "B0.2", "B0.3"};
    assert_int_equal(n[0], 16);
    assert_int_equal(n[1], 16);
    for (size_t i = 0; i < 16; i++) {
        assert_string_equal(seq[0][i], want0[i]);
        assert_string_equal(seq[1][i], want1[i]);
    }
    check_stream(&c, 1024);
    coll_free(&c);
    /* a ragged last group (S does not divide M) and an eval still schedule */
    assert_int_equal(run(&c, "pipeline-2dev", 8, &err, "steps=2", "microbatches=5",
                         "virtual_stages=2", "eval_every=1", "eval_microbatches=3", NULL),
                     FT_OK);
    check_stream(&c, 1024);
    coll_free(&c);
}

/* stage_only=K writes what rank K would record: exactly the full stream's records of device K,
 * with their seq, splits and references, and declarations only for what it uses. */
static void test_synth_stage_only(void **state)
{
    (void)state;
    coll full = {0}, part[2] = {{0}, {0}};
    ft_err err = {0};
    assert_int_equal(run(&full, "pipeline-2dev", 4, &err, "steps=2", NULL), FT_OK);
    assert_int_equal(run(&part[0], "pipeline-2dev", 4, &err, "steps=2", "stage_only=0", NULL),
                     FT_OK);
    assert_int_equal(run(&part[1], "pipeline-2dev", 4, &err, "steps=2", "stage_only=1", NULL),
                     FT_OK);
    assert_int_equal(part[0].header_rank, 0);
    assert_int_equal(part[1].header_rank, 1);
    size_t idx[2] = {0, 0}, n_records = 0;
    for (size_t i = 0; i < full.n; i++) {
        const rec *r = &full.r[i];
        if (r->kind != R_CALL && r->kind != R_BWD) continue;
        n_records++;
        int dev = r->kind == R_CALL ? r->device : find_call(&full, r->call)->device;
        coll *p = &part[dev];
        while (idx[dev] < p->n && p->r[idx[dev]].kind != R_CALL && p->r[idx[dev]].kind != R_BWD)
            idx[dev]++;
        assert_true(idx[dev] < p->n);
        const rec *q = &p->r[idx[dev]++];
        assert_int_equal(q->kind, r->kind);
        assert_int_equal(q->seq, r->seq);
        assert_int_equal(q->call, r->call);
        assert_int_equal(q->fuser, r->fuser);
        assert_int_equal(q->ns, r->ns);
        if (r->splits) assert_memory_equal(q->splits, r->splits, r->n_splits * sizeof(int64_t));
    }
    assert_true(n_records > 0);
    for (int d = 0; d < 2; d++) {
        check_stream(&part[d], 1024);
        for (size_t i = 0; i < part[d].n; i++)
            if (part[d].r[i].kind == R_CALL) assert_int_equal(part[d].r[i].device, d);
        coll_free(&part[d]);
    }
    coll_free(&full);
}

static void test_synth_eval_phase(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "eval-interleave", 6, &err, NULL), FT_OK);
    int steps_with_eval[16] = {0};
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind != R_CALL || strcmp(r->phase, "eval")) continue;
        assert_false(r->flags & FT_CF_GRAD);
        assert_false(r->flags & FT_CF_INPUT_RG);
        assert_int_equal(r->recipe, -1); /* eval_recipe=bf16 */
        assert_true(r->step < 16);
        steps_with_eval[r->step] = 1;
    }
    for (int s = 0; s < 8; s++)
        assert_int_equal(steps_with_eval[s], s % 2 == 1);
    coll_free(&c);
}

/* cuda-graphs: step 0 warms up (3 iterations) and captures with grad, flagged graph; later
 * training steps replay graphs (no fuser calls); evals run eager, graph=false. */
static void test_synth_cuda_graphs(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "cuda-graphs", 6, &err, NULL), FT_OK);
    size_t warm = 0, capture = 0, eval = 0, bwd = 0;
    int64_t max_iter = -1;
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind == R_BWD) bwd++;
        if (r->kind != R_CALL) continue;
        assert_true(r->flags & FT_CF_HAS_GRAPH);
        if (!strcmp(r->phase, "eval")) {
            eval++;
            assert_false(r->flags & FT_CF_GRAPH);
            continue;
        }
        assert_int_equal(r->step, 0); /* nothing reaches the fuser after the capture */
        assert_true(r->flags & FT_CF_GRAPH);
        assert_true(r->flags & FT_CF_GRAD);
        if (!strcmp(r->phase, "graph-warmup")) {
            warm++;
            if (r->mb > max_iter) max_iter = r->mb;
        } else {
            assert_string_equal(r->phase, "graph-capture");
            capture++;
        }
    }
    assert_int_equal(max_iter, 2);
    assert_int_equal(warm, 3 * capture);
    assert_int_equal(bwd, warm + capture);
    assert_true(eval > 0);
    check_stream(&c, 1024);
    coll_free(&c);
    assert_int_equal(run(&c, "cuda-graphs", 6, &err, "recompute=1", NULL), FT_EINVAL);
    assert_non_null(strstr(ft_err_msg(&err), "graphs"));
    coll_free(&c);
}

static void test_synth_recipe_zoo(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "recipe-zoo", 6, &err, NULL), FT_OK);
    const char *types[] = {"DelayedScaling",     "Float8CurrentScaling", "MXFP8BlockScaling",
                           "Float8BlockScaling", "NVFP4BlockScaling",    "CustomRecipe"};
    for (size_t t = 0; t < FT_ARRAY_LEN(types); t++) {
        int found = 0;
        for (size_t i = 0; i < c.n; i++)
            found |= c.r[i].kind == R_RECIPE && !strcmp(c.r[i].text2, types[t]);
        assert_true(found);
    }
    /* each fuser keeps its recipe through training; bf16 layer 0 has none */
    int64_t rec_of[64];
    for (int i = 0; i < 64; i++)
        rec_of[i] = -2;
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind != R_CALL || !strcmp(r->phase, "eval")) continue;
        assert_true(r->fuser < 64);
        if (rec_of[r->fuser] == -2) rec_of[r->fuser] = r->recipe;
        assert_int_equal(rec_of[r->fuser], r->recipe);
        if (r->fuser <= 2) assert_int_equal(r->recipe, -1);
    }
    coll_free(&c);
}

/* Attributes are every dataclass field with TE's defaults (docs/fuser-model.md, "Recipes"). */
static void test_synth_recipe_attrs_defaults(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "recipe-zoo", 6, &err, "steps=1", NULL), FT_OK);
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind != R_RECIPE) continue;
        json_error_t je;
        json_t *a = json_loads(r->text, 0, &je);
        assert_non_null(a);
        assert_non_null(json_object_get(a, "backward_override"));
        assert_non_null(json_object_get(a, "fp8_format"));
        if (!strcmp(r->text2, "NVFP4BlockScaling")) {
            assert_string_equal(json_string_value(json_object_get(a, "fp4_format")), "E2M1");
            assert_non_null(json_object_get(a, "disable_stochastic_rounding"));
            assert_string_equal(json_string_value(json_object_get(a, "nvfp4_4over6")), "none");
        }
        if (!strcmp(r->text2, "DelayedScaling")) {
            assert_int_equal(json_integer_value(json_object_get(a, "amax_history_len")), 1024);
            assert_string_equal(json_string_value(json_object_get(a, "fp8_format")), "HYBRID");
        }
        if (!strcmp(r->text2, "MXFP8BlockScaling"))
            assert_true(json_is_false(json_object_get(a, "enable_2d_quantization")));
        json_decref(a);
    }
    coll_free(&c);
}

static void test_synth_env_header(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "pipeline-2dev", 1, &err, "steps=1", NULL), FT_OK);
    json_error_t je;
    json_t *env = json_loads(c.r[0].text, 0, &je);
    assert_non_null(env);
    assert_string_equal(json_string_value(json_object_get(env, "device_cc")), "10.0");
    assert_string_equal(json_string_value(json_object_get(env, "cudnn_frontend")), "1.27.0");
    assert_string_equal(json_string_value(json_object_get(env, "cublaslt")), "13.4.0");
    assert_string_equal(json_string_value(json_object_get(env, "NVTE_CUTEDSL_FUSED_GROUPED_MLP")),
                        "1");
    assert_string_equal(json_string_value(json_object_get(env, "world_size")), "2");
    json_decref(env);
    assert_int_equal(c.header_ws, 2);
    assert_int_equal(c.header_rank, 0);
    coll_free(&c);
    assert_int_equal(run(&c, "demo", 1, &err, "steps=1", "cc=9.0", "fused_mlp=0", NULL), FT_OK);
    env = json_loads(c.r[0].text, 0, &je);
    assert_string_equal(json_string_value(json_object_get(env, "device_cc")), "9.0");
    assert_string_equal(json_string_value(json_object_get(env, "NVTE_CUTEDSL_FUSED_GROUPED_MLP")),
                        "0");
    json_decref(env);
    coll_free(&c);
}

/* Fuser op lists: grouped MLP dims and attributes as the fusion gate reads them. */
static void test_synth_fuser_ops(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(run(&c, "recompute", 1, &err, "steps=1", NULL), FT_OK);
    int grouped = 0, dense = 0;
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind != R_FUSER) continue;
        json_error_t je;
        json_t *ops = json_loads(r->text, 0, &je);
        const char *t0 = json_string_value(json_object_get(json_array_get(ops, 0), "type"));
        if (!strcmp(t0, "GroupedLinear")) {
            grouped++;
            assert_non_null(strstr(r->text2, ".mlp.experts"));
            json_t *a0 = json_object_get(json_array_get(ops, 0), "attrs");
            json_t *a1 = json_object_get(json_array_get(ops, 1), "attrs");
            json_t *a2 = json_object_get(json_array_get(ops, 2), "attrs");
            assert_int_equal(json_integer_value(json_object_get(a0, "num_groups")), 64);
            assert_int_equal(json_integer_value(json_object_get(a0, "out_features")),
                             2 * json_integer_value(json_object_get(a2, "in_features")));
            assert_int_equal(json_integer_value(json_object_get(a1, "glu_interleave_size")), 32);
            assert_int_equal(json_integer_value(json_object_get(a0, "in_features")) % 64, 0);
            assert_string_equal(json_string_value(json_object_get(json_array_get(ops, 1), "type")),
                                "ScaledSwiGLU");
        } else {
            dense++;
            assert_string_equal(t0, "BasicLinear");
            assert_int_equal(json_array_size(ops), 5);
            assert_string_equal(json_string_value(json_object_get(json_array_get(ops, 2), "type")),
                                "GELU");
        }
        json_decref(ops);
    }
    assert_int_equal(grouped, 8);
    assert_int_equal(dense, 8); /* shared experts */
    coll_free(&c);
}

/* Skewed routing leaves some experts without tokens; sums stay exact. */
static void test_synth_splits_skewed(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    assert_int_equal(
        run(&c, "demo", 77, &err, "skew=3", "experts=32", "tokens=512", "steps=2", NULL), FT_OK);
    int zero = 0;
    int64_t maxv = 0;
    for (size_t i = 0; i < c.n; i++)
        for (uint32_t s = 0; s < c.r[i].n_splits; s++) {
            zero |= c.r[i].splits[s] == 0;
            if (c.r[i].splits[s] > maxv) maxv = c.r[i].splits[s];
        }
    assert_true(zero);
    assert_true(maxv > 512 / 32 * 4); /* the head expert far above uniform */
    check_stream(&c, 512);
    coll_free(&c);
    /* uniform routing with many tokens stays close to tokens/experts */
    assert_int_equal(run(&c, "demo", 77, &err, "skew=0", "tokens=65536", "steps=1", NULL), FT_OK);
    for (size_t i = 0; i < c.n; i++)
        for (uint32_t s = 0; s < c.r[i].n_splits; s++)
            assert_true(c.r[i].splits[s] > 65536 / 8 / 2 && c.r[i].splits[s] < 65536 / 8 * 2);
    coll_free(&c);
}

/* Edge configurations still give valid streams with exact split sums. */
static void test_synth_edge_configs(void **state)
{
    (void)state;
    const char *cfgs[][4] = {
        {"experts=1", "tokens=1024", NULL, NULL},
        {"experts=2", "skew=8", "tokens=100000", NULL},
        {"tokens=0", NULL, NULL, NULL},
        {"tokens=7", "experts=64", NULL, NULL},
        {"tokens=1000000000", "experts=4", "steps=1", NULL},
        {"layers=1", "stages=1", "microbatches=1", NULL},
        {"layers=3", "stages=3", "microbatches=1", NULL},
        {"layers=5", "stages=2", "recompute_layers=2", "microbatches=7"},
        {"dense_layers=2", "shared_expert=0", "tp=4", NULL},
        {"steps=0", NULL, NULL, NULL},
    };
    for (size_t i = 0; i < FT_ARRAY_LEN(cfgs); i++) {
        ft_synth_param p[5];
        uint32_t n = 0;
        char buf[5][64];
        int64_t tokens = 1024;
        for (size_t j = 0; j < 4 && cfgs[i][j]; j++, n++) {
            snprintf(buf[n], sizeof buf[n], "%s", cfgs[i][j]);
            char *eq = strchr(buf[n], '=');
            *eq = '\0';
            p[n].key = buf[n];
            p[n].value = eq + 1;
            if (!strcmp(buf[n], "tokens")) tokens = strtoll(eq + 1, NULL, 10);
        }
        p[n].key = "recompute";
        p[n++].value = "1";
        coll c = {0};
        ft_sink s;
        coll_sink(&c, &s);
        ft_err err = {0};
        int rc = ft_synth_run("demo", p, n, 99, &s, &err);
        if (rc) fail_msg("config %zu: %s", i, ft_err_msg(&err));
        if (c.n > 1) check_stream(&c, tokens);
        coll_free(&c);
    }
}

/* drift moves each expert's share between steps; without it the shares stay put. */
static double share_shift(double drift)
{
    coll c = {0};
    ft_err err = {0};
    char d[32];
    snprintf(d, sizeof d, "drift=%g", drift);
    assert_int_equal(run(&c, "demo", 5, &err, d, "tokens=65536", "skew=0.5", "steps=12", NULL),
                     FT_OK);
    /* fuser 3 (layer 1 experts): mean split per expert over steps 0-1 vs 10-11 */
    double a[8] = {0}, b[8] = {0};
    for (size_t i = 0; i < c.n; i++) {
        const rec *r = &c.r[i];
        if (r->kind != R_CALL || r->fuser != 3 || strcmp(r->phase, "fwd")) continue;
        for (int e = 0; e < 8; e++) {
            if (r->step < 2) a[e] += (double)r->splits[e];
            if (r->step >= 10) b[e] += (double)r->splits[e];
        }
    }
    double dist = 0.0, tot = 0.0;
    for (int e = 0; e < 8; e++) {
        dist += a[e] > b[e] ? a[e] - b[e] : b[e] - a[e];
        tot += a[e];
    }
    coll_free(&c);
    return dist / tot;
}

static void test_synth_routing_drift(void **state)
{
    (void)state;
    double still = share_shift(0.0), moving = share_shift(0.3);
    print_message("share shift over 10 steps: drift 0 -> %.4f, drift 0.3 -> %.4f\n", still, moving);
    assert_true(still < 0.02);
    assert_true(moving > 3 * still && moving > 0.05);
}

static void expect_bad(const char *scen, int want_rc, const char *needle, const char *kv)
{
    coll c = {0};
    ft_err err = {0};
    int rc = run(&c, scen, 1, &err, kv, NULL);
    if (rc != want_rc || !strstr(ft_err_msg(&err), needle))
        fail_msg("%s %s: rc %d, message '%s'", scen, kv ? kv : "", rc, ft_err_msg(&err));
    assert_int_equal(c.n, 0); /* nothing written before the input is known good */
    coll_free(&c);
}

static void test_synth_bad_keys_rejected(void **state)
{
    (void)state;
    expect_bad("nope", FT_ENOTFOUND, "nope", NULL);
    expect_bad("demo", FT_ENOTFOUND, "colour", "colour=red");
    expect_bad("demo", FT_EINVAL, "layers", "layers=four");
    expect_bad("demo", FT_ERANGE, "layers", "layers=0");
    expect_bad("demo", FT_EINVAL, "skew", "skew=abc");
    expect_bad("demo", FT_EINVAL, "recompute", "recompute=maybe");
    expect_bad("demo", FT_EINVAL, "recipe", "recipe=fp6");
    expect_bad("demo", FT_EINVAL, "disable_rht", "recipe=nvfp4:disable_rht=perhaps");
    expect_bad("demo", FT_EINVAL, "nosuch", "recipe=mxfp8:nosuch=1");
    expect_bad("demo", FT_EINVAL, "layer_recipes", "layer_recipes=mxfp8,,nvfp4");
    expect_bad("demo", FT_EINVAL, "detour_steps", "detour_steps=6");
    expect_bad("recompute", FT_EINVAL, "amax_every", "amax_every=2");
    expect_bad("amax-history", FT_EINVAL, "bo_every", "bo_every=2");
    expect_bad("recompute", FT_EINVAL, "rht_flip_every", "rht_flip_every=2");
    expect_bad("demo", FT_EINVAL, "bo_values", "bo_values=none,sometimes");
    expect_bad("demo", FT_EINVAL, "amax_lens", "amax_lens=16,x");
    expect_bad("demo", FT_EINVAL, "virtual_stages", "stages=7");
    expect_bad("pipeline-2dev", FT_EINVAL, "virtual_stages", "virtual_stages=3");
    expect_bad("demo", FT_EINVAL, "cc", "cc=ten point zero");
    expect_bad("demo", FT_EINVAL, "te_version", "te_version=2\"0");
    expect_bad("demo", FT_EINVAL, "frozen_ops", "frozen_ops=fc2");
    expect_bad("demo", FT_EINVAL, "captured", "captured=te-9999");
    expect_bad("pipeline-2dev", FT_EINVAL, "stage_only", "stage_only=2");
    expect_bad("demo", FT_EINVAL, "backward_override",
               "recipe=delayed:backward_override=dequantized");
}

/* A sink failure at any record stops the run with that status, names the record, leaks nothing. */
static void test_synth_sink_failure_propagates(void **state)
{
    (void)state;
    coll full = {0};
    ft_err err = {0};
    assert_int_equal(run(&full, "pipeline-2dev", 3, &err, "steps=1", NULL), FT_OK);
    size_t total = full.n;
    coll_free(&full);
    size_t picks[] = {1, 2, 3, 5, total / 2, total};
    for (size_t i = 0; i < FT_ARRAY_LEN(picks); i++) {
        coll c = {0};
        c.fail_at = picks[i];
        long live = ft_alloc_live();
        int rc = run(&c, "pipeline-2dev", 3, &err, "steps=1", NULL);
        assert_int_equal(rc, FT_EIO);
        assert_non_null(strstr(ft_err_msg(&err), "refused record"));
        assert_int_equal(c.n, picks[i] - 1);
        assert_int_equal(ft_alloc_live(), live);
        coll_free(&c);
    }
}

static void test_synth_alloc_failure_clean(void **state)
{
    (void)state;
    int ok = 0;
    for (long n = 0; n < 200 && !ok; n++) {
        coll c = {0};
        ft_err err = {0};
        long live = ft_alloc_live();
        ft_alloc_fail_after(n);
        int rc = run(&c, "recipe-zoo", 1, &err, "steps=1", NULL);
        ft_alloc_fail_after(-1);
        assert_true(rc == FT_OK || rc == FT_ENOMEM);
        assert_int_equal(ft_alloc_live(), live);
        ok = rc == FT_OK;
        coll_free(&c);
    }
    assert_true(ok);
}

/* captured=te-pre3410 / te-3410: rebuilt follows TE's plan-cache rule. Full recompute makes the old
 * fuser rebuild on every call (the boundary alternates), the new one twice per fuser and recipe;
 * an amax_history_len change rebuilds only in the old one. */
static void count_rebuilt(const coll *c, size_t *calls, size_t *rebuilt, size_t *per_fuser_max,
                          int64_t step_lo)
{
    size_t per[256] = {0};
    *calls = *rebuilt = *per_fuser_max = 0;
    for (size_t i = 0; i < c->n; i++) {
        const rec *r = &c->r[i];
        if (r->kind != R_CALL) continue;
        assert_true(r->flags & FT_CF_HAS_REBUILT);
        assert_true(r->flags & FT_CF_HAS_FUSE_NS);
        if (r->step < step_lo) continue;
        (*calls)++;
        if (r->flags & FT_CF_REBUILT) {
            (*rebuilt)++;
            assert_true(r->fuser < 256);
            if (++per[r->fuser] > *per_fuser_max) *per_fuser_max = per[r->fuser];
        }
    }
}

static void test_synth_captured_rebuilt(void **state)
{
    (void)state;
    coll c = {0};
    ft_err err = {0};
    size_t calls, rebuilt, maxper;
    assert_int_equal(run(&c, "recompute", 1, &err, "steps=2", "captured=te-pre3410", NULL), FT_OK);
    count_rebuilt(&c, &calls, &rebuilt, &maxper, 0);
    assert_int_equal(rebuilt, calls); /* no_grad fwd / grad recompute alternate */
    coll_free(&c);
    assert_int_equal(run(&c, "recompute", 1, &err, "steps=2", "captured=te-3410", NULL), FT_OK);
    count_rebuilt(&c, &calls, &rebuilt, &maxper, 0);
    assert_int_equal(rebuilt, 2 * 16); /* 16 fusers, keys (R, n) and (R, 0) */
    assert_int_equal(maxper, 2);
    coll_free(&c);
    /* amax_history_len changes at steps 2, 4, 6: only the old fuser rebuilds (no recompute) */
    assert_int_equal(run(&c, "amax-history", 1, &err, "captured=te-3410", NULL), FT_OK);
    count_rebuilt(&c, &calls, &rebuilt, &maxper, 1);
    assert_int_equal(rebuilt, 0);
    coll_free(&c);
    assert_int_equal(run(&c, "amax-history", 1, &err, "captured=te-pre3410", NULL), FT_OK);
    count_rebuilt(&c, &calls, &rebuilt, &maxper, 1);
    assert_int_equal(rebuilt, 3 * 8); /* 8 fusers, 3 changes */
    coll_free(&c);
    /* absent by default */
    assert_int_equal(run(&c, "demo", 1, &err, "steps=1", NULL), FT_OK);
    for (size_t i = 0; i < c.n; i++)
        if (c.r[i].kind == R_CALL)
            assert_false(c.r[i].flags & (FT_CF_HAS_REBUILT | FT_CF_HAS_FUSE_NS));
    coll_free(&c);
}

/* A null sink that counts, for the throughput check below. */
static int null_call(void *ctx, const ft_call *c)
{
    (*(uint64_t *)ctx)++;
    (void)c;
    return FT_OK;
}
static int null_hdr(void *ctx, const ft_header *h)
{
    (void)ctx;
    (void)h;
    return FT_OK;
}
static int null_fuser(void *ctx, const ft_fuser_def *f)
{
    (void)ctx;
    (void)f;
    return FT_OK;
}
static int null_recipe(void *ctx, const ft_recipe_def *d)
{
    (void)ctx;
    (void)d;
    return FT_OK;
}
static int null_bwd(void *ctx, const ft_backward *b)
{
    (void)ctx;
    (void)b;
    return FT_OK;
}

/* Scale: 100k+ calls in well under a second even under sanitizers (the benchmark measures). */
static void test_synth_recompute_scales(void **state)
{
    (void)state;
    uint64_t calls = 0;
    ft_sink s = {&calls, null_hdr, null_fuser, null_recipe, null_call, null_bwd, NULL, NULL};
    ft_synth_param p = {"steps", "400"};
    ft_err err = {0};
    uint64_t t0 = ft_now_ns();
    assert_int_equal(ft_synth_run("recompute", &p, 1, 1, &s, &err), FT_OK);
    double secs = (double)(ft_now_ns() - t0) / 1e9;
    assert_int_equal(calls, 400ull * 8 * 8 * 2 * 2);
    print_message("synth recompute: %llu calls in %.3f s (%.2f M calls/s)\n",
                  (unsigned long long)calls, secs, (double)calls / secs / 1e6);
}

/* ---- CLI ---------------------------------------------------------------------------------- */
static void test_synth_cli_list_covers_every_scenario(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    static char out[1 << 20];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' synth --list 2>&1", tu_cli());
    assert_int_equal(tu_sh(cmd, out, sizeof out), 0);
    for (uint32_t j = 0; j < ft_synth_n_scenarios(); j++) {
        const ft_synth_scenario *s = ft_synth_scenario_at(j);
        assert_non_null(strstr(out, s->name));
        assert_non_null(strstr(out, s->summary));
    }
    assert_non_null(strstr(out, "layers="));
    assert_non_null(strstr(out, "eval_every="));
}

static void test_synth_cli_bad_input_exit2(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    char out[4096], cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' synth nosuch --jsonl - 2>&1", tu_cli());
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "nosuch"));
    snprintf(cmd, sizeof cmd, "'%s' synth demo --set colour=red --jsonl - 2>&1", tu_cli());
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "colour"));
    snprintf(cmd, sizeof cmd, "'%s' synth demo --set layers=x --jsonl - 2>&1", tu_cli());
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "layers"));
    snprintf(cmd, sizeof cmd, "'%s' synth demo --seed -3 --jsonl - 2>&1", tu_cli());
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "'%s' synth demo --set layers 2>&1", tu_cli());
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "'%s' synth demo 2>&1", tu_cli()); /* no output named */
    assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
}

/* The file the CLI writes holds exactly the generator's stream: export it (.ftdb) or import it
 * (JSONL) back into a collecting sink and compare with a direct run. */
static void cli_round_trip(const char *out_flag, const char *path)
{
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd,
             "'%s' synth pipeline-2dev --set steps=2 --set microbatches=3 --seed 3 %s '%s' 2>&1",
             tu_cli(), out_flag, path);
    remove(path);
    int st = tu_sh(cmd, out, sizeof out);
    if (st) fail_msg("%s -> %d: %s", cmd, st, out);
    coll direct = {0}, back = {0};
    ft_err err = {0};
    assert_int_equal(run(&direct, "pipeline-2dev", 3, &err, "steps=2", "microbatches=3", NULL),
                     FT_OK);
    ft_sink s;
    coll_sink(&back, &s);
    if (!strcmp(out_flag, "-o")) {
        ft_trace *t;
        int rc = ft_trace_open(path, FT_OPEN_READ, &t, &err);
        if (rc) fail_msg("open %s: %s", path, ft_err_msg(&err));
        rc = ft_trace_verify(t, &err);
        if (rc) fail_msg("verify %s: %s", path, ft_err_msg(&err));
        rc = ft_trace_export(t, &s, &err);
        if (rc) fail_msg("export %s: %s", path, ft_err_msg(&err));
        ft_trace_close(t);
    } else {
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        int rc = ft_jsonl_import(f, path, &s, NULL, &err);
        if (rc) fail_msg("import %s: %s", path, ft_err_msg(&err));
        fclose(f);
    }
    assert_int_equal(back.n, direct.n);
    for (size_t i = 0; i < direct.n; i++) {
        const rec *a = &direct.r[i], *b = &back.r[i];
        assert_int_equal(a->kind, b->kind);
        if (a->text) assert_string_equal(a->text, b->text);
    }
    assert_true(digest(&direct) == digest(&back));
    coll_free(&direct);
    coll_free(&back);
    remove(path);
}

/* Every scenario survives the recorder (.ftdb, verify, export) and the JSONL writer + importer
 * record for record. */
static void test_synth_round_trip_every_scenario(void **state)
{
    (void)state;
    const char *path = FT_BINARY_DIR "/test_synth_all.ftdb";
    for (uint32_t j = 0; j < ft_synth_n_scenarios(); j++) {
        const char *name = ft_synth_scenario_at(j)->name;
        ft_synth_param p[] = {{"steps", "3"}, {"captured", j % 2 ? "te-3410" : "none"}};
        coll direct = {0}, back = {0}, back2 = {0};
        ft_sink s;
        ft_err err = {0};
        coll_sink(&direct, &s);
        assert_int_equal(ft_synth_run(name, p, 2, 21, &s, &err), FT_OK);

        /* recorder */
        char side[1200];
        remove(path);
        snprintf(side, sizeof side, "%s-wal", path);
        remove(side);
        ft_rec *r;
        int rc = ft_rec_open(path, NULL, &r, &err);
        if (rc) fail_msg("%s: %s", path, ft_err_msg(&err));
        ft_rec_sink(r, &s);
        rc = ft_synth_run(name, p, 2, 21, &s, &err);
        if (rc) fail_msg("%s -> recorder: %s", name, ft_err_msg(&err));
        assert_int_equal(ft_rec_close(r), FT_OK);
        ft_trace *t;
        assert_int_equal(ft_trace_open(path, FT_OPEN_READ, &t, &err), FT_OK);
        rc = ft_trace_verify(t, &err);
        if (rc) fail_msg("%s: verify: %s", name, ft_err_msg(&err));
        coll_sink(&back, &s);
        assert_int_equal(ft_trace_export(t, &s, &err), FT_OK);
        ft_trace_close(t);
        remove(path);
        assert_int_equal(back.n, direct.n);
        assert_true(digest(&back) == digest(&direct));

        /* JSONL writer -> importer */
        FILE *f = tmpfile();
        assert_non_null(f);
        ft_jsonl_writer *w;
        assert_int_equal(ft_jsonl_writer_new(f, &w), FT_OK);
        ft_jsonl_writer_sink(w, &s);
        assert_int_equal(ft_synth_run(name, p, 2, 21, &s, &err), FT_OK);
        ft_jsonl_writer_free(w);
        rewind(f);
        coll_sink(&back2, &s);
        rc = ft_jsonl_import(f, name, &s, NULL, &err);
        if (rc) fail_msg("%s: import: %s", name, ft_err_msg(&err));
        fclose(f);
        assert_int_equal(back2.n, direct.n);
        assert_true(digest(&back2) == digest(&direct));
        coll_free(&direct);
        coll_free(&back);
        coll_free(&back2);
    }
}

static void test_synth_cli_ftdb_round_trip(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    cli_round_trip("-o", FT_BINARY_DIR "/test_synth_rt.ftdb");
}

static void test_synth_cli_jsonl_round_trip(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    cli_round_trip("--jsonl", FT_BINARY_DIR "/test_synth_rt.jsonl");
}

/* A failed run leaves no output file behind. */
static void test_synth_cli_failure_leaves_nothing(void **state)
{
    (void)state;
    if (!tu_cli()) skip();
    const char *flags[] = {"-o", "--jsonl"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[2048], out[4096], path[1024];
        snprintf(path, sizeof path, "%s/test_synth_fail%zu.out", FT_BINARY_DIR, i);
        remove(path);
        snprintf(cmd, sizeof cmd, "'%s' synth demo --set recipe=fp6 %s '%s' 2>&1", tu_cli(),
                 flags[i], path);
        assert_int_equal(tu_sh(cmd, out, sizeof out), 2);
        assert_non_null(strstr(out, "recipe"));
        /* neither OUT nor a temporary beside it (OUT.tmp-XXXXXX, its -wal, ...) */
        const char *base = strrchr(path, '/') + 1;
        DIR *d = opendir(FT_BINARY_DIR);
        assert_non_null(d);
        for (struct dirent *e; (e = readdir(d));)
            if (!strncmp(e->d_name, base, strlen(base))) fail_msg("left behind: %s", e->d_name);
        closedir(d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_synth_scenarios_listed),
        cmocka_unit_test(test_synth_list_defaults_match),
        cmocka_unit_test(test_synth_all_scenarios_valid),
        cmocka_unit_test(test_synth_deterministic_per_seed),
        cmocka_unit_test(test_synth_demo_shape),
        cmocka_unit_test(test_synth_recompute_shares_forward),
        cmocka_unit_test(test_synth_standalone_share),
        cmocka_unit_test(test_synth_recompute_same_object_under_schedule),
        cmocka_unit_test(test_synth_rht_switch_pattern),
        cmocka_unit_test(test_synth_backward_override_changes),
        cmocka_unit_test(test_synth_amax_history_changes),
        cmocka_unit_test(test_synth_frozen_boundary_moves),
        cmocka_unit_test(test_synth_pipeline_1f1b),
        cmocka_unit_test(test_synth_pipeline_interleaved),
        cmocka_unit_test(test_synth_stage_only),
        cmocka_unit_test(test_synth_eval_phase),
        cmocka_unit_test(test_synth_cuda_graphs),
        cmocka_unit_test(test_synth_recipe_zoo),
        cmocka_unit_test(test_synth_recipe_attrs_defaults),
        cmocka_unit_test(test_synth_env_header),
        cmocka_unit_test(test_synth_fuser_ops),
        cmocka_unit_test(test_synth_splits_skewed),
        cmocka_unit_test(test_synth_edge_configs),
        cmocka_unit_test(test_synth_routing_drift),
        cmocka_unit_test(test_synth_bad_keys_rejected),
        cmocka_unit_test(test_synth_sink_failure_propagates),
        cmocka_unit_test(test_synth_alloc_failure_clean),
        cmocka_unit_test(test_synth_recompute_scales),
        cmocka_unit_test(test_synth_captured_rebuilt),
        cmocka_unit_test(test_synth_cli_list_covers_every_scenario),
        cmocka_unit_test(test_synth_cli_bad_input_exit2),
        cmocka_unit_test(test_synth_round_trip_every_scenario),
        cmocka_unit_test(test_synth_cli_ftdb_round_trip),
        cmocka_unit_test(test_synth_cli_jsonl_round_trip),
        cmocka_unit_test(test_synth_cli_failure_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
