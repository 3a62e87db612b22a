"""shoal.ale_py.AtariVectorEnv against ale-py's own AtariVectorEnv (its C++ pool), step for step.

Both are built with the same arguments and stepped with the same actions; observations, rewards, flags and infos
must be equal, dtypes and info keys included (``data_equivalence``). No-ops are off: ale-py's pool draws how many a
reset runs from its own generator. CI also runs ale-py's own tests of its pool against this class
(``.ci/vendored_suites.py``).
"""

from __future__ import annotations

import contextlib

import ale_py
import gymnasium as gym
import numpy as np
import pytest
from ale_py.vector_env import AtariVectorEnv as AlePool
from gymnasium.utils.env_checker import data_equivalence
from helpers import assert_same_attribute, public_names

import shoal
import shoal.ale_py
from shoal.errors import NotResetError, ResetArgumentError, ResetArgumentTypeError

pytestmark = pytest.mark.skipif(
    tuple(int(p) for p in ale_py.__version__.split(".")[:2]) < (0, 12),
    reason=f"shoal.ale_py follows ale-py 0.12's pool; ale-py {ale_py.__version__} is installed",
)
QUIET = dict(noop_max=0, repeat_action_probability=0.0)


def _equal(mine, theirs, where):
    assert data_equivalence(mine, theirs), f"{where}: {mine!r} vs {theirs!r}"


def _step_both(kwargs, steps, seed=3, **shoal_kwargs):
    """Step both pools side by side; every result equal. Returns how many episodes ended."""
    ended = 0
    with contextlib.closing(AlePool(**kwargs)) as theirs, shoal.ale_py.AtariVectorEnv(**kwargs, **shoal_kwargs) as mine:
        for got, want, what in zip(mine.reset(seed=seed), theirs.reset(seed=seed), ("obs", "info")):
            _equal(got, want, f"reset {what}")
        rng = np.random.default_rng(seed)
        for t in range(steps):
            actions = rng.integers(0, mine.single_action_space.n, mine.num_envs)
            got, want = mine.step(actions), theirs.step(actions)
            for k, what in enumerate(("obs", "rewards", "terminations", "truncations")):
                _equal(got[k], want[k], f"step {t} {what}")
            ending = want[2] | want[3]
            if "final_obs" in want[4]:  # only the rows of envs whose episode ended are defined in ale-py's
                _equal(got[4].pop("final_obs")[ending], want[4].pop("final_obs")[ending], f"step {t} final obs")
            _equal(got[4], want[4], f"step {t} info")
            ended += int(np.count_nonzero(ending))
    return ended


@pytest.mark.parametrize("backend", [dict(backend="serial"), dict(backend="multiprocessing", num_workers=2)],
                         ids=["serial", "mp"])
def test_defaults_equal_ale_pys_pool(backend):
    # fire reset and reward clipping on (ale-py's defaults); short frame limits truncate: after FIRE an episode's
    # steps end at frames 5, 9, ..., so 100 truncates at the end of a step, 101 after a step's first frame
    assert _step_both(dict(game="breakout", num_envs=3, **QUIET), steps=150, **backend) >= 1
    for limit in (100, 101):
        assert _step_both(dict(game="pong", num_envs=2, max_num_frames_per_episode=limit, **QUIET), steps=60,
                          **backend) >= 4


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param(dict(episodic_life=True, autoreset_mode="SameStep"), id="same-step-episodic"),
        pytest.param(dict(episodic_life=True, grayscale=False, img_height=64, img_width=48, stack_num=2),
                     id="rgb-64x48-stack2-episodic"),
        pytest.param(dict(life_loss_info=True, reward_clipping=False, use_fire_reset=False, frameskip=2),
                     id="life-loss-info-raw-rewards-skip2"),
    ],
)
def test_settings_equal_ale_pys_pool(settings):
    # Breakout's ball is lost within ~100 steps of random play: lost lives, autoresets and final observations
    assert _step_both(dict(game="breakout", num_envs=3, **QUIET, **settings), steps=250, backend="serial") >= 2


def _stepped(envs, steps=20):
    envs.reset(seed=0)
    for _ in range(steps):
        out = envs.step(np.ones(envs.num_envs, np.int64))
    return out


def test_partial_resets_as_ale_py_does_them():
    with shoal.ale_py.AtariVectorEnv("breakout", 4, backend="serial", **QUIET) as envs:
        with pytest.raises(NotResetError, match="first reset\\(\\) must reset every environment \\(got 1 of 4\\)"):
            envs.reset(options={"reset_mask": np.array([True, False, False, False])})
        obs, _, _, _, info = _stepped(envs)
        # an all-False mask resets nothing and hands out the current batch
        same, same_info = envs.reset(options={"reset_mask": np.zeros(4, bool)})
        _equal(same, obs, "obs")
        _equal(same_info, info, "info")
        with pytest.raises(ResetArgumentTypeError, match="must be a boolean numpy array"):
            envs.reset(options={"reset_mask": np.array([1, 0, 0, 0])})
        with pytest.raises(ResetArgumentError, match="must have shape"):
            envs.reset(options={"reset_mask": np.array([True, False])})
        with pytest.raises(ResetArgumentError, match="one entry per sub-environment being reset"):
            envs.reset(seed=np.array([1, 2]), options={"reset_mask": np.array([True, False, False, False])})


