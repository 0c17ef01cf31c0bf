/*
 * ft_report.h - what a replay found, for people: the summary table as text, JSON or CSV (with
 * the numerical replay's section when it ran), and a short plain-language reading of it.
 */
#ifndef FT_REPORT_H
#define FT_REPORT_H

#include "ft_common.h"
#include "ft_numerics.h"
#include "ft_replay.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { FT_REPORT_TEXT = 0, FT_REPORT_JSON = 1, FT_REPORT_CSV = 2 };
/* The summary of a replay; nres (may be NULL) adds the numerics of the same replay: after the
 * table in text, as the member "numerics" of the one JSON document; CSV has no numerics form
 * (FT_EINVAL). */
int ft_report_write(FILE *f, const ft_replay_result *r, const ft_numerics_result *nres, int format,
                    ft_err *err);
/* The numerics section alone, as text. */
int ft_report_numerics(FILE *f, const ft_numerics_result *r, ft_err *err);
/* A short plain-language reading of the result: which policy builds least, which ran stale
 * plans and what they would have done, quantizer drift. */
int ft_report_reading(FILE *f, const ft_replay_result *r, ft_err *err);
/* Modeled framework time of a policy from the captured mean fuse_ns of builds and of hits: ns,
 * or -1 if the trace has no captured timings. */
double ft_report_modeled_ns(const ft_replay_result *r, const ft_policy_result *p);

#ifdef __cplusplus
}
#endif
#endif /* FT_REPORT_H */
