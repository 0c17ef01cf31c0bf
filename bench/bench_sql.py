"""bench_sql.py - SQL `decisions` as the inner table of a join, kept per cursor or replayed again.

    python3 bench/bench_sql.py --cli build/cli/fusertrace [--steps 64] [--chunk-calls 64]
        [--before OTHER_FUSERTRACE] [--dir DIR]

A trace from `fusertrace synth rht-switch --set steps=STEPS` (64 calls per step, 8 policies),
imported with --chunk-calls records per chunk, and three queries, each a process of its own
(wall time):

  inner   SELECT count(*) FROM calls c CROSS JOIN decisions d   (decisions rescanned per call)
  outer   SELECT count(*) FROM decisions d CROSS JOIN calls c   (one replay: SQLite's row cost)

`inner` runs with the default memory budget (the cursor keeps the replay's decisions) and with
`--memory` just under twice the store (the fallback: a replay per outer row, the baseline, what
the code did before the store); with --before, `inner` also under that binary. Prints the wall
times and the ratios inner/outer (target: about 1) and fallback/inner.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time


def run(cmd: list[str]) -> tuple[float, str]:
    t0 = time.monotonic()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return time.monotonic() - t0, out.stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--chunk-calls", type=int, default=64)
    ap.add_argument("--before", help="another fusertrace binary to time `inner` with")
    ap.add_argument("--dir")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        jsonl, trace = os.path.join(d, "t.jsonl"), os.path.join(d, "t.ftdb")
        subprocess.run([a.cli, "synth", "rht-switch", "--set", f"steps={a.steps}", "--jsonl",
                        jsonl], check=True)
        subprocess.run([a.cli, "import", jsonl, "-o", trace, "--chunk-calls",
                        str(a.chunk_calls)], check=True, capture_output=True)
        n_calls = int(run([a.cli, "sql", trace, "SELECT count(*) FROM calls"])[1])
        n_pol = int(run([a.cli, "sql", trace, "SELECT count(DISTINCT policy) FROM decisions"])[1])
        # the store: 36 B per call + 6 B per call and policy, a fallback budget under twice it
        store = n_calls * (36 + 6 * n_pol)
        low = f"{store * 3 // 2 // 1024}K"
        inner = "SELECT count(*) FROM calls c CROSS JOIN decisions d"
        outer = "SELECT count(*) FROM decisions d CROSS JOIN calls c"
        t_outer, r_outer = run([a.cli, "sql", trace, outer])
        t_inner, r_inner = run([a.cli, "sql", trace, inner])
        t_fall, r_fall = run([a.cli, "sql", "--memory", low, trace, inner])
        if not (r_outer == r_inner == r_fall):
            print(f"MISMATCH: {r_outer} {r_inner} {r_fall}")
            return 1
        print(f"trace: rht-switch steps={a.steps}, {n_calls} calls, {n_pol} policies, "
              f"chunks of {a.chunk_calls}; {r_inner} rows; store {store / 1e6:.2f} MB")
        print(f"outer  (decisions outside, reference)      {t_outer:8.2f} s")
        print(f"inner  (decisions inside, kept)            {t_inner:8.2f} s"
              f"   inner/outer {t_inner / t_outer:.2f}")
        print(f"inner  (--memory {low}: replay per row)   {t_fall:8.2f} s"
              f"   fallback/inner {t_fall / t_inner:.1f}x")
        if a.before:
            t_b, r_b = run([a.before, "sql", trace, inner])
            print(f"inner  (--before binary)                   {t_b:8.2f} s"
                  f"   before/inner {t_b / t_inner:.1f}x{'' if r_b == r_inner else ' MISMATCH'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
