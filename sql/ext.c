/*
 * ext.c - the entry point of the loadable extension libfusertrace_sql (SQLite derives the name
 * sqlite3_fusertracesql_init from the file name, so `.load libfusertrace_sql` finds it). The
 * tables read the connection's main database file unless a query names a trace; a main file
 * that is a trace opened without immutable=1 with a side file beside it, or one whose schema is
 * not trace.sql's, is refused here already (sql_guard_main).
 */
#include "sql_int.h"

#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1

int sqlite3_fusertracesql_init(sqlite3 *db, char **errmsg, const sqlite3_api_routines *api);

int sqlite3_fusertracesql_init(sqlite3 *db, char **errmsg, const sqlite3_api_routines *api)
{
    SQLITE_EXTENSION_INIT2(api);
    ft_err err = {0};
    int rc = sql_guard_main(db, &err);
    if (!rc) rc = ft_sql_register(db, NULL, NULL, &err);
    if (rc) {
        if (errmsg) *errmsg = sqlite3_mprintf("fusertrace_sql: %s", ft_err_msg(&err));
        return rc == FT_ENOMEM ? SQLITE_NOMEM : SQLITE_ERROR;
    }
    return SQLITE_OK;
}
