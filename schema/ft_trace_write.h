/*
 * ft_trace_write.h - the writer side of a trace, for the recorder (recorder/) and export: rows
 * written one transaction each, stream-id lookups and where each declaration stood in the
 * stream. Chunks are encoded with the codec in chunk.h and stored whole by ft_trace_w_chunk.
 */
#ifndef FT_TRACE_WRITE_H
#define FT_TRACE_WRITE_H

#include "chunk.h"
#include "ft_trace.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- writing (handles opened with FT_OPEN_CREATE) ----------------------------------------- */
/* Declarations (header, fusers, recipes) go into the open write transaction (one savepoint
 * each), which the next chunk (or ft_trace_w_commit, or the finish) commits with the changed
 * digests; a declaration refused (FT_EINVAL, FT_ERANGE: beyond ft_limits.h) or failed changes
 * nothing. A failed commit leaves the handle refusing writes (FT_ESTATE). After each commit a
 * passive checkpoint copies it into the main file. JSON text must already be canonical. */
int ft_trace_w_header(ft_trace *t, const ft_header *h);
/* FT_EINVAL: stream id already declared. */
int ft_trace_w_fuser(ft_trace *t, int64_t stream_id, const char *label, const char *ops_json,
                     uint32_t n_ops, uint64_t decl_pos);
/* Mark the declared fuser stream_id as continuing the earlier fuser `of` (the same instance, its
 * op attributes changed): kept in meta "fuser_of" (docs/trace-file.md). FT_EINVAL: either is not
 * declared, `of` is not declared before it, stream_id continues one already, or the op counts
 * differ. */
int ft_trace_w_fuser_of(ft_trace *t, int64_t stream_id, int64_t of);
/* FT_EINVAL: stream id already declared, or (obj, attrs) already declared. */
int ft_trace_w_recipe(ft_trace *t, int64_t stream_id, const char *type, int64_t obj,
                      const char *attrs_json, uint64_t decl_pos);
/* info->id is assigned. */
int ft_trace_w_chunk(ft_trace *t, ft_chunk_info *info, const void *data, size_t len);
/* Commit pending declarations (a flush with no records). */
int ft_trace_w_commit(ft_trace *t);
/* Mark the trace complete, checkpoint the WAL and leave a single self-contained file; the
 * connection is closed (only ft_trace_close may follow). */
int ft_trace_w_finish(ft_trace *t);

/* Byte offset of the first invalid UTF-8 sequence in s (NUL-terminated), or -1 when it is all
 * valid: JSON, and so the capture stream, holds only UTF-8. */
long ft_utf8_bad_at(const char *s);

/* ---- lookups ------------------------------------------------------------------------------ */
/* The path the trace was opened with (for messages). */
const char *ft_trace_path(const ft_trace *t);
/* Dense index of a declared stream id, UINT32_MAX if undeclared. */
uint32_t ft_trace_fuser_index(const ft_trace *t, int64_t stream_id);
uint32_t ft_trace_recipe_index(const ft_trace *t, int64_t stream_id);
/* Where a declaration stood: records before it, and its ordinal among all declarations. */
void ft_trace_fuser_decl(const ft_trace *t, uint32_t idx, uint64_t *pos, uint64_t *no);
void ft_trace_recipe_decl(const ft_trace *t, uint32_t idx, uint64_t *pos, uint64_t *no);

#ifdef __cplusplus
}
#endif
#endif /* FT_TRACE_WRITE_H */
