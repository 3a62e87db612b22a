"""EnvPool's tasks that Gymnasium has envs of the same ids for (shoal.envpool.gymnasium_tasks), against the real
EnvPool package: outputs, info keys and episode boundaries like EnvPool's, values like Gymnasium's env by env,
asynchronous batches, partial resets, the dm API, and refusals."""

import numpy as np
import pytest

import gymnasium

from shoal import envpool as ours
from shoal.errors import ConfigError
from test_envpool import make_both, structure

real = pytest.importorskip("envpool", exc_type=ImportError)  # (see test_envpool.py)
pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered by casting:UserWarning")  # EnvPool's own spaces


@pytest.mark.parametrize("task", ["CartPole-v1", "Pendulum-v1", "FrozenLake-v1", "HalfCheetah-v5"])
def test_gymnasium_tasks_outputs_and_info_keys_like_envpool(task):
    """EnvPool's form: one env's spaces (their shapes; the dtypes are the Gymnasium env's), float32 rewards, bool
    flags, int32 env_id and elapsed_step, players, and the task's own infos one value per env (their names are the
    Gymnasium env's: EnvPool's HalfCheetah says reward_run where Gymnasium's says reward_forward)."""
    theirs, mine = make_both(task, num_envs=2)
    try:
        for what in ("observation_space", "action_space"):
            assert type(getattr(mine, what)) is type(getattr(theirs, what))
            assert getattr(mine, what).shape == getattr(theirs, what).shape
        assert mine.single_observation_space is mine.observation_space
        (obs, info), (their_obs, their_info) = mine.reset(), theirs.reset()
        assert obs.shape == their_obs.shape
        action = np.stack([mine.action_space.sample() for _ in range(2)])
        step, their_step = mine.step(action), theirs.step(action.astype(theirs.action_space.dtype))
        assert structure(step[1:4]) == structure(their_step[1:4])
        for got, expected in ((info, their_info), (step[4], their_step[4])):
            assert list(got)[:2] == ["env_id", "players"] and list(got)[-1] == "elapsed_step"
            assert structure({k: got[k] for k in ("env_id", "players", "elapsed_step")}) == \
                structure({k: expected[k] for k in ("env_id", "players", "elapsed_step")})
            assert all(np.shape(v) == (2,) for k, v in got.items() if k != "players")
            if task in ("CartPole-v1", "Pendulum-v1"):  # (no infos of their own)
                assert structure(got) == structure(expected)
        if task == "HalfCheetah-v5":
            assert {"x_position", "x_velocity", "reward_ctrl"} <= set(step[4]) & set(their_step[4])
        if task == "FrozenLake-v1":  # Gymnasium's env reports the transition's probability
            assert step[4]["prob"].shape == (2,)
    finally:
        theirs.close()
        mine.close()


@pytest.mark.parametrize("task, action, kwargs", [
    ("Pendulum-v1", np.zeros((3, 1), np.float32), {}),  # no termination: every episode is truncated at 200 steps
    ("MountainCar-v0", np.ones(3, np.int32), {}),  # no push: never reaches the flag, truncated at 200
    ("MountainCar-v0", np.ones(3, np.int32), {"max_episode_steps": 37}),
])
def test_gymnasium_tasks_episode_boundaries_like_envpool(task, action, kwargs):
    """Where episodes end, their flags, elapsed_step and the autoreset step's reward of 0, step for step as EnvPool's
    (tasks whose episodes end at the limit whatever the dynamics, which differ in their seeding)."""
    theirs, mine = make_both(task, num_envs=3, **kwargs)
    try:
        assert mine.reset()[1]["elapsed_step"].tolist() == theirs.reset()[1]["elapsed_step"].tolist() == [0, 0, 0]
        for t in range(450):
            _, reward, term, trunc, info = mine.step(action)
            _, their_reward, their_term, their_trunc, their_info = theirs.step(action)
            assert (term.tolist(), trunc.tolist(), info["elapsed_step"].tolist()) == \
                (their_term.tolist(), their_trunc.tolist(), their_info["elapsed_step"].tolist()), t
            assert ((reward == 0) == (their_reward == 0)).all(), t
        assert trunc.dtype == term.dtype == np.bool_ and reward.dtype == np.float32
    finally:
        theirs.close()
        mine.close()


