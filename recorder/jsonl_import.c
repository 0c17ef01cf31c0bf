/*
 * jsonl_import.c - capture-jsonl v1 (docs/capture-format.md) -> any ft_sink: reading and parsing
 * the stream (the checks of each record are jsonl_check.c's, the shared state jsonl_import_int.h).
 *
 * Input: plain JSON Lines, or a zstd-compressed stream (`.jsonl.zst`), told apart by the first
 * bytes (the zstd frame magic), not by the name, and decompressed as it is read
 * (ZSTD_decompressStream), never whole. A compressed stream that ends inside a frame, or whose
 * frame is damaged, is an error naming the line it was in.
 *
 * The stream is read line by line into one buffer that grows up to FT_LIM_LINE_BYTES
 * (ft_limits.h); a longer line is an error. Every line is parsed once:
 *   - `call` and `backward` lines (almost all of a stream) go through the fast path: simdjson
 *     On-Demand into a flat record (json_fast.h), checked and handed to the sink;
 *   - every other line, and any line the fast path does not accept or whose record fails a check,
 *     goes through the general path: jansson (json_loadb), checked field by field, which
 *     words the message. A bad line is therefore parsed twice, a good one once, and the messages
 *     are the general path's whatever the line.
 * Memory does not grow with the input except for what validation must remember: the declared
 * fuser ids (with their op counts), the declared recipe ids and (obj, attrs) pairs, and the seqs
 * of every call, which a later `backward` may name (common/ft_seqset.h: about one byte per call).
 *
 * Every failure is FT_EINVAL (or the sink's own status) with "NAME:LINE: field 'x': what is
 * wrong" in err; a line that is not JSON is worded here, a record that breaks the format in
 * jsonl_check.c.
 *
 * The importer checks every record completely, so it can feed the recorder through its
 * pre-validated entries (ft_rec_sink_prevalidated): each record is checked once.
 * bench/bench_import.c measures both paths, bench/RESULTS.md has the figures.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_limits.h"
#include "jsonl_import_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lines ------------------------------------------------------------------------------- */
/* Byte offset of the first invalid UTF-8 sequence in s[0, n), or n if it is all valid. */
static size_t utf8_invalid_at(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned min;
        if (c >= 0xc2 && c <= 0xdf)
            len = 2, min = 0x80;
        else if (c >= 0xe0 && c <= 0xef)
            len = 3, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4)
            len = 4, min = 0x10000;
        else
            return i;
        if (n - i < len) return i;
        unsigned cp = c & (0x3fu >> (len - 1));
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
        i += len;
    }
    return n;
}

/* Best guess at the key whose value starts before byte `pos` (for parse errors that jansson
 * reports without naming the key): the last `"key":` before pos. */
static void guess_key(const char *s, size_t pos, char *out, size_t cap)
{
    out[0] = '\0';
    size_t i = pos;
    while (i > 0) {
        i--;
        if (s[i] != ':') continue;
        size_t j = i;
        while (j > 0 && (s[j - 1] == ' ' || s[j - 1] == '\t'))
            j--;
        if (j == 0 || s[j - 1] != '"') continue;
        size_t end = j - 1, k = end;
        while (k > 0 && s[k - 1] != '"')
            k--;
        if (k == 0) return;
        size_t len = end - k;
        if (len >= cap) len = cap - 1;
        memcpy(out, s + k, len);
        out[len] = '\0';
        return;
    }
}

