"""The reference shoal's Atari env is compared against: what ale-py's own tests use.

One Gymnasium ``SyncVectorEnv`` of one env per ROM (the ROMs' action sets differ, so they cannot share one), each
``FrameStackObservation(AtariPreprocessing(ale_py.env.AtariEnv(game, frameskip=1)))`` with every source of
randomness switched off (no no-ops, no sticky actions) and no fire reset or reward clipping, which those wrappers
lack. Env ``i`` of shoal's vector env is compared with reference ``i``, step by step.
"""

from __future__ import annotations

import contextlib

import gymnasium as gym
import numpy as np
from ale_py.env import AtariEnv
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

import shoal
from shoal.vector.checks import parse_autoreset_mode

INFO_KEYS = ("lives", "frame_number", "episode_frame_number")
"""The info entries both sides report (the reference also reports ``seeds`` after a seeded reset)."""


def reference_env(game, *, frameskip, size, grayscale, stack, episodic_life, max_frames, render_mode=None,
                  padding="reset", full_action_space=False):
    height, width = size
    base = AtariEnv(
        game,
        obs_type="grayscale" if grayscale else "rgb",
        frameskip=1,
        repeat_action_probability=0.0,
        max_num_frames_per_episode=max_frames,
        render_mode=render_mode,
        full_action_space=full_action_space,
    )
    pre = AtariPreprocessing(
        base,
        noop_max=0,
        frame_skip=frameskip,
        screen_size=(width, height),
        terminal_on_life_loss=episodic_life,
        grayscale_obs=grayscale,
    )
    return FrameStackObservation(pre, stack, padding_type=padding)


def compare_rollout(games, *, steps, seed, autoreset_mode="next_step", frameskip=4, size=(84, 84), grayscale=True,
                    stack=4, episodic_life=False, max_frames=108000, padding="reset", **shoal_kwargs):
    """Step shoal and the reference side by side with the same random actions; assert every result equal.

    Returns how many episodes ended, so a test can check that autoresets were exercised.
    """
    settings = dict(frameskip=frameskip, size=size, grayscale=grayscale, stack=stack, episodic_life=episodic_life,
                    max_frames=max_frames, padding=padding)
    mode = parse_autoreset_mode(autoreset_mode)
    refs = [
        gym.vector.SyncVectorEnv([lambda g=g: reference_env(g, **settings)], autoreset_mode=mode) for g in games
    ]
    envs = shoal_env(games, autoreset_mode=autoreset_mode, **settings, **shoal_kwargs)
    return step_against(refs, envs, games, steps=steps, seed=seed)


def shoal_env(games, *, frameskip, size, grayscale, stack, episodic_life, max_frames, padding="reset",
              **shoal_kwargs):
    """shoal's ``AtariVectorEnv`` of ``games`` that equals the reference envs of the same settings: the sources of
    randomness, the fire reset and reward clipping switched off, as the reference has them."""
    return shoal.AtariVectorEnv(
        games=list(games), noop_max=0, repeat_action_probability=0.0, use_fire_reset=False, reward_clipping=False,
        frameskip=frameskip, img_height=size[0], img_width=size[1], grayscale=grayscale, stack_num=stack,
        episodic_life=episodic_life, max_num_frames_per_episode=max_frames, padding_type=padding, **shoal_kwargs,
    )


def step_against(refs, envs, games, *, steps, seed, ending_obs=True):
    """Step shoal's ``envs`` and one reference vector env per game (``refs``) with the same random actions; assert
    every result equal (``ending_obs=False``: not the observation of a step that ends an episode). Closes them all.

    Returns how many episodes ended, so a test can check that autoresets were exercised.
    """
    rng = np.random.default_rng(seed)
    ended = 0
    with contextlib.ExitStack() as stack_:
        for ref in refs:
            stack_.enter_context(contextlib.closing(ref))
        stack_.enter_context(envs)
        obs, info = envs.reset(seed=seed)
        for i, ref in enumerate(refs):
            ref_obs, ref_info = ref.reset(seed=seed + i)
            np.testing.assert_array_equal(obs[i], ref_obs[0], err_msg=f"reset obs of env {i} ({games[i]})")
            _same_info(info, ref_info, i, "reset")
        for t in range(steps):
            actions = rng.integers(0, envs.num_actions)
            obs, reward, term, trunc, info = envs.step(actions)
            for i, ref in enumerate(refs):
                r_obs, r_rew, r_term, r_trunc, r_info = ref.step(actions[i : i + 1])
                where = f"step {t}, env {i} ({games[i]})"
                if ending_obs or not (r_term[0] or r_trunc[0]):
                    np.testing.assert_array_equal(obs[i], r_obs[0], err_msg=f"obs at {where}")
                assert (reward[i], term[i], trunc[i]) == (r_rew[0], r_term[0], r_trunc[0]), where
                _same_info(info, r_info, i, where)
                if r_info.get("_final_obs", [False])[0]:
                    assert info["_final_obs"][i], f"no final_obs at {where}"
                    np.testing.assert_array_equal(info["final_obs"][i], r_info["final_obs"][0], err_msg=where)
                    for key in INFO_KEYS:
                        assert info["final_info"][key][i] == r_info["final_info"][key][0], f"final {key} at {where}"
                ended += bool(r_term[0] or r_trunc[0])
    return ended


def _same_info(info, ref_info, i, where):
    for key in INFO_KEYS:
        mine, theirs = info[key][i], ref_info[key][0]
        assert mine == theirs, f"info[{key!r}] of env {i} at {where}: {mine} vs {theirs}"
