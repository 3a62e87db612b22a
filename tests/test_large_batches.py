"""A large synchronous step: the calling process's own envs read their actions from the checked batch where it is
(not written into the buffers first), and the results of each group are copied out as its answer comes, the calling
process's while the workers still step theirs (shoal.vector.copies.SplitCopies). Both must be invisible: the same
results as the paths without them, owned by the caller, and right after a wait cut short or an env's error."""

import functools
import os
import time

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import shoal
from shoal.errors import EnvError, WaitTimeoutError
from shoal.vector.copies import SplitCopies

from fakes.batch import Walk

N = 16384  # Walk's results: 18 bytes per env, ~288 KiB in all (above SPLIT_FROM)


def paths(env=Walk, n=N):
    """The serial backend (its one engine reads the batch in place, plain copies), multiprocessing with the calling
    process stepping a share (in place, results copied group by group) and without (every action written, results
    copied group by group)."""
    return {
        "serial": shoal.make(env, n, backend="serial"),
        "inline": shoal.make(env, n, num_workers=2, inline=True, context="fork"),
        "workers only": shoal.make(env, n, num_workers=2, inline=False, context="fork"),
    }


def close_all(built):
    for envs in built.values():
        envs.close()


def test_a_large_synchronous_step_equals_the_paths_without_in_place_actions_and_split_copies():
    built = paths()
    try:
        inline = built["inline"]
        halves = [slice(0, N // 2), slice(N // 2, N)]
        assert inline._split == halves and inline._own_rows == halves[0]  # the paths under test
        assert built["workers only"]._split == halves and built["workers only"]._own_rows is None
        assert built["serial"]._split is None
        rng = np.random.default_rng(0)
        firsts = [envs.reset(seed=7)[0] for envs in built.values()]
        for obs in firsts[1:]:
            np.testing.assert_array_equal(obs, firsts[0])
        previous, kept = None, None
        ended = 0
        for t in range(20):
            actions = rng.integers(0, 3, N)
            results = [envs.step(actions) for envs in built.values()]
            for name, result in zip(list(built)[1:], results[1:]):
                for what, a, b in zip(("obs", "reward", "terminated", "truncated"), result[:4], results[0][:4]):
                    np.testing.assert_array_equal(a, b, err_msg=f"{name} step {t} {what}")
                np.testing.assert_array_equal(result[4]["final_x"], results[0][4]["final_x"])
            ended += int(results[0][2].sum() + results[0][3].sum())
            if previous is not None:  # the last step's results are the caller's: this step did not write them
                for a, b in zip(previous, kept):
                    np.testing.assert_array_equal(a, b)
            previous = results[1][:4]
            kept = [np.array(a, copy=True) for a in previous]
            assert all(a.flags.owndata for a in previous)
        assert ended > N  # episodes ended (autoresets) in both shares
    finally:
        close_all(built)


def test_a_split_step_copies_the_engines_info_arrays_out_with_the_results():
    # Agents as rows: env_index, agent_index and agent_mask are info arrays the engine keeps in the buffers (written
    # once here). They are copied out group by group with the results, so each step's must be the caller's own.
    built = paths("shoal/Multiagent-v0", N // 2)  # two agents an env: N rows
    try:
        for name in ("inline", "workers only"):
            assert built[name]._split is not None and len(built[name]._results()) == 4 + 3  # the extras in the split
        rows = np.arange(N)
        expected = {"env_index": rows // 2, "agent_index": rows % 2, "agent_mask": np.ones(N, bool)}
        for envs in built.values():
            envs.reset(seed=0)
        for t in range(3):
            for name, envs in built.items():
                info = envs.step(np.zeros(N, np.int64))[4]
                for key, value in expected.items():
                    np.testing.assert_array_equal(info[key], value, err_msg=f"{name} step {t} {key}")
                    assert info[key].flags.owndata
                    info[key][:] = -1 if info[key].dtype != bool else False  # the caller's to change
    finally:
        close_all(built)


@pytest.mark.parametrize("form", ["int32", "list", "strided"])
def test_actions_in_another_dtype_or_layout_step_the_same(form):
    built = paths()
    try:
        for envs in built.values():
            envs.reset(seed=3)
        rng = np.random.default_rng(1)
        for t in range(6):
            actions = rng.integers(0, 3, N)
            given = {"int32": actions.astype(np.int32), "list": actions.tolist(),
                     "strided": np.repeat(actions, 2)[::2]}[form]
            reference = built["workers only"].step(actions)
            for name in ("serial", "inline"):
                result = built[name].step(given)
                for what, a, b in zip(("obs", "reward", "terminated", "truncated"), result[:4], reference[:4]):
                    np.testing.assert_array_equal(a, b, err_msg=f"{name} {form} step {t} {what}")
    finally:
        close_all(built)


class SlowWalk(Walk):
    """Walk whose instances in a worker process (not in ``parent``) take ``delay`` seconds a step, and raise at
    step ``fail_at`` (counted per object) when it is given."""

    def __init__(self, num_envs, parent=0, delay=0.0, fail_at=None):
        super().__init__(num_envs)
        self.remote = os.getpid() != parent
        self.delay, self.fail_at, self.steps = delay, fail_at, 0

    def step(self, ids, actions, out):
        self.steps += 1
        if self.remote and self.fail_at == self.steps:
            raise RuntimeError("planted failure")
        if self.remote:
            time.sleep(self.delay)
        super().step(ids, actions, out)


def test_a_wait_cut_short_then_resumed_hands_out_the_same_results():
    slow = functools.partial(SlowWalk, parent=os.getpid(), delay=0.4)
    with shoal.make(slow, N, num_workers=2, inline=True, context="fork") as envs, \
            shoal.make(Walk, N, backend="serial") as reference:
        assert envs._split is not None
        np.testing.assert_array_equal(envs.reset(seed=1)[0], reference.reset(seed=1)[0])
        actions = np.random.default_rng(2).integers(0, 3, N)
        envs.send(actions)
        with pytest.raises(WaitTimeoutError):
            envs.recv(timeout=0.05)  # the calling process's rows were copied out; the worker's are still due
        result, expected = envs.recv(), reference.step(actions)
        for what, a, b in zip(("obs", "reward", "terminated", "truncated"), result[:4], expected[:4]):
            np.testing.assert_array_equal(a, b, err_msg=what)


def test_an_error_in_a_worker_during_a_split_step_names_its_env_and_a_reset_recovers():
    failing = functools.partial(SlowWalk, parent=os.getpid(), fail_at=3)
    with shoal.make(failing, N, num_workers=2, inline=True, context="fork") as envs, \
            shoal.make(Walk, N, backend="serial") as reference:
        envs.reset(seed=4)
        rng = np.random.default_rng(3)
        for _ in range(2):
            envs.step(rng.integers(0, 3, N))
        with pytest.raises(EnvError, match=f"envs {N // 2}..{N - 1}.*planted failure") as caught:
            envs.step(rng.integers(0, 3, N))
        assert caught.value.env_id == N // 2
        np.testing.assert_array_equal(envs.reset(seed=9)[0], reference.reset(seed=9)[0])
        for t in range(4):
            actions = rng.integers(0, 3, N)
            result, expected = envs.step(actions), reference.step(actions)
            for what, a, b in zip(("obs", "reward", "terminated", "truncated"), result[:4], expected[:4]):
                np.testing.assert_array_equal(a, b, err_msg=f"step {t} {what}")


class Late(gym.Env):
    """An env with a 64 KiB observation (``value`` + steps taken + the last action, everywhere) whose steps take
    ``delay`` seconds."""

    observation_space = spaces.Box(0, 255, (1 << 16,), np.uint8)
    action_space = spaces.Discrete(2)

    def __init__(self, value, delay):
        self.value, self.delay, self.t = value, delay, 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.full(1 << 16, self.value, np.uint8), {}

    def step(self, action):
        time.sleep(self.delay)
        self.t += 1
        return np.full(1 << 16, self.value + 10 * self.t + int(action), np.uint8), 0.0, False, False, {}


def test_each_group_is_copied_out_as_its_answer_comes_and_a_wait_cut_short_loses_none(monkeypatch):
    """The last group answers first, the first last: the copies follow the answers (each group's rows are copied
    while slower ones still step), and the results are each env's, also after a wait cut short."""
    copied = []
    copy = SplitCopies.copy
    monkeypatch.setattr(SplitCopies, "copy", lambda self, part: (copied.append(part), copy(self, part)))
    delays = [0.45, 0.45, 0.3, 0.3, 0.15, 0.15, 0.0, 0.0]  # 2 envs a worker (groups 0.9, 0.6, 0.3, 0 s)
    fns = [functools.partial(Late, i, d) for i, d in enumerate(delays)]
    with shoal.make(fns, num_workers=4, inline=False, context="fork") as envs:
        assert envs._split == [slice(0, 2), slice(2, 4), slice(4, 6), slice(6, 8)]
        envs.reset(seed=0)
        for t, timeout in enumerate([None, 0.45]):
            copied.clear()
            actions = np.array([0, 1] * 4)
            if timeout is None:
                obs = envs.step(actions)[0]
            else:
                envs.send(actions)
                with pytest.raises(WaitTimeoutError):
                    envs.recv(timeout=timeout)  # the last two groups have answered, the first two have not
                assert copied == [3, 2]
                obs = envs.recv()[0]
            if timeout is not None:  # the resumed wait copies anew: the answers read before first (in any order),
                assert sorted(copied[2:4]) == [2, 3]  # then the others as they come
                del copied[2:4]
            assert copied == [3, 2, 1, 0]
            expected = [np.full(1 << 16, i + 10 * (t + 1) + i % 2, np.uint8) for i in range(8)]
            np.testing.assert_array_equal(obs, np.stack(expected), err_msg=f"step {t}")
            assert obs.flags.owndata


class Scribble(Walk):
    """Walk that writes into the actions it is given (which it must not)."""

    def step(self, ids, actions, out):
        actions[:] = 1
        super().step(ids, actions, out)


@pytest.mark.parametrize("n", [8, N])  # actions written into the buffers first, and read in place
def test_a_batch_native_env_gets_its_actions_read_only_and_the_callers_batch_is_never_changed(n):
    for options in ({"backend": "serial"}, {"num_workers": 2, "inline": True, "context": "fork"}):
        with shoal.make(Scribble, n, **options) as envs:
            envs.reset(seed=0)
            actions = np.zeros(n, np.int64)
            with pytest.raises(EnvError, match=r"batch-native env Scribble \(envs 0\.\..*read-only"):
                envs.step(actions)
            assert not actions.any()


class InPlaceClip(gym.Env):
    """A per-instance env that clips its action in place (which Gymnasium envs may do)."""

    observation_space = spaces.Box(-1, 1, (1,), np.float32)
    action_space = spaces.Box(-1, 1, (8,), np.float32)

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        np.clip(action, 0, 0.5, out=action)
        return np.array([action.sum()], np.float32), 0.0, False, False, {}


def test_per_instance_envs_read_their_actions_from_the_buffers_and_may_write_them():
    """In-place actions are for engines that hand them on read-only (batch-native); a Gymnasium env still gets
    its row of the buffers, so one that clips its action in place works and leaves the caller's batch alone."""
    n = 2048  # 64 KiB of float32 actions
    with shoal.make(InPlaceClip, n, backend="serial") as envs:
        envs.reset(seed=0)
        actions = np.full((n, 8), 0.75, np.float32)
        obs = envs.step(actions)[0]
        np.testing.assert_array_equal(obs[:, 0], np.full(n, 4.0, np.float32))  # 8 x 0.5
        assert (actions == 0.75).all()
