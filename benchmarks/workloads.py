"""The benchmark workloads besides CartPole and MuJoCo's HalfCheetah (a CPU-heavy image env, a cheap
Dict-observation env, and cheap envs returning their observations in the forms hand-written envs do: lists, tuples,
nested lists, arrays of another dtype, strided frames, a frame stack as a list of frames), and the side-by-side
comparison that bench_vector.py and bench_sb3.py run over them."""

from __future__ import annotations

import argparse
import time
from collections import deque
from typing import Any, Callable, Iterator

import gymnasium as gym
import numpy as np
from gymnasium import spaces


def burn(seconds: float) -> None:
    """Keep the CPU busy for ``seconds`` (an env step's stand-in cost)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class BurnEnv(gym.Env):
    """Burns ``burn_us`` of CPU per step and returns an 84x84x4 uint8 frame stack."""

    def __init__(self, burn_us: float = 200.0) -> None:
        self.observation_space = spaces.Box(0, 255, (84, 84, 4), np.uint8)
        self.action_space = spaces.Discrete(4)
        self.burn = burn_us / 1e6
        self.frame = np.zeros((84, 84, 4), np.uint8)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.frame, {}

    def step(self, action):
        burn(self.burn)
        self.t += 1
        self.frame[..., self.t % 4] = self.t % 256
        return self.frame, 1.0, False, self.t >= 500, {}


class DictObsEnv(gym.Env):
    """A cheap env with a Dict observation of four leaves of three dtypes."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "position": spaces.Box(-1, 1, (3,), np.float32),
                "velocity": spaces.Box(-1, 1, (2,), np.float32),
                "grid": spaces.Box(0, 255, (11, 11), np.uint8),
                "flag": spaces.Discrete(2),
            }
        )
        self.action_space = spaces.Discrete(4)
        self.t = 0
        self.obs = {
            "position": np.zeros(3, np.float32),
            "velocity": np.zeros(2, np.float32),
            "grid": np.zeros((11, 11), np.uint8),
            "flag": 0,
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.obs, {}

    def step(self, action):
        self.t += 1
        self.obs["position"][0] = self.t
        return self.obs, 0.1, False, self.t >= 200, {}


class ListObsEnv(gym.Env):
    """A cheap hand-written env whose observations are Python lists of floats, as many users' own envs return them."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return [0.0, 0.0, 0.0, 0.0], {}

    def step(self, action):
        self.t += 1
        return [self.t * 0.01, -0.5, float(action), 1.0], 1.0, False, self.t >= 200, {}


class WidenedObsEnv(ListObsEnv):
    """:class:`ListObsEnv` with int32 arrays for an int64 Box: a dtype numpy casts to the space's safely."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = spaces.Box(-100, 100, (4,), np.int64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.int32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t % 100, -5, int(action), 1], np.int32), 1.0, False, self.t >= 200, {}


class CastObsEnv(ListObsEnv):
    """:class:`ListObsEnv` with int64 arrays (numpy's default for ints) for a float32 Box, Gymnasium's default dtype:
    a dtype numpy casts to the space's as the same kind, rounding where it must, as Gymnasium's vector envs store it.
    ``Box.contains`` refuses it (it asks for a safe cast): Gymnasium's env checker warns, PufferLib's emulation
    raises, so its configurations are left out."""

    outside_contains = True

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.int64), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t % 100, -5, int(action), 1]), 1.0, False, self.t >= 200, {}


class TupleObsEnv(ListObsEnv):
    """:class:`ListObsEnv` with tuples of floats instead of lists (``return (x, y, vx, vy), ...``)."""

    def reset(self, *, seed=None, options=None):
        return tuple(super().reset(seed=seed)[0]), {}

    def step(self, action):
        self.t += 1
        return (self.t * 0.01, -0.5, float(action), 1.0), 1.0, False, self.t >= 200, {}


