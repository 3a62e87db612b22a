"""How many workers the default configuration uses, from how busy the machine is and what an env step costs.

On an idle machine, one worker per core, the calling process stepping one share itself, wins for any env. With
other processes keeping the cores busy, every step's hand-off between the calling process and a worker waits for
the scheduler, whose latency is a fraction of a millisecond to milliseconds: then a cheap env (CartPole, ~10 us a
step) steps faster all in the calling process (measured on 2 cores with 1 to 4 busy processes: shoal's workers ran
CartPole x 8 at 0.3-0.7x of one process), while an env whose step costs hundreds of microseconds still gains from
workers (200 us a step: 1.2-1.3x one process with 2 and 4 busy processes, 0.9x with 1). An env whose steps cost a
few microseconds gets fewer workers than cores even on an idle machine, so that each takes enough work off the
calling process to pay for its hand-off, and none (the calling process alone) where even two workers would not have
enough (on 2 cores, 8 envs of ~1 us a step). Both are measured when the vector env
is made: the number of runnable tasks the kernel reports (a few readings of ``/proc/loadavg``, ~10 ms), and what a
worker's share of a batch costs (:class:`ShareCost`): a few steps of one more env, made for that, timed
(:func:`env_share_cost`), or for a batch-native env a few steps of a worker's share of its instances on the serial
backend (:func:`native_share_cost`). The choice holds for the vector env's life; a machine that gets busy later is
not followed (``benchmarks/bench_busy.py`` measures both sides).
"""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any, Callable, NamedTuple

try:
    import resource
except ImportError:  # (not on Windows)
    resource = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

BUSY = 0.75
"""The machine counts as busy when other tasks are runnable this many times on average (a process that never sleeps
is 1.0; a transient one seldom reaches this)."""
TINY_BATCH_S = 5e-6
"""A worker's share of one batch below this much env work (as :func:`step_seconds` times it) does not pay for its
hand-off, even on an idle machine: fewer workers with larger shares step faster, or the calling process alone
(measured on 2 cores: the Dict workload, 0.84 us a step, ran with a worker per core at 0.87x the serial backend with
8 envs, a share of 3.4 us, and at 1.05x with 16, a share of 6.7 us; on 16 cores, see :func:`choose_workers`)."""
TINY_NATIVE_SHARE_S = 50e-6
"""A batch-native env's share below this much time (a serial step of a worker's share of the instances, shoal's
fixed cost of a step included: ~30 us) steps faster in the calling process even on an idle machine: the calling
process still checks, writes and copies out the worker's rows, and a hand-off costs as much as what the worker takes
off it (measured on 2 cores at 4096 instances: Bandit, a share of ~37 us, ran with a worker per core at 0.81-0.86x
the serial backend, Stochastic at ~49 us 0.94-1.20x, Memory at ~72 us 1.08-1.29x)."""
PROBED_UNITS = 16384
"""The most instances of a batch-native env the default times (a larger share is timed at this many and scaled up,
which counts shoal's fixed cost of a step more than once: never less than the share costs). Timing a share of 131072
Squared instances (a reset and three steps) took ~0.4 s; at this many ~40 ms."""
CHEAP_BATCH_S = 500e-6
"""A worker's share of one batch below this much env work counts as cheap: on a busy machine a hand-off costs as
much, so those envs step in the calling process."""
CHEAP_NATIVE_SHARE_S = 1.5e-3
"""A batch-native env's share below this much time (timed as for :data:`TINY_NATIVE_SHARE_S`) counts as cheap
(measured on 2 cores with 2 and 8 busy processes, a worker per core against the serial backend: Squared, a share of
~0.54 ms, 0.80-0.87x; ~1 ms, 0.91-1.01x; ~1.9 ms, 1.15-1.37x)."""
_READINGS, _READING_GAP_S = 8, 1e-3


def other_runnable(readings: int = _READINGS, gap_s: float = _READING_GAP_S) -> float:
    """The mean number of runnable tasks on this machine besides the calling thread, over ``readings`` readings of
    ``/proc/loadavg`` ``gap_s`` apart; 0.0 where there is no ``/proc/loadavg`` (not Linux)."""
    total = 0
    for k in range(readings):
        try:
            with open("/proc/loadavg") as f:
                running = f.read().split()[3]  # "runnable/total", the reader included
        except (OSError, IndexError):
            return 0.0
        total += int(running.split("/")[0]) - 1
        if k + 1 < readings:
            time.sleep(gap_s)
    return max(0.0, total / readings)


