"""shoal.supersuit: SuperSuit's vector envs of PettingZoo envs, compared with SuperSuit's own step for step.

The reference is the real SuperSuit stepping the same envs in this process (``num_cpus=0``: its seeding gives env
``e`` the seed ``s + e``, shoal's rule on every backend). The SB3 form needs the ``sb3`` extra (skipped without it).
"""

from __future__ import annotations

import functools
import gc
import threading
import warnings

import numpy as np
import pytest
from fakes.multiagent import JoinLeave, Relay

import shoal.supersuit as sh
from shoal.errors import AgentPresenceError, AgentSpacesError, ConfigError, EnvOutputError, UnpicklableError

ss = pytest.importorskip("supersuit", reason="SuperSuit is the reference here (the test extra installs it)")
from mpe2 import simple_adversary_v3, simple_speaker_listener_v4, simple_spread_v3  # noqa: E402
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # PettingZoo deprecates importing an env module
    from pettingzoo.butterfly import knights_archers_zombies_v11, pistonball_v6

def _pistonball():
    """PettingZoo's SB3 tutorial's preprocessing of pistonball (SuperSuit's wrappers), 4 pistons."""
    env = pistonball_v6.parallel_env(n_pistons=4, max_cycles=9)
    env = ss.color_reduction_v0(env, mode="B")
    env = ss.resize_v1(env, x_size=84, y_size=84)
    return ss.frame_stack_v1(env, 3)


ENVS = {
    "relay": Relay,  # infos on every step and reset, episodes of 2-4 steps, terminated and truncated
    "relay black death": lambda: ss.black_death_v3(Relay(leave=True)),  # an agent that is done before the others
    "simple_spread": functools.partial(simple_spread_v3.parallel_env, max_cycles=7),
    "simple_spread continuous": functools.partial(simple_spread_v3.parallel_env, max_cycles=5, continuous_actions=True),
    "kaz black death": lambda: ss.black_death_v3(knights_archers_zombies_v11.parallel_env(max_cycles=12)),
    "pistonball images": _pistonball,
    # agents of different spaces made alike by SuperSuit's pad wrappers: the speaker's actions past its 3 words are
    # its action 0 there (shoal.make's own rows refuse them instead: shoal.multiagent)
    "speaker_listener padded": lambda: ss.pad_action_space_v0(
        ss.pad_observations_v0(simple_speaker_listener_v4.parallel_env(max_cycles=6))
    ),
}


