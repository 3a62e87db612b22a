"""The Ray backend against a real local Ray: faults, cleanup, joining vs starting Ray, sweeps.

Equivalence with the other backends (Gymnasium reference, autoreset tables, sequences, async batches, calls, mixed
Atari ROMs, torch ops) runs in the shared backend-parametrized tests, whose "ray" cases use the same local Ray.
"""

import contextlib
import functools
import gc
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

import gymnasium as gym
import numpy as np
import pytest
from fakes import BigArraysEnv, FaultyEnv, SpaceEnv, Stacked, made_in_worker
from helpers import run_without

import shoal
from shoal import errors
from shoal.bench import sweep
from shoal.errors import ConfigError, EnvError, WorkerDiedError

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray


def test_a_killed_node_actor_is_an_error_naming_its_envs():
    import psutil

    fns = [functools.partial(SpaceEnv, "box_f32", "discrete")] * 4
    envs = shoal.make(fns, backend="ray", num_workers=2)
    envs.reset(seed=0)
    envs.step(np.zeros(4, np.int64))
    node = envs._transport._nodes[0]  # the one node's actor, hosting every env
    ray.kill(node.actor)
    psutil.wait_procs([psutil.Process(node.pid)], timeout=30)  # Ray kills it a moment later
    for _ in range(2):  # and again: a message left unsent to the dead actor is not in the way of the next
        with pytest.raises(WorkerDiedError, match=r"Ray actor 0 \(on [0-9.]+, pid \d+, hosting envs 0\.\.3\) died"):
            envs.step(np.zeros(4, np.int64))
    envs.close()  # no hang on the dead actor
    assert envs.closed


def node_workers(pid: int) -> list:
    """The worker processes of a node's actor (process ``pid``): its children, but for multiprocessing's helpers; under
    the forkserver start method (Python 3.14's default on Linux) the server's children."""
    import psutil

    found = []
    for child in psutil.Process(pid).children():
        cmdline = " ".join(child.cmdline())
        if "forkserver" in cmdline:
            found += child.children()
        elif "resource_tracker" not in cmdline:
            found.append(child)
    return found


def test_a_worker_killed_inside_a_node_is_an_error_naming_its_envs():
    fns = [functools.partial(SpaceEnv, "box_f32", "discrete")] * 4
    with shoal.make(fns, backend="ray", num_workers=2) as envs:
        envs.reset(seed=0)
        pid = ray.get(envs._transport._nodes[0].actor.pid.remote())
        workers = node_workers(pid)  # the actor steps envs 0..1 itself, a worker 2..3
        assert len(workers) == 1
        workers[0].kill()
        with pytest.raises(WorkerDiedError, match=r"worker 1 \(pid \d+, hosting envs 2\.\.3\) died"):
            for _ in range(3):
                envs.step(np.zeros(4, np.int64))


