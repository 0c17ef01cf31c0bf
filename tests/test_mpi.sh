#!/bin/sh
# test_mpi.sh - replay over the processes of an MPI job (cli/par.c), on one machine: rank traces
# from `synth demo stages=3 stage_only=R`, replayed by `mpirun -n 3` (and -n 2, and -n 4 with a
# process that owns no trace), must give the one-process report byte for byte: the decisions
# (text, JSON, CSV) and `--numerics cpu --shrink 8` (the numerics line's seconds and the
# estimate's range, which are times, masked); one trace over 3 processes with numerics: every
# process runs a part of its sampled calls (FUSERTRACE_MPI_SHARES says which) and the report is
# the one-process one; a trace damaged in a chunk that only its own process reads stops the job
# with one message from process 0 naming the process and the file, and the one-process exit
# status (and, damaged in a trace every process reads for numerics, one message); an option that needs every call in order is refused; a process killed
# mid-run ends the job with a non-zero status, not a hang.
# Usage: test_mpi.sh FUSERTRACE (registered only in builds with -DFT_MPI=ON)
set -u
F=$1
command -v mpirun >/dev/null || { echo "no mpirun: skipped"; exit 77; }
command -v sqlite3 >/dev/null || { echo "no sqlite3 shell: skipped"; exit 77; }
# sanitizer builds: Open MPI's own allocations that outlive MPI_Finalize are not fusertrace's leaks
LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$(cd "$(dirname "$0")" && pwd)/lsan-openmpi.supp:print_suppressions=0"
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export LSAN_OPTIONS ASAN_OPTIONS
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
M="timeout 120 mpirun --oversubscribe --allow-run-as-root"
fail() { echo "FAIL: $*"; exit 1; }
for r in 0 1 2; do
  "$F" synth demo --set stages=3 --set stage_only=$r --set steps=4 -o "$T/rank$r.ftdb" >/dev/null ||
    fail "synth rank $r"
done
R="$T/rank0.ftdb $T/rank1.ftdb $T/rank2.ftdb"
mask() { sed -e 's/[0-9.]* s on [0-9]* threads\{0,1\}/S s on N threads/' \
  -e 's/estimated [0-9]* to [0-9]* s/estimated A to B s/' \
  -e 's/"\(seconds\|low\|high\|threads\)": [0-9.e+-]*/"\1": T/' "$1"; }
# FUSERTRACE_MPI_SHARES's lines (name, processes): one per process, on no output, each process
# with some sampled calls, together the one-process run's ($total)
shares() {
  grep -q "sampled calls run" "$T/mpi.$1" "$T/mpi.$1.err" && fail "$1: the share line in the output"
  [ "$(grep -c '^process [0-9]* of '"$2"': [0-9]* traces, [0-9]* sampled calls run$' "$T/shares")" -eq "$2" ] ||
    { cat "$T/shares"; fail "$1: not one share line per process"; }
  grep -q ' 0 sampled calls run$' "$T/shares" && { cat "$T/shares"; fail "$1: a process ran no call"; }
  total=0
  each=$(sed 's/.*traces, \([0-9]*\) sampled.*/\1/' "$T/shares" | tr '\n' ' ')
  for x in $each; do total=$((total + x)); done
  ran=$(sed -n 's/^numerics (cpu): \([0-9]*\) of .*/\1/p' "$T/one.$1")
  [ -n "$ran" ] || ran=$(sed -n 's/.*"calls_run": \([0-9]*\).*/\1/p' "$T/one.$1" | head -1)
  [ "$total" = "$ran" ] || { cat "$T/shares"; fail "$1: the processes ran $total calls, one process $ran"; }
}
compare() { # name, options...
  name=$1
  shift
  # shellcheck disable=SC2086
  "$F" replay $R "$@" >"$T/one.$name" 2>"$T/one.$name.err" || fail "$name: one process"
  for n in 2 3 4; do
    rm -f "$T/shares"
    # shellcheck disable=SC2086
    FUSERTRACE_MPI_SHARES="$T/shares" $M -n $n "$F" replay $R "$@" >"$T/mpi.$name" \
      2>"$T/mpi.$name.err" || { cat "$T/mpi.$name.err"; fail "$name: mpirun -n $n"; }
    if ! cmp -s "$T/one.$name" "$T/mpi.$name"; then
      mask "$T/one.$name" >"$T/a"
      mask "$T/mpi.$name" >"$T/b"
      diff "$T/a" "$T/b" || fail "$name: mpirun -n $n differs from one process"
    fi
    case $name in numerics*) shares "$name" "$n" ;; *) [ -e "$T/shares" ] && fail "$name: shares without numerics" ;; esac
    echo "ok: $name, $n processes"
  done
}
compare text
compare json --json
compare csv --csv
compare numerics --numerics cpu --shrink 8 --sample 6
compare numerics-json --numerics cpu --shrink 8 --sample 6 --json
grep -q "numerics (cpu, 4 processes)" "$T/mpi.numerics.err" || fail "no job-wide estimate line"

