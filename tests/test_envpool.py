"""shoal.envpool against the real EnvPool package: task ids, defaults, spaces, info keys and dtypes, episode
boundaries under episodic_life, asynchronous batches; and the unmodified cleanrl script that uses it."""

import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import gymnasium

from shoal import envpool as ours
from shoal.envpool.gymnasium_tasks import DEFAULTS as GYMNASIUM_DEFAULTS
from shoal.errors import ConfigError, MissingDependencyError, ShoalError

# The real EnvPool package (in the test extra) is compared against. Any ImportError skips: envpool 1.2.7 (what
# Python 3.13 and 3.14 install) links the system's OpenGL and EGL libraries, which a bare machine may lack (the skip
# says which).
real = pytest.importorskip("envpool", exc_type=ImportError)
pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered by casting:UserWarning")  # EnvPool's own spaces
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def make_both(task, env_type="gymnasium", **kwargs):
    return real.make(task, env_type=env_type, **kwargs), ours.make(task, env_type=env_type, backend="serial", **kwargs)


def structure(value):
    """dtype and shape of every array of an output, recursively (EnvPool's info has a nested dict)."""
    if isinstance(value, dict):
        return {k: structure(v) for k, v in value.items() if k != "ram"}  # EnvPool 1.2 adds the RAM; shoal does not
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {f: structure(getattr(value, f)) for f in value._fields if f != "ram"}
    if isinstance(value, (tuple, list)):
        return [structure(v) for v in value]
    return (np.asarray(value).dtype.str, np.shape(value))


GYMNASIUM_FAMILIES = ("envpool.classic_control", "envpool.toy_text", "envpool.box2d", "envpool.mujoco.gym")
"""EnvPool's families of tasks that Gymnasium has envs of the same ids for."""


def test_task_ids_and_defaults_are_envpools():
    """The ids: EnvPool's Atari ones, and every one of its Gymnasium-like families that Gymnasium makes here."""
    registry = real.registration.registry.envpools
    family = {t: registry[t]["gymnasium"][0] for t in real.list_all_envs()}
    atari = {t for t, f in family.items() if f == "envpool.atari"}
    made = set()
    # (ids under phys2d/ and tabular/ are Gymnasium's functional JAX envs: not vectorized by shoal.envpool)
    for task in (t for t, f in family.items() if f in GYMNASIUM_FAMILIES and "/" not in t):
        try:
            with warnings.catch_warnings():  # Box2D's SWIG module warns as it imports, and must not fail halfway
                warnings.simplefilter("ignore")
                gymnasium.make(task).close()
        except gymnasium.error.DependencyNotInstalled:  # registered, its package not installed here (box2d on 3.14)
            pass
        except (gymnasium.error.Error, ImportError):  # deprecated ids, mujoco-py's v2/v3
            continue
        made.add(task)
    assert len(made) >= 30
    assert set(ours.list_all_envs()) == atari | made
    config = real.make_spec("Pong-v5").config._asdict()
    for name, default in ours.DEFAULTS.items():
        if name in ("batch_size", "gym_reset_return_info"):  # EnvPool fills these in from num_envs and the env type
            continue
        assert config[name] == default, name
    for task in sorted(made):  # the same episode limits, and EnvPool's common keywords' defaults
        config = real.make_spec(task).config._asdict()
        assert config["max_episode_steps"] == (gymnasium.spec(task).max_episode_steps or np.iinfo(np.int32).max), task
        for name, default in GYMNASIUM_DEFAULTS.items():
            if name not in ("batch_size", "gym_reset_return_info"):
                assert config[name] == default, (task, name)


@pytest.mark.parametrize("kwargs", [{}, {"gray_scale": False, "stack_num": 2, "img_height": 64}])
def test_spaces_outputs_info_keys_and_dtypes_match_envpool(kwargs):
    theirs, mine = make_both("Breakout-v5", num_envs=2, **kwargs)
    try:
        assert mine.observation_space == theirs.observation_space
        assert mine.action_space == theirs.action_space
        assert mine.single_observation_space == theirs.single_observation_space
        assert structure(mine.reset()) == structure(theirs.reset())
        action = np.zeros(2, np.int32)
        assert structure(mine.step(action)) == structure(theirs.step(action))
    finally:
        theirs.close()
        mine.close()


