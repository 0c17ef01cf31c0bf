/*
 * capture.c - what the capture says about the TE process the model stands for, beyond the env
 * (docs/fuser-model.md, "What the capture decides"):
 *
 * - the registry: TE's registered fusion functions in order (the header's te_fusions, written by
 *   the hook from OperationFuser's class-level lists) become the per-pass order of rule rows the
 *   model applies. Without it the model falls back to TE 2.20's own registration (every row in
 *   table order, the grouped-MLP rows when their is_supported() check passes under the env). An
 *   --env override of a key a row's registration check reads re-decides that row;
 * - the notes the reports print: fields the model read but the capture lacked (and what it
 *   assumed), registered fusions it does not know, and registrations that disagree with its own
 *   checks.
 *
 * Limits: a registered function is known by its full dotted name (module.qualname, as the hook
 * writes it) or its qualname alone; functools.partial objects and lambdas are unknown fusions.
 */
#include "tefuser_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const pass_keys[FT_PASS_COUNT] = {"forward_backward", "forward", "backward"};

const char *ft_pass_key(ft_pass p)
{
    return (unsigned)p < FT_PASS_COUNT ? pass_keys[p] : "?";
}

/* ---- notes -------------------------------------------------------------------------------- */
int ft_model_note_add(ft_model *m, ft_model_note_kind kind, const char *field, const char *pass,
                      const char *fmt, ...)
{
    if (m->n_notes == m->cap_notes) {
        uint32_t cap = m->cap_notes ? 2 * m->cap_notes : 8;
        note_m *nn = ft_realloc(m->notes, cap * sizeof *nn);
        if (!nn) return FT_ENOMEM;
        m->notes = nn;
        m->cap_notes = cap;
    }
    note_m *n = &m->notes[m->n_notes++];
    memset(n, 0, sizeof *n);
    ft_strlcpy(n->field, field, sizeof n->field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->text, sizeof n->text, fmt, ap);
    va_end(ap);
    n->pub.kind = kind;
    n->pub.pass = pass;
    return FT_OK;
}

uint32_t ft_model_n_notes(const ft_model *m)
{
    return m->n_notes;
}

const ft_model_note *ft_model_note_at(const ft_model *m, uint32_t i)
{
    if (i >= m->n_notes) return NULL;
    note_m *n = &m->notes[i]; /* pointers fixed up here: the array moves while it grows */
    n->pub.field = n->field;
    n->pub.text = n->text;
    return &n->pub;
}

/* ---- the registry ------------------------------------------------------------------------- */
/* The rule row TE's function name stands for, -1 if none. */
static int rule_by_name(const char *name)
{
    for (uint32_t ri = 0; ri < ft_n_rules; ri++)
        if (!strcmp(name, ft_rules[ri].te_name) || !strcmp(name, ft_rules[ri].func)) return (int)ri;
    return -1;
}

/* Whether an --env override touched a key the row's registration check reads. */
static int registration_overridden(const ft_model *m, const ft_rule *r)
{
    if (!r->registered) return 0;
    for (unsigned k = 0; k < r->n_reads; k++)
        if (r->reads[k].scope == FT_SCOPE_ENV && m->env.ov[r->reads[k].attr]) return 1;
    return 0;
}

static int order_push(ft_model *m, ft_pass p, int16_t ri, int front)
{
    if (m->n_order[p] == FT_MAX_ORDER) return FT_ERANGE;
    int16_t *o = m->order[p];
    if (front) {
        memmove(o + 1, o, m->n_order[p] * sizeof *o);
        o[0] = ri;
    } else {
        o[m->n_order[p]] = ri;
    }
    m->n_order[p]++;
    return FT_OK;
}

static void order_drop(ft_model *m, ft_pass p, int16_t ri)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < m->n_order[p]; i++)
        if (m->order[p][i] != ri) m->order[p][k++] = m->order[p][i];
    m->n_order[p] = (uint8_t)k;
}