def _same(a, b):
    """Equal values: arrays by value and dtype, dicts key by key."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype
    return type(a) is type(b) and a == b


def _actions(space, n, rng):
    space.seed(int(rng.integers(2**31)))
    return np.stack([space.sample() for _ in range(n)])


@pytest.mark.parametrize("num_cpus", [0, 2])
@pytest.mark.parametrize("name", list(ENVS))
def test_gymnasium_form_equals_supersuit(name, num_cpus):
    make = ENVS[name]
    ref = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(make()), 3, num_cpus=0, base_class="gymnasium")
    envs = sh.concat_vec_envs_v1(sh.pettingzoo_env_to_vec_env_v1(make()), 3, num_cpus=num_cpus)
    try:
        assert (envs.num_envs, envs.observation_space, envs.action_space) == (
            ref.num_envs, ref.observation_space, ref.action_space)
        assert envs.metadata == ref.metadata
        obs, infos = envs.reset(seed=5)
        obs_ref, infos_ref = ref.reset(seed=5)
        np.testing.assert_array_equal(obs, obs_ref)
        assert obs.dtype == obs_ref.dtype
        assert infos == infos_ref
        rng = np.random.default_rng(0)
        ends = 0
        for step in range(14):
            actions = _actions(envs.action_space, envs.num_envs, rng)
            obs, rew, term, trunc, infos = envs.step(actions)
            obs_ref, rew_ref, term_ref, trunc_ref, infos_ref = ref.step(actions)
            np.testing.assert_array_equal(obs, obs_ref, err_msg=f"step {step}")
            np.testing.assert_array_equal(rew, rew_ref)
            assert rew.dtype == np.float32 and term.dtype == trunc.dtype == np.bool_
            np.testing.assert_array_equal(term, term_ref.astype(bool))
            np.testing.assert_array_equal(trunc, trunc_ref.astype(bool))
            for row, (info, info_ref) in enumerate(zip(infos, infos_ref)):
                assert _same(info, info_ref), f"step {step}, row {row}: {info} != {info_ref}"
            ends += int(np.sum(term | trunc))
        assert ends > 0  # episodes ended, and their rows' infos (terminal_observation, merged infos) were compared
    finally:
        envs.close()
        ref.close()


def test_merged_infos_of_an_ended_episode():
    """The rows of an env reset in a step hold the last step's info, its terminal_observation, then the reset's
    info over them (Relay's ``t`` is in both: the reset's -1 wins), as SuperSuit merges them."""
    envs = sh.concat_vec_envs_v1(sh.pettingzoo_env_to_vec_env_v1(Relay()), 2, num_cpus=2)
    try:
        envs.reset(seed=0)  # env 0: episode 0 ends at step 2, terminated; env 1: episode 1 at step 3, truncated
        envs.step(np.zeros(4, np.int64))
        obs, rew, term, trunc, infos = envs.step(np.array([1, 2, 0, 0]))
        assert term.tolist() == [True, True, False, False] and not trunc.any()
        assert {k: v for k, v in infos[1].items() if k != "terminal_observation"} == {
            "t": -1, "agent": 1, "episode": 1}
        np.testing.assert_array_equal(infos[1]["terminal_observation"], [0, 2, 1, 2])  # episode 0, t 2, y, action 2
        np.testing.assert_array_equal(obs[:2], [[1, 0, 0, 0], [1, 0, 1, 0]])  # episode 1's start
        assert infos[2] == {"t": 2, "agent": 0}
    finally:
        envs.close()


def test_markov_vector_env_steps_the_env_itself():
    """pettingzoo_env_to_vec_env_v1 alone: the env given, stepped in this process, as SuperSuit's."""
    env, env_ref = Relay(), Relay()
    mine, ref = sh.pettingzoo_env_to_vec_env_v1(env), ss.pettingzoo_env_to_vec_env_v1(env_ref)
    obs, infos = mine.reset(seed=1)
    obs_ref, infos_ref = ref.reset(seed=1)
    np.testing.assert_array_equal(obs, obs_ref)
    for step in range(7):
        out, out_ref = mine.step(np.array([step % 3, 1])), ref.step(np.array([step % 3, 1]))
        for a, b in zip(out[:4], out_ref[:4]):
            np.testing.assert_array_equal(a, b)
        assert all(_same(i, j) for i, j in zip(out[4], out_ref[4]))
        assert env.episode == env_ref.episode and env.t == env_ref.t  # the very env given was stepped
    mine.close()
    assert env.closed  # (Relay notes its close)


def test_converting_leaves_the_env_alone():
    """pettingzoo_env_to_vec_env_v1 then concat_vec_envs_v1, the usual way: the env given is copied, never stepped,
    reset or closed (the converted env, dropped, does not close it either)."""
    env = Relay()
    env.reset(seed=4)
    envs = sh.concat_vec_envs_v1(sh.pettingzoo_env_to_vec_env_v1(env), 2, num_cpus=0)
    try:
        gc.collect()
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))
        assert (env.episode, env.t, env.closed) == (4, 0, False)
    finally:
        envs.close()
    assert not env.closed


def test_copies_are_the_env_as_it_was():
    """The copies are the env as it was, state and all (SuperSuit cloudpickles it): PettingZoo's tutorials reset the
    env with a seed before converting it, and resets without one then go on from there (Relay counts episodes on
    from its seed) in every copy alike, as in SuperSuit's."""
    env = Relay()
    env.reset(seed=11)
    ref = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(env), 2, base_class="gymnasium")
    envs = sh.concat_vec_envs_v1(sh.pettingzoo_env_to_vec_env_v1(env), 2, num_cpus=2)
    try:
        obs, _ = envs.reset()
        np.testing.assert_array_equal(obs, ref.reset()[0])
        assert obs[:, 0].tolist() == [12] * 4  # the episode after seed 11's, in both copies
        for _ in range(9):
            np.testing.assert_array_equal(envs.step(np.ones(4, np.int64))[0], ref.step(np.ones(4, np.int64))[0])
    finally:
        envs.close()
        ref.close()


