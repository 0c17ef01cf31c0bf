/*
 * numerics.c - the numerics section of a report: the bands and per-policy figures of a numerical
 * replay (numerics/ft_numerics.h), as text and as a JSON object that ft_report_write puts into
 * the one report document.
 */
#include "report_int.h"

#include <math.h>
#include <string.h>

static void band_text(FILE *f, const ft_band *b)
{
    if (!b->n)
        fprintf(f, "none measured");
    else
        fprintf(f, "[%.4g, %.4g] mean %.4g over %llu", b->min, b->max, b->sum / (double)b->n,
                (unsigned long long)b->n);
}

static json_t *band_json(const ft_band *b)
{
    json_t *o = json_object();
    json_object_set_new(o, "n", json_integer((json_int_t)b->n));
    json_object_set_new(o, "min", json_real(b->n ? b->min : 0.0));
    json_object_set_new(o, "max", json_real(b->n ? b->max : 0.0));
    json_object_set_new(o, "mean", json_real(b->n ? b->sum / (double)b->n : 0.0));
    return o;
}

json_t *report_numerics_json(const ft_numerics_result *r)
{
    json_t *o = json_object(), *pols = json_array();
    json_object_set_new(o, "backend", json_string(r->backend == FT_NUMERICS_CUDA ? "cuda" : "cpu"));
    json_object_set_new(o, "device", r->device[0] ? json_string(r->device) : json_null());
    json_object_set_new(o, "calls_seen", json_integer((json_int_t)r->calls_seen));
    json_object_set_new(o, "calls_run", json_integer((json_int_t)r->calls_run));
    json_object_set_new(o, "fresh_raised", json_integer((json_int_t)r->fresh_raised));
    json_object_set_new(o, "mlp_runs", json_integer((json_int_t)r->mlp_runs));
    json_object_set_new(o, "device_runs", json_integer((json_int_t)r->device_runs));
    json_object_set_new(o, "threads", json_integer(r->n_threads));
    json_object_set_new(o, "seconds", json_real((double)r->wall_ns * 1e-9));
    if (r->est_hi_s > 0) {
        json_t *e = json_object();
        json_object_set_new(e, "low", json_real(r->est_lo_s));
        json_object_set_new(e, "high", json_real(r->est_hi_s));
        json_object_set_new(o, "estimated_seconds", e);
    }
    if (r->fallback_text[0]) json_object_set_new(o, "cpu_fallback", json_string(r->fallback_text));
    json_object_set_new(o, "fresh_error", band_json(&r->fresh_err));
    json_object_set_new(o, "harmless_band", band_json(&r->harmless_band));
    json_object_set_new(o, "quant_band", band_json(&r->quant_band));
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_numerics_policy *q = &r->pol[p];
        json_t *x = json_object();
        json_object_set_new(x, "policy", json_string(q->name));
        json_object_set_new(x, "calls", json_integer((json_int_t)q->calls));
        json_object_set_new(x, "same", json_integer((json_int_t)q->same));
        json_object_set_new(x, "harmless", json_integer((json_int_t)q->harmless));
        json_object_set_new(x, "quant", json_integer((json_int_t)q->quant));
        json_object_set_new(x, "raised", json_integer((json_int_t)q->raised));
        json_object_set_new(x, "raised_stale", json_integer((json_int_t)q->raised_stale));
        json_object_set_new(x, "raise_text", q->raised ? json_string(q->raise_text) : json_null());
        json_object_set_new(x, "error", band_json(&q->err));
        json_object_set_new(x, "divergence", band_json(&q->div));
        json_object_set_new(x, "divergence_max_abs", json_real(q->div_max_abs));
        json_object_set_new(x, "nonfinite", json_integer((json_int_t)q->nonfinite));
        json_array_append_new(pols, x);
    }
    json_object_set_new(o, "policies", pols);
    return o;
}

int ft_report_numerics(FILE *f, const ft_numerics_result *r, ft_err *err)
{
    fprintf(f,
            "numerics (%s): %llu of %llu grouped-MLP calls run, %llu MLP runs, %.2f s on %u "
            "thread%s\n",
            r->backend == FT_NUMERICS_CUDA ? "cuda" : "cpu", (unsigned long long)r->calls_run,
            (unsigned long long)r->calls_seen, (unsigned long long)r->mlp_runs,
            (double)r->wall_ns * 1e-9, r->n_threads, r->n_threads == 1 ? "" : "s");
    if (r->est_hi_s > 0)
        fprintf(f, "  (estimated %.0f to %.0f s before it ran)\n", floor(r->est_lo_s),
                ceil(r->est_hi_s));
    if (r->backend == FT_NUMERICS_CUDA) {
        fprintf(f, "  device %s: %llu of %llu MLP runs on the device", r->device,
                (unsigned long long)r->device_runs, (unsigned long long)r->mlp_runs);
        if (r->device_runs < r->mlp_runs)
            fprintf(f, ", the rest on the CPU reference (the CUDA back end: %s)",
                    r->fallback_text[0] ? r->fallback_text : "?");
        fputc('\n', f);
    }
    fprintf(f, "  fresh plans vs float64 (rel L2, worst output): ");
    band_text(f, &r->fresh_err);
    fprintf(f, "\n  harmless band (fused vs unfused, same quantization): ");
    band_text(f, &r->harmless_band);
    fprintf(f, "\n  quant band (quantization differs from the fresh plan): ");
    band_text(f, &r->quant_band);
    if (r->fresh_raised)
        fprintf(f, "\n  calls whose fresh plan itself raises: %llu",
                (unsigned long long)r->fresh_raised);
    fprintf(f,
            "\n  (err: vs float64; div: vs the fresh plan; both relative L2, worst of y, dx, dW1, "
            "dW2;\n   quant includes quantizer drift that every policy shares, e.g. a same-type "
            "recipe switch\n   keeps the old quantizers: compare a policy's quant count with "
            "rebuild-always's)");
    fprintf(f, "\n  %-16s %6s %6s %8s %6s %6s %6s %10s %10s %10s %9s\n", "policy", "calls", "same",
            "harmless", "quant", "raised", "stale", "err max", "div max", "max abs", "nonfinite");
    for (uint32_t p = 0; p < r->n_policies; p++) {
        const ft_numerics_policy *q = &r->pol[p];
        fprintf(f, "  %-16s %6llu %6llu %8llu %6llu %6llu %6llu %10.4g %10.4g %10.4g %9llu\n",
                q->name, (unsigned long long)q->calls, (unsigned long long)q->same,
                (unsigned long long)q->harmless, (unsigned long long)q->quant,
                (unsigned long long)q->raised, (unsigned long long)q->raised_stale,
                q->err.n ? q->err.max : 0.0, q->div.n ? q->div.max : 0.0, q->div_max_abs,
                (unsigned long long)q->nonfinite);
    }
    for (uint32_t p = 0; p < r->n_policies; p++)
        if (r->pol[p].raised)
            fprintf(f, "  %s raised %llu times (%llu where the fresh plan runs): %s\n",
                    r->pol[p].name, (unsigned long long)r->pol[p].raised,
                    (unsigned long long)r->pol[p].raised_stale, r->pol[p].raise_text);
    return ferror(f) ? ft_err_set(err, FT_EIO, "writing the numerics report failed") : FT_OK;
}