class NestedListObsEnv(ListObsEnv):
    """A cheap env whose observation is a 3x3 grid kept as a list of lists of floats (a float32 Box of that shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = spaces.Box(-np.inf, np.inf, (3, 3), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return [[0.0] * 3 for _ in range(3)], {}

    def step(self, action):
        self.t += 1
        return [[self.t * 0.01, -0.5, float(action)], [1.0, 0.0, 0.5], [0.25, 0.75, 2.0]], 1.0, False, self.t >= 200, {}


class StridedFrameEnv(gym.Env):
    """A cheap image env whose 84x84 uint8 frame is a slice of a larger screen (``screen[::2, ::2]``, a downsample
    as many users' own envs write it): an array of the space's dtype that is not C-contiguous."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 255, (84, 84), np.uint8)
        self.action_space = spaces.Discrete(2)
        self.screen = np.zeros((168, 168), np.uint8)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.screen[::2, ::2], {}

    def step(self, action):
        self.t += 1
        self.screen[self.t % 168] = self.t % 256
        return self.screen[::2, ::2], 1.0, False, self.t >= 200, {}



class FrameListEnv(gym.Env):
    """A cheap image env that keeps its last 4 frames in a deque and returns them as a list (``list(self.frames)``,
    as hand-written frame stacks do) for a (4, 84, 84) uint8 Box: a list holding arrays of the space's dtype."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
        self.action_space = spaces.Discrete(2)
        self.frames: deque[np.ndarray] = deque(maxlen=4)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.frames.extend(np.zeros((84, 84), np.uint8) for _ in range(4))
        return list(self.frames), {}

    def step(self, action):
        self.t += 1
        self.frames.append(np.full((84, 84), self.t % 256, np.uint8))
        return list(self.frames), 1.0, False, self.t >= 200, {}

def cartpole():
    return gym.make("CartPole-v1")


def cartpole_stats():
    """CartPole as cleanrl's scripts make it, in ``RecordEpisodeStatistics``: each episode's end brings an info
    ``{"episode": {"r", "l", "t"}}`` (a nested dict, which a worker pickles onto its pipe)."""
    return gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))


def halfcheetah():
    """MuJoCo's HalfCheetah (~40 us a step here, Box actions, infos of four floats each step; needs ``mujoco``)."""
    return gym.make("HalfCheetah-v5")


WORKLOADS = {
    "cartpole": cartpole, "cartpole_stats": cartpole_stats, "burn200us": BurnEnv, "dict": DictObsEnv,
    "halfcheetah": halfcheetah, "lists": ListObsEnv, "widened": WidenedObsEnv,
    "cast": CastObsEnv, "tuples": TupleObsEnv, "strided": StridedFrameEnv,
    "nested": NestedListObsEnv, "frames": FrameListEnv,
}
DEFAULT_WORKLOADS = ["cartpole", "burn200us", "dict"]


def puffer_make(fn: Callable[[], Any], n: int, multiagent: bool = False, **options: Any) -> Any:
    """PufferLib's vector env (``pufferlib.vector.make``) of ``n`` envs made by ``fn``, each in PufferLib's own wrapper
    (``PettingZooPufferEnv`` for a PettingZoo env when ``multiagent``, else ``GymnasiumPufferEnv``), as its docs make
    one; ``options``: ``backend`` (``"Serial"``, ``"Multiprocessing"``), ``num_workers``, ``batch_size``."""
    import pufferlib.vector

    return pufferlib.vector.make(puffer_creator(fn, multiagent), num_envs=n, **options)


def puffer_creator(fn: Callable[[], Any], multiagent: bool = False) -> Callable[..., Any]:
    """A PufferLib env creator of the env ``fn`` makes, in PufferLib's own wrapper (``PettingZooPufferEnv`` for a
    PettingZoo env when ``multiagent``, else ``GymnasiumPufferEnv``), as its docs write one."""
    import pufferlib.emulation

    wrapper = pufferlib.emulation.PettingZooPufferEnv if multiagent else pufferlib.emulation.GymnasiumPufferEnv

    def creator(buf=None, seed=0):
        return wrapper(env_creator=fn, buf=buf, seed=seed)

    return creator


def zero_actions(envs: Any) -> np.ndarray:
    """A batch of zeros of ``envs``' single action space (Gymnasium's API, PufferLib's, or SB3's, whose
    ``action_space`` is one env's)."""
    space = getattr(envs, "single_action_space", None) or envs.action_space
    return np.zeros((envs.num_envs, *space.shape), space.dtype)


def best_rate(envs: Any, seconds: float, reset: Callable[[Any], Any], windows: int = 5,
              step: Callable[[Any, Any], Any] | None = None) -> float:
    """Steps/s of vector env ``envs`` (Gymnasium's API or SB3's: ``step(actions)`` of :func:`zero_actions`, or
    ``step(envs, actions)``, which may return how many env steps it ran; else one per env; closed afterwards) after
    ``reset(envs)``: the best of ``windows`` windows of ``seconds / windows`` each, after a warm-up of one window
    (like ``timeit``'s minimum: a spell of the shared machine's noise costs one window)."""
    reset(envs)
    n = envs.num_envs
    actions = zero_actions(envs)
    step = step or _plain_step
    best, window = 0.0, seconds / windows
    for w in range(windows + 1):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < window:
            ran = step(envs, actions)
            steps += n if ran is None else ran
        if w:  # the first window warms up
            best = max(best, steps / (time.perf_counter() - start))
    close(envs)
    return best


def close(envs: Any) -> None:
    """``envs.close()``, then wait for the worker processes of PufferLib's ``Multiprocessing``, whose ``close``
    terminates them without waiting: the next configuration then neither starts beside them nor gets shared
    arrays they may still write into (they did, for up to ~50 ms, under Ray's SIGTERM handler)."""
    envs.close()
    for process in getattr(envs, "processes", ()):
        process.join(timeout=10)


def _plain_step(envs: Any, actions: Any) -> None:
    envs.step(actions)  # (one step per env: best_rate counts them)


Configs = Callable[[Callable[[], gym.Env], int], Iterator[tuple[str, str, Callable[[], Any]]]]
"""``configs(env_fn, n)``: ``(side, name, build)`` of each configuration, ``side`` being ``"shoal"`` or the peer's."""


def arguments(doc: str, envs: list[int], autoreset: bool = False) -> argparse.Namespace:
    """The command line both comparisons take (``autoreset``: and ``--autoreset-mode``, ``--shoal-workers``)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds over every configuration; best one counts")
    parser.add_argument("--envs", type=int, nargs="+", default=envs)
    parser.add_argument("--workloads", nargs="+", default=DEFAULT_WORKLOADS, choices=list(WORKLOADS),
                        help="halfcheetah needs mujoco (the test extra installs it)")
    if autoreset:
        parser.add_argument("--autoreset-mode", default="next_step", choices=["next_step", "same_step", "disabled"])
        parser.add_argument("--shoal-workers", type=int, nargs="*", default=[], metavar="N",
                            help="also shoal's multiprocessing backend with N workers (the calling process stepping "
                                 "one share, as by default)")
        parser.add_argument("--sequences", type=int, default=0, metavar="L",
                            help="shoal steps action sequences of L zero actions (counting the steps each env took), "
                                 "the peers L plain steps a call")
    return parser.parse_args()


def side_by_side(args: argparse.Namespace, configs: Configs, measure: Callable[[Any, float], float], peer: str,
                 target: str = "") -> None:
    """Each workload x env count: its configurations in interleaved rounds (steps/s of each, its best round), then
    shoal's best over ``peer``'s best, per workload and env count."""
    from shoal.bench.throughput import interleaved

    print(f"{'workload':10s} {'envs':>4s}  {'config':20s} {'steps/s (best of ' + str(args.rounds) + ')':>22s}")
    summary = []
    for workload in args.workloads:
        for n in args.envs:
            runs = {
                (side, name): (lambda build=build: measure(build(), args.seconds))
                for side, name, build in configs(WORKLOADS[workload], n)
            }
            best = {"shoal": (0.0, ""), peer: (0.0, "")}
            for (side, name), sps in interleaved(runs, args.rounds).items():
                print(f"{workload:10s} {n:4d}  {name:20s} {sps:22,.0f}", flush=True)
                best[side] = max(best[side], (sps, name))
            summary.append((workload, n, best["shoal"], best[peer]))
    print(f"\nshoal best / {peer} best (same run{'; target ' + target if target else ''})")
    for workload, n, (s, s_name), (p, p_name) in summary:
        print(f"{workload:10s} {n:4d}  {s / p:5.2f}x   ({s_name} {s:,.0f} vs {p_name} {p:,.0f})")
