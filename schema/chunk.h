/*
 * chunk.h - private: the columnar chunk that holds a run of call and backward records, its
 * encoder (used by the recorder) and its decoder (used by the reader, verify and fuzzers).
 *
 * A chunk is self-contained: every dictionary and predictor starts empty at its first record,
 * so chunks decode independently (random access, parallel readers). Records refer to fusers and
 * recipes by dense index (row order of the fusers / recipes tables).
 *
 * STORED FORM (chunks.data, codec 1). Little-endian throughout.
 *
 *   offset  size  meaning
 *   0       4     magic "FTZ1"
 *   4       4     main_raw: decoded size of the main section
 *   8       4     main_zlen: size of the main section's zstd frame
 *   12      4     splits_raw: decoded size of the split section (0: no split sizes in the chunk)
 *   16      4     splits_zlen: size of its zstd frame (0 when splits_raw is 0)
 *   20      *     main frame (main_zlen bytes), then split frame (splits_zlen bytes), then nothing
 *
 * The split section is a frame of its own so readers that do not need split sizes skip it
 * (neither decompressed nor decoded). chunks.raw_bytes = main_raw + splits_raw and
 * chunks.checksum = XXH3-64 of the decoded main section, which holds the split section's own
 * checksum: every decoded byte is covered.
 *
 * MAIN SECTION (decoded)
 *
 *   offset  size  meaning
 *   0       4     magic "FTC1"
 *   4       4     n_records (1 .. FT_CHUNK_MAX_RECORDS), equals chunks.n_records
 *   8       4     n_calls (<= n_records), equals chunks.n_calls
 *   12      8     first_seq (i64), equals chunks.first_seq and the first record's seq
 *   20      4     splits_raw, equals the stored form's field
 *   24      8     splits_checksum: XXH3-64 of the decoded split section (0 when empty)
 *   32      4     n_phases: entries in the phase dictionary (<= FT_CHUNK_MAX_PHASES)
 *   36      4     n_oprg: entries in the op_rg pattern dictionary (<= n_calls)
 *   40      4*16  byte length of each of the 16 columns below, in order
 *   104     *     the columns, back to back; their lengths sum to main_raw - 104
 *
 * Integer columns (0..13) hold one value per record (BWD: one per backward record) as an
 * unsigned code; the first byte picks the layout:
 *   0  one LEB128 varint per value
 *   1  runs: pairs (varint value, varint run_length - 1) covering exactly the count
 *   2  fixed width: one byte w (1, 2, 4 or 8), then count x w bytes, little-endian
 * The encoder takes runs when they average 4 or more values, else fixed width unless varints are
 * under half its size (fixed width decodes fastest). KIND, FUSER, RECIPE, FLAGS, DEVICE, OPRG and
 * PHASE codes must fit 32 bits. Codes per column ("zz" = zigzag; "prev" = the previous record's
 * code, so absent fields extend runs; HAS_* flags say what is real):
 *
 *   0  KIND     FT_REC_CALL / FT_REC_BACKWARD
 *   1  SEQ      seq - previous seq - 1 (previous of the first record: first_seq - 1)
 *   2  FUSER    dense fuser index (backward: 0)
 *   3  RECIPE   dense recipe index + 1, 0 = null (backward: 0)
 *   4  FLAGS    FT_CF_* bits (backward: FT_CF_HAS_NS or 0)
 *   5  DEVICE   zz(device) (backward: 0)
 *   6  OPRG     1 + index into the op_rg dictionary (backward: 0, the empty pattern)
 *   7  STEP     zz(step - previous present step), 0 when absent
 *   8  MB       zz(mb - previous present mb), 0 when absent
 *   9  PHASE    index into the phase dictionary (absent: prev)
 *   10 NS       zz(ns - previous present ns), 0 when absent
 *   11 FUSE_NS  zz(fuse_ns), 0 when absent
 *   12 NTOK     zz(n_tokens - previous n_tokens of a call with splits), 0 without splits;
 *               n_tokens = sum of m_splits
 *   13 BWD      per backward record: seq - call - 1 (the forward call precedes it)
 *   14 PHASES   n_phases x (varint length 0..FT_CHUNK_MAX_PHASE_LEN, bytes without NUL)
 *   15 OPRGDICT n_oprg x (varint n_ops, ceil(n_ops/8) bytes: bit i of the pattern at bit i%8 of
 *               byte i/8, unused high bits 0)
 *
 * SPLIT SECTION (decoded): one entry per call with FT_CF_HAS_SPLITS, in record order. Each
 * entry starts with a varint tag:
 *   0      same vector as the last one seen for key (fuser, mb) in this chunk (recompute repeats
 *          its checkpointed forward's splits); mb absent counts as its own key value
 *   1      literal with k = the previous vector's k for this fuser
 *   2      literal, varint k follows (<= FT_MAX_SPLITS)
 *   3 + d  the (d+1)-th most recent distinct vector of this chunk (dedup)
 * A literal holds k-1 varints zz(v[i] - pred[i]); the last value is n_tokens - sum(v[0..k-2])
 * (NTOK column) and must be >= 0. pred[i] = (acc[i] * s + 2^30) >> 31 with
 * s = (T << 31) / acc_total, where acc is the per-fuser sum of this chunk's earlier literal
 * vectors of the same k (halved whenever acc_total exceeds 2^31) and T = n_tokens; with no
 * history (or T > 2^32) pred[i] = T / k. (Integer arithmetic only, so every machine agrees.)
 * Every entry becomes (or repeats) a distinct vector and becomes the vector of its key.
 */
