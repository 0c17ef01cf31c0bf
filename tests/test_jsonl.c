/*
 * test_jsonl.c - capture-jsonl v1 import and the JSONL writer sink.
 *
 * One test per kind of malformed input (each asserts FT_EINVAL and that the message names the
 * line and the field), unknown-field handling, sink and writer failures, allocation-failure
 * injection, and the round trip import -> writer for every canned stream in traces/ (and, through
 * the recorder, import -> .ftdb -> export), compared record by record as parsed JSON.
 *
 * The importer's two paths (the simdjson fast path for call and backward lines, the jansson
 * general path for everything else) must agree exactly: same status, message, warnings and output
 * on the fuzz corpus, on traces/ and on thousands of mutated copies of them. zstd-compressed
 * input and output: round trips, truncated and damaged streams named by line, write errors.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_limits.h"
#include "ft_recorder.h"
#include "test_util.h"

#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- helpers ------------------------------------------------------------------------------ */
#define HDR "{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":1}\n"
#define FUS "{\"t\":\"fuser\",\"id\":1,\"ops\":[{\"type\":\"GELU\"},{\"type\":\"Bias\"}]}\n"
#define REC                                                                                        \
    "{\"t\":\"recipe\",\"id\":1,\"type\":\"DelayedScaling\",\"obj\":5,\"attrs\":{\"margin\":0}}\n"
#define CALL0                                                                                      \
    "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":1,\"grad\":true,\"input_rg\":true,"          \
    "\"op_rg\":[true,false],\"device\":0}\n"
/* a call with seq 0 on fuser 1 / recipe 1 and the extra text X spliced in before the end */
#define CALL_WITH(x)                                                                               \
    "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":1,\"grad\":true,\"input_rg\":true,"          \
    "\"op_rg\":[true,false],\"device\":0" x "}\n"
#define PRE HDR FUS REC /* three valid lines */

typedef struct result {
    int rc;
    ft_err err;
    char *out; /* writer output */
    size_t out_len;
    char *warn; /* warnings */
    size_t warn_len;
} result;

static FILE *input_of(const char *text, size_t len)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(text, 1, len, f), len);
    rewind(f);
    return f;
}

static void import_flags(const char *text, size_t len, unsigned flags, result *r)
{
    memset(r, 0, sizeof *r);
    FILE *in = input_of(text, len);
    FILE *out = open_memstream(&r->out, &r->out_len);
    FILE *warn = open_memstream(&r->warn, &r->warn_len);
    assert_non_null(out);
    assert_non_null(warn);
    ft_jsonl_writer *w = NULL;
    r->rc = ft_jsonl_writer_new(out, &w); /* fails under allocation-failure injection */
    if (!r->rc) {
        ft_sink sink;
        ft_jsonl_writer_sink(w, &sink);
        r->rc = ft_jsonl_import_ex(in, "t.jsonl", &sink, warn, flags, &r->err);
        ft_jsonl_writer_free(w);
    }
    fclose(out);
    fclose(warn);
    fclose(in);
}

static void import_n(const char *text, size_t len, result *r)
{
    import_flags(text, len, 0, r);
}

static void import_text(const char *text, result *r)
{
    import_n(text, strlen(text), r);
}

static void result_free(result *r)
{
    free(r->out);
    free(r->warn);
}

/* Import must fail with FT_EINVAL; the message must name line `line`, the field (if given) and
 * contain `what`. */
static void expect_bad_n(const char *text, size_t len, int line, const char *field,
                         const char *what)
{
    long live = ft_alloc_live();
    result r;
    import_n(text, len, &r);
    char where[64], fld[96];
    snprintf(where, sizeof where, "t.jsonl:%d: ", line);
    if (r.rc != FT_EINVAL || !strstr(r.err.msg, where) ||
        (field && (snprintf(fld, sizeof fld, "field '%s'", field), !strstr(r.err.msg, fld))) ||
        !strstr(r.err.msg, what))
        print_error("rc %d, message: %s\n  want line %d, field %s, text '%s'\n", r.rc, r.err.msg,
                    line, field ? field : "(none)", what);
    assert_int_equal(r.rc, FT_EINVAL);
    assert_non_null(strstr(r.err.msg, where));
    if (field) assert_non_null(strstr(r.err.msg, fld));
    assert_non_null(strstr(r.err.msg, what));
    assert_int_equal(ft_alloc_live(), live);
    result_free(&r);
}

static void expect_bad(const char *text, int line, const char *field, const char *what)
{
    expect_bad_n(text, strlen(text), line, field, what);
}

/* ---- malformed input, one kind per test --------------------------------------------------- */
static void test_import_bad_json(void **state)
{
    (void)state;
    expect_bad(HDR "{\"t\":\"fuser\",\n", 2, NULL, "invalid JSON");
    expect_bad(HDR FUS REC CALL_WITH(",\"m_splits\":[1,x]"), 4, NULL, "m_splits");
}

static void test_import_not_an_object(void **state)
{
    (void)state;
    expect_bad(HDR "[1,2]\n", 2, NULL, "expected a JSON object");
}

static void test_import_empty_line(void **state)
{
    (void)state;
    expect_bad(HDR "\n" FUS, 2, NULL, "empty line");
}

static void test_import_missing_type(void **state)
{
    (void)state;
    expect_bad(HDR "{\"id\":1}\n", 2, "t", "missing");
    expect_bad(HDR "{\"t\":3}\n", 2, "t", "expected a string");
}

static void test_import_unknown_record_type(void **state)
{
    (void)state;
    expect_bad(PRE "{\"t\":\"forward\",\"seq\":0}\n", 4, "t", "unknown record type \"forward\"");
}

static void test_import_header_not_first(void **state)
{
    (void)state;
    expect_bad(FUS HDR, 1, "t", "first record must be the header");
}

static void test_import_header_twice(void **state)
{
    (void)state;
    expect_bad(HDR FUS HDR, 3, "t", "second header");
}

static void test_import_wrong_format(void **state)
{
    (void)state;
    expect_bad("{\"t\":\"header\",\"format\":\"other\",\"version\":1}\n", 1, "format",
               "fusertrace-capture");
    expect_bad("{\"t\":\"header\",\"version\":1}\n", 1, "format", "missing");
}

static void test_import_wrong_version(void **state)
{
    (void)state;
    expect_bad("{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":2}\n", 1, "version",
               "unsupported version 2");
    expect_bad("{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":\"1\"}\n", 1,
               "version", "expected an integer");
}

static void test_import_empty_stream(void **state)
{
    (void)state;
    expect_bad("", 1, "t", "no header");
}

static void test_import_undeclared_fuser(void **state)
{
    (void)state;
    expect_bad(HDR REC CALL0, 3, "fuser", "fuser 1 is not declared");
}

