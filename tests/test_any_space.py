"""Spaces without a fixed size (Text, Graph, Sequence, OneOf, custom spaces), alone or inside a Dict/Tuple, as
observations and actions: equal to Gymnasium's SyncVectorEnv step for step across autoresets on every backend; their
fixed-size leaves stay in shared memory."""

from __future__ import annotations

import functools
import re

import gymnasium as gym
import numpy as np
import psutil
import pytest
from conftest import worker_processes
from fakes.envs import LooseSpaceEnv
from gymnasium.vector import AutoresetMode
from helpers import assert_same, beside_gymnasium, rollout

import shoal
from shoal.errors import ActionError, ActionTypeError, ConfigError
from shoal.vector import AsyncVectorEnv

NUM_ENVS = 4
STEPS = 30
CASES = [  # (observation space, action space)
    ("text", "text"),
    ("graph", "discrete"),
    ("sequence", "oneof"),
    ("sequence_stacked", "custom"),
    ("oneof", "dict_text_box"),
    ("custom", "box_f32"),
    ("dict_text_box", "text"),
    ("tuple_graph", "sequence"),
]


def _fns(obs, act, n=NUM_ENVS, **kwargs):
    return [functools.partial(LooseSpaceEnv, obs, act, max_steps=5 + i, **kwargs) for i in range(n)]


def _actions(act, n=NUM_ENVS, steps=STEPS):
    space = gym.vector.utils.batch_space(LooseSpaceEnv(act=act).action_space, n)
    space.seed(5)
    sampled = [space.sample() for _ in range(steps)]
    return lambda t: sampled[t]


def _compare(envs, ref, act, mode):
    actions = _actions(act)
    if mode is AutoresetMode.DISABLED:
        out = {}
        for e in (ref, envs):
            results = [e.reset(seed=3)]
            for t in range(STEPS):
                ended = results[-1][2] | results[-1][3] if len(results) > 1 else np.zeros(NUM_ENVS, bool)
                if ended.any():
                    results.append(e.reset(options={"reset_mask": ended}))
                results.append(e.step(actions(t)))
            out[e] = results
        expected, got = out[ref], out[envs]
    else:
        expected, got = rollout(ref, actions, STEPS, seed=3), rollout(envs, actions, STEPS, seed=3)
    assert len(got) == len(expected)
    for t, (g, e) in enumerate(zip(got, expected)):
        assert_same(g, e, f"call {t}")


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("obs,act", CASES, ids=[f"{o}-{a}" for o, a in CASES])
@pytest.mark.parametrize(
    "config",
    [
        {"backend": "serial", "num_workers": 2},
        {"backend": "multiprocessing", "num_workers": 2, "context": "fork"},
        pytest.param({"backend": "ray", "num_workers": 2}, marks=pytest.mark.ray),
    ],
    ids=["serial", "mp-fork", "ray"],
)
def test_loose_catalogue_equals_gymnasium(config, obs, act, mode):
    with beside_gymnasium(_fns(obs, act), mode, **config) as (envs, ref):
        assert envs.observation_space == ref.observation_space
        assert envs.action_space == ref.action_space
        _compare(envs, ref, act, mode)


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_every_backend_carries_loose_leaves(backend, mode):
    with beside_gymnasium(_fns("dict_text_box", "dict_text_box"), mode, **backend) as (envs, ref):
        _compare(envs, ref, "dict_text_box", mode)


def test_fixed_leaves_stay_in_shared_memory():
    with shoal.make(_fns("dict_text_box", "text"), num_workers=2, context="fork", copy=False) as envs:
        obs, _ = envs.reset(seed=0)
        # only the Box and the Discrete have fields in the shared record; the Text travels with each answer
        assert envs._buffers.obs.dtype.names == ("dir", "image")
        assert np.shares_memory(obs["image"], envs._buffers.obs)
        assert isinstance(obs["mission"], tuple) and len(obs["mission"]) == NUM_ENVS
        assert all(isinstance(m, str) for m in obs["mission"])


@pytest.mark.parametrize("obs", ["graph", "sequence", "sequence_stacked", "tuple_graph", "custom", "dict_text_box"])
def test_async_vector_env_refuses_what_gymnasiums_shared_memory_refuses(obs):
    """The drop-in AsyncVectorEnv with ``shared_memory=True`` (the default) refuses the spaces Gymnasium's refuses
    (Graph and Sequence, nested too: TypeError; a custom space: a ValueError) and takes the others; with
    ``shared_memory=False`` it takes them all and steps as Gymnasium's SyncVectorEnv does."""
    fns = _fns(obs, "discrete", n=2)
    try:
        gym.vector.AsyncVectorEnv(fns, context="fork").close()
        refusal = None
    except (TypeError, ValueError) as error:
        refusal = error
    if refusal is None:
        AsyncVectorEnv(fns, context="fork").close()
    else:
        # Gymnasium's first sentence, naming the space; for a custom space Gymnasium's wraps the error it met
        match = "cannot live in shared memory" if obs == "custom" else re.escape(str(refusal).split(". ")[0])
        with pytest.raises(type(refusal), match=match) as refused:
            AsyncVectorEnv(fns, context="fork")
        # its workers are gone already, while `refused`'s traceback still holds the half-made vector env
        assert not psutil.wait_procs(worker_processes(), timeout=3)[1], refused
    actions = lambda t: np.array([t % 2, (t + 1) % 2])  # noqa: E731
    ref = gym.vector.SyncVectorEnv(fns)
    with AsyncVectorEnv(fns, shared_memory=False, context="fork") as envs:
        for got, want in zip(rollout(envs, actions, 12, seed=4), rollout(ref, actions, 12, seed=4)):
            assert_same(got, want)
    ref.close()


