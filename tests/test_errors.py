"""The bad-input catalogue and the fault catalogue: typed errors, messages that say what was expected, no hangs."""

from __future__ import annotations

import functools
import re
import os
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
from gymnasium import spaces
from fakes.envs import SpaceEnv
from fakes.faults import FaultyEnv
from helpers import assert_same, rollout

import shoal
from shoal import errors
from shoal.vector.checks import check_batch


def _cartpole(n=4, **kw):
    return shoal.make("CartPole-v1", n, **{"backend": "serial", **kw})


@pytest.mark.parametrize(
    "actions,error,match",
    [
        (np.zeros(3, np.int64), errors.ActionError, r"expected shape \(4,\), got \(3,\)"),
        (np.zeros((4, 1), np.int64), errors.ActionError, r"expected shape \(4,\), got \(4, 1\)"),
        (np.zeros(4, np.float32), errors.ActionError, r"expected integer actions, got dtype float32"),
        (np.array([0, 1, 2, 0]), errors.ActionError, r"action 2 at index \(2,\) is outside \[0, 1\]"),
        (np.array([0, -1, 0, 0]), errors.ActionError, r"action -1 at index \(1,\) is outside \[0, 1\]"),
        (np.array(["a"] * 4), errors.ActionError, r"expected integer actions, got dtype <U1"),
    ],
)
def test_bad_actions(actions, error, match):
    with _cartpole() as envs:
        envs.reset(seed=0)
        with pytest.raises(error, match=match) as caught:
            envs.step(actions)
        assert isinstance(caught.value, ValueError)
        envs.step(np.zeros(4, np.int64))  # the env is still usable


@pytest.mark.parametrize("act, actions, match", [
    ("box_f32", np.full((2, 3), "x"), r"actions: expected numeric actions for Box\(-1\.0, 1\.0, \(3,\), float32\), "
                                      r"got dtype <U1"),
    ("box_f32", [[0.0, 0.0, 0.0], [0.0]], r"actions: could not be read as an array \(.*inhomogeneous"),
    ("multibinary", np.full((2, 6), 2), r"actions: action 2 at index \(0, 0\) is outside \[0, 1\]"),
    ("multibinary", np.zeros((2, 6), np.float32), r"actions: expected integer actions, got dtype float32"),
])
def test_bad_box_and_multibinary_actions(act, actions, match):
    with shoal.make(functools.partial(SpaceEnv, act=act), 2, backend="serial") as envs:
        envs.reset(seed=0)
        with pytest.raises(errors.ActionError, match=match):
            envs.step(actions)
        envs.step(envs.action_space.sample())  # the env is still usable


@pytest.mark.parametrize("space", ["CartPole-v1", "Pendulum-v1"])  # a Discrete, a Box
def test_none_as_actions_says_so(space):
    with shoal.make(space, 2, backend="serial") as envs:
        envs.reset(seed=0)
        with pytest.raises(errors.ActionTypeError, match=r"actions: expected a batch of actions, got None$"):
            envs.step(None)
        envs.step(envs.action_space.sample())  # the env is still usable


@pytest.mark.parametrize("dtype", [np.int64, np.int8])  # numpy's check reads signed actions as unsigned first
@pytest.mark.parametrize("n", [3, 64, 65, 200])  # short batches are range-checked in Python, long ones in numpy
def test_out_of_range_action_is_found_in_batches_of_any_length(n, dtype):
    with _cartpole(n) as envs:
        envs.reset(seed=0)
        for at, value in ((0, 2), (n - 1, -1), (n // 2, 7), (n // 3, -128)):
            actions = np.zeros(n, dtype)
            actions[at] = value
            with pytest.raises(errors.ActionError, match=rf"action {value} at index \({at},\) is outside \[0, 1\]"):
                envs.step(actions)
        envs.step(np.ones(n, np.int64))


def test_bad_structured_actions():
    fns = [functools.partial(SpaceEnv, "box_f32", "dict")] * 2
    with shoal.make(fns, backend="serial") as envs:
        envs.reset(seed=0)
        with pytest.raises(errors.ActionError, match=r"expected keys \['id', 'pos'\], got \['pos'\]"):
            envs.step({"pos": np.zeros((2, 2), np.float32)})
        with pytest.raises(errors.ActionError, match=r"actions\['id'\]: action 9 at index \(0,\) is outside \[0, 3\]"):
            envs.step({"pos": np.zeros((2, 2), np.float32), "id": np.array([9, 0])})


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"seed": -1}, errors.ResetArgumentError, r"non-negative integer, got -1"),
        ({"seed": [1, 2]}, errors.ResetArgumentError, r"expected 4 seeds \(one per env\), got 2"),
        ({"seed": 1.5}, errors.ResetArgumentError, r"seed must be None, an int or a sequence of 4 ints, got float"),
        ({"seed": [0, 1, "x", 3]}, errors.ResetArgumentError, r"seed 2: expected a non-negative integer or None"),
        ({"options": {"reset_mask": [True] * 4}}, errors.ResetArgumentTypeError, r"numpy array of `dtype=np.bool_`"),
        (
            {"options": {"reset_mask": np.ones(3, bool)}},
            errors.ResetArgumentError,
            r"must have shape `\(4,\)`, got \(3,\)",
        ),
        ({"options": {"reset_mask": np.zeros(4, bool)}}, errors.ResetArgumentError, r"at least one True value"),
        ({"options": {"reset_mask": np.ones(4, np.int8)}}, TypeError, r"must have `dtype=np.bool_`, got int8"),
        ({"options": [{}] * 4}, errors.ResetArgumentTypeError, r"options must be a dict \(the same options for every "
                                                               r"env reset\) or None, got list"),
    ],
)
def test_bad_reset_arguments(kwargs, error, match):
    with _cartpole() as envs:
        envs.reset(seed=0)
        with pytest.raises(error, match=match):
            envs.reset(**kwargs)


