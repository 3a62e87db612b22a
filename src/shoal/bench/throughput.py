"""Throughput and latency of shoal and its peers as the number of ROMs grows (the chart of the multi-ROM seed).

Every system steps the same games with the same Atari settings (84x84 gray, stack 4, frameskip 4, max-pool, 30
no-ops, no sticky actions) and random actions in one run, so their ratios hold on a noisy machine: for each number
of ROMs all the systems are opened together and take turns (:data:`TURNS` of them), so that a slow spell of a shared
machine, which lasts seconds, falls on all of them rather than on the one measured then.
"""

from __future__ import annotations

import contextlib
import platform
import random
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable, Mapping, Sequence, TypeVar

import numpy as np

from shoal.atari.roms import check_game, game_ids
from shoal.errors import ConfigError, MissingDependencyError
from shoal.vector.cpus import usable_cores
from shoal.vector.checks import check_positive_int, integer

if TYPE_CHECKING:
    from shoal.vector.base import Backend

DEFAULT_GAMES = (
    "pong", "breakout", "space_invaders", "ms_pacman", "qbert", "seaquest", "beam_rider", "enduro",
    "asterix", "asteroids", "boxing", "freeway", "frostbite", "gravitar", "montezuma_revenge", "private_eye",
)
"""The ROMs a benchmark takes first, in order, when it is not given its own (then every other single-player ROM
ale-py ships, in id order)."""

SYSTEMS = ("shoal", "shoal-async", "shoal-serial", "shoal-ray", "ale-py", "gymnasium")
"""What :func:`throughput` can measure: shoal's multiprocessing backend stepping all envs at once and in asynchronous
half batches (``send`` then ``recv`` of the first half of the envs to finish; latency: one such pair), its serial
and Ray backends, ale-py's C++
``AtariVectorEnv`` (one per ROM, stepped together: it runs one game per vector env) and Gymnasium's
``AsyncVectorEnv`` (one process per env; ``full_action_space=True``, the only way it takes a mix of ROMs)."""

SETTINGS: dict[str, Any] = dict(
    img_height=84, img_width=84, stack_num=4, frameskip=4, maxpool=True, noop_max=30,
    repeat_action_probability=0.0, reward_clipping=False, use_fire_reset=False,
)

Key = TypeVar("Key", bound=Hashable)

Progress = Callable[[str], None]
"""Called with a description when a measurement starts (a CLI advances its progress bar)."""


@dataclass(frozen=True)
class Measurement:
    """One system stepping ``roms`` ROMs x ``copies`` envs each.

    Attributes:
        system: one of :data:`SYSTEMS`.
        roms: how many different ROMs.
        copies: envs per ROM.
        num_envs: ``roms * copies``.
        steps_per_second: env steps per second (a batch step of ``num_envs`` envs counts ``num_envs``).
        latency_ms: mean wall time of one batch step, milliseconds.
        latency_p95_ms: its 95th percentile.
    """

    system: str
    roms: int
    copies: int
    num_envs: int
    steps_per_second: float
    latency_ms: float
    latency_p95_ms: float


