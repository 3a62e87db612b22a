"""Synchronous batches on every core (issue 20, part 1): shoal against the bare limit and ale-py's pool, in one run.

    python benchmarks/bench_sync.py [--workers W] [--envs E] [--games breakout pong] [--seconds 3] [--warmup 2]
                                    [--rounds 2] [--profile] [--quick] [--more-workers W2 ...]

For each game, E envs (default 4 per worker) on W workers (default: every core), the benchmark settings (84x84 gray,
stack 4, frameskip 4, max-pool, noop 30, sticky 0), random actions, configurations interleaved round by round, each
scoring its best round (after ``--warmup`` seconds of stepping, so that every env has ended an episode: the first
reset of a ROM whose starts are restored emulates the starts it saves):

* the bare limit: W processes each running ALE's loop (4x ``act`` + ``getScreenGrayscale``) over its share of envs;
* shoal, synchronous batches: by default (the calling process steps one group itself), with ``inline=False`` (every
  group in a worker), each as by default (saved episode starts restored where rollouts stay unchanged, as for
  Breakout, Pong, Space Invaders: ``shoal.atari.starts``) and with ``reset_cache=False`` (every reset emulated, as
  before that default); and with ``copy=False`` (observations returned as views of the shared buffers, not copied);
* shoal, first-N-of-M asynchronous batches of E/4 (the configuration that keeps every worker busy);
* ale-py's C++ ``AtariVectorEnv`` with W threads, synchronous and with batches of E/4;
* with ``--more-workers``, shoal's default synchronous configuration on each of those numbers of workers too (more
  processes than cores: the OS then spreads the envs' uneven work over the cores, and every post wakes a sleeper).

Then, for each synchronous configuration of shoal, batch by batch: the calling process's CPU time, the share of
batches in which some env autoresets, their median duration against the others', their share of the wall time, and
the share of posts that found the worker asleep (each such post pays a wake-up: ``wake_latency.py``);
with ``--profile``, where the calling process's time goes (cProfile, default configuration). Last, the fixed cost of
a synchronous batch on W workers (CartPole, one env per worker). ``--quick``: only shoal's default and
``inline=False`` synchronous configurations beside the peers, and no fixed cost. Targets (16 cores, Breakout x 64):
sync >= 0.75 of the bare limit and >= 1.7x ale-py's synchronous pool.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np

import shoal
from bench_atari import bare_limit, profiled
from shoal.bench.throughput import SETTINGS, interleaved, time_steps
from shoal.vector import link
from shoal.vector.cpus import usable_cores

SYNC = {"": {}, ", inline=False": {"inline": False}, ", copy=False": {"copy": False},
        ", reset_cache=False": {"reset_cache": False},
        ", reset_cache=False, inline=False": {"reset_cache": False, "inline": False}}


def configs(game: str, envs: int, workers: int, sync: dict, more_workers: list[int]) -> dict:
    from ale_py.vector_env import AtariVectorEnv as AleVectorEnv

    games, batch = [game] * envs, max(envs // 4, 1)

    def ours(num_workers: int = workers, **kwargs):
        return lambda: shoal.AtariVectorEnv(games=games, num_workers=num_workers, **SETTINGS, **kwargs)

    return {
        **{f"shoal sync{name}": ours(**kwargs) for name, kwargs in sync.items()},
        **{f"shoal sync, {w} workers": ours(w) for w in more_workers},
        f"shoal async batch {batch}": ours(batch_size=batch),
        "ale-py sync": lambda: AleVectorEnv(game, envs, num_threads=workers, **SETTINGS),
        f"ale-py async batch {batch}": lambda: AleVectorEnv(game, envs, batch_size=batch, num_threads=workers,
                                                            **SETTINGS),
    }


class Stepper:
    """A step of ``venv`` with random actions (for the batch it holds, in asynchronous mode); returns env steps.
    Made after a reset and ``warmup`` seconds of such steps.
    (A class, not a closure that refers to itself: such a cycle would keep an ale-py vector env alive until a
    garbage collection, which could then run in a forked bare-limit process and destroy it there.)"""

    def __init__(self, venv, warmup: float) -> None:
        self.venv, self.rng, self.n = venv, np.random.default_rng(0), venv.single_action_space.n
        _, info = venv.reset(seed=0)
        self.ids = info.get("env_id", np.arange(venv.num_envs))
        self.last: tuple = ()
        start = time.perf_counter()
        while time.perf_counter() - start < warmup:
            self()

    def __call__(self) -> int:
        n = len(self.ids)
        self.last = self.venv.step(self.rng.integers(0, self.n, n))
        self.ids = self.last[4].get("env_id", self.ids)
        return n


def rate(venv, seconds: float, warmup: float) -> float:
    try:  # (ale-py's vector env is no context manager)
        step = Stepper(venv, warmup)
        return time_steps(step, seconds, warmup=0)[0]
    finally:
        venv.close()


@contextlib.contextmanager
def posts_to_sleepers(counts: list[int]):
    """Count, in ``counts``, the posts to workers (``counts[0]``) and those that found the worker asleep
    (``counts[1]``: the post had to wake it, and the step waited for the wake-up)."""
    original = link.Link.post_steps

    def post_steps(self, groups):
        counts[0] += 1
        counts[1] += bool(self.counters.load(self._asleep))
        original(self, groups)

    link.Link.post_steps = post_steps
    try:
        yield
    finally:
        link.Link.post_steps = original


def batches(game: str, envs: int, workers: int, seconds: float, warmup: float, **kwargs) -> dict[str, float]:
    """shoal's synchronous batches, one by one: the calling process's CPU time, which hold an autoreset, what those
    cost, and how often a worker was asleep when its step was posted."""
    posts = [0, 0]
    with shoal.AtariVectorEnv(games=[game] * envs, num_workers=workers, **SETTINGS, **kwargs) as venv:
        step = Stepper(venv, warmup)
        ended = np.logical_or(*step.last[2:4])
        times, resets = [], []
        start, cpu = time.perf_counter(), time.process_time()
        with posts_to_sleepers(posts):
            while time.perf_counter() - start < seconds:
                t = time.perf_counter()
                step()
                times.append(time.perf_counter() - t)
                resets.append(ended.any())  # next-step autoreset: the envs that ended last step reset in this one
                ended = np.logical_or(*step.last[2:4])
        cpu = time.process_time() - cpu
    times, resets = np.array(times), np.array(resets)
    return {
        "caller CPU ms": cpu / len(times) * 1e3,
        "mean ms": times.mean() * 1e3,
        "with a reset": resets.mean(),
        "their median ms": np.median(times[resets]) * 1e3 if resets.any() else float("nan"),
        "others' median ms": np.median(times[~resets]) * 1e3,
        "their share of the time": times[resets].sum() / times.sum(),
        "posts to a sleeper": posts[1] / max(posts[0], 1),
    }


def profile(game: str, envs: int, workers: int, seconds: float, warmup: float, **kwargs) -> None:
    """The calling process's time in a synchronous loop, by function (cProfile: internal time)."""
    with shoal.AtariVectorEnv(games=[game] * envs, num_workers=workers, **SETTINGS, **kwargs) as venv:
        step = Stepper(venv, warmup)
        print(f"  caller profile ({kwargs or 'default'}), seconds per batch by function:")
        count = profiled(step, seconds)
    print(f"  ({count} batches)")


