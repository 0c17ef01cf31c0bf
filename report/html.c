/*
 * html.c - the replay report as one self-contained HTML file: inline CSS (with a print style),
 * SVG charts (chart.c) and one small inline script that only checks the rendered page: every
 * chart has content, no text lies outside its chart, every axis has at least two ticks at equal
 * "nice" steps (whole numbers on counts, seqs and steps), coinciding lines are told apart, and
 * each policy and stale class has one colour wherever it appears. It writes its verdict into the
 * <html> element's data-ft-check attribute ("ok N" for N charts, or "bad: ..."), which the test
 * reads from headless Chromium; the page shows no marker. Nothing is fetched from a network.
 *
 * Sections: recommendation, summary table, charts (cumulative builds and resets along the run
 * per policy, hit rate per step, stale calls by consequence along the run, framework time per
 * step), breakdowns per fuser label, phase and trace (rank), why plans were built and went stale
 * (the cause totals), numerics bands when --numerics ran (with the fresh plans' error per format
 * to judge an error by), the fuser model's notes on the captures, and provenance (tool version,
 * command, inputs with size and digest, options, warnings).
 */
#define _POSIX_C_SOURCE 200809L
#include "report_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FT_TOOL_VERSION
#define FT_TOOL_VERSION "unknown"
#endif

static double ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 0.0;
}

/* The text a report function writes, as a malloc'd string (NULL on failure). */
static char *capture(int (*fn)(FILE *, const ft_replay_result *, const ft_report_opts *, ft_err *),
                     const ft_replay_result *r, const ft_report_opts *o)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return NULL;
    ft_err err = {0};
    int rc = fn(m, r, o, &err);
    fclose(m);
    if (rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Plain-text bullets ("- ..." and "  - ...") as an HTML list. */
static void bullets(FILE *f, const char *text)
{
    fputs("<ul>\n", f);
    int nested = 0;
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        char *line = ft_strndup(l, n);
        if (line) {
            if (!strncmp(line, "- ", 2) || !strncmp(line, "  - ", 4)) {
                int sub = line[0] == ' ';
                if (sub && !nested) fputs("<ul>\n", f);
                if (!sub && nested) fputs("</ul>\n", f);
                nested = sub;
                fputs("<li>", f);
                report_esc(f, line + (sub ? 4 : 2));
                fputs("</li>\n", f);
            }
            ft_free(line);
        }
        l = e ? e + 1 : l + n;
    }
    if (nested) fputs("</ul>\n", f);
    fputs("</ul>\n", f);
}

static int rec_fn(FILE *f, const ft_replay_result *r, const ft_report_opts *o, ft_err *err)
{
    return ft_report_recommendation(f, r, o, err);
}

static int reading_fn(FILE *f, const ft_replay_result *r, const ft_report_opts *o, ft_err *err)
{
    (void)o;
    return ft_report_reading(f, r, err);
}