def test_render_is_the_first_env_s():
    make = functools.partial(simple_spread_v3.parallel_env, render_mode="rgb_array")
    ref = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(make()), 2)
    envs = sh.concat_vec_envs_v1(sh.pettingzoo_env_to_vec_env_v1(make()), 2, num_cpus=2)
    try:
        assert envs.render_mode == ref.render_mode == "rgb_array"
        ref.reset(seed=1)
        envs.reset(seed=1)
        frame = envs.render()
        assert frame.shape == (700, 700, 3)
        np.testing.assert_array_equal(frame, ref.render())
    finally:
        envs.close()
        ref.close()


def test_refused_as_supersuit_refuses():
    with pytest.raises(AgentSpacesError, match=r"one observation space for every agent.*pad_observations_v0"):
        sh.pettingzoo_env_to_vec_env_v1(simple_adversary_v3.parallel_env())
    with pytest.raises(AssertionError):  # SuperSuit refuses it too, and code that catches its refusal catches shoal's
        ss.pettingzoo_env_to_vec_env_v1(simple_adversary_v3.parallel_env())
    assert issubclass(AgentSpacesError, AssertionError) and issubclass(AgentSpacesError, ConfigError)
    assert issubclass(AgentPresenceError, AssertionError) and issubclass(AgentPresenceError, EnvOutputError)
    with pytest.raises(AgentSpacesError, match=r"one action space for every agent.*pad_action_space_v0"):
        sh.pettingzoo_env_to_vec_env_v1(ss.pad_observations_v0(simple_speaker_listener_v4.parallel_env()))
    with pytest.raises(ConfigError, match="expected a PettingZoo ParallelEnv, got OrderEnforcingWrapper"):
        sh.pettingzoo_env_to_vec_env_v1(simple_spread_v3.env())
    locked = Relay()
    locked.lock = threading.Lock()
    with pytest.raises(UnpicklableError, match=r"the env \(Relay\) cannot be copied: cloudpickle refused it"):
        sh.concat_vec_envs_v1(sh.pettingzoo_env_to_vec_env_v1(locked), 2)
    vec = sh.pettingzoo_env_to_vec_env_v1(Relay())
    with pytest.raises(ConfigError, match="base_class: expected one of .*got 'gym'"):
        sh.concat_vec_envs_v1(vec, 2, base_class="gym")
    with pytest.raises(ConfigError, match="vec_env: expected what pettingzoo_env_to_vec_env_v1 returns, got Relay"):
        sh.concat_vec_envs_v1(Relay(), 2)
    with pytest.raises(ConfigError, match="num_vec_envs must be a positive integer, got 0"):
        sh.concat_vec_envs_v1(vec, 0)
    with pytest.raises(ConfigError, match="num_cpus must be a non-negative integer, got -1"):
        sh.concat_vec_envs_v1(vec, 2, num_cpus=-1)
    absent = Relay()
    absent.possible_agents = []
    with pytest.raises(ConfigError, match="Relay has no possible_agents; each possible agent is a row"):
        sh.pettingzoo_env_to_vec_env_v1(absent)


FORMS = ["gymnasium", "stable_baselines3"]


def _form(base_class):
    if base_class == "stable_baselines3":
        pytest.importorskip("stable_baselines3", reason="Stable-Baselines3 is the sb3 extra: pip install 'shoal[sb3]'")
    return base_class


def _step(envs, actions):
    if hasattr(envs, "step_async") and not isinstance(envs, sh.ConcatVecEnv):  # SB3's form
        envs.step_async(actions)
        return envs.step_wait()
    return envs.step(actions)


@pytest.mark.parametrize("base_class", FORMS)
@pytest.mark.parametrize("num_cpus", [0, 2])
def test_a_done_agent_in_an_env_that_goes_on_is_an_error_naming_it(num_cpus, base_class):
    """An agent done before its env's episode ends: SuperSuit fails an assert in that step, shoal says which env and
    agent, and how to keep the agent (black_death_v3)."""
    ref = ss.pettingzoo_env_to_vec_env_v1(Relay(leave=True))
    ref.reset(seed=0)
    with pytest.raises(AssertionError, match="varying numbers of active agents"):
        ref.step(np.zeros(2, np.int64))
    vec = sh.pettingzoo_env_to_vec_env_v1(Relay(leave=True))
    envs = sh.concat_vec_envs_v1(vec, 2, num_cpus=num_cpus, base_class=_form(base_class))
    try:
        envs.seed(2) if base_class == "stable_baselines3" else None
        envs.reset() if base_class == "stable_baselines3" else envs.reset(seed=2)  # episodes of 4 and 2 steps
        message = r"env 0: agent 'y' \(row 1\) is done or absent before .*black_death_v3"
        with pytest.raises(AgentPresenceError, match=message) as err:
            _step(envs, np.zeros(4, np.int64))  # y leaves at step 1
        assert err.value.env_id == 0
    finally:
        envs.close()


