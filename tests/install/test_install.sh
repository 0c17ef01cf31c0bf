#!/bin/sh
# The installed tree works from outside the project: `cmake --install` into a temporary prefix,
# then a C program built against it with pkg-config records and reads a trace, the installed CLI
# verifies it, and the installed Python package finds the installed recorder library without
# FUSERTRACE_LIB. Usage: tests/install/test_install.sh BUILD_DIR
set -eu
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ft-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/fusertrace include/fusertrace/ft_recorder.h include/fusertrace/ft_trace.h \
         include/fusertrace/ft_common.h include/fusertrace/ft_decl.h; do
  [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
pc=$(find "$prefix" -name fusertrace.pc)
[ -n "$pc" ] || { echo "no fusertrace.pc installed"; exit 1; }
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs fusertrace)
${CC:-cc} -std=c11 -Wall -Werror -o "$tmp/consumer" "$here/consumer.c" $flags
libdir=$(pkg-config --variable=libdir fusertrace)
out=$(LD_LIBRARY_PATH=$libdir "$tmp/consumer" "$tmp/t.ftdb")
[ "$out" = "1000 calls" ] || { echo "consumer printed: $out"; exit 1; }
"$prefix/bin/fusertrace" verify "$tmp/t.ftdb"

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
