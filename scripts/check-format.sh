#!/bin/sh
# Fail if any C/CUDA source differs from .clang-format (clang-format 14).
set -e
cd "$(dirname "$0")/.."
files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null || true)
[ -z "$files" ] && exit 0
clang-format --dry-run --Werror $files
