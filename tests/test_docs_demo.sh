#!/bin/sh
# The demo's table as README.md and docs/reading-a-report.md show it is what `fusertrace demo`
# prints: every row and the raise line, the measured ns/call column aside (it is a timing).
# Usage: tests/test_docs_demo.sh FUSERTRACE_BIN
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ft-docs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# the table rows (header to the blank line, the last column dropped) and the raise lines
rows() {
  awk '/^policy +calls/ {on = 1} on && /^$/ {exit} on {$NF = ""; print}' "$1"
  grep -E '^[a-z0-9-]+ raises on [0-9]+ calls' "$1" || true
}
"$1" demo >"$tmp/demo.txt"
rows "$tmp/demo.txt" >"$tmp/want"
[ -s "$tmp/want" ] || { echo "the demo printed no table"; exit 1; }
for doc in README.md docs/reading-a-report.md; do
  rows "$root/$doc" >"$tmp/got"
  if ! diff -u "$tmp/want" "$tmp/got"; then
    echo "$doc: the demo table differs from \`fusertrace demo\` (regenerate it)"
    exit 1
  fi
done
echo "README.md and docs/reading-a-report.md show the demo's table"