@pytest.mark.parametrize("mapped", [False, True], ids=["wire", "mapped"])
def test_large_actions_and_replies_crossing_do_not_block_either_side(mapped, monkeypatch):
    # First-N-of-M batches of 24 MB observations and actions: the vector env sends a batch's actions (48 MB) while
    # the node sends the other batch's rows (48 MB), each more than a socket holds. Both sides blocking in a write
    # hung here at once; the vector env now reads the node's reply while its message waits for room. Mapped: the
    # node is read from its memory (the rows do not cross; the actions still do).
    monkeypatch.setattr("shoal.vector.ray_transport.MAP_SHARED", mapped)
    with shoal.make([functools.partial(BigArraysEnv, 24)] * 4, backend="ray", num_workers=2, batch_size=2) as envs:
        _, info = envs.reset(seed=0)
        steps, sent = [0] * 4, [(0, 0)] * 4  # envs not sent a step yet come back with their reset observation
        for k in range(4):
            held = info["env_id"].tolist()
            actions = np.zeros((2, envs.single_action_space.shape[0]), np.uint8)
            for row, env_id in enumerate(held):
                actions[row, 0], actions[row, -1] = sent[env_id] = (k * 4 + env_id) % 256, (k * 7 + env_id) % 256
                steps[env_id] += 1
            envs.send(actions)
            obs, _, _, _, info = envs.recv(timeout=60)
            for row, env_id in enumerate(info["env_id"].tolist()):  # each env's own step count and last action
                assert obs[row, :3].tolist() == [steps[env_id] % 256, *sent[env_id]]
        assert (envs._transport._nodes[0].shared is not None) == mapped


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("mapped", [False, True], ids=["wire", "mapped"])
def test_a_node_on_this_machine_is_read_from_its_memory_or_the_wire_alike(workers, mapped, monkeypatch):
    """A node on the calling process's machine (a serial one with one worker, a pool with two) is read out of its
    memory, or with MAP_SHARED off over its connection; either way every step, synchronous, first-N-of-M and through
    the torch ops (observations into other slots), equals the serial backend."""
    from helpers import assert_same, own_trajectories

    torch = pytest.importorskip("torch")
    monkeypatch.setattr("shoal.vector.ray_transport.MAP_SHARED", mapped)
    games = ["pong", "breakout", "pong", "space_invaders"]
    make = functools.partial(shoal.AtariVectorEnv, games=games, noop_max=0, repeat_action_probability=0.0)
    act = lambda i, t: (i * 5 + t * 3) % 4  # noqa: E731
    with make(backend="serial") as ref, make(backend="ray", num_workers=workers) as envs:
        assert [n.shared is not None for n in envs._transport._nodes] == [mapped]
        mapping = envs._transport._nodes[0].mapping
        assert_same(ref.reset(seed=3), envs.reset(seed=3))
        for t in range(30):
            actions = np.array([act(i, t) for i in range(4)])
            assert_same(ref.step(actions), envs.step(actions))
        handle, _, step, *_ = envs.torch()
        for t in range(30, 40):  # the torch op's outputs alternate between its two slots
            actions = np.array([act(i, t) for i in range(4)])
            expected, got = ref.step(actions), step(handle, torch.from_numpy(actions))
            for a, b in zip(expected[:4], got[:4]):
                np.testing.assert_array_equal(a, b.numpy())
    assert mapping is None or mapping.closed  # close() unmapped the node's memory
    with make(backend="serial") as ref, make(backend="ray", num_workers=workers, batch_size=2) as envs:
        assert [n.shared is not None for n in envs._transport._nodes] == [mapped]
        got = own_trajectories(envs, act, 4, 40, each_at_least=10)
        ref.reset(seed=4)
        assert min(map(len, got.values())) >= 10
        for t in range(min(map(len, got.values()))):
            expected = ref.step(np.array([act(i, t) for i in range(4)]))
            for i in range(4):
                np.testing.assert_array_equal(got[i][t][0], expected[0][i])
                assert got[i][t][1:4] == (expected[1][i], expected[2][i], expected[3][i])


def test_frame_stacks_cross_the_wire_as_new_frames_and_equal_the_serial_backend(monkeypatch):
    """A node whose rows go on the wire (as from another machine) sends a stack shifted by one frame as its new
    frame; steps with autoresets, sequences (a stack shifted by two goes whole) and partial resets still equal the
    serial backend, and most replies are smaller than their observation rows alone."""
    from helpers import assert_same

    import shoal.vector.ray_transport as ray_transport

    monkeypatch.setattr(ray_transport, "MAP_SHARED", False)
    sizes = []
    read = ray_transport.read_reply

    def measured(message, *args):
        sizes.append(len(message))
        return read(message, *args)

    monkeypatch.setattr(ray_transport, "read_reply", measured)
    fns = [Stacked] * 6
    act = lambda t: np.array([(t + i) % 3 for i in range(6)])  # noqa: E731
    with shoal.make(fns, backend="serial") as ref, shoal.make(fns, backend="ray", num_workers=2) as envs:
        assert envs._transport._frames is not None
        assert_same(ref.reset(seed=1), envs.reset(seed=1))
        for t in range(30):
            assert_same(ref.step(act(t)), envs.step(act(t)))
        sizes.clear()
        for t in range(30, 60):
            assert_same(ref.step(act(t)), envs.step(act(t)))
        assert np.median(sizes) < 3 * 4 * 16 * 16  # a reply (a node's 3 envs) is smaller than its rows alone
        sequences = [np.array([1, 2])] * 3 + [np.array([0])] * 3
        assert_same(ref.step(sequences, gamma=0.5), envs.step(sequences, gamma=0.5))
        mask = np.array([True, False, False, True, True, False])
        assert_same(ref.reset(seed=9, options={"reset_mask": mask}), envs.reset(seed=9, options={"reset_mask": mask}))
        for t in range(60, 80):
            assert_same(ref.step(act(t)), envs.step(act(t)))


