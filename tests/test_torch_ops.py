"""envs.torch(): the PyTorch custom ops against the numpy path, under torch.compile, and their buffer lifetimes."""

import gc
import tracemalloc

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import shoal  # noqa: E402
from helpers import run_without  # noqa: E402
from shoal.errors import ActionError, ClosedError, ConfigError, NoAsyncCallError  # noqa: E402
from shoal.torch_ops import handle_of  # noqa: E402

MIXED = ["pong", "breakout", "space_invaders", "ms_pacman"]


def atari(**kwargs):
    kwargs.setdefault("backend", "serial")
    return shoal.AtariVectorEnv(games=kwargs.pop("games", MIXED), **kwargs)


def assert_tensors_equal_numpy(tensors, arrays):
    for name, tensor, array in zip(("obs", "reward", "terminated", "truncated"), tensors, arrays):
        expected = torch.from_numpy(np.ascontiguousarray(array))
        assert tensor.dtype == expected.dtype and torch.equal(tensor, expected), name


def random_actions(envs, steps, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, envs.num_actions) for _ in range(steps)]


# -- equal to the numpy path ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["serial", "multiprocessing", pytest.param("ray", marks=pytest.mark.ray)])
def test_ops_equal_the_numpy_path_step_for_step(backend):
    with atari(backend=backend, num_workers=2) as ops_envs, atari() as np_envs:
        ops_envs.reset(seed=5)
        np_envs.reset(seed=5)
        handle, send, step, recv, get_last_info, unregister = ops_envs.torch()
        for t, actions in enumerate(random_actions(np_envs, 120, seed=1)):
            expected = np_envs.step(actions)
            if t % 2:
                got = step(handle, torch.from_numpy(actions))
            else:
                send(handle, torch.from_numpy(actions))
                got = recv(handle)
            assert_tensors_equal_numpy(got[:4], expected[:4])
            assert got[4].tolist() == [1] * 4
            info = get_last_info(handle)
            for name in ("env_id", "lives", "frame_number", "episode_frame_number", "raw_reward"):
                assert torch.equal(info[name], torch.from_numpy(expected[4][name])), name


def test_sequences_through_the_ops_equal_lists_of_arrays():
    rng = np.random.default_rng(3)
    with atari() as ops_envs, atari() as np_envs:
        ops_envs.reset(seed=2)
        np_envs.reset(seed=2)
        handle, send, step, recv, get_last_info, unregister = ops_envs.torch()
        for _ in range(25):
            seqs = [rng.integers(0, n, size=rng.integers(0, 6)) for n in np_envs.num_actions]
            expected = np_envs.step(seqs, gamma=0.9)
            offsets = torch.tensor(np.cumsum([0] + [len(s) for s in seqs]))
            got = step(handle, torch.from_numpy(np.concatenate(seqs)), offsets, 0.9)
            assert_tensors_equal_numpy(got[:4], expected[:4])
            assert got[4].tolist() == expected[4]["steps_taken"].tolist()


