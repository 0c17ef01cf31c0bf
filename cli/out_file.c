/*
 * out_file.c - inputs checked before outputs are opened, and outputs written whole or not at
 * all, for every command.
 *
 * Inputs: cli_in_check stats each input (following links) before any output exists: a missing
 * or unreadable file, a directory, or `-` where a trace is wanted is an input error naming it,
 * and its (device, inode) is remembered. An output that resolves to one of them is refused, so
 * `replay T --per-call T` or `export T -o T` cannot truncate T.
 *
 * Outputs: a regular file (or a new one) is written under a temporary name beside its target
 * (`PATH.tmp-HOST-PID-XXXXXX`, so the rename stays within one file system), synced, and renamed
 * over the target only when complete; on failure the temporary and the SQLite side files that
 * may sit beside it are removed. The target must still be what it was when the output was
 * opened: a new one must still be absent (the temporary is linked in, which fails if another
 * command created it meanwhile), a replaced one the same file; otherwise the command fails
 * naming it, so of two commands writing one output at once neither loses its output silently. A
 * symlink is followed: the temporary goes beside the link's target, which is replaced, and the link
 * itself stays. A FIFO, a character device (/dev/null, a terminal) and `-` are written in place:
 * nothing can be taken back there, but every write, flush and close is still checked, so `-o
 * /dev/full` fails. Replacing an existing trace or capture needs force (-f), as in zstd; a trace is
 * never written to anything but a file.
 *
 * SIGINT, SIGTERM and SIGHUP remove the open temporaries (the handler is in place, and those
 * signals held, before a temporary is created), so only SIGKILL or a crash can leave one behind,
 * and never a partial target. What such a kill leaves is swept by the next output to the same
 * target (sweep_stale): only names of exactly the form written here, whose HOST (a hash of the
 * boot id, the PID namespace and the host name) is this process's and whose PID is gone. A
 * temporary of another host sharing the directory (NFS) or of another PID namespace (a
 * container) is never removed, as its writer's liveness cannot be asked from here.
 */
#define _XOPEN_SOURCE 700
#include "cli.h"
#include "ft_trace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The side files SQLite may make beside a database. */
static const char *const side_ext[] = {"", "-wal", "-shm", "-journal"};
enum { N_SIDE = 4, MAX_GUARDED = 4, MAX_INPUTS = 1024 };

/* ---- inputs -------------------------------------------------------------------------------- */
static struct {
    dev_t dev;
    ino_t ino;
} inputs[MAX_INPUTS];
static uint32_t n_inputs;

int cli_in_check(const char *path, int kind, ft_err *err)
{
    struct stat st;
    if (!strcmp(path, "-")) {
        if (kind == CLI_IN_TRACE)
            return ft_err_set(err, FT_EINVAL,
                              "-: a trace cannot be read from stdin (it is a database file); "
                              "name the file");
        if (fstat(STDIN_FILENO, &st)) return FT_OK;
    } else {
        if (stat(path, &st))
            return ft_err_set(err, FT_EINVAL, "cannot open %s: %s", path, strerror(errno));
        if (S_ISDIR(st.st_mode))
            return ft_err_set(err, FT_EINVAL, "%s is a directory, not a %s", path,
                              kind == CLI_IN_TRACE ? "trace" : "file");
        if (kind == CLI_IN_TRACE && !S_ISREG(st.st_mode))
            return ft_err_set(err, FT_EINVAL, "%s is not a regular file (a trace is a database)",
                              path);
        /* access, not open: opening a FIFO's read end to test it would release its writer */
        if (access(path, R_OK))
            return ft_err_set(err, FT_EINVAL, "cannot open %s: %s", path, strerror(errno));
    }
    /* `cmd TRACE >> TRACE`: the shell opened the input as stdout (without truncating it) */
    struct stat so;
    if (strcmp(path, "-") && !fstat(STDOUT_FILENO, &so) && S_ISREG(so.st_mode) &&
        so.st_dev == st.st_dev && so.st_ino == st.st_ino)
        return ft_err_set(err, FT_EINVAL, "stdout is %s, an input; not writing into it", path);
    if (n_inputs == MAX_INPUTS) return FT_OK; /* only the same-file check is lost */
    inputs[n_inputs].dev = st.st_dev;
    inputs[n_inputs++].ino = st.st_ino;
    return FT_OK;
}

