/*
 * fuzz_open.c - libFuzzer target for opening a trace whose small tables, meta and chunk index
 * were edited by someone careful: the edits of the input are applied to a copy of a small valid
 * trace with SQLite, then every digest is recomputed (ft_trace_redigest), so the edits reach
 * everything behind the digest check.
 *
 * Input: a list of edits, each an opcode byte and its arguments:
 *   0 t r c v8  set column c of row r of table t to the int64 v
 *   1 t r c n   set it to the next n input bytes (text)
 *   2 t r c     set it to NULL
 *   3 t r       delete row r of table t
 *   4 n m       meta: set key (n bytes) to value (m bytes)
 *   5 r o b     chunk row r: xor byte o (mod length) of its data with b
 *   6           leave the digests as edited (no recompute)
 * (t, r, c are taken modulo the tables, rows and columns there are.)
 *
 * Oracles: opening gives FT_OK or a status that names damage or a foreign file (FT_ECORRUPT,
 * FT_ENOTTRACE, FT_EVERSION); so does verify. A trace that opens is read to the end, and a fixed
 * set of SQL queries (fo_queries: the three tables, a seq slice, joins both ways, one policy)
 * runs over it; each ends or fails with an error, and on a trace that verifies each ends. A
 * trace that verifies exports, and its export imports again into a trace that verifies (whatever
 * `verify` accepts round-trips). `seal` on a copy of every edited trace gives one of the statuses
 * above (or refuses a state it does not know); on a trace whose state says it was closed it
 * changes no byte. No crash, leak or undefined behaviour.
 *
 * fuzz_open_run() returns FT_OK when the trace verified, else the first failing status; an
 * oracle violation returns FT_ESTATE (and aborts under libFuzzer). The corpus
 * (tests/fuzz/corpus/open) is replayed by test_fuzz_regress: seeds named seed-ok-*,
 * seed-corrupt-*, seed-nottrace-*, seed-version-* must give that status, the others any of
 * them. Files go to FT_BINARY_DIR in the test suite, else $TMPDIR.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_recorder.h"
#include "ft_sql.h"
#include "ft_trace.h"
#include "trace_int.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fuzz_open_run(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct {
    const char *name, *key; /* key: the row key expression */
    const char *cols[8];
} fo_tables[] = {
    {"meta", "key", {"key", "value"}},
    {"oplists", "id", {"id", "hash", "n_ops", "ops"}},
    {"fusers", "id", {"id", "stream_id", "label", "oplist", "decl_pos", "decl_no"}},
    {"recipes", "id", {"id", "stream_id", "type", "obj", "attrs", "decl_pos", "decl_no"}},
    {"chunks", "id", {"id", "first_seq", "n_records", "n_calls", "codec", "raw_bytes", "checksum"}},
};

static char fo_base[700], fo_work[700], fo_jsonl[700], fo_back[700], fo_seal[700];

static void fo_paths(void)
{
#ifdef FT_BINARY_DIR
    const char *dir = FT_BINARY_DIR;
#else
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : ".";
#endif
    long pid = (long)getpid();
    snprintf(fo_base, sizeof fo_base, "%s/fuzz_open_base_%ld.ftdb", dir, pid);
    snprintf(fo_work, sizeof fo_work, "%s/fuzz_open_work_%ld.ftdb", dir, pid);
    snprintf(fo_jsonl, sizeof fo_jsonl, "%s/fuzz_open_%ld.jsonl", dir, pid);
    snprintf(fo_back, sizeof fo_back, "%s/fuzz_open_back_%ld.ftdb", dir, pid);
    snprintf(fo_seal, sizeof fo_seal, "%s/fuzz_open_seal_%ld.ftdb", dir, pid);
}

/* The base trace: a header, three fusers (two share an op list), two recipes, two chunks of
 * calls and backward events with every optional field. */
