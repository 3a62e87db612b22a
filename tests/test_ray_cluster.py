"""Ray across nodes: sweeps dealt to nodes, node actors and their connections, a simulated multi-node cluster (several
raylets on this machine, Ray's own cluster utilities), and joining a running cluster or starting one."""

import contextlib
import functools
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from shoal import errors
from shoal.bench import sweep
from shoal.errors import ConfigError

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray


def test_a_sweep_on_ray_equals_a_local_one():
    kwargs = dict(seeds=2, steps=60)
    local = sweep(["pong", "breakout"], backend="serial", **kwargs)
    on_ray = sweep(["pong", "breakout"], backend="ray", num_workers=2, **kwargs)
    assert on_ray.episodes == local.episodes
    assert [s.mean for s in on_ray.summaries] == [s.mean for s in local.summaries]


@pytest.mark.parametrize(
    "workers,cpus,expected",
    [(2, [1, 1], [1, 1]), (5, [1, 1], [3, 2]), (4, [3, 1], [3, 1]), (3, [16, 16, 16], [1, 1, 1]),
     (2, [16, 16, 16], [1, 1, 0]), (10, [2, 8], [2, 8]), (7, [4, 2, 2], [3, 2, 2])],
)
def test_workers_are_shared_among_nodes_in_proportion_to_their_cpus(workers, cpus, expected):
    from shoal.vector.ray_cluster import shares

    assert shares(workers, cpus) == expected


@pytest.mark.parametrize("counts", [[8, 8], [12, 4], [6, 5, 5], [16, 0]])
def test_a_sweeps_pairs_are_dealt_so_each_node_gets_each_game_in_proportion(counts):
    from collections import Counter

    from shoal.bench.ray_sweep import dealt

    games = ["pong", "breakout", "space_invaders", "ms_pacman"]
    pairs = [(g, s) for g in games for s in range(4)]  # the games x seeds order: each game's pairs together
    hands = dealt(pairs, counts)
    assert [len(hand) for hand in hands] == counts and sorted(p for hand in hands for p in hand) == sorted(pairs)
    for hand, count in zip(hands, counts):  # a node's share holds every game in proportion: each game costs alike
        per_game = Counter(g for g, _ in hand)
        assert all(abs(per_game[g] - 4 * count / 16) < 1 for g in games), (hand, count)


class _NodeTable:
    """What nodes() asks of Ray: the node this process runs on ("b") and the node table, given once ``release`` is
    set (when there is one), or ``error`` raised."""

    def __init__(self, table=(), release=None, error=None):
        self.table, self.release, self.error = list(table), release, error

    def get_runtime_context(self):
        return self

    def get_node_id(self):
        return "b"

    def nodes(self):
        if self.release is not None:
            self.release.wait()
        if self.error is not None:
            raise self.error
        return self.table


def test_a_node_table_ray_does_not_give_is_an_error_not_a_hang():
    from shoal.vector.ray_cluster import nodes

    release = threading.Event()
    try:
        start = time.monotonic()
        with pytest.raises(errors.WaitTimeoutError, match=r"Ray did not list its nodes within 0.2 s"):
            nodes(_NodeTable(release=release), timeout=0.2)
        assert time.monotonic() - start < 5
    finally:
        release.set()
    with pytest.raises(ConnectionError, match="GCS gone"):
        nodes(_NodeTable(error=ConnectionError("GCS gone")))
    table = [{"NodeID": "c", "Alive": True, "Resources": {"CPU": 2.0}}, {"NodeID": "b", "Alive": True,
             "Resources": {"CPU": 1.0}}, {"NodeID": "a", "Alive": False, "Resources": {"CPU": 4.0}},
             {"NodeID": "d", "Alive": True, "Resources": {}}]
    assert nodes(_NodeTable(table)) == [("b", 1), ("c", 2)]  # this process's node first; dead and CPU-less left out


def test_a_node_address_that_cannot_be_reached_says_where_to_run():
    import socket

    from shoal.vector.ray_transport import dial

    with socket.socket() as s:  # a port nobody listens on any more
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match=rf"cannot reach Ray actor 3 at 127.0.0.1:{port} .*run it on a machine of "):
        dial(("127.0.0.1", port), b"key", 3)


def test_both_ends_of_a_nodes_connection_write_short_messages_at_once():
    # With Nagle's algorithm on (the default), a short write while an earlier one is unacknowledged waits for its
    # ACK, which the other end delays up to 40 ms: asynchronous steps on Ray took 44 ms instead of ~2 (a node answers
    # two batches in a row). The node's accepting end and the vector env's dialling end, each as the backend makes it
    import socket
    import types

    from shoal.vector.ray_node import NodeHost
    from shoal.vector.ray_transport import dial

    key = b"k" * 32
    with socket.create_server(("127.0.0.1", 0)) as server:
        accepted = []
        node = threading.Thread(target=lambda: accepted.append(NodeHost._accept(types.SimpleNamespace(
            server=server, authkey=key))))
        node.start()
        conn = dial(server.getsockname(), key, 0)
        node.join(30)
        for end in (conn, *accepted):
            with socket.socket(fileno=os.dup(end.fileno())) as sock:
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), end
            end.close()
    assert len(accepted) == 1


