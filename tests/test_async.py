"""First-N-of-M batches (EnvPool semantics), partial resets in async mode, call/get_attr/set_attr, drop-in classes."""

from __future__ import annotations

import contextlib
import functools
import re

import gymnasium as gym
import numpy as np
import pytest
from fakes.envs import SpaceEnv
from fakes.faults import SlowEnv
from helpers import assert_same, generator_states, own_trajectories, public_names

import shoal
from shoal.errors import ConfigError, ResetArgumentError, SpaceMismatchError
from shoal.vector import AsyncVectorEnv, SyncVectorEnv

N, WORKERS, BATCH = 8, 4, 4


def _fns():
    return [functools.partial(SlowEnv, 0.001, jitter=i) for i in range(N)]


def _action(env_id, t):
    return (env_id * 7 + t * 3) % 5


@pytest.mark.parametrize(
    "backend,workers,batch",
    [
        ("serial", WORKERS, BATCH),
        ("multiprocessing", WORKERS, BATCH),  # two groups of one env per worker
        ("multiprocessing", 2, BATCH),  # two groups of two
        ("multiprocessing", 2, 3),  # any batch size: four groups of one per worker
        pytest.param("ray", WORKERS, BATCH, marks=pytest.mark.ray),
    ],
)
def test_async_batches_follow_each_envs_own_trajectory(backend, workers, batch):
    # Reference: every env stepped synchronously with actions that depend only on (env, its own timestep).
    steps = 12
    with shoal.make(_fns(), backend="serial") as sync:
        expected = own_trajectories(sync, _action, 3, steps)
    with shoal.make(_fns(), backend=backend, num_workers=workers, batch_size=batch) as envs:
        assert envs.action_space.shape == (batch,) and envs.observation_space.shape == (batch, 2)
        obs, info = envs.reset(seed=3)
        ids = info["env_id"]
        assert len(ids) == batch and len(set(ids.tolist())) == batch
        envs.send(np.full(batch, 4))
        envs.recv()
        envs.reset(seed=3)  # the batches still stepping were reset: whoever comes back next has reward 0
        envs.send(np.zeros(batch, np.int64))
        _, rewards, _, _, info = envs.recv()
        assert rewards.tolist() == [0.0] * batch  # stale rewards would be 4.0, from the step before the reset
        got = own_trajectories(envs, _action, 3, steps * N // batch + N, each_at_least=3)
    assert all(got[i] for i in range(N)), f"some env never stepped: {[i for i in range(N) if not got[i]]}"
    for i in range(N):
        k = min(len(got[i]), steps)
        assert k >= 3, f"env {i} made too little progress ({k} steps)"
        assert_same(tuple(got[i][:k]), tuple(expected[i][:k]), f"env {i}, against its synchronous trajectory")


@pytest.mark.parametrize("backend", ["multiprocessing", pytest.param("ray", marks=pytest.mark.ray)])
def test_async_partial_reset_of_held_envs(backend):
    with shoal.make(_fns(), backend=backend, num_workers=WORKERS, batch_size=BATCH) as envs:
        obs, info = envs.reset(seed=1)
        held = info["env_id"]
        envs.step(np.zeros(BATCH, np.int64))
        obs, rew, term, trunc, info = envs.step(np.zeros(BATCH, np.int64))
        held = info["env_id"]
        mask = np.zeros(N, bool)
        mask[held[0]] = True
        obs2, info2 = envs.reset(options={"reset_mask": mask})
        assert info2["env_id"].tolist() == held.tolist()
        assert obs2[0][0] == 0.0  # reset: step counter back to 0
        np.testing.assert_array_equal(obs2[1:], obs[1:])  # the other held envs are untouched
        not_held = np.setdiff1d(np.arange(N), held)[0]
        bad = np.zeros(N, bool)
        bad[not_held] = True
        with pytest.raises(ResetArgumentError, match=rf"envs \[{not_held}\] are stepping"):
            envs.reset(options={"reset_mask": bad})
        envs.step(np.zeros(BATCH, np.int64))  # still usable


@pytest.mark.parametrize("backend", ["serial", "multiprocessing", pytest.param("ray", marks=pytest.mark.ray)])
def test_call_get_attr_set_attr(backend):
    fns = [functools.partial(SpaceEnv, "box_f32", "discrete") for _ in range(4)]
    with shoal.make(fns, backend=backend, num_workers=2) as envs, shoal.make(
        fns, backend=backend, num_workers=2, batch_size=2
    ) as async_envs:
        for e in (envs, async_envs):
            e.reset(seed=0)
            e.step(np.zeros(e.batch_size, np.int64))
            assert e.get_attr("tag") == ("initial",) * 4
            e.set_attr("tag", ["a", "b", "c", "d"])
            assert e.get_attr("tag") == ("a", "b", "c", "d")
            e.set_attr("tag", "same")
            assert e.get_attr("tag") == ("same",) * 4
            assert e.call("scaled", 2) == tuple(2 * t for t in e.get_attr("t"))
            assert e.call("max_steps") == (12,) * 4
            offset = 100  # a closure, run where each env lives: it crosses to the workers by cloudpickle
            assert e.call_envs([3, 0], lambda env, k: env.t * k + offset, 2) == [e.get_attr("t")[i] * 2 + 100
                                                                                  for i in (3, 0)]
            e.step(np.zeros(e.batch_size, np.int64))  # the batch in flight survived the calls
        with pytest.raises(ConfigError, match=r"one value per env \(4\), got 2"):
            envs.set_attr("tag", ["x", "y"])
        assert envs.call_envs([], "scaled", 2) == [] and envs.get_attr_envs(np.array([], np.int32), "t") == []
        envs.set_attr_envs([1, 2], "tag", ["p", "q"])
        assert envs.get_attr_envs([2, 1, 2], "tag") == ["q", "p", "q"]
        for ids in ([4], [-1], [0.5], [[0, 1]]):
            with pytest.raises(ConfigError, match=rf"env_ids must be a list of env indices in \[0, 4\), got "
                                                  rf"{re.escape(repr(ids))}"):
                envs.call_envs(ids, "scaled", 2)


def test_drop_in_classes_equal_gymnasium():
    fns = [functools.partial(SpaceEnv, "dict", "multidiscrete") for _ in range(4)]
    space = gym.vector.utils.batch_space(fns[0]().action_space, 4)
    space.seed(0)
    acts = [space.sample() for _ in range(30)]
    ref = gym.vector.SyncVectorEnv(fns)
    results = {}
    for cls in (SyncVectorEnv, AsyncVectorEnv, None):
        envs = ref if cls is None else cls(fns)
        out = [envs.reset(seed=5)] + [envs.step(a) for a in acts]
        results[cls] = out
        envs.close()
    for cls in (SyncVectorEnv, AsyncVectorEnv):
        for got, want in zip(results[cls], results[None]):
            assert_same(got, want)
    envs = AsyncVectorEnv(fns)
    envs.reset_async(seed=1)
    envs.reset_wait(timeout=30.0)
    envs.step_async(acts[0])
    assert len(envs.step_wait()) == 5
    envs.close()


def test_drop_in_classes_have_gymnasiums_public_attributes():
    # what programs read off Gymnasium's classes: the constructor's arguments as given, the spaces, the seeds. Left
    # out: the AsyncVectorEnv's processes, pipes, error queue and observation buffer, which are its own machinery
    internals = {"processes", "parent_pipes", "error_queue", "observations", "max_concurrency"}
    fns = [functools.partial(SpaceEnv, "dict", "discrete") for _ in range(2)]
    for gym_cls, cls, kwargs in [
        (gym.vector.SyncVectorEnv, SyncVectorEnv, {"copy": False}),
        (gym.vector.AsyncVectorEnv, AsyncVectorEnv, {"shared_memory": False, "context": "fork", "daemon": False}),
    ]:
        with contextlib.closing(gym_cls(fns, **kwargs)) as ref, cls(fns, **kwargs) as envs:
            ref.reset(seed=3), envs.reset(seed=3)
            public = public_names(ref) - internals
            assert envs.unwrapped is envs and ref.unwrapped is ref
            for name in sorted(public - {"envs", "np_random", "unwrapped"}):
                if not callable(getattr(ref, name)):
                    assert_same(getattr(envs, name), getattr(ref, name), f"{cls.__name__}.{name}")
            assert generator_states(envs) == generator_states(ref)
            assert public <= set(dir(envs)), public - set(dir(envs))
        assert envs.env_fns is fns and envs.closed


def test_drop_in_refuses_what_it_cannot_honour():
    fns = [functools.partial(SpaceEnv, "dict", "discrete")] * 2
    with pytest.raises(ConfigError, match=r"worker=\.\.\.\) cannot be honoured"):
        AsyncVectorEnv(fns, worker=lambda *a: None)
    with pytest.raises(SpaceMismatchError, match=r"observation_mode=\(batched space, single space\)\) however"):
        SyncVectorEnv(fns, observation_mode=(gym.spaces.Discrete(2), gym.spaces.Discrete(2)))
