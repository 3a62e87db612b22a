"""shoal.AtariVectorEnv: spaces, errors, determinism, sequences, async batches and emulator state."""

import pickle
from contextlib import closing

import ale_py
import gymnasium
import numpy as np
import pytest
from ale_py.env import AtariEnv
from gymnasium import spaces

import shoal
from shoal.errors import ActionError, ConfigError, StateError, UnknownGameError

from helpers import assert_same, generator_states, rollout

MIXED = ["pong", "breakout", "space_invaders", "ms_pacman"]


def make(games=MIXED, **kwargs):
    kwargs.setdefault("backend", "serial")
    return shoal.AtariVectorEnv(games=games, **kwargs)


# -- spaces ------------------------------------------------------------------------------------------------------


def test_mixed_action_sets_give_a_multidiscrete_of_per_env_counts():
    counts = [AtariEnv(g).action_space.n for g in MIXED]
    with make() as envs:
        assert envs.num_actions == counts
        assert envs.single_action_space is None
        assert isinstance(envs.action_space, spaces.MultiDiscrete)
        assert envs.action_space.nvec.tolist() == counts
        assert envs.observation_space.shape == (4, 4, 84, 84)


def test_equal_counts_or_full_action_space_give_discrete():
    with shoal.AtariVectorEnv(game="breakout", num_envs=3, backend="serial") as envs:
        assert envs.single_action_space == spaces.Discrete(4) and envs.num_envs == 3
    with make(full_action_space=True) as envs:
        assert envs.single_action_space == spaces.Discrete(18) and envs.num_actions == [18] * 4
    with make(["pong"], grayscale=False, img_height=50, img_width=40, stack_num=2) as envs:
        assert envs.single_observation_space.shape == (2, 50, 40, 3)


def test_action_meanings_and_ram_per_env():
    with make() as envs:
        envs.reset(seed=0)
        assert envs.get_action_meanings() == [AtariEnv(g).get_action_meanings() for g in MIXED]
        ram = envs.get_ram([0, 2])
        assert ram.shape == (2, 128) and ram.dtype == np.uint8
        reference = AtariEnv("space_invaders", repeat_action_probability=0.0)
        assert not np.array_equal(ram[0], ram[1])  # different games, different RAM
        assert ram.shape[1] == reference.unwrapped.ale.getRAMSize()


def test_infos_and_reward_clipping():
    with make(["breakout", "space_invaders"], reward_clipping=True) as envs:
        envs.reset(seed=1)
        raw_seen = []
        for t in range(150):  # breakout: FIRE; space invaders: alternate FIRE and RIGHT, so aliens get shot
            obs, reward, term, trunc, info = envs.step(np.array([1, 1 if t % 2 == 0 else 2]))
            np.testing.assert_array_equal(reward, np.clip(info["raw_reward"], -1, 1))
            raw_seen += info["raw_reward"].tolist()
            assert info["env_id"].tolist() == [0, 1]
            assert set(info) >= {"lives", "frame_number", "episode_frame_number", "raw_reward", "env_id"}
        assert max(raw_seen) > 1  # space invaders scores 5+ per alien: clipping was exercised


# -- bad input ------------------------------------------------------------------------------------------------------


def test_unknown_rom_lists_the_closest_ids():
    with pytest.raises(UnknownGameError, match="'breakout'"):
        shoal.AtariVectorEnv(games=["pong", "breakuot"])
    with pytest.raises(UnknownGameError, match="'ms_pacman'"):
        shoal.AtariVectorEnv(game="MsPacman", num_envs=2)
    with pytest.raises(UnknownGameError, match="'combat' is a multi-player ROM"):  # loading it would exit the process
        shoal.AtariVectorEnv(games=["pong", "combat"])


def test_bad_constructor_arguments():
    with pytest.raises(ConfigError, match="num_envs=3 but 2 games"):
        shoal.AtariVectorEnv(games=["pong", "pong"], num_envs=3)
    with pytest.raises(ConfigError, match="mode 99 is not one of"):
        shoal.AtariVectorEnv(games=["pong"], mode=99)
    with pytest.raises(ConfigError, match="difficulty needs one value per env|mode and difficulty"):
        shoal.AtariVectorEnv(games=["pong", "pong"], difficulty=[0])
    with pytest.raises(ConfigError, match="frameskip must be a positive integer"):
        shoal.AtariVectorEnv(games=["pong"], frameskip=0)
    with pytest.raises(ConfigError, match="padding_type must be 'reset' or 'zero', got 'same'"):
        shoal.AtariVectorEnv(games=["pong"], padding_type="same")


