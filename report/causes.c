/*
 * causes.c - why plans were built and why stale plans ran, in words and as totals: the words for
 * what changed between a call and an earlier call of its OperationFuser ("recipe type A -> B",
 * "disable_rht False -> True", "f 3 -> 0 (grad mode on)"), which the --explain lines and the
 * totals share, and the observer of the replay driver that counts, per policy, the builds by
 * what changed since the fuser's previous call (the view's FT_WHY_* bits) and the stale hits by
 * what changed since the build whose plan they run (the view's src_* columns). The engine decides
 * and names the builds; the model (tefuser) names the recipe attributes; this file only words
 * and counts them.
 *
 * Limits: at most RC_MAX_ROWS distinct causes per policy (the rest are counted as "other
 * causes"), the RC_MAX_PHASES phases with the most such calls per cause (the rest summed), and
 * RC_MAX_CHANGES attribute changes named per cause ("and N more" for the rest). Counts cover the
 * calls the replay's filter matches, as every other count does.
 */
#include "report_int.h"
#include "ft_hmap.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* ---- words ----------------------------------------------------------------------------------- */
/* The FT_WHY_* bits of what differs between recipe a with boundary af and recipe b with bf, as
 * the engine sets them for builds (FT_WHY_FIRST aside). */
unsigned report_diff_bits(const ft_model *m, int32_t a, uint32_t af, int32_t b, uint32_t bf)
{
    const ft_recipe_model *x = ft_model_recipe(m, a), *y = ft_model_recipe(m, b);
    unsigned w = 0;
    if (x->cls != y->cls) w |= FT_WHY_TYPE;
    if (af != bf) w |= FT_WHY_F;
    if (x->bo != y->bo) w |= FT_WHY_BO;
    if (x->cls == y->cls && x->amax_history_len != y->amax_history_len) w |= FT_WHY_HIST;
    if (x->cls == y->cls && x->bo == y->bo && x->amax_history_len == y->amax_history_len &&
        x->hash != y->hash)
        w |= FT_WHY_ATTRS;
    if (x->hash == y->hash && x->obj != y->obj) w |= FT_WHY_OBJECT;
    return w;
}

/* "f 3 -> 0 (grad mode on)", or without values "grad mode on": f == n_ops means that no op runs
 * the backward. */
static void f_text(ft_buf *b, uint32_t n_ops, uint32_t from, uint32_t to, int values)
{
    const char *what = to < n_ops && from >= n_ops   ? "grad mode on"
                       : to >= n_ops && from < n_ops ? "grad mode off"
                                                     : "the backward boundary moved";
    if (values)
        ft_buf_printf(b, "f %u -> %u (%s)", from, to, what);
    else
        ft_buf_printf(b, "%s", what);
}

