/*
 * jsonl_import_int.h - private to the capture-jsonl importer (jsonl_import.c reads and parses,
 * jsonl_check.c validates): the importer's state and the functions the two halves share.
 * Not part of any contract.
 */
#ifndef FT_JSONL_IMPORT_INT_H
#define FT_JSONL_IMPORT_INT_H

#include "ft_hmap.h"
#include "ft_recorder.h"
#include "ft_seqset.h"
#include "json_fast.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <zstd.h>
#include <zstd_errors.h>

/* Everything declared here is private to the library: hidden from libfusertrace_rec.so's
 * exported symbols, which stay the ft_* API. */
#pragma GCC visibility push(hidden)

#define MAX_WARNED 64 /* distinct unknown field names reported */

/* ---- small containers --------------------------------------------------------------------- */
/* What a declared fuser's calls are checked against (one entry per distinct pair). */
typedef struct fuser_info {
    uint32_t n_ops;  /* basic ops: the length of op_rg */
    uint32_t groups; /* num_groups shared by its grouped ops: the length of m_splits (0: any) */
} fuser_info;

/* A fuser line seen before, for the next one that differs from it only in its id (TE's transient
 * fusers: one declaration per call of a standalone op): what the line after the id parsed to. */
#define FCACHE 8
typedef struct fuser_line {
    char *rest;     /* the line after `{"t":"fuser","id":DIGITS`, NUL-terminated */
    size_t len;     /* its length */
    uint64_t hash;  /* ft_hash64 of it */
    char *label;    /* NULL when absent */
    char *ops_json; /* canonical */
    uint32_t n_ops, groups;
} fuser_line;

/* Declared recipe states, to reject a second declaration of one (obj, attrs) pair. */
typedef struct recipe_state {
    int64_t obj;
    uint64_t hash; /* of the canonical attrs text */
    char *attrs;   /* canonical attrs text */
    int64_t id;    /* the id it was declared under */
} recipe_state;

/* ---- importer state ----------------------------------------------------------------------- */
typedef struct importer {
    const char *name; /* input name for messages */
    FILE *in;
    FILE *warn;
    int fast; /* use the fast path */
    ft_sink *sink;
    ft_err *err;
    uint64_t line;   /* 1-based number of the current line */
    const char *cur; /* the current line (for imp_fuser_cache) and its length */
    size_t cur_len;
    /* line reader */
    char *buf;       /* [cap + FT_JFAST_PADDING], cap grows up to FT_LIM_LINE_BYTES + 1 */
    size_t cap;      /* bytes the lines may use (the padding after them is the fast path's) */
    size_t beg, end; /* unread bytes are buf[beg, end) */
    int eof;
    /* zstd input (a compressed stream) */
    ZSTD_DStream *zd; /* NULL for plain input */
    uint8_t *zbuf;    /* [zcap] compressed bytes read, zin.src */
    size_t zcap;
    ZSTD_inBuffer zin;
    size_t zlast; /* ZSTD_decompressStream's last hint: 0 when a frame has just ended */
    int zeof;     /* the compressed input has ended */
    /* validation state */
    int have_header;
    int have_seq;
    int64_t last_seq;
    ft_hmap fusers; /* id of a live fuser (declared, not ended) -> index into finfo */
    fuser_info *finfo;
    size_t n_finfo, cap_finfo;
    ft_hmap finfo_map; /* (n_ops, groups) -> index into finfo */
    ft_seqset ids_up;  /* declared fuser ids each above every earlier one, in order */
    ft_hmap ids_other; /* the other declared fuser ids (value 0) */
    uint64_t n_live;   /* fusers declared and not ended */
    ft_hmap roots;     /* id of a declaration with "of" -> index into root_ids */
    int64_t *root_ids; /* the first declaration of its instance */
    size_t n_root_ids, cap_root_ids;
    ft_hmap ended_roots; /* instances that ended (only kept once some "of" exists) */
    fuser_line fcache[FCACHE];
    uint32_t fcache_next;
    ft_hmap recipes; /* declared recipe ids (value 0) */
    ft_hmap states;  /* hash of (obj, attrs) -> index into rstates */
    recipe_state *rstates;
    size_t n_rstates, cap_rstates;
    ft_seqset calls; /* seqs of the calls so far */
    ft_jfast *jf;    /* the fast path's parser */
    /* per-line scratch */
    uint8_t *op_rg;
    size_t cap_op_rg;
    int64_t *splits;
    size_t cap_splits;
    /* unknown-field warnings already given, as "type.field" */
    char *warned[MAX_WARNED];
    size_t n_warned;
    int warned_overflow;
} importer;