def test_action_outside_one_roms_range_names_env_and_game():
    with make() as envs:
        envs.reset(seed=0)
        with pytest.raises(ActionError, match=r"env 1 \('breakout' takes actions 0\.\.3\)"):
            envs.step(np.array([0, 5, 0, 0]))
        with pytest.raises(ActionError, match="expected shape"):
            envs.step(np.array([0, 1, 0]))
        with pytest.raises(ActionError, match="expected integer actions"):
            envs.step(np.array([0.0, 1.0, 0.0, 0.0]))
        with pytest.raises(ActionError, match=r"sequence 1: action 4 is outside the range of env 1"):
            envs.step([np.array([0]), np.array([1, 4]), np.array([0]), np.array([0])])
        with pytest.raises(ActionError, match="sequence 2: expected a numpy array"):
            envs.step([np.array([0]), np.array([1]), [0, 1], np.array([0])])
        with pytest.raises(ActionError, match="gamma must be a number in"):
            envs.step([np.array([0])] * 4, gamma=1.5)
        envs.step(np.array([5, 3, 5, 8]))  # still usable: each env's top action


# -- determinism --------------------------------------------------------------------------------------------------


def test_same_seeds_give_identical_rollouts_with_sticky_actions_and_noops_on_every_backend():
    actions = np.random.default_rng(0).integers(0, [6, 4, 6, 9], size=(120, 4))
    runs = []
    for backend in ({"backend": "serial"}, {"backend": "multiprocessing", "num_workers": 2}):
        with make(repeat_action_probability=0.25, noop_max=30, max_num_frames_per_episode=800, **backend) as envs:
            runs.append(rollout(envs, lambda t: actions[t], 120, seed=7))
    assert_same(tuple(runs[0]), tuple(runs[1]))
    with make(repeat_action_probability=0.25, noop_max=30) as envs:
        other = rollout(envs, lambda t: actions[t], 5, seed=8)
    assert not np.array_equal(other[0][0], runs[0][0][0])  # another seed, other no-op starts


# -- episodic life ------------------------------------------------------------------------------------------------


def life_rollout(life_loss_reset, steps=700, **kwargs):
    actions = np.random.default_rng(5).integers(0, 4, size=(steps, 2))
    with make(["breakout", "breakout"], episodic_life=True, life_loss_reset=life_loss_reset, **kwargs) as envs:
        return rollout(envs, lambda t: actions[t], steps, seed=11)


def test_life_loss_reset_continue_plays_the_same_game_on():
    """EnvPool's episodic life: each lost life ends an episode; the next step continues that game (same lives,
    frames still counting, the new screen pushed onto the stack), and only a game over restarts it."""
    runs = life_rollout("continue")
    game_overs, lives_lost = 0, [0, 0]
    for t in range(1, len(runs) - 1):
        _, _, term, trunc, info = runs[t]
        obs, reward, _, _, after = runs[t + 1]
        for k in range(2):
            if not term[k]:
                continue
            assert reward[k] == 0
            if info["game_over"][k]:
                game_overs += 1
                assert lives_lost[k] == 4  # Breakout's five lives: four episodes end at a lost life, one at game over
                lives_lost[k] = 0
                assert info["lives"][k] == 0 and after["lives"][k] == 5
                assert all(np.array_equal(obs[k, 0], obs[k, j]) for j in range(4))  # a new game: a filled stack
            else:
                lives_lost[k] += 1
                assert info["lives"][k] == after["lives"][k] > 0
                assert after["episode_frame_number"][k] > info["episode_frame_number"][k]  # the same game
                np.testing.assert_array_equal(obs[k, :-1], runs[t][0][k, 1:])  # the stack goes on
    assert game_overs >= 2


def test_life_loss_reset_game_restarts_and_both_agree_until_the_first_lost_life():
    cont, game = life_rollout("continue"), life_rollout("game")
    first = next(t for t, out in enumerate(cont) if t and out[2].any())
    for a, b in zip(cont[: first + 1], game[: first + 1]):
        np.testing.assert_array_equal(a[0], b[0])
    k = int(np.flatnonzero(cont[first][2])[0])
    assert game[first + 1][4]["lives"][k] == 5 and cont[first + 1][4]["lives"][k] == 4
    assert not cont[first][4]["game_over"][k] and not game[first][4]["game_over"][k]


