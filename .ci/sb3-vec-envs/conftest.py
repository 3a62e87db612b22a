"""SB3's DummyVecEnv and SubprocVecEnv are shoal's for this suite (tests/test_vec_envs.py is SB3's, unchanged).

This conftest is imported before the test module, so its ``from stable_baselines3.common.vec_env import
DummyVecEnv, SubprocVecEnv`` and ``make_vec_env``'s defaults get :mod:`shoal.sb3`'s classes. The session fails if no
shoal vector env was built: the suite would then test SB3's own classes.
"""

from __future__ import annotations

import stable_baselines3.common.env_util as env_util
import stable_baselines3.common.vec_env as vec_env

import shoal.sb3
from shoal.vector.base import VectorEnv

for module in (vec_env, env_util):
    module.DummyVecEnv = shoal.sb3.DummyVecEnv  # type: ignore[misc]
    module.SubprocVecEnv = shoal.sb3.SubprocVecEnv  # type: ignore[misc]

built = [0]
_init = VectorEnv.__init__


def _counting_init(self, *args, **kwargs):
    built[0] += 1
    _init(self, *args, **kwargs)


VectorEnv.__init__ = _counting_init  # type: ignore[method-assign]


def pytest_sessionfinish(session, exitstatus):
    print(f"\nshoal vector envs built by SB3's tests: {built[0]}")
    if built[0] == 0 and session.testscollected:
        session.exitstatus = 1
