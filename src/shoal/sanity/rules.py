"""What the two implementations of each sanity env share: defaults, argument checks and fixed tables."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from gymnasium import spaces

from shoal.errors import ConfigError
from shoal.vector.checks import check_positive_int, integer

PASSWORD = (0, 1, 1, 0, 0)
"""Password's default password (the bits PufferLib's seed 42 draws)."""

BANDIT_MEANS = (0.2, 0.5, 0.8, 0.4)
"""Bandit's default arms: the probability that each pays 1."""

MOVES = np.array([(-1, 0), (1, 0), (0, -1), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)], np.int64)
"""Squared's eight actions: (row, column) steps, the king's moves."""

SPACES_OBS = spaces.Dict({
    "image": spaces.Box(-1, 1, (5, 5), np.float32),
    "flat": spaces.Box(-1, 1, (5,), np.int8),
})
SPACES_ACTION = spaces.Dict({"image": spaces.Discrete(2), "flat": spaces.Discrete(2)})


def perimeter(distance: int) -> np.ndarray:
    """The cells at L-inf distance ``distance`` from the centre of Squared's grid, row by row: ``(P, 2)``."""
    side = 2 * distance + 1
    return np.array([(r, c) for r in range(side) for c in range(side)
                     if max(abs(r - distance), abs(c - distance)) == distance], np.int64)


def check_squared(distance: int, num_targets: int) -> tuple[int, int]:
    distance, num_targets = check_positive_int("distance", distance), check_positive_int("num_targets", num_targets)
    if num_targets > 8 * distance:
        raise ConfigError(f"num_targets={num_targets} is more than the {8 * distance} cells of the perimeter")
    return distance, num_targets


def check_password(password: Sequence[int]) -> np.ndarray:
    bits = np.asarray(password)
    if bits.ndim != 1 or not len(bits) or not np.isin(bits, (0, 1)).all():
        raise ConfigError(f"password must be a non-empty sequence of 0s and 1s, got {password!r}")
    return bits.astype(np.float32)


def check_stochastic(p: float, horizon: int) -> tuple[float, int]:
    if not isinstance(p, (int, float)) or not 0 < p < 1:
        raise ConfigError(f"p must be in (0, 1), got {p!r}")
    return float(p), check_positive_int("horizon", horizon)


def check_memory(length: int, delay: int) -> tuple[int, int]:
    if integer(delay) is None or delay < 0:
        raise ConfigError(f"delay must be a non-negative integer, got {delay!r}")
    return check_positive_int("length", length), int(delay)


def check_means(means: Sequence[float]) -> np.ndarray:
    values = np.asarray(means, np.float64)
    if values.ndim != 1 or len(values) < 2 or not ((values >= 0) & (values <= 1)).all():
        raise ConfigError(f"means must be two or more probabilities, got {means!r}")
    return values
