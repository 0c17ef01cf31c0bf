/*
 * fuzz_cli.c - libFuzzer target for the `fusertrace` command line: every subcommand's argument
 * handling, driven through the same dispatcher as the real binary (cli/main.c, compiled with
 * main renamed to fusertrace_main).
 *
 * Input: the argument words after "fusertrace", separated by NUL or newline (at most 24 words
 * of at most 256 bytes). Each input runs in a scratch folder that holds a small valid trace
 * (t.ftdb), its capture stream (c.jsonl), its saved replay report (r.json, for diff) and a
 * damaged copy (bad.ftdb), restored before every run, so commands find real inputs and may write
 * outputs there. To keep a run harmless and short, '/' in a word becomes '_' (no path leaves the
 * folder) and a number of 4 to 19 digits is cut to its first 3 digits (no huge synth sizes; 20
 * digits and more stay, for overflow; digits inside a name such as te-3410 stay). stdin is
 * /dev/null, stdout and stderr are discarded.
 *
 * Oracle: no crash, leak or undefined behaviour (the sanitizers), and the exit status is one
 * of 0 (success), 1 (check failed), 2 (bad input or usage), 3 (environment).
 *
 * The corpus (tests/fuzz/corpus/cli) is replayed by ctest against the real binary (test_cli's
 * test_fuzz_cli_corpus): seeds named seed-eN-* must exit with status N, every other file with
 * one of 0..3. Build: cmake -DFT_FUZZ=ON with clang (tests/fuzz/README.md).
 */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { FUZZ_CLI_MAX_ARGS = 24, FUZZ_CLI_MAX_WORD = 256 };
#define IS_ALPHA(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))

typedef struct fuzz_cli_argv {
    int argc;
    char *argv[FUZZ_CLI_MAX_ARGS + 2];
    char words[FUZZ_CLI_MAX_ARGS][FUZZ_CLI_MAX_WORD + 1];
} fuzz_cli_argv;

/* Split data into argv (argv[0] = "fusertrace"), made harmless as the header says. */
static void fuzz_cli_split(const uint8_t *data, size_t size, fuzz_cli_argv *a)
{
    static char prog[] = "fusertrace";
    a->argc = 1;
    a->argv[0] = prog;
    size_t i = 0;
    while (i < size && a->argc <= FUZZ_CLI_MAX_ARGS) {
        char *w = a->words[a->argc - 1];
        size_t n = 0;
        while (i < size && data[i] != '\0' && data[i] != '\n') {
            if (n < FUZZ_CLI_MAX_WORD) w[n++] = data[i] == '/' ? '_' : (char)data[i];
            i++;
        }
        i++; /* the separator */
        w[n] = '\0';
        /* number runs of 4..19 digits -> their first 3 (digits inside a name, as in
         * te-pre3410 or te-3410, stay) */
        size_t o = 0;
        for (size_t k = 0; k < n;) {
            size_t e = k;
            while (e < n && w[e] >= '0' && w[e] <= '9')
                e++;
            if (e > k) {
                int in_name = k > 0 && (IS_ALPHA(w[k - 1]) ||
                                        (w[k - 1] == '-' && k > 1 && IS_ALPHA(w[k - 2])));
                size_t run = e - k, keep = !in_name && run >= 4 && run <= 19 ? 3 : run;
                memmove(w + o, w + k, keep);
                o += keep;
                k = e;
            } else {
                w[o++] = w[k++];
            }
        }
        w[o] = '\0';
        a->argv[a->argc++] = w;
    }
    a->argv[a->argc] = NULL;
}