int report_change_text(ft_buf *b, const ft_model *m, uint32_t fuser, unsigned bits, int32_t from,
                       uint32_t from_f, int32_t to, uint32_t to_f, int f_values,
                       ft_recipe_change *ch, uint32_t *n_ch)
{
    const size_t len0 = b->len;
    uint32_t n = 0;
    const char *sep = "";
    if (bits & FT_WHY_FIRST) {
        ft_buf_printf(b, "%s", report_cause_name(FT_WHY_FIRST));
        goto out;
    }
    if (bits & (FT_WHY_TYPE | FT_WHY_BO | FT_WHY_HIST | FT_WHY_ATTRS)) {
        /* every attribute that differs (the type alone when the class differs) */
        ft_recipe_change c[RC_MAX_CHANGES];
        const uint32_t total = ft_model_recipe_diff(m, from, to, c, RC_MAX_CHANGES);
        const uint32_t shown = total < RC_MAX_CHANGES ? total : RC_MAX_CHANGES;
        for (uint32_t i = 0; i < shown; i++) {
            if (!strcmp(c[i].name, "type"))
                ft_buf_printf(b, "%srecipe type %s -> %s", sep, c[i].from, c[i].to);
            else
                ft_buf_printf(b, "%s%s %s -> %s", sep, c[i].name, c[i].from, c[i].to);
            sep = ", ";
            if (ch) ch[n++] = c[i];
        }
        if (total > shown) ft_buf_printf(b, " and %u more attributes", total - shown);
    }
    if (bits & FT_WHY_F) {
        ft_buf_printf(b, "%s", sep);
        f_text(b, ft_model_n_ops(m, fuser), from_f, to_f, f_values);
        sep = ", ";
        if (ch && f_values && n < RC_MAX_CHANGES) {
            ft_recipe_change *c = &ch[n++];
            snprintf(c->name, sizeof c->name, "f");
            snprintf(c->from, sizeof c->from, "%u", from_f);
            snprintf(c->to, sizeof c->to, "%u", to_f);
        }
    }
    if (bits & FT_WHY_OBJECT) {
        ft_buf_printf(b, "%sanother recipe object with the same attributes", sep);
        sep = ", ";
    }
    if (bits & FT_WHY_OPS) {
        ft_buf_printf(b, "%sthe fuser was redeclared with other op attributes", sep);
        sep = ", ";
    }
    if (bits & FT_WHY_NOT_CACHED)
        ft_buf_printf(b, "%s%s (its key was not stored: no store, or evicted)", sep,
                      report_cause_name(FT_WHY_NOT_CACHED));
    else if (!*sep)
        ft_buf_printf(b, "nothing in the recipe or f (its quantizer state or op attributes)");
out:
    if (n_ch) *n_ch = n;
    return b->len > len0 || !b->data ? FT_OK : FT_ENOMEM;
}

/* ---- the totals ------------------------------------------------------------------------------ */
/* Keys worded and remembered at most (then forgotten and worded again: the same words find the
 * same row), so that the memo stays small when recipe objects keep coming (a new object after
 * every detour of a long run). */
#define RC_MAX_MEMO (1u << 16)

/* What a row is made from, to find it again without wording it (memo). */
typedef struct rc_key {
    uint32_t slot, fuser_ops;
    uint16_t bits;
    uint8_t stale; /* 0: builds; else the stale class of stale hits */
    int32_t from, to;
    uint32_t from_f, to_f;
} rc_key;

typedef struct rc_memo {
    rc_key k;
    uint32_t row;
} rc_memo;

/* A policy's last counted key, its row and the phase slot of its last call (consecutive calls
 * of a batch mostly repeat all three: a transient fuser per call builds on every call). */
typedef struct rc_last {
    rc_key k;
    uint32_t row;      /* UINT32_MAX: none */
    const char *phase; /* the batch's phase string (valid within one batch only) */
    uint32_t phase_at; /* its index in the row's phases, RC_MAX_PHASES: counted as other */
} rc_last;

struct ft_report_causes {
    uint32_t n_pol;
    uint32_t policy[FT_MAX_POLICIES];
    report_cause_row *rows[FT_MAX_POLICIES]; /* [RC_MAX_ROWS] each: every trace's, added */
    uint32_t n_rows[FT_MAX_POLICIES];
    report_cause_row *cur[FT_MAX_POLICIES]; /* [RC_MAX_ROWS] each: the current trace's */
    uint32_t n_cur[FT_MAX_POLICIES];
    int keep;      /* each trace's rows packed into packs (ft_report_causes_keep), not added */
    ft_buf *packs; /* [n_packs] */
    uint32_t n_packs;
    ft_hmap memo_index; /* hash of rc_key -> memo entry */
    rc_memo *memo;
    uint32_t n_memo, cap_memo;
    rc_last last[FT_MAX_POLICIES];
    ft_buf text;
    ft_replay_observer obs;
};