def step_seconds(make_env: Callable[[], Any], budget_s: float = 5e-3, max_steps: int = 16) -> float | None:
    """The median time of a few steps (after a seeded reset and one untimed step; sampled actions; within
    ``budget_s``, but at least three) of an env made by ``make_env`` (and closed); None where that cannot be timed (a
    human-rendering env, or one that raises: the vector env's own envs report that, naming the env, when they step).

    The median, not the mean, of the steps that kept the CPU: on a busy machine the process may lose the core for a
    few milliseconds during these steps, and a mean would count that against the env (one lost 4 ms slice among 16
    CartPole steps of ~10 us makes the mean ~25x the step, enough to call the env dear and keep its workers). At
    least three steps: :func:`_median_of`."""
    try:
        env = make_env()
    except Exception as exc:  # a probe only: the vector env's envs raise it again where it is reported
        log.debug("could not make an env to time its steps: %s", exc)
        return None
    try:
        if getattr(env, "render_mode", None) == "human":
            return None
        env.reset(seed=0)
        space = env.action_space
        space.seed(0)
        actions = [space.sample() for _ in range(max_steps + 1)]  # drawn before: sampling is not the env's cost
        env.step(actions.pop())  # untimed: a first step may be checked (Gymnasium's env checker) or warm caches

        def timed(k: int) -> float:
            before = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(actions[k])
            seconds = time.perf_counter() - before
            if terminated or truncated:  # (not timed)
                env.reset()
            return seconds

        return _median_of(timed, budget_s, max_steps)
    except Exception as exc:
        log.debug("could not time a step of %r: %s", env, exc)
        return None
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            close()


def _median_of(timed: Callable[[int], float], budget_s: float, max_steps: int) -> float:
    """The median of ``timed(k)`` (the seconds step ``k`` took) for ``k = 0, 1, ...``: steps within ``budget_s``, at
    least three (so that a slice lost to another process that uses up the budget is never half of what the median is
    taken over) and at most ``max_steps``.

    A step during which another task took this thread's CPU (an involuntary context switch) is not counted while
    any other is: its time is partly the other task's. With three spinning processes on 2 cores, about one step in
    five timed lost the CPU (a share of 128 Walk instances, ~0.4 ms idle on a slow host, timed at 0.5-1.2 ms); once,
    in a full test run, the share came out over 1.5 ms (dear) and kept its workers. A step that waits (sleeps, I/O)
    switches voluntarily and counts as it is. Time the hypervisor takes from a virtual machine is not seen here."""
    clean: list[float] = []
    preempted: list[float] = []
    start = time.perf_counter()
    while len(clean) + len(preempted) < max_steps and (len(clean) < 3 or time.perf_counter() - start < budget_s):
        switches = involuntary_switches()
        seconds = timed(len(clean) + len(preempted))
        (clean if involuntary_switches() == switches else preempted).append(seconds)
    return statistics.median(clean or preempted)


def involuntary_switches() -> int:
    """How many times the scheduler has taken this thread's CPU for another task (0 where the count is per process
    or not kept: every step then counts)."""
    if _RUSAGE_THREAD is None:
        return 0
    return resource.getrusage(_RUSAGE_THREAD).ru_nivcsw


_RUSAGE_THREAD = getattr(resource, "RUSAGE_THREAD", None) if resource is not None else None


class ShareCost(NamedTuple):
    """What a worker's share of one synchronous batch costs: ``seconds(units)`` times a share of that many units
    (envs; None: it could not be timed); ``tiny_s``, the share below which a hand-off does not pay, and ``cheap_s``,
    below which it does not pay on a busy machine."""

    seconds: Callable[[int], float | None]
    tiny_s: float
    cheap_s: float


def env_share_cost(make_env: Callable[[], Any]) -> ShareCost:
    """The share cost of Gymnasium envs made by ``make_env``: units times one env's step (:func:`step_seconds`,
    timed once, when first asked), below :data:`TINY_BATCH_S` tiny, below :data:`CHEAP_BATCH_S` cheap."""
    timed: list[float | None] = []

    def seconds(units: int) -> float | None:
        if not timed:
            timed.append(step_seconds(make_env))
        step = timed[0]
        return None if step is None else step * units

    return ShareCost(seconds, TINY_BATCH_S, CHEAP_BATCH_S)


