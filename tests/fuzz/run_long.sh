#!/bin/sh
# The long runs of fuzz_cli and fuzz_open (tests/fuzz/README.md): build the targets, run each for
# SECONDS (default 3600) one after the other under nice, new inputs under OUT (default
# /tmp/ft-fuzz), and print where the findings are. fuzz_cli runs its commands inside a scratch
# folder under $TMPDIR, and libFuzzer writes crash-*/timeout-* artifacts into the folder the
# command was running in: -artifact_prefix puts them under OUT instead.
#   tests/fuzz/run_long.sh [SECONDS] [OUT]
set -e
cd "$(dirname "$0")/../.."
secs=${1:-3600}
out=${2:-/tmp/ft-fuzz}
tests/fuzz/build.sh
mkdir -p "$out/cli" "$out/open" "$out/artifacts"
export TMPDIR=${TMPDIR:-/dev/shm}
nice build-fuzz/tests/fuzz/fuzz_cli -max_total_time="$secs" -max_len=512 \
  -dict=tests/fuzz/cli.dict -timeout=60 -rss_limit_mb=4000 \
  -artifact_prefix="$out/artifacts/cli-" "$out/cli" tests/fuzz/corpus/cli \
  >"$out/cli.log" 2>&1 || true
nice build-fuzz/tests/fuzz/fuzz_open -fork=1 -ignore_crashes=1 -max_total_time="$secs" \
  -max_len=1024 -artifact_prefix="$out/artifacts/open-" "$out/open" tests/fuzz/corpus/open \
  >"$out/open.log" 2>&1 || true
echo "logs: $out/cli.log $out/open.log"
echo "findings (crash-*, timeout-*, leak-*, oom-*):"
ls "$out/artifacts"