def test_generic_env_with_flattened_dict_observations():
    def make(**kwargs):
        return shoal.make("CartPole-v1", 3, backend="serial", **kwargs)

    with make() as ops_envs, make() as np_envs:
        ops_envs.reset(seed=0)
        np_envs.reset(seed=0)
        handle, send, step, recv, _, _ = ops_envs.torch()
        ending = np.zeros(3, bool)
        resets = 0
        for t in range(60):
            actions = np.array([t % 2, (t // 3) % 2, 1])
            got = step(handle, torch.from_numpy(actions))
            expected = np_envs.step(actions)
            assert_tensors_equal_numpy(got[:4], expected[:4])
            # an env whose episode ended last step only resets (next-step autoreset): it takes no step
            assert got[4].tolist() == (~ending).astype(int).tolist()
            resets += ending.sum()
            ending = expected[2] | expected[3]
        assert 0 < resets and resets < 3 * 60 / 4  # mixed batches: some envs reset while others step


def test_async_batches_through_the_ops():
    # The serial backend answers first-in first-out, so two async envs give the same batches in the same order.
    def make():
        return atari(batch_size=2, num_workers=2)

    with make() as ops_envs, make() as np_envs:
        ops_envs.reset(seed=9)
        obs, info = np_envs.reset(seed=9)
        handle, send, step, recv, get_last_info, unregister = ops_envs.torch()
        rng = np.random.default_rng(0)
        seen = set()
        for _ in range(40):
            ids = info["env_id"]
            actions = rng.integers(0, np.asarray(np_envs.num_actions)[ids])
            *expected, info = np_envs.step(actions)
            send(handle, torch.from_numpy(actions))
            got = recv(handle)
            assert_tensors_equal_numpy(got[:4], expected)
            assert get_last_info(handle)["env_id"].tolist() == info["env_id"].tolist()
            seen.add(tuple(info["env_id"].tolist()))
        assert seen == {(0, 1), (2, 3)}


def test_async_batches_on_worker_processes_carry_their_env_ids():
    with atari(games=["pong"] * 4, backend="multiprocessing", num_workers=4, batch_size=2) as envs:
        envs.reset(seed=0)
        handle, send, step, recv, get_last_info, unregister = envs.torch()
        for t in range(30):
            obs, reward, term, trunc, steps = step(handle, torch.full((2,), t % 6))
            ids = get_last_info(handle)["env_id"]
            assert obs.shape == (2, 4, 84, 84) and len(set(ids.tolist())) == 2
            frames = get_last_info(handle)["frame_number"]
            assert (frames > 0).all()


def test_async_batches_of_scattered_envs_equal_each_env_stepped_alone():
    # Batches drawn from two workers are often not one block of envs (say envs 0 and 2): their observations are
    # gathered from wherever each env's are. Each env is checked against a twin stepped alone with the same seed.
    games = ["pong", "breakout", "pong", "breakout"]
    twins = [atari(games=[g]) for g in games]
    with atari(games=games, backend="multiprocessing", num_workers=2, batch_size=2) as envs:
        _, info = envs.reset(seed=9)
        latest = [(twin.reset(seed=9 + i)[0][0], 0.0) for i, twin in enumerate(twins)]  # each twin's last result
        pending = set()  # twins sent an action, not yet received
        handle, send, step, recv, get_last_info, unregister = envs.torch()
        rng = np.random.default_rng(0)
        ids, scattered = info["env_id"], 0
        for _ in range(60):
            actions = rng.integers(0, np.asarray(envs.num_actions)[ids])
            send(handle, torch.from_numpy(actions))
            for env_id, action in zip(ids.tolist(), actions.tolist()):
                twins[env_id].send(np.array([action]))
                pending.add(env_id)
            obs, reward, *_ = recv(handle)
            ids = get_last_info(handle)["env_id"].numpy().copy()
            scattered += int(ids[1] - ids[0] != 1)
            for row, env_id in enumerate(ids.tolist()):
                if env_id in pending:  # else it comes back from the reset, not stepped yet
                    twin_obs, twin_reward, *_ = twins[env_id].recv()
                    latest[env_id] = (twin_obs[0], twin_reward[0])
                    pending.discard(env_id)
                assert torch.equal(obs[row], torch.from_numpy(latest[env_id][0]))
                assert reward[row].item() == latest[env_id][1]
        assert scattered > 0, "no batch of scattered envs came: the gathering path went untested"
    for twin in twins:
        twin.close()


# -- buffer lifetimes and allocation -------------------------------------------------------------------------------


def test_held_tensors_never_change_and_released_ones_are_reused():
    with atari(games=["breakout", "pong"]) as envs:
        envs.reset(seed=1)
        handle, send, step, recv, get_last_info, _ = envs.torch()
        pool = shoal.torch_ops.handle_of(handle).pool
        actions = torch.tensor([1, 2])
        held = []  # (tensor as returned, its clone at the time)
        for _ in range(6):
            obs, reward, *_ = step(handle, actions)
            held.append((obs, obs.clone(), reward, reward.clone()))
        for obs, obs_then, reward, reward_then in held:
            assert torch.equal(obs, obs_then) and torch.equal(reward, reward_then)
        assert len({obs.data_ptr() for obs, *_ in held}) == 6 and len(pool) == 6
        view, view_then = held[2][0][1], held[2][1][1]  # a view of one obs keeps its whole set held
        kept_ptr = held[2][0].data_ptr()
        released = {obs.data_ptr() for obs, *_ in held} - {kept_ptr}
        del held, obs, reward
        for _ in range(20):
            obs, *_ = step(handle, actions)
            assert obs.data_ptr() in released  # released sets are reused, the held one is not
        assert len(pool) == 6 and torch.equal(view, view_then)


def _in_shared_memory(tensor, envs):
    start = envs._buffers.obs.ctypes.data
    return start <= tensor.data_ptr() < start + envs._buffers.obs.nbytes


def test_observations_are_the_shared_memory_the_workers_wrote():
    # No copy beyond the one into shared memory: a loop that keeps the previous observation gets the workers' own
    # slots, alternately; with two held, the next step is copied out, and every value equals the numpy path's.
    with atari(games=["breakout", "pong"], backend="multiprocessing", num_workers=2, inline=False) as envs, atari(
        games=["breakout", "pong"]
    ) as reference:
        envs.reset(seed=4)
        reference.reset(seed=4)
        handle, send, step, recv, get_last_info, _ = envs.torch()
        pointers = []
        for actions in random_actions(reference, 40, seed=2):
            expected = reference.step(actions)
            send(handle, torch.from_numpy(actions))  # the previous step's obs is still held here
            obs, *rest = recv(handle)
            assert _in_shared_memory(obs, envs) and torch.equal(obs, torch.from_numpy(expected[0]))
            pointers.append(obs.data_ptr())
        assert len(set(pointers)) == 2 and pointers[0::2] == [pointers[0]] * 20
        previous = obs
        obs, *_ = step(handle, torch.from_numpy(random_actions(reference, 1, seed=4)[0]))
        reference.step(random_actions(reference, 1, seed=4)[0])
        assert _in_shared_memory(obs, envs) and obs.data_ptr() != previous.data_ptr()
        kept = [obs, obs.clone(), previous, previous.clone()]  # both slots held now
        for actions in random_actions(reference, 5, seed=3):
            expected = reference.step(actions)
            copied, *_ = step(handle, torch.from_numpy(actions))
            assert not _in_shared_memory(copied, envs) and torch.equal(copied, torch.from_numpy(expected[0]))
        assert torch.equal(kept[0], kept[1]) and torch.equal(kept[2], kept[3])


def test_two_handles_on_one_env_never_write_what_the_other_holds():
    with atari(games=["breakout", "pong"]) as envs:
        envs.reset(seed=8)
        first, second = envs.torch(), envs.torch()
        actions = torch.tensor([1, 2])
        held = first[2](first[0], actions)[0]
        then = held.clone()
        for _ in range(4):
            second[2](second[0], actions)
            first[2](first[0], actions)
        assert torch.equal(held, then)


def test_calls_and_resets_never_write_a_held_observation():
    with atari(games=["breakout", "pong"]) as envs, atari(games=["breakout", "pong"]) as reference:
        envs.reset(seed=6)
        reference.reset(seed=6)
        handle, send, step, recv, get_last_info, _ = envs.torch()
        actions = [np.array([1, 2]), np.array([3, 0]), np.array([2, 1])]
        obs, *_ = step(handle, torch.from_numpy(actions[0]))
        reference.step(actions[0])
        states = envs.clone_state()
        obs, *_ = step(handle, torch.from_numpy(actions[1]))
        held, then = obs, obs.clone()
        envs.restore_state(states)  # rewrites each env's observation, in the numpy path's slot
        reference_obs, *_ = reference.step(actions[2])
        got = envs.step(actions[2])[0]
        np.testing.assert_array_equal(got, reference_obs)
        mask = np.array([True, False])
        reset_obs, _ = envs.reset(options={"reset_mask": mask})
        assert torch.equal(held, then)
        np.testing.assert_array_equal(reset_obs[1], got[1])  # the env not reset keeps its observation


def test_no_allocation_per_step_in_the_op_path():
    with atari(games=["breakout"] * 4) as envs:
        envs.reset(seed=0)
        handle, send, step, recv, get_last_info, _ = envs.torch()
        actions = torch.ones(4, dtype=torch.int64)
        for _ in range(10):  # warm up any lazily built caches
            step(handle, actions)
        pointers = np.zeros(1000, np.int64)  # the test's own records, allocated before tracing starts
        growth = np.zeros(1000, np.int64)
        hot = np.zeros(1000, np.bool_)  # no episode end this step or the last (no autoreset): the hot path
        ended_before = False
        tracemalloc.start(100)  # deep enough to reach this test's frame from any allocation of a step
        try:
            for t in range(1000):
                before = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                obs, reward, term, trunc, steps = step(handle, actions)
                growth[t] = tracemalloc.get_traced_memory()[1] - before
                pointers[t] = obs.data_ptr()
                ended = bool((term | trunc).any())
                hot[t] = not ended and not ended_before
                ended_before = ended
            gc.collect()  # torch's op dispatch leaves small reference cycles behind; they are garbage, not leaks
            # what the steps left allocated, not what other threads (left running by earlier tests: Ray's) did
            alive = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, __file__, all_frames=True)])
            leaked = sum(stat.size for stat in alive.statistics("filename"))
        finally:
            tracemalloc.stop()
        frame_batch = 4 * 4 * 84 * 84
        # numpy copies of a batch would show here (tracemalloc sees numpy's buffers); torch's are the pointers below
        assert hot.sum() > 900 and growth[hot].max() < frame_batch // 16, f"a step allocated {growth[hot].max()} bytes"
        assert leaked < 4096
        assert len(set(pointers.tolist())) == 2