def test_frames_rebuild_rows_exactly_read_twice_or_cut_short():
    """Sender and Receiver over 40 replies of changing subsets of a node's 6 envs (2..7 of 8): stacks shifted by one
    frame (sent as their new frame), by two, reset, unchanged (sent whole). Each reply rebuilds the rows exactly; read
    again, it rebuilds the same; read again after its rows were written but before its one store that marks them
    read (where an interrupt can land), too. Float frames rebuild bit for bit (-0.0, NaN). Then rows that are no
    stacks, which the sender gives up on."""
    from shoal.spaces import Layout
    from shoal.vector.buffers import BufferSpec
    from shoal.vector.stacks import FRAMES, GIVE_UP, RAW, Receiver, Sender, stacked

    spec = BufferSpec(8, Layout(gym.spaces.Box(0, 255, (4, 16, 16), np.uint8)), Layout(gym.spaces.Discrete(2)))
    assert stacked(spec)
    assert not stacked(BufferSpec(8, Layout(gym.spaces.Box(0, 1, (512,), np.float32)), spec.action))  # not 2-D
    assert not stacked(BufferSpec(8, Layout(gym.spaces.Box(0, 255, (4, 8, 8), np.uint8)), spec.action))  # 256 bytes
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 256, (8, 4, 16, 16), dtype=np.uint8)
    sender, receiver = Sender(spec, range(2, 8)), Receiver(spec)  # a node hosting envs 2..7
    subsets = [[range(2, 8)], [range(2, 4), range(5, 8)], [range(4, 5)], [range(6, 8)]]
    frame, whole = 16 * 16, 4 * 16 * 16
    for number in range(40):
        ranges = subsets[number % 4]
        ids = np.concatenate([np.arange(r.start, r.stop) for r in ranges])
        kinds = {}
        for i in ids.tolist():
            kind = ["shift", "shift", "shift", "two", "reset", "same"][(number + i) % 6]
            kinds[i] = kind
            if kind != "same":
                new = rng.integers(0, 256, (2 if kind == "two" else 4 if kind == "reset" else 1, 16, 16), np.uint8)
                obs[i] = np.concatenate([obs[i][len(new):], new])
        message = memoryview(b"".join(sender.encode(obs, ranges)))
        shifted = [kinds[i] == "shift" and number > 0 for i in ids.tolist()]  # (reply 0: every env's first row, whole)
        assert len(message) == 1 + len(ids) + sum(frame if s else whole for s in shifted)
        before = receiver.state.copy()
        for attempt in range(3):
            out = np.zeros((len(ids), 4, 16, 16), np.uint8)
            if attempt == 2:  # rows that are not one block (every other row of a larger array)
                out = np.zeros((2 * len(ids), 4, 16, 16), np.uint8)[::2]
            assert len(receiver.decode(message, number, ranges, out)) == 0
            np.testing.assert_array_equal(out, obs[ids])
            if attempt == 1:
                receiver.state[:] = before  # as if cut short before the store: rebuilt again from the same copies
    floats = BufferSpec(2, Layout(gym.spaces.Box(-1, 1, (2, 16, 16), np.float32)), spec.action)
    rows, sender_f, receiver_f = np.zeros((2, 2, 16, 16), np.float32), Sender(floats, range(0, 2)), Receiver(floats)
    for number, (old, new) in enumerate([(0.5, 0.0), (-0.0, 0.25), (0.25, np.nan), (np.nan, 1.0)]):
        rows[:, 0], rows[:, 1] = old, new  # the older frame: the last row's newer one, but -0.0 for 0.0, a NaN
        message = memoryview(b"".join(sender_f.encode(rows, [range(0, 2)])))
        out = np.zeros_like(rows)
        receiver_f.decode(message, number, [range(0, 2)], out)
        assert out.tobytes() == rows.tobytes()
    sender, receiver = Sender(spec, range(2, 8)), Receiver(spec)
    for number in range(40, 40 + GIVE_UP + 2):  # rows that are no stacks: after GIVE_UP replies, raw for good
        obs[:] = rng.integers(0, 256, obs.shape, np.uint8)
        message = memoryview(b"".join(sender.encode(obs, [range(2, 8)])))
        assert message[:1] == (RAW if number >= 40 + GIVE_UP else FRAMES)
        assert len(message) == 1 + (6 if number < 40 + GIVE_UP else 0) + obs[2:].nbytes
        out = np.zeros_like(obs[2:])
        assert len(receiver.decode(message, number, [range(2, 8)], out)) == 0
        np.testing.assert_array_equal(out, obs[2:])