/* Read te_fusions: known names into the order, unknown ones into notes. */
static int registry_read(ft_model *m, const json_t *reg, ft_err *err)
{
    if (!json_is_object(reg))
        return ft_err_set(err, FT_EINVAL, "trace header te_fusions: not a JSON object");
    for (int p = 0; p < FT_PASS_COUNT; p++) {
        const json_t *list = json_object_get(reg, pass_keys[p]);
        if (!json_is_array(list))
            return ft_err_set(err, FT_EINVAL,
                              "trace header te_fusions.%s: %s (an array of function names)",
                              pass_keys[p], list ? "not an array" : "missing");
        for (size_t i = 0; i < json_array_size(list); i++) {
            const json_t *e = json_array_get(list, i);
            if (!json_is_string(e) || !*json_string_value(e))
                return ft_err_set(err, FT_EINVAL,
                                  "trace header te_fusions.%s[%zu]: not a function name",
                                  pass_keys[p], i);
            const char *name = json_string_value(e);
            int ri = rule_by_name(name);
            int rc = FT_OK;
            if (ri < 0) {
                rc = ft_model_note_add(m, FT_NOTE_UNKNOWN_FUSION, name, pass_keys[p],
                                       "the model does not know fusion %s that TE registered; "
                                       "plans of fusers it could match may differ",
                                       name);
                if (rc) return ft_err_set(err, rc, "te_fusions: out of memory");
                continue;
            }
            if (ft_rules[ri].pass != p) {
                rc = ft_model_note_add(
                    m, FT_NOTE_REGISTRY, name, pass_keys[p],
                    "TE registered %s in the %s pass, where TE itself registers it in the %s "
                    "pass; the model applies it where it was registered",
                    name, pass_keys[p], pass_keys[ft_rules[ri].pass]);
                if (rc) return ft_err_set(err, rc, "te_fusions: out of memory");
            }
            if (order_push(m, (ft_pass)p, (int16_t)ri, 0))
                return ft_err_set(err, FT_ERANGE,
                                  "trace header te_fusions.%s: more than %d fusions the model "
                                  "knows",
                                  pass_keys[p], FT_MAX_ORDER);
        }
    }
    return FT_OK;
}

static int in_order(const ft_model *m, int16_t ri)
{
    for (int p = 0; p < FT_PASS_COUNT; p++)
        for (uint32_t i = 0; i < m->n_order[p]; i++)
            if (m->order[p][i] == ri) return 1;
    return 0;
}

/* A row with an import-time check: the captured registry decides, unless an --env override
 * touched what the check reads; say where they disagree. */
static int registry_check_row(ft_model *m, int16_t ri, ft_err *err)
{
    const ft_rule *r = &ft_rules[ri];
    char why[256];
    const int own = r->registered(&m->env), captured = in_order(m, ri);
    int rc = FT_OK;
    if (registration_overridden(m, r)) {
        if (own == captured) return FT_OK;
        if (own) {
            rc = order_push(m, (ft_pass)r->pass, ri, 1); /* TE prepends the grouped-MLP ones */
            if (rc) return ft_err_set(err, rc, "te_fusions: too many fusions");
        } else {
            for (int p = 0; p < FT_PASS_COUNT; p++)
                order_drop(m, (ft_pass)p, ri);
        }
        if (!own) ft_rule_unregistered_reason((uint32_t)ri, &m->env, why, sizeof why);
        rc = ft_model_note_add(m, FT_NOTE_REGISTRY, r->te_name, pass_keys[r->pass],
                               "--env decides %s's registration: %s, where the captured run %s",
                               r->func, own ? "registered" : why,
                               captured ? "registered it" : "did not register it");
    } else if (own != captured) {
        if (!own) ft_rule_unregistered_reason((uint32_t)ri, &m->env, why, sizeof why);
        rc = ft_model_note_add(
            m, FT_NOTE_REGISTRY, r->te_name, pass_keys[r->pass],
            "TE %s %s, though the model's own import-time check under the capture's env says %s; "
            "the captured registry is used",
            captured ? "registered" : "did not register", r->func,
            own ? "it would be registered" : why);
    }
    return rc ? ft_err_set(err, rc, "te_fusions: out of memory") : FT_OK;
}