def test_life_loss_reset_continue_same_on_every_backend_and_same_step():
    serial = life_rollout("continue", steps=300)
    workers = life_rollout("continue", steps=300, backend="multiprocessing", num_workers=2)
    assert_same(tuple(serial), tuple(workers))
    actions = np.random.default_rng(5).integers(0, 4, size=(300, 2))
    with make(["breakout", "breakout"], episodic_life=True, life_loss_reset="continue",
              autoreset_mode="same_step") as envs:
        envs.reset(seed=11)
        for t in range(300):
            obs, _, term, _, info = envs.step(actions[t])
            if term[0] and not info["game_over"][0]:
                np.testing.assert_array_equal(info["final_obs"][0][1:], obs[0][:-1])  # continued from the final frame
                assert info["lives"][0] == info["final_info"]["lives"][0]
                break
        else:
            pytest.fail("no life was lost")


def test_a_reset_after_a_lost_life_starts_a_new_game():
    actions = np.random.default_rng(5).integers(0, 4, size=(400, 2))
    with make(["breakout", "breakout"], episodic_life=True, life_loss_reset="continue") as envs:
        envs.reset(seed=11)
        for t in range(400):
            _, _, term, _, info = envs.step(actions[t])
            if term[0]:
                break
        assert info["lives"][0] == 4
        _, info = envs.reset(options={"reset_mask": np.array([True, False])})
        assert info["lives"][0] == 5 and info["episode_frame_number"][0] < 40


def test_life_loss_reset_needs_episodic_life():
    with pytest.raises(ConfigError, match=r"life_loss_reset='continue' .* needs episodic_life=True"):
        make(["breakout"], life_loss_reset="continue")
    with pytest.raises(ConfigError, match="life_loss_reset must be 'game' or 'continue'"):
        make(["breakout"], episodic_life=True, life_loss_reset="life")


# -- sequences ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("episodic_life", [False, True])
def test_sequences_equal_stepping_one_action_at_a_time(episodic_life):
    """Each env's sequence against a copy of the env (restored from the same state) stepped action by action."""
    games = ["breakout", "space_invaders", "pong"]
    settings = dict(episodic_life=episodic_life, reward_clipping=True, max_num_frames_per_episode=300, noop_max=0,
                    autoreset_mode="same_step")
    rng = np.random.default_rng(2)
    gamma = 0.9
    ended = 0
    with make(games, **settings) as envs, make(games, **settings) as single:
        envs.reset(seed=4)
        single.reset(seed=4)
        for _ in range(15):
            before = envs.clone_state()
            seqs = [rng.integers(0, n, size=rng.integers(0, 14)) for n in envs.num_actions]
            obs, reward, term, trunc, info = envs.step(seqs, gamma=gamma)
            for i, seq in enumerate(seqs):
                single.restore_state(before)
                expected_reward, taken, done = 0.0, 0, (False, False)
                for k, a in enumerate(seq):
                    actions = np.zeros(3, np.int64)
                    actions[i] = a
                    s_obs, s_rew, s_term, s_trunc, _ = single.step(actions)
                    expected_reward += gamma**k * s_rew[i]
                    taken += 1
                    done = (bool(s_term[i]), bool(s_trunc[i]))
                    if any(done):
                        break
                assert info["steps_taken"][i] == taken
                assert reward[i] == pytest.approx(expected_reward)
                assert (term[i], trunc[i]) == done
                ended += any(done)
                if taken:
                    np.testing.assert_array_equal(obs[i], s_obs[i])
    assert ended >= 1


def test_empty_sequence_skips_its_env():
    with make(["pong", "breakout"]) as envs:
        first, _ = envs.reset(seed=0)
        obs, reward, term, trunc, info = envs.step([np.array([], np.int64), np.array([1, 1])], gamma=0.5)
        np.testing.assert_array_equal(obs[0], first[0])
        assert reward[0] == 0.0 and info["steps_taken"].tolist() == [0, 2]
        assert info["frame_number"][0] == _["frame_number"][0]


# -- asynchronous batches and partial resets ------------------------------------------------------------------------


def test_async_batches_with_per_batch_action_spaces_and_partial_resets():
    games = ["pong", "pong", "breakout", "breakout"]
    with shoal.AtariVectorEnv(games=games, batch_size=2, num_workers=2, backend="multiprocessing") as envs:
        obs, info = envs.reset(seed=0)
        for t in range(20):
            ids = info["env_id"]
            assert len(set(ids.tolist()) & {0, 1, 2, 3}) == 2 and obs.shape == (2, 4, 84, 84)
            assert envs.action_space.nvec.tolist() == [envs.num_actions[i] for i in ids]
            if t % 5 == 4:  # reset the second env of the held batch, with its own seed
                mask = np.zeros(4, bool)
                mask[ids[1]] = True
                seeds = [None] * 4
                seeds[ids[1]] = 50 + t
                obs, info = envs.reset(seed=seeds, options={"reset_mask": mask})
                assert info["env_id"].tolist() == ids.tolist()
                with shoal.AtariVectorEnv(games=[games[ids[1]]], backend="serial") as fresh:
                    fresh_obs, _ = fresh.reset(seed=50 + t)
                np.testing.assert_array_equal(obs[1], fresh_obs[0])
            obs, reward, term, trunc, info = envs.step(envs.action_space.sample())


