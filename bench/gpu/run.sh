#!/bin/sh
# bench/gpu/run.sh - check and time the CUDA back end in one device run.
#
# Binaries: FT_GPU_BIN=DIR uses the ones bench/gpu/prebuild.sh gathered (test_cuda, bench_cuda,
# fusertrace and their libraries in DIR/lib); otherwise test_cuda and bench_cuda are built here
# without CMake (nvcc for kernels/cuda, gcc for the C parts; the GPU image lacks the project's -dev
# packages, so cmocka.h, xxhash.h, cblas.h, libcmocka.so and libopenblas.so must be in
# $FT_GPU_DEPS/{include,lib}; the CUDA objects are linked in, so the plugin loader is left out), and
# the numerical replay is skipped (fusertrace needs SQLite, zstd and jansson).
# Steps, in this order: test_cuda; ROUNDS rounds (default 2) of bench_cuda then the torch
# baselines, alternating, so both sides see the card in the same state (GPU clocks, power and
# temperature logged every 500 ms meanwhile, smi.csv; every round's output in bench.txt);
# test_numerics (when prebuilt; FT_NUM_TIMEOUT its limit); bench_numerics (when prebuilt;
# NUMERICS=0 skips it): sampled calls per second of numerical replay at the four model shapes,
# CUDA at full size and CPU at --shrink 8 with its same-run OpenBLAS float64 baseline;
# `replay --numerics cuda` and `cpu` on two synth traces (same report, both back ends; REPLAY=0
# skips it); compute-sanitizer memcheck over the suite (MEMCHECK_FILTER=PATTERN narrows it) and
# racecheck test by test (the kernels with shared memory), on small shapes (SAN=0 skips them).
# Logs go to $OUT (or ./gpu-out).
# Usage: [FT_GPU_BIN=DIR] [ROUNDS=N] sh bench/gpu/run.sh [iters]
set -u
ITERS=${1:-10}
ROUNDS=${ROUNDS:-2}
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
if [ -n "${FT_GPU_BIN:-}" ]; then
  B=$FT_GPU_BIN
  export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