def _by_hand(task, seed, num_envs, **env_kwargs):
    """Gymnasium's envs of ``task``, env ``i`` reset with seed ``seed + i`` (EnvPool's seeding), stepped one by one
    with Gymnasium's next-step autoreset: ``step(i, action)`` returns what env ``i`` of a pool should."""
    envs = [gymnasium.make(task, **env_kwargs) for _ in range(num_envs)]
    first = [env.reset(seed=seed + i) for i, env in enumerate(envs)]
    ended = [False] * num_envs

    def step(i, action):
        if ended[i]:
            ended[i] = False
            obs, info = envs[i].reset()
            return obs, 0.0, False, False, info
        obs, reward, term, trunc, info = envs[i].step(action)
        ended[i] = term or trunc
        return obs, reward, term, trunc, info

    return envs, first, step


def test_gymnasium_task_values_are_gymnasiums_env_by_env():
    """Every value of the pool (default backend, an env keyword passed on) is that of Gymnasium's env of the same
    id and keywords, seeded as EnvPool seeds (env i: seed + i), stepped by hand."""
    pool = ours.make("HalfCheetah-v5", num_envs=3, seed=5, num_workers=2, ctrl_cost_weight=0.5,
                     max_episode_steps=40)
    envs, first, step = _by_hand("HalfCheetah-v5", 5, 3, ctrl_cost_weight=0.5, max_episode_steps=40)
    rng = np.random.default_rng(0)
    try:
        obs, info = pool.reset()
        np.testing.assert_array_equal(obs, np.stack([o for o, _ in first]))
        np.testing.assert_array_equal(info["x_position"], [i["x_position"] for _, i in first])
        for t in range(100):
            actions = rng.uniform(-1, 1, (3, 6)).astype(np.float32)
            obs, reward, term, trunc, info = pool.step(actions)
            expected = [step(i, actions[i]) for i in range(3)]
            np.testing.assert_array_equal(obs, np.stack([e[0] for e in expected]), err_msg=str(t))
            np.testing.assert_array_equal(reward, np.array([e[1] for e in expected], np.float32), err_msg=str(t))
            assert trunc.tolist() == [e[3] for e in expected] and not term.any()
            # every batch has every key, zeros where an env's info lacks it (an autoreset's, from reset())
            np.testing.assert_array_equal(info["reward_ctrl"], [e[4].get("reward_ctrl", 0.0) for e in expected])
        # 100 steps: two episodes of 40 steps, each followed by its autoreset (82 steps), then 18 more
        assert info["elapsed_step"].tolist() == [18, 18, 18]
    finally:
        pool.close()
        for env in envs:
            env.close()


def test_gymnasium_task_asynchronous_batches_env_by_env():
    """batch_size < num_envs: each batch's env_id, actions sent back in a shuffled order with their ids, and every
    env's values those of its Gymnasium env stepped by hand with the actions it was sent."""
    pool = ours.make("CartPole-v1", num_envs=4, batch_size=2, num_workers=2, seed=11)
    envs, first, step = _by_hand("CartPole-v1", 11, 4)
    rng = np.random.default_rng(1)
    sent, seen = {}, []
    try:
        pool.async_reset()
        for t in range(300):
            obs, reward, term, trunc, info = pool.recv()
            ids = info["env_id"]
            assert ids.dtype == np.int32 and len(set(ids.tolist())) == 2
            for row, i in enumerate(ids.tolist()):
                if i in sent:
                    o, r, te, tr, _ = step(i, sent.pop(i))
                    assert (reward[row], term[row], trunc[row]) == (r, te, tr), (t, i)
                else:
                    o = first[i][0]
                    assert reward[row] == 0 and info["elapsed_step"][row] == 0
                np.testing.assert_array_equal(obs[row], o, err_msg=f"{t} env {i}")
            actions = rng.integers(0, 2, 2)
            order = rng.permutation(2)
            sent.update(zip(ids.tolist(), actions.tolist()))
            pool.send(actions[order], ids[order])
            seen += ids.tolist()
        assert set(seen) == {0, 1, 2, 3}
    finally:
        pool.close()
        for env in envs:
            env.close()


