/*
 * policy_spec.c - plan-cache policies as declarative specs (docs/policies.md): the vocabulary,
 * the parser of "NAME=KEY;store=STORE;reset=RESET;build=reset" and of a JSON file of such
 * policies, the user policies' rows in the registry (after the built-ins, addressable by name
 * like them), and the interpreted loop that replays them.
 *
 * The loop is the engine's policy_loop (replayer_int.h) with user = 1: a user policy's key and
 * reset rule are read from integer ids precomputed here per recipe (the per-recipe fields,
 * interned as one tuple per recipe) and, for fields that vary per fuser or call (fusion, device,
 * ops), interned per call behind a one-entry front cache per fuser; no string is touched per
 * call. The built-ins keep their specialised loops (policy.c) and carry their spec on their row;
 * tests/test_policy_spec.c proves that each spec decides every call as its built-in does.
 *
 * Limits: at most FT_MAX_POLICIES policies in the registry, built-ins included, so every policy
 * defined can be replayed at once; user policies are defined before any replay starts and live
 * until ft_policy_forget_user (the registry is process-wide and not locked: define, then
 * replay). A key or reset rule holds at most FT_SPEC_MAX_TERMS fields; names are at most
 * FT_SPEC_NAME_MAX - 1 bytes. An env:KEY field reads the trace's env, which TE reads once at
 * import: it is the same for every call of a trace and so changes no decision (it states a
 * dependency). Per engine a user policy takes 8 bytes per recipe, and with fusion, device or ops
 * fields 16 bytes per fuser plus its interned combinations (at most 2^24). The shared store is
 * the replayer's (store.c, FT_STORE_SHARED); ops reads the same op-list classes it is kept by.
 */
#include "replayer_int.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* ---- the vocabulary ------------------------------------------------------------------------ */
static const struct {
    const char *name; /* as written; "attr:" and "env:" take a name after the colon */
    uint8_t field;
    const char *what;
} fields[] = {
    {"type", SF_TYPE, "the recipe type (NoneType without a recipe)"},
    {"object", SF_OBJECT, "the recipe object's identity"},
    {"hash", SF_HASH, "the hash of the recipe type and every attribute (all dataclass fields)"},
    {"attr:", SF_ATTR, "one recipe attribute by name, defaults filled (absent: its own value)"},
    {"fusion", SF_FUSION, "the recipe, op and env attributes the fusion gates read"},
    {"f", SF_F, "the backward boundary (first op requiring backward)"},
    {"bo", SF_BO, "backward_override, NVTE_BACKWARD_OVERRIDE where the recipe leaves it unset"},
    {"hist", SF_HIST, "DelayedScaling's amax_history_len (0 for other types)"},
    {"device", SF_DEVICE, "the call's CUDA device index"},
    {"env:", SF_ENV, "one key of the trace's env (the same for every call of a trace)"},
    {"ops", SF_OPS, "the op-list signature (fusers with equal op lists share it)"},
};

#define KEY_WORDS   "type, object, hash, attr:NAME, fusion, f, bo, hist, device, env:KEY, ops"
#define STORE_WORDS "none, single, dict, lru:N, shared, shared-lru:N"
#define RESET_WORDS                                                                                \
    "always, key, te:pre3410 (type+f+bo+hist), te:3410 and te:3410-commit1 (type+bo+hist), or "    \
    "fields joined by + (" KEY_WORDS ")"
#define SPEC_FORM "NAME=KEY[;store=STORE][;reset=RESET][;build=key|reset]"

const char *ft_policy_vocabulary(void)
{
    return "a policy spec is " SPEC_FORM "\n"
           "  KEY   fields joined by +, or none: " KEY_WORDS "\n"
           "  STORE " STORE_WORDS " (default dict)\n"
           "  RESET " RESET_WORDS " (default te:3410, TE's rule since PR 3410)\n"
           "  build=reset builds on every reset (default build=key: only when the key misses)\n"
           "docs/policies.md describes every word";
}

/* The recipe attributes any recipe type has (ft_recipe_field_at), for attr:NAME. */
static int attr_known(const char *name)
{
    for (int t = 1; t < FT_RT_COUNT; t++) {
        ft_recipe_field f;
        for (uint32_t i = 0; !ft_recipe_field_at((ft_recipe_type)t, i, &f); i++)
            if (!strcmp(f.name, name)) return 1;
    }
    return 0;
}

/* Edit distance of a and b, capped at 3 (for "did you mean"). */
static int distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63 || (la > lb ? la - lb : lb - la) > 2) return 3;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            d[i][j] = v;
        }
    return d[la][lb] < 3 ? d[la][lb] : 3;
}

/* The recipe attributes, distinct, in table order (cap bytes of "a, b, ..."); with near, only
 * those within edit distance 2 of it. */
void ft_policy_attr_names(char *buf, size_t cap, const char *near)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int t = 1; t < FT_RT_COUNT; t++) {
        ft_recipe_field f;
        for (uint32_t i = 0; !ft_recipe_field_at((ft_recipe_type)t, i, &f); i++) {
            int seen = near && distance(near, f.name) > 2;
            for (int u = 1; u <= t && !seen; u++) {
                ft_recipe_field g;
                const uint32_t end = u < t ? ft_recipe_n_fields((ft_recipe_type)u) : i;
                for (uint32_t k = 0; !seen && k < end; k++)
                    seen = !ft_recipe_field_at((ft_recipe_type)u, k, &g) && !strcmp(g.name, f.name);
            }
            if (!seen && off < cap)
                off += (size_t)snprintf(buf + off, cap - off, "%s%s", off ? ", " : "", f.name);
        }
    }
}

