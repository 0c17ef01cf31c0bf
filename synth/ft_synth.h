/*
 * ft_synth.h - synthetic training runs: named scenarios of one generic Megatron-style
 * training-loop generator (pipelines, recompute, evals, CUDA graphs, routing, recipe
 * schedules), emitted as capture records into an ft_sink (a trace, a JSONL stream, or anything
 * else that takes records).
 */
#ifndef FT_SYNTH_H
#define FT_SYNTH_H

#include "ft_recorder.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- synthetic scenarios ------------------------------------------------------------------ */
typedef struct ft_synth_param {
    const char *key;   /* e.g. "layers" */
    const char *value; /* text, parsed by the scenario */
} ft_synth_param;

typedef struct ft_synth_scenario {
    const char *name;    /* e.g. "recompute" */
    const char *summary; /* one line for `synth --list` */
    const char *keys;    /* "key=default: meaning" lines for `synth --list` */
} ft_synth_scenario;

uint32_t ft_synth_n_scenarios(void);
const ft_synth_scenario *ft_synth_scenario_at(uint32_t i);
/* Generate scenario `name` with overrides, deterministic per seed, into sink. */
int ft_synth_run(const char *name, const ft_synth_param *params, uint32_t n_params, uint64_t seed,
                 ft_sink *sink, ft_err *err);

#ifdef __cplusplus
}
#endif
#endif /* FT_SYNTH_H */
