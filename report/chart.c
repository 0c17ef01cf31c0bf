/*
 * chart.c - the SVG charts of the HTML report, drawn here with no script: axes with "nice" ticks
 * (steps of 1, 2 or 5 x 10^k, whole numbers on counts, seqs and steps, at least two ticks on
 * every axis), line charts in which series that coincide stay visible (each later one of a
 * group is dashed in its own slots of one period, so the line shows every colour in turn, and
 * the legend says which coincide), stacked bars of stale classes, and the numerics bands on a
 * log axis that starts at the smallest positive figure (a zero minimum is said, not drawn ten
 * decades long). Legends are HTML beneath each chart, so they wrap instead of being cut.
 *
 * One palette: policies by their slot (the summary table's swatches are the same), stale
 * classes and numerics bands by severity (report_class_color), never a policy's colour for a
 * class. Every element that stands for a policy or a class carries data-policy / data-class, so
 * that the page's check script (html.c) can compare the colours a reader sees.
 */
#include "report_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Policies, by slot: Okabe and Ito's colour-blind-safe set, then more of Tol's; no pure red,
 * which is the colour of raises. */
static const char *const policy_colors[] = {
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#222222", "#8c564b", "#999933",
    "#882255", "#44aa99", "#ddcc77", "#117733", "#332288", "#aa4499", "#88ccee", "#661100"};

const char *report_policy_color(uint32_t slot)
{
    return policy_colors[slot % FT_ARRAY_LEN(policy_colors)];
}

/* Stale classes by severity: fresh grey, harmless blue, slower yellow, other quantization
 * orange, raises red (ColorBrewer RdYlBu). */
const char *report_class_color(ft_stale s)
{
    static const char *const c[FT_STALE_COUNT] = {"#9e9e9e", "#74add1", "#e0b000", "#f46d43",
                                                  "#d73027"};
    return (unsigned)s < FT_STALE_COUNT ? c[s] : "#9e9e9e";
}

void report_esc(FILE *f, const char *s)
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

/* ---- ticks ----------------------------------------------------------------------------------- */
/* A step of 1, 2 or 5 x 10^k giving at most about max_ticks intervals over range; at least 1 when
 * the axis holds whole numbers. */
static double nice_step(double range, int max_ticks, int integer)
{
    if (!(range > 0)) return 1;
    const double raw = range / max_ticks, mag = pow(10.0, floor(log10(raw)));
    double step = 10 * mag;
    if (raw <= mag)
        step = mag;
    else if (raw <= 2 * mag)
        step = 2 * mag;
    else if (raw <= 5 * mag)
        step = 5 * mag;
    return integer && step < 1 ? 1 : step;
}

/* A tick label: whole numbers as they are up to 9999, then with k or M when exact. */
static void tick_text(char *buf, size_t cap, double v)
{
    const double a = fabs(v);
    if (a >= 1e6 && fmod(a, 1e5) == 0)
        snprintf(buf, cap, "%gM", v / 1e6);
    else if (a >= 1e4 && fmod(a, 100) == 0)
        snprintf(buf, cap, "%gk", v / 1e3);
    else
        snprintf(buf, cap, "%.10g", fabs(v) < 1e-12 ? 0.0 : v);
}

/* ---- the frame ------------------------------------------------------------------------------- */
double chart_tx(const svg_chart *c, double x)
{
    const double w = c->x1 > c->x0 ? c->x1 - c->x0 : 1;
    return CH_ML + (c->w - CH_ML - CH_MR) * (x - c->x0) / w;
}

double chart_ty(const svg_chart *c, double y)
{
    double v = c->log_y ? log10(1.0 + (y < 0 ? 0 : y)) : y;
    double a = c->log_y ? log10(1.0 + c->y0) : c->y0, b = c->log_y ? log10(1.0 + c->y1) : c->y1;
    if (b <= a) b = a + 1;
    return CH_MT + (c->h - CH_MT - CH_MB) * (1.0 - (v - a) / (b - a));
}