/* ---- parsing ------------------------------------------------------------------------------- */
static void trim(const char **s, size_t *len)
{
    while (*len && (**s == ' ' || **s == '\t'))
        (*s)++, (*len)--;
    while (*len && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t'))
        (*len)--;
}

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
}

/* One field of a key or reset rule. */
static int parse_term(const char *s, size_t len, const char *what, spec_term *t, ft_err *err)
{
    trim(&s, &len);
    for (size_t i = 0; i < FT_ARRAY_LEN(fields); i++) {
        const size_t fl = strlen(fields[i].name);
        const int named = fields[i].name[fl - 1] == ':';
        if (named ? len < fl || strncmp(s, fields[i].name, fl)
                  : len != fl || strncmp(s, fields[i].name, fl))
            continue;
        t->field = fields[i].field;
        t->name[0] = '\0';
        if (!named) return FT_OK;
        const char *n = s + fl;
        const size_t nl = len - fl;
        if (!nl || nl >= sizeof t->name)
            return ft_err_set(err, FT_EINVAL, "%s field '%.*s': %s wants a name of 1 to %zu bytes",
                              what, (int)len, s, fields[i].name, sizeof t->name - 1);
        for (size_t k = 0; k < nl; k++)
            if (!is_name_char(n[k]))
                return ft_err_set(err, FT_EINVAL, "%s field '%.*s': '%c' cannot be in a name", what,
                                  (int)len, s, n[k]);
        memcpy(t->name, n, nl);
        t->name[nl] = '\0';
        if (t->field == SF_ATTR && !attr_known(t->name)) {
            char near[256];
            ft_policy_attr_names(near, sizeof near, t->name);
            return ft_err_set(err, FT_EINVAL,
                              "%s field '%.*s': no recipe type has an attribute '%s'%s%s%s "
                              "(`fusertrace replay --help` lists them all)",
                              what, (int)len, s, t->name, near[0] ? " (did you mean " : "", near,
                              near[0] ? "?)" : "");
        }
        return FT_OK;
    }
    return ft_err_set(err, FT_EINVAL, "unknown %s field '%.*s'; %s fields: " KEY_WORDS, what,
                      (int)len, s, what);
}

/* Fields joined by '+' (or "none" for a key). */
static int parse_fields(const char *s, size_t len, const char *what, spec_fields *out, ft_err *err)
{
    memset(out, 0, sizeof *out);
    trim(&s, &len);
    if (!len)
        return ft_err_set(err, FT_EINVAL, "empty %s; %s fields: " KEY_WORDS " (or none)", what,
                          what);
    if (len == 4 && !strncmp(s, "none", 4)) return FT_OK;
    for (const char *p = s, *end = s + len; p <= end;) {
        const char *plus = memchr(p, '+', (size_t)(end - p));
        const size_t tl = plus ? (size_t)(plus - p) : (size_t)(end - p);
        spec_term t;
        if (out->n == FT_SPEC_MAX_TERMS)
            return ft_err_set(err, FT_EINVAL, "%s '%.*s': more than %d fields", what, (int)len, s,
                              FT_SPEC_MAX_TERMS);
        int rc = parse_term(p, tl, what, &t, err);
        if (rc) return rc;
        for (uint32_t k = 0; k < out->n; k++)
            if (out->t[k].field == t.field && !strcmp(out->t[k].name, t.name))
                return ft_err_set(err, FT_EINVAL, "%s '%.*s': field '%.*s' given twice", what,
                                  (int)len, s, (int)tl, p);
        out->t[out->n++] = t;
        out->bits |= 1u << t.field;
        if (!plus) break;
        p = plus + 1;
    }
    return FT_OK;
}

static void fields_text(const spec_fields *f, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    if (!f->n) snprintf(buf, cap, "none");
    for (uint32_t k = 0; k < f->n && off < cap; k++) {
        const spec_term *t = &f->t[k];
        const char *w = "?";
        for (size_t i = 0; i < FT_ARRAY_LEN(fields); i++)
            if (fields[i].field == t->field) w = fields[i].name;
        off += (size_t)snprintf(buf + off, cap - off, "%s%s%s", k ? "+" : "", w, t->name);
    }
}

/* TE's reset rule at each ref, as fields. */
static const struct {
    const char *word, *fields;
} te_resets[] = {{"te:pre3410", "type+f+bo+hist"},
                 {"te:3410", "type+bo+hist"},
                 {"te:3410-commit1", "type+bo+hist"}};

