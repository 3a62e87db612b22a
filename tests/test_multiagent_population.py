"""Agents that join and leave (a scripted variable population): the order, padding and masks of their rows in each
autoreset mode, written tables of what every step returns, partial resets, and asynchronous batches of whole envs."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

import shoal
from fakes.multiagent import Chatter, DictJoinLeave, JoinLeave
from shoal import errors
from test_multiagent import SMALL_BACKENDS


P = None  # shorthand for a padding observation in the tables
# step -> (observation [base + t, number, last action] per row a, b, c or P; rewards; terminated; truncated; mask),
# every action 1, reset seed 7 (base 7); step 7 is the autoreset (seed None: base 1007).
NEXT_STEP_TABLE = [
    ([[8, 0, 1], [8, 1, 1], P], [11, 11, 0], [0, 0, 1], [0, 0, 0], [1, 1, 0]),
    ([[9, 0, 1], [9, 1, 1], P], [21, 21, 0], [0, 1, 1], [0, 0, 0], [1, 1, 0]),
    ([[10, 0, 1], P, [10, 2, 0]], [31, 0, 0], [0, 1, 0], [0, 0, 0], [1, 0, 1]),
    ([[11, 0, 1], P, [11, 2, 1]], [41, 0, 41], [0, 1, 0], [0, 0, 0], [1, 0, 1]),
    ([[12, 0, 1], P, [12, 2, 1]], [51, 0, 51], [1, 1, 0], [0, 0, 0], [1, 0, 1]),
    ([P, P, [13, 2, 1]], [0, 0, 61], [1, 1, 0], [0, 0, 1], [0, 0, 1]),
    ([[1007, 0, 0], [1007, 1, 0], P], [0, 0, 0], [0, 0, 1], [0, 0, 0], [1, 1, 0]),
    ([[1008, 0, 1], [1008, 1, 1], P], [11, 11, 0], [0, 0, 1], [0, 0, 0], [1, 1, 0]),
]


def table_obs(rows):
    return np.array([[0, 0, 0] if r is None else r for r in rows], np.int64)


@pytest.mark.parametrize("config", SMALL_BACKENDS)
def test_variable_population_rows_next_step(config):
    with shoal.make(JoinLeave, 2, autoreset_mode="next_step", **config) as envs:
        assert (envs.num_envs, envs.num_multiagent_envs, envs.agents_per_env) == (6, 2, 3)
        assert envs.row_agent == ["a", "b", "c", "a", "b", "c"]
        np.testing.assert_array_equal(envs.row_env, [0, 0, 0, 1, 1, 1])
        obs, info = envs.reset(seed=[7, 7])
        np.testing.assert_array_equal(obs[:3], table_obs([[7, 0, 0], [7, 1, 0], P]))
        np.testing.assert_array_equal(info["agent_mask"], [1, 1, 0, 1, 1, 0])
        np.testing.assert_array_equal(info["hello"], [0, 1, 0, 0, 1, 0])
        np.testing.assert_array_equal(info["_hello"], [1, 1, 0, 1, 1, 0])
        np.testing.assert_array_equal(info["env_index"], [0, 0, 0, 1, 1, 1])
        np.testing.assert_array_equal(info["agent_index"], [0, 1, 2, 0, 1, 2])
        for t, (rows, rew, term, trunc, mask) in enumerate(NEXT_STEP_TABLE, start=1):
            obs, r, te, tr, info = envs.step(np.ones(6, np.int64))
            for e in range(2):
                np.testing.assert_array_equal(obs[3 * e : 3 * e + 3], table_obs(rows), err_msg=f"step {t}")
                np.testing.assert_array_equal(r[3 * e : 3 * e + 3], rew, err_msg=f"step {t}")
                np.testing.assert_array_equal(te[3 * e : 3 * e + 3], np.array(term, bool), err_msg=f"step {t}")
                np.testing.assert_array_equal(tr[3 * e : 3 * e + 3], np.array(trunc, bool), err_msg=f"step {t}")
                np.testing.assert_array_equal(info["agent_mask"][3 * e : 3 * e + 3], np.array(mask, bool))
            live = np.tile(np.array(mask, bool), 2)
            if t == 7:  # the autoreset step: the reset infos, in the live rows
                np.testing.assert_array_equal(info["_hello"], live)
            else:
                np.testing.assert_array_equal(info["t"][live], t if t < 7 else t - 7)  # the env's own step count
                np.testing.assert_array_equal(info["_t"], live)


def test_variable_population_rows_same_step():
    with shoal.make(JoinLeave, 1, autoreset_mode="same_step", backend="serial") as envs:
        envs.reset(seed=7)
        for t in range(5):
            envs.step(np.ones(3, np.int64))
        obs, r, te, tr, info = envs.step(np.ones(3, np.int64))  # step 6 ends the episode and resets at once
        np.testing.assert_array_equal(obs, table_obs([[1007, 0, 0], [1007, 1, 0], P]))  # the new episode
        np.testing.assert_array_equal(r, [0, 0, 61])  # the final step's rewards and flags
        np.testing.assert_array_equal(te, [True, True, False])
        np.testing.assert_array_equal(tr, [False, False, True])
        np.testing.assert_array_equal(info["agent_mask"], [True, True, False])  # of the observations returned
        np.testing.assert_array_equal(info["_final_obs"], [True, True, True])
        np.testing.assert_array_equal(info["final_obs"][2], [13, 2, 1])
        np.testing.assert_array_equal(info["final_obs"][0], [0, 0, 0])
        assert info["final_info"]["t"][2] == 6 and not info["final_info"]["_t"][0]
        np.testing.assert_array_equal(info["_hello"], [True, True, False])


@pytest.mark.parametrize("config", SMALL_BACKENDS)
def test_same_step_final_observations_keep_their_loose_leaves(config):
    """A Text leaf travels beside the shared records; in same-step mode each ended row's final_obs still holds it,
    as the env returned it at the step that ended the episode (and the next episode's first observation is the one
    returned). The env keeps its info dicts and changes them in that reset: ``final_info`` holds them as they were."""
    with shoal.make(partial(Chatter, keep_infos=True), 2, autoreset_mode="same_step", **config) as envs:
        obs, _ = envs.reset(seed=0)
        assert list(obs["said"]) == ["0:0:0", "0:0:1"] * 2
        for _ in range(2):
            obs, _, te, _, info = envs.step(np.zeros(4, np.int64))
        assert "final_obs" not in info
        obs, _, te, _, info = envs.step(np.zeros(4, np.int64))  # step 3 ends every episode
        assert te.all() and info["_final_obs"].all()
        for row in range(4):
            assert info["final_obs"][row]["said"] == f"0:3:{row % 2}"
            np.testing.assert_array_equal(info["final_obs"][row]["t"], [3])
        assert list(obs["said"]) == ["1:0:0", "1:0:1"] * 2
        np.testing.assert_array_equal(info["final_info"]["t"], [3] * 4)
        np.testing.assert_array_equal(info["t"], [0] * 4)  # the reset's


def test_variable_population_disabled_autoreset_and_partial_reset():
    with shoal.make(JoinLeave, 2, autoreset_mode="disabled", backend="serial") as envs:
        envs.reset(seed=[7, 50])
        for _ in range(6):
            envs.step(np.ones(6, np.int64))
        with pytest.raises(errors.ResetNeededError, match=r"envs \[0, 1, 2, 3, 4, 5\] ended their episode"):
            envs.step(np.ones(6, np.int64))
        with pytest.raises(errors.ResetArgumentError, match=r"selects some rows of env 1 \(rows 3-5\) but not all"):
            envs.reset(options={"reset_mask": np.array([0, 0, 0, 1, 0, 0], bool)})
        with pytest.raises(errors.ResetArgumentError, match=r"selects some rows of env 1 \(rows 3-5\) but not all"):
            envs.reset(options={"reset_mask": np.array([0, 0, 0, 1, 1, 0], bool)})  # its third row alone left out
        obs, info = envs.reset(seed=[None, 90], options={"reset_mask": np.array([False, True])})  # one bool per env
        np.testing.assert_array_equal(obs[3:], table_obs([[90, 0, 0], [90, 1, 0], P]))
        np.testing.assert_array_equal(obs[:3], table_obs([P, P, [13, 2, 1]]))  # env 0 untouched
        with pytest.raises(errors.ResetNeededError, match=r"envs \[0, 1, 2\]"):
            envs.step(np.ones(6, np.int64))


def test_async_batches_are_whole_envs():
    with shoal.make(JoinLeave, 4, backend="multiprocessing", num_workers=2, batch_size=6, context="fork") as envs:
        obs, info = envs.reset(seed=0)
        seen = set()
        for t in range(2000):  # (every env comes in some batch, though on 2 cores the second worker's first answer
            # can come after a dozen of the first's, idle, and under CI's load after more than 8)
            ids = info["env_id"]
            assert len(ids) == 6 and (ids.reshape(2, 3) % 3 == [0, 1, 2]).all()
            np.testing.assert_array_equal(info["env_index"], ids // 3)
            seen |= set((ids // 3).tolist())
            if t >= 8 and seen == {0, 1, 2, 3}:
                break
            obs, r, te, tr, info = envs.step(np.ones(6, np.int64))
        assert seen == {0, 1, 2, 3}
    with pytest.raises(errors.ConfigError, match=r"batch_size must be a multiple of 3"):
        shoal.make(JoinLeave, 4, backend="serial", batch_size=4)
    with pytest.raises(errors.ConfigError, match=r"num_workers must be between 1 and the number of envs \(4, of 3"):
        shoal.make(JoinLeave, 4, backend="multiprocessing", num_workers=5)


def test_structured_observations_pad_with_zero_records():
    with shoal.make(DictJoinLeave, 2, backend="serial") as envs:
        obs, info = envs.reset(seed=7)
        for _ in range(3):
            obs, r, te, tr, info = envs.step(np.ones(6, np.int64))
        np.testing.assert_array_equal(obs["obs"][:3], table_obs(NEXT_STEP_TABLE[2][0]))  # b is padding at step 3
        np.testing.assert_array_equal(obs["pair"][0][:3], [0, 0, 2])
        np.testing.assert_array_equal(obs["pair"][1][:3], [1, 0, 0])
