/*
 * synth_int.h - private to the synthetic scenario generator (synth.c, synth_keys.c).
 *
 * A scenario is a named set of defaults for one generic Megatron-style training-loop generator;
 * every scenario accepts every key. synth_keys.c holds the key table (name, kind, range,
 * meaning, base default), the scenario table (name, summary, overrides of the base defaults)
 * and the parser that turns a scenario name plus `--set key=value` pairs into a synth_cfg.
 * synth.c walks the resolved configuration and emits records into an ft_sink.
 */
#ifndef FT_SYNTH_INT_H
#define FT_SYNTH_INT_H

#include "ft_synth.h"

#include <stdint.h>

#define SYNTH_STR_MAX 256 /* longest string value of a key, incl. the terminator */

/* The resolved configuration of one synth run (see the key table in synth_keys.c). */
typedef struct synth_cfg {
    /* model shape */
    int64_t layers;        /* transformer layers (split evenly over pipeline stages) */
    int64_t experts;       /* experts per grouped MLP: GroupedLinear num_groups */
    int64_t tokens;        /* routed tokens per microbatch and MoE layer: sum of m_splits */
    int64_t hidden;        /* model width: fc1.in_features, fc2.out_features */
    int64_t ffn;           /* expert FFN width: fc1.out = 2*ffn (SwiGLU), fc2.in = ffn */
    int64_t dense_ffn;     /* FFN width of dense layers and of the shared expert */
    int64_t dense_layers;  /* the first N layers use a dense MLP instead of experts */
    int64_t shared_expert; /* bool: MoE layers also run a dense shared-expert MLP */
    int64_t tp;            /* tensor-parallel size of the dense MLPs */
    double skew;           /* Zipf exponent of expert popularity (0 = uniform) */
    double drift;          /* per-step log-normal random walk of expert popularity (sigma) */
    /* loop */
    int64_t steps, microbatches, stages;
    int64_t virtual_stages;    /* model chunks per stage (interleaved 1F1B when > 1) */
    int64_t recompute;         /* bool: full activation recompute */
    int64_t recompute_layers;  /* layers per checkpointed chunk */
    int64_t eval_every;        /* run an eval pass after every N-th step, 0 = never */
    int64_t eval_microbatches; /* microbatches of one eval pass */
    int64_t graphs;            /* bool: CUDA graphs (warm-up and capture, then replays) */
    int64_t graph_warmup;      /* eager warm-up iterations before the capture */
    /* recipes */
    char recipe[SYNTH_STR_MAX];        /* training recipe spec, e.g. "nvfp4:disable_rht=true" */
    char eval_recipe[SYNTH_STR_MAX];   /* "same", "bf16" or a recipe spec */
    char layer_recipes[SYNTH_STR_MAX]; /* comma list of per-layer specs (cycled), "" = global */
    int64_t bf16_first, bf16_last;     /* first/last N layers run with quantization disabled */
    int64_t switch_step;               /* step at which the global recipe becomes ... */
    char switch_recipe[SYNTH_STR_MAX]; /* ... a new object of this spec (-1 = never) */
    int64_t rht_flip_every;            /* flip NVFP4 disable_rht on the same object every N */
    int64_t detour_every;              /* every N steps a detour through another recipe ... */
    int64_t detour_steps;              /* ... lasting this many steps ... */
    char detour_recipe[SYNTH_STR_MAX]; /* ... of this spec; afterwards a new object ... */
    int64_t detour_flip_rht;           /* ... with NVFP4 disable_rht flipped (bool) */
    int64_t bo_every;                  /* change backward_override every N steps ... */
    char bo_values[SYNTH_STR_MAX];     /* ... cycling through these values ... */
    int64_t bo_mutate;                 /* ... on the same object (1) or one object each (0) */
    int64_t amax_every;                /* change DelayedScaling amax_history_len every N ... */
    char amax_lens[SYNTH_STR_MAX];     /* ... cycling through these lengths ... */
    int64_t amax_mutate;               /* ... on the same object (1) or one object each (0) */
    /* frozen layers */
    int64_t frozen_layers;          /* the first N layers are frozen ... */
    char frozen_ops[SYNTH_STR_MAX]; /* ... "all" parameters or only "fc1" (+ attention) ... */
    int64_t unfreeze_step;          /* ... until this step (-1 = never unfrozen) */
    /* header */
    char cc[SYNTH_STR_MAX], cudnn_frontend[SYNTH_STR_MAX], cublaslt[SYNTH_STR_MAX];
    char te_version[SYNTH_STR_MAX];
    int64_t fused_mlp;     /* NVTE_CUTEDSL_FUSED_GROUPED_MLP */
    int64_t disable_wgrad; /* NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP */
    int64_t rank, world_size;
    int64_t stage_only;           /* write only this stage's records (one rank's trace), -1 = all */
    int64_t timestamps;           /* bool: emit ns */
    char captured[SYNTH_STR_MAX]; /* none | te-pre3410 | te-3410: emit rebuilt and fuse_ns */
} synth_cfg;

/* Resolve scenario `name` with overrides into *cfg; *scenario_idx gets its table index.
 * Unknown scenario or key -> FT_ENOTFOUND, bad value -> FT_EINVAL / FT_ERANGE, naming it. */
int synth_cfg_resolve(const char *name, const ft_synth_param *params, uint32_t n_params,
                      synth_cfg *cfg, uint32_t *scenario_idx, ft_err *err);

#endif /* FT_SYNTH_INT_H */