static int parse_reset(const char *s, size_t len, policy_spec *out, char *word, size_t cap,
                       ft_err *err)
{
    trim(&s, &len);
    snprintf(word, cap, "%.*s", (int)len, s);
    if (len == 6 && !strncmp(s, "always", 6)) {
        out->reset_rule = SPEC_RESET_ALWAYS;
        memset(&out->reset, 0, sizeof out->reset);
        return FT_OK;
    }
    out->reset_rule = SPEC_RESET_FIELDS;
    for (size_t i = 0; i < FT_ARRAY_LEN(te_resets); i++)
        if (strlen(te_resets[i].word) == len && !strncmp(s, te_resets[i].word, len))
            return parse_fields(te_resets[i].fields, strlen(te_resets[i].fields), "reset",
                                &out->reset, err);
    if (len == 3 && !strncmp(s, "key", 3)) {
        out->reset = out->key; /* resolved again after the whole spec is read */
        return FT_OK;
    }
    if (len >= 3 && !strncmp(s, "te:", 3))
        return ft_err_set(err, FT_EINVAL, "unknown TE ref in reset '%.*s'; resets: " RESET_WORDS,
                          (int)len, s);
    int rc = parse_fields(s, len, "reset", &out->reset, err);
    if (rc == FT_EINVAL && !strncmp(err->msg, "unknown reset field", 19)) {
        char detail[FT_ERR_MAX];
        ft_strlcpy(detail, err->msg, sizeof detail);
        return ft_err_set(err, FT_EINVAL,
                          "%s; resets: always, key, te:pre3410, te:3410, "
                          "te:3410-commit1, or such fields joined by +",
                          detail);
    }
    if (!rc && !out->reset.n)
        return ft_err_set(err, FT_EINVAL,
                          "reset 'none': say always, or name the fields whose "
                          "change resets; resets: " RESET_WORDS);
    if (!rc) fields_text(&out->reset, word, cap); /* canonical: "type+bo", whatever the spaces */
    return rc;
}

static int parse_store(const char *s, size_t len, policy_spec *out, ft_err *err)
{
    trim(&s, &len);
    out->capacity = 0;
    if (len == 4 && !strncmp(s, "none", 4)) {
        out->store = FT_STORE_NONE;
    } else if (len == 6 && !strncmp(s, "single", 6)) {
        out->store = FT_STORE_SINGLE;
    } else if (len == 4 && !strncmp(s, "dict", 4)) {
        out->store = FT_STORE_DICT;
    } else if (len == 6 && !strncmp(s, "shared", 6)) {
        out->store = FT_STORE_SHARED;
    } else if ((len > 4 && !strncmp(s, "lru:", 4)) ||
               (len > 11 && !strncmp(s, "shared-lru:", 11))) {
        const size_t at = s[0] == 'l' ? 4 : 11;
        char num[24];
        int64_t v = 0;
        if (len - at >= sizeof num ||
            (snprintf(num, sizeof num, "%.*s", (int)(len - at), s + at), ft_parse_i64(num, &v)) ||
            v < 1 || v > UINT32_MAX)
            return ft_err_set(err, FT_EINVAL,
                              "store '%.*s': %s wants N, the plans kept per %s, from 1 to %u",
                              (int)len, s, at == 4 ? "lru:N" : "shared-lru:N",
                              at == 4 ? "fuser" : "op list", UINT32_MAX);
        out->store = at == 4 ? FT_STORE_DICT : FT_STORE_SHARED;
        out->capacity = (uint32_t)v;
    } else {
        return ft_err_set(err, FT_EINVAL, "unknown store '%.*s'; stores: " STORE_WORDS, (int)len,
                          s);
    }
    return FT_OK;
}

/* The canonical text of a parsed spec: "KEY;store=S;reset=R[;build=reset]". */
static void spec_text(const policy_spec *p, const char *reset_word, char *buf, size_t cap)
{
    char key[FT_SPEC_TEXT_MAX / 2], store[32];
    fields_text(&p->key, key, sizeof key);
    if (p->store == FT_STORE_NONE)
        snprintf(store, sizeof store, "none");
    else if (p->store == FT_STORE_SINGLE)
        snprintf(store, sizeof store, "single");
    else if (p->store == FT_STORE_SHARED)
        snprintf(store, sizeof store, p->capacity ? "shared-lru:%u" : "shared", p->capacity);
    else if (p->capacity)
        snprintf(store, sizeof store, "lru:%u", p->capacity);
    else
        snprintf(store, sizeof store, "dict");
    snprintf(buf, cap, "%s;store=%s;reset=%s%s", key, store, reset_word,
             p->build_on_reset ? ";build=reset" : "");
}