def test_a_node_actor_serves_the_vector_env_after_strangers_fail_its_challenge_or_say_nothing():
    import socket

    import cloudpickle
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    from shoal.spaces import Layout
    from shoal.vector.buffers import BufferSpec
    from shoal.vector.commands import Command, Op
    from shoal.vector.gym_engine import GymEngineFactory
    from shoal.vector.ray_node import CLOSE, NUMBER, NodeHost, command_request, read_reply
    from shoal.vector.ray_transport import dial

    probe = gym.make("CartPole-v1")
    factory = GymEngineFactory([functools.partial(gym.make, "CartPole-v1")] * 2, probe.observation_space,
                               probe.action_space)
    spec = BufferSpec(2, Layout(probe.observation_space), Layout(probe.action_space))
    key = b"k" * 32
    host = ray.remote(NodeHost).options(num_cpus=0, max_concurrency=2).remote(
        cloudpickle.dumps(factory), [range(0, 2)], [[0]], 0, spec, AutoresetMode.NEXT_STEP, key)
    try:
        status, address, *_ = ray.get(host.ready.remote(), timeout=60)
        serving = host.serve.remote()
        with socket.create_connection(address) as stranger:  # first in line, with the wrong answer
            stranger.recv(64)
            stranger.sendall(b"\x00\x00\x00\x04junk")
        with socket.create_connection(address):  # next in line, silent and staying: dropped after HANDSHAKE_S
            conn = dial(address, key, 0)
        conn.send_bytes(command_request({0: Command(Op.RESET, np.arange(2), ([1, 2], None))}, [None]))
        buffers = spec.allocate()
        message = conn.recv_bytes()
        assert NUMBER.unpack_from(message) == (0,)  # the node's first reply
        [(group, (ok, _))] = read_reply(message[NUMBER.size:], buffers, [range(0, 2)])
        expected = [gym.make("CartPole-v1").reset(seed=s)[0] for s in (1, 2)]
        assert group == 0 and ok and np.array_equal(buffers.obs[:2], np.stack(expected))
        conn.send_bytes(CLOSE)
        ray.get(serving, timeout=30)
    finally:
        ray.kill(host)


