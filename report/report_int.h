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
/* The recommendation's transient note as data (NULL when most of ref's builds are not
 * transient fusers'), as report_transient_recommend words it. */
json_t *report_transient_recommend_json(const ft_replay_result *r, const ft_policy_result *ref);
void report_transient_html(FILE *f, const ft_replay_result *r, void (*esc)(FILE *, const char *));
void report_transient_recommend(FILE *f, const ft_replay_result *r, const ft_policy_result *ref);

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

/* ---- SVG charts (chart.c) ------------------------------------------------------------------ */
/* A policy's colour by its slot, a stale class's by its severity: the one palette of the page. */
const char *report_policy_color(uint32_t slot);
const char *report_class_color(ft_stale s);
/* s with <, >, & and " escaped, for HTML and SVG text and attributes. */
void report_esc(FILE *f, const char *s);

enum { CH_W = 760, CH_H = 300, CH_ML = 70, CH_MR = 20, CH_MT = 30, CH_MB = 45, CH_MAX_LEGEND = 16 };
typedef struct chart_legend_item {
    char name[96], color[16], dash[24], note[160];
    char attr[16], val[96]; /* data-policy / data-class and its value */
} chart_legend_item;
typedef struct svg_chart {
    FILE *f;
    double x0, x1, y0, y1; /* data ranges (y1 is raised to a nice top) */
    int log_y;             /* log10(1 + y) axis */
    int int_x, int_y;      /* whole-number ticks */
    int w, h;              /* viewBox; 0: CH_W x CH_H */
    uint32_t n_legend;
    chart_legend_item legend[CH_MAX_LEGEND];
} svg_chart;
typedef struct chart_series {
    const char *name, *color;
} chart_series;
void chart_open(svg_chart *c, FILE *f, const char *id, const char *title, const char *xlabel,
                const char *ylabel);
double chart_tx(const svg_chart *c, double x);
double chart_ty(const svg_chart *c, double y);
/* One line per series (y[s][k] at x[k], NaN a gap); coinciding series striped, and said so in
 * the legend. */
void chart_lines(svg_chart *c, const chart_series *s, uint32_t n_series, const double *x,
                 const double *const *y, uint32_t n, const char *unit);
void chart_legend_add(svg_chart *c, const char *name, const char *color, const char *dash,
                      const char *note, const char *data_attr, const char *data_val);
void chart_close(svg_chart *c);
/* The numerics bands on a log axis (chart-bands). */
void chart_bands(FILE *f, const ft_numerics_result *nr);

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
    ft_replay_observer obs;
    int no_digest; /* inputs checked only (ft_report_check_inputs) */
};

/* The charts along the run (chart.c): cumulative builds (kind 1) or resets (kind 2) by seq, hit
 * rate (mode 0) or framework time (mode 1) per step, and each stale policy's stale calls by
 * class; h are the policies' aligned histograms. */
void report_chart_cumulative(FILE *f, const ft_replay_result *r, const rd_hist *h, int kind,
                             const char *id, const char *title);
void report_chart_steps(FILE *f, const ft_replay_result *r, const rd_hist *h,
                        const ft_report_opts *o, int mode, const char *id, const char *title);
void report_chart_stale(FILE *f, const ft_replay_result *r, const rd_hist *h);

/* The provenance as a JSON object (new reference): tool, command, inputs, options (collect.c). */
json_t *report_prov_json(const ft_report_prov *p, const ft_replay_result *r,
                         const ft_report_opts *o);

#endif /* FT_REPORT_INT_H */
