/*
 * env.c - what the fusion checks read about the process TE ran in, and versions.
 *
 * - Versions: PEP 440 parsed and ordered as packaging.version does (the one place fusertrace
 *   compares versions: cudnn_frontend as TE's PkgVersion(...) >= PkgVersion(...) sees it, and
 *   te_version for the captured policy).
 * - The environment: the header's env object with --env overrides applied, and the header's
 *   world_size and rank, parsed once into typed values, each with where it came from (the
 *   capture, an override, or TE's default assumed because the capture is silent).
 *
 * Keys (docs/capture-format.md, "What the model reads"): device_cc ("10.0"; null: no CUDA
 * device), cudnn_frontend (a PEP 440 version; null: not installed), cublaslt ("13.4.0" or TE's
 * integer 130400), world_size and rank (else the header's fields), NVTE_CUTEDSL_FUSED_GROUPED_MLP
 * and NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP (Python int()), the cuDNN frontend wrappers
 * the grouped-MLP fusions import ("cudnn.grouped_gemm_glu_wrapper_sm100" ...: 1 importable,
 * 0 not; absent: assumed importable when the frontend version has them), and the NVTE_*
 * variables recipe defaults read. Values are strings, numbers or null.
 */
#include "tefuser_int.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- versions (PEP 440) ------------------------------------------------------------------- */
/* The grammar packaging.version accepts, read left to right without backtracking: every
 * optional part (pre, post, dev, local) first tries its optional separator and keyword and, when
 * they do not match, leaves the position where it was, which is what the anchored regular
 * expression of PEP 440's appendix does too. */
typedef struct vscan {
    const char *p;
} vscan;

static int is_sep(char c)
{
    return c == '.' || c == '-' || c == '_';
}

