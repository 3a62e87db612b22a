"""Every backend equals Gymnasium's SyncVectorEnv, step for step and bit for bit, over a catalogue of spaces."""

from __future__ import annotations

import dataclasses
import functools
import pickle
import subprocess
import sys
import textwrap
from contextlib import closing, nullcontext

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from fakes.envs import SPACES, AsReturned, ScalarInfos, SpaceEnv
from gymnasium.utils.env_checker import data_equivalence
from helpers import assert_same, beside_gymnasium, rollout

import shoal

ACTIONS = ["discrete", "box_f32", "multidiscrete", "multibinary", "dict", "tuple", "nested"]
CASES = [(obs, ACTIONS[i % len(ACTIONS)]) for i, obs in enumerate(SPACES)]
MODES = list(AutoresetMode)
NUM_ENVS = 5
STEPS = 40


def _fns(obs, act, n=NUM_ENVS):
    return [functools.partial(SpaceEnv, obs, act, max_steps=6 + i) for i in range(n)]


def _actions(act, n=NUM_ENVS):
    space = gym.vector.utils.batch_space(SPACES[act], n)
    space.seed(123)
    sampled = [space.sample() for _ in range(STEPS)]
    return lambda t: sampled[t]


def _compare(shoal_envs, gym_envs, act, mode):
    actions = _actions(act)
    if mode is AutoresetMode.DISABLED:  # the caller resets ended envs; do it the same way on both sides
        for envs in (shoal_envs, gym_envs):
            envs.reset(seed=7)
        expected, got = [], []
        for envs, out in ((gym_envs, expected), (shoal_envs, got)):
            envs.reset(seed=7)
            ended = np.zeros(NUM_ENVS, bool)
            for t in range(STEPS):
                if ended.any():
                    out.append(envs.reset(options={"reset_mask": ended}))
                result = envs.step(actions(t))
                out.append(result)
                ended = result[2] | result[3]
    else:
        expected = rollout(gym_envs, actions, STEPS, seed=7)
        got = rollout(shoal_envs, actions, STEPS, seed=7)
    assert len(expected) == len(got)
    for t, (e, g) in enumerate(zip(expected, got)):
        assert_same(g, e, f"call {t}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("obs,act", CASES, ids=[f"{o}-{a}" for o, a in CASES])
@pytest.mark.parametrize(
    "config",
    [{"backend": "serial", "num_workers": 2}, {"backend": "multiprocessing", "num_workers": 2, "context": "fork"}],
    ids=["serial", "mp-fork"],
)
def test_catalogue_equals_gymnasium(config, obs, act, mode):
    with beside_gymnasium(_fns(obs, act), mode, **config) as (envs, ref):
        assert envs.single_observation_space == ref.single_observation_space
        assert envs.observation_space == ref.observation_space
        assert envs.action_space == ref.action_space
        assert envs.metadata["autoreset_mode"] == ref.metadata["autoreset_mode"]
        _compare(envs, ref, act, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("obs,act", [("nested", "dict"), ("box_u8_img", "discrete")])
def test_every_backend_equals_gymnasium(backend, obs, act, mode):
    with beside_gymnasium(_fns(obs, act), mode, **backend) as (envs, ref):
        _compare(envs, ref, act, mode)


@pytest.mark.parametrize("how", ["id", "spec"])
def test_registered_id_equals_gymnasium(how):
    # a spec as make_vec takes one, of shorter episodes than the registration's (so its own settings are used)
    env = "CartPole-v1" if how == "id" else dataclasses.replace(gym.spec("CartPole-v1"), max_episode_steps=30)
    ref = gym.make_vec(env, 6, vectorization_mode="sync")
    with closing(ref), shoal.make(env, 6, num_workers=2) as envs:
        rng = np.random.default_rng(0)
        acts = rng.integers(0, 2, size=(200, 6))
        for e, g in zip(rollout(ref, lambda t: acts[t], 200, 3), rollout(envs, lambda t: acts[t], 200, 3)):
            assert_same(g, e)


def _doubled(reward):
    return 2.0 * reward


# Each changes what the vector env hands out: the observation space, the rewards, the infos
WRAPPERS = [
    gym.wrappers.TimeAwareObservation,
    functools.partial(gym.wrappers.TransformReward, func=_doubled),
    gym.wrappers.RecordEpisodeStatistics,
]


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
def test_wrappers_equal_gymnasium_make_vecs(backend, mode):
    ref = gym.make_vec("CartPole-v1", 4, vectorization_mode="sync", wrappers=WRAPPERS,
                       vector_kwargs={"autoreset_mode": mode})
    with closing(ref), shoal.make("CartPole-v1", 4, wrappers=WRAPPERS, autoreset_mode=mode, **backend) as envs:
        assert envs.single_observation_space == ref.single_observation_space
        assert envs.single_observation_space != gym.make("CartPole-v1").observation_space  # the wrappers did act
        acts = np.random.default_rng(1).integers(0, 2, size=(60, 4))
        expected, got = rollout(ref, lambda t: acts[t], 60, 5), rollout(envs, lambda t: acts[t], 60, 5)
        # RecordEpisodeStatistics's infos came through (same-step: in the final infos)
        assert any("episode" in info or "episode" in info.get("final_info", {}) for *_, info in got)
        for t, (e, g) in enumerate(zip(expected, got)):
            for info in (e[-1], g[-1], e[-1].get("final_info", {}), g[-1].get("final_info", {})):
                info.get("episode", {}).pop("t", None)  # the episodes' wall-clock times differ
            assert_same(g, e, f"call {t}")


@pytest.mark.parametrize("backend,mode", [("serial", "sync"), ("multiprocessing", "async")])
def test_spec_is_gymnasium_make_vecs_and_makes_the_same_envs(backend, mode):
    # as gymnasium.make_vec sets it, in the mode of Gymnasium's class that steps the same per-env envs: code reads
    # envs.spec.id, and gymnasium.make_vec(envs.spec) makes a vector env of the same envs
    kwargs = dict(sutton_barto_reward=True, wrappers=WRAPPERS[:2])
    with shoal.make("CartPole-v1", 3, backend=backend, **kwargs) as envs, \
            closing(gym.make_vec("CartPole-v1", 3, vectorization_mode=mode, **kwargs)) as ref:
        assert envs.spec == ref.spec and envs.spec.id == "CartPole-v1"
        with closing(gym.make_vec(envs.spec)) as remade:
            acts = np.random.default_rng(2).integers(0, 2, size=(40, 3))
            for g, e in zip(rollout(envs, lambda t: acts[t], 40, 7), rollout(remade, lambda t: acts[t], 40, 7)):
                assert_same(g, e)
    with shoal.make(gym.spec("CartPole-v1"), 2, backend="serial") as envs:  # an EnvSpec is an id too
        assert envs.spec.kwargs == {"num_envs": 2, "vectorization_mode": "sync"}
    # Gymnasium's "module:id" form, and an id without its version (Gymnasium's latest, with Gymnasium's warning)
    for env_id, warned in (("gymnasium.envs.classic_control:CartPole-v1", None), ("CartPole", "Using the latest")):
        with pytest.warns(UserWarning, match=warned) if warned else nullcontext():
            with shoal.make(env_id, 2, backend="serial") as envs, \
                    closing(gym.make_vec(env_id, 2, vectorization_mode="sync")) as ref:
                assert envs.spec == ref.spec and envs.spec.id == "CartPole-v1"
    with shoal.make(lambda: gym.make("CartPole-v1"), 2, backend="serial") as envs:  # no id: no spec, as Gymnasium's
        assert envs.spec is None


@pytest.mark.parametrize(
    "wrappers,match",
    [
        (gym.wrappers.TimeAwareObservation, "pass a list, wrappers=\\[...\\]"),
        ("TimeAwareObservation", "sequence of callables"),
        ([gym.wrappers.TimeAwareObservation, "RecordEpisodeStatistics"], "'RecordEpisodeStatistics' is not callable"),
    ],
)
def test_wrappers_that_are_not_callables_are_refused_naming_what_came(wrappers, match):
    with pytest.raises(shoal.errors.ConfigError, match=match):
        shoal.make("CartPole-v1", 2, backend="serial", wrappers=wrappers)


def test_wrappers_of_a_batch_native_env_are_refused():
    with pytest.raises(shoal.errors.ConfigError, match="batch-native env steps all of its instances in one object"):
        shoal.make("shoal/Squared-v0", 4, backend="serial", wrappers=[gym.wrappers.TimeAwareObservation])


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
@pytest.mark.parametrize("env_id", ["HalfCheetah-v5", "Ant-v5", "gymnasium_robotics:PointMaze_UMaze-v3",
                                    "gymnasium_robotics:AntMaze_UMaze-v5"])
def test_mujoco_equals_gymnasium(env_id, mode):
    """MuJoCo's continuous-control envs (Box actions, float64 observations, infos of float64 and float32 scalars
    every step; Ant also ends episodes when it falls), and Gymnasium-Robotics' goal-conditioned mazes on MuJoCo (Dict
    observations of the goal reached and the goal wanted, a ``success`` info, a new goal at each reset), with episodes
    of different lengths so that autoresets come at different steps: equal to Gymnasium's SyncVectorEnv on the serial
    and multiprocessing backends."""
    pytest.importorskip("mujoco", reason="the test extra installs it (gymnasium[mujoco])")
    if env_id.startswith("gymnasium_robotics:"):
        pytest.importorskip("gymnasium_robotics", reason="the test extra installs it")
    fns = [functools.partial(gym.make, env_id, max_episode_steps=12 + 3 * i) for i in range(4)]
    space = gym.make(env_id).action_space
    rng = np.random.default_rng(0)
    acts = [rng.uniform(space.low, space.high, (4, *space.shape)).astype(space.dtype) for _ in range(50)]
    for config in ({"backend": "serial"}, {"num_workers": 2}):
        with beside_gymnasium(fns, mode, **config) as (envs, ref):
            assert envs.single_action_space == ref.single_action_space
            for t, (g, e) in enumerate(zip(rollout(envs, lambda t: acts[t], 50, 7),
                                           rollout(ref, lambda t: acts[t], 50, 7), strict=True)):
                assert_same(g, e, f"{config} call {t}")


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
def test_numpy_scalars_in_infos_cross_from_workers_with_their_types_and_values(mode):
    """A worker pickles numpy scalars as their type and Python value (cheaper than numpy's own pickling of each one);
    every kind comes back as it was: the vector infos equal Gymnasium's (their dtypes are the first value's type), a
    -0.0 keeps its sign, a longdouble its precision, and where Gymnasium keeps the values themselves (an object
    array) each is of its own type, also inside a tuple or a list."""
    fns = [functools.partial(ScalarInfos, offset=10 * i) for i in range(4)]
    with beside_gymnasium(fns, mode, num_workers=2, inline=False) as (envs, ref):
        for t, (g, e) in enumerate(zip(rollout(envs, lambda t: np.zeros(4, np.int64), 14, 3),
                                       rollout(ref, lambda t: np.zeros(4, np.int64), 14, 3), strict=True)):
            assert_same(g, e, f"call {t}")
            infos, want = g[-1], e[-1]
            if mode is AutoresetMode.SAME_STEP and "final_info" in want:
                infos, want = infos["final_info"], want["final_info"]
            assert np.signbit(infos["zero"]).all() and infos["long"].dtype == np.longdouble
            for key in ("bool", "str", "date", "nested"):  # (Gymnasium keeps these in object arrays)
                assert infos[key].dtype == object
                for got, value in zip(infos[key], want[key], strict=True):
                    assert repr(got) == repr(value), (t, key, got, value)
                    assert [type(v) for v in _leaves(got)] == [type(v) for v in _leaves(value)], (t, key, got)


def _leaves(value):
    return [leaf for v in value for leaf in _leaves(v)] if isinstance(value, (tuple, list)) else [value]


def test_ale_ids_need_no_import_of_ale_py():
    """Gymnasium 1 knows the ``ALE/`` ids only once ``ale_py`` is imported and registered; shoal.make does that in
    whichever process makes the envs (spawned workers too), and the envs equal Gymnasium's of the same id."""
    code = textwrap.dedent("""
        import pickle, sys
        import numpy as np
        import shoal
        assert "ale_py" not in sys.modules
        acts = lambda t: np.array([t % 6, 5 - t % 6])
        with shoal.make("ALE/Pong-v5", 2, num_workers=2, context="spawn", frameskip=2) as envs:
            got = [envs.reset(seed=3)[0]] + [envs.step(acts(t))[:4] for t in range(30)]
        import ale_py
        import gymnasium as gym
        gym.register_envs(ale_py)
        ref = gym.make_vec("ALE/Pong-v5", 2, vectorization_mode="sync", frameskip=2)
        expected = [ref.reset(seed=3)[0]] + [ref.step(acts(t))[:4] for t in range(30)]
        sys.stdout.buffer.write(pickle.dumps((got, expected)))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    got, expected = pickle.loads(done.stdout[done.stdout.index(b"\x80"):])  # (ALE prints its banner first)
    assert_same(tuple(got), tuple(expected))


def test_same_seeds_same_rollouts_across_backends(backend):
    acts = _actions("nested")
    with shoal.make(_fns("dict", "nested"), backend="serial") as a, shoal.make(_fns("dict", "nested"), **backend) as b:
        for x, y in zip(rollout(a, acts, STEPS, seed=11), rollout(b, acts, STEPS, seed=11)):
            assert_same(x, y)
    with shoal.make(_fns("dict", "nested"), backend="serial") as c:
        first = rollout(c, acts, 5, seed=12)[1][0]["pos"]
    other = rollout(shoal.make(_fns("dict", "nested"), backend="serial"), acts, 5, 11)[1][0]["pos"]
    assert not np.array_equal(first, other)


class SeedOnlyReset(SpaceEnv):
    """An env written as reset(self, seed=None), without options (as SB3's tests write some)."""

    def reset(self, seed=None):
        return super().reset(seed=seed)


def test_an_env_whose_reset_takes_no_options_runs_until_options_are_given(backend):
    with shoal.make([SeedOnlyReset] * 3, autoreset_mode="same_step", **backend) as envs:
        envs.reset(seed=0)
        for _ in range(30):  # autoresets included
            envs.step(np.zeros(3, np.int64))
        with pytest.raises(TypeError, match="unexpected keyword argument 'options'"):
            envs.reset(options={"note": "x"})


class OptionsRequired(SpaceEnv):
    """An env written as reset(self, seed, options), both required (as Gymnasium's own tests write some); it
    keeps the options it got in its info."""

    def reset(self, seed, options):
        obs, info = super().reset(seed=seed)
        return obs, {**info, "options": repr(options)}


class OptionsInKwargs(SpaceEnv):
    """An env written as reset(self, **kwargs) that reads kwargs["options"]."""

    def reset(self, **kwargs):
        obs, info = super().reset(seed=kwargs["seed"])
        return obs, {**info, "options": repr(kwargs["options"])}


@pytest.mark.parametrize("env", [OptionsRequired, OptionsInKwargs])
@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_an_env_whose_reset_requires_options_gets_them_as_gymnasiums_vector_envs_pass_them(backend, mode, env):
    """Gymnasium's vector envs pass ``options=`` (None if none) to every user reset: so does shoal to an env that
    needs them, and to its autoresets too, which Gymnasium makes as ``reset()`` and these envs refuse."""
    with beside_gymnasium([env] * 3, mode, **backend) as (envs, ref):
        assert_same(envs.reset(seed=0), ref.reset(seed=0))
        for _ in range(30):  # autoresets included (episodes of 12 steps)
            envs.step(np.zeros(3, np.int64))
        assert_same(envs.reset(seed=1, options={"a": 1}), ref.reset(seed=1, options={"a": 1}))


@pytest.mark.parametrize("kind", ["int", "f32", "own"])
@pytest.mark.parametrize("config", [{}, {"inline": False}], ids=["inline", "workers-only"])
def test_same_step_final_observations_come_from_workers_as_the_env_returned_them(config, kind):
    """Worker processes leave final observations that fit the buffers' records in shared memory and pickle the
    others: either way each is what the env returned, of its own type (as Gymnasium's exact comparison sees it)."""
    fns = [functools.partial(AsReturned, kind, 2 + i % 3) for i in range(6)]
    mode = AutoresetMode.SAME_STEP
    with beside_gymnasium(fns, mode, backend="multiprocessing", num_workers=2, context="fork", **config) as (envs, ref):
        acts = lambda t: np.arange(6) % 2  # noqa: E731
        finals = 0
        for e, g in zip(rollout(ref, acts, 12, seed=1), rollout(envs, acts, 12, seed=1)):
            assert data_equivalence(g[:-1], e[:-1], exact=True)
            assert data_equivalence(g[-1].get("final_obs"), e[-1].get("final_obs"), exact=True), (g[-1], e[-1])
            assert_same(g[-1], e[-1])
            finals += int(e[-1].get("_final_obs", np.zeros(1, bool)).sum())
        assert finals >= 20


def test_copy_false_returns_views_and_flatten_unflattens():
    with shoal.make(_fns("nested", "discrete"), backend="serial", flatten=True) as flat, shoal.make(
        _fns("nested", "discrete"), backend="serial"
    ) as shaped:
        f_obs, _ = flat.reset(seed=1)
        s_obs, _ = shaped.reset(seed=1)
        assert f_obs.ndim == 2 and f_obs.shape[0] == NUM_ENVS
        assert flat.observation_space.contains(f_obs)
        assert_same(flat.unflatten(f_obs), s_obs)
        assert np.shares_memory(flat.unflatten(f_obs)["a"][0], f_obs)
    with shoal.make(_fns("box_f32", "discrete"), backend="serial", copy=False) as envs:
        obs, _ = envs.reset(seed=1)
        before = obs.copy()
        envs.step(np.zeros(NUM_ENVS, np.int64))
        assert not np.array_equal(obs, before), "copy=False must return views that the next step overwrites"
