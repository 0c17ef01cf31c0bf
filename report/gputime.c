/*
 * gputime.c - the GPU time section of a report (replay --gpu-time; numerics/ft_numerics.h, "GPU
 * time"): per policy, GPU milliseconds per step of the chosen plans, of the fresh plans and their
 * difference (what stale plans cost), with the spread of the timed rounds, as text, as the JSON
 * object "gpu_time" and as an HTML section. Every figure is labelled with the GPU it was
 * measured on and says how the sampled calls stand for the others.
 */
#include "report_int.h"

#include <string.h>

static const char *const proxy_text[] = {
    "FP8 delayed scaling timed as FP8 current scaling (its amax pass stands for the history "
    "update)",
    "2D weight tiles timed as 1D blocks (the same bytes)",
    "FP8 columnwise copies timed as a second rowwise cast (TE writes them transposed; the same "
    "bytes)"};
static const char *const proxy_key[] = {"fp8_delayed_as_current", "2d_tiles_as_1d",
                                        "fp8_columnwise_as_rowwise"};

/* What the sums are divided by: steps, or traces when no trace records steps (a trace without
 * steps counts as one step next to others that have them). */
static const char *per_word(const ft_gputime_result *g)
{
    return g->traces_no_step && !g->steps ? "trace" : "step";
}

static const char *divisor_text(const ft_gputime_result *g)
{
    if (!g->traces_no_step) return "steps";
    return g->steps ? "steps (a trace without steps counting as one)"
                    : "traces (no steps recorded)";
}

static void label(char *buf, size_t cap, const ft_gputime_result *g)
{
    snprintf(buf, cap, "measured on fusertrace's kernels on GPU %s",
             g->device[0] ? g->device : "(unnamed)");
}

/* How the sampled calls stand for the others, in one sentence. */
static void extrapolation(char *buf, size_t cap, const ft_numerics_result *nr)
{
    const ft_gputime_result *g = &nr->gt;
    snprintf(buf, cap,
             "each of the %llu counted grouped-MLP calls adds the time of its situation (shape "
             "at its token count, backward or not, the plan's fusion and quantization), timed on "
             "the first of the %llu sampled calls that ran it: the sampled calls stand for the "
             "others of their situation whatever their split sizes; the sums are divided by "
             "%llu %s",
             (unsigned long long)g->calls, (unsigned long long)nr->calls_run,
             (unsigned long long)ft_gputime_steps(g), divisor_text(g));
}

/* ---- text ------------------------------------------------------------------------------------ */

