/*
 * trace_int.h - private to schema/ (the trace handle's files, reader.c, verify.c): what the reader
 * and verify need from a trace handle beyond ft_trace.h and ft_trace_write.h (the chunk index,
 * digests, the database). Not part of any contract; the handle itself is trace_handle_int.h's.
 */
#ifndef FT_TRACE_INT_H
#define FT_TRACE_INT_H

#include "chunk.h"
#include "ft_trace.h"
#include "ft_trace_write.h"

#include <stdint.h>

/* FT_* status for a SQLite result code: damage (CORRUPT, NOTADB) -> FT_ECORRUPT, the
 * environment (IOERR, FULL, CANTOPEN, BUSY, ...) -> FT_EIO, NOMEM -> FT_ENOMEM. */
int ft_sql_status(int sqlite_rc);

/* Number of (stored) op lists. */
uint32_t ft_trace_n_oplists(const ft_trace *t);
const ft_chunk_limits *ft_trace_limits(const ft_trace *t);
const ft_chunk_info *ft_trace_chunk(const ft_trace *t, uint64_t pos);
ft_err *ft_trace_err(ft_trace *t);
/* Recompute every digest of the trace at path from its rows and store them (tests and the
 * fuzzer: an edited trace made digest-consistent, as a careful forger would). */
int ft_trace_redigest(const char *path, ft_err *err);
/* Recompute every digest from the file and compare (open and verify). */
int ft_trace_check_digests(ft_trace *t);
/* The database (verify, sizes, the reader's statements). */
struct sqlite3 *ft_trace_db(ft_trace *t);

#endif /* FT_TRACE_INT_H */