def test_a_simulated_two_node_cluster_spreads_work_and_names_a_lost_nodes_envs():
    """Two raylets on this machine (Ray's own cluster utilities), one CPU each: a vector env and a sweep use both
    nodes and equal the serial backend / a local sweep; a node killed mid-run is an error naming its envs; close()
    leaves the cluster running. In a fresh interpreter: it joins its own cluster, not the session's Ray."""
    script = textwrap.dedent(
        """
        import collections, os, sys, time
        sys.path.insert(0, TESTS)
        import numpy as np, ray, shoal
        from helpers import own_trajectories
        from ray.cluster_utils import Cluster
        from shoal.bench import sweep
        from shoal.bench.ray_sweep import run_on_nodes
        from shoal.errors import WorkerDiedError

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        second = cluster.add_node(num_cpus=1)
        path = os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH")) if p)  # actors import the fakes
        ray.init(address=cluster.address, logging_level="ERROR", runtime_env={"env_vars": {"PYTHONPATH": path}})
        cluster.wait_for_nodes()
        both = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert len(both) == 2

        act = lambda i, t: (i * 7 + t * 3) % 2
        with shoal.make("CartPole-v1", 4, backend="serial") as ref, shoal.make("CartPole-v1", 4, backend="ray") as envs:
            assert envs.num_workers == 2 and {n.node_id for n in envs._transport._nodes} == both
            assert [n.ids for n in envs._transport._nodes] == [range(0, 2), range(2, 4)]
            assert [n.shared is not None for n in envs._transport._nodes] == [True, False]  # the other node: wire
            expected = collections.defaultdict(list)
            ref.reset(seed=5), envs.reset(seed=5)
            for t in range(80):  # CartPole's episodes end (and autoreset) within this
                actions = np.array([act(i, t) for i in range(4)])
                a, b = ref.step(actions), envs.step(actions)
                assert all(np.array_equal(x, y) for x, y in zip(a[:4], b[:4])), t
                for i in range(4):
                    expected[i].append((a[0][i].tolist(), a[1][i], a[2][i]))
        print("sync equal on both nodes")

        with shoal.make("CartPole-v1", 4, backend="ray", batch_size=2) as envs:  # first 2 of 4, across nodes
            got = own_trajectories(envs, act, 5, 100, each_at_least=10)
            for i in range(4):
                k = min(len(got[i]), 80)
                mine = [(o.tolist(), r, te) for o, r, te, *_ in got[i][:k]]
                assert k >= 10 and mine == expected[i][:k], (i, k)
        print("async equal across nodes")

        from fakes.envs import Stacked  # frame stacks: the other node sends its envs' (2..3) new frames
        with shoal.make([Stacked] * 4, backend="serial") as ref, shoal.make([Stacked] * 4, backend="ray") as envs:
            assert envs._transport._frames is not None
            ref.reset(seed=6), envs.reset(seed=6)
            for t in range(40):  # its episodes end within 11 steps
                actions = np.array([act(i, t) for i in range(4)])
                a, b = ref.step(actions), envs.step(actions)
                assert all(np.array_equal(x, y) for x, y in zip(a[:4], b[:4])), t
            assert envs._transport._frames.state[2:].min() >= 0 and envs._transport._frames.state[:2].max() == -1
        print("frame stacks equal across nodes")

        kwargs = dict(seeds=2, steps=40)
        local = sweep(["pong", "breakout"], backend="serial", **kwargs)
        spread = sweep(["pong", "breakout"], backend="ray", **kwargs)
        assert spread.episodes == local.episodes
        events = list(run_on_nodes([("pong", 0), ("breakout", 1)], "steps", 5, "random", None, {}))
        assert {e[1] for e in events if e[0] == "ran"} == both
        print("sweep equal, on both nodes")

        envs = shoal.make("CartPole-v1", 4, backend="ray")
        envs.reset(seed=0)
        cluster.remove_node(second, allow_graceful=False)
        start = time.monotonic()
        try:
            while time.monotonic() - start < 60:
                envs.step(np.zeros(4, np.int64))
            raise AssertionError("stepping went on for 60 s after the node was killed")
        except WorkerDiedError as exc:
            print("died:", exc)
        start = time.monotonic()
        envs.close()
        assert time.monotonic() - start < 15
        assert ray.is_initialized()
        with shoal.make("CartPole-v1", 2, backend="ray", num_workers=1) as envs:  # the head node is still there
            envs.reset(seed=0)
            envs.step(np.zeros(2, np.int64))
        print("cluster still running")
        ray.shutdown()
        cluster.shutdown()
        """
    )
    out = run_on_own_cluster(script, timeout=400)
    for line in ("sync equal on both nodes", "async equal across nodes", "frame stacks equal across nodes",
                 "sweep equal, on both nodes", "cluster still running"):
        assert line in out
    assert re.search(r"died: Ray actor 1 \(on [0-9.]+, pid \d+, hosting envs 2\.\.3\) died", out), out


def test_a_node_lost_with_its_connection_left_open_is_an_error_not_a_hang():
    """A node whose machine is gone leaves the vector env's connection to it open and unread: a large send to it
    never finds room. Simulated with two raylets on this machine: the second node's processes (its raylet, the
    shoal actor and its workers) are stopped with SIGSTOP, as if its machine froze, so the actor's socket stays
    open; Ray's health checks then declare the node dead, and the step sending it 24 MB of actions must end in the
    error naming its envs, not wait forever."""
    script = textwrap.dedent(
        """
        import functools, sys, threading, time
        sys.path.insert(0, TESTS)
        import numpy as np, psutil, ray, shoal
        from fakes.envs import BigArraysEnv
        from ray.cluster_utils import Cluster
        from shoal.errors import WorkerDiedError

        checks = {"health_check_period_ms": 500, "health_check_timeout_ms": 500, "health_check_failure_threshold": 3}
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                                "_system_config": checks})
        second = cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, logging_level="ERROR", runtime_env={"env_vars": {"PYTHONPATH": TESTS}})
        cluster.wait_for_nodes()
        envs = shoal.make([functools.partial(BigArraysEnv, 24)] * 2, backend="ray")
        lost = envs._transport._nodes[1]
        assert len(envs._transport._nodes) == 2 and lost.ids == range(1, 2)
        envs.reset(seed=0)
        actions = np.zeros((2, envs.single_action_space.shape[0]), np.uint8)
        envs.step(actions)
        frozen = [psutil.Process(p.process.pid) for ps in second.all_processes.values() for p in ps]
        frozen += [psutil.Process(lost.pid), *psutil.Process(lost.pid).children(recursive=True)]

        def end_frozen():
            for proc in frozen:
                try:
                    proc.kill()
                except psutil.NoSuchProcess:
                    pass

        def hung():  # the failure this test is about: end it (the socket then closes) rather than wait forever
            print("hung", flush=True)
            end_frozen()

        watchdog = threading.Timer(120, hung)
        watchdog.start()
        try:
            for proc in frozen:
                proc.suspend()
            start = time.monotonic()
            try:
                envs.step(actions)
                raise AssertionError("the step to the lost node returned")
            except WorkerDiedError as exc:
                print(f"died after {time.monotonic() - start:.1f} s:", exc, flush=True)
            assert all(p.status() == psutil.STATUS_STOPPED for p in frozen)  # its socket was open all along
            start = time.monotonic()
            envs.close()
            assert time.monotonic() - start < 30, time.monotonic() - start
            print("closed")
        finally:
            watchdog.cancel()
            end_frozen()
        ray.shutdown()
        cluster.shutdown()
        """
    )
    out = run_on_own_cluster(script, timeout=300)
    assert re.search(r"died after [0-9.]+ s: Ray actor 1 \(on [0-9.]+, pid \d+, hosting envs 1\.\.1\) died", out), out
    assert "closed" in out and "hung" not in out, out


