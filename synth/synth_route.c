/*
 * synth_route.c - where the generator's randomness comes from and where the tokens go: the PRNG
 * (xoshiro256** seeded with splitmix64), exp/log in plain IEEE arithmetic (so a seed gives the
 * same splits everywhere), and the routing families (synth.c's header says what each models):
 * per-layer popularity, its drift, and the split sizes of one microbatch.
 */
#include "synth_int.h"

#include <math.h>
#include <threads.h>

/* ---- PRNG: xoshiro256** seeded with splitmix64 -------------------------------------------- */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void synth_rng_seed(rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

/* ---- exp/log in plain IEEE arithmetic ----------------------------------------------------- */
/* libm's exp/pow may differ in the last bit between C libraries; these use only +, -, *, / and
 * the exact ldexp/frexp, so a seed gives the same splits on every IEEE-754 platform (C11 without
 * extensions does not contract a*b+c into an FMA). Accuracy ~1e-15 relative, plenty here. */
static double det_exp(double x)
{
    if (x < -700.0) return 0.0;
    if (x > 700.0) x = 700.0;
    double kf = x * 1.4426950408889634;
    int k = (int)(kf < 0.0 ? kf - 0.5 : kf + 0.5);
    double r =
        (x - (double)k * 6.93147180369123816490e-01) - (double)k * 1.90821492927058770002e-10;
    double term = 1.0, sum = 1.0; /* |r| <= 0.35: 14 Taylor terms */
    for (int i = 1; i <= 14; i++) {
        term *= r / (double)i;
        sum += term;
    }
    return ldexp(sum, k);
}

static double det_log(double x) /* x > 0 */
{
    int e;
    double m = frexp(x, &e); /* x = m * 2^e, m in [0.5, 1) */
    if (m < 0.70710678118654752) {
        m *= 2.0;
        e--;
    }
    double t = (m - 1.0) / (m + 1.0), t2 = t * t, term = t, sum = 0.0; /* |t| <= 0.172 */
    for (int i = 1; i <= 23; i += 2) {
        sum += term / (double)i;
        term *= t2;
    }
    return 2.0 * sum + (double)e * 0.69314718055994530942;
}

/* ---- routing ------------------------------------------------------------------------------ */
#define SMALL_MEAN 6.0
static double inv_k[256]; /* 1/k, filled by init_inv_k */
static once_flag inv_k_once = ONCE_FLAG_INIT;

static void init_inv_k(void)
{
    inv_k[0] = 0.0;
    for (int k = 1; k < 256; k++)
        inv_k[k] = 1.0 / (double)k;
}

/* An expert picked with probability pop[e] in O(1). */
static inline uint32_t alias_pick(gen *g, const slayer *L)
{
    uint64_t u = rng_next(&g->r);
    uint32_t e = (uint32_t)(((u >> 32) * (uint64_t)g->c.experts) >> 32);
    return (double)(u & 0xffffffffu) * 0x1.0p-32 < L->aprob[e] ? e : L->alias[e];
}

/* Split sizes of one microbatch. Experts expecting few tokens get a Poisson count; the others
 * a normal count with the binomial variance, conditioned on the total (the deviates are projected
 * onto the hyperplane where the counts sum to the tokens left), so only the rounding residue is
 * moved token by token to experts picked by popularity. Every entry >= 0, sum == tokens. */
static void draw_splits(gen *g, const slayer *L, int64_t *out)
{
    uint32_t E = (uint32_t)g->c.experts;
    double *z = g->scratch_z, acc = 0.0;
    int64_t sum = 0;
    for (uint32_t i = L->n_norm; i < E; i++) {
        uint32_t e = L->order[i];
        double u = rng_unif(&g->r), lam = L->lam[e], p = L->elam[e], cdf = p;
        int64_t k = 0;
        while (u > cdf && k < 255) {
            k++;
            p *= lam * inv_k[k];
            cdf += p;
        }
        out[e] = k;
        sum += k;
    }
    for (uint32_t i = 0; i < L->n_norm; i++) {
        z[i] = rng_normal(&g->r);
        acc += L->sd[L->order[i]] * z[i];
    }
    if (L->n_norm) {
        double c = L->sd2sum > 0.0 ? ((double)(g->c.tokens - sum) - L->lamsum - acc) / L->sd2sum
                                   : 0.0; /* one expert takes everything: no spread */
        for (uint32_t i = 0; i < L->n_norm; i++) {
            uint32_t e = L->order[i];
            double x = L->lam[e] + L->sd[e] * (z[i] + L->sd[e] * c) + 0.5;
            int64_t k = x < 1.0 ? 0 : x > (double)g->c.tokens ? g->c.tokens : (int64_t)x;
            out[e] = k;
            sum += k;
        }
    }
    int64_t d = g->c.tokens - sum;
    if (d > (int64_t)E || d < -(int64_t)E) { /* large imbalance: move most of it pro rata */
        for (uint32_t e = 0; e < E; e++) {
            int64_t adj = (int64_t)((double)d * L->pop[e]);
            if (out[e] + adj < 0) adj = -out[e];
            out[e] += adj;
            sum += adj;
        }
        d = g->c.tokens - sum;
    }
    for (uint32_t miss = 0; d != 0;) {
        uint32_t e = alias_pick(g, L);
        if (d > 0) {
            out[e]++;
            d--;
        } else if (out[e] > 0) {
            out[e]--;
            d++;
        } else if (++miss > 64 * E) { /* only improbable experts hold tokens: take from any */
            for (e = 0; e < E && d < 0; e++)
                while (out[e] > 0 && d < 0) {
                    out[e]--;
                    d++;
                }
        }
    }
}

static void route_tables(gen *g, slayer *L);

/* Gamma(a) deviate, a > 0 (Marsaglia-Tsang; for a < 1 boosted by U^(1/a)), from the routing
 * stream, in the deterministic exp/log. */
static double rng_gamma(rng *r, double a)
{
    double boost = 1.0;
    if (a < 1.0) {
        double u = rng_unif(r);
        boost = u > 0.0 ? det_exp(det_log(u) / a) : 0.0;
        a += 1.0;
    }
    double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = rng_normal(r), v = 1.0 + c * x;
        if (v <= 0.0) continue;
        v = v * v * v;
        double u = rng_unif(r);
        if (u > 0.0 && det_log(u) < 0.5 * x * x + d - d * v + d * det_log(v)) return d * v * boost;
    }
}