#ifndef FT_CHUNK_H
#define FT_CHUNK_H

#include "ft_common.h"
#include "ft_trace.h"

#include <stddef.h>
#include <stdint.h>

#define FT_CHUNK_CODEC            1
#define FT_CHUNK_STORED_HDR       20
#define FT_CHUNK_MAIN_HDR         104
#define FT_CHUNK_N_COLS           16
#define FT_CHUNK_MAX_RECORDS      (1u << 22)
#define FT_CHUNK_MAX_RAW          (1u << 30) /* bytes in one decoded section */
#define FT_CHUNK_MAX_SPLIT_VALUES (1u << 27) /* split sizes in one chunk, decoded */
#define FT_CHUNK_MAX_OPRG_VALUES  (1u << 28) /* op_rg bytes in one chunk, decoded */
#define FT_CHUNK_MAX_PHASES       4096
#define FT_CHUNK_MAX_PHASE_LEN    4096
#define FT_MAX_SPLITS             65536 /* groups in one split vector */
#define FT_MAX_OPS                65536 /* basic ops in one fuser */

/* The index row of a chunk (chunks table without data). */
typedef struct ft_chunk_info {
    uint64_t id;        /* chunks.id */
    int64_t first_seq;  /* seq of the first record */
    uint32_t n_records; /* calls + backward events */
    uint32_t n_calls;
    uint32_t codec;     /* FT_CHUNK_CODEC */
    uint64_t raw_bytes; /* decoded main + split sections */
    uint64_t checksum;  /* XXH3-64 of the decoded main section */
} ft_chunk_info;

/* What the decoder checks references against. */
typedef struct ft_chunk_limits {
    uint32_t n_fusers;
    const uint32_t *fuser_n_ops; /* [n_fusers] op count of each fuser */
    uint32_t n_recipes;
} ft_chunk_limits;

/* ---- encoder ------------------------------------------------------------------------------ */
typedef struct ft_chunk_enc ft_chunk_enc;
int ft_chunk_enc_new(ft_chunk_enc **out);
void ft_chunk_enc_free(ft_chunk_enc *e);
uint32_t ft_chunk_enc_n_records(const ft_chunk_enc *e);
/* Split sizes held by the pending chunk (the recorder flushes before the limit). */
uint64_t ft_chunk_enc_n_split_values(const ft_chunk_enc *e);
/* Append a call already validated by the caller (seq increasing, n_op_rg matching the fuser,
 * splits >= 0 with a sum that fits, flags known). fuser/recipe are dense indices (recipe -1 =
 * null). FT_ERANGE: a per-chunk dictionary is full, flush and append again; nothing was added. */
int ft_chunk_enc_call(ft_chunk_enc *e, const ft_call *c, uint32_t fuser, int32_t recipe,
                      int64_t n_tokens);
int ft_chunk_enc_backward(ft_chunk_enc *e, const ft_backward *b);
/* Code and compress the pending records into blob (replaced), fill info (id left 0) and start
 * a new chunk. level: zstd level. */
int ft_chunk_enc_finish(ft_chunk_enc *e, int level, ft_buf *blob, ft_chunk_info *info, ft_err *err);

/* ---- decoder ------------------------------------------------------------------------------ */
typedef struct ft_chunk_dec ft_chunk_dec;
int ft_chunk_dec_new(ft_chunk_dec **out);
void ft_chunk_dec_free(ft_chunk_dec *d);
/* Decode one stored chunk into out (arrays owned by d, valid until the next decode). Checks
 * every length, the checksums, the index row and every reference; FT_ECORRUPT names the chunk
 * id and what is wrong. read_flags: FT_READ_SPLITS to decode split sizes. */
int ft_chunk_decode(ft_chunk_dec *d, const ft_chunk_info *info, const void *data, size_t len,
                    const ft_chunk_limits *lim, unsigned read_flags, ft_batch *out, ft_err *err);

#endif /* FT_CHUNK_H */
