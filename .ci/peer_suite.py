"""Run Gymnasium's own tests/vector suite against shoal's drop-in classes and accept only the deliberate differences.

Usage: python .ci/peer_suite.py PATH/TO/peer-suites/gymnasium-vector/run

Each test in DELIBERATE fails by design (the README's "Drop-in" section says why); any other failure, error or a
hang (the suite's own 60 s per-test timeout) fails this script.
"""

from __future__ import annotations

import sys

from suite_report import run_with_report

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
    result = run_with_report([run, sys.executable, "-q", "-p", "no:randomly"])
    if result is None:
        return 1
    unexpected = sorted(result.failed - DELIBERATE)
    if unexpected:
        print(result.output)
    for name in unexpected:
        print(f"UNEXPECTED FAILURE: {name}")
    for name in sorted(DELIBERATE - result.failed):
        print(f"now passes (remove it from DELIBERATE and the README): {name}")
    print(f"Gymnasium's tests/vector on shoal's classes: {result.passed} pass, {result.skipped} skipped, "
          f"{len(result.failed & DELIBERATE)} deliberate differences (README), {len(unexpected)} unexpected")
    return 1 if unexpected or not result.passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
