/*
 * trace_probe.c - the trace file before SQLite opens it: its header (magic, page size, file
 * format bytes, a size of whole pages), the side files beside it (-wal, -shm, -journal), and a
 * scan of the -wal frame by frame as SQLite's WAL format defines it (header and cumulative
 * checksums, salts), so that damage SQLite would drop silently is reported (trace.c says what
 * opening does with it, trace_write.c what seal does). Reads only; creates nothing.
 */
#define _POSIX_C_SOURCE 200809L
#include "trace_handle_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the file, its header and its side files ---------------------------------------------- */
static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

int trace_side_stat(const char *path, const char *suffix, uint64_t *bytes)
{
    char buf[4200];
    struct stat sb;
    snprintf(buf, sizeof buf, "%s%s", path, suffix);
    if (stat(buf, &sb)) return 0;
    if (bytes) *bytes = (uint64_t)sb.st_size;
    return 1;
}

/* Read the first n bytes of the main file through SQLite's VFS: its unix VFS keeps a file that
 * this process has open elsewhere (a recorder) open until its locks are released, where a plain
 * close() would drop that connection's POSIX locks. Returns bytes read, -1 when the file
 * cannot be read, -2 out of memory. */
static int vfs_read_head(const char *path, uint8_t *buf, int n)
{
    sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
    if (!vfs) return -1;
    sqlite3_file *f = ft_calloc(1, (size_t)vfs->szOsFile);
    if (!f) return -2;
    int flags = 0, got = -1;
    if (vfs->xOpen(vfs, path, f, SQLITE_OPEN_READONLY | SQLITE_OPEN_MAIN_DB, &flags) == SQLITE_OK) {
        sqlite3_int64 size = 0;
        if (f->pMethods->xFileSize(f, &size) == SQLITE_OK) {
            got = size < n ? (int)size : n;
            if (got > 0 && f->pMethods->xRead(f, buf, got, 0) != SQLITE_OK) got = -1;
        }
    }
    if (f->pMethods) f->pMethods->xClose(f);
    ft_free(f);
    return got;
}

int trace_probe_file(ft_trace *t, probe *pr)
{
    static const char magic[16] = "SQLite format 3";
    memset(pr, 0, sizeof *pr);
    struct stat sb;
    if (stat(t->path, &sb)) {
        if (errno == ENOENT) return ft_err_set(&t->err, FT_ENOTFOUND, "%s: no such file", t->path);
        return ft_err_set(&t->err, FT_EIO, "%s: cannot open: %s", t->path, strerror(errno));
    }
    if (S_ISDIR(sb.st_mode))
        return ft_err_set(&t->err, FT_EINVAL, "%s: is a directory, not a trace", t->path);
    if (!S_ISREG(sb.st_mode))
        return ft_err_set(&t->err, FT_EINVAL, "%s: not a regular file, not a trace", t->path);
    if (access(t->path, R_OK))
        return ft_err_set(&t->err, FT_EIO, "%s: cannot open: %s", t->path, strerror(errno));
    uint8_t h[100];
    int n = vfs_read_head(t->path, h, (int)sizeof h);
    if (n == -2) return ft_err_set(&t->err, FT_ENOMEM, "%s: out of memory", t->path);
    if (n < 0) return ft_err_set(&t->err, FT_EIO, "%s: cannot read its header", t->path);
    if (n == 0) return ft_err_set(&t->err, FT_ENOTTRACE, "%s: empty file, not a trace", t->path);
    if (memcmp(h, magic, (size_t)n < sizeof magic ? (size_t)n : sizeof magic))
        return ft_err_set(&t->err, FT_ENOTTRACE,
                          "%s: not a fusertrace trace (not a SQLite database)", t->path);
    if (n < 100)
        return ft_err_set(&t->err, FT_ECORRUPT,
                          "%s: damaged: cut short (%d bytes, less than its header)", t->path, n);
    uint32_t ps = (uint32_t)h[16] << 8 | h[17];
    if (ps == 1) ps = 65536;
    if (ps < 512 || (ps & (ps - 1)))
        return ft_err_set(&t->err, FT_ECORRUPT, "%s: damaged: bad header (page size %u)", t->path,
                          ps);
    if (h[18] != h[19] || (h[18] != 1 && h[18] != 2))
        return ft_err_set(&t->err, FT_ECORRUPT, "%s: damaged: bad header (file format %u/%u)",
                          t->path, h[18], h[19]);
    pr->wal_mode = h[18] == 2;
    pr->page_size = ps;
    pr->db_bytes = (uint64_t)sb.st_size;
    if (pr->db_bytes % ps)
        return ft_err_set(&t->err, FT_ECORRUPT,
                          "%s: damaged: cut short (%" PRIu64 " bytes, not whole pages of %u)",
                          t->path, pr->db_bytes, ps);
    uint32_t n_pages = get_be32(h + 28);
    if (!pr->wal_mode && get_be32(h + 24) == get_be32(h + 92) &&
        (uint64_t)n_pages * ps > pr->db_bytes)
        return ft_err_set(&t->err, FT_ECORRUPT,
                          "%s: damaged: cut short (its header says %u pages of %u bytes, the "
                          "file holds %" PRIu64 ")",
                          t->path, n_pages, ps, pr->db_bytes / ps);
    pr->has_wal = trace_side_stat(t->path, "-wal", &pr->wal_bytes);
    pr->has_shm = trace_side_stat(t->path, "-shm", NULL);
    pr->has_journal = trace_side_stat(t->path, "-journal", NULL);
    return FT_OK;
}

