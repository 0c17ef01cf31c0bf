/*
 * html.c - the replay report as one self-contained HTML file: inline CSS (with a print style),
 * SVG charts drawn here, and one small inline script that only checks the page (it marks
 * #ft-status "ft-charts-ok N" when no script error fired and all N charts have content, which
 * the test reads from headless Chromium). Nothing is fetched from a network.
 *
 * Sections: recommendation, summary table, charts (cumulative builds and resets along the run
 * per policy, hit rate per step, stale calls by consequence along the run, framework time per
 * step), breakdowns per fuser label, phase and trace (rank), numerics bands when --numerics ran,
 * --explain causes when it ran, and provenance (tool version, command, inputs with size and
 * digest, options, warnings).
 */
#define _POSIX_C_SOURCE 200809L
#include "report_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FT_TOOL_VERSION
#define FT_TOOL_VERSION "unknown"
#endif

static const char *const palette[] = {
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"};
/* stale classes 1..4 */
static const char *const stale_color[FT_STALE_COUNT] = {"#999", "#9ecae1", "#fdae6b", "#c994c7",
                                                        "#de2d26"};

/* ---- text ------------------------------------------------------------------------------------ */
static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

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
                esc(f, line + (sub ? 4 : 2));
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

/* ---- charts ---------------------------------------------------------------------------------- */
enum { CW = 760, CH = 300, ML = 70, MR = 170, MT = 30, MB = 45 };

typedef struct chart {
    FILE *f;
    double x0, x1, y0, y1;
    int log_y;
} chart;

static double ty(const chart *c, double y)
{
    double v = c->log_y ? log10(1.0 + (y < 0 ? 0 : y)) : y;
    double a = c->log_y ? log10(1.0 + c->y0) : c->y0, b = c->log_y ? log10(1.0 + c->y1) : c->y1;
    if (b <= a) b = a + 1;
    return MT + (CH - MT - MB) * (1.0 - (v - a) / (b - a));
}

static double tx(const chart *c, double x)
{
    double w = c->x1 > c->x0 ? c->x1 - c->x0 : 1;
    return ML + (CW - ML - MR) * (x - c->x0) / w;
}

static void fmt_num(char *buf, size_t cap, double v)
{
    if (fabs(v) >= 1e6)
        snprintf(buf, cap, "%.3gM", v / 1e6);
    else if (fabs(v) >= 1e4)
        snprintf(buf, cap, "%.3gk", v / 1e3);
    else
        snprintf(buf, cap, "%.4g", v);
}

static void chart_begin(chart *c, FILE *f, const char *id, const char *title, const char *xlabel,
                        const char *ylabel)
{
    c->f = f;
    fprintf(f,
            "<figure><svg class=\"chart\" id=\"%s\" viewBox=\"0 0 %d %d\" role=\"img\" "
            "xmlns=\"http://www.w3.org/2000/svg\"><title>",
            id, CW, CH);
    esc(f, title);
    fprintf(f, "</title>\n<text x=\"%d\" y=\"18\" class=\"ct\">", ML);
    esc(f, title);
    fprintf(f, "</text>\n");
    /* axes and ticks */
    fprintf(f, "<path class=\"ax\" d=\"M%d %d V%d H%d\"/>\n", ML, MT, CH - MB, CW - MR);
    char buf[32];
    /* y ticks: 0 and the powers of ten on a log axis, quarters on a linear one */
    int n_y = c->log_y ? 1 + (int)ceil(log10(c->y1 > 1 ? c->y1 : 1)) : 4;
    for (int k = 0; k <= n_y; k++) {
        double yv = c->log_y ? (k ? pow(10.0, k - 1) : 0.0) : c->y0 + (c->y1 - c->y0) * k / 4.0;
        if (c->log_y && yv > c->y1 * 1.0001) break;
        double py = ty(c, yv);
        fmt_num(buf, sizeof buf, yv);
        fprintf(f,
                "<path class=\"grid\" d=\"M%d %.1f H%d\"/><text x=\"%d\" y=\"%.1f\" "
                "class=\"tk\" text-anchor=\"end\">%s</text>\n",
                ML, py, CW - MR, ML - 4, py + 4, buf);
    }
    for (int k = 0; k <= 4; k++) {
        /* seqs and steps are integers: whole ticks once the axis spans a few */
        double xv = c->x0 + (c->x1 - c->x0) * k / 4.0;
        if (c->x1 - c->x0 >= 4) xv = round(xv);
        fmt_num(buf, sizeof buf, xv);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"tk\" text-anchor=\"middle\">%s</text>\n",
                tx(c, xv), CH - MB + 16, buf);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"al\" text-anchor=\"middle\">", (ML + CW - MR) / 2,
            CH - 8);
    esc(f, xlabel);
    fprintf(f,
            "</text>\n<text x=\"14\" y=\"%d\" class=\"al\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 14 %d)\">",
            (MT + CH - MB) / 2, (MT + CH - MB) / 2);
    esc(f, ylabel);
    if (c->log_y) fputs(" (log scale)", f);
    fputs("</text>\n", f);
}

