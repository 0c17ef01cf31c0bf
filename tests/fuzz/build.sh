#!/bin/sh
# Build the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined) into build-fuzz/.
# Not part of CI (needs clang and libclang-rt-14-dev). Run, for example:
#   tests/fuzz/build.sh && build-fuzz/fuzz_jsonl -max_total_time=60 \
#     -dict=tests/fuzz/jsonl.dict build-fuzz/corpus-jsonl tests/fuzz/corpus/jsonl
# and likewise fuzz_model, fuzz_chunk, fuzz_packed with their corpus folders (fuzz_packed
# writes a scratch trace under $TMPDIR). New inputs go to the first folder; merge interesting
# ones into tests/fuzz/corpus/NAME/ with -merge=1.
set -e
cd "$(dirname "$0")/../.."
CC=${CC:-clang}
CXX=${CXX:-clang++}
out=build-fuzz
for t in jsonl model chunk packed; do mkdir -p "$out/corpus-$t"; done
# trace.sql embedded as a C string, as schema/CMakeLists.txt does
cmake -DIN=schema/trace.sql -DOUT="$out/trace_sql.h" -P schema/embed_sql.cmake
flags="-g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all"
inc="-Icommon -Ischema -Irecorder -Itefuser -I$out"
libs="$(pkg-config --cflags --libs jansson libxxhash libzstd sqlite3 simdjson) -lstdc++ -lm"
schema="schema/chunk.c schema/trace.c schema/reader.c schema/verify.c"
recorder="recorder/recorder.c recorder/canon.c recorder/rec_packed.c"
# the importer's simdjson fast path is C++: one object, linked into fuzz_jsonl
# shellcheck disable=SC2086
$CXX -g -O1 -std=c++17 -fno-exceptions -fno-rtti -fsanitize=fuzzer-no-link,address,undefined \
  $inc $(pkg-config --cflags simdjson) -c recorder/json_fast.cpp -o "$out/json_fast.o"
# shellcheck disable=SC2086
build() {
  name=$1
  shift
  $CC $flags $inc "$@" $libs -o "$out/$name.new"
  mv "$out/$name.new" "$out/$name" # a running fuzzer keeps its old binary
  echo "built $out/$name"
}
# shellcheck disable=SC2086
build fuzz_jsonl tests/fuzz/fuzz_jsonl.c common/common.c common/seqset.c \
  recorder/jsonl_import.c recorder/jsonl_writer.c "$out/json_fast.o"
build fuzz_model tests/fuzz/fuzz_model.c tefuser/*.c \
  common/common.c
build fuzz_chunk tests/fuzz/fuzz_chunk.c common/common.c schema/chunk.c
# shellcheck disable=SC2086
build fuzz_packed tests/fuzz/fuzz_packed.c common/common.c common/seqset.c $schema $recorder
