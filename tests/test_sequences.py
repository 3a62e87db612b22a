"""Multi-step action sequences: discounted sums, early stop, steps_taken and empty-sequence skips."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from fakes.envs import SpaceEnv
from helpers import assert_same

import shoal
from shoal.errors import ActionError


def _by_hand(seed, env_id, seq, gamma, mode="next_step"):
    """The same env stepped action by action: (obs, discounted return, steps, terminated, truncated)."""
    env = SpaceEnv("box_f64_2d", "discrete", max_steps=5 + env_id)
    env.reset(seed=seed + env_id)
    return env, _play(env, seq, gamma)


def _play(env, seq, gamma):
    total, obs, term, trunc, k = 0.0, None, False, False, 0
    for k, a in enumerate(seq, start=1):
        obs, r, term, trunc, _ = env.step(np.int64(a))
        total += gamma**(k - 1) * r
        if term or trunc:
            break
    return obs, total, k, term, trunc


@pytest.mark.parametrize("gamma", [0.9, 1.0, 0.0])
def test_sequences_match_stepping_by_hand(backend, gamma):
    _match_stepping_by_hand(backend, gamma, calls=6, longest=4)


def test_sequences_of_one_action_each_match_stepping_by_hand(backend):
    """A call whose every sequence is one action goes as a plain step (no command per group, nothing to sum): the same
    observations, rewards, flags and steps_taken as a step of the envs by hand, next-step autoresets counting 0."""
    _match_stepping_by_hand(backend, 0.9, calls=14, longest=1, shortest=1)


def test_sequences_beyond_the_workers_shared_area_go_pickled_and_still_match(monkeypatch):
    """A worker reads its group's action sequences from a shared area of ``SEQUENCE_ROWS`` actions per env of the
    group; a group whose sequences do not fit gets them pickled. With 2 per env (a region of 6 actions for a group of
    3 envs) and sequences of 0 to 4 actions, some calls take each way: every one matches the envs stepped by hand."""
    from shoal.vector import _worker, buffers

    monkeypatch.setattr(buffers, "SEQUENCE_ROWS", 2)
    fitted = []

    def put(*args):
        fitted.append(put_sequences(*args))
        return fitted[-1]

    put_sequences = _worker.put_sequences
    monkeypatch.setattr(_worker, "put_sequences", put)
    _match_stepping_by_hand({"num_workers": 2, "context": "fork"}, 0.9, calls=12, longest=4)
    assert True in fitted and False in fitted, fitted


def _match_stepping_by_hand(options, gamma, calls, longest, shortest=0):
    n = 6
    fns = [functools.partial(SpaceEnv, "box_f64_2d", "discrete", max_steps=5 + i) for i in range(n)]
    rng = np.random.default_rng(5)
    refs = [SpaceEnv("box_f64_2d", "discrete", max_steps=5 + i) for i in range(n)]
    for i, ref in enumerate(refs):
        ref.reset(seed=40 + i)
    with shoal.make(fns, **options) as envs:
        envs.reset(seed=40)
        ended = np.zeros(n, bool)
        for _ in range(calls):
            seqs = [rng.integers(-2, 5, size=int(rng.integers(shortest, longest + 1))) for _ in range(n)]
            obs, rew, term, trunc, info = envs.step(seqs, gamma=gamma)
            for i, ref in enumerate(refs):
                if len(seqs[i]) == 0:  # skipped: no step, reward 0, nothing ended
                    assert info["steps_taken"][i] == 0 and rew[i] == 0.0 and not term[i] and not trunc[i]
                    continue
                if ended[i]:  # next-step autoreset: this call is the reset
                    ref_obs, _ = ref.reset()
                    assert info["steps_taken"][i] == 0 and rew[i] == 0.0
                    assert_same(obs[i], ref_obs)
                    ended[i] = False
                    continue
                ref_obs, ret, k, t, tr = _play(ref, seqs[i], gamma)
                assert info["steps_taken"][i] == k
                assert rew[i] == pytest.approx(ret, rel=1e-12, abs=1e-12)
                assert (term[i], trunc[i]) == (t, tr)
                assert_same(obs[i], ref_obs)
                ended[i] = t or tr


def test_sequences_stop_early_and_same_step_resets(backend):
    from fakes.envs import CountingEnv

    with shoal.make([lambda: CountingEnv(3)] * 3, autoreset_mode="same_step", **backend) as envs:
        envs.reset()
        seqs = [np.zeros(5, np.int64), np.zeros(2, np.int64), np.zeros(0, np.int64)]
        obs, rew, term, _, info = envs.step(seqs, gamma=0.5)
        assert info["steps_taken"].tolist() == [3, 2, 0]
        assert rew.tolist() == [1 + 0.5 * 2 + 0.25 * 3, 1 + 0.5 * 2, 0.0]
        assert term.tolist() == [True, False, False]
        assert obs.tolist() == [0, 2, 0] and info["final_obs"][0] == 3
        assert info["_final_obs"].tolist() == [True, False, False]


def test_plain_step_after_sequences_has_no_steps_taken():
    with shoal.make("CartPole-v1", 2, backend="serial") as envs:
        envs.reset(seed=0)
        assert "steps_taken" in envs.step([np.array([0, 1]), np.array([1])])[4]
        assert "steps_taken" not in envs.step(np.array([0, 1]))[4]


@pytest.mark.parametrize(
    "seqs,gamma,match",
    [
        ([np.array([0, 1])], 0.9, r"one action sequence per env \(2\), got 1"),
        ([np.array([0, 1]), [1, 0]], 0.9, r"sequence 1: expected a numpy array"),
        ([np.array([0, 1]), np.array([0.5])], 0.9, r"sequence 1: expected integer actions, got dtype float64"),
        ([np.array([0, 1]), np.array([2])], 0.9, r"sequence 1: action 2 at index \(0,\) is outside \[0, 1\]"),
        ([np.array([0, 1]), np.array([[1]])], 0.9, r"sequence 1: expected 1 axes"),
        ([np.array([0]), np.array([1])], 1.5, r"gamma must be a number in \[0, 1\], got 1.5"),
        ([np.array([0]), np.array([1])], -0.1, r"gamma must be a number in \[0, 1\]"),
    ],
)
def test_bad_sequences(seqs, gamma, match):
    with shoal.make("CartPole-v1", 2, backend="serial") as envs:
        envs.reset(seed=0)
        with pytest.raises(ActionError, match=match):
            envs.step(seqs, gamma=gamma)


def test_sequences_need_an_array_action_space():
    with shoal.make(functools.partial(SpaceEnv, act="dict"), 2, backend="serial") as envs:
        envs.reset(seed=0)
        with pytest.raises(ActionError, match=r"action sequences need an array action space \(Box, Discrete, ...\), "
                                              r"got Dict\("):
            envs.send_sequences(np.zeros(2), np.array([0, 1, 2]), gamma=0.9)  # (the flat form the torch ops send)
        envs.step(envs.action_space.sample())  # (refused before anything was sent)


def test_disabled_autoreset_refuses_a_sequence_for_an_ended_env_but_not_an_empty_one(backend):
    from fakes.envs import CountingEnv

    from shoal.errors import ResetNeededError

    with shoal.make([lambda: CountingEnv(2)] + [lambda: CountingEnv(9)] * 2, autoreset_mode="disabled",
                    **backend) as envs:
        envs.reset()
        envs.step([np.zeros(2, np.int64)] * 3)  # env 0 ends its episode
        obs, rew, term, _, info = envs.step([np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64)])
        assert obs.tolist() == [2, 3, 3] and term.tolist() == [False, False, False]
        assert info["steps_taken"].tolist() == [0, 1, 1]
        with pytest.raises(ResetNeededError, match=r"envs \[0\] ended their episode"):
            envs.step([np.zeros(1, np.int64)] * 3)
