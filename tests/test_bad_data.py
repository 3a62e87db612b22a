"""Bad data from a user's env, and bad input from a user, are typed errors that name the env, what was expected and
what came: never silently corrupted output."""

from __future__ import annotations

import functools
import threading
import warnings
from contextlib import closing

import gymnasium as gym
import numpy as np
import pytest
from fakes.envs import BoolReward, IntFlags, SpaceEnv
from fakes.faults import BadDataEnv, FaultyEnv
from helpers import assert_same

import shoal
from shoal import errors

BAD_STEPS = [
    ("obs_shape", r"observation: expected shape \(4,\) for Box\(.*\), got an array of shape \(1,\)"),
    ("obs_scalar", r"observation: expected shape \(4,\) for Box\(.*\), got float 0.5"),
    ("obs_none", r"observation: expected a value of Box\(.*\), got None"),
    ("obs_float_for_uint8", r"observation: expected dtype uint8 for Box\(.*\), got an array of .* dtype float64"),
    ("obs_300_for_uint8", r"observation: expected values in \[0, 255\] \(dtype uint8\) for Box\(.*\), got an array of "
                          r"shape \(4,\) and dtype uint16 with values up to 300"),
    ("obs_complex", r"observation: expected numbers of dtype float32 for Box\(.*\), got an array of .* complex64"),
    ("obs_row_of_one", r"observation: expected shape \(4,\) for Box\(.*\), got an array of shape \(1, 4\)"),
    ("reward_none", r"expected the reward as one real number, got None"),
    ("reward_array", r"expected the reward as one real number, got an array of shape \(2,\)"),
    ("reward_str", r"expected the reward as one real number, got str '1.5'"),
    ("terminated_none", r"expected terminated as a bool \(or an int 0 or 1\), got None"),
    ("truncated_two", r"expected truncated as a bool \(or an int 0 or 1\), got int 2"),
    ("info_list", r"expected info as a dict, got list"),
    ("step_four", r"expected a tuple \(observation, reward, terminated, truncated, info\), got a tuple of 4 values "
                  r"\(the old Gym API's \(observation, reward, done, info\)\? Gymnasium's step returns five\)"),
    ("step_none", r"expected a tuple \(observation, reward, terminated, truncated, info\), got None"),
    ("dict_missing_key", r"observation: expected a dict with keys \['id', 'pos'\], got \['pos'\]"),
    ("dict_leaf_shape", r"observation\['pos'\]: expected shape \(2,\) for Box\(.*\), got an array of shape \(3,\)"),
    ("dict_leaf_scalar",  # (numpy 1 writes the scalar as 0.5)
     r"observation\['pos'\]: expected shape \(2,\) for Box\(.*\), got float32 (np\.float32\(0\.5\)|0\.5)"),
    ("dict_extra_key", r"observation: expected a dict with keys \['id', 'pos'\], got \['extra', 'id', 'pos'\]"),
    ("loose_missing", r"observation\['note'\]: expected a dict with keys \['said'\], got \[\]"),
    ("loose_extra_key", r"observation\['note'\]: expected a dict with keys \['said'\], got \['extra', 'said'\]"),
    ("loose_not_a_dict", r"observation\['note'\]: expected a dict with keys \['said'\], got str 'hi'"),
]


def _fns(kind, at):
    return [functools.partial(BadDataEnv, kind, at=100)] * 2 + [functools.partial(BadDataEnv, kind, at=at)] * 2


@pytest.mark.parametrize("kind,match", BAD_STEPS, ids=[k for k, _ in BAD_STEPS])
@pytest.mark.parametrize("at", [1, 3], ids=["first-step", "later-step"])
def test_bad_step_results_name_the_env(backend, kind, match, at):
    # on any step, not only an env's first (numpy would broadcast a (1,) observation into a (4,) row, or cast 300
    # into a uint8 as 44, without a word; Gymnasium's SyncVectorEnv raises a bare ValueError for some of these)
    with shoal.make(_fns(kind, at=at), **backend) as envs:
        envs.reset(seed=0)
        for _ in range(at - 1):
            envs.step(np.zeros(4, np.int64))
        prefix = r"env 2 \(BadDataEnv\) returned bad data from step\(\): "
        with pytest.raises(errors.EnvOutputError, match=prefix + match):
            envs.step(np.zeros(4, np.int64))


SEQUENCE_KINDS = ["obs_shape", "obs_300_for_uint8", "reward_none", "truncated_two", "info_list", "step_four",
                  "step_none", "dict_leaf_shape", "loose_missing"]


