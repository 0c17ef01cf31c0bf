/*
 * json_fast.h - private: the importer's fast path for the records that make up almost every
 * capture stream, `call`, `backward` and `fuser_end`, parsed with simdjson's On-Demand API (C++,
 * in json_fast.cpp) behind this C interface.
 *
 * The fast path only accepts. ft_jfast_parse returns 1 only for a line that is one JSON object
 * whose keys are all names of call (or all names of backward) fields, none twice and none
 * escaped, whose values have the types those fields take (integers that fit in int64, true or
 * false, arrays of those, null only for recipe, and strings without escapes or control bytes),
 * with nothing after the object. Anything else, valid or not, returns 0 and the importer takes
 * its general path (jansson) for that line, which words the message for whatever is wrong: the
 * messages are the general path's whichever path a line would have taken. The importer then
 * checks the record's meaning (seq order, declared ids, lengths, ranges, limits) on the values
 * returned here and falls back to the general path on any failure, so no check exists twice.
 *
 * The input needs FT_JFAST_PADDING readable bytes after the line (of any content): simdjson reads
 * in 64-byte blocks.
 */
#ifndef FT_JSON_FAST_H
#define FT_JSON_FAST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FT_JFAST_PADDING 64 /* SIMDJSON_PADDING; json_fast.cpp checks they agree */

enum { FT_JF_CALL = 1, FT_JF_BACKWARD = 2, FT_JF_END = 3 };

/* Field bits of ft_jfast_rec.present. */
enum {
    FT_JF_T = 1u << 0,
    FT_JF_SEQ = 1u << 1,
    FT_JF_FUSER = 1u << 2,
    FT_JF_RECIPE = 1u << 3,
    FT_JF_GRAD = 1u << 4,
    FT_JF_INPUT_RG = 1u << 5,
    FT_JF_OP_RG = 1u << 6,
    FT_JF_DEVICE = 1u << 7,
    FT_JF_M_SPLITS = 1u << 8,
    FT_JF_STEP = 1u << 9,
    FT_JF_MB = 1u << 10,
    FT_JF_PHASE = 1u << 11,
    FT_JF_GRAPH = 1u << 12,
    FT_JF_NS = 1u << 13,
    FT_JF_FUSE_NS = 1u << 14,
    FT_JF_REBUILT = 1u << 15,
    FT_JF_CALLREF = 1u << 16 /* backward's "call" */
};

typedef struct ft_jfast_rec {
    int kind;         /* FT_JF_CALL, FT_JF_BACKWARD or FT_JF_END (a fuser_end record) */
    uint32_t present; /* FT_JF_* of the fields the line holds */
    int64_t seq, fuser, recipe, call, device, step, mb, ns, fuse_ns;
    int recipe_null;                    /* "recipe": null */
    int grad, input_rg, graph, rebuilt; /* 0/1 */
    uint32_t n_op_rg;                   /* entries of op_rg */
    const uint8_t *op_rg;               /* [n_op_rg] 0/1, owned by the parser */
    uint32_t n_splits;                  /* entries of m_splits */
    const int64_t *m_splits;            /* [n_splits], owned by the parser */
    const char *phase;                  /* NUL-terminated copy, owned by the parser */
    size_t phase_len;                   /* bytes of phase */
} ft_jfast_rec;

typedef struct ft_jfast ft_jfast;

/* NULL when out of memory. */
ft_jfast *ft_jfast_new(void);
void ft_jfast_free(ft_jfast *p);
/* Parse s[0, len) as above: 1 = a plain call or backward record in *out (its arrays and phase
 * valid until the next call), 0 = not one (take the general path). */
int ft_jfast_parse(ft_jfast *p, const char *s, size_t len, ft_jfast_rec *out);

#ifdef __cplusplus
}
#endif
#endif /* FT_JSON_FAST_H */