static void chart_legend(chart *c, int i, const char *color, const char *name)
{
    int y = MT + 8 + 16 * i;
    fprintf(c->f,
            "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"10\" fill=\"%s\"/><text x=\"%d\" "
            "y=\"%d\" class=\"lg\">",
            CW - MR + 10, y - 9, color, CW - MR + 26, y);
    esc(c->f, name);
    fputs("</text>\n", c->f);
}

static void chart_end(chart *c)
{
    fputs("</svg></figure>\n", c->f);
}

/* One polyline per series: y[s][k] at x[k] for k < n (NaN: a gap). */
static void chart_lines(chart *c, uint32_t n_series, const char *const *names, const double *x,
                        const double *const *y, uint32_t n, const char *unit)
{
    for (uint32_t s = 0; s < n_series; s++) {
        const char *color = palette[s % FT_ARRAY_LEN(palette)];
        fprintf(c->f, "<path class=\"ln\" stroke=\"%s\" fill=\"none\" d=\"", color);
        int pen = 0;
        for (uint32_t k = 0; k < n; k++) {
            if (isnan(y[s][k])) {
                pen = 0;
                continue;
            }
            fprintf(c->f, "%s%.1f %.1f", pen ? " L" : "M", tx(c, x[k]), ty(c, y[s][k]));
            pen = 1;
        }
        fprintf(c->f, "\"><title>");
        esc(c->f, names[s]);
        if (n) fprintf(c->f, ": %.6g %s at the end", y[s][n - 1], unit);
        fputs("</title></path>\n", c->f);
        chart_legend(c, (int)s, color, names[s]);
    }
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
        esc(f, ft_report_stale_label((ft_stale)k));
        fputs("</th>", f);
    }
    fputs("<th>quantizer drift</th></tr></thead><tbody>\n", f);
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        const char *note = ft_policy_note(q->policy);
        /* a user policy: its label and spec ("user-defined: key (...); ...") */
        if (!note && ft_policy_label(q->policy)) note = ft_policy_summary(q->policy);
        fprintf(f, "<tr><td class=\"pol\"><span class=\"sw\" style=\"background:%s\"></span>",
                palette[p % FT_ARRAY_LEN(palette)]);
        esc(f, ft_policy_name(q->policy));
        if (note) {
            fputs("<br><small>", f);
            esc(f, note);
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
        fprintf(f, "<dt><span class=\"sw\" style=\"background:%s\"></span>", stale_color[k]);
        esc(f, ft_report_stale_label((ft_stale)k));
        fputs("</dt><dd>", f);
        esc(f, meaning[k]);
        fputs("</dd>\n", f);
    }
    fputs("</dl>\n", f);
}

