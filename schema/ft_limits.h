/*
 * ft_limits.h - the one set of limits on what a trace may hold, shared by every writer and
 * reader: the recorder (ft_rec_*, which refuses anything beyond them at record time with
 * FT_ERANGE naming the field), the JSONL importer, `verify` (which checks the small tables
 * against them), export and replay. Whatever the recorder accepts is therefore within them, so
 * it verifies, exports, re-imports and replays; a file beyond them was not written by us and is
 * reported as damaged by the readers.
 *
 * The limits are on content, in bytes of the canonical (stored) text. FT_LIM_LINE_BYTES, the
 * longest capture-stream line the importer reads, is derived so that the export of any record
 * within the content limits fits in it (every string byte may be written as a 6-byte \u00XX
 * escape; a split value takes at most 20 characters with its comma).
 *
 * Per-chunk limits of the columnar codec (records, decoded section bytes, dictionary entries)
 * live in chunk.h; FT_LIM_CHUNK_* below are the bounds the decoder's allocations are held to.
 */
#ifndef FT_LIMITS_H
#define FT_LIMITS_H

/* ---- the small tables --------------------------------------------------------------------- */
#define FT_LIM_FUSERS        ((1u << 24) - 1) /* declared fuser instances in one trace */
#define FT_LIM_RECIPES       ((1u << 24) - 3) /* declared recipe states in one trace */
#define FT_LIM_OPS           4096             /* basic ops in one fuser's op list */
#define FT_LIM_OPS_BYTES     (1u << 20)       /* canonical JSON of one op list */
#define FT_LIM_LABEL_BYTES   (1u << 16)       /* one fuser label */
#define FT_LIM_TYPE_BYTES    256              /* one recipe type name */
#define FT_LIM_ATTRS_BYTES   (1u << 16)       /* canonical JSON of one recipe's attributes */
#define FT_LIM_HDR_STR_BYTES 4096             /* te_version, torch_version, host, started_at */
#define FT_LIM_HDR_OBJ_BYTES (1u << 16)       /* canonical JSON of the header's env or extra */

/* ---- one record ----------------------------------------------------------------------------- */
#define FT_LIM_SPLITS      65536 /* values in one call's m_splits */
#define FT_LIM_PHASE_BYTES 4096  /* one phase name */

/* ---- the capture stream --------------------------------------------------------------------- */
/* Longest line the importer reads (newline excluded): the largest of a fuser line (escaped
 * label and op list), a recipe line, a header line and a call line (splits, op_rg, phase), with
 * room for the field names. */
#define FT_LIM_LINE_BYTES (1u << 22)

/* ---- per chunk, for the decoder's allocations (chunk.h has the format's own) ---------------- */
#define FT_LIM_CHUNK_SPLIT_VALUES (1u << 24) /* decoded split values in one chunk */
#define FT_LIM_CHUNK_OPRG_VALUES  (1u << 24) /* decoded op_rg entries in one chunk */
#define FT_LIM_CHUNK_PHASES       4096       /* phase dictionary entries in one chunk */

#if FT_LIM_OPS_BYTES + 6 * FT_LIM_LABEL_BYTES + 256 > FT_LIM_LINE_BYTES
#error "FT_LIM_LINE_BYTES does not hold the longest fuser line"
#endif
#if FT_LIM_ATTRS_BYTES + 6 * FT_LIM_TYPE_BYTES + 256 > FT_LIM_LINE_BYTES
#error "FT_LIM_LINE_BYTES does not hold the longest recipe line"
#endif
#if 2 * FT_LIM_HDR_OBJ_BYTES + 4 * 6 * FT_LIM_HDR_STR_BYTES + 256 > FT_LIM_LINE_BYTES
#error "FT_LIM_LINE_BYTES does not hold the longest header line"
#endif
#if 20 * FT_LIM_SPLITS + 2 * FT_LIM_OPS + 6 * FT_LIM_PHASE_BYTES + 512 > FT_LIM_LINE_BYTES
#error "FT_LIM_LINE_BYTES does not hold the longest call line"
#endif

#endif /* FT_LIMITS_H */
