/*
 * qstate.c - the one quantizer-state identity (docs/fuser-model.md, "Quantizer state"): what
 * reset_recipe_state leaves in a fuser's quantizers, when two states quantize alike, the hash
 * that interns them, and which quantizers a state and recipe mean. Whoever compares or interns
 * states calls these; nobody restates them.
 */
#include "tefuser_int.h"

#include <string.h>

void ft_qstate_init(ft_qstate *q)
{
    memset(q, 0, sizeof *q);
    q->cls = -1;
}

static void qstate_build(ft_qstate *q, const ft_recipe_model *r)
{
    ft_qstate_init(q);
    q->cls = (int8_t)r->type;
    q->fp8_format = r->fp8_format;
    q->qhash = r->qhash;
    switch (r->type) {
    case FT_RT_NVFP4:
        q->rht = r->q_rht;
        q->sr = r->q_sr;
        q->twod = r->q_2d;
        q->row_scaled = r->row_scaled;
        q->four_over_six = r->four_over_six;
        break;
    case FT_RT_MXFP8:
        q->twod = r->enable_2d;
        break;
    case FT_RT_DELAYED:
        q->hist_len = r->amax_history_len;
        break;
    default:
        break;
    }
}

/* BasicOperation.reset_recipe_state for the fuser's quantized ops, as one state:
 * - None: metas and quantizers cleared;
 * - no quantizers yet, or the stored RecipeState's recipe is not an instance of the new type:
 *   rebuilt from the new recipe;
 * - same class: only the recipe reference is updated; DelayedScaling resizes amax_history and
 *   re-makes its quantizers from the stored RecipeState, whose fp8 dtype was fixed at creation
 *   (so only the history length follows the new recipe); every other flag stays. */
void ft_qstate_reset(ft_qstate *q, const ft_recipe_model *r)
{
    if (r->type == FT_RT_NONE) {
        ft_qstate_init(q);
        return;
    }
    if (q->cls < 0 || q->cls != (int8_t)r->type) {
        qstate_build(q, r);
        return;
    }
    if (r->type == FT_RT_DELAYED) q->hist_len = r->amax_history_len;
}

int ft_qstate_equal(const ft_qstate *a, const ft_qstate *b)
{
    if (a->cls != b->cls) return 0;
    if (a->cls < 0) return 1;
    return a->rht == b->rht && a->sr == b->sr && a->twod == b->twod &&
           a->row_scaled == b->row_scaled && a->four_over_six == b->four_over_six &&
           a->fp8_format == b->fp8_format && a->hist_len == b->hist_len && a->qhash == b->qhash;
}

void ft_model_reset(const ft_model *m, ft_qstate *q, int32_t recipe)
{
    ft_qstate_reset(q, &ft_model_recipe_int(m, recipe)->pub);
}

uint64_t ft_qstate_hash(const ft_qstate *q)
{
    uint64_t h = ft_hash_mix(0x7173u, (uint64_t)(uint8_t)q->cls);
    if (q->cls < 0) return h;
    h = ft_hash_mix(h, (uint64_t)q->rht | (uint64_t)q->sr << 8 | (uint64_t)q->twod << 16 |
                           (uint64_t)q->row_scaled << 24 | (uint64_t)q->four_over_six << 32 |
                           (uint64_t)q->fp8_format << 40);
    h = ft_hash_mix(h, (uint64_t)q->hist_len);
    return ft_hash_mix(h, q->qhash);
}

void ft_model_fresh_qstate(const ft_model *m, int32_t recipe, ft_qstate *q)
{
    ft_qstate_init(q);
    ft_model_reset(m, q, recipe);
}

void ft_model_quantizers(const ft_model *m, int32_t recipe, const ft_qstate *q, ft_quantizers *out)
{
    static const ft_qkind kinds[FT_RT_COUNT] = {
        [FT_RT_NONE] = FT_QK_NONE,           [FT_RT_DELAYED] = FT_QK_FP8_DELAYED,
        [FT_RT_CURRENT] = FT_QK_FP8_CURRENT, [FT_RT_MXFP8] = FT_QK_MXFP8,
        [FT_RT_BLOCK] = FT_QK_FP8_BLOCK,     [FT_RT_NVFP4] = FT_QK_NVFP4,
        [FT_RT_CUSTOM] = FT_QK_NONE};
    memset(out, 0, sizeof *out);
    const ft_recipe_model *r = ft_model_recipe(m, recipe);
    const int built = q && q->cls >= 0;
    /* Format.E4M3 (0): E4M3 everywhere; HYBRID (1): E5M2 gradients; E5M2 (2): E5M2 everywhere */
    const int fmt8 = built ? q->fp8_format : (r ? r->fp8_format : 0);
    out->fwd_e5m2 = fmt8 == 2;
    out->bwd_e5m2 = fmt8 >= 1;
    if (!r || r->type == FT_RT_NONE) return; /* outside autocast: no quantization */
    const int cls = built ? q->cls : (int)r->type;
    out->kind = cls < FT_RT_COUNT ? kinds[cls] : FT_QK_NONE;
    if (out->kind == FT_QK_NVFP4 && q) {
        out->rht = q->rht;
        out->sr = q->sr;
    }
    if ((out->kind == FT_QK_NVFP4 || out->kind == FT_QK_MXFP8) && q) out->two_d = q->twod;
    out->pow2_scales = out->kind == FT_QK_FP8_BLOCK;
}