/* Cumulative kind (1 builds, 2 resets) along the run, one line per policy. */
static void chart_cumulative(FILE *f, const ft_replay_result *r, const rd_hist *h, int kind,
                             const char *id, const char *title)
{
    uint32_t n = h[0].n ? h[0].n : 1;
    double *x = ft_calloc(n, sizeof *x);
    double *ys = ft_calloc((size_t)n * r->n_policies + 1, sizeof *ys);
    const double *y[FT_MAX_POLICIES];
    const char *names[FT_MAX_POLICIES];
    double top = 1;
    if (!x || !ys) goto out;
    for (uint32_t k = 0; k < n; k++)
        x[k] = (double)(k + 1) * (double)h[0].width;
    for (uint32_t p = 0; p < r->n_policies; p++) {
        double acc = 0, *yp = ys + (size_t)p * n;
        for (uint32_t k = 0; k < n; k++) {
            acc += (double)h[p].v[kind][k];
            yp[k] = acc;
        }
        if (acc > top) top = acc;
        y[p] = yp;
        names[p] = ft_policy_name(r->pol[p].policy);
    }
    chart c = {f, 0, x[n - 1], 0, top, 1};
    chart_begin(&c, f, id, title, "seq (position in the run)", kind == 1 ? "builds" : "resets");
    chart_lines(&c, r->n_policies, names, x, y, n, kind == 1 ? "builds" : "resets");
    chart_end(&c);
out:
    ft_free(x);
    ft_free(ys);
}

/* Per step bucket: hit rate (mode 0) or framework time in ms (mode 1), one line per policy. */
static void chart_steps(FILE *f, const ft_replay_result *r, const rd_hist *h,
                        const ft_report_opts *o, int mode, const char *id, const char *title)
{
    uint32_t n = h[0].n;
    if (!n) {
        fprintf(f,
                "<figure><svg class=\"chart\" id=\"%s\" viewBox=\"0 0 %d 60\" "
                "xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"30\">",
                id, CW);
        esc(f, title);
        fputs(": the traces record no steps.</text></svg></figure>\n", f);
        return;
    }
    double *x = ft_calloc(n, sizeof *x);
    double *ys = ft_calloc((size_t)n * r->n_policies + 1, sizeof *ys);
    const double *y[FT_MAX_POLICIES];
    const char *names[FT_MAX_POLICIES];
    double top = mode ? 1e-6 : 100;
    double mb = ratio(r->cap_build_fuse_ns, r->cap_build_n),
           mh = ratio(r->cap_hit_fuse_ns, r->cap_hit_n);
    if (!x || !ys) goto out;
    for (uint32_t k = 0; k < n; k++)
        x[k] = (double)k * (double)h[0].width;
    for (uint32_t p = 0; p < r->n_policies; p++) {
        double *yp = ys + (size_t)p * n;
        for (uint32_t k = 0; k < n; k++) {
            uint64_t calls = h[p].v[0][k], builds = h[p].v[1][k], resets = h[p].v[2][k];
            if (!calls) {
                yp[k] = NAN;
                continue;
            }
            if (!mode)
                yp[k] = 100.0 * (1.0 - (double)builds / (double)calls);
            else if (r->cap_build_n)
                yp[k] = ((double)builds * mb + (double)(calls - builds) * mh) / 1e6;
            else
                yp[k] = ((double)builds * o->build_ns + (double)resets * o->reset_ns) / 1e6;
            if (mode && yp[k] > top) top = yp[k];
        }
        y[p] = yp;
        names[p] = ft_policy_name(r->pol[p].policy);
    }
    char xl[64];
    snprintf(xl, sizeof xl, "training step%s", h[0].width > 1 ? " (buckets)" : "");
    chart c = {f, 0, x[n - 1] > 0 ? x[n - 1] : 1, 0, top, mode};
    chart_begin(&c, f, id, title, xl,
                mode ? (r->cap_build_n ? "ms (from captured fuse_ns)" : "ms (assumed)")
                     : "hit rate %");
    chart_lines(&c, r->n_policies, names, x, y, n, mode ? "ms" : "%");
    chart_end(&c);
out:
    ft_free(x);
    ft_free(ys);
}

