"""SuperSuit's vector constructors are shoal's for this suite (the files under test/ are SuperSuit's, unchanged).

This conftest is imported before the test modules, so their ``from supersuit import concat_vec_envs_v1, ...`` and
``ss.concat_vec_envs_v1`` get :mod:`shoal.supersuit`'s (``.ci/shoal_built.py`` checks that shoal vector envs were
built). SuperSuit's wrappers (``black_death_v3``, ...) stay its own, as ``shoal.supersuit`` gives them.
"""

from __future__ import annotations

import supersuit

import shoal.supersuit

for name in ("pettingzoo_env_to_vec_env_v1", "concat_vec_envs_v1", "gym_vec_env_v0", "stable_baselines3_vec_env_v0"):
    setattr(supersuit, name, getattr(shoal.supersuit, name))
