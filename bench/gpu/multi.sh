#!/bin/sh
# bench/gpu/multi.sh - sampled calls per second of `replay --numerics cuda` at DeepSeek-V3 EP8's
# size (synth demo: 32 experts, hidden 7168, ffn 2048, 32768 tokens, 4 layers, 8 steps) on 1, 2,
# ... N GPUs of this machine (--devices 0..K-1), the one-GPU run the baseline of the same run,
# ROUNDS rounds alternating; then whether `--devices 0` and the default path (every visible
# device) write the same report (the numerics line's seconds and the estimate masked), and with
# an MPI build (FT_MPI_BIN, its mpirun on PATH) the same sample spread over 2 processes on GPU 0.
# Binaries from bench/gpu/prebuild.sh (FT_GPU_BIN=DIR, default .gpubin); reports to $OUT.
# Usage: [FT_GPU_BIN=DIR] [SAMPLE=N] [ROUNDS=N] [MAX_GPUS=N] sh bench/gpu/multi.sh
set -u
B=${FT_GPU_BIN:-.gpubin}
OUT=${OUT:-gpu-out}
SAMPLE=${SAMPLE:-24}
ROUNDS=${ROUNDS:-2}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
F="$B/fusertrace"
NG=$(nvidia-smi -L | wc -l)
[ -n "${MAX_GPUS:-}" ] && [ "$MAX_GPUS" -lt "$NG" ] && NG=$MAX_GPUS
T=$(mktemp -d)
ds="--set experts=32 --set hidden=7168 --set ffn=2048 --set tokens=32768 --set layers=4 --set steps=8"
# shellcheck disable=SC2086
"$F" synth demo $ds -o "$T/ds.ftdb" -f >/dev/null
# two rank traces of the same run, for the MPI processes
# shellcheck disable=SC2086
for r in 0 1; do "$F" synth demo $ds --set stages=2 --set stage_only=$r -o "$T/r$r.ftdb" -f >/dev/null; done
rate() { # JSON report -> calls/s of the numerics pass
  python3 -c 'import json,sys; n=json.load(open(sys.argv[1]))["numerics"]; print("%.3f %d %.3f" % (n["calls_run"]/n["seconds"], n["calls_run"], n["seconds"]))' "$1"
}
devs() { i=0; s=0; while [ $i -lt "$1" ]; do [ $i -gt 0 ] && s="$s,$i"; i=$((i + 1)); done; echo $s; }
echo "== $NG GPUs, --sample $SAMPLE, $ROUNDS rounds"
r=1
while [ $r -le "$ROUNDS" ]; do
  k=1
  while [ $k -le "$NG" ]; do
    "$F" replay "$T/ds.ftdb" --numerics cuda --sample "$SAMPLE" --devices "$(devs $k)" --json \
      >"$OUT/multi_$k.json" 2>>"$OUT/multi.err" || echo "rc=$? on $k GPUs"
    set -- $(rate "$OUT/multi_$k.json")
    [ $k -eq 1 ] && base=$1
    echo "round $r: $k GPU(s): $1 calls/s ($2 calls in $3 s), $(awk "BEGIN{printf \"%.2f\", $1 / $base}")x the 1-GPU rate of this round (target $(awk "BEGIN{printf \"%.1f\", 0.9 * $k}")x)"
    k=$((k + 1))
  done
  r=$((r + 1))
done
mask() { sed -e 's/[0-9.]* s on [0-9]* threads\{0,1\}/S s on N threads/' \
  -e 's/estimated [0-9]* to [0-9]* s/estimated A to B s/' "$1"; }
"$F" replay "$T/ds.ftdb" --numerics cuda --sample 8 >"$OUT/default.txt" 2>>"$OUT/multi.err"
"$F" replay "$T/ds.ftdb" --numerics cuda --sample 8 --devices 0 >"$OUT/dev0.txt" 2>>"$OUT/multi.err"
mask "$OUT/default.txt" >"$T/a"
mask "$OUT/dev0.txt" >"$T/b"
if cmp -s "$T/a" "$T/b"; then echo "--devices 0 and the default: the same report"; else
  echo "--devices 0 and the default DIFFER"; diff "$T/a" "$T/b" | head; fi
if [ -n "${FT_MPI_BIN:-}" ] && command -v mpirun >/dev/null; then
  "$F" replay "$T/r0.ftdb" "$T/r1.ftdb" --numerics cuda --sample 12 --json >"$OUT/mpi1.json" 2>>"$OUT/multi.err"
  mpirun --allow-run-as-root --oversubscribe -n 2 "$FT_MPI_BIN" replay "$T/r0.ftdb" "$T/r1.ftdb" \
    --numerics cuda --sample 12 --json >"$OUT/mpi2.json" 2>>"$OUT/multi.err"
  echo "1 process: $(rate "$OUT/mpi1.json"); 2 MPI processes on GPU 0: $(rate "$OUT/mpi2.json")"
else
  echo "no MPI build or no mpirun here: the 2-process run was not made"
fi
rm -rf "$T"