static int fo_make_base(void)
{
    ft_trace_remove(fo_base);
    ft_rec_opts o = {5, 0};
    ft_rec *r = NULL;
    ft_err err = {0};
    if (ft_rec_open(fo_base, &o, &r, &err)) return -1;
    ft_header h = {"2.20.0", "2.9", "host", "2026-01-01", 1, 1, 0, 2, "{\"device_cc\":\"9.0\"}",
                   "{}"};
    const char *gl = "[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":2,\"in_features\":"
                     "8,\"out_features\":8}},{\"type\":\"ScaledSwiGLU\",\"attrs\":{}}]";
    int rc = ft_rec_header(r, &h);
    if (!rc) rc = ft_rec_fuser(r, 1, "moe", gl);
    if (!rc) rc = ft_rec_fuser(r, 2, NULL, gl);
    if (!rc) rc = ft_rec_fuser(r, 7, "gelu", "[{\"type\":\"GELU\",\"attrs\":{}}]");
    if (!rc) rc = ft_rec_recipe(r, 1, "MXFP8BlockScaling", 10, "{\"margin\":0}");
    if (!rc) rc = ft_rec_recipe(r, 2, "NVFP4BlockScaling", 11, "{\"disable_rht\":true}");
    static const uint8_t rg[2] = {1, 0};
    static const int64_t sp[2] = {3, 5};
    for (int i = 0; i < 8 && !rc; i++) {
        uint32_t fl = FT_CF_GRAD | FT_CF_HAS_STEP | FT_CF_HAS_MB | FT_CF_HAS_NS |
                      FT_CF_HAS_FUSE_NS | (i & 1 ? FT_CF_HAS_RECIPE : 0) | FT_CF_HAS_REBUILT |
                      FT_CF_REBUILT;
        int64_t f = i % 3 == 2 ? 7 : 1 + i % 2;
        rc = ft_rec_call_flat(r, 2 * i, f, 1 + i % 2, fl, 0, f == 7 ? 1 : 2, rg, f == 7 ? -1 : 2,
                              sp, i / 4, i % 4, i % 2 ? "fwd" : "recompute", 100 + i, 7);
        if (!rc) {
            ft_backward b = {2 * i + 1, 2 * i, 1, 150 + i};
            rc = ft_rec_backward(r, &b);
        }
    }
    if (rc) {
        ft_rec_abort(r);
        return -1;
    }
    return ft_rec_close(r) ? -1 : 0;
}

static int fo_copy(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    int ok = a && b;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0)
        ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b && fclose(b)) ok = 0;
    return ok ? 0 : -1;
}

typedef struct fo_in {
    const uint8_t *p, *end;
} fo_in;

static unsigned fo_byte(fo_in *in)
{
    return in->p < in->end ? *in->p++ : 0;
}

static int64_t fo_i64(fo_in *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)fo_byte(in) << (8 * i);
    return (int64_t)v;
}

static size_t fo_text(fo_in *in, char *buf, size_t cap)
{
    size_t n = fo_byte(in), k = 0;
    while (k < n && k + 1 < cap && in->p < in->end)
        buf[k++] = (char)*in->p++;
    buf[k] = '\0';
    return k;
}

/* Row key clause for row number r (mod the row count) of table t. */
static void fo_where(char *buf, size_t cap, unsigned t, unsigned r)
{
    snprintf(buf, cap,
             "%s = (SELECT %s FROM %s ORDER BY %s LIMIT 1 OFFSET %u %% max(1, (SELECT "
             "count(*) FROM %s)))",
             fo_tables[t].key, fo_tables[t].key, fo_tables[t].name, fo_tables[t].key, r,
             fo_tables[t].name);
}

/* Apply the input's edits; returns whether to recompute the digests. */
static int fo_edit(sqlite3 *db, fo_in *in)
{
    int redigest = 1;
    char sql[1024], where[512], text[300], text2[300];
    for (int k = 0; k < 32 && in->p < in->end; k++) {
        unsigned op = fo_byte(in) % 7, t = 0, r = 0, c = 0, nc = 0;
        if (op <= 3) {
            t = fo_byte(in) % (unsigned)(sizeof fo_tables / sizeof *fo_tables);
            while (nc < 8 && fo_tables[t].cols[nc])
                nc++;
            r = fo_byte(in);
            if (op < 3) c = fo_byte(in) % nc;
            fo_where(where, sizeof where, t, r);
        }
        sqlite3_stmt *st = NULL;
        switch (op) {
        case 0:
        case 1:
        case 2:
            snprintf(sql, sizeof sql, "UPDATE %s SET %s = ?1 WHERE %s", fo_tables[t].name,
                     fo_tables[t].cols[c], where);
            if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) break;
            if (op == 0) {
                sqlite3_bind_int64(st, 1, fo_i64(in));
            } else if (op == 1) {
                size_t n = fo_text(in, text, sizeof text);
                sqlite3_bind_text(st, 1, text, (int)n, SQLITE_TRANSIENT);
            } else {
                sqlite3_bind_null(st, 1);
            }
            sqlite3_step(st);
            break;
        case 3:
            snprintf(sql, sizeof sql, "DELETE FROM %s WHERE %s", fo_tables[t].name, where);
            sqlite3_exec(db, sql, NULL, NULL, NULL);
            break;
        case 4: {
            size_t n = fo_text(in, text, sizeof text), m = fo_text(in, text2, sizeof text2);
            if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
                                   -1, &st, NULL) != SQLITE_OK)
                break;
            sqlite3_bind_text(st, 1, text, (int)n, SQLITE_TRANSIENT);
            sqlite3_bind_text(st, 2, text2, (int)m, SQLITE_TRANSIENT);
            sqlite3_step(st);
            break;
        }
        case 5: {
            unsigned row = fo_byte(in), off = fo_byte(in) | fo_byte(in) << 8, x = fo_byte(in);
            fo_where(where, sizeof where, 4, row);
            sqlite3_stmt *q = NULL;
            snprintf(sql, sizeof sql, "SELECT id FROM chunks WHERE %s", where);
            if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK &&
                sqlite3_step(q) == SQLITE_ROW) {
                sqlite3_blob *bl = NULL;
                if (sqlite3_blob_open(db, "main", "chunks", "data", sqlite3_column_int64(q, 0), 1,
                                      &bl) == SQLITE_OK) {
                    int len = sqlite3_blob_bytes(bl);
                    uint8_t b;
                    if (len > 0 &&
                        sqlite3_blob_read(bl, &b, 1, (int)(off % (unsigned)len)) == SQLITE_OK) {
                        b ^= (uint8_t)x;
                        sqlite3_blob_write(bl, &b, 1, (int)(off % (unsigned)len));
                    }
                    sqlite3_blob_close(bl);
                }
            }
            sqlite3_finalize(q);
            break;
        }
        default:
            redigest = 0;
            break;
        }
        sqlite3_finalize(st);
    }
    return redigest;
}

