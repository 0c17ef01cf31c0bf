/*
 * report_int.h - private to report/: the JSON pieces the one report document is assembled from,
 * the names of the builds' causes, and what the HTML report draws (collect.c).
 */
#ifndef FT_REPORT_INT_H
#define FT_REPORT_INT_H

#include "ft_report.h"

#include <jansson.h>

/* The numerics section as a JSON object (new reference). */
json_t *report_numerics_json(const ft_numerics_result *r);

/* ---- why plans were built and went stale (causes.c) --------------------------------------- */
/* The name of a build's cause (one FT_WHY_* bit): "recipe type", "f", "first sight of this
 * fuser", ... */
const char *report_cause_name(unsigned bit);
/* The FT_WHY_* bits of what differs between (recipe a, boundary af) and (b, bf). */
unsigned report_diff_bits(const ft_model *m, int32_t a, uint32_t af, int32_t b, uint32_t bf);
enum { RC_MAX_ROWS = 32, RC_MAX_PHASES = 4, RC_MAX_CHANGES = 4 };
/* Appended to b: what changed (bits) from (recipe from, from_f) to (to, to_f) on fuser, in words
 * ("recipe type A -> B", "disable_rht False -> True", "f 3 -> 0 (grad mode on)", or "grad mode
 * on" without f_values); ch (may be NULL) gets the attribute changes named, at most
 * RC_MAX_CHANGES, "f" among them with f_values. */
int report_change_text(ft_buf *b, const ft_model *m, uint32_t fuser, unsigned bits, int32_t from,
                       uint32_t from_f, int32_t to, uint32_t to_f, int f_values,
                       ft_recipe_change *ch, uint32_t *n_ch);
/* One cause of a policy's builds or stale hits, and how many calls it covers. */
typedef struct report_cause_row {
    uint8_t stale;  /* 0: builds; else stale hits (no build) of this class */
    uint16_t bits;  /* FT_WHY_* */
    char text[240]; /* in words */
    ft_recipe_change changes[RC_MAX_CHANGES];
    uint32_t n_changes;
    uint64_t n; /* calls */
    char phase[RC_MAX_PHASES][48];
    uint64_t phase_n[RC_MAX_PHASES], phase_other; /* calls per phase; the rest */
    uint32_t n_phases;
} report_cause_row;
/* The rows of the policy with registry index `policy` (returns their number, 0 if none). */
uint32_t report_causes_rows(const ft_report_causes *c, uint32_t policy,
                            const report_cause_row **rows);
/* The rows' indices by calls, most first (at most RC_MAX_ROWS into order[]). */
uint32_t report_causes_sorted(const report_cause_row *rows, uint32_t n, uint32_t *order);
/* The totals as the text report's section (nothing when c is NULL), and one policy's as JSON
 * ({"builds": [...], "stale_hits": [...]}, new reference). */
void report_causes_text(FILE *f, const ft_replay_result *r, const ft_report_causes *c);
json_t *report_causes_json(const ft_report_causes *c, uint32_t policy);

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