static uint64_t key_hash(const rc_key *k)
{
    uint64_t h = ft_hash_mix(k->slot, ((uint64_t)k->bits << 8) | k->stale);
    h = ft_hash_mix(h, ((uint64_t)(uint32_t)k->from << 32) | (uint32_t)k->to);
    h = ft_hash_mix(h, ((uint64_t)k->from_f << 32) | k->to_f);
    return ft_hash_mix(h, k->fuser_ops);
}

static int key_equal(const rc_key *a, const rc_key *b)
{
    return a->slot == b->slot && a->bits == b->bits && a->stale == b->stale && a->from == b->from &&
           a->to == b->to && a->from_f == b->from_f && a->to_f == b->to_f &&
           a->fuser_ops == b->fuser_ops;
}

/* The row of policy slot p whose words are w->text (stale hits of class `stale`), added when new;
 * the last row holds what does not fit. */
static uint32_t row_of(ft_report_causes *w, uint32_t p, unsigned bits, uint8_t stale,
                       const ft_recipe_change *ch, uint32_t n_ch)
{
    report_cause_row *rows = w->cur[p];
    const char *text = (const char *)w->text.data;
    for (uint32_t i = 0; i < w->n_cur[p]; i++)
        if (rows[i].stale == stale && !strcmp(rows[i].text, text)) return i;
    if (w->n_cur[p] == RC_MAX_ROWS) {
        report_cause_row *o = &rows[RC_MAX_ROWS - 1];
        snprintf(o->text, sizeof o->text, "other causes");
        o->bits = 0;
        o->n_changes = 0;
        return RC_MAX_ROWS - 1;
    }
    report_cause_row *r = &rows[w->n_cur[p]];
    memset(r, 0, sizeof *r);
    r->stale = stale;
    r->bits = (uint16_t)bits;
    ft_strlcpy(r->text, text, sizeof r->text);
    memcpy(r->changes, ch, n_ch * sizeof *ch);
    r->n_changes = n_ch;
    return w->n_cur[p]++;
}

/* The row for key k (worded once per distinct key), or UINT32_MAX out of memory. */
static uint32_t row_for(ft_report_causes *w, const ft_replay_view *v, uint32_t j, const rc_key *k)
{
    const uint64_t h = key_hash(k);
    const uint32_t got = ft_hmap_get(&w->memo_index, h);
    if (got != UINT32_MAX && key_equal(&w->memo[got].k, k)) return w->memo[got].row;
    const ft_model *m = ft_replay_model(v->engine);
    ft_recipe_change ch[RC_MAX_CHANGES];
    uint32_t n_ch = 0;
    w->text.len = 0;
    if (report_change_text(&w->text, m, v->fuser[j], k->bits, k->from, k->from_f, k->to, k->to_f, 0,
                           ch, &n_ch) ||
        ft_buf_append(&w->text, "", 1))
        return UINT32_MAX;
    const uint32_t row = row_of(w, k->slot, k->bits, k->stale, ch, n_ch);
    if (got != UINT32_MAX) return row; /* a hash collision: worded again next time */
    if (w->n_memo == RC_MAX_MEMO) {
        ft_hmap_clear(&w->memo_index);
        w->n_memo = 0;
    }
    if (w->n_memo == w->cap_memo) {
        uint32_t cap = w->cap_memo ? 2 * w->cap_memo : 64;
        rc_memo *nm = ft_realloc(w->memo, (size_t)cap * sizeof *nm);
        if (!nm) return UINT32_MAX;
        w->memo = nm;
        w->cap_memo = cap;
    }
    w->memo[w->n_memo] = (rc_memo){*k, row};
    if (ft_hmap_put(&w->memo_index, h, w->n_memo)) return UINT32_MAX;
    w->n_memo++;
    return row;
}

/* Count n calls of phase (NULL: none) in row r; returns where they were counted
 * (RC_MAX_PHASES: among the other phases). */
