#!/bin/sh
# Build the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined) into build-fuzz/.
# Not part of CI. Run:  tests/fuzz/build.sh && build-fuzz/fuzz_jsonl -max_total_time=60 \
#   -dict=tests/fuzz/jsonl.dict build-fuzz/corpus-jsonl tests/fuzz/corpus/jsonl
# (new inputs go to the first folder; copy interesting ones into tests/fuzz/corpus/jsonl/).
set -e
cd "$(dirname "$0")/../.."
CC=${CC:-clang}
out=build-fuzz
mkdir -p "$out/corpus-jsonl"
flags="-g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all"
inc="-Icommon -Ischema -Irecorder"
# shellcheck disable=SC2046,SC2086
$CC $flags $inc tests/fuzz/fuzz_jsonl.c common/common.c recorder/jsonl_import.c \
  recorder/jsonl_writer.c $(pkg-config --cflags --libs jansson libxxhash) -lm \
  -o "$out/fuzz_jsonl"
echo "built $out/fuzz_jsonl"