# -- torch.compile -----------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # inductor's own
def test_compiled_agent_and_env_loop_equals_eager():
    torch.manual_seed(0)
    weights = torch.randn(4, 6)

    def run(loop):
        with atari(games=["pong", "pong"]) as envs:
            obs, _ = envs.reset(seed=4)
            handle, send, step, recv, get_last_info, unregister = envs.torch()
            return loop(handle, send, recv, get_last_info, torch.from_numpy(obs), weights)

    def loop(handle, send, recv, get_last_info, obs, weights):
        # The previous observation is kept across the next recv: the ring must not overwrite it.
        prev, total, motion = obs, torch.zeros(2), torch.zeros(2)
        frames = torch.zeros(2, dtype=torch.int64)
        for _ in range(12):
            logits = obs.float().mean(dim=(2, 3)) @ weights
            send(handle, logits.argmax(dim=1))
            obs, reward, terminated, truncated, steps = recv(handle)
            motion = motion + (obs.float() - prev.float()).abs().sum(dim=(1, 2, 3))
            total = total + reward
            prev = obs
            frames = get_last_info(handle)["frame_number"]
        return total, motion, frames

    eager = run(loop)
    compiled = run(torch.compile(loop, fullgraph=True))
    for a, b in zip(eager, compiled):
        assert torch.equal(a, b)
    assert (eager[1] > 0).all()  # the screens moved
    assert eager[2].tolist() == compiled[2].tolist() and (eager[2] >= 12 * 4).all()  # every send ran


