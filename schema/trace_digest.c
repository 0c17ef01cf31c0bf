/*
 * trace_digest.c - the digest chains that tie a trace's small tables and chunk index together:
 * every row serialized (integers as 8 little-endian bytes, a string as 's', its bytes and a NUL,
 * or 'n' for NULL) and hashed, the row hashes mixed in row order per table; meta's chain is over
 * its (key, value) pairs sorted by key, the digest keys left out. Stored in meta as digest.TABLE
 * (16 hex digits), written once per commit (trace_write.c), checked at open and by verify.
 */
#include "trace_handle_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char *const trace_dg_key[N_DG] = {"digest.meta", "digest.oplists", "digest.fusers",
                                        "digest.recipes", "digest.chunks"};

/* ---- rows --------------------------------------------------------------------------------- */
static void put64(ft_buf *b, uint64_t v)
{
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    ft_buf_append(b, x, 8);
}

static void putstr(ft_buf *b, const char *s)
{
    if (s) {
        ft_buf_append(b, "s", 1);
        ft_buf_append(b, s, strlen(s) + 1);
    } else {
        ft_buf_append(b, "n", 1);
    }
}

/* Hash of the serialized row in t->scratch (FT_ENOMEM if building it failed). */
static int scratch_hash(ft_trace *t, size_t expect_min, uint64_t *out)
{
    if (t->scratch.len < expect_min) return FT_ENOMEM;
    *out = ft_hash64(t->scratch.data, t->scratch.len);
    return FT_OK;
}

int trace_row_oplist(ft_trace *t, const oplist *o, uint64_t *h)
{
    t->scratch.len = 0;
    put64(&t->scratch, (uint64_t)o->id);
    put64(&t->scratch, o->hash);
    put64(&t->scratch, o->n_ops);
    putstr(&t->scratch, o->ops);
    return scratch_hash(t, 26 + strlen(o->ops), h);
}

int trace_row_fuser(ft_trace *t, int64_t id, const ft_fuser_def *f, int64_t oplist_id,
                    const decl *d, uint64_t *h)
{
    t->scratch.len = 0;
    put64(&t->scratch, (uint64_t)id);
    put64(&t->scratch, (uint64_t)f->id);
    putstr(&t->scratch, f->label);
    put64(&t->scratch, (uint64_t)oplist_id);
    put64(&t->scratch, d->pos);
    put64(&t->scratch, d->no);
    return scratch_hash(t, 41 + (f->label ? strlen(f->label) + 1 : 0), h);
}

int trace_row_recipe(ft_trace *t, int64_t id, const ft_recipe_def *r, const decl *d, uint64_t *h)
{
    t->scratch.len = 0;
    put64(&t->scratch, (uint64_t)id);
    put64(&t->scratch, (uint64_t)r->id);
    putstr(&t->scratch, r->type);
    put64(&t->scratch, (uint64_t)r->obj);
    putstr(&t->scratch, r->attrs_json);
    put64(&t->scratch, d->pos);
    put64(&t->scratch, d->no);
    return scratch_hash(t, 44 + strlen(r->type) + strlen(r->attrs_json), h);
}

int trace_row_chunk(ft_trace *t, const ft_chunk_info *c, uint64_t *h)
{
    t->scratch.len = 0;
    put64(&t->scratch, c->id);
    put64(&t->scratch, (uint64_t)c->first_seq);
    put64(&t->scratch, c->n_records);
    put64(&t->scratch, c->n_calls);
    put64(&t->scratch, c->codec);
    put64(&t->scratch, c->raw_bytes);
    put64(&t->scratch, c->checksum);
    return scratch_hash(t, 56, h);
}

static int is_digest_key(const char *k)
{
    return !strncmp(k, "digest.", 7);
}

/* The meta digest over (key, value) pairs sorted by key, digest keys excluded. */
int trace_meta_digest(ft_trace *t, const meta_kv *kv, size_t n, uint64_t *out)
{
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) {
        if (is_digest_key(kv[i].key)) continue;
        t->scratch.len = 0;
        putstr(&t->scratch, kv[i].key);
        putstr(&t->scratch, kv[i].value);
        uint64_t r;
        int rc = scratch_hash(t, 4, &r);
        if (rc) return rc;
        h = ft_hash_mix(h, r);
    }
    *out = h;
    return FT_OK;
}
