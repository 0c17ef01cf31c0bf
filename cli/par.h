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

/* FUSERTRACE_MPI_SHARES=FILE (a diagnostic): one line appended to FILE, in one write (O_APPEND,
 * so the lines of a job's processes do not mix), saying what this process ran. */
void cli_par_note_share(uint32_t n_traces, uint64_t calls_run);

/* The traces this process takes part in, of n (idx[k], in trace order; returns their number),
 * and its part of each (part[k]). The job's n traces are laid end to end, each cut into size
 * units, and process p takes the p-th run of n units: with as many traces as processes or more,
 * a run of whole traces (and parts of the one or two at its ends); with fewer, a part of one or
 * two traces. Within a trace, sampled numerics call k belongs to the process whose part holds
 * k % size (ft_numerics_part). Each trace's decisions are counted by the first process taking
 * part in it (cli_par_owns). split 0 (no numerics): only the traces this process counts. */
uint32_t cli_par_share(uint32_t n, int split, uint32_t *idx, ft_numerics_part *part);
int cli_par_owns(const ft_numerics_part *part);

/* A replay's shares to process 0 (collective). Every process gives each of its traces' results
 * (own_res[n_own], own[] and part[] as cli_par_share gave: only the traces it counts are sent;
 * part NULL: all) and its causes (kept per trace, or NULL);
 * process 0 gets res (initialised for pol[n_pol], then every trace's merged in trace order, as
 * one process replaying them all gives it), per_trace[n] (may be NULL) and *causes (a new object
 * holding every trace's causes, added in trace order; NULL where own_causes is). */
int cli_par_reduce_replay(uint32_t n, const uint32_t *own, const ft_numerics_part *part,
                          uint32_t n_own, const ft_replay_result *own_res,
                          const ft_report_causes *own_causes, const uint32_t *pol, uint32_t n_pol,
                          ft_replay_result *res, ft_replay_result *per_trace,
                          ft_report_causes **causes, ft_err *err);
/* The estimate of every process's share, on process 0 (collective): calls, runs and FLOPs added,
 * memory and seconds the largest share's. */
int cli_par_reduce_estimate(ft_numerics_estimate *e, ft_err *err);
/* Numerics shares to process 0 (collective): each process gives its part of each of its traces
 * (own[n_own]; run: the observer that ran them with opts.parts, its traces in that order; NULL
 * for a process that ran none): the part's result and the outcomes of its sampled calls.
 * Process 0 joins every trace's parts in call order (ft_numerics_result_join) and merges the
 * traces in trace order into out (the policies named from pol[n_pol]): what one process gives. */
int cli_par_reduce_numerics(uint32_t n, const uint32_t *own, uint32_t n_own,
                            const ft_numerics_obs *run, const uint32_t *pol, uint32_t n_pol,
                            ft_numerics_result *out, ft_err *err);

#endif /* FT_CLI_PAR_H */
