"""shoal.envpool against the real EnvPool package: task ids, defaults, spaces, info keys and dtypes, episode
boundaries under episodic_life, asynchronous batches; and the unmodified cleanrl script that uses it. EnvPool's tasks
that Gymnasium has too: test_envpool_gymnasium_tasks.py."""

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
from shoal.errors import ActionError, ConfigError, MissingDependencyError, ShoalError

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
        except gymnasium.error.DependencyNotInstalled as exc:  # registered, its package not installed here (box2d on
            # 3.14); not mujoco-py's v2/v3, which say so once Gymnasium-Robotics is imported (an earlier test), and
            # ImportError before
            if "mujoco_py" in str(exc):
                continue
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
        for actions in (np.zeros(5, np.int32), np.zeros(3, np.int32)):  # (in env order or not: not one per env)
            for ids in (np.arange(4), np.arange(4)[::-1]):
                with pytest.raises(ActionError, match=r"one action per env of env_id, got an array of shape \(\d,\)"):
                    pools[0].send(actions, ids)
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


def test_per_env_seeds_are_envpools():
    # EnvPool 1.2.5: env_seed, or a list as seed, seeds env i with its item i; the config keeps them as EnvPool does
    forms = [{"seed": 5}, {"seed": [5, 6, 7]}, {"env_seed": np.array([5, 6, 7])}, {"seed": 2, "env_seed": (7, 5)}]
    for kwargs in forms:
        kwargs = {"num_envs": len(kwargs.get("env_seed", [0] * 3)), **kwargs}
        theirs, mine = make_both("CartPole-v1", **kwargs)
        with mine:
            assert (mine.config["seed"], mine.config["env_seed"]) == (theirs.config["seed"], theirs.config["env_seed"])
        theirs.close()
    # env i of env_seed=[7, 5, 6] plays as env (seed - 5) of seed=5, given the same actions
    order = [2, 0, 1]
    with ours.make("CartPole-v1", num_envs=3, seed=5, backend="serial") as a, \
            ours.make("CartPole-v1", num_envs=3, env_seed=[7, 5, 6], backend="serial") as b:
        np.testing.assert_array_equal(b.reset()[0], a.reset()[0][order])
        rng = np.random.default_rng(0)
        for _ in range(40):
            actions = rng.integers(0, 2, 3)
            for got, want in zip(b.step(actions[order]), a.step(actions)):
                if not isinstance(want, dict):
                    np.testing.assert_array_equal(got, want[order])
    for kwargs, match in [({"seed": [5, 6]}, r"needs one seed per env \(3\), got \[5, 6\]"),
                          ({"seed": [1, 2, 3], "env_seed": [1, 2, 3]}, r"or env_seed, not both"),
                          ({"env_seed": [1.5, 2, 3]}, r"env_seed: expected integers, got \[1.5, 2, 3\]")]:
        with pytest.raises(ConfigError, match=match):
            ours.make("CartPole-v1", num_envs=3, backend="serial", **kwargs)


def test_negative_seeds_are_taken_as_envpool_takes_them():
    # EnvPool takes int32 seeds, negative ones too (its C++ generators are unsigned); shoal's envs take seeds >= 0
    for kwargs in ({"seed": -1}, {"env_seed": [-3, -1]}):
        theirs, mine = make_both("Pong-v5", num_envs=2, **kwargs)
        with mine:
            assert (mine.config["seed"], mine.config["env_seed"]) == (theirs.config["seed"], theirs.config["env_seed"])
        theirs.close()
    for kwargs, same in (({"seed": -1}, [2**32 - 1, 0]), ({"env_seed": [-3, -1]}, [2**32 - 3, 2**32 - 1])):
        with ours.make("Pong-v5", num_envs=2, backend="serial", **kwargs) as a, \
                ours.make("Pong-v5", num_envs=2, backend="serial", env_seed=same) as b:
            np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
            for _ in range(60):
                np.testing.assert_array_equal(a.step(np.full(2, 2, np.int32))[0], b.step(np.full(2, 2, np.int32))[0])


@pytest.mark.parametrize("task", ["Pong-v5", "CartPole-v1"])
def test_render_is_envpools(task):
    """The frames of the envs asked for (env 0's by default) in EnvPool's shape and dtype: an Atari env's screen, as
    on EnvPool its observation at full size, in colour, one frame a step; Gymnasium's env's frame for the seed. An id
    out of range (EnvPool's render crashes the process) and a pool made without render_mode are refused."""
    screen = dict(img_height=210, img_width=160, gray_scale=False, stack_num=1, frame_skip=1) if "v5" in task else {}
    pools = make_both(task, num_envs=3, render_mode="rgb_array", **screen)
    steps = 20 if screen else 5  # (CartPole pushed right falls within 8 steps)
    try:
        for pool in pools:
            obs, _ = pool.reset()
            for _ in range(steps):
                obs = pool.step(np.ones(3, np.int32))[0]
            if screen:  # (the observation of a step: its last frame)
                np.testing.assert_array_equal(pool.render([2, 0]), obs[[2, 0]].transpose(0, 2, 3, 1))
        for ids in (None, [2, 1], np.array([0], np.int32)):
            got, want = (pool.render(*([] if ids is None else [ids])) for pool in reversed(pools))
            assert (got.dtype, got.shape) == (want.dtype, want.shape)
        if not screen:
            for i, frame in zip([2, 1], pools[1].render([2, 1])):
                env = gymnasium.make(task, render_mode="rgb_array")
                env.reset(seed=42 + i)  # (EnvPool's default seed, env i's)
                for _ in range(steps):
                    env.step(1)
                np.testing.assert_array_equal(frame, env.render())
                env.close()
        with pytest.raises(ConfigError, match=r"env_id must be env indices in \[0, 3\), got \[3\]"):
            pools[1].render([3])
    finally:
        for pool in pools:
            pool.close()
    for pool, error in zip(make_both(task, num_envs=2), (RuntimeError, ConfigError)):
        pool.reset()
        with pytest.raises(error, match="render_mode must be set to 'rgb_array'"):
            pool.render()
        pool.close()


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
