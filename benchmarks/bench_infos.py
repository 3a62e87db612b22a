"""What an env's infos cost a vector env: MuJoCo's HalfCheetah (four numpy floats in its info every step) stepped
with its infos, with every info dropped, and with an info of one Python int, on shoal's default configuration and
on Gymnasium's SyncVectorEnv, in one run.

    python benchmarks/bench_infos.py [--seconds 1] [--rounds 3] [--envs 8 16 64]

Prints steps/s of every configuration (its best window over ``--rounds`` interleaved rounds) and, for each vector
env, the share of its rate the infos cost (1 - with / without). Workers carry numeric infos like HalfCheetah's
through shared memory (``shoal.vector.info_table``); the rest of the cost is the merge into Gymnasium's vector form,
which SyncVectorEnv pays too.
"""

from __future__ import annotations

import argparse
import os
import sys

import gymnasium as gym

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import best_rate, halfcheetah  # noqa: E402

import shoal  # noqa: E402
from shoal.bench.throughput import interleaved  # noqa: E402


class Dropped(gym.Wrapper):
    """The env with every info replaced by an empty one."""

    def step(self, action):
        obs, reward, terminated, truncated, _ = self.env.step(action)
        return obs, reward, terminated, truncated, {}

    def reset(self, **kwargs):
        return self.env.reset(**kwargs)[0], {}


class OneInt(Dropped):
    """The env with every step's info replaced by ``{"t": <its step count>}``."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.t = 0

    def step(self, action):
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self.t += 1
        return obs, reward, terminated, truncated, {"t": self.t}


INFOS = {"own infos": halfcheetah, "no infos": lambda: Dropped(halfcheetah()), "one int": lambda: OneInt(halfcheetah())}
VECTOR_ENVS = {"shoal default": lambda fns: shoal.make(fns), "gymnasium Sync": gym.vector.SyncVectorEnv}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds over every configuration; best one counts")
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 16, 64])
    args = parser.parse_args()
    print(f"{'envs':>4s}  {'vector env':15s} {'infos':10s} {'steps/s (best of ' + str(args.rounds) + ')':>22s}")
    for n in args.envs:
        runs = {
            (vec, kind): (lambda vec=vec, kind=kind: best_rate(VECTOR_ENVS[vec]([INFOS[kind]] * n), args.seconds,
                                                               lambda envs: envs.reset(seed=0)))
            for vec in VECTOR_ENVS for kind in INFOS
        }
        rates = interleaved(runs, args.rounds)
        for (vec, kind), sps in rates.items():
            print(f"{n:4d}  {vec:15s} {kind:10s} {sps:22,.0f}", flush=True)
        for vec in VECTOR_ENVS:
            none = rates[(vec, "no infos")]
            print(f"{n:4d}  {vec:15s} infos cost {1 - rates[(vec, 'own infos')] / none:6.1%} "
                  f"(one int {1 - rates[(vec, 'one int')] / none:6.1%})", flush=True)


if __name__ == "__main__":
    main()
