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


def test_ppo_shares_one_policy_among_pettingzoo_agents():
    pytest.importorskip("torch")
    pytest.importorskip("mpe2")
    result = run("ppo_multiagent.py", "--total-steps", "1200", "--num-envs", "4", "--num-steps", "50",
                 "--max-cycles", "10", "--num-workers", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("agent steps")]
    assert len(lines) == 2 and lines[-1].split()[2] == "1,200"  # 4 envs x 3 agents x 50 steps per update
    returns = [float(line.split()[-1]) for line in lines]
    assert all(r < 0 for r in returns)  # simple_spread's reward is minus distances and collisions
    assert "1,200 agent steps in" in result.stdout