@pytest.mark.parametrize("kind", SEQUENCE_KINDS)
def test_bad_step_results_inside_an_action_sequence_name_the_env(backend, kind):
    # an env runs its whole sequence in one call (GymEngine._run_sequences): its third step's results are checked as
    # a plain step's are
    match = dict(BAD_STEPS)[kind]
    with shoal.make(_fns(kind, at=3), **backend) as envs:
        envs.reset(seed=0)
        prefix = r"env 2 \(BadDataEnv\) returned bad data from step\(\): "
        with pytest.raises(errors.EnvOutputError, match=prefix + match):
            envs.step([np.zeros(4, np.int64)] * 4)


def test_dict_observations_are_checked_at_every_reset():
    fns = [functools.partial(BadDataEnv, "dict_leaf_shape", at=0, episode=2, length=3)] * 2
    with shoal.make(fns, num_workers=2) as envs:
        envs.reset(seed=0)
        for _ in range(7):  # two episodes of 3 steps, the first followed by its autoreset step
            envs.step(np.zeros(2, np.int64))
        match = r"env 0 \(BadDataEnv\) returned bad data from reset\(\): observation\['pos'\]: expected"
        with pytest.raises(errors.EnvOutputError, match=match):
            envs.step(np.zeros(2, np.int64))  # the autoreset of episode 2


@pytest.mark.parametrize("kind", ["obs_shape", "obs_none", "obs_float_for_uint8", "dict_leaf_shape"])
def test_bad_reset_observations_name_the_env(kind):
    with shoal.make(_fns(kind, at=0), num_workers=2) as envs:
        with pytest.raises(errors.EnvOutputError, match=r"env 2 \(BadDataEnv\) returned bad data from reset\(\)"):
            envs.reset(seed=0)


def test_a_reset_that_returns_the_observation_alone_says_so(backend):
    """gym < 0.26's reset returned the observation alone; one of two values would unpack as (observation, info)."""
    match = (r"env 2 \(BadDataEnv\) returned bad data from reset\(\): expected a tuple \(observation, info\), got an "
             r"array of shape \(2,\) and dtype float32 \(the observation alone\? Gymnasium's reset returns")
    with shoal.make(_fns("reset_obs_only", at=0), **backend) as envs:
        with pytest.raises(errors.EnvOutputError, match=match):
            envs.reset(seed=0)


def test_what_casts_without_loss_is_accepted():
    """Python numbers for a Discrete, float64 for a float32 Box, numpy bools and ints: taken as Gymnasium takes them."""
    with shoal.make(functools.partial(SpaceEnv, "discrete", "discrete"), 3, backend="serial") as envs:
        envs.reset(seed=0)
        for _ in range(20):
            envs.step(np.zeros(3, np.int64))
    with shoal.make("Pendulum-v1", 2, num_workers=2) as envs:  # float64 internals, float32 space
        envs.reset(seed=0)
        envs.step(np.zeros((2, 1), np.float32))


def test_bool_rewards_are_numbers_as_in_gymnasium(backend):
    """A bool reward (Python's or numpy's) is a ``SupportsFloat``, 0.0 or 1.0 without loss: taken, every step equal
    to Gymnasium's SyncVectorEnv, where the env checker only warns."""
    fns = [BoolReward] * 3
    actions = [np.array([t % 2, 1, 0]) for t in range(12)]
    with shoal.make(fns, **backend) as envs, closing(gym.vector.SyncVectorEnv(fns)) as ref:
        assert_same(envs.reset(seed=0), ref.reset(seed=0))
        for action in actions:
            assert_same(envs.step(action), ref.step(action))


