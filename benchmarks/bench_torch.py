"""envs.torch(): the PyTorch op path against the numpy path, and what send/recv overlap gains, in one run.

    python benchmarks/bench_torch.py [--seconds 3] [--rounds 3] [--envs 16] [--workers 2] [--device cpu]
                                     [--emulate-resets] [--no-inline] [--quick] [--profile]

Breakout x ``--envs`` on ``--workers`` worker processes (synchronous batches), random actions, rounds interleaved
(each configuration's best round; the op's ratios also round by round, their median and range):

1. Steps/s of ``envs.step`` (numpy) and of the ``step`` op (tensors), alone and followed by ``get_last_info``;
   target: op / numpy >= 0.95 on the CPU. With a CUDA ``--device`` the numpy path is ``envs.step`` then
   ``torch.from_numpy(obs).to(device)`` (target: op / numpy + copy >= 1.1), measured beside ``envs.step`` alone and
   the copy alone (what the op could gain at most); either way the observations are on the device in stream order
   (what the caller launches next reads them), and neither path waits for the copy to end; the op also runs waiting
   for its copies after each step (``op, copies waited for``; in one timeline on a lent machine its workers then
   stepped faster: here the two run in turns). ``--profile``: then where the calling process's time goes, op path
   and numpy path.
2. With a model between steps (a small CNN on the batch; on the CPU, one torch thread): ``step`` then the model,
   against ``send``, the model on the previous observation, ``recv``; with a CUDA device also the numpy path with the
   same model. Overlap needs the calling process free while envs step, so these run with ``inline=False`` (every
   group in a worker).

Measured on a 16-core machine with ``--envs 64 --workers 16 --device cuda`` (issue 20, part 4).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import shoal
from bench_atari import SETTINGS, profiled, round_ratios, timed


def make(args, **kwargs) -> shoal.AtariVectorEnv:
    kwargs.setdefault("inline", args.inline)
    return shoal.AtariVectorEnv(games=["breakout"] * args.envs, num_workers=args.workers,
                                reset_cache=args.reset_cache, **SETTINGS, **kwargs)


def numpy_path(args, device: torch.device, to_device: bool = True, profile: bool = False) -> float:
    """``envs.step``, then (with a CUDA ``device`` and ``to_device``) its observations copied there."""
    n = args.envs
    with make(args) as envs:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)

        def step() -> int:
            obs = envs.step(rng.integers(0, 4, n))[0]
            if to_device and device.type == "cuda":
                torch.from_numpy(obs).to(device)
            return n

        return profile_of(step, args.seconds) if profile else timed(step, args.seconds)


def op_path(args, device: torch.device, profile: bool = False, infos: bool = False, wait: bool = False) -> float:
    """The ``step`` op; with ``infos``, ``get_last_info`` after each step too; with ``wait`` (CUDA), waiting for the
    step's copies to end before the next step (as a loop that reads a value on the host each step does)."""
    n = args.envs
    with make(args) as envs:
        envs.reset(seed=0)
        handle, send, step_op, recv, get_last_info, unregister = envs.torch(device=device)
        generator = torch.Generator().manual_seed(0)
        actions = torch.empty(n, dtype=torch.int64)

        def step() -> int:
            step_op(handle, actions.random_(0, 4, generator=generator))
            if infos:
                get_last_info(handle)
            if wait:
                torch.cuda.current_stream(device).synchronize()
            return n

        return profile_of(step, args.seconds) if profile else timed(step, args.seconds)


def profile_of(step, seconds: float) -> float:
    """Print where the calling process's time goes while ``step`` runs (after 20 untimed calls); 0.0 (a rate under
    a profiler is no rate)."""
    for _ in range(20):
        step()
    profiled(step, seconds, top=12)
    return 0.0


def pageable_copy(args, device: torch.device, repeats: int = 200) -> float:
    """Seconds that ``torch.from_numpy(obs).to(device)`` takes for a batch of observations in ordinary memory."""
    obs = np.zeros((args.envs, 4, 84, 84), np.uint8)
    for _ in range(10):
        torch.from_numpy(obs).to(device)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        torch.from_numpy(obs).to(device)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


def model(device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(4, 16, 8, stride=4), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 4, stride=2), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(32 * 9 * 9, 4),
    ).eval().to(device)