def native_share_cost(make_serial: Callable[[int], Any]) -> ShareCost:
    """The share cost of a batch-native env: a serial vector env of a share's units (made by ``make_serial``; of
    :data:`PROBED_UNITS` at most, its time scaled up to the share's) timed by :func:`batch_step_seconds`, below
    :data:`TINY_NATIVE_SHARE_S` tiny, below :data:`CHEAP_NATIVE_SHARE_S` cheap."""

    def seconds(units: int) -> float | None:
        probed = min(units, PROBED_UNITS)
        step = batch_step_seconds(lambda: make_serial(probed))
        return None if step is None else step * units / probed

    return ShareCost(seconds, TINY_NATIVE_SHARE_S, CHEAP_NATIVE_SHARE_S)


def batch_step_seconds(make_envs: Callable[[], Any], budget_s: float = 5e-3, max_steps: int = 16) -> float | None:
    """:func:`step_seconds` of a vector env: the median time of a few steps (after a seeded reset and one untimed
    step; sampled actions; within ``budget_s``, at least three) of the vector env ``make_envs`` makes (and closes);
    None where that fails (the vector env's own envs report it when they step)."""
    try:
        envs = make_envs()
    except Exception as exc:
        log.debug("could not make a vector env to time its steps: %s", exc)
        return None
    try:
        envs.reset(seed=0)
        space = envs.action_space
        space.seed(0)
        actions = [space.sample() for _ in range(min(max_steps, 4))]  # drawn before: sampling is not the env's cost
        envs.step(actions[-1])  # untimed: the first step is checked (seed 004's first-batch checks)

        def timed(k: int) -> float:
            before = time.perf_counter()
            envs.step(actions[k % len(actions)])
            return time.perf_counter() - before

        return _median_of(timed, budget_s, max_steps)
    except Exception as exc:
        log.debug("could not time a step of %r: %s", envs, exc)
        return None
    finally:
        envs.close()


def choose_workers(units: int, cores: int, others: float, cost: ShareCost | None) -> int:
    """Workers for ``units`` envs stepped synchronously on ``cores`` cores with ``others`` runnable tasks besides
    the caller; ``cost`` says what a worker's share takes (None: unknown). 1 means the calling process alone.

    A worker's share of a batch (``cost.seconds`` of ``units / workers`` units, rounded up) decides. One worker per
    core, unless that share is under ``cost.tiny_s``: then half as many workers, each with twice the share, until
    it is not (the calling process posts to and collects from each worker in turn, so a worker that takes less off
    it than that costs more than it saves), and 1 where even two workers' shares are under it. On a busy machine
    (``others >=`` :data:`BUSY`), a share under ``cost.cheap_s`` keeps no more workers than there are free cores, and
    1 when fewer than two are free; an env of unknown cost, or a dearer share, keeps its workers (they gain even on
    shared cores).

    Measured on a lent 16-core machine (``benchmarks/RESULTS.md``, "Cheap envs on 16 cores"), the Dict workload of
    ``benchmarks/bench_vector.py`` (~0.8 us a step): x 64 stepped at 1.66x the serial backend with 16 workers, 1.74x
    with 8 and 1.88x with 4, where one worker per core's share (4 envs) was under ``tiny_s`` and the calling process
    alone used to be chosen; x 16 at 0.68x with 16 workers and 1.06x with 2.
    """
    per_core = min(units, cores)
    if per_core == 1:
        return 1
    if cost is None:
        return per_core
    workers = per_core
    share = cost.seconds(-(-units // workers))
    while share is not None and share < cost.tiny_s and workers > 2:
        workers //= 2
        share = cost.seconds(-(-units // workers))
    if share is None:
        return per_core
    if share < cost.tiny_s:
        workers = 1
    elif others >= BUSY and share < cost.cheap_s:
        free = int(cores - others + 0.5)
        workers = min(workers, free) if free >= 2 else 1
    if workers == per_core:
        return workers
    log.info(
        "%.1f other runnable tasks on %d cores and ~%.1f us a worker's share of a step: %d worker%s", others, cores,
        share * 1e6, workers, "" if workers == 1 else "s",
    )
    return workers