/* Split sizes of one MoE layer's microbatch under the routing family. balanced and drop draw
 * the experts' weights afresh (gamma(alpha), normalized: a Dirichlet draw around uniform, as an
 * auxiliary load-balancing loss keeps the router), then the counts as draw_splits does; drop then
 * clips every count to the capacity, the clipped tokens being dropped (the sum falls short). */
void synth_route_draw(gen *g, slayer *L, int64_t *out)
{
    uint32_t E = (uint32_t)g->c.experts;
    if (g->routing == R_BALANCED || g->routing == R_DROP) {
        double sum = 0.0;
        for (uint32_t e = 0; e < E; e++) {
            L->pop[e] = rng_gamma(&g->r, g->c.alpha);
            sum += L->pop[e];
        }
        for (uint32_t e = 0; e < E; e++)
            L->pop[e] = sum > 0.0 ? L->pop[e] / sum : 1.0 / (double)E;
        route_tables(g, L);
    }
    draw_splits(g, L, out);
    if (g->routing == R_DROP) {
        double capf = g->c.capacity * (double)g->c.tokens / (double)E;
        int64_t cap = (int64_t)capf;
        if ((double)cap < capf) cap++;
        for (uint32_t e = 0; e < E; e++)
            if (out[e] > cap) out[e] = cap;
    }
}

