"""The README's examples run as written, and leave what their comments say: its first one (Use), Atari's and
PyTorch's. (Its other complete examples run beside what they show: test_batch, test_hosted, test_pufferlib.)"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import shoal
from helpers import run_readme_block


@contextlib.contextmanager
def readme_block(marker: str):
    """The names the README's block left; the vector envs among them are closed afterwards, also where the block
    raised (the README's blocks leave them open, as a user's session would)."""
    namespace: dict = {}
    try:
        yield run_readme_block(marker, namespace)
    finally:
        for value in namespace.values():
            if isinstance(value, shoal.VectorEnv):
                value.close()


def test_the_first_example_runs():
    with readme_block("use-example") as names:
        assert names["ret"].shape == (16,)  # the sequences' discounted returns, one per env
        assert names["obs"].shape == (8, 4) and len(names["info"]["env_id"]) == 8  # the first 8 of the pool's 16
        assert names["AsyncVectorEnv"] is shoal.vector.AsyncVectorEnv


def test_the_atari_example_runs_and_says_what_it_gives():
    with readme_block("atari-example") as names:
        envs, info = names["envs"], names["info"]
        assert envs.num_actions == [6, 6, 4, 6] and envs.single_action_space is None
        assert names["obs"].shape == (4, 4, 84, 84) and names["obs"].dtype == np.uint8
        np.testing.assert_array_equal(info["steps_taken"], [3, 0, 2, 1])  # the empty sequence skipped env 1
        assert len(names["states"]) == 1


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # inductor's own
def test_the_pytorch_example_runs():
    torch = pytest.importorskip("torch", reason="the torch extra (CI installs it)")
    with readme_block("torch-example") as names:
        assert names["obs"].shape == (16, 4, 84, 84) and names["obs"].dtype == torch.uint8
        assert names["steps_taken"].tolist() == [1] * 16