static void test_import_undeclared_recipe(void **state)
{
    (void)state;
    expect_bad(HDR FUS CALL0, 3, "recipe", "recipe 1 is not declared");
}

static void test_import_duplicate_fuser_id(void **state)
{
    (void)state;
    expect_bad(HDR FUS FUS, 3, "id", "fuser 1 is already declared");
}

static void test_import_duplicate_recipe_id(void **state)
{
    (void)state;
    expect_bad(HDR REC REC, 3, "id", "recipe 1 is already declared");
}

static void test_import_duplicate_recipe_state(void **state)
{
    (void)state;
    expect_bad(HDR REC
               "{\"t\":\"recipe\",\"id\":2,\"type\":\"DelayedScaling\",\"obj\":5,\"attrs\":{"
               "\"margin\":0}}\n",
               3, "attrs", "already declared as id 1");
}

static void test_import_duplicate_key(void **state)
{
    (void)state;
    expect_bad(PRE CALL_WITH(",\"device\":1"), 4, "device", "twice");
}

static void test_import_seq_not_increasing(void **state)
{
    (void)state;
    expect_bad(PRE CALL0 CALL0, 5, "seq", "does not increase");
}

static void test_import_seq_shared_with_backward(void **state)
{
    (void)state;
    /* a backward takes seq 1, so a call with seq 1 after it is not increasing */
    expect_bad(PRE CALL0 "{\"t\":\"backward\",\"seq\":1,\"call\":0}\n"
                         "{\"t\":\"call\",\"seq\":1,\"fuser\":1,\"recipe\":1,\"grad\":true,"
                         "\"input_rg\":true,\"op_rg\":[true,false],\"device\":0}\n",
               6, "seq", "does not increase");
    expect_bad(PRE CALL0 "{\"t\":\"backward\",\"seq\":0,\"call\":0}\n", 5, "seq",
               "does not increase");
}

static void test_import_wrong_field_type(void **state)
{
    (void)state;
    expect_bad(PRE
               "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":1,\"grad\":1,\"input_rg\":true,"
               "\"op_rg\":[true,false],\"device\":0}\n",
               4, "grad", "expected true or false");
    expect_bad(PRE CALL_WITH(",\"phase\":7"), 4, "phase", "expected a string");
    expect_bad(PRE CALL_WITH(",\"step\":1.5"), 4, "step", "expected an integer");
    expect_bad(PRE CALL_WITH(",\"m_splits\":{}"), 4, "m_splits", "expected an array");
    expect_bad(PRE CALL_WITH(",\"m_splits\":[1,true]"), 4, "m_splits[1]", "expected an integer");
    expect_bad(HDR "{\"t\":\"fuser\",\"id\":\"1\",\"ops\":[{\"type\":\"GELU\"}]}\n", 2, "id",
               "expected an integer");
    expect_bad(HDR "{\"t\":\"fuser\",\"id\":1,\"ops\":[{\"type\":\"GELU\",\"attrs\":[]}]}\n", 2,
               "ops[0].attrs", "expected an object");
    expect_bad(HDR "{\"t\":\"fuser\",\"id\":1,\"ops\":[{\"type\":2}]}\n", 2, "ops[0].type",
               "expected a string");
    expect_bad(HDR "{\"t\":\"recipe\",\"id\":1,\"type\":\"X\",\"obj\":5,\"attrs\":null}\n", 2,
               "attrs", "expected an object");
    expect_bad(HDR FUS "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":\"1\",\"grad\":true,"
                       "\"input_rg\":true,\"op_rg\":[true,false],\"device\":0}\n",
               3, "recipe", "expected an integer or null");
    expect_bad(PRE CALL_WITH(",\"graph\":\"yes\""), 4, "graph", "expected true or false");
}

static void test_import_null_for_optional_field(void **state)
{
    (void)state;
    expect_bad(PRE CALL_WITH(",\"phase\":null"), 4, "phase", "got null");
    expect_bad(HDR "{\"t\":\"fuser\",\"id\":1,\"label\":null,\"ops\":[{\"type\":\"GELU\"}]}\n", 2,
               "label", "got null");
}

static void test_import_op_rg_length(void **state)
{
    (void)state;
    expect_bad(PRE "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":1,\"grad\":true,"
                   "\"input_rg\":true,\"op_rg\":[true],\"device\":0}\n",
               4, "op_rg", "has 1 entries but fuser 1 has 2 ops");
    expect_bad(PRE "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":1,\"grad\":true,"
                   "\"input_rg\":true,\"op_rg\":[true,0],\"device\":0}\n",
               4, "op_rg[1]", "expected true or false");
}

static void test_import_m_splits_length(void **state)
{
    (void)state;
#define GROUPED                                                                                    \
    "{\"t\":\"fuser\",\"id\":1,\"ops\":[{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4}}" \
    ","                                                                                            \
    "{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":4}}]}\n"
    expect_bad(HDR GROUPED REC CALL_WITH(",\"m_splits\":[1,2,3]"), 4, "m_splits",
               "has 3 entries but fuser 1 has num_groups 4");
    expect_bad(HDR GROUPED REC CALL_WITH(",\"m_splits\":[]"), 4, "m_splits",
               "has 0 entries but fuser 1 has num_groups 4");
    expect_bad(HDR "{\"t\":\"fuser\",\"id\":1,\"ops\":[{\"type\":\"GroupedLinear\",\"attrs\":{"
                   "\"num_groups\":\"4\"}}]}\n",
               2, "ops[0].attrs.num_groups", "expected an integer");
    expect_bad(HDR "{\"t\":\"fuser\",\"id\":1,\"ops\":[{\"type\":\"GroupedLinear\",\"attrs\":{"
                   "\"num_groups\":0}}]}\n",
               2, "ops[0].attrs.num_groups", "out of range");
    /* the right length, and any length where the grouped ops disagree, are accepted */
    result r;
    import_text(HDR GROUPED REC CALL_WITH(",\"m_splits\":[1,2,3,4]"), &r);
    assert_int_equal(r.rc, FT_OK);
    result_free(&r);
    import_text(HDR "{\"t\":\"fuser\",\"id\":1,\"ops\":[{\"type\":\"GroupedLinear\",\"attrs\":{"
                    "\"num_groups\":4}},{\"type\":\"GroupedLinear\",\"attrs\":{\"num_groups\":2}}]}"
                    "\n" REC CALL_WITH(",\"m_splits\":[1]"),
                &r);
    assert_int_equal(r.rc, FT_OK);
    result_free(&r);
#undef GROUPED
}

static void test_import_empty_ops(void **state)
{
    (void)state;
    expect_bad(HDR "{\"t\":\"fuser\",\"id\":1,\"ops\":[]}\n", 2, "ops", "at least one op");
    expect_bad(HDR "{\"t\":\"fuser\",\"id\":1,\"ops\":[7]}\n", 2, "ops[0]", "expected an object");
}

