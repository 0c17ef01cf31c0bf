/*
 * env.c - the environment the fusion rules and recipe defaults read: the header's env object
 * with --env overrides applied, parsed once into typed values, and version strings made
 * comparable.
 *
 * Environment keys (header env; --env overrides; values are strings): device_cc ("10.0", absent:
 * no device, 0.0), cudnn_frontend ("1.27.0", absent: package not installed), cublaslt ("13.4.0"
 * or TE's integer form "130400", absent: 0), world_size (absent: 1),
 * NVTE_CUTEDSL_FUSED_GROUPED_MLP and NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP (Python int(),
 * absent: 0), cudnn_wgrad_wrapper ("0" when grouped_gemm_wgrad_wrapper_sm100 cannot be imported,
 * absent: "1"), and the NVTE_* variables recipe defaults read.
 */
#include "tefuser_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- environment -------------------------------------------------------------------------- */
static const char *const env_names[FT_EA_COUNT] = {
    [FT_EA_DEVICE_CC] = "device_cc",
    [FT_EA_CUDNN_FRONTEND] = "cudnn_frontend",
    [FT_EA_CUBLASLT] = "cublaslt",
    [FT_EA_WORLD_SIZE] = "world_size",
    [FT_EA_CUTEDSL_FUSED_GROUPED_MLP] = "NVTE_CUTEDSL_FUSED_GROUPED_MLP",
    [FT_EA_DISABLE_CUTEDSL_WGRAD] = "NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP",
    [FT_EA_CUDNN_WGRAD_WRAPPER] = "cudnn_wgrad_wrapper",
};

const char *ft_env_attr_name(ft_env_attr a)
{
    return (unsigned)a < FT_EA_COUNT ? env_names[a] : "?";
}

int64_t ft_version_code(int major, int minor, int patch)
{
    return (((int64_t)major * 1000 + minor) * 1000 + patch) * 2;
}

/* PEP 440-ish: up to three numeric components; a pre-release or dev suffix ("rc1", "a0",
 * ".dev0") sorts just below the release, a ".post"/"+local" suffix counts as the release. */
int ft_version_parse(const char *s, int64_t *out)
{
    int64_t part[3] = {0, 0, 0};
    int n = 0;
    const char *p = s;
    while (n < 3 && isdigit((unsigned char)*p)) {
        int64_t v = 0;
        while (isdigit((unsigned char)*p)) {
            v = v * 10 + (*p - '0');
            if (v > 999) return FT_EINVAL;
            p++;
        }
        part[n++] = v;
        if (*p == '.' && isdigit((unsigned char)p[1]) && n < 3)
            p++;
        else
            break;
    }
    if (n == 0) return FT_EINVAL;
    int pre = 0;
    if (*p == '.') p++;
    if (*p && strncmp(p, "post", 4) && *p != '+') pre = 1;
    *out = ft_version_code((int)part[0], (int)part[1], (int)part[2]) - pre;
    return FT_OK;
}