@pytest.mark.parametrize("base_class", FORMS)
def test_an_episode_that_ends_with_agents_not_done_is_an_error(base_class):
    """An env whose agents list empties without its agents terminated or truncated: SuperSuit fails an assert; shoal's
    rows refuse it on any vector env (shoal.multiagent), naming the env and the agent."""
    ref = ss.pettingzoo_env_to_vec_env_v1(Relay(vanish=True))
    ref.reset(seed=0)
    ref.step(np.zeros(2, np.int64))
    with pytest.raises(AssertionError, match="varying numbers of active agents"):
        ref.step(np.zeros(2, np.int64))  # episode 0 ends at step 2
    envs = sh.concat_vec_envs_v1(sh.pettingzoo_env_to_vec_env_v1(Relay(vanish=True)), 2, base_class=_form(base_class))
    try:
        envs.seed(0) if base_class == "stable_baselines3" else None
        envs.reset() if base_class == "stable_baselines3" else envs.reset(seed=0)
        _step(envs, np.zeros(4, np.int64))
        with pytest.raises(EnvOutputError, match=r"env 0 .*agent 'x' from step\(\): .* then an empty agents list"):
            _step(envs, np.zeros(4, np.int64))
    finally:
        envs.close()


@pytest.mark.parametrize("base_class", FORMS)
def test_an_agent_absent_at_reset_is_an_error_naming_it(base_class):
    ref = ss.pettingzoo_env_to_vec_env_v1(JoinLeave())
    with pytest.raises(AssertionError, match="environment has agent death"):
        ref.reset(seed=0)
    envs = sh.concat_vec_envs_v1(sh.pettingzoo_env_to_vec_env_v1(JoinLeave()), 2, base_class=_form(base_class))
    try:
        with pytest.raises(AgentPresenceError, match=r"env 0: agent 'c' \(row 2\) is done or absent"):
            envs.reset()  # c joins after step 2
    finally:
        envs.close()


def test_supersuit_s_other_names_are_its_own():
    assert sh.black_death_v3 is ss.black_death_v3 and sh.frame_stack_v1 is ss.frame_stack_v1
    with pytest.raises(AttributeError, match="no attribute 'no_such_wrapper_v0' \\(nor has SuperSuit\\)"):
        sh.no_such_wrapper_v0  # noqa: B018


def test_gym_vec_env_equals_supersuit_s():
    import gymnasium as gym

    for multiprocessing in (False, True):
        env = gym.make("CartPole-v1")
        mine, ref = sh.gym_vec_env_v0(env, 3, multiprocessing), ss.gym_vec_env_v0(env, 3, multiprocessing)
        try:
            np.testing.assert_array_equal(mine.reset(seed=4)[0], ref.reset(seed=4)[0])
            for step in range(30):
                a = np.array([step % 2, 1, 0])
                for x, y in zip(mine.step(a)[:4], ref.step(a)[:4]):
                    np.testing.assert_array_equal(x, y)
        finally:
            mine.close()
            ref.close()


def test_stable_baselines3_vec_env_equals_supersuit_s():
    pytest.importorskip("stable_baselines3", reason="Stable-Baselines3 is the sb3 extra: pip install 'shoal[sb3]'")
    import gymnasium as gym

    for multiprocessing in (False, True):
        env = gym.make("CartPole-v1")
        mine = sh.stable_baselines3_vec_env_v0(env, 3, multiprocessing)
        ref = ss.stable_baselines3_vec_env_v0(env, 3, multiprocessing)
        try:
            assert type(mine).__name__ == type(ref).__name__  # DummyVecEnv, SubprocVecEnv
            mine.seed(4)
            ref.seed(4)
            np.testing.assert_array_equal(mine.reset(), ref.reset())
            for step in range(30):
                a = np.array([step % 2, 1, 0])
                mine.step_async(a)
                ref.step_async(a)
                (obs, rew, done, infos), (obs_ref, rew_ref, done_ref, infos_ref) = mine.step_wait(), ref.step_wait()
                for x, y in ((obs, obs_ref), (rew, rew_ref), (done, done_ref)):
                    np.testing.assert_array_equal(x, y)
                assert [sorted(i) for i in infos] == [sorted(i) for i in infos_ref]
        finally:
            mine.close()
            ref.close()


