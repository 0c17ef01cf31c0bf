#!/bin/sh
# Build the libFuzzer targets with clang into build-fuzz/ (CMake's FT_FUZZ option does the work;
# tests/fuzz/README.md says how to run them). Needs clang and libclang-rt-14-dev.
set -e
cd "$(dirname "$0")/../.."
CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S . -B build-fuzz -DFT_FUZZ=ON -DFT_CUDA=OFF \
  -DFT_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug
cmake --build build-fuzz -j"${JOBS:-2}" --target fuzz_jsonl fuzz_model fuzz_chunk fuzz_packed \
  fuzz_open fuzz_cli fuzz_policy
