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
void tu_replay_corpus(const char *dir, int (*fn)(const uint8_t *data, size_t len), int *n_files,
                      int *n_ok)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    *n_files = *n_ok = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        char *buf = tu_read_file(path, &len);
        assert_non_null(buf);
        long live = ft_alloc_live();
        int rc = fn((const uint8_t *)buf, len);
        if (rc != FT_OK && rc != FT_EINVAL) fail_msg("%s: status %d", path, rc);
        assert_int_equal(ft_alloc_live(), live);
        ++*n_files;
        *n_ok += rc == FT_OK;
        free(buf);
    }
    closedir(d);
}