/* ---- shared by the importer's files ------------------------------------------------------ */
/* Set the error as "NAME:LINE: field 'F': <fmt>" (field may be NULL); returns FT_EINVAL. */
static inline int imp_fail(importer *im, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static inline int imp_fail(importer *im, const char *field, const char *fmt, ...)
{
    char what[FT_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (field)
        return ft_err_set(im->err, FT_EINVAL, "%s:%" PRIu64 ": field '%s': %s", im->name, im->line,
                          field, what);
    return ft_err_set(im->err, FT_EINVAL, "%s:%" PRIu64 ": %s", im->name, im->line, what);
}

static inline int imp_fail_nomem(importer *im)
{
    return ft_err_set(im->err, FT_ENOMEM, "%s:%" PRIu64 ": out of memory", im->name, im->line);
}

/* "an object", "a string", ...: a JSON value's type for messages. */
const char *imp_type_name(const json_t *v);

/* ---- the records (jsonl_check.c) ---------------------------------------------------------- */
/* Check one parsed record of its type completely and hand it to the sink: FT_OK, or FT_EINVAL
 * (or the sink's status) with the message in im->err. */
int imp_header(importer *im, json_t *o);
int imp_fuser(importer *im, json_t *o);
int imp_recipe(importer *im, json_t *o);
int imp_call(importer *im, json_t *o);
int imp_backward(importer *im, json_t *o);
int imp_fuser_end(importer *im, json_t *o);

/* ---- fusers (jsonl_fusers.c) -------------------------------------------------------------- */
/* Whether id was ever declared; 1 and *out (may be NULL) when it is declared and has not
 * ended. */
int imp_fuser_declared(const importer *im, int64_t id);
int imp_fuser_live(const importer *im, int64_t id, fuser_info *out);
/* The error for a field naming a fuser that is not alive: "has ended" or "is not declared". */
int imp_fuser_missing(importer *im, const char *field, int64_t id);
/* A new declaration's id: not declared before, and room for one more live fuser. */
int imp_fuser_check_id(importer *im, int64_t id);
/* Hand a checked declaration (groups: its m_splits length, 0 = any) to the sink and remember
 * it; a fuser end likewise (its fuser alive, its seq checked). */
int imp_fuser_put(importer *im, const ft_fuser_def *f, uint32_t groups);
int imp_fuser_put_end(importer *im, const ft_fuser_end *e);
/* Keep an accepted declaration's line (the current line, s[0, len)) for imp_fuser_fast. */
void imp_fuser_cache(importer *im, const char *s, size_t len, const ft_fuser_def *f,
                     uint32_t groups);
/* A fuser line that repeats a cached one but for its id: 1 when handled (*rc its outcome), 0 when
 * the general path must take it. */
int imp_fuser_fast(importer *im, const char *s, size_t len, int *rc);
void imp_free_fusers(importer *im);
/* The fast path (json_fast.h): 1 when f, a line the fast parser accepted, is a call or backward
 * record that passes every check of imp_call / imp_backward, handed to the sink with the outcome
 * in *rc; 0 when the general path must take the line (nothing has happened then). */
int imp_fast_record(importer *im, const ft_jfast_rec *f, int *rc);

#pragma GCC visibility pop

#endif /* FT_JSONL_IMPORT_INT_H */
