"""Run Gymnasium's own tests/vector suite against shoal's drop-in classes and accept only the deliberate differences.

Usage: python .ci/peer_suite.py PATH/TO/peer-suites/gymnasium-vector/run

Each test in DELIBERATE fails by design (the README's "Drop-in" section says why); any other failure, error or a
hang (the suite's own 60 s per-test timeout) fails this script.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

DELIBERATE = {
    # shoal range-checks actions before they reach the envs; this test steps a Discrete(4) env with action 4
    "tests.vector.test_vector_env::test_final_obs_info[Sync]",
    "tests.vector.test_vector_env::test_final_obs_info[Async with shared memory]",
    "tests.vector.test_vector_env::test_final_obs_info[Async without shared memory]",
    # actions reach the envs in the action space's dtype (float32 here), which time.sleep() does not take
    "tests.vector.test_async_vector_env::test_step_timeout_async_vector_env[True]",
    "tests.vector.test_async_vector_env::test_step_timeout_async_vector_env[False]",
    # shoal raises the env's error (a ValueError naming the env, with its traceback) without Gymnasium's warnings
    "tests.vector.test_async_vector_env::test_async_vector_subenv_error",
}


def main(run: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        # Its output is kept, not printed: its pytest summary counts the deliberate failures, and the last test
        # summary CI reads must be the project's own; it is printed when something unexpected happens.
        done = subprocess.run([run, sys.executable, "-q", "-p", "no:randomly", f"--junitxml={report}"], check=False,
                              capture_output=True, text=True)
        if not report.exists():
            print(done.stdout[-5000:], done.stderr[-5000:], sep="\n")
            print(f"the peer suite wrote no report (exit status {done.returncode})")
            return 1
        cases = ET.parse(report).getroot().iter("testcase")
        failed, passed, skipped = set(), 0, 0
        for case in cases:
            name = f"{case.get('classname')}::{case.get('name')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed.add(name)
            elif case.find("skipped") is not None:
                skipped += 1
            else:
                passed += 1
    unexpected = sorted(failed - DELIBERATE)
    fixed = sorted(DELIBERATE - failed)
    if unexpected:
        print(done.stdout[-20000:])
    for name in unexpected:
        print(f"UNEXPECTED FAILURE: {name}")
    for name in fixed:
        print(f"now passes (remove it from DELIBERATE and the README): {name}")
    print(f"Gymnasium's tests/vector on shoal's classes: {passed} pass, {skipped} skipped, "
          f"{len(failed & DELIBERATE)} deliberate differences (README), {len(unexpected)} unexpected")
    return 1 if unexpected or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
