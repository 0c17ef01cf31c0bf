/*
 * test_util.h - helpers the test binaries share (test_util.c, linked into every one by
 * ft_add_test): reading a file, a scratch directory under FT_BINARY_DIR, running the CLI (the
 * binary named by FT_CLI) through the shell, comparing JSONL streams record by record, and
 * replaying a fuzz corpus. Failures are CMocka failures (these are for tests only).
 */
#ifndef FT_TEST_UTIL_H
#define FT_TEST_UTIL_H

#include "ft_common.h"

#include <stddef.h>
#include <stdint.h>

/* The whole file, NUL-terminated, malloc'd (free()); *len (if len) gets its size. NULL when it
 * cannot be opened. */
char *tu_read_file(const char *path, size_t *len);
/* Copy the file from into to (created or truncated); asserts it worked. */
void tu_copy_file(const char *from, const char *to);
/* Whether path with suffix appended ("-wal", "" ...) exists. */
int tu_exists(const char *path, const char *suffix);

/* dir <- FT_BINARY_DIR/name, created empty (anything there before is removed). 0 or -1, so it
 * can end a CMocka setup function. */
int tu_dir_fresh(char *dir, size_t cap, const char *name);
/* Remove dir and everything in it. 0 or -1. */
int tu_dir_remove(const char *dir);
/* buf <- dir/name, with no file of that name left in place. */
void tu_dir_path(char *buf, size_t cap, const char *dir, const char *name);

/* The `fusertrace` binary (FT_CLI), or NULL when unset: then the caller calls skip(). */
const char *tu_cli(void);
/* Run cmd through /bin/sh; its stdout (truncated to cap - 1 bytes, NUL-terminated) into out,
 * which may be NULL. Returns the exit status, -1 if it did not exit normally. */
int tu_sh(const char *cmd, char *out, size_t cap);
/* The same with all of stdout appended to *out (NUL-terminated; out->len excludes the NUL). */
int tu_sh_buf(const char *cmd, ft_buf *out);

/* Two JSONL texts hold the same records: line by line, equal as parsed JSON. name is for the
 * failure message. */
void tu_assert_same_records(const char *name, const char *a, const char *b);

/* Run fn on every file of the fuzz corpus tests/fuzz/corpus/KIND (dot files skipped): each must
 * leave no ft_malloc'd byte behind and give exactly the status tests/fuzz/KIND.status lists for
 * it ("NAME ok" or "NAME rejected", i.e. FT_OK or FT_EINVAL); a file without a line, a line
 * without a file, or any other status fails. FT_PRINT_CORPUS=write rewrites the status file from
 * what the files give now (every status still FT_OK or FT_EINVAL; review the diff). Returns the
 * number of files. */
int tu_replay_corpus(const char *kind, int (*fn)(const uint8_t *data, size_t len));

#endif /* FT_TEST_UTIL_H */