static uint32_t add_phase(report_cause_row *r, const char *phase, uint64_t n)
{
    if (!phase) phase = "(no phase)";
    for (uint32_t i = 0; i < r->n_phases; i++)
        if (!strcmp(r->phase[i], phase)) {
            r->phase_n[i] += n;
            return i;
        }
    if (r->n_phases < RC_MAX_PHASES) {
        ft_strlcpy(r->phase[r->n_phases], phase, sizeof r->phase[0]);
        r->phase_n[r->n_phases++] = n;
        return r->n_phases - 1;
    }
    r->phase_other += n;
    return RC_MAX_PHASES;
}

/* A trace's rows of policy slot p added to the total: a cause by its words (and stale class),
 * its phases by name, in the trace's order; past RC_MAX_ROWS causes the last row becomes
 * "other causes", past RC_MAX_PHASES phases a row counts the rest as other phases. */
static void add_rows(ft_report_causes *w, uint32_t p, const report_cause_row *src, uint32_t n)
{
    report_cause_row *rows = w->rows[p];
    for (uint32_t i = 0; i < n; i++) {
        const report_cause_row *x = &src[i];
        uint32_t k = 0;
        while (k < w->n_rows[p] && (rows[k].stale != x->stale || strcmp(rows[k].text, x->text)))
            k++;
        report_cause_row *r;
        if (k < w->n_rows[p]) {
            r = &rows[k];
        } else if (w->n_rows[p] < RC_MAX_ROWS) {
            r = &rows[w->n_rows[p]++];
            *r = *x;
            continue;
        } else {
            r = &rows[RC_MAX_ROWS - 1];
            snprintf(r->text, sizeof r->text, "other causes");
            r->bits = 0;
            r->n_changes = 0;
        }
        r->n += x->n;
        for (uint32_t h = 0; h < x->n_phases; h++)
            add_phase(r, x->phase[h], x->phase_n[h]);
        r->phase_other += x->phase_other;
    }
}

static int causes_batch(void *ctx, const ft_replay_view *v, ft_err *err)
{
    ft_report_causes *w = ctx;
    const ft_model *m = ft_replay_model(v->engine);
    const uint32_t np = v->n_pol < w->n_pol ? v->n_pol : w->n_pol;
    for (uint32_t p = 0; p < np; p++)
        w->last[p].phase = NULL; /* phase strings are the batch's */
    for (uint32_t j = 0; j < v->n; j++) {
        if (v->match && !v->match[j]) continue;
        const int32_t ph = v->phase[j];
        const char *phase =
            ph >= 0 && (uint32_t)ph < v->batch->n_phases ? v->batch->phases[ph] : NULL;
        for (uint32_t p = 0; p < np; p++) {
            const ft_view_policy *vp = &v->pol[p];
            rc_key k = {.slot = p,
                        .fuser_ops = ft_model_n_ops(m, v->fuser[j]),
                        .to = v->recipe[j],
                        .to_f = v->f[j]};
            if (vp->dec[j] & FT_DEC_BUILD) {
                k.bits = vp->why[j];
                k.from = k.bits & FT_WHY_FIRST ? -1 : v->prev_recipe[j];
                k.from_f = k.bits & FT_WHY_FIRST ? 0 : v->prev_f[j];
            } else if (vp->stale[j] != FT_STALE_NONE) {
                k.stale = vp->stale[j];
                k.from = vp->src_recipe[j];
                k.from_f = vp->src_f[j];
                k.bits = (uint16_t)report_diff_bits(m, k.from, k.from_f, k.to, k.to_f);
            } else {
                continue;
            }
            rc_last *l = &w->last[p];
            if (l->row == UINT32_MAX || !key_equal(&l->k, &k)) {
                const uint32_t row = row_for(w, v, j, &k);
                if (row == UINT32_MAX) return ft_err_set(err, FT_ENOMEM, "causes: out of memory");
                *l = (rc_last){k, row, NULL, 0};
            }
            report_cause_row *r = &w->cur[p][l->row];
            r->n++;
            if (phase && phase == l->phase) {
                if (l->phase_at < RC_MAX_PHASES)
                    r->phase_n[l->phase_at]++;
                else
                    r->phase_other++;
            } else {
                l->phase_at = add_phase(r, phase, 1);
                l->phase = phase;
            }
        }
    }
    return FT_OK;
}