/* The spec after "NAME=": clauses separated by ';'. canon (may be NULL) gets its canonical text. */
static int parse_clauses(const char *text, size_t len, policy_spec *out, char *canon, size_t cap,
                         ft_err *err)
{
    memset(out, 0, sizeof *out);
    out->store = FT_STORE_DICT;
    char reset_word[FT_SPEC_TEXT_MAX / 2] = "te:3410";
    int have_key = 0, have_store = 0, have_reset = 0, have_build = 0, reset_is_key = 0, rc = FT_OK;
    parse_fields("type+bo+hist", 12, "reset", &out->reset, err); /* the default, te:3410 */
    for (const char *p = text, *end = text + len; p <= end && !rc;) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *c = p;
        size_t cl = semi ? (size_t)(semi - p) : (size_t)(end - p);
        p = semi ? semi + 1 : end + 1;
        trim(&c, &cl);
        if (!cl) {
            if (semi) return ft_err_set(err, FT_EINVAL, "empty clause (two ';' in a row)");
            continue;
        }
        const char *eq = memchr(c, '=', cl);
        const size_t kl = eq ? (size_t)(eq - c) : 0;
        const char *v = eq ? eq + 1 : c;
        const size_t vl = eq ? cl - kl - 1 : cl;
        const char *k = c;
        size_t kl2 = kl;
        trim(&k, &kl2);
        int *seen;
        if (!eq || (kl2 == 3 && !strncmp(k, "key", 3))) {
            seen = &have_key;
            rc = parse_fields(v, vl, "key", &out->key, err);
        } else if (kl2 == 5 && !strncmp(k, "store", 5)) {
            seen = &have_store;
            rc = parse_store(v, vl, out, err);
        } else if (kl2 == 5 && !strncmp(k, "reset", 5)) {
            seen = &have_reset;
            rc = parse_reset(v, vl, out, reset_word, sizeof reset_word, err);
            reset_is_key = !strcmp(reset_word, "key");
        } else if (kl2 == 5 && !strncmp(k, "build", 5)) {
            const char *b = v;
            size_t bl = vl;
            trim(&b, &bl);
            seen = &have_build;
            if (bl == 5 && !strncmp(b, "reset", 5))
                out->build_on_reset = 1;
            else if (bl == 3 && !strncmp(b, "key", 3))
                out->build_on_reset = 0;
            else
                rc = ft_err_set(err, FT_EINVAL,
                                "build '%.*s': wants key (build when the key misses) or reset "
                                "(also build on every reset)",
                                (int)bl, b);
        } else {
            return ft_err_set(err, FT_EINVAL,
                              "unknown clause '%.*s'; clauses: KEY or key=KEY, store=STORE, "
                              "reset=RESET, build=key|reset",
                              (int)cl, c);
        }
        if (!rc && (*seen)++)
            return ft_err_set(err, FT_EINVAL, "clause '%.*s': %s given twice", (int)cl, c,
                              seen == &have_key     ? "the key"
                              : seen == &have_store ? "store"
                              : seen == &have_reset ? "reset"
                                                    : "build");
    }
    if (rc) return rc;
    if (!have_key)
        return ft_err_set(err, FT_EINVAL,
                          "no key: the first clause is the key (fields joined by "
                          "+, or none): " KEY_WORDS);
    if (reset_is_key) {
        out->reset = out->key;
        if (!out->reset.n)
            return ft_err_set(err, FT_EINVAL,
                              "reset=key with key none: say reset=always, or "
                              "name the fields whose change resets");
    }
    if (canon) spec_text(out, reset_word, canon, cap);
    return FT_OK;
}

int spec_parse(const char *text, size_t len, policy_spec *out, ft_err *err)
{
    return parse_clauses(text, len, out, NULL, 0, err);
}

/* ---- the user policies' rows ----------------------------------------------------------------- */
typedef struct user_policy {
    policy_def def;
    policy_spec spec;
    char name[FT_SPEC_NAME_MAX];
    char text[FT_SPEC_TEXT_MAX];              /* canonical spec without "NAME=" */
    char summary[2 * FT_SPEC_TEXT_MAX + 128]; /* key, reset fields and the reset word: bounded */
} user_policy;

static user_policy users[FT_MAX_POLICIES];
static uint32_t n_users;

uint32_t spec_n_user(void)
{
    return n_users;
}

const policy_def *spec_user_def(uint32_t i)
{
    return i < n_users ? &users[i].def : NULL;
}

void ft_policy_forget_user(void)
{
    memset(users, 0, sizeof users);
    n_users = 0;
}

static int loop_user(ft_replay *r, uint32_t p, const ft_batch *b, ft_err *err);

/* "user-defined: key (K); reset when (R) changes [(te:3410)]; dict" */
static void user_summary(user_policy *u, const char *reset_word)
{
    char key[FT_SPEC_TEXT_MAX / 2], reset[FT_SPEC_TEXT_MAX / 2], alias[FT_SPEC_TEXT_MAX / 2 + 4];
    fields_text(&u->spec.key, key, sizeof key);
    fields_text(&u->spec.reset, reset, sizeof reset);
    alias[0] = '\0';
    if (strcmp(reset_word, reset)) snprintf(alias, sizeof alias, " (%s)", reset_word);
    const char *store = u->spec.store == FT_STORE_NONE     ? "no store"
                        : u->spec.store == FT_STORE_SINGLE ? "single slot"
                        : u->spec.store == FT_STORE_SHARED
                            ? (u->spec.capacity ? "shared by op list, LRU of" : "shared by op list")
                        : u->spec.capacity ? "LRU of"
                                           : "dict";
    char cap[16] = "";
    if (u->spec.capacity) snprintf(cap, sizeof cap, " %u", u->spec.capacity);
    const char *bor = u->spec.build_on_reset ? "+build" : "";
    if (u->spec.reset_rule == SPEC_RESET_ALWAYS)
        snprintf(u->summary, sizeof u->summary,
                 "user-defined: key (%s); reset%s on every call; %s%s", key, bor, store, cap);
    else
        snprintf(u->summary, sizeof u->summary,
                 "user-defined: key (%s); reset%s when (%s) changes%s; %s%s", key, bor, reset,
                 alias, store, cap);
}

