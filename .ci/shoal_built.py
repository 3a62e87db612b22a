"""A pytest plugin for the vendored peer suites (``-p shoal_built``): counts the shoal vector envs built and fails the
session if there were none, since the suite would then have tested the peer's own classes, not shoal's."""

from __future__ import annotations

from shoal.vector.base import VectorEnv

built = [0]
_init = VectorEnv.__init__


def _counting_init(self, *args, **kwargs):
    built[0] += 1
    _init(self, *args, **kwargs)


VectorEnv.__init__ = _counting_init  # type: ignore[method-assign]


def pytest_sessionfinish(session, exitstatus):
    print(f"\nshoal vector envs built: {built[0]}")
    if built[0] == 0 and session.testscollected:
        session.exitstatus = 1
