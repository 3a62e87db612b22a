"""Gymnasium's vector envs are shoal's for this suite (the files under tests/ are Gymnasium's, unchanged).

This conftest is imported before any test module, so ``from gymnasium.vector import SyncVectorEnv`` in a test and
``gymnasium.make_vec`` (which builds ``gymnasium.vector.SyncVectorEnv`` / ``AsyncVectorEnv``) both get shoal's
classes. The session fails if no shoal vector env was built: the suite would then test Gymnasium's own classes.
"""

from __future__ import annotations

import gymnasium.vector

import shoal.vector
from shoal.vector.base import VectorEnv

gymnasium.vector.SyncVectorEnv = shoal.vector.SyncVectorEnv  # type: ignore[misc]
gymnasium.vector.AsyncVectorEnv = shoal.vector.AsyncVectorEnv  # type: ignore[misc]

built = [0]
_init = VectorEnv.__init__


def _counting_init(self, *args, **kwargs):
    built[0] += 1
    _init(self, *args, **kwargs)


VectorEnv.__init__ = _counting_init  # type: ignore[method-assign]


def pytest_sessionfinish(session, exitstatus):
    print(f"\nshoal vector envs built by Gymnasium's wrapper tests: {built[0]}")
    if built[0] == 0 and session.testscollected:
        session.exitstatus = 1