/* Export t, import the export into a new trace and verify it: FT_OK, or FT_ESTATE. */
static int fo_round_trip(ft_trace *t)
{
    ft_trace_remove(fo_back);
    FILE *f = fopen(fo_jsonl, "w+");
    if (!f) return FT_EIO;
    ft_jsonl_writer *w = NULL;
    ft_sink s;
    ft_err err = {0};
    int rc = ft_jsonl_writer_new(f, &w);
    if (!rc) {
        ft_jsonl_writer_sink(w, &s);
        rc = ft_trace_export(t, &s, &err);
        ft_jsonl_writer_free(w);
    }
    if (rc) {
        fclose(f);
        fprintf(stderr, "fuzz_open: verified, but export failed: %s\n", ft_err_msg(&err));
        return FT_ESTATE;
    }
    rewind(f);
    ft_rec *r = NULL;
    if (!(rc = ft_rec_open(fo_back, NULL, &r, &err))) {
        ft_rec_sink(r, &s);
        rc = ft_jsonl_import(f, "export", &s, NULL, &err);
        if (rc)
            ft_rec_abort(r);
        else if ((rc = ft_rec_close(r)))
            err = *ft_rec_error(r);
    }
    fclose(f);
    if (rc) {
        fprintf(stderr, "fuzz_open: verified, but its export does not import: %s\n",
                ft_err_msg(&err));
        return FT_ESTATE;
    }
    ft_trace *u = NULL;
    rc = ft_trace_open(fo_back, FT_OPEN_READ, &u, &err);
    if (!rc) rc = ft_trace_verify(u, &err);
    ft_trace_close(u);
    if (rc) {
        fprintf(stderr, "fuzz_open: re-imported trace does not verify: %s\n", ft_err_msg(&err));
        return FT_ESTATE;
    }
    return FT_OK;
}

/* The queries run over every trace that opens; replay: it reads decisions, which may refuse a
 * trace that verifies (a recipe type or op list the model does not know is no damage). */
static const struct {
    const char *sql;
    int replay;
} fo_queries[] = {
    {"SELECT count(*), sum(n_tokens), count(phase), max(step) FROM calls", 0},
    {"SELECT count(*), sum(ns) FROM backwards", 0},
    {"SELECT count(*) FROM calls WHERE seq BETWEEN 3 AND 9", 0},
    {"SELECT count(*) FROM backwards b JOIN calls c ON c.seq = b.call", 0},
    {"SELECT json_array_length(m_splits), label FROM calls ORDER BY seq DESC LIMIT 3", 0},
    {"SELECT count(*), sum(build), sum(reset), count(stale), count(phase) FROM decisions", 1},
    {"SELECT count(*), sum(d.build) FROM calls c CROSS JOIN decisions d ON d.seq = c.seq", 1},
    {"SELECT count(*) FROM decisions d CROSS JOIN calls c ON c.seq = d.seq WHERE d.policy = "
     "'te-3410'",
     1},
};

/* Run fo_queries over t: 0 when every query ended (or only replay queries failed, with an
 * error), 1 when a query of the tables themselves failed, -1 when SQL could not be set up. */
