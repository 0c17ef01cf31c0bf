/*
 * test_fuzz_regress.c - replays every fuzz corpus file as an ordinary test: no crash, no leak,
 * and each target's status is FT_OK or FT_EINVAL (a clean rejection; the targets turn every
 * oracle failure into another status). The fuzz targets themselves are compiled in: the JSONL
 * importer, the chunk decoder and the packed-record batch API (the fuser model's corpus is
 * replayed by test_tefuser).
 *
 * fuzz_open's corpus is held to tests/fuzz/open.status (ok: the edited trace verified and
 * round-tripped; rejected: it was refused as damaged or foreign), and its seeds named
 * seed-WHAT-* to exactly the status WHAT names. fuzz_cli's corpus runs through the real binary:
 * seed-eN-* must exit N, every other file 0..3.
 */
#define _POSIX_C_SOURCE 200809L
#define FT_FUZZ_REPLAY  1
#include "fuzz/fuzz_chunk.c"
#include "fuzz/fuzz_cli.c"
#include "fuzz/fuzz_jsonl.c"
#include "fuzz/fuzz_open.c"
#include "fuzz/fuzz_packed.c"
#include "test_util.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void test_fuzz_jsonl_corpus(void **state)
{
    (void)state;
    assert_true(tu_replay_corpus("jsonl", fuzz_jsonl_run) >= 4);
}

/* Chunk decoder: the seeds are real synthetic-trace chunks (they must decode) plus what the
 * fuzzer found; damaged ones must give FT_ECORRUPT with a message. */
static void test_fuzz_chunk_corpus(void **state)
{
    (void)state;
    assert_true(tu_replay_corpus("chunk", fuzz_chunk_run) >= 15);
}

/* Packed-record batches against a recorder on a scratch trace, read back record by record. */
static void test_fuzz_packed_corpus(void **state)
{
    (void)state;
    assert_true(tu_replay_corpus("packed", fuzz_packed_run) >= 8);
}

/* Status a seed's name asks for ("seed-corrupt-x" -> FT_ECORRUPT), or 1 when it names none. */
static int open_seed_status(const char *name)
{
    static const struct {
        const char *tag;
        int rc;
    } tags[] = {{"seed-ok-", FT_OK},
                {"seed-corrupt-", FT_ECORRUPT},
                {"seed-nottrace-", FT_ENOTTRACE},
                {"seed-version-", FT_EVERSION}};
    for (size_t i = 0; i < sizeof tags / sizeof *tags; i++)
        if (!strncmp(name, tags[i].tag, strlen(tags[i].tag))) return tags[i].rc;
    return 1;
}

/* fuzz_open as ok / rejected for tu_replay_corpus: damage or a foreign file is a rejection;
 * an oracle violation (FT_ESTATE) stays itself and fails the test. */
static int fuzz_open_status(const uint8_t *data, size_t len)
{
    int rc = fuzz_open_run(data, len);
    return rc != FT_OK && fo_allowed(rc) ? FT_EINVAL : rc;
}

static void test_fuzz_open_corpus(void **state)
{
    (void)state;
    assert_true(tu_replay_corpus("open", fuzz_open_status) >= 15);
    DIR *d = opendir(FT_SOURCE_DIR "/tests/fuzz/corpus/open");
    assert_non_null(d);
    struct dirent *e;
    int n_seeds = 0, n_files = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus/open/%s", FT_SOURCE_DIR, e->d_name);
        size_t len;
        char *buf = tu_read_file(path, &len);
        assert_non_null(buf);
        long live = ft_alloc_live();
        int rc = fuzz_open_run((const uint8_t *)buf, len);
        free(buf);
        assert_int_equal(ft_alloc_live(), live);
        int want = open_seed_status(e->d_name);
        if (want != 1) {
            if (rc != want) fail_msg("%s: status %d, the seed wants %d", e->d_name, rc, want);
            n_seeds++;
        } else if (!fo_allowed(rc)) {
            fail_msg("%s: status %d", e->d_name, rc);
        }
        n_files++;
    }
    closedir(d);
    assert_true(n_seeds >= 15);
    assert_true(n_files >= n_seeds);
}

/* The CLI corpus through the real binary: seed-eN-* must exit N, every other file 0..3. */
static void test_fuzz_cli_corpus(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[256];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_fuzz_cli_tmp"), 0);
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' synth demo --set steps=1 -o p.ftdb >/dev/null && '%s' export p.ftdb "
             "-o p.jsonl && '%s' replay p.ftdb --json > p.json && cp p.ftdb p.bad && printf 'Z' | "
             "dd of=p.bad bs=1 seek=20000 conv=notrunc 2>/dev/null",
             dir, cli, cli, cli);
    assert_int_equal(tu_sh(cmd, NULL, 0), 0);
    DIR *d = opendir(FT_SOURCE_DIR "/tests/fuzz/corpus/cli");
    assert_non_null(d);
    struct dirent *e;
    int n_seeds = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/tests/fuzz/corpus/cli/%s", FT_SOURCE_DIR, e->d_name);
        size_t len;
        char *buf = tu_read_file(path, &len);
        assert_non_null(buf);
        static fuzz_cli_argv a;
        fuzz_cli_split((const uint8_t *)buf, len, &a);
        free(buf);
        /* a fresh work folder with the fixtures, the words single-quoted for the shell */
        ft_buf c = {0};
        ft_buf_printf(&c,
                      "cd '%s' && rm -rf w && mkdir w && cp p.ftdb w/t.ftdb && cp p.jsonl "
                      "w/c.jsonl && cp p.bad w/bad.ftdb && cp p.json w/r.json && cd w && '%s'",
                      dir, cli);
        for (int i = 1; i < a.argc; i++) {
            ft_buf_printf(&c, " '");
            for (const char *p = a.argv[i]; *p; p++)
                if (*p == '\'')
                    ft_buf_printf(&c, "'\\''");
                else
                    ft_buf_append(&c, p, 1);
            ft_buf_printf(&c, "'");
        }
        ft_buf_printf(&c, " </dev/null >/dev/null 2>&1");
        ft_buf_append(&c, "", 1);
        int rc = tu_sh((const char *)c.data, NULL, 0);
        ft_buf_free(&c);
        int want = -1;
        if (!strncmp(e->d_name, "seed-e", 6) && e->d_name[6] >= '0' && e->d_name[6] <= '3' &&
            e->d_name[7] == '-')
            want = e->d_name[6] - '0';
        if (want >= 0) {
            if (rc != want)
                fail_msg("cli seed %s: exit %d, the seed wants %d", e->d_name, rc, want);
            n_seeds++;
        } else if (rc < 0 || rc > 3) {
            fail_msg("cli corpus %s: exit %d", e->d_name, rc);
        }
    }
    closedir(d);
    assert_true(n_seeds >= 15);
    tu_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fuzz_jsonl_corpus),  cmocka_unit_test(test_fuzz_chunk_corpus),
        cmocka_unit_test(test_fuzz_packed_corpus), cmocka_unit_test(test_fuzz_open_corpus),
        cmocka_unit_test(test_fuzz_cli_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
