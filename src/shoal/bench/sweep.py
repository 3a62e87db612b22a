"""Sweeps: every game x seed in one multi-ROM vector env, episode returns and human-normalized scores per game.

Each (game, seed) pair is one env, seeded with ``seed`` (so its episodes do not depend on which other pairs share
the vector env) and with its own random-policy generator. A pair finishes after ``episodes`` episodes (or ``steps``
agent steps) and is then skipped (an empty action sequence) while the others go on. Its episodes are appended to
``episodes.csv`` in the output folder the moment it finishes, so an interrupted sweep resumed with ``resume=True``
runs only the pairs that had not finished.

Evaluation settings are the reference scores' (ale-py defaults: frameskip 4, up to 30 no-op starts, 108,000 frames
per episode at most) with unclipped rewards and no sticky actions; returns are undiscounted sums of raw rewards.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
import warnings
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generator, Sequence

import numpy as np

from shoal.atari.roms import check_game
from shoal.bench.output import output_folder
from shoal.bench.scores import human_normalized
from shoal.errors import ConfigError, MissingDependencyError
from shoal.vector.checks import check_positive_int

if TYPE_CHECKING:
    from shoal.vector.base import Backend

EPISODE_FIELDS = ("game", "seed", "episode", "score", "length", "truncated")
SUMMARY_FIELDS = (
    "game", "seeds", "episodes", "mean", "median", "std", "mean_length", "human_normalized", "steps_per_second",
)

Progress = Callable[[float, float], None]
"""Called with ``(done, total)`` in the sweep's unit (episodes, or agent steps with ``steps=``), a few times a
second."""


@dataclass(frozen=True)
class Episode:
    """One episode of one (game, seed) pair. ``length`` counts agent steps; ``truncated``: cut by a limit."""

    game: str
    seed: int
    episode: int
    score: float
    length: int
    truncated: bool


@dataclass(frozen=True)
class GameSummary:
    """The episodes of one game over all its seeds.

    ``human_normalized`` is the mean of ``(score - random) / (human - random)`` (None without reference scores);
    ``steps_per_second`` counts this game's agent steps over the time the sweep spent stepping, start-up excluded
    (None when every pair of it was resumed from an earlier run).
    """

    game: str
    seeds: int
    episodes: int
    mean: float
    median: float
    std: float
    mean_length: float
    human_normalized: float | None
    steps_per_second: float | None


@dataclass
class SweepResult:
    """Every episode, the per-game summaries, and which pairs an earlier run had already finished."""

    episodes: list[Episode]
    summaries: list[GameSummary]
    seconds: float
    resumed: list[tuple[str, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sweep(
    games: Sequence[str],
    seeds: int | Sequence[int] = 3,
    *,
    episodes: int | None = None,
    steps: int | None = None,
    policy: str | Path = "random",
    out: str | Path | None = None,
    resume: bool = False,
    backend: Backend = "multiprocessing",
    num_workers: int | None = None,
    progress: Progress | None = None,
    **atari: Any,
) -> SweepResult:
    """Run every game x seed and summarize per game.

    Args:
        games: ale-py ROM ids.
        seeds: how many seeds (0, 1, ...) or the seeds themselves.
        episodes: episodes per pair; or ``steps``: agent steps per pair (exactly one of the two; default 1 episode).
        policy: ``"random"`` (uniform over each game's actions), or the path of a TorchScript module (or, named
            ``*.pt2``, a ``torch.export`` program with a dynamic batch) mapping a uint8 observation batch
            ``(n, stack, h, w)`` to logits ``(n, k)``; the action is the argmax over the game's own actions
            (logits beyond its count are masked).
        out: a folder for ``episodes.csv`` (appended as pairs finish), ``summary.csv``/``summary.json`` and
            ``sweep.json`` (the settings, checked on resume).
        resume: skip the pairs ``out/episodes.csv`` already holds.
        backend, num_workers: shoal's. With ``"ray"`` each node of the cluster runs its share of the pairs in a
            vector env of its own (:mod:`shoal.bench.ray_sweep`); ``num_workers`` is then the total, shared by nodes.
        progress: see :data:`Progress`.
        atari: further :class:`~shoal.AtariVectorEnv` keywords (``repeat_action_probability``, ``noop_max``, ...).
    """
    games = [check_game(g) for g in games]
    if not games:
        raise ConfigError("games must name at least one ROM")
    seed_list = _seeds(seeds)
    if episodes is not None and steps is not None:
        raise ConfigError("give episodes or steps, not both")
    unit, amount = ("steps", steps) if steps is not None else ("episodes", 1 if episodes is None else episodes)
    amount = check_positive_int(unit, amount)
    settings = {
        "unit": unit, "amount": amount, "policy": str(policy), **{k: atari[k] for k in sorted(atari)},
    }
    folder = Path(out) if out is not None else None
    if folder is not None and folder.exists() and not folder.is_dir():
        output_folder(folder)  # says it is a file, before anything is read from it
    done: list[Episode] = []
    if resume:
        if folder is None:
            raise ConfigError("resume=True needs out= (the folder of the sweep to resume)")
        done = _load(folder, settings)
    elif folder is not None and (folder / "episodes.csv").exists():
        raise ConfigError(f"{folder / 'episodes.csv'} already exists: pass resume=True (--resume) or another folder")
    finished = {(e.game, e.seed) for e in done}
    todo = [(g, s) for g in games for s in seed_list if (g, s) not in finished]
    if folder is not None:
        output_folder(folder)
        staged = folder / "sweep.json.tmp"  # then renamed: a resume never reads half of it
        staged.write_text(json.dumps(settings, indent=2))
        os.replace(staged, folder / "sweep.json")
    start = time.perf_counter()
    ran, steps_by_game, stepping = (
        _run(todo, unit, amount, policy, folder, backend, num_workers, progress, atari) if todo else ([], {}, 0.0)
    )
    seconds = time.perf_counter() - start
    wanted = set((g, s) for g in games for s in seed_list)
    order = {pair: i for i, pair in enumerate(todo)}  # pairs in games x seeds order, whichever finished first
    ran.sort(key=lambda e: (order[(e.game, e.seed)], e.episode))
    every = [e for e in done if (e.game, e.seed) in wanted] + ran
    result = SweepResult(
        episodes=every,
        summaries=[_summary(g, every, steps_by_game.get(g), stepping) for g in games],
        seconds=seconds,
        resumed=sorted(finished & wanted),
    )
    if folder is not None:
        _write_summary(folder, result)
    return result


def _seeds(seeds: int | Sequence[int]) -> list[int]:
    if isinstance(seeds, (int, np.integer)):
        if isinstance(seeds, bool) or seeds < 1:
            raise ConfigError(f"seeds must be a positive count or a list of seeds, got {seeds}")
        return list(range(int(seeds)))
    seed_list = list(seeds)
    if not seed_list or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in seed_list):
        raise ConfigError(f"seeds must be a positive count or a list of non-negative integers, got {seeds!r}")
    if len(set(seed_list)) != len(seed_list):
        raise ConfigError(f"seeds must not repeat, got {seed_list}")
    return [int(s) for s in seed_list]


# -- running -------------------------------------------------------------------------------------------------------


def _run(
    pairs: list[tuple[str, int]],
    unit: str,
    amount: int,
    policy: str | Path,
    folder: Path | None,
    backend: Backend,
    num_workers: int | None,
    progress: Progress | None,
    atari: dict[str, Any],
) -> tuple[list[Episode], dict[str, int], float]:
    """Run ``pairs``: their episodes, agent steps per game, and the seconds spent stepping (start-up excluded).

    Where: in this process's vector env, or (``backend="ray"``) on the nodes of a Ray cluster at once, each in a
    vector env of its own (:mod:`shoal.bench.ray_sweep`). Finished pairs' episodes are appended to ``folder`` as
    they come."""
    if backend == "ray":
        from shoal.bench.ray_sweep import run_on_nodes

        events = run_on_nodes(pairs, unit, amount, policy, num_workers, atari)
    else:
        events = run_pairs(pairs, unit, amount, policy, backend, num_workers, atari)
    episodes: list[Episode] = []
    try:
        for event in events:
            if event[0] == "episodes":
                episodes += event[1]
                if folder is not None:
                    _append(folder, event[1])
            elif event[0] == "progress":
                if progress is not None:
                    progress(event[1], event[2])
            elif event[0] == "end":
                _, steps_by_game, stepping = event
    finally:
        events.close()  # at once, even while an exception's traceback keeps the generator alive
    return episodes, steps_by_game, stepping


def run_pairs(
    pairs: list[tuple[str, int]],
    unit: str,
    amount: int,
    policy: str | Path,
    backend: Backend,
    num_workers: int | None,
    atari: dict[str, Any],
) -> Generator[tuple, None, None]:
    """Run ``pairs`` in one vector env, as events: ``("episodes", [Episode, ...])`` as a pair finishes,
    ``("progress", done, total)`` a few times a second, and last ``("end", agent steps per game, seconds
    stepping)``."""
    from shoal.atari import AtariVectorEnv

    options = {"reward_clipping": False, **atari, "autoreset_mode": "same_step"}
    n = len(pairs)
    with AtariVectorEnv(games=[g for g, _ in pairs], backend=backend, num_workers=num_workers, **options) as envs:
        act = _policy(policy, envs, pairs)
        obs, _ = envs.reset(seed=[s for _, s in pairs])
        start = time.perf_counter()
        returns, lengths, taken = np.zeros(n), np.zeros(n, np.int64), np.zeros(n, np.int64)
        finished: list[list[Episode]] = [[] for _ in range(n)]
        active = np.ones(n, np.bool_)
        total = float(n * amount)
        last_report = 0.0
        while active.any():
            actions = act(obs)
            if active.all():
                obs, reward, term, trunc, _ = envs.step(actions)
            else:  # finished pairs are skipped: an empty sequence does not step its env
                seqs = [actions[i : i + 1] if active[i] else actions[:0] for i in range(n)]
                obs, reward, term, trunc, _ = envs.step(seqs)
            returns[active] += reward[active]
            lengths[active] += 1
            taken[active] += 1
            for i in np.flatnonzero((term | trunc) & active).tolist():
                finished[i].append(_episode(pairs[i], len(finished[i]), returns[i], lengths[i], bool(trunc[i])))
                returns[i], lengths[i] = 0.0, 0
            count = np.array([len(f) for f in finished]) if unit == "episodes" else taken
            for i in np.flatnonzero(active & (count >= amount)).tolist():
                active[i] = False
                if not finished[i]:  # a step budget shorter than the first episode: report it, cut
                    finished[i].append(_episode(pairs[i], 0, returns[i], lengths[i], True))
                yield ("episodes", finished[i])
            now = time.perf_counter()
            if now - last_report > 0.2 or not active.any():
                yield ("progress", float(np.minimum(count, amount).sum()), total)
                last_report = now
        stepping = time.perf_counter() - start
    steps_by_game: dict[str, int] = {}
    for (game, _), t in zip(pairs, taken.tolist()):
        steps_by_game[game] = steps_by_game.get(game, 0) + t
    yield ("end", steps_by_game, stepping)


def _episode(pair: tuple[str, int], index: int, score: float, length: int, truncated: bool) -> Episode:
    return Episode(pair[0], pair[1], index, float(score), int(length), truncated)


def policy_file(policy: str | Path) -> Path:
    """The file of a policy that is not ``"random"``: it must exist."""
    path = Path(policy)
    if not path.is_file():
        raise ConfigError(
            f"policy must be 'random', the path of a torch.export program (*.pt2) or of a TorchScript module; "
            f"{str(path)!r} is not a file"
        )
    return path


def _policy(policy: str | Path, envs: Any, pairs: list[tuple[str, int]]) -> Callable[[np.ndarray], np.ndarray]:
    counts = np.asarray(envs.num_actions)
    if str(policy) == "random":
        rngs = [np.random.default_rng([seed, zlib.crc32(game.encode())]) for game, seed in pairs]
        return lambda obs: np.array([rng.integers(n) for rng, n in zip(rngs, counts.tolist())], np.int64)
    path = policy_file(policy)
    try:
        import torch
    except ImportError as exc:
        raise MissingDependencyError(
            'a policy file (.pt2 or TorchScript) needs PyTorch: pip install "shoal[torch]"'
        ) from exc
    try:
        if path.suffix == ".pt2":  # torch.export's format, which supersedes TorchScript
            module = torch.export.load(str(path)).module()
        else:
            module = torch.jit.load(str(path), map_location="cpu").eval()
    except (RuntimeError, ValueError) as exc:
        raise ConfigError(
            f"{path} is neither a TorchScript module (torch.jit.save) nor, named *.pt2, an exported program "
            f"(torch.export.save): {exc}"
        ) from exc
    mask = torch.from_numpy(np.arange(counts.max())[None, :] >= counts[:, None])

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            logits = module(torch.from_numpy(obs))
        if logits.ndim != 2 or logits.shape[0] != len(obs) or logits.shape[1] < counts.max():
            raise ConfigError(
                f"the policy returned logits of shape {tuple(logits.shape)}; expected ({len(obs)}, k) with k >= "
                f"{counts.max()} (the most actions of these games)"
            )
        logits = logits[:, : counts.max()].masked_fill(mask, float("-inf"))
        return logits.argmax(dim=1).numpy().astype(np.int64)

    return act


# -- results ---------------------------------------------------------------------------------------------------------


def _summary(game: str, episodes: list[Episode], steps: int | None, seconds: float) -> GameSummary:
    mine = [e for e in episodes if e.game == game]
    scores = np.array([e.score for e in mine])
    known = [x for x in (human_normalized(game, s) for s in scores.tolist()) if x is not None]  # all or none
    return GameSummary(
        game=game,
        seeds=len({e.seed for e in mine}),
        episodes=len(mine),
        mean=float(scores.mean()),
        median=float(np.median(scores)),
        std=float(scores.std()),
        mean_length=float(np.mean([e.length for e in mine])),
        human_normalized=float(np.mean(known)) if known else None,
        steps_per_second=None if not steps else steps / seconds,
    )


def _append(folder: Path, episodes: list[Episode]) -> None:
    """Append one finished pair's rows in one write, flushed to the disk."""
    _write(folder / "episodes.csv", episodes, os.O_APPEND)