/* The y axis's top made nice: a whole tick above the data (linear), a power of ten (log). */
static void nice_top(svg_chart *c)
{
    if (c->log_y) {
        const double top = c->y1 > 1 ? c->y1 : 1;
        c->y1 = pow(10.0, ceil(log10(top) - 1e-9));
        return;
    }
    if (!(c->y1 > c->y0)) c->y1 = c->y0 + (c->int_y ? 1 : 1e-3);
    const double step = nice_step(c->y1 - c->y0, 5, c->int_y);
    c->y1 = c->y0 + ceil((c->y1 - c->y0) / step - 1e-9) * step;
}

static void y_ticks(const svg_chart *c)
{
    char buf[32];
    if (c->log_y) {
        const int decades = (int)lround(log10(c->y1 > 1 ? c->y1 : 1));
        const int every = decades > 6 ? 2 : 1;
        for (int k = -1; k <= decades; k++) {
            if (k >= 0 && k % every) continue;
            const double yv = k < 0 ? 0.0 : pow(10.0, k);
            tick_text(buf, sizeof buf, yv);
            fprintf(c->f,
                    "<path class=\"grid\" d=\"M%d %.1f H%d\"/><text x=\"%d\" y=\"%.1f\" "
                    "class=\"tk ty\" text-anchor=\"end\">%s</text>\n",
                    CH_ML, chart_ty(c, yv), c->w - CH_MR, CH_ML - 4, chart_ty(c, yv) + 4, buf);
        }
        return;
    }
    const double step = nice_step(c->y1 - c->y0, 5, c->int_y);
    for (double yv = c->y0; yv <= c->y1 + step * 1e-6; yv += step) {
        tick_text(buf, sizeof buf, yv);
        fprintf(c->f,
                "<path class=\"grid\" d=\"M%d %.1f H%d\"/><text x=\"%d\" y=\"%.1f\" class=\"tk "
                "ty\" text-anchor=\"end\">%s</text>\n",
                CH_ML, chart_ty(c, yv), c->w - CH_MR, CH_ML - 4, chart_ty(c, yv) + 4, buf);
    }
}

static void x_ticks(const svg_chart *c)
{
    char buf[32];
    const double step = nice_step(c->x1 - c->x0, 6, c->int_x);
    for (double xv = ceil(c->x0 / step - 1e-9) * step; xv <= c->x1 + step * 1e-6; xv += step) {
        tick_text(buf, sizeof buf, xv);
        fprintf(c->f,
                "<path class=\"ax\" d=\"M%.1f %d v4\"/><text x=\"%.1f\" y=\"%d\" class=\"tk tx\" "
                "text-anchor=\"middle\">%s</text>\n",
                chart_tx(c, xv), c->h - CH_MB, chart_tx(c, xv), c->h - CH_MB + 16, buf);
    }
}

void chart_open(svg_chart *c, FILE *f, const char *id, const char *title, const char *xlabel,
                const char *ylabel)
{
    c->f = f;
    if (!c->w) c->w = CH_W;
    if (!c->h) c->h = CH_H;
    c->n_legend = 0;
    nice_top(c);
    fprintf(f,
            "<figure><svg class=\"chart\" id=\"%s\" viewBox=\"0 0 %d %d\" role=\"img\" "
            "data-int-x=\"%d\" data-int-y=\"%d\" data-log-y=\"%d\" "
            "xmlns=\"http://www.w3.org/2000/svg\"><title>",
            id, c->w, c->h, c->int_x, c->int_y, c->log_y);
    report_esc(f, title);
    fprintf(f, "</title>\n<text x=\"%d\" y=\"18\" class=\"ct\">", CH_ML);
    report_esc(f, title);
    fprintf(f, "</text>\n<path class=\"ax\" d=\"M%d %d V%d H%d\"/>\n", CH_ML, CH_MT, c->h - CH_MB,
            c->w - CH_MR);
    y_ticks(c);
    x_ticks(c);
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"al\" text-anchor=\"middle\">", (CH_ML + c->w) / 2,
            c->h - 8);
    report_esc(f, xlabel);
    fprintf(f,
            "</text>\n<text x=\"14\" y=\"%d\" class=\"al\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 14 %d)\">",
            (CH_MT + c->h - CH_MB) / 2, (CH_MT + c->h - CH_MB) / 2);
    report_esc(f, ylabel);
    if (c->log_y) fputs(" (log scale)", f);
    fputs("</text>\n", f);
}