const char *ft_env_str(const ft_env *e, const char *key)
{
    if (!e || !e->obj) return NULL;
    const json_t *v = json_object_get(e->obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Python int(): optional whitespace and sign, decimal digits. */
static int parse_py_int(const char *s, int64_t *out)
{
    char buf[64];
    while (isspace((unsigned char)*s))
        s++;
    size_t n = ft_strlcpy(buf, s, sizeof buf);
    if (n >= sizeof buf) return FT_EINVAL;
    while (n && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    return ft_parse_i64(buf[0] == '+' ? buf + 1 : buf, out);
}

int ft_env_parse(const char *env_json, const ft_env_kv *ov, uint32_t n_ov, ft_env *e, ft_err *err)
{
    memset(e, 0, sizeof *e);
    json_error_t je;
    e->obj = env_json && *env_json ? json_loads(env_json, 0, &je) : json_object();
    if (!e->obj)
        return ft_err_set(err, FT_EINVAL, "trace header env: not valid JSON (%s)", je.text);
    if (!json_is_object(e->obj))
        return ft_err_set(err, FT_EINVAL, "trace header env: not a JSON object");
    for (uint32_t i = 0; i < n_ov; i++) {
        if (!ov[i].key || !*ov[i].key || !ov[i].value)
            return ft_err_set(err, FT_EINVAL, "--env override %u: empty key or value", i);
        if (json_object_set_new(e->obj, ov[i].key, json_string(ov[i].value)))
            return ft_err_set(err, FT_ENOMEM, "--env %s: out of memory", ov[i].key);
    }
    /* values are strings; numbers and bools are taken as their text */
    const char *key;
    json_t *val;
    json_object_foreach(e->obj, key, val)
    {
        if (json_is_string(val) || json_is_null(val)) continue;
        char txt[64];
        if (json_is_integer(val))
            snprintf(txt, sizeof txt, "%lld", (long long)json_integer_value(val));
        else if (json_is_real(val))
            snprintf(txt, sizeof txt, "%.1f", json_real_value(val));
        else if (json_is_boolean(val))
            snprintf(txt, sizeof txt, "%d", json_is_true(val));
        else
            return ft_err_set(err, FT_EINVAL, "env %s: value is not a string", key);
        if (json_object_set_new(e->obj, key, json_string(txt)))
            return ft_err_set(err, FT_ENOMEM, "env %s: out of memory", key);
    }

    const char *s;
    /* device_cc "M.m" -> M*10+m */
    e->v[FT_EA_DEVICE_CC] = 0;
    if ((s = ft_env_str(e, "device_cc"))) {
        char *end;
        long mj = strtol(s, &end, 10), mn = 0;
        if (end == s || mj < 0 || mj > 99) goto bad_cc;
        if (*end == '.') {
            const char *q = end + 1;
            mn = strtol(q, &end, 10);
            if (end == q || mn < 0 || mn > 9) goto bad_cc;
        }
        if (*end) goto bad_cc;
        e->v[FT_EA_DEVICE_CC] = mj * 10 + mn;
    }
    e->v[FT_EA_CUDNN_FRONTEND] = -1;
    if ((s = ft_env_str(e, "cudnn_frontend")) && ft_version_parse(s, &e->v[FT_EA_CUDNN_FRONTEND]))
        return ft_err_set(err, FT_EINVAL,
                          "env cudnn_frontend: '%s' is not a version like \"1.27.0\"", s);
    e->v[FT_EA_CUBLASLT] = 0;
    if ((s = ft_env_str(e, "cublaslt"))) {
        int64_t iv;
        if (!strchr(s, '.') && !ft_parse_i64(s, &iv) && iv >= 10000)
            e->v[FT_EA_CUBLASLT] =
                ft_version_code((int)(iv / 10000), (int)(iv / 100 % 100), (int)(iv % 100));
        else if (ft_version_parse(s, &e->v[FT_EA_CUBLASLT]))
            return ft_err_set(err, FT_EINVAL, "env cublaslt: '%s' is not a version like \"13.4.0\"",
                              s);
    }
    e->v[FT_EA_WORLD_SIZE] = 1;
    if ((s = ft_env_str(e, "world_size")) &&
        (parse_py_int(s, &e->v[FT_EA_WORLD_SIZE]) || e->v[FT_EA_WORLD_SIZE] < 1))
        return ft_err_set(err, FT_EINVAL, "env world_size: '%s' is not an integer >= 1", s);
    static const ft_env_attr int_flags[] = {FT_EA_CUTEDSL_FUSED_GROUPED_MLP,
                                            FT_EA_DISABLE_CUTEDSL_WGRAD};
    for (size_t i = 0; i < FT_ARRAY_LEN(int_flags); i++) {
        ft_env_attr a = int_flags[i];
        e->v[a] = 0;
        /* TE evaluates int(os.environ[...]) at import: a non-integer fails the import */
        if ((s = ft_env_str(e, env_names[a])) && parse_py_int(s, &e->v[a]))
            return ft_err_set(err, FT_EINVAL, "env %s: '%s' is not an integer (TE's int() raises)",
                              env_names[a], s);
    }
    e->v[FT_EA_CUDNN_WGRAD_WRAPPER] = 1;
    if ((s = ft_env_str(e, "cudnn_wgrad_wrapper"))) {
        if (strcmp(s, "0") && strcmp(s, "1"))
            return ft_err_set(err, FT_EINVAL, "env cudnn_wgrad_wrapper: '%s' is not 0 or 1", s);
        e->v[FT_EA_CUDNN_WGRAD_WRAPPER] = s[0] == '1';
    }
    return FT_OK;
bad_cc:
    return ft_err_set(err, FT_EINVAL,
                      "env device_cc: '%s' is not a compute capability like \"10.0\"", s);
}