def with_model(args, device: torch.device, how: str) -> float:
    """``how``: ``numpy`` (envs.step, then the model on the observation copied to the device), ``step`` (the step
    op, then the model) or ``overlap`` (send, the model on the previous observation, recv)."""
    n, net = args.envs, model(device)
    with make(args, inline=False) as envs, torch.inference_mode():
        obs, _ = envs.reset(seed=0)
        handle, send, step_op, recv, get_last_info, unregister = envs.torch(device=device)
        state = {"obs": torch.from_numpy(obs).to(device)}

        def act(obs: torch.Tensor) -> torch.Tensor:
            return net(obs.float() / 255).argmax(dim=1)

        def numpy_then_act() -> int:
            obs = envs.step(act(state["obs"]).cpu().numpy())[0]
            state["obs"] = torch.from_numpy(obs).to(device)
            return n

        def sequential() -> int:
            state["obs"] = step_op(handle, act(state["obs"]))[0]
            return n

        actions = [act(state["obs"])]

        def overlapped() -> int:
            send(handle, actions[0])  # the envs step while the model runs on the observation we hold
            actions[0] = act(state["obs"])
            state["obs"] = recv(handle)[0]
            return n

        return timed({"numpy": numpy_then_act, "step": sequential, "overlap": overlapped}[how], args.seconds)


def per_round(rounds: list[dict[str, float]], a: str, b: str) -> str:
    """The ratio ``a`` / ``b`` of each round (:func:`bench_atari.round_ratios`): the median and the range."""
    median, lowest, highest = round_ratios([rates[a] for rates in rounds], [rates[b] for rates in rounds])
    return f"per round: median {median:.3f}, {lowest:.3f}-{highest:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--emulate-resets", dest="reset_cache", action="store_const", const=False, default="auto",
                        help="AtariVectorEnv(reset_cache=False): emulate every reset (the default restores Breakout's)")
    parser.add_argument("--quick", action="store_true", help="step 1 only (no model)")
    parser.add_argument("--profile", action="store_true", help="then profile the calling process: op and numpy paths")
    parser.add_argument("--no-inline", dest="inline", action="store_false", default=None,
                        help="AtariVectorEnv(inline=False) for step 1 too (step 2 always uses it)")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    cuda = device.type == "cuda"
    runs = {
        "numpy + copy" if cuda else "numpy": lambda: numpy_path(args, device),
        **({"numpy alone": lambda: numpy_path(args, device, to_device=False)} if cuda else {}),
        "op": lambda: op_path(args, device),
        "op + get_last_info": lambda: op_path(args, device, infos=True),
        **({"op, copies waited for": lambda: op_path(args, device, wait=True)} if cuda else {}),
        **({"model, numpy + copy then act": lambda: with_model(args, device, "numpy")} if cuda else {}),
        "model, step then act": lambda: with_model(args, device, "step"),
        "model, send/act/recv": lambda: with_model(args, device, "overlap"),
    }
    if args.quick:
        runs = {name: run for name, run in runs.items() if not name.startswith("model")}
    rounds: list[dict[str, float]] = []
    for r in range(args.rounds):
        rounds.append({name: run() for name, run in runs.items()})
        print(f"round {r + 1}: " + ", ".join(f"{k} {v:,.0f}" for k, v in rounds[-1].items()), flush=True)
    best = {name: max(rates[name] for rates in rounds) for name in runs}
    options = (", reset_cache=False" if args.reset_cache is False else "") + \
        (", inline=False" if args.inline is False else "")
    print(f"\nBreakout x{args.envs}, {args.workers} workers, {device}{options}: steps/s (best of {args.rounds} rounds "
          f"of {args.seconds:g} s)")
    for name, rate in best.items():
        print(f"  {name:30s} {rate:9,.0f}")
    numpy_name = "numpy + copy" if cuda else "numpy"
    base = best[numpy_name]
    print(f"\nop path / numpy path{' + copy' if cuda else ''}:  {best['op'] / base:.3f} (best rounds); "
          f"{per_round(rounds, 'op', numpy_name)}  (target >= {1.1 if cuda else 0.95})")
    if cuda and not args.quick:
        print(f"with the model, step op / numpy + copy: "
              f"{best['model, step then act'] / best['model, numpy + copy then act']:.3f}")
    if not args.quick:
        print(f"overlap gain with a model:   {best['model, send/act/recv'] / best['model, step then act']:.3f}x")
    if cuda:
        copy_s = pageable_copy(args, device)
        print(f"  the copy alone (ordinary memory to {device}): {copy_s * 1e6:.0f} us a batch")
        alone = best["numpy alone"]
        print(f"numpy step alone / numpy + copy: {alone / base:.3f}; {per_round(rounds, 'numpy alone', numpy_name)}  "
              f"(what the op would reach if it cost a numpy step and copied nothing)")
        print(f"op / numpy step alone: {best['op'] / alone:.3f}; {per_round(rounds, 'op', 'numpy alone')}")
        waited = "op, copies waited for"
        print(f"op waiting for its copies / op: {best[waited] / best['op']:.3f}; {per_round(rounds, waited, 'op')}")
    if args.profile:
        for name, run in (("op", op_path), ("numpy", numpy_path)):
            print(f"\n  calling process, {name} path, seconds per step by function:")
            run(args, device, profile=True)


if __name__ == "__main__":
    main()
