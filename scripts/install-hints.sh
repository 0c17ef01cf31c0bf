#!/bin/sh
# What a fresh install under PREFIX still needs from the user's shell, in a few lines on stdout:
# `./ft.sh install` prints them (tests/install/test_install.sh checks them).
# Usage: scripts/install-hints.sh PREFIX [PYTHON [MANIFEST]]   (PYTHON: the interpreter that runs
# training; MANIFEST: cmake's install_manifest.txt, read instead of searching PREFIX)
set -u
prefix=$1
py=${2:-python3}
manifest=${3:-}
# the installed file whose path ends in $1 (from the manifest, else found under the prefix)
installed() {
  if [ -n "$manifest" ] && [ -r "$manifest" ]; then
    grep -- "$1\$" "$manifest" | head -n 1
  else
    find "$prefix" -path "*$1" 2>/dev/null | head -n 1
  fi
}
bindir=$prefix/bin
case ":${PATH:-}:" in
  *":$bindir:"*) ;;
  *) echo "fusertrace is in $bindir, which is not on PATH: export PATH=\"$bindir:\$PATH\"" ;;
esac
init=$(installed fusertrace_capture/__init__.py)
if command -v "$py" >/dev/null 2>&1; then
  if ! (cd / && env -u PYTHONPATH "$py" -c 'import fusertrace_capture' >/dev/null 2>&1); then
    if [ -n "$init" ]; then
      site=$(dirname "$(dirname "$init")")
      echo "$py does not see the capture package: export PYTHONPATH=\"$site\", or install it for the"
      echo "  interpreter that runs training: ./ft.sh install $prefix --python /path/to/its/python"
    else
      echo "$py does not see the capture package: ./ft.sh install $prefix --python $py"
    fi
  fi
else
  echo "no $py here: ./ft.sh install $prefix --python /path/to/the/training/python"
fi
pc=$(installed /fusertrace.pc)
if [ -n "$pc" ]; then
  pcdir=$(dirname "$pc")
  case ":${PKG_CONFIG_PATH:-}:" in
    *":$pcdir:"*) ;;
    *) case $pcdir in
         /usr/lib/pkgconfig|/usr/share/pkgconfig|/usr/local/lib/pkgconfig|/usr/lib/*-linux-gnu/pkgconfig) ;;
         *) echo "C programs: export PKG_CONFIG_PATH=\"$pcdir\" for pkg-config --cflags --libs fusertrace (which sets an rpath, so no LD_LIBRARY_PATH is needed)" ;;
       esac ;;
  esac
fi
exit 0
