/*
 * words.c - the words the reports share, so that every writer (text, JSON, HTML, --explain, the
 * cause totals) names a stale class and a build's cause the same way.
 */
#include "report_int.h"

const char *ft_report_stale_label(ft_stale s)
{
    static const char *const labels[FT_STALE_COUNT] = {
        "fresh plan", "other fusion, same quantization", "slower (unfused)", "other quantization",
        "raises in TE"};
    return (unsigned)s < FT_STALE_COUNT ? labels[s] : "?";
}

const char *report_cause_name(unsigned bit)
{
    switch (bit) {
    case FT_WHY_FIRST:
        return "first sight of this fuser";
    case FT_WHY_TYPE:
        return "recipe type";
    case FT_WHY_F:
        return "f";
    case FT_WHY_BO:
        return "backward_override";
    case FT_WHY_HIST:
        return "amax_history_len";
    case FT_WHY_ATTRS:
        return "recipe attributes";
    case FT_WHY_OBJECT:
        return "recipe object";
    case FT_WHY_NOT_CACHED:
        return "nothing changed since the fuser's previous call";
    case FT_WHY_OPS:
        return "op attributes";
    default:
        return "?";
    }
}
