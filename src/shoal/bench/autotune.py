"""Autotune: try the valid vectorization settings for a workload within a time budget, fastest first.

A workload is either Atari games (one env per entry, all in one :class:`~shoal.AtariVectorEnv`) or a Gymnasium id
with a number of envs. The settings tried: the serial backend; multiprocessing with 1 to 2x cores workers (several
envs per worker; a quarter, a half, one and two per core, one more than the cores); and, where envs split evenly over
workers, first-N-of-M batches of half the envs.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

from shoal.atari.roms import check_game
from shoal.bench.throughput import SETTINGS, time_steps
from shoal.errors import ConfigError
from shoal.vector.cpus import usable_cores
from shoal.vector.checks import check_positive_int

Progress = Callable[[str, float, float], None]
"""Called with ``(description, seconds spent, budget)`` as each configuration starts."""


@dataclass(frozen=True)
class Config:
    """One way to vectorize the workload; ``batch_size`` counts envs (a multi-agent env once, whatever its agents)."""

    backend: str
    num_workers: int
    batch_size: int


@dataclass(frozen=True)
class Trial:
    """A configuration and how it ran: env steps per second and mean wall time of one batch step."""

    config: Config
    steps_per_second: float
    latency_ms: float


@dataclass(frozen=True)
class Workload:
    """Atari ``games`` (one env each), or ``env_id`` x ``num_envs``; a multi-agent env has ``rows_per_env`` rows,
    one per agent, and the steps/s of its trials count rows."""

    games: tuple[str, ...] = ()
    env_id: str | None = None
    num_envs: int = 0
    rows_per_env: int = 1

    @classmethod
    def of(cls, games: Sequence[str] | None = None, env_id: str | None = None, num_envs: int | None = None) -> Workload:
        if (games is None) == (env_id is None):
            raise ConfigError("give Atari games or a Gymnasium env id (exactly one)")
        if games is not None:
            names = tuple(check_game(g) for g in games)
            if not names:
                raise ConfigError("games must name at least one ROM")
            return cls(games=names, num_envs=len(names))
        num_envs = check_positive_int("num_envs", num_envs, " with a Gymnasium id")
        from shoal.make import make

        assert env_id is not None  # (exactly one of the two, checked above)
        with make(env_id, 1, backend="serial") as probe:  # (an unknown id fails here, before any timing)
            rows = probe.rows_per_env
        return cls(env_id=env_id, num_envs=num_envs, rows_per_env=rows)

    def kwargs(self, config: Config) -> dict[str, Any]:
        """The vector env's arguments for ``config``, those at their defaults left out: no workers for the serial
        backend; a batch of fewer than all envs in rows, as the vector env counts it."""
        kwargs: dict[str, Any] = {"backend": config.backend}
        if config.backend != "serial":
            kwargs["num_workers"] = config.num_workers
        if config.batch_size < self.num_envs:
            kwargs["batch_size"] = config.batch_size * self.rows_per_env
        return kwargs

    def make(self, config: Config) -> Any:
        if self.games:
            from shoal.atari import AtariVectorEnv

            return AtariVectorEnv(games=list(self.games), **SETTINGS, **self.kwargs(config))
        from shoal.make import make

        assert self.env_id is not None  # (a workload has games or an env id: of())
        return make(self.env_id, self.num_envs, **self.kwargs(config))

    def snippet(self, config: Config) -> str:
        """Python that builds the vector env with ``config``."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs(config).items())
        if self.games:
            return f"import shoal\n\nenvs = shoal.AtariVectorEnv(games={list(self.games)!r}, {args})\n"
        return f"import shoal\n\nenvs = shoal.make({self.env_id!r}, {self.num_envs}, {args})\n"


@dataclass(frozen=True)
class TuneResult:
    """Every configuration tried, fastest first."""

    workload: Workload
    trials: list[Trial]
    untried: int

    @property
    def best(self) -> Trial:
        return self.trials[0]

    def snippet(self) -> str:
        return self.workload.snippet(self.best.config)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def candidates(num_envs: int, cpus: int | None = None) -> list[Config]:
    """The configurations worth trying for ``num_envs`` envs on ``cpus`` cores, most promising first."""
    cpus = cpus or usable_cores()
    # a half and a quarter of the cores: the default's choices for an env of a few microseconds a step
    # (shoal.vector.load.choose_workers)
    fewer = (max(1, cpus // 2), max(1, cpus // 4))
    workers = sorted({w for w in (cpus, 1, 2 * cpus, *fewer, cpus + 1) if 1 <= w <= num_envs})
    workers.sort(key=lambda w: abs(w - cpus))  # one worker per core first
    configs = [Config("multiprocessing", w, num_envs) for w in workers]
    for w in workers:
        per_worker, rest = divmod(num_envs, w)
        half = num_envs // 2
        if w > 1 and not rest and half >= per_worker and half % per_worker == 0:
            configs.append(Config("multiprocessing", w, half))
    configs.append(Config("serial", 1, num_envs))
    return configs


def autotune(
    games: Sequence[str] | None = None,
    env_id: str | None = None,
    num_envs: int | None = None,
    *,
    budget: float = 30.0,
    seconds: float = 1.0,
    configs: Sequence[Config] | None = None,
    progress: Progress | None = None,
) -> TuneResult:
    """Time each configuration for ``seconds`` (most promising first) until ``budget`` seconds are spent.

    Returns the trials ranked by steps/s; :meth:`TuneResult.snippet` is Python that builds the best.
    """
    workload = Workload.of(games, env_id, num_envs)
    if not budget > 0 or not seconds > 0:
        raise ConfigError(f"budget and seconds must be positive, got budget={budget!r}, seconds={seconds!r}")
    todo = list(configs) if configs is not None else candidates(workload.num_envs)
    trials: list[Trial] = []
    start = time.perf_counter()
    for config in todo:
        spent = time.perf_counter() - start
        if trials and spent + seconds > budget:
            break
        if progress is not None:
            progress(_describe(config), spent, budget)
        rate, latency, _ = _time(workload, config, seconds)
        trials.append(Trial(config, rate, latency))
    trials.sort(key=lambda t: -t.steps_per_second)
    return TuneResult(workload, trials, len(todo) - len(trials))


def _describe(config: Config) -> str:
    if config.backend == "serial":
        return "serial"
    return f"{config.num_workers} workers, batch {config.batch_size}"


def _time(workload: Workload, config: Config, seconds: float) -> tuple[float, float, float]:
    rng = np.random.default_rng(0)
    with workload.make(config) as envs:
        envs.reset(seed=0)

        def step() -> int:
            space = envs.action_space  # an Atari mix in async mode has one per batch: sample the current one
            space.seed(int(rng.integers(2**31)))
            envs.step(space.sample())
            return envs.batch_size

        return time_steps(step, seconds, warmup=5)
