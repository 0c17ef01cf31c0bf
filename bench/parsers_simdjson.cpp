/*
 * parsers_simdjson.cpp - bench_import's simdjson passes, behind extern "C": every line of a
 * buffer parsed with the DOM API (the whole tree built), or with On-Demand reading every value
 * (On-Demand parses only what is read, so a pass that skipped values would measure nothing).
 * The buffer must have SIMDJSON_PADDING readable bytes after its end.
 */
#define SIMDJSON_EXCEPTIONS 0
#include <cstdio>
#include <cstring>
#include <simdjson.h>

using namespace simdjson;

extern "C" size_t bench_simdjson_dom(const char *s, size_t len);
extern "C" size_t bench_simdjson_ondemand(const char *s, size_t len);

static uint64_t sink_value; /* keeps the reads from being optimised away */

static bool walk(ondemand::value v, int depth)
{
    ondemand::json_type t;
    if (depth > 64 || v.type().get(t)) return false;
    switch (t) {
    case ondemand::json_type::array: {
        ondemand::array a;
        if (v.get_array().get(a)) return false;
        for (auto e : a)
            if (e.error() || !walk(e.value_unsafe(), depth + 1)) return false;
        return true;
    }
    case ondemand::json_type::object: {
        ondemand::object o;
        if (v.get_object().get(o)) return false;
        for (auto f : o) {
            if (f.error()) return false;
            std::string_view k;
            if (f.value_unsafe().unescaped_key().get(k)) return false;
            sink_value += k.size();
            if (!walk(f.value_unsafe().value(), depth + 1)) return false;
        }
        return true;
    }
    case ondemand::json_type::number: {
        int64_t i;
        double d;
        if (!v.get_int64().get(i)) {
            sink_value += (uint64_t)i;
            return true;
        }
        if (v.get_double().get(d)) return false;
        sink_value += (uint64_t)d;
        return true;
    }
    case ondemand::json_type::string: {
        std::string_view sv;
        if (v.get_string().get(sv)) return false;
        sink_value += sv.size();
        return true;
    }
    case ondemand::json_type::boolean: {
        bool b;
        if (v.get_bool().get(b)) return false;
        sink_value += b;
        return true;
    }
    case ondemand::json_type::null: {
        bool n;
        return !v.is_null().get(n) && n;
    }
    }
    return false;
}

size_t bench_simdjson_ondemand(const char *s, size_t len)
{
    static ondemand::parser parser;
    size_t n = 0;
    const char *end = s + len;
    while (s < end) {
        const char *nl = static_cast<const char *>(std::memchr(s, '\n', (size_t)(end - s)));
        if (!nl) break;
        size_t l = (size_t)(nl - s);
        ondemand::document doc;
        ondemand::object o;
        if (parser.iterate(s, l, l + SIMDJSON_PADDING).get(doc) || doc.get_object().get(o))
            return 0;
        for (auto f : o) {
            if (f.error()) return 0;
            std::string_view k;
            if (f.value_unsafe().unescaped_key().get(k)) return 0;
            if (!walk(f.value_unsafe().value(), 1)) return 0;
        }
        n++;
        s = nl + 1;
    }
    return n;
}

size_t bench_simdjson_dom(const char *s, size_t len)
{
    static dom::parser parser;
    size_t n = 0;
    const char *end = s + len;
    while (s < end) {
        const char *nl = static_cast<const char *>(std::memchr(s, '\n', (size_t)(end - s)));
        if (!nl) break;
        dom::element e;
        if (parser.parse(s, (size_t)(nl - s), false).get(e)) return 0;
        sink_value += e.is_object();
        n++;
        s = nl + 1;
    }
    return n;
}
