"""TorchRL's ``GymWrapper`` over shoal's vector envs rolls out what it rolls out over Gymnasium's.

The checks are tests/torchrl_checks.py, run in a process of their own: importing TorchRL makes 'spawn' the start
method of every later process, which here would change how every later test starts its workers. Needs TorchRL (CI
installs it: ``pip install torchrl==0.14.1`` after torch); skipped without it."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from torchrl_checks import CHECKS  # (the checks' list; TorchRL itself is imported only where they run)


@pytest.mark.timeout(300)
@pytest.mark.skipif(importlib.util.find_spec("torchrl") is None, reason="TorchRL is not installed (CI installs it)")
def test_torchrls_gym_wrapper_rolls_out_on_shoal_what_it_rolls_out_on_gymnasium():
    pytest.importorskip("gymnasium_robotics", reason="the test extra installs it")
    script = Path(__file__).with_name("torchrl_checks.py")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if "steps equal" in line]  # (TorchRL logs there too)
    checks = [f"{env_id} {mode.value}" for env_id, mode, _ in CHECKS]
    assert [line.rsplit(": ", 1)[0] for line in lines] == checks, lines
    for line in lines:  # every check went through episode ends, where the modes differ
        assert re.search(r": \d+ steps equal, \d+ entries, [1-9]\d* episode ends$", line), line
