#!/bin/sh
# fusertrace set-up and entry points.
#   ./ft.sh demo     install what is missing, build, synthesize the demo trace, replay it under
#                    every policy and print the summary (needs no test package: without CMocka
#                    the tests are simply not built)
#   ./ft.sh test     install what is missing (test packages too), build (warnings as errors,
#                    CUDA when nvcc is found) and run the whole suite, then again under ASan+UBSan
#   ./ft.sh build    just build (./build/cli/fusertrace)
#   ./ft.sh install [PREFIX]
#                    build and install (default /usr/local): the CLI, the recorder library with
#                    its headers and pkg-config file, and the Python capture package
# FT_BUILD names the build folder (default build).
set -e
cd "$(dirname "$0")"
JOBS=$(nproc 2>/dev/null || echo 2)
B=${FT_BUILD:-build}
build() { # dir, target (or all), extra cmake args...
  dir=$1; target=$2; shift 2
  cmake -S . -B "$dir" -DFT_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$JOBS" --target "$target"
}
case "${1:-demo}" in
  demo)
    scripts/deps.sh
    build "$B" fusertrace
    case $B in /*) "$B/cli/fusertrace" demo ;; *) "./$B/cli/fusertrace" demo ;; esac
    ;;
  build)
    scripts/deps.sh
    build "$B" all
    ;;
  install)
    scripts/deps.sh
    prefix=${2:-/usr/local}
    build "$B" all -DCMAKE_INSTALL_PREFIX="$prefix" -DFT_BENCH=OFF
    SUDO=""
    if [ ! -w "$prefix" ] && [ -e "$prefix" ] && [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
    $SUDO cmake --install "$B"
    ;;
  test)
    scripts/deps.sh test
    scripts/check-format.sh
    build "$B" all
    (cd "$B" && ctest --output-on-failure -j"$JOBS")
    build "$B-asan" all -DCMAKE_BUILD_TYPE=Asan -DFT_BENCH=OFF
    (cd "$B-asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
       UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j"$JOBS")
    ;;
  *)
    echo "usage: ./ft.sh [demo|test|build|install [PREFIX]]" >&2
    exit 2
    ;;
esac