def test_dm_timesteps_match_envpool():
    theirs, mine = make_both("Pong-v5", env_type="dm", num_envs=2)
    try:
        first = mine.reset()
        assert structure(first) == structure(theirs.reset())
        assert first.step_type.tolist() == [0, 0] and first.discount.tolist() == [1.0, 1.0]
        spec = theirs.observation_spec()
        # EnvPool bounds the reward below by float32's smallest positive number; shoal leaves it unbounded
        assert mine.observation_spec()._replace(reward=None) == tuple(spec._replace(reward=None, ram=None)[:-1])
        assert mine.observation_spec().reward.dtype == spec.reward.dtype
        assert mine.action_spec() == theirs.action_spec()
        action = np.zeros(2, np.int32)
        step = mine.step(action)
        assert structure(step) == structure(theirs.step(action))
        assert step.step_type.tolist() == [1, 1]
    finally:
        theirs.close()
        mine.close()


def endings(pool, steps, env=0, seed=0):
    """What happens around each episode end of env ``env`` under random actions: at the end (lives, EnvPool's
    ``terminated``, whether ``elapsed_step`` went on from the previous step) and at the step after (lives, the
    reward, whether ``elapsed_step`` was kept or restarted at 0)."""
    rng = np.random.default_rng(seed)
    _, info = pool.reset()
    before, ended, seen = int(info["elapsed_step"][env]), False, []
    for _ in range(steps):
        _, reward, term, trunc, info = pool.step(rng.integers(0, pool.action_space.n, pool.num_envs).astype(np.int32))
        elapsed = int(info["elapsed_step"][env])
        if ended:
            seen.append(("next", int(info["lives"][env]), float(reward[env]), "kept" if elapsed == before else elapsed))
        ended = bool(term[env] or trunc[env])
        if ended:
            seen.append(("end", int(info["lives"][env]), int(info["terminated"][env]), elapsed == before + 1))
        before = elapsed
    return seen


def test_episodic_life_ends_episodes_where_envpool_does():
    """EnvPool's episodic life: each lost life ends an episode, the next step plays the same game on (lives kept,
    elapsed_step kept), and only the last life is a real game over, after which the game restarts."""
    theirs, mine = make_both("Breakout-v5", num_envs=2, episodic_life=True, reward_clip=True)
    try:
        expected = endings(theirs, 1200)
        got = endings(mine, 1200)
    finally:
        theirs.close()
        mine.close()
    game = [("end", 4, 0, True), ("next", 4, 0.0, "kept"), ("end", 3, 0, True), ("next", 3, 0.0, "kept"),
            ("end", 2, 0, True), ("next", 2, 0.0, "kept"), ("end", 1, 0, True), ("next", 1, 0.0, "kept"),
            ("end", 0, 1, True), ("next", 5, 0.0, 0)]
    assert expected[:10] == game  # what EnvPool does (the table is checked against it) ...
    assert got[:10] == game  # ... and shoal


def test_without_episodic_life_only_game_overs_end_episodes():
    theirs, mine = make_both("Breakout-v5", num_envs=2)
    try:
        expected, got = endings(theirs, 500), endings(mine, 500)
    finally:
        theirs.close()
        mine.close()
    assert expected[:2] == got[:2] == [("end", 0, 1, True), ("next", 5, 0.0, 0)]


def test_asynchronous_batches_like_envpool():
    """async_reset, then recv/send of batches of batch_size distinct envs, the first to finish: every env comes
    back (which and in what order depends on timing, in EnvPool as in shoal)."""
    for pool in (real.make("Pong-v5", env_type="gymnasium", num_envs=4, batch_size=2),
                 ours.make("Pong-v5", env_type="gymnasium", num_envs=4, batch_size=2, num_workers=2)):
        try:
            assert pool.is_async
            pool.async_reset()
            seen = set()
            for step in range(300):
                obs, reward, term, trunc, info = pool.recv()
                ids = info["env_id"]
                assert obs.shape == (2, 4, 84, 84) and ids.dtype == np.int32 and len(set(ids.tolist())) == 2
                new = ~np.isin(ids, list(seen))  # an env's first results are its reset's, whichever batch has them
                assert (reward[new] == 0).all() and (info["elapsed_step"][new] == 0).all(), (step, ids)
                assert (info["elapsed_step"][~new] > 0).all(), (step, ids)
                seen |= set(ids.tolist())
                pool.send(np.zeros(2, np.int32), ids)
                if seen == {0, 1, 2, 3}:
                    break
            assert seen == {0, 1, 2, 3}
        finally:
            pool.close()


