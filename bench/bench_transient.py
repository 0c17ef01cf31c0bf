"""bench_transient.py - transient fusers against persistent ones, in one run (issue 19).

    python3 bench/bench_transient.py --cli build/cli/fusertrace [--calls 400000] [--share 0.5]
        [--switch-calls 5000] [--dir DIR] [--lib build/recorder/libfusertrace_rec.so]
        [--python PYTHON_WITH_TORCH | --no-capture]

The same training calls made twice by `fusertrace synth moe-standalone` (a Sequential MoE model,
4 layers x 4 microbatches, full recompute, MXFP8 with a Float8CurrentScaling detour step about
every --switch-calls calls, plus standalone te.ops modules, an RMSNorm and a router BasicLinear
per layer called in turn, making --share of the calls): once with standalone_fusers=transient (a new OperationFuser([op]) per standalone call,
declared, called and ended, as TE does) and once with standalone_fusers=persistent (one fuser per
standalone module: the baseline). Per mode, each a process of its own, its CPU time (user + sys,
from wait4) and peak RSS:

  record   synth straight into the recorder (-o)
  import   synth --jsonl - piped into `import -` (the import process alone)
  verify, replay (every policy), info, sql (SELECT label, count(*) FROM calls GROUP BY label)

and the trace's bytes per call (file and stored chunks). Then, unless --no-capture,
bench_capture.py --workload standalone under --python (an interpreter with torch; default this
one), with the stand-in TE of tests/python/standin: the hook's added time per call for a
transient fuser per call and for persistent fusers over the same ops, each against its own
hook-less baseline of the same run. It prints every figure, the transient/persistent ratios and
each target of issue 19 as met or MISSED: (1) <= 4 bytes per call more, (2) import and recording
<= 2x, (3) replay <= 2x within 256 MB, (4) the hook adds <= 5 us per call for transient fusers,
(7) verify, replay (every policy), info and sql each <= 2x and within 256 MB peak RSS.
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


def capture(ns) -> dict:
    """bench_capture.py's standalone table (printed) and its figures, or None when it fails."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "capture.json")
        cmd = [ns.python, os.path.join(here, "bench_capture.py"), "--cpu-time", "--workload",
               "standalone", "--rounds", str(ns.rounds), "--json", out]
        if ns.lib:
            cmd += ["--lib", ns.lib]
        env = dict(os.environ)
        path = [os.path.join(root, "recorder", "python"),
                os.path.join(root, "tests", "python", "standin")]
        env["PYTHONPATH"] = os.pathsep.join(path + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        if subprocess.run(cmd, env=env).returncode:
            print("# capture: bench_capture.py failed (an interpreter with torch: --python)")
            return None
        with open(out, encoding="utf-8") as f:
            return json.load(f)["standalone"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--calls", type=float, default=4e5)
    ap.add_argument("--share", type=float, default=0.5)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--switch-calls", type=float, default=5000,
                    help="calls between recipe detours (each detour makes a new recipe object)")
    ap.add_argument("--no-capture", action="store_true")
    ap.add_argument("--python", default=sys.executable, help="interpreter for bench_capture.py")
    ap.add_argument("--rounds", type=int, default=9, help="bench_capture.py rounds")
    ap.add_argument("--lib", default=None)
    ap.add_argument("--keep", action="store_true")
    ns = ap.parse_args()
    steps = max(1, round(ns.calls * (1 - ns.share) / PERSISTENT_CALLS_PER_STEP))
    per_step = PERSISTENT_CALLS_PER_STEP / (1 - ns.share)
    detour = max(2, round(ns.switch_calls / per_step))
    tmp = None
    d = ns.dir
    if d is None:
        tmp = tempfile.TemporaryDirectory()
        d = tmp.name
    os.makedirs(d, exist_ok=True)
    keys = ["--set", f"steps={steps}", "--set", f"standalone={ns.share}",
            "--set", f"detour_every={detour}"]
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
          f"{ns.share}, a recipe detour every {detour} steps), {t['fusers']} fuser instances "
          f"transient vs {p['fusers']} persistent; CPU time (user + sys) and peak RSS per process")
    print(f"{'':10}{'transient':>22}{'persistent':>22}{'ratio':>8}  target")
    verdicts = []

    def verdict(item: str, ok: bool, text: str) -> str:
        verdicts.append(f"  ({item}) {'met   ' if ok else 'MISSED'} {text}")
        return "met" if ok else "MISSED"

    extra = {k: (t[k] - p[k]) / n for k in ("file_bytes", "chunk_bytes")}
    print(f"{'bytes':10}{t['file_bytes']:>16} file {p['file_bytes']:>16} file "
          f"{extra['file_bytes']:>+7.3f} B/call more (<= 4)")
    print(f"{'':10}{t['chunk_bytes']:>14} chunks {p['chunk_bytes']:>14} chunks "
          f"{extra['chunk_bytes']:>+7.3f} B/call more (<= 4)")
    worst = max(extra.values())
    verdict("1", worst <= 4, f"trace: {worst:+.3f} bytes per call more than persistent (<= 4)")
    ratio, rss = {}, {}
    for op in ("record", "import", "verify", "replay", "info", "sql"):
        (tc, tm, tw), (pc, pm, pw) = t[op], p[op]
        ratio[op] = tc / pc if pc else float("inf")
        rss[op] = max(tm, pm)
        print(f"{op:10}{tc:>9.2f} s {tm:>7.1f} MB{pc:>11.2f} s {pm:>7.1f} MB"
              f"{ratio[op]:>8.2f}  <= 2x, each <= 256 MB  (wall {tw:.1f} / {pw:.1f} s, "
              f"RSS ratio {tm / pm:.2f})")
    for item, ops in (("2", ("import", "record")), ("3", ("replay",)),
                      ("7", ("import", "verify", "replay", "info", "sql"))):
        r = max(ratio[o] for o in ops)
        m = max(rss[o] for o in ops)
        what = ", ".join(ops)
        verdict(item, r <= 2 and (item == "2" or m <= 256),
                f"{what}: worst CPU-time ratio {r:.2f} (<= 2)"
                + ("" if item == "2" else f", worst peak RSS {m:.1f} MB (<= 256)"))
    if not ns.no_capture:
        sys.stdout.flush()
        cap = capture(ns)
        if cap is None:
            verdicts.append("  (4) not measured: bench_capture.py did not run (see above)")
        else:
            tr = cap["transient, C recorder"]["added_ns"]
            pe = cap["persistent, C recorder"]["added_ns"]
            print(f"{'capture':10}{tr / 1000:>10.2f} us/call{pe / 1000:>13.2f} us/call"
                  f"{tr / pe if pe > 0 else float('inf'):>8.2f}  transient <= 5 us added per call "
                  f"(C recorder, best of {ns.rounds} rounds, each against its own baseline)")
            verdict("4", tr <= 5000, f"capture hook: {tr / 1000:.2f} us added per call for a "
                    f"transient fuser per call (<= 5), {pe / 1000:.2f} us for persistent fusers")
    print("# targets (issue 19)")
    print("\n".join(sorted(verdicts)))
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
