"""PufferLib, imported once with the install command where it is missing, and its ``APIUsageError`` as shoal
raises it."""

from __future__ import annotations

from shoal.errors import ConfigError, MissingDependencyError

try:
    import pufferlib
    import pufferlib.emulation
    import pufferlib.spaces
    import pufferlib.vector
except ImportError as exc:  # this module is only imported by those who use it
    raise MissingDependencyError(
        "shoal.pufferlib runs PufferLib's envs and needs PufferLib: pip install pufferlib (pufferlib-core pins a "
        "torch: pip install --no-deps pufferlib-core after installing torch)"
    ) from exc


class APIUsageError(ConfigError, pufferlib.APIUsageError):
    """A bad argument or a call out of order: PufferLib's ``APIUsageError`` (so ``except`` clauses written for it
    hold) and shoal's :class:`~shoal.errors.ConfigError`."""