def test_gymnasium_task_partial_reset_and_gym_api():
    pool = ours.make("CartPole-v1", num_envs=3, backend="serial", seed=np.int64(4))  # (a numpy seed: args.seed)
    try:
        np.testing.assert_array_equal(pool.reset()[0], [gymnasium.make("CartPole-v1").reset(seed=4 + i)[0]
                                                        for i in range(3)])
        for _ in range(4):
            pool.step(np.zeros(3, np.int32))
        obs, info = pool.reset(np.array([2]))  # EnvPool returns the rows of the envs reset
        assert obs.shape == (1, 4) and info["env_id"].tolist() == [2] and info["elapsed_step"].tolist() == [0]
        assert pool.step(np.zeros(3, np.int32))[4]["elapsed_step"].tolist() == [5, 5, 1]
    finally:
        pool.close()
    gym = pytest.importorskip("gym")
    pool = ours.make("CartPole-v1", env_type="gym", num_envs=2, backend="serial")
    try:
        assert isinstance(pool.observation_space, gym.spaces.Box) and pool.observation_space.shape == (4,)
        assert isinstance(pool.action_space, gym.spaces.Discrete) and pool.action_space.n == 2
        first, step = pool.reset(), pool.step(np.zeros(2, np.int32))
        if tuple(int(p) for p in gym.__version__.split(".")[:2]) < (0, 26):  # EnvPool's gym API before gym 0.26
            assert first.shape == (2, 4) and len(step) == 4 and "TimeLimit.truncated" in step[3]
    finally:
        pool.close()


def test_reset_masks_are_taken_and_refused_as_envpool_does():
    """Gymnasium's ``options={"reset_mask": ...}`` on EnvPool's reset: the rows of the envs it sets (integer flags
    too), no mask where it is None; a mask of another length, one that sets none, or another option is refused (a
    mask of two envs for three reset the first alone)."""
    theirs, mine = make_both("CartPole-v1", num_envs=3)
    try:
        for pool in (theirs, mine):
            pool.reset()
        for mask in (np.array([False, True, True]), [1, 0, 1], None):
            got, want = (pool.reset(options={"reset_mask": mask})[1]["env_id"] for pool in (mine, theirs))
            np.testing.assert_array_equal(got, want)
        for options, match in [({"reset_mask": [True, False]}, "shape"),
                               ({"reset_mask": np.zeros(3, bool)}, "(at least|with a) (one environment|True)"),
                               ({"reset_mask": np.ones(3, bool), "seed": 3}, "Unsupported Gymnasium reset options")]:
            for pool in (theirs, mine):
                with pytest.raises(ValueError, match=match):
                    pool.reset(options=options)
        with pytest.raises(ConfigError, match=r"either env_id or options\['reset_mask'\]"):
            mine.reset(np.array([0]), options={"reset_mask": np.ones(3, bool)})
    finally:
        theirs.close()
        mine.close()


@pytest.mark.parametrize("task, action", [("Pendulum-v1", np.zeros((2, 1), np.float32)),
                                          ("MountainCar-v0", np.ones(2, np.int32))])
def test_gymnasium_task_dm_timesteps_like_envpool(task, action):
    """dm_env TimeSteps of a Gymnasium task: the same specs, and step types, discounts and zero rewards at the same
    steps as EnvPool's, across episode ends (by truncation at 200 steps: neither task ends otherwise here)."""
    theirs, mine = make_both(task, env_type="dm", num_envs=2)
    try:
        spec, their_spec = mine.observation_spec(), theirs.observation_spec()
        assert spec.env_id == their_spec.env_id and mine.action_spec() == theirs.action_spec()
        assert spec.obs.shape == their_spec.obs.shape and spec.obs.name == "obs"
        assert spec == tuple(their_spec)  # (no infos of their own; players is a namedtuple of another name)
        for t in range(420):
            got, expected = (mine.reset(), theirs.reset()) if t == 0 else (mine.step(action), theirs.step(action))
            assert got.step_type.tolist() == expected.step_type.tolist(), t
            assert got.discount.tolist() == expected.discount.tolist(), t
            assert ((got.reward == 0) == (expected.reward == 0)).all(), t
            assert got.observation._fields[:3] == ("env_id", "players", "obs")
            assert got.observation.env_id.tolist() == [0, 1] and got.observation.obs.shape[0] == 2
        assert got.reward.dtype == np.float32 and got.discount.dtype == np.float32
    finally:
        theirs.close()
        mine.close()


