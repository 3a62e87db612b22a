"""The Ray backend against a real local Ray: faults, cleanup, joining vs starting Ray, sweeps.

Equivalence with the other backends (Gymnasium reference, autoreset tables, sequences, async batches, calls, mixed
Atari ROMs, torch ops) runs in the shared backend-parametrized tests, whose "ray" cases use the same local Ray.
"""

import contextlib
import functools
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from fakes import FaultyEnv, SpaceEnv
from helpers import run_without

import shoal
from shoal.bench import sweep
from shoal.errors import ConfigError, EnvError, WorkerDiedError

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray


def test_an_actor_killed_mid_run_is_an_error_naming_its_envs():
    fns = [functools.partial(SpaceEnv, "box_f32", "discrete")] * 4
    envs = shoal.make(fns, backend="ray", num_workers=2)
    envs.reset(seed=0)
    envs.step(np.zeros(4, np.int64))
    ray.kill(envs._transport._actors[1])
    with pytest.raises(WorkerDiedError, match=r"Ray actor 1 \(hosting envs 2\.\.3\) died"):
        for _ in range(3):
            envs.step(np.zeros(4, np.int64))
    envs.close()  # no hang on the dead actor
    assert envs.closed


def test_an_env_that_raises_in_an_actor_is_named():
    fns = [functools.partial(FaultyEnv, at=100)] * 3 + [functools.partial(FaultyEnv, at=2)]
    with shoal.make(fns, backend="ray", num_workers=2) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))
        with pytest.raises(EnvError, match="env 3 raised ValueError: the env broke on purpose") as info:
            envs.step(np.zeros(4, np.int64))
        assert "FaultyEnv" in info.value.remote_traceback or "step" in info.value.remote_traceback


def test_close_kills_its_actors_and_leaves_a_joined_ray_running():
    envs = shoal.AtariVectorEnv(games=["pong", "breakout"], backend="ray", num_workers=2)
    actors = list(envs._transport._actors)
    envs.reset(seed=0)
    envs.close()
    for actor in actors:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(actor.pid.remote(), timeout=30)
    assert ray.is_initialized()  # the session's Ray, which shoal joined, still runs


def test_without_a_running_ray_one_is_started_and_shut_down_with_the_env():
    script = textwrap.dedent(
        """
        import os, psutil, ray, shoal
        os.environ.pop("RAY_ADDRESS", None)
        with shoal.make("CartPole-v1", 2, backend="ray") as envs:
            envs.reset(seed=0)
            assert ray.is_initialized() and envs.num_workers == min(2, os.cpu_count())
            assert any("raylet" in " ".join(p.cmdline()) for p in psutil.Process().children(recursive=True))
        assert not ray.is_initialized()
        print("clean")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "clean" in result.stdout, result.stderr[-2000:]


def test_without_ray_installed_the_error_says_what_to_install():
    result = run_without(
        "ray",
        """
        import shoal
        try:
            shoal.make("CartPole-v1", 2, backend="ray")
        except shoal.errors.MissingDependencyError as exc:
            print("refused:", exc)
        """,
    )
    assert 'refused: backend="ray" needs Ray, which is not installed: pip install "shoal[ray]"' in result.stdout


def test_address_needs_the_ray_backend():
    with pytest.raises(ConfigError, match="address= is the Ray cluster to join; it needs backend='ray'"):
        shoal.make("CartPole-v1", 2, backend="serial", address="auto")


def test_a_sweep_on_ray_equals_a_local_one():
    kwargs = dict(seeds=2, steps=60)
    local = sweep(["pong", "breakout"], backend="serial", **kwargs)
    on_ray = sweep(["pong", "breakout"], backend="ray", num_workers=2, **kwargs)
    assert on_ray.episodes == local.episodes
    assert [s.mean for s in on_ray.summaries] == [s.mean for s in local.summaries]


def test_joining_a_cluster_by_ray_address_leaves_it_running(tmp_path):
    import socket
    import tempfile

    import psutil

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="shoal-ray-", dir="/tmp")  # short: Ray's socket paths live under it
    ray_cli = [sys.executable, "-m", "ray.scripts.scripts"]
    start = subprocess.run(
        [*ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
         f"--temp-dir={temp}", "--disable-usage-stats"],
        capture_output=True, text=True, timeout=120,
    )
    try:
        assert start.returncode == 0, start.stderr[-2000:]
        script = textwrap.dedent(
            """
            import ray, shoal
            with shoal.make("CartPole-v1", 2, backend="ray") as envs:
                envs.reset(seed=0)
                envs.step([0, 1])
                print("nodes", len(ray.nodes()))
            print("still connected", ray.is_initialized())
            """
        )
        env = {**__import__("os").environ, "RAY_ADDRESS": f"127.0.0.1:{port}"}
        for _ in range(2):  # the second run finds the cluster still up after the first closed
            run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
            assert run.returncode == 0 and "nodes 1" in run.stdout, run.stderr[-2000:]
            assert "still connected True" in run.stdout
    finally:
        for proc in psutil.process_iter(["cmdline"]):  # `ray stop` would also stop the session's Ray
            if temp in " ".join(proc.info["cmdline"] or []):
                with contextlib.suppress(psutil.NoSuchProcess):  # it may exit while we iterate
                    proc.kill()


def test_shoal_bench_measures_the_ray_backend(capsys, tmp_path):
    from shoal.cli import main

    assert main(["bench", "--systems", "shoal-ray", "--roms", "1", "--copies", "1", "--seconds", "0.3",
                 "--out", str(tmp_path)]) == 0
    assert "shoal-ray" in capsys.readouterr().out and (tmp_path / "bench.png").exists()