static int parse_error(importer *im, const char *s, size_t len, const json_error_t *je)
{
    size_t pos = je->position > 0 ? (size_t)je->position : 0;
    if (pos > len) pos = len;
    char key[64];
    switch (json_error_code(je)) {
    case json_error_invalid_utf8: {
        size_t at = utf8_invalid_at((const unsigned char *)s, len);
        if (at >= len) at = pos;
        guess_key(s, at, key, sizeof key);
        return imp_fail(im, key[0] ? key : NULL, "column %zu: invalid UTF-8", at + 1);
    }
    case json_error_null_character:
        guess_key(s, pos, key, sizeof key);
        return imp_fail(im, key[0] ? key : NULL, "NUL character (\\u0000) in a string");
    case json_error_numeric_overflow:
        guess_key(s, pos, key, sizeof key);
        return imp_fail(im, key[0] ? key : NULL, "column %zu: number out of range (%s)", pos + 1,
                        je->text);
    case json_error_duplicate_key: {
        /* jansson's text is: duplicate object key near '"KEY"' */
        const char *q = strstr(je->text, "'\"");
        size_t n = 0;
        if (q) {
            q += 2;
            while (q[n] && q[n] != '"' && n + 1 < sizeof key)
                n++;
            memcpy(key, q, n);
        }
        key[n] = '\0';
        return imp_fail(im, n ? key : NULL, "column %zu: appears twice in the record", pos + 1);
    }
    case json_error_out_of_memory:
        return imp_fail_nomem(im);
    default: {
        size_t at = utf8_invalid_at((const unsigned char *)s, len);
        guess_key(s, at < len ? at : pos, key, sizeof key);
        if (at < len) return imp_fail(im, key[0] ? key : NULL, "column %zu: invalid UTF-8", at + 1);
        if (key[0])
            return imp_fail(im, NULL, "column %zu: invalid JSON (at or after field '%s'): %s",
                            pos + 1, key, je->text);
        return imp_fail(im, NULL, "column %zu: invalid JSON: %s", pos + 1, je->text);
    }
    }
}
static int do_line(importer *im, const char *s, size_t len)
{
    if (len == 0) return imp_fail(im, NULL, "empty line (every line must hold one JSON object)");
    const char *nul = memchr(s, '\0', len);
    if (nul) return imp_fail(im, NULL, "column %zu: NUL byte", (size_t)(nul - s) + 1);
    int rc;
    ft_jfast_rec f;
    im->cur = s;
    im->cur_len = len;
    if (im->jf && im->have_header && ft_jfast_parse(im->jf, s, len, &f) &&
        imp_fast_record(im, &f, &rc))
        return rc;
    if (im->jf && im->have_header && imp_fuser_fast(im, s, len, &rc)) return rc;

    json_error_t je;
    json_t *o = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) return parse_error(im, s, len, &je);
    if (!json_is_object(o)) {
        rc = imp_fail(im, NULL, "expected a JSON object, got %s", imp_type_name(o));
        goto out;
    }
    json_t *t = json_object_get(o, "t");
    if (!t) {
        rc = imp_fail(im, "t", "missing (the record type)");
        goto out;
    }
    if (!json_is_string(t)) {
        rc = imp_fail(im, "t", "expected a string, got %s", imp_type_name(t));
        goto out;
    }
    const char *type = json_string_value(t);
    int is_header = !strcmp(type, "header");
    if (!im->have_header && !is_header) {
        rc = imp_fail(im, "t", "the first record must be the header, got \"%.32s\"", type);
        goto out;
    }
    if (is_header) {
        rc = im->have_header ? imp_fail(im, "t", "a second header record") : imp_header(im, o);
        if (!rc) im->have_header = 1;
    } else if (!strcmp(type, "call")) {
        rc = imp_call(im, o);
    } else if (!strcmp(type, "backward")) {
        rc = imp_backward(im, o);
    } else if (!strcmp(type, "fuser")) {
        rc = imp_fuser(im, o);
    } else if (!strcmp(type, "fuser_end")) {
        rc = imp_fuser_end(im, o);
    } else if (!strcmp(type, "recipe")) {
        rc = imp_recipe(im, o);
    } else {
        rc = imp_fail(im, "t", "unknown record type \"%.32s\"", type);
    }
out:
    json_decref(o);
    return rc;
}

/* ---- input ------------------------------------------------------------------------------- */
/* A zstd frame (or a skippable frame) starts with one of these little-endian magic numbers. */
static int is_zstd(const uint8_t *p, size_t n)
{
    if (n < 4) return 0;
    uint32_t m = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return m == ZSTD_MAGICNUMBER || (m & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START;
}

/* A failure of the compressed stream, named by the line it was in. */
static int fail_zstd(importer *im, const char *what)
{
    return ft_err_set(im->err, FT_EINVAL, "%s:%" PRIu64 ": compressed input (zstd): %s", im->name,
                      im->line + 1, what);
}

static int fail_read(importer *im)
{
    return ft_err_set(im->err, FT_EIO, "%s: read error after line %" PRIu64 ": %s", im->name,
                      im->line, strerror(errno));
}

/* Decompress into buf[end, cap) until some bytes come out or the input ends (im->eof). At the end
 * of the compressed input, a frame still in progress is given the chance to flush what it holds
 * (its last output may not have fitted); one that then has nothing more is truncated. */
static int fill_zstd(importer *im)
{
    for (;;) {
        if (im->zin.pos == im->zin.size && !im->zeof) {
            size_t got = fread(im->zbuf, 1, im->zcap, im->in);
            if (got == 0) {
                if (ferror(im->in)) return fail_read(im);
                im->zeof = 1;
            }
            im->zin.src = im->zbuf;
            im->zin.size = got;
            im->zin.pos = 0;
        }
        int at_end = im->zin.pos == im->zin.size && im->zeof;
        if (at_end && im->zlast == 0) { /* the last frame ended: the stream is complete */
            im->eof = 1;
            return FT_OK;
        }
        ZSTD_outBuffer out = {im->buf + im->end, im->cap - im->end, 0};
        size_t r = ZSTD_decompressStream(im->zd, &out, &im->zin);
        if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge)
            return fail_zstd(im, "the frame needs a window over 128 MiB (it was written with "
                                 "zstd --long=28 or more), more memory than import gives a "
                                 "stream; recompress it without --long: "
                                 "zstd -dc IN.zst | zstd -o OUT.jsonl.zst");
        if (ZSTD_isError(r)) return fail_zstd(im, ZSTD_getErrorName(r));
        im->zlast = r;
        im->end += out.pos;
        if (out.pos) return FT_OK;
        if (at_end && r != 0) return fail_zstd(im, "truncated (the stream ends inside a frame)");
    }
}

