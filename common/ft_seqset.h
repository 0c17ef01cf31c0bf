/*
 * ft_seqset.h - the project's one set of record seqs: the seqs of every call so far, added in
 * strictly increasing order, so that a `backward` record can be checked to name an earlier call.
 * Used by the recorder's checked entries (ft_rec_backward) and by the JSONL importer; a stream
 * is checked against one set only (the importer feeds the recorder through its pre-validated
 * entries).
 *
 * Stored as delta varints in blocks of FT_SEQSET_BLOCK values with an index of block starts
 * (about one byte per call for the usual small gaps, plus 16 bytes per block), and the last
 * FT_SEQSET_RECENT values kept plain in a ring so that the common lookup (a backward naming a
 * call of the same step) is a binary search without decoding. Lookups elsewhere decode at most
 * one block.
 */
#ifndef FT_SEQSET_H
#define FT_SEQSET_H

#include "ft_common.h"

#include <stdint.h>

#define FT_SEQSET_BLOCK  128
#define FT_SEQSET_RECENT 4096 /* a power of two */

typedef struct ft_seqset_block {
    int64_t first; /* first seq of the block */
    size_t off;    /* byte offset of its second value's delta */
} ft_seqset_block;

typedef struct ft_seqset {
    ft_buf bytes;                     /* delta varints of every value not first in its block */
    ft_seqset_block *blk;             /* [n_blk] */
    size_t n_blk, cap;                /* blocks, allocated blocks */
    uint32_t in_last;                 /* values in the last block */
    int64_t last;                     /* the largest value */
    int64_t recent[FT_SEQSET_RECENT]; /* ring of the last FT_SEQSET_RECENT values */
    uint64_t n;                       /* values added */
} ft_seqset;

/* Add v, which must be above every value added before (the caller checks seq order).
 * FT_ENOMEM leaves the set as it was. */
int ft_seqset_add(ft_seqset *s, int64_t v);
/* 1 if v was added, else 0. */
int ft_seqset_has(const ft_seqset *s, int64_t v);
/* Release the memory; the set is empty and usable again. */
void ft_seqset_free(ft_seqset *s);

#endif /* FT_SEQSET_H */
