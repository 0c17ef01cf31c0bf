"""version_diff.py - cross-check fusertrace's PEP 440 versions (ft_version_parse/ft_version_cmp,
tefuser/env.c) against packaging.version, the module TE compares the cuDNN frontend version with.

A manual tool (not run by ctest: it needs python3-packaging). Random version strings (release
segments of any length, epochs, pre/post/dev releases in PEP 440's spellings, local labels, some
made invalid) are compared pairwise by both; every disagreement (order, or valid vs invalid) is
printed. Build plan_driver as te_fusion_diff.py's docstring says, then:
  python3 tefuser/te_diff/version_diff.py --driver ./plan_driver [--pairs N] [--seed S]
Exit status 1 on any disagreement.
"""
import argparse, random, subprocess, sys

from packaging.version import InvalidVersion, Version


def rnd(r):
    seps = ["", ".", "-", "_"]
    s = "v" if r.random() < 0.05 else ""
    if r.random() < 0.05: s += f"{r.randint(0, 2)}!"
    s += ".".join(str(r.choice([0, 0, 1, 2, 10, 23, 24, 99])) for _ in range(r.randint(1, 5)))
    if r.random() < 0.4:
        s += r.choice(seps) + r.choice(["a", "b", "rc", "c", "alpha", "beta", "pre", "preview", "A",
                                        "RC"]) + r.choice(["", str(r.randint(0, 3))])
    if r.random() < 0.3:
        s += r.choice(["-" + str(r.randint(0, 3)),
                       r.choice(seps) + r.choice(["post", "rev", "r"]) + r.choice(["", "1"])])
    if r.random() < 0.3: s += r.choice(seps) + r.choice(["dev", "DEV"]) + r.choice(["", "2"])
    if r.random() < 0.3:
        s += "+" + r.choice(["local", "ubuntu-1", "abc.5", "5", "01", "a_b", "cu12.1"])
    if r.random() < 0.05:
        s = r.choice([" " + s, s + " ", s + "x", s + ".", "x" + s, s.replace(".", "..", 1)])
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--driver", required=True)
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = random.Random(a.seed)
    pairs = [(rnd(r), rnd(r)) for _ in range(a.pairs)]
    out = subprocess.run([a.driver], input="".join(f"VCMP\t{x}\t{y}\n" for x, y in pairs),
                         capture_output=True, text=True).stdout.splitlines()
    bad = invalid = 0
    for (x, y), got in zip(pairs, out):
        try:
            vx, vy = Version(x), Version(y)
            want = str((vx > vy) - (vx < vy))
        except InvalidVersion:
            want = "ERR"
            invalid += 1
        if got != want:
            bad += 1
            if bad <= 10: print(f"DIFF {x!r} {y!r}: packaging {want}, fusertrace {got}")
    print(f"seed {a.seed}: {len(pairs)} pairs, {invalid} with an invalid version, {bad} "
          "disagreements with packaging")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