def test_call_order_errors():
    with _cartpole() as envs:
        with pytest.raises(errors.NotResetError, match=r"call reset\(\) before step"):
            envs.step(np.zeros(4, np.int64))
        no_call = r"Calling `step_wait` without any prior call to `step_async`\."
        with pytest.raises(errors.NoAsyncCallError, match=no_call):
            envs.recv()
        envs.reset(seed=0)
        envs.send(np.zeros(4, np.int64))
        pending = r"Calling `step_async` while waiting for a pending call to `step` to complete"
        with pytest.raises(errors.AlreadyPendingCallError, match=pending) as caught:
            envs.send(np.zeros(4, np.int64))
        assert isinstance(caught.value, gym.error.AlreadyPendingCallError)
        with pytest.raises(errors.AlreadyPendingCallError, match=r"Calling `reset_async` while waiting for .* `step`"):
            envs.reset()
        envs.recv()
    with pytest.raises(errors.ClosedError, match=r"send: this vector env is closed") as caught:
        envs.step(np.zeros(4, np.int64))
    assert isinstance(caught.value, gym.error.ClosedEnvironmentError)
    with pytest.raises(errors.ClosedError, match=r"call_wait: this vector env is closed"):
        envs.call_wait()
    envs.close()  # idempotent


def test_numpy_integers_are_integers():
    # as gymnasium.make_vec and ale-py's pool take them (a sweep's counts often come from numpy)
    actions = np.random.default_rng(0).integers(0, 2, (40, 4))
    with shoal.make("CartPole-v1", np.int64(4), num_workers=np.int32(2), batch_size=np.uint8(4)) as envs:
        assert type(envs.num_envs) is int and envs.num_envs == 4
        ref = gym.make_vec("CartPole-v1", 4, vectorization_mode="sync")
        for got, want in zip(rollout(envs, lambda t: actions[t], 40, 5), rollout(ref, lambda t: actions[t], 40, 5)):
            assert_same(got, want)
        ref.close()


@pytest.mark.parametrize("timeout", [-1, True, "5", float("nan"), np.float64(-0.5)])
@pytest.mark.parametrize("config", [{"backend": "serial"}, {"num_workers": 2, "batch_size": 2}])
def test_a_bad_timeout_is_refused_and_leaves_the_call_pending(timeout, config):
    match = rf"timeout must be None or a non-negative number of seconds, got {re.escape(repr(timeout))}"
    with _cartpole(**config) as envs:
        envs.reset_async(seed=0)
        with pytest.raises(errors.ConfigError, match=match):
            envs.reset_wait(timeout=timeout)
        envs.reset_wait()
        envs.step_async(np.zeros(envs.batch_size, np.int64))
        with pytest.raises(errors.ConfigError, match=match):
            envs.step_wait(timeout=timeout)
        assert len(envs.step_wait()) == 5
        envs.call_async("spec")
        with pytest.raises(errors.ConfigError, match=match):
            envs.call_wait(timeout=timeout)
        assert [spec.id for spec in envs.call_wait()] == ["CartPole-v1"] * 4
        envs.step_async(np.zeros(envs.batch_size, np.int64))
        assert len(envs.step_wait(timeout=np.int64(30))) == 5  # numpy's numbers are numbers


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_envs": 0}, r"num_envs must be a positive integer, got 0"),
        ({"backend": "threads"}, r"backend must be 'serial', 'multiprocessing' or 'ray', got 'threads'"),
        ({"num_workers": 9}, r"num_workers must be between 1 and num_envs=8, got 9"),
        ({"num_workers": 3, "batch_size": 4}, r"num_envs \(8\) must be divisible by num_workers \(3\)"),
        ({"batch_size": 9}, r"batch_size must be between 1 and num_envs=8, got 9"),
        ({"autoreset_mode": "sometimes"}, r"autoreset_mode must be one of 'next_step'"),
        ({"backend": "dask"}, r"backend must be 'serial', 'multiprocessing' or 'ray', got 'dask'"),
        ({"batch_size": 4, "num_workers": 2, "inline": True}, r"inline=True .* needs batch_size == num_envs"),
    ],
)
def test_bad_configuration(kwargs, match):
    kwargs = {"num_envs": 8, "backend": "multiprocessing", **kwargs}
    with pytest.raises(errors.ConfigError, match=match):
        shoal.make("CartPole-v1", **kwargs)