void chart_legend_add(svg_chart *c, const char *name, const char *color, const char *dash,
                      const char *note, const char *data_attr, const char *data_val)
{
    if (c->n_legend >= CH_MAX_LEGEND) return;
    chart_legend_item *li = &c->legend[c->n_legend++];
    ft_strlcpy(li->name, name, sizeof li->name);
    ft_strlcpy(li->color, color, sizeof li->color);
    ft_strlcpy(li->dash, dash ? dash : "", sizeof li->dash);
    ft_strlcpy(li->note, note ? note : "", sizeof li->note);
    ft_strlcpy(li->attr, data_attr ? data_attr : "", sizeof li->attr);
    ft_strlcpy(li->val, data_val ? data_val : "", sizeof li->val);
}

/* </svg>, then the legend as HTML (it wraps; nothing is cut), then </figure>. */
void chart_close(svg_chart *c)
{
    FILE *f = c->f;
    fputs("</svg>", f);
    if (c->n_legend) fputs("<figcaption class=\"lgd\">", f);
    for (uint32_t i = 0; i < c->n_legend; i++) {
        const chart_legend_item *li = &c->legend[i];
        fputs("<span class=\"li\"", f);
        if (li->attr[0]) {
            fprintf(f, " %s=\"", li->attr);
            report_esc(f, li->val);
            fputc('"', f);
        }
        fprintf(f,
                "><svg class=\"key\" width=\"28\" height=\"12\" viewBox=\"0 0 28 12\"><path "
                "d=\"M1 6 H27\" stroke=\"%s\" stroke-width=\"%s\"%s%s%s/></svg>",
                li->color, li->dash[0] ? "3" : "6", li->dash[0] ? " stroke-dasharray=\"" : "",
                li->dash, li->dash[0] ? "\"" : "");
        report_esc(f, li->name);
        if (li->note[0]) {
            fputs(" <small>", f);
            report_esc(f, li->note);
            fputs("</small>", f);
        }
        fputs("</span>", f);
    }
    if (c->n_legend) fputs("</figcaption>", f);
    fputs("</figure>\n", f);
}

/* ---- lines ----------------------------------------------------------------------------------- */
/* How two series share the chart: 2 the same values everywhere, 1 drawn within 1.5 px of each
 * other on four fifths of their points or more (one hides the other there), 0 apart. */
static int shared_line(const svg_chart *c, const double *a, const double *b, uint32_t n)
{
    uint32_t both = 0, close = 0, equal = 1;
    for (uint32_t k = 0; k < n; k++) {
        if (isnan(a[k]) != isnan(b[k])) equal = 0;
        if (isnan(a[k]) || isnan(b[k])) continue;
        both++;
        if (fabs(a[k] - b[k]) > 1e-9 * (fabs(a[k]) + 1)) equal = 0;
        close += fabs(chart_ty(c, a[k]) - chart_ty(c, b[k])) < 1.5;
    }
    if (equal) return 2;
    return both && close * 5 >= both * 4;
}

