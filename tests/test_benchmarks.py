"""The benchmark scripts run: a smoke run of bench_vector.py, plain and with action sequences (a step helper that
returned the step's results once broke every script built on workloads.best_rate)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


@pytest.mark.parametrize("extra", [[], ["--sequences", "3"]], ids=["plain", "sequences"])
def test_bench_vector_runs_and_compares(extra):
    run = subprocess.run(
        [sys.executable, "bench_vector.py", "--envs", "2", "--workloads", "cartpole", "--rounds", "1",
         "--seconds", "0.05", *extra],
        cwd=BENCHMARKS, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "shoal best / peer best" in run.stdout
    summary = run.stdout.split("shoal best / peer best")[1]
    assert "cartpole" in summary and "x " in summary, run.stdout