class _NoSpaces:
    def step(self, action):
        return 0


def test_bad_env_arguments():
    with pytest.raises(errors.ConfigError, match=r"num_envs is required with a Gymnasium id"):
        shoal.make("CartPole-v1")
    with pytest.raises(errors.ConfigError, match=r"num_envs=3 but 2 env constructors were given"):
        shoal.make([SpaceEnv, SpaceEnv], 3)
    with pytest.raises(errors.ConfigError, match=r"num_envs is required with a single env constructor"):
        shoal.make(SpaceEnv)
    with pytest.raises(errors.ConfigError, match=r"keyword arguments \['obs'\] are for gymnasium.make; pass a Gym"):
        shoal.make(SpaceEnv, 2, obs="dict")
    for count in (True, np.int64(0), 2.0, np.bool_(True)):
        match = rf"num_envs must be a positive integer, got {re.escape(repr(count))}"
        with pytest.raises(errors.ConfigError, match=match):
            shoal.make("CartPole-v1", count)
    # what came instead of an env, named
    with pytest.raises(errors.ConfigError, match=r"a callable returning a gymnasium.Env, .*; got int$"):
        shoal.make(3, 2)
    with pytest.raises(errors.ConfigError, match=r"non-empty list of such callables; got an empty list$"):
        shoal.make([], 2)
    with pytest.raises(errors.ConfigError, match=r"got a tuple whose item 1 is SpaceEnv, not callable$"):
        shoal.make((SpaceEnv, SpaceEnv()), 2)
    with pytest.raises(errors.ConfigError, match=r"reset and step\) as `env`, got _NoSpaces from module test_errors$"):
        shoal.make(_NoSpaces(), 2)
    # shoal.make's keywords of gymnasium.make_vec: what does not fit them is named
    for kwargs, match in [
        ({"wrappers": gym.wrappers.TimeLimit}, r"wrappers must be a sequence of callables .*got type: pass a list"),
        ({"wrappers": "TimeLimit"}, r"wrappers must be a sequence of callables .*got str"),
        ({"wrappers": [gym.wrappers.RecordEpisodeStatistics, 3]}, r"wrappers must be callables .*; 3 is not callable"),
        ({"vectorization_mode": "async"}, r"vectorization_mode and vector_kwargs are gymnasium.make_vec's; .*"
                                          r"shoal.make\(functools.partial\(gymnasium.make_vec, 'CartPole-v1'"),
        ({"observation_mode": (spaces.Discrete(2),)}, r"observation_mode as a tuple must be \(batched observation "
                                                      r"space, single observation space\), got \(Discrete\(2\),\)"),
    ]:
        with pytest.raises(errors.ConfigError, match=match):
            shoal.make("CartPole-v1", 2, backend="serial", **kwargs)
    with pytest.raises(errors.ConfigError, match=r"wrappers wrap one env each; a batch-native env .*"
                                                 r"\(gymnasium.wrappers.vector\)"):
        shoal.make("shoal/Squared-v0", 2, backend="serial", wrappers=[gym.wrappers.RecordEpisodeStatistics])
    with pytest.raises(errors.SpaceMismatchError, match=r"spaces are not equivalent\. env 1 has .*expected"):
        shoal.make([functools.partial(SpaceEnv, "box_f32"), functools.partial(SpaceEnv, "dict")], backend="serial")


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_env_exception_names_the_env_and_keeps_the_traceback(backend):
    fns = [functools.partial(FaultyEnv, at=100)] * 3 + [functools.partial(FaultyEnv, at=2)]
    with shoal.make(fns, backend=backend, num_workers=2) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))
        with pytest.raises(errors.EnvError, match=r"env 3 raised ValueError: the env broke on purpose") as caught:
            envs.step(np.zeros(4, np.int64))
    assert caught.value.env_id == 3
    assert "raise ValueError" in caught.value.remote_traceback
    assert isinstance(caught.value.__cause__, ValueError)


