"""Helpers shared by the capture tests: the fusertrace CLI and library from the environment
run_tests.sh sets (FT_CLI, FT_REC_LIB), subprocess runs of the training loop, trace reading."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train_loop.py")
CLI = os.environ.get("FT_CLI", "")
LIB = os.environ.get("FT_REC_LIB", "")
NOT_YET = "not implemented yet"


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run `fusertrace ARGS`; skip the calling test if the subcommand has not landed."""
    if not CLI or not os.path.exists(CLI):
        raise unittest.SkipTest("FT_CLI (the fusertrace binary) is not set")
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)
    if NOT_YET in p.stderr:
        raise unittest.SkipTest(f"`fusertrace {args[0]}` is {NOT_YET}: {p.stderr.strip()}")
    if check and p.returncode != 0:
        raise AssertionError(f"fusertrace {' '.join(args)} failed ({p.returncode}):\n"
                             f"{p.stdout}\n{p.stderr}")
    return p


def recorder_usable() -> str:
    """'' when FT_REC_LIB is a usable recorder library, else why not."""
    from fusertrace_capture import _writer  # noqa: PLC0415
    if not LIB:
        return "FT_REC_LIB is not set"
    path, why = _writer.find_library(LIB)
    return "" if path else why


def env_for(version: str, **extra: str) -> dict:
    env = dict(os.environ)
    env["FT_STANDIN_TE"] = version
    env.pop("FUSERTRACE_CAPTURE", None)
    env.update(extra)
    return env


def run_training(out_dir: str, version: str, *, jsonl: bool, steps: int = 4,
                 extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """The training loop under `python3 -m fusertrace_capture.run`."""
    env = env_for(version, **(extra_env or {}))
    if jsonl:
        env["FUSERTRACE_JSONL"] = "1"
    else:
        env["FUSERTRACE_LIB"] = LIB
    p = subprocess.run([sys.executable, "-m", "fusertrace_capture.run", "-o", out_dir, TRAIN,
                        "--steps", str(steps)], capture_output=True, text=True, env=env,
                       timeout=300)
    if p.returncode != 0:
        raise AssertionError(f"training failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def read_jsonl(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def export(trace: str) -> list:
    """Records of a trace: the stream itself for .jsonl, `fusertrace export` for .ftdb."""
    if trace.endswith(".jsonl"):
        return read_jsonl(trace)
    p = cli("export", trace)
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
