#!/bin/sh
# bench/gpu/run.sh - build, check and time the CUDA kernels in one device run.
#
# Builds without CMake (the GPU image lacks the project's -dev packages): nvcc for kernels/cuda,
# gcc for common/, kernels/cpu, tests/test_cuda.c and bench/bench_cuda.c. Needs cmocka.h,
# xxhash.h and libcmocka.so in $FT_GPU_DEPS/{include,lib} when the machine has no cmocka
# (copy them from a Debian machine with libcmocka-dev and libxxhash-dev).
# Then: test_cuda, compute-sanitizer memcheck and racecheck on small shapes, bench_cuda and the
# torch baselines (same routing), a SASS check for HGMMA. Logs go to $OUT (or ./gpu-out).
# Usage: sh bench/gpu/run.sh [iters]
set -u
ITERS=${1:-10}
OUT=${OUT:-gpu-out}
DEPS=${FT_GPU_DEPS:-.gpudeps}
B=build-gpu
mkdir -p "$B" "$OUT"
NVCC=${NVCC:-nvcc}
command -v "$NVCC" >/dev/null 2>&1 || NVCC=/usr/local/cuda/bin/nvcc
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v "$NVCC")")")}
CFLAGS="-O2 -std=c11 -DFT_HAVE_CUDA=1 -Icommon -Ikernels -I$DEPS/include -I$CUDA_HOME/include -I/usr/local/cuda/include"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
echo "== build"
set -e
for f in kernels/cuda/*.cu; do
  "$NVCC" -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -lineinfo --expt-relaxed-constexpr \
    -Icommon -Ikernels -Xptxas -v -c "$f" -o "$B/$(basename "$f").o" 2>>"$OUT/ptxas.txt"
done
for f in common/common.c kernels/cpu/*.c; do
  gcc $CFLAGS -c "$f" -o "$B/$(basename "$f").o"
done
gcc $CFLAGS -c tests/test_cuda.c -o "$B/test_cuda.o"
gcc $CFLAGS -c bench/bench_cuda.c -o "$B/bench_cuda.o"
LIBS="$B/common.c.o $B/"*.cu.o
CPU=$(ls "$B"/*.c.o | grep -v common.c.o)
"$NVCC" -o "$B/test_cuda" "$B/test_cuda.o" $CPU $LIBS -L"$DEPS/lib" -lcmocka -lcublas -lm
"$NVCC" -o "$B/bench_cuda" "$B/bench_cuda.o" $CPU $LIBS -lcublas -lm
set +e
grep -i "spill\|registers" "$OUT/ptxas.txt" | sort | uniq -c | sort -rn | head -5
cuobjdump --dump-sass "$B/gemm_wgmma.cu.o" 2>/dev/null | grep -c HGMMA | sed 's/^/HGMMA instructions: /'
export LD_LIBRARY_PATH="$DEPS/lib:${LD_LIBRARY_PATH:-}"
echo "== test_cuda"
timeout 150 "$B/test_cuda" >"$OUT/test_cuda.txt" 2>&1; echo "test_cuda rc=$?"
grep -v "^\[ *\(RUN\|OK\) *\]" "$OUT/test_cuda.txt" | tail -30
echo "== bench"
timeout 200 "$B/bench_cuda" "$ITERS" 2>&1 | tee "$OUT/bench_cuda.txt"
PYTHONUNBUFFERED=1 timeout 150 python3 bench/gpu/torch_baseline.py "$ITERS" 2>&1 | tee "$OUT/torch.txt"
echo "== compute-sanitizer (small shapes)"
FT_CUDA_TEST_SMALL=1 timeout ${FT_SAN_TIMEOUT:-90} compute-sanitizer --tool memcheck --print-limit 5 \
  "$B/test_cuda" >"$OUT/memcheck.txt" 2>&1; echo "memcheck rc=$?"; tail -4 "$OUT/memcheck.txt"
FT_CUDA_TEST_SMALL=1 timeout ${FT_SAN_TIMEOUT:-90} compute-sanitizer --tool racecheck --print-limit 5 \
  "$B/test_cuda" >"$OUT/racecheck.txt" 2>&1; echo "racecheck rc=$?"; tail -4 "$OUT/racecheck.txt"
echo "== summary"
grep RESULT "$OUT/bench_cuda.txt" "$OUT/torch.txt" | sed 's/^[^:]*://'
