"""The README's examples run as written, and leave what their comments say: its first one (Use), the adapters'
(SB3, EnvPool, SuperSuit), Atari's two, PyTorch's and PettingZoo's; a training budget is cut where there is one. (Its
other complete examples run beside what they show: test_batch, test_hosted, test_pufferlib_api.)"""

from __future__ import annotations

import contextlib
import gc

import gymnasium
import numpy as np
import pytest

import shoal
from helpers import run_readme_block

PETTINGZOO_MODULES = "ignore:The old environment creation API has been deprecated:DeprecationWarning"
"""PettingZoo 1.27's warning where its env modules are imported, as the README's examples do (every release has
them; the registry that 1.27 prefers is tested in test_multiagent)."""
TINY_PPO = {'PPO("MlpPolicy", envs).learn(100_000)': 'PPO("MlpPolicy", envs, n_steps=8, batch_size=64).learn(64)'}
"""The README's PPO runs one rollout of 8 steps an env instead of 100,000 steps."""


@contextlib.contextmanager
def readme_block(marker: str, given: dict | None = None, edits: dict[str, str] | None = None):
    """The names the README's block left (run with the names ``given``: what its reader brings, such as actions);
    shoal's objects among them are closed afterwards, also where the block raised, and those it dropped are collected
    (the README's blocks leave them open, as a user's session would)."""
    namespace: dict = dict(given or {})
    try:
        yield run_readme_block(marker, namespace, edits)
    finally:
        for value in namespace.values():
            if type(value).__module__.startswith("shoal.") and callable(getattr(value, "close", None)):
                value.close()
        gc.collect()  # a vector env the block made and dropped stops its workers as it is collected


def test_the_first_example_runs():
    with readme_block("use-example") as names:
        assert names["ret"].shape == (16,)  # the sequences' discounted returns, one per env
        assert names["obs"].shape == (8, 4) and len(names["info"]["env_id"]) == 8  # the first 8 of the pool's 16
        assert names["AsyncVectorEnv"] is shoal.vector.AsyncVectorEnv


def test_the_atari_example_runs_and_says_what_it_gives():
    with readme_block("atari-example") as names:
        envs, info = names["envs"], names["info"]
        assert envs.num_actions == [6, 6, 4, 6] and envs.single_action_space is None
        assert isinstance(envs.action_space, gymnasium.spaces.MultiDiscrete)
        assert names["obs"].shape == (4, 4, 84, 84) and names["obs"].dtype == np.uint8
        np.testing.assert_array_equal(info["steps_taken"], [3, 0, 2, 1])  # the empty sequence skipped env 1
        assert len(names["states"]) == 1


def test_the_atari_parameters_example_runs(tmp_path, monkeypatch):
    pytest.importorskip("av", reason="shoal.video's MP4s (the test extra installs imageio and av)")
    monkeypatch.chdir(tmp_path)  # (where its videos go)
    with readme_block("atari-parameters-example", given={"shoal": shoal}) as names:  # (the example above's import)
        assert [frame.shape for frame in names["frames"]] == [(210, 160, 3)] * 2
        assert isinstance(names["envs"], shoal.video.RecordEpisodes) and names["envs"].num_envs == 2


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # inductor's own
def test_the_pytorch_example_runs():
    torch = pytest.importorskip("torch", reason="the torch extra (CI installs it)")
    with readme_block("torch-example") as names:
        assert names["obs"].shape == (16, 4, 84, 84) and names["obs"].dtype == torch.uint8
        assert names["steps_taken"].tolist() == [1] * 16


def test_the_stable_baselines3_example_runs():
    pytest.importorskip("stable_baselines3", reason="the sb3 extra (CI installs it)")
    from stable_baselines3.common.vec_env import VecEnv

    with readme_block("sb3-example", edits=TINY_PPO) as names:
        assert isinstance(names["envs"], shoal.sb3.SubprocVecEnv) and isinstance(names["envs"], VecEnv)
        assert names["envs"].num_envs == 8


def test_the_envpool_example_runs():
    pytest.importorskip("mujoco", reason="the test extra installs MuJoCo")
    with readme_block("envpool-example", given={"actions": np.zeros((8, 6), np.float32)}) as names:
        assert names["obs"].shape == (8, 17)  # HalfCheetah's
        assert sorted(names["info"]["env_id"]) == list(range(8))


@pytest.mark.filterwarnings(PETTINGZOO_MODULES)
def test_the_multiagent_example_runs_and_says_what_it_gives():
    pytest.importorskip("pymunk", reason="PettingZoo's butterfly envs (the test extra installs them)")
    with readme_block("multiagent-example") as names:
        info = names["info"]
        assert names["obs"].shape == (160, 457, 120, 3)
        assert info["agent_mask"].all()  # no piston leaves pistonball on its first step
        np.testing.assert_array_equal(info["env_index"], np.repeat(np.arange(8), 20))
        np.testing.assert_array_equal(info["agent_index"], np.tile(np.arange(20), 8))


@pytest.mark.filterwarnings(PETTINGZOO_MODULES)
def test_the_supersuit_example_runs():
    pytest.importorskip("stable_baselines3", reason="the sb3 extra (CI installs it)")
    pytest.importorskip("pymunk", reason="PettingZoo's butterfly envs (the test extra installs them)")
    pytest.importorskip("supersuit", reason="black_death_v3 is SuperSuit's own (the test extra installs it)")
    with readme_block("supersuit-example", edits=TINY_PPO) as names:
        assert names["envs"].num_envs == 8 * 4  # 8 copies of 2 archers and 2 knights
