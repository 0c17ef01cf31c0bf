/*
 * canon.c - canonical JSON through jansson: parse, check the shape, print with sorted keys, no
 * spaces, and each double in the shortest of %.15g/%.16g/%.17g that strtod reads back exactly
 * (with ".0" added when that text would read back as an integer).
 */
#include "canon.h"
#include "chunk.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int put_real(ft_buf *b, double v)
{
    char txt[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(txt, sizeof txt, "%.*g", prec, v);
        if (strtod(txt, NULL) == v) break;
    }
    if (!strpbrk(txt, ".eEn")) {
        size_t n = strlen(txt);
        if (n + 2 < sizeof txt) memcpy(txt + n, ".0", 3);
    }
    return ft_buf_append(b, txt, strlen(txt));
}

static int dump(ft_buf *b, const json_t *j)
{
    int rc = FT_OK;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        size_t n = json_object_size(j), i = 0;
        const char **keys = ft_malloc((n ? n : 1) * sizeof *keys);
        if (!keys) return FT_ENOMEM;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) keys[i++] = k;
        qsort(keys, n, sizeof *keys, cmp_str);
        rc = ft_buf_append(b, "{", 1);
        for (i = 0; i < n && !rc; i++) {
            if (i) rc = ft_buf_append(b, ",", 1);
            if (!rc) rc = ft_buf_json_str(b, keys[i], strlen(keys[i]));
            if (!rc) rc = ft_buf_append(b, ":", 1);
            if (!rc) rc = dump(b, json_object_get(j, keys[i]));
        }
        if (!rc) rc = ft_buf_append(b, "}", 1);
        ft_free(keys);
        return rc;
    }
    case JSON_ARRAY: {
        rc = ft_buf_append(b, "[", 1);
        for (size_t i = 0; i < json_array_size(j) && !rc; i++) {
            if (i) rc = ft_buf_append(b, ",", 1);
            if (!rc) rc = dump(b, json_array_get(j, i));
        }
        if (!rc) rc = ft_buf_append(b, "]", 1);
        return rc;
    }
    case JSON_STRING:
        return ft_buf_json_str(b, json_string_value(j), json_string_length(j));
    case JSON_INTEGER:
        return ft_buf_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(j));
    case JSON_REAL:
        return put_real(b, json_real_value(j));
    case JSON_TRUE:
        return ft_buf_append(b, "true", 4);
    case JSON_FALSE:
        return ft_buf_append(b, "false", 5);
    case JSON_NULL:
        return ft_buf_append(b, "null", 4);
    }
    return FT_EINVAL;
}

int ft_json_canon(const char *text, int kind, const char *what, char **out, size_t *n_items,
                  ft_err *err)
{
    *out = NULL;
    if (n_items) *n_items = 0;
    if (!text) return ft_err_set(err, FT_EINVAL, "%s: missing", what);
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!j) return ft_err_set(err, FT_EINVAL, "%s: bad JSON: %s", what, je.text);
    int rc = FT_OK;
    if (kind == FT_CANON_OBJECT && !json_is_object(j)) {
        rc = ft_err_set(err, FT_EINVAL, "%s: not a JSON object", what);
    } else if (kind == FT_CANON_OPLIST) {
        if (!json_is_array(j)) {
            rc = ft_err_set(err, FT_EINVAL, "%s: not a JSON array", what);
        } else if (json_array_size(j) > FT_MAX_OPS) {
            rc = ft_err_set(err, FT_ERANGE, "%s: more than %d ops", what, FT_MAX_OPS);
        } else {
            for (size_t i = 0; i < json_array_size(j) && !rc; i++) {
                json_t *op = json_array_get(j, i), *a;
                if (!json_is_object(op) || !json_is_string(json_object_get(op, "type")))
                    rc = ft_err_set(err, FT_EINVAL, "%s: op %zu has no string 'type'", what, i);
                else if ((a = json_object_get(op, "attrs")) && !json_is_object(a))
                    rc =
                        ft_err_set(err, FT_EINVAL, "%s: op %zu: 'attrs' is not an object", what, i);
            }
            if (n_items) *n_items = json_array_size(j);
        }
    }
    ft_buf b = {0};
    if (!rc && (rc = dump(&b, j)) == FT_OK) rc = ft_buf_append(&b, "", 1);
    if (!rc) {
        *out = (char *)b.data;
    } else {
        ft_buf_free(&b);
        if (rc == FT_ENOMEM) ft_err_set(err, rc, "%s: out of memory", what);
    }
    json_decref(j);
    return rc;
}

int ft_json_header_ok(const char *env_json, const char *extra_json, ft_err *err)
{
    static const char *const named[] = {
        "t",    "format",     "version", "te_version", "torch_version",
        "host", "started_at", "rank",    "world_size", "env"};
    json_t *env = json_loads(env_json ? env_json : "{}", 0, NULL);
    json_t *extra = json_loads(extra_json ? extra_json : "{}", 0, NULL);
    int rc = FT_OK;
    const char *key;
    json_t *v;
    if (!json_is_object(env) || !json_is_object(extra))
        rc = ft_err_set(err, env && extra ? FT_EINVAL : FT_ENOMEM,
                        "header: env or extra is not "
                        "a JSON object");
    if (!rc) json_object_foreach(env, key, v)
        {
            if (!json_is_string(v) && !json_is_number(v) && !json_is_null(v)) {
                rc = ft_err_set(err, FT_EINVAL, "header env.%.80s: not a string, a number or null",
                                key);
                break;
            }
        }
    if (!rc) json_object_foreach(extra, key, v)
        {
            for (size_t i = 0; i < sizeof named / sizeof *named && !rc; i++)
                if (!strcmp(key, named[i]))
                    rc = ft_err_set(err, FT_EINVAL,
                                    "header extra field '%s' is a name the header defines", key);
            if (rc) break;
        }
    json_decref(env);
    json_decref(extra);
    return rc;
}

int ft_oplist_groups(const char *ops_json, uint32_t *groups, ft_err *err)
{
    *groups = 0;
    json_t *j = json_loads(ops_json, 0, NULL);
    if (!json_is_array(j)) {
        json_decref(j);
        return ft_err_set(err, j ? FT_EINVAL : FT_ENOMEM, "ops: not a JSON array");
    }
    int rc = FT_OK, mixed = 0;
    size_t n = json_array_size(j);
    if (!n) rc = ft_err_set(err, FT_EINVAL, "ops: must hold at least one op");
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *op = json_array_get(j, i);
        json_t *a = json_object_get(op, "attrs");
        json_t *g = a ? json_object_get(a, "num_groups") : NULL;
        if (!json_string_length(json_object_get(op, "type"))) {
            rc = ft_err_set(err, FT_EINVAL, "ops[%zu].type: must not be empty", i);
        } else if (g) {
            json_int_t v = json_is_integer(g) ? json_integer_value(g) : 0;
            if (v < 1 || v > INT32_MAX)
                rc = ft_err_set(err, FT_EINVAL,
                                "ops[%zu].attrs.num_groups: not an integer in [1, %d]", i,
                                INT32_MAX);
            else if (!*groups)
                *groups = (uint32_t)v;
            else if (*groups != (uint32_t)v)
                mixed = 1;
        }
    }
    if (mixed || rc) *groups = 0;
    json_decref(j);
    return rc;
}
