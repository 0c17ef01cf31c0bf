/*
 * rec_packed.c - ft_rec_append_packed: many call, backward and fuser-end records and compact
 * fuser declarations (ft_rec_fuser_like, alone or riding on the fuser's first call) in one call,
 * for the Python capture hook. A ctypes call with fifteen arguments costs microseconds, packing a
 * record with Python's struct module a fraction of one, so the hook packs records into a buffer and
 * hands it over every few hundred records. Built only on the public API (ft_rec_call,
 * ft_rec_backward); the buffer comes from the same process, but every length in it is checked.
 */
#include "ft_recorder.h"

#include <inttypes.h>
#include <string.h>

/* Size of a packed record's fixed part (the table in ft_recorder.h). */
#define PACKED_FIXED 80u
/* ... and of one of kind FT_PACKED_CALL_LIKE (like, end seq, end fuser follow). */
#define PACKED_CALL_LIKE_FIXED 104u

static size_t pad8(size_t n)
{
    return (n + 7u) & ~(size_t)7u;
}

static int64_t get_i64(const uint8_t *p)
{
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* One packed call whose fixed part (fixed bytes, the call's fields at the offsets of the table in
 * ft_recorder.h) starts at h, with left bytes from h on: appended through ft_rec_call_flat;
 * *used = its size. A wrong length or no memory: its status with err set and *bad = 1; else
 * ft_rec_call_flat's (the recorder's error then names what it refused). */
static int packed_call(ft_rec *r, const uint8_t *h, size_t fixed, size_t left, int64_t **splits,
                       size_t *cap_splits, size_t *used, int *bad, uint32_t n, size_t off,
                       ft_err *err)
{
    *bad = 1;
    uint32_t n_rg = get_u32(h + 64);
    int32_t n_sp = (int32_t)get_u32(h + 68);
    uint32_t phase_len = get_u32(h + 72);
    uint32_t flags = get_u32(h + 56);
    size_t rg_size = pad8(n_rg);
    size_t sp_size = n_sp > 0 ? 8u * (size_t)n_sp : 0u;
    size_t ph_size = (flags & FT_CF_HAS_PHASE) ? pad8((size_t)phase_len + 1u) : 0u;
    left -= fixed;
    if (n_sp < -1 || rg_size > left || sp_size > left - rg_size ||
        ph_size > left - rg_size - sp_size) {
        return ft_err_set(err, FT_EINVAL,
                          "packed record %" PRIu32 " at byte %zu: lengths (op_rg %" PRIu32
                          ", splits %" PRId32 ", phase %" PRIu32 ") exceed the %zu bytes left",
                          n, off, n_rg, n_sp, phase_len, left);
    }
    const uint8_t *body = h + fixed;
    const char *phase = NULL;
    if (ph_size) {
        phase = (const char *)(body + rg_size + sp_size);
        if (phase[phase_len] != '\0' || memchr(phase, '\0', phase_len)) {
            return ft_err_set(err, FT_EINVAL,
                              "packed record %" PRIu32
                              " at byte %zu: phase is not a string of %" PRIu32 " bytes",
                              n, off, phase_len);
        }
    }
    if (sp_size > *cap_splits) {
        int64_t *q = ft_realloc(*splits, sp_size);
        if (!q) {
            return ft_err_set(err, FT_ENOMEM, "packed records: out of memory");
        }
        *splits = q;
        *cap_splits = sp_size;
    }
    if (sp_size) memcpy(*splits, body + rg_size, sp_size);
    *used = fixed + rg_size + sp_size + ph_size;
    *bad = 0;
    return ft_rec_call_flat(r, get_i64(h), get_i64(h + 8), get_i64(h + 16), flags,
                            (int32_t)get_u32(h + 60), n_rg, body, n_sp, n_sp > 0 ? *splits : NULL,
                            get_i64(h + 24), get_i64(h + 32), phase, get_i64(h + 40),
                            get_i64(h + 48));
}

int ft_rec_append_packed(ft_rec *r, const void *buf, size_t n_bytes, uint32_t *n_done, ft_err *err)
{
    const uint8_t *p = buf;
    size_t off = 0;
    uint32_t n = 0;
    int rc = FT_OK;
    int64_t *splits = NULL; /* aligned copy of the current record's split sizes */
    size_t cap_splits = 0;

    if (n_done) *n_done = 0;
    if (!r) return ft_err_set(err, FT_EINVAL, "packed records: no recorder");
    if (!buf && n_bytes) return ft_err_set(err, FT_EINVAL, "packed records: no buffer");
    while (off < n_bytes) {
        if (n_bytes - off < PACKED_FIXED) {
            rc = ft_err_set(err, FT_EINVAL,
                            "packed record %" PRIu32 " at byte %zu: %zu bytes left, a record "
                            "needs %u",
                            n, off, n_bytes - off, PACKED_FIXED);
            break;
        }
        const uint8_t *h = p + off;
        uint32_t kind = get_u32(h + 76);
        if (kind == FT_REC_BACKWARD) {
            ft_backward b = {get_i64(h), get_i64(h + 8), get_u32(h + 56) != 0, get_i64(h + 40)};
            rc = ft_rec_backward(r, &b);
            off += PACKED_FIXED;
        } else if (kind == FT_REC_END) {
            ft_fuser_end e = {get_i64(h), get_i64(h + 8)};
            rc = ft_rec_fuser_end(r, &e);
            off += PACKED_FIXED;
        } else if (kind == FT_PACKED_FUSER_LIKE) {
            rc = ft_rec_fuser_like(r, get_i64(h), get_i64(h + 8));
            off += PACKED_FIXED;
        } else if (kind == FT_REC_CALL || kind == FT_PACKED_CALL_LIKE) {
            /* FT_PACKED_CALL_LIKE: maybe a fuser's end, then the fuser's declaration (like the
             * one named after the fixed part), then its call; one record */
            size_t fixed = kind == FT_PACKED_CALL_LIKE ? PACKED_CALL_LIKE_FIXED : PACKED_FIXED;
            size_t used = 0;
            int bad = 0;
            if (n_bytes - off < fixed) {
                rc = ft_err_set(err, FT_EINVAL,
                                "packed record %" PRIu32 " at byte %zu: %zu bytes left, a record "
                                "of kind %" PRIu32 " needs %zu",
                                n, off, n_bytes - off, kind, fixed);
                break;
            }
            if (kind == FT_PACKED_CALL_LIKE) {
                ft_fuser_end e = {get_i64(h + 88), get_i64(h + 96)};
                if (e.fuser >= 0) rc = ft_rec_fuser_end(r, &e);
                if (!rc) rc = ft_rec_fuser_like(r, get_i64(h + 8), get_i64(h + 80));
                if (rc) goto rejected;
            }
            rc = packed_call(r, h, fixed, n_bytes - off, &splits, &cap_splits, &used, &bad, n, off,
                             err);
            if (bad) break;
            off += used;
        } else {
            rc = ft_err_set(err, FT_EINVAL,
                            "packed record %" PRIu32 " at byte %zu: unknown kind %" PRIu32, n, off,
                            kind);
            break;
        }
    rejected:
        if (rc) {
            const ft_err *re = ft_rec_error(r);
            ft_err_set(err, rc, "packed record %" PRIu32 ": %s", n, re ? ft_err_msg(re) : "");
            break;
        }
        n++;
    }
    ft_free(splits);
    if (n_done) *n_done = n;
    return rc;
}
