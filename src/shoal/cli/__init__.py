"""The ``shoal`` command: it parses arguments, calls :mod:`shoal.bench` and renders what comes back.

Wrong arguments and shoal's errors end in one line on stderr (exit 2), Ctrl-C in one line (exit 130); vector envs
are closed on the way out, so no process is left behind.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import gymnasium

from shoal.errors import MissingDependencyError, ShoalError

EPILOG = {
    "games": "examples:\n  shoal games\n  shoal games --json > roms.json",
    "bench": (
        "examples:\n  shoal bench                                # 1, 2, 4, 8, 16 ROMs x 2 envs, about two minutes\n"
        "  shoal bench --roms 1,2,4,8,16 --copies 4 --seconds 5\n"
        "  shoal bench --systems shoal,shoal-ray,ale-py --out results/"
    ),
    "sweep": (
        "examples:\n  shoal sweep --games pong,breakout,space_invaders --seeds 3 --episodes 2\n"
        "  shoal sweep --games pong --seeds 5 --steps 10000 --policy agent.pt --out runs/pong\n"
        "  shoal sweep --games pong,breakout --seeds 3 --episodes 2 --out runs/a --resume   # after Ctrl-C"
    ),
    "autotune": (
        "examples:\n  shoal autotune --games pong,pong,breakout,breakout --budget 20\n"
        "  shoal autotune --env CartPole-v1 --num-envs 64 --budget 30"
    ),
    "sanity": (
        "examples:\n  shoal sanity --agent examples/ppo_sanity.py:train\n"
        "  shoal sanity --agent my_package.agents:train --envs Squared,Memory --seed 3 --budget-scale 2\n\n"
        "an agent is a function train(env_id, total_steps, seed) -> policy, where policy(obs, starts) -> actions\n"
        "(starts: which envs begin an episode); each env counts as solved at 0.9 of its optimal return"
    ),
}


class _Parser(argparse.ArgumentParser):
    """argparse, with errors in one line instead of a usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


