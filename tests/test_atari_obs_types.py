"""Seed 002's single-env parameters on the multi-ROM vector env: RAM and RGB observations, stochastic frameskip,
rendering and videos, against Gymnasium's own ``AtariEnv`` (``ALE/...-v5``) stepped by hand."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from ale_py.env import AtariEnv
from atari_reference import compare_rollout, reference_env, step_against
from gymnasium.wrappers import FrameStackObservation

import shoal
from shoal.errors import ConfigError

GAMES = ["pong", "breakout", "space_invaders", "ms_pacman"]
BACKENDS = [
    pytest.param({"backend": "serial"}, id="serial"),
    pytest.param({"backend": "multiprocessing", "num_workers": 2}, id="mp"),
    pytest.param({"backend": "ray", "num_workers": 2}, id="ray", marks=pytest.mark.ray),
]


def _raw_reference(game, *, obs_type, frameskip, stack, max_frames, render_mode=None, padding="reset"):
    """Gymnasium's ``AtariEnv`` as ``gym.make("ALE/<Game>-v5", obs_type=...)`` makes it, stochasticity off (no
    sticky actions), with its observations stacked as shoal stacks them."""
    env = AtariEnv(game, obs_type=obs_type, frameskip=frameskip, repeat_action_probability=0.0,
                   max_num_frames_per_episode=max_frames, render_mode=render_mode)
    return FrameStackObservation(env, stack, padding_type=padding)


def _compare_raw(games, *, obs_type, frameskip, steps, seed, stack=4, max_frames=400, padding="reset", **shoal_kwargs):
    """shoal with obs_type/frameskip and no preprocessing of its own (no no-ops, fire reset, clipping) against one
    Gymnasium SyncVectorEnv per ROM of the raw reference; every result equal. Returns the episodes that ended.

    One deliberate difference, which only screens show: the observation of the step that ends an episode is the
    screen before its last frame in shoal (as ``AtariPreprocessing`` has it), the last frame in ``AtariEnv``; RAM
    is read at the end of every step, so RAM observations are compared there too."""
    refs = [gym.vector.SyncVectorEnv([lambda g=g: _raw_reference(g, obs_type=obs_type, frameskip=frameskip,
                                                                 stack=stack, max_frames=max_frames,
                                                                 padding=padding)])
            for g in games]
    envs = shoal.AtariVectorEnv(
        games=list(games), obs_type=obs_type, frameskip=frameskip, stack_num=stack, noop_max=0,
        use_fire_reset=False, reward_clipping=False, repeat_action_probability=0.0, maxpool=False,
        max_num_frames_per_episode=max_frames, padding_type=padding, **shoal_kwargs,
    )
    return step_against(refs, envs, games, steps=steps, seed=seed, ending_obs=obs_type == "ram")


@pytest.mark.parametrize("backend", BACKENDS)
def test_ram_observations_equal_gymnasium_on_mixed_roms(backend):
    assert _compare_raw(GAMES, obs_type="ram", frameskip=4, steps=160, seed=2, **backend) >= 2


def test_ram_observations_with_zero_padding_equal_gymnasium():
    assert _compare_raw(GAMES, obs_type="ram", frameskip=4, steps=160, seed=2, padding="zero", backend="serial") >= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_rgb_observations_equal_gymnasium_on_mixed_roms(backend):
    """obs_type='rgb' is ale-py's grayscale=False: against AtariPreprocessing of ALE's RGB frames."""
    assert compare_rollout(GAMES, steps=150, seed=4, grayscale=False, max_frames=400, obs_type="rgb", **backend) >= 2


@pytest.mark.parametrize("obs_type", ["ram", "rgb"])
def test_stochastic_frameskip_equals_gymnasium(obs_type):
    """Each step draws its frame count from the env's own generator, as Gymnasium's AtariEnv does."""
    kwargs = {} if obs_type == "ram" else {"img_height": 210, "img_width": 160}
    assert _compare_raw(GAMES, obs_type=obs_type, frameskip=(2, 5), steps=150, seed=6, stack=2, **kwargs) >= 2


def test_stochastic_frameskip_is_the_same_on_every_backend_and_with_sequences():
    settings = dict(games=["breakout", "pong", "breakout", "pong"], frameskip=(2, 6), repeat_action_probability=0.25)
    runs = []
    for backend in ({"backend": "serial"}, {"num_workers": 2}, {"num_workers": 2, "batch_size": 2}):
        with shoal.AtariVectorEnv(**settings, **backend) as envs:
            obs, info = envs.reset(seed=11)
            frames = {}
            rng = np.random.default_rng(0)
            for _ in range(40):
                ids = info["env_id"]
                actions = rng.integers(0, 4, len(ids))
                obs, *_, info = envs.step(actions)
                for env_id, f in zip(info["env_id"].tolist(), info["episode_frame_number"].tolist()):
                    frames.setdefault(env_id, []).append(f)
            runs.append({k: v[:10] for k, v in frames.items()})
    assert runs[0] == runs[1]
    steps = np.diff(runs[0][0])
    assert set(steps.tolist()) - {0} <= {2, 3, 4, 5} and len(set(steps.tolist())) > 1, steps
    with shoal.AtariVectorEnv(**settings, backend="serial") as envs:  # a sequence draws per step too
        _, info = envs.reset(seed=11)
        before = info["episode_frame_number"]
        _, _, _, _, info = envs.step([np.array([0, 1, 0])] * 4, gamma=1.0)
        frames = info["episode_frame_number"] - before
        assert (info["steps_taken"] == 3).all() and ((6 <= frames) & (frames <= 15)).all(), frames


def test_obs_type_and_grayscale_keywords():
    with shoal.AtariVectorEnv(games=["pong"], obs_type="ram", stack_num=2, backend="serial") as envs:
        assert envs.single_observation_space.shape == (2, 128)
        obs, _ = envs.reset(seed=0)
        np.testing.assert_array_equal(obs[0, -1], envs.get_ram()[0])
    with shoal.AtariVectorEnv(games=["pong"], grayscale=False, backend="serial") as envs:
        assert envs.single_observation_space.shape == (4, 84, 84, 3)
    with pytest.raises(ConfigError, match=r"obs_type='rgb' and grayscale=True disagree"):
        shoal.AtariVectorEnv(games=["pong"], obs_type="rgb", grayscale=True)
    with pytest.raises(ConfigError, match=r"obs_type must be one of 'rgb', 'grayscale', 'ram', got 'rgba'"):
        shoal.AtariVectorEnv(games=["pong"], obs_type="rgba")
    with pytest.raises(ConfigError, match=r"frameskip as a tuple must be \(low, high\) with 1 <= low < high"):
        shoal.AtariVectorEnv(games=["pong"], frameskip=(5, 2))
    with pytest.raises(ConfigError, match=r"render_mode must be None or 'rgb_array'"):
        shoal.AtariVectorEnv(games=["pong"], render_mode="human")


@pytest.mark.parametrize("backend", BACKENDS)
def test_render_equals_gymnasium(backend):
    games = ["pong", "breakout", "space_invaders"]
    refs = [reference_env(g, frameskip=4, size=(84, 84), grayscale=True, stack=4, episodic_life=False,
                          max_frames=108000, render_mode="rgb_array") for g in games]
    with shoal.AtariVectorEnv(games=games, render_mode="rgb_array", noop_max=0, use_fire_reset=False,
                              **backend) as envs:
        envs.reset(seed=1)
        for i, ref in enumerate(refs):
            ref.reset(seed=1 + i)
        rng = np.random.default_rng(1)
        for t in range(30):
            actions = rng.integers(0, envs.num_actions)
            envs.step(actions)
            for i, ref in enumerate(refs):
                ref.step(int(actions[i]))
            if t % 10 == 9:
                frames = envs.render()
                assert len(frames) == 3
                for i, ref in enumerate(refs):
                    np.testing.assert_array_equal(frames[i], ref.render(), err_msg=f"env {i} at step {t}")
                np.testing.assert_array_equal(envs.render([2])[0], frames[2])
    with shoal.AtariVectorEnv(games=["pong"], backend="serial") as envs, pytest.raises(
        ConfigError, match=r"render\(\) needs render_mode='rgb_array'"
    ):
        envs.reset(seed=0)
        envs.render()


def test_record_episodes_refuses_what_it_cannot_record(tmp_path):
    import shoal.video

    with shoal.AtariVectorEnv(games=["pong"] * 2, backend="serial") as plain:
        with pytest.raises(ConfigError, match=r"needs a vector env made with render_mode='rgb_array'"):
            shoal.video.RecordEpisodes(plain, tmp_path)
    with shoal.AtariVectorEnv(games=["pong"] * 2, render_mode="rgb_array", autoreset_mode="same_step",
                              backend="serial") as same_step:
        with pytest.raises(ConfigError, match=r"follows next-step autoreset"):
            shoal.video.RecordEpisodes(same_step, tmp_path)
    with shoal.AtariVectorEnv(games=["pong"] * 2, render_mode="rgb_array", backend="serial") as envs:
        for kwargs, match in [({"format": "avi"}, r"format must be 'mp4' or 'gif', got 'avi'"),
                              ({"every": 0}, r"every must be a positive integer, got 0"),
                              ({"env_ids": [0, 2]}, r"env_ids must name envs in \[0, 2\), got \[0, 2\]"),
                              ({"env_ids": []}, r"env_ids must name envs in \[0, 2\), got \[\]")]:
            with pytest.raises(ConfigError, match=match):
                shoal.video.RecordEpisodes(envs, tmp_path, **kwargs)
    assert not (tmp_path / "videos").exists() and not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("format", ["mp4", "gif"])
def test_videos_of_chosen_envs_one_file_per_episode(tmp_path, format):
    iio = pytest.importorskip("imageio.v3")
    envs = shoal.AtariVectorEnv(games=["breakout", "pong", "breakout"], render_mode="rgb_array",
                                max_num_frames_per_episode=120, num_workers=2)
    recorder = shoal.video.RecordEpisodes(envs, tmp_path / "videos", env_ids=[0, 1], every=2, format=format)
    recorder.reset(seed=0)
    lengths = {0: [0], 1: [0]}  # steps per episode of envs 0 and 1, counted here
    rng = np.random.default_rng(0)
    for _ in range(100):
        _, _, term, trunc, _ = recorder.step(rng.integers(0, envs.num_actions))
        for env_id in (0, 1):
            lengths[env_id][-1] += 1
            if term[env_id] or trunc[env_id]:
                lengths[env_id].append(0)
    recorder.close()
    names = sorted(p.name for p in recorder.written)
    assert names == sorted(f"env{e}-{g}-episode{k}.{format}" for e, g in ((0, "breakout"), (1, "pong"))
                           for k in range(0, len(lengths[e]) - 1, 2))
    for path in recorder.written:
        env_id, episode = int(path.name[3]), int(path.stem.split("episode")[1])
        frames = iio.imread(path, plugin="pyav") if format == "mp4" else iio.imread(path, index=None)
        # the reset frame (after the previous episode's end: the autoreset step) and one frame per step
        expected = lengths[env_id][episode] + (1 if episode == 0 else 0)
        assert frames.shape[1:3] == (210, 160), (path.name, frames.shape)
        if format == "mp4":
            assert frames.shape[0] == expected, (path.name, frames.shape)
        else:  # GIF stores a run of identical frames as one longer frame
            assert 1 <= frames.shape[0] <= expected, (path.name, frames.shape)


def test_videos_without_their_extra_say_how_to_get_it(tmp_path):
    from helpers import run_without

    pytest.importorskip("imageio", reason="this hides av alone: imageio is the video extra's other half")
    code = f"""
        import shoal
        envs = shoal.AtariVectorEnv(games=["pong"], render_mode="rgb_array", backend="serial")
        shoal.video.RecordEpisodes(envs, {str(tmp_path / "v")!r}, format="mp4")
    """
    result = run_without("av", code)
    assert result.returncode != 0 and 'needs av to write mp4 files: pip install "shoal[video]"' in result.stderr
    assert "Exception ignored" not in result.stderr, result.stderr


def test_a_recorder_that_refuses_its_arguments_leaves_the_env_open(tmp_path):
    """The env stays the caller's: Gymnasium 1.1's ``VectorEnv.__del__`` closes a wrapper it collects (and with it
    the env), half-built ones too (`.ci/floor` runs this under Gymnasium 1.1)."""
    import gc

    with shoal.AtariVectorEnv(games=["pong"], render_mode="rgb_array", backend="serial") as envs:
        envs.reset(seed=0)
        for bad, match in (({"format": "avi"}, "format must be"), ({"env_ids": [3]}, "env_ids must name envs")):
            with pytest.raises(ConfigError, match=match):
                shoal.video.RecordEpisodes(envs, tmp_path / "v", **bad)
            gc.collect()
            assert not envs.closed
            envs.step(np.zeros(1, np.int64))
