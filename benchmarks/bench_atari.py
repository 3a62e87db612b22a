"""shoal's AtariVectorEnv against ale-py's C++ AtariVectorEnv, Gymnasium and the bare emulator, in one run.

    python benchmarks/bench_atari.py [--seconds 3] [--rounds 2] [--only single|multi|memory]

Same settings on every side: 84x84 gray, stack 4, frameskip 4, max-pool, noop 30, sticky 0, no reward clipping, no
fire reset, random actions. Each round runs every configuration of a workload once, in turn (so a slow spell of
this shared machine falls on all sides alike, not on one side's rounds); prints each configuration's best of
``--rounds`` and the ratios the targets are stated in:

* single ROM (Breakout, 16 envs): shoal's best / ale-py's best, and shoal's best / the bare limit (2 processes
  each running ALE's loop: 4x ``act`` + ``getScreenGrayscale``, no resize); and ale-py's drop-in
  (``shoal.ale_py.AtariVectorEnv``, synchronous, shoal's default workers) / ale-py's best; where EnvPool is
  installed, shoal's best / EnvPool's best (its C++ pool with 2 threads, synchronous and first-8-of-16, stepped
  with its own ``send(action, env_id)``/``recv()``, the same settings in its keywords), and EnvPool's drop-in
  (``shoal.envpool``, the same calls) / EnvPool's best;
* mixed ROMs (pong, breakout, space_invaders x 2 and x 4): shoal / three ale-py vector envs stepped together, and
  shoal / Gymnasium's AsyncVectorEnv (``full_action_space=True``, the only way it accepts the mix); and the bare
  limit of the mix (2 processes, each ALE's loop over its half of the games), which bounds what any vector env on
  this emulator can reach, so bare limit / Gymnasium is the highest ratio to Gymnasium that this run allowed;
* memory: total PSS (shared pages counted once) of 16 and 32 envs, all processes.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib
import importlib.util
import multiprocessing as mp
import os
import pstats
import time
from typing import Callable

import numpy as np

import shoal
import shoal.ale_py
from shoal.bench.throughput import SETTINGS, gymnasium_async, interleaved, stepper, time_steps

MIXED = ["pong", "breakout", "space_invaders"]


# -- stepping loops ------------------------------------------------------------------------------------------------


def timed(step: Callable[[], int], seconds: float) -> float:
    """Env steps per second of ``step()`` (which returns how many env steps it made), after 20 warm-up calls."""
    return time_steps(step, seconds, warmup=20)[0]


def round_ratios(numerators: list[float], denominators: list[float]) -> tuple[float, float, float]:
    """The ratio of each round's two figures (measured seconds apart, so this host's drift falls on both alike):
    their median, lowest and highest."""
    each = sorted(a / b for a, b in zip(numerators, denominators))
    return float(np.median(each)), each[0], each[-1]


def profiled(step: Callable[[], object], seconds: float, top: int = 10) -> int:
    """Call ``step`` for ``seconds`` under cProfile and print where the calling process's time went, per call, by
    function (internal time, the ``top`` first); how many calls that was."""
    profiler, count = cProfile.Profile(), 0
    start = time.perf_counter()
    profiler.enable()
    while time.perf_counter() - start < seconds:
        step()
        count += 1
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (cc, nc, tt, ct, ...)
    for (file, line, name), (_, calls, tottime, *_) in sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]:
        print(f"    {tottime / count * 1e6:8.0f} us  {calls / count:5.1f} calls  {os.path.basename(file)}:{name}")
    return count


def run_vector(envs, seconds: float) -> float:
    """Steps/s of any vector env with send/recv-style stepping (sync or first-N-of-M async)."""
    rng = np.random.default_rng(0)
    nvec = np.asarray(getattr(envs, "num_actions", None) or [envs.single_action_space.n] * envs.num_envs)
    _, info = envs.reset(seed=0)
    held = [info.get("env_id", np.arange(envs.num_envs))]  # the batch to act for (async: the last one received)

    def step() -> int:
        ids = held[0]
        _, _, _, _, info = envs.step((rng.random(len(ids)) * nvec[ids]).astype(np.int64))
        held[0] = info.get("env_id", ids)
        return len(ids)

    rate = timed(step, seconds)
    envs.close()
    return rate


def run_envpool(module: str, batch_size: int, n: int, seconds: float) -> float:
    """Steps/s of an EnvPool Breakout pool (2 threads; ``batch_size`` of ``n``: first-N-of-M) from ``module``
    (``"envpool"``, or ``"shoal.envpool"``: the same calls on shoal's engine), stepped the way EnvPool's docs
    recommend for speed: ``async_reset()``, then ``recv()`` and ``send(actions, env_id)`` in turn."""
    envpool = importlib.import_module(module)
    envs = envpool.make(
        "Breakout-v5", env_type="gymnasium", num_envs=n, batch_size=batch_size, num_threads=2, seed=0,
        img_height=SETTINGS["img_height"], img_width=SETTINGS["img_width"], stack_num=SETTINGS["stack_num"],
        frame_skip=SETTINGS["frameskip"], noop_max=SETTINGS["noop_max"],
        repeat_action_probability=SETTINGS["repeat_action_probability"], reward_clip=SETTINGS["reward_clipping"],
        use_fire_reset=SETTINGS["use_fire_reset"], episodic_life=False,
    )
    rng = np.random.default_rng(0)
    actions = int(envs.action_space.n)
    envs.async_reset()

    def step() -> int:
        *_, info = envs.recv()
        ids = info["env_id"]
        envs.send((rng.random(len(ids)) * actions).astype(np.int32), ids)
        return len(ids)

    rate = timed(step, seconds)
    envs.close()
    return rate


def run_system(system: str, games: list[str], seconds: float) -> float:
    """Steps/s of one of ``shoal bench``'s systems over ``games`` (``"ale-py"``: one ale-py vector env per ROM, all
    sent their actions before any is received, so they step at the same time)."""
    with contextlib.ExitStack() as opened:
        return timed(stepper(system, games, opened), seconds)


def bare_stepper(games: list[str], seed: int | None = None) -> Callable[[], None]:
    """One emulator per game of ``games`` and a function that steps the next one in turn, as ALE's loop does: 4x
    act + one grayscale read, random actions. ``seed``: of the actions and the emulators (None: ALE's own seed and
    actions seeded 0, the same in every process)."""
    import ale_py
    from ale_py import roms

    ales = []
    for k, game in enumerate(games):
        ale = ale_py.ALEInterface()
        ale.setLoggerMode(ale_py.LoggerMode.Error)
        ale.setFloat("repeat_action_probability", 0.0)
        if seed is not None:
            ale.setInt("random_seed", seed * 1000 + k)
        ale.loadROM(roms.get_rom_path(game))
        ales.append((ale, ale.getMinimalActionSet()))
    screen = np.empty((210, 160), np.uint8)
    rng = np.random.default_rng(seed or 0)
    turn = [0]

    def step() -> None:
        ale, actions = ales[turn[0] % len(ales)]
        turn[0] += 1
        a = actions[int(rng.integers(len(actions)))]
        for _ in range(4):
            ale.act(a)
        ale.getScreenGrayscale(screen)
        if ale.game_over():
            ale.reset_game()

    return step


def _bare_loop(games: list[str], seconds: float, out) -> None:
    """ALE's loop over one emulator per game of ``games``, in turn (:func:`bare_stepper`)."""
    step = bare_stepper(games)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        steps += 1
    out.put(steps / (time.perf_counter() - start))


