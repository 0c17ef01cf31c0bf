/*
 * test_common.c - common/: status texts, the last-error buffer, the counting and
 * fault-injecting allocator, hashing (stable values), number parsing, bounded copy, the
 * growable buffer, the JSON string escaper and the monotonic clock.
 */
#include "ft_common.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void test_strerror_every_code(void **state)
{
    (void)state;
    for (int rc = FT_EGATE; rc <= FT_OK; rc++) {
        const char *s = ft_strerror(rc);
        assert_non_null(s);
        assert_string_not_equal(s, "unknown error");
    }
    assert_string_equal(ft_strerror(FT_OK), "ok");
    assert_string_equal(ft_strerror(-1000), "unknown error");
    assert_string_equal(ft_strerror(1), "unknown error");
}

static void test_err_set_and_clear(void **state)
{
    (void)state;
    ft_err e;
    ft_err_clear(&e);
    assert_int_equal(e.rc, FT_OK);
    assert_string_equal(ft_err_msg(&e), "ok");
    assert_int_equal(ft_err_set(&e, FT_ECORRUPT, "chunk %d: %s", 7, "bad"), FT_ECORRUPT);
    assert_int_equal(e.rc, FT_ECORRUPT);
    assert_string_equal(ft_err_msg(&e), "chunk 7: bad");
    /* NULL is allowed and only returns the code */
    assert_int_equal(ft_err_set(NULL, FT_EIO, "x"), FT_EIO);
    ft_err_clear(NULL);
    assert_string_equal(ft_err_msg(NULL), "");
    /* long messages are truncated, never overflow */
    char big[2 * FT_ERR_MAX];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ft_err_set(&e, FT_EINVAL, "%s", big);
    assert_int_equal(strlen(e.msg), FT_ERR_MAX - 1);
    /* a code without detail falls back to the generic text */
    ft_err_clear(&e);
    e.rc = FT_ENOMEM;
    assert_string_equal(ft_err_msg(&e), "out of memory");
}

static void test_alloc_fail_after_and_live_count(void **state)
{
    (void)state;
    long base = ft_alloc_live();
    ft_alloc_fail_after(0);
    assert_null(ft_malloc(8));
    assert_null(ft_calloc(2, 8));
    assert_null(ft_strdup("x"));
    ft_alloc_fail_after(2);
    void *a = ft_malloc(8), *b = ft_calloc(1, 8), *c = ft_malloc(8);
    assert_non_null(a);
    assert_non_null(b);
    assert_null(c);
    ft_alloc_fail_after(-1);
    assert_int_equal(ft_alloc_live(), base + 2);
    /* a failed realloc keeps the block */
    ft_alloc_fail_after(0);
    assert_null(ft_realloc(a, 4096));
    ft_alloc_fail_after(-1);
    void *a2 = ft_realloc(a, 4096);
    assert_non_null(a2);
    assert_int_equal(ft_alloc_live(), base + 2);
    ft_free(a2);
    ft_free(b);
    ft_free(NULL);
    assert_int_equal(ft_alloc_live(), base);
    /* zero-size requests give a block */
    void *z = ft_malloc(0);
    assert_non_null(z);
    ft_free(z);
    assert_int_equal(ft_alloc_live(), base);
}

static void test_strdup_and_strndup(void **state)
{
    (void)state;
    char *s = ft_strdup("hello");
    assert_string_equal(s, "hello");
    char *t = ft_strndup("hello", 3);
    assert_string_equal(t, "hel");
    char *u = ft_strndup("hi", 10);
    assert_string_equal(u, "hi");
    ft_free(s);
    ft_free(t);
    ft_free(u);
}

static void test_hash_stable_values(void **state)
{
    (void)state;
    /* XXH3-64 reference values: the trace format stores these, so they must never change */
    assert_true(ft_hash64("", 0) == 0x2D06800538D394C2ull);
    assert_true(ft_hash64("a", 1) == ft_hash64("a", 1));
    assert_true(ft_hash64("a", 1) != ft_hash64("b", 1));
    assert_true(ft_hash64_seed("abc", 3, 0) == ft_hash64("abc", 3));
    assert_true(ft_hash64_seed("abc", 3, 1) != ft_hash64("abc", 3));
    assert_true(ft_hash_mix(1, 2) == ft_hash_mix(1, 2));
    assert_true(ft_hash_mix(1, 2) != ft_hash_mix(2, 1));
    assert_true(ft_hash_mix(0, 0) != 0);
}

