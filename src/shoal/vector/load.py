"""How many workers the default configuration uses, from how busy the machine is and what an env step costs.

On an idle machine, one worker per core, the calling process stepping one share itself, wins for any env. With
other processes keeping the cores busy, every step's hand-off between the calling process and a worker waits for
the scheduler, whose latency is a fraction of a millisecond to milliseconds: then a cheap env (CartPole, ~10 us a
step) steps faster all in the calling process (measured on 2 cores with 1 to 4 busy processes: shoal's workers ran
CartPole x 8 at 0.3-0.7x of one process), while an env whose step costs hundreds of microseconds still gains from
workers (200 us a step: 1.2-1.3x one process with 2 and 4 busy processes, 0.9x with 1). An env whose steps cost a
few microseconds steps faster in the calling process even on an idle machine. Both are measured when the vector env
is made: the number of runnable tasks the kernel reports (a few readings of ``/proc/loadavg``, ~10 ms), and the time
a few steps of one more env, made for that, take. The choice holds for the vector env's life; a machine that gets
busy later is not followed (``benchmarks/bench_busy.py`` measures both sides).
"""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any, Callable

log = logging.getLogger(__name__)

BUSY = 0.75
"""The machine counts as busy when other tasks are runnable this many times on average (a process that never sleeps
is 1.0; a transient one seldom reaches this)."""
TINY_BATCH_S = 5e-6
"""A worker's share of one batch below this much env work (as :func:`step_seconds` times it) steps faster in the
calling process even on an idle machine: a hand-off and shoal's own work per env cost as much (measured on 2 cores:
the Dict workload, 0.84 us a step, ran with a worker per core at 0.87x the serial backend with 8 envs, a share of
3.4 us, and at 1.05x with 16, a share of 6.7 us)."""
CHEAP_BATCH_S = 500e-6
"""A worker's share of one batch below this much env work counts as cheap: on a busy machine a hand-off costs as
much, so those envs step in the calling process."""
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
    ``budget_s``) of an env made by ``make_env`` (and closed); None where that cannot be timed (a human-rendering
    env, or one that raises: the vector env's own envs report that, naming the env, when they step).

    The median, not the mean: on a busy machine the process may lose the core for a few milliseconds during these
    steps, and a mean would count that against the env (one lost 4 ms slice among 16 CartPole steps of ~10 us makes
    the mean ~25x the step, enough to call the env dear and keep its workers)."""
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
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < max_steps and (not times or time.perf_counter() - start < budget_s):
            before = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(actions[len(times)])
            times.append(time.perf_counter() - before)
            if terminated or truncated:
                env.reset()
        return statistics.median(times)
    except Exception as exc:
        log.debug("could not time a step of %r: %s", env, exc)
        return None
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            close()


def choose_workers(units: int, cores: int, others: float, step_cost: Callable[[], float | None] | None) -> int:
    """Workers for ``units`` envs stepped synchronously on ``cores`` cores with ``others`` runnable tasks besides
    the caller; ``step_cost()`` gives one env step's seconds (None: unknown). 1 means the calling process alone.

    A worker's share of a batch (``step_cost() * units / workers``) decides: under :data:`TINY_BATCH_S`, 1; on an
    idle machine (``others <`` :data:`BUSY`) otherwise one worker per core; on a busy one, an env of unknown cost or
    a share of :data:`CHEAP_BATCH_S` or more still one per core (workers gain even on shared cores), a cheaper one
    one per free core, and 1 when fewer than two cores are free.
    """
    per_core = min(units, cores)
    if per_core == 1:
        return 1
    cost = step_cost() if step_cost is not None else None
    share = None if cost is None else cost * units / per_core
    busy = others >= BUSY
    if share is not None and share < TINY_BATCH_S:
        workers = 1
    elif not busy or share is None or share >= CHEAP_BATCH_S:
        return per_core
    else:
        free = int(cores - others + 0.5)
        workers = min(units, free) if free >= 2 else 1
    assert cost is not None  # (each path here measured it)
    log.info(
        "%.1f other runnable tasks on %d cores and ~%.1f us an env step: %d worker%s", others, cores, cost * 1e6,
        workers, "" if workers == 1 else "s",
    )
    return workers
