/*
 * ft_report.h - what a replay found, for people: the summary table as text, JSON or CSV (with
 * the numerical replay's section when it ran), a short plain-language reading of it, the
 * recommendation that closes every report, the HTML report, and the writers over the replay's
 * per-batch view (--per-call JSON lines, --explain lines). Only this module formats the replay.
 */
#ifndef FT_REPORT_H
#define FT_REPORT_H

#include "ft_common.h"
#include "ft_numerics.h"
#include "ft_replayer.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { FT_REPORT_TEXT = 0, FT_REPORT_JSON = 1, FT_REPORT_CSV = 2 };

/* The JSON report's "report_version": raised when a field `diff` reads changes meaning, so a
 * saved report of another layout is refused rather than misread. */
enum { FT_REPORT_VERSION = 1 };

/* TE's cost of one plan build when the trace captured no fuse_ns: about 100 us, the mean fuse_ns
 * of the builds in a capture of TE 2.20's fuser on a training run that records it (issue 12 of
 * this project; the replayer's own builds take 3-6 us and say nothing about TE's). Every figure
 * made from it is labelled assumed. */
#define FT_REPORT_BUILD_NS 100000.0
/* reset_recipe_state alone: no measurement of TE's; when a reset comes with a build, the build
 * figure covers it. 0 unless --reset-ns gives one. */
#define FT_REPORT_RESET_NS 0.0

/* "Why nothing fuses": fusers whose op list has a fusion's op types but that fuse under no
 * recipe of their trace, grouped by what blocks them (ft_model_why_unfused: every failing check,
 * with the value it read and where the value came from). */
enum { FT_REPORT_MAX_NOTES = 16 };
typedef struct ft_report_unfused {
    char fused[64];    /* the fused op that never forms */
    char reason[1024]; /* what blocks it, in one sentence */
    char example[128]; /* one fuser's label (or "fuser ID") */
    uint64_t n_fusers;
    uint32_t n_blocks; /* every failing check: the registration's first, then the gate's */
    uint32_t n_registration;
    ft_unfused_block block[FT_UNFUSED_MAX_BLOCKS];
    int env_empty; /* the capture recorded an empty env */
} ft_report_unfused;
/* What the fuser model could not read from a capture and what it did about it (ft_model_note_at:
 * fields it assumed, registered fusions it does not know, registrations that disagree with its
 * own checks, op attributes changed after a call), the same note of several traces once. */
enum { FT_REPORT_MAX_MODEL_NOTES = 32 };
typedef struct ft_report_model_note {
    ft_model_note_kind kind;
    char field[160];
    char text[400];
    uint32_t n_traces; /* traces with this note */
} ft_report_model_note;
typedef struct ft_report_notes {
    uint32_t n;
    ft_report_unfused u[FT_REPORT_MAX_NOTES];
    uint32_t n_model;
    ft_report_model_note model[FT_REPORT_MAX_MODEL_NOTES];
} ft_report_notes;
/* A model note's kind as the reports name it: "assumed", "unknown fusion", "registry", "op
 * attributes changed". */
const char *ft_report_note_kind(ft_model_note_kind k);
/* The notes of the traces' fusers under env (the header's, with the --env overrides): why
 * nothing fuses, and the model's notes on each trace's capture. */
int ft_report_find_unfused(const ft_replay_set *set, const ft_env_kv *env, uint32_t n_env,
                           ft_report_notes *out, ft_err *err);

/* Why each policy built plans and ran stale ones, counted while the replay runs (causes.c): an
 * observer of the driver that reads the view's causes (FT_VIEW_CAUSES) and, per policy, counts
 * the builds by what changed since the fuser's previous call and the stale hits by what changed
 * since the build whose plan they ran, in words with the attributes' names and old -> new values
 * ("disable_rht False -> True"), and the phases they happened in. The text, JSON and HTML
 * reports print them (ft_report_opts.causes). Bounded memory. */
typedef struct ft_report_causes ft_report_causes;
int ft_report_causes_new(ft_report_causes **out, ft_err *err);
/* Put this into ft_replay_opts.observers (valid while c lives). */
const ft_replay_observer *ft_report_causes_observer(ft_report_causes *c);
void ft_report_causes_free(ft_report_causes *c);
/* Each trace's causes are counted apart and added to the totals when it ends (causes past the
 * limits of rows and phases are so counted per trace, then added). For a replay spread over
 * processes (MPI): keep() makes c pack each trace's causes instead of adding them; packs() gives
 * those packs (in the order the traces ran, valid while c lives); add() adds one pack into c,
 * as the end of its trace would (the packs of every trace added in trace order give the causes
 * of one process replaying them all). Packs move between processes of one build only. */
void ft_report_causes_keep(ft_report_causes *c);
uint32_t ft_report_causes_packs(const ft_report_causes *c, const ft_buf **packs);
int ft_report_causes_add(ft_report_causes *c, const void *pack, size_t len, ft_err *err);

