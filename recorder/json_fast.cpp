/*
 * json_fast.cpp - the importer's fast path (json_fast.h): one capture-stream line, a `call` or a
 * `backward` record, through simdjson On-Demand into a flat C struct. Built without exceptions;
 * every simdjson result is checked, and any error or surprise answers 0 so that the importer's
 * general path (jansson) handles the line and words the message.
 *
 * simdjson validates UTF-8 over the whole line and the structure as it iterates; this file reads
 * every value of the object (no value is skipped unread), so nothing invalid is accepted. Keys
 * and strings are compared raw: one with a backslash escape or a control byte is left to the
 * general path, which decodes it.
 */
#define SIMDJSON_EXCEPTIONS 0
#include "json_fast.h"

#include "ft_common.h"
#include "ft_limits.h"

#include <cstring>
#include <new>
#include <simdjson.h>

static_assert(FT_JFAST_PADDING == simdjson::SIMDJSON_PADDING, "padding disagrees with simdjson");

using namespace simdjson;

struct ft_jfast {
    ondemand::parser parser;
    uint8_t *op_rg = nullptr; /* [cap_op_rg] */
    size_t cap_op_rg = 0;
    int64_t *splits = nullptr; /* [cap_splits] */
    size_t cap_splits = 0;
    char *phase = nullptr; /* [cap_phase] */
    size_t cap_phase = 0;
};

