"""How a waiter's spin policy moves synchronous stepping, in one run (issue 20; ``shoal.vector.link.Spin``).

    python benchmarks/bench_spin.py [--policies adaptive:300 halving:100 adaptive:300:noinline ...] [--envs 2]
                                    [--rounds 40] [--slice 0.5] [--workers W] [--model nature|small] [--threads 2]
    python benchmarks/bench_spin.py --pinned [--rounds 5]

Builds Breakout x ``--envs`` synchronously (on ``--workers`` processes, by default as many as shoal chooses) once
per policy, and shoal's best asynchronous configuration (16 envs, 2 workers, batches of 8; with more than 16 envs,
the same envs and workers, batches of a quarter of the envs; shoal's default spin), all in this process, then steps
them in turns of ``--slice`` seconds for ``--rounds`` rounds (an idle one waits asleep), and prints each policy's
median ratio to the asynchronous configuration over the rounds. Policies: ``adaptive:US`` (shoal's, with a budget of
US microseconds), ``halving:US`` (the policy before 2026-11-26: the budget halved after each spin that ran out, one
full spin every 32nd wait once it is under 5 us) and ``fixed:US`` (never adapts); a third field ``:noinline`` builds
that one with ``inline=False`` (every group in a worker; by default the calling process steps one). ``--model
nature`` picks every configuration's actions with the Nature CNN (cleanrl's PPO Atari network, on ``--threads``
torch threads) from the observations it last returned, as training does (``small``: a network of a fraction of its
cost), so the workers wait while the model runs: a spin that takes a core from the model shows there. ``--pinned``
instead pins this process and its workers to one CPU and prints microseconds per batch of CartPole x 8 with one
worker, where a spin cannot pay.
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import numpy as np

import shoal
from bench_sync import Stepper
from shoal.bench.throughput import SETTINGS, time_in_turns, time_steps
from shoal.vector import _worker, link, multiproc


class Halving:
    """The spin policy before 2026-11-26, for comparison."""

    def __init__(self, most: float) -> None:
        self.most = self.budget = most
        self._skipped = 0

    def next(self) -> float:
        if self.budget >= 5e-6:
            return self.budget
        self._skipped += 1
        if self._skipped < 32:
            return 0.0
        self._skipped = 0
        return self.most

    def ended(self, in_time: bool) -> None:
        self.budget = self.most if in_time else self.budget / 2

    def slept(self, seconds: float) -> None:
        pass


class Fixed(link.Spin):
    """Spins its whole budget every wait."""

    def next(self) -> float:
        return self.most


POLICIES = {"adaptive": link.Spin, "halving": Halving, "fixed": Fixed}
DEFAULT = f"adaptive:{multiproc._DEFAULT_SPIN_US:g}"  # shoal's own policy (read before any use() changes it)


def use(policy: str) -> dict:
    """Vector envs made from now on (their calling process and their workers) wait with ``policy``; the keyword
    arguments it asks for."""
    kind, us, *rest = policy.split(":")
    multiproc.Spin = _worker.Spin = POLICIES[kind]
    multiproc._DEFAULT_SPIN_US = float(us)
    return {"inline": False} if rest == ["noinline"] else {}


class ModelStepper:
    """A step of ``venv`` with the actions ``net`` picks from the observations it returned last."""

    def __init__(self, venv, net) -> None:
        self.venv, self.net = venv, net
        self.obs, _ = venv.reset(seed=0)

    def __call__(self) -> int:
        import torch

        with torch.inference_mode():
            actions = self.net(torch.from_numpy(self.obs).float() / 255).argmax(dim=1).numpy()
        self.obs = self.venv.step(actions)[0]
        return len(actions)


def cnn(kind: str, actions: int, threads: int):
    """``nature``: cleanrl's PPO Atari network (the policy head); ``small``: two convolutions and a linear layer
    (bench_torch's), a fraction of its cost; on ``threads`` torch threads."""
    import torch
    from torch import nn

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if kind == "small":
        return nn.Sequential(
            nn.Conv2d(4, 16, 8, stride=4), nn.ReLU(), nn.Conv2d(16, 32, 4, stride=2), nn.ReLU(), nn.Flatten(),
            nn.Linear(32 * 9 * 9, actions),
        ).eval()
    return nn.Sequential(
        nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(),
        nn.Linear(512, actions),
    ).eval()


def model_ms(net, envs: int) -> float:
    """The model's time on a batch of ``envs`` observations, alone (median of 50 calls)."""
    import torch

    obs = torch.zeros((envs, 4, 84, 84), dtype=torch.uint8)
    times = []
    with torch.inference_mode():
        for _ in range(60):
            start = time.perf_counter()
            net(obs.float() / 255).argmax(dim=1)
            times.append(time.perf_counter() - start)
    return float(np.median(times[10:])) * 1e3


def breakout(policies: list[str], envs: int, rounds: int, seconds: float, workers: int | None,
             model: str | None = None, threads: int = 2) -> None:
    made = {}
    use(DEFAULT)  # the asynchronous base runs as shoal does by default
    n, w, batch = (envs, workers, envs // 4) if envs > 16 else (16, 2, 8)
    made["async"] = shoal.AtariVectorEnv(game="breakout", num_envs=n, num_workers=w, batch_size=batch, **SETTINGS)
    base_name = f"Breakout x {made['async'].num_envs} asynchronous (batches of {made['async'].batch_size})"
    for policy in policies:
        made[policy] = shoal.AtariVectorEnv(game="breakout", num_envs=envs, num_workers=workers, **SETTINGS,
                                            **use(policy))
    net = None if model is None else cnn(model, made["async"].single_action_space.n, threads)
    steps = {name: Stepper(e, warmup=0.0) if net is None else ModelStepper(e, net) for name, e in made.items()}
    rates = {name: [] for name in steps}
    for round_ in range(rounds):  # one turn each per round: a ratio per round
        timed = time_in_turns(steps, seconds, 1, warmup=50 if round_ == 0 else 0)
        for name, (rate, _, _) in timed.items():
            rates[name].append(rate)
    base = np.array(rates["async"])
    batch = made["async"].batch_size
    model = "" if net is None else (
        f", a CNN ({model}) picking actions between steps ({torch_threads()} threads; alone "
        f"{model_ms(net, envs):.2f} ms a call on {envs} observations, {model_ms(net, batch):.2f} on {batch})"
    )
    print(f"Breakout x {envs} synchronous on {made[policies[0]].num_workers} workers over {base_name}{model}, median "
          f"of {rounds} rounds (quartiles)")
    for name in policies:
        ratio = np.array(rates[name]) / base
        q1, med, q3 = np.percentile(ratio, [25, 50, 75])
        print(f"  {name:23s} {med:.3f}x  ({q1:.3f}-{q3:.3f})  {np.mean(rates[name]):8,.0f} steps/s")
    for e in made.values():
        e.close()


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def pinned(policies: list[str], rounds: int) -> None:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # the workers inherit it
    per = {policy: [] for policy in policies}
    for _ in range(rounds):
        for policy in policies:
            use(policy)
            envs = shoal.make([lambda: gym.make("CartPole-v1")] * 8, num_workers=1)
            envs.reset(seed=0)
            actions = np.zeros(8, np.int64)
            _, mean_ms, _ = time_steps(lambda: len(envs.step(actions)[1]), 1.0, warmup=200)
            per[policy].append(mean_ms * 1e3)
            envs.close()
    print(f"CartPole x 8, one worker, pinned to one CPU: us a batch ({rounds} runs)")
    for policy, us in per.items():
        print(f"  {policy:14s} median {np.median(us):6.0f}  all {np.round(us).astype(int).tolist()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policies", nargs="+", default=["halving:100", "adaptive:100", "adaptive:300",
                                                          "adaptive:1000"])
    parser.add_argument("--envs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--slice", type=float, default=0.5, help="seconds per configuration per round")
    parser.add_argument("--workers", type=int, help="default: as many as shoal chooses")
    parser.add_argument("--model", choices=["nature", "small"], help="actions picked by a CNN between steps")
    parser.add_argument("--threads", type=int, default=2, help="the model's torch threads")
    parser.add_argument("--pinned", action="store_true")
    args = parser.parse_args()
    if args.pinned:
        pinned(args.policies, args.rounds)
    else:
        breakout(args.policies, args.envs, args.rounds, args.slice, args.workers, args.model, args.threads)


if __name__ == "__main__":
    main()
