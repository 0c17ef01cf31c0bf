/*
 * sql_int.h - private to sql/: what the virtual tables share (the traces a connection opened,
 * the seq bounds a constraint gives, error text).
 */
#ifndef FT_SQL_INT_H
#define FT_SQL_INT_H

#include "ft_replayer.h"
#include "ft_sql.h"

#include <sqlite3ext.h>
#include <stdint.h>

typedef struct sql_trace {
    char *path; /* as named in the query */
    ft_trace *t;
    struct sql_trace *next;
} sql_trace;

/* Shared by the modules of one connection (client data, freed with the last). */
typedef struct sql_ctx {
    int refs;
    ft_trace *dflt;  /* borrowed default trace, or NULL */
    char *dflt_name; /* its name, for the hidden column */
    sql_trace *open;
} sql_ctx;

/* The trace named path (NULL: the default one, else the connection's main database file),
 * opened read-only on first use; an SQLite status with the message in vt. */
int sql_trace_get(sql_ctx *ctx, sqlite3 *db, sqlite3_vtab *vt, const char *table, const char *path,
                  ft_trace **out, const char **name);
/* Narrow [*lo, *hi] by `seq OP value` (OP one of E L M G H: = < <= > >=); a non-numeric value
 * leaves the bounds as they are (SQLite still checks the constraint). */
void sql_narrow(int64_t *lo, int64_t *hi, char op, sqlite3_value *val);
/* vt's error message: fmt with one %s. Returns rc. */
int sql_vtab_err(sqlite3_vtab *vt, int rc, const char *fmt, const char *detail);

/* The connection's main database file, when it is a trace that the host opened itself (the
 * stock shell's `sqlite3 run.ftdb`): SQLite reads a -wal or rolls back a -journal beside it and
 * would checkpoint into it on close, so the checkpoint on close is turned off, and it is refused
 * (FT_EINVAL, the message says to open it as file:PATH?immutable=1) when such a side file is
 * there and the host did not open it immutable; refused too when its schema is not trace.sql's
 * (verify's message), whose objects would stand in for the tables. FT_OK when the main database
 * is no trace or passes. */
int sql_guard_main(sqlite3 *db, ft_err *err);

extern const sqlite3_module sql_decisions_module;

#endif /* FT_SQL_INT_H */
