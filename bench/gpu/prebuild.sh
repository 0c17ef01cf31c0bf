#!/bin/sh
# bench/gpu/prebuild.sh - build the GPU-run binaries on a Debian host with the CUDA Toolkit (the
# project's CMake build) and gather them, stripped, with the shared libraries the GPU image lacks
# (SQLite, zstd, jansson, cmocka), into one folder to carry to the GPU machine:
#   sh bench/gpu/prebuild.sh [DIR]      (default .gpubin; keep it out of git)
#   then there: FT_GPU_BIN=DIR sh bench/gpu/run.sh
# The GPU machine must run the same or a newer glibc and a driver for this CUDA version.
set -eu
DIR=${1:-.gpubin}
BUILD=${FT_GPU_BUILD:-build-gpu-rel}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFT_BENCH=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target test_cuda bench_cuda fusertrace
mkdir -p "$DIR/lib"
strip -o "$DIR/test_cuda" "$BUILD/tests/test_cuda"
strip -o "$DIR/bench_cuda" "$BUILD/bench/bench_cuda"
strip -o "$DIR/fusertrace" "$BUILD/cli/fusertrace"
for lib in libsqlite3.so.0 libzstd.so.1 libjansson.so.4 libcmocka.so.0; do
  path=$(ldd "$DIR/fusertrace" "$DIR/test_cuda" | awk -v l="$lib" '$1 == l {print $3; exit}')
  [ -n "$path" ] && cp -L "$path" "$DIR/lib/"
done
ls -la "$DIR" "$DIR/lib"
