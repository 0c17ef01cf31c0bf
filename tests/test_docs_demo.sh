#!/bin/sh
# The demo's output as README.md and docs/reading-a-report.md show it is what `fusertrace demo`
# prints, byte for byte: README's table block (the table and the raise lines) and the reading's
# whole-output block. With --fix, both blocks are rewritten from the demo's output instead (after
# a change that moves a figure, or adds a policy); review the diff.
# Usage: tests/test_docs_demo.sh FUSERTRACE_BIN [--fix]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
fix=0
[ "${2:-}" = "--fix" ] && fix=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ft-docs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$1" demo >"$tmp/demo.txt"
# README: the table (header to the blank line), a blank line, the raise lines
awk '/^policy +calls/ {on = 1} on && /^$/ {exit} on {print}' "$tmp/demo.txt" >"$tmp/readme"
[ -s "$tmp/readme" ] || { echo "the demo printed no table"; exit 1; }
echo >>"$tmp/readme"
grep -E '^[a-z0-9-]+ raises on [0-9]+ calls' "$tmp/demo.txt" >>"$tmp/readme" || true
# The fenced block of $1 whose first line matches the regex $2, with its lines replaced by the
# file $3; exits 3 when there is no such block.
replace_block() {
  awk -v re="$2" -v new="$3" '
    function emit(   l) { while ((getline l < new) > 0) print l; close(new) }
    state == 0 && /^```/ { fence = $0; state = 1; next }
    state == 1 { if ($0 ~ re && !done) { print fence; emit(); state = 2; done = 1; next }
                 print fence; print; state = /^```/ ? 0 : 3; next }
    state == 2 { if (/^```/) { print; state = 0 } next }
    state == 3 { print; if (/^```/) state = 0; next }
    { print }
    END { if (!done) exit 3 }' "$1"
}
status=0
for doc in README.md docs/reading-a-report.md; do
  case $doc in
  README.md) re='^policy +calls'; block="$tmp/readme" ;;
  *) re='^fusertrace demo:'; block="$tmp/demo.txt" ;;
  esac
  if ! replace_block "$root/$doc" "$re" "$block" >"$tmp/new"; then
    echo "$doc: no block of the demo's output found (a fenced block starting like the demo's)"
    exit 1
  fi
  if cmp -s "$tmp/new" "$root/$doc"; then continue; fi
  if [ $fix = 1 ]; then
    cp "$tmp/new" "$root/$doc"
    echo "$doc: the demo's block rewritten from \`fusertrace demo\`"
  else
    diff -u "$root/$doc" "$tmp/new" || true
    echo "$doc: the demo's block differs from \`fusertrace demo\` (tests/test_docs_demo.sh BIN --fix rewrites it)"
    status=1
  fi
done
[ $status = 0 ] && [ $fix = 0 ] && echo "README.md and docs/reading-a-report.md show the demo's output"
exit $status