static void test_import_negative_split(void **state)
{
    (void)state;
    expect_bad(PRE CALL_WITH(",\"m_splits\":[3,-1,2]"), 4, "m_splits[1]", "negative split -1");
}

static void test_import_invalid_utf8(void **state)
{
    (void)state;
    expect_bad(PRE CALL_WITH(",\"phase\":\"f\xc3\x28w\""), 4, "phase", "invalid UTF-8");
    expect_bad(HDR "{\"t\":\"fuser\",\"id\":1,\"label\":\"\xed\xa0\x80\",\"ops\":[]}\n", 2, "label",
               "invalid UTF-8");
}

static void test_import_nul_byte(void **state)
{
    (void)state;
    static const char text[] = HDR "{\"t\":\"fuser\",\"id\":1,\"label\":\"a\0b\",\"ops\":[]}\n";
    expect_bad_n(text, sizeof text - 1, 2, NULL, "NUL byte");
    expect_bad(PRE CALL_WITH(",\"phase\":\"a\\u0000b\""), 4, "phase", "NUL character");
}

static void test_import_number_out_of_range(void **state)
{
    (void)state;
    /* beyond int64 */
    expect_bad(PRE "{\"t\":\"call\",\"seq\":9223372036854775808,\"fuser\":1}\n", 4, "seq",
               "out of range");
    expect_bad(PRE CALL_WITH(",\"m_splits\":[1,99999999999999999999]"), 4, "m_splits",
               "out of range");
    expect_bad(PRE CALL_WITH(",\"ns\":1e999"), 4, "ns", "out of range");
    /* beyond the field's own range */
    expect_bad(PRE "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":1,\"grad\":true,"
                   "\"input_rg\":true,\"op_rg\":[true,false],\"device\":2147483648}\n",
               4, "device", "out of range");
    expect_bad(PRE "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":1,\"grad\":true,"
                   "\"input_rg\":true,\"op_rg\":[true,false],\"device\":-1}\n",
               4, "device", "out of range");
    expect_bad(PRE CALL_WITH(",\"step\":-3"), 4, "step", "out of range");
    expect_bad(PRE CALL_WITH(",\"fuse_ns\":-1"), 4, "fuse_ns", "out of range");
    expect_bad("{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":1,\"rank\":"
               "4294967296}\n",
               1, "rank", "out of range");
    expect_bad("{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":1,\"rank\":2,"
               "\"world_size\":2}\n",
               1, "rank", "not below world_size");
}

static void test_import_missing_required_field(void **state)
{
    (void)state;
    expect_bad(PRE "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":1,\"grad\":true,"
                   "\"input_rg\":true,\"op_rg\":[true,false]}\n",
               4, "device", "missing");
    expect_bad(PRE "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"grad\":true,"
                   "\"input_rg\":true,\"op_rg\":[true,false],\"device\":0}\n",
               4, "recipe", "missing");
    expect_bad(PRE "{\"t\":\"call\",\"fuser\":1}\n", 4, "seq", "missing");
    expect_bad(HDR "{\"t\":\"fuser\",\"id\":1}\n", 2, "ops", "missing");
    expect_bad(HDR "{\"t\":\"recipe\",\"id\":1,\"obj\":1,\"attrs\":{}}\n", 2, "type", "missing");
    expect_bad(PRE CALL0 "{\"t\":\"backward\",\"seq\":1}\n", 5, "call", "missing");
}

static void test_import_backward_unknown_call(void **state)
{
    (void)state;
    expect_bad(PRE CALL0 "{\"t\":\"backward\",\"seq\":1,\"call\":7}\n", 5, "call",
               "not the seq of an earlier call");
    /* a backward's own seq is not a call */
    expect_bad(PRE CALL0 "{\"t\":\"backward\",\"seq\":1,\"call\":0}\n"
                         "{\"t\":\"backward\",\"seq\":2,\"call\":1}\n",
               6, "call", "not the seq of an earlier call");
}

#define HDR_WITH(x) "{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":1," x "}\n"

/* env values are strings, numbers or null (kept as they are); te_fusions has its shape. */
static void test_import_env_value_type(void **state)
{
    (void)state;
    result r;
    import_text(HDR_WITH("\"env\":{\"world_size\":8,\"device_cc\":10.0,\"cudnn_frontend\":null,"
                         "\"NVTE_X\":\"1\"}"),
                &r);
    assert_int_equal(r.rc, FT_OK);
    json_t *h = json_loads(r.out, JSON_DISABLE_EOF_CHECK, NULL);
    const json_t *env = json_object_get(h, "env");
    assert_int_equal(json_integer_value(json_object_get(env, "world_size")), 8);
    assert_true(json_is_real(json_object_get(env, "device_cc")));
    assert_true(json_real_value(json_object_get(env, "device_cc")) == 10.0);
    assert_true(json_is_null(json_object_get(env, "cudnn_frontend")));
    json_decref(h);
    result_free(&r);
    expect_bad(HDR_WITH("\"env\":{\"world_size\":true}"), 1, "env.world_size",
               "expected a string, a number or null, got true");
    expect_bad(HDR_WITH("\"env\":{\"device_cc\":[10,0]}"), 1, "env.device_cc",
               "expected a string, a number or null");
    expect_bad(HDR_WITH("\"env\":[]"), 1, "env", "expected an object");
    expect_bad(HDR_WITH("\"te_fusions\":[]"), 1, "te_fusions", "expected an object");
    expect_bad(HDR_WITH("\"te_fusions\":{\"forward_backward\":[],\"forward\":[]}"), 1,
               "te_fusions.backward", "missing");
    expect_bad(HDR_WITH("\"te_fusions\":{\"forward_backward\":[\"\"],\"forward\":[],"
                        "\"backward\":[]}"),
               1, "te_fusions.forward_backward[0]",
               "expected a function name, got an empty string");
    import_text(HDR_WITH("\"te_fusions\":{\"forward_backward\":[\"fuse_ops\"],\"forward\":[],"
                         "\"backward\":[\"my.fusion\"]}"),
                &r);
    assert_int_equal(r.rc, FT_OK);
    assert_non_null(strstr(r.out, "\"te_fusions\":{"));
    result_free(&r);
}

