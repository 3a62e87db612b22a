"""AtariVectorEnv(reset_cache=True): episode starts restored instead of emulated, with rollouts equal to the default
ones for ROMs whose reset does not depend on the game before (benchmarks/reset_states.py lists them)."""

import numpy as np
import pytest

import shoal
from shoal.errors import ConfigError

from helpers import assert_same, rollout

# Short episodes (ALE's frame limit truncates them) so that a few hundred steps cross many resets.
SHORT = dict(max_num_frames_per_episode=240, noop_max=30, repeat_action_probability=0.0)


def run(games, steps=400, seed=3, **kwargs):
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, 4, size=len(games)) for _ in range(steps)]  # every ROM here has at least 4
    with shoal.AtariVectorEnv(games=games, **SHORT, **kwargs) as envs:
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
    assert ends >= 20  # many episode starts, most of them restored
    assert_rollouts_equal(emulated, restored)  # observations, rewards, flags and every info (frame_number too)


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


def test_reset_cache_refuses_sticky_actions():
    with pytest.raises(ConfigError, match=r"reset_cache=True .* repeat_action_probability=0\.25 every start is random"):
        shoal.AtariVectorEnv(game="pong", num_envs=1, reset_cache=True, repeat_action_probability=0.25)
