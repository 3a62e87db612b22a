"""Where a synchronous batch's time goes on W cores (issue 20, part 1): the limit of synchronous stepping over a fixed
split of envs (each process steps its own), and a timeline of shoal's batches, process by process.

    python benchmarks/sync_anatomy.py [--workers W] [--envs E] [--game breakout] [--seconds 3] [--warmup 2]
                                      [--rounds 2] [--spin-us 2000 ...]
                                      [--torch cuda] [--timeline-only] [--pin]

1. Limits, interleaved round by round (each its best round), W processes each over its E/W envs:

   * ``bare``: ALE's loop (4x ``act`` + ``getScreenGrayscale``), free-running: the bare limit of bench_sync.py;
   * ``bare, synchronized``: the same loops meeting at a barrier after each batch (one step of each of the process's
     envs), so that a batch lasts as long as its slowest process: what synchronous stepping loses to uneven steps
     alone, with no coordination cost (the barrier is a spin on a shared counter, ~1 us);
   * ``engines`` and ``engines, synchronized``: the same with shoal's serial backend over each process's envs
     (``AtariVectorEnv(backend="serial")``, the benchmark settings: preprocessing, restored starts and a vector
     env's bookkeeping included): about the most a synchronous multiprocessing step of shoal's could reach with
     this split (a little less: shoal's workers do not pay a vector env's bookkeeping);
   * ``shoal sync``: ``AtariVectorEnv`` with W workers, synchronous (by default the calling process steps a group);
     with ``--spin-us``, also with other spin budgets (how long a waiter spins before it sleeps);
   * ``ale-py sync``: ale-py's ``AtariVectorEnv`` with W threads;
   * with ``--pin``, also ``bare``, ``engines, synchronized`` and ``shoal sync`` with each process pinned to a core of
     its own (``os.sched_setaffinity``; shoal's workers pinned by pid once started, the calling process to the first
     core): whether the scheduler moving processes between cores is part of what a barrier loses.

2. A timeline of ``shoal sync``'s batches from timestamps taken in every process (``time.perf_counter``, the
   system-wide monotonic clock on Linux): per batch, the calling process's work before the first post, the posts, each
   worker's delay from its post to the start of its step, each process's step, the wait for the last answer after the
   calling process's own step, and the tail after it (copies left, infos, the return). Medians over batches; then
   whether the slowest process is the same one batch after batch (a slow core, which fewer envs for it would help)
   or a different one (uneven steps). With ``--torch DEVICE``, also the timeline of the same batches stepped through
   ``envs.torch(DEVICE)``'s ``step`` op.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import time

import numpy as np

import shoal
from bench_atari import bare_limit, bare_stepper, summed_rates
from shoal.bench.throughput import SETTINGS, interleaved
from shoal.vector import engine, link, multiproc
from shoal.vector._counters import Counters
from shoal.vector.cpus import usable_cores

ARRIVED, STOP = 0, 1  # the barrier's counters


class Barrier:
    """``parties`` processes meet after each batch: a spin on a shared counter (every process has its own core)."""

    def __init__(self, parties: int) -> None:
        self.parties, self.memory = parties, mp.get_context("fork").RawArray("b", Counters.nbytes(2))
        self.counters, self.batches = Counters(self.memory, 2), 0

    def meet(self) -> bool:
        """Wait for the others at the end of a batch; whether to go on (the first process says when to stop)."""
        self.batches += 1
        target, counters = self.parties * self.batches, self.counters
        value = counters.add(ARRIVED, 1)
        while value < target:
            value = counters.wait(ARRIVED, value, 1.0)
        return not counters.load(STOP)


def _bare_envs(game: str, count: int, seed: int):
    step = bare_stepper([game] * count, seed)

    def batch() -> int:
        for _ in range(count):
            step()
        return count

    return batch, lambda: None


def _engine_envs(game: str, count: int, seed: int):
    venv = shoal.AtariVectorEnv(games=[game] * count, backend="serial", **SETTINGS)
    venv.reset(seed=seed)
    rng, n = np.random.default_rng(seed), venv.single_action_space.n

    def batch() -> int:
        venv.step(rng.integers(0, n, count))
        return count

    return batch, venv.close


def _loop(kind: str, game: str, count: int, index: int, barrier: Barrier | None, seconds: float, warmup: float,
          core: int | None, out) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})
    batch, close = (_bare_envs if kind == "bare" else _engine_envs)(game, count, index)
    start = time.perf_counter()
    while time.perf_counter() - start < warmup:
        batch()
    if barrier is not None:
        barrier.meet()  # everyone starts together
    steps, start = 0, time.perf_counter()
    while True:
        steps += batch()
        elapsed = time.perf_counter() - start
        if barrier is None:
            if elapsed >= seconds:
                break
        else:
            if index == 0 and elapsed >= seconds:
                barrier.counters.store(STOP, 1)
            if not barrier.meet():
                break
    close()
    out.put(steps / (time.perf_counter() - start))


def limit(kind: str, game: str, envs: int, workers: int, seconds: float, warmup: float, synchronized: bool,
          pin: bool = False) -> float:
    """Steps/s of ``workers`` processes each stepping its share of ``envs`` (``kind``: ``bare`` or ``engines``); with
    ``pin``, process ``i`` on core ``i`` alone."""
    shares = [len(s) for s in np.array_split(np.arange(envs), workers)]
    barrier = Barrier(workers) if synchronized else None
    cores = _cores()
    return summed_rates(_loop, [(kind, game, k, i, barrier, seconds, warmup, cores[i % len(cores)] if pin else None)
                                for i, k in enumerate(shares)])


def _cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def shoal_sync(game: str, envs: int, workers: int, seconds: float, warmup: float, spin_us: float | None = None,
               pin: bool = False) -> float:
    from bench_sync import rate

    with spin(spin_us):
        venv = shoal.AtariVectorEnv(games=[game] * envs, num_workers=workers, **SETTINGS)
    if not pin:
        return rate(venv, seconds, warmup)
    cores = _cores()
    venv.reset(seed=0)  # (the workers start at the first command)
    for host, proc in venv._transport._procs.items():  # host 0 is the calling process, which steps one group
        os.sched_setaffinity(proc.pid, {cores[host % len(cores)]})
    os.sched_setaffinity(0, {cores[0]})
    try:
        return rate(venv, seconds, warmup)
    finally:
        os.sched_setaffinity(0, cores)


def ale_sync(game: str, envs: int, workers: int, seconds: float, warmup: float) -> float:
    from ale_py.vector_env import AtariVectorEnv as AleVectorEnv
    from bench_sync import rate

    return rate(AleVectorEnv(game, envs, num_threads=workers, **SETTINGS), seconds, warmup)


@contextlib.contextmanager
def spin(spin_us: float | None):
    """Vector envs made inside spin up to ``spin_us`` before sleeping (None: the default budget)."""
    default = multiproc._DEFAULT_SPIN_US
    multiproc._DEFAULT_SPIN_US = default if spin_us is None else spin_us
    try:
        yield
    finally:
        multiproc._DEFAULT_SPIN_US = default


# -- the timeline ------------------------------------------------------------------------------------------------------

_MOST = 1 << 16  # batches recorded


class Timeline:
    """Timestamps of every process's steps (forked workers inherit the patched methods and the shared arrays)."""

    def __init__(self, groups: int, per_group: int) -> None:
        raw = mp.get_context("fork").RawArray
        self.per_group = per_group
        self.steps = np.frombuffer(raw("d", groups * _MOST * 2), np.float64).reshape(groups, _MOST, 2)
        self.posts = np.frombuffer(raw("d", groups * _MOST), np.float64).reshape(groups, _MOST)
        self._done: dict[int, int] = {}  # per group, in each process: steps recorded
        self._posted: dict[int, int] = {}

    def patch(self):
        timeline, run_step, post_steps = self, engine.Engine.run_step, link.Link.post_steps

        def timed_run_step(self, ids, actions=None):
            start = time.perf_counter()
            try:
                return run_step(self, ids, actions)
            finally:
                group = int(ids[0]) // timeline.per_group
                k = timeline._done.get(group, 0)
                timeline._done[group] = k + 1
                if k < _MOST:
                    timeline.steps[group, k] = start, time.perf_counter()

        def timed_post_steps(self, groups):
            if groups[0] < 0:  # a message (reset, close, ...) on the pipe or in a mailbox, not a step
                return post_steps(self, groups)
            host = (self._posted - link._SHARED) // (3 + 2 * self.ring)
            k = timeline._posted.get(host, 0)
            timeline._posted[host] = k + 1
            if k < _MOST:
                timeline.posts[host, k] = time.perf_counter()
            post_steps(self, groups)

        engine.Engine.run_step, link.Link.post_steps = timed_run_step, timed_post_steps
        return lambda: (setattr(engine.Engine, "run_step", run_step), setattr(link.Link, "post_steps", post_steps))