static void test_parse_numbers(void **state)
{
    (void)state;
    int64_t v = 0;
    assert_int_equal(ft_parse_i64("42", &v), FT_OK);
    assert_int_equal(v, 42);
    assert_int_equal(ft_parse_i64("-9223372036854775808", &v), FT_OK);
    assert_true(v == INT64_MIN);
    assert_int_equal(ft_parse_i64("9223372036854775808", &v), FT_ERANGE);
    assert_int_equal(ft_parse_i64("", &v), FT_EINVAL);
    assert_int_equal(ft_parse_i64(NULL, &v), FT_EINVAL);
    assert_int_equal(ft_parse_i64("12x", &v), FT_EINVAL);
    assert_int_equal(ft_parse_i64("x", &v), FT_EINVAL);
    double d = 0;
    assert_int_equal(ft_parse_f64("0.25", &d), FT_OK);
    assert_true(d == 0.25);
    assert_int_equal(ft_parse_f64("1e400", &d), FT_ERANGE);
    assert_int_equal(ft_parse_f64("inf", &d), FT_ERANGE);
    assert_int_equal(ft_parse_f64("nan", &d), FT_ERANGE);
    assert_int_equal(ft_parse_f64("1.5 ", &d), FT_EINVAL);
    assert_int_equal(ft_parse_f64("", &d), FT_EINVAL);
}

static void test_strlcpy_truncates(void **state)
{
    (void)state;
    char b[4];
    assert_int_equal(ft_strlcpy(b, "abcdef", sizeof b), 6);
    assert_string_equal(b, "abc");
    assert_int_equal(ft_strlcpy(b, "ab", sizeof b), 2);
    assert_string_equal(b, "ab");
    assert_int_equal(ft_strlcpy(b, "xyz", 0), 3);
    assert_string_equal(b, "ab");
}

static void test_buf_grows(void **state)
{
    (void)state;
    ft_buf b = {0};
    for (int i = 0; i < 1000; i++)
        assert_int_equal(ft_buf_append(&b, "0123456789", 10), FT_OK);
    assert_int_equal(b.len, 10000);
    assert_true(b.cap >= b.len);
    assert_memory_equal(b.data + 9990, "0123456789", 10);
    assert_int_equal(ft_buf_printf(&b, "%d-%s", 7, "x"), FT_OK);
    assert_int_equal(b.len, 10003);
    assert_memory_equal(b.data + 10000, "7-x", 3);
    assert_int_equal(b.data[b.len], '\0');
    ft_alloc_fail_after(0);
    assert_int_equal(ft_buf_reserve(&b, 1u << 20), FT_ENOMEM);
    ft_alloc_fail_after(-1);
    assert_int_equal(b.len, 10003); /* unchanged */
    ft_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(ft_buf_append(&b, NULL, 0), FT_OK);
    ft_buf_free(&b);
}

static void test_buf_json_str_escapes(void **state)
{
    (void)state;
    ft_buf b = {0};
    assert_int_equal(ft_buf_append(&b, "x=", 2), FT_OK);
    /* quote, backslash, the five short escapes, NUL, other controls, DEL and UTF-8 as is */
    static const char in[] = "a\"b\\c\b\f\n\r\t\0\x01\x1f\x7f/\xc3\xa9";
    static const char want[] = "x=\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0000\\u0001\\u001f\x7f/\xc3\xa9\"";
    assert_int_equal(ft_buf_json_str(&b, in, sizeof in - 1), FT_OK);
    assert_int_equal(b.len, sizeof want - 1);
    assert_memory_equal(b.data, want, sizeof want - 1);
    /* only n bytes are read; an empty string is "" */
    b.len = 0;
    assert_int_equal(ft_buf_json_str(&b, "abc", 1), FT_OK);
    assert_int_equal(ft_buf_json_str(&b, "", 0), FT_OK);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.data, "\"a\"\"\"", 5);
    /* a failed reserve leaves the buffer as it was */
    static char big[4096];
    memset(big, '\n', sizeof big);
    ft_alloc_fail_after(0);
    assert_int_equal(ft_buf_json_str(&b, big, sizeof big), FT_ENOMEM);
    ft_alloc_fail_after(-1);
    assert_int_equal(b.len, 5);
    assert_int_equal(ft_buf_json_str(&b, big, sizeof big), FT_OK);
    assert_int_equal(b.len, 5 + 2 + 2 * sizeof big);
    assert_memory_equal(b.data + 6, "\\n\\n", 4);
    ft_buf_free(&b);
}

static void test_now_ns_monotonic(void **state)
{
    (void)state;
    uint64_t a = ft_now_ns(), b = ft_now_ns();
    assert_true(b >= a);
    assert_true(a > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strerror_every_code),
        cmocka_unit_test(test_err_set_and_clear),
        cmocka_unit_test(test_alloc_fail_after_and_live_count),
        cmocka_unit_test(test_strdup_and_strndup),
        cmocka_unit_test(test_hash_stable_values),
        cmocka_unit_test(test_parse_numbers),
        cmocka_unit_test(test_strlcpy_truncates),
        cmocka_unit_test(test_buf_grows),
        cmocka_unit_test(test_buf_json_str_escapes),
        cmocka_unit_test(test_now_ns_monotonic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
