"""shoal.pufferlib's API as PufferLib's: reset and step, the checks and errors of ``pufferlib.vector.make`` and of
its vector env, its attributes, the backends it hands to PufferLib itself, and the README's example."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from fakes.faults import FaultyEnv
from helpers import assert_same_attribute, public_names, run_readme_block

pytest.importorskip(
    "pufferlib", reason="PufferLib pins a torch build: pip install --no-deps pufferlib-core==3.0.23 (.ci/run does)"
)
import pufferlib  # noqa: E402
import pufferlib.emulation  # noqa: E402
import pufferlib.vector  # noqa: E402
from pufferlib_reference import creator, pufferlib_workers_joined  # noqa: E402, F401  (autouse)

import shoal.pufferlib  # noqa: E402
from fakes.native import NativeCounter  # noqa: E402
from shoal.errors import ActionError, ConfigError, EnvError  # noqa: E402


def test_reset_and_step_are_pufferlibs():
    vecenvs = [make(functools.partial(creator, "spaces"), backend="Multiprocessing", num_envs=4, num_workers=2)
               for make in (pufferlib.vector.make, shoal.pufferlib.make)]
    try:
        for vecenv in vecenvs:
            vecenv.action_space.seed(1)
        obs = [v.reset(seed=5) for v in vecenvs]  # reset(): PufferLib's default seed (42) when none is given
        np.testing.assert_array_equal(obs[0][0], obs[1][0])
        assert repr(obs[0][1]) == repr(obs[1][1])
        for _ in range(30):
            steps = [v.step(v.action_space.sample()) for v in vecenvs]
            for x, y in zip(*steps):
                if isinstance(x, np.ndarray):
                    np.testing.assert_array_equal(x, y)
                    assert x.dtype == y.dtype
                else:
                    assert repr(x) == repr(y)
        ours = vecenvs[1]
        assert (ours.num_envs, ours.num_agents, ours.agents_per_batch) == (4, 4, 4)
        assert ours.observation_space == vecenvs[0].observation_space
        assert ours.action_space == vecenvs[0].action_space
        assert ours.emulated == vecenvs[0].emulated
        assert ours.transport_single_action_space == vecenvs[0].transport_single_action_space
        assert isinstance(ours.driver_env, pufferlib.emulation.GymnasiumPufferEnv)
    finally:
        for vecenv in vecenvs:
            vecenv.close()


def test_usage_errors_are_pufferlibs():
    make = functools.partial(shoal.pufferlib.make, functools.partial(creator, "cartpole"))
    for kwargs, match in [
        (dict(backend="Threads", num_envs=2), "Invalid backend"),
        (dict(backend="Multiprocessing", num_envs=2, workers=2), "Invalid argument: workers"),
        (dict(backend="Multiprocessing", num_envs=6, num_workers=4), "divisible by num_workers"),
        (dict(backend="Multiprocessing", num_envs=8, num_workers=2, batch_size=2), "batch_size must divide"),
        (dict(backend="Multiprocessing", num_envs=0), "num_envs must be a positive integer"),
    ]:
        with pytest.raises(pufferlib.APIUsageError, match=match):
            make(**kwargs)
        with pytest.raises(ConfigError, match=match):  # and shoal's
            make(**kwargs)
    with pytest.raises(pufferlib.APIUsageError, match="env_creators must be a list of length num_envs"):
        shoal.pufferlib.make([functools.partial(creator, "cartpole")] * 3, backend="Multiprocessing", num_envs=4)
    cartpole = functools.partial(creator, "cartpole")
    for creators, args, kwargs, match in [
        ([cartpole, 5], [[], []], [{}, {}], "env_creators must be a list of callables"),
        ([cartpole] * 2, [[], 5], [{}, {}], "env_args must be a list of lists or tuples"),
        ([cartpole] * 2, [[], []], [{}, []], "env_kwargs must be a list of dictionaries"),
    ]:
        for make_ in (pufferlib.vector.make, shoal.pufferlib.make):  # (PufferLib's checks come first: nothing starts)
            with pytest.raises(pufferlib.APIUsageError, match=match):
                make_(creators, args, kwargs, backend="Multiprocessing", num_envs=2)
    vecenv = make(backend="Multiprocessing", num_envs=4, num_workers=2)
    try:
        with pytest.raises(pufferlib.APIUsageError, match="Call reset before stepping"):
            vecenv.recv()
        with pytest.raises(pufferlib.APIUsageError, match="Call \\(async\\) reset"):
            vecenv.send(np.zeros(4, np.int64))
        vecenv.async_reset(0)
        vecenv.recv()
        with pytest.raises(pufferlib.APIUsageError, match="Actions do not match action space"):
            vecenv.send(np.full(4, 5, np.int64))  # CartPole takes 0 or 1
        with pytest.raises(ActionError, match=r"expected one action per row of the batch \(4 of Discrete\(2\)"):
            vecenv.send(np.zeros(3, np.int64))  # (PufferLib checks the first send only; shoal every one)
    finally:
        vecenv.close()


def test_native_envs_are_passed_through_and_other_envs_refused():
    native = shoal.pufferlib.make(NativeCounter)  # backend=PufferEnv, PufferLib's default: the env itself
    assert isinstance(native, NativeCounter)
    serial = shoal.pufferlib.make(functools.partial(creator, "cartpole"), backend="Serial", num_envs=3)
    assert type(serial) is pufferlib.vector.Serial and serial.num_envs == 3  # one process: PufferLib's own
    serial.close()
    mixed = [functools.partial(creator, "cartpole"), functools.partial(creator, "join_leave")]
    with pytest.raises(pufferlib.APIUsageError,
                       match=r"env_creators\[1\] made a PettingZooPufferEnv where env 0 is a GymnasiumPufferEnv"):
        shoal.pufferlib.make(mixed, [[], []], [{}, {}], backend="Multiprocessing", num_envs=2).close()
    natives = [functools.partial(creator, "native"), NativeCounter]
    with pytest.raises(pufferlib.APIUsageError, match=r"env_creators\[1\] made an env whose single_observation_space "
                       r"is Box\(0\.0, 100\.0, \(1,\), float32\), where env 0's is Box\(-9\.0, 9\.0, \(3,\)"):
        shoal.pufferlib.make(natives, [[], []], [{}, {}], backend="Multiprocessing", num_envs=2).close()
    with pytest.raises(pufferlib.APIUsageError, match="made CartPoleEnv, not a PufferLib env"):
        shoal.pufferlib.make(lambda buf=None, seed=0: gym.make("CartPole-v1").unwrapped, backend="Ray")


def test_an_env_that_raises_is_named():
    def faulty(buf=None, seed=0):
        return pufferlib.emulation.GymnasiumPufferEnv(env=FaultyEnv(at=3), buf=buf, seed=seed)

    vecenv = shoal.pufferlib.make(faulty, backend="Multiprocessing", num_envs=4, num_workers=2)
    try:
        vecenv.reset(seed=0)
        vecenv.step(np.zeros(4, np.int64))
        vecenv.step(np.zeros(4, np.int64))
        with pytest.raises(EnvError, match="the env broke on purpose") as caught:
            vecenv.step(np.zeros(4, np.int64))
        assert isinstance(caught.value, ValueError) and caught.value.env_id == 0
        with pytest.raises(pufferlib.APIUsageError, match="Call \\(async\\) reset"):
            vecenv.send(np.zeros(4, np.int64))  # that step ended: a reset starts anew
        obs, infos = vecenv.reset(seed=1)
        assert vecenv.step(np.zeros(4, np.int64))[0].shape == (4, 2)
    finally:
        vecenv.close()


def test_the_readmes_example_runs():
    namespace = run_readme_block("pufferlib-example")
    assert namespace["obs"].shape == (8, 4) and namespace["env_ids"].tolist() in ([*range(8)], [*range(8, 16)])


_NO_COUNTERPART = {  # PufferLib's shared arrays, pipes, processes, worker queues, Ray actors and handles
    "buf", "actions", "shm", "processes", "send_pipes", "recv_pipes", "recv_pipe_dict", "ready_workers",
    "waiting_workers", "envs", "async_handles", "ray", "prev_env_id",
}


@pytest.mark.parametrize("name, kwargs", [
    pytest.param("cartpole", dict(backend="Multiprocessing", num_envs=8, num_workers=4, batch_size=4,
                                  sync_traj=False), id="mp-2-blocks"),
    pytest.param("cartpole", dict(backend="Multiprocessing", num_envs=4, num_workers="auto", batch_size="auto"),
                 id="mp-auto"),
    pytest.param("spread", dict(backend="Multiprocessing", num_envs=4, num_workers=2), id="mp-3-agents"),
    pytest.param("native", dict(backend="Multiprocessing", num_envs=2, num_workers=2), id="mp-native"),
    pytest.param("spaces", dict(backend="Ray", num_envs=4, num_workers=2, batch_size=2), id="ray",
                 marks=pytest.mark.ray),
])
def test_attributes_are_pufferlibs(name, kwargs):
    """Every public attribute of PufferLib's vecenv that has a counterpart, with its value (``driver_env``: an env
    of the same class), and ``flag`` through a reset, a recv and a send."""
    make = functools.partial(creator, name)
    theirs = pufferlib.vector.make(make, overwork=True, **kwargs)
    try:
        ours = shoal.pufferlib.make(make, overwork=True, **kwargs)
        try:
            _same_attributes(theirs, ours)
        finally:
            ours.close()
    finally:
        if kwargs["backend"] == "Ray":
            import ray  # PufferLib's close() shuts Ray down, which the other Ray tests share

            for actor in theirs.envs:
                ray.kill(actor)
        else:
            theirs.close()


def _same_attributes(theirs, ours):
    wanted = public_names(theirs) - _NO_COUNTERPART
    assert not wanted - set(dir(ours))
    for name in sorted(wanted - {"driver_env"}):
        assert_same_attribute(getattr(ours, name), getattr(theirs, name), name)
    assert type(ours.driver_env) is type(theirs.driver_env)
    flags = []
    for vecenv in (theirs, ours):
        vecenv.async_reset(0)
        after_reset = vecenv.flag
        vecenv.recv()
        after_recv = vecenv.flag
        vecenv.send(np.zeros(vecenv.action_space.shape, vecenv.action_space.dtype))
        flags.append((after_reset, after_recv, vecenv.flag))
    assert flags[0] == flags[1] == (pufferlib.vector.RECV, pufferlib.vector.SEND, pufferlib.vector.RECV)
