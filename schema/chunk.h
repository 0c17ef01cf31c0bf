/*
 * chunk.h - private: the columnar chunk that holds a run of call and backward records, its
 * encoder (used by the recorder) and its decoder (used by the reader, verify and fuzzers).
 *
 * A chunk is self-contained: every dictionary and predictor starts empty at its first record,
 * so chunks decode independently (random access, parallel readers). Records refer to fusers and
 * recipes by dense index (row order of the fusers / recipes tables).
 *
 * STORED FORM (chunks.data, codec 3; chunks.codec = 3). Little-endian throughout.
 *
 *   offset  size  meaning
 *   0       4     magic "FTZ3"
 *   4       4     main_raw: decoded size of the main section
 *   8       4     main_zlen: size of the main section's zstd frames
 *   12      4     splits_raw: decoded size of the split section (0: no split sizes in the chunk)
 *   16      4     splits_zlen: size of its zstd frames (0 when splits_raw is 0)
 *   20      *     main frames (main_zlen bytes), then split frames (splits_zlen bytes)
 *
 * Each section is one or more concatenated zstd frames whose decoded bytes, back to back, are the
 * section (the encoder starts a frame at each byte plane of layout 3 and after the last plane,
 * when the piece before is 512 bytes or more, and at each split stream, so that zstd's entropy
 * stage codes one distribution at a time; a frame costs the decoder a few microseconds). The split
 * section has frames of its own so readers that do not need split sizes skip it (neither
 * decompressed nor decoded). chunks.raw_bytes = main_raw + splits_raw and chunks.checksum =
 * XXH3-64 of the decoded main section, which holds the split section's own checksum: every
 * decoded byte is covered. Before decompressing, main_raw and splits_raw must not exceed
 * ft_chunk_main_cap / ft_chunk_splits_cap of the index row's record and call counts.
 *
 * CODEC 2 (still read, no longer written) differs only in: magics "FTZ2" / "FTC2", 16 columns
 * (no SID; the main header is 104 bytes), no FT_REC_END records and no FT_CF_INSTANCE /
 * FT_CF_NEW_FUSER flags. CODEC 1 (still read) differs from codec 2 in: magics "FTZ1" / "FTC1",
 * one zstd frame per section, no integer-column layout 3, and the split section of codec 1 below.
 *
 * MAIN SECTION (decoded)
 *
 *   offset  size  meaning
 *   0       4     magic "FTC3"
 *   4       4     n_records (1 .. FT_CHUNK_MAX_RECORDS), equals chunks.n_records
 *   8       4     n_calls (<= n_records), equals chunks.n_calls
 *   12      8     first_seq (i64), equals chunks.first_seq and the first record's seq
 *   20      4     splits_raw, equals the stored form's field
 *   24      8     splits_checksum: XXH3-64 of the decoded split section (0 when empty)
 *   32      4     n_phases: entries in the phase dictionary (<= FT_CHUNK_MAX_PHASES)
 *   36      4     n_oprg: entries in the op_rg pattern dictionary (<= n_calls)
 *   40      4*17  byte length of each of the 17 columns below, in order
 *   108     *     the columns, back to back; their lengths sum to main_raw - 108
 *
 * Integer columns (0..13 and 16) hold one value per record (BWD: one per backward record, SID:
 * one per FT_CF_INSTANCE record) as an unsigned code; the first byte picks the layout:
 *   0  one LEB128 varint per value
 *   1  runs: pairs (varint value, varint run_length - 1) covering exactly the count
 *   2  fixed width: one byte w (1, 2, 4 or 8), then count x w bytes, little-endian
 *   3  byte planes: one byte w (2, 4 or 8), then w planes of count bytes, plane b holding byte b
 *      (bits 8b..8b+7) of every value
 * The encoder takes runs when they average 4 or more values, else fixed width (layout 2 for
 * w = 1, else 3) unless varints are under half its size (fixed width decodes fastest). KIND, FUSER,
 * RECIPE, FLAGS, DEVICE, OPRG and PHASE codes must fit 32 bits. Codes per column ("zz" = zigzag;
 * "prev" = the previous record's code, so absent fields extend runs; HAS_* flags say what is real):
 *
 *   0  KIND     FT_REC_CALL / FT_REC_BACKWARD / FT_REC_END (a fuser end: TE dropped it)
 *   1  SEQ      seq - previous seq - 1 (previous of the first record: first_seq - 1)
 *   2  FUSER    dense fuser index (backward: 0); for an FT_CF_INSTANCE record, the fuser whose
 *               label and ops the record's fuser repeats (its template)
 *   3  RECIPE   dense recipe index + 1, 0 = null (backward, end: 0)
 *   4  FLAGS    FT_CF_* bits (backward: FT_CF_HAS_NS or 0; end: FT_CF_INSTANCE or 0); a call with
 *               FT_CF_NEW_FUSER has FT_CF_INSTANCE too
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
 *   16 SID      per FT_CF_INSTANCE record, the stream id of its fuser (a compact instance: no
 *               fusers row): a call with FT_CF_NEW_FUSER declares it, zz(sid - newest - 1), and
 *               it becomes the newest; any other record names a declared one, zz(newest - sid).
 *               newest starts at -1 in every chunk (64-bit two's-complement arithmetic). A
 *               transient fuser per call (declared, called once, ended) codes 0 throughout.
 * Records other than FT_CF_INSTANCE ones name their fuser by its dense index alone; the decoder
 * gives every call and end its fuser's stream id (ft_batch.sid).
 *
 * SPLIT SECTION (decoded), codec 2: three streams behind an 8-byte header.
 *
 *   offset          size       meaning
 *   0               4          tags_len: bytes of the tag stream
 *   4               4          n_sym: residual symbols (one byte each)
 *   8               tags_len   tag stream: per entry its varint tag (and varint k, tag 2)
 *   8+tags_len      n_sym      symbol stream: one byte per residual, in entry order
 *   8+tags_len+n_sym  *        extra-bit stream: the residuals' extra bits, LSB first, packed
 *                              without gaps; its length is exactly ceil(bits / 8), pad bits 0
 *
 * A residual u (below) is the symbol u when u < 16, else the symbol
 * 16 + 4 * (b - 5) + ((u >> (b - 3)) & 3), b = bit length of u (5..64), followed by the b - 3
 * low bits of u as extra bits. The symbols are what zstd entropy-codes; the extra bits are
 * nearly uniform and stay as they are.
 *
 * Entries: one per call with FT_CF_HAS_SPLITS, in record order. Each starts with a tag:
 *   0      same vector as the last one seen for key (fuser, mb) in this chunk (recompute repeats
 *          its checkpointed forward's splits); mb absent counts as its own key value
 *   1      literal with k = the previous vector's k for this fuser
 *   2      literal, varint k follows (<= FT_MAX_SPLITS)
 *   3 + d  the (d+1)-th most recent distinct vector of this chunk (dedup)
 * A literal holds k-1 residuals: in codec 2 u = 0 when v[i] equals the largest split size in
 * this fuser's earlier literals of this chunk with n_tokens <= 2^32 (capacity-clipped routing
 * piles sizes there), else u = 1 + zz(v[i] - pred[i]); in codec 1 u = zz(v[i] - pred[i]). The
 * last value is n_tokens - sum(v[0..k-2]) (NTOK column) and must be >= 0.
 * pred[i] = (acc[i] * s + 2^30) >> 31 with s = (T << 31) / acc_total, where acc is the
 * per-fuser sum of this chunk's earlier literal vectors of the same k (halved whenever
 * acc_total exceeds 2^31) and T = n_tokens; with no history (or T > 2^32) pred[i] = T / k.
 * (Integer arithmetic only, so every machine agrees.)
 * Every entry becomes (or repeats) a distinct vector and becomes the vector of its key.
 *
 * SPLIT SECTION, codec 1: the entries back to back in one stream, each residual a varint.
 *
 * LIMITS. Per chunk at most FT_CHUNK_MAX_SPLIT_VALUES split sizes and FT_CHUNK_MAX_OPRG_VALUES
 * op_rg entries once expanded (references and dictionary entries counted at their expanded
 * size; the op_rg dictionary's entries summed too), FT_CHUNK_MAX_RECORDS records: the encoder
 * refuses a call past them (FT_ERANGE: flush first) and the decoder checks every total before
 * allocating, so whatever the stored bytes claim a reader holds at most the two decoded
 * sections (ft_chunk_main_cap, ft_chunk_splits_cap: about 140 bytes per record plus 17 MB for
 * the phase dictionary and 2 MB for op_rg bitmaps, and 10 bytes per split size), about 120
 * bytes per record of output arrays, 8 bytes per split size and 2 bytes per op_rg entry. The
 * per-chunk totals are ft_limits.h's FT_LIM_CHUNK_*; the rest of the format's limits live here.
 */
