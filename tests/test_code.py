"""The code itself: ``src/`` type-checks with mypy (STYLE: shoal ships ``py.typed``) and the repository passes the
project's ruff rules (pyflakes' errors, 120-column lines). Both tools are pinned in the ``test`` extra. No module of
shoal's own reaches its 500th line (STYLE). And the lower bounds of ``pyproject.toml``'s dependencies are ones
``.ci/floor`` can pin and test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_src_type_checks_with_mypy():
    run = _run("mypy", "src")
    assert run.returncode == 0, f"mypy found errors in src/:\n{run.stdout}{run.stderr}"


def test_the_code_passes_ruff():
    run = _run("ruff", "check", "--output-format", "concise", "src", "tests", "benchmarks", "examples", ".ci")
    assert run.returncode == 0, f"ruff found problems:\n{run.stdout}{run.stderr}"


def test_no_module_of_shoals_own_reaches_its_500th_line():
    """STYLE: a module is split when its 500th line arrives: the Python and C of src/, the tests and their fakes, the
    benchmarks, the examples and .ci's scripts (not the peers' own suites, kept unchanged in .ci's folders)."""
    ours = [*ROOT.glob("src/**/*.py"), *ROOT.glob("src/**/*.[ch]"), *ROOT.glob("tests/**/*.py"),
            *ROOT.glob("benchmarks/**/*.py"), *ROOT.glob("examples/**/*.py"), *ROOT.glob(".ci/*.py")]
    assert len(ours) > 100 and ROOT / "src/shoal/vector/_rows.c" in ours  # (the globs find the code)
    long = {str(path.relative_to(ROOT)): n for path in ours if (n := len(path.read_bytes().splitlines())) >= 500}
    assert long == {}, f"modules of 500 lines or more (split them by concept): {long}"


def test_every_dependency_has_a_lower_bound_that_ci_pins_to_its_oldest_release_line():
    pytest.importorskip("tomllib", reason="Python 3.11's (.ci/floor_pins.py reads pyproject.toml with it)")
    sys.path.insert(0, str(ROOT / ".ci"))
    try:
        from floor_pins import dependencies, floor_pins
    finally:
        sys.path.remove(str(ROOT / ".ci"))
    assert floor_pins(["numpy>=1.24", "opencv-python-headless>=4.8", "x[extra]>=2.2.1; python_version < '3.12'"]) == [
        "numpy~=1.24.0", "opencv-python-headless~=4.8.0", "x~=2.2.1; python_version < '3.12'",
    ]
    for unbounded in ("numpy", "numpy<2", "numpy==1.26"):
        with pytest.raises(SystemExit, match="lower bound"):
            floor_pins([unbounded])
    declared = dependencies(str(ROOT / "pyproject.toml"))
    assert len(floor_pins(declared)) == len(declared)
