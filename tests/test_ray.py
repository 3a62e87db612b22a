"""The Ray backend against a real local Ray: faults, cleanup, a node's memory and frames, joining vs starting Ray.
Across nodes (sweeps, node actors, a simulated cluster): test_ray_cluster.py.

Equivalence with the other backends (Gymnasium reference, autoreset tables, sequences, async batches, calls, mixed
Atari ROMs, torch ops) runs in the shared backend-parametrized tests, whose "ray" cases use the same local Ray.
"""

import functools
import gc
import os
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import numpy as np
import pytest
from fakes.envs import BigArraysEnv, SpaceEnv, Stacked
from fakes.faults import FaultyEnv, made_in_worker
from helpers import run_without

import shoal
from shoal import errors
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
