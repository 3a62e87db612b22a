"""AtariVectorEnv's reset_cache: episode starts restored instead of emulated. By default ("auto") only for ROMs
whose reset does not depend on the game before (shoal.atari.starts checks them; shoal/data/exact_starts.txt lists
them), with rollouts equal to emulated ones; True for every ROM; False never."""

import numpy as np
import pytest

import shoal
from shoal.atari.starts import exact_starts, first_difference, restores_exactly
from shoal.errors import ConfigError

from helpers import assert_same, rollout

# Short episodes (ALE's frame limit truncates them) so that a few hundred steps cross many resets.
SHORT = dict(max_num_frames_per_episode=240, noop_max=30, repeat_action_probability=0.0)


def run(games, steps=400, seed=3, **kwargs):
    kwargs.setdefault("reset_cache", False)
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, 4, size=len(games)) for _ in range(steps)]  # every ROM here has at least 4
    with shoal.AtariVectorEnv(games=games, **{**SHORT, **kwargs}) as envs:
        out = rollout(envs, lambda t: actions[t], steps, seed)
        engines = getattr(envs._transport, "engines", [])
    ends = sum(int(term.sum() + trunc.sum()) for _, _, term, trunc, _ in out[1:])
    return out, ends, engines


def assert_rollouts_equal(a, b):
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        for part, (u, v) in enumerate(zip(x, y, strict=True)):
            assert_same(u, v, f"step {k} part {part}")


@pytest.mark.parametrize("config", [
    pytest.param({"backend": "serial"}, id="serial"),
    pytest.param({"backend": "multiprocessing", "num_workers": 2}, id="mp"),
])
def test_restored_starts_play_exactly_as_emulated_ones(config):
    games = ["breakout", "pong", "breakout", "space_invaders"]
    emulated, ends, _ = run(games, backend=config["backend"], num_workers=config.get("num_workers"))
    restored, _, _ = run(games, reset_cache=True, backend=config["backend"], num_workers=config.get("num_workers"))
    by_default, _, _ = run(games, reset_cache="auto", backend=config["backend"], num_workers=config.get("num_workers"))
    assert ends >= 20  # many episode starts, most of them restored
    assert_rollouts_equal(emulated, restored)  # observations, rewards, flags and every info (frame_number too)
    assert_rollouts_equal(emulated, by_default)


def test_the_default_restores_starts_only_where_the_check_found_them_exact():
    listed, unlisted = ["breakout", "pong", "space_invaders"], ["assault", "qbert"]
    assert all(restores_exactly(g) for g in listed) and not any(restores_exactly(g) for g in unlisted)
    games = listed + unlisted
    emulated, ends, _ = run(games, backend="serial")
    by_default, _, (engine,) = run(games, backend="serial", reset_cache="auto")
    assert ends >= 15
    assert_rollouts_equal(emulated, by_default)  # assault and qbert emulated: the same rollouts as without a cache
    assert engine._restores == [True, True, True, False, False]
    assert (engine._frame_offset[:3] > 0).all() and (engine._frame_offset[3:] == 0).all()
    with_cache, _, _ = run(games, backend="serial", reset_cache=True)
    assert not all(np.array_equal(a[0][3:], b[0][3:]) for a, b in zip(emulated, with_cache))  # True: not exact there


def test_default_rollouts_of_more_listed_roms_equal_emulated_ones_frame_by_frame():
    # frameskip=1 and no max-pool: every frame after a restored start is an observation (a frame buffer drawn before
    # the restore would show in the first ones)
    games = ["alien", "enduro", "frogger", "riverraid", "montezuma_revenge", "video_pinball", "air_raid", "asterix"]
    assert all(restores_exactly(g) for g in games)
    settings = dict(backend="serial", frameskip=1, maxpool=False, steps=700)
    emulated, ends, _ = run(games, **settings)
    by_default, _, (engine,) = run(games, reset_cache="auto", **settings)
    assert ends >= 16 and (engine._frame_offset > 0).all()
    assert_rollouts_equal(emulated, by_default)


