"""Run peers' own test suites, kept in this repository, against shoal's drop-in classes; accept only the deliberate
differences.

Usage: python .ci/vendored_suites.py [SUITE ...]   (default: all of them)

* ``gymnasium-wrappers``: Gymnasium 1.4's ``tests/wrappers/vector`` (the v1.4.0 release commit 95a790e), with
  ``gymnasium.vector.SyncVectorEnv`` / ``AsyncVectorEnv``, and so ``gymnasium.make_vec``, made shoal's: its vector
  wrappers (RecordEpisodeStatistics, NormalizeObservation, DictInfoToList, RecordVideo, ...) over shoal's envs.
  Left out: the ``Ant-v4`` cases (MuJoCo's renderer needs an OpenGL context).
* ``sb3-vec-envs``: Stable-Baselines3's ``tests/test_vec_envs.py`` (commit e05d2db), with SB3's ``DummyVecEnv`` and
  ``SubprocVecEnv`` made :mod:`shoal.sb3`'s. Skipped where SB3 is not installed (the ``sb3`` extra).

Each suite's files are the peer's, unchanged, with its license beside them; its ``conftest.py`` swaps the classes in
and fails the session if no shoal vector env was built. ``.ci/run`` installs what their tests import beyond the test
extra (moviepy, which RecordVideo writes with; array-api-compat, for the array conversions); without moviepy the
video tests are left out here, saying so. Any failure not in a suite's DELIBERATE set, or an error, or a hang (120 s
a test) fails this script.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Suite:
    paths: list[str]
    needs: str = ""  # a module without which the suite is skipped
    select: str = ""  # a pytest -k expression
    video: str = ""  # the video tests, left out without moviepy
    deliberate: dict[str, str] = field(default_factory=dict)  # test id -> why shoal differs (README: Drop-in)


SUITES = {
    "gymnasium-wrappers": Suite(
        ["tests/wrappers/vector"], select="not Ant", video="tests/wrappers/vector/test_record_video.py"
    ),
    "sb3-vec-envs": Suite(
        ["tests/test_vec_envs.py"],
        needs="stable_baselines3",
        video="tests/test_vec_envs.py::test_video_recorder",
        deliberate={
            "tests.test_vec_envs::test_framestack_vecenv":
                "it steps a vector env it never reset; shoal raises NotResetError there (SB3's DummyVecEnv steps "
                "the envs as they are)",
        },
    ),
}


def run(name: str, suite: Suite) -> bool:
    folder = HERE / name
    if suite.needs and importlib.util.find_spec(suite.needs) is None:
        print(f"{name}: skipped ({suite.needs} is not installed)")
        return True
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-c", str(folder / "pytest.ini"), "--timeout", "120", *suite.paths]
    if suite.select:
        command += ["-k", suite.select]
    if suite.video and importlib.util.find_spec("moviepy") is None:
        command += ["--deselect" if "::" in suite.video else "--ignore", suite.video]
        print(f"{name}: left out {suite.video} (moviepy, the video writer, is not installed)")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.xml"
        done = subprocess.run(command + [f"--junitxml={report}"], cwd=folder, capture_output=True, text=True)
        if not report.exists():
            print(done.stdout[-5000:], done.stderr[-5000:], sep="\n")
            print(f"{name}: pytest wrote no report (exit status {done.returncode})")
            return False
        failed, passed, skipped = set(), 0, 0
        for case in ET.parse(report).getroot().iter("testcase"):
            test = f"{case.get('classname')}::{case.get('name')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed.add(test)
            elif case.find("skipped") is not None:
                skipped += 1
            else:
                passed += 1
    unexpected = sorted(failed - set(suite.deliberate))
    missing = sorted(set(suite.deliberate) - failed)  # a deliberate difference that no longer shows: say so
    print(f"{name}: {passed} pass, {skipped} skipped, {len(failed) - len(unexpected)} deliberate differences, "
          f"{len(unexpected)} unexpected")
    if unexpected or done.returncode not in (0, 1):
        print(done.stdout[-20000:], done.stderr[-5000:], sep="\n")
        for test in unexpected:
            print(f"  unexpected: {test}")
        return False
    for test in missing:
        print(f"  {test} passes now: take it out of DELIBERATE and the README")
    return not missing


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        print(f"unknown suites {unknown}; the suites are {list(SUITES)}")
        return 2
    results = [run(name, SUITES[name]) for name in names or list(SUITES)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