/* Stale calls by class along the run: stacked bars per seq bucket, one chart per policy that
 * ran stale plans; a note in one chart when none did. */
static int chart_stale(FILE *f, const ft_replay_result *r, const rd_hist *h)
{
    int n_charts = 0;
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_policy_result *q = &r->pol[p];
        if (q->calls == q->stale[FT_STALE_NONE]) continue;
        uint32_t n = h[p].n ? h[p].n : 1;
        double top = 1;
        for (uint32_t k = 0; k < n; k++) {
            double s = 0;
            for (int c = 1; c < FT_STALE_COUNT; c++)
                s += (double)h[p].v[2 + c][k];
            if (s > top) top = s;
        }
        char id[64], title[160];
        snprintf(id, sizeof id, "chart-stale-%u", p);
        snprintf(title, sizeof title, "Stale calls of %s along the run, by consequence",
                 ft_policy_name(q->policy));
        chart c = {f, 0, (double)n * (double)h[p].width, 0, top, 0};
        chart_begin(&c, f, id, title, "seq (position in the run)", "stale calls per bucket");
        double bw = (double)(CW - ML - MR) / n;
        for (uint32_t k = 0; k < n; k++) {
            double base = 0;
            for (int cl = 1; cl < FT_STALE_COUNT; cl++) {
                double v = (double)h[p].v[2 + cl][k];
                if (!v) continue;
                double y0 = ty(&c, base), y1 = ty(&c, base + v);
                fprintf(f,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                        "fill=\"%s\"><title>%.0f calls: %s</title></rect>\n",
                        ML + bw * k, y1, bw > 1.5 ? bw - 0.5 : bw, y0 - y1, stale_color[cl], v,
                        ft_report_stale_label((ft_stale)cl));
                base += v;
            }
        }
        int li = 0;
        for (int cl = 1; cl < FT_STALE_COUNT; cl++)
            if (q->stale[cl])
                chart_legend(&c, li++, stale_color[cl], ft_report_stale_label((ft_stale)cl));
        chart_end(&c);
        n_charts++;
    }
    if (!n_charts) {
        fprintf(f,
                "<figure><svg class=\"chart\" id=\"chart-stale\" viewBox=\"0 0 %d 60\" "
                "xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"30\">Stale calls "
                "along the run: no policy ran a stale plan.</text></svg></figure>\n",
                CW);
        n_charts = 1;
    }
    return n_charts;
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
        esc(f, ft_policy_name(r->pol[p].policy));
        fputs("<br><small>builds / resets / stale</small></th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    for (uint32_t i = 0; i < g->n; i++) {
        const rd_counts *c = &g->c[(size_t)i * r->n_policies];
        fputs("<tr><td class=\"pol\">", f);
        esc(f, g->name[i]);
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
        esc(f, ft_policy_name(r->pol[p].policy));
        fputs("<br><small>builds / resets / stale</small></th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    for (uint32_t i = 0; i < d->n_inputs; i++) {
        const rd_input *x = &d->inputs[i];
        if (x->has_rank)
            fprintf(f, "<tr><td>%lld</td><td class=\"pol\">", (long long)x->rank);
        else
            fputs("<tr><td>-</td><td class=\"pol\">", f);
        esc(f, x->path);
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
    esc(f, name);
    if (b->n)
        fprintf(f, "</td><td>%llu</td><td>%.4g</td><td>%.4g</td><td>%.4g</td></tr>\n",
                (unsigned long long)b->n, b->min, b->sum / (double)b->n, b->max);
    else
        fputs("</td><td>0</td><td colspan=\"3\">none measured</td></tr>\n", f);
}

/* Bands as ranges on a log axis (min to max, a tick at the mean). */
static void chart_bands(FILE *f, const ft_numerics_result *nr)
{
    const ft_band *b[3 + FT_NUMERICS_MAX_POLICIES];
    const char *names[3 + FT_NUMERICS_MAX_POLICIES];
    uint32_t n = 0;
    b[n] = &nr->fresh_err, names[n++] = "fresh plans vs float64";
    b[n] = &nr->harmless_band, names[n++] = "harmless band (other fusion, same quantization)";
    b[n] = &nr->quant_band, names[n++] = "quant band (other quantization)";
    for (uint32_t p = 0; p < nr->n_policies && n < FT_ARRAY_LEN(b); p++)
        b[n] = &nr->pol[p].div, names[n++] = nr->pol[p].name;
    double lo = 1e300, hi = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!b[i]->n) continue;
        double m = b[i]->min > 0 ? b[i]->min : 1e-12;
        if (m < lo) lo = m;
        if (b[i]->max > hi) hi = b[i]->max;
    }
    if (hi <= 0 || lo >= hi) {
        lo = 1e-8;
        hi = 1;
    }
    double a = floor(log10(lo)), z = ceil(log10(hi));
    if (z <= a) z = a + 1;
    int h = MT + 22 * (int)n + 40;
    fprintf(f,
            "<figure><svg class=\"chart\" id=\"chart-bands\" viewBox=\"0 0 %d %d\" "
            "xmlns=\"http://www.w3.org/2000/svg\"><title>Relative L2 divergence bands</title>\n"
            "<text x=\"10\" y=\"18\" class=\"ct\">Relative L2 error and divergence (log "
            "scale): min to max, tick at the mean</text>\n",
            CW, h);
    int x0 = 300, x1 = CW - 30;
    for (double e = a; e <= z; e++) {
        double px = x0 + (x1 - x0) * (e - a) / (z - a);
        fprintf(f,
                "<path class=\"grid\" d=\"M%.1f %d V%d\"/><text x=\"%.1f\" y=\"%d\" class=\"tk\" "
                "text-anchor=\"middle\">1e%.0f</text>\n",
                px, MT, h - 30, px, h - 14, e);
    }
    for (uint32_t i = 0; i < n; i++) {
        int y = MT + 22 * (int)i + 12;
        fprintf(f, "<text x=\"10\" y=\"%d\" class=\"lg\">", y + 4);
        esc(f, names[i]);
        fputs("</text>\n", f);
        if (!b[i]->n) continue;
        double mn = b[i]->min > 0 ? b[i]->min : pow(10, a), mx = b[i]->max > 0 ? b[i]->max : mn;
        double mean = b[i]->sum / (double)b[i]->n;
        double p0 = x0 + (x1 - x0) * (log10(mn) - a) / (z - a);
        double p1 = x0 + (x1 - x0) * (log10(mx) - a) / (z - a);
        double pm = x0 + (x1 - x0) * (log10(mean > 0 ? mean : mn) - a) / (z - a);
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"10\" fill=\"%s\"><title>%llu: "
                "%.4g to %.4g, mean %.4g</title></rect><path class=\"ax\" d=\"M%.1f %d V%d\"/>\n",
                p0, y - 5, p1 - p0 > 2 ? p1 - p0 : 2, palette[i % FT_ARRAY_LEN(palette)],
                (unsigned long long)b[i]->n, b[i]->min, b[i]->max, mean, pm, y - 7, y + 7);
    }
    fputs("</svg></figure>\n", f);
}