static int fo_sql(ft_trace *t)
{
    sqlite3 *db = NULL;
    ft_err err = {0};
    if (sqlite3_open(":memory:", &db) != SQLITE_OK || ft_sql_register(db, t, "t", &err)) {
        sqlite3_close(db);
        return -1;
    }
    int failed = 0;
    for (size_t q = 0; q < sizeof fo_queries / sizeof *fo_queries; q++) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db, fo_queries[q].sql, -1, &st, NULL);
        if (rc == SQLITE_OK)
            while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            }
        if (rc != SQLITE_DONE && !fo_queries[q].replay) {
            if (!failed) fprintf(stderr, "fuzz_open: query %zu: %s\n", q, sqlite3_errmsg(db));
            failed = 1;
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return failed;
}

/* Seal a copy of the edited trace: an allowed status, and a trace whose state says it was closed
 * comes back byte for byte. FT_OK, or FT_ESTATE on a violation. */
static int fo_seal_copy(int closed)
{
    ft_trace_remove(fo_seal);
    if (fo_copy(fo_work, fo_seal)) return FT_OK; /* out of space: nothing to judge */
    ft_seal_info si;
    ft_err err = {0};
    int rc = ft_trace_seal(fo_seal, 0, &si, &err);
    int bad = !(rc == FT_OK || rc == FT_ECORRUPT || rc == FT_ENOTTRACE || rc == FT_EVERSION ||
                rc == FT_EINVAL);
    if (bad) fprintf(stderr, "fuzz_open: seal gave %d: %s\n", rc, ft_err_msg(&err));
    if (!bad && closed) {
        FILE *a = fopen(fo_work, "rb"), *b = fopen(fo_seal, "rb");
        int ca = 0, cb = 0;
        while (a && b && (ca = fgetc(a)) == (cb = fgetc(b)) && ca != EOF) {
        }
        if (!a || !b || ca != cb) {
            fprintf(stderr, "fuzz_open: seal changed a closed trace\n");
            bad = 1;
        }
        if (a) fclose(a);
        if (b) fclose(b);
    }
    ft_trace_remove(fo_seal);
    return bad ? FT_ESTATE : FT_OK;
}

static int fo_allowed(int rc)
{
    return rc == FT_OK || rc == FT_ECORRUPT || rc == FT_ENOTTRACE || rc == FT_EVERSION;
}

int fuzz_open_run(const uint8_t *data, size_t size)
{
    static int have_base;
    if (!have_base) {
        fo_paths();
        if (fo_make_base()) return FT_ESTATE;
        have_base = 1;
    }
    ft_trace_remove(fo_work);
    if (fo_copy(fo_base, fo_work)) return FT_EIO;
    sqlite3 *db = NULL;
    if (sqlite3_open(fo_work, &db) != SQLITE_OK) {
        sqlite3_close(db);
        return FT_EIO;
    }
    fo_in in = {data, data + size};
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    int redigest = fo_edit(db, &in);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
    ft_err err = {0};
    if (redigest) ft_trace_redigest(fo_work, &err);
    ft_trace *t = NULL;
    int rc = ft_trace_open(fo_work, FT_OPEN_READ, &t, &err);
    if (!fo_allowed(rc)) {
        fprintf(stderr, "fuzz_open: open gave %d: %s\n", rc, ft_err_msg(&err));
        return FT_ESTATE;
    }
    const char *state = t ? ft_trace_meta(t, "state") : NULL;
    const int closed = state && !strcmp(state, "complete");
    if (rc) return fo_seal_copy(0) ? FT_ESTATE : rc;
    ft_reader *rd = NULL;
    int rrc = ft_reader_open(t, FT_READ_SPLITS, &rd);
    const ft_batch *b;
    while (!rrc && !(rrc = ft_reader_next(rd, &b)) && b) {
        for (uint32_t i = 0; i < b->n; i++) {
            if (b->kind[i] != FT_REC_CALL) continue;
            ft_call c;
            ft_batch_call(t, b, i, &c);
        }
    }
    ft_reader_close(rd);
    if (!fo_allowed(rrc)) {
        fprintf(stderr, "fuzz_open: reading gave %d: %s\n", rrc, ft_err_msg(ft_trace_error(t)));
        ft_trace_close(t);
        return FT_ESTATE;
    }
    const int sql_failed = fo_sql(t) > 0;
    rc = ft_trace_verify(t, &err);
    if (!rc) rc = ft_trace_check_json(t, &err);
    if (!fo_allowed(rc)) {
        fprintf(stderr, "fuzz_open: verify gave %d: %s\n", rc, ft_err_msg(&err));
        rc = FT_ESTATE;
    } else if (!rc && sql_failed) {
        fprintf(stderr, "fuzz_open: verified, but a query failed\n");
        rc = FT_ESTATE;
    } else if (!rc) {
        rc = fo_round_trip(t);
    }
    ft_trace_close(t);
    if (fo_seal_copy(closed)) rc = FT_ESTATE;
    return rc;
}

#ifndef FT_FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fuzz_open_run(data, size) == FT_ESTATE) abort();
    return 0;
}
#endif
