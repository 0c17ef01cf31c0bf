/*
 * test_util.c - the shared test helpers of test_util.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "test_util.h"

#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <sys/stat.h>

/* ---- files and directories --------------------------------------------------------------- */
char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 4096 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *p = realloc(buf, cap + 1);
            assert_non_null(p);
            buf = p;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got);
    fclose(f);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

void tu_copy_file(const char *from, const char *to)
{
    size_t n;
    char *d = tu_read_file(from, &n);
    assert_non_null(d);
    FILE *f = fopen(to, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(d, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    free(d);
}

int tu_exists(const char *path, const char *suffix)
{
    char p[1200];
    snprintf(p, sizeof p, "%s%s", path, suffix);
    struct stat sb;
    return !stat(p, &sb);
}

int tu_dir_fresh(char *dir, size_t cap, const char *name)
{
    if ((size_t)snprintf(dir, cap, "%s/%s", FT_BINARY_DIR, name) >= cap) return -1;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    return system(cmd) == 0 ? 0 : -1;
}

int tu_dir_remove(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

void tu_dir_path(char *buf, size_t cap, const char *dir, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
    unlink(buf);
}

/* ---- running the CLI --------------------------------------------------------------------- */
const char *tu_cli(void)
{
    const char *p = getenv("FT_CLI");
    return p && *p ? p : NULL;
}

int tu_sh_buf(const char *cmd, ft_buf *out)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, p)) > 0)
        assert_int_equal(ft_buf_append(out, chunk, n), FT_OK);
    assert_int_equal(ft_buf_append(out, "", 1), FT_OK);
    out->len--;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int tu_sh(const char *cmd, char *out, size_t cap)
{
    ft_buf b = {0};
    int st = tu_sh_buf(cmd, &b);
    if (out && cap) {
        size_t k = b.len < cap - 1 ? b.len : cap - 1;
        memcpy(out, b.data, k);
        out[k] = '\0';
    }
    ft_buf_free(&b);
    return st;
}

/* ---- comparing JSONL --------------------------------------------------------------------- */
void tu_assert_same_records(const char *name, const char *a, const char *b)
{
    size_t line = 0;
    while (*a || *b) {
        line++;
        const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
        if (!la && !*a) fail_msg("%s: record %zu: missing in the second", name, line);
        if (!lb && !*b) fail_msg("%s: record %zu: only in the first", name, line);
        json_error_t je;
        json_t *ja = json_loadb(a, la, 0, &je), *jb = json_loadb(b, lb, 0, &je);
        assert_non_null(ja);
        assert_non_null(jb);
        if (!json_equal(ja, jb)) {
            print_error("%s: record %zu differs:\n  first:  %.*s\n  second: %.*s\n", name, line,
                        (int)la, a, (int)lb, b);
            fail();
        }
        json_decref(ja);
        json_decref(jb);
        a += la + (ea != NULL);
        b += lb + (eb != NULL);
    }
}

/* ---- fuzz corpora ------------------------------------------------------------------------ */
typedef struct corpus_entry {
    char name[128];
    int ok; /* expected FT_OK (1) or FT_EINVAL (0) */
    int seen;
} corpus_entry;

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const corpus_entry *)a)->name, ((const corpus_entry *)b)->name);
}

int tu_replay_corpus(const char *kind, int (*fn)(const uint8_t *data, size_t len))
{
    char dir[1024], spath[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", FT_SOURCE_DIR, kind);
    snprintf(spath, sizeof spath, "%s/tests/fuzz/%s.status", FT_SOURCE_DIR, kind);
    const char *pm = getenv("FT_PRINT_CORPUS");
    const int write_mode = pm && !strcmp(pm, "write");
    corpus_entry *e = NULL;
    size_t n_e = 0, cap = 0;
    FILE *sf = write_mode ? NULL : fopen(spath, "r");
    if (!write_mode && !sf) fail_msg("%s: no status file (FT_PRINT_CORPUS=write makes it)", spath);
    char line[256];
    while (sf && fgets(line, sizeof line, sf)) {
        char name[128], st[16];
        if (line[0] == '#' || sscanf(line, "%127s %15s", name, st) != 2) continue;
        if (n_e == cap) {
            cap = cap ? 2 * cap : 256;
            e = realloc(e, cap * sizeof *e);
            assert_non_null(e);
        }
        ft_strlcpy(e[n_e].name, name, sizeof e[n_e].name);
        if (strcmp(st, "ok") && strcmp(st, "rejected")) fail_msg("%s: bad line '%s'", spath, line);
        e[n_e].ok = !strcmp(st, "ok");
        e[n_e++].seen = 0;
    }
    if (sf) fclose(sf);
    if (n_e) qsort(e, n_e, sizeof *e, entry_cmp);
    FILE *out = write_mode ? fopen(spath, "w") : NULL;
    if (write_mode) {
        assert_non_null(out);
        fprintf(out,
                "# expected status of every tests/fuzz/corpus/%s file: ok (FT_OK) or "
                "rejected (FT_EINVAL)\n",
                kind);
    }
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    int n_files = 0;
    char **names = NULL;
    size_t n_names = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        names = realloc(names, (n_names + 1) * sizeof *names);
        assert_non_null(names);
        names[n_names++] = strdup(de->d_name);
    }
    closedir(d);
    for (size_t k = 0; k < n_names; k++) { /* sorted, so a rewritten status file is stable */
        for (size_t m = k + 1; m < n_names; m++)
            if (strcmp(names[m], names[k]) < 0) {
                char *t = names[k];
                names[k] = names[m];
                names[m] = t;
            }
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        size_t len;
        char *buf = tu_read_file(path, &len);
        assert_non_null(buf);
        long live = ft_alloc_live();
        int rc = fn((const uint8_t *)buf, len);
        if (rc != FT_OK && rc != FT_EINVAL) fail_msg("%s: status %d", path, rc);
        assert_int_equal(ft_alloc_live(), live);
        free(buf);
        n_files++;
        if (write_mode) {
            fprintf(out, "%s %s\n", names[k], rc == FT_OK ? "ok" : "rejected");
        } else {
            corpus_entry key;
            ft_strlcpy(key.name, names[k], sizeof key.name);
            corpus_entry *x = n_e ? bsearch(&key, e, n_e, sizeof *e, entry_cmp) : NULL;
            if (!x) fail_msg("%s has no line in %s (FT_PRINT_CORPUS=write adds it)", path, spath);
            if (x->ok != (rc == FT_OK))
                fail_msg("%s: expected %s, got %s", path, x->ok ? "ok" : "rejected",
                         rc == FT_OK ? "ok" : "rejected");
            x->seen = 1;
        }
        free(names[k]);
    }
    free(names);
    for (size_t k = 0; k < n_e; k++)
        if (!e[k].seen) fail_msg("%s lists %s, which is not in %s", spath, e[k].name, dir);
    free(e);
    if (out) assert_int_equal(fclose(out), 0);
    return n_files;
}
