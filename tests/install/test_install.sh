#!/bin/sh
# The installed tree works from outside the project: `cmake --install` into a temporary prefix,
# then a C program built against it with pkg-config records and reads a trace (no
# LD_LIBRARY_PATH: the .pc file's rpath finds the library), the installed CLI verifies it, the
# stock sqlite3 shell loads the installed SQL extension by the path `fusertrace sql --extension`
# prints, the example CMocka test of docs/examples builds against the installed C API and passes
# on a canned trace, the installed Python package finds the installed recorder library without
# FUSERTRACE_LIB, FT_PYTHON puts it into another interpreter's site-packages (a venv), the
# runner exits non-zero when nothing was captured, and the install hints say what the shell
# needs. Usage: tests/install/test_install.sh BUILD_DIR
set -eu
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ft-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/fusertrace include/fusertrace/ft_recorder.h include/fusertrace/ft_trace.h \
         include/fusertrace/ft_common.h include/fusertrace/ft_decl.h include/fusertrace/fusertrace.h; do
  [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
pc=$(find "$prefix" -name fusertrace.pc)
[ -n "$pc" ] || { echo "no fusertrace.pc installed"; exit 1; }
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs fusertrace)
${CC:-cc} -std=c11 -Wall -Werror -o "$tmp/consumer" "$here/consumer.c" $flags
libdir=$(pkg-config --variable=libdir fusertrace)
out=$(env -u LD_LIBRARY_PATH "$tmp/consumer" "$tmp/t.ftdb")
[ "$out" = "1000 calls" ] || { echo "consumer printed: $out"; exit 1; }
"$prefix/bin/fusertrace" verify "$tmp/t.ftdb"

# the SQL extension, found by the installed command, in the stock shell
ext=$("$prefix/bin/fusertrace" sql --extension)
case $ext in "$prefix"/*) ;; *) echo "sql --extension printed $ext, not a file under $prefix"; exit 1 ;; esac
if command -v sqlite3 >/dev/null 2>&1; then
  n=$(sqlite3 -readonly "file:$tmp/t.ftdb?immutable=1" ".load $ext" "SELECT count(*) FROM calls")
  [ "$n" = "1000" ] || { echo "sqlite3 with the installed extension counted: $n"; exit 1; }
  echo "the stock sqlite3 loads $ext"
else
  echo "not checked: sqlite3 .load (no sqlite3 shell)"
fi

# the example test on a canned trace, built against the installed C API (and CMocka)
if pkg-config --exists cmocka; then
  "$prefix/bin/fusertrace" import "$here/../../traces/te-pr3410-grad-toggle.jsonl" \
    -o "$tmp/grad-toggle.ftdb" 2>/dev/null
  ${CC:-cc} -std=c11 -Wall -Werror -o "$tmp/example" "$here/../../docs/examples/test_canned_trace.c" \
    $(pkg-config --cflags --libs fusertrace cmocka)
  env -u LD_LIBRARY_PATH "$tmp/example" "$tmp/grad-toggle.ftdb" >"$tmp/example.log" 2>&1 ||
    { cat "$tmp/example.log"; exit 1; }
  grep -q "PASSED  \] 3 test" "$tmp/example.log" || { cat "$tmp/example.log"; exit 1; }
  echo "docs/examples/test_canned_trace.c passes against the installed library"
else
  echo "not checked: the example CMocka test (no cmocka.pc)"
fi

init=$(find "$prefix" -path '*fusertrace_capture/__init__.py')
[ -n "$init" ] || { echo "the Python package is not installed"; exit 1; }
py=${FT_PYTHON:-python3}
if command -v "$py" >/dev/null 2>&1; then
  site=$(dirname "$(dirname "$init")")
  found=$(cd "$tmp" && env -u FUSERTRACE_LIB PYTHONPATH="$site" "$py" -c \
    'from fusertrace_capture._writer import find_library; p, why = find_library(); print(p or why)')
  case $found in
    "$prefix"/*/libfusertrace_rec.so) echo "python finds $found" ;;
    *) echo "the installed package found: $found"; exit 1 ;;
  esac
fi

