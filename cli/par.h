/*
 * par.h - one command over the processes of an MPI job (par.c): the primitives, and the
 * reductions of a replay's partial results to process 0. One process (rank 0 of 1) without MPI
 * or without a launcher, where every function returns at once.
 *
 * start: MPI_Init when a launcher started this process (processes other than 0 then write
 * nothing); end: the status process 0 gives, MPI finalized. agree (collective): the first
 * failure of any process after a phase, on every process (err then holds its message, named by
 * process unless it is 0's). gather (collective): every process's bytes to process 0, back to
 * back in `all`, lens[cli_par_size()] their lengths. bcast (collective): process 0's bytes to
 * all.
 */
#ifndef FT_CLI_PAR_H
#define FT_CLI_PAR_H

#include "ft_common.h"
#include "ft_numerics.h"
#include "ft_replayer.h"
#include "ft_report.h"

int cli_par_start(int *argc, char ***argv);
int cli_par_end(int status);
int cli_par_rank(void);
int cli_par_size(void);
int cli_par_agree(int rc, ft_err *err);
int cli_par_gather(const ft_buf *mine, ft_buf *all, uint64_t *lens, ft_err *err);
int cli_par_bcast(void *buf, size_t len, ft_err *err);

/* The traces this process replays, of n: trace i goes to process i % size (own[n_own], in trace
 * order; returns n_own). */
uint32_t cli_par_share(uint32_t n, uint32_t *own);

/* A replay's shares to process 0 (collective). Every process gives each of its traces' results
 * (own_res[n_own], own[] as cli_par_share gave) and its causes (kept per trace, or NULL);
 * process 0 gets res (initialised for pol[n_pol], then every trace's merged in trace order, as
 * one process replaying them all gives it), per_trace[n] (may be NULL) and *causes (a new object
 * holding every trace's causes, added in trace order; NULL where own_causes is). */
int cli_par_reduce_replay(uint32_t n, const uint32_t *own, uint32_t n_own,
                          const ft_replay_result *own_res, const ft_report_causes *own_causes,
                          const uint32_t *pol, uint32_t n_pol, ft_replay_result *res,
                          ft_replay_result *per_trace, ft_report_causes **causes, ft_err *err);
/* The estimate of every process's share, on process 0 (collective): calls, runs and FLOPs added,
 * memory and seconds the largest share's. */
int cli_par_reduce_estimate(ft_numerics_estimate *e, ft_err *err);
/* Numerics shares to process 0 (collective): each process gives each of its traces' results
 * (own_res[n_own], in trace order); process 0 gets out, every trace's merged in trace order (the
 * policies named from pol[n_pol]), as one process gives it. */
int cli_par_reduce_numerics(uint32_t n, const uint32_t *own, uint32_t n_own,
                            const ft_numerics_result *own_res, const uint32_t *pol, uint32_t n_pol,
                            ft_numerics_result *out, ft_err *err);

#endif /* FT_CLI_PAR_H */