@pytest.mark.parametrize("ends", [
    pytest.param(dict(max_num_frames_per_episode=2800, steps=1400), id="game overs"),
    pytest.param(dict(episodic_life=True, max_num_frames_per_episode=108_000, steps=600), id="lost lives"),
])
def test_restored_starts_report_the_lives_a_new_game_has(ends):
    # After a restore, Atlantis 2's lives counter in ALE still holds the game before's (e.g. 1, 0 or 255 after a
    # game over) until the next frame; the engine reports the lives saved with the start. Reported as ALE had them,
    # an episode's first info["lives"] was the game before's (after a game over, and after a lost life with
    # episodic_life).
    assert restores_exactly("atlantis2")
    emulated, count, _ = run(["atlantis2"], backend="serial", **ends)
    restored, _, (engine,) = run(["atlantis2"], backend="serial", reset_cache="auto", **ends)
    assert count >= 2 and engine._frame_offset[0] > 0  # episodes ended, and the starts after them were restored
    assert_rollouts_equal(emulated, restored)


@pytest.mark.parametrize("setting", [
    pytest.param({"repeat_action_probability": 0.25}, id="sticky actions"),
    pytest.param({"mode": 4}, id="a mode other than the default"),
    pytest.param({"difficulty": 1}, id="a difficulty"),
])
def test_the_default_emulates_where_the_check_does_not_apply(setting):
    config = {**SHORT, **setting}
    with shoal.AtariVectorEnv(game="breakout", num_envs=1, backend="serial", **config) as envs:
        envs.reset(seed=0)
        for _ in range(100):
            envs.step(np.array([1]))
        (engine,) = envs._transport.engines
        assert engine._restores == [False] and not engine._starts and engine._frame_offset[0] == 0


def test_the_check_tells_an_exact_rom_from_ones_whose_restored_starts_differ():
    import ale_py

    assert first_difference("breakout") is None
    assert first_difference("assault").startswith("RAM right after reset")  # RAM carried over from the game before
    assert first_difference("atlantis2") is None  # its stale lives counter is not what the engine reports (above)
    assert first_difference("amidar").startswith("screen at frame 1 ")  # the frame buffer drawn before the restore
    version, games = exact_starts()
    assert version == ".".join(ale_py.__version__.split(".")[:2])  # else: python -m shoal.atari.starts to recheck
    assert {"breakout", "pong", "space_invaders", "ms_pacman", "atlantis2"} <= games
    assert not {"assault", "amidar", "qbert"} & games


def test_starts_are_restored_not_emulated():
    _, _, (engine,) = run(["breakout", "breakout"], reset_cache=True, backend="serial", num_workers=1)
    assert engine._starts  # the starts emulated once, by no-op count
    assert (engine._frame_offset > 0).all()  # frames restored starts skipped (frame_number still counts them)


def test_a_rom_whose_reset_keeps_the_last_game_still_gives_the_same_rollouts_for_the_same_seed():
    # assault keeps RAM across reset_game, so a restored start differs from an emulated one after the first episode;
    # what stays: same seed, same rollout, on every backend.
    first, ends, _ = run(["assault", "assault"], reset_cache=True, backend="serial")
    again, _, _ = run(["assault", "assault"], reset_cache=True, backend="multiprocessing", num_workers=2)
    assert ends >= 4
    assert_rollouts_equal(first, again)


def test_state_restore_keeps_frame_numbers_with_restored_starts():
    with shoal.AtariVectorEnv(game="breakout", num_envs=1, backend="serial", reset_cache=True, **SHORT) as envs:
        envs.reset(seed=0)
        for _ in range(150):  # past a few restored starts
            envs.step(np.array([1]))
        state = envs.clone_state()
        _, _, _, _, info = envs.step(np.array([2]))
        for _ in range(80):
            envs.step(np.array([3]))
        envs.restore_state(state)
        _, _, _, _, again = envs.step(np.array([2]))
        assert again["frame_number"][0] == info["frame_number"][0] > 240


def test_reset_cache_refuses_sticky_actions_and_unknown_values():
    with pytest.raises(ConfigError, match=r"reset_cache=True .* repeat_action_probability=0\.25 every start is random"):
        shoal.AtariVectorEnv(game="pong", num_envs=1, reset_cache=True, repeat_action_probability=0.25)
    with pytest.raises(ConfigError, match=r"reset_cache must be True, False or 'auto', got 'yes'"):
        shoal.AtariVectorEnv(game="pong", num_envs=1, reset_cache="yes")
