"""Reference Atari scores (a random agent and a human tester) and the human-normalized score built on them."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


@dataclass(frozen=True)
class Reference:
    """Undiscounted episode returns of a uniformly random agent and of a professional human tester."""

    random: float
    human: float


@lru_cache(maxsize=1)
def reference_scores() -> dict[str, Reference]:
    """Atari-57 reference scores by ale-py ROM id (Mnih et al. 2015, Badia et al. 2020; as in DQN Zoo)."""
    text = resources.files("shoal.data").joinpath("atari57_reference_scores.csv").read_text()
    rows = csv.DictReader(text.splitlines())
    return {row["game"]: Reference(float(row["random"]), float(row["human"])) for row in rows}


def human_normalized(game: str, score: float) -> float | None:
    """``(score - random) / (human - random)`` for ``game``, or None when it has no reference scores."""
    ref = reference_scores().get(game)
    if ref is None:
        return None
    return (score - ref.random) / (ref.human - ref.random)