@dataclass(frozen=True)
class ThroughputResult:
    """Every measurement of one run, and where it ran."""

    measurements: list[Measurement]
    games: list[str]
    seconds: float
    machine: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ThroughputResult:
        return cls(
            measurements=[Measurement(**m) for m in data["measurements"]],
            games=list(data["games"]),
            seconds=float(data["seconds"]),
            machine=dict(data.get("machine", {})),
        )

    def ratio(self, system: str, over: str, roms: int) -> float | None:
        """``system``'s steps/s over ``over``'s at ``roms`` ROMs, or None when either was not measured."""
        rate = {(m.system, m.roms): m.steps_per_second for m in self.measurements}
        a, b = rate.get((system, roms)), rate.get((over, roms))
        return None if a is None or b is None else a / b


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    import ale_py
    import gymnasium

    import shoal

    return {
        "cpus": usable_cores(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "shoal": shoal.__version__,
        "ale_py": ale_py.__version__,
        "gymnasium": gymnasium.__version__,
    }


TURNS = 4
"""Turns :func:`throughput` splits each system's ``seconds`` into, the systems stepping one after another in each."""


def time_steps(step: Callable[[], int], seconds: float, warmup: int = 10) -> tuple[float, float, float]:
    """Run ``step()`` (returning how many env steps it made) for ``seconds`` after ``warmup`` calls.

    Returns steps/s, the mean and the 95th percentile of one call's wall time (ms).
    """
    return time_in_turns({0: step}, seconds, 1, warmup)[0]


def time_in_turns(
    steps: Mapping[Key, Callable[[], int]], seconds: float, turns: int, warmup: int = 10,
    started: Callable[[Key], None] | None = None, shuffle: random.Random | None = None,
) -> dict[Key, tuple[float, float, float]]:
    """:func:`time_steps` of each of ``steps`` (``warmup`` calls each first), its ``seconds`` split into ``turns``
    turns and the steppers taking turns (in ``steps``' order, or one ``shuffle`` draws for every turn);
    ``started(key)`` as each one's first turn starts."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    counts = dict.fromkeys(steps, 0)
    spent = dict.fromkeys(steps, 0.0)
    durations: dict[Key, list[float]] = {key: [] for key in steps}
    order = list(steps)
    for turn in range(turns):
        if shuffle is not None:
            shuffle.shuffle(order)
        for key in order:
            step = steps[key]
            if turn == 0 and started is not None:
                started(key)
            calls, start = durations[key], time.perf_counter()
            while (now := time.perf_counter()) - start < seconds / turns:
                counts[key] += step()
                calls.append(time.perf_counter() - now)
            spent[key] += time.perf_counter() - start
    results = {}
    for key in steps:
        ms = np.asarray(durations[key]) * 1e3
        results[key] = (counts[key] / spent[key], float(ms.mean()), float(np.percentile(ms, 95)))
    return results


def interleaved(
    runs: Mapping[Key, Callable[[], float]], rounds: int, pick: Callable[[list[float]], float] = max
) -> dict[Key, float]:
    """Each of ``runs`` (a measurement returning a rate) once per round, in turn, so that a slow spell of a shared
    machine falls on all of them alike rather than on one's rounds; ``pick`` of each one's rates (the best)."""
    rates: dict[Key, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            rates[name].append(run())
    return {name: pick(values) for name, values in rates.items()}


def throughput(
    roms: Sequence[int] = (1, 2, 4, 8, 16),
    copies: int = 2,
    systems: Sequence[str] = ("shoal", "shoal-async", "shoal-serial", "ale-py", "gymnasium"),
    seconds: float = 2.0,
    games: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> ThroughputResult:
    """Measure each of ``systems`` on the first ``r`` of ``games`` x ``copies`` envs, for each ``r`` in ``roms``.

    Systems that are not installed (``shoal-ray`` needs Ray; ale-py's vector env needs ale-py >= 0.10) raise
    :class:`~shoal.errors.MissingDependencyError`; pass only the ones you have.
    """
    if games:
        games = [check_game(g) for g in games]
    else:
        games = list(DEFAULT_GAMES) + [g for g in game_ids() if g not in DEFAULT_GAMES]
    roms = _check_counts("roms", roms, len(games))
    copies = check_positive_int("copies", copies)
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown or not systems:
        raise ConfigError(f"systems must be some of {', '.join(SYSTEMS)}; got {list(systems)}")
    if not seconds > 0:
        raise ConfigError(f"seconds must be positive, got {seconds!r}")
    measurements = []
    for r in roms:
        chosen = [g for g in games[:r] for _ in range(copies)]

        def started(system: str, r: int = r) -> None:
            if progress is not None:
                progress(f"{system}: {r} ROM{'s' * (r > 1)} x {copies}")

        with contextlib.ExitStack() as opened:
            steps = {system: stepper(system, chosen, opened) for system in systems}
            timed = time_in_turns(steps, seconds, TURNS, started=started)
        measurements += [Measurement(system, r, copies, len(chosen), *timed[system]) for system in systems]
    return ThroughputResult(measurements, list(games[: max(roms)]), seconds, machine())


def _check_counts(name: str, counts: Sequence[int], limit: int) -> list[int]:
    counts = list(counts)
    if not counts or any(integer(c) is None or not 1 <= c <= limit for c in counts):
        raise ConfigError(f"{name} must be integers between 1 and {limit} (the games available), got {counts}")
    return [int(c) for c in counts]


def stepper(system: str, games: list[str], opened: contextlib.ExitStack) -> Callable[[], int]:
    """A ``step()`` of ``system`` over ``games`` with random actions; what it opens closes with ``opened``."""
    rng = np.random.default_rng(0)
    n = len(games)
    if system.startswith("shoal"):
        from shoal.atari import AtariVectorEnv

        if system == "shoal-async" and n > 1:
            return _async_stepper(games, opened, rng)
        backends: dict[str, Backend] = {"shoal-serial": "serial", "shoal-ray": "ray"}
        backend = backends.get(system, "multiprocessing")
        envs = opened.enter_context(AtariVectorEnv(games=games, backend=backend, **SETTINGS))
        envs.reset(seed=0)
        counts = np.asarray(envs.num_actions)

        def step_shoal() -> int:
            envs.step((rng.random(n) * counts).astype(np.int64))
            return n

        return step_shoal
    if system == "ale-py":
        pools = []
        for game in dict.fromkeys(games):
            pool = _ale_vector_env(game, games.count(game))
            opened.callback(pool.close)
            pool.reset(seed=0)
            pools.append(pool)

        def step_pools() -> int:
            for pool in pools:  # all sent before any is received: the pools step at the same time
                pool.send((rng.random(pool.num_envs) * pool.single_action_space.n).astype(np.int64))
            for pool in pools:
                pool.recv()
            return n

        return step_pools
    envs = gymnasium_async(games)
    opened.callback(envs.close)
    envs.reset(seed=0)

    def step() -> int:
        envs.step(rng.integers(0, 18, n))
        return n

    return step


def _async_stepper(games: list[str], opened: contextlib.ExitStack, rng: np.random.Generator) -> Callable[[], int]:
    """Half batches of ``games``: as many workers as cores that divide the envs evenly (asynchronous batches share
    them so), each holding two groups or more, the calling process free while envs step."""
    from shoal.atari import AtariVectorEnv

    n = len(games)
    workers = max(w for w in range(1, min(n, usable_cores()) + 1) if n % w == 0)
    envs = opened.enter_context(AtariVectorEnv(games=games, num_workers=workers, batch_size=n // 2, **SETTINGS))
    _, info = envs.reset(seed=0)
    counts = np.asarray(envs.num_actions)
    held = [info["env_id"]]

    def step() -> int:
        envs.send((rng.random(len(held[0])) * counts[held[0]]).astype(np.int64))
        held[0] = envs.recv()[4]["env_id"]
        return len(held[0])

    return step


def _ale_vector_env(game: str, num_envs: int) -> Any:
    try:
        from ale_py.vector_env import AtariVectorEnv
    except ImportError as exc:
        raise MissingDependencyError(
            "measuring ale-py's AtariVectorEnv needs ale-py >= 0.10 built with its vector env; leave 'ale-py' out "
            "of systems"
        ) from exc
    return AtariVectorEnv(game, num_envs, **SETTINGS)


def gymnasium_async(games: list[str]) -> Any:
    """Gymnasium's AsyncVectorEnv of ``AtariPreprocessing`` + ``FrameStackObservation`` envs with :data:`SETTINGS`
    (full action space: the only way it takes a mix of ROMs)."""
    import gymnasium as gym
    from ale_py.env import AtariEnv
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    def make(game: str) -> Callable[[], gym.Env]:
        def thunk() -> gym.Env:
            env = AtariEnv(game, obs_type="grayscale", frameskip=1, repeat_action_probability=0.0,
                           full_action_space=True)
            return FrameStackObservation(AtariPreprocessing(env, noop_max=30, frame_skip=4), 4)

        return thunk

    return gym.vector.AsyncVectorEnv([make(g) for g in games])
