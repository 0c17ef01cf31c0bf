#!/bin/sh
# bench/gpu/gputime.sh - check and time `replay --gpu-time` in one device run, with binaries from
# bench/gpu/prebuild.sh (FT_GPU_BIN=DIR, default .gpubin): test_cuda (TESTS=0 skips it), then on
# synth traces at model sizes the same sample three ways, in alternating rounds (ROUNDS, default
# 2): `--numerics cuda`, `--numerics cuda --gpu-time`, `--gpu-time` alone, each command's wall
# time, and the ratios of the two timed runs against the numerics run of the same round (the
# baseline); then bench_cuda's lines for the DeepSeek-V3 shape (BENCH=0 skips it). Traces
# (SHAPES): small = `synth demo` with the issue's 32-expert hidden-2048 sizes, deepseek = `synth
# demo` at DeepSeek-V3 EP8's (32 experts, hidden 7168, ffn 2048, 32768 tokens), both 4 layers and
# 8 steps; rs = `synth rht-switch` at DeepSeek's sizes (other fusions under te-3410-commit1 and
# recipe-object), s3 = its S3 variant (a switch to disable_rht=1 at step 3: other quantization).
# The reports (the last round's text per mode, JSON per trace, HTML of the first) and the logs
# go to $OUT (or ./gpu-out).
# Usage: [FT_GPU_BIN=DIR] [ROUNDS=N] [SAMPLE=N] [SHAPES="small deepseek rs s3"] sh bench/gpu/gputime.sh
set -u
B=${FT_GPU_BIN:-.gpubin}
OUT=${OUT:-gpu-out}
ROUNDS=${ROUNDS:-2}
SAMPLE=${SAMPLE:-16}
SHAPES=${SHAPES:-"small deepseek"}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
F="$B/fusertrace"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
now() { date +%s.%N; }
if [ "${TESTS:-1}" != 0 ]; then
  echo "== test_cuda"
  timeout ${FT_TEST_TIMEOUT:-120} "$B/test_cuda" >"$OUT/test_cuda.txt" 2>&1
  echo "test_cuda rc=$?"
  grep -v "^\[ *\(RUN\|OK\) *\]" "$OUT/test_cuda.txt" | grep -v "bit-equal\|: cpu 0 gpu 0" | tail -25
fi
T=$(mktemp -d)
for shape in $SHAPES; do
  ds="--set experts=32 --set hidden=7168 --set ffn=2048 --set tokens=32768 --set layers=4 --set steps=8"
  case $shape in
    small) scen="demo --set experts=32 --set hidden=2048 --set ffn=1024 --set tokens=8192 --set layers=4 --set steps=8" ;;
    deepseek) scen="demo $ds" ;;
    rs) scen="rht-switch $ds" ;;
    s3) scen="rht-switch $ds --set detour_every=0 --set rht_flip_every=0 --set switch_step=3 --set switch_recipe=nvfp4:disable_rht=1" ;;
    *) echo "unknown shape $shape"; continue ;;
  esac
  # shellcheck disable=SC2086
  "$F" synth $scen -o "$T/$shape.ftdb" -f
  echo "== $shape: --sample $SAMPLE, $ROUNDS rounds of numerics / numerics+gpu-time / gpu-time"
  r=1
  while [ "$r" -le "$ROUNDS" ]; do
    for mode in numerics both gputime; do
      case $mode in
        numerics) opts="--numerics cuda" ;;
        both) opts="--numerics cuda --gpu-time" ;;
        gputime) opts="--gpu-time" ;;
      esac
      t0=$(now)
      # shellcheck disable=SC2086
      "$F" replay "$T/$shape.ftdb" $opts --sample "$SAMPLE" >"$OUT/${shape}_${mode}.txt" \
        2>>"$OUT/${shape}.err"
      rc=$?
      t1=$(now)
      eval "w_$mode=$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}")"
      echo "$shape round $r $mode rc=$rc wall $(eval echo \$w_$mode) s"
      [ "$rc" = 0 ] || tail -3 "$OUT/${shape}.err"
    done
    # shellcheck disable=SC2154
    echo "RATIO $shape round $r: numerics+gpu-time / numerics $(awk "BEGIN{printf \"%.3f\", $w_both / $w_numerics}")x, gpu-time / numerics $(awk "BEGIN{printf \"%.3f\", $w_gputime / $w_numerics}")x (numerics $w_numerics s)"
    r=$((r + 1))
  done
  grep -A16 "^gpu time" "$OUT/${shape}_both.txt"
  grep "numerics (cuda)" "$OUT/${shape}_both.txt" "$OUT/${shape}_numerics.txt"
  "$F" replay "$T/$shape.ftdb" --gpu-time --sample "$SAMPLE" --json >"$OUT/${shape}_gputime.json" \
    2>/dev/null
  echo "$shape json rc=$? $(wc -c <"$OUT/${shape}_gputime.json") bytes"
  if [ -z "${html_done:-}" ]; then
    "$F" replay "$T/$shape.ftdb" --gpu-time --sample "$SAMPLE" --html "$OUT/${shape}_gputime.html" \
      >/dev/null 2>&1
    echo "$shape html rc=$?"
    html_done=1
  fi
done
rm -rf "$T"
if [ "${BENCH:-1}" != 0 ] && [ -x "$B/bench_cuda" ]; then
  echo "== bench_cuda STEP (DeepSeek-V3 shape)"
  FT_BENCH_ONLY=deepseek-v3 FT_BENCH_NO_INTERLEAVE=1 FT_BENCH_NO_CUBLAS=1 timeout 90 \
    "$B/bench_cuda" 10 >"$OUT/bench_cuda.txt" 2>&1
  echo "bench_cuda rc=$?"
  grep "RESULT\|STEP\|PARTS\|MXFP8\|NVFP4" "$OUT/bench_cuda.txt" | grep -v "qpacked\|quant "
fi
