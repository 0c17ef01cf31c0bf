/*
 * par.c - one command spread over the processes of an MPI job (`mpirun -n N fusertrace replay
 * ...`, `srun ... fusertrace replay ...`): starting and ending MPI, the processes' agreement on
 * the first failure after each phase, and the gathers that bring each process's partial results
 * to process 0, which alone writes the report.
 *
 * Built with MPI only when the build asks for it (-DFT_MPI=ON: FT_HAVE_MPI); without it, and in
 * an MPI build started without a launcher, there is one process and every function here is a
 * no-op that returns at once, so the command behaves exactly as it does without MPI. MPI starts
 * only when a launcher's variables are set (Open MPI's mpirun, PMIx or PMI: srun --mpi=pmix).
 * Processes other than 0 write nothing: their stdout and stderr go to /dev/null once MPI has
 * started, and their failures reach process 0 through cli_par_agree.
 *
 * Every process must reach every collective call in the same order: the command calls each
 * phase's agreement whether or not its own phase failed, so no process waits on one that gave
 * up. A process that dies (a signal, a kill) is the launcher's to notice: mpirun then ends the
 * job with a non-zero status.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "par.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef FT_HAVE_MPI
#include <mpi.h>
static int g_started;
#endif

static int g_rank, g_size = 1;

int cli_par_rank(void)
{
    return g_rank;
}

int cli_par_size(void)
{
    return g_size;
}

#ifdef FT_HAVE_MPI
/* Whether a launcher started this process as part of a job. */
static int mpi_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < FT_ARRAY_LEN(vars); i++)
        if (getenv(vars[i])) return 1;
    return 0;
}
#endif

int cli_par_start(int *argc, char ***argv)
{
#ifdef FT_HAVE_MPI
    if (!mpi_launched()) {
        const char *nt = getenv("SLURM_NTASKS");
        if (nt && atoi(nt) > 1 && getenv("SLURM_PROCID"))
            fprintf(stderr,
                    "fusertrace: warning: Slurm started %s tasks but no MPI launcher's variables "
                    "are set, so each task replays every trace alone; run srun --mpi=pmix\n",
                    nt);
        return FT_OK;
    }
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "fusertrace: MPI_Init failed\n");
        return FT_EIO;
    }
    g_started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (g_rank != 0) { /* process 0 alone speaks */
        /* the descriptors, not the streams: stdout may be a filter in front of the terminal
         * (cli/term.c), which freopen cannot reopen */
        const int fd = open("/dev/null", O_WRONLY);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0) {
            MPI_Abort(MPI_COMM_WORLD, FT_EXIT_INTERNAL);
            return FT_EIO;
        }
        if (fd > STDERR_FILENO) close(fd);
    }
#else
    (void)argc;
    (void)argv;
#endif
    return FT_OK;
}

int cli_par_end(int status)
{
#ifdef FT_HAVE_MPI
    if (g_started) {
        /* every process exits with the status process 0 gives (they agreed on it) */
        int st = status;
        MPI_Bcast(&st, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Finalize();
        g_started = 0;
        return st;
    }
#endif
    return status;
}

int cli_par_agree(int rc, ft_err *err)
{
#ifdef FT_HAVE_MPI
    if (g_size < 2) return rc;
    /* the lowest process that failed speaks for all */
    int mine = rc ? g_rank : g_size, first = g_size;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, FT_EXIT_INTERNAL);
    if (first == g_size) return FT_OK;
    struct {
        int rc;
        char msg[FT_ERR_MAX];
    } what;
    memset(&what, 0, sizeof what);
    if (g_rank == first) {
        what.rc = rc;
        ft_strlcpy(what.msg, err ? ft_err_msg(err) : "", sizeof what.msg);
    }
    if (MPI_Bcast(&what, (int)sizeof what, MPI_BYTE, first, MPI_COMM_WORLD) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, FT_EXIT_INTERNAL);
    if (g_rank == first) return rc;
    if (first == 0) return ft_err_set(err, what.rc, "%s", what.msg);
    return ft_err_set(err, what.rc, "MPI process %d: %s", first, what.msg);
#else
    (void)err;
    return rc;
#endif
}