def timeline(game: str, envs: int, workers: int, seconds: float, warmup: float, spin_us: float | None = None,
             device: str | None = None) -> None:
    """Print where shoal's synchronous batches spend their time (group 0 inline, as by default); with ``device``,
    those of the ``step`` op of ``envs.torch(device)``."""
    from bench_sync import Stepper

    trace = Timeline(workers, envs // workers)
    unpatch = trace.patch()
    try:
        with spin(spin_us):
            venv = shoal.AtariVectorEnv(games=[game] * envs, num_workers=workers, **SETTINGS)
        with venv:
            step = Stepper(venv, warmup)
            if device is not None:
                step = op_stepper(venv, device)
            first = trace._done.get(0, 0)  # batches stepped so far (the warm-up's): the caller's own group counts them
            calls = []
            start = time.perf_counter()
            while time.perf_counter() - start < seconds and first + len(calls) < _MOST:
                t0 = time.perf_counter()
                step()
                calls.append((t0, time.perf_counter()))
    finally:
        unpatch()
    k = slice(first, first + len(calls))
    t0, t1 = np.array(calls).T
    steps, posts = trace.steps[:, k], trace.posts[1:, k]  # host 0 is the calling process (inline): no posts
    own, workers_ = steps[0], steps[1:]
    last = workers_[:, :, 1].max(0)
    rows = {
        "batch (the step() call)": t1 - t0,
        "before the first post": posts.min(0) - t0,
        "posting (first to last post)": posts.max(0) - posts.min(0),
        "worker: post to its step's start, median": np.median(workers_[:, :, 0] - posts, 0),
        "worker: post to its step's start, slowest": (workers_[:, :, 0] - posts).max(0),
        "worker: its step, mean": (workers_[:, :, 1] - workers_[:, :, 0]).mean(0),
        "worker: its step, slowest": (workers_[:, :, 1] - workers_[:, :, 0]).max(0),
        "calling process: its own step": own[:, 1] - own[:, 0],
        "last answer after the calling process's step": np.maximum(last - own[:, 1], 0),
        "tail: last step's end to return": t1 - np.maximum(last, own[:, 1]),
        "ideal: slowest process's step alone": np.maximum((steps[:, :, 1] - steps[:, :, 0]).max(0), 0),
    }
    budget = (f"spin {spin_us:g} us" if spin_us is not None else "default spin") + \
        (f", the step op to {device}" if device is not None else "")
    print(f"\n{game} x {envs}, {workers} processes (calling process inline, {budget}), {len(calls)} batches: "
          f"medians, us")
    for name, values in rows.items():
        print(f"  {name:48s} {np.median(values) * 1e6:8.0f}")
    print(f"  batches in which the calling process finished last: {(own[:, 1] >= last).mean():.0%}")
    # Is the slowest process the same one batch after batch (a slow or shared core: fewer envs for it would pay), or
    # a different one each time (uneven steps: no split helps)? Process 0 is the calling process.
    durations = steps[:, :, 1] - steps[:, :, 0]
    medians = np.median(durations, 1)
    slowest = np.bincount(durations.argmax(0), minlength=len(durations)) / durations.shape[1]
    print(f"  per process, its step's median: {medians.min() * 1e6:.0f}-{medians.max() * 1e6:.0f} us, the highest "
          f"{medians.max() / medians.mean():.3f}x the mean; slowest of a batch most often: process "
          f"{slowest.argmax()}, in {slowest.max():.0%} of batches (a different one each time: {1 / len(slowest):.0%})")


def op_stepper(venv, device: str):
    """A step of ``venv`` through the ``step`` op of ``venv.torch(device)``, random actions (a CPU tensor)."""
    import torch

    handle, _, step_op, *_ = venv.torch(device=device)
    generator, actions = torch.Generator().manual_seed(0), torch.empty(venv.num_envs, dtype=torch.int64)
    n = venv.single_action_space.n

    def step() -> int:
        step_op(handle, actions.random_(0, n, generator=generator))
        return venv.num_envs

    for _ in range(20):
        step()
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=usable_cores())
    parser.add_argument("--envs", type=int, help="default: 4 per worker")
    parser.add_argument("--game", default="breakout")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--spin-us", type=float, nargs="*", default=[],
                        help="also shoal sync with these spin budgets (the default is 300 us)")
    parser.add_argument("--torch", metavar="DEVICE", help="also the timeline of envs.torch(DEVICE)'s step op")
    parser.add_argument("--timeline-only", action="store_true", help="skip the limits")
    parser.add_argument("--pin", action="store_true", help="also the limits and shoal sync with processes pinned")
    args = parser.parse_args()
    w, e = args.workers, args.envs or 4 * args.workers
    common = (args.game, e, w, args.seconds, args.warmup)
    if not args.timeline_only:
        limits(args, common)
    for us in [None, *args.spin_us]:
        timeline(*common, spin_us=us)
    if args.torch:
        timeline(*common, device=args.torch)