else
  DEPS=${FT_GPU_DEPS:-.gpudeps}
  B=build-gpu
  mkdir -p "$B"
  NVCC=${NVCC:-nvcc}
  command -v "$NVCC" >/dev/null 2>&1 || NVCC=/usr/local/cuda/bin/nvcc
  CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v "$NVCC")")")}
  CFLAGS="-O2 -std=c11 -DFT_HAVE_CUDA=1 -Icommon -Ikernels -I$DEPS/include -I$CUDA_HOME/include"
  echo "== build"
  set -e
  for f in kernels/cuda/*.cu; do
    "$NVCC" -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -lineinfo \
      --expt-relaxed-constexpr -Icommon -Ikernels -Xptxas -v -c "$f" \
      -o "$B/$(basename "$f").o" 2>>"$OUT/ptxas.txt"
  done
  for f in common/common.c kernels/cpu/*.c; do
    gcc $CFLAGS -c "$f" -o "$B/$(basename "$f").o"
  done
  gcc $CFLAGS -c tests/test_cuda.c -o "$B/test_cuda.o"
  gcc $CFLAGS -c bench/bench_cuda.c -o "$B/bench_cuda.o"
  LIBS="$B/common.c.o $B/"*.cu.o
  CPU=$(ls "$B"/*.c.o | grep -v "common.c.o\|cuda_loader.c.o")
  "$NVCC" -o "$B/test_cuda" "$B/test_cuda.o" $CPU $LIBS -L"$DEPS/lib" -lcmocka -lopenblas -lcublas -lm
  "$NVCC" -o "$B/bench_cuda" "$B/bench_cuda.o" $CPU $LIBS -L"$DEPS/lib" -lopenblas -lcublas -lm
  set +e
  grep -i "spill" "$OUT/ptxas.txt" | sort | uniq -c | sort -rn | head -5
  export LD_LIBRARY_PATH="$DEPS/lib:${LD_LIBRARY_PATH:-}"
fi
echo "== test_cuda"
timeout 200 "$B/test_cuda" >"$OUT/test_cuda.txt" 2>&1; echo "test_cuda rc=$?"
grep -v "^\[ *\(RUN\|OK\) *\]" "$OUT/test_cuda.txt" | grep -v "bit-equal\|: cpu 0 gpu 0" | tail -30
echo "== bench: $ROUNDS rounds of ours then torch"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 500 >"$OUT/smi.csv" 2>&1 &
SMI=$!
r=1
: >"$OUT/bench.txt"
while [ "$r" -le "$ROUNDS" ]; do
  echo "#### round $r bench_cuda $(date +%T)" >>"$OUT/bench.txt"
  timeout 240 "$B/bench_cuda" "$ITERS" >"$OUT/bench_cuda.txt" 2>&1
  cat "$OUT/bench_cuda.txt" >>"$OUT/bench.txt"
  grep -h "RESULT\|PARTS\|MXFP8\|NVFP4" "$OUT/bench_cuda.txt" | grep -v "qpacked\|quant " | sed "s/^/round $r: /"
  echo "#### round $r torch $(date +%T)" >>"$OUT/bench.txt"
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/torch_baseline.py "$ITERS" >"$OUT/torch.txt" 2>&1
  cat "$OUT/torch.txt" >>"$OUT/bench.txt"
  grep -h "RESULT" "$OUT/torch.txt" | sed "s/^/round $r: /"
  r=$((r + 1))
done
kill "$SMI" 2>/dev/null
rm -f "$OUT/bench_cuda.txt" "$OUT/torch.txt"
if [ -x "$B/test_numerics" ]; then
  # its scratch traces go to the build tree's path, which prebuild.sh recorded
  [ -f "$B/build_dir" ] && mkdir -p "$(cat "$B/build_dir")/tests"
  timeout ${FT_NUM_TIMEOUT:-200} "$B/test_numerics" >"$OUT/test_numerics.txt" 2>&1; echo "test_numerics rc=$?"
  grep "cuda:\|FAILED" "$OUT/test_numerics.txt"
fi
if [ -x "$B/bench_numerics" ] && [ "${NUMERICS:-1}" != 0 ]; then
  echo "== bench_numerics: replay --numerics at model shapes"
  timeout 400 "$B/bench_numerics" --model all,small --numerics cuda >"$OUT/bench_numerics_cuda.txt" 2>&1
  echo "cuda rc=$?"; grep "^RESULT\|cold pass" "$OUT/bench_numerics_cuda.txt"
  timeout 400 "$B/bench_numerics" --model all --numerics cpu --shrink 8 --sample 8 --no-profile \
    >"$OUT/bench_numerics_cpu.txt" 2>&1
  echo "cpu rc=$?"; grep "^RESULT\|^OpenBLAS" "$OUT/bench_numerics_cpu.txt"
fi
if [ -x "$B/fusertrace" ] && [ "${REPLAY:-1}" != 0 ]; then
  echo "== numerical replay, both back ends"
  T=$(mktemp -d)
  "$B/fusertrace" synth rht-switch -o "$T/rs.ftdb"
  "$B/fusertrace" synth rht-switch --set detour_every=0 --set rht_flip_every=0 \
    --set switch_step=3 --set switch_recipe=nvfp4:disable_rht=1 -o "$T/s3.ftdb"
  for tr in rs s3; do
    for be in cuda cpu; do
      "$B/fusertrace" replay "$T/$tr.ftdb" --numerics $be --shrink 8 --all \
        >"$OUT/numerics_${tr}_$be.txt" 2>&1
      echo "$tr $be rc=$?"; grep -A4 "^numerics" "$OUT/numerics_${tr}_$be.txt"
    done
  done
  rm -rf "$T"
fi
if [ "${SAN:-1}" = 0 ]; then exit 0; fi
echo "== compute-sanitizer (small shapes)"
FT_CUDA_TEST_SMALL=1 FT_CUDA_TEST_FILTER="${MEMCHECK_FILTER:-*}" timeout ${FT_SAN_TIMEOUT:-150} \
  compute-sanitizer --tool memcheck --print-limit 5 "$B/test_cuda" >"$OUT/memcheck.txt" 2>&1
echo "memcheck rc=$?"; tail -2 "$OUT/memcheck.txt"
# racecheck only looks at shared memory: the tests of the kernels that use it, one at a time
RACE_TESTS=${RACE_TESTS:-"test_cuda_gemm_matches_cpu test_cuda_fc1_epilogue_matches_cpu
  test_cuda_qpacked_matches_cpu"}
for t in $RACE_TESTS; do
  FT_CUDA_TEST_SMALL=1 FT_CUDA_TEST_FILTER="$t" timeout ${FT_RACE_TIMEOUT:-60} compute-sanitizer \
    --tool racecheck --print-limit 5 "$B/test_cuda" >"$OUT/racecheck.txt" 2>&1
  echo "racecheck $t rc=$? $(grep -o 'RACECHECK SUMMARY.*' "$OUT/racecheck.txt")"
done
