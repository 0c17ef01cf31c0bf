/* trace.c - placeholder until the schema module lands. */
#include "ft_trace.h"
#include "trace_sql.h"
const char *ft_trace_ddl(void);
const char *ft_trace_ddl(void) { return ft_trace_sql; }