void chart_lines(svg_chart *c, const chart_series *s, uint32_t n_series, const double *x,
                 const double *const *y, uint32_t n, const char *unit)
{
    enum { DASH = 7 }; /* px per colour along a shared line */
    uint32_t group[CH_MAX_LEGEND], rank[CH_MAX_LEGEND], size[CH_MAX_LEGEND] = {0};
    int exact[CH_MAX_LEGEND] = {0};
    if (n_series > CH_MAX_LEGEND) n_series = CH_MAX_LEGEND;
    for (uint32_t i = 0; i < n_series; i++) {
        group[i] = i;
        for (uint32_t g = 0; g < i; g++) {
            const int how = group[g] == g ? shared_line(c, y[g], y[i], n) : 0;
            if (!how) continue;
            group[i] = g;
            exact[i] = how == 2;
            break;
        }
        rank[i] = size[group[i]]++;
    }
    /* solid lines first, then the dashed members of each group on top */
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < n_series; i++) {
            if ((rank[i] > 0) != pass) continue;
            const uint32_t g = group[i], m = size[g];
            char dash[48] = "";
            if (rank[i] > 0) snprintf(dash, sizeof dash, "%d %d", DASH, DASH * (int)(m - 1));
            fprintf(c->f, "<path class=\"ln\" data-policy=\"");
            report_esc(c->f, s[i].name);
            fprintf(c->f, "\" stroke=\"%s\" fill=\"none\"", s[i].color);
            if (dash[0])
                fprintf(c->f, " stroke-dasharray=\"%s\" stroke-dashoffset=\"%d\"", dash,
                        -DASH * (int)rank[i]);
            fputs(" d=\"", c->f);
            int pen = 0;
            for (uint32_t k = 0; k < n; k++) {
                if (isnan(y[i][k])) {
                    pen = 0;
                    continue;
                }
                fprintf(c->f, "%s%.1f %.1f", pen ? " L" : "M", chart_tx(c, x[k]),
                        chart_ty(c, y[i][k]));
                pen = 1;
            }
            fprintf(c->f, "\"><title>");
            report_esc(c->f, s[i].name);
            if (n) fprintf(c->f, ": %.6g %s at the end", y[i][n - 1], unit);
            fputs("</title></path>\n", c->f);
        }
    for (uint32_t i = 0; i < n_series; i++) {
        char note[160] = "", dash[48] = "";
        const uint32_t g = group[i];
        if (size[g] > 1 && rank[i] > 0)
            snprintf(note, sizeof note,
                     exact[i] ? "(same line as %s: striped)" : "(runs on %s's line: striped)",
                     s[g].name);
        else if (size[g] > 1)
            snprintf(note, sizeof note, "(%u policies share this line)", size[g]);
        if (rank[i] > 0) snprintf(dash, sizeof dash, "%d %d", DASH / 2 + 1, DASH / 2);
        chart_legend_add(c, s[i].name, s[i].color, dash, note, "data-policy", s[i].name);
    }
}

/* ---- the numerics bands ---------------------------------------------------------------------- */
enum { BAND_ROWS = 8 + 2 * FT_NUMERICS_MAX_POLICIES, BAND_ROW_H = 22 };

typedef struct band_row {
    char name[96];
    const ft_band *b;
    const char *color;
    const char *attr, *val; /* data-policy / data-class */
    int divergence;         /* a divergence from the fresh plan (the harmless band judges it) */
    uint64_t raised;        /* sampled calls on which the policy's plan raises where the fresh
                             * one runs (no divergence to measure) */
} band_row;

/* The quantization formats as the report names them (the fresh plans' error by format). */
static const char *fmt_label(int k)
{
    static const char *const names[FT_QF_COUNT] = {[FT_QF_NONE] = "bf16 (no quantization)",
                                                   [FT_QF_FP8_DELAYED] = "FP8 delayed scaling",
                                                   [FT_QF_FP8_CURRENT] = "FP8 current scaling",
                                                   [FT_QF_FP8_BLOCK] = "FP8 block scaling",
                                                   [FT_QF_MXFP8] = "MXFP8",
                                                   [FT_QF_NVFP4] = "NVFP4"};
    return (unsigned)k < FT_QF_COUNT && names[k] ? names[k] : "?";
}

