"""Run peers' own test suites, kept in this repository, against shoal's drop-in classes; accept only the deliberate
differences.

Usage: python .ci/vendored_suites.py [SUITE ...]   (default: all of them)

* ``gymnasium-wrappers``: Gymnasium 1.4's ``tests/wrappers/vector`` (the v1.4.0 release commit 95a790e), with
  ``gymnasium.vector.SyncVectorEnv`` / ``AsyncVectorEnv``, and so ``gymnasium.make_vec``, made shoal's: its vector
  wrappers (RecordEpisodeStatistics, NormalizeObservation, DictInfoToList, RecordVideo, ...) over shoal's envs.
  Left out: the ``Ant-v4`` cases (MuJoCo's renderer needs an OpenGL context).
* ``ale-py-vector``: ale-py 0.12.1's ``tests/python/test_atari_vector_env.py``, with ``gym.make_vec("ALE/...")``
  building :class:`shoal.ale_py.AtariVectorEnv`. ale-py is GPL-licensed, so its file is not kept here: it is
  unpacked at run time from ale-py's source release on PyPI (its SHA-256 checked); where that cannot be downloaded
  the suite is skipped, saying so.
* ``supersuit-vector``: SuperSuit 3.11's tests of its vector envs of PettingZoo envs (the 3.11.0 release commit
  1312e6d: ``test/test_vector``'s ``test_pettingzoo_to_vec.py``, ``test_env_is_wrapped.py``, ``test_render.py``,
  ``test_vector_dict.py``, ``test_pettingzoo_to_vec_gymnasium_wrappers.py``), with ``supersuit``'s vector
  constructors made :mod:`shoal.supersuit`'s. Left out: its tests of ``vectorize_aec_env_v0`` (SuperSuit's own,
  which ``shoal.supersuit`` hands out as it is) and of its deprecated Gymnasium-env path (all skipped there), and
  the three that import KAZ v10, which PettingZoo 1.27 no longer has (they fail on SuperSuit itself here).
* ``sb3-vec-envs``: Stable-Baselines3's tests of its VecEnvs and of what runs on them (commit e05d2db:
  ``test_vec_envs.py``, ``test_vec_normalize.py``, ``test_vec_check_nan.py``, ``test_dict_env.py``,
  ``test_predict.py``; its algorithms train on Dict observations there), with SB3's ``DummyVecEnv`` and
  ``SubprocVecEnv`` made :mod:`shoal.sb3`'s. Skipped where SB3 is not installed (the ``sb3`` extra).

Each suite's files are the peer's, unchanged, with its license beside them (or downloaded); its ``conftest.py``
swaps the classes in, and ``shoal_built.py`` counts the shoal vector envs built (none fails the suite: it would have
tested the peer's own classes). ``.ci/run`` installs what their tests import beyond the test extras (moviepy, which
RecordVideo and VecVideoRecorder write with; array-api-compat, for the array conversions); without moviepy the video
tests are left out here, saying so. Any failure not in a suite's DELIBERATE set, an error, or a hang (120 s a test)
fails this script.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from suite_report import run_with_report

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Fetched:
    """Test files unpacked at run time from a source release: ``url``'s archive (its ``sha256`` checked), the
    members under ``prefix`` placed under ``tests/`` of the suite's folder."""

    url: str
    sha256: str
    prefix: str


@dataclass(frozen=True)
class Suite:
    paths: list[str]
    needs: str = ""  # a module without which the suite is skipped
    select: str = ""  # a pytest -k expression
    video: str = ""  # the video tests, left out without moviepy
    deliberate: dict[str, str] = field(default_factory=dict)  # test id -> why shoal differs (README: Drop-in)
    fetched: Fetched | None = None  # test files downloaded, not kept here


