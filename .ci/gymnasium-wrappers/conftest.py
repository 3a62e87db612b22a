"""Gymnasium's vector envs are shoal's for this suite (the files under tests/ are Gymnasium's, unchanged).

This conftest is imported before any test module, so ``from gymnasium.vector import SyncVectorEnv`` in a test and
``gymnasium.make_vec`` (which builds ``gymnasium.vector.SyncVectorEnv`` / ``AsyncVectorEnv``) both get shoal's
classes (``.ci/shoal_built.py`` checks that shoal vector envs were built).
"""

from __future__ import annotations

import gymnasium.vector

import shoal.vector

gymnasium.vector.SyncVectorEnv = shoal.vector.SyncVectorEnv  # type: ignore[misc]
gymnasium.vector.AsyncVectorEnv = shoal.vector.AsyncVectorEnv  # type: ignore[misc]