int ft_report_causes_new(ft_report_causes **out, ft_err *err)
{
    *out = NULL;
    ft_report_causes *w = ft_calloc(1, sizeof *w);
    if (!w) return ft_err_set(err, FT_ENOMEM, "out of memory");
    w->obs = (ft_replay_observer){
        .ctx = w, .needs = FT_VIEW_CAUSES, .begin_fn = NULL, .batch_fn = causes_batch};
    for (uint32_t p = 0; p < FT_MAX_POLICIES; p++)
        w->last[p].row = UINT32_MAX;
    *out = w;
    return FT_OK;
}

/* Policy slot p (the next one) for registry index idx. */
static int add_policy(ft_report_causes *w, uint32_t p, uint32_t idx, ft_err *err)
{
    w->rows[p] = ft_calloc(RC_MAX_ROWS, sizeof *w->rows[p]);
    w->cur[p] = ft_calloc(RC_MAX_ROWS, sizeof *w->cur[p]);
    w->policy[p] = idx;
    w->n_pol = p + 1;
    return w->rows[p] && w->cur[p] ? FT_OK : ft_err_set(err, FT_ENOMEM, "out of memory");
}

/* The current trace's rows, packed: n_pol, then per policy its registry index, its row count
 * and the rows. */
static int pack_cur(const ft_report_causes *w, ft_buf *b)
{
    const uint32_t n_pol = w->n_pol;
    int rc = ft_buf_append(b, &n_pol, sizeof n_pol);
    for (uint32_t p = 0; p < w->n_pol && !rc; p++) {
        rc = ft_buf_append(b, &w->policy[p], sizeof w->policy[p]);
        if (!rc) rc = ft_buf_append(b, &w->n_cur[p], sizeof w->n_cur[p]);
        if (!rc && w->n_cur[p]) rc = ft_buf_append(b, w->cur[p], w->n_cur[p] * sizeof *w->cur[p]);
    }
    return rc;
}

/* The policies of the first trace (every trace of a command replays the same list). */
static int causes_begin(void *ctx, const ft_replay_input *in, const ft_replay *engine, ft_err *err)
{
    (void)in;
    ft_report_causes *w = ctx;
    const uint32_t *idx;
    const uint32_t n = ft_replay_policies(engine, &idx);
    if (w->n_pol) return FT_OK;
    int rc = FT_OK;
    for (uint32_t p = 0; p < n && p < FT_MAX_POLICIES && !rc; p++)
        rc = add_policy(w, p, idx[p], err);
    return rc;
}

/* Stale hits worded against the build they reuse depend on the trace's recipes: the memo is
 * per trace. The trace's rows are added to the total (or kept, packed). */
static int causes_end(void *ctx, const ft_replay *engine, int rc, ft_err *err)
{
    (void)engine;
    ft_report_causes *w = ctx;
    ft_hmap_clear(&w->memo_index);
    w->n_memo = 0;
    if (!rc && w->keep) {
        ft_buf *nb = ft_realloc(w->packs, (w->n_packs + 1) * sizeof *nb);
        if (!nb) return ft_err_set(err, FT_ENOMEM, "causes: out of memory");
        w->packs = nb;
        memset(&nb[w->n_packs], 0, sizeof nb[0]);
        if (pack_cur(w, &nb[w->n_packs++]))
            return ft_err_set(err, FT_ENOMEM, "causes: out of memory");
    } else if (!rc) {
        for (uint32_t p = 0; p < w->n_pol; p++)
            add_rows(w, p, w->cur[p], w->n_cur[p]);
    }
    for (uint32_t p = 0; p < w->n_pol; p++)
        w->n_cur[p] = 0;
    for (uint32_t p = 0; p < FT_MAX_POLICIES; p++)
        w->last[p].row = UINT32_MAX; /* the rows were the trace's */
    return FT_OK;
}