/* The provenance of a JSON report, as the HTML report has it: the tool's version, the command
 * line, and each input trace's path, size, XXH3-64 digest and header (rank, host, TE version,
 * start time, calls). Reads every input once for its digest. */
typedef struct ft_report_prov ft_report_prov;
int ft_report_prov_new(const ft_replay_set *set, const char *command, ft_report_prov **out,
                       ft_err *err);
void ft_report_prov_free(ft_report_prov *p);

typedef struct ft_report_opts {
    int timing;      /* add this replayer's own measured times (vary run to run; default off, so
                      * that text, JSON and CSV are byte-for-byte reproducible) */
    double build_ns; /* assumed TE cost per build / per reset, without captured fuse_ns */
    double reset_ns;
    const char *filter; /* which calls the counts cover (--fuser, --phase, --steps), or NULL */
    const ft_report_notes *notes;   /* why nothing fuses, or NULL */
    const ft_report_causes *causes; /* why plans were built and went stale, or NULL */
    const ft_report_prov *prov;     /* the JSON report's provenance, or NULL */
    /* per-trace (rank) rows when several traces were replayed: [n_per_trace] each */
    uint32_t n_per_trace;
    const ft_replay_result *per_trace;
    const char *const *trace_names;
    const int64_t *trace_ranks; /* -1: the header names no rank */
} ft_report_opts;
void ft_report_opts_init(ft_report_opts *o);

/* The summary of a replay; nres (may be NULL) adds the numerics of the same replay: after the
 * table in text, as the member "numerics" of the one JSON document (not with nres->time_only),
 * and its GPU time (nres->gt.on) after them, as the member "gpu_time"; CSV has no numerics form
 * (FT_EINVAL). ft_report_write uses the default options. */
int ft_report_write_opts(FILE *f, const ft_replay_result *r, const ft_numerics_result *nres,
                         int format, const ft_report_opts *o, ft_err *err);
int ft_report_write(FILE *f, const ft_replay_result *r, const ft_numerics_result *nres, int format,
                    ft_err *err);
/* The numerics section alone, as text. */
int ft_report_numerics(FILE *f, const ft_numerics_result *r, ft_err *err);
/* The GPU time section alone (r->gt, replay --gpu-time), as text (gputime.c). */
int ft_report_gputime(FILE *f, const ft_numerics_result *r, ft_err *err);

/* The stale classes as people say them ("other fusion, same quantization", "slower (unfused)",
 * "other quantization", "raises in TE"); JSON keys keep ft_stale_name's short names. */
const char *ft_report_stale_label(ft_stale s);

/* TE's framework time under policy p: modeled from the captured fuse_ns where the trace has it,
 * else builds x build_ns + resets x reset_ns (*assumed = 1). */
double ft_report_framework_ns(const ft_replay_result *r, const ft_policy_result *p,
                              const ft_report_opts *o, int *assumed);

/* The policies with the fewest builds among those that never ran a stale plan (ties, the one to
 * name first), and the slot of the captured run's policy. */
typedef struct ft_recommend {
    uint32_t n_best;                /* 0 when every policy ran a stale plan */
    uint32_t best[FT_MAX_POLICIES]; /* slots into r->pol, the one to name first first */
    int captured;                   /* slot of the captured run's policy, -1 if not replayed */
} ft_recommend;
void ft_report_recommend(const ft_replay_result *r, ft_recommend *out);
/* The recommendation in plain words, closing a text report. */
int ft_report_recommendation(FILE *f, const ft_replay_result *r, const ft_report_opts *o,
                             ft_err *err);
/* ---- writers over the replay's view (calls.c) ------------------------------------------------ */
/* An observer of the replay driver that writes, in call order then policy order, one JSON line
 * per call and policy to per_call ({"seq","fuser","policy","build","reset","plan","stale"}) and
 * to explain one line per build ("[explain] POLICY seq=N fuser=F (label): build because WHAT
 * A -> B, ...") and per stale hit ("...: reset, no build: stale (CLASS): runs the plan built at
 * seq M; since then WHAT A -> B, which its key does not hold"), of the calls the filter counts;
 * either may be NULL. Write errors stay in the FILEs' error flags. */
typedef struct ft_report_calls ft_report_calls;
int ft_report_calls_new(FILE *per_call, FILE *explain, ft_report_calls **out, ft_err *err);
const ft_replay_observer *ft_report_calls_observer(ft_report_calls *w);
void ft_report_calls_free(ft_report_calls *w);

/* ---- the CI gate: replay --fail-on (gate.c) ------------------------------------------------- */
/* Conditions that fail a replay, each watched under every replayed policy: stale (any stale
 * plan), raises (a stale plan that raises in TE), builds>N (more than N builds in all),
 * builds-per-fuser>N (more than N builds of one fuser), rebuilds-per-step>N (more than N
 * rebuilds within one training step of one trace: builds for a recipe and boundary f the fuser
 * had built for before under the policy). Only the calls the replay's filter counts count. */