# FT_PYTHON: the package goes into that interpreter's site-packages (here a venv's)
if "${FT_PYTHON:-python3}" -m venv --without-pip "$tmp/venv" >/dev/null 2>&1; then
  FT_PYTHON="$tmp/venv/bin/python" cmake --install "$build" --prefix "$tmp/prefix2" >/dev/null
  found=$(cd "$tmp" && env -u FUSERTRACE_LIB -u PYTHONPATH "$tmp/venv/bin/python" -c \
    'from fusertrace_capture._writer import find_library; p, why = find_library(); print(p or why)')
  case $found in
    "$tmp/prefix2"/*/libfusertrace_rec.so) echo "the venv's python finds $found" ;;
    *) echo "the venv's installed package found: $found"; exit 1 ;;
  esac
  # the runner: nothing captured is an error with the reason, the script's own status is kept
  echo 'print("no TE here")' >"$tmp/plain.py"
  if (cd "$tmp" && "$tmp/venv/bin/python" -m fusertrace_capture.run -o "$tmp/cap" plain.py \
        >"$tmp/run.out" 2>"$tmp/run.err"); then
    echo "fusertrace_capture.run exited 0 without capturing"; exit 1
  fi
  grep -q "nothing was captured.*transformer_engine was never imported" "$tmp/run.err" ||
    { cat "$tmp/run.err"; exit 1; }
  mkdir -p "$tmp/fakete/transformer_engine/pytorch/ops"
  for d in transformer_engine transformer_engine/pytorch transformer_engine/pytorch/ops; do
    : >"$tmp/fakete/$d/__init__.py"
  done
  printf 'class OperationFuser:\n    def __init__(self, *a, **k): pass\n    def maybe_fuse_ops(self, *a): pass\n' \
    >"$tmp/fakete/transformer_engine/pytorch/ops/fuser.py"
  echo 'import transformer_engine.pytorch.ops.fuser' >"$tmp/te_only.py"
  if (cd "$tmp" && PYTHONPATH="$tmp/fakete" "$tmp/venv/bin/python" -m fusertrace_capture.run \
        -o "$tmp/cap" te_only.py >"$tmp/run.out" 2>"$tmp/run.err"); then
    echo "fusertrace_capture.run exited 0 without a fuser call"; exit 1
  fi
  grep -q "nothing was captured.*operation fuser never ran" "$tmp/run.err" || { cat "$tmp/run.err"; exit 1; }
  echo 'import sys; sys.exit(7)' >"$tmp/fails.py"
  set +e
  (cd "$tmp" && "$tmp/venv/bin/python" -m fusertrace_capture.run -o "$tmp/cap" fails.py 2>/dev/null)
  st=$?
  set -e
  [ "$st" = 7 ] || { echo "the runner changed the script's exit status 7 into $st"; exit 1; }
  echo "fusertrace_capture.run says when nothing was captured"
  # the hints: what the shell needs for this prefix and interpreter
  hints=$(PATH=/usr/bin:/bin "$here/../../scripts/install-hints.sh" "$tmp/prefix2" "$tmp/venv/bin/python" \
    "$build/install_manifest.txt")
  echo "$hints" | grep -q "export PATH=\"$tmp/prefix2/bin" || { echo "hints: $hints"; exit 1; }
  echo "$hints" | grep -q "does not see" && { echo "hints: $hints"; exit 1; }
  hints=$(PATH=/usr/bin:/bin "$here/../../scripts/install-hints.sh" "$prefix" /usr/bin/python3)
  echo "$hints" | grep -q "export PYTHONPATH=" || { echo "hints: $hints"; exit 1; }
  echo "the install hints name PATH and PYTHONPATH where they are needed"
else
  echo "not checked: FT_PYTHON into a venv (no python3 -m venv)"
fi

# `pip install recorder/python` (from a copy: setuptools builds in the source folder), standard
# library only, without network: Debian's python3 with python3-pip, python3-setuptools and
# python3-wheel. The pip-installed package finds the installed library through the dynamic
# linker's path here (LD_LIBRARY_PATH stands in for ldconfig).
pip_py=${FT_PIP_PYTHON:-/usr/bin/python3}
if "$pip_py" -c 'import setuptools, wheel' 2>/dev/null && "$pip_py" -m pip --version >/dev/null 2>&1; then
  cp -r "$here/../../recorder/python" "$tmp/pysrc"
  rm -rf "$tmp/pysrc/build" "$tmp/pysrc"/*.egg-info
  "$pip_py" -m pip install --quiet --no-build-isolation --no-deps --no-index \
    --target "$tmp/pip" "$tmp/pysrc" >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; exit 1; }
  found=$(cd "$tmp" && env -u FUSERTRACE_LIB PYTHONPATH="$tmp/pip" LD_LIBRARY_PATH="$libdir" \
    "$pip_py" -c 'from fusertrace_capture._writer import find_library; p, why = find_library(); print(p or why)')
  case $found in
    *libfusertrace_rec.so) echo "pip-installed package finds $found" ;;
    *) echo "the pip-installed package found: $found"; exit 1 ;;
  esac
else
  echo "not checked: pip install recorder/python ($pip_py lacks pip, setuptools or wheel)"
fi
