"""The example programs run (tiny budgets): they are documentation, so they must not rot."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run(script, *args, timeout=240):
    return subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_ppo_on_two_games_through_the_torch_ops():
    pytest.importorskip("torch")
    result = run("ppo_atari.py", "--games", "pong,breakout", "--envs-per-game", "2", "--total-steps", "256",
                 "--num-steps", "32", "--backend", "serial")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("update ")]
    assert len(lines) == 2 and "256 steps, SPS" in lines[-1]
    assert "nan" not in result.stdout and "(no life ended yet)" in lines[0]  # a game with no return yet says so


def test_quickstart_compares_shoal_with_ale_py():
    result = run("quickstart.py")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "shoal" in result.stdout and "ale-py" in result.stdout