int ft_policy_define(const char *def, uint32_t *idx, ft_err *err)
{
    const char *eq = strchr(def, '=');
    if (!eq)
        return ft_err_set(err, FT_EINVAL, "policy spec '%s' has no '=': %s", def,
                          ft_policy_vocabulary());
    const char *name = def;
    size_t nl = (size_t)(eq - def);
    trim(&name, &nl);
    if (!nl || nl >= FT_SPEC_NAME_MAX)
        return ft_err_set(err, FT_EINVAL,
                          "policy spec '%s': the name before '=' must be 1 to %d "
                          "bytes",
                          def, FT_SPEC_NAME_MAX - 1);
    for (size_t k = 0; k < nl; k++)
        if (!is_name_char(name[k]))
            return ft_err_set(err, FT_EINVAL,
                              "policy spec '%s': '%c' cannot be in a policy name "
                              "(letters, digits, '-', '_', '.')",
                              def, name[k]);
    if (nl == 3 && !strncmp(name, "all", 3))
        return ft_err_set(err, FT_EINVAL, "policy spec '%s': 'all' is not a policy name", def);
    user_policy u;
    memset(&u, 0, sizeof u);
    memcpy(u.name, name, nl);
    char reset_word[FT_SPEC_TEXT_MAX / 2];
    int rc = parse_clauses(eq + 1, strlen(eq + 1), &u.spec, u.text, sizeof u.text, err);
    if (rc) {
        char detail[FT_ERR_MAX];
        ft_strlcpy(detail, err->msg, sizeof detail);
        return ft_err_set(err, rc, "policy spec '%s': %s", def, detail);
    }
    const char *r = strstr(u.text, ";reset=");
    snprintf(reset_word, sizeof reset_word, "%s", r ? r + 7 : "");
    reset_word[strcspn(reset_word, ";")] = '\0';
    uint32_t k;
    if (!ft_policy_find(u.name, &k, NULL)) {
        if (k < policy_n_builtin())
            return ft_err_set(err, FT_EINVAL,
                              "policy spec '%s': '%s' is a built-in policy; name "
                              "yours otherwise",
                              def, u.name);
        const user_policy *o = &users[k - policy_n_builtin()];
        if (strcmp(o->text, u.text))
            return ft_err_set(err, FT_EINVAL, "policy spec '%s': '%s' is already defined as '%s'",
                              def, u.name, o->text);
        *idx = k; /* the same definition again */
        return FT_OK;
    }
    if (policy_n_builtin() + n_users >= FT_MAX_POLICIES)
        return ft_err_set(err, FT_ERANGE,
                          "policy spec '%s': at most %u user policies (%d in "
                          "all with the %u built-ins)",
                          def, FT_MAX_POLICIES - policy_n_builtin(), FT_MAX_POLICIES,
                          policy_n_builtin());
    user_policy *d = &users[n_users];
    *d = u;
    user_summary(d, reset_word);
    d->def = (policy_def){.name = d->name,
                          .summary = d->summary,
                          .note = NULL,
                          .label = "user-defined",
                          .spec = d->text,
                          .te_ref = -1,
                          .store = (ft_store_kind)d->spec.store,
                          .needs_fa = ((d->spec.key.bits | d->spec.reset.bits) >> SF_FUSION) & 1,
                          .user = &d->spec,
                          .loop_fn = loop_user};
    *idx = policy_n_builtin() + n_users++;
    return FT_OK;
}

/* ---- policies from JSON -----------------------------------------------------------------------
 */
/* A member that is a string, or an array of strings joined by sep: into buf. */
static int json_words(json_t *v, const char *sep, char *buf, size_t cap)
{
    if (json_is_string(v)) return snprintf(buf, cap, "%s", json_string_value(v)) < (int)cap;
    if (!json_is_array(v)) return 0;
    size_t i, off = 0;
    json_t *w;
    buf[0] = '\0';
    json_array_foreach(v, i, w)
    {
        if (!json_is_string(w) || off >= cap) return 0;
        off += (size_t)snprintf(buf + off, cap - off, "%s%s", i ? sep : "", json_string_value(w));
    }
    return off < cap && i > 0;
}