# -- emulator state -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("games", [MIXED, ["air_raid", "pong", "pooyan"]], ids=["mixed", "taller-screens"])
def test_restore_state_replays_exactly_and_states_pickle(games):
    # Without sticky actions: ALE's saved state lacks the previous action that a sticky repeat replays (documented
    # on AtariVectorEnv.restore_state).
    with make(games) as envs:
        envs.reset(seed=3)
        for _ in range(10):
            envs.step(envs.action_space.sample())
        states = pickle.loads(pickle.dumps(envs.clone_state()))
        actions = [envs.action_space.sample() for _ in range(30)]
        first = [envs.step(a) for a in actions]
        envs.restore_state(states)
        again = [envs.step(a) for a in actions]
        assert_same(tuple(first), tuple(again))
        with pytest.raises(ConfigError, match="this state is of"):
            envs.restore_state([states[1]], env_ids=[0])


@pytest.mark.parametrize("config", [{"backend": "serial"}, {"num_workers": 2}])
def test_np_random_is_each_envs_own_as_on_gymnasiums_atari_envs(config):
    # per env, as a Gymnasium SyncVectorEnv of AtariEnvs has them: seeded alike at a reset, drawn from alike by random
    # frameskips (compared by state; from workers they are copies); np_random_seed is the last seeded reset's seed
    gymnasium.register_envs(ale_py)
    settings = dict(frameskip=(2, 5), repeat_action_probability=0.0)
    ref = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("ALE/Pong-v5", **settings)] * 2)
    with shoal.AtariVectorEnv(games=["pong", "pong"], noop_max=0, **settings, **config) as envs, closing(ref):
        with pytest.raises(StateError, match=r"env 0 has not been reset yet"):
            envs.np_random
        for e in (envs, ref):
            e.reset(seed=5)
        assert envs.np_random_seed == ref.np_random_seed == (5, 6) and generator_states(envs) == generator_states(ref)
        for _ in range(7):
            for e in (envs, ref):
                e.step(np.zeros(2, np.int64))
        for e in (envs, ref):
            e.reset()
        assert envs.np_random_seed == ref.np_random_seed and generator_states(envs) == generator_states(ref)
        with pytest.raises(AttributeError, match=r"no attribute 'lives' \(np_random and np_random_seed only\)"):
            envs.get_attr("lives")


def test_continuous_action_maps_onto_the_full_action_set():
    # (radius 1, theta 0, no fire) is joystick RIGHT with full strength: ALE action 3 of the full set
    with make(["breakout"], continuous=True) as cont, make(["breakout"], full_action_space=True) as full:
        assert cont.single_action_space.shape == (3,)
        a, b = cont.reset(seed=0), full.reset(seed=0)
        for _ in range(20):
            a = cont.step(np.array([[1.0, 0.0, 0.0]], np.float32))
            b = full.step(np.array([3]))
        assert_same(a, b)


def test_thread_affinity_offset_pins_each_worker_to_its_own_core():
    psutil = pytest.importorskip("psutil")
    import os

    cores = sorted(os.sched_getaffinity(0))
    envs = shoal.AtariVectorEnv(game="pong", num_envs=4, num_workers=2, batch_size=2, thread_affinity_offset=1)
    try:
        procs = envs._transport._procs  # host index -> its worker process
        assert {host: psutil.Process(proc.pid).cpu_affinity() for host, proc in procs.items()} == {
            w: [cores[(1 + w) % len(cores)]] for w in range(2)
        }
        assert sorted(os.sched_getaffinity(0)) == cores  # the calling process is left alone
    finally:
        envs.close()


def test_no_ale_banner_on_stderr():
    """ALE prints a banner when its first interface is made unless its logging is turned down first: it used to
    land across `shoal bench`'s progress bar."""
    import subprocess
    import sys

    code = ("import shoal; from shoal.atari.roms import game_info; game_info('pong'); "
            "envs = shoal.AtariVectorEnv(games=['pong', 'breakout'], backend='serial'); envs.reset(seed=0); "
            "envs.close()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "A.L.E" not in result.stderr and "Stella" not in result.stderr, result.stderr