int cli_par_gather(const ft_buf *mine, ft_buf *all, uint64_t *lens, ft_err *err)
{
    if (g_size < 2) {
        lens[0] = mine->len;
        return ft_buf_append(all, mine->data, mine->len)
                   ? ft_err_set(err, FT_ENOMEM, "out of memory")
                   : FT_OK;
    }
#ifdef FT_HAVE_MPI
    uint64_t len = mine->len;
    if (MPI_Gather(&len, 1, MPI_UINT64_T, lens, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        return ft_err_set(err, FT_EIO, "MPI_Gather failed");
    int *counts = NULL, *displs = NULL, bad = len > INT32_MAX;
    uint64_t total = 0;
    if (g_rank == 0) {
        counts = ft_calloc((size_t)g_size, sizeof *counts);
        displs = ft_calloc((size_t)g_size, sizeof *displs);
        for (int r = 0; r < g_size; r++) {
            if (lens[r] > INT32_MAX || total + lens[r] > INT32_MAX) bad = 1;
            if (counts && displs) counts[r] = (int)lens[r], displs[r] = (int)total;
            total += lens[r];
        }
        if (!counts || !displs || ft_buf_reserve(all, (size_t)total + 1)) bad = 2;
    }
    /* every process learns whether the gather can go ahead */
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int rc = FT_OK;
    if (any)
        rc = ft_err_set(err, any == 2 ? FT_ENOMEM : FT_ERANGE,
                        any == 2 ? "out of memory gathering the processes' results"
                                 : "the processes' results exceed 2 GB: use more processes or "
                                   "fewer traces per process");
    else if (MPI_Gatherv(mine->data ? mine->data : (void *)"", (int)len, MPI_BYTE,
                         g_rank == 0 ? all->data + all->len : NULL, counts, displs, MPI_BYTE, 0,
                         MPI_COMM_WORLD) != MPI_SUCCESS)
        rc = ft_err_set(err, FT_EIO, "MPI_Gatherv failed");
    else if (g_rank == 0)
        all->len += (size_t)total;
    ft_free(counts);
    ft_free(displs);
    return rc;
#else
    return ft_err_set(err, FT_ESTATE, "built without MPI");
#endif
}

int cli_par_bcast(void *buf, size_t len, ft_err *err)
{
#ifdef FT_HAVE_MPI
    if (g_size > 1 && MPI_Bcast(buf, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        return ft_err_set(err, FT_EIO, "MPI_Bcast failed");
#else
    (void)buf;
    (void)len;
    (void)err;
#endif
    return FT_OK;
}

void cli_par_note_share(uint32_t n_traces, uint64_t calls_run)
{
    const char *path = getenv("FUSERTRACE_MPI_SHARES");
    if (!path || !*path) return;
    char line[128];
    const int len =
        snprintf(line, sizeof line, "process %d of %d: %u traces, %llu sampled calls run\n", g_rank,
                 g_size, n_traces, (unsigned long long)calls_run);
    const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    if (len > 0 && write(fd, line, (size_t)len) != len) { /* a diagnostic: nothing to stop */
    }
    close(fd);
}

/* ---- a replay's reductions ---------------------------------------------------------------- */

/* Process p's part of trace i of n, the job's size processes: the n traces laid end to end, each
 * cut into size units (its sampled calls k, by k % size), and process p given the p-th run of n
 * units. 1 when p takes part in trace i (*part set), else 0. */
static int part_of(uint32_t i, uint32_t p, uint32_t n, uint32_t size, ft_numerics_part *part)
{
    const uint64_t t0 = (uint64_t)i * size, t1 = t0 + size;
    const uint64_t p0 = (uint64_t)p * n, p1 = p0 + n;
    const uint64_t a = p0 > t0 ? p0 : t0, b = p1 < t1 ? p1 : t1;
    if (a >= b) return 0;
    *part = (ft_numerics_part){size, (uint32_t)(a - t0), (uint32_t)(b - t0)};
    return 1;
}

uint32_t cli_par_share(uint32_t n, int split, uint32_t *idx, ft_numerics_part *part)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        ft_numerics_part pt;
        if (!part_of(i, (uint32_t)g_rank, n, (uint32_t)g_size, &pt)) continue;
        if (!split && pt.lo) continue; /* the trace's first process replays it */
        idx[k] = i;
        part[k++] = pt;
    }
    return k;
}

int cli_par_owns(const ft_numerics_part *part)
{
    return part->lo == 0;
}

/* One trace's record in a process's bytes: its index, then each part as a length and bytes. */
static int put_part(ft_buf *b, const void *p, uint64_t len)
{
    return ft_buf_append(b, &len, sizeof len) || ft_buf_append(b, p, (size_t)len) ? FT_ENOMEM
                                                                                  : FT_OK;
}

/* The next part of a record (bounds checked: the bytes came from another process). */
static int get_part(const uint8_t **p, const uint8_t *end, const void **data, uint64_t *len)
{
    if ((size_t)(end - *p) < sizeof *len) return FT_EINVAL;
    memcpy(len, *p, sizeof *len);
    *p += sizeof *len;
    if ((uint64_t)(end - *p) < *len) return FT_EINVAL;
    *data = *p;
    *p += *len;
    return FT_OK;
}

/* Every process's records gathered to process 0, and there, per trace, where its parts start:
 * at[i * n_parts + k], len[...]. mine holds this process's records. */
static int gather_records(uint32_t n, uint32_t n_parts, const ft_buf *mine, ft_buf *all,
                          const void **at, uint64_t *len, ft_err *err)
{
    uint64_t *lens = ft_calloc((size_t)g_size, sizeof *lens);
    if (!lens) return ft_err_set(err, FT_ENOMEM, "out of memory");
    int rc = cli_par_gather(mine, all, lens, err);
    if (rc || g_rank != 0) goto done;
    const uint8_t *p = all->data, *end = all->data + all->len;
    uint8_t *seen = ft_calloc(n ? n : 1, 1);
    if (!seen) {
        rc = ft_err_set(err, FT_ENOMEM, "out of memory");
        goto done;
    }
    while (!rc && p < end) {
        uint32_t i = 0;
        if ((size_t)(end - p) < sizeof i) break;
        memcpy(&i, p, sizeof i);
        p += sizeof i;
        if (i >= n || seen[i]) break;
        seen[i] = 1;
        for (uint32_t k = 0; k < n_parts && !rc; k++)
            rc = get_part(&p, end, &at[i * n_parts + k], &len[i * n_parts + k]);
    }
    for (uint32_t i = 0; i < n && !rc; i++)
        if (!seen[i]) rc = FT_EINVAL;
    if (rc || p != end)
        rc = ft_err_set(err, FT_EINVAL,
                        "the MPI processes' results did not add up (a process "
                        "of another build?)");
    ft_free(seen);
done:
    ft_free(lens);
    return rc;
}

int cli_par_reduce_replay(uint32_t n, const uint32_t *own, const ft_numerics_part *part,
                          uint32_t n_own, const ft_replay_result *own_res,
                          const ft_report_causes *own_causes, const uint32_t *pol, uint32_t n_pol,
                          ft_replay_result *res, ft_replay_result *per_trace,
                          ft_report_causes **causes, ft_err *err)
{
    ft_buf mine = {0}, all = {0};
    const ft_buf *packs = NULL;
    const uint32_t n_packs = own_causes ? ft_report_causes_packs(own_causes, &packs) : 0;
    int rc = own_causes && n_packs != n_own
                 ? ft_err_set(err, FT_ESTATE, "causes of %u traces for %u", n_packs, n_own)
                 : FT_OK;
    for (uint32_t k = 0; k < n_own && !rc; k++) {
        if (part && !cli_par_owns(&part[k])) continue; /* another process sends its counts */
        rc = ft_buf_append(&mine, &own[k], sizeof own[k]);
        if (!rc) rc = put_part(&mine, &own_res[k], sizeof own_res[k]);
        if (!rc) rc = put_part(&mine, packs ? packs[k].data : NULL, packs ? packs[k].len : 0);
        if (rc) rc = ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    const void **at = ft_calloc(2 * (size_t)(n ? n : 1), sizeof *at);
    uint64_t *len = ft_calloc(2 * (size_t)(n ? n : 1), sizeof *len);
    if (!rc && (!at || !len)) rc = ft_err_set(err, FT_ENOMEM, "out of memory");
    /* every process gathers, whether or not its own part failed, and then agrees */
    ft_err gerr = {0};
    int grc = gather_records(n, 2, rc ? &(ft_buf){0} : &mine, &all, at, len, &gerr);
    if (!rc && grc) rc = ft_err_set(err, grc, "%s", ft_err_msg(&gerr));
    if (!rc && g_rank == 0) {
        ft_replay_result_init(res, pol, n_pol);
        if (own_causes && (rc = ft_report_causes_new(causes, err))) goto done;
        for (uint32_t i = 0; i < n && !rc; i++) {
            ft_replay_result r;
            if (len[2 * i] != sizeof r) {
                rc = ft_err_set(err, FT_EINVAL, "trace %u: a replay result of %llu bytes", i,
                                (unsigned long long)len[2 * i]);
                break;
            }
            memcpy(&r, at[2 * i], sizeof r);
            rc = ft_replay_result_merge(res, &r, err);
            if (per_trace) per_trace[i] = r;
            if (!rc && own_causes)
                rc = ft_report_causes_add(*causes, at[2 * i + 1], (size_t)len[2 * i + 1], err);
        }
    }
done:
    ft_buf_free(&mine);
    ft_buf_free(&all);
    ft_free(at);
    ft_free(len);
    return cli_par_agree(rc, err);
}

int cli_par_reduce_estimate(ft_numerics_estimate *e, ft_err *err)
{
    if (g_size < 2) return FT_OK;
    ft_buf mine = {0}, all = {0};
    uint64_t *lens = ft_calloc((size_t)g_size, sizeof *lens);
    int rc = lens && !ft_buf_append(&mine, e, sizeof *e)
                 ? FT_OK
                 : ft_err_set(err, FT_ENOMEM, "out of memory");
    ft_err gerr = {0};
    int grc = cli_par_gather(rc ? &(ft_buf){0} : &mine, &all, lens, &gerr);
    if (!rc && grc) rc = ft_err_set(err, grc, "%s", ft_err_msg(&gerr));
    if (!rc && g_rank == 0) {
        if (all.len != (size_t)g_size * sizeof *e)
            rc = ft_err_set(err, FT_EINVAL, "the MPI processes' estimates did not add up");
        ft_numerics_estimate job;
        for (int r = 0; r < g_size && !rc; r++) {
            ft_numerics_estimate x;
            memcpy(&x, all.data + (size_t)r * sizeof x, sizeof x);
            if (!r) {
                job = x;
                continue;
            }
            job.calls += x.calls;
            job.runs += x.runs;
            job.flops += x.flops;
            job.timed = job.timed && x.timed;
            if (x.mem > job.mem) job.mem = x.mem, job.cap = x.cap, job.threads = x.threads;
            if (x.lo_s > job.lo_s) job.lo_s = x.lo_s;
            if (x.hi_s > job.hi_s) job.hi_s = x.hi_s;
            if (!job.calls && x.calls) ft_strlcpy(job.how, x.how, sizeof job.how);
        }
        if (!rc) {
            job.processes = (uint32_t)g_size;
            *e = job;
        }
    }
    ft_free(lens);
    ft_buf_free(&mine);
    ft_buf_free(&all);
    rc = cli_par_agree(rc, err);
    /* every process learns the job's range (the results carry it) */
    if (!rc) rc = cli_par_bcast(e, sizeof *e, err);
    return rc;
}

/* Process 0: the records of every trace's parts, grouped by trace: rec[first[i] ..
 * first[i + 1]) are trace i's, in the order they came (process order); each record holds
 * n_parts parts (at, len). The number of records of trace i must be want(i). */
typedef struct par_rec {
    const void *at[2];
    uint64_t len[2];
} par_rec;

static int group_records(uint32_t n, const ft_buf *all, par_rec **rec_out, uint32_t **first_out,
                         ft_err *err)
{
    const uint8_t *end = all->data + all->len;
    uint32_t *count = ft_calloc((size_t)n + 1, sizeof *count);
    uint32_t *first = ft_calloc((size_t)n + 2, sizeof *first);
    int rc = count && first ? FT_OK : FT_ENOMEM;
    uint64_t n_rec = 0;
    /* twice over the bytes: count the records of each trace, then place them */
    for (int pass = 0; pass < 2 && !rc; pass++) {
        const uint8_t *p = all->data;
        par_rec *rec = pass ? *rec_out : NULL;
        while (!rc && p < end) {
            uint32_t i = 0;
            par_rec r;
            if ((size_t)(end - p) < sizeof i) {
                rc = FT_EINVAL;
                break;
            }
            memcpy(&i, p, sizeof i);
            p += sizeof i;
            if (i >= n) rc = FT_EINVAL;
            for (int k = 0; k < 2 && !rc; k++)
                rc = get_part(&p, end, &r.at[k], &r.len[k]);
            if (rc) break;
            if (!pass)
                count[i]++, n_rec++;
            else
                rec[first[i] + count[i]++] = r;
        }
        if (!pass && !rc) {
            for (uint32_t i = 0; i < n; i++)
                first[i + 1] = first[i] + count[i], count[i] = 0;
            if (n_rec > UINT32_MAX || !(*rec_out = ft_calloc(n_rec ? n_rec : 1, sizeof **rec_out)))
                rc = FT_ENOMEM;
        }
    }
    ft_free(count);
    *first_out = first;
    if (rc == FT_ENOMEM) return ft_err_set(err, FT_ENOMEM, "out of memory");
    if (rc)
        return ft_err_set(err, FT_EINVAL,
                          "the MPI processes' results did not add up (a process of another "
                          "build?)");
    return FT_OK;
}

/* Trace i's parts (recs[n_recs], each a part's result and its outcomes) joined into out (the
 * policies named from pol[n_pol]). */
static int join_trace(uint32_t i, const par_rec *recs, uint32_t n_recs, const uint32_t *pol,
                      uint32_t n_pol, ft_numerics_result *out, ft_err *err)
{
    uint64_t n_oc = 0;
    for (uint32_t k = 0; k < n_recs; k++) {
        if (recs[k].len[0] != sizeof *out || recs[k].len[1] % sizeof(ft_numerics_outcome))
            return ft_err_set(err, FT_EINVAL, "trace %u: numerics of %llu and %llu bytes", i,
                              (unsigned long long)recs[k].len[0],
                              (unsigned long long)recs[k].len[1]);
        n_oc += recs[k].len[1] / sizeof(ft_numerics_outcome);
    }
    ft_numerics_result *parts = ft_calloc(n_recs ? n_recs : 1, sizeof *parts);
    ft_numerics_outcome *oc = ft_calloc(n_oc ? (size_t)n_oc : 1, sizeof *oc);
    int rc = parts && oc ? FT_OK : ft_err_set(err, FT_ENOMEM, "out of memory");
    uint64_t at = 0;
    for (uint32_t k = 0; k < n_recs && !rc; k++) {
        ft_numerics_result *r = &parts[k];
        memcpy(r, recs[k].at[0], sizeof *r);
        if (r->n_policies != n_pol || n_pol > FT_NUMERICS_MAX_POLICIES) {
            rc = ft_err_set(err, FT_EINVAL, "numerics of %u policies", r->n_policies);
            break;
        }
        for (uint32_t p = 0; p < n_pol; p++) /* names are pointers: this process's own */
            r->pol[p].name = ft_policy_name(pol[p]);
        if (recs[k].len[1]) memcpy(&oc[at], recs[k].at[1], (size_t)recs[k].len[1]);
        at += recs[k].len[1] / sizeof *oc;
    }
    if (!rc) rc = ft_numerics_result_join(parts, n_recs, oc, n_oc, out, err);
    if (rc) {
        char detail[FT_ERR_MAX];
        ft_strlcpy(detail, ft_err_msg(err), sizeof detail);
        ft_err_set(err, rc, "trace %u: %s", i, detail);
    }
    ft_free(parts);
    ft_free(oc);
    return rc;
}

int cli_par_reduce_numerics(uint32_t n, const uint32_t *own, uint32_t n_own,
                            const ft_numerics_obs *run, const uint32_t *pol, uint32_t n_pol,
                            ft_numerics_result *out, ft_err *err)
{
    ft_buf mine = {0}, all = {0};
    const ft_numerics_result *tr = NULL;
    const uint32_t got = run ? ft_numerics_obs_traces(run, &tr) : 0;
    int rc = got != n_own ? ft_err_set(err, FT_ESTATE, "numerics of %u traces for %u", got, n_own)
                          : FT_OK;
    for (uint32_t k = 0; k < n_own && !rc; k++) {
        const ft_numerics_outcome *oc = NULL;
        const uint64_t n_oc = ft_numerics_obs_outcomes(run, k, &oc);
        rc = ft_buf_append(&mine, &own[k], sizeof own[k]);
        if (!rc) rc = put_part(&mine, &tr[k], sizeof tr[k]);
        if (!rc) rc = put_part(&mine, oc, n_oc * sizeof *oc);
        if (rc) rc = ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    uint64_t *lens = ft_calloc((size_t)g_size, sizeof *lens);
    if (!rc && !lens) rc = ft_err_set(err, FT_ENOMEM, "out of memory");
    /* every process gathers, whether or not its own part failed, and then agrees */
    ft_err gerr = {0};
    int grc = lens ? cli_par_gather(rc ? &(ft_buf){0} : &mine, &all, lens, &gerr) : FT_ENOMEM;
    if (!rc && grc) rc = ft_err_set(err, grc, "%s", ft_err_msg(&gerr));
    par_rec *rec = NULL;
    uint32_t *first = NULL;
    if (!rc && g_rank == 0) rc = group_records(n, &all, &rec, &first, err);
    ft_numerics_result *r = !rc && g_rank == 0 ? ft_malloc(sizeof *r) : NULL;
    if (!rc && g_rank == 0 && !r) rc = ft_err_set(err, FT_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n && r && !rc; i++) {
        uint32_t want = 0;
        ft_numerics_part pt;
        for (uint32_t p = 0; p < (uint32_t)g_size; p++)
            want += (uint32_t)part_of(i, p, n, (uint32_t)g_size, &pt);
        if (first[i + 1] - first[i] != want) {
            rc = ft_err_set(err, FT_EINVAL, "trace %u: numerics of %u processes, not %u", i,
                            first[i + 1] - first[i], want);
            break;
        }
        rc = join_trace(i, &rec[first[i]], want, pol, n_pol, i ? r : out, err);
        if (!rc && i) rc = ft_numerics_result_merge(out, r, err);
    }
    ft_free(r);
    ft_free(rec);
    ft_free(first);
    ft_free(lens);
    ft_buf_free(&mine);
    ft_buf_free(&all);
    return cli_par_agree(rc, err);
}