void ft_report_causes_keep(ft_report_causes *w)
{
    w->keep = 1;
}

uint32_t ft_report_causes_packs(const ft_report_causes *w, const ft_buf **packs)
{
    *packs = w->packs;
    return w->n_packs;
}

int ft_report_causes_add(ft_report_causes *w, const void *pack, size_t len, ft_err *err)
{
    const uint8_t *b = pack, *end = b + len;
    uint32_t n_pol = 0, idx = 0, n = 0;
    if (len < sizeof n_pol) goto bad;
    memcpy(&n_pol, b, sizeof n_pol);
    b += sizeof n_pol;
    if (n_pol > FT_MAX_POLICIES || (w->n_pol && n_pol != w->n_pol)) goto bad;
    for (uint32_t p = 0; p < n_pol; p++) {
        if ((size_t)(end - b) < 2 * sizeof(uint32_t)) goto bad;
        memcpy(&idx, b, sizeof idx);
        memcpy(&n, b + sizeof idx, sizeof n);
        b += 2 * sizeof(uint32_t);
        if (n > RC_MAX_ROWS || (size_t)(end - b) < n * sizeof(report_cause_row)) goto bad;
        if (p >= w->n_pol) {
            int rc = add_policy(w, p, idx, err);
            if (rc) return rc;
        } else if (w->policy[p] != idx) {
            goto bad;
        }
        report_cause_row *rows = w->cur[p];
        memcpy(rows, b, n * sizeof *rows);
        for (uint32_t i = 0; i < n; i++) /* the strings end inside their arrays */
            if (!memchr(rows[i].text, 0, sizeof rows[i].text) || rows[i].n_phases > RC_MAX_PHASES ||
                rows[i].n_changes > RC_MAX_CHANGES)
                goto bad;
        b += n * sizeof *rows;
        add_rows(w, p, rows, n);
    }
    if (b == end) return FT_OK;
bad:
    return ft_err_set(err, FT_EINVAL, "causes: a damaged pack of %zu bytes", len);
}

const ft_replay_observer *ft_report_causes_observer(ft_report_causes *w)
{
    w->obs.begin_fn = causes_begin;
    w->obs.end_fn = causes_end;
    return &w->obs;
}

uint32_t report_causes_rows(const ft_report_causes *w, uint32_t policy,
                            const report_cause_row **rows)
{
    for (uint32_t p = 0; w && p < w->n_pol; p++)
        if (w->policy[p] == policy) {
            *rows = w->rows[p];
            return w->n_rows[p];
        }
    *rows = NULL;
    return 0;
}