/* ---- sections -------------------------------------------------------------------------------- */
static void summary_table(FILE *f, const ft_replay_result *r, const ft_report_opts *o)
{
    int assumed = r->cap_build_n == 0;
    fputs("<table class=\"num\"><thead><tr><th>policy</th><th>calls</th><th>builds</th>"
          "<th>hits</th><th>hit rate</th><th>resets</th>",
          f);
    fprintf(f, "<th>framework time%s</th>", assumed ? " (assumed)" : " (from captured fuse_ns)");
    for (int k = FT_STALE_HARMLESS; k < FT_STALE_COUNT; k++) {
        fputs("<th>stale: ", f);
        report_esc(f, ft_report_stale_label((ft_stale)k));
        fputs("</th>", f);
    }
    fputs("<th>quantizer drift</th></tr></thead><tbody>\n", f);
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        const char *note = ft_policy_note(q->policy);
        /* a user policy: its label and spec ("user-defined: key (...); ...") */
        if (!note && ft_policy_label(q->policy)) note = ft_policy_summary(q->policy);
        fprintf(f, "<tr><td class=\"pol\"><span class=\"sw\" data-policy=\"");
        report_esc(f, ft_policy_name(q->policy));
        fprintf(f, "\" style=\"background:%s\"></span>", report_policy_color(p));
        report_esc(f, ft_policy_name(q->policy));
        if (note) {
            fputs("<br><small>", f);
            report_esc(f, note);
            fputs("</small>", f);
        }
        fprintf(f,
                "</td><td>%llu</td><td>%llu</td><td>%llu</td><td>%.2f%%</td><td>%llu</td>"
                "<td>%.3f ms</td>",
                (unsigned long long)q->calls, (unsigned long long)q->builds,
                (unsigned long long)q->hits,
                q->calls ? (double)(q->hits * 10000 / q->calls) / 100.0 : 0.0,
                (unsigned long long)q->resets, ft_report_framework_ns(r, q, o, NULL) / 1e6);
        for (int k = FT_STALE_HARMLESS; k < FT_STALE_COUNT; k++)
            fprintf(f, "<td%s>%llu</td>", q->stale[k] ? " class=\"bad\"" : "",
                    (unsigned long long)q->stale[k]);
        fprintf(f, "<td>%llu</td></tr>\n", (unsigned long long)q->qdrift);
    }
    fputs("</tbody></table>\n", f);
    if (assumed)
        fprintf(f,
                "<p class=\"note\">Framework time is <b>assumed</b>: the traces captured no "
                "fuse_ns, so it is %.0f ns per plan build and %.0f ns per recipe-state reset "
                "(<code>--build-ns</code>, <code>--reset-ns</code>).</p>\n",
                o->build_ns, o->reset_ns);
    else
        fprintf(f,
                "<p class=\"note\">Framework time is modeled from the captured fuse_ns: %.0f ns "
                "per build, %.0f ns per other call, on average.</p>\n",
                ratio(r->cap_build_fuse_ns, r->cap_build_n),
                ratio(r->cap_hit_fuse_ns, r->cap_hit_n));
}

static void stale_legend(FILE *f)
{
    static const char *const meaning[FT_STALE_COUNT] = {
        "",
        "Extra or other fusions doing the same work with the same quantizers. The numbers can "
        "still differ where the two paths round to bf16: the harmless band of the numerics.",
        "Runs unfused where a fresh plan fuses; the same quantization, so the same band, but the "
        "unfused kernels' time.",
        "Runs with quantizers other than a fresh plan's (e.g. RHT kept after disable_rht): the "
        "quant band of the numerics, above the harmless one.",
        "TE raises when it runs this plan."};
    fputs("<dl class=\"legend\">\n", f);
    for (int k = FT_STALE_HARMLESS; k < FT_STALE_COUNT; k++) {
        fprintf(f, "<dt><span class=\"sw\" data-class=\"%s\" style=\"background:%s\"></span>",
                ft_stale_name((ft_stale)k), report_class_color((ft_stale)k));
        report_esc(f, ft_report_stale_label((ft_stale)k));
        fputs("</dt><dd>", f);
        report_esc(f, meaning[k]);
        fputs("</dd>\n", f);
    }
    fputs("</dl>\n", f);
}