#ifndef FT_FUZZ_REPLAY
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int fusertrace_main(int argc, char **argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static char fz_root[512], fz_work[600], fz_pristine[600];
static int fz_home = -1; /* the folder the fuzzer was started in (it writes its findings there) */
static const char *const fz_fixtures[] = {"t.ftdb", "c.jsonl", "bad.ftdb", "r.json"};

static int quiet_run(int argc, char **argv)
{
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2), in = dup(0);
    int nul = open("/dev/null", O_RDWR);
    dup2(nul, 0);
    dup2(nul, 1);
    dup2(nul, 2);
    close(nul);
    int rc = fusertrace_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    clearerr(stdout);
    clearerr(stdin);
    dup2(so, 1);
    dup2(se, 2);
    dup2(in, 0);
    close(so);
    close(se);
    close(in);
    return rc;
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0)
        if (fwrite(buf, 1, n, b) != n) abort();
    if (!a || !b) abort();
    fclose(a);
    if (fclose(b)) abort();
}

/* Empty the work folder (files only; the commands create no folders) and restore the fixtures. */
static void reset_work(void)
{
    DIR *d = opendir(fz_work);
    if (!d) abort();
    struct dirent *e;
    char p[1200];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", fz_work, e->d_name);
        if (unlink(p) && rmdir(p)) abort();
    }
    closedir(d);
    for (size_t i = 0; i < sizeof fz_fixtures / sizeof *fz_fixtures; i++) {
        char a[1200], b[1200];
        snprintf(a, sizeof a, "%s/%s", fz_pristine, fz_fixtures[i]);
        snprintf(b, sizeof b, "%s/%s", fz_work, fz_fixtures[i]);
        copy_file(a, b);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(fz_root, sizeof fz_root, "%s/fuzz_cli.XXXXXX", tmp);
    if (!mkdtemp(fz_root)) abort();
    snprintf(fz_work, sizeof fz_work, "%s/w", fz_root);
    snprintf(fz_pristine, sizeof fz_pristine, "%s/p", fz_root);
    if ((fz_home = open(".", O_RDONLY | O_DIRECTORY)) < 0) abort();
    if (mkdir(fz_work, 0700) || mkdir(fz_pristine, 0700) || chdir(fz_pristine)) abort();
    static const uint8_t synth[] = "synth\0demo\0--set\0steps=1\0-o\0t.ftdb";
    static const uint8_t exp[] = "export\0t.ftdb\0-o\0c.jsonl";
    static fuzz_cli_argv a; /* writable words: commands may edit their argv */
    fuzz_cli_split(synth, sizeof synth - 1, &a);
    if (quiet_run(a.argc, a.argv)) abort();
    fuzz_cli_split(exp, sizeof exp - 1, &a);
    if (quiet_run(a.argc, a.argv)) abort();
    /* the saved report: replay's stdout into r.json */
    static const uint8_t rep[] = "replay\0t.ftdb\0--json";
    fuzz_cli_split(rep, sizeof rep - 1, &a);
    fflush(stdout);
    int so = dup(1), fd = open("r.json", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (so < 0 || fd < 0 || dup2(fd, 1) < 0) abort();
    close(fd);
    int rrc = fusertrace_main(a.argc, a.argv);
    fflush(stdout);
    if (dup2(so, 1) < 0 || rrc) abort();
    close(so);
    copy_file("t.ftdb", "bad.ftdb");
    /* flip one byte in the middle of the copy: a damaged page */
    FILE *f = fopen("bad.ftdb", "r+b");
    if (!f || fseek(f, 0, SEEK_END)) abort();
    long n = ftell(f);
    if (fseek(f, n / 2, SEEK_SET) || fputc(0x5a, f) == EOF || fclose(f)) abort();
    if (fchdir(fz_home)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fuzz_cli_argv a;
    reset_work();
    fuzz_cli_split(data, size, &a);
    if (chdir(fz_work)) abort();
    int rc = quiet_run(a.argc, a.argv);
    if (fchdir(fz_home)) abort();
    if (rc < 0 || rc > 3) {
        fprintf(stderr, "fuzz_cli: exit status %d\n", rc);
        abort();
    }
    return 0;
}
#endif