/* One policy object: {"name", "spec"} or {"name", "key", "store", "reset", "build"}. */
static int define_entry(json_t *e, const char *where, uint32_t *idx, ft_err *err)
{
    static const char *const members[] = {"name", "spec", "key", "store", "reset", "build"};
    char def[FT_SPEC_TEXT_MAX], part[FT_SPEC_TEXT_MAX];
    if (!json_is_object(e))
        return ft_err_set(err, FT_EINVAL,
                          "%s: a policy is an object {\"name\": ..., \"key\": ..., "
                          "...} or {\"name\": ..., \"spec\": ...}",
                          where);
    const char *k;
    json_t *v;
    json_object_foreach(e, k, v)
    {
        int known = 0;
        for (size_t i = 0; i < FT_ARRAY_LEN(members); i++)
            known |= !strcmp(k, members[i]);
        if (!known)
            return ft_err_set(err, FT_EINVAL,
                              "%s: unknown member \"%s\"; members: name, and "
                              "spec or key, store, reset, build",
                              where, k);
    }
    json_t *name = json_object_get(e, "name");
    if (!json_is_string(name))
        return ft_err_set(err, FT_EINVAL, "%s: \"name\" is missing or not a string", where);
    size_t off = (size_t)snprintf(def, sizeof def, "%s=", json_string_value(name));
    json_t *spec = json_object_get(e, "spec");
    if (spec) {
        if (json_object_size(e) != 2 || !json_is_string(spec))
            return ft_err_set(err, FT_EINVAL,
                              "%s: \"spec\" is a string, and goes alone with "
                              "\"name\"",
                              where);
        off += (size_t)snprintf(def + off, off < sizeof def ? sizeof def - off : 0, "%s",
                                json_string_value(spec));
    } else {
        static const char *const clauses[] = {"key", "store", "reset", "build"};
        for (size_t i = 0; i < FT_ARRAY_LEN(clauses); i++) {
            json_t *c = json_object_get(e, clauses[i]);
            if (!c) continue;
            if (!json_words(c, "+", part, sizeof part))
                return ft_err_set(err, FT_EINVAL, "%s: \"%s\" wants a string%s", where, clauses[i],
                                  i == 0 || i == 2 ? " or an array of field names" : "");
            off += (size_t)snprintf(def + off, off < sizeof def ? sizeof def - off : 0, "%s%s=%s",
                                    i ? ";" : "", clauses[i], part);
        }
        if (!json_object_get(e, "key"))
            return ft_err_set(err, FT_EINVAL, "%s: \"key\" is missing (fields, or \"none\")",
                              where);
    }
    if (off >= sizeof def)
        return ft_err_set(err, FT_EINVAL, "%s: longer than %zu bytes", where, sizeof def - 1);
    int rc = ft_policy_define(def, idx, err);
    if (rc) {
        char detail[FT_ERR_MAX];
        ft_strlcpy(detail, err->msg, sizeof detail);
        ft_err_set(err, rc, "%s: %s", where, detail);
    }
    return rc;
}

int ft_policy_define_json(const char *text, size_t len, const char *source, uint32_t *idx,
                          uint32_t *n, ft_err *err)
{
    *n = 0;
    json_error_t je;
    json_t *doc = json_loadb(text, len, 0, &je);
    if (!doc)
        return ft_err_set(err, FT_EINVAL, "%s:%d: not valid JSON (%s)", source, je.line, je.text);
    json_t *list = json_is_array(doc) ? doc : json_object_get(doc, "policies");
    int rc = FT_OK;
    if (!json_is_array(list) || (!json_is_array(doc) && json_object_size(doc) != 1)) {
        rc = ft_err_set(err, FT_EINVAL, "%s: wants {\"policies\": [...]} or an array of policies",
                        source);
    } else if (!json_array_size(list)) {
        rc = ft_err_set(err, FT_EINVAL, "%s: no policy in it", source);
    }
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        if (rc) break;
        char where[FT_SPEC_NAME_MAX + 1200];
        const char *nm = json_string_value(json_object_get(e, "name"));
        snprintf(where, sizeof where, "%s: policies[%zu]%s%s%s", source, i, nm ? " (" : "",
                 nm ? nm : "", nm ? ")" : "");
        if (*n >= FT_MAX_POLICIES)
            rc = ft_err_set(err, FT_ERANGE, "%s: more than %d policies", source, FT_MAX_POLICIES);
        else
            rc = define_entry(e, where, &idx[*n], err);
        if (!rc) (*n)++;
    }
    json_decref(doc);
    return rc;
}

/* ---- a user policy in an engine ------------------------------------------------------------ */
/* Byte strings to dense ids in first-seen order: a hash map in front, the strings kept to check
 * every hit (a 64-bit collision falls back to a scan, so ids are exact). */
typedef struct interner {
    ft_hmap map; /* hash -> id */
    ft_buf bytes;
    size_t *off; /* [n + 1] string id is bytes[off[id] .. off[id + 1]) */
    uint32_t n, cap;
} interner;

/* String k of in equals data[len] (an empty one holds no bytes, and bytes.data may be NULL). */
static int interned_is(const interner *in, uint32_t k, const void *data, size_t len)
{
    return in->off[k + 1] - in->off[k] == len &&
           (!len || !memcmp(in->bytes.data + in->off[k], data, len));
}

static int intern(interner *in, const void *data, size_t len, uint32_t *id)
{
    const uint64_t h = ft_hash64(data, len);
    uint32_t got = ft_hmap_get(&in->map, h);
    if (got != UINT32_MAX && interned_is(in, got, data, len)) {
        *id = got;
        return FT_OK;
    }
    if (got != UINT32_MAX) /* another string with the same hash: look at every one */
        for (uint32_t k = 0; k < in->n; k++)
            if (interned_is(in, k, data, len)) {
                *id = k;
                return FT_OK;
            }
    if (in->n + 1 >= in->cap) {
        uint32_t ncap = in->cap ? in->cap * 2 : 64;
        size_t *no = ft_realloc(in->off, (size_t)ncap * sizeof *no);
        if (!no) return FT_ENOMEM;
        in->off = no;
        in->cap = ncap;
    }
    if (!in->n) in->off[0] = 0;
    int rc = ft_buf_append(&in->bytes, data, len);
    if (!rc && got == UINT32_MAX) rc = ft_hmap_put(&in->map, h, in->n);
    if (rc) return rc;
    in->off[in->n + 1] = in->bytes.len;
    *id = in->n++;
    return FT_OK;
}