int ft_report_gputime(FILE *f, const ft_numerics_result *nr, ft_err *err)
{
    const ft_gputime_result *g = &nr->gt;
    char lab[160], ext[640];
    label(lab, sizeof lab, g);
    extrapolation(ext, sizeof ext, nr);
    fprintf(
        f,
        "gpu time: %s\n"
        "  the grouped MLP forward (and backward for grad calls) of every situation the sampled\n"
        "  calls run, as its plan runs it: fused = FC1 with the activation and z's quantization\n"
        "  in its epilogue; unfused = FC1, activation kernel, quantize kernel; then FC2. GEMMs in\n"
        "  bf16 (the quantized copies are written by the packed quantizers, not read: no MXFP8 or\n"
        "  NVFP4 tensor cores on this path); %u timed rounds after %u warm-ups, CUDA events\n",
        lab, g->rounds, g->warmup);
    fprintf(f, "  situations: %u timed, %u refused by the kernels, of %u; %llu sampled calls; ",
            g->timed, g->refused, g->situations, (unsigned long long)nr->calls_run);
    if (g->shrink > 1)
        fprintf(f, "shapes shrunk by --shrink %u (the times are those of the smaller problems)\n",
                g->shrink);
    else
        fprintf(f, "shapes at the trace's own sizes\n");
    fprintf(f, "  %s\n", ext);
    fprintf(f, "  %-16s %8s %8s %26s %26s %26s %7s %8s\n", "policy", "timed", "differ",
            "chosen ms/step [spread]", "fresh ms/step [spread]", "stale cost ms/step [spread]",
            "raises", "untimed");
    for (uint32_t p = 0; p < g->n_policies; p++) {
        const ft_gputime_policy *q = &g->pol[p];
        char col[3][64];
        for (int w = 0; w < 3; w++)
            snprintf(col[w], sizeof col[w], "%.3f [%.3f, %.3f]", ft_gputime_ms(g, p, w, 0),
                     ft_gputime_ms(g, p, w, 1), ft_gputime_ms(g, p, w, 2));
        fprintf(f, "  %-16s %8llu %8llu %26s %26s %26s %7llu %8llu\n", nr->pol[p].name,
                (unsigned long long)q->calls, (unsigned long long)q->stale_calls, col[0], col[1],
                col[2], (unsigned long long)(q->raised + q->fresh_raised),
                (unsigned long long)q->untimed);
    }
    fprintf(f,
            "  (ms per %s: the median round of the sums over the timed calls, [fastest, slowest "
            "round];\n   differ: timed calls whose situation is not the fresh plan's (stale plans, "
            "and quantizer drift\n   every policy shares: compare with rebuild-always); raises: "
            "calls whose chosen or fresh plan TE\n   raises on, left out of both sums; untimed: "
            "calls of a situation no sampled call timed)\n",
            per_word(g));
    for (size_t k = 0; k < FT_ARRAY_LEN(proxy_text); k++)
        if (g->proxies & (1u << k)) fprintf(f, "  proxy: %s\n", proxy_text[k]);
    if (g->refused) fprintf(f, "  refused (first): %s\n", g->refuse_text);
    return ferror(f) ? ft_err_set(err, FT_EIO, "writing the GPU time report failed") : FT_OK;
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static json_t *ms_json(const ft_gputime_result *g, uint32_t p, int which)
{
    json_t *o = json_object(), *rounds = json_array();
    json_object_set_new(o, "median", json_real(ft_gputime_ms(g, p, which, 0)));
    json_object_set_new(o, "min", json_real(ft_gputime_ms(g, p, which, 1)));
    json_object_set_new(o, "max", json_real(ft_gputime_ms(g, p, which, 2)));
    const uint64_t steps = ft_gputime_steps(g);
    for (uint32_t r = 0; r < g->rounds && r < FT_NX_MAX_ROUNDS && steps; r++) {
        const double c = g->pol[p].chosen_ms[r], fr = g->pol[p].fresh_ms[r];
        const double v = which == 0 ? c : which == 1 ? fr : c - fr;
        json_array_append_new(rounds, json_real(v / (double)steps));
    }
    json_object_set_new(o, "rounds", rounds);
    return o;
}

json_t *report_gputime_json(const ft_numerics_result *nr)
{
    const ft_gputime_result *g = &nr->gt;
    char lab[160], ext[640];
    label(lab, sizeof lab, g);
    extrapolation(ext, sizeof ext, nr);
    json_t *o = json_object(), *pols = json_array(), *px = json_array();
    json_object_set_new(o, "label", json_string(lab));
    json_object_set_new(o, "device", json_string(g->device));
    json_object_set_new(o, "warmup", json_integer(g->warmup));
    json_object_set_new(o, "rounds", json_integer(g->rounds));
    json_object_set_new(o, "shrink", json_integer(g->shrink));
    json_object_set_new(o, "sampled_calls", json_integer((json_int_t)nr->calls_run));
    json_object_set_new(o, "calls", json_integer((json_int_t)g->calls));
    json_object_set_new(o, "per", json_string(per_word(g)));
    json_object_set_new(o, "steps", json_integer((json_int_t)ft_gputime_steps(g)));
    json_object_set_new(o, "situations", json_integer(g->situations));
    json_object_set_new(o, "situations_timed", json_integer(g->timed));
    json_object_set_new(o, "situations_refused", json_integer(g->refused));
    json_object_set_new(o, "refuse_text", g->refused ? json_string(g->refuse_text) : json_null());
    for (size_t k = 0; k < FT_ARRAY_LEN(proxy_key); k++)
        if (g->proxies & (1u << k)) json_array_append_new(px, json_string(proxy_key[k]));
    json_object_set_new(o, "proxies", px);
    json_object_set_new(o, "timing_seconds", json_real((double)g->timing_ns * 1e-9));
    json_object_set_new(o, "extrapolation", json_string(ext));
    for (uint32_t p = 0; p < g->n_policies; p++) {
        const ft_gputime_policy *q = &g->pol[p];
        json_t *x = json_object();
        json_object_set_new(x, "policy", json_string(nr->pol[p].name));
        json_object_set_new(x, "calls_timed", json_integer((json_int_t)q->calls));
        json_object_set_new(x, "stale_calls", json_integer((json_int_t)q->stale_calls));
        json_object_set_new(x, "raised", json_integer((json_int_t)q->raised));
        json_object_set_new(x, "fresh_raised", json_integer((json_int_t)q->fresh_raised));
        json_object_set_new(x, "untimed", json_integer((json_int_t)q->untimed));
        json_object_set_new(x, "chosen_ms_per_step", ms_json(g, p, 0));
        json_object_set_new(x, "fresh_ms_per_step", ms_json(g, p, 1));
        json_object_set_new(x, "stale_cost_ms_per_step", ms_json(g, p, 2));
        json_array_append_new(pols, x);
    }
    json_object_set_new(o, "policies", pols);
    return o;
}

/* ---- HTML ------------------------------------------------------------------------------------ */

/* Text into HTML (the device's name comes from the driver). */
static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

/* Chosen and fresh ms per step per policy as paired bars (the spread as a line over each). */
static void chart(FILE *f, const ft_numerics_result *nr)
{
    const ft_gputime_result *g = &nr->gt;
    double top = 0;
    for (uint32_t p = 0; p < g->n_policies; p++)
        for (int w = 0; w < 2; w++)
            if (ft_gputime_ms(g, p, w, 2) > top) top = ft_gputime_ms(g, p, w, 2);
    if (top <= 0) return;
    const int row = 26, left = 150, width = 420, h = 20 + row * (int)g->n_policies;
    fprintf(
        f,
        "<figure><svg class=\"chart\" id=\"chart-gputime\" viewBox=\"0 0 640 %d\" width=\"640\" "
        "height=\"%d\" role=\"img\"><title>GPU ms per step: chosen (dark) and fresh (light) "
        "plans</title>\n",
        h, h);
    for (uint32_t p = 0; p < g->n_policies; p++) {
        const int y = 10 + row * (int)p;
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">", left - 6,
                y + 14);
        esc(f, nr->pol[p].name);
        fputs("</text>\n", f);
        for (int w = 0; w < 2; w++) {
            const double med = ft_gputime_ms(g, p, w, 0), lo = ft_gputime_ms(g, p, w, 1),
                         hi = ft_gputime_ms(g, p, w, 2);
            const int yy = y + 2 + 10 * w;
            fprintf(f,
                    "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"9\" fill=\"%s\"><title>%s "
                    "%.3f ms [%.3f, %.3f]</title></rect>\n",
                    left, yy, width * med / top, w ? "#9ecae1" : "#1f77b4", w ? "fresh" : "chosen",
                    med, lo, hi);
            fprintf(f, "<path d=\"M%.1f %d H%.1f\" stroke=\"#333\" stroke-width=\"1\"/>\n",
                    left + width * lo / top, yy + 4, left + width * hi / top);
        }
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">%.3f / %.3f ms</text>\n",
                left + width + 6, y + 14, ft_gputime_ms(g, p, 0, 0), ft_gputime_ms(g, p, 1, 0));
    }
    fputs("</svg></figure>\n", f);
}