static void groups_table(FILE *f, const ft_replay_result *r, const rd_groups *g, const char *what)
{
    if (!g->n) {
        fputs("<p>None recorded.</p>\n", f);
        return;
    }
    fprintf(f, "<table class=\"num\"><thead><tr><th>%s</th><th>calls</th>", what);
    for (uint32_t p = 0; p < r->n_policies; p++) {
        fputs("<th>", f);
        report_esc(f, ft_policy_name(r->pol[p].policy));
        fputs("<br><small>builds / resets / stale</small></th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    for (uint32_t i = 0; i < g->n; i++) {
        const rd_counts *c = &g->c[(size_t)i * r->n_policies];
        fputs("<tr><td class=\"pol\">", f);
        report_esc(f, g->name[i]);
        fprintf(f, "</td><td>%llu</td>", (unsigned long long)c[0].calls);
        for (uint32_t p = 0; p < r->n_policies; p++) {
            uint64_t st = c[p].calls - c[p].stale[FT_STALE_NONE];
            fprintf(f, "<td%s>%llu / %llu / %llu</td>", st ? " class=\"bad\"" : "",
                    (unsigned long long)c[p].builds, (unsigned long long)c[p].resets,
                    (unsigned long long)st);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

static void ranks_table(FILE *f, const ft_replay_result *r, const ft_report_data *d)
{
    fputs("<table class=\"num\"><thead><tr><th>rank</th><th>trace</th><th>calls</th>", f);
    for (uint32_t p = 0; p < r->n_policies; p++) {
        fputs("<th>", f);
        report_esc(f, ft_policy_name(r->pol[p].policy));
        fputs("<br><small>builds / resets / stale</small></th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    for (uint32_t i = 0; i < d->n_inputs; i++) {
        const rd_input *x = &d->inputs[i];
        if (x->has_rank)
            fprintf(f, "<tr><td>%lld</td><td class=\"pol\">", (long long)x->rank);
        else
            fputs("<tr><td>-</td><td class=\"pol\">", f);
        report_esc(f, x->path);
        fprintf(f, "</td><td>%llu</td>", (unsigned long long)x->pol[0].calls);
        for (uint32_t p = 0; p < r->n_policies; p++) {
            uint64_t st = x->pol[p].calls - x->pol[p].stale[FT_STALE_NONE];
            fprintf(f, "<td%s>%llu / %llu / %llu</td>", st ? " class=\"bad\"" : "",
                    (unsigned long long)x->pol[p].builds, (unsigned long long)x->pol[p].resets,
                    (unsigned long long)st);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

static void band_row(FILE *f, const char *name, const ft_band *b)
{
    fputs("<tr><td class=\"pol\">", f);
    report_esc(f, name);
    if (b->n)
        fprintf(f, "</td><td>%llu</td><td>%.4g</td><td>%.4g</td><td>%.4g</td></tr>\n",
                (unsigned long long)b->n, b->min, b->sum / (double)b->n, b->max);
    else
        fputs("</td><td>0</td><td colspan=\"3\">none measured</td></tr>\n", f);
}

/* The fresh plans' error of one format: what an error of that format is expected to be here. */
static const char *fmt_name(int k)
{
    static const char *const names[FT_QF_COUNT] = {[FT_QF_NONE] = "bf16 (no quantization)",
                                                   [FT_QF_FP8_DELAYED] = "FP8 delayed scaling",
                                                   [FT_QF_FP8_CURRENT] = "FP8 current scaling",
                                                   [FT_QF_FP8_BLOCK] = "FP8 block scaling",
                                                   [FT_QF_MXFP8] = "MXFP8",
                                                   [FT_QF_NVFP4] = "NVFP4"};
    return (unsigned)k < FT_QF_COUNT && names[k] ? names[k] : "?";
}

static void numerics_section(FILE *f, const ft_numerics_result *nr)
{
    fputs("<section id=\"numerics\"><h2>Numerics</h2>\n", f);
    fprintf(f,
            "<p>%llu of %llu grouped-MLP calls sampled and run (%llu MLP runs), chosen plans "
            "against the fresh plan and a float64 reference. All figures are relative L2 (the "
            "worst of the outputs). The <b>harmless band</b> is what an other fusion with the same "
            "quantization changes, the <b>quant band</b> what another quantization changes.</p>\n",
            (unsigned long long)nr->calls_run, (unsigned long long)nr->calls_seen,
            (unsigned long long)nr->mlp_runs);
    fputs("<p class=\"note\">How to judge them: an <i>error vs float64</i> against the fresh "
          "plans' error of the same format (rows <i>fresh plans, FORMAT</i>): that is what the "
          "format itself costs on these calls (NVFP4's 4-bit values cost far more than MXFP8's "
          "8-bit ones), so a stale plan's error is bad only above it; a <i>divergence from the "
          "fresh plan</i> against the harmless band: below its top is what rounding alone "
          "changes.</p>\n",
          f);
    fputs("<table class=\"num\"><thead><tr><th>band</th><th>comparisons</th><th>min</th>"
          "<th>mean</th><th>max</th></tr></thead><tbody>\n",
          f);
    band_row(f, "fresh plans vs float64, every format", &nr->fresh_err);
    for (int k = 0; k < FT_QF_COUNT; k++) {
        if (!nr->fresh_err_fmt[k].n) continue;
        char name[96];
        snprintf(name, sizeof name, "fresh plans vs float64, %s", fmt_name(k));
        band_row(f, name, &nr->fresh_err_fmt[k]);
    }
    band_row(f, "harmless band (other fusion, same quantization)", &nr->harmless_band);
    band_row(f, "quant band (other quantization)", &nr->quant_band);
    for (uint32_t p = 0; p < nr->n_policies; p++) {
        char name[200];
        snprintf(name, sizeof name, "%s: divergence from the fresh plan", nr->pol[p].name);
        band_row(f, name, &nr->pol[p].div);
        snprintf(name, sizeof name, "%s: error vs float64", nr->pol[p].name);
        band_row(f, name, &nr->pol[p].err);
    }
    fputs("</tbody></table>\n", f);
    chart_bands(f, nr);
    fputs("</section>\n", f);
}

/* Why each policy built plans and ran stale ones: the cause totals (causes.c). */
static void causes_section(FILE *f, const ft_replay_result *r, const ft_report_causes *c)
{
    fputs("<section id=\"explain\"><h2>Why plans were built and went stale</h2>\n<p "
          "class=\"note\">Builds by what changed since the fuser's previous call; stale hits "
          "(no build, a stale plan) by what changed since the build of the plan they ran, which "
          "the policy's key does not hold. <code>--explain</code> gives the same per call.</p>\n"
          "<table class=\"num\"><thead><tr><th>policy</th><th>calls</th><th>what</th><th>because"
          "</th><th>phases</th></tr></thead><tbody>\n",
          f);
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const report_cause_row *rows;
        const uint32_t n = report_causes_rows(c, r->pol[p].policy, &rows);
        uint32_t order[RC_MAX_ROWS];
        const uint32_t k = report_causes_sorted(rows, n, order);
        for (uint32_t i = 0; i < k; i++) {
            const report_cause_row *x = &rows[order[i]];
            fputs("<tr><td class=\"pol\">", f);
            if (!i) {
                fprintf(f, "<span class=\"sw\" data-policy=\"");
                report_esc(f, ft_policy_name(r->pol[p].policy));
                fprintf(f, "\" style=\"background:%s\"></span>", report_policy_color(p));
                report_esc(f, ft_policy_name(r->pol[p].policy));
            }
            fprintf(f, "</td><td>%llu</td><td class=\"pol\">", (unsigned long long)x->n);
            if (x->stale) {
                fprintf(f, "<span class=\"sw\" data-class=\"%s\" style=\"background:%s\"></span>",
                        ft_stale_name((ft_stale)x->stale), report_class_color((ft_stale)x->stale));
                fputs("stale hits: ", f);
                report_esc(f, ft_report_stale_label((ft_stale)x->stale));
            } else {
                fputs("builds", f);
            }
            fputs("</td><td class=\"pol\">", f);
            report_esc(f, x->text);
            fputs("</td><td class=\"pol\">", f);
            for (uint32_t j = 0; j < x->n_phases; j++) {
                fputs(j ? ", " : "", f);
                report_esc(f, x->phase[j]);
                fprintf(f, " %llu", (unsigned long long)x->phase_n[j]);
            }
            if (x->phase_other) fprintf(f, ", other %llu", (unsigned long long)x->phase_other);
            fputs("</td></tr>\n", f);
        }
    }
    fputs("</tbody></table></section>\n", f);
}

/* What the fuser model could not read from the captures and what it did instead. */
static void model_notes_section(FILE *f, const ft_replay_result *r, const ft_report_notes *n)
{
    fputs("<section id=\"model-notes\"><h2>What the model assumed</h2>\n<p class=\"note\">What "
          "the fuser model could not read from the captures, and what it did instead.</p><ul>\n",
          f);
    for (uint32_t i = 0; i < n->n_model; i++) {
        fputs("<li><b>", f);
        report_esc(f, ft_report_note_kind(n->model[i].kind));
        fputs("</b>: ", f);
        report_esc(f, n->model[i].text);
        if (r->n_traces > 1) fprintf(f, " (%u of %u traces)", n->model[i].n_traces, r->n_traces);
        fputs("</li>\n", f);
    }
    fputs("</ul></section>\n", f);
}

static void provenance(FILE *f, const ft_replay_result *r, const ft_report_data *d,
                       const ft_report_opts *o, const ft_report_html_opts *h)
{
    fputs("<section id=\"provenance\"><h2>Provenance</h2>\n<dl class=\"prov\">\n", f);
    fputs("<dt>tool</dt><dd>fusertrace " FT_TOOL_VERSION "</dd>\n", f);
    if (h && h->command) {
        fputs("<dt>command</dt><dd><code>", f);
        report_esc(f, h->command);
        fputs("</code></dd>\n", f);
    }
    fputs("<dt>policies</dt><dd>", f);
    for (uint32_t p = 0; p < r->n_policies; p++) {
        fputs(p ? ", " : "", f);
        report_esc(f, ft_policy_name(r->pol[p].policy));
    }
    fputs("</dd>\n", f);
    fprintf(f, "<dt>framework time</dt><dd>%s</dd>\n",
            r->cap_build_n ? "modeled from the captured fuse_ns" : "assumed");
    if (!r->cap_build_n)
        fprintf(f, "<dt>assumed costs</dt><dd>%.0f ns per build, %.0f ns per reset</dd>\n",
                o->build_ns, o->reset_ns);
    fprintf(f, "<dt>captured run's policy</dt><dd>%s</dd>\n",
            r->captured_policy >= 0 ? ft_policy_name((uint32_t)r->captured_policy) : "unknown");
    fputs("</dl>\n<table class=\"num\"><thead><tr><th>input</th><th>bytes</th><th>XXH3-64</th>"
          "<th>rank</th><th>host</th><th>TE</th><th>started</th><th>calls</th></tr></thead>"
          "<tbody>\n",
          f);
    for (uint32_t i = 0; d && i < d->n_inputs; i++) {
        const rd_input *x = &d->inputs[i];
        fputs("<tr><td class=\"pol\">", f);
        report_esc(f, x->path);
        fprintf(f, "</td><td>%llu</td><td><code>%016llx</code></td><td>",
                (unsigned long long)x->bytes, (unsigned long long)x->digest);
        if (x->has_rank)
            fprintf(f, "%lld", (long long)x->rank);
        else
            fputs("-", f);
        fputs("</td><td>", f);
        report_esc(f, x->host[0] ? x->host : "-");
        fputs("</td><td>", f);
        report_esc(f, x->te_version[0] ? x->te_version : "-");
        fputs("</td><td>", f);
        report_esc(f, x->started_at[0] ? x->started_at : "-");
        fprintf(f, "</td><td>%llu</td></tr>\n", (unsigned long long)x->calls);
    }
    fputs("</tbody></table>\n", f);
    for (uint32_t i = 0; d && i < d->n_warnings; i++) {
        fputs("<p class=\"warn\">Warning: ", f);
        report_esc(f, d->warnings[i]);
        fputs("</p>\n", f);
    }
    fputs("</section>\n", f);
}

static const char css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#222;margin:0 auto;"
    "max-width:1100px;padding:16px 24px}"
    "h1{font-size:22px;margin:8px 0}h2{font-size:17px;border-bottom:1px solid #ccc;"
    "padding-bottom:3px;margin-top:28px}"
    "table{border-collapse:collapse;margin:8px 0;font-size:13px}"
    "th,td{border:1px solid #ddd;padding:3px 7px;vertical-align:top}"
    "th{background:#f3f3f3;font-weight:600}"
    "table.num td{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "table.num td.pol{text-align:left;min-width:10em;white-space:normal}"
    "td.bad{background:#fde0dd}"
    ".sw{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}"
    ".note{color:#555;font-size:13px}.warn{color:#a50f15;font-weight:600}"
    "figure{margin:10px 0}svg.chart{width:100%;max-width:900px;height:auto;background:#fff}"
    ".ax{stroke:#444;fill:none}.grid{stroke:#e5e5e5}.ln{stroke-width:2}"
    ".ct{font-size:14px;font-weight:600}.tk{font-size:11px;fill:#555}.al{font-size:12px}"
    ".lg{font-size:12px}dl.legend dt{font-weight:600;margin-top:4px}dl.legend dd{margin:0 0 "
    "4px 18px;color:#444}dl.prov dt{font-weight:600;float:left;width:170px}dl.prov dd"
    "{margin-left:180px}"
    "#recommendation{background:#f0f7ee;border:1px solid #b8dcb0;padding:4px 14px;"
    "border-radius:6px}"
    "figcaption.lgd{max-width:900px;font-size:12px;margin:2px 0 0 60px}"
    "figcaption.lgd .li{display:inline-block;margin:1px 14px 1px 0;white-space:nowrap}"
    "figcaption.lgd svg.key{vertical-align:middle;margin-right:4px}"
    "figcaption.lgd small{color:#555}.dim{fill:#777}.mean{stroke:#222;stroke-width:1.5}"
    ".ref{stroke:#74add1;stroke-width:1.5;stroke-dasharray:4 3}"
    "@media print{body{max-width:none;padding:0;font-size:11px}h2{break-after:avoid}"
    "figure,table,#recommendation{break-inside:avoid}svg.chart{max-width:100%}"
    "a{color:inherit;text-decoration:none}}"
    "@page{margin:14mm}";

/* The page's check, run once it is rendered: its verdict goes into <html data-ft-check>, "ok N"
 * (N charts) or "bad: " and the first failures. It checks what a reader sees: every chart has
 * content and no text outside its frame; every axis two ticks or more, at equal steps of 1, 2 or
 * 5 x 10^k (powers of ten on log axes), whole numbers where the axis counts; no line hidden under
 * another with the same dashes; one colour per policy and per stale class wherever they appear,
 * and the harmless class never in the colour of raises; no script error. */
static const char guard_js[] =
    "window.ftErrors=0;window.addEventListener('error',function(){window.ftErrors++;});";
static const char check_js[] =
    "(function(){var bad=[],C=document.querySelectorAll('svg.chart');"
    "if(!C.length)bad.push('no chart');"
    "function num(t){var m=/^(-?[0-9.]+(?:e[-+]?[0-9]+)?)([kM]?)$/.exec(t.trim());"
    "return m?parseFloat(m[1])*(m[2]=='k'?1e3:m[2]=='M'?1e6:1):NaN;}"
    "function nice(d){var e=Math.pow(10,Math.floor(Math.log10(d)+1e-9)),m=d/e;"
    "return [1,2,5,10].some(function(x){return Math.abs(m-x)<1e-6;});}"
    "function pow10(v){var l=Math.log10(v);return Math.abs(l-Math.round(l))<1e-9;}"
    "for(var i=0;i<C.length;i++){var c=C[i],id=c.id||('chart '+i),R=c.getBoundingClientRect();"
    "if(!c.querySelector('path,rect,text'))bad.push(id+': empty');"
    "var T=c.querySelectorAll('text');"
    "for(var j=0;j<T.length;j++){var b=T[j].getBoundingClientRect();"
    "if(b.width>0&&(b.left<R.left-1||b.top<R.top-1||b.right>R.right+1||b.bottom>R.bottom+1))"
    "bad.push(id+': text outside the chart: '+T[j].textContent.slice(0,40));}"
    "['x','y'].forEach(function(a){var L=c.querySelectorAll('text.t'+a);if(!L.length)return;"
    "if(L.length<2){bad.push(id+': one '+a+' tick');return;}var v=[];"
    "for(var k=0;k<L.length;k++)v.push(num(L[k].textContent));"
    "var whole=c.getAttribute('data-int-'+a)=='1',log=c.getAttribute('data-log-'+a)=='1';"
    "for(var k=0;k<v.length;k++){if(isNaN(v[k]))bad.push(id+': tick '+L[k].textContent);"
    "else if(whole&&v[k]!=Math.round(v[k]))bad.push(id+': tick '+v[k]+' on whole numbers');"
    "else if(log&&v[k]>0&&!pow10(v[k]))bad.push(id+': log tick '+v[k]);}"
    "if(!log){var d=v[1]-v[0];for(var k=2;k<v.length;k++)"
    "if(Math.abs(v[k]-v[k-1]-d)>1e-9*Math.abs(d))bad.push(id+': uneven '+a+' ticks');"
    "if(!(d>0)||!nice(d))bad.push(id+': '+a+' tick step '+d);}});"
    "var P=c.querySelectorAll('path.ln'),Q=[];"
    "for(var k=0;k<P.length;k++){var q={n:P[k].getAttribute('data-policy'),"
    "s:(P[k].getAttribute('stroke-dasharray')||'')+'|'+(P[k].getAttribute('stroke-dashoffset')"
    "||''),p:(P[k].getAttribute('d').match(/-?[0-9.]+/g)||[]).map(Number)};"
    "Q.forEach(function(o){if(o.s!=q.s||o.p.length!=q.p.length||!q.p.length)return;var m=0;"
    "for(var z=1;z<q.p.length;z+=2)m+=Math.abs(o.p[z]-q.p[z])<1.5&&o.p[z-1]==q.p[z-1];"
    "if(m*5>=q.p.length/2*4)bad.push(id+': '+q.n+' hides '+o.n);});Q.push(q);}}"
    "var col={};document.querySelectorAll('[data-policy],[data-class]').forEach(function(e){"
    "var key=e.hasAttribute('data-policy')?'policy '+e.getAttribute('data-policy'):'class '+"
    "e.getAttribute('data-class'),g=getComputedStyle,"
    "x=e.matches('path.ln')?g(e).stroke:e.matches('span.li')?g(e.querySelector('path')).stroke:"
    "e.matches('span.sw')?g(e).backgroundColor:g(e).fill;col[key]=col[key]||{};col[key][x]=1;});"
    "for(var k in col){var n=Object.keys(col[k]).length;if(n>1)bad.push(k+': '+n+' colours');}"
    "var h=col['class harmless'],r=col['class raises'];"
    "for(var x in h||{})if(r&&r[x])bad.push('harmless in the colour of raises');"
    "if(window.ftErrors)bad.push(window.ftErrors+' script errors');"
    "document.documentElement.setAttribute('data-ft-check',"
    "bad.length?'bad: '+bad.slice(0,6).join('; '):'ok '+C.length);})();";

int ft_report_html(FILE *f, const ft_replay_result *r, const ft_numerics_result *nres,
                   const ft_report_data *d, const ft_report_opts *o, const ft_report_html_opts *h,
                   ft_err *err)
{
    ft_report_opts local;
    if (!o) {
        ft_report_opts_init(&local);
        o = &local;
    }
    const char *title = h && h->title ? h->title : "fusertrace report";
    rd_hist *seq = NULL, *step = NULL;
    char *rec = capture(rec_fn, r, o), *reading = capture(reading_fn, r, o);
    uint32_t np = r->n_policies ? r->n_policies : 1;
    if (d) {
        seq = ft_malloc(np * sizeof *seq);
        step = ft_malloc(np * sizeof *step);
    }
    if (!rec || !reading || (d && (!seq || !step))) {
        free(rec);
        free(reading);
        ft_free(seq);
        ft_free(step);
        return ft_err_set(err, FT_ENOMEM, "out of memory writing the HTML report");
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\" data-ft-check=\"unchecked\"><head><meta "
          "charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          f);
    report_esc(f, title);
    fprintf(f, "</title>\n<script>%s</script>\n<style>%s</style></head>\n<body>\n", guard_js, css);
    fputs("<h1>", f);
    report_esc(f, title);
    fprintf(f,
            "</h1>\n<p>%u trace%s, %llu calls, %llu backward records, replayed under %u "
            "plan-cache polic%s.</p>\n",
            r->n_traces, r->n_traces == 1 ? "" : "s", (unsigned long long)r->calls,
            (unsigned long long)r->backwards, r->n_policies, r->n_policies == 1 ? "y" : "ies");
    if (o->filter) {
        fputs("<p class=\"warn\">Counted: only the calls with ", f);
        report_esc(f, o->filter);
        fputs(" (every call was replayed).</p>\n", f);
    }
    fputs("<section id=\"recommendation\"><h2>Recommendation</h2>\n", f);
    bullets(f, rec);
    fputs("</section>\n<section id=\"summary\"><h2>Summary</h2>\n", f);
    summary_table(f, r, o);
    stale_legend(f);
    fputs("<h3>What it means</h3>\n", f);
    bullets(f, reading);
    fputs("</section>\n", f);
    if (d) {
        for (uint32_t p = 0; p < np; p++) {
            seq[p] = d->seq[p];
            step[p] = d->step[p];
        }
        rd_hist_align(seq, r->n_policies);
        rd_hist_align(step, r->n_policies);
        fputs("<section id=\"charts\"><h2>Along the run</h2>\n", f);
        report_chart_cumulative(f, r, seq, 1, "chart-builds", "Cumulative plan builds per policy");
        report_chart_cumulative(f, r, seq, 2, "chart-resets",
                                "Cumulative recipe-state resets per policy");
        report_chart_steps(f, r, step, o, 0, "chart-hits", "Plan-cache hit rate per step");
        report_chart_stale(f, r, seq);
        report_chart_steps(f, r, step, o, 1, "chart-time",
                           r->cap_build_n
                               ? "Framework time per step (from captured fuse_ns)"
                               : "Framework time per step (assumed cost per build and reset)");
        fputs("</section>\n<section id=\"breakdowns\"><h2>Breakdowns</h2>\n"
              "<h3>Per fuser (layer label)</h3>\n",
              f);
        groups_table(f, r, &d->labels, "fuser label");
        report_transient_html(f, r, report_esc); /* transient fusers by label (transient.c) */
        fputs("<h3>Per phase</h3>\n", f);
        groups_table(f, r, &d->phases, "phase");
        fputs("<h3>Per trace (rank)</h3>\n", f);
        ranks_table(f, r, d);
        fputs("</section>\n", f);
    }
    if (o->causes) causes_section(f, r, o->causes);
    if (nres && nres->calls_seen && !nres->time_only) numerics_section(f, nres);
    if (nres && nres->gt.on) report_gputime_html(f, nres);
    if (o->notes && o->notes->n_model) model_notes_section(f, r, o->notes);
    provenance(f, r, d, o, h);
    fprintf(f, "<script>%s</script>\n</body></html>\n", check_js);
    free(rec);
    free(reading);
    ft_free(seq);
    ft_free(step);
    if (!ferror(f)) return FT_OK;
    /* the write that failed set errno long ago; one more byte, flushed, meets the cause again
     * (a full disk, a closed pipe) in a file that is not kept anyway */
    errno = 0;
    int e = fputc('\n', f) == EOF || fflush(f) ? errno : 0;
    return ft_err_set(err, FT_EIO, "writing the HTML report failed: %s",
                      e ? strerror(e) : "a write failed");
}