static uint32_t band_rows(const ft_numerics_result *nr, band_row *rows)
{
    uint32_t n = 0;
    for (int k = 0; k < FT_QF_COUNT; k++) {
        if (!nr->fresh_err_fmt[k].n) continue;
        band_row *x = &rows[n++];
        *x = (band_row){.b = &nr->fresh_err_fmt[k],
                        .color = report_class_color(FT_STALE_NONE),
                        .attr = "data-class",
                        .val = "none"};
        snprintf(x->name, sizeof x->name, "fresh plans, %s: error vs float64", fmt_label(k));
    }
    rows[n++] = (band_row){.name = "harmless band: other fusion, same quantization",
                           .b = &nr->harmless_band,
                           .color = report_class_color(FT_STALE_HARMLESS),
                           .attr = "data-class",
                           .val = "harmless",
                           .divergence = 1};
    rows[n++] = (band_row){.name = "quant band: other quantization",
                           .b = &nr->quant_band,
                           .color = report_class_color(FT_STALE_QUANT),
                           .attr = "data-class",
                           .val = "quant",
                           .divergence = 1};
    for (uint32_t p = 0; p < nr->n_policies && n + 2 <= BAND_ROWS; p++) {
        const ft_numerics_policy *q = &nr->pol[p];
        band_row *d = &rows[n++];
        *d = (band_row){.b = &q->div,
                        .color = report_policy_color(p),
                        .attr = "data-policy",
                        .val = q->name,
                        .divergence = 1,
                        .raised = q->raised_stale};
        snprintf(d->name, sizeof d->name, "%s: divergence from the fresh plan", q->name);
        if (!q->harmless && !q->quant) continue; /* its error is the fresh plans' */
        band_row *e = &rows[n++];
        *e = (band_row){
            .b = &q->err, .color = report_policy_color(p), .attr = "data-policy", .val = q->name};
        snprintf(e->name, sizeof e->name, "%s: error vs float64", q->name);
    }
    return n;
}

/* One row's bar: min to max with a tick at the mean; a zero minimum as a thin line from the
 * axis start, said in words; nothing measured or all zero in words. */
static void band_bar(FILE *f, const band_row *r, int y, double x0, double x1, double a, double z)
{
    const ft_band *b = r->b;
#define BX(v) (x0 + (x1 - x0) * (log10(v) - a) / (z - a))
    char raised[64] = "";
    if (r->raised)
        snprintf(raised, sizeof raised, "; %llu more raise in TE", (unsigned long long)r->raised);
    if (!b->n) {
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"lg dim\">none measured%s</text>\n", x0 + 4,
                y + 4, raised);
        return;
    }
    const double mean = b->sum / (double)b->n;
    if (b->max <= 0) {
        fprintf(f,
                "<text x=\"%.1f\" y=\"%d\" class=\"lg dim\">0 on all %llu: identical to the "
                "fresh plan%s</text>\n",
                x0 + 4, y + 4, (unsigned long long)b->n, raised);
        return;
    }
    const double px1 = BX(b->max), pm = BX(mean > 0 ? mean : b->max);
    fprintf(f, "<g %s=\"", r->attr);
    report_esc(f, r->val);
    fprintf(f, "\" fill=\"%s\" stroke=\"%s\"><title>%llu: %.4g to %.4g, mean %.4g</title>",
            r->color, r->color, (unsigned long long)b->n, b->min, b->max, mean);
    if (b->min > 0) {
        const double px0 = BX(b->min);
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"10\"/>", px0, y - 5,
                px1 - px0 > 2 ? px1 - px0 : 2);
    } else {
        fprintf(f, "<path d=\"M%.1f %d H%.1f\" stroke-width=\"2\" stroke-dasharray=\"3 2\"/>", x0,
                y, px1);
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"3\" height=\"10\"/>", px1 - 1.5, y - 5);
    }
    fprintf(f, "<path class=\"mean\" d=\"M%.1f %d V%d\"/></g>", pm, y - 7, y + 7);
    if (b->min <= 0 || raised[0])
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"lg dim\">%s%s</text>", px1 + 6, y + 4,
                b->min <= 0 ? "min 0" : "", raised + (b->min <= 0 ? 0 : 2));
    fputc('\n', f);
