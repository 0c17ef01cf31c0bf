/*
 * ft_common.h - status codes, the allocation wrapper, hashing and small shared helpers.
 *
 * Every fallible function in fusertrace returns an int status: FT_OK (0) or a negative FT_E*
 * code. ft_strerror() gives the generic text; the detail (file, line, chunk, SQLite message)
 * goes into the handle's last-error buffer (an ft_err). Library code never calls exit().
 *
 * All heap memory goes through ft_malloc/ft_calloc/ft_realloc/ft_free so that tests can make the
 * Nth allocation fail (ft_alloc_fail_after) and prove nothing leaks or crashes.
 */
#ifndef FT_COMMON_H
#define FT_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes --------------------------------------------------------------------- */
enum {
    FT_OK = 0,
    FT_ENOMEM = -1,        /* allocation failed */
    FT_EIO = -2,           /* read/write/open failed at the OS level */
    FT_EINVAL = -3,        /* bad argument or malformed input (JSONL line, CLI flag) */
    FT_ECORRUPT = -4,      /* a trace is damaged: checksum, length or reference check failed */
    FT_EVERSION = -5,      /* a trace of another (newer or unknown) format version */
    FT_ENOTTRACE = -6,     /* a database or file that is not a fusertrace trace */
    FT_ESQL = -7,          /* SQLite reported an error */
    FT_EZSTD = -8,         /* zstd reported an error */
    FT_ENOTFOUND = -9,     /* a name (policy, scenario, subcommand, id) is unknown */
    FT_ERANGE = -10,       /* a number is out of its allowed range */
    FT_ESTATE = -11,       /* a call out of order (append after close, ...) */
    FT_ENODEV = -12,       /* no CUDA device / CUDA not built */
    FT_ECUDA = -13,        /* a CUDA runtime or cuBLAS call failed */
    FT_EUNSUPPORTED = -14, /* valid input that this build or model does not support */
    FT_EGATE = -15,        /* a condition the caller asked to fail on held (replay --fail-on) */
};

/* Generic text for a status code; never NULL. */
const char *ft_strerror(int rc);

/* ---- last-error buffer ---------------------------------------------------------------- */
#define FT_ERR_MAX 512
typedef struct ft_err {
    int rc;               /* last status set, FT_OK when clear */
    char msg[FT_ERR_MAX]; /* detail: names the file, line or chunk and what is wrong */
} ft_err;

/* Set e->rc = rc and format the detail; returns rc so callers can write `return ft_err_set(..)`
 * or `rc = ft_err_set(...); goto fail;`. A NULL e is allowed (the message is dropped). */
int ft_err_set(ft_err *e, int rc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int ft_err_vset(ft_err *e, int rc, const char *fmt, va_list ap);
void ft_err_clear(ft_err *e);
/* The detail if set, else ft_strerror(e->rc). */
const char *ft_err_msg(const ft_err *e);

/* ---- allocation wrapper ----------------------------------------------------------------- */
void *ft_malloc(size_t n);
void *ft_calloc(size_t count, size_t size);
void *ft_realloc(void *p, size_t n);
void ft_free(void *p);
char *ft_strdup(const char *s);
char *ft_strndup(const char *s, size_t n);
/* Fault injection for tests: the allocation after `n` more successful ones fails (returns
 * NULL); n < 0 disables. Process-wide; not thread-safe by design (tests only). */
void ft_alloc_fail_after(long n);
/* Number of live allocations made through the wrapper (tests use it to prove no leak). */
long ft_alloc_live(void);

/* ---- the decoders' memory budget --------------------------------------------------------- */
/* One budget, process-wide, for what every chunk decoder of every reader holds (SQL cursors,
 * replay threads, verify): bytes, 0 = none (the library's default; the CLI sets half the
 * machine's memory, or `--memory`). A decoder charges ft_mem_charge before it grows for a chunk
 * and gives it back when freed (schema/chunk_dec.c: about 2 x the chunk's raw bytes + 256 B per
 * record of the largest chunk it decoded). */
void ft_mem_budget_set(uint64_t bytes);
uint64_t ft_mem_budget(void);
/* Charge n bytes: FT_OK, or FT_ENOMEM (nothing charged) when the charges would pass the budget;
 * *held (may be NULL) gets what is charged now, before this one. */
int ft_mem_charge(uint64_t n, uint64_t *held);
void ft_mem_uncharge(uint64_t n);

/* ---- hashing (xxHash XXH3, stable across runs and machines) ------------------------------ */
uint64_t ft_hash64(const void *data, size_t len);
uint64_t ft_hash64_seed(const void *data, size_t len, uint64_t seed);
/* FT_HD: a function for the host and, compiled by nvcc, the CUDA device too (ft_hash_mix is the
 * one hash mix of both: the kernels' RNG and input streams use it on the device). */
#ifdef __CUDACC__
#define FT_HD __host__ __device__
#else
#define FT_HD
#endif
/* The first index i of the ascending v[0..n) with v[i] >= key (n when there is none). */
static inline uint32_t ft_lower_bound_i64(const int64_t *v, uint32_t n, int64_t key)
{
    uint32_t a = 0, z = n;
    while (a < z) {
        const uint32_t m = a + (z - a) / 2;
        if (v[m] < key)
            a = m + 1;
        else
            z = m;
    }
    return a;
}

static inline FT_HD uint64_t ft_hash_mix(uint64_t h, uint64_t v)
{
    /* combine two 64-bit values (splitmix64 finaliser over h ^ v * odd constant) */
    uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* ---- small helpers ---------------------------------------------------------------------- */
/* Parse a whole string as a decimal int64 / double; FT_EINVAL if empty, trailing garbage or out
 * of range. Replaces atoi/atol. */
int ft_parse_i64(const char *s, int64_t *out);
int ft_parse_f64(const char *s, double *out);
/* Bounded copy that always terminates; returns strlen(src) (truncated if >= cap). */
size_t ft_strlcpy(char *dst, const char *src, size_t cap);
/* Monotonic clock in nanoseconds. */
uint64_t ft_now_ns(void);

/* Growable byte buffer. */
typedef struct ft_buf {
    uint8_t *data; /* [cap] */
    size_t len;    /* bytes used */
    size_t cap;    /* bytes allocated */
} ft_buf;
int ft_buf_reserve(ft_buf *b, size_t extra);
int ft_buf_append(ft_buf *b, const void *p, size_t n);
int ft_buf_printf(ft_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void ft_buf_free(ft_buf *b);
/* Append s[0..n) as a JSON string literal, quotes included: '"' and '\\' are backslashed, \b \f
 * \n \r \t get their short escapes, the other bytes below 0x20 (NUL too) become \u00xx in
 * lower-case hex, and bytes >= 0x20 are copied as they are (the caller supplies UTF-8). The one
 * escaper for the JSON fusertrace writes: canonical JSON (recorder/canon.c), capture-jsonl export
 * and the replayer's per-call lines. FT_OK, or FT_ENOMEM with b unchanged. */
int ft_buf_json_str(ft_buf *b, const char *s, size_t n);

#define FT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#ifdef __cplusplus
}
#endif
#endif /* FT_COMMON_H */
