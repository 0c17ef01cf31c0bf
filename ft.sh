#!/bin/sh
# fusertrace set-up and entry points.
#   ./ft.sh demo   install what is missing, build, synthesize the demo trace, replay it under
#                  every policy and print the summary
#   ./ft.sh test   install what is missing, build (warnings as errors, CUDA when nvcc is found)
#                  and run the whole suite, then again under ASan+UBSan
#   ./ft.sh build  just build (./build/cli/fusertrace)
set -e
cd "$(dirname "$0")"
JOBS=$(nproc 2>/dev/null || echo 2)
build() { # dir, target (or all), extra cmake args...
  dir=$1; target=$2; shift 2
  cmake -S . -B "$dir" -DFT_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$JOBS" --target "$target"
}
case "${1:-demo}" in
  demo)
    scripts/deps.sh
    build build fusertrace
    ./build/cli/fusertrace demo
    ;;
  build)
    scripts/deps.sh
    build build all
    ;;
  test)
    scripts/deps.sh test
    scripts/check-format.sh
    build build all
    (cd build && ctest --output-on-failure -j"$JOBS")
    build build-asan all -DCMAKE_BUILD_TYPE=Asan -DFT_BENCH=OFF
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
       UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j"$JOBS")
    ;;
  *)
    echo "usage: ./ft.sh [demo|test|build]" >&2
    exit 2
    ;;
esac
