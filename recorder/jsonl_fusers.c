/*
 * jsonl_fusers.c - the capture-jsonl importer's fusers: which ids are declared, which are alive
 * (declared and not ended), what their calls are checked against, and the fast path of a fuser
 * line that repeats an earlier one but for its id (TE's transient OperationFuser([op]) per call of
 * a standalone op declares one such line per call). jsonl_check.c parses and words the records;
 * this file keeps the state they are checked against.
 *
 * Memory: per live fuser an integer map entry (about 24 bytes), per distinct (op count, groups)
 * pair 8 bytes, per fuser ever declared about one byte (ids rising above every earlier one, as a
 * capture hook numbers them, are a delta-coded ft_seqset; others an integer map entry), and at
 * most FCACHE cached lines. So a run of 10^7 transient fusers, each ended, holds about 10 MB.
 *
 * An end ends the fuser's OperationFuser instance: every declaration linked to it by "of".
 */
#include "ft_limits.h"
#include "jsonl_import_int.h"

#include <inttypes.h>
#include <string.h>

/* ---- ids ---------------------------------------------------------------------------------- */
int imp_fuser_declared(const importer *im, int64_t id)
{
    return ft_hmap_get(&im->fusers, (uint64_t)id) != UINT32_MAX ||
           (im->ids_up.n && ft_seqset_has(&im->ids_up, id)) ||
           ft_hmap_get(&im->ids_other, (uint64_t)id) != UINT32_MAX;
}

/* The root of id's instance: the first declaration its "of" chain leads to. */
static int64_t root_of(const importer *im, int64_t id)
{
    if (!im->roots.n) return id;
    const uint32_t k = ft_hmap_get(&im->roots, (uint64_t)id);
    return k == UINT32_MAX ? id : im->root_ids[k];
}

int imp_fuser_live(const importer *im, int64_t id, fuser_info *out)
{
    const uint32_t k = ft_hmap_get(&im->fusers, (uint64_t)id);
    if (k == UINT32_MAX) return 0;
    if (im->ended_roots.n && ft_hmap_get(&im->ended_roots, (uint64_t)root_of(im, id)) != UINT32_MAX)
        return 0;
    if (out) *out = im->finfo[k];
    return 1;
}

int imp_fuser_missing(importer *im, const char *field, int64_t id)
{
    return imp_fail(im, field, "fuser %" PRId64 " %s", id,
                    imp_fuser_declared(im, id) ? "has ended" : "is not declared");
}

int imp_fuser_check_id(importer *im, int64_t id)
{
    if (imp_fuser_declared(im, id))
        return imp_fail(im, "id", "fuser %" PRId64 " is already declared", id);
    if (im->n_live >= FT_LIM_FUSERS)
        return imp_fail(im, "id", "more than %u fusers alive at once (the limit)", FT_LIM_FUSERS);
    return FT_OK;
}

static int info_index(importer *im, uint32_t n_ops, uint32_t groups, uint32_t *out)
{
    const uint64_t key = (uint64_t)n_ops << 32 | groups;
    uint32_t k = ft_hmap_get(&im->finfo_map, key);
    if (k == UINT32_MAX) {
        if (im->n_finfo == im->cap_finfo) {
            size_t cap = im->cap_finfo ? im->cap_finfo * 2 : 16;
            fuser_info *q = ft_realloc(im->finfo, cap * sizeof *q);
            if (!q) return imp_fail_nomem(im);
            im->finfo = q;
            im->cap_finfo = cap;
        }
        k = (uint32_t)im->n_finfo;
        if (ft_hmap_put(&im->finfo_map, key, k)) return imp_fail_nomem(im);
        im->finfo[im->n_finfo++] = (fuser_info){n_ops, groups};
    }
    *out = k;
    return FT_OK;
}

/* Remember a declaration that the sink took: alive, and declared for good. */
static int remember(importer *im, const ft_fuser_def *f, uint32_t info)
{
    if (ft_hmap_put(&im->fusers, (uint64_t)f->id, info)) return imp_fail_nomem(im);
    im->n_live++;
    if (!im->ids_up.n || f->id > im->ids_up.last) {
        if (ft_seqset_add(&im->ids_up, f->id)) return imp_fail_nomem(im);
    } else if (ft_hmap_put(&im->ids_other, (uint64_t)f->id, 0)) {
        return imp_fail_nomem(im);
    }
    if (f->has_of) { /* the same instance as `of`: one root for both */
        if (im->n_root_ids == im->cap_root_ids) {
            size_t cap = im->cap_root_ids ? im->cap_root_ids * 2 : 16;
            int64_t *q = ft_realloc(im->root_ids, cap * sizeof *q);
            if (!q) return imp_fail_nomem(im);
            im->root_ids = q;
            im->cap_root_ids = cap;
        }
        im->root_ids[im->n_root_ids] = root_of(im, f->of);
        if (ft_hmap_put(&im->roots, (uint64_t)f->id, (uint32_t)im->n_root_ids))
            return imp_fail_nomem(im);
        im->n_root_ids++;
    }
    return FT_OK;
}