def test_a_nodes_memory_is_mapped_read_only_and_only_when_the_file_is_its_own():
    from shoal.spaces import Layout
    from shoal.vector.arena import shared_bytes
    from shoal.vector.buffers import BufferSpec
    from shoal.vector.ray_node import shared_block
    from shoal.vector.ray_transport import map_shared

    spec = BufferSpec(3, Layout(gym.spaces.Box(0, 255, (5,), np.uint8)), Layout(gym.spaces.Discrete(2)))
    memory = shared_bytes(spec.nbytes)
    block = shared_block(memory)
    assert block is not None
    mine = spec.view(memory)
    mapping, seen = map_shared(os.getpid(), (*block, spec))
    mine.obs[1] = 7
    mine.rewards[2] = 1.5
    assert seen.obs[1].tolist() == [7] * 5 and seen.rewards.tolist() == [0, 0, 1.5]  # the same memory
    with pytest.raises(ValueError, match="read-only"):
        seen.obs[0] = 1
    fd, start, size, device, inode = block
    assert map_shared(os.getpid(), (fd, start, size, device, inode + 1, spec)) is None  # another file
    assert map_shared(os.getpid(), (fd, start, size + (1 << 40), device, inode, spec)) is None  # past its end
    assert map_shared(2**22 + 12345, (*block, spec)) is None  # no such process
    del seen
    mapping.close()


@pytest.mark.parametrize("offset", range(0, 4096, 64))
def test_the_vector_envs_buffers_are_placed_away_from_a_mapped_nodes(offset):
    # Copying rows out of a node's buffers 0-63 bytes before their destination (modulo a page) runs 5-16x slower on
    # some CPUs (shoal/vector/copies.py); two page-aligned blocks would be exactly there.
    from shoal.spaces import Layout
    from shoal.vector._memory import page_delta
    from shoal.vector.buffers import BufferSpec
    from shoal.vector.copies import NEAR
    from shoal.vector.ray_transport import placed

    spec = BufferSpec(16, Layout(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)), Layout(gym.spaces.Discrete(2)))
    block = np.zeros(spec.nbytes + 8192, np.uint8)
    start = (-block.ctypes.data) % 4096 + offset  # the node's buffers begin ``offset`` bytes into a page
    node = spec.view(memoryview(block)[start : start + spec.nbytes])
    buffers = placed(spec, [node])
    assert page_delta(buffers.obs, node.obs) >= NEAR


def test_a_command_that_cannot_be_pickled_is_named_and_nothing_is_sent():
    import threading

    lock = threading.Lock()
    fns = [functools.partial(SpaceEnv, "box_f32", "discrete")] * 2
    with shoal.make(fns, backend="ray", num_workers=2) as envs:
        envs.reset(seed=0)
        with pytest.raises(errors.UnpicklableError, match=r"the arguments of call\('scaled'\) cannot be pickled"):
            envs.call("scaled", lock)
        assert envs.call("scaled", 2) == (0, 0)  # nothing was sent: the env is in step and usable
        envs.step(np.zeros(2, np.int64))


