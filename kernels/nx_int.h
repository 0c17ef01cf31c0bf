/*
 * nx_int.h - what both back ends of the numerics problem (ft_kernels.h, "numerical replay")
 * compute alike, written once: the input seed streams and the comparison metric. Private to
 * kernels/ (cpu/nx.c and cuda/nx.cu); inline functions usable from C11 and from nvcc.
 *
 * Limits: the router probabilities' 0.5 + 0.45 tanh(g) is evaluated with each side's tanhf (and
 * nvcc may fuse it into an FMA), so a probability can differ by one bf16 step between the back
 * ends; every other input is bit-identical.
 */
#ifndef FT_NX_INT_H
#define FT_NX_INT_H

#include "formats_int.h"

/* Input streams: tensor v of a problem is drawn from ft_nx_gauss(seed + NX_V, i), seed being the
 * problem's wseed (weights, biases) or xseed (activations, probabilities, gradients). */
enum { NX_X = 1, NX_W1 = 2, NX_B1 = 3, NX_W2 = 4, NX_B2 = 5, NX_PROBS = 6, NX_DY = 7 };
#define NX_BIAS_SCALE 0.1f /* b1, b2: gauss * 0.1 */

/* Approximately N(0, 1): the sum of four 16-bit uniforms of ft_hash_mix(seed, i). */
FT_HDI float nx_gauss(uint64_t seed, uint64_t i)
{
    const uint64_t h = ft_hash_mix(seed, i);
    const double a = (double)(h & 0xFFFF) + (double)(h >> 16 & 0xFFFF) +
                     (double)(h >> 32 & 0xFFFF) + (double)(h >> 48);
    return (float)FT_DMUL(FT_DADD(FT_DMUL(a, 0x1p-16), -2.0), 1.7320508);
}

/* Element i of a stream: bf16(gauss * scale); probabilities (probs != 0) are then mapped into
 * (0, 1) as bf16(0.5 + 0.45 tanh(x)). */
FT_HDI float nx_input(uint64_t seed, uint64_t i, float scale, int probs)
{
    float x = bf16_round(FT_FMUL(nx_gauss(seed, i), scale));
    if (probs) x = bf16_round(0.5f + 0.45f * tanhf(x));
    return x;
}

/* ---- the comparison metric ---------------------------------------------------------------- */
/* A run's output o against r (the float64 reference, or the base run): relative L2
 * sqrt(sum (o - r)^2 / sum r^2) (plain L2 where r is 0); the largest |o - r|, a NaN winning; a
 * call's figure is the worst of its outputs (y, and dx, dW1, dW2 when it runs the backward), a
 * NaN winning. */

FT_HDI double nx_rel(double num, double den)
{
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* max(m, v) where a NaN v wins (and, once in m, stays). */
FT_HDI double nx_nanmax(double m, double v)
{
    return (v > m || v != v) ? v : m;
}

FT_HDI double nx_worst(const double *v, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++)
        m = nx_nanmax(m, v[i]);
    return m;
}

#endif /* FT_NX_INT_H */