/* More bytes into buf[end, cap), or im->eof. */
static int fill(importer *im)
{
    if (im->zd) return fill_zstd(im);
    size_t got = fread(im->buf + im->end, 1, im->cap - im->end, im->in);
    im->end += got;
    if (got == 0) {
        if (ferror(im->in)) return fail_read(im);
        im->eof = 1;
    }
    return FT_OK;
}

/* Read the first bytes; a compressed stream moves them to the zstd input and decompresses. */
static int open_input(importer *im)
{
    size_t got = fread(im->buf, 1, im->cap, im->in);
    if (got == 0 && ferror(im->in)) return fail_read(im);
    if (!is_zstd((const uint8_t *)im->buf, got)) {
        im->end = got;
        if (got < im->cap) im->eof = feof(im->in) ? 1 : 0;
        return FT_OK;
    }
    im->zd = ZSTD_createDStream();
    im->zcap = ZSTD_DStreamInSize() > im->cap ? ZSTD_DStreamInSize() : im->cap;
    im->zbuf = ft_malloc(im->zcap);
    if (!im->zd || !im->zbuf) return imp_fail_nomem(im);
    size_t r = ZSTD_initDStream(im->zd);
    if (ZSTD_isError(r)) return fail_zstd(im, ZSTD_getErrorName(r));
    memcpy(im->zbuf, im->buf, got);
    im->zin = (ZSTD_inBuffer){im->zbuf, got, 0};
    im->zlast = 1;
    im->zeof = got < im->cap && feof(im->in);
    return FT_OK;
}

/* Next line (without its newline) into s and len; returns 1 for a line, 0 at the end, <0 on error.
 */
static int next_line(importer *im, const char **s, size_t *len)
{
    for (;;) {
        char *nl = memchr(im->buf + im->beg, '\n', im->end - im->beg);
        if (nl) {
            *s = im->buf + im->beg;
            *len = (size_t)(nl - *s);
            im->beg += *len + 1;
            return 1;
        }
        if (im->eof) {
            if (im->beg == im->end) return 0;
            *s = im->buf + im->beg; /* last line without '\n' */
            *len = im->end - im->beg;
            im->beg = im->end;
            return 1;
        }
        if (im->beg) {
            memmove(im->buf, im->buf + im->beg, im->end - im->beg);
            im->end -= im->beg;
            im->beg = 0;
        }
        if (im->end == im->cap) {
            if (im->cap == FT_LIM_LINE_BYTES + 1) {
                im->line++;
                return imp_fail(im, NULL, "line longer than %u bytes", FT_LIM_LINE_BYTES);
            }
            size_t cap = im->cap * 4 < FT_LIM_LINE_BYTES + 1 ? im->cap * 4 : FT_LIM_LINE_BYTES + 1;
            char *p = ft_realloc(im->buf, cap + FT_JFAST_PADDING);
            if (!p) return imp_fail_nomem(im);
            im->buf = p;
            im->cap = cap;
        }
        int rc = fill(im);
        if (rc) return rc;
    }
}

int ft_jsonl_import_ex(FILE *in, const char *name, ft_sink *sink, FILE *warn, unsigned flags,
                       ft_err *err)
{
    importer im;
    memset(&im, 0, sizeof im);
    im.name = name ? name : "<input>";
    im.in = in;
    im.warn = warn;
    im.sink = sink;
    im.err = err;
    if (!in || !sink) return ft_err_set(err, FT_EINVAL, "%s: no input or no sink", im.name);
    im.cap = 64 * 1024;
    im.buf = ft_malloc(im.cap + FT_JFAST_PADDING);
    if (!im.buf) return ft_err_set(err, FT_ENOMEM, "%s: out of memory", im.name);
    if (!(flags & FT_JSONL_NO_FAST_PATH)) {
        im.jf = ft_jfast_new();
        if (!im.jf) {
            ft_free(im.buf);
            return ft_err_set(err, FT_ENOMEM, "%s: out of memory", im.name);
        }
    }

    int rc = open_input(&im);
    const char *s = NULL;
    size_t len = 0;
    while (!rc && (rc = next_line(&im, &s, &len)) == 1) {
        im.line++;
        rc = do_line(&im, s, len);
    }
    if (rc == 0 && !im.have_header)
        rc =
            ft_err_set(err, FT_EINVAL, "%s:1: field 't': no header record (empty stream)", im.name);

    ft_free(im.buf);
    ZSTD_freeDStream(im.zd);
    ft_free(im.zbuf);
    ft_jfast_free(im.jf);
    imp_free_fusers(&im);
    ft_hmap_free(&im.recipes);
    ft_hmap_free(&im.states);
    for (size_t i = 0; i < im.n_rstates; i++)
        ft_free(im.rstates[i].attrs);
    ft_free(im.rstates);
    ft_seqset_free(&im.calls);
    ft_free(im.op_rg);
    ft_free(im.splits);
    for (size_t i = 0; i < im.n_warned; i++)
        ft_free(im.warned[i]);
    return rc;
}

int ft_jsonl_import(FILE *in, const char *name, ft_sink *sink, FILE *warn, ft_err *err)
{
    return ft_jsonl_import_ex(in, name, sink, warn, 0, err);
}