def test_killed_worker_is_an_error_not_a_hang():
    fns = [functools.partial(FaultyEnv, at=100)] * 2 + [functools.partial(FaultyEnv, at=2, how="kill")] * 2
    envs = shoal.make(fns, num_workers=2, inline=False)
    envs.reset(seed=0)
    envs.step(np.zeros(4, np.int64))
    start = time.monotonic()
    with pytest.raises(errors.WorkerDiedError, match=r"worker 1 .*hosting envs 2\.\.3\) died with exit code -9"):
        envs.step(np.zeros(4, np.int64))
    assert time.monotonic() - start < 1.5
    envs.close()


def test_env_exception_in_async_mode_names_the_env():
    # Two groups of one env per worker: the error must reach the batch of the env that raised, and only it. First
    # come, first served: a worker the OS leaves asleep may see the other answer many batches first, so the loop
    # bound is generous.
    fns = [functools.partial(FaultyEnv, at=10**9)] * 3 + [functools.partial(FaultyEnv, at=3)]
    with shoal.make(fns, num_workers=2, batch_size=1) as envs:
        envs.reset(seed=0)
        with pytest.raises(errors.EnvError, match=r"env 3 raised ValueError") as caught:
            for _ in range(20_000):
                envs.step(np.zeros(1, np.int64))
        assert caught.value.env_id == 3


def test_killed_worker_in_async_mode():
    # The healthy worker answers every batch: the dead one must still be reported (the parent looks for dead
    # workers every PEER_CHECK_S while it waits), not starved.
    fns = [functools.partial(FaultyEnv, at=10**9)] * 2 + [functools.partial(FaultyEnv, at=1, how="kill")] * 2
    with shoal.make(fns, num_workers=2, batch_size=2) as envs:
        envs.reset(seed=0)
        start = time.monotonic()
        with pytest.raises(errors.WorkerDiedError, match=r"died with exit code -9"):
            while time.monotonic() - start < 30:
                envs.step(np.zeros(2, np.int64))
        assert time.monotonic() - start < 1.5


def test_failing_constructor_is_reported_and_cleaned_up():
    def broken():
        raise RuntimeError("no such level")

    with pytest.raises(errors.EnvError, match=r"env 2 raised RuntimeError: no such level"):
        shoal.make([SpaceEnv, SpaceEnv, broken, SpaceEnv], num_workers=2, inline=False, context="fork")


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_killed_parent_leaves_no_workers_and_no_shared_memory(tmp_path, context):
    shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    script = tmp_path / "victim.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import numpy as np, shoal
        if __name__ == "__main__":
            envs = shoal.make("CartPole-v1", 4, num_workers=2, inline=False, context={context!r})
            envs.reset(seed=0)
            print(" ".join(str(p.pid) for p in envs._transport._procs.values()), flush=True)
            time.sleep(60)
    """))
    with subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True) as victim:
        pids = [int(p) for p in victim.stdout.readline().split()]
        assert len(pids) == 2
        victim.kill()
    _, alive = psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=5)
    assert not alive, "workers outlived their killed parent"
    shm_after = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    assert not (shm_after - shm_before), f"shared memory left behind: {shm_after - shm_before}"


def test_close_after_errors_leaves_nothing():
    from conftest import worker_processes

    envs = shoal.make("CartPole-v1", 4, num_workers=2, inline=False)
    envs.reset(seed=0)
    with pytest.raises(errors.ActionError):
        envs.step(np.zeros(4, np.float64))
    envs.send(np.zeros(4, np.int64))
    envs.close()  # with a step still pending
    assert not worker_processes()


class _CloseHangsInWorkers(gym.Wrapper):
    """CartPole whose close never returns in a worker process (in the test's own process it returns at once)."""

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))

    def close(self) -> None:
        import multiprocessing

        if multiprocessing.parent_process() is not None:
            time.sleep(3600)
        super().close()


class _CloseFails(gym.Wrapper):
    """CartPole whose close raises for env ``index`` 1 (after closing it), recording every close."""

    closed: list[int] = []

    def __init__(self, index: int) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.index = index

    def close(self) -> None:
        _CloseFails.closed.append(self.index)
        super().close()
        if self.index == 1:
            raise ValueError("the simulator did not shut down")