def test_asynchronous_batches_of_loose_observations_match_each_env():
    """First-N-of-M batches: each row is that env's own next observation (compared with the env stepped alone)."""
    space = gym.spaces.Text(8, seed=1)
    fn = functools.partial(LooseSpaceEnv, "tuple_graph", "text", max_steps=1000, end_p=0.0)
    twins = [fn() for _ in range(4)]
    with shoal.make(fn, 4, num_workers=2, batch_size=2, context="fork") as envs:
        obs, info = envs.reset(seed=20)
        # what each env shows next: its reset observation until it is stepped (a reset env not in the first batch
        # comes back from a later recv() without having stepped)
        pending = {i: twin.reset(seed=20 + i)[0] for i, twin in enumerate(twins)}
        for row, env_id in enumerate(info["env_id"].tolist()):
            assert_same((obs[0][row], obs[1][row]), tuple(pending.pop(env_id)))
        compared = 0
        for _ in range(25):
            ids = info["env_id"]
            actions = tuple(space.sample() for _ in ids)
            envs.send(actions)
            for env_id, action in zip(ids.tolist(), actions):
                pending[env_id] = twins[env_id].step(action)[0]
            obs, _, _, _, info = envs.recv()
            for row, env_id in enumerate(info["env_id"].tolist()):
                assert_same((obs[0][row], obs[1][row]), tuple(pending.pop(env_id)))
                compared += 1
        assert compared == 50


def test_loose_actions_are_checked_and_loose_observations_do_not_flatten():
    with shoal.make(_fns("text", "text"), backend="serial") as envs:
        envs.reset(seed=0)
        with pytest.raises(ActionTypeError, match=r"expected a tuple of 4 actions of Text"):
            envs.step("abc")
        with pytest.raises(ActionError, match=r"expected 4 actions of Text\(1, 8, .*\) \(one per env\), got 3"):
            envs.step(("a", "b", "c"))
    with pytest.raises(ConfigError, match=r"Text at \['mission'\] has no fixed size, so it cannot be flattened"):
        shoal.make(_fns("dict_text_box", "text"), backend="serial", flatten=True)


def test_minigrid_equals_gymnasium():
    """MiniGrid's observations hold a custom space (MissionSpace): shoal equals Gymnasium's SyncVectorEnv."""
    pytest.importorskip("minigrid")
    env_id = "MiniGrid-DoorKey-5x5-v0"
    ref = gym.make_vec(env_id, 4, vectorization_mode="sync")
    assert type(ref.single_observation_space["mission"]).__name__ == "MissionSpace"
    rng = np.random.default_rng(0)
    acts = rng.integers(0, 7, size=(300, 4))
    for config in ({"backend": "serial"}, {"num_workers": 2, "context": "fork"}, {"num_workers": 2, "batch_size": 4}):
        with shoal.make(env_id, 4, **config) as envs:
            for g, e in zip(rollout(envs, lambda t: acts[t], 300, 1), rollout(ref, lambda t: acts[t], 300, 1)):
                assert_same(g, e)
    ref.close()


class _Reuses(gym.Env):
    """A loose leaf (a Sequence) whose value holds the one array the env keeps and changes in place every step, and a
    Text leaf beside it."""

    observation_space = gym.spaces.Dict({
        "seen": gym.spaces.Sequence(gym.spaces.Box(0, 99, (2,), np.float32)),
        "said": gym.spaces.Text(8),
    })
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.kept = np.zeros(2, np.float32)
        return {"seen": (self.kept,), "said": "r"}, {}

    def step(self, action):
        self.kept += 1
        return {"seen": (self.kept,), "said": f"s{int(self.kept[0])}"}, 0.0, False, False, {}


def test_copied_batches_keep_loose_values_an_env_changes_later():
    with shoal.make(_Reuses, 2, backend="serial") as envs:  # copy=True, the default
        envs.reset(seed=0)
        first = envs.step(np.zeros(2, np.int64))[0]
        envs.step(np.zeros(2, np.int64))
        assert [seen[0].tolist() for seen in first["seen"]] == [[1, 1], [1, 1]]
        assert first["said"] == ("s1", "s1")
