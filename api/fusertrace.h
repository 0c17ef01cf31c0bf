/*
 * fusertrace.h - the replay of a trace as a small, stable C library (libfusertrace.so,
 * `pkg-config --cflags --libs fusertrace`), for tests that assert on what TE's plan cache does
 * on a canned trace: open a trace, replay it under chosen plan-cache policies, read each
 * policy's counts and, if asked, each call's decisions. A facade over the engine (the same
 * replay as `fusertrace replay`): no other fusertrace header is needed, and no type of the
 * engine's is exposed, so the engine can change behind it.
 *
 * Stability: the functions and structs below keep their meaning within FUSERTRACE_API_VERSION;
 * a struct only ever grows at its end, behind fields that keep their offsets. Errors are
 * negative FUSERTRACE_E* codes (the engine's own), with a message that names the file and what
 * is wrong. Nothing here prints or exits.
 *
 * Memory: the counts are a few KB per replay; keeping the decisions costs about 24 bytes per
 * call and policy (a canned trace of 10^5 calls under 7 policies: about 17 MB).
 *
 * Example (docs/examples/test_canned_trace.c is a whole CMocka test):
 *
 *     fusertrace_options o = {.policies = "te-pre3410,te-3410", .keep_decisions = 1};
 *     fusertrace_replay *r;
 *     char err[512];
 *     if (fusertrace_replay_open("run.ftdb", &o, &r, err, sizeof err)) fail(err);
 *     fusertrace_counts c;
 *     fusertrace_replay_counts(r, "te-3410", &c);   // c.builds, c.stale_raises, ...
 *     fusertrace_decision d;
 *     fusertrace_replay_decision(r, "te-3410", 3, &d); // the fourth call: d.built, d.stale
 *     fusertrace_replay_close(r);
 */
#ifndef FUSERTRACE_H
#define FUSERTRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FUSERTRACE_API_VERSION 1

/* Status codes: 0, or one of these. */
enum {
    FUSERTRACE_OK = 0,
    FUSERTRACE_ENOMEM = -1,    /* out of memory */
    FUSERTRACE_EIO = -2,       /* the file cannot be read */
    FUSERTRACE_EINVAL = -3,    /* a bad argument or option (the message says which) */
    FUSERTRACE_ECORRUPT = -4,  /* the trace is damaged (the message names the chunk or table) */
    FUSERTRACE_EVERSION = -5,  /* a trace of a newer or unknown format version */
    FUSERTRACE_ENOTTRACE = -6, /* not a fusertrace trace */
    FUSERTRACE_ENOTFOUND = -9, /* a policy name (or call) that is not there */
};

/* The library's version ("0.1.0"), and the API version it implements. */
const char *fusertrace_version(void);
int fusertrace_api_version(void);

/* How to replay. Zero-initialised means every policy, no per-call decisions, the trace's env. */
typedef struct fusertrace_options {
    const char *policies;   /* comma-separated policy names, or "all"; NULL: all */
    int keep_decisions;     /* 1: keep every call's decisions (fusertrace_replay_decision) */
    const char *const *env; /* NULL-terminated "KEY=VALUE" overrides of the trace's env (as
                             * `replay --env`: "KEY=" removes a key, "KEY=null" sets null), or
                             * NULL */
    uint32_t capacity;      /* LRU capacity of dictionary stores per fuser; 0: unbounded */
} fusertrace_options;

typedef struct fusertrace_replay fusertrace_replay;

/* Replay the trace at path (.ftdb) as opts says (NULL: the defaults). 0 and *out, or a negative
 * status with the reason in err[err_cap] (may be NULL). */
int fusertrace_replay_open(const char *path, const fusertrace_options *opts,
                           fusertrace_replay **out, char *err, size_t err_cap);
void fusertrace_replay_close(fusertrace_replay *r);

/* The calls replayed, and the policies in the order they were given (or registry order). */
uint64_t fusertrace_replay_n_calls(const fusertrace_replay *r);
uint32_t fusertrace_replay_n_policies(const fusertrace_replay *r);
const char *fusertrace_replay_policy(const fusertrace_replay *r, uint32_t i); /* NULL past */
/* The policy whose decisions the captured run made (from the trace's header), or NULL. */
const char *fusertrace_replay_captured_policy(const fusertrace_replay *r);

/* What one policy did over the whole trace. */
typedef struct fusertrace_counts {
    uint64_t calls, builds, hits; /* builds + hits == calls */
    uint64_t resets;              /* calls on which reset_recipe_state ran */
    /* stale calls (a plan other than a fresh build's, whose fresh build would not do the same)
     * by what running it does */
    uint64_t stale_harmless; /* other fusion, same quantization */
    uint64_t stale_slower;   /* runs unfused where the fresh plan fuses */
    uint64_t stale_quant;    /* other quantization */
    uint64_t stale_raises;   /* TE raises */
    uint64_t qdrift;         /* a fresh plan on quantizers other than a fresh fuser's */
    uint64_t fresh_raises;   /* calls that raise whatever the policy (the same for every one) */
} fusertrace_counts;
/* 0 and *out, or FUSERTRACE_ENOTFOUND when the policy was not replayed. */
int fusertrace_replay_counts(const fusertrace_replay *r, const char *policy,
                             fusertrace_counts *out);

/* What one policy decided on one call (needs keep_decisions). */
typedef struct fusertrace_decision {
    int64_t seq;       /* the call's sequence number in the trace */
    int64_t fuser;     /* the fuser's declared id */
    const char *label; /* the fuser's label, or NULL (valid while r is open) */
    int64_t step;      /* training step, -1 when not recorded */
    int built;         /* the fusion passes ran (a plan build) */
    int reset;         /* reset_recipe_state ran */
    const char *stale; /* "none", "harmless", "slower", "quant" or "raises" */
    const char *plan;  /* the plan the call runs, e.g. "fwd[GroupedMLP_CuTeGEMMGLU(0-2)]
                        * bwd[...]" (valid while r is open) */
} fusertrace_decision;
/* Call i (0-based, in call order) under policy: 0 and *out; FUSERTRACE_ENOTFOUND when the
 * policy was not replayed or i is past the last call; FUSERTRACE_EINVAL without
 * keep_decisions. */
int fusertrace_replay_decision(const fusertrace_replay *r, const char *policy, uint64_t i,
                               fusertrace_decision *out);

#ifdef __cplusplus
}
#endif
#endif /* FUSERTRACE_H */
