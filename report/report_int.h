/*
 * report_int.h - private to report/: the JSON pieces the one report document is assembled from,
 * the names of the builds' causes, and what the HTML report draws (collect.c).
 */
#ifndef FT_REPORT_INT_H
#define FT_REPORT_INT_H

#include "ft_hmap.h"
#include "ft_report.h"

#include <jansson.h>

/* The numerics section as a JSON object (new reference). */
json_t *report_numerics_json(const ft_numerics_result *r);
/* The GPU time section (gputime.c) as a JSON object (new reference), and as HTML. */
json_t *report_gputime_json(const ft_numerics_result *r);
void report_gputime_html(FILE *f, const ft_numerics_result *r);

/* ---- transient fusers (transient.c): by label, in every report ------------------------------ */
/* The text report's section (nothing without transient fusers), its JSON member "transient"
 * (new reference), the HTML section (esc writes text escaped), and the recommendation's sentence
 * when most of ref's builds are theirs. */
void report_transient_text(FILE *f, const ft_replay_result *r);
json_t *report_transient_json(const ft_replay_result *r);
void report_transient_html(FILE *f, const ft_replay_result *r, void (*esc)(FILE *, const char *));
void report_transient_recommend(FILE *f, const ft_replay_result *r, const ft_policy_result *ref);

/* The name of a build's cause (one FT_WHY_* bit) as the --explain lines and the HTML report say
 * it: "recipe type", "f", "first sight of this fuser", ... (calls.c). */
const char *report_cause_name(unsigned bit);

/* ---- what the HTML report draws (collect.c) ---------------------------------------------- */
enum {
    RD_BUCKETS = 256,    /* buckets per histogram; the width doubles when the run outgrows them */
    RD_HIST_KINDS = 7,   /* calls, builds, resets, then stale calls of classes 1..4 */
    RD_MAX_GROUPS = 512, /* labels / phases kept apart; the rest counted as "(others)" */
    RD_MAX_WARNINGS = 8,
};

typedef struct rd_hist {
    int64_t width;                         /* seqs or steps per bucket (a power of two) */
    uint32_t n;                            /* buckets in use */
    uint64_t v[RD_HIST_KINDS][RD_BUCKETS]; /* per kind, per bucket */
} rd_hist;
void rd_hist_align(rd_hist *h, uint32_t n);

typedef struct rd_counts {
    uint64_t calls, builds, resets;
    uint64_t stale[FT_STALE_COUNT];
} rd_counts;

typedef struct rd_groups {
    uint32_t n;
    char **name;  /* [n] */
    rd_counts *c; /* [n][n_pol] */
} rd_groups;

typedef struct rd_input {
    char path[512];
    uint64_t bytes, digest; /* file size, XXH3-64 of its bytes */
    int has_rank, has_world_size;
    int64_t rank, world_size;
    char host[128], te_version[64], started_at[64];
    uint64_t calls;
    rd_counts pol[FT_MAX_POLICIES];
} rd_input;

struct ft_report_data {
    uint32_t n_pol;
    uint32_t policy[FT_MAX_POLICIES]; /* registry indices, in slot order */
    rd_hist seq[FT_MAX_POLICIES];     /* by seq */
    rd_hist step[FT_MAX_POLICIES];    /* by step (calls, builds, resets) */
    rd_groups labels, phases;
    uint32_t *label_map; /* [n_label_map] this trace's dense fuser index -> label group */
    uint32_t n_label_map;
    const char *last_phase; /* phase lookup cache */
    uint32_t last_phase_idx;
    rd_input *inputs;
    uint32_t n_inputs;
    char warnings[RD_MAX_WARNINGS][400];
    uint32_t n_warnings;
    /* the builds' causes (FT_WHY_* bit numbers), in the order first seen */
    int want_causes;
    uint32_t cause_bit[FT_WHY_COUNT];
    uint64_t cause_n[FT_WHY_COUNT][FT_MAX_POLICIES];
    uint32_t n_causes;
    ft_replay_observer obs;
    int no_digest; /* inputs checked only (ft_report_check_inputs) */
};

#endif /* FT_REPORT_INT_H */