def _write(path: Path, episodes: list[Episode], mode: int) -> None:
    """Write ``episodes`` as rows of ``path`` (``mode``: ``os.O_APPEND`` or ``os.O_TRUNC``), with the header if
    the file starts there. All or nothing where it can be: a write that fails (a full disk) is cut back off; a
    process killed in the middle of one leaves a torn last line, which :func:`_load` finds."""
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    if mode == os.O_TRUNC or not path.exists():
        writer.writerow(EPISODE_FIELDS)
    writer.writerows([[getattr(e, k) for k in EPISODE_FIELDS] for e in episodes])
    data = text.getvalue().encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | mode, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def read_episodes(path: str | Path) -> list[Episode]:
    """The episodes of an ``episodes.csv`` written by :func:`sweep`; a row that is not one is a ConfigError naming
    the file and the line."""
    return _rows(Path(path), Path(path).read_text())


def _rows(path: Path, text: str) -> list[Episode]:
    """The episode of each row of ``text``, the contents of ``path`` (named in errors)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is not None and tuple(header) != EPISODE_FIELDS:
        raise ConfigError(
            f"{path} is not a sweep's episodes.csv: its header is {header}, expected {list(EPISODE_FIELDS)}"
        )
    rows = []
    for row in reader:
        try:
            game, seed, episode, score, length, truncated = row
            if truncated not in ("True", "False"):
                raise ValueError(f"truncated is {truncated!r}")
            rows.append(Episode(game, int(seed), int(episode), float(score), int(length), truncated == "True"))
        except ValueError as exc:
            raise ConfigError(
                f"{path}, line {reader.line_num}: {row} is not an episode ({', '.join(EPISODE_FIELDS)}): {exc}"
            ) from None
    return rows


def _load(folder: Path, settings: dict[str, Any]) -> list[Episode]:
    """The finished pairs' episodes of the sweep in ``folder``, which must have had ``settings``. A torn last write
    (the sweep was killed while appending, or the disk was full) is cut off with the rows of the pair it belonged
    to, and so is a pair with fewer episodes than it needs: they run again (the same seeds give the same
    episodes), and ``episodes.csv`` is rewritten without them."""
    stored = folder / "sweep.json"
    if not stored.exists():
        return []
    try:
        previous = json.loads(stored.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{stored} is not the settings a sweep wrote ({exc}): resume needs that file") from None
    if previous != json.loads(json.dumps(settings)):
        raise ConfigError(
            f"{folder} holds a sweep with other settings ({previous}); resume it with those, or use another folder"
        )
    path = folder / "episodes.csv"
    if not path.exists():
        return []
    text = path.read_text()
    whole = text.endswith("\n") or not text
    rows = _rows(path, text if whole else text[: text.rfind("\n") + 1])
    drop: set[tuple[str, int]] = set()
    if not whole and rows:
        drop.add((rows[-1].game, rows[-1].seed))  # the torn write's pair, or the one before: either runs again
    if settings["unit"] == "episodes":  # a pair written whole has all its episodes, numbered from 0
        numbers: dict[tuple[str, int], list[int]] = {}
        for e in rows:
            numbers.setdefault((e.game, e.seed), []).append(e.episode)
        drop |= {pair for pair, got in numbers.items() if got != list(range(settings["amount"]))}
    kept = [e for e in rows if (e.game, e.seed) not in drop]
    if whole and not drop:
        return kept
    warnings.warn(
        f"{path} ends in a torn write (was the sweep killed while writing, or the disk full?) or holds a pair's "
        f"episodes only in part: the torn line and the rows of {sorted(drop)} are dropped; those pairs run again",
        stacklevel=3,
    )
    staged = path.with_name(path.name + ".tmp")
    _write(staged, kept, os.O_TRUNC)
    os.replace(staged, path)
    return kept


def _write_summary(folder: Path, result: SweepResult) -> None:
    with (folder / "summary.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SUMMARY_FIELDS)
        writer.writerows([[getattr(s, k) for k in SUMMARY_FIELDS] for s in result.summaries])
    (folder / "summary.json").write_text(json.dumps(result.to_dict(), indent=2))