/* of: an earlier fuser with as many ops (the same instance, its op attributes changed); kept. */
static void test_import_fuser_of(void **state)
{
    (void)state;
    const char *f2 = "{\"t\":\"fuser\",\"id\":2,\"of\":1,\"ops\":[{\"type\":\"GELU\"},"
                     "{\"type\":\"Bias\",\"attrs\":{\"size\":4}}]}\n";
    char text[1024];
    snprintf(text, sizeof text, "%s%s%s", HDR, FUS, f2);
    result r;
    import_text(text, &r);
    assert_int_equal(r.rc, FT_OK);
    assert_non_null(strstr(r.out, "\"id\":2,\"of\":1,"));
    result_free(&r);
    expect_bad(HDR FUS "{\"t\":\"fuser\",\"id\":2,\"of\":7,\"ops\":[{\"type\":\"GELU\"}]}\n", 3,
               "of", "fuser 7 is not declared before");
    expect_bad(HDR FUS "{\"t\":\"fuser\",\"id\":2,\"of\":1,\"ops\":[{\"type\":\"GELU\"}]}\n", 3,
               "of", "fuser 1 has 2 ops, this one 1");
    expect_bad(HDR FUS "{\"t\":\"fuser\",\"id\":2,\"of\":\"1\",\"ops\":[{\"type\":\"GELU\"}]}\n", 3,
               "of", "expected an integer");
}

static void test_import_line_too_long(void **state)
{
    (void)state;
    const char *start = "{\"t\":\"fuser\",\"id\":1,\"label\":\"";
    const char *tail = "\",\"ops\":[{\"type\":\"GELU\"}]}\n";
    size_t h = strlen(HDR), ns = strlen(start), nx = (size_t)FT_LIM_LINE_BYTES, nt = strlen(tail);
    char *text = malloc(h + ns + nx + nt);
    assert_non_null(text);
    memcpy(text, HDR, h);
    memcpy(text + h, start, ns);
    memset(text + h + ns, 'x', nx);
    memcpy(text + h + ns + nx, tail, nt);
    expect_bad_n(text, h + ns + nx + nt, 2, NULL, "line longer than");
    free(text);
}

/* ---- accepted input ----------------------------------------------------------------------- */
static void test_import_unknown_fields_warned_once(void **state)
{
    (void)state;
    result r;
    import_text("{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":1,\"job\":\"j1\","
                "\"opts\":{\"b\":2,\"a\":[1.5]}}\n" FUS REC CALL_WITH(
                    ",\"zzz\":1,\"yy\":[1]") "{\"t\":\"call\",\"seq\":5,\"fuser\":1,\"recipe\":1,"
                                             "\"grad\":true,"
                                             "\"input_rg\":true,\"op_rg\":[true,false],\"device\":"
                                             "0,\"zzz\":2}\n",
                &r);
    assert_int_equal(r.rc, FT_OK);
    /* unknown call fields: one warning each, naming the first line they appear on */
    assert_non_null(strstr(r.warn, "t.jsonl:4: warning: field 'zzz'"));
    assert_non_null(strstr(r.warn, "t.jsonl:4: warning: field 'yy'"));
    assert_null(strstr(r.warn, "t.jsonl:5:"));
    /* unknown header fields are kept, not warned about */
    assert_null(strstr(r.warn, "'job'"));
    assert_non_null(strstr(r.out, "\"job\":\"j1\""));
    assert_non_null(strstr(r.out, "\"opts\":{\"a\":[1.5],\"b\":2}"));
    assert_null(strstr(r.out, "zzz"));
    result_free(&r);
}

static void test_import_crlf_and_no_final_newline(void **state)
{
    (void)state;
    result r;
    import_text("{\"t\":\"header\",\"format\":\"fusertrace-capture\",\"version\":1}\r\n"
                "{\"t\":\"fuser\",\"id\":1,\"ops\":[{\"type\":\"GELU\"}]}",
                &r);
    assert_int_equal(r.rc, FT_OK);
    assert_non_null(strstr(r.out, "\"t\":\"fuser\""));
    result_free(&r);
}

static void test_import_doubles_round_trip(void **state)
{
    (void)state;
    static const char *const v[] = {"0.1",  "0.33333333333333331",    "5e-324", "-2.5",
                                    "1e21", "1.7976931348623157e308", "7.0",    "-0.0"};
    char text[1024];
    size_t n = (size_t)snprintf(text, sizeof text,
                                HDR "{\"t\":\"recipe\",\"id\":1,\"type\":\"X\","
                                    "\"obj\":1,\"attrs\":{\"v\":[");
    for (size_t i = 0; i < FT_ARRAY_LEN(v); i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", i ? "," : "", v[i]);
    snprintf(text + n, sizeof text - n, "]}}\n");
    result r;
    import_text(text, &r);
    assert_int_equal(r.rc, FT_OK);
    const char *line = strchr(r.out, '\n') + 1;
    json_error_t je;
    json_t *o = json_loads(line, JSON_DISABLE_EOF_CHECK, &je);
    assert_non_null(o);
    json_t *arr = json_object_get(json_object_get(o, "attrs"), "v");
    assert_int_equal(json_array_size(arr), FT_ARRAY_LEN(v));
    for (size_t i = 0; i < FT_ARRAY_LEN(v); i++) {
        assert_true(json_is_real(json_array_get(arr, i)));
        double want = strtod(v[i], NULL), got = json_real_value(json_array_get(arr, i));
        assert_memory_equal(&got, &want, sizeof got); /* bit for bit, -0.0 included */
    }
    json_decref(o);
    result_free(&r);
}

/* ---- sinks that fail ---------------------------------------------------------------------- */
typedef struct failing {
    int n_calls;
    int fail_at; /* call_fn fails on this call (1-based) */
    ft_err err;
} failing;

static int f_call(void *ctx, const ft_call *c)
{
    failing *f = ctx;
    (void)c;
    if (++f->n_calls == f->fail_at) return ft_err_set(&f->err, FT_EIO, "disk on fire");
    return FT_OK;
}

static const ft_err *f_error(void *ctx)
{
    return &((failing *)ctx)->err;
}

static void test_import_sink_error_named(void **state)
{
    (void)state;
    failing f = {0, 2, {0, ""}};
    ft_sink sink = {&f, NULL, NULL, NULL, f_call, NULL, f_error, NULL};
    const char *ok =
        PRE CALL0 "{\"t\":\"call\",\"seq\":1,\"fuser\":1,\"recipe\":null,\"grad\":true,"
                  "\"input_rg\":true,\"op_rg\":[true,false],\"device\":0}\n";
    FILE *in = input_of(ok, strlen(ok));
    ft_err err = {0, ""};
    int rc = ft_jsonl_import(in, "s.jsonl", &sink, NULL, &err);
    fclose(in);
    assert_int_equal(rc, FT_EIO);
    assert_non_null(strstr(err.msg, "s.jsonl:5:"));
    assert_non_null(strstr(err.msg, "disk on fire"));
    assert_int_equal(f.n_calls, 2);
}

static void test_writer_write_error(void **state)
{
    (void)state;
    FILE *full = fopen("/dev/full", "w");
    if (!full) skip();
    setvbuf(full, NULL, _IONBF, 0);
    ft_jsonl_writer *w = NULL;
    assert_int_equal(ft_jsonl_writer_new(full, &w), FT_OK);
    ft_sink sink;
    ft_jsonl_writer_sink(w, &sink);
    FILE *in = input_of(PRE, strlen(PRE));
    ft_err err = {0, ""};
    int rc = ft_jsonl_import(in, "w.jsonl", &sink, NULL, &err);
    fclose(in);
    ft_jsonl_writer_free(w);
    fclose(full);
    assert_int_equal(rc, FT_EIO);
    assert_non_null(strstr(err.msg, "w.jsonl:1:"));
    assert_non_null(strstr(err.msg, "write failed"));
}

/* ---- allocation failures ------------------------------------------------------------------- */
static void test_import_alloc_failures(void **state)
{
    (void)state;
    size_t len;
    char *text = tu_read_file(FT_SOURCE_DIR "/traces/all-fields.jsonl", &len);
    assert_non_null(text);
    int ok = 0;
    for (long n = 0; n < 10000 && !ok; n++) {
        long live = ft_alloc_live();
        result r;
        ft_alloc_fail_after(n);
        import_n(text, len, &r);
        ft_alloc_fail_after(-1);
        if (r.rc != FT_OK && r.rc != FT_ENOMEM)
            print_error("fail after %ld: rc %d %s\n", n, r.rc, r.err.msg);
        assert_true(r.rc == FT_OK || r.rc == FT_ENOMEM);
        assert_int_equal(ft_alloc_live(), live);
        ok = r.rc == FT_OK;
        result_free(&r);
    }
    assert_true(ok);
    free(text);
}

/* ---- round trips over traces/ ------------------------------------------------------------- */
static void test_roundtrip_traces_writer(void **state)
{
    (void)state;
    DIR *d = opendir(FT_SOURCE_DIR "/traces");
    assert_non_null(d);
    struct dirent *e;
    int n_files = 0;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 7 || strcmp(e->d_name + nl - 6, ".jsonl")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/traces/%s", FT_SOURCE_DIR, e->d_name);
        size_t len;
        char *text = tu_read_file(path, &len);
        assert_non_null(text);
        result r1, r2;
        import_n(text, len, &r1);
        if (r1.rc) print_error("%s: %s\n", e->d_name, r1.err.msg);
        assert_int_equal(r1.rc, FT_OK);
        tu_assert_same_records(e->d_name, text, r1.out);
        /* writing what was written gives the same text again */
        import_n(r1.out, r1.out_len, &r2);
        assert_int_equal(r2.rc, FT_OK);
        assert_int_equal(r1.out_len, r2.out_len);
        assert_memory_equal(r1.out, r2.out, r1.out_len);
        result_free(&r1);
        result_free(&r2);
        free(text);
        n_files++;
    }
    closedir(d);
    assert_true(n_files >= 3);
}