static void interner_free(interner *in)
{
    ft_hmap_free(&in->map);
    ft_buf_free(&in->bytes);
    ft_free(in->off);
}

/* The canonical JSON value of attribute name in a recipe's canonical text
 * ("Type{a=V,b=V,+c=V}", tefuser/recipe.c), or NULL when the recipe has no such attribute. */
static const char *canon_attr(const char *canon, const char *name, size_t *len)
{
    const char *p = canon ? strchr(canon, '{') : NULL;
    if (!p) return NULL;
    p++;
    const size_t nl = strlen(name);
    while (*p && *p != '}') {
        if (*p == '+') p++;
        const char *eq = strchr(p, '=');
        if (!eq) return NULL;
        const char *v = eq + 1, *q = v;
        int depth = 0;
        while (*q && (depth || (*q != ',' && *q != '}'))) {
            if (*q == '"') {
                for (q++; *q && *q != '"'; q++)
                    if (*q == '\\' && q[1]) q++;
            } else if (*q == '{' || *q == '[') {
                depth++;
            } else if (*q == '}' || *q == ']') {
                depth--;
            }
            if (*q) q++;
        }
        if ((size_t)(eq - p) == nl && !strncmp(p, name, nl)) {
            *len = (size_t)(q - v);
            return v;
        }
        p = *q == ',' ? q + 1 : q;
    }
    return NULL;
}

/* The tuple of a recipe's per-recipe fields (env:KEY is constant in a trace: left out). */
static int recipe_tuple(const ft_replay *r, int32_t recipe, const spec_fields *f, ft_buf *b)
{
    const rinfo *ri = &r->ri[recipe + 1];
    b->len = 0;
    int rc = FT_OK;
    for (uint32_t k = 0; k < f->n && !rc; k++) {
        const spec_term *t = &f->t[k];
        int64_t v;
        switch (t->field) {
        case SF_TYPE:
            v = ri->type;
            break;
        case SF_OBJECT:
            v = ri->obj_id;
            break;
        case SF_HASH:
            v = ri->hash_id;
            break;
        case SF_BO:
            v = ri->bo;
            break;
        case SF_HIST:
            v = ri->hist;
            break;
        case SF_ATTR: {
            size_t len = 0;
            const char *val = canon_attr(ft_model_recipe_canon(r->model, recipe), t->name, &len);
            const uint32_t n = val ? (uint32_t)len : UINT32_MAX; /* absent: its own value */
            rc = ft_buf_append(b, &n, sizeof n);
            if (!rc && val) rc = ft_buf_append(b, val, len);
            continue;
        }
        default:
            continue; /* per fuser or per call, or env */
        }
        uint8_t tag = t->field;
        rc = ft_buf_append(b, &tag, 1);
        if (!rc) rc = ft_buf_append(b, &v, sizeof v);
    }
    return rc;
}

static int recipe_ids(ft_replay *r, const spec_fields *f, int32_t **out)
{
    interner in = {0};
    ft_buf b = {0};
    int rc = FT_OK;
    *out = ft_malloc((size_t)(r->n_recipes + 1) * sizeof **out);
    if (!*out) return FT_ENOMEM;
    for (int32_t i = -1; i < (int32_t)r->n_recipes && !rc; i++) {
        uint32_t id = 0;
        rc = recipe_tuple(r, i, f, &b);
        if (!rc) rc = intern(&in, b.data ? (const void *)b.data : "", b.len, &id);
        (*out)[i + 1] = (int32_t)id;
    }
    ft_buf_free(&b);
    interner_free(&in);
    return rc;
}

int user_run_init(ft_replay *r, policy_run *pr, const ft_replay_opts *opts, ft_err *err)
{
    const policy_spec *sp = pr->def->user;
    user_run *u = &pr->u;
    const uint32_t kb = sp->key.bits, rb = sp->reset_rule == SPEC_RESET_FIELDS ? sp->reset.bits : 0;
    pr->store_kind = sp->store;
    pr->build_on_reset = sp->build_on_reset;
    pr->store.capacity = sp->store != FT_STORE_DICT && sp->store != FT_STORE_SHARED ? 0
                         : sp->capacity                                             ? sp->capacity
                                        : opts->capacity;
    u->key_f = (kb >> SF_F) & 1;
    u->reset_f = (rb >> SF_F) & 1;
    u->reset_always = sp->reset_rule == SPEC_RESET_ALWAYS;
    u->key_fa = (kb >> SF_FUSION) & 1;
    u->key_dev = (kb >> SF_DEVICE) & 1;
    u->key_ops = (kb >> SF_OPS) & 1;
    u->reset_fa = (rb >> SF_FUSION) & 1;
    u->reset_dev = (rb >> SF_DEVICE) & 1;
    u->reset_ops = (rb >> SF_OPS) & 1;
    u->percall = u->key_fa | u->key_dev | u->key_ops | u->reset_fa | u->reset_dev | u->reset_ops;
    /* a key of fusion and f alone, with a per-recipe reset rule, needs no interning: its id is
     * the oracle's fusion-attrs id (the built-in fusion-attrs key) */
    const uint32_t recipe_bits = (1u << SF_TYPE) | (1u << SF_OBJECT) | (1u << SF_HASH) |
                                 (1u << SF_ATTR) | (1u << SF_BO) | (1u << SF_HIST);
    if (u->key_fa && !(kb & recipe_bits) && !u->key_dev && !u->key_ops && !u->reset_fa &&
        !u->reset_dev && !u->reset_ops)
        u->percall = 0;
    int rc = recipe_ids(r, &sp->key, &u->rk);
    if (!rc) rc = recipe_ids(r, &sp->reset, &u->rr);
    if (!rc && u->percall) {
        u->cache = ft_malloc((size_t)(r->n_fusers ? r->n_fusers : 1) * sizeof *u->cache);
        if (!u->cache) rc = FT_ENOMEM;
        for (uint32_t k = 0; !rc && k < r->n_fusers; k++)
            u->cache[k] = (user_ids){.recipe = -2};
    }
    if (rc) return ft_err_set(err, rc, "policy %s: %s", pr->def->name, ft_strerror(rc));
    return FT_OK;
}