# -- errors and lifecycle ----------------------------------------------------------------------------------------


def test_unregistered_or_closed_handles_are_refused():
    with atari(games=["pong"]) as envs:
        envs.reset(seed=0)
        handle, send, step, recv, get_last_info, unregister = envs.torch()
        step(handle, torch.zeros(1, dtype=torch.int64))
        unregister(handle)
        with pytest.raises(ClosedError, match=f"torch handle {handle} is not registered"):
            step(handle, torch.zeros(1, dtype=torch.int64))
        with pytest.raises(ClosedError, match="not registered"):
            unregister(handle)
        second = envs.torch()[0]
    with pytest.raises(ClosedError, match=f"torch handle {second} is not registered"):
        recv(second)


def test_bad_input_through_the_ops():
    with atari(games=["pong", "breakout"]) as envs:
        envs.reset(seed=0)
        handle, send, step, recv, get_last_info, _ = envs.torch()
        with pytest.raises(NoAsyncCallError, match="no step received yet"):
            get_last_info(handle)
        with pytest.raises(ActionError, match="outside the range of env 1"):
            step(handle, torch.tensor([0, 5]))
        with pytest.raises(ActionError, match="sequence offsets must rise from 0"):
            step(handle, torch.tensor([0, 1, 2]), torch.tensor([0, 2, 1]))
        with pytest.raises(ActionError, match=r"sequence offsets .*expected shape \(3,\)"):
            step(handle, torch.tensor([0, 1]), torch.tensor([0, 2]))
        with pytest.raises(ActionError, match="gamma must be a number in"):
            step(handle, torch.tensor([0, 1]), torch.tensor([0, 1, 2]), 1.5)
    with shoal.make("Blackjack-v1", 2, backend="serial") as tuple_obs:
        with pytest.raises(ConfigError, match="flatten=True"):
            tuple_obs.torch()
    with shoal.make("Blackjack-v1", 2, backend="serial", flatten=True) as flat:
        flat.reset(seed=0)
        handle, send, step, *_ = flat.torch()
        assert step(handle, torch.zeros(2, dtype=torch.int64))[0].shape == (2, 3)