def test_send_matches_actions_to_env_ids_in_any_order():
    """Two pools with the same seed: one is sent its actions in env order, the other shuffled with the shuffled
    env ids; every env must see the same actions, so both play the same games."""
    pools = [ours.make("Breakout-v5", num_envs=4, seed=3, backend="serial") for _ in range(2)]
    rng = np.random.default_rng(1)
    try:
        for pool in pools:
            pool.reset()
        for _ in range(60):
            actions, order = rng.integers(0, 4, 4).astype(np.int32), rng.permutation(4)
            in_order = pools[0].step(actions, np.arange(4))
            shuffled = pools[1].step(actions[order], order)
            np.testing.assert_array_equal(in_order[0], shuffled[0])
        returned = r"shoal steps the batch the last recv\(\) returned \(env_id \[0, 1, 2, 3\]\)"
        with pytest.raises(ShoalError, match=returned):
            pools[0].send(np.zeros(2, np.int32), np.array([0, 1]))
    finally:
        for pool in pools:
            pool.close()


def test_same_seed_same_games_and_partial_reset():
    a = ours.make("Pong-v5", num_envs=3, seed=7, backend="serial")
    b = ours.make("Pong-v5", num_envs=3, seed=7, backend="serial")
    try:
        np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
        for _ in range(30):
            np.testing.assert_array_equal(a.step(np.full(3, 2, np.int32))[0], b.step(np.full(3, 2, np.int32))[0])
        obs, info = a.reset(np.array([1]))  # EnvPool returns the rows of the envs reset
        assert obs.shape == (1, 4, 84, 84) and info["env_id"].tolist() == [1] and info["elapsed_step"].tolist() == [0]
        _, _, _, _, info = a.step(np.full(3, 2, np.int32))
        assert info["elapsed_step"].tolist() == [31, 1, 31]  # the others' steps still count
    finally:
        a.close()
        b.close()


def test_gym_api_is_the_installed_gyms():
    gym = pytest.importorskip("gym")
    pool = ours.make("Pong-v5", env_type="gym", num_envs=2, backend="serial")
    try:
        assert isinstance(pool.action_space, gym.spaces.Discrete)
        assert isinstance(pool.observation_space, gym.spaces.Box)
        first = pool.reset()
        step = pool.step(np.zeros(2, np.int32))
        if tuple(int(p) for p in gym.__version__.split(".")[:2]) >= (0, 26):
            assert len(first) == 2 and len(step) == 5
        else:  # EnvPool's gym API before gym 0.26: obs from reset, (obs, reward, done, info) from step
            assert first.shape == (2, 4, 84, 84)
            assert len(step) == 4 and step[2].dtype == np.bool_ and "TimeLimit.truncated" in step[3]
    finally:
        pool.close()


def test_mixed_games_in_one_pool():
    pool = ours.make(["Pong-v5", "Breakout-v5"], num_envs=2, full_action_space=True, backend="serial")
    try:
        assert pool.atari.games == ["pong", "breakout"] and pool.action_space.n == 18
        obs, _ = pool.reset()
        assert obs.shape == (2, 4, 84, 84)
    finally:
        pool.close()
    with pytest.raises(ConfigError, match=r"different action counts .* pass full_action_space=True"):
        ours.make(["Pong-v5", "Breakout-v5"], num_envs=2, backend="serial")


def test_refusals_say_what_to_do():
    with pytest.raises(ConfigError, match=r"'CheetahRun-v1' is not a task of shoal.envpool, .*'HalfCheetah-v5', "
                                          r"\.\.\.; see list_all_envs\(\)\)\. For any other Gymnasium env, "
                                          r"shoal.make\(id, num_envs\)"):
        ours.make("CheetahRun-v1")  # no "did you mean": no ROM is called that
    for other_spelling, task in [("pong", "Pong"), ("ALE/SpaceInvaders-v5", "SpaceInvaders"),
                                 ("BreakoutNoFrameskip-v4", "Breakout"), ("montezuma_revenge", "MontezumaRevenge")]:
        with pytest.raises(ConfigError, match=rf"Did you mean {task}-v5\? For any other Gymnasium env"):
            ours.make(other_spelling)
    with pytest.raises(ConfigError, match=r"unknown keyword\(s\) \['episodic_lives'\]"):
        ours.make("Pong-v5", episodic_lives=True)
    with pytest.raises(ConfigError, match="env_type must be"):
        ours.make("Pong-v5", env_type="jax")
    with pytest.raises(ConfigError, match="use_inter_area_resize=False"):
        ours.make("Pong-v5", use_inter_area_resize=False)
    pool = ours.make("Pong-v5", backend="serial")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pool.reset(seed=3)
        assert "reset(seed=...) is ignored" in str(caught[0].message)
    finally:
        pool.close()


