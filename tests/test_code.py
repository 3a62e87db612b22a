"""The code itself: ``src/`` type-checks with mypy (STYLE: shoal ships ``py.typed``) and the repository passes the
project's ruff rules (pyflakes' errors, 120-column lines). Both tools are pinned in the ``test`` extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_src_type_checks_with_mypy():
    run = _run("mypy", "src")
    assert run.returncode == 0, f"mypy found errors in src/:\n{run.stdout}{run.stderr}"


def test_the_code_passes_ruff():
    run = _run("ruff", "check", "--output-format", "concise", "src", "tests", "benchmarks", "examples", ".ci")
    assert run.returncode == 0, f"ruff found problems:\n{run.stdout}{run.stderr}"
