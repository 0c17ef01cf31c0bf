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
/* Each call is one transaction that also rewrites the affected digest; on failure nothing is
 * changed (in the file or in memory). JSON text must already be canonical. */
int ft_trace_w_header(ft_trace *t, const ft_header *h);
/* FT_EINVAL: stream id already declared. */
int ft_trace_w_fuser(ft_trace *t, int64_t stream_id, const char *label, const char *ops_json,
                     uint32_t n_ops, uint64_t decl_pos);
/* FT_EINVAL: stream id already declared, or (obj, attrs) already declared. */
int ft_trace_w_recipe(ft_trace *t, int64_t stream_id, const char *type, int64_t obj,
                      const char *attrs_json, uint64_t decl_pos);
/* info->id is assigned. */
int ft_trace_w_chunk(ft_trace *t, ft_chunk_info *info, const void *data, size_t len);
/* Mark the trace complete, checkpoint the WAL and leave a single self-contained file. */
int ft_trace_w_finish(ft_trace *t);

/* ---- lookups ------------------------------------------------------------------------------ */
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