/* Sink errors are worded as the other records' are (jsonl_check.c). */
static int sink_fail(importer *im, int rc, const char *what)
{
    const ft_err *se = im->sink->error_fn ? im->sink->error_fn(im->sink->ctx) : NULL;
    const char *detail = se && se->msg[0] ? se->msg : ft_strerror(rc);
    return ft_err_set(im->err, rc, "%s:%" PRIu64 ": %s rejected by the output: %s", im->name,
                      im->line, what, detail);
}

int imp_fuser_put(importer *im, const ft_fuser_def *f, uint32_t groups)
{
    uint32_t info = 0;
    int rc = info_index(im, f->n_ops, groups, &info);
    if (rc) return rc;
    rc = im->sink->fuser_fn ? im->sink->fuser_fn(im->sink->ctx, f) : FT_OK;
    if (rc) return sink_fail(im, rc, "fuser");
    return remember(im, f, info);
}

int imp_fuser_put_end(importer *im, const ft_fuser_end *e)
{
    int rc = im->sink->end_fn ? im->sink->end_fn(im->sink->ctx, e) : FT_OK;
    if (rc) return sink_fail(im, rc, "fuser_end");
    const int64_t root = root_of(im, e->fuser);
    ft_hmap_del(&im->fusers, (uint64_t)e->fuser);
    im->n_live--;
    /* the instance's other declarations (of) are dead too: by their root, checked on use */
    if (im->roots.n && ft_hmap_put(&im->ended_roots, (uint64_t)root, 0)) return imp_fail_nomem(im);
    im->have_seq = 1;
    im->last_seq = e->seq;
    return FT_OK;
}

/* ---- repeated fuser lines ----------------------------------------------------------------- */
static const char fuser_prefix[] = "{\"t\":\"fuser\",\"id\":";
#define FUSER_PREFIX (sizeof fuser_prefix - 1)

/* Split a line into its id and the rest after it: 1 when it starts with the prefix and a
 * non-negative JSON integer that fits in int64. */
static int split_line(const char *s, size_t len, int64_t *id, const char **rest)
{
    if (len <= FUSER_PREFIX || memcmp(s, fuser_prefix, FUSER_PREFIX)) return 0;
    const char *p = s + FUSER_PREFIX, *end = s + len;
    uint64_t v = 0;
    const char *d0 = p;
    while (p < end && *p >= '0' && *p <= '9') {
        if (v > (uint64_t)(INT64_MAX - (*p - '0')) / 10) return 0;
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (p == d0 || (*d0 == '0' && p - d0 > 1) || p == end) return 0;
    *id = (int64_t)v;
    *rest = p;
    return 1;
}

void imp_fuser_cache(importer *im, const char *line, size_t len, const ft_fuser_def *f,
                     uint32_t groups)
{
    int64_t id;
    const char *rest;
    if (f->has_of || !split_line(line, len, &id, &rest) || id != f->id) return;
    fuser_line *c = &im->fcache[im->fcache_next];
    const size_t rl = len - (size_t)(rest - line);
    char *r = ft_strndup(rest, rl), *l = f->label ? ft_strdup(f->label) : NULL,
         *o = ft_strdup(f->ops_json);
    if (!r || !o || (f->label && !l)) { /* the cache is an optimisation */
        ft_free(r);
        ft_free(l);
        ft_free(o);
        return;
    }
    ft_free(c->rest);
    ft_free(c->label);
    ft_free(c->ops_json);
    *c = (fuser_line){r, rl, ft_hash64(rest, rl), l, o, f->n_ops, groups};
    im->fcache_next = (im->fcache_next + 1) % FCACHE;
}

int imp_fuser_fast(importer *im, const char *s, size_t len, int *rc)
{
    int64_t id;
    const char *rest;
    if (!split_line(s, len, &id, &rest)) return 0;
    const size_t rl = len - (size_t)(rest - s);
    const uint64_t h = ft_hash64(rest, rl);
    for (uint32_t k = 0; k < FCACHE; k++) {
        const fuser_line *c = &im->fcache[k];
        if (!c->rest || c->hash != h || c->len != rl || memcmp(c->rest, rest, rl)) continue;
        /* the same line as one imp_fuser accepted but for a valid id: only the id's checks */
        const ft_fuser_def f = {id, c->label, c->ops_json, c->n_ops, 0, 0};
        *rc = imp_fuser_check_id(im, id);
        if (!*rc) *rc = imp_fuser_put(im, &f, c->groups);
        return 1;
    }
    return 0;
}

void imp_free_fusers(importer *im)
{
    ft_hmap_free(&im->fusers);
    ft_hmap_free(&im->finfo_map);
    ft_hmap_free(&im->ids_other);
    ft_hmap_free(&im->roots);
    ft_hmap_free(&im->ended_roots);
    ft_seqset_free(&im->ids_up);
    ft_free(im->finfo);
    ft_free(im->root_ids);
    for (uint32_t k = 0; k < FCACHE; k++) {
        ft_free(im->fcache[k].rest);
        ft_free(im->fcache[k].label);
        ft_free(im->fcache[k].ops_json);
    }
}