#ifndef FT_CHUNK_H
#define FT_CHUNK_H

#include "ft_common.h"
#include "ft_limits.h"
#include "ft_trace.h"

#include <stddef.h>
#include <stdint.h>

#define FT_CHUNK_CODEC            3 /* written; codecs 1, 2 and 3 are read */
#define FT_CHUNK_STORED_HDR       20
#define FT_CHUNK_MAIN_HDR         108 /* codec 3 (codecs 1 and 2: 104) */
#define FT_CHUNK_N_COLS           17  /* codec 3 (codecs 1 and 2: 16) */
#define FT_CHUNK_MAX_RECORDS      (1u << 22)
#define FT_CHUNK_MAX_RAW          (1u << 30)                /* bytes in one decoded section */
#define FT_CHUNK_MAX_SPLIT_VALUES FT_LIM_CHUNK_SPLIT_VALUES /* split sizes, decoded */
#define FT_CHUNK_MAX_OPRG_VALUES  FT_LIM_CHUNK_OPRG_VALUES  /* op_rg bytes, decoded */
#define FT_CHUNK_MAX_PHASES       FT_LIM_CHUNK_PHASES
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
    uint32_t n_ends;    /* the encoder's count of fuser ends (not in the chunks row: the trace
                         * keeps the total in meta "n_fuser_ends"; 0 in rows read back) */
} ft_chunk_info;