int ft_model_registry_init(ft_model *m, const ft_model_capture *cap, ft_err *err)
{
    memset(m->n_order, 0, sizeof m->n_order);
    json_t *extra = NULL;
    const json_t *reg = NULL;
    if (cap && cap->extra_json && *cap->extra_json) {
        json_error_t je;
        extra = json_loads(cap->extra_json, 0, &je);
        if (!json_is_object(extra)) {
            json_decref(extra);
            return ft_err_set(err, FT_EINVAL, "trace header: extra fields are not a JSON object");
        }
        reg = json_object_get(extra, "te_fusions");
    }
    int rc = FT_OK;
    m->registry = reg != NULL;
    if (reg) {
        rc = registry_read(m, reg, err);
        for (uint32_t ri = 0; ri < ft_n_rules && !rc; ri++)
            if (ft_rules[ri].registered) rc = registry_check_row(m, (int16_t)ri, err);
    } else {
        /* TE 2.20's own registration: ops/fused/__init__.py, then grouped_mlp.py (prepended) */
        for (uint32_t ri = 0; ri < ft_n_rules && !rc; ri++) {
            const ft_rule *r = &ft_rules[ri];
            if (r->registered && !r->registered(&m->env)) continue;
            rc = order_push(m, (ft_pass)r->pass, (int16_t)ri, 0);
        }
        if (rc) rc = ft_err_set(err, rc, "model: rule table too large");
    }
    json_decref(extra);
    if (rc) return rc;
    memset(m->registered, 0, sizeof m->registered);
    memset(m->rule_pass, -1, sizeof m->rule_pass);
    for (int p = FT_PASS_COUNT - 1; p >= 0; p--)
        for (uint32_t i = 0; i < m->n_order[p]; i++) {
            m->registered[m->order[p][i]] = 1;
            m->rule_pass[m->order[p][i]] = (int8_t)p;
        }
    return FT_OK;
}

/* ---- what the model had to assume --------------------------------------------------------- */
/* TE's default the model takes for an absent env key, in words. */
const char *ft_env_default_text(ft_env_attr a)
{
    switch (a) {
    case FT_EA_DEVICE_CC:
        return "no CUDA device (compute capability 0.0)";
    case FT_EA_CUDNN_FRONTEND:
        return "nvidia-cudnn-frontend not installed";
    case FT_EA_CUBLASLT:
        return "cuBLASLt version 0";
    case FT_EA_WORLD_SIZE:
        return "world size 1 (torch.distributed not initialized)";
    case FT_EA_RANK:
        return "rank 0";
    case FT_EA_CUTEDSL_FUSED_GROUPED_MLP:
    case FT_EA_DISABLE_CUTEDSL_WGRAD:
        return "unset (TE's default \"0\")";
    default:
        return "importable exactly when the cudnn_frontend version has it";
    }
}

/* Env keys only an import-time registration check reads (the gates read the others). */
static int registration_only(uint8_t a)
{
    return a == FT_EA_CUTEDSL_FUSED_GROUPED_MLP || a == FT_EA_DEVICE_CC ||
           a == FT_EA_DISABLE_CUTEDSL_WGRAD || (a >= FT_EA_WRAP_GLU && a <= FT_EA_WRAP_WGRAD);
}

/* The env keys the model reads for this trace: the reads of every registered row applicable to
 * a fuser, the registration checks it evaluated itself, and the unfused GroupedLinear path. */
static uint32_t env_reads(const ft_model *m)
{
    uint32_t mask = 0;
    int any_gl = 0, any_rule = 0;
    for (uint32_t u = 0; u < m->n_lists; u++) {
        const oplist_m *fz = &m->lists[u];
        for (uint32_t i = 0; i < fz->n_ops; i++)
            any_gl |= fz->ops[i].type == FT_OP_GROUPED_LINEAR;
        for (uint32_t ri = 0; ri < ft_n_rules; ri++) {
            const ft_rule *r = &ft_rules[ri];
            if (!ft_rule_applicable(r, fz->ops, fz->n_ops)) continue;
            any_rule = 1;
            const int self_decided =
                r->registered && (!m->registry || registration_overridden(m, r));
            if (!m->registered[ri] && !self_decided) continue;
            for (unsigned k = 0; k < r->n_reads; k++)
                if (r->reads[k].scope == FT_SCOPE_ENV &&
                    (self_decided || !registration_only(r->reads[k].attr)))
                    mask |= 1u << r->reads[k].attr;
        }
    }
    if (any_gl) mask |= 1u << FT_EA_DEVICE_CC | 1u << FT_EA_CUBLASLT;
    if (!any_rule && !any_gl) mask = 0;
    return mask;
}