# the sampled calls of one trace split over 3 processes: every process runs some, together all of
# them once, and the report is the one-process one
single() { # name, processes, options...
  name=$1
  n=$2
  shift 2
  "$F" replay "$T/rank1.ftdb" "$@" >"$T/one.$name" 2>/dev/null || fail "$name: one process"
  rm -f "$T/shares"
  FUSERTRACE_MPI_SHARES="$T/shares" $M -n "$n" "$F" replay "$T/rank1.ftdb" "$@" \
    >"$T/mpi.$name" 2>"$T/mpi.$name.err" || { cat "$T/mpi.$name.err"; fail "$name: mpirun"; }
  mask "$T/one.$name" >"$T/a"
  mask "$T/mpi.$name" >"$T/b"
  diff "$T/a" "$T/b" || fail "$name: $n processes differ from one process"
  shares "$name" "$n"
  echo "ok: $name, one trace, $n processes, $total calls: $each"
}
single split 3 --numerics cpu --shrink 8
single split-json 3 --numerics cpu --shrink 8 --json

# a chunk of rank 1's trace damaged: process 1 of 3 alone reads it
cp "$T/rank1.ftdb" "$T/bad1.ftdb"
sqlite3 "$T/bad1.ftdb" "UPDATE chunks SET data = X'00' || substr(data, 2) WHERE id = (SELECT max(id) FROM chunks)"
B="$T/rank0.ftdb $T/bad1.ftdb $T/rank2.ftdb"
# shellcheck disable=SC2086
"$F" replay $B >/dev/null 2>"$T/one.err"
one=$?
# shellcheck disable=SC2086
$M -n 3 "$F" replay $B >"$T/out" 2>"$T/err"
three=$?
[ "$one" -ne 0 ] && [ "$three" -eq "$one" ] || fail "damaged trace: exit $three, one process $one"
[ "$(grep -c "^fusertrace replay:" "$T/err")" -eq 1 ] || { cat "$T/err"; fail "not one message"; }
grep -q "^fusertrace replay: MPI process 1: .*bad1.ftdb: chunk" "$T/err" ||
  { cat "$T/err"; fail "the message does not name process 1 and the chunk"; }
[ -s "$T/out" ] && fail "a report was written"
echo "ok: damaged trace"

# the damaged trace alone with numerics: every process reads it (each runs a part of its calls)
"$F" replay "$T/bad1.ftdb" --numerics cpu --shrink 8 >/dev/null 2>"$T/one.err"
one=$?
$M -n 3 "$F" replay "$T/bad1.ftdb" --numerics cpu --shrink 8 >"$T/out" 2>"$T/err"
three=$?
[ "$one" -ne 0 ] && [ "$three" -eq "$one" ] || fail "damaged split trace: exit $three, one process $one"
[ "$(grep -c "^fusertrace replay:" "$T/err")" -eq 1 ] || { cat "$T/err"; fail "split: not one message"; }
grep "^fusertrace replay:" "$T/one.err" >"$T/a"
grep "^fusertrace replay:" "$T/err" >"$T/b"
diff "$T/a" "$T/b" || fail "damaged split trace: not the one-process message"
[ -s "$T/out" ] && fail "split: a report was written"
echo "ok: damaged trace, split over 3 processes"

# an option that follows every call in order is refused, once
# shellcheck disable=SC2086
$M -n 2 "$F" replay $R --per-call "$T/pc.jsonl" >/dev/null 2>"$T/err"
[ $? -eq 2 ] || fail "--per-call under MPI: not a usage error"
[ "$(grep -c "is not split over MPI processes" "$T/err")" -eq 1 ] || { cat "$T/err"; fail "--per-call"; }
[ -e "$T/pc.jsonl" ] && fail "--per-call wrote a file"
echo "ok: refused option"

# a process killed mid-run (numerics of every call take a while): the job ends, non-zero
# shellcheck disable=SC2086
$M -n 3 "$F" replay $R --numerics cpu --all --max-seconds 0 >/dev/null 2>"$T/kill.err" &
job=$!
killed=""
i=0
while [ -z "$killed" ] && [ $i -lt 100 ]; do
  sleep 0.2
  i=$((i + 1))
  for p in $(pgrep -f "fusertrace replay $T/rank0.ftdb" || true); do
    if tr '\0' '\n' </proc/"$p"/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1; then
      sleep 1
      kill -9 "$p" && killed=$p
    fi
  done
done
wait $job
rc=$?
[ -n "$killed" ] || fail "no process 1 to kill"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "killed process: exit $rc (124: a hang)"
echo "ok: killed process, exit $rc"