enum {
    FT_GATE_STALE = 0,
    FT_GATE_RAISES,
    FT_GATE_BUILDS,
    FT_GATE_FUSER_BUILDS,
    FT_GATE_STEP_REBUILDS,
};
#define FT_GATE_MAX 8
typedef struct ft_gate_cond {
    int kind;      /* FT_GATE_* */
    uint64_t n;    /* the threshold N */
    char text[64]; /* as written */
} ft_gate_cond;
/* "stale", "builds>40", ...: FT_EINVAL naming the mistake and listing the conditions. */
int ft_report_gate_parse(const char *text, ft_gate_cond *out, ft_err *err);

/* The first call a condition held on under a policy. */
typedef struct ft_gate_hit {
    int held;
    uint32_t policy, trace;      /* registry index; the trace's position */
    const char *path;            /* the trace as given (NULL: handed in open) */
    int64_t seq, fuser_id, step; /* step -1: none recorded */
    uint8_t stale;               /* ft_stale of the call's plan */
    uint64_t count;              /* the build (rebuild) count that passed N */
    char label[96];              /* the fuser's label, "" if none */
} ft_gate_hit;

/* An observer of the replay driver (put it into ft_replay_opts.observers) that keeps the first
 * hit per condition and policy. */
typedef struct ft_report_gate ft_report_gate;
/* watch[n_watch]: the registry indices of the policies to watch; NULL: every replayed one. */
int ft_report_gate_new(const ft_gate_cond *conds, uint32_t n, const uint32_t *watch,
                       uint32_t n_watch, ft_report_gate **out, ft_err *err);
const ft_replay_observer *ft_report_gate_observer(ft_report_gate *g);
/* After the replay: one line to f per condition and policy that held ("PROG: --fail-on stale
 * held under te-3410: first on seq N of FILE (fuser F 'label', step S): ..."), then FT_EGATE
 * (err says how many held) when any did, FT_OK when none; FT_EINVAL when rebuilds-per-step was
 * asked of traces that record no step. */
int ft_report_gate_verdict(const ft_report_gate *g, FILE *f, const char *prog, ft_err *err);
void ft_report_gate_free(ft_report_gate *g);

/* ---- the run on a timeline: replay --timeline (timeline.c) ---------------------------------- */
/* An observer of the replay driver that writes the Chrome trace event format (JSON object form;
 * Perfetto and chrome://tracing load it) to f: a process per trace (pid = its rank), a track
 * per fuser, each counted call a complete event at its captured time, builds, resets and stale
 * plans as instant events per policy, the training step and the cumulative builds per policy as
 * counters; name is the output's, for messages. The traces must replay one after another
 * (observers make the driver do so). */
typedef struct ft_report_timeline ft_report_timeline;
int ft_report_timeline_new(FILE *f, const char *name, ft_report_timeline **out, ft_err *err);
const ft_replay_observer *ft_report_timeline_observer(ft_report_timeline *t);
/* Close the document after the replay (FT_EIO when a write to f failed). */
int ft_report_timeline_finish(ft_report_timeline *t, ft_err *err);
void ft_report_timeline_free(ft_report_timeline *t);

/* ---- the HTML report (collect.c, html.c) ---------------------------------------------------- */
/* What the HTML report draws beyond the summary, gathered while the replay runs by an observer of
 * the driver: builds, resets and stale calls along the run and per step, per fuser label, per
 * phase, per trace (of the calls the replay's filter counts), and the inputs' identity. Bounded
 * memory. (The causes are ft_report_causes'.) */
typedef struct ft_report_data ft_report_data;
int ft_report_data_new(const uint32_t *policies, uint32_t n_policies, ft_report_data **out,
                       ft_err *err);
/* Put this into ft_replay_opts.observers (valid while d lives). Besides the counts it records
 * each trace's size, digest and header: two traces of one rank are an error (FT_EINVAL); traces
 * that look like different runs are kept as warnings for the report. */
const ft_replay_observer *ft_report_data_observer(ft_report_data *d);
void ft_report_data_free(ft_report_data *d);

/* The traces of a command checked before any replay: one rank each (FT_EINVAL naming the two
 * files), one run (a warning written to warn: another TE version or world size, start times more
 * than 10 minutes apart, or other hosts for single-process traces; the ranks of one multi-node
 * run sit on different hosts); ranks (may be NULL): [n] each header's rank, -1 when it names
 * none. */
int ft_report_check_inputs(const ft_replay_set *set, FILE *warn, int64_t *ranks, ft_err *err);

typedef struct ft_report_html_opts {
    const char *command; /* the command line that made the report, for its provenance */
    const char *title;   /* NULL: "fusertrace report" */
} ft_report_html_opts;
/* One self-contained HTML file: inline CSS, SVG charts and a small script, nothing fetched. */
int ft_report_html(FILE *f, const ft_replay_result *r, const ft_numerics_result *nres,
                   const ft_report_data *d, const ft_report_opts *o, const ft_report_html_opts *h,
                   ft_err *err);

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
