"""Why synchronous batches lose the machine to resets, and what would win it back: a model from costs measured here.

    python benchmarks/sync_model.py [--games breakout pong space_invaders ms_pacman] [--seconds 4]

1. Measures, per ROM, on one core (shoal's serial engine, random actions, the benchmark settings): the wall time of
   a step, of an autoreset step (``reset_game``'s ~67 frames and up to 30 no-op frames, which next-step autoreset
   does in place of the step after an episode ends) and the episode lengths.
2. Replays those costs on W workers x E envs (random episode ends drawn from the measured lengths): a synchronous
   batch takes as long as its slowest worker; first-N-of-M asynchronous batches keep every worker busy, so they run
   at the total work over W. sync / async is the share of the machine synchronous stepping keeps. The same model
   prices what could recover it: a reset done in time the worker would wait anyway (``eager``, results unchanged,
   gains only while the caller's model runs: ``--model-ms``), and the next episode's start prepared ahead on a
   second emulator in the worker's idle time (``prepared``; not buildable on ale-py 0.12, whose ``act`` and
   ``reset_game`` hold the GIL, so a worker thread would stall the worker), and saved starts restored
   (``AtariVectorEnv``'s default where rollouts stay unchanged, ``reset_cache=True`` for every ROM; its reset costs
   are measured too, with a warm cache; the plain costs with ``reset_cache=False``).
3. Checks the model against what this machine does: Breakout x 2 on 2 workers and x 8, sync against async.

The 16-core figures it is checked against (PERFORMANCE.md, measured on a 16-core machine): Breakout x 64 on 16
workers, sync / async 0.37-0.45; Pong 0.62.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import shoal
from shoal.bench.throughput import SETTINGS, interleaved


def costs(game: str, seconds: float, reset_cache: bool = False) -> dict[str, np.ndarray]:
    """Step times, autoreset-step times (seconds) and episode lengths (steps) of one env of ``game``, one core."""
    settings = {k: v for k, v in SETTINGS.items() if k not in ("img_height", "img_width", "stack_num", "maxpool")}
    rng = np.random.default_rng(0)
    with shoal.AtariVectorEnv(game=game, num_envs=1, backend="serial", reset_cache=reset_cache, **settings) as envs:
        envs.reset(seed=0)
        n = envs.single_action_space.n
        steps, resets, lengths, length, ended = [], [], [], 0, False
        start = time.perf_counter()
        while time.perf_counter() - start < seconds or len(lengths) < 3:
            action = rng.integers(n, size=1)
            t = time.perf_counter()
            _, _, term, trunc, _ = envs.step(action)
            (resets if ended else steps).append(time.perf_counter() - t)
            length = 0 if ended else length + 1
            ended = bool(term[0] or trunc[0])
            if ended:
                lengths.append(length)
    return {"step": np.array(steps), "reset": np.array(resets), "length": np.array(lengths)}


def simulate(c: dict[str, np.ndarray], workers: int, per_worker: int, batches: int = 4000, strategy: str = "plain",
             model_s: float = 0.0, seed: int = 0) -> float:
    """Predicted sync / async throughput of ``workers`` x ``per_worker`` envs stepping ROM costs ``c``.

    ``strategy``: ``plain`` (today: a reset is done when the next step comes), ``eager`` (done as soon as the episode
    ends, in the time the worker waits for the slowest worker and for the caller's ``model_s``), ``prepared`` (a
    second emulator's next start is prepared in the worker's idle time; an episode end swaps it in at the cost of a
    step, or finishes what is left of the preparation then).
    """
    rng = np.random.default_rng(seed)
    envs = workers * per_worker
    left = rng.choice(c["length"], envs) * rng.random(envs)  # steps left in each env's current episode
    due = np.zeros(envs, bool)  # the env's next step is its autoreset
    ahead = np.zeros(envs)  # seconds of reset work already done ahead (eager or prepared)
    step, reset = c["step"], c["reset"]
    sync_time = work_total = 0.0
    for _ in range(batches):
        work = np.where(due, rng.choice(reset, envs), rng.choice(step, envs))
        if strategy == "prepared":
            work = np.where(due, np.maximum(work - ahead, 0.0) + rng.choice(step, envs), work)
        elif strategy == "eager":
            work = np.where(due, np.maximum(work - ahead, 0.0), work)
        real = np.where(due, rng.choice(reset, envs), work)  # what the machine must do in all (async's cost)
        per = work.reshape(workers, per_worker).sum(1)
        batch = per.max()
        sync_time += batch + model_s
        work_total += real.sum()
        idle = np.repeat(batch - per + model_s, per_worker) / per_worker  # a worker's wait, shared by its envs
        ahead = np.where(due, 0.0, ahead)
        if strategy == "eager":
            ahead = np.where(left <= 0, idle, 0.0)  # an env that just ended resets while its worker waits
        elif strategy == "prepared":
            ahead = np.minimum(ahead + idle, reset.mean())
        due = left <= 0
        left = np.where(due, rng.choice(c["length"], envs), left - 1)
    async_time = work_total / workers + batches * model_s * per_worker * workers / envs
    return async_time / sync_time


def measured(game: str, seconds: float) -> dict[str, float]:
    """This machine, steps/s: shoal sync with one env per core (2 envs) and 8 envs, and its best async configuration
    (16 envs, 2 workers, batches of 8), each by default (Breakout's starts restored) and with ``reset_cache=False``
    (every reset emulated)."""
    from bench_atari import run_vector

    def sync(n, cache):
        return lambda: run_vector(shoal.AtariVectorEnv(game=game, num_envs=n, reset_cache=cache, **SETTINGS), seconds)

    def async_(cache):
        return lambda: run_vector(shoal.AtariVectorEnv(game=game, num_envs=16, num_workers=2, batch_size=8,
                                                       reset_cache=cache, **SETTINGS), seconds)

    runs = {}
    for cache in ("auto", False):
        tag = " emulated" if cache is False else ""
        runs[f"sync x2{tag}"], runs[f"sync x8{tag}"], runs[f"async x16/8{tag}"] = sync(2, cache), sync(8, cache), \
            async_(cache)
    return interleaved(runs, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", nargs="+", default=["breakout", "pong", "space_invaders", "ms_pacman"])
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds of stepping per ROM")
    parser.add_argument("--model-ms", type=float, default=2.0, help="the caller's model time per batch, for eager")
    parser.add_argument("--no-check", action="store_true", help="skip step 3 (measuring sync/async here)")
    args = parser.parse_args()
    print(f"{'ROM':15s} {'step us':>8s} {'reset ms':>9s} {'reset/step':>10s} {'episode':>8s} {'resets %':>8s}")
    plain_costs, cached_costs = {}, {}
    for game in args.games:
        for store, cache in ((plain_costs, False), (cached_costs, True)):
            c = store[game] = costs(game, args.seconds, cache)
            s, r, n = np.median(c["step"]), np.median(c["reset"]), np.mean(c["length"])
            print(f"{game + (' cached' if cache else ''):15s} {s * 1e6:8.0f} {r * 1e3:9.2f} {r / s:10.1f} {n:8.0f} "
                  f"{100 / (n + 1):7.1f}%")
    shapes = [(16, 4, "16 cores, 64 envs"), (2, 1, "2 cores, 2 envs"), (2, 4, "2 cores, 8 envs")]
    print("\npredicted sync / async (share of the machine synchronous batches keep)")
    print(f"{'ROM':15s} {'shape':18s} {'plain':>6s} {'eager':>6s} {'eager+model':>11s} {'prepared':>8s} "
          f"{'reset_cache':>11s}")
    for game, c in plain_costs.items():
        for workers, per, label in shapes:
            plain = simulate(c, workers, per)
            eager = simulate(c, workers, per, strategy="eager")
            model = simulate(c, workers, per, strategy="eager", model_s=args.model_ms / 1e3)
            plain_model = simulate(c, workers, per, model_s=args.model_ms / 1e3)
            prepared = simulate(c, workers, per, strategy="prepared")
            cached = simulate(cached_costs[game], workers, per)
            print(f"{game:15s} {label:18s} {plain:6.2f} {eager:6.2f} {model / plain_model:10.2f}x {prepared:8.2f} "
                  f"{cached:11.2f}")
    print(f"(eager+model: eager over plain, both with the caller's model taking {args.model_ms} ms a batch; "
          f"reset_cache: sync over async, both with cached resets)")
    if not args.no_check:
        rates = measured("breakout", 3.0)
        best = rates["async x16/8"]
        print("\nmeasured here, Breakout, steps/s (best of 2 interleaved rounds), over the best async configuration "
              "(default; 'emulated': reset_cache=False)")
        for name, rate in rates.items():
            print(f"{name:18s} {rate:8,.0f}  {rate / best:.2f}x")


if __name__ == "__main__":
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