/* import -> recorder (.ftdb, 2 records per chunk so records cross chunks) -> export -> writer,
 * through the recorder's checked sink and through its pre-validated one (what `import` uses) */
static void roundtrip_traces_recorder(int prevalidated)
{
    DIR *d = opendir(FT_SOURCE_DIR "/traces");
    assert_non_null(d);
    struct dirent *e;
    int n_files = 0;
    while ((e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl < 7 || strcmp(e->d_name + nl - 6, ".jsonl")) continue;
        char path[1024], db[1024];
        snprintf(path, sizeof path, "%s/traces/%s", FT_SOURCE_DIR, e->d_name);
        snprintf(db, sizeof db, "%s/test_jsonl_%d_%s.ftdb", FT_BINARY_DIR, (int)getpid(),
                 e->d_name);
        unlink(db);
        size_t len;
        char *text = tu_read_file(path, &len);
        assert_non_null(text);

        ft_rec_opts opts = {2, 0};
        ft_rec *rec = NULL;
        ft_err err = {0, ""};
        assert_int_equal(ft_rec_open(db, &opts, &rec, &err), FT_OK);
        ft_sink sink;
        if (prevalidated)
            ft_rec_sink_prevalidated(rec, &sink);
        else
            ft_rec_sink(rec, &sink);
        FILE *in = input_of(text, len);
        int rc = ft_jsonl_import(in, e->d_name, &sink, NULL, &err);
        fclose(in);
        if (rc) print_error("%s: %s\n", e->d_name, err.msg);
        assert_int_equal(rc, FT_OK);
        assert_int_equal(ft_rec_close(rec), FT_OK);

        ft_trace *t = NULL;
        rc = ft_trace_open(db, FT_OPEN_READ, &t, &err);
        if (rc) print_error("%s: %s\n", e->d_name, err.msg);
        assert_int_equal(rc, FT_OK);
        char *out = NULL;
        size_t out_len = 0;
        FILE *of = open_memstream(&out, &out_len);
        ft_jsonl_writer *w = NULL;
        assert_int_equal(ft_jsonl_writer_new(of, &w), FT_OK);
        ft_jsonl_writer_sink(w, &sink);
        rc = ft_trace_export(t, &sink, &err);
        if (rc) print_error("%s: %s\n", e->d_name, err.msg);
        assert_int_equal(rc, FT_OK);
        ft_jsonl_writer_free(w);
        fclose(of);
        ft_trace_close(t);
        tu_assert_same_records(e->d_name, text, out);
        free(out);
        free(text);
        unlink(db);
        n_files++;
    }
    closedir(d);
    assert_true(n_files >= 3);
}

static void test_roundtrip_traces_recorder(void **state)
{
    (void)state;
    roundtrip_traces_recorder(0);
    roundtrip_traces_recorder(1);
}

/* After the pre-validated entries, the recorder cannot check a backward reference itself. */
static void test_recorder_prevalidated_then_checked(void **state)
{
    (void)state;
    char db[1024];
    snprintf(db, sizeof db, "%s/test_jsonl_%d_pre.ftdb", FT_BINARY_DIR, (int)getpid());
    unlink(db);
    ft_rec *rec = NULL;
    ft_err err = {0, ""};
    assert_int_equal(ft_rec_open(db, NULL, &rec, &err), FT_OK);
    ft_sink sink;
    ft_rec_sink_prevalidated(rec, &sink);
    const char *text = PRE CALL0;
    FILE *in = input_of(text, strlen(text));
    assert_int_equal(ft_jsonl_import(in, "p.jsonl", &sink, NULL, &err), FT_OK);
    fclose(in);
    ft_backward b = {1, 0, 0, 0};
    assert_int_equal(ft_rec_backward(rec, &b), FT_ESTATE);
    assert_non_null(strstr(ft_rec_error(rec)->msg, "pre-validated"));
    assert_int_equal(ft_rec_backward_prevalidated(rec, &b), FT_OK);
    assert_int_equal(ft_rec_close(rec), FT_OK);
    unlink(db);
}