/* Routing tables of one MoE layer from its popularity: per-expert moments and the alias table. */
static void route_tables(gen *g, slayer *L)
{
    uint32_t E = (uint32_t)g->c.experts;
    double T = (double)g->c.tokens;
    for (uint32_t e = 0; e < E; e++) {
        double p = L->pop[e];
        L->lam[e] = T * p;
        L->sd[e] = sqrt(T * p * (1.0 - p));
        L->elam[e] = L->lam[e] < SMALL_MEAN ? det_exp(-L->lam[e]) : 0.0;
    }
    L->n_norm = 0;
    L->sd2sum = L->lamsum = 0.0;
    for (uint32_t e = 0; e < E; e++)
        if (L->lam[e] >= SMALL_MEAN) {
            L->order[L->n_norm++] = e;
            L->sd2sum += L->sd[e] * L->sd[e];
            L->lamsum += L->lam[e];
        }
    for (uint32_t e = 0, i = L->n_norm; e < E; e++)
        if (L->lam[e] < SMALL_MEAN) L->order[i++] = e;
    /* Vose: scaled probabilities split into small (< 1) and large (>= 1) work lists */
    uint32_t *small = g->scratch_u32, *large = g->scratch_u32 + E, ns = 0, nl = 0;
    for (uint32_t e = 0; e < E; e++) {
        L->aprob[e] = L->pop[e] * (double)E;
        L->alias[e] = e;
        if (L->aprob[e] < 1.0)
            small[ns++] = e;
        else
            large[nl++] = e;
    }
    while (ns && nl) {
        uint32_t s = small[--ns], l = large[nl - 1];
        L->alias[s] = l;
        L->aprob[l] -= 1.0 - L->aprob[s];
        if (L->aprob[l] < 1.0) {
            nl--;
            small[ns++] = l;
        }
    }
    while (nl)
        L->aprob[large[--nl]] = 1.0;
    while (ns)
        L->aprob[small[--ns]] = 1.0;
}

/* Popularity of a new MoE layer: Zipf over a random permutation, with per-expert lognormal noise
 * (hot: the first `hot` experts share hot_share, the others the rest, same noise and permutation;
 * balanced/drop start uniform and redraw per microbatch); then its routing tables. */
void synth_route_layer(gen *g, slayer *ly)
{
    const synth_cfg *c = &g->c;
    uint32_t E = (uint32_t)c->experts;
    double sum = 0.0;
    for (uint32_t e = 0; e < E; e++) {
        double base = -c->skew * det_log((double)(e + 1));
        if (g->routing == R_HOT) {
            double share = (int64_t)e < c->hot ? c->hot_share / (double)c->hot
                                               : (1.0 - c->hot_share) / (double)(E - c->hot);
            base = det_log(share > 1e-12 ? share : 1e-12);
        }
        ly->pop[e] = g->routing >= R_BALANCED ? 1.0 : det_exp(base + 0.25 * rng_normal(&g->r));
        sum += ly->pop[e];
    }
    for (uint32_t e = E; e > 1; e--) {
        uint32_t j = (uint32_t)(rng_next(&g->r) % e);
        double tmp = ly->pop[e - 1];
        ly->pop[e - 1] = ly->pop[j];
        ly->pop[j] = tmp;
    }
    for (uint32_t e = 0; e < E; e++)
        ly->pop[e] /= sum;
    route_tables(g, ly);
}

/* The router learns: each step every expert's popularity takes a log-normal step. */
void synth_drift_routing(gen *g)
{
    uint32_t E = (uint32_t)g->c.experts;
    for (uint32_t l = 0; l < g->n_layers; l++) {
        slayer *L = &g->layers[l];
        if (!L->moe) continue;
        double sum = 0.0;
        for (uint32_t e = 0; e < E; e++) {
            L->pop[e] *= det_exp(g->drift_sigma * rng_normal(&g->r));
            sum += L->pop[e];
        }
        for (uint32_t e = 0; e < E; e++)
            L->pop[e] /= sum;
        route_tables(g, L);
    }
}

void synth_route_once(void)
{
    call_once(&inv_k_once, init_inv_k);
}
