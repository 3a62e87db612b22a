"""Stable-Baselines3 on shoal: the adapter equals SB3's own DummyVecEnv step for step, and SB3's PPO trains on it.

Needs the ``sb3`` extra (CI installs it; the README's test command does not, to keep torch out of it): skipped
without it.
"""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from fakes.envs import KeepsItsOutputs, SpaceEnv
from helpers import assert_same, public_names

import shoal
from shoal.errors import ActionError, ConfigError

sb3 = pytest.importorskip("stable_baselines3", reason="Stable-Baselines3 is the sb3 extra: pip install 'shoal[sb3]'")
from stable_baselines3.common import vec_env as sb3_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

import shoal.sb3  # noqa: E402
import test_registry  # noqa: E402  (its ids: every env class Gymnasium can make here)

CASES = [("dict", "discrete"), ("box_f32", "multidiscrete"), ("tuple", "dict")]

def _units(fns):
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


# Each way to build the adapter: over a shoal vector env, or SB3's own form (env constructors) with the drop-ins
BUILDS = {
    "VecEnv serial": lambda fns: shoal.sb3.VecEnv(shoal.make(fns, autoreset_mode="same_step", backend="serial")),
    "VecEnv mp": lambda fns: shoal.sb3.VecEnv(
        shoal.make(fns, autoreset_mode="same_step", num_workers=2, inline=False)
    ),
    "DummyVecEnv": lambda fns: shoal.sb3.DummyVecEnv(fns),
    "SubprocVecEnv": lambda fns: shoal.sb3.SubprocVecEnv(fns, start_method="spawn"),
}


def _fns(obs, act, n=4):
    return [functools.partial(SpaceEnv, obs, act, max_steps=5 + i) for i in range(n)]


