/*
 * out_file.c - outputs written whole or not at all: a file is written under a temporary name
 * beside its final path (`PATH.tmp-XXXXXX`, so the rename stays within one file system) and
 * renamed over PATH only when complete; on failure the temporary and the SQLite side files that
 * may sit beside it are removed. SIGINT, SIGTERM and SIGHUP remove the temporary too, so only
 * SIGKILL or a crash can leave one behind, and never a partial PATH.
 *
 * One output at a time: the signal guard keeps the names of the one open temporary.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "ft_trace.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The side files SQLite may make beside a database. */
static const char *const side_ext[] = {"", "-wal", "-shm", "-journal"};

/* ---- signal guard ------------------------------------------------------------------------ */
/* The temporary's names, precomputed so that the handler uses async-signal-safe calls only. */
static char guarded[4][CLI_PATH_MAX + 16];
static volatile sig_atomic_t have_guarded;

static void remove_guarded(void)
{
    for (size_t i = 0; i < FT_ARRAY_LEN(side_ext); i++)
        unlink(guarded[i]);
}

static void on_signal(int sig)
{
    if (have_guarded) remove_guarded();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void guard(const char *tmp)
{
    have_guarded = 0;
    for (size_t i = 0; i < FT_ARRAY_LEN(side_ext); i++)
        snprintf(guarded[i], sizeof guarded[i], "%s%s", tmp, side_ext[i]);
    have_guarded = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* ---- public ------------------------------------------------------------------------------ */
int cli_out_open(cli_out *o, const char *path, int kind, ft_err *err)
{
    memset(o, 0, sizeof *o);
    if (kind == CLI_OUT_STREAM && (!path || !strcmp(path, "-"))) {
        o->f = stdout;
        return FT_OK;
    }
    if ((size_t)snprintf(o->tmp, sizeof o->tmp, "%s.tmp-XXXXXX", path) >= sizeof o->tmp)
        return ft_err_set(err, FT_EINVAL, "%s: output path too long", path);
    int fd = mkstemp(o->tmp);
    if (fd < 0)
        return ft_err_set(err, FT_EINVAL, "cannot create a file beside %s: %s", path,
                          strerror(errno));
    o->path = path;
    guard(o->tmp);
    if (kind == CLI_OUT_DB) { /* the name is reserved; the recorder creates the file anew */
        close(fd);
        unlink(o->tmp);
        return FT_OK;
    }
    mode_t mask = umask(0); /* mkstemp makes it 0600; give it the mode a plain create would */
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    o->f = fdopen(fd, "w");
    if (!o->f) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        have_guarded = 0;
        return ft_err_set(err, FT_EINVAL, "cannot create a file beside %s: %s", path, strerror(e));
    }
    return FT_OK;
}

int cli_out_close(cli_out *o, int rc, ft_err *err)
{
    const char *name = o->path ? o->path : "stdout";
    /* what stdio still holds must reach the file too */
    if (o->f && (fflush(o->f) || ferror(o->f)) && !rc)
        rc = ft_err_set(err, FT_EIO, "writing %s failed: %s", name, strerror(errno));
    if (o->f && o->f != stdout && fclose(o->f) && !rc)
        rc = ft_err_set(err, FT_EIO, "writing %s failed: %s", name, strerror(errno));
    o->f = NULL;
    if (!o->path) return rc;
    if (!rc && rename(o->tmp, o->path))
        rc =
            ft_err_set(err, FT_EIO, "cannot rename %s to %s: %s", o->tmp, o->path, strerror(errno));
    if (rc) ft_trace_remove(o->tmp);
    have_guarded = 0;
    o->path = NULL;
    return rc;
}