template <typename T> static bool grow(T **p, size_t *cap, size_t n)
{
    if (n <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    void *q = ft_realloc(*p, c * sizeof(T));
    if (!q) return false;
    *p = static_cast<T *>(q);
    *cap = c;
    return true;
}

extern "C" ft_jfast *ft_jfast_new(void)
{
    void *m = ft_malloc(sizeof(ft_jfast));
    if (!m) return nullptr;
    return new (m) ft_jfast();
}

extern "C" void ft_jfast_free(ft_jfast *p)
{
    if (!p) return;
    ft_free(p->op_rg);
    ft_free(p->splits);
    ft_free(p->phase);
    p->~ft_jfast();
    ft_free(p);
}

/* The text between a string token's opening quote (at raw) and the next quote; false if that
 * text holds a backslash or a control byte (the general path decodes those). */
static bool plain_text(const char *raw, const char *end, std::string_view *out)
{
    const char *q = static_cast<const char *>(std::memchr(raw, '"', (size_t)(end - raw)));
    if (!q) return false;
    for (const char *c = raw; c < q; c++)
        if (*c == '\\' || (unsigned char)*c < 0x20) return false;
    *out = std::string_view(raw, (size_t)(q - raw));
    return true;
}

/* Is the raw text at r exactly name followed by the closing quote? A key or string holding an
 * escape never matches (its raw text differs from every name), which sends it to the general path.
 */
static inline bool is(const char *r, const char *name, size_t n)
{
    return !std::memcmp(r, name, n) && r[n] == '"';
}

/* The field bit of the key whose raw text starts at r (0 for a key no record here names). The
 * closing quote is within the line, so every byte compared is. */
static inline uint32_t field_bit(const char *r)
{
    switch (r[0]) {
    case 't':
        return r[1] == '"' ? FT_JF_T : 0;
    case 's':
        if (is(r, "seq", 3)) return FT_JF_SEQ;
        if (is(r, "step", 4)) return FT_JF_STEP;
        return 0;
    case 'f':
        if (is(r, "fuser", 5)) return FT_JF_FUSER;
        if (is(r, "fuse_ns", 7)) return FT_JF_FUSE_NS;
        return 0;
    case 'r':
        if (is(r, "recipe", 6)) return FT_JF_RECIPE;
        if (is(r, "rebuilt", 7)) return FT_JF_REBUILT;
        return 0;
    case 'g':
        if (is(r, "grad", 4)) return FT_JF_GRAD;
        if (is(r, "graph", 5)) return FT_JF_GRAPH;
        return 0;
    case 'i':
        return is(r, "input_rg", 8) ? FT_JF_INPUT_RG : 0;
    case 'o':
        return is(r, "op_rg", 5) ? FT_JF_OP_RG : 0;
    case 'd':
        return is(r, "device", 6) ? FT_JF_DEVICE : 0;
    case 'm':
        if (is(r, "m_splits", 8)) return FT_JF_M_SPLITS;
        if (is(r, "mb", 2)) return FT_JF_MB;
        return 0;
    case 'p':
        return is(r, "phase", 5) ? FT_JF_PHASE : 0;
    case 'n':
        return is(r, "ns", 2) ? FT_JF_NS : 0;
    case 'c':
        return is(r, "call", 4) ? FT_JF_CALLREF : 0;
    }
    return 0;
}

static inline bool get_i64(ondemand::value &v, int64_t *out)
{
    return !v.get_int64().get(*out);
}

static inline bool get_b(ondemand::value &v, int *out)
{
    bool b;
    if (v.get_bool().get(b)) return false;
    *out = b;
    return true;
}

static const uint32_t CALL_FIELDS = FT_JF_T | FT_JF_SEQ | FT_JF_FUSER | FT_JF_RECIPE | FT_JF_GRAD |
                                    FT_JF_INPUT_RG | FT_JF_OP_RG | FT_JF_DEVICE | FT_JF_M_SPLITS |
                                    FT_JF_STEP | FT_JF_MB | FT_JF_PHASE | FT_JF_GRAPH | FT_JF_NS |
                                    FT_JF_FUSE_NS | FT_JF_REBUILT;
static const uint32_t BACKWARD_FIELDS = FT_JF_T | FT_JF_SEQ | FT_JF_CALLREF | FT_JF_NS;
static const uint32_t END_FIELDS = FT_JF_T | FT_JF_SEQ | FT_JF_FUSER;

static bool parse(ft_jfast *p, const char *s, size_t len, ft_jfast_rec *o)
{
    const char *end = s + len;
    ondemand::document doc;
    if (p->parser.iterate(s, len, len + SIMDJSON_PADDING).get(doc)) return false;
    ondemand::object obj;
    if (doc.get_object().get(obj)) return false;
    for (auto fr : obj) {
        if (fr.error()) return false;
        ondemand::field &f =
            fr.value_unsafe(); /* by reference: a copy stalls on store forwarding */
        uint32_t bit = field_bit(f.key().raw());
        if (!bit || (o->present & bit)) return false; /* unknown (to be warned about) or twice */
        o->present |= bit;
        ondemand::value v = f.value();
        switch (bit) {
        case FT_JF_T: {
            ondemand::raw_json_string r;
            if (v.get_raw_json_string().get(r)) return false;
            if (is(r.raw(), "call", 4))
                o->kind = FT_JF_CALL;
            else if (is(r.raw(), "backward", 8))
                o->kind = FT_JF_BACKWARD;
            else if (is(r.raw(), "fuser_end", 9))
                o->kind = FT_JF_END;
            else
                return false;
            break;
        }
        case FT_JF_SEQ:
            if (!get_i64(v, &o->seq)) return false;
            break;
        case FT_JF_FUSER:
            if (!get_i64(v, &o->fuser)) return false;
            break;
        case FT_JF_CALLREF:
            if (!get_i64(v, &o->call)) return false;
            break;
        case FT_JF_RECIPE: {
            bool null = false;
            if (v.is_null().get(null)) return false;
            if (null)
                o->recipe_null = 1;
            else if (!get_i64(v, &o->recipe))
                return false;
            break;
        }
        case FT_JF_GRAD:
            if (!get_b(v, &o->grad)) return false;
            break;
        case FT_JF_INPUT_RG:
            if (!get_b(v, &o->input_rg)) return false;
            break;
        case FT_JF_GRAPH:
            if (!get_b(v, &o->graph)) return false;
            break;
        case FT_JF_REBUILT:
            if (!get_b(v, &o->rebuilt)) return false;
            break;
        case FT_JF_DEVICE:
            if (!get_i64(v, &o->device)) return false;
            break;
        case FT_JF_STEP:
            if (!get_i64(v, &o->step)) return false;
            break;
        case FT_JF_MB:
            if (!get_i64(v, &o->mb)) return false;
            break;
        case FT_JF_NS:
            if (!get_i64(v, &o->ns)) return false;
            break;
        case FT_JF_FUSE_NS:
            if (!get_i64(v, &o->fuse_ns)) return false;
            break;
        case FT_JF_OP_RG: {
            ondemand::array a;
            if (v.get_array().get(a)) return false;
            size_t n = 0;
            for (auto e : a) {
                bool b;
                if (e.error() || e.value_unsafe().get_bool().get(b)) return false;
                if (n == FT_LIM_OPS || !grow(&p->op_rg, &p->cap_op_rg, n + 1)) return false;
                p->op_rg[n++] = b;
            }
            o->n_op_rg = (uint32_t)n;
            o->op_rg = p->op_rg;
            break;
        }
        case FT_JF_M_SPLITS: {
            ondemand::array a;
            if (v.get_array().get(a)) return false;
            size_t n = 0;
            for (auto e : a) {
                int64_t x;
                if (e.error() || e.value_unsafe().get_int64().get(x)) return false;
                if (n == FT_LIM_SPLITS || !grow(&p->splits, &p->cap_splits, n + 1)) return false;
                p->splits[n++] = x;
            }
            o->n_splits = (uint32_t)n;
            o->m_splits = p->splits;
            break;
        }
        case FT_JF_PHASE: {
            ondemand::raw_json_string r;
            std::string_view t;
            if (v.get_raw_json_string().get(r) || !plain_text(r.raw(), end, &t)) return false;
            if (!grow(&p->phase, &p->cap_phase, t.size() + 1)) return false;
            std::memcpy(p->phase, t.data(), t.size());
            p->phase[t.size()] = '\0';
            o->phase = p->phase;
            o->phase_len = t.size();
            break;
        }
        default:
            return false;
        }
    }
    if (!doc.current_location().error()) return false; /* a token after the object */
    if (o->kind == FT_JF_CALL) return !(o->present & ~CALL_FIELDS);
    if (o->kind == FT_JF_BACKWARD) return !(o->present & ~BACKWARD_FIELDS);
    if (o->kind == FT_JF_END) return !(o->present & ~END_FIELDS);
    return false;
}

extern "C" int ft_jfast_parse(ft_jfast *p, const char *s, size_t len, ft_jfast_rec *out)
{
    std::memset(out, 0, sizeof *out);
    if (!len || s[0] != '{') return 0; /* leading white space, a byte-order mark, ... */
    return parse(p, s, len, out) ? 1 : 0;
}