def run_on_own_cluster(script: str, timeout: float) -> str:
    """Run ``script`` (which starts its own cluster) in a fresh interpreter that does not join the session's Ray,
    with ``TESTS`` standing for this directory; its output, after checking that it succeeded."""
    env = {k: v for k, v in __import__("os").environ.items() if k != "RAY_ADDRESS"}
    script = script.replace("TESTS", repr(str(Path(__file__).parent)))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout, env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    return run.stdout


@pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")  # TorchScript is deprecated in torch 2.13
def test_a_ray_sweep_takes_its_policy_file_to_the_nodes_and_writes_episodes_as_they_come(tmp_path):
    torch = pytest.importorskip("torch")
    from shoal.bench import read_episodes

    class Brightest(torch.nn.Module):  # the action follows the screen: a policy that is not random
        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return obs[:, -1].float().mean(dim=(1, 2))[:, None] * torch.arange(18.0) % 7

    path = tmp_path / "policy.pt"
    torch.jit.save(torch.jit.script(Brightest()), str(path))
    kwargs = dict(seeds=2, steps=50, policy=path)
    local = sweep(["pong", "breakout"], backend="serial", **kwargs)
    on_ray = sweep(["pong", "breakout"], backend="ray", out=tmp_path / "run", **kwargs)
    assert on_ray.episodes == local.episodes
    assert sorted(read_episodes(tmp_path / "run" / "episodes.csv"), key=str) == sorted(on_ray.episodes, key=str)

    class TooFew(torch.nn.Module):
        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return torch.zeros(obs.shape[0], 4)

    torch.jit.save(torch.jit.script(TooFew()), str(tmp_path / "few.pt"))
    with pytest.raises(ConfigError, match=r"expected \(\d, k\) with k >= 6"):  # raised on a node, as locally
        sweep(["breakout", "pong"], seeds=1, steps=5, policy=tmp_path / "few.pt", backend="ray")


def test_a_local_ray_starts_where_the_address_file_of_a_dead_cluster_remains():
    """Ray's ``ray_current_cluster`` names the last ``ray start`` cluster, and one that died without removing it (or
    a live one) made the local start, ``ray.init(num_cpus=...)``, fail ("When connecting to an existing cluster,
    num_cpus and num_gpus must not be provided"). With no address given, shoal starts its own. In a fresh
    interpreter with its own Ray temp dir (a short path: Ray's sockets live there)."""
    temp = tempfile.mkdtemp(prefix="shoal-ray-", dir="/tmp")
    try:
        os.makedirs(os.path.join(temp, "ray"))
        with open(os.path.join(temp, "ray", "ray_current_cluster"), "w") as file:
            file.write("127.0.0.1:1")  # nothing listens there
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"RAY_TMPDIR": temp}
        script = textwrap.dedent(
            """
            import numpy as np, shoal
            with shoal.make("CartPole-v1", 2, backend="ray") as envs:
                envs.reset(seed=0)
                envs.step(np.zeros(2, np.int64))
            print("stepped")
            """
        )
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
        assert run.returncode == 0 and "stepped" in run.stdout, run.stderr[-3000:]
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def test_joining_a_cluster_by_ray_address_leaves_it_running(tmp_path):
    import socket

    import psutil

    def free_port() -> int:
        """A port free now, below the kernel's ephemeral range (32768 and up here), where the client sockets of
        other processes, the session's Ray among them, keep taking ports (a port drawn there was once taken before
        the head bound it), and above Ray's worker ports (10002-19999)."""
        while True:
            port = random.randrange(20000, 32000)
            with socket.socket() as s, contextlib.suppress(OSError):
                s.bind(("127.0.0.1", port))
                return port

    temp = tempfile.mkdtemp(prefix="shoal-ray-", dir="/tmp")  # short: Ray's socket paths live under it
    ray_cli = [sys.executable, "-m", "ray.scripts.scripts"]
    port = free_port()
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
        shutil.rmtree(temp, ignore_errors=True)  # (its address file and session logs)