static int note_absent_op_attrs(ft_model *m, ft_op_attr a, uint64_t types, const char *what)
{
    uint32_t n = 0;
    for (uint32_t u = 0; u < m->n_lists; u++) /* every fuser of a list counts */
        for (uint32_t i = 0; i < m->lists[u].n_ops; i++) {
            const ft_op *op = &m->lists[u].ops[i];
            if (!(types & FT_OPB(op->type)) || (op->given >> a & 1)) continue;
            if (a == FT_OA_TP_SIZE && !op->v_raw_tp_mode) continue; /* no mode: size 1 */
            n += m->lists[u].n_fusers;
        }
    if (!n) return FT_OK;
    char field[64];
    snprintf(field, sizeof field, "op attribute %s", ft_op_attr_name(a));
    return ft_model_note_add(m, FT_NOTE_ASSUMED, field, NULL,
                             "%u %s do not record %s: taken as the world size %lld (TE's default "
                             "process group)",
                             n, what, ft_op_attr_name(a), (long long)m->env.v[FT_EA_WORLD_SIZE]);
}

int ft_model_notes_init(ft_model *m, ft_err *err)
{
    int rc = FT_OK;
    const uint32_t reads = env_reads(m);
    if (!m->registry && reads)
        rc = ft_model_note_add(m, FT_NOTE_ASSUMED, "te_fusions", NULL,
                               "the capture does not record TE's registered fusions: the model "
                               "assumed TE 2.20's, with the grouped-MLP ones registered when its "
                               "own is_supported() check passes under the env");
    /* the wrappers in one note: they are recorded together or not at all */
    char wrappers[256] = "";
    for (int a = FT_EA_WRAP_GLU; a <= FT_EA_WRAP_WGRAD; a++)
        if ((reads >> a & 1) && m->env.src[a] == FT_ENV_ASSUMED) {
            size_t n = strlen(wrappers);
            snprintf(wrappers + n, sizeof wrappers - n, "%s%s", n ? ", " : "",
                     ft_env_attr_name((ft_env_attr)a) + strlen("cudnn."));
        }
    if (!rc && wrappers[0])
        rc = ft_model_note_add(m, FT_NOTE_ASSUMED, "env.cudnn.*", NULL,
                               "env does not record whether the cuDNN frontend wrappers import "
                               "(%s): assumed importable exactly when the cudnn_frontend "
                               "version has them",
                               wrappers);
    for (int a = 0; a < FT_EA_COUNT && !rc; a++) {
        if (a >= FT_EA_WRAP_GLU && a <= FT_EA_WRAP_WGRAD) continue;
        if (!(reads >> a & 1) || m->env.src[a] != FT_ENV_ASSUMED) continue;
        char field[80];
        snprintf(field, sizeof field, "env.%s", ft_env_attr_name((ft_env_attr)a));
        rc = ft_model_note_add(m, FT_NOTE_ASSUMED, field, NULL, "env %s is absent%s: assumed %s",
                               ft_env_attr_name((ft_env_attr)a),
                               a == FT_EA_WORLD_SIZE ? " (and the header has no world_size)" : "",
                               ft_env_default_text((ft_env_attr)a));
    }
    if (!rc)
        rc = note_absent_op_attrs(m, FT_OA_TP_SIZE, FT_OPS_BL,
                                  "BasicLinear ops with a tensor-parallel mode");
    if (!rc)
        rc = note_absent_op_attrs(m, FT_OA_PROCESS_GROUP_SIZE, FT_OPS_COLLECTIVES,
                                  "collective ops (AllGather, AllReduce, ReduceScatter)");
    return rc ? ft_err_set(err, rc, "model notes: out of memory") : FT_OK;
}