def limits(args, common: tuple) -> None:
    e, w = common[1], common[2]
    rates = interleaved({
        "bare": lambda: bare_limit([args.game] * e, args.seconds, processes=w),
        "bare, synchronized": lambda: limit("bare", *common, synchronized=True),
        "engines": lambda: limit("engines", *common, synchronized=False),
        "engines, synchronized": lambda: limit("engines", *common, synchronized=True),
        "shoal sync": lambda: shoal_sync(*common),
        **{f"shoal sync, spin {us:g} us": (lambda us=us: shoal_sync(*common, spin_us=us)) for us in args.spin_us},
        "ale-py sync": lambda: ale_sync(*common),
        **({
            "bare, pinned": lambda: limit("bare", *common, synchronized=False, pin=True),
            "engines, sync., pinned": lambda: limit("engines", *common, synchronized=True, pin=True),
            "shoal sync, pinned": lambda: shoal_sync(*common, pin=True),
        } if args.pin else {}),
    }, args.rounds)
    print(f"\n{args.game} x {e}, {w} processes, steps/s (best of {args.rounds} rounds of {args.seconds:g} s)")
    for name, r in rates.items():
        print(f"  {name:24s} {r:9,.0f} {r / rates['bare']:6.2f} of bare")
    print(f"  shoal sync / engines, synchronized: {rates['shoal sync'] / rates['engines, synchronized']:.2f}; "
          f"/ ale-py sync: {rates['shoal sync'] / rates['ale-py sync']:.2f}x")


if __name__ == "__main__":
    main()
