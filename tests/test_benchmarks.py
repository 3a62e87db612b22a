"""The benchmark scripts run: a smoke run of bench_vector.py, plain and with action sequences (a step helper that
returned the step's results once broke every script built on workloads.best_rate), of bench_workers.py,
bench_hosted.py, bench_envpool_tasks.py and handoff.py."""

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


def test_bench_workers_runs_and_says_what_the_default_chose():
    run = subprocess.run(
        [sys.executable, "bench_workers.py", "--envs", "4", "--workloads", "dict", "--workers", "2", "--rounds", "1",
         "--seconds", "0.05"],
        cwd=BENCHMARKS, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(line for line in run.stdout.splitlines() if line.startswith("dict x 4:"))
    assert "default chose [" in line and "serial" in line and "mp 2" in line, run.stdout


def test_bench_hosted_runs_and_compares():
    run = subprocess.run(
        [sys.executable, "bench_hosted.py", "--rows", "64", "--units", "2", "--rounds", "1", "--seconds", "0.05"],
        cwd=BENCHMARKS, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    summary = run.stdout.split("shoal's best / one CartPoleVectorEnv")[1]
    assert "plain     " in summary and "episodes  " in summary and "x  (shoal" in summary, run.stdout


def test_bench_envpool_tasks_runs_and_compares():
    pytest.importorskip("envpool", exc_type=ImportError)
    run = subprocess.run(
        [sys.executable, "bench_envpool_tasks.py", "--tasks", "CartPole-v1", "--envs", "2", "--rounds", "1",
         "--seconds", "0.05"],
        cwd=BENCHMARKS, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    summary = run.stdout.split("shoal.envpool's best / EnvPool's best")[1]
    assert "CartPole-v1" in summary and "x EnvPool" in summary and "x Gymnasium" in summary, run.stdout


def test_handoff_times_each_configuration_of_each_case():
    run = subprocess.run(
        [sys.executable, "handoff.py", "--batches", "50", "--rounds", "1", "--cases", "noop:2", "burn3:4"],
        cwd=BENCHMARKS, capture_output=True, text=True, timeout=240,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = {line.split()[0]: line for line in run.stdout.splitlines()[2:]}
    assert set(rows) == {"noop:2", "burn3:4"}, run.stdout
    step_us = float(rows["burn3:4"].split()[1])
    assert 3.0 <= step_us < 100.0, run.stdout  # the probe timed the env's burn, not a no-op
    assert "serial " in rows["noop:2"] and "2 workers " in rows["noop:2"] and "default " in rows["noop:2"], run.stdout