#undef BX
}

void chart_bands(FILE *f, const ft_numerics_result *nr)
{
    band_row rows[BAND_ROWS];
    const uint32_t n = band_rows(nr, rows);
    double lo = INFINITY, hi = 0;
    size_t label = 0;
    for (uint32_t i = 0; i < n; i++) {
        const ft_band *b = rows[i].b;
        const double mean = b->n ? b->sum / (double)b->n : 0;
        const double v[3] = {b->min, mean, b->max};
        for (int k = 0; b->n && k < 3; k++)
            if (v[k] > 0 && v[k] < lo) lo = v[k];
        if (b->n && b->max > hi) hi = b->max;
        if (strlen(rows[i].name) > label) label = strlen(rows[i].name);
    }
    if (!(hi > 0)) lo = 1e-4, hi = 1;
    double a = floor(log10(lo)), z = ceil(log10(hi));
    if (z <= a) z = a + 1;
    const int x0 = 16 + (int)(6.8 * (double)label), w = x0 + 480, x1 = w - 30;
    enum { TOP = CH_MT + 18 }; /* the title, then the reference line's label */
    const int h = TOP + BAND_ROW_H * (int)n + 46;
    fprintf(f,
            "<figure><svg class=\"chart\" id=\"chart-bands\" viewBox=\"0 0 %d %d\" "
            "data-log-x=\"1\" xmlns=\"http://www.w3.org/2000/svg\"><title>Relative L2 error and "
            "divergence bands</title>\n<text x=\"10\" y=\"18\" class=\"ct\">Relative L2 error and "
            "divergence (log scale): min to max, tick at the mean</text>\n",
            w, h);
    const int every = z - a > 8 ? 2 : 1;
    for (double e = a; e <= z; e += 1) {
        if ((int)(e - a) % every) continue;
        const double px = x0 + (x1 - x0) * (e - a) / (z - a);
        fprintf(f,
                "<path class=\"grid\" d=\"M%.1f %d V%d\"/><text x=\"%.1f\" y=\"%d\" class=\"tk "
                "tx\" text-anchor=\"middle\">%g</text>\n",
                px, TOP, h - 30, px, h - 14, pow(10.0, e));
    }
    /* the harmless band's top, against which a divergence is judged */
    if (nr->harmless_band.n && nr->harmless_band.max > 0) {
        const double px = x0 + (x1 - x0) * (log10(nr->harmless_band.max) - a) / (z - a);
        fprintf(f,
                "<path class=\"ref\" d=\"M%.1f %d V%d\"/><text x=\"%.1f\" y=\"%d\" class=\"tk\" "
                "text-anchor=\"middle\">harmless band top</text>\n",
                px, TOP - 4, h - 34, px, TOP - 8);
    }
    for (uint32_t i = 0; i < n; i++) {
        const int y = TOP + BAND_ROW_H * (int)i + 12;
        fprintf(f, "<text x=\"10\" y=\"%d\" class=\"lg\">", y + 4);
        report_esc(f, rows[i].name);
        fputs("</text>\n", f);
        band_bar(f, &rows[i], y, x0, x1, a, z);
    }
    fputs("</svg></figure>\n", f);
}

/* ---- the charts along the run ---------------------------------------------------------------- */
static void policy_series(const ft_replay_result *r, chart_series *s)
{
    for (uint32_t p = 0; p < r->n_policies && p < CH_MAX_LEGEND; p++)
        s[p] = (chart_series){ft_policy_name(r->pol[p].policy), report_policy_color(p)};
}