static int is_input(const struct stat *st)
{
    for (uint32_t i = 0; i < n_inputs; i++)
        if (inputs[i].dev == st->st_dev && inputs[i].ino == st->st_ino) return 1;
    return 0;
}

/* ---- signal guard -------------------------------------------------------------------------- */
/* The temporaries' names, precomputed so that the handler uses async-signal-safe calls only. */
static char guarded[MAX_GUARDED][N_SIDE][CLI_PATH_MAX + 16];
static volatile sig_atomic_t guard_on[MAX_GUARDED];

static void on_signal(int sig)
{
    for (int s = 0; s < MAX_GUARDED; s++)
        if (guard_on[s])
            for (int i = 0; i < N_SIDE; i++)
                unlink(guarded[s][i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void guard_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
}

/* Called with the signals held (create_guarded): the handler sees the names complete. */
static int guard(const char *tmp)
{
    int s = 0;
    while (s < MAX_GUARDED && guard_on[s])
        s++;
    if (s == MAX_GUARDED) return -1;
    for (int i = 0; i < N_SIDE; i++)
        snprintf(guarded[s][i], sizeof guarded[s][i], "%s%s", tmp, side_ext[i]);
    guard_on[s] = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    guard_signals(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    return s;
}

/* mkstemp(o->tmp) and its guard with SIGINT, SIGTERM and SIGHUP held in between, so that no
 * signal can fall between the file's creation and its handler; a signal that came meanwhile is
 * delivered once the guard is in place, and removes the file. The fd, or -1 with errno. */
static int create_guarded(cli_out *o)
{
    sigset_t set, old;
    guard_signals(&set);
    sigprocmask(SIG_BLOCK, &set, &old);
    int fd = mkstemp(o->tmp);
    int e = errno;
    if (fd >= 0) o->slot = guard(o->tmp);
    sigprocmask(SIG_SETMASK, &old, NULL);
    errno = e;
    return fd;
}

static void unguard(cli_out *o)
{
    if (o->slot >= 0) guard_on[o->slot] = 0;
    o->slot = -1;
}

/* ---- outputs ------------------------------------------------------------------------------- */
static const char *what(int kind)
{
    return kind == CLI_OUT_DB ? "trace" : kind == CLI_OUT_CAPTURE ? "capture stream" : "file";
}

/* In place: stdout, a FIFO, a character device. */
static int open_in_place(cli_out *o, const char *path, ft_err *err)
{
    if (!strcmp(path, "-") || !strcmp(path, "/dev/stdout")) {
        o->f = stdout;
        o->name = "stdout";
        return FT_OK;
    }
    int fd = open(path, O_WRONLY | O_NOCTTY);
    if (fd < 0) return ft_err_set(err, FT_EINVAL, "cannot write %s: %s", path, strerror(errno));
    if (!(o->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        return ft_err_set(err, FT_ENOMEM, "cannot write %s: %s", path, strerror(e));
    }
    return FT_OK;
}

/* This host, boot and PID namespace as 16 hex digits: what a temporary's name carries, so that
 * the sweeper asks kill(PID, 0) only about temporaries whose PID means the same process here. */
static const char *host_id(void)
{
    static char id[17];
    if (id[0]) return id;
    char buf[512];
    size_t n = 0;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        n = fread(buf, 1, 64, f);
        fclose(f);
    }
    ssize_t k = readlink("/proc/self/ns/pid", buf + n, 64);
    if (k > 0) n += (size_t)k;
    if (!gethostname(buf + n, sizeof buf - n - 1)) n += strnlen(buf + n, sizeof buf - n - 1);
    snprintf(id, sizeof id, "%016llx", (unsigned long long)ft_hash64(buf, n));
    return id;
}

/* The PID of a name of exactly the form HOST-PID-XXXXXX (what follows "TARGET.tmp-") with this
 * host's HOST: PID in plain decimal digits (no sign, space or leading zero) and XXXXXX six
 * letters or digits, nothing after. 0 for any other name (a side file, another host's, a user's
 * file that looks alike). */
static long own_temp_pid(const char *s)
{
    const char *id = host_id();
    if (strncmp(s, id, 16) || s[16] != '-') return 0;
    s += 17;
    long pid = 0;
    int digits = 0;
    if (*s == '0') return 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (++digits > 10) return 0;
        pid = pid * 10 + (*s - '0');
    }
    if (!digits || *s != '-' || pid > INT_MAX) return 0;
    s++;
    for (int i = 0; i < 6; i++, s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
            return 0;
    return *s ? 0 : pid;
}

/* Temporaries a killed fusertrace of this host left beside target (own_temp_pid's names; the
 * SQLite side files of a trace being written there go with them): removed when the PID is
 * gone. A live process's temporaries, another host's or namespace's, and every other file are
 * left alone. */
static void sweep_stale(const char *target)
{
    char dir[CLI_PATH_MAX];
    ft_strlcpy(dir, target, sizeof dir);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : target;
    if (slash)
        *slash = '\0';
    else
        ft_strlcpy(dir, ".", sizeof dir);
    char prefix[CLI_PATH_MAX];
    if ((size_t)snprintf(prefix, sizeof prefix, "%s.tmp-", base) >= sizeof prefix) return;
    const size_t np = strlen(prefix);
    DIR *d = opendir(slash && !dir[0] ? "/" : dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, np)) continue;
        long pid = own_temp_pid(e->d_name + np);
        if (pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to ask */
        char full[2 * CLI_PATH_MAX + 2];
        snprintf(full, sizeof full, "%s/%s", slash && !dir[0] ? "" : dir, e->d_name);
        ft_trace_remove(full);
    }
    closedir(d);
}

int cli_out_open(cli_out *o, const char *path, int kind, int force, ft_err *err)
{
    memset(o, 0, sizeof *o);
    o->slot = -1;
    o->kind = kind;
    o->name = path ? path : "stdout";
    if (!path || !strcmp(path, "-") || !strcmp(path, "/dev/stdout")) {
        if (kind == CLI_OUT_DB)
            return ft_err_set(err, FT_EINVAL,
                              "%s: a trace cannot be written to stdout (it is a database file); "
                              "name a file",
                              path ? path : "-");
        return open_in_place(o, "-", err);
    }
    /* the target: the file itself, or what a symlink names (the link stays) */
    char target[CLI_PATH_MAX];
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (!exists && errno != ENOENT)
        return ft_err_set(err, FT_EINVAL, "cannot write %s: %s", path, strerror(errno));
    struct stat lst;
    if (!exists && !lstat(path, &lst) && S_ISLNK(lst.st_mode))
        return ft_err_set(err, FT_EINVAL, "%s is a symlink to a missing file; not following it",
                          path);
    if (exists) {
        if (is_input(&st))
            return ft_err_set(err, FT_EINVAL, "%s is also an input; not overwriting it", path);
        if (S_ISDIR(st.st_mode)) return ft_err_set(err, FT_EINVAL, "%s is a directory", path);
        if (!S_ISREG(st.st_mode)) {
            if (kind == CLI_OUT_DB || (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)))
                return ft_err_set(err, FT_EINVAL, "%s is not a regular file; a %s must be one",
                                  path, what(kind));
            return open_in_place(o, path, err);
        }
        if (kind != CLI_OUT_STREAM && !force)
            return ft_err_set(err, FT_EINVAL, "%s exists; -f (--force) replaces it", path);
        char *real = realpath(path, NULL);
        if (!real)
            return ft_err_set(err, FT_EINVAL, "cannot resolve %s: %s", path, strerror(errno));
        size_t n = ft_strlcpy(target, real, sizeof target);
        free(real);
        if (n >= sizeof target) return ft_err_set(err, FT_EINVAL, "%s: path too long", path);
    } else if (ft_strlcpy(target, path, sizeof target) >= sizeof target) {
        return ft_err_set(err, FT_EINVAL, "%s: path too long", path);
    }
    if (kind == CLI_OUT_DB && !force) { /* a WAL left beside it would be read into the new one */
        char side[CLI_PATH_MAX + 16];
        snprintf(side, sizeof side, "%s-wal", target);
        if (!access(side, F_OK))
            return ft_err_set(err, FT_EINVAL,
                              "%s exists (a trace there is open or was not closed cleanly); "
                              "-f (--force) replaces it",
                              side);
    }
    ft_strlcpy(o->path, target, sizeof o->path);
    sweep_stale(target);
    if ((size_t)snprintf(o->tmp, sizeof o->tmp, "%s.tmp-%s-%ld-XXXXXX", target, host_id(),
                         (long)getpid()) >= sizeof o->tmp)
        return ft_err_set(err, FT_EINVAL, "%s: output path too long", path);
    o->had_target = exists;
    if (exists) {
        o->dev = (unsigned long long)st.st_dev;
        o->ino = (unsigned long long)st.st_ino;
    }
    int fd = create_guarded(o);
    if (fd < 0) {
        int e = errno;
        o->path[0] = '\0';
        return ft_err_set(err, FT_EINVAL, "cannot create a file beside %s: %s", path, strerror(e));
    }
    if (kind == CLI_OUT_DB) { /* the name is reserved; the recorder creates the file anew */
        close(fd);
        unlink(o->tmp);
        return FT_OK;
    }
    mode_t mask = umask(0); /* mkstemp makes it 0600; give it the mode a plain create would */
    umask(mask);
    if (exists) /* a replaced file keeps its mode */
        fchmod(fd, st.st_mode & 07777);
    else
        fchmod(fd, 0666 & ~mask);
    o->f = fdopen(fd, "w");
    if (!o->f) {
        int e = errno;
        close(fd);
        unlink(o->tmp);
        unguard(o);
        o->path[0] = '\0';
        return ft_err_set(err, FT_ENOMEM, "cannot create a file beside %s: %s", path, strerror(e));
    }
    return FT_OK;
}

/* The temporary in the target's place, when the target is still what it was at the open. */
static int put_in_place(cli_out *o, ft_err *err)
{
    static const char race[] =
        "%s: %s by another process while this one wrote it (two commands writing one output "
        "at once?); not replacing it: this output is lost, that one stays";
    struct stat st;
    if (!o->had_target) {
        /* link fails if the name exists: no other writer's new output is replaced */
        if (!link(o->tmp, o->path)) {
            unlink(o->tmp);
            return FT_OK;
        }
        if (errno == EEXIST) return ft_err_set(err, FT_EIO, race, o->path, "created");
        /* a file system without hard links: the same check, with a window before the rename */
        if (!lstat(o->path, &st)) return ft_err_set(err, FT_EIO, race, o->path, "created");
    } else if (stat(o->path, &st) || (unsigned long long)st.st_dev != o->dev ||
               (unsigned long long)st.st_ino != o->ino) {
        return ft_err_set(err, FT_EIO, race, o->path, "replaced or removed");
    }
    if (rename(o->tmp, o->path))
        return ft_err_set(err, FT_EIO, "cannot rename %s to %s: %s", o->tmp, o->path,
                          strerror(errno));
    return FT_OK;
}

int cli_out_close(cli_out *o, int rc, ft_err *err)
{
    const char *name = o->name ? o->name : "stdout";
    if (o->f) { /* what stdio still holds must reach the file too */
        if ((fflush(o->f) || ferror(o->f)) && !rc)
            rc = ft_err_set(err, FT_EIO, "writing %s failed: %s", name, strerror(errno));
        if (o->path[0] && !rc && fsync(fileno(o->f)))
            rc = ft_err_set(err, FT_EIO, "writing %s failed: %s", name, strerror(errno));
        if (o->f != stdout && fclose(o->f) && !rc)
            rc = ft_err_set(err, FT_EIO, "writing %s failed: %s", name, strerror(errno));
        o->f = NULL;
    }
    if (!o->path[0]) return rc;
    if (!rc && o->kind == CLI_OUT_DB) { /* stale side files of a replaced trace */
        char side[CLI_PATH_MAX + 16];
        for (int i = 1; i < N_SIDE; i++) {
            snprintf(side, sizeof side, "%s%s", o->path, side_ext[i]);
            if (unlink(side) && errno != ENOENT)
                rc = ft_err_set(err, FT_EIO, "cannot remove %s: %s", side, strerror(errno));
        }
    }
    if (!rc) rc = put_in_place(o, err);
    if (rc) ft_trace_remove(o->tmp);
    unguard(o);
    o->path[0] = '\0';
    return rc;
}

int cli_stdout_close(ft_err *err)
{
    /* flushed and checked, not closed: the process may run another command (the CLI fuzzer) */
    int bad = fflush(stdout) != 0;
    int e = errno;
    if (!bad && ferror(stdout)) bad = 1, e = EIO;
    clearerr(stdout);
    if (bad) return ft_err_set(err, FT_EIO, "writing stdout failed: %s", strerror(e));
    return FT_OK;
}

void cli_in_reset(void)
{
    n_inputs = 0;
}