def bare_limit(games: str | list[str], seconds: float, processes: int = 2) -> float:
    """The emulator alone: ``processes`` processes each looping 4x act + one grayscale read, over one game or its
    share of a list of games (as the envs are shared among shoal's workers: consecutive slices)."""
    games = [games] * processes if isinstance(games, str) else list(games)
    shares = [list(part) for part in np.array_split(np.asarray(games, dtype=object), processes)]
    return summed_rates(_bare_loop, [(share, seconds) for share in shares])


def summed_rates(target: Callable[..., None], arguments: list[tuple]) -> float:
    """Run ``target(*args, out)`` for each ``args`` of ``arguments``, each in a forked process, all at once: the sum
    of the rates they put in the queue ``out``."""
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, out)) for args in arguments]
    for p in procs:
        p.start()
    rates = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return sum(rates)


# -- configurations ----------------------------------------------------------------------------------------------


def single_configs(n: int) -> dict[str, tuple[str, Callable]]:
    from ale_py.vector_env import AtariVectorEnv as AleVectorEnv

    games = ["breakout"] * n
    return {
        "shoal mp 2 workers (inline)": ("shoal", lambda: shoal.AtariVectorEnv(games=games, num_workers=2, **SETTINGS)),
        "shoal mp async batch 8": (
            "shoal", lambda: shoal.AtariVectorEnv(games=games, num_workers=2, batch_size=n // 2, **SETTINGS)),
        "shoal serial": ("shoal", lambda: shoal.AtariVectorEnv(games=games, backend="serial", **SETTINGS)),
        "drop-in shoal.ale_py sync": ("drop-in", lambda: shoal.ale_py.AtariVectorEnv("breakout", n, **SETTINGS)),
        "ale-py sync": ("ale-py", lambda: AleVectorEnv("breakout", n, **SETTINGS)),
        "ale-py async batch 8": ("ale-py", lambda: AleVectorEnv("breakout", n, batch_size=n // 2, **SETTINGS)),
    }


def bench_single(seconds: float, rounds: int, n: int = 16) -> None:
    print(f"\nsingle ROM: breakout x {n}")
    runs = {name: (lambda make=make: run_vector(make(), seconds)) for name, (_, make) in single_configs(n).items()}
    if importlib.util.find_spec("envpool") is not None:
        runs["envpool sync"] = lambda: run_envpool("envpool", n, n, seconds)
        runs["envpool async batch 8"] = lambda: run_envpool("envpool", n // 2, n, seconds)
        runs["drop-in shoal.envpool sync"] = lambda: run_envpool("shoal.envpool", n, n, seconds)
        runs["drop-in shoal.envpool async 8"] = lambda: run_envpool("shoal.envpool", n // 2, n, seconds)
    runs["bare limit (2 processes)"] = lambda: bare_limit("breakout", seconds)
    rates = interleaved(runs, rounds)
    for name, rate in rates.items():
        print(f"  {name:32s} {rate:9.0f} steps/s")
    shoal_best = max(v for k, v in rates.items() if k.startswith("shoal"))
    ale_best = max(v for k, v in rates.items() if k.startswith("ale-py"))
    print(f"  ratio shoal best / ale-py best: {shoal_best / ale_best:.2f}x   (target >= 1.15)")
    print(f"  ratio shoal best / bare limit:  {shoal_best / rates['bare limit (2 processes)']:.2f}x   (target >= 0.90)")
    print(f"  ratio drop-in / ale-py best:    {rates['drop-in shoal.ale_py sync'] / ale_best:.2f}x")
    if "envpool sync" in rates:
        envpool_best = max(rates["envpool sync"], rates["envpool async batch 8"])
        drop_in = max(rates["drop-in shoal.envpool sync"], rates["drop-in shoal.envpool async 8"])
        print(f"  ratio shoal best / EnvPool best: {shoal_best / envpool_best:.2f}x")
        print(f"  ratio drop-in shoal.envpool best / EnvPool best: {drop_in / envpool_best:.2f}x")


def bench_multi(seconds: float, rounds: int) -> None:
    for copies in (2, 4):
        games = [str(g) for g in np.repeat(MIXED, copies)]
        print(f"\nmixed ROMs: {', '.join(MIXED)} x {copies} ({len(games)} envs)")
        rates = interleaved(
            {
                "shoal sync": lambda: run_vector(shoal.AtariVectorEnv(games=games, num_workers=2, **SETTINGS), seconds),
                "shoal async": lambda: run_vector(
                    shoal.AtariVectorEnv(games=games, num_workers=2, batch_size=len(games) // 2, **SETTINGS), seconds
                ),
                "pools": lambda: run_system("ale-py", games, seconds),
                "gymnasium": lambda: run_vector(gymnasium_async(games), seconds),
                "bare": lambda: bare_limit(games, seconds),
            },
            rounds,
        )
        ours, pools, gym_rate = max(rates["shoal sync"], rates["shoal async"]), rates["pools"], rates["gymnasium"]
        print(f"  {'shoal best':32s} {ours:9.0f} steps/s")
        print(f"  {'3 ale-py pools stepped together':32s} {pools:9.0f} steps/s")
        print(f"  {'gymnasium AsyncVectorEnv':32s} {gym_rate:9.0f} steps/s")
        print(f"  {'bare limit (2 processes)':32s} {rates['bare']:9.0f} steps/s")
        print(f"  ratio shoal / ale-py pools: {ours / pools:.2f}x (target >= 1.2)   "
              f"shoal / gymnasium async: {ours / gym_rate:.2f}x (target >= 2.5)")
        print(f"  shoal / bare limit: {ours / rates['bare']:.2f}x   bare limit / gymnasium async: "
              f"{rates['bare'] / gym_rate:.2f}x (the most any vector env on this emulator could show)")


def total_pss_mib() -> float:
    import psutil

    me = psutil.Process()
    return sum(p.memory_full_info().pss for p in [me, *me.children(recursive=True)]) / 2**20


def bench_memory() -> None:
    print("\nmemory (total PSS of every process, after 100 steps)")
    sizes = {}
    for n in (16, 32):
        envs = shoal.AtariVectorEnv(games=["breakout"] * n, num_workers=2, **SETTINGS)
        envs.reset(seed=0)
        for _ in range(100):
            envs.step(np.zeros(n, np.int64))
        sizes[n] = total_pss_mib()
        envs.close()
        print(f"  shoal, {n} envs: {sizes[n]:6.1f} MiB")
    print(f"  per additional env: {(sizes[32] - sizes[16]) / 16:.2f} MiB   (targets: <= 120 MiB at 16, <= 2 MiB/env)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=["single", "multi", "memory"])
    args = parser.parse_args()
    if args.only in (None, "memory"):
        bench_memory()
    if args.only in (None, "single"):
        bench_single(args.seconds, args.rounds)
    if args.only in (None, "multi"):
        bench_multi(args.seconds, args.rounds)


if __name__ == "__main__":
    main()
