#!/bin/sh
# Install the Debian packages fusertrace needs, only those missing. Usage: scripts/deps.sh [test]
# (`test` adds what the test suite needs: CMocka, Debian's PyTorch for the capture-hook tests, pip
# with setuptools and wheel for the `pip install recorder/python` check, clang-format for the
# style check, the sqlite3 shell and headless Chromium for the SQL extension and HTML report
# tests, Open MPI for replay's MPI test).
set -e
pkgs="build-essential cmake pkg-config libsqlite3-dev libzstd-dev libjansson-dev libsimdjson-dev libxxhash-dev libopenblas-dev zstd"
if [ "${1:-}" = test ]; then
  pkgs="$pkgs libcmocka-dev python3 python3-torch clang-format sqlite3 python3-pip python3-setuptools python3-wheel libyajl-dev chromium openmpi-bin libopenmpi-dev"
fi
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