void user_run_free(policy_run *pr)
{
    user_run *u = &pr->u;
    ft_free(u->rk);
    ft_free(u->rr);
    ft_free(u->cache);
    for (int k = 0; k < 2; k++) {
        ft_hmap_free(&u->kmap[k]);
        ft_hmap_free(&u->rmap[k]);
    }
    memset(u, 0, sizeof *u);
}

/* Dense id of packed through m; ids stay below 2^24 (the key layout, replayer_int.h). */
static int combo(ft_hmap *m, uint64_t packed, uint32_t *id)
{
    uint32_t got = ft_hmap_get(m, packed);
    if (got == UINT32_MAX) {
        if (m->n >= (1u << FT_KEY_ID_BITS) - 1) return FT_EUNSUPPORTED;
        got = m->n;
        int rc = ft_hmap_put(m, packed, got);
        if (rc) return rc;
    }
    *id = got;
    return FT_OK;
}

/* The per-recipe id a combined with fusion (fa), device (dev) and op list (ops) as asked. */
static int combine(ft_hmap m[2], uint32_t a, int with_fa, int32_t fa, int with_dev, int32_t dev,
                   int with_ops, uint32_t ops, uint32_t *out)
{
    int rc = FT_OK;
    if (with_fa) rc = combo(&m[0], (uint64_t)a << 32 | (uint32_t)fa, &a);
    if (!rc && (with_dev || with_ops)) {
        const uint64_t d = with_dev ? (uint64_t)(uint16_t)(dev + 1) : 0, o = with_ops ? ops : 0;
        rc = combo(&m[1], (uint64_t)a << 40 | d << 24 | o, &a);
    }
    *out = a;
    return rc;
}

int user_ids_slow(ft_replay *r, policy_run *pr, const pcall *c, int32_t dev, user_ids *out)
{
    user_run *u = &pr->u;
    if (dev < -1 || dev >= 65535)
        return FT_EUNSUPPORTED; /* device ids beyond 16 bits: not a CUDA device index */
    const uint32_t ops = (u->key_ops | u->reset_ops) ? r->cls[c->fuser] : 0; /* op-list class */
    uint32_t kid, rid;
    int rc = combine(u->kmap, (uint32_t)u->rk[c->recipe + 1], u->key_fa, c->fa_id, u->key_dev, dev,
                     u->key_ops, ops, &kid);
    if (!rc)
        rc = combine(u->rmap, (uint32_t)u->rr[c->recipe + 1], u->reset_fa, c->fa_id, u->reset_dev,
                     dev, u->reset_ops, ops, &rid);
    if (rc) return rc;
    *out = (user_ids){.recipe = c->recipe, .dev = dev, .kid = kid, .rid = (int32_t)rid};
    return FT_OK;
}

/* ---- the interpreted loop -------------------------------------------------------------------- */
/* Never called: a user policy's loop reads its key and reset rule from its run (user = 1). */
static int no_reset(pstate *s, const rinfo *ri, const pcall *c)
{
    (void)s, (void)ri, (void)c;
    return 1;
}

static uint64_t no_key(const rinfo *ri, const pcall *c)
{
    (void)ri, (void)c;
    return 0;
}

/* Specialised by store kind (a constant in each branch), view recording and filter. */
#define USER_LOOP(store_)                                                                          \
    do {                                                                                           \
        if (rec && filt) return policy_loop(r, p, b, err, no_reset, no_key, store_, bor, 1, 1, 1); \
        if (rec) return policy_loop(r, p, b, err, no_reset, no_key, store_, bor, 1, 0, 1);         \
        if (filt) return policy_loop(r, p, b, err, no_reset, no_key, store_, bor, 0, 1, 1);        \
        return policy_loop(r, p, b, err, no_reset, no_key, store_, bor, 0, 0, 1);                  \
    } while (0)

static int loop_user(ft_replay *r, uint32_t p, const ft_batch *b, ft_err *err)
{
    const int rec = r->rec_on, filt = r->filt, bor = r->pol[p].build_on_reset;
    const int store = r->pol[p].store_kind;
    if (store == FT_STORE_NONE) USER_LOOP(FT_STORE_NONE);
    if (store == FT_STORE_SINGLE) USER_LOOP(FT_STORE_SINGLE);
    if (store == FT_STORE_SHARED) USER_LOOP(FT_STORE_SHARED);
    USER_LOOP(FT_STORE_DICT);
}