/* What the decoder checks references against. */
typedef struct ft_chunk_limits {
    uint32_t n_fusers;
    const uint32_t *fuser_n_ops; /* [n_fusers] op count of each fuser */
    uint32_t n_recipes;
    const int64_t *fuser_sid; /* [n_fusers] stream id of each fuser (ft_batch.sid); may be NULL
                               * (the sid of a record naming a fusers row is then 0) */
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
 * null). With FT_CF_INSTANCE in c->flags, the call's fuser is the compact instance c->fuser (its
 * stream id) of the template fuser (FT_CF_NEW_FUSER: declared right before this call).
 * FT_ERANGE: a per-chunk dictionary is full, flush and append again; nothing was added. */
int ft_chunk_enc_call(ft_chunk_enc *e, const ft_call *c, uint32_t fuser, int32_t recipe,
                      int64_t n_tokens);
int ft_chunk_enc_backward(ft_chunk_enc *e, const ft_backward *b);
/* A fuser end at seq: fuser is the dense index of the fuser (or of the template of the compact
 * instance with stream id sid, when instance is set). */
int ft_chunk_enc_end(ft_chunk_enc *e, int64_t seq, uint32_t fuser, int instance, int64_t sid);
/* Symbol streams the encoder reports to an observer (benchmarks compute entropy bounds from
 * them): 0..13 the integer columns' codes (chunk.h order), the split tags, the k of tag-2
 * literals, the residuals of literal vectors, the raw split sizes of literal vectors (all k),
 * and the byte count of the dictionary columns once per chunk. */
enum {
    FT_CS_SPLIT_TAG = 14,
    FT_CS_SPLIT_K,
    FT_CS_SPLIT_RES,
    FT_CS_SPLIT_RAW,
    FT_CS_DICT_BYTES,
    FT_CS_N
};
typedef void (*ft_chunk_obs_fn)(void *ctx, unsigned stream, uint64_t value);
/* Report every coded symbol to fn (NULL: none, the default). */
void ft_chunk_enc_observe(ft_chunk_enc *e, ft_chunk_obs_fn fn, void *ctx);
/* Code and compress the pending records into blob (replaced), fill info (id left 0) and start
 * a new chunk. level: zstd level. */
int ft_chunk_enc_finish(ft_chunk_enc *e, int level, ft_buf *blob, ft_chunk_info *info, ft_err *err);

/* ---- decoder ------------------------------------------------------------------------------ */
/* The largest decoded main / split section a chunk of this many records / calls can hold. */
uint64_t ft_chunk_main_cap(uint32_t n_records, uint32_t n_calls);
uint64_t ft_chunk_splits_cap(uint32_t n_calls);
typedef struct ft_chunk_dec ft_chunk_dec;
int ft_chunk_dec_new(ft_chunk_dec **out);
void ft_chunk_dec_free(ft_chunk_dec *d);
/* Decode one stored chunk into out (arrays owned by d, valid until the next decode). Checks
 * every length, the checksums, the index row and every reference; FT_ECORRUPT names the chunk
 * id and what is wrong. read_flags: FT_READ_SPLITS to decode split sizes. */
int ft_chunk_decode(ft_chunk_dec *d, const ft_chunk_info *info, const void *data, size_t len,
                    const ft_chunk_limits *lim, unsigned read_flags, ft_batch *out, ft_err *err);

#endif /* FT_CHUNK_H */
