"""The shoal command, run in-process with tiny budgets, and the shoal.bench functions behind it."""

import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from ale_py import roms
from ale_py.env import AtariEnv
from matplotlib.image import imread

from shoal.bench import (
    ThroughputResult,
    autotune,
    read_episodes,
    reference_scores,
    sweep,
)
from shoal.bench.autotune import Config
from shoal.bench.sweep import _policy
from shoal.cli import main
from shoal.cli.charts import throughput_chart
from shoal.errors import ConfigError


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- games -----------------------------------------------------------------------------------------------------------


def test_games_lists_every_single_player_rom_and_caches_the_table(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    code, out, _ = run(capsys, "games", "--json")
    assert code == 0
    listed = {g["id"]: g for g in json.loads(out)}
    assert set(listed) == set(roms.get_all_rom_ids()) - {"combat", "joust", "maze_craze", "warlords"}
    for game in ("pong", "breakout", "ms_pacman"):
        assert listed[game]["num_actions"] == AtariEnv(game).action_space.n
    assert listed["breakout"]["modes"] == [int(m) for m in AtariEnv("breakout").ale.getAvailableModes()]
    assert list(tmp_path.glob("shoal/games-*.json"))
    code, again, _ = run(capsys, "games", "--json")  # from the cache this time
    assert json.loads(again) == json.loads(out)
    code, table, _ = run(capsys, "games")
    assert code == 0 and "space_invaders" in table and "104 single-player ROMs" in table


# -- bench -----------------------------------------------------------------------------------------------------------


def test_bench_writes_a_table_json_csv_and_a_chart(capsys, tmp_path):
    code, out, _ = run(
        capsys, "bench", "--roms", "1,2", "--copies", "1", "--seconds", "0.2", "--systems", "shoal,ale-py",
        "--out", str(tmp_path),
    )
    assert code == 0 and "shoal / ale-py: 1 ROM" in out
    result = ThroughputResult.from_dict(json.loads((tmp_path / "bench.json").read_text()))
    assert [(m.system, m.roms, m.num_envs) for m in result.measurements] == [
        ("shoal", 1, 1), ("ale-py", 1, 1), ("shoal", 2, 2), ("ale-py", 2, 2)
    ]
    assert all(m.steps_per_second > 0 and m.latency_p95_ms >= m.latency_ms * 0.5 for m in result.measurements)
    assert result.to_dict() == json.loads((tmp_path / "bench.json").read_text())  # round trip
    with (tmp_path / "bench.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [float(r["steps_per_second"]) for r in rows] == [m.steps_per_second for m in result.measurements]
    image = imread(tmp_path / "bench.png")
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    figure = throughput_chart(result, tmp_path / "again.png")
    axes = figure.axes[0]
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["shoal (multiprocessing)", "ale-py AtariVectorEnv"]
    assert [list(line.get_xdata()) for line in axes.get_lines()] == [
        [m.steps_per_second for m in result.measurements if m.system == s] for s in ("shoal", "ale-py")
    ]


def test_the_asynchronous_series_steps_half_the_envs_a_call_and_is_charted(tmp_path):
    import contextlib

    from shoal.bench.throughput import stepper, throughput

    with contextlib.ExitStack() as opened:
        step = stepper("shoal-async", ["pong", "breakout"] * 2, opened)
        assert [step() for _ in range(6)] == [2] * 6  # send/recv of the first 2 of 4 envs to finish
    result = throughput([1, 2], 1, ["shoal", "shoal-async"], 0.2)
    assert [(m.system, m.num_envs) for m in result.measurements] == [
        ("shoal", 1), ("shoal-async", 1), ("shoal", 2), ("shoal-async", 2)
    ]
    legend = throughput_chart(result, tmp_path / "chart.png").axes[0].get_legend().get_texts()
    assert [t.get_text() for t in legend] == ["shoal (multiprocessing)", "shoal (multiprocessing, half batches)"]


# -- sweep -----------------------------------------------------------------------------------------------------------


def test_sweep_summaries_follow_from_the_episodes(capsys, tmp_path):
    code, out, _ = run(
        capsys, "sweep", "--games", "pong,breakout", "--seeds", "2", "--steps", "40", "--backend", "serial",
        "--out", str(tmp_path),
    )
    assert code == 0 and "breakout" in out
    episodes = read_episodes(tmp_path / "episodes.csv")
    assert sorted((e.game, e.seed) for e in episodes) == [("breakout", 0), ("breakout", 1), ("pong", 0), ("pong", 1)]
    summary = json.loads((tmp_path / "summary.json").read_text())
    ref = reference_scores()["breakout"]
    scores = [e.score for e in episodes if e.game == "breakout"]
    breakout = next(s for s in summary["summaries"] if s["game"] == "breakout")
    assert breakout["mean"] == pytest.approx(np.mean(scores))
    normalized = [(s - ref.random) / (ref.human - ref.random) for s in scores]
    assert breakout["human_normalized"] == pytest.approx(np.mean(normalized))
    assert imread(tmp_path / "scores.png").ndim == 3
    with (tmp_path / "summary.csv").open() as f:
        assert [r["game"] for r in csv.DictReader(f)] == ["pong", "breakout"]


def test_interrupted_sweep_resumes_where_it_stopped_and_matches_an_uninterrupted_one(tmp_path):
    games, kwargs = ["breakout", "pong"], dict(seeds=1, episodes=1, backend="serial")
    full = sweep(games, **kwargs)

    def interrupt_once_breakout_is_done(done, total):
        if done >= 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(games, out=tmp_path, progress=interrupt_once_breakout_is_done, **kwargs)
    saved = read_episodes(tmp_path / "episodes.csv")
    assert [e.game for e in saved] == ["breakout"]  # written the moment its pair finished
    totals = []
    resumed = sweep(games, out=tmp_path, resume=True, progress=lambda done, total: totals.append(total), **kwargs)
    assert resumed.resumed == [("breakout", 0)] and set(totals) == {1.0}  # only pong ran
    assert sorted(resumed.episodes, key=str) == sorted(full.episodes, key=str)  # same episodes, order aside
    assert read_episodes(tmp_path / "episodes.csv") == resumed.episodes
    with pytest.raises(ConfigError, match="other settings"):
        sweep(games, out=tmp_path, resume=True, seeds=1, episodes=2, backend="serial")
    with pytest.raises(ConfigError, match="already exists: pass resume=True"):
        sweep(games, out=tmp_path, **kwargs)


@pytest.mark.parametrize("cut", ["inside the last row", "after the last pair's first row"])
def test_a_resumed_sweep_drops_a_torn_last_write_and_runs_its_pair_again(tmp_path, cut):
    """A sweep killed while appending a pair's rows leaves them in part: resuming runs that pair again and the file
    ends up as an uninterrupted sweep's, with no row twice."""
    games, kwargs = ["breakout", "pong"], dict(seeds=1, episodes=2, backend="serial")
    full = sweep(games, out=tmp_path / "full", **kwargs)
    path = tmp_path / "full" / "episodes.csv"
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 5 and lines[-1].startswith(b"pong,0,1,")  # header, breakout's 2 rows, pong's 2 rows
    torn = b"".join(lines[:-1]) + lines[-1][:9] if cut == "inside the last row" else b"".join(lines[:-1])
    path.write_bytes(torn)
    with pytest.warns(UserWarning, match=r"torn write .* \[\('pong', 0\)\] are dropped"):
        resumed = sweep(games, out=tmp_path / "full", resume=True, **kwargs)
    assert resumed.resumed == [("breakout", 0)]
    assert resumed.episodes == full.episodes
    assert read_episodes(path) == full.episodes


def test_a_resumed_sweep_reruns_both_pairs_when_the_tear_hides_where_the_last_write_began(tmp_path):
    games, kwargs = ["breakout", "pong"], dict(seeds=1, steps=300, backend="serial")
    full = sweep(games, out=tmp_path, **kwargs)
    path = tmp_path / "episodes.csv"
    text = path.read_text()
    last = text.rstrip("\r\n").rfind("\n") + 1
    path.write_text(text[: last + 4], newline="")  # "pong" torn: the last whole row is breakout's
    with pytest.warns(UserWarning, match=r"\[\('breakout', 0\)\] are dropped"):
        resumed = sweep(games, out=tmp_path, resume=True, **kwargs)
    assert resumed.resumed == [] and resumed.episodes == full.episodes and read_episodes(path) == full.episodes


def test_an_append_that_fails_part_way_is_cut_back_off(tmp_path):
    """A full disk (here: the file size limit, RLIMIT_FSIZE, in a child process) fails a write part way: the rows
    already written are taken back, so the file holds whole pairs only."""
    from shoal.bench.sweep import Episode, _append

    _append(tmp_path, [Episode("pong", 0, 0, -21.0, 800, False)])
    before = (tmp_path / "episodes.csv").read_bytes()
    child = f"""
import resource, signal
from pathlib import Path
from shoal.bench.sweep import Episode, _append
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 30}, resource.RLIM_INFINITY))
try:
    _append(Path({str(tmp_path)!r}), [Episode("breakout", 0, k, 1.0, 100, False) for k in range(5)])
except OSError as exc:
    print("failed:", exc.strerror)
"""
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "failed: File too large", out.stderr
    assert (tmp_path / "episodes.csv").read_bytes() == before
    assert read_episodes(tmp_path / "episodes.csv") == [Episode("pong", 0, 0, -21.0, 800, False)]


def test_a_row_that_is_no_episode_is_an_error_naming_the_file_and_line(tmp_path):
    path = tmp_path / "episodes.csv"
    path.write_text("game,seed,episode,score,length,truncated\npong,0,0,-21.0,800,False\npong,x,1,3,4,False\n")
    with pytest.raises(ConfigError, match=r"episodes.csv, line 3: .* invalid literal for int"):
        read_episodes(path)
    path.write_text("a,b\n")
    with pytest.raises(ConfigError, match="is not a sweep's episodes.csv: its header is"):
        read_episodes(path)


@pytest.mark.parametrize(
    ("seeds", "match"),
    [(True, "positive count"), (0, "positive count"), ([], "non-negative integers"), ([0, -1], "non-negative integers"),
     ([1, 1], "must not repeat")],
)
def test_sweep_refuses_bad_seeds_before_running_anything(tmp_path, seeds, match):
    with pytest.raises(ConfigError, match=match):
        sweep(["pong"], seeds, episodes=1, backend="serial", out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


class Prefers17:
    """A policy whose logits rise with the action index: its argmax is each game's highest legal action."""

    @staticmethod
    def module(torch):
        class Prefers17(torch.nn.Module):
            def forward(self, obs: torch.Tensor) -> torch.Tensor:
                return torch.arange(18, dtype=torch.float32).expand(obs.shape[0], 18) + obs.sum() * 0

        return Prefers17()


@pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")  # TorchScript is deprecated in torch 2.13
@pytest.mark.parametrize("form", ["torchscript", "export"])
def test_policy_file_masks_actions_beyond_each_games_count(tmp_path, form):
    torch = pytest.importorskip("torch")
    import shoal

    module = Prefers17.module(torch)
    if form == "torchscript":
        path = tmp_path / "policy.pt"
        torch.jit.save(torch.jit.script(module), str(path))
    else:
        path = tmp_path / "policy.pt2"
        example = (torch.zeros(2, 4, 84, 84, dtype=torch.uint8),)
        torch.export.save(torch.export.export(module, example, dynamic_shapes=({0: torch.export.Dim("n")},)), path)
    with shoal.AtariVectorEnv(games=["breakout", "pong", "ms_pacman"], backend="serial") as envs:
        obs, _ = envs.reset(seed=0)
        act = _policy(path, envs, [("breakout", 0), ("pong", 0), ("ms_pacman", 0)])
        assert act(obs).tolist() == [3, 5, 8]
    result = sweep(["breakout", "pong"], seeds=1, steps=5, policy=path, backend="serial")
    assert [s.episodes for s in result.summaries] == [1, 1]

    class TooFew(torch.nn.Module):
        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return torch.zeros(obs.shape[0], 4)

    torch.jit.save(torch.jit.script(TooFew()), str(tmp_path / "few.pt"))
    with pytest.raises(ConfigError, match=r"expected \(2, k\) with k >= 6"):
        sweep(["breakout", "pong"], seeds=1, steps=5, policy=tmp_path / "few.pt", backend="serial")


# -- autotune ----------------------------------------------------------------------------------------------------------


def test_autotune_ranks_configurations_and_its_snippet_builds_the_best(capsys):
    result = autotune(env_id="CartPole-v1", num_envs=4, budget=3.0, seconds=0.2)
    rates = [t.steps_per_second for t in result.trials]
    assert rates == sorted(rates, reverse=True) and len(rates) >= 2
    namespace = {}
    exec(result.snippet(), namespace)
    with namespace["envs"] as envs:
        assert envs.num_envs == 4 and envs.backend == result.best.config.backend
    code, out, _ = run(capsys, "autotune", "--games", "pong,pong", "--budget", "1", "--seconds", "0.2")
    assert code == 0 and "shoal.AtariVectorEnv(games=['pong', 'pong']" in out


def test_autotune_tries_what_the_default_may_choose_on_many_cores():
    from shoal.bench.autotune import candidates

    configs = candidates(64, cpus=16)
    assert configs[0] == Config("multiprocessing", 16, 64)  # one worker per core first
    workers = {c.num_workers for c in configs if c.backend == "multiprocessing"}
    assert {16, 8, 4, 1} <= workers  # the default halves the workers for an env of a few microseconds a step
    assert Config("serial", 1, 64) in configs


def test_autotune_counts_a_multiagent_envs_batch_in_its_rows(capsys):
    # 8 envs of 2 agents are 16 rows: a batch of 4 envs is batch_size=8 rows, and a full batch leaves it out (it
    # was passed as 8, a batch of half the rows, which 3 workers cannot share: the whole autotune stopped there)
    configs = [Config("multiprocessing", 3, 8), Config("multiprocessing", 2, 4), Config("serial", 1, 8)]
    result = autotune(env_id="shoal/Multiagent-v0", num_envs=8, budget=30.0, seconds=0.1, configs=configs)
    assert {t.config for t in result.trials} == set(configs)
    assert all(t.steps_per_second > 0 for t in result.trials)
    with result.workload.make(configs[0]) as envs:
        assert (envs.num_envs, envs.batch_size, envs.num_workers) == (16, 16, 3)
    with result.workload.make(configs[1]) as envs:
        assert (envs.num_envs, envs.batch_size, envs.num_workers) == (16, 8, 2)
    assert "batch_size" not in result.workload.snippet(configs[0])
    assert "batch_size=8" in result.workload.snippet(configs[1])
    code, out, _ = run(capsys, "autotune", "--env", "shoal/Multiagent-v0", "--num-envs", "6", "--budget", "1",
                       "--seconds", "0.1")
    assert code == 0 and "steps/s count rows: 2 per env, one per agent" in out


# -- errors, help, interruption ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "--roms", "x"], "expected comma-separated integers, got 'x'"),
        (
            ["bench", "--systems", "envpool"],
            "systems must be some of shoal, shoal-async, shoal-serial, shoal-ray, ale-py, gymnasium",
        ),
        (["bench", "--roms", "105"], "roms must be integers between 1 and 104"),
        (["sweep", "--games", "breakuot"], "unknown ROM id 'breakuot': did you mean 'breakout'"),
        (["sweep", "--games", "pong", "--episodes", "1", "--steps", "2"], "not allowed with argument"),
        (["sweep", "--games", "pong", "--policy", "missing.pt"], "is not a file"),
        (["sweep", "--games", "pong", "--seeds", "0"], "expected a positive number, got 0"),
        (["autotune"], "one of the arguments --games --env is required"),
        (["autotune", "--env", "NoSuchEnv-v9", "--budget", "1"], "NoSuchEnv"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_arguments_give_one_line_errors(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("command", ["games", "bench", "sweep", "autotune", "sanity"])
def test_every_command_has_help_with_examples(capsys, command):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert f"shoal {command}" in capsys.readouterr().out.split("examples:")[1]


def test_ctrl_c_ends_a_sweep_cleanly_with_no_stray_processes(tmp_path):
    out = tmp_path / "interrupted-sweep"
    # A test run started in the background of a shell without job control (nohup, `cmd &` in a script) has SIGINT
    # ignored, and a child inherits that: give the sweep a default disposition, as a terminal would.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "shoal", "sweep", "--games", "pong,breakout", "--seeds", "2", "--steps", "100000",
             "--workers", "2", "--out", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
    finally:
        signal.signal(signal.SIGINT, inherited)
    deadline = time.monotonic() + 60
    while not psutil.Process(proc.pid).children(recursive=True) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    finally:  # a hang fails this test alone: its processes and pipes do not reach the next test
        if proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "shoal: interrupted; every env was closed"
    time.sleep(0.5)
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if str(out) in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []


def test_interleaved_runs_every_measurement_each_round_in_turn_and_keeps_its_best():
    from shoal.bench.throughput import interleaved

    calls = []
    rates = {"a": iter([3.0, 5.0, 4.0]), "b": iter([7.0, 2.0, 1.0])}
    runs = {name: (lambda name=name: calls.append(name) or next(rates[name])) for name in rates}
    assert interleaved(runs, 3) == {"a": 5.0, "b": 7.0}
    assert calls == ["a", "b"] * 3  # round by round, not all of a's rounds first
    rates = {"a": iter([3.0, 5.0, 4.0]), "b": iter([7.0, 2.0, 0.0])}
    assert interleaved(runs, 3, statistics.mean) == {"a": 4.0, "b": 3.0}  # another pick of each one's rates


@pytest.mark.parametrize("command", [["bench", "--roms", "1", "--seconds", "0.1"], ["sweep", "--games", "pong"]])
@pytest.mark.parametrize("where", ["a file", "a folder under a file", "no permission"])
def test_an_out_that_cannot_be_written_fails_at_once_in_one_line(capsys, tmp_path, command, where):
    blocker = tmp_path / "taken"
    blocker.write_text("not a folder")
    out = {"a file": blocker, "a folder under a file": blocker / "results"}.get(where)
    if out is None:  # /sys refuses new folders even to root, whom file permissions do not stop
        if not Path("/sys").is_dir():
            pytest.skip("no /sys here: no folder that nobody may write")
        out = Path("/sys/shoal-results")
    start = time.monotonic()
    code, _, err = run(capsys, *command, "--out", str(out))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"--out='{out}'" in err and ("is a file, not a folder" in err or "cannot be written" in err)
    assert time.monotonic() - start < 5, "the output folder must be checked before any measuring"


def test_version(capsys):
    from shoal import __version__

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"shoal {__version__}"


@pytest.mark.parametrize("given, expected", [(None, "10000"), ("123", "123")])
def test_the_command_shortens_openmp_spinning_unless_the_user_chose(given, expected):
    """A model run between steps (sweep --policy, a sanity agent) imports torch inside the command; its OpenMP
    threads must not spin through the envs' step (benchmarks/bench_omp.py), and a user's own setting wins."""
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    if given is not None:
        env["GOMP_SPINCOUNT"] = given
    code = "import os, shoal.cli; shoal.cli.main(['games', '--json']); print(os.environ.get('GOMP_SPINCOUNT'))"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == expected