def test_int_flags_0_and_1_are_bools_as_in_gymnasium(backend):
    """An int 0 or 1 (Python's or numpy's) as ``terminated`` or ``truncated`` stores as a bool without loss: taken,
    every step equal to Gymnasium's SyncVectorEnv (whose env checker only warns); other ints are refused above."""
    fns = [IntFlags] * 3
    actions = [np.array([t % 2, 1, (t // 3) % 2]) for t in range(30)]
    with shoal.make(fns, **backend) as envs, closing(gym.vector.SyncVectorEnv(fns)) as ref:
        assert_same(envs.reset(seed=0), ref.reset(seed=0))
        ended = 0
        for action in actions:
            result = envs.step(action)
            assert_same(result, ref.step(action))
            ended += int(result[2].sum() + result[3].sum())
    assert ended >= 6


def test_unpicklable_info_names_the_env():
    with shoal.make(_fns("info_unpicklable", at=1), num_workers=2, inline=False) as envs:
        envs.reset(seed=0)
        with pytest.raises(errors.EnvOutputError, match=r"env 2 returned an info that cannot be pickled"):
            envs.step(np.zeros(4, np.int64))


def test_unpicklable_info_of_an_ended_episode_names_the_env():
    """Same-step mode: the info of the step that ended an episode goes back as final_info, and still names its env."""
    fns = [functools.partial(BadDataEnv, "info_unpicklable", at=100, length=1)] * 2
    fns += [functools.partial(BadDataEnv, "info_unpicklable", at=1, length=1)] * 2
    with shoal.make(fns, num_workers=2, inline=False, autoreset_mode="same_step") as envs:
        envs.reset(seed=0)
        with pytest.raises(errors.EnvOutputError, match=r"env 2 returned an info that cannot be pickled"):
            envs.step(np.zeros(4, np.int64))


def test_env_exceptions_keep_their_type(backend):
    """Code written against Gymnasium catches the env's own exception type; shoal's error still names the env."""
    fns = [functools.partial(FaultyEnv, at=100)] * 3 + [functools.partial(FaultyEnv, at=2)]
    with shoal.make(fns, **backend) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))
        with pytest.raises(ValueError, match=r"env 3 raised ValueError: the env broke on purpose") as caught:
            envs.step(np.zeros(4, np.int64))
    assert isinstance(caught.value, errors.EnvError) and caught.value.env_id == 3
    assert "the env broke on purpose" in caught.value.remote_traceback


def test_env_exceptions_inside_an_action_sequence_keep_their_type(backend):
    fns = [functools.partial(FaultyEnv, at=100)] * 3 + [functools.partial(FaultyEnv, at=2)]
    with shoal.make(fns, **backend) as envs:
        envs.reset(seed=0)
        with pytest.raises(ValueError, match=r"env 3 raised ValueError: the env broke on purpose") as caught:
            envs.step([np.zeros(3, np.int64)] * 4)
    assert isinstance(caught.value, errors.EnvError) and caught.value.env_id == 3


def test_config_errors_say_what_to_do():
    fns = [functools.partial(SpaceEnv, "box_f32", "discrete")] * 2
    with pytest.raises(errors.ConfigError, match=r"cannot find context for 'bogus': context \(a start method\)"):
        shoal.make(fns, context="bogus")
    lock = threading.Lock()
    with pytest.raises(errors.UnpicklableError, match=r"the env constructors \(to start the worker processes\) cannot"):
        shoal.make([lambda: (lock, SpaceEnv())[1]] * 2, context="spawn")
    with shoal.make(fns, num_workers=2, inline=False) as envs:
        envs.reset(seed=0)
        with pytest.raises(errors.UnpicklableError, match=r"the arguments of call\('scaled'\) cannot be pickled"):
            envs.call("scaled", lock)
        with pytest.raises(errors.UnpicklableError, match=r"the value of set_attr\('tag'\) cannot be pickled"):
            envs.set_attr("tag", lock)
        with pytest.raises(errors.UnpicklableError, match=r"reset\(options=...\) cannot be pickled"):
            envs.reset(options={"note": lock})
        # nothing was sent: the env is in step and usable
        assert envs.call("scaled", 2) == (0, 0)
        envs.reset(seed=1)
        envs.step(np.zeros(2, np.int64))


class _TupleSpace(gym.Env):
    observation_space = (2,)  # a shape where a space is due
    action_space = gym.spaces.Discrete(2)


class _NoSpaces(gym.Env):
    def step(self, action):
        return np.zeros(2), 0.0, False, False, {}


@pytest.mark.parametrize("kw", [{"backend": "serial"}, {"num_workers": 2}])
def test_envs_without_gymnasium_spaces_say_so(kw):
    with pytest.raises(errors.ConfigError, match=r"_TupleSpace.observation_space is tuple \(2,\), not a gymnasium Sp"):
        shoal.make(_TupleSpace, 2, **kw)
    with pytest.raises(errors.ConfigError, match=r"expected a gymnasium.Env \(with observation_space, action_space"):
        shoal.make(_NoSpaces, 2, **kw)
    with pytest.raises(errors.ConfigError, match=r"from the env constructor, got NoneType"):
        shoal.make(lambda: None, 2, **kw)


def test_foreign_envs_say_what_they_are():
    pettingzoo = pytest.importorskip("pettingzoo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # PettingZoo deprecates importing an env module
        from pettingzoo.classic import rps_v2

    # a PettingZoo env instance (shoal.make vectorizes its constructor), and one beside a Gymnasium env
    with pytest.raises(errors.ConfigError, match=r"is a PettingZoo ParallelEnv \(a multi-agent env\)"):
        shoal.make(rps_v2.parallel_env(), 2, backend="serial")
    with pytest.raises(errors.ConfigError, match=r"is a PettingZoo AECEnv \(a multi-agent env\)"):
        shoal.make([lambda: gym.make("CartPole-v1"), rps_v2.env], backend="serial")
    assert pettingzoo.__version__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gym_old = pytest.importorskip("gym")
    with pytest.raises(errors.ConfigError, match=r"is an env of the old `gym` package; shoal needs a gymnasium.Env"):
        shoal.make(lambda: gym_old.make("CartPole-v1"), 2, backend="serial")
    with pytest.raises(errors.ConfigError, match=r"env is a TimeLimit instance; .* pass a callable"):
        shoal.make(gym.make("CartPole-v1"), 2)