/* ---- the -wal ----------------------------------------------------------------------------- */
static void wal_sum(int big_endian, const uint8_t *p, size_t n, uint32_t *s0, uint32_t *s1)
{
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint32_t a = big_endian ? get_be32(p + i) : get_le32(p + i);
        uint32_t b = big_endian ? get_be32(p + i + 4) : get_le32(p + i + 4);
        *s0 += a + *s1;
        *s1 += b + *s0;
    }
}

static size_t read_full(FILE *f, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t k = fread(buf + got, 1, n - got, f);
        if (!k) break;
        got += k;
    }
    return got;
}

static int scan_wal(const char *path, uint32_t page_size, wal_scan *ws)
{
    memset(ws, 0, sizeof *ws);
    char wp[4200];
    snprintf(wp, sizeof wp, "%s-wal", path);
    FILE *f = fopen(wp, "rb");
    if (!f) return FT_OK; /* gone meanwhile: nothing to read */
    uint8_t h[32];
    size_t n = read_full(f, h, sizeof h);
    uint8_t *fr = NULL;
    if (n == 0) goto done;
    if (n < sizeof h) {
        ws->damaged = 1;
        snprintf(ws->why, sizeof ws->why, "cut short inside its header");
        goto done;
    }
    uint32_t magic = get_be32(h), s0 = 0, s1 = 0;
    if ((magic & 0xfffffffeu) != 0x377f0682u || get_be32(h + 4) != 3007000u) {
        ws->damaged = 1;
        snprintf(ws->why, sizeof ws->why, "not a SQLite WAL");
        goto done;
    }
    int be = magic & 1;
    wal_sum(be, h, 24, &s0, &s1);
    if (s0 != get_be32(h + 24) || s1 != get_be32(h + 28)) {
        ws->damaged = 1;
        snprintf(ws->why, sizeof ws->why, "its header fails its checksum");
        goto done;
    }
    if (get_be32(h + 8) != page_size) {
        ws->damaged = 1;
        snprintf(ws->why, sizeof ws->why, "page size %u, the trace's is %u", get_be32(h + 8),
                 page_size);
        goto done;
    }
    size_t fsz = 24 + (size_t)page_size;
    if (!(fr = ft_malloc(fsz))) {
        fclose(f);
        return FT_ENOMEM;
    }
    for (;;) {
        n = read_full(f, fr, fsz);
        if (n == 0) break;
        int same_gen = n >= 16 && !memcmp(fr + 8, h + 16, 8);
        if (!same_gen) break; /* the end, or frames left from an earlier generation */
        if (n < fsz) {
            ws->damaged = 1;
            snprintf(ws->why, sizeof ws->why, "frame %" PRIu64 " is cut short", ws->frames + 1);
            break;
        }
        uint32_t a = s0, b = s1;
        wal_sum(be, fr, 8, &a, &b);
        wal_sum(be, fr + 24, page_size, &a, &b);
        if (a != get_be32(fr + 16) || b != get_be32(fr + 20) || get_be32(fr) == 0) {
            ws->damaged = 1;
            snprintf(ws->why, sizeof ws->why, "frame %" PRIu64 " fails its checksum",
                     ws->frames + 1);
            break;
        }
        s0 = a;
        s1 = b;
        ws->frames++;
        ws->tail++;
        if (get_be32(fr + 4)) {
            ws->commits++;
            ws->tail = 0;
        }
    }
done:
    ft_free(fr);
    fclose(f);
    return FT_OK;
}