def test_gymnasium_task_dm_discrete_observation_spec():
    theirs, mine = make_both("FrozenLake-v1", env_type="dm", num_envs=2)
    try:
        spec, their_spec = mine.observation_spec().obs, theirs.observation_spec().obs
        assert (type(spec), spec.num_values, spec.name) == (type(their_spec), 16, "obs")
        assert spec.dtype == mine.observation_space.dtype  # (Gymnasium's int64; EnvPool's int32)
        assert mine.action_spec() == theirs.action_spec()
    finally:
        theirs.close()
        mine.close()


def test_gymnasium_task_dm_state_holds_the_envs_infos_from_the_first_timestep():
    """The State's fields after obs are the env's numeric infos (Gymnasium's names), in every TimeStep from the
    reset on (zeros where an env's info lacks them), with the values the Gymnasium-API pool hands out."""
    dm = ours.make("HalfCheetah-v5", env_type="dm", num_envs=2, seed=3, backend="serial")
    plain = ours.make("HalfCheetah-v5", num_envs=2, seed=3, backend="serial")
    try:
        fields = ("x_position", "x_velocity", "reward_forward", "reward_ctrl")
        assert dm.observation_spec()._fields[3:] == fields
        first, (_, info) = dm.reset(), plain.reset()
        assert first.observation._fields[3:] == fields
        np.testing.assert_array_equal(first.observation.x_position, info["x_position"])
        np.testing.assert_array_equal(first.observation.reward_ctrl, [0.0, 0.0])  # (a reset's info has none)
        action = np.full((2, 6), 0.5, np.float32)
        step, (_, _, _, _, info) = dm.step(action), plain.step(action)
        for field in fields:
            np.testing.assert_array_equal(getattr(step.observation, field), info[field])
    finally:
        dm.close()
        plain.close()


def test_gymnasium_task_refusals_say_what_to_do():
    with pytest.raises(ConfigError, match=r'env_type="dm" describes Box and Discrete spaces; Tuple\(Discrete\(32\)'):
        ours.make("Blackjack-v1", env_type="dm", backend="serial")
    with pytest.raises(ConfigError, match=r"unknown keyword\(s\) \['frame_stack'\] for HalfCheetah-v5: shoal.envpool "
                                          r"runs Gymnasium's HalfCheetah-v5, which takes \[.*'ctrl_cost_weight'"):
        ours.make("HalfCheetah-v5", frame_stack=2)
    with pytest.raises(ConfigError, match=r"num_threads=2 and num_workers=1 disagree"):
        ours.make("CartPole-v1", num_envs=2, num_threads=2, num_workers=1)
    with pytest.raises(ConfigError, match=r"CartPole-v1 has one player; max_num_players=2"):
        ours.make("CartPole-v1", max_num_players=2)
    with pytest.raises(ConfigError, match=r"thread_affinity_offset pins the workers of Atari pools; CartPole-v1's"):
        ours.make("CartPole-v1", thread_affinity_offset=0)
    with pytest.raises(ConfigError, match=r"max_episode_steps must be a positive integer, got 0"):
        ours.make("CartPole-v1", max_episode_steps=0)
    with pytest.raises(ConfigError, match=r"a list of task ids mixes Atari games in one pool; 'CartPole-v1' is one"):
        ours.make(["Pong-v5", "CartPole-v1"], num_envs=2)


def test_num_threads_is_the_number_of_workers():
    # EnvPool's threads step its envs; shoal's workers do (at most one an env)
    for threads, workers in ((2, 2), (8, 4)):
        with ours.make("CartPole-v1", num_envs=4, num_threads=threads) as pool:
            assert pool.envs.num_workers == workers and pool.config["num_threads"] == threads
