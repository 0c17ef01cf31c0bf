/*
 * ft_sql.h - SQL over a trace: the eponymous virtual tables `calls`, `backwards` and `decisions`,
 * registered on a SQLite connection, either linked in (the `fusertrace sql` command) or loaded
 * into any SQLite host as the extension libfusertrace_sql (`.load` in the sqlite3 shell; entry
 * point sqlite3_fusertracesql_init).
 *
 *   calls: one row per decoded call, in seq order
 *     seq, fuser (declared id), label, ops (the fuser's op list, JSON), recipe (declared id),
 *     recipe_type, recipe_obj, recipe_attrs (JSON), grad, input_rg, op_rg (JSON array of 0/1),
 *     device, step, mb, phase, ns, fuse_ns, rebuilt, graph, n_tokens, m_splits (JSON array),
 *     chunk (the chunk's row id)
 *   backwards: one row per backward record: seq, call (the forward call's seq), ns, chunk
 *   decisions: one row per call and policy, pulled from the replay driver's views while the
 *     query reads:
 *     seq, policy, fuser, label, build, hit, reset, stale (none, harmless, slower, quant,
 *     raises), plan, fresh_plan; policy = 'NAME' replays only that policy, and a seq upper bound
 *     stops the replay there (a lower bound only filters: the cache must see the earlier calls);
 *     a cursor keeps what it replayed (within half the memory budget, docs/trace-file.md) and
 *     serves rescans (a join's inner table) from it
 *
 * Optional fields the capture did not record are NULL (a call without a recipe has NULL recipe
 * columns; n_tokens and m_splits are NULL where m_splits was absent). Both tables take the trace
 * as an argument, `calls('run.ftdb')`; without one they read the connection's default trace (the
 * one given to ft_sql_register), else the connection's main database file, so that
 * `sqlite3 run.ftdb` followed by `.load` reads that trace.
 *
 * Traces are read only through the streaming reader (ft_trace.h), opened read-only once per
 * connection and path. Constraints on seq (=, <, <=, >, >=, BETWEEN) select the chunks that can
 * hold the rows, so a slice decodes only its chunks; m_splits is decoded only when the query uses
 * it. A damaged chunk is an SQL error (SQLITE_CORRUPT) naming the chunk.
 */
#ifndef FT_SQL_H
#define FT_SQL_H

#include "ft_trace.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sqlite3;

/* Register `calls`, `backwards` and `decisions` on db. default_trace (may be NULL; borrowed, it
 * must outlive db) is what the tables read when the query names no trace; default_name is what
 * their hidden `trace` column shows for it. FT_OK, or FT_ESQL / FT_ENOMEM with the reason in err.
 */
int ft_sql_register(struct sqlite3 *db, ft_trace *default_trace, const char *default_name,
                    ft_err *err);

/* 1 once after a `decisions` cursor gave up keeping its decisions because they passed their
 * share of the memory budget (*share_bytes, may be NULL), so that its rescans replayed the trace
 * again (same results, more time); 0 when none did since the last call. Process-wide. */
int ft_sql_take_fallback(uint64_t *share_bytes);

/* File name of the loadable extension ("libfusertrace_sql.so"). */
#define FT_SQL_EXTENSION_FILE "libfusertrace_sql.so"

#ifdef __cplusplus
}
#endif
#endif /* FT_SQL_H */