def test_an_env_that_raises_in_an_actor_is_named():
    fns = [functools.partial(FaultyEnv, at=100)] * 3 + [functools.partial(FaultyEnv, at=2)]
    with shoal.make(fns, backend="ray", num_workers=2) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))
        with pytest.raises(EnvError, match="env 3 raised ValueError: the env broke on purpose") as info:
            envs.step(np.zeros(4, np.int64))
        assert "FaultyEnv" in info.value.remote_traceback or "step" in info.value.remote_traceback


def test_close_ends_its_actors_and_their_workers_and_leaves_a_joined_ray_running():
    import psutil

    envs = shoal.AtariVectorEnv(games=["pong", "breakout"], backend="ray", num_workers=2)
    actors = [node.actor for node in envs._transport._nodes]
    hosting = [psutil.Process(ray.get(a.pid.remote())) for a in actors]
    workers = [w for p in hosting for w in node_workers(p.pid)]
    assert len(actors) == 1 and len(workers) == 1  # one node: its actor steps one game, a worker the other
    envs.reset(seed=0)
    envs.close()
    deadline = time.monotonic() + 30
    for actor in actors:  # ray.kill is asynchronous: a call sent at once may still be answered before the kill lands
        while True:
            try:
                ray.get(actor.pid.remote(), timeout=30)
            except ray.exceptions.RayActorError:
                break
            assert time.monotonic() < deadline, "the actor still answers 30 s after close()"
            time.sleep(0.1)
    psutil.wait_procs(workers, timeout=10)
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    assert ray.is_initialized()  # the session's Ray, which shoal joined, still runs


def test_without_a_running_ray_one_is_started_and_shut_down_with_the_env():
    script = textwrap.dedent(
        """
        import os, psutil, ray, shoal
        from shoal.vector.cpus import usable_cores
        os.environ.pop("RAY_ADDRESS", None)
        with shoal.make("CartPole-v1", 2, backend="ray") as envs:
            envs.reset(seed=0)
            assert ray.is_initialized() and envs.num_workers == min(2, usable_cores())
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
        path = os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH")) if p)  # actors import fakes.py
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

        from fakes import Stacked  # frame stacks: the other node sends its envs' (2..3) new frames
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
        from fakes import BigArraysEnv
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


def test_shoal_bench_measures_the_ray_backend(capsys, tmp_path):
    from shoal.cli import main

    assert main(["bench", "--systems", "shoal-ray", "--roms", "1", "--copies", "1", "--seconds", "0.3",
                 "--out", str(tmp_path)]) == 0
    assert "shoal-ray" in capsys.readouterr().out and (tmp_path / "bench.png").exists()


@ray.remote(num_cpus=0)
class _Idle:
    def ping(self) -> int:
        return 0


def test_workers_forked_beside_ray_leave_its_garbage_handles_alone():
    """Garbage Ray handles in the parent when a multiprocessing env forks its workers, which collect garbage as they
    start: the workers start and Ray still lists its nodes. Before the parent's heap was frozen for forks, a worker
    finalizing a handle could hang on a lock of Ray's threads (its start never answered), and Ray in the parent then
    hung in ray.nodes() (twice in CI) or aborted ("publisher_id is empty")."""
    from shoal.vector.ray_cluster import nodes

    fns = [functools.partial(made_in_worker, os.getpid(), collect=True)] * 4
    for _ in range(3):
        handles = [_Idle.remote() for _ in range(2)]
        ray.get([h.ping.remote() for h in handles])
        gc.disable()  # the garbage must still be there, uncollected, when the workers fork
        try:
            garbage: list = [handles]
            garbage.append(garbage)
            del handles, garbage
            with shoal.make(fns, backend="multiprocessing", num_workers=2, context="fork", inline=False) as envs:
                envs.reset(seed=0)
                envs.step(np.zeros(4, np.int64))
        finally:
            gc.enable()
        assert nodes(ray, timeout=10.0)
    gc.collect()  # the handles end here, in the parent
