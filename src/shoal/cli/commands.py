"""One function per ``shoal`` command: call :mod:`shoal.bench`, render tables, progress bars and charts."""

from __future__ import annotations

import argparse
import csv
import itertools
import json
from dataclasses import asdict

from shoal import bench
from shoal.bench.output import output_folder
from shoal.cli import require_rendering, write_json

require_rendering()

from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn  # noqa: E402
from rich.syntax import Syntax  # noqa: E402
from rich.table import Table  # noqa: E402

console = Console()  # results
if not console.is_terminal:  # piped or captured: do not squeeze tables into rich's default 80 columns
    console = Console(width=160)
status = Console(stderr=True)  # progress bars, so that stdout holds only results (`shoal games --json > f`)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("ETA"), TimeRemainingColumn(), console=status, transient=True, disable=not status.is_terminal,
    )


def games_command(args: argparse.Namespace) -> int:
    with _progress() as progress:
        task = progress.add_task("reading ROMs", total=None)
        infos = bench.games(progress=lambda done, total: progress.update(task, completed=done, total=total))
    if args.json:
        print(json.dumps([{**asdict(g), "num_actions": g.num_actions} for g in infos], indent=2))
        return 0
    table = Table(title=f"{len(infos)} single-player ROMs (ale-py)")
    for column in ("ROM id", "actions", "modes", "difficulties"):
        table.add_column(column, justify="left" if column == "ROM id" else "right")
    for g in infos:
        table.add_row(g.id, str(g.num_actions), _span(g.modes), _span(g.difficulties))
    console.print(table)
    return 0


def _span(values: tuple[int, ...]) -> str:
    if len(values) > 4 and list(values) == list(range(values[0], values[0] + len(values))):
        return f"{values[0]}..{values[-1]}"
    return ",".join(map(str, values))