/* scan_wal, again while the -wal keeps changing (a writer is appending to it): damage is only
 * reported when two scans a moment apart agree on the file. */
int trace_scan_wal(const char *path, uint32_t page_size, wal_scan *ws)
{
    for (int attempt = 0;; attempt++) {
        struct stat a, b;
        char wp[4200];
        snprintf(wp, sizeof wp, "%s-wal", path);
        int ha = !stat(wp, &a);
        int rc = scan_wal(path, page_size, ws);
        if (rc || !ws->damaged) return rc;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        int hb = !stat(wp, &b);
        int still = ha && hb && a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
                    a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
        if (still || attempt == 5) {
            if (!still) ws->damaged = 0; /* a writer is active: read what SQLite reads */
            return FT_OK;
        }
    }
}

/* Each committed frame's page, newest first, against the main file: a page seen already was
 * overwritten by a later frame and does not count. */
int trace_wal_redundant(const char *path, uint32_t page_size)
{
    wal_scan ws;
    int rc = scan_wal(path, page_size, &ws);
    if (rc) return rc;
    if (ws.damaged) return 0;
    uint64_t n = ws.frames - ws.tail; /* frames up to the last commit */
    if (!n) return 1;
    char wp[4200];
    snprintf(wp, sizeof wp, "%s-wal", path);
    int wfd = open(wp, O_RDONLY | O_CLOEXEC), dfd = open(path, O_RDONLY | O_CLOEXEC);
    size_t fsz = 24 + (size_t)page_size;
    uint8_t *fr = ft_malloc(fsz), *pg = ft_malloc(page_size);
    ft_hmap seen = {0};
    int same = wfd >= 0 && dfd >= 0 && fr && pg;
    rc = fr && pg ? 0 : FT_ENOMEM;
    struct stat sb;
    if (same && (fstat(dfd, &sb) || (uint64_t)sb.st_size % page_size)) same = 0;
    for (uint64_t k = n; same && k >= 1; k--) {
        off_t off = (off_t)(32 + (k - 1) * fsz);
        if (pread(wfd, fr, fsz, off) != (ssize_t)fsz) {
            same = 0;
            break;
        }
        uint32_t pgno = get_be32(fr);
        /* the last commit gives the database's size: a different one would resize the file */
        if (k == n && (uint64_t)get_be32(fr + 4) * page_size != (uint64_t)sb.st_size) same = 0;
        if (!same || ft_hmap_get(&seen, pgno) != UINT32_MAX) continue;
        if (ft_hmap_put(&seen, pgno, 1)) {
            rc = FT_ENOMEM;
            same = 0;
            break;
        }
        if (pread(dfd, pg, page_size, (off_t)(pgno - 1) * page_size) != (ssize_t)page_size ||
            memcmp(pg, fr + 24, page_size))
            same = 0;
    }
    ft_hmap_free(&seen);
    ft_free(fr);
    ft_free(pg);
    if (wfd >= 0) close(wfd);
    if (dfd >= 0) close(dfd);
    return rc ? rc : same;
}
