/*
 * test_fuzz_regress.c - replays every fuzz corpus file as an ordinary test: no crash, no leak,
 * and the importer's status is FT_OK or FT_EINVAL. The fuzz target itself is compiled in.
 */
#define _POSIX_C_SOURCE 200809L
#include "fuzz/fuzz_jsonl.c"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void test_fuzz_jsonl_corpus(void **state)
{
    (void)state;
    const char *dir = FT_SOURCE_DIR "/tests/fuzz/corpus/jsonl";
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n_files = 0, n_ok = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        uint8_t *buf = NULL;
        size_t len = 0, cap = 0, got;
        do {
            if (len + 4096 > cap) {
                cap = cap ? cap * 2 : 65536;
                uint8_t *p = realloc(buf, cap);
                assert_non_null(p);
                buf = p;
            }
            got = fread(buf + len, 1, cap - len, f);
            len += got;
        } while (got);
        fclose(f);
        long live = ft_alloc_live();
        int rc = fuzz_jsonl_run(buf, len);
        if (rc != FT_OK && rc != FT_EINVAL) print_error("%s: rc %d\n", e->d_name, rc);
        assert_true(rc == FT_OK || rc == FT_EINVAL);
        assert_int_equal(ft_alloc_live(), live);
        n_ok += rc == FT_OK;
        n_files++;
        free(buf);
    }
    closedir(d);
    assert_true(n_files >= 4);
    assert_true(n_ok >= 1); /* the valid seeds still import */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_jsonl_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