def bench_command(args: argparse.Namespace) -> int:
    from shoal.cli.charts import throughput_chart

    output_folder(args.out, "--out")  # before a minute of measuring, not after

    steps = len(args.roms) * len(args.systems)
    with _progress() as progress:
        task = progress.add_task("measuring", total=steps)
        done_before = itertools.count()

        def started(description: str) -> None:  # a measurement starts: the ones before it are done
            progress.update(task, description=description, completed=next(done_before))

        result = bench.throughput(args.roms, args.copies, args.systems, args.seconds, args.games, progress=started)
        progress.update(task, completed=steps, description="done")
    table = Table(title=f"{args.copies} envs per ROM, {args.seconds:g} s each, {result.machine['cpus']} cores")
    for column in ("system", "ROMs", "envs", "steps/s", "latency ms", "p95 ms"):
        table.add_column(column, justify="left" if column == "system" else "right")
    for m in result.measurements:
        table.add_row(m.system, str(m.roms), str(m.num_envs), f"{m.steps_per_second:,.0f}", f"{m.latency_ms:.2f}",
                      f"{m.latency_p95_ms:.2f}")
    console.print(table)
    for other in ("ale-py", "gymnasium"):
        ratios = [(r, result.ratio("shoal", other, r)) for r in args.roms]
        if all(x is not None for _, x in ratios):
            console.print(f"shoal / {other}: " + ", ".join(f"{r} ROM{'s' * (r > 1)} {x:.2f}x" for r, x in ratios))
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "bench.json", result.to_dict())
    with (args.out / "bench.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(result.measurements[0])))
        writer.writeheader()
        writer.writerows(asdict(m) for m in result.measurements)
    throughput_chart(result, args.out / "bench.png")
    console.print(f"wrote {args.out / 'bench.json'}, bench.csv and bench.png")
    return 0


def sweep_command(args: argparse.Namespace) -> int:
    from shoal.cli.charts import sweep_chart

    output_folder(args.out, "--out")

    with _progress() as progress:
        task = progress.add_task(f"{len(args.games)} games x {args.seeds} seeds", total=None)
        result = bench.sweep(
            args.games, args.seeds, episodes=args.episodes, steps=args.steps, policy=args.policy, out=args.out,
            resume=args.resume, backend=args.backend, num_workers=args.workers,
            repeat_action_probability=args.sticky,
            progress=lambda done, total: progress.update(task, completed=done, total=total),
        )
    if result.resumed:
        console.print(f"resumed: {len(result.resumed)} game/seed pairs were already done in {args.out}")
    table = Table(title=f"{len(result.episodes)} episodes in {result.seconds:.1f} s")
    for column in ("game", "seeds", "episodes", "mean", "median", "std", "length", "human-norm.", "steps/s"):
        table.add_column(column, justify="left" if column == "game" else "right")
    for s in result.summaries:
        hns = "-" if s.human_normalized is None else f"{s.human_normalized:.3f}"
        rate = "-" if s.steps_per_second is None else f"{s.steps_per_second:,.0f}"
        table.add_row(s.game, str(s.seeds), str(s.episodes), f"{s.mean:.1f}", f"{s.median:.1f}", f"{s.std:.1f}",
                      f"{s.mean_length:.0f}", hns, rate)
    console.print(table)
    sweep_chart(result, args.out / "scores.png")
    console.print(f"wrote {args.out}/episodes.csv, summary.csv, summary.json and scores.png")
    return 0


def autotune_command(args: argparse.Namespace) -> int:
    with _progress() as progress:
        task = progress.add_task("trying", total=args.budget)

        def started(description: str, spent: float, budget: float) -> None:
            progress.update(task, description=description, completed=spent)

        result = bench.autotune(
            args.games, args.env, None if args.games else args.num_envs, budget=args.budget, seconds=args.seconds,
            progress=started,
        )
        progress.update(task, completed=args.budget, description="done")
    table = Table(title=f"{len(result.trials)} configurations tried ({result.untried} left for a larger --budget)")
    for column in ("rank", "backend", "workers", "batch", "steps/s", "latency ms"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    for rank, t in enumerate(result.trials, 1):
        table.add_row(str(rank), t.config.backend, str(t.config.num_workers), str(t.config.batch_size),
                      f"{t.steps_per_second:,.0f}", f"{t.latency_ms:.2f}")
    console.print(table)
    rows = result.workload.rows_per_env
    if rows > 1:
        console.print(f"steps/s count rows: {rows} per env, one per agent; a batch counts envs")
    console.print(Syntax(result.snippet(), "python"))
    return 0


def sanity_command(args: argparse.Namespace) -> int:
    from shoal.cli.charts import sanity_chart
    from shoal.sanity import IDS, NAMES

    output_folder(args.out, "--out")
    by_name = {name.lower(): env_id for name, env_id in zip(NAMES, IDS)}
    env_ids = [by_name.get(e.lower(), e) for e in args.envs] if args.envs else list(IDS)
    agent = bench.load_agent(args.agent)  # a bad path fails here, before any training
    with _progress() as progress:
        task = progress.add_task("training", total=len(env_ids))

        def started(env_id: str, done: int, total: int) -> None:
            progress.update(task, description=f"training on {env_id}", completed=done)

        report = bench.sanity(agent, env_ids, seed=args.seed, budget_scale=args.budget_scale,
                              episodes=args.episodes, progress=started)
        progress.update(task, completed=len(env_ids), description="done")
    report = type(report)(args.agent, report.seed, report.results)
    table = Table(title=f"{args.agent} on the sanity envs (seed {args.seed}; solved at 90% of optimal)")
    for column in ("env", "checks", "return", "optimal", "random", "% optimal", "steps", "train s", "solved"):
        table.add_column(column, justify="left" if column in ("env", "checks") else "right")
    for r in report.results:
        table.add_row(r.env_id, r.checks, f"{r.reached:.3f}", f"{r.optimal:.3f}", f"{r.random:.3f}",
                      f"{r.fraction:.0%}", f"{r.steps:,}", f"{r.seconds:.1f}", "yes" if r.solved else "[red]NO[/red]")
    console.print(table)
    console.print(f"solved {len(report.solved)} of {len(report.results)}")
    write_json(args.out / "sanity.json", report.to_dict())
    sanity_chart(report, args.out / "sanity.png")
    console.print(f"wrote {args.out / 'sanity.json'} and sanity.png")
    return 0 if len(report.solved) == len(report.results) else 1


COMMANDS = {
    "games": games_command, "bench": bench_command, "sweep": sweep_command, "autotune": autotune_command,
    "sanity": sanity_command,
}