@pytest.mark.timeout(300)
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason='JAX is not installed (pip install "shoal[jax]")')
def test_xla_functions_step_inside_jit_as_the_pools_own_calls_do():
    """tests/jax_checks.py, in a process of its own (JAX warns at every fork once it has started): jitted scans of
    step, and of send then recv in asynchronous mode, equal the same pool stepped from Python, for the gymnasium, gym
    (cleanrl's 4-tuples) and dm APIs, and have the form of the real EnvPool's (its xla functions, traced alike);
    tracing before a reset is refused."""
    script = Path(__file__).with_name("jax_checks.py")
    done = subprocess.run([sys.executable, "-W", "ignore", str(script)], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "synchronous CartPole-v1 gymnasium: 40 steps equal",
        "synchronous Pong-v5 gymnasium: 40 steps equal",
        "synchronous Breakout-v5 gym: 40 steps equal",
        "synchronous CartPole-v1 dm: 40 steps equal",
        "asynchronous CartPole-v1: 40 batches, each env's trajectory equal",
        "form of Pong-v5 gymnasium: EnvPool's",
        "form of CartPole-v1 gymnasium: EnvPool's",
        "traced before a reset: refused",
    ]


def test_xla_without_jax_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # (import jax raises ImportError)
    with ours.make("CartPole-v1", env_type="gymnasium", num_envs=2, backend="serial") as pool:
        with pytest.raises(MissingDependencyError, match=r'pool.xla\(\) needs JAX: pip install "shoal\[jax\]"'):
            pool.xla()