# -- the SB3 form ---------------------------------------------------------------------------------------------------


def test_sb3_form_equals_supersuit_s():
    """base_class="stable_baselines3", as PettingZoo's tutorials use it: the env reset with a seed, then converted;
    SB3's form (dones, per-row infos with terminal_observation, reset_infos) equals SuperSuit's, less the
    ``TimeLimit.truncated`` shoal adds (SuperSuit's lack it, so SB3 never bootstraps from their truncations)."""
    pytest.importorskip("stable_baselines3", reason="Stable-Baselines3 is the sb3 extra: pip install 'shoal[sb3]'")
    env = Relay()
    env.reset(seed=3)
    ref = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(env), 3, num_cpus=0, base_class="stable_baselines3")
    envs = sh.concat_vec_envs_v1(sh.pettingzoo_env_to_vec_env_v1(env), 3, num_cpus=2, base_class="stable_baselines3")
    try:
        assert envs.unwrapped.metadata["name"] == ref.unwrapped.metadata["name"] == "relay_v0"
        np.testing.assert_array_equal(envs.reset(), ref.reset())
        assert envs.reset_infos == ref.reset_infos
        truncations = 0
        for step in range(12):
            actions = np.arange(6) % 3
            envs.step_async(actions)
            ref.step_async(actions)
            obs, rew, dones, infos = envs.step_wait()
            obs_ref, rew_ref, dones_ref, infos_ref = ref.step_wait()
            np.testing.assert_array_equal(obs, obs_ref)
            np.testing.assert_array_equal(rew, rew_ref)
            np.testing.assert_array_equal(dones, dones_ref)
            for row, (info, info_ref) in enumerate(zip(infos, infos_ref)):
                cut = info.pop("TimeLimit.truncated")
                assert cut == (dones[row] and bool(obs_ref[row][0] % 2 == 0))  # the episode that ended was odd
                truncations += cut
                assert _same(info, info_ref), f"step {step}, row {row}"
        assert truncations > 0
    finally:
        envs.close()
        ref.close()


def test_sb3_seeds_reach_the_envs():
    """SB3's ``seed(s)`` (what ``PPO(seed=s)`` calls) seeds the rows as SB3 seeds envs, ``s + row``, each env taking
    its first row's; SuperSuit's SB3 form has no ``seed`` (an AttributeError, so ``PPO(seed=...)`` fails there)."""
    pytest.importorskip("stable_baselines3", reason="Stable-Baselines3 is the sb3 extra: pip install 'shoal[sb3]'")
    ref = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(Relay()), 2, base_class="stable_baselines3")
    with pytest.raises(AttributeError, match="has no attribute 'seed'"):
        ref.seed(3)
    vec = sh.pettingzoo_env_to_vec_env_v1(Relay())
    envs = sh.concat_vec_envs_v1(vec, 3, num_cpus=2, base_class="stable_baselines3")
    try:
        assert envs.seed(10) == [10, 11, 12, 13, 14, 15]
        assert envs.reset()[:, 0].tolist() == [10, 10, 12, 12, 14, 14]  # Relay's first episode is its seed
    finally:
        envs.close()


def test_ppo_trains_on_the_sb3_form():
    """PettingZoo's KAZ tutorial's steps (black_death_v3, vector observations), with the import changed."""
    pytest.importorskip("stable_baselines3", reason="Stable-Baselines3 is the sb3 extra: pip install 'shoal[sb3]'")
    from stable_baselines3 import PPO

    env = sh.black_death_v3(knights_archers_zombies_v11.parallel_env(max_cycles=20, max_zombies=4))
    env.reset(seed=0)
    envs = sh.concat_vec_envs_v1(sh.pettingzoo_env_to_vec_env_v1(env), 2, num_cpus=2, base_class="stable_baselines3")
    model = PPO("MlpPolicy", envs, n_steps=32, batch_size=64, n_epochs=1, seed=0)
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(total_timesteps=256)  # 8 rows x 32 steps: every env's episode ends (20 cycles) and is reset
    assert model.num_timesteps == 256
    assert any(not (a == b).all() for a, b in zip(before, model.policy.parameters()))
    assert envs.unwrapped.metadata["name"] == "knights_archers_zombies_v11"
    envs.close()
