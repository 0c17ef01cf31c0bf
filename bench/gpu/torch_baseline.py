"""torch baselines for bench/gpu/run.sh, measured in the same device run as bench_cuda.

Grouped MLP with torch._grouped_mm: fc1 -> SwiGLU (act half first, TE's convention, no
interleave) x probs -> fc2, forward and autograd backward, on the shapes and skewed routing of
bench/bench_cuda.c. Prints RESULT lines: median ms and TFLOP/s.
"""
import os
import sys

import torch
import torch.nn.functional as F

SHAPES = [
    ("deepseek-v3", 32, 32768, 7168, 2048),
    ("mixtral", 8, 16384, 4096, 14336),
    ("qwen3-30b-a3b", 128, 32768, 2048, 768),
    ("gpt-oss", 32, 16384, 2880, 2880),
    ("decode-deepseek", 32, 256, 7168, 2048),
]


def make_splits(g, t):
    """Same formula as bench_cuda.c make_splits."""
    wsum = sum(1.0 / (1.0 + (e % 8)) for e in range(g))
    s = [int(t * (1.0 / (1.0 + (e % 8))) / wsum) // 16 * 16 for e in range(g)]
    s[0] += t - sum(s)
    return s


def median_ms(fn, iters):
    for _ in range(2):
        fn()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    only = os.environ.get("FT_BENCH_ONLY")
    dev = "cuda"
    torch.manual_seed(0)
    print("torch", torch.__version__, torch.cuda.get_device_name())
    for name, g, t, hidden, ffn in SHAPES:
        if only and name not in only:
            continue
        k1, n1, k2, n2 = hidden, 2 * ffn, ffn, hidden
        splits = make_splits(g, t)
        offs = torch.tensor(splits, device=dev, dtype=torch.int32).cumsum(0, dtype=torch.int32)
        x = (torch.rand(t, k1, device=dev) * 2 - 1).bfloat16().requires_grad_()
        w1 = ((torch.rand(g, n1, k1, device=dev) * 2 - 1) * 0.05).bfloat16().requires_grad_()
        w2 = ((torch.rand(g, n2, k2, device=dev) * 2 - 1) * 0.05).bfloat16().requires_grad_()
        p = torch.full((t, 1), 0.75, device=dev, dtype=torch.bfloat16)
        dy = (torch.rand(t, n2, device=dev) * 2 - 1).bfloat16()

        def fc1():
            return torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs)

        def fwd():
            h = torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs)
            z = F.silu(h[:, :k2]) * h[:, k2:] * p
            return torch._grouped_mm(z, w2.transpose(-2, -1), offs=offs)

        f1 = 2.0 * t * n1 * k1
        ff = f1 + 2.0 * t * n2 * k2
        with torch.no_grad():
            ms_fc1 = median_ms(fc1, iters)
            ms_fwd = median_ms(fwd, iters)
        y = fwd()

        def bwd():
            torch.autograd.grad(y, (x, w1, w2), dy, retain_graph=True)

        ms_bwd = median_ms(bwd, iters)
        print(f"RESULT torch {name} fc1 {ms_fc1:.3f} ms {f1 / ms_fc1 / 1e9:.1f} TFLOP/s | "
              f"fwd {ms_fwd:.3f} ms {ff / ms_fwd / 1e9:.1f} TFLOP/s | "
              f"bwd {ms_bwd:.3f} ms {2 * ff / ms_bwd / 1e9:.1f} TFLOP/s", flush=True)
        del x, w1, w2, dy, y
        torch.cuda.empty_cache()
    # copy bandwidth ceiling
    a = torch.empty(2 * 1024**3 // 4, device=dev)
    b = torch.empty_like(a)
    ms = median_ms(lambda: b.copy_(a), iters)
    print(f"RESULT torch copy {2 * a.numel() * 4 / ms / 1e9:.2f} TB/s (read+write)", flush=True)


if __name__ == "__main__":
    main()
