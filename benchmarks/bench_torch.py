"""envs.torch(): the PyTorch op path against the numpy path, and what send/recv overlap gains, in one run.

    python benchmarks/bench_torch.py [--seconds 3] [--rounds 3]

1. Breakout x16 on the multiprocessing backend (the Atari benchmark's configuration), random actions: steps/s of
   ``envs.step`` (numpy) and of the ``step`` op (tensors), rounds interleaved; target: op / numpy >= 0.95.
2. With a model between steps (a small CNN on the batch, one torch thread): ``step`` then the model, against
   ``send``, the model on the previous observation, ``recv``. Overlap needs the calling process free while envs
   step, so both run with ``inline=False`` (every group in a worker).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import shoal
from bench_atari import SETTINGS, timed

N = 16


def make(**kwargs) -> shoal.AtariVectorEnv:
    return shoal.AtariVectorEnv(games=["breakout"] * N, num_workers=2, **SETTINGS, **kwargs)


def numpy_path(seconds: float) -> float:
    with make() as envs:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)

        def step() -> int:
            envs.step(rng.integers(0, 4, N))
            return N

        return timed(step, seconds)


def op_path(seconds: float) -> float:
    with make() as envs:
        envs.reset(seed=0)
        handle, send, step_op, recv, get_last_info, unregister = envs.torch()
        generator = torch.Generator().manual_seed(0)
        actions = torch.empty(N, dtype=torch.int64)

        def step() -> int:
            step_op(handle, actions.random_(0, 4, generator=generator))
            return N

        return timed(step, seconds)


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(4, 16, 8, stride=4), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 4, stride=2), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(32 * 9 * 9, 4),
    ).eval()


def with_model(seconds: float, overlap: bool) -> float:
    net = model()
    with make(inline=False) as envs, torch.inference_mode():
        obs, _ = envs.reset(seed=0)
        handle, send, step_op, recv, get_last_info, unregister = envs.torch()
        state = {"obs": torch.from_numpy(obs)}

        def act(obs: torch.Tensor) -> torch.Tensor:
            return net(obs.float() / 255).argmax(dim=1)

        def sequential() -> int:
            state["obs"] = step_op(handle, act(state["obs"]))[0]
            return N

        actions = [act(state["obs"])]

        def overlapped() -> int:
            send(handle, actions[0])  # the envs step while the model runs on the observation we hold
            actions[0] = act(state["obs"])
            state["obs"] = recv(handle)[0]
            return N

        return timed(overlapped if overlap else sequential, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    best = {"numpy": 0.0, "op": 0.0, "model, step then act": 0.0, "model, send/act/recv": 0.0}
    for r in range(args.rounds):
        best["numpy"] = max(best["numpy"], numpy_path(args.seconds))
        best["op"] = max(best["op"], op_path(args.seconds))
        best["model, step then act"] = max(best["model, step then act"], with_model(args.seconds, overlap=False))
        best["model, send/act/recv"] = max(best["model, send/act/recv"], with_model(args.seconds, overlap=True))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v:,.0f}" for k, v in best.items()), flush=True)
    print(f"\nBreakout x{N}, steps/s (best of {args.rounds} rounds of {args.seconds:g} s)")
    for name, rate in best.items():
        print(f"  {name:<24} {rate:>9,.0f}")
    print(f"\nop path / numpy path:        {best['op'] / best['numpy']:.3f}  (target >= 0.95)")
    print(f"overlap gain with a model:   {best['model, send/act/recv'] / best['model, step then act']:.3f}x")


if __name__ == "__main__":
    main()