static void numerics_section(FILE *f, const ft_numerics_result *nr)
{
    fputs("<section id=\"numerics\"><h2>Numerics</h2>\n", f);
    fprintf(f,
            "<p>%llu of %llu grouped-MLP calls sampled and run (%llu MLP runs), chosen plans "
            "against the fresh plan and a float64 reference. The bands are relative L2 "
            "divergences: the <b>harmless band</b> is what an other fusion with the same "
            "quantization changes, the <b>quant band</b> what another quantization changes.</p>\n",
            (unsigned long long)nr->calls_run, (unsigned long long)nr->calls_seen,
            (unsigned long long)nr->mlp_runs);
    fputs("<table class=\"num\"><thead><tr><th>band</th><th>comparisons</th><th>min</th>"
          "<th>mean</th><th>max</th></tr></thead><tbody>\n",
          f);
    band_row(f, "fresh plans vs float64", &nr->fresh_err);
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

static void explain_section(FILE *f, const ft_replay_result *r, const ft_report_data *d)
{
    fputs("<section id=\"explain\"><h2>Why plans were built (--explain)</h2>\n"
          "<table class=\"num\"><thead><tr><th>cause (what changed since the fuser's previous "
          "call)</th>",
          f);
    for (uint32_t p = 0; p < r->n_policies; p++) {
        fputs("<th>", f);
        esc(f, ft_policy_name(r->pol[p].policy));
        fputs("</th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    for (uint32_t k = 0; k < d->n_causes; k++) {
        fputs("<tr><td class=\"pol\">", f);
        const unsigned bit = 1u << d->cause_bit[k];
        esc(f, bit == FT_WHY_F ? "f (first op requiring backward: grad mode)"
                               : report_cause_name(bit));
        fputs("</td>", f);
        for (uint32_t p = 0; p < r->n_policies; p++)
            fprintf(f, "<td>%llu</td>", (unsigned long long)d->cause_n[k][p]);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table><p class=\"note\">A build can have several causes.</p></section>\n", f);
}

static void provenance(FILE *f, const ft_replay_result *r, const ft_report_data *d,
                       const ft_report_opts *o, const ft_report_html_opts *h)
{
    fputs("<section id=\"provenance\"><h2>Provenance</h2>\n<dl class=\"prov\">\n", f);
    fputs("<dt>tool</dt><dd>fusertrace " FT_TOOL_VERSION "</dd>\n", f);
    if (h && h->command) {
        fputs("<dt>command</dt><dd><code>", f);
        esc(f, h->command);
        fputs("</code></dd>\n", f);
    }
    fputs("<dt>policies</dt><dd>", f);
    for (uint32_t p = 0; p < r->n_policies; p++) {
        fputs(p ? ", " : "", f);
        esc(f, ft_policy_name(r->pol[p].policy));
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
        esc(f, x->path);
        fprintf(f, "</td><td>%llu</td><td><code>%016llx</code></td><td>",
                (unsigned long long)x->bytes, (unsigned long long)x->digest);
        if (x->has_rank)
            fprintf(f, "%lld", (long long)x->rank);
        else
            fputs("-", f);
        fputs("</td><td>", f);
        esc(f, x->host[0] ? x->host : "-");
        fputs("</td><td>", f);
        esc(f, x->te_version[0] ? x->te_version : "-");
        fputs("</td><td>", f);
        esc(f, x->started_at[0] ? x->started_at : "-");
        fprintf(f, "</td><td>%llu</td></tr>\n", (unsigned long long)x->calls);
    }
    fputs("</tbody></table>\n", f);
    for (uint32_t i = 0; d && i < d->n_warnings; i++) {
        fputs("<p class=\"warn\">Warning: ", f);
        esc(f, d->warnings[i]);
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
    "table.num td{text-align:right;font-variant-numeric:tabular-nums}"
    "table.num td.pol{text-align:left;min-width:10em}td.bad{background:#fde0dd}"
    ".sw{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}"
    ".note{color:#555;font-size:13px}.warn{color:#a50f15;font-weight:600}"
    "figure{margin:10px 0}svg.chart{width:100%;max-width:900px;height:auto;background:#fff}"
    ".ax{stroke:#444;fill:none}.grid{stroke:#e5e5e5}.ln{stroke-width:2}"
    ".ct{font-size:14px;font-weight:600}.tk{font-size:11px;fill:#555}.al{font-size:12px}"
    ".lg{font-size:12px}dl.legend dt{font-weight:600;margin-top:4px}dl.legend dd{margin:0 0 "
    "4px 18px;color:#444}dl.prov dt{font-weight:600;float:left;width:170px}dl.prov dd"
    "{margin-left:180px}"
    "#recommendation{background:#f0f7ee;border:1px solid #b8dcb0;padding:4px 14px;"
    "border-radius:6px}#ft-status{color:#999;font-size:11px}"
    "@media print{body{max-width:none;padding:0;font-size:11px}h2{break-after:avoid}"
    "figure,table,#recommendation{break-inside:avoid}svg.chart{max-width:100%}"
    "#ft-status{display:none}a{color:inherit;text-decoration:none}}"
    "@page{margin:14mm}";

/* Marks the page only when no script error fired and every chart has drawn content. */
static const char guard_js[] =
    "window.ftErrors=0;window.addEventListener('error',function(){window.ftErrors++;});";
static const char check_js[] =
    "(function(){var c=document.querySelectorAll('svg.chart'),ok=c.length>0;"
    "for(var i=0;i<c.length;i++){if(!c[i].querySelector('path,rect,text'))ok=false;}"
    "var m=document.getElementById('ft-status');ok=ok&&!window.ftErrors;"
    "m.textContent=ok?'ft-charts-ok '+c.length:'ft-charts-bad';"
    "m.setAttribute('data-ok',ok?'1':'0');})();";

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
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>",
          f);
    esc(f, title);
    fprintf(f, "</title>\n<script>%s</script>\n<style>%s</style></head>\n<body>\n", guard_js, css);
    fputs("<h1>", f);
    esc(f, title);
    fprintf(f,
            "</h1>\n<p>%u trace%s, %llu calls, %llu backward records, replayed under %u "
            "plan-cache polic%s. <span id=\"ft-status\" data-ok=\"0\">ft-charts-unchecked</span>"
            "</p>\n",
            r->n_traces, r->n_traces == 1 ? "" : "s", (unsigned long long)r->calls,
            (unsigned long long)r->backwards, r->n_policies, r->n_policies == 1 ? "y" : "ies");
    if (o->filter) {
        fputs("<p class=\"warn\">Counted: only the calls with ", f);
        esc(f, o->filter);
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
        chart_cumulative(f, r, seq, 1, "chart-builds", "Cumulative plan builds per policy");
        chart_cumulative(f, r, seq, 2, "chart-resets", "Cumulative recipe-state resets per policy");
        chart_steps(f, r, step, o, 0, "chart-hits", "Plan-cache hit rate per step");
        chart_stale(f, r, seq);
        chart_steps(f, r, step, o, 1, "chart-time",
                    r->cap_build_n ? "Framework time per step (from captured fuse_ns)"
                                   : "Framework time per step (assumed cost per build and reset)");
        fputs("</section>\n<section id=\"breakdowns\"><h2>Breakdowns</h2>\n"
              "<h3>Per fuser (layer label)</h3>\n",
              f);
        groups_table(f, r, &d->labels, "fuser label");
        report_transient_html(f, r, esc); /* transient fusers by label (transient.c) */
        fputs("<h3>Per phase</h3>\n", f);
        groups_table(f, r, &d->phases, "phase");
        fputs("<h3>Per trace (rank)</h3>\n", f);
        ranks_table(f, r, d);
        fputs("</section>\n", f);
    }
    if (nres && nres->calls_seen && !nres->time_only) numerics_section(f, nres);
    if (nres && nres->gt.on) report_gputime_html(f, nres);
    if (d && d->n_causes) explain_section(f, r, d);
    provenance(f, r, d, o, h);
    fprintf(f, "<script>%s</script>\n</body></html>\n", check_js);
    free(rec);
    free(reading);
    ft_free(seq);
    ft_free(step);
    return ferror(f) ? ft_err_set(err, FT_EIO, "writing the HTML report failed") : FT_OK;
}
