#!/bin/sh
# fusertrace set-up and entry points.
#   ./ft.sh demo     install what is missing, build, synthesize the demo trace, replay it under
#                    every policy and print the summary (needs no test package: without CMocka
#                    the tests are simply not built)
#   ./ft.sh test     install what is missing (test packages too), build (warnings as errors,
#                    CUDA when nvcc is found, MPI when Open MPI is) and run the whole suite, then
#                    again under ASan+UBSan
#   ./ft.sh build    just build (./build/cli/fusertrace)
#   ./ft.sh install [PREFIX] [--python PATH]
#                    build and install (default /usr/local): the CLI and its SQL extension, the
#                    recorder and replay libraries with their headers and pkg-config file, and
#                    the Python capture package, into the site-packages of PATH (the interpreter
#                    that runs training: a venv's, conda's or pyenv's) or, without --python,
#                    under PREFIX; then what the shell still needs (PATH, PYTHONPATH, ...)
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
    shift
    prefix=/usr/local
    python=""
    while [ $# -gt 0 ]; do
      case $1 in
        --python) [ $# -ge 2 ] || { echo "ft.sh install: --python wants the interpreter's path" >&2; exit 2; }
                  python=$2; shift 2 ;;
        --python=*) python=${1#--python=}; shift ;;
        -*) echo "ft.sh install: unknown option $1 (usage: ./ft.sh install [PREFIX] [--python PATH])" >&2; exit 2 ;;
        *) prefix=$1; shift ;;
      esac
    done
    if [ -n "$python" ] && ! "$python" -c 'import sysconfig' >/dev/null 2>&1; then
      echo "ft.sh install: --python $python: not a Python interpreter that runs here" >&2
      exit 2
    fi
    scripts/deps.sh
    build "$B" all -DCMAKE_INSTALL_PREFIX="$prefix" -DFT_BENCH=OFF -DFT_PYTHON="$python"
    SUDO=""
    if [ ! -w "$prefix" ] && [ -e "$prefix" ] && [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
    $SUDO cmake --install "$B"
    scripts/install-hints.sh "$prefix" "${python:-python3}" "$B/install_manifest.txt"
    ;;
  test)
    scripts/deps.sh test
    scripts/check-format.sh
    # replay's MPI support (and its test) wherever Open MPI is installed
    mpi=OFF
    command -v mpicc >/dev/null 2>&1 && mpi=ON
    build "$B" all -DFT_MPI=$mpi
    (cd "$B" && ctest --output-on-failure -j"$JOBS")
    build "$B-asan" all -DCMAKE_BUILD_TYPE=Asan -DFT_BENCH=OFF
    (cd "$B-asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
       UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j"$JOBS")
    ;;
  *)
    echo "usage: ./ft.sh [demo|test|build|install [PREFIX] [--python PATH]]" >&2
    exit 2
    ;;
esac