uint32_t report_causes_sorted(const report_cause_row *rows, uint32_t n, uint32_t *order)
{
    if (n > RC_MAX_ROWS) n = RC_MAX_ROWS;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = i;
        for (; j > 0 && rows[order[j - 1]].n < rows[i].n; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    return n;
}

/* ---- the totals in the text and JSON reports ----------------------------------------------- */
enum { RC_TEXT_ROWS = 4 }; /* causes named per policy in the text report */

static void phases_text(FILE *f, const report_cause_row *r)
{
    if (!r->n_phases || (r->n_phases == 1 && !strcmp(r->phase[0], "(no phase)"))) return;
    fprintf(f, " (");
    for (uint32_t i = 0; i < r->n_phases; i++)
        fprintf(f, "%s%s %llu", i ? ", " : "", r->phase[i], (unsigned long long)r->phase_n[i]);
    if (r->phase_other) fprintf(f, ", other phases %llu", (unsigned long long)r->phase_other);
    fprintf(f, ")");
}

void report_causes_text(FILE *f, const ft_replay_result *r, const ft_report_causes *c)
{
    if (!c || !c->n_pol) return;
    fprintf(f, "\nwhy plans were built (what changed since the fuser's previous call) and why "
               "stale plans ran (what changed since their plan was built):\n");
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const report_cause_row *rows;
        const uint32_t n = report_causes_rows(c, r->pol[p].policy, &rows);
        uint32_t order[RC_MAX_ROWS];
        const uint32_t k = report_causes_sorted(rows, n, order);
        uint64_t rest = 0;
        for (uint32_t i = RC_TEXT_ROWS; i < k; i++)
            rest += rows[order[i]].n;
        for (uint32_t i = 0; i < k && i < RC_TEXT_ROWS; i++) {
            const report_cause_row *x = &rows[order[i]];
            fprintf(f, "  %-16s %9llu ", i ? "" : ft_policy_name(r->pol[p].policy),
                    (unsigned long long)x->n);
            if (x->stale)
                fprintf(f, "stale %s (%s): %s", x->n == 1 ? "hit" : "hits",
                        ft_report_stale_label((ft_stale)x->stale), x->text);
            else
                fprintf(f, "%s: %s", x->n == 1 ? "build" : "builds", x->text);
            phases_text(f, x);
            fputc('\n', f);
        }
        if (rest)
            fprintf(f, "  %-16s %9llu more: %u other cause%s (--json and --html list them)\n", "",
                    (unsigned long long)rest, k - RC_TEXT_ROWS, k - RC_TEXT_ROWS == 1 ? "" : "s");
    }
}

static json_t *row_json(const report_cause_row *x)
{
    json_t *o = json_object(), *bits = json_array(), *ch = json_array(), *ph = json_object();
    json_object_set_new(o, "calls", json_integer((json_int_t)x->n));
    if (x->stale) json_object_set_new(o, "class", json_string(ft_stale_name((ft_stale)x->stale)));
    json_object_set_new(o, "because", json_string(x->text));
    for (unsigned b = 0; b < FT_WHY_COUNT; b++)
        if (x->bits >> b & 1) json_array_append_new(bits, json_string(report_cause_name(1u << b)));
    json_object_set_new(o, "causes", bits);
    for (uint32_t i = 0; i < x->n_changes; i++) {
        json_t *c = json_object();
        json_object_set_new(c, "attribute", json_string(x->changes[i].name));
        json_object_set_new(c, "from", json_string(x->changes[i].from));
        json_object_set_new(c, "to", json_string(x->changes[i].to));
        json_array_append_new(ch, c);
    }
    json_object_set_new(o, "changes", ch);
    for (uint32_t i = 0; i < x->n_phases; i++)
        json_object_set_new(ph, x->phase[i], json_integer((json_int_t)x->phase_n[i]));
    if (x->phase_other)
        json_object_set_new(ph, "(other phases)", json_integer((json_int_t)x->phase_other));
    json_object_set_new(o, "phases", ph);
    return o;
}

json_t *report_causes_json(const ft_report_causes *c, uint32_t policy)
{
    const report_cause_row *rows;
    const uint32_t n = report_causes_rows(c, policy, &rows);
    uint32_t order[RC_MAX_ROWS];
    const uint32_t k = report_causes_sorted(rows, n, order);
    json_t *o = json_object(), *b = json_array(), *s = json_array();
    for (uint32_t i = 0; i < k; i++)
        json_array_append_new(rows[order[i]].stale ? s : b, row_json(&rows[order[i]]));
    json_object_set_new(o, "builds", b);
    json_object_set_new(o, "stale_hits", s);
    return o;
}

void ft_report_causes_free(ft_report_causes *w)
{
    if (!w) return;
    for (uint32_t p = 0; p < w->n_pol; p++) {
        ft_free(w->rows[p]);
        ft_free(w->cur[p]);
    }
    for (uint32_t i = 0; i < w->n_packs; i++)
        ft_buf_free(&w->packs[i]);
    ft_free(w->packs);
    ft_hmap_free(&w->memo_index);
    ft_free(w->memo);
    ft_buf_free(&w->text);
    ft_free(w);
}