SUITES = {
    "gymnasium-wrappers": Suite(
        ["tests/wrappers/vector"], select="not Ant", video="tests/wrappers/vector/test_record_video.py"
    ),
    "ale-py-vector": Suite(
        ["tests/test_atari_vector_env.py"],
        fetched=Fetched(
            "https://files.pythonhosted.org/packages/3e/e8/e69da8a5fb5feafa9fffb32ed8c2b306b7571b77faf779f61e4eb53304ec/"
            "ale_py-0.12.1.tar.gz",
            "c503d574c5983e1063b451201ccb779d935919c0f6bf116fb0f4f8aa4c86d249",
            "ale_py-0.12.1/tests/python/",
        ),
        deliberate={
            "tests.test_atari_vector_env.TestVectorEnv::test_invalid_reset_masks[ALE/Breakout-v5]":
                "it expects a partial reset in asynchronous mode to raise, which shoal supports (for the envs of the "
                "batch held), and then calls the C++ pool's own handle (envs.ale), which shoal has not",
        },
    ),
    "sb3-vec-envs": Suite(
        ["tests"],
        needs="stable_baselines3",
        video="tests/test_vec_envs.py::test_video_recorder",
        deliberate={
            "tests.test_vec_envs::test_framestack_vecenv":
                "it steps a vector env it never reset; shoal raises NotResetError there (SB3's DummyVecEnv steps "
                "the envs as they are)",
            "tests.test_vec_check_nan::test_check_nan": "the same: it steps a vector env it never reset",
            "tests.test_dict_env::test_dict_nested":
                "it expects DummyVecEnv to refuse a nested Dict observation space (NotImplementedError); shoal "
                "stores nested spaces (SB3's policies still refuse them)",
        },
    ),
    "supersuit-vector": Suite(
        ["test/test_vector"],
        needs="supersuit",
        # (SuperSuit's KAZ tests import knights_archers_zombies_v10, which PettingZoo 1.27 no longer has: they fail on
        # SuperSuit itself here, at its import)
        select="not black_death and not terminal_obs_are_returned",
        video="test/test_vector/test_render.py::test_record_video_sb3",
        deliberate={
            "test.test_vector.test_env_is_wrapped::test_env_is_wrapped_true":
                "it concatenates copies of a single Gymnasium env, SuperSuit's deprecated path (its reset fails "
                "there, SuperSuit's issue 188, and its own tests of it are skipped); shoal.supersuit refuses it, "
                "naming gym_vec_env_v0 and shoal.make",
            "test.test_vector.test_env_is_wrapped::test_env_is_wrapped_false": "the same: a single Gymnasium env",
        },
    ),
}


def unpack(fetched: Fetched, folder: Path) -> str | None:
    """Download ``fetched``'s archive and unpack its test files into ``folder / "tests"``; why not, if it failed."""
    try:
        with urllib.request.urlopen(fetched.url, timeout=120) as response:
            data = response.read()
    except OSError as exc:
        return f"cannot download {fetched.url}: {exc}"
    if hashlib.sha256(data).hexdigest() != fetched.sha256:
        raise SystemExit(f"{fetched.url} does not have the SHA-256 this suite was checked with")
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.startswith(fetched.prefix):
                target = folder / "tests" / member.name[len(fetched.prefix):]
                target.parent.mkdir(parents=True, exist_ok=True)
                source = archive.extractfile(member)
                assert source is not None  # a regular file
                target.write_bytes(source.read())
    return None


def run(name: str, suite: Suite) -> bool:
    if suite.needs and importlib.util.find_spec(suite.needs) is None:
        print(f"{name}: skipped ({suite.needs} is not installed)")
        return True
    if suite.fetched is None:
        return run_in(HERE / name, name, suite)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / name
        shutil.copytree(HERE / name, folder)
        why = unpack(suite.fetched, folder)
        if why is not None:
            print(f"{name}: skipped ({why})")
            return True
        return run_in(folder, name, suite)


def run_in(folder: Path, name: str, suite: Suite) -> bool:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "shoal_built",
               "-c", str(folder / "pytest.ini"), "--timeout", "120", *suite.paths]
    if suite.select:
        command += ["-k", suite.select]
    if suite.video and importlib.util.find_spec("moviepy") is None:
        command += ["--deselect" if "::" in suite.video else "--ignore", suite.video]
        print(f"{name}: left out {suite.video} (moviepy, the video writer, is not installed)")
    result = run_with_report(command, cwd=folder, path=str(HERE))
    if result is None:
        return False
    unexpected = sorted(result.failed - set(suite.deliberate))
    built = re.search(r"shoal vector envs built: (\d+)", result.output)
    print(f"{name}: {result.passed} pass, {result.skipped} skipped, {len(result.failed) - len(unexpected)} deliberate "
          f"differences, {len(unexpected)} unexpected; {built[1] if built else 'no'} shoal vector envs built")
    if unexpected or result.returncode not in (0, 1) or not result.passed or not built or built[1] == "0":
        print(result.output)
        for test in unexpected:
            print(f"  UNEXPECTED FAILURE: {test}")
        return False
    for test in sorted(set(suite.deliberate) - result.failed):
        print(f"  now passes (remove it from DELIBERATE and the README): {test}")
    return True


def main(names: list[str]) -> int:
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        print(f"unknown suites {unknown}; the suites are {list(SUITES)}")
        return 2
    results = [run(name, SUITES[name]) for name in names or list(SUITES)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