# and over two of Gymnasium's SyncVectorEnvs, of half the envs each, as units (shoal.vector.hosted): what they hand
# out is Gymnasium's (a final observation the env changes in its reset changes there too), so only here
HOSTED = {
    "VecEnv hosted": lambda fns: shoal.sb3.VecEnv(shoal.make(
        [functools.partial(_units, fns[: len(fns) // 2]), functools.partial(_units, fns[len(fns) // 2 :])],
        autoreset_mode="same_step",
    )),
}


@pytest.mark.parametrize("obs,act", CASES)
@pytest.mark.parametrize("build", list(BUILDS) + list(HOSTED))
def test_adapter_equals_sb3_dummy_vec_env(obs, act, build):
    ref = DummyVecEnv(_fns(obs, act))
    envs = {**BUILDS, **HOSTED}[build](_fns(obs, act))
    assert envs.observation_space == ref.observation_space and envs.action_space == ref.action_space
    assert envs.num_envs == ref.num_envs and envs.render_mode == ref.render_mode
    ref.action_space.seed(0)
    for vec in (ref, envs):
        assert vec.seed(3) == [3, 4, 5, 6]
    assert_same(envs.reset(), ref.reset())
    assert envs.reset_infos == [{k: v for k, v in i.items()} for i in ref.reset_infos]
    dones = 0
    for t in range(40):
        actions = [ref.action_space.sample() for _ in range(4)]  # SB3's form: actions[i] is env i's
        if isinstance(ref.action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            actions = np.array(actions)  # what SB3's algorithms pass for array spaces
        got, want = envs.step(actions), ref.step(actions)
        assert_same(got[0], want[0], f"obs at step {t}")
        assert_same(got[1], want[1], f"rewards at step {t}")
        assert_same(got[2], want[2], f"dones at step {t}")
        for i, (g, w) in enumerate(zip(got[3], want[3])):
            assert set(g) == set(w), (t, i, g, w)
            for key in w:
                assert_same(g[key], w[key], f"infos[{i}][{key!r}] at step {t}")
        for i in np.flatnonzero(want[2]):
            assert_same(envs.reset_infos[i], ref.reset_infos[i])
        dones += int(want[2].sum())
    assert dones >= 4
    envs.close()
    ref.close()


def test_attributes_and_methods_reach_only_the_envs_named():
    envs = shoal.sb3.VecEnv(shoal.make(_fns("box_f32", "discrete"), autoreset_mode="same_step", num_workers=2))
    envs.reset()
    assert envs.get_attr("tag") == ["initial"] * 4
    envs.set_attr("tag", "x", indices=[1, 3])
    assert envs.get_attr("tag") == ["initial", "x", "initial", "x"]
    assert envs.get_attr("tag", indices=2) == ["initial"]
    assert envs.env_method("scaled", 3, indices=[0, 2]) == [0, 0]
    assert envs.env_is_wrapped(gym.wrappers.TimeLimit) == [False] * 4
    envs.close()
    wrapped = shoal.sb3.VecEnv(shoal.make("CartPole-v1", 2, autoreset_mode="same_step", backend="serial"))
    assert wrapped.env_is_wrapped(gym.wrappers.TimeLimit) == [True, True]
    wrapped.close()


@pytest.mark.parametrize("build", ["DummyVecEnv", "SubprocVecEnv"])
def test_drop_ins_have_sb3s_public_attributes(build):
    # what code reads off SB3's classes; not their machinery: DummyVecEnv's buffers (buf_obs, ...; shoal's are shared
    # memory) and SubprocVecEnv's pipes and processes (several envs per worker here)
    machinery = {"buf_obs", "buf_dones", "buf_rews", "buf_infos", "keys", "remotes", "work_remotes", "processes"}
    fns = _fns("box_f32", "discrete", 2)
    ref, envs = getattr(sb3_vec_env, build)(fns), getattr(shoal.sb3, build)(fns)
    missing = public_names(ref) - machinery - set(dir(envs))
    for vec in (ref, envs):
        vec.reset()
        vec.step_async(np.zeros(2, np.int64))
        if build == "SubprocVecEnv":
            assert vec.waiting and not vec.closed
        vec.step_wait()
        if build == "SubprocVecEnv":
            assert not vec.waiting
        vec.close()
        if build == "SubprocVecEnv":
            assert vec.closed
    assert not missing


def test_negative_indices_count_from_the_end_as_in_sb3():
    ref, envs = DummyVecEnv(_fns("box_f32", "discrete", 3)), shoal.sb3.SubprocVecEnv(_fns("box_f32", "discrete", 3))
    for vec in (ref, envs):
        vec.reset()
        vec.set_attr("tag", "last", indices=[-1])
        assert vec.get_attr("tag") == ["initial", "initial", "last"]
        assert vec.env_method("scaled", 2, indices=[0, -3]) == [0, 0]
        with pytest.raises(IndexError):
            vec.get_attr("tag", indices=[3])
        vec.close()


def test_per_env_reset_options_reach_their_envs():
    ref, envs = DummyVecEnv(_fns("box_f32", "discrete")), shoal.sb3.DummyVecEnv(_fns("box_f32", "discrete"))
    for vec in (ref, envs):
        vec.seed(7)
        vec.set_options([{"note": "a"}, {"note": "b"}, {"note": "a"}, {}])
    assert_same(envs.reset(), ref.reset())
    assert envs.reset_infos == ref.reset_infos
    assert [i.get("note") for i in envs.reset_infos] == ["a", "b", "a", None]
    envs.reset()  # options apply to one reset only
    assert [i.get("note") for i in envs.reset_infos] == [None] * 4
    envs.close()
    ref.close()


def test_drop_ins_take_sb3s_place_in_make_vec_env():
    from stable_baselines3.common.env_util import make_vec_env

    for cls in (shoal.sb3.DummyVecEnv, shoal.sb3.SubprocVecEnv):
        ours = make_vec_env("CartPole-v1", n_envs=3, seed=0, vec_env_cls=cls)
        ref = make_vec_env("CartPole-v1", n_envs=3, seed=0)
        assert isinstance(ours, cls) and isinstance(ours.venv_shoal, shoal.vector.base.VectorEnv)
        assert_same(ours.reset(), ref.reset())
        for _ in range(30):
            got, want = ours.step(np.array([1, 0, 1])), ref.step(np.array([1, 0, 1]))
            for g, w in zip(got[:3], want[:3]):
                assert_same(g, w)
        ours.close()
        ref.close()
    dummy = shoal.sb3.DummyVecEnv(_fns("box_f32", "discrete", 2))
    assert [env.max_steps for env in dummy.envs] == [5, 6]  # the envs themselves, as on SB3's DummyVecEnv
    dummy.close()
    with pytest.raises(ConfigError, match=r"cannot find context for 'illegal_method'"):
        shoal.sb3.SubprocVecEnv(_fns("box_f32", "discrete", 2), start_method="illegal_method")


def test_a_constructor_that_returns_one_env_twice_is_refused():
    env = SpaceEnv("box_f32", "discrete")
    for build in (shoal.sb3.DummyVecEnv, lambda fns: shoal.make(fns, num_workers=2)):
        with pytest.raises(ConfigError, match=r"env_fns\[1\] returned the same env object as env_fns\[0\]"):
            build([lambda: env] * 4)


def test_per_env_actions_of_a_dict_space_must_be_one_per_env():
    envs = shoal.sb3.DummyVecEnv(_fns("box_f32", "dict", 2))
    envs.reset()
    one = envs.action_space.sample()
    with pytest.raises(ActionError, match=r"expected one action of Dict.* per env \(2; SB3's form"):
        envs.step([one])
    with pytest.raises(ActionError, match=r"could not batch them"):
        envs.step([one, {"pos": one["pos"]}])
    envs.close()


@pytest.mark.parametrize("build", ["DummyVecEnv", "SubprocVecEnv"])
def test_a_wrapper_that_rewrites_terminal_observations_leaves_the_env_alone(build):
    # SB3's SimpleMultiObsEnv returns its own stored dicts as observations; VecFrameStack rewrites each
    # terminal_observation dict in place. A terminal observation that is the env's own dict would change what the env
    # returns from then on (here: a stacked (3, 64, 64) image where its space says (1, 64, 64))
    from stable_baselines3.common.envs.multi_input_envs import SimpleMultiObsEnv
    from stable_baselines3.common.vec_env import VecFrameStack

    def make():
        return SimpleMultiObsEnv(random_start=True, discrete_actions=True, channel_last=False)

    envs = VecFrameStack(BUILDS[build]([make, make]), n_stack=3, channels_order={"vec": None, "img": "first"})
    envs.seed(0)
    envs.reset()
    rng, dones = np.random.default_rng(0), 0
    for _ in range(400):
        obs, _, done, infos = envs.step(rng.integers(0, 4, 2))
        assert obs["img"].shape == (2, 3, 64, 64)
        for i in np.flatnonzero(done):
            assert infos[i]["terminal_observation"]["img"].shape == (3, 64, 64)
        dones += int(done.sum())
    assert dones >= 4
    envs.close()


class KeepsItsInfo(gym.Env):
    """Returns the info dict it keeps from every step of an episode, its arrays updated in place (``count``: 1 a
    reset or step; ``moves``: the actions taken); a new one from each reset. Truncated every 4 steps."""

    observation_space = gym.spaces.Box(0, 10, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.count = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.count = 0, self.count + 1
        self.info = {"count": np.array([self.count]), "nested": {"moves": np.zeros(2, np.int64)}}
        return np.zeros(1, np.float32), self.info

    def step(self, action):
        self.t, self.count = self.t + 1, self.count + 1
        self.info["count"][0] = self.count
        self.info["nested"]["moves"][action] += 1
        return np.full(1, self.t, np.float32), 1.0, False, self.t == 4, self.info


@pytest.mark.parametrize("build", ["VecEnv serial", "VecEnv mp", "DummyVecEnv"])
def test_infos_are_each_steps_own_when_the_env_keeps_one_dict(build):
    # SB3's DummyVecEnv deep-copies the infos it hands out; shoal copies what Gymnasium's vector form would (arrays,
    # dicts). An info that is the env's own dict would change under the caller at the next reset or step
    envs = BUILDS[build]([KeepsItsInfo, KeepsItsInfo])
    envs.reset()
    steps, resets = [], {}
    for t in range(1, 10):
        _, _, dones, infos = envs.step(np.array([t % 2, 1]))
        steps.append(infos)
        for i in np.flatnonzero(dones):
            resets[t, i] = envs.reset_infos[i]
    # the count after step t: the first reset, t steps and a reset after every 4th step
    assert [info[0]["count"].tolist() for info in steps] == [[1 + t + (t - 1) // 4] for t in range(1, 10)]
    assert [info[0]["nested"]["moves"].tolist() for info in steps][3:5] == [[2, 2], [0, 1]]
    assert [info[1]["nested"]["moves"].tolist() for info in steps][3:5] == [[0, 4], [0, 1]]
    assert {k: r["count"].tolist() for k, r in resets.items()} == {(4, 0): [6], (4, 1): [6], (8, 0): [11], (8, 1): [11]}
    assert [sorted(info[0]) for info in steps[3:5]] == [
        ["TimeLimit.truncated", "count", "nested", "terminal_observation"], ["TimeLimit.truncated", "count", "nested"]
    ]
    if build == "DummyVecEnv":  # nothing was written into the env's own dict
        assert sorted(envs.envs[0].info) == ["count", "nested"]
    envs.close()


@pytest.mark.parametrize("build", list(BUILDS))
def test_a_done_envs_info_and_terminal_observation_are_its_last_steps_when_the_env_reuses_them(build):
    # The env changes the observation and info dict it returned in the reset that follows (SB3's own DummyVecEnv
    # hands out the reset's values as the terminal_observation of such an env: it copies after the reset)
    envs = BUILDS[build]([KeepsItsOutputs] * 2)
    envs.reset()
    for _ in range(3):
        obs, _, dones, infos = envs.step(np.zeros(2, np.int64))
    envs.close()
    assert dones.all()
    np.testing.assert_array_equal(obs, np.full((2, 2), -1))  # the reset's
    for i in range(2):
        np.testing.assert_array_equal(infos[i]["terminal_observation"], [3, 3])
        assert (infos[i]["phase"], infos[i]["t"], infos[i]["inner"]["t"]) == ("step", 3, 3)
        np.testing.assert_array_equal(infos[i]["trace"], [3, 3])
        assert (envs.reset_infos[i]["phase"], envs.reset_infos[i]["t"]) == ("reset", -1)


def test_the_ale_py_drop_in_in_same_step_mode_hands_sb3_its_final_observations():
    # shoal.ale_py's AtariVectorEnv reports final observations in ale-py's form (a dense array, no mask); the adapter
    # reads them from the step itself, so each done env's terminal_observation is the last frame of its episode
    from gymnasium.vector import AutoresetMode

    import shoal.ale_py

    def make():
        return shoal.ale_py.AtariVectorEnv(
            "breakout", 2, autoreset_mode=AutoresetMode.SAME_STEP, max_num_frames_per_episode=60, backend="serial"
        )

    envs, ref = shoal.sb3.VecEnv(make()), make()
    envs.seed(1)
    assert_same(envs.reset(), ref.reset(seed=[1, 2])[0])
    ends = 0
    for t in range(40):
        actions = np.array([1, 3])
        obs, rewards, dones, infos = envs.step(actions)
        want_obs, want_rewards, terminated, truncated, want = ref.step(actions)
        assert_same(obs, want_obs, f"obs at step {t}")
        np.testing.assert_array_equal(rewards, want_rewards.astype(np.float32))
        np.testing.assert_array_equal(dones, terminated | truncated)
        for i in np.flatnonzero(dones):
            assert_same(infos[i]["terminal_observation"], want["final_obs"][i], f"env {i} at step {t}")
            assert not np.array_equal(infos[i]["terminal_observation"], obs[i])  # not the new episode's first
            assert infos[i]["TimeLimit.truncated"] == bool(truncated[i])
            ends += 1
    assert ends >= 4
    envs.close()
    ref.close()


def test_ppo_trains_on_shoal():
    from stable_baselines3 import PPO

    envs = shoal.sb3.VecEnv(shoal.make("CartPole-v1", 4, autoreset_mode="same_step", num_workers=2, seed=0))
    model = PPO("MlpPolicy", envs, n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=512)
    assert model.num_timesteps >= 512
    envs.close()


@pytest.mark.parametrize("build", list(BUILDS))
def test_ppo_with_vec_normalize_on_mujoco_learns_what_it_learns_on_sb3s_dummy_vec_env(build):
    """The code people run for continuous control: PPO over VecNormalize over a vector env of MuJoCo's HalfCheetah,
    with episodes cut short so that PPO bootstraps from ``terminal_observation``s. Trained with the same seed on
    shoal and on SB3's own DummyVecEnv, the policy's parameters and VecNormalize's statistics are bit for bit equal."""
    pytest.importorskip("mujoco", reason="the test extra installs it (gymnasium[mujoco])")
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    fns = [functools.partial(gym.make, "HalfCheetah-v5", max_episode_steps=20 + 7 * i) for i in range(4)]

    def train(vec):
        envs = VecNormalize(vec)
        model = PPO("MlpPolicy", envs, n_steps=32, batch_size=64, n_epochs=2, seed=0, device="cpu")
        model.learn(total_timesteps=256)
        envs.close()
        return [p.detach() for p in model.policy.parameters()], envs.obs_rms.mean, envs.ret_rms.var

    want, got = train(DummyVecEnv(fns)), train(BUILDS[build](fns))
    assert all(torch.equal(g, w) for g, w in zip(got[0], want[0], strict=True))
    assert_same(got[1:], want[1:])


@pytest.mark.parametrize("build", list(BUILDS))
def test_her_on_a_goal_env_learns_what_it_learns_on_sb3s_dummy_vec_env(build):
    """Hindsight experience replay, SB3's for goal-conditioned envs: SAC with its ``HerReplayBuffer`` on
    Gymnasium-Robotics' PointMaze (Dict observations of goals, episodes cut short at different steps so that the
    buffer stores ``terminal_observation``s and time-outs). The buffer relabels goals by calling the env's
    ``compute_reward`` through ``env_method``, where the envs are. Trained with the same seed on shoal and on SB3's own
    DummyVecEnv, the policy's parameters are bit for bit equal."""
    pytest.importorskip("gymnasium_robotics", reason="the test extra installs it")
    import torch
    from stable_baselines3 import SAC, HerReplayBuffer

    # (the module:id form imports Gymnasium-Robotics where the env is made, also in a spawned worker)
    fns = [functools.partial(gym.make, "gymnasium_robotics:PointMaze_UMaze-v3", max_episode_steps=15 + 4 * i)
           for i in range(3)]

    def train(vec):
        model = SAC("MultiInputPolicy", vec, replay_buffer_class=HerReplayBuffer, buffer_size=1000, learning_starts=60,
                    batch_size=32, policy_kwargs={"net_arch": [16, 16]}, seed=0, device="cpu")
        model.learn(total_timesteps=150)
        vec.close()
        return [p.detach() for p in model.policy.parameters()]

    want, got = train(DummyVecEnv(fns)), train(BUILDS[build](fns))
    assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))


def test_ppo_cnn_policy_on_atari():
    from stable_baselines3 import PPO

    atari = shoal.AtariVectorEnv(game="pong", num_envs=2, autoreset_mode="same_step", backend="serial")
    model = PPO("CnnPolicy", shoal.sb3.VecEnv(atari), n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=32)
    assert model.num_timesteps >= 32
    atari.close()


def test_adapter_says_what_the_vector_env_must_be():
    with pytest.raises(ConfigError, match=r"make the shoal vector env with autoreset_mode='same_step'"):
        shoal.sb3.VecEnv(shoal.make("CartPole-v1", 2, backend="serial"))
    with shoal.make("CartPole-v1", 4, batch_size=2, autoreset_mode="same_step", num_workers=2) as batches:
        with pytest.raises(ConfigError, match=r"SB3 steps every env each step: .* without batch_size < num_envs"):
            shoal.sb3.VecEnv(batches)
    mixed = shoal.AtariVectorEnv(games=["pong", "breakout"], autoreset_mode="same_step", backend="serial")
    with pytest.raises(ConfigError, match=r"full_action_space=True"):
        shoal.sb3.VecEnv(mixed)
    mixed.close()


def test_multiagent_rows_train_with_sb3():
    from stable_baselines3 import PPO

    from fakes.multiagent import JoinLeave

    envs = shoal.sb3.VecEnv(shoal.make(JoinLeave, 2, autoreset_mode="same_step", backend="serial"))
    assert envs.num_envs == 6  # a row per agent
    envs.reset()
    for t in range(3):
        obs, reward, dones, infos = envs.step(np.ones(6, np.int64))
    # step 3: agent b (rows 1 and 4) is gone: a done padding row, with its own zero observation as terminal one
    np.testing.assert_array_equal(dones, [False, True, False] * 2)
    np.testing.assert_array_equal(infos[1]["terminal_observation"], [0, 0, 0])
    assert infos[0]["t"] == 3 and "terminal_observation" not in infos[0]
    for t in range(3):
        obs, reward, dones, infos = envs.step(np.ones(6, np.int64))
    # step 6 ends each env's episode: rows with an agent in it get their final observation, then the new episode's
    assert dones.all()
    np.testing.assert_array_equal(infos[2]["terminal_observation"], [1006, 2, 1])  # first reset without a seed: 1000
    assert infos[2]["TimeLimit.truncated"] and infos[2]["t"] == 6
    np.testing.assert_array_equal(obs[:3], [[2000, 0, 0], [2000, 1, 0], [0, 0, 0]])  # the new episode, t = 0
    assert envs.reset_infos[0]["hello"] == 0
    model = PPO("MlpPolicy", envs, n_steps=16, batch_size=48, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=96)
    assert model.num_timesteps >= 96
    envs.close()


def test_a_padding_rows_terminal_observation_has_the_observation_spaces_form():
    from fakes.multiagent import DictJoinLeave

    with shoal.make(DictJoinLeave, 2, autoreset_mode="same_step", backend="serial") as rows:
        envs = shoal.sb3.VecEnv(rows)
        envs.reset()
        for t in range(3):
            obs, _, dones, infos = envs.step(np.ones(6, np.int64))
        # step 3: agent b (rows 1 and 4) is gone: its padding row (zeros) as a Dict of a Box and a Tuple, as rows are
        np.testing.assert_array_equal(dones, [False, True, False] * 2)
        for row in (1, 4):
            final = infos[row]["terminal_observation"]
            assert envs.observation_space.contains(final) and set(final) == {"obs", "pair"}
            assert_same(final, {"obs": np.zeros(3, np.int64), "pair": (np.int64(0), np.int64(0))})
        assert "terminal_observation" not in infos[0]


REAL = [env_id for env_id in test_registry.ONE_PER_CLASS if not env_id.startswith(("MiniGrid-", "BabyAI-"))]
"""One id per env class of Gymnasium's and shoal's registries (MiniGrid's missions are strings, which SB3 refuses)."""


@pytest.mark.parametrize("env_id", REAL)
def test_every_registered_env_class_on_the_subproc_drop_in_equals_sb3s_dummy_vec_env(env_id):
    fns = [functools.partial(gym.make, env_id, max_episode_steps=5 + 3 * i) for i in range(4)]
    ref, envs = DummyVecEnv(fns), shoal.sb3.SubprocVecEnv(fns)
    try:
        ref.action_space.seed(0)
        for vec in (ref, envs):
            vec.seed(3)
        assert_same(envs.reset(), ref.reset())
        for t in range(30):
            actions = [ref.action_space.sample() for _ in range(4)]
            if not isinstance(ref.action_space, (gym.spaces.Dict, gym.spaces.Tuple)):
                actions = np.array(actions)  # what SB3's algorithms pass for array spaces
            got, want = envs.step(actions), ref.step(actions)
            for k, what in enumerate(("obs", "rewards", "dones")):
                assert_same(got[k], want[k], f"{what} at step {t}")
            assert [set(g) for g in got[3]] == [set(w) for w in want[3]], t
            for i, (g, w) in enumerate(zip(got[3], want[3])):
                for key in w:
                    assert_same(g[key], w[key], f"infos[{i}][{key!r}] at step {t}")
    finally:
        envs.close()
        ref.close()