def fixed_cost(workers: int, seconds: float, rounds: int) -> None:
    """What a synchronous batch costs beyond its envs' work: CartPole (~5 us a step) x W on W workers."""
    from bench_vector import measure

    def ours(**kwargs):
        return lambda: measure(shoal.make("CartPole-v1", workers, num_workers=workers, **kwargs), seconds)

    rates = interleaved({"default": ours(), "inline=False": ours(inline=False), "serial": lambda: measure(
        shoal.make("CartPole-v1", workers, backend="serial"), seconds)}, rounds)
    print(f"\nCartPole x {workers} on {workers} workers, a synchronous batch's time: " +
          ", ".join(f"{name} {workers / r * 1e6:.0f} us" for name, r in rates.items()), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=usable_cores())
    parser.add_argument("--envs", type=int, help="default: 4 per worker")
    parser.add_argument("--games", nargs="+", default=["breakout", "pong"])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of stepping before each measurement")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="profile the calling process (default config)")
    parser.add_argument("--quick", action="store_true", help="shoal: default and inline=False only; no fixed cost")
    parser.add_argument("--more-workers", type=int, nargs="*", default=[],
                        help="shoal's default sync configuration on these numbers of workers too")
    args = parser.parse_args()
    workers, envs = args.workers, args.envs or 4 * args.workers
    sync = {name: SYNC[name] for name in ("", ", inline=False")} if args.quick else SYNC
    for game in args.games:
        runs = {name: (lambda make=make: rate(make(), args.seconds, args.warmup))
                for name, make in configs(game, envs, workers, sync, args.more_workers).items()}
        runs["bare limit"] = lambda: bare_limit([game] * envs, args.seconds, processes=workers)
        rates = interleaved(runs, args.rounds)
        bare, ale_sync = rates["bare limit"], rates["ale-py sync"]
        print(f"\n{game} x {envs}, {workers} workers, steps/s (best of {args.rounds} rounds of {args.seconds:g} s)")
        print(f"  {'':46s} {'steps/s':>9s} {'/ bare':>7s} {'/ ale-py sync':>13s}")
        for name, r in rates.items():
            print(f"  {name:46s} {r:9,.0f} {r / bare:7.2f} {r / ale_sync:12.2f}x")
        print("  targets (16 cores, Breakout x 64): shoal sync >= 0.75 of the bare limit, >= 1.7x ale-py sync")
        print("  shoal sync, batch by batch:")
        for name, kwargs in sync.items():
            stats = batches(game, envs, workers, args.seconds, args.warmup, **kwargs)
            print(f"    {name[2:] or 'default':34s}" + ", ".join(f"{k} {v:.2f}" for k, v in stats.items()), flush=True)
        if args.profile:
            profile(game, envs, workers, args.seconds, args.warmup)
            profile(game, envs, workers, args.seconds, args.warmup, inline=False)
    if not args.quick:
        fixed_cost(workers, args.seconds, args.rounds)


if __name__ == "__main__":
    main()