def test_an_envs_failing_close_still_closes_the_others_and_the_vector_env():
    envs = shoal.make([functools.partial(_CloseFails, i) for i in range(4)], backend="serial")
    envs.reset(seed=0)
    _CloseFails.closed.clear()
    with pytest.raises(errors.EnvError, match="env 1 raised ValueError: the simulator did not shut down") as caught:
        envs.close()
    assert isinstance(caught.value, ValueError)
    assert _CloseFails.closed == [0, 1, 2, 3]  # before, envs 2 and 3 were left open
    envs.close()  # the error was reported once; nothing is left to close
    assert envs.closed and _CloseFails.closed == [0, 1, 2, 3]


def test_workers_stuck_in_an_envs_close_are_ended_within_one_grace_period_together():
    from conftest import worker_processes
    from shoal.vector import processes

    envs = shoal.make(_CloseHangsInWorkers, 4, num_workers=4, inline=False)
    envs.reset(seed=0)
    assert len(worker_processes()) == 4
    start = time.monotonic()
    envs.close()
    took = time.monotonic() - start
    assert not worker_processes()
    # each worker's grace in turn took 4 of them (8 s); all wait out one together, then are terminated
    assert took < 2.5 * processes.CLOSE_GRACE_S, f"close took {took:.1f} s"


@pytest.mark.parametrize("n", [3, 100])
def test_negative_small_integer_actions_are_caught_when_the_range_is_wider_than_their_dtype(n):
    # int8 -1 read as unsigned is 255, inside [0, 399]: the one-comparison check must not be used there
    actions = np.zeros(n, np.int8)
    actions[-1] = -1
    with pytest.raises(errors.ActionError, match=rf"action -1 at index \({n - 1},\) is outside \[0, 399\]"):
        check_batch(spaces.Discrete(400), actions, n, "actions")


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: _cartpole(2), id="serial"),
        pytest.param(lambda: shoal.make("CartPole-v1", 2, num_workers=2), id="multiprocessing"),
        pytest.param(lambda: shoal.make("CartPole-v1", 2, backend="ray", num_workers=2), id="ray",
                     marks=pytest.mark.ray),
        pytest.param(lambda: shoal.AtariVectorEnv(games=["pong"] * 2, backend="serial"), id="atari"),
        pytest.param(lambda: shoal.make("shoal/Multiagent-v0", 2, backend="serial"), id="agents-as-rows"),
    ],
)
def test_a_vector_env_refuses_to_be_pickled_or_copied_and_stays_usable(make):
    """A copy could own none of the workers, Ray actors and shared memory (a shallow one shared them: closing either
    broke both); pickle used to fail deep inside on a function it could not find by name, and deepcopy on an mmap."""
    import copy
    import pickle

    import cloudpickle

    with make() as envs:
        envs.reset(seed=0)
        for how in (pickle.dumps, cloudpickle.dumps, copy.copy, copy.deepcopy, lambda e: cloudpickle.dumps(e.step)):
            with pytest.raises(errors.UnpicklableError, match=r"cannot be pickled or copied: it owns its worker"):
                how(envs)
        envs.step(np.zeros(envs.num_envs, np.int64))


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_a_script_that_makes_envs_outside_its_main_guard_is_told_so(tmp_path, context):
    """Under spawn and forkserver (Python 3.14's default on Linux) a worker's start runs the main script again; one
    that makes a vector env at its top level kills its workers that way. The error says so, and how to fix it, rather
    than only that a worker died (or, where the forkserver itself died, a ConnectionResetError)."""
    body = f"""
        import numpy as np
        import shoal
        envs = shoal.make("CartPole-v1", 4, backend="multiprocessing", num_workers=2, context={context!r})
        envs.reset(seed=0)
        envs.close()
        print("stepped")
        """
    unguarded = tmp_path / "unguarded.py"
    unguarded.write_text(textwrap.dedent(body))
    run = subprocess.run([sys.executable, str(unguarded)], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "stepped" not in run.stdout
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("shoal.errors.WorkerDiedError: worker 1 ("), run.stderr
    assert f"under the '{context}' start method" in last and str(unguarded) in last
    assert 'outside `if __name__ == "__main__":` kills its workers this way: put that code under it' in last
    guarded = tmp_path / "guarded.py"
    guarded.write_text("def main():\n" + textwrap.indent(textwrap.dedent(body), "    ") + "\n\n"
                       "if __name__ == '__main__':\n    main()\n")
    run = subprocess.run([sys.executable, str(guarded)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "stepped", run.stderr