void report_gputime_html(FILE *f, const ft_numerics_result *nr)
{
    const ft_gputime_result *g = &nr->gt;
    char lab[160], ext[640];
    label(lab, sizeof lab, g);
    extrapolation(ext, sizeof ext, nr);
    fputs("<section id=\"gputime\"><h2>GPU time of the plans</h2>\n<p><b>", f);
    esc(f, lab);
    fprintf(f,
            "</b>: the grouped MLP forward and backward of every situation the sampled calls run, "
            "as its plan runs it (fused: FC1 with the activation and z's quantization in its "
            "epilogue; unfused: FC1, activation kernel, quantize kernel), GEMMs in bf16, %u timed "
            "rounds after %u warm-ups. %u situations timed, %u refused, of %u%s. The stale cost "
            "includes quantizer drift that every policy shares (compare with rebuild-always); "
            "calls whose chosen or fresh plan TE raises on are left out of both sums.</p>\n<p>",
            g->rounds, g->warmup, g->timed, g->refused, g->situations,
            g->shrink > 1 ? "; shapes shrunk by --shrink (smaller problems than the trace's)" : "");
    esc(f, ext);
    fprintf(f,
            ".</p>\n<table class=\"num\"><thead><tr><th>policy</th><th>calls timed</th>"
            "<th>calls differing from the fresh plan</th><th>chosen ms per %s</th><th>fresh ms per "
            "%s</th>"
            "<th>stale cost ms per %s</th><th>spread of the stale cost</th><th>raises</th>"
            "<th>untimed</th></tr></thead><tbody>\n",
            per_word(g), per_word(g), per_word(g));
    for (uint32_t p = 0; p < g->n_policies; p++) {
        const ft_gputime_policy *q = &g->pol[p];
        const double d = ft_gputime_ms(g, p, 2, 0);
        fputs("<tr><td class=\"pol\">", f);
        esc(f, nr->pol[p].name);
        fprintf(f,
                "</td><td>%llu</td><td>%llu</td><td>%.3f</td><td>%.3f</td><td%s>%.3f</td>"
                "<td>[%.3f, %.3f]</td><td>%llu</td><td>%llu</td></tr>\n",
                (unsigned long long)q->calls, (unsigned long long)q->stale_calls,
                ft_gputime_ms(g, p, 0, 0), ft_gputime_ms(g, p, 1, 0), d > 0 ? " class=\"bad\"" : "",
                d, ft_gputime_ms(g, p, 2, 1), ft_gputime_ms(g, p, 2, 2),
                (unsigned long long)(q->raised + q->fresh_raised), (unsigned long long)q->untimed);
    }
    fputs("</tbody></table>\n", f);
    chart(f, nr);
    for (size_t k = 0; k < FT_ARRAY_LEN(proxy_text); k++)
        if (g->proxies & (1u << k)) {
            fputs("<p>Proxy: ", f);
            esc(f, proxy_text[k]);
            fputs(".</p>\n", f);
        }
    if (g->refused) {
        fputs("<p class=\"warn\">Refused by the kernels (first): ", f);
        esc(f, g->refuse_text);
        fputs("</p>\n", f);
    }
    fputs("</section>\n", f);
}