/* ---- limits (ft_limits.h): what import accepts records, verifies and re-imports ------------ */
static void test_import_limits(void **state)
{
    (void)state;
    ft_buf b = {0};
    /* a fuser label one byte over */
    ft_buf_printf(&b, "%s{\"t\":\"fuser\",\"id\":1,\"label\":\"", HDR);
    for (unsigned i = 0; i <= FT_LIM_LABEL_BYTES; i++)
        ft_buf_append(&b, "x", 1);
    ft_buf_printf(&b, "\",\"ops\":[{\"type\":\"GELU\"}]}\n");
    expect_bad_n((const char *)b.data, b.len, 2, "label", "more than the limit");
    /* a recipe type one byte over */
    b.len = 0;
    ft_buf_printf(&b, "%s{\"t\":\"recipe\",\"id\":1,\"obj\":5,\"attrs\":{},\"type\":\"", HDR);
    for (unsigned i = 0; i <= FT_LIM_TYPE_BYTES; i++)
        ft_buf_append(&b, "T", 1);
    ft_buf_printf(&b, "\"}\n");
    expect_bad_n((const char *)b.data, b.len, 2, "type", "more than the limit");
    /* a phase one byte over (a call line: the fast path hands it to the general path) */
    b.len = 0;
    ft_buf_printf(&b, "%s", PRE);
    ft_buf_printf(&b, "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":1,\"grad\":true,"
                      "\"input_rg\":true,\"op_rg\":[true,false],\"device\":0,\"phase\":\"");
    for (int i = 0; i <= FT_LIM_PHASE_BYTES; i++)
        ft_buf_append(&b, "p", 1);
    ft_buf_printf(&b, "\"}\n");
    expect_bad_n((const char *)b.data, b.len, 4, "phase", "more than the limit");
    /* a phase at the limit is fine */
    b.len = 0;
    ft_buf_printf(&b, "%s", PRE);
    ft_buf_printf(&b, "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":1,\"grad\":true,"
                      "\"input_rg\":true,\"op_rg\":[true,false],\"device\":0,\"phase\":\"");
    for (int i = 0; i < FT_LIM_PHASE_BYTES; i++)
        ft_buf_append(&b, "p", 1);
    ft_buf_printf(&b, "\"}\n");
    result r;
    import_n((const char *)b.data, b.len, &r);
    assert_int_equal(r.rc, FT_OK);
    result_free(&r);
    /* more split values than the limit */
    b.len = 0;
    ft_buf_printf(&b, "%s", PRE);
    ft_buf_printf(&b, "{\"t\":\"call\",\"seq\":0,\"fuser\":1,\"recipe\":1,\"grad\":true,"
                      "\"input_rg\":true,\"op_rg\":[true,false],\"device\":0,\"m_splits\":[0");
    for (int i = 0; i < FT_LIM_SPLITS; i++)
        ft_buf_append(&b, ",1", 2);
    ft_buf_printf(&b, "]}\n");
    expect_bad_n((const char *)b.data, b.len, 4, "m_splits", "more than the limit");
    ft_buf_free(&b);
    /* split sizes whose sum does not fit in int64 */
    expect_bad(PRE CALL_WITH(",\"m_splits\":[9223372036854775807,1]"), 4, "m_splits",
               "add up to more than");
}

/* Backward references far behind the recent-seq window: every call stays checkable. */
static void test_import_backward_far(void **state)
{
    (void)state;
    ft_buf b = {0};
    ft_buf_printf(&b, "%s", PRE);
    int n = 20000; /* calls at even seqs 0, 2, ..., a backward at each odd seq after 10000 */
    for (int i = 0; i < n; i++)
        ft_buf_printf(&b,
                      "{\"t\":\"call\",\"seq\":%d,\"fuser\":1,\"recipe\":1,\"grad\":true,"
                      "\"input_rg\":true,\"op_rg\":[true,false],\"device\":0}\n",
                      2 * i);
    size_t base = b.len;
    ft_buf_printf(&b, "{\"t\":\"backward\",\"seq\":%d,\"call\":10}\n", 2 * n);
    result r;
    import_n((const char *)b.data, b.len, &r);
    if (r.rc) print_error("%s\n", r.err.msg);
    assert_int_equal(r.rc, FT_OK);
    result_free(&r);
    b.len = base;
    ft_buf_printf(&b, "{\"t\":\"backward\",\"seq\":%d,\"call\":11}\n", 2 * n);
    expect_bad_n((const char *)b.data, b.len, n + 4, "call",
                 "11 is not the seq of an earlier call");
    ft_buf_free(&b);
}

/* ---- the two paths agree ------------------------------------------------------------------- */
/* Import text with and without the fast path; everything observable must be the same. */
static void assert_paths_agree(const char *what, const char *text, size_t len)
{
    result a, g;
    import_flags(text, len, 0, &a);
    import_flags(text, len, FT_JSONL_NO_FAST_PATH, &g);
    if (a.rc != g.rc || strcmp(a.err.msg, g.err.msg) || a.out_len != g.out_len ||
        memcmp(a.out, g.out, a.out_len) || a.warn_len != g.warn_len ||
        memcmp(a.warn, g.warn, a.warn_len))
        fail_msg("%s: the paths disagree:\n  fast    rc %d '%s'\n  general rc %d '%s'\n"
                 "  output %zu / %zu bytes, warnings %zu / %zu bytes",
                 what, a.rc, a.err.msg, g.rc, g.err.msg, a.out_len, g.out_len, a.warn_len,
                 g.warn_len);
    result_free(&a);
    result_free(&g);
}

static void test_import_paths_agree_corpus(void **state)
{
    (void)state;
    const char *const dirs[] = {FT_SOURCE_DIR "/tests/fuzz/corpus/jsonl", FT_SOURCE_DIR "/traces"};
    int n_files = 0;
    for (size_t k = 0; k < FT_ARRAY_LEN(dirs); k++) {
        DIR *d = opendir(dirs[k]);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dirs[k], e->d_name);
            size_t len;
            char *text = tu_read_file(path, &len);
            assert_non_null(text);
            assert_paths_agree(path, text, len);
            free(text);
            n_files++;
        }
        closedir(d);
    }
    assert_true(n_files >= 150);
}

static uint64_t xs;
static uint64_t xrand(void)
{
    xs ^= xs << 13;
    xs ^= xs >> 7;
    xs ^= xs << 17;
    return xs;
}

