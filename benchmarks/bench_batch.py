"""The sanity envs, batch-native, against the same envs one instance at a time, in one run.

    python benchmarks/bench_batch.py [--instances 4096] [--seconds 1] [--rounds 3] [--envs Squared Memory ...]
                                     [--autoreset-mode next_step|same_step] [--bound]

Per env: steps/s of shoal's batch-native env (serial, and multiprocessing with 2 workers), of the single-instance
Gymnasium env under Gymnasium's ``SyncVectorEnv`` and under shoal's per-instance path (``shoal.make`` of the
single-instance env, serial). The single-instance configurations step ``--single-instances`` envs (fewer: they are
thousands of times slower, and their steps/s hardly depends on the count). Prints the ratios the targets are stated
in. PufferLib's Ocean envs are not measured: pufferlib 3.0.0 builds them from source, and its build downloads raylib
(unreachable here); pufferlib-core, which installs, has none.

"bare x2" is what two cores give with no coordination at all: two independent processes at once, each stepping
half the instances on the serial backend, their steps/s summed. A multiprocessing vector env cannot beat it (it
does the same work, plus the hand-offs, and its calling process checks, writes and copies out the whole batch),
so it bounds the multiprocessing / serial ratio from above; on a cheap env at a few thousand instances, where a
step is mostly shoal's fixed cost per call, that bound itself is below 1.6x.

``--bound`` adds "mp x2 bound": the multiprocessing configuration with the calling process's action check and its
copies out removed (see :func:`unchecked_uncopied`), what the backend could reach if that share cost nothing, and
"serial bound", the serial backend with the same cuts. "bound/serial" sets the first against the serial backend as
it runs; "bound/bound" against the second, which is the ratio those cuts could give if both backends made them.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

import gymnasium as gym

import shoal
from shoal.bench.throughput import interleaved
from shoal.sanity import NAMES


def measure(envs, seconds: float, windows: int = 4, agents: int = 1) -> float:
    """Steps/s (agent-steps/s: rows, or ``agents`` per env of a joint multi-agent env) over the best of ``windows``
    windows after one warm-up window, with pre-drawn random actions."""
    envs.reset(seed=0)
    n = envs.num_envs * agents
    space = envs.action_space
    space.seed(0)
    actions = [space.sample() for _ in range(16)]
    best, window = 0.0, seconds / windows
    k = 0
    for w in range(windows + 1):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < window:
            envs.step(actions[k % 16])
            k += 1
            steps += n
        if w:
            best = max(best, steps / (time.perf_counter() - start))
    envs.close()
    return best


def _serial_rate(env_id: str, envs: int, seconds: float, mode: str = "next_step") -> float:
    return measure(shoal.make(env_id, envs, backend="serial", autoreset_mode=mode), seconds)


def bare(env_id: str, envs: int, seconds: float, mode: str = "next_step", processes: int = 2) -> float:
    """Steps/s of ``processes`` independent processes at once, each stepping ``envs // processes`` envs serially."""
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        # Every process up and shoal imported before timing: submitted together, so that the pool starts them all
        # (one submitted after another's answer would go to the process already idle)
        for warm in [pool.submit(_serial_rate, env_id, 1, 0.01) for _ in range(processes)]:
            warm.result()
        rates = [pool.submit(_serial_rate, env_id, envs // processes, seconds, mode) for _ in range(processes)]
        return sum(rate.result() for rate in rates)


def unchecked_uncopied(env_id: str, envs: int, seconds: float, mode: str = "next_step", **options) -> float:
    """Steps/s of ``batch mp x2 inline`` (or of the vector env ``options`` make) with its calling process's own share
    of a step cut to the bone: no action check and nothing copied out (observations, rewards and flags handed out
    as views of the shared buffers). Not a configuration anyone should run (a bad action would reach the env, and
    every result changes under the caller at the next step): a bound on what the backend could reach with that
    share gone."""
    import shoal.vector.base as base
    import shoal.vector.results as results

    built = shoal.make(env_id, envs, copy=False, autoreset_mode=mode, **(options or {"num_workers": 2}))
    built._check_actions = lambda space, actions, n, where: actions
    take = results.take
    base.take = results.take = lambda array, rows: array[rows]
    try:
        return measure(built, seconds)
    finally:
        base.take = results.take = take


def configs(name: str, instances: int, single: int, mode: str = "next_step"):
    """(label, build, agents per env of the built vector env's steps). Multiagent's batch-native env has a row per
    agent (``instances`` rows: half as many envs); its Gymnasium env holds both agents, so its steps count twice."""
    env_id = f"shoal/{name}-v0"
    agents = 2 if name == "Multiagent" else 1
    envs = instances // agents
    yield "batch serial", lambda: shoal.make(env_id, envs, backend="serial", autoreset_mode=mode), 1
    yield "batch mp x2", lambda: shoal.make(env_id, envs, num_workers=2, inline=False, autoreset_mode=mode), 1
    yield "batch mp x2 inline", lambda: shoal.make(env_id, envs, num_workers=2, autoreset_mode=mode), 1
    fns = [lambda: gym.make(env_id)] * single
    gym_mode = gym.vector.AutoresetMode("NextStep" if mode == "next_step" else "SameStep")
    yield "gymnasium Sync", lambda: gym.vector.SyncVectorEnv(fns, autoreset_mode=gym_mode), agents
    yield "shoal per-instance", lambda: shoal.make(fns, backend="serial", autoreset_mode=mode), agents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=4096, help="instances (rows: Multiagent's are agents)")
    parser.add_argument("--single-instances", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--envs", nargs="+", default=list(NAMES), choices=list(NAMES))
    parser.add_argument("--bound", action="store_true",
                        help="also measure mp x2 inline without the action check and the copies out (a bound)")
    parser.add_argument("--autoreset-mode", default="next_step", choices=["next_step", "same_step"],
                        help="every configuration's (same-step adds each ended episode's final_obs to the infos)")
    args = parser.parse_args()
    print(f"{'env':11s} {'config':20s} {'steps/s (best of ' + str(args.rounds) + ')':>22s}")
    summary = []
    for name in args.envs:
        runs = {config: (lambda build=build, agents=agents: measure(build(), args.seconds, agents=agents))
                for config, build, agents in configs(name, args.instances, args.single_instances, args.autoreset_mode)}
        env_id, envs = f"shoal/{name}-v0", args.instances // (2 if name == "Multiagent" else 1)
        runs["bare x2"] = lambda: bare(env_id, envs, args.seconds, args.autoreset_mode)
        if args.bound and name != "Multiagent":
            runs["mp x2 bound"] = lambda: unchecked_uncopied(env_id, envs, args.seconds, args.autoreset_mode)
            runs["serial bound"] = lambda: unchecked_uncopied(env_id, envs, args.seconds, args.autoreset_mode,
                                                              backend="serial")
        rates = interleaved(runs, args.rounds)
        for config, sps in rates.items():
            print(f"{name:11s} {config:20s} {sps:22,.0f}", flush=True)
        summary.append((name, rates))
    print(f"\n{args.instances} instances, {args.autoreset_mode} autoreset; targets: serial >= 1,000,000 steps/s, "
          f"multiprocessing on 2 cores >= 1.6x serial")
    print(f"{'env':11s} {'serial M/s':>10s} {'mp/serial':>9s} {'bare/serial':>11s} {'vs Gym Sync':>11s} "
          f"{'vs per-instance':>15s}" + (f" {'bound/serial':>12s} {'bound/bound':>11s}" if args.bound else ""))
    for name, r in summary:
        mp = max(r["batch mp x2"], r["batch mp x2 inline"])
        best = max(r["batch serial"], mp)
        bound = (f" {r['mp x2 bound'] / r['batch serial']:11.2f}x {r['mp x2 bound'] / r['serial bound']:10.2f}x"
                 if "mp x2 bound" in r else "")
        print(f"{name:11s} {r['batch serial'] / 1e6:10.2f} {mp / r['batch serial']:8.2f}x "
              f"{r['bare x2'] / r['batch serial']:10.2f}x {best / r['gymnasium Sync']:10.0f}x "
              f"{best / r['shoal per-instance']:14.0f}x" + bound)


if __name__ == "__main__":
    main()
