"""bench_transient.py - transient fusers against persistent ones, in one run (issue 19).

    python3 bench/bench_transient.py --cli build/cli/fusertrace [--calls 400000]
        [--share 0.5] [--dir DIR] [--capture --lib build/recorder/libfusertrace_rec.so]

The same training calls made twice by `fusertrace synth moe-standalone` (a Sequential MoE model,
4 layers x 4 microbatches, full recompute, MXFP8 with Float8CurrentScaling detours, plus
standalone te.ops modules, an RMSNorm and a router BasicLinear per layer, making --share of the
calls): once with standalone_fusers=transient (a new OperationFuser([op]) per standalone call,
declared, called and ended, as TE does) and once with standalone_fusers=persistent (one fuser per
standalone module: the baseline). Per mode, each a process of its own, its CPU time (user + sys,
from wait4) and peak RSS:

  record   synth straight into the recorder (-o)
  import   synth --jsonl - piped into `import -` (the import process alone)
  verify, replay (every policy), info, sql (SELECT label, count(*) FROM calls GROUP BY label)

and the trace's bytes per call (file and stored chunks). It prints every figure and the
transient/persistent ratios (targets: <= 4 bytes per call more, import and recording <= 2x,
replay, verify, info, sql <= 2x, each <= 256 MB peak RSS at 10^8 calls). --capture adds
bench_capture.py's tables (the hook's added time per call for persistent fusers and for a
transient fuser per call, against the hook-less baseline of the same run).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

PERSISTENT_CALLS_PER_STEP = 4 * 4 * 2 * 2  # layers x microbatches x fusers x (fwd, recompute)


def run(cmd: list, stdin=None, stdout=subprocess.DEVNULL) -> tuple:
    """(cpu s, peak RSS MB, wall s) of one process; fails on a non-zero exit."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if p.returncode:
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}: {err}")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0, wall


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--calls", type=float, default=4e5)
    ap.add_argument("--share", type=float, default=0.5)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--capture", action="store_true")
    ap.add_argument("--lib", default=None)
    ap.add_argument("--keep", action="store_true")
    ns = ap.parse_args()
    steps = max(1, round(ns.calls * (1 - ns.share) / PERSISTENT_CALLS_PER_STEP))
    tmp = None
    d = ns.dir
    if d is None:
        tmp = tempfile.TemporaryDirectory()
        d = tmp.name
    os.makedirs(d, exist_ok=True)
    keys = ["--set", f"steps={steps}", "--set", f"standalone={ns.share}"]
    fig = {}
    for mode in ("transient", "persistent"):
        syn = [ns.cli, "synth", "moe-standalone", *keys, "--set", f"standalone_fusers={mode}"]
        rec, imp = os.path.join(d, f"{mode}.ftdb"), os.path.join(d, f"{mode}_imported.ftdb")
        for p in (rec, imp):
            if os.path.exists(p):
                os.remove(p)
        f = {"record": run(syn + ["-o", rec])}
        gen = subprocess.Popen(syn + ["--jsonl", "-"], stdout=subprocess.PIPE)
        f["import"] = run([ns.cli, "import", "-", "-o", imp], stdin=gen.stdout)
        gen.stdout.close()
        if gen.wait():
            sys.exit("synth --jsonl - failed")
        f["verify"] = run([ns.cli, "verify", rec])
        f["replay"] = run([ns.cli, "replay", rec, "--policy", "all"])
        f["info"] = run([ns.cli, "info", rec])
        f["sql"] = run([ns.cli, "sql", rec, "SELECT label, count(*) FROM calls GROUP BY label"])
        info = json.loads(subprocess.run([ns.cli, "info", rec, "--json"], check=True,
                                         capture_output=True, text=True).stdout)
        f["calls"] = info["calls"]
        f["fusers"] = info["fusers"]
        f["file_bytes"] = os.path.getsize(rec)
        f["chunk_bytes"] = info["chunk_stored_bytes"]
        fig[mode] = f
        if not ns.keep:
            for p in (rec, imp):
                os.remove(p)
    t, p = fig["transient"], fig["persistent"]
    if t["calls"] != p["calls"]:
        sys.exit(f"the two runs made {t['calls']} and {p['calls']} calls")
    n = t["calls"]
    print(f"# bench_transient: moe-standalone, {n} calls ({steps} steps, standalone share "
          f"{ns.share}), {t['fusers']} fuser instances transient vs {p['fusers']} persistent; "
          f"CPU time (user + sys) and peak RSS per process")
    print(f"{'':10}{'transient':>22}{'persistent':>22}{'ratio':>8}  target")
    print(f"{'bytes':10}{t['file_bytes']:>16} file {p['file_bytes']:>16} file "
          f"{(t['file_bytes'] - p['file_bytes']) / n:>+7.3f} B/call more (<= 4)")
    print(f"{'':10}{t['chunk_bytes']:>14} chunks {p['chunk_bytes']:>14} chunks "
          f"{(t['chunk_bytes'] - p['chunk_bytes']) / n:>+7.3f} B/call more (<= 4)")
    for op in ("record", "import", "verify", "replay", "info", "sql"):
        (tc, tm, tw), (pc, pm, pw) = t[op], p[op]
        print(f"{op:10}{tc:>9.2f} s {tm:>7.1f} MB{pc:>11.2f} s {pm:>7.1f} MB"
              f"{tc / pc if pc else float('nan'):>8.2f}  <= 2x, each <= 256 MB"
              f"  (wall {tw:.1f} / {pw:.1f} s)")
    if ns.capture:
        here = os.path.dirname(os.path.abspath(__file__))
        cmd = [sys.executable, os.path.join(here, "bench_capture.py"), "--cpu-time",
               "--rounds", "9"]
        if ns.lib:
            cmd += ["--lib", ns.lib]
        sys.stdout.flush()
        subprocess.run(cmd, check=True)
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