void report_chart_cumulative(FILE *f, const ft_replay_result *r, const rd_hist *h, int kind,
                             const char *id, const char *title)
{
    const uint32_t n = h[0].n ? h[0].n : 1, np = r->n_policies;
    double *x = ft_calloc(n, sizeof *x), *ys = ft_calloc((size_t)n * np + 1, sizeof *ys);
    const double *y[FT_MAX_POLICIES];
    chart_series s[CH_MAX_LEGEND];
    double top = 1;
    if (!x || !ys) goto out;
    for (uint32_t k = 0; k < n; k++)
        x[k] = (double)(k + 1) * (double)h[0].width;
    for (uint32_t p = 0; p < np; p++) {
        double acc = 0, *yp = ys + (size_t)p * n;
        for (uint32_t k = 0; k < n; k++) {
            acc += (double)h[p].v[kind][k];
            yp[k] = acc;
        }
        if (acc > top) top = acc;
        y[p] = yp;
    }
    policy_series(r, s);
    svg_chart c = {.x0 = 0, .x1 = x[n - 1], .y0 = 0, .y1 = top, .log_y = 1, .int_x = 1, .int_y = 1};
    chart_open(&c, f, id, title, "seq (position in the run)", kind == 1 ? "builds" : "resets");
    chart_lines(&c, s, np, x, y, n, kind == 1 ? "builds" : "resets");
    chart_close(&c);
out:
    ft_free(x);
    ft_free(ys);
}

/* A chart that has nothing to draw says so (and still counts as a chart with content). */
static void chart_note(FILE *f, const char *id, const char *text)
{
    fprintf(f,
            "<figure><svg class=\"chart\" id=\"%s\" viewBox=\"0 0 %d 60\" "
            "xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"30\" class=\"lg\">",
            id, CH_W);
    report_esc(f, text);
    fputs("</text></svg></figure>\n", f);
}

/* Framework time per step bucket in us or ms, whichever makes the largest at least 10. */
static double step_time(const ft_replay_result *r, const ft_report_opts *o, uint64_t calls,
                        uint64_t builds, uint64_t resets)
{
    if (r->cap_build_n) {
        const double mb = (double)r->cap_build_fuse_ns / (double)r->cap_build_n;
        const double mh = r->cap_hit_n ? (double)r->cap_hit_fuse_ns / (double)r->cap_hit_n : 0;
        return (double)builds * mb + (double)(calls - builds) * mh;
    }
    return (double)builds * o->build_ns + (double)resets * o->reset_ns;
}

void report_chart_steps(FILE *f, const ft_replay_result *r, const rd_hist *h,
                        const ft_report_opts *o, int mode, const char *id, const char *title)
{
    const uint32_t n = h[0].n, np = r->n_policies;
    if (!n) {
        char t[256];
        snprintf(t, sizeof t, "%s: the traces record no steps.", title);
        chart_note(f, id, t);
        return;
    }
    double *x = ft_calloc(n, sizeof *x), *ys = ft_calloc((size_t)n * np + 1, sizeof *ys);
    const double *y[FT_MAX_POLICIES];
    chart_series s[CH_MAX_LEGEND];
    double top = 0;
    if (!x || !ys) goto out;
    for (uint32_t k = 0; k < n; k++)
        x[k] = (double)k * (double)h[0].width;
    for (uint32_t p = 0; p < np; p++) {
        double *yp = ys + (size_t)p * n;
        for (uint32_t k = 0; k < n; k++) {
            const uint64_t calls = h[p].v[0][k], builds = h[p].v[1][k], resets = h[p].v[2][k];
            yp[k] = !calls ? NAN
                    : mode ? step_time(r, o, calls, builds, resets)
                           : 100.0 * (1.0 - (double)builds / (double)calls);
            if (!isnan(yp[k]) && yp[k] > top) top = yp[k];
        }
        y[p] = yp;
    }
    /* time in us when the largest step is under 10 ms, so that the log axis has ticks */
    const double unit = mode && top < 1e7 ? 1e3 : 1e6;
    for (size_t i = 0; mode && i < (size_t)n * np; i++)
        ys[i] /= unit;
    policy_series(r, s);
    char xl[64], yl[64];
    snprintf(xl, sizeof xl, "training step%s", h[0].width > 1 ? " (buckets)" : "");
    snprintf(yl, sizeof yl, "%s %s", unit == 1e3 ? "us" : "ms",
             r->cap_build_n ? "(from captured fuse_ns)" : "(assumed)");
    svg_chart c = {.x0 = 0,
                   .x1 = x[n - 1] > 0 ? x[n - 1] : 1,
                   .y0 = 0,
                   .y1 = mode ? top / unit : 100,
                   .log_y = mode,
                   .int_x = 1};
    chart_open(&c, f, id, title, xl, mode ? yl : "hit rate %");
    chart_lines(&c, s, np, x, y, n, mode ? (unit == 1e3 ? "us" : "ms") : "%");
    chart_close(&c);
out:
    ft_free(x);
    ft_free(ys);
}