def test_a_partial_resets_seeds_go_to_the_envs_it_resets_in_order():
    # sticky actions make a rollout depend on the seed: envs 1 and 3 reset with seed=7 play as envs seeded 7 and 8
    sticky = dict(noop_max=0, repeat_action_probability=0.25, backend="serial")
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, 4, 4) for _ in range(40)]
    with shoal.ale_py.AtariVectorEnv("breakout", 4, **sticky) as envs, \
            shoal.AtariVectorEnv(game="breakout", num_envs=4, padding_type="zero", **sticky) as reference:
        _stepped(envs)
        obs, _ = envs.reset(seed=7, options={"reset_mask": np.array([False, True, False, True])})
        ref_obs, _ = reference.reset(seed=[0, 7, 0, 8])
        np.testing.assert_array_equal(obs[[1, 3]], ref_obs[[1, 3]])
        for a in actions:
            obs, ref_obs = envs.step(a)[0], reference.step(a)[0]
            np.testing.assert_array_equal(obs[[1, 3]], ref_obs[[1, 3]])
        # and an array gives one seed per env reset, in order
        envs.reset(seed=np.array([8, 7]), options={"reset_mask": np.array([False, True, False, True])})
        reference.reset(seed=[0, 8, 0, 7])
        for a in actions:
            np.testing.assert_array_equal(envs.step(a)[0][[1, 3]], reference.step(a)[0][[1, 3]])


def test_gymnasium_make_vec_builds_it_once_registered():
    specs = [spec for spec in gym.registry.values() if spec.vector_entry_point == shoal.ale_py.ALE_PY_ENTRY_POINT]
    try:
        changed = shoal.ale_py.register_vector_envs()
        assert "ALE/Breakout-v5" in changed and len(changed) == len(specs) > 50
        envs = gym.make_vec("ALE/Breakout-v5", 2)
        with envs:
            assert type(envs) is shoal.ale_py.AtariVectorEnv
            assert envs.config.repeat_action_probability == 0.25  # the registered id's own keywords
            obs, info = envs.reset(seed=0)
            assert obs.shape == (2, 4, 84, 84) and sorted(info) == sorted(shoal.ale_py.INFO_KEYS)
    finally:
        for spec in specs:
            spec.vector_entry_point = shoal.ale_py.ALE_PY_ENTRY_POINT


def test_numpy_numbers_are_taken_as_ale_py_takes_them():
    # a sweep's settings often come from numpy (np.arange, np.linspace): ale-py's pool takes numpy's integers (but
    # for frameskip) and floats as Python's
    settings = dict(game="pong", num_envs=np.int64(2), max_num_frames_per_episode=np.int64(101), stack_num=np.int32(2),
                    noop_max=np.int64(0), repeat_action_probability=np.float32(0.0), img_height=np.uint8(64))
    assert _step_both(settings, steps=60, backend="serial") >= 4
    with shoal.ale_py.AtariVectorEnv(**settings, mode=np.int64(1), frameskip=(np.int64(2), np.int64(5))) as envs:
        assert envs.num_envs == 2 and type(envs.num_envs) is int and envs.config.modes == (1, 1)
        assert envs.observation_space.shape == (2, 2, 64, 84)
    for mode in (0.0, True):
        with pytest.raises(gym.error.Error, match=rf"env 0 \('pong'\): mode {mode} is not one of its modes \[0, 1\]"):
            shoal.ale_py.AtariVectorEnv("pong", 1, mode=mode)


def test_np_random_is_one_vector_level_generator_as_in_ale_py():
    # ale-py's pool keeps Gymnasium's VectorEnv generator (its resets do not seed it), not one per env
    with contextlib.closing(AlePool("pong", 2)) as theirs, shoal.ale_py.AtariVectorEnv("pong", 2) as mine:
        for vec in (theirs, mine):
            vec.reset(seed=0)
            assert isinstance(vec.np_random, np.random.Generator) and isinstance(vec.np_random_seed, int)
            vec.np_random = np.random.default_rng(3)
            assert vec.np_random_seed == -1
        assert mine.np_random.bit_generator.state == theirs.np_random.bit_generator.state


def test_bad_arguments_are_gymnasium_errors_as_in_ale_py():
    for frameskip in (0, -1, 4.0):
        with pytest.raises(gym.error.Error, match="frameskip"):
            shoal.ale_py.AtariVectorEnv("breakout", 1, frameskip=frameskip)
    with pytest.raises(gym.error.Error, match="max_num_frames_per_episode must be a positive integer, got 0"):
        shoal.ale_py.AtariVectorEnv("breakout", 1, max_num_frames_per_episode=0)
    with shoal.ale_py.AtariVectorEnv("breakout", 1, backend="serial") as envs:
        with pytest.raises(NotImplementedError, match="xla"):
            envs.xla()


@pytest.mark.parametrize("settings", [
    dict(),
    dict(continuous=True, continuous_action_threshold=0.3),
    dict(num_envs=4, batch_size=2, grayscale=False, stack_num=2, autoreset_mode="SameStep", img_height=64),
], ids=["defaults", "continuous", "rgb-batches"])
def test_public_attributes_are_ale_pys(settings):
    """Every public attribute of ale-py's pool but its C++ handle ``ale``, with its value (the generators:
    test_np_random_...; ``metadata``: ale-py's keys with its values, beside shoal's)."""
    kwargs = dict(dict(game="breakout", num_envs=2), **settings)
    with contextlib.closing(AlePool(**kwargs)) as theirs, shoal.ale_py.AtariVectorEnv(**kwargs) as mine:
        wanted = public_names(theirs) - {"ale"}
        assert not wanted - set(dir(mine))
        for name in sorted(wanted - {"np_random", "np_random_seed", "metadata", "unwrapped"}):
            assert_same_attribute(getattr(mine, name), getattr(theirs, name), name)
        assert {key: mine.metadata[key] for key in theirs.metadata} == theirs.metadata
        assert mine.unwrapped is mine
        with pytest.raises(AttributeError):
            mine.continuous = not mine.continuous  # the settings the envs were made with
