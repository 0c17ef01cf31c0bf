#!/bin/sh
# bench/gpu/prebuild.sh - build the GPU-run binaries on a Debian host with the CUDA Toolkit (the
# project's CMake build) and gather them, stripped, with the shared libraries the GPU image lacks
# (SQLite, zstd, jansson, cmocka, OpenBLAS and what they pull in), into one folder to carry to the
# GPU machine:
#   sh bench/gpu/prebuild.sh [DIR]      (default .gpubin; keep it out of git)
#   then there: FT_GPU_BIN=DIR sh bench/gpu/run.sh
# The GPU machine must run the same or a newer glibc and a driver for this CUDA version. The
# tests that write scratch traces use the build tree's path (FT_BINARY_DIR), which run.sh creates.
set -eu
DIR=${1:-.gpubin}
BUILD=${FT_GPU_BUILD:-build-gpu-rel}
BINS="tests/test_cuda tests/test_numerics bench/bench_cuda bench/bench_numerics cli/fusertrace"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFT_BENCH=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target test_cuda test_numerics bench_cuda bench_numerics fusertrace
mkdir -p "$DIR/lib"
for b in $BINS; do
  strip -o "$DIR/$(basename "$b")" "$BUILD/$b"
done
# the build tree's absolute path, for the tests' scratch files
(cd "$BUILD" && pwd) >"$DIR/build_dir"
# every shared library outside glibc and the CUDA toolkit (the GPU image has both)
for b in $BINS; do ldd "$DIR/$(basename "$b")"; done |
  awk '$3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      libcuda*|libcublas*|libcudart*|libnv*) ;;
      *) cp -L "$path" "$DIR/lib/" ;;
    esac
  done
ls -la "$DIR" "$DIR/lib"
