"""shoal's backends against Gymnasium's (and PufferLib's, when installed) vector envs, in one run.

    python benchmarks/bench_vector.py [--seconds 1] [--rounds 3] [--envs 8 16 64]
                                      [--workloads cartpole cartpole_stats burn200us dict halfcheetah lists
                                                   widened cast tuples strided nested frames]
                                      [--autoreset-mode next_step|same_step|disabled] [--shoal-workers N ...]
                                      [--sequences L]

Prints steps/s of every configuration (its best window over ``--rounds`` interleaved rounds) and, per workload and
env count, the ratio of shoal's best configuration to the best peer configuration measured in the same run (absolute
figures drift on a shared machine; ratios hold). ``--autoreset-mode same_step`` (what SB3 code steps) runs every
vector env in that mode (PufferLib, whose autoreset is its own, is left out then); ``disabled`` too, each step then
followed by a partial reset of the envs whose episode ended. PufferLib's configurations run when
pufferlib-core is installed (``pip install --no-deps pufferlib-core==3.0.23``: it pins torch 2.9.0, which would
replace the CPU build), over its own Gymnasium wrapper: its serial backend, its multiprocessing one with 1, 2 and
one per core workers, and the most of those answering half the envs (asynchronous). ``--sequences L``: shoal's
configurations step action sequences of ``L`` zero actions per env (``envs.step([array per env])``: each env runs its
own, stopping where its episode ends; its steps are counted from ``info["steps_taken"]``, so a next-step autoreset,
which takes an env's whole call, counts none), the peers ``L`` plain steps a call (what their users write instead).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from functools import partial

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import arguments, best_rate, puffer_make, side_by_side  # noqa: E402

import shoal  # noqa: E402
from shoal.vector.cpus import usable_cores  # noqa: E402


def measure(envs, seconds: float, sequences: int = 0) -> float:
    """Steps/s of ``envs`` (see :func:`workloads.best_rate`); with autoreset disabled, the envs whose episode ended
    are reset after each step, by ``reset(options={"reset_mask": ...})``, as Gymnasium's docs write that loop; with
    ``sequences``, see the module's docstring."""
    disabled = getattr(envs, "metadata", {}).get("autoreset_mode") is AutoresetMode.DISABLED  # (PufferLib: none)
    step = step_and_reset if disabled else None
    if sequences:
        step = partial(sequence_step, sequences) if isinstance(envs, shoal.VectorEnv) else RepeatedSteps(sequences)
    return best_rate(envs, seconds, lambda envs: envs.reset(seed=0), step=step)


def sequence_step(length: int, envs, actions) -> int:
    seqs = [np.zeros((length, *a.shape), a.dtype) for a in actions]
    return int(envs.step(seqs)[4]["steps_taken"].sum())


class RepeatedSteps:
    """``length`` plain steps a call; the env steps they ran: in next-step mode an env whose episode ended the step
    before resets instead, which is no step (as a sequence's ``steps_taken`` counts it)."""

    def __init__(self, length: int) -> None:
        self.length, self.ended = length, 0

    def __call__(self, envs, actions) -> int:
        ran = 0
        # (PufferLib's vector env, without the key, resets an env in the step that ended its episode)
        next_step = getattr(envs, "metadata", {}).get("autoreset_mode") is AutoresetMode.NEXT_STEP
        for _ in range(self.length):
            _, _, terminations, truncations, _ = envs.step(actions)
            ran += len(actions) - (self.ended if next_step else 0)
            self.ended = int(np.count_nonzero(terminations | truncations))
        return ran


def step_and_reset(envs, actions) -> None:
    _, _, terminations, truncations, _ = envs.step(actions)
    ended = terminations | truncations
    if ended.any():
        envs.reset(options={"reset_mask": ended})


def configs(fn, n, mode="next_step", workers=()):
    fns, mode = [fn] * n, AutoresetMode[mode.upper()]
    yield "shoal", "serial", lambda: shoal.make(fns, backend="serial", autoreset_mode=mode)
    # multiprocessing, inline; or serial (shoal.vector.load)
    yield "shoal", "default", lambda: shoal.make(fns, autoreset_mode=mode)
    yield "shoal", "mp 2 workers", lambda: shoal.make(fns, num_workers=2, inline=False, autoreset_mode=mode)
    for w in workers:
        yield "shoal", f"mp {w}, inline", lambda w=w: shoal.make(fns, num_workers=w, autoreset_mode=mode)
    yield "peer", "gymnasium Sync", lambda: gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
    yield "peer", "gymnasium Async", lambda: gym.vector.AsyncVectorEnv(fns, autoreset_mode=mode)
    if mode is not AutoresetMode.NEXT_STEP or importlib.util.find_spec("pufferlib") is None:
        return
    if getattr(fn, "outside_contains", False):  # (PufferLib's emulation refuses what its space does not contain)
        return
    make = partial(puffer_make, fn, n)
    yield "peer", "pufferlib Serial", lambda: make(backend="Serial")
    # one worker per core is PufferLib's rule (its calling process spins too); 1 and 2 for a 2-core machine
    counts = [w for w in sorted({1, 2, usable_cores()}) if n % w == 0]
    for workers in counts:
        yield "peer", f"pufferlib mp {workers}", lambda w=workers: make(backend="Multiprocessing", num_workers=w)
    # asynchronous: each recv returns the first half of the envs, as PufferLib's batch_size < num_envs does
    most = counts[-1]
    if most > 1:
        yield "peer", f"pufferlib mp {most} async", lambda: make(
            backend="Multiprocessing", num_workers=most, batch_size=n // 2
        )


def main() -> None:
    args = arguments(__doc__, [8, 16, 64], autoreset=True)
    if args.sequences and args.autoreset_mode == "disabled":
        raise SystemExit("--sequences runs with autoreset (next_step or same_step)")
    side_by_side(args, partial(configs, mode=args.autoreset_mode, workers=args.shoal_workers),
                 partial(measure, sequences=args.sequences), "peer", target=">= 1.2")


if __name__ == "__main__":
    main()
