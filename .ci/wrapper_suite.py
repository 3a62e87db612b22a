"""Run Gymnasium 1.4's own tests/wrappers/vector against shoal's drop-in classes.

Usage: python .ci/wrapper_suite.py [pytest args...]

The tests are Gymnasium's, unchanged (``.ci/gymnasium-wrappers/tests``, from Farama-Foundation/Gymnasium at the
v1.4.0 release commit 95a790e, MIT license beside them); its ``conftest.py`` makes ``gymnasium.vector``'s
``SyncVectorEnv`` / ``AsyncVectorEnv`` shoal's, so the wrappers (RecordEpisodeStatistics, NormalizeObservation,
DictInfoToList, RecordVideo, ...) run over shoal's vector envs. Left out, with the reason printed:

* the cases on ``Ant-v4``: MuJoCo's renderer needs an OpenGL context (a display, EGL or OSMesa);
* ``test_record_video.py`` when ``moviepy`` (Gymnasium's video writer) is not installed.

``.ci/run`` installs ``moviepy`` and ``array-api-compat`` (which the array-conversion tests import) first.

Exit status: pytest's (any failure fails CI).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).resolve().parent / "gymnasium-wrappers"


def main(args: list[str]) -> int:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
               "-c", str(SUITE / "pytest.ini"), "--timeout", "120", "-k", "not Ant", "tests/wrappers/vector"]
    print("left out: the Ant-v4 cases (MuJoCo's renderer needs an OpenGL context)")
    if importlib.util.find_spec("moviepy") is None:
        command += ["--ignore", "tests/wrappers/vector/test_record_video.py"]
        print("left out: test_record_video.py (moviepy, Gymnasium's video writer, is not installed)")
    return subprocess.run(command + args, cwd=SUITE, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