class _UsageError(Exception):
    pass


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def _names(text: str) -> list[str]:
    names = [v.strip() for v in text.split(",") if v.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected comma-separated names")
    return names


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
        return value

    return parse


def parser() -> argparse.ArgumentParser:
    root = _Parser(
        prog="shoal",
        description="Step many Atari games (or any Gymnasium env) at once: benchmark, sweep, autotune, and check an "
        "agent on the sanity envs.",
        epilog="run `shoal COMMAND --help` for a command's options and examples",
    )
    from shoal import __version__

    root.add_argument("--version", action="version", version=f"shoal {__version__}")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return commands.add_parser(
            name, help=help, description=help, epilog=EPILOG[name], formatter_class=argparse.RawDescriptionHelpFormatter
        )

    games = command("games", "List every single-player ROM ale-py ships, with its actions, modes and difficulties.")
    games.add_argument("--json", action="store_true", help="print JSON instead of a table")

    bench = command("bench", "Throughput and latency of shoal, ale-py and Gymnasium as the number of ROMs grows.")
    bench.add_argument(
        "--roms", type=_ints, default=[1, 2, 4, 8, 16],
        help="ROM counts to measure, up to every single-player ROM (default: 1,2,4,8,16)",
    )
    bench.add_argument("--copies", type=_positive(int), default=2, help="envs per ROM (default: 2)")
    bench.add_argument("--seconds", type=_positive(float), default=2.0, help="seconds per measurement (default: 2)")
    bench.add_argument(
        "--systems", type=_names, default=["shoal", "shoal-async", "shoal-serial", "ale-py", "gymnasium"],
        help="what to measure: shoal (multiprocessing), shoal-async (half batches), shoal-serial, shoal-ray, ale-py, "
        "gymnasium (default: shoal,shoal-async,shoal-serial,ale-py,gymnasium)",
    )
    bench.add_argument(
        "--games", type=_names, help="ROMs to take, in order (default: pong,breakout,space_invaders,...)"
    )
    bench.add_argument(
        "--out", type=Path, default=Path("shoal-bench"), help="folder for bench.json/.csv/.png (default: shoal-bench)"
    )

    sweep = command("sweep", "Run games x seeds in one vector env; report returns and human-normalized scores.")
    sweep.add_argument("--games", type=_names, required=True, help="comma-separated ROM ids")
    sweep.add_argument("--seeds", type=_positive(int), default=3, help="seeds 0..N-1 per game (default: 3)")
    budget = sweep.add_mutually_exclusive_group()
    budget.add_argument("--episodes", type=_positive(int), help="episodes per game and seed (default: 1)")
    budget.add_argument("--steps", type=_positive(int), help="agent steps per game and seed, instead of episodes")
    sweep.add_argument(
        "--policy", default="random",
        help="'random', a TorchScript module file, or a torch.export program (*.pt2): uint8 observations "
        "(n, 4, 84, 84) -> logits (n, k); the argmax over each game's own actions",
    )
    sweep.add_argument(
        "--out", type=Path, default=Path("shoal-sweep"),
        help="folder for episodes.csv, summary.csv/.json and scores.png (default: shoal-sweep)",
    )
    sweep.add_argument("--resume", action="store_true", help="skip the game/seed pairs --out already holds")
    sweep.add_argument(
        "--backend", default="multiprocessing", choices=["multiprocessing", "serial", "ray"],
        help="where the envs step (default: multiprocessing; ray: each node of RAY_ADDRESS's cluster, or of a new "
        "local Ray, runs its share of the pairs on a local pool)",
    )
    sweep.add_argument(
        "--workers", type=_positive(int), help="worker processes (default: one per core; ray: in all, shared by nodes)"
    )
    sweep.add_argument("--sticky", type=float, default=0.0, help="repeat_action_probability (default: 0)")

    sanity = command(
        "sanity", "Train an agent on each sanity env; compare the return it reaches with optimal and random."
    )
    sanity.add_argument("--agent", required=True, help="path/to/file.py:function or module:function")
    sanity.add_argument(
        "--envs", type=_names, help="sanity envs to run, by name or id (default: all seven: Squared,Password,...)"
    )
    sanity.add_argument("--seed", type=int, default=1, help="seed given to the agent (default: 1)")
    sanity.add_argument(
        "--budget-scale", type=_positive(float), default=1.0, help="multiply each env's training budget (default: 1)"
    )
    sanity.add_argument("--episodes", type=_positive(int), default=1000, help="episodes to evaluate (default: 1000)")
    sanity.add_argument(
        "--out", type=Path, default=Path("shoal-sanity"),
        help="folder for sanity.json and sanity.png (default: shoal-sanity)",
    )

    tune = command("autotune", "Find the fastest backend, workers and batch size for a workload within a budget.")
    workload = tune.add_mutually_exclusive_group(required=True)
    workload.add_argument("--games", type=_names, help="Atari ROM ids, one env each (repeat an id for copies)")
    workload.add_argument("--env", help="a Gymnasium env id (with --num-envs)")
    tune.add_argument("--num-envs", type=_positive(int), default=16, help="envs of --env (default: 16)")
    tune.add_argument("--budget", type=_positive(float), default=30.0, help="seconds to spend in all (default: 30)")
    tune.add_argument("--seconds", type=_positive(float), default=1.0, help="seconds per configuration (default: 1)")
    return root


OPENMP_SPIN = ("GOMP_SPINCOUNT", "10000")
"""Set for the command unless the user set it: PyTorch's OpenMP threads (libgomp) spin this many times after a kernel,
not 300,000 (~ms), before they sleep, so that a model run between steps (``sweep --policy``, a ``sanity`` agent) does
not hold the cores the workers step on. Read when torch is imported, which the commands do later (README, "A model on
the CPU beside the workers"; ``benchmarks/bench_omp.py``)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shoal`` command; returns the exit status."""
    os.environ.setdefault(*OPENMP_SPIN)
    try:
        args = parser().parse_args(argv)
        from shoal.cli.commands import COMMANDS

        return COMMANDS[args.command](args)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except (ShoalError, gymnasium.error.Error) as exc:
        print(f"shoal: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("shoal: interrupted; every env was closed", file=sys.stderr)
        return 130


def require_rendering() -> None:
    """rich and matplotlib are the ``bench`` extra; say how to get them when they are missing."""
    for module in ("rich", "matplotlib"):
        try:
            __import__(module)
        except ImportError:
            raise MissingDependencyError(
                f"the shoal command needs {module}, which is not installed: pip install \"shoal[bench]\""
            ) from None


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2))
