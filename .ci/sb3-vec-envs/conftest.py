"""SB3's DummyVecEnv and SubprocVecEnv are shoal's for this suite (the files under tests/ are SB3's, unchanged).

This conftest is imported before the test modules, so their ``from stable_baselines3.common.vec_env import
DummyVecEnv, SubprocVecEnv`` and ``make_vec_env``'s defaults get :mod:`shoal.sb3`'s classes (``.ci/shoal_built.py``
checks that shoal vector envs were built).
"""

from __future__ import annotations

import stable_baselines3.common.env_util as env_util
import stable_baselines3.common.vec_env as vec_env

import shoal.sb3

for module in (vec_env, env_util):
    module.DummyVecEnv = shoal.sb3.DummyVecEnv  # type: ignore[misc]
    module.SubprocVecEnv = shoal.sb3.SubprocVecEnv  # type: ignore[misc]
