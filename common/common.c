/*
 * common.c - status texts, last-error buffers, the counting/fault-injecting allocator,
 * hashing through xxHash, number parsing and a growable buffer.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_common.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* ---- status codes ------------------------------------------------------------------------ */
static const struct {
    int rc;
    const char *text;
} status_texts[] = {
    {FT_OK, "ok"},
    {FT_ENOMEM, "out of memory"},
    {FT_EIO, "input/output error"},
    {FT_EINVAL, "invalid input"},
    {FT_ECORRUPT, "trace is damaged"},
    {FT_EVERSION, "unsupported trace format version"},
    {FT_ENOTTRACE, "not a fusertrace trace"},
    {FT_ESQL, "SQLite error"},
    {FT_EZSTD, "zstd error"},
    {FT_ENOTFOUND, "not found"},
    {FT_ERANGE, "number out of range"},
    {FT_ESTATE, "call out of order"},
    {FT_ENODEV, "no CUDA device"},
    {FT_ECUDA, "CUDA error"},
    {FT_EUNSUPPORTED, "not supported"},
    {FT_EGATE, "a --fail-on condition held"},
};

const char *ft_strerror(int rc)
{
    for (size_t i = 0; i < FT_ARRAY_LEN(status_texts); i++)
        if (status_texts[i].rc == rc) return status_texts[i].text;
    return "unknown error";
}

/* ---- last-error buffer ------------------------------------------------------------------- */
int ft_err_vset(ft_err *e, int rc, const char *fmt, va_list ap)
{
    if (!e) return rc;
    e->rc = rc;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return rc;
}

int ft_err_set(ft_err *e, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ft_err_vset(e, rc, fmt, ap);
    va_end(ap);
    return rc;
}

void ft_err_clear(ft_err *e)
{
    if (!e) return;
    e->rc = FT_OK;
    e->msg[0] = '\0';
}

const char *ft_err_msg(const ft_err *e)
{
    if (!e) return "";
    return e->msg[0] ? e->msg : ft_strerror(e->rc);
}

/* ---- allocation wrapper ------------------------------------------------------------------ */
/* The counters are atomic so that replay and numerics threads may allocate concurrently; fault
 * injection itself is meant for single-threaded tests (which allocation fails is only
 * deterministic there). */
static _Atomic long fail_after = -1;
static _Atomic long live_allocs;

static int should_fail(void)
{
    long n = atomic_load_explicit(&fail_after, memory_order_relaxed);
    while (n >= 0) {
        if (n == 0) return 1;
        if (atomic_compare_exchange_weak_explicit(&fail_after, &n, n - 1, memory_order_relaxed,
                                                  memory_order_relaxed))
            return 0;
    }
    return 0;
}

/* ---- the decoders' memory budget ------------------------------------------------------- */
static _Atomic uint64_t mem_budget, mem_held;

void ft_mem_budget_set(uint64_t bytes)
{
    atomic_store(&mem_budget, bytes);
}

uint64_t ft_mem_budget(void)
{
    return atomic_load(&mem_budget);
}

int ft_mem_charge(uint64_t n, uint64_t *held)
{
    uint64_t cur = atomic_load(&mem_held);
    for (;;) {
        const uint64_t cap = atomic_load(&mem_budget);
        if (held) *held = cur;
        if (cap && (n > cap || cur > cap - n)) return FT_ENOMEM;
        if (cur > UINT64_MAX - n) return FT_ENOMEM;
        if (atomic_compare_exchange_weak(&mem_held, &cur, cur + n)) return FT_OK;
    }
}

void ft_mem_uncharge(uint64_t n)
{
    atomic_fetch_sub(&mem_held, n);
}

void ft_alloc_fail_after(long n)
{
    atomic_store(&fail_after, n);
}

long ft_alloc_live(void)
{
    return atomic_load(&live_allocs);
}

