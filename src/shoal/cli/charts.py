"""PNG charts of benchmark and sweep results (matplotlib, no global pyplot state)."""

from __future__ import annotations

from pathlib import Path

from shoal.bench import SanityReport, SweepResult, ThroughputResult

_COLORS = {
    "shoal": "#1f77b4", "shoal-async": "#aec7e8", "shoal-serial": "#17becf", "shoal-ray": "#9467bd",
    "ale-py": "#ff7f0e", "gymnasium": "#2ca02c",
}
_NAMES = {
    "shoal": "shoal (multiprocessing)",
    "shoal-async": "shoal (multiprocessing, half batches)",
    "shoal-serial": "shoal (serial)",
    "shoal-ray": "shoal (Ray)",
    "ale-py": "ale-py AtariVectorEnv",
    "gymnasium": "Gymnasium AsyncVectorEnv",
}


def _figure(width: float, height: float):  # -> matplotlib.figure.Figure
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(figure)
    return figure


def throughput_chart(result: ThroughputResult, path: str | Path):
    """Latency against throughput, one line per system, points labelled by their number of ROMs; saved to ``path``."""
    figure = _figure(7, 4.5)
    axes = figure.add_subplot()
    for system in dict.fromkeys(m.system for m in result.measurements):
        points = sorted((m for m in result.measurements if m.system == system), key=lambda m: m.roms)
        x = [m.steps_per_second for m in points]
        y = [m.latency_ms for m in points]
        axes.plot(x, y, "o-", color=_COLORS.get(system), label=_NAMES.get(system, system))
        for m in points:
            axes.annotate(f"{m.roms}", (m.steps_per_second, m.latency_ms), textcoords="offset points", xytext=(4, 4),
                          fontsize=8)
    copies = result.measurements[0].copies if result.measurements else 1
    axes.set_xlabel("throughput (env steps / s)")
    axes.set_ylabel("latency of one batch step (ms)")
    # the note on point labels goes under the title, outside the axes, where no point can sit
    axes.set_title(f"Latency vs throughput as the number of ROMs grows\n(point labels: ROMs, {copies} envs each)",
                   fontsize=11)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    return figure


def sweep_chart(result: SweepResult, path: str | Path):
    """One bar per game: mean human-normalized score (or mean return where a game has no reference scores)."""
    figure = _figure(max(5.0, 0.6 * len(result.summaries) + 2), 4)
    axes = figure.add_subplot()
    normalized = all(s.human_normalized is not None for s in result.summaries)
    values = [s.human_normalized if normalized else s.mean for s in result.summaries]
    axes.bar([s.game for s in result.summaries], values, color=_COLORS["shoal"])
    axes.set_ylabel("human-normalized score" if normalized else "mean return")
    axes.set_title(f"{sum(s.episodes for s in result.summaries)} episodes over {len(result.summaries)} games")
    axes.tick_params(axis="x", labelrotation=45)
    axes.axhline(0, color="black", linewidth=0.5)
    figure.tight_layout()
    figure.savefig(path)
    return figure


def sanity_chart(report: SanityReport, path: str | Path):
    """One bar per env: the return reached as a fraction of the optimum, with random's fraction and the 0.9 line."""
    results = report.results
    figure = _figure(max(5.0, 0.9 * len(results) + 2), 4)
    axes = figure.add_subplot()
    names = [r.env_id.removeprefix("shoal/").removesuffix("-v0") for r in results]
    colors = [_COLORS["shoal"] if r.solved else "#d62728" for r in results]
    axes.bar(names, [r.fraction for r in results], color=colors, label="trained agent")
    axes.scatter(names, [r.random / r.optimal for r in results], marker="_", s=400, color="black",
                 label="uniform random", zorder=3)
    threshold = results[0].threshold if results else 0.9
    axes.axhline(threshold, color="#2ca02c", linestyle="--", linewidth=1, label=f"solved ({threshold:.0%})")
    axes.set_ylabel("return / optimal return")
    axes.set_title(f"{report.agent} on the sanity envs (seed {report.seed})", fontsize=10)
    axes.tick_params(axis="x", labelrotation=30)
    axes.set_ylim(min(0.0, *(r.fraction for r in results)) if results else 0.0, 1.3)
    axes.legend(fontsize=8, loc="upper center", ncol=3, frameon=False)  # above the bars, which stop near 1
    figure.tight_layout()
    figure.savefig(path)
    return figure
