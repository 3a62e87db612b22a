"""Library functions behind the ``shoal`` command: they measure and return dataclasses, and never print.

* :func:`games`: every ROM ale-py ships, with its actions, modes and difficulties.
* :func:`throughput`: steps/s and latency of shoal and its peers as the number of ROMs grows.
* :func:`sweep`: games x seeds in one vector env; returns, lengths and human-normalized scores per game.
* :func:`autotune`: the fastest vectorization settings for a workload within a time budget.
* :func:`sanity`: an agent trained on each sanity env; the return it reaches against the optimum and random.
"""

import json
import logging
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from shoal.atari.roms import GameInfo, game_ids, game_info
from shoal.bench.autotune import Config, Trial, TuneResult, Workload, autotune, candidates
from shoal.bench.sanity import SanityReport, SanityResult, load_agent, sanity
from shoal.bench.scores import Reference, human_normalized, reference_scores
from shoal.bench.sweep import Episode, GameSummary, SweepResult, read_episodes, sweep
from shoal.bench.throughput import DEFAULT_GAMES, SYSTEMS, Measurement, ThroughputResult, throughput


log = logging.getLogger(__name__)


_TABLE_FORMAT = 2
"""The cached table's layout: bump it with GameInfo's fields (2: ``screen_height``), so an older file is not read."""


def games(cache: bool = True, progress: Callable[[int, int], None] | None = None) -> list[GameInfo]:
    """Every single-player ROM ale-py ships, in id order, with its actions, modes and difficulties.

    Reading them means loading every ROM (about 10 s), so the table is kept in the user's cache folder
    (``$XDG_CACHE_HOME/shoal`` or ``~/.cache/shoal``), one file per ale-py version; ``cache=False`` reads the ROMs.
    ``progress(done, total)`` is called as ROMs load.
    """
    import ale_py

    cache_dir = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = cache_dir / "shoal" / f"games-{ale_py.__version__}-{_TABLE_FORMAT}.json"
    if cache and path.exists():
        return [_game_info(record) for record in json.loads(path.read_text())]
    ids = game_ids()
    infos = []
    for i, game in enumerate(ids):
        infos.append(game_info(game))
        if progress is not None:
            progress(i + 1, len(ids))
    if cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps([asdict(g) for g in infos]))
        except OSError as exc:  # a read-only home: the table is still right, only slower next time
            log.info("could not cache the ROM table at %s: %s", path, exc)
    return infos


def _game_info(record: dict[str, Any]) -> GameInfo:
    """A cached table's row (JSON has lists where GameInfo has tuples)."""
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in record.items()}
    return GameInfo(**fields)


__all__ = [
    "DEFAULT_GAMES", "SYSTEMS", "Config", "Episode", "GameInfo", "GameSummary", "Measurement", "Reference",
    "SanityReport", "SanityResult", "SweepResult", "ThroughputResult", "Trial", "TuneResult", "Workload", "autotune",
    "candidates", "games", "human_normalized", "load_agent", "read_episodes", "reference_scores", "sanity", "sweep",
    "throughput",
]
