"""Run a pytest command with a JUnit XML report and read its outcomes (for the peer suites' runners).

The command's output is kept, not printed: its pytest summary counts the deliberate failures, and the last test
summary CI reads must be the project's own; a runner prints it when something unexpected happens.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Outcomes:
    returncode: int
    output: str  # the command's stdout and stderr, their last 25,000 characters
    failed: set[str] = field(default_factory=set)  # "module::test" ids that failed or errored
    passed: int = 0
    skipped: int = 0


def run_with_report(command: list[str], cwd: Path | None = None, path: str | None = None) -> Outcomes | None:
    """Run ``command`` (pytest arguments follow it) with ``--junitxml``; None, saying why, if it wrote no report.
    ``path``: a folder put first on ``PYTHONPATH`` (for a ``-p`` plugin)."""
    env = None
    if path is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        done = subprocess.run(command + [f"--junitxml={report}"], cwd=cwd, env=env, capture_output=True, text=True)
        result = Outcomes(done.returncode, (done.stdout[-20000:] + "\n" + done.stderr[-5000:]).strip())
        if not report.exists():
            print(result.output)
            print(f"pytest wrote no report (exit status {done.returncode})")
            return None
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            if case.find("failure") is not None or case.find("error") is not None:
                result.failed.add(name)
            elif case.find("skipped") is not None:
                result.skipped += 1
            else:
                result.passed += 1
    return result
