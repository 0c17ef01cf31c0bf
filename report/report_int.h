/*
 * report_int.h - private to report/: the JSON pieces the one report document is assembled from.
 */
#ifndef FT_REPORT_INT_H
#define FT_REPORT_INT_H

#include "ft_report.h"

#include <jansson.h>

/* The numerics section as a JSON object (new reference). */
json_t *report_numerics_json(const ft_numerics_result *r);

#endif /* FT_REPORT_INT_H */