void *ft_malloc(size_t n)
{
    if (should_fail()) return NULL;
    void *p = malloc(n ? n : 1);
    if (p) live_allocs++;
    return p;
}

void *ft_calloc(size_t count, size_t size)
{
    if (should_fail()) return NULL;
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (p) live_allocs++;
    return p;
}

void *ft_realloc(void *p, size_t n)
{
    if (!p) return ft_malloc(n);
    if (should_fail()) return NULL;
    return realloc(p, n ? n : 1);
}

void ft_free(void *p)
{
    if (!p) return;
    live_allocs--;
    free(p);
}

char *ft_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = ft_malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *ft_strdup(const char *s)
{
    return ft_strndup(s, strlen(s));
}

/* ---- hashing ----------------------------------------------------------------------------- */
uint64_t ft_hash64(const void *data, size_t len)
{
    return XXH3_64bits(data, len);
}

uint64_t ft_hash64_seed(const void *data, size_t len, uint64_t seed)
{
    return XXH3_64bits_withSeed(data, len, seed);
}

/* ---- small helpers ----------------------------------------------------------------------- */
int ft_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s) return FT_EINVAL;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE) return FT_ERANGE;
    if (end == s || *end != '\0') return FT_EINVAL;
    *out = (int64_t)v;
    return FT_OK;
}

int ft_parse_f64(const char *s, double *out)
{
    if (!s || !*s) return FT_EINVAL;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno == ERANGE || !isfinite(v)) return FT_ERANGE;
    if (end == s || *end != '\0') return FT_EINVAL;
    *out = v;
    return FT_OK;
}

size_t ft_strlcpy(char *dst, const char *src, size_t cap)
{
    size_t len = strlen(src);
    if (cap) {
        size_t n = len < cap - 1 ? len : cap - 1;
        memcpy(dst, src, n);
        dst[n] = '\0';
    }
    return len;
}

uint64_t ft_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- growable buffer --------------------------------------------------------------------- */
int ft_buf_reserve(ft_buf *b, size_t extra)
{
    if (b->len + extra <= b->cap) return FT_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra) {
        if (cap > SIZE_MAX / 2) return FT_ENOMEM;
        cap *= 2;
    }
    uint8_t *p = ft_realloc(b->data, cap);
    if (!p) return FT_ENOMEM;
    b->data = p;
    b->cap = cap;
    return FT_OK;
}

int ft_buf_append(ft_buf *b, const void *p, size_t n)
{
    int rc = ft_buf_reserve(b, n);
    if (rc) return rc;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    return FT_OK;
}

int ft_buf_printf(ft_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return FT_EINVAL;
    int rc = ft_buf_reserve(b, (size_t)n + 1);
    if (rc) return rc;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return FT_OK;
}

int ft_buf_json_str(ft_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    if (n > (SIZE_MAX - 2) / 6) return FT_ENOMEM;
    int rc = ft_buf_reserve(b, n * 6 + 2); /* the longest escape, \u00xx, is 6 bytes */
    if (rc) return rc;
    uint8_t *o = b->data + b->len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e = 0;
        switch (c) {
        case '"':
        case '\\':
            e = (char)c;
            break;
        case '\b':
            e = 'b';
            break;
        case '\f':
            e = 'f';
            break;
        case '\n':
            e = 'n';
            break;
        case '\r':
            e = 'r';
            break;
        case '\t':
            e = 't';
            break;
        default:
            break;
        }
        if (e) {
            *o++ = '\\';
            *o++ = (uint8_t)e;
        } else if (c < 0x20) {
            memcpy(o, "\\u00", 4);
            o[4] = (uint8_t)hex[c >> 4];
            o[5] = (uint8_t)hex[c & 15];
            o += 6;
        } else {
            *o++ = c;
        }
    }
    *o++ = '"';
    b->len = (size_t)(o - b->data);
    return FT_OK;
}

void ft_buf_free(ft_buf *b)
{
    ft_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
