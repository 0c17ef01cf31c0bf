# Turn trace.sql into a C string constant (ft_trace_sql) so the DDL has one source of truth.
file(READ ${IN} SQL)
string(REPLACE "\\" "\\\\" SQL "${SQL}")
string(REPLACE "\"" "\\\"" SQL "${SQL}")
string(REPLACE "\n" "\\n\"\n\"" SQL "${SQL}")
file(WRITE ${OUT} "/* generated from trace.sql; do not edit */\nstatic const char ft_trace_sql[] =\n\"${SQL}\";\n")