def test_cleanrl_ppo_atari_envpool_runs_with_only_its_import_changed(tmp_path):
    """cleanrl's ppo_atari_envpool.py (examples/cleanrl, its one changed line: ``from shoal import envpool``) trains
    and logs finished games: with episodic_life, cleanrl counts a game when ``info["lives"]`` reaches 0."""
    pytest.importorskip("torch")
    for module in ("tyro", "torch.utils.tensorboard"):
        pytest.importorskip(module, reason="cleanrl's own imports (the cleanrl extra)")
    gym = pytest.importorskip("gym")
    if tuple(int(p) for p in gym.__version__.split(".")[:2]) >= (0, 26):
        pytest.skip("cleanrl's EnvPool scripts use gym's API before 0.26 (cleanrl pins gym 0.23.1, as the test extra)")
    script = EXAMPLES / "cleanrl" / "ppo_atari_envpool.py"
    result = subprocess.run(
        [sys.executable, str(script), "--total-timesteps", "2048", "--num-envs", "4", "--num-steps", "128",
         "--no-cuda"],
        capture_output=True, text=True, timeout=400, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("SPS:") == 4
    assert "episodic_return=" in result.stdout  # Breakout games under random-ish play end in ~200 steps each


# -- EnvPool's tasks that Gymnasium has too -----------------------------------------------------------------------


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


@pytest.mark.parametrize("env_type", ["gymnasium", "dm"])
@pytest.mark.parametrize("task", ["Pong-v5", "CartPole-v1"])
def test_pools_are_the_classes_envpools_pools_are(task, env_type):
    """As EnvPool's pools: a Gymnasium VectorEnv and Env (its metadata, unwrapped, closed) for the gymnasium type, a
    dm_env.Environment for dm, so code that checks for those (Gymnasium's vector wrappers) takes them."""
    import dm_env

    theirs, mine = make_both(task, env_type=env_type, num_envs=2)
    try:
        for base in (gymnasium.vector.VectorEnv, gymnasium.Env, dm_env.Environment):
            assert isinstance(mine, base) == isinstance(theirs, base), base
        assert isinstance(mine, ours.EnvPool)
        if env_type == "dm":
            assert mine.action_spec() == theirs.action_spec()
        else:
            assert mine.metadata["autoreset_mode"] == theirs.metadata["autoreset_mode"]
            assert set(mine.metadata["render_modes"]) <= set(theirs.metadata["render_modes"])
            assert mine.unwrapped is mine and mine.render_mode is theirs.render_mode is None
            assert mine.is_vector_env and not mine.closed
        assert str(mine) == repr(mine) and str(theirs) == repr(theirs)
    finally:
        theirs.close()
        mine.close()
    assert env_type == "dm" or mine.closed


def test_a_gym_pool_is_an_env_of_the_api_it_hands_out():
    """With gym before 0.26 a gym pool hands out that gym's API and is a ``gym.Env``, as EnvPool's gym pools were
    then (EnvPool 1.2 hands out Gymnasium's API for ``env_type="gym"`` too, and its pool is Gymnasium's)."""
    gym = pytest.importorskip("gym")
    old = tuple(int(p) for p in gym.__version__.split(".")[:2]) < (0, 26)
    with ours.make("CartPole-v1", env_type="gym", num_envs=2, backend="serial") as pool:
        assert isinstance(pool, gym.Env) == old and isinstance(pool, gymnasium.vector.VectorEnv) == (not old)
        assert pool.spec.config.gym_reset_return_info is (not old)


@pytest.mark.parametrize("task", ["Breakout-v5", "CartPole-v1"])
def test_gymnasiums_vector_wrappers_take_a_pool(task):
    """Gymnasium's RecordEpisodeStatistics over a pool, as over EnvPool's: each episode's statistics are those of
    the pool's own steps (next-step autoreset: the step after an end is a reset, which counts for nothing), and the
    wrapper's reset reaches the pool (EnvPool ignores its seed, as here); NormalizeReward runs over it."""
    from gymnasium.wrappers.vector import NormalizeReward, RecordEpisodeStatistics

    pool = ours.make(task, num_envs=3, backend="serial", max_episode_steps=25)
    stats = RecordEpisodeStatistics(pool)
    with pytest.warns(UserWarning, match=r"reset\(seed=\.\.\.\) is ignored"):
        stats.reset(seed=1)
    rng = np.random.default_rng(0)
    returns, lengths, seen = np.zeros(3), np.zeros(3, int), 0
    for _ in range(60):
        _, reward, term, trunc, info = stats.step(rng.integers(0, pool.action_space.n, 3))
        returns += reward
        lengths += 1
        for env in np.flatnonzero(term | trunc):
            assert info["_episode"][env] and info["episode"]["l"][env] == lengths[env]
            assert info["episode"]["r"][env] == pytest.approx(returns[env])
            returns[env], lengths[env], seen = 0, -1, seen + 1
    assert seen >= 3
    stats.close()
    assert pool.closed
    normalized = NormalizeReward(ours.make(task, num_envs=2, backend="serial"))
    normalized.reset()
    for _ in range(5):
        reward = normalized.step(np.zeros(2, np.int64))[1]
        assert reward.shape == (2,) and np.isfinite(reward).all()
    normalized.close()


@pytest.mark.parametrize("kwargs", [{"task_id": "Pong-v5", "num_envs": 3, "stack_num": 2, "episodic_life": True},
                                    {"task_id": "CartPole-v1", "num_envs": 4, "batch_size": 2},
                                    {"task_id": "MountainCar-v0", "num_envs": 2, "max_episode_steps": 50}])
def test_spec_and_make_spec_are_envpools(kwargs):
    """``pool.spec`` and ``make_spec``: EnvPool's configuration (every key both have), spaces and reward threshold."""
    pooled = {"env_type": "gymnasium", **kwargs}
    for theirs, mine in ((real.make(**pooled).spec, ours.make(**pooled, backend="serial").spec),
                         (real.make_spec(**kwargs), ours.make_spec(**kwargs))):
        their_config, my_config = theirs.config._asdict(), mine.config._asdict()
        shared = set(their_config) & set(my_config)
        assert {"num_envs", "batch_size", "seed", "max_episode_steps", "gym_reset_return_info"} <= shared
        assert {k: my_config[k] for k in shared} == {k: their_config[k] for k in shared}
        assert mine.observation_space == theirs.observation_space and mine.action_space == theirs.action_space
        assert mine.gymnasium_observation_space == theirs.gymnasium_observation_space
        assert mine.reward_threshold == theirs.reward_threshold
