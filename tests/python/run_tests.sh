#!/bin/sh
# Capture-hook tests (fusertrace_capture against the TE stand-in, with real PyTorch on the CPU).
# Usage: tests/python/run_tests.sh FUSERTRACE_BIN LIBFUSERTRACE_REC
# Exit 77 (ctest: skipped) when /usr/bin/python3 cannot import torch: install Debian's
# python3-torch (scripts/deps.sh test). FT_PYTHON overrides the interpreter.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 FUSERTRACE_BIN LIBFUSERTRACE_REC" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${FT_PYTHON:-/usr/bin/python3}
if [ ! -x "$py" ]; then
  echo "skipped: $py not found (the capture tests use Debian's python3 with python3-torch)"
  exit 77
fi
if ! why=$("$py" -c "import torch" 2>&1); then
  echo "skipped: $py cannot import torch (install python3-torch: scripts/deps.sh test)"
  echo "$why" | tail -n 1
  exit 77
fi

abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
FT_CLI=$(abspath "$1")
FT_REC_LIB=$(abspath "$2")
export FT_CLI FT_REC_LIB
PYTHONPATH="$root/recorder/python:$here/standin${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
# Sanitizer builds: the library needs the ASan runtime loaded first; the interpreter itself is
# not instrumented, so leak checking (of Python) is off for these tests.
asan=$(ldd "$FT_REC_LIB" 2>/dev/null | awk '/libasan/ {print $3; exit}')
if [ -n "$asan" ]; then
  # libstdc++ must be loaded with the ASan runtime: otherwise ASan's __cxa_throw interceptor finds
  # no real __cxa_throw and aborts when libtorch throws (e.g. KeyboardInterrupt in autograd).
  cxx=$(/sbin/ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
  LD_PRELOAD="$asan${cxx:+:$cxx}${LD_PRELOAD:+:$LD_PRELOAD}"
  ASAN_OPTIONS="detect_leaks=0:abort_on_error=1"
  export LD_PRELOAD ASAN_OPTIONS
fi
cd "$here" || exit 3
exec "$py" -m unittest discover -s "$here" -p 'test_*.py' -v