/* One policy's stale calls by class along the run: stacked bars per seq bucket. */
static void stale_bars(FILE *f, const ft_replay_result *r, const rd_hist *h, uint32_t p)
{
    const ft_policy_result *q = &r->pol[p];
    const uint32_t n = h[p].n ? h[p].n : 1;
    double top = 1;
    for (uint32_t k = 0; k < n; k++) {
        double sum = 0;
        for (int cl = 1; cl < FT_STALE_COUNT; cl++)
            sum += (double)h[p].v[2 + cl][k];
        if (sum > top) top = sum;
    }
    char id[64], title[160];
    snprintf(id, sizeof id, "chart-stale-%u", p);
    snprintf(title, sizeof title, "Stale calls of %s along the run, by consequence",
             ft_policy_name(q->policy));
    svg_chart c = {
        .x0 = 0, .x1 = (double)n * (double)h[p].width, .y1 = top, .int_x = 1, .int_y = 1};
    chart_open(&c, f, id, title, "seq (position in the run)", "stale calls per bucket");
    const double bw = (chart_tx(&c, c.x1) - chart_tx(&c, 0)) / n;
    for (uint32_t k = 0; k < n; k++) {
        double base = 0;
        for (int cl = 1; cl < FT_STALE_COUNT; cl++) {
            const double v = (double)h[p].v[2 + cl][k];
            if (!v) continue;
            const double y0 = chart_ty(&c, base), y1 = chart_ty(&c, base + v);
            fprintf(f,
                    "<rect data-class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                    "fill=\"%s\"><title>%.0f calls: %s</title></rect>\n",
                    ft_stale_name((ft_stale)cl), CH_ML + bw * k, y1, bw > 1.5 ? bw - 0.5 : bw,
                    y0 - y1, report_class_color((ft_stale)cl), v,
                    ft_report_stale_label((ft_stale)cl));
            base += v;
        }
    }
    for (int cl = 1; cl < FT_STALE_COUNT; cl++)
        if (q->stale[cl])
            chart_legend_add(&c, ft_report_stale_label((ft_stale)cl),
                             report_class_color((ft_stale)cl), NULL, NULL, "data-class",
                             ft_stale_name((ft_stale)cl));
    chart_close(&c);
}

void report_chart_stale(FILE *f, const ft_replay_result *r, const rd_hist *h)
{
    int n_charts = 0;
    for (uint32_t p = 0; p < r->n_policies; p++) {
        if (r->pol[p].calls == r->pol[p].stale[FT_STALE_NONE]) continue;
        stale_bars(f, r, h, p);
        n_charts++;
    }
    if (!n_charts)
        chart_note(f, "chart-stale", "Stale calls along the run: no policy ran a stale plan.");
}