/* Random small edits of the canned streams, aimed at the JSON syntax and at the values. */
static void test_import_paths_agree_mutations(void **state)
{
    (void)state;
    const char *const files[] = {"all-fields.jsonl", "recompute-mxfp8.jsonl", "spec-example.jsonl",
                                 "te-edge-boundary.jsonl"};
    static const char alphabet[] = "{}[]\",:0123456789-+.eEtrufalsn \t\r\\x\x01\x7f\xc3\xff";
    xs = 0x2545f4914f6cdd1dull;
    print_message("mutation seed 0x%llx\n", (unsigned long long)xs);
    int n_cases = 0;
    for (size_t k = 0; k < FT_ARRAY_LEN(files); k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/traces/%s", FT_SOURCE_DIR, files[k]);
        size_t len;
        char *text = tu_read_file(path, &len);
        assert_non_null(text);
        char *m = malloc(len + 16);
        assert_non_null(m);
        for (int it = 0; it < 1500; it++) {
            memcpy(m, text, len);
            size_t n = len;
            int edits = 1 + (int)(xrand() % 3);
            for (int e = 0; e < edits && n > 2; e++) {
                size_t at = (size_t)(xrand() % n);
                char c = alphabet[xrand() % (sizeof alphabet - 1)];
                switch (xrand() % 3) {
                case 0: /* replace */
                    m[at] = c;
                    break;
                case 1: /* delete */
                    memmove(m + at, m + at + 1, n - at - 1);
                    n--;
                    break;
                default: /* insert */
                    memmove(m + at + 1, m + at, n - at);
                    m[at] = c;
                    n++;
                    break;
                }
            }
            char what[1100];
            snprintf(what, sizeof what, "%s, mutation %d", files[k], it);
            assert_paths_agree(what, m, n);
            n_cases++;
        }
        free(m);
        free(text);
    }
    assert_int_equal(n_cases, 6000);
}

/* ---- zstd-compressed streams ---------------------------------------------------------------- */
/* text through import into a compressing writer: the .jsonl.zst of text. */
static char *compress_stream(const char *text, size_t len, size_t *out_len)
{
    char *out = NULL;
    FILE *of = open_memstream(&out, out_len);
    assert_non_null(of);
    ft_jsonl_writer *w = NULL;
    assert_int_equal(ft_jsonl_writer_new_zstd(of, 0, &w), FT_OK);
    ft_sink sink;
    ft_jsonl_writer_sink(w, &sink);
    FILE *in = input_of(text, len);
    ft_err err = {0, ""};
    int rc = ft_jsonl_import(in, "c.jsonl", &sink, NULL, &err);
    fclose(in);
    if (rc) print_error("%s\n", err.msg);
    assert_int_equal(rc, FT_OK);
    assert_int_equal(ft_jsonl_writer_finish(w), FT_OK);
    ft_jsonl_writer_free(w);
    fclose(of);
    return out;
}

/* A stream of n call lines after PRE. */
static char *many_calls(int n, size_t *len)
{
    ft_buf b = {0};
    ft_buf_printf(&b, "%s", PRE);
    for (int i = 0; i < n; i++)
        ft_buf_printf(&b,
                      "{\"t\":\"call\",\"seq\":%d,\"fuser\":1,\"recipe\":1,\"grad\":%s,"
                      "\"input_rg\":true,\"op_rg\":[true,false],\"device\":0,\"ns\":%d}\n",
                      i, i % 3 ? "true" : "false", i * 7919 % 100003);
    ft_buf_append(&b, "", 1);
    *len = b.len - 1;
    return (char *)b.data;
}

static void test_import_zstd_round_trip(void **state)
{
    (void)state;
    size_t len;
    char *text = tu_read_file(FT_SOURCE_DIR "/traces/all-fields.jsonl", &len);
    assert_non_null(text);
    size_t zlen;
    char *z = compress_stream(text, len, &zlen);
    assert_true(zlen >= 4);
    assert_memory_equal(z, "\x28\xb5\x2f\xfd", 4); /* a zstd frame */
    result r;
    import_n(z, zlen, &r); /* named t.jsonl: detected by its bytes, not its name */
    if (r.rc) print_error("%s\n", r.err.msg);
    assert_int_equal(r.rc, FT_OK);
    tu_assert_same_records("all-fields.jsonl (zstd)", text, r.out);
    result_free(&r);
    free(z);
    free(text);

    /* streams whose last block decompresses to more than the line buffer holds (it is flushed
     * after the compressed input has ended) */
    for (int n = 300; n <= 3000; n += 450) {
        text = many_calls(n, &len);
        z = compress_stream(text, len, &zlen);
        import_n(z, zlen, &r);
        if (r.rc) print_error("%d calls: %s\n", n, r.err.msg);
        assert_int_equal(r.rc, FT_OK);
        assert_int_equal(r.out_len, len);
        assert_memory_equal(r.out, text, len);
        result_free(&r);
        free(z);
        free(text);
    }

    /* a stream larger than every buffer, and two frames back to back */
    text = many_calls(60000, &len);
    z = compress_stream(text, len, &zlen);
    char *zz = malloc(2 * zlen);
    assert_non_null(zz);
    memcpy(zz, z, zlen);
    import_n(z, zlen, &r);
    assert_int_equal(r.rc, FT_OK);
    assert_int_equal(r.out_len, len);
    assert_memory_equal(r.out, text, len);
    result_free(&r);
    /* the second frame repeats the first: its header is the second header record */
    memcpy(zz + zlen, z, zlen);
    import_n(zz, 2 * zlen, &r);
    assert_int_equal(r.rc, FT_EINVAL);
    char where[32];
    snprintf(where, sizeof where, "t.jsonl:%d:", 60000 + 4);
    assert_non_null(strstr(r.err.msg, where));
    assert_non_null(strstr(r.err.msg, "a second header"));
    result_free(&r);
    free(zz);
    free(z);
    free(text);
}

static void test_import_zstd_truncated(void **state)
{
    (void)state;
    size_t len, zlen;
    char *text = many_calls(30000, &len);
    char *z = compress_stream(text, len, &zlen);
    const size_t cuts[] = {4, zlen / 2, zlen - 1};
    for (size_t k = 0; k < FT_ARRAY_LEN(cuts); k++) {
        long live = ft_alloc_live();
        result r;
        import_n(z, cuts[k], &r);
        if (r.rc != FT_EINVAL || !strstr(r.err.msg, "t.jsonl:") ||
            !strstr(r.err.msg, "compressed input (zstd)"))
            print_error("cut at %zu of %zu: rc %d %s\n", cuts[k], zlen, r.rc, r.err.msg);
        assert_int_equal(r.rc, FT_EINVAL);
        assert_non_null(strstr(r.err.msg, "compressed input (zstd): truncated"));
        if (k == 0) assert_non_null(strstr(r.err.msg, "t.jsonl:1:"));
        if (k == 2) { /* every line came out; the frame's checksum did not */
            char where[32];
            snprintf(where, sizeof where, "t.jsonl:%d:", 30000 + 3 + 1);
            assert_non_null(strstr(r.err.msg, where));
        }
        assert_int_equal(ft_alloc_live(), live);
        result_free(&r);
    }
    /* damage inside the frame: zstd's own error, named by line */
    z[zlen / 2] ^= 0x5a;
    result r;
    import_n(z, zlen, &r);
    assert_int_equal(r.rc, FT_EINVAL);
    assert_non_null(strstr(r.err.msg, "t.jsonl:"));
    assert_non_null(strstr(r.err.msg, "compressed input (zstd): "));
    result_free(&r);
    free(z);
    free(text);
}

