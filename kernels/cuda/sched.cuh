// sched.cuh - the persistent tile scheduler shared by the grouped GEMM kernels: row offsets and
// per-group tile counts are computed on the device from the split sizes at kernel start, so the
// host never reads the splits (launches stay CUDA-graph safe).
#ifndef FT_CUDA_SCHED_CUH
#define FT_CUDA_SCHED_CUH

#include "ft_cuda_int.cuh"

// Tiles of one group: FPROP/DGRAD tile the group's rows; WGRAD tiles the [n][k] weight grad and
// every group has the same count.
struct sched_shape {
    int wgrad;       // 1: tiles do not depend on the split sizes
    int bm;          // tile rows
    int64_t n_tiles; // tiles along the output columns
    int64_t m_fixed; // WGRAD: rows of the output (n)
};

// Fills off[0..G] (clamped row offsets) and tiles[0..G] (exclusive prefix of tile counts) in
// shared memory. Negative splits count as 0 and offsets are clamped to m, so bad splits on the
// device can never make a kernel read outside its tensors. Called by all threads; ends with a
// __syncthreads().
__device__ __forceinline__ void sched_build(const int64_t *splits, int G, int64_t m,
                                            const sched_shape &sh, int64_t *off, int64_t *tiles)
{
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        int64_t run = 0, run_t = 0;
        for (int base = 0; base < G; base += 32) {
            const int g = base + lane;
            int64_t s = g < G ? splits[g] : 0;
            if (s < 0) s = 0;
            int64_t inc = s;
            for (int d = 1; d < 32; d <<= 1) {
                int64_t o = __shfl_up_sync(0xffffffffu, inc, d);
                if (lane >= d) inc += o;
            }
            int64_t lo = run + inc - s, hi = run + inc;
            if (lo > m) lo = m;
            if (hi > m) hi = m;
            int64_t t = 0;
            if (g < G) {
                if (sh.wgrad)
                    t = ((sh.m_fixed + sh.bm - 1) / sh.bm) * sh.n_tiles;
                else
                    t = ((hi - lo + sh.bm - 1) / sh.bm) * sh.n_tiles;
                off[g] = lo;
            }
            int64_t inc_t = t;
            for (int d = 1; d < 32; d <<= 1) {
                int64_t o = __shfl_up_sync(0xffffffffu, inc_t, d);
                if (lane >= d) inc_t += o;
            }
            if (g < G) tiles[g] = run_t + inc_t - t;
            run += __shfl_sync(0xffffffffu, inc, 31);
            run_t += __shfl_sync(0xffffffffu, inc_t, 31);
        }
        if (lane == 0) {
            off[G] = run < m ? run : m;
            tiles[G] = run_t;
        }
    }
    __syncthreads();
}

// Group of tile t: largest g with tiles[g] <= t (empty groups have tiles[g] == tiles[g+1]).
__device__ __forceinline__ int sched_group(const int64_t *tiles, int G, int64_t t)
{
    return last_le(tiles, G, t);
}

#endif