def test_without_torch_import_works_and_torch_says_what_to_install():
    result = run_without(
        "torch",
        """
        import shoal
        envs = shoal.make("CartPole-v1", 2, backend="serial")
        try:
            envs.torch()
        except shoal.errors.MissingDependencyError as exc:
            print("refused:", exc)
        envs.close()
        """,
    )
    assert result.returncode == 0, result.stderr
    assert 'refused: envs.torch() needs PyTorch, which is not installed: pip install "shoal[torch]"' in result.stdout


def cuda(test):
    return pytest.mark.gpu(pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")(test))


@cuda
@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_cuda_outputs_land_on_the_device_and_equal_cpu(backend):
    games = ["pong", "breakout"] * 2
    with atari(games=games, backend=backend, num_workers=2) as gpu_envs, atari(games=games) as cpu_envs:
        gpu_envs.reset(seed=0)
        cpu_envs.reset(seed=0)
        gpu = gpu_envs.torch(device="cuda")
        cpu = cpu_envs.torch()
        assert gpu_envs._torch_slots.pinned is not None  # observations are copied from the shared slots
        for t in range(40):
            actions = torch.tensor([t % 6, t % 4, (t + 1) % 6, (t + 2) % 4])
            got = gpu[2](gpu[0], actions.cuda())
            expected = cpu[2](cpu[0], actions)
            assert all(tensor.is_cuda for tensor in got)
            for a, b in zip(got, expected):
                assert torch.equal(a.cpu(), b)
            for name, tensor in gpu[4](gpu[0]).items():
                assert torch.equal(tensor.cpu(), cpu[4](cpu[0])[name]), name
        slots = gpu_envs._torch_slots
    assert slots.pinned is None  # closing unregistered the block before unmapping it


@cuda
def test_cuda_copies_go_to_the_stream_current_at_recv():
    """Outputs read on the stream that was current when their step was received are that step's, while the default
    stream is held up by a long kernel (copies launched on another stream would not have run yet)."""
    games = ["pong", "breakout"] * 2
    side = torch.cuda.Stream()
    with atari(games=games, num_workers=2) as gpu_envs, atari(games=games) as cpu_envs:
        gpu_envs.reset(seed=0)
        cpu_envs.reset(seed=0)
        gpu = gpu_envs.torch(device="cuda")
        cpu = cpu_envs.torch()
        for t in range(12):
            actions = torch.tensor([t % 6, t % 4, (t + 1) % 6, (t + 2) % 4])
            torch.cuda._sleep(50_000_000)  # on the default stream: ~25 ms
            with torch.cuda.stream(side):
                got = [tensor.cpu() for tensor in gpu[2](gpu[0], actions)]  # waits for the side stream alone
            for a, b in zip(got, cpu[2](cpu[0], actions)):
                assert torch.equal(a, b), t
        torch.cuda.synchronize()


def cuda_steps(backend, batch_size, steps, before=None):
    """Pong and Breakout x 2 stepped ``steps`` times through the CUDA ops, random CPU actions (so that nothing
    waits for the device), calling ``before()`` ahead of each step: yields ``(buffers, handle, get_last_info,
    outputs, ids)`` after each step (``ids``: its batch's env ids, read from the host side of its outputs)."""
    with atari(games=["pong", "breakout"] * 2, backend=backend, num_workers=2, batch_size=batch_size) as envs:
        _, info = envs.reset(seed=0)
        handle, send, step, recv, get_last_info, unregister = envs.torch(device="cuda")
        rng, ids = np.random.default_rng(0), info.get("env_id", np.arange(4))
        for _ in range(steps):
            if before is not None:
                before()
            outputs = step(handle, torch.from_numpy(rng.integers(0, 4, len(ids))))
            ids = handle_of(handle)._last.arrays["env_id"].copy()  # its host side: reading the device's would wait
            yield envs._buffers, handle, get_last_info, outputs, ids


@cuda
@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
@pytest.mark.parametrize("batch_size", [None, 2])
def test_cuda_copies_in_flight_keep_their_slot(backend, batch_size):
    """Each step's device copies wait behind a long kernel while the envs go on stepping: a slot written again
    before its copy ran would put a later step's observation into an earlier step's tensor. Each tensor must hold
    what the shared buffers held when its step was received."""
    held, expected = [], []
    before = lambda: torch.cuda._sleep(20_000_000)  # noqa: E731 (~10 ms of device work ahead of this step's copies)
    for buffers, _, _, outputs, ids in cuda_steps(backend, batch_size, 24, before):
        held.append(outputs[0])
        expected.append(torch.from_numpy(buffers.obs[buffers.obs_rows(ids)].copy()))
    torch.cuda.synchronize()
    for t, (obs, want) in enumerate(zip(held, expected)):
        assert torch.equal(obs.cpu(), want), t


@cuda
@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
@pytest.mark.parametrize("batch_size", [None, 2])
def test_cuda_infos_read_later_are_their_steps(backend, batch_size):
    """On a CUDA device the info arrays are copied only when get_last_info asks: read after steps that skipped them,
    they must be the last step's; and info tensors still held keep their own step's values."""
    kept = None
    for t, (buffers, handle, get_last_info, _, ids) in enumerate(cuda_steps(backend, batch_size, 30)):
        expected = {"env_id": ids, **{name: buffers.extras[name][ids].copy() for name in buffers.extras}}
        if t % 3 == 2:
            got = get_last_info(handle)
            assert got.keys() == expected.keys()
            for name, tensor in got.items():
                assert tensor.is_cuda and np.array_equal(tensor.cpu().numpy(), expected[name]), (t, name)
            if kept is None:
                kept = (t, got, expected)
        now = {name: buffers.extras[name].copy() for name in buffers.extras}
    t, got, expected = kept
    for name, tensor in got.items():
        assert np.array_equal(tensor.cpu().numpy(), expected[name]), (t, name)
    assert expected["frame_number"].tolist() != now["frame_number"][expected["env_id"]].tolist()