static void test_writer_zstd_write_error(void **state)
{
    (void)state;
    FILE *full = fopen("/dev/full", "w");
    if (!full) skip();
    setvbuf(full, NULL, _IONBF, 0);
    ft_jsonl_writer *w = NULL;
    assert_int_equal(ft_jsonl_writer_new_zstd(full, 3, &w), FT_OK);
    ft_sink sink;
    ft_jsonl_writer_sink(w, &sink);
    FILE *in = input_of(PRE, strlen(PRE));
    ft_err err = {0, ""};
    assert_int_equal(ft_jsonl_import(in, "w.jsonl", &sink, NULL, &err), FT_OK); /* held */
    fclose(in);
    assert_int_equal(ft_jsonl_writer_finish(w), FT_EIO);
    assert_non_null(strstr(ft_jsonl_writer_error(w)->msg, "write failed"));
    ft_jsonl_writer_free(w);
    fclose(full);
    assert_int_equal(ft_jsonl_writer_new_zstd(stdout, 23, &w), FT_EINVAL);
    assert_null(w);
}

/* The CLI: `export -o NAME.zst` compresses, `import` reads it back (and names lines in it). */
static void test_cli_zst_round_trip(void **state)
{
    (void)state;
    const char *cli = tu_cli();
    if (!cli) skip();
    char dir[1024], cmd[8192];
    assert_int_equal(tu_dir_fresh(dir, sizeof dir, "test_jsonl_cli_zst"), 0);
    snprintf(cmd, sizeof cmd,
             "'%s' import '%s/traces/all-fields.jsonl' -o '%s/a.ftdb' && "
             "'%s' export '%s/a.ftdb' -o '%s/a.jsonl.zst' && "
             "'%s' import '%s/a.jsonl.zst' -o '%s/b.ftdb' && '%s' export '%s/b.ftdb'",
             cli, FT_SOURCE_DIR, dir, cli, dir, dir, cli, dir, dir, cli, dir);
    ft_buf out = {0};
    assert_int_equal(tu_sh_buf(cmd, &out), 0);
    char path[1100];
    snprintf(path, sizeof path, "%s/a.jsonl.zst", dir);
    size_t zlen;
    char *z = tu_read_file(path, &zlen);
    assert_non_null(z);
    assert_true(zlen > 4);
    assert_memory_equal(z, "\x28\xb5\x2f\xfd", 4);
    char *text = tu_read_file(FT_SOURCE_DIR "/traces/all-fields.jsonl", NULL);
    assert_non_null(text);
    tu_assert_same_records("all-fields.jsonl via .zst", text, (const char *)out.data);
    /* a truncated .zst: exit 2, the message names the file and a line */
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(z, 1, zlen / 2, f), zlen / 2);
    fclose(f);
    char msg[4096];
    snprintf(cmd, sizeof cmd, "'%s' import '%s' -o '%s/c.ftdb' 2>&1", cli, path, dir);
    assert_int_equal(tu_sh(cmd, msg, sizeof msg), 2);
    assert_non_null(strstr(msg, "a.jsonl.zst:"));
    assert_non_null(strstr(msg, "compressed input (zstd): truncated"));
    free(text);
    free(z);
    ft_buf_free(&out);
    tu_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_import_bad_json),
        cmocka_unit_test(test_import_not_an_object),
        cmocka_unit_test(test_import_empty_line),
        cmocka_unit_test(test_import_missing_type),
        cmocka_unit_test(test_import_unknown_record_type),
        cmocka_unit_test(test_import_header_not_first),
        cmocka_unit_test(test_import_header_twice),
        cmocka_unit_test(test_import_wrong_format),
        cmocka_unit_test(test_import_wrong_version),
        cmocka_unit_test(test_import_empty_stream),
        cmocka_unit_test(test_import_undeclared_fuser),
        cmocka_unit_test(test_import_undeclared_recipe),
        cmocka_unit_test(test_import_duplicate_fuser_id),
        cmocka_unit_test(test_import_duplicate_recipe_id),
        cmocka_unit_test(test_import_duplicate_recipe_state),
        cmocka_unit_test(test_import_duplicate_key),
        cmocka_unit_test(test_import_seq_not_increasing),
        cmocka_unit_test(test_import_seq_shared_with_backward),
        cmocka_unit_test(test_import_wrong_field_type),
        cmocka_unit_test(test_import_null_for_optional_field),
        cmocka_unit_test(test_import_op_rg_length),
        cmocka_unit_test(test_import_m_splits_length),
        cmocka_unit_test(test_import_empty_ops),
        cmocka_unit_test(test_import_negative_split),
        cmocka_unit_test(test_import_invalid_utf8),
        cmocka_unit_test(test_import_nul_byte),
        cmocka_unit_test(test_import_number_out_of_range),
        cmocka_unit_test(test_import_missing_required_field),
        cmocka_unit_test(test_import_backward_unknown_call),
        cmocka_unit_test(test_import_env_value_type),
        cmocka_unit_test(test_import_fuser_of),
        cmocka_unit_test(test_import_line_too_long),
        cmocka_unit_test(test_import_unknown_fields_warned_once),
        cmocka_unit_test(test_import_crlf_and_no_final_newline),
        cmocka_unit_test(test_import_doubles_round_trip),
        cmocka_unit_test(test_import_sink_error_named),
        cmocka_unit_test(test_writer_write_error),
        cmocka_unit_test(test_import_alloc_failures),
        cmocka_unit_test(test_roundtrip_traces_writer),
        cmocka_unit_test(test_roundtrip_traces_recorder),
        cmocka_unit_test(test_recorder_prevalidated_then_checked),
        cmocka_unit_test(test_import_limits),
        cmocka_unit_test(test_import_backward_far),
        cmocka_unit_test(test_import_paths_agree_corpus),
        cmocka_unit_test(test_import_paths_agree_mutations),
        cmocka_unit_test(test_import_zstd_round_trip),
        cmocka_unit_test(test_import_zstd_truncated),
        cmocka_unit_test(test_writer_zstd_write_error),
        cmocka_unit_test(test_cli_zst_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