/* A run of digits as int64: 1 and *out, 0 when none, -1 when it overflows. */
static int scan_num(vscan *s, int64_t *out)
{
    if (!isdigit((unsigned char)*s->p)) return 0;
    int64_t v = 0;
    for (; isdigit((unsigned char)*s->p); s->p++) {
        int d = *s->p - '0';
        if (v > (INT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

/* Case-insensitive keyword at the position: its length, 0 when it is not there. */
static size_t kw_at(const char *p, const char *kw)
{
    size_t n = 0;
    for (; kw[n]; n++)
        if (tolower((unsigned char)p[n]) != kw[n]) return 0;
    return n;
}

/* [sep] one of kws [sep] [digits]: the keyword's index and *num (0 when implicit); -1 and the
 * position untouched when no keyword matches; -2 on overflow. */
static int scan_tagged(vscan *s, const char *const *kws, int64_t *num)
{
    const char *p = s->p;
    if (is_sep(*p)) p++;
    for (int k = 0; kws[k]; k++) {
        size_t n = kw_at(p, kws[k]);
        if (!n) continue;
        vscan t = {p + n};
        if (is_sep(*t.p)) t.p++; /* PEP 440 allows a separator here even without a number */
        int r = scan_num(&t, num);
        if (r < 0) return -2;
        if (!r) *num = 0;
        s->p = t.p;
        return k;
    }
    return -1;
}

int ft_version_parse(const char *str, ft_version *v)
{
    static const char *const pre_kw[] = {"alpha", "a", "beta", "b", "preview",
                                         "pre",   "c", "rc",   NULL};
    static const int8_t pre_kind[] = {0, 0, 1, 1, 2, 2, 2, 2};
    static const char *const post_kw[] = {"post", "rev", "r", NULL};
    static const char *const dev_kw[] = {"dev", NULL};
    memset(v, 0, sizeof *v);
    v->pre_kind = -1;
    v->post = v->dev = -1;
    if (!str) return FT_EINVAL;
    vscan s = {str};
    while (isspace((unsigned char)*s.p))
        s.p++;
    if (*s.p == 'v' || *s.p == 'V') s.p++;
    int64_t n;
    int r = scan_num(&s, &n);
    if (r <= 0) return r < 0 ? FT_ERANGE : FT_EINVAL;
    if (*s.p == '!') { /* epoch */
        v->epoch = n;
        s.p++;
        if ((r = scan_num(&s, &n)) <= 0) return r < 0 ? FT_ERANGE : FT_EINVAL;
    }
    v->release[v->n_release++] = n;
    while (*s.p == '.' && isdigit((unsigned char)s.p[1])) {
        s.p++;
        if (v->n_release == FT_VERSION_SEGMENTS) return FT_ERANGE;
        if (scan_num(&s, &v->release[v->n_release++]) < 0) return FT_ERANGE;
    }
    int k = scan_tagged(&s, pre_kw, &v->pre);
    if (k == -2) return FT_ERANGE;
    if (k >= 0) v->pre_kind = pre_kind[k];
    if (*s.p == '-' && isdigit((unsigned char)s.p[1])) { /* "-N": an implicit post release */
        s.p++;
        if (scan_num(&s, &v->post) < 0) return FT_ERANGE;
    } else if ((k = scan_tagged(&s, post_kw, &v->post)) == -2) {
        return FT_ERANGE;
    } else if (k < 0) {
        v->post = -1;
    }
    if ((k = scan_tagged(&s, dev_kw, &v->dev)) == -2) return FT_ERANGE;
    if (k < 0) v->dev = -1;
    if (*s.p == '+') { /* local label: alphanumeric segments, any separator becomes '.' */
        s.p++;
        size_t o = 0;
        for (;;) {
            const char *seg = s.p;
            while (isalnum((unsigned char)*s.p)) {
                if (o + 1 >= sizeof v->local) return FT_ERANGE;
                v->local[o++] = (char)tolower((unsigned char)*s.p++);
            }
            if (s.p == seg) return FT_EINVAL;
            if (!is_sep(*s.p) || !isalnum((unsigned char)s.p[1])) break;
            if (o + 1 >= sizeof v->local) return FT_ERANGE;
            v->local[o++] = '.';
            s.p++;
        }
        v->local[o] = '\0';
    }
    while (isspace((unsigned char)*s.p))
        s.p++;
    return *s.p ? FT_EINVAL : FT_OK;
}

static int cmp_i64(int64_t a, int64_t b)
{
    return (a > b) - (a < b);
}

/* One local segment: numeric ones sort after alphanumeric ones and compare as integers. */
static int cmp_local_seg(const char *a, size_t na, const char *b, size_t nb)
{
    int da = 1, db = 1;
    for (size_t i = 0; i < na; i++)
        da &= isdigit((unsigned char)a[i]) != 0;
    for (size_t i = 0; i < nb; i++)
        db &= isdigit((unsigned char)b[i]) != 0;
    if (da != db) return da ? 1 : -1;
    if (da) { /* compare as integers: skip leading zeros, then length, then digits */
        while (na > 1 && *a == '0')
            a++, na--;
        while (nb > 1 && *b == '0')
            b++, nb--;
        if (na != nb) return na < nb ? -1 : 1;
        int c = memcmp(a, b, na);
        return (c > 0) - (c < 0);
    }
    int c = memcmp(a, b, na < nb ? na : nb);
    if (c) return (c > 0) - (c < 0);
    return cmp_i64((int64_t)na, (int64_t)nb);
}

static int cmp_local(const char *a, const char *b)
{
    if (!*a || !*b) return (*a != 0) - (*b != 0); /* no local label sorts first */
    for (;;) {
        size_t na = strcspn(a, "."), nb = strcspn(b, ".");
        int c = cmp_local_seg(a, na, b, nb);
        if (c) return c;
        a += na;
        b += nb;
        if (!*a || !*b) return (*a != 0) - (*b != 0); /* a prefix sorts first */
        a++;
        b++;
    }
}

/* The pre-release key: a dev release of a final release sorts before its pre-releases, a final
 * or post release after them. */
static int64_t pre_key(const ft_version *v, int64_t *num)
{
    *num = v->pre;
    if (v->pre_kind >= 0) return v->pre_kind;
    *num = 0;
    return v->post < 0 && v->dev >= 0 ? -1 : 3;
}

int ft_version_cmp(const ft_version *a, const ft_version *b)
{
    int c = cmp_i64(a->epoch, b->epoch);
    if (c) return c;
    uint32_t na = a->n_release, nb = b->n_release;
    while (na > 1 && !a->release[na - 1])
        na--;
    while (nb > 1 && !b->release[nb - 1])
        nb--;
    for (uint32_t i = 0; i < na && i < nb; i++)
        if ((c = cmp_i64(a->release[i], b->release[i]))) return c;
    if ((c = cmp_i64(na, nb))) return c;
    int64_t pa, pb;
    int64_t ka = pre_key(a, &pa), kb = pre_key(b, &pb);
    if ((c = cmp_i64(ka, kb)) || (c = cmp_i64(pa, pb))) return c;
    if ((c = cmp_i64(a->post, b->post))) return c; /* -1: no post release sorts first */
    /* no dev release sorts last */
    if ((c = cmp_i64(a->dev < 0 ? INT64_MAX : a->dev, b->dev < 0 ? INT64_MAX : b->dev))) return c;
    return cmp_local(a->local, b->local);
}

int ft_version_cmp_str(const char *a, const char *b, int *cmp)
{
    ft_version va, vb;
    int rc = ft_version_parse(a, &va);
    if (!rc) rc = ft_version_parse(b, &vb);
    if (!rc) *cmp = ft_version_cmp(&va, &vb);
    return rc;
}

int ft_version_text(const ft_version *v, char *buf, size_t cap)
{
    static const char *const pre[] = {"a", "b", "rc"};
    ft_buf b = {0};
    int rc = FT_OK;
    if (v->epoch) rc = ft_buf_printf(&b, "%lld!", (long long)v->epoch);
    for (uint32_t i = 0; i < v->n_release && !rc; i++)
        rc = ft_buf_printf(&b, "%s%lld", i ? "." : "", (long long)v->release[i]);
    if (!rc && v->pre_kind >= 0 && v->pre_kind <= 2)
        rc = ft_buf_printf(&b, "%s%lld", pre[v->pre_kind], (long long)v->pre);
    if (!rc && v->post >= 0) rc = ft_buf_printf(&b, ".post%lld", (long long)v->post);
    if (!rc && v->dev >= 0) rc = ft_buf_printf(&b, ".dev%lld", (long long)v->dev);
    if (!rc && v->local[0]) rc = ft_buf_printf(&b, "+%s", v->local);
    if (!rc && b.len >= cap) rc = FT_ERANGE;
    if (!rc) {
        memcpy(buf, b.data, b.len);
        buf[b.len] = '\0';
    }
    ft_buf_free(&b);
    return rc;
}

/* A hash of what ft_version_cmp compares (equal versions hash equal), for the fusion key. */
static uint64_t version_hash(const ft_version *v)
{
    uint32_t n = v->n_release;
    while (n > 1 && !v->release[n - 1])
        n--;
    uint64_t h = ft_hash_mix(0x76657273u, (uint64_t)v->epoch);
    for (uint32_t i = 0; i < n; i++)
        h = ft_hash_mix(h, (uint64_t)v->release[i]);
    int64_t pn;
    h = ft_hash_mix(h, (uint64_t)pre_key(v, &pn));
    h = ft_hash_mix(ft_hash_mix(h, (uint64_t)pn), (uint64_t)v->post);
    h = ft_hash_mix(h, (uint64_t)v->dev);
    /* local labels: numeric segments by value */
    for (const char *p = v->local; *p;) {
        size_t k = strcspn(p, ".");
        int digits = 1;
        for (size_t i = 0; i < k; i++)
            digits &= isdigit((unsigned char)p[i]) != 0;
        const char *q = p;
        size_t kq = k;
        while (digits && kq > 1 && *q == '0')
            q++, kq--;
        h = ft_hash_mix(h, ft_hash64(q, kq) ^ (uint64_t)digits);
        p += k;
        if (*p) p++;
    }
    return h;
}

/* ---- environment -------------------------------------------------------------------------- */
static const char *const env_names[FT_EA_COUNT] = {
    [FT_EA_DEVICE_CC] = "device_cc",
    [FT_EA_CUDNN_FRONTEND] = "cudnn_frontend",
    [FT_EA_CUBLASLT] = "cublaslt",
    [FT_EA_WORLD_SIZE] = "world_size",
    [FT_EA_RANK] = "rank",
    [FT_EA_CUTEDSL_FUSED_GROUPED_MLP] = "NVTE_CUTEDSL_FUSED_GROUPED_MLP",
    [FT_EA_DISABLE_CUTEDSL_WGRAD] = "NVTE_DISABLE_CUTEDSL_WGRAD_FUSED_GROUPED_MLP",
    [FT_EA_WRAP_GLU] = "cudnn.grouped_gemm_glu_wrapper_sm100",
    [FT_EA_WRAP_DGLU] = "cudnn.grouped_gemm_dglu_wrapper_sm100",
    [FT_EA_WRAP_SRELU] = "cudnn.grouped_gemm_srelu_wrapper_sm100",
    [FT_EA_WRAP_DSRELU] = "cudnn.grouped_gemm_dsrelu_wrapper_sm100",
    [FT_EA_WRAP_QUANT] = "cudnn.grouped_gemm_quant_wrapper_sm100",
    [FT_EA_WRAP_WGRAD] = "cudnn.grouped_gemm_wgrad_wrapper_sm100",
};
/* Earlier fusertrace name of the wgrad wrapper key, still read when the new one is absent. */
static const char legacy_wgrad_key[] = "cudnn_wgrad_wrapper";

const char *ft_env_attr_name(ft_env_attr a)
{
    return (unsigned)a < FT_EA_COUNT ? env_names[a] : "?";
}

const char *ft_env_legacy_wgrad_key(void)
{
    return legacy_wgrad_key;
}

const char *ft_env_str(const ft_env *e, const char *key)
{
    if (!e || !e->obj) return NULL;
    const json_t *v = json_object_get(e->obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int ft_env_fe_at_least(const ft_env *e, const char *min)
{
    if (e->v[FT_EA_CUDNN_FRONTEND] == -1) return 0; /* not installed */
    ft_version m;
    if (ft_version_parse(min, &m)) return 0; /* programmer error: the thresholds are literals */
    return ft_version_cmp(&e->fe, &m) >= 0;
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

/* The text Python's repr() gives a float: the shortest digits that read back as d, in fixed
 * notation for decimal exponents -4..15 (10.0 -> "10.0", 1.27 -> "1.27"), else scientific. */
static void real_text(double d, char *buf, size_t cap)
{
    int p = 1;
    for (; p < 17; p++) {
        snprintf(buf, cap, "%.*e", p - 1, d);
        if (strtod(buf, NULL) == d) break;
    }
    int x = 0;
    snprintf(buf, cap, "%.*e", p - 1, d); /* the exponent of the rounded digits */
    const char *e = strchr(buf, 'e');
    if (e) x = (int)strtol(e + 1, NULL, 10);
    if (x < -4 || x >= 16) return;
    snprintf(buf, cap, "%.*f", p - 1 - x > 0 ? p - 1 - x : 0, d);
    if (!strchr(buf, '.')) { /* integral: keep a float's ".0", as Python prints it */
        size_t n = strlen(buf);
        if (n + 2 < cap) memcpy(buf + n, ".0", 3);
    }
}

/* Every value as its text (numbers as Python prints them, bools as 1/0), null kept as null: the
 * parsers below and the recipe defaults read text, as TE reads os.environ. */
static int normalise_values(json_t *obj, ft_err *err)
{
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val)
    {
        if (json_is_string(val) || json_is_null(val)) continue;
        char txt[64];
        if (json_is_integer(val))
            snprintf(txt, sizeof txt, "%lld", (long long)json_integer_value(val));
        else if (json_is_real(val) && isfinite(json_real_value(val)))
            real_text(json_real_value(val), txt, sizeof txt);
        else if (json_is_boolean(val))
            snprintf(txt, sizeof txt, "%d", json_is_true(val));
        else
            return ft_err_set(err, FT_EINVAL, "env %s: value is not a string, number or null", key);
        if (json_object_set_new(obj, key, json_string(txt)))
            return ft_err_set(err, FT_ENOMEM, "env %s: out of memory", key);
    }
    return FT_OK;
}

static int apply_overrides(ft_env *e, const ft_env_kv *ov, uint32_t n_ov, ft_err *err)
{
    for (uint32_t i = 0; i < n_ov; i++) {
        if (!ov[i].key || !*ov[i].key || !ov[i].value)
            return ft_err_set(err, FT_EINVAL, "--env override %u: empty key or no value", i);
        int rc = 0;
        if (!*ov[i].value)
            json_object_del(e->obj, ov[i].key); /* absent afterwards, whether or not it was */
        else if (!strcmp(ov[i].value, "null"))
            rc = json_object_set_new(e->obj, ov[i].key, json_null());
        else
            rc = json_object_set_new(e->obj, ov[i].key, json_string(ov[i].value));
        if (rc) return ft_err_set(err, FT_ENOMEM, "--env %s: out of memory", ov[i].key);
        for (int a = 0; a < FT_EA_COUNT; a++)
            if (!strcmp(ov[i].key, env_names[a])) e->ov[a] = 1;
        if (!strcmp(ov[i].key, legacy_wgrad_key)) e->ov[FT_EA_WRAP_WGRAD] = 1;
    }
    return FT_OK;
}

/* Where key stands: FT_ENV_ABSENT, or set (null or text) with *txt the text or NULL for null. */
static int env_get(const ft_env *e, const char *key, const char **txt)
{
    const json_t *v = json_object_get(e->obj, key);
    *txt = json_is_string(v) ? json_string_value(v) : NULL;
    return v ? 1 : 0;
}

static int parse_cc(const char *s, int64_t *out)
{
    char *end;
    long mj = strtol(s, &end, 10), mn = 0;
    if (end == s || mj < 0 || mj > 99) return FT_EINVAL;
    if (*end == '.') {
        const char *q = end + 1;
        mn = strtol(q, &end, 10);
        if (end == q || mn < 0 || mn > 9) return FT_EINVAL;
    }
    if (*end) return FT_EINVAL;
    *out = mj * 10 + mn;
    return FT_OK;
}

/* cuBLASLt as TE compares it: tex.get_cublasLt_version(), major*10000 + minor*100 + patch. */
static int parse_cublaslt(const char *s, int64_t *out)
{
    int64_t iv;
    if (!strchr(s, '.')) {
        if (ft_parse_i64(s, &iv) || iv < 0) return FT_EINVAL;
        *out = iv;
        return FT_OK;
    }
    int64_t part[3] = {0, 0, 0};
    const char *p = s;
    for (int k = 0; k < 3; k++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 99 || !isdigit((unsigned char)*p)) return FT_EINVAL;
        part[k] = v;
        p = end;
        if (!*p) break;
        if (*p != '.' || k == 2) return FT_EINVAL;
        p++;
    }
    *out = part[0] * 10000 + part[1] * 100 + part[2];
    return FT_OK;
}

/* An import check: 1/0 (also "true"/"false"); null: the import fails. */
static int parse_import(const char *s, int64_t *out)
{
    if (!s || !strcmp(s, "0") || !strcmp(s, "false") || !strcmp(s, "False")) {
        *out = 0;
        return FT_OK;
    }
    if (!strcmp(s, "1") || !strcmp(s, "true") || !strcmp(s, "True")) {
        *out = 1;
        return FT_OK;
    }
    return FT_EINVAL;
}

/* world_size and rank: the env (override or captured), else the header's field. A captured env
 * value that contradicts the header's field is an error: the capture says two things. */
static int parse_world(ft_env *e, const ft_model_capture *cap, ft_env_attr a, ft_err *err)
{
    const char *name = env_names[a];
    const int has_hdr = a == FT_EA_WORLD_SIZE ? cap->has_world_size : cap->has_rank;
    const int64_t hdr = a == FT_EA_WORLD_SIZE ? cap->world_size : cap->rank;
    const int64_t lo = a == FT_EA_WORLD_SIZE ? 1 : 0;
    const char *s;
    e->v[a] = lo;
    if (env_get(e, name, &s)) {
        e->src[a] = e->ov[a] ? FT_ENV_OVERRIDE : FT_ENV_CAPTURED;
        if (!s) return FT_OK; /* null: torch.distributed not initialized */
        if (parse_py_int(s, &e->v[a]) || e->v[a] < lo)
            return ft_err_set(err, FT_EINVAL, "env %s: '%s' is not an integer >= %lld", name, s,
                              (long long)lo);
        if (!e->ov[a] && has_hdr && hdr != e->v[a])
            return ft_err_set(err, FT_EINVAL,
                              "trace header: env %s %lld contradicts the header's %s %lld", name,
                              (long long)e->v[a], name, (long long)hdr);
        return FT_OK;
    }
    if (has_hdr && !e->ov[a]) {
        if (hdr < lo)
            return ft_err_set(err, FT_EINVAL, "trace header: %s %lld is below %lld", name,
                              (long long)hdr, (long long)lo);
        e->v[a] = hdr;
        e->src[a] = FT_ENV_CAPTURED;
    }
    return FT_OK;
}

int ft_env_parse(const ft_model_capture *cap, const ft_env_kv *ov, uint32_t n_ov, ft_env *e,
                 ft_err *err)
{
    static const ft_model_capture none = {0};
    if (!cap) cap = &none;
    memset(e, 0, sizeof *e);
    json_error_t je;
    const char *env_json = cap->env_json;
    e->obj = env_json && *env_json ? json_loads(env_json, 0, &je) : json_object();
    if (!e->obj)
        return ft_err_set(err, FT_EINVAL, "trace header env: not valid JSON (%s)", je.text);
    if (!json_is_object(e->obj))
        return ft_err_set(err, FT_EINVAL, "trace header env: not a JSON object");
    e->captured_empty = json_object_size(e->obj) == 0;
    int rc = normalise_values(e->obj, err);
    if (!rc) rc = apply_overrides(e, ov, n_ov, err);
    if (rc) return rc;
    for (int a = 0; a < FT_EA_COUNT; a++) {
        const char *dummy;
        e->src[a] = env_get(e, env_names[a], &dummy)
                        ? (e->ov[a] ? FT_ENV_OVERRIDE : FT_ENV_CAPTURED)
                        : FT_ENV_ASSUMED;
    }

    const char *s;
    /* device_cc "M.m" -> M*10+m; null or absent: no device */
    if (env_get(e, "device_cc", &s) && s && parse_cc(s, &e->v[FT_EA_DEVICE_CC]))
        return ft_err_set(err, FT_EINVAL,
                          "env device_cc: '%s' is not a compute capability like \"10.0\"", s);
    /* cudnn_frontend: PkgVersion(version("nvidia-cudnn-frontend")); null or absent: not found */
    e->v[FT_EA_CUDNN_FRONTEND] = -1;
    if (env_get(e, "cudnn_frontend", &s) && s) {
        if ((rc = ft_version_parse(s, &e->fe)))
            return ft_err_set(err, FT_EINVAL,
                              "env cudnn_frontend: '%s' is not a PEP 440 version%s (TE's "
                              "packaging.version raises)",
                              s, rc == FT_ERANGE ? " fusertrace can hold" : "");
        e->v[FT_EA_CUDNN_FRONTEND] = (int64_t)(version_hash(&e->fe) >> 1);
    }
    if (env_get(e, "cublaslt", &s) && s && parse_cublaslt(s, &e->v[FT_EA_CUBLASLT]))
        return ft_err_set(err, FT_EINVAL,
                          "env cublaslt: '%s' is not a version like \"13.4.0\" or 130400", s);
    if ((rc = parse_world(e, cap, FT_EA_WORLD_SIZE, err)) ||
        (rc = parse_world(e, cap, FT_EA_RANK, err)))
        return rc;
    static const ft_env_attr int_flags[] = {FT_EA_CUTEDSL_FUSED_GROUPED_MLP,
                                            FT_EA_DISABLE_CUTEDSL_WGRAD};
    for (size_t i = 0; i < FT_ARRAY_LEN(int_flags); i++) {
        ft_env_attr a = int_flags[i];
        /* TE evaluates int(os.environ.get(NAME, "0")) at import: a non-integer fails the import */
        if (env_get(e, env_names[a], &s) && s && parse_py_int(s, &e->v[a]))
            return ft_err_set(err, FT_EINVAL, "env %s: '%s' is not an integer (TE's int() raises)",
                              env_names[a], s);
    }
    /* the wrappers: captured import results, else importable when the frontend has them */
    if (e->src[FT_EA_WRAP_WGRAD] == FT_ENV_ASSUMED && env_get(e, legacy_wgrad_key, &s)) {
        if (parse_import(s, &e->v[FT_EA_WRAP_WGRAD]))
            return ft_err_set(err, FT_EINVAL, "env %s: '%s' is not 0 or 1", legacy_wgrad_key, s);
        e->src[FT_EA_WRAP_WGRAD] = e->ov[FT_EA_WRAP_WGRAD] ? FT_ENV_OVERRIDE : FT_ENV_CAPTURED;
        e->legacy_wgrad = 1;
    }
    for (int a = FT_EA_WRAP_GLU; a <= FT_EA_WRAP_WGRAD; a++) {
        if (a == FT_EA_WRAP_WGRAD && e->legacy_wgrad) continue;
        if (e->src[a] == FT_ENV_ASSUMED) {
            const int srelu = a == FT_EA_WRAP_SRELU || a == FT_EA_WRAP_DSRELU;
            e->v[a] = ft_env_fe_at_least(e, srelu ? "1.24.0" : "1.23.0");
            continue;
        }
        env_get(e, env_names[a], &s);
        if (parse_import(s, &e->v[a]))
            return ft_err_set(err, FT_EINVAL, "env %s: '%s' is not 0 or 1", env_names[a], s);
    }
    return FT_OK;
}
