/*
 * nx_host.c - the host side of numerical replay's device problem (ft_kernels.h): the input
 * generator both back ends draw from, and the memory and work estimates of a problem (plain
 * arithmetic, so they exist in builds without CUDA).
 */
#include "ft_kernels.h"

float ft_nx_gauss(uint64_t seed, uint64_t i)
{
    uint64_t h = ft_hash_mix(seed, i);
    double a = (double)(h & 0xFFFF) + (double)(h >> 16 & 0xFFFF) + (double)(h >> 32 & 0xFFFF) +
               (double)(h >> 48);
    return (float)((a * 0x1p-16 - 2.0) * 1.7320508);
}

void ft_nx_bytes(const ft_nx_problem *p, uint64_t *bytes)
{
    const uint64_t t = (uint64_t)p->t, G = p->n_groups, k1 = (uint64_t)p->k1, n1 = (uint64_t)p->n1,
                   k2 = (uint64_t)p->k2, n2 = (uint64_t)p->n2;
    const uint64_t w = G * (n1 * k1 + n2 * k2), act = t * (k1 + n2);
    const uint64_t outs = act + w;                     /* y, dx, dW1, dW2 */
    const uint64_t ctx = 4 * (act + w + t * (n1 + k2)) /* inputs, h, z (float32) */
                         + 4 * outs * 2                /* reference and this run (float32) */
                         + 2 * outs;                   /* base run (bf16) */
    const uint64_t wmax = n1 * k1 > n2 * k2 ? n1 * k1 : n2 * k2, omax = n2 > k1 ? n2 : k1;
    const uint64_t ref = 8 * (t * (k1 + n2 + 2 * n1 + 2 * k2 + omax) + 2 * wmax);
    /* a run's scratch: bf16 weights of one usage, an activation's float32 and bf16 copies (and
     * RHT's padded copies), dz, dh */
    const uint64_t amax_cols = k1 > n1 ? k1 : n1;
    const uint64_t run =
        2 * G * n1 * k1 + 10 * (t + 16 * G) * amax_cols + 4 * t * (k2 + 2 * n1) + 4 * wmax;
    /* the reference's work space first takes the runs' output buffers (idle while it runs) */
    const uint64_t ref_pool = ref > 4 * outs ? ref - 4 * outs : 0;
    *bytes = ctx + (ref_pool > run ? ref_pool : run);
}

void ft_nx_flops(const ft_nx_problem *p, double *ref_flops, double *run_flops)
{
    int64_t used = 0;
    for (uint32_t g = 0; g < p->n_groups; g++)
        used += p->splits[g];
    const double fwd = 2.0 * (double)used * ((double)p->k1 * p->n1 + (double)p->k2 * p->n2);
    const double f = p->grad ? 3.0 * fwd : fwd;
    if (ref_flops) *ref_flops = f;
    if (run_flops) *run_flops = f;
}
