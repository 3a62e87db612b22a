"""Batch-native envs (shoal.batch): equal to a single-instance twin on every backend, in every vector-env mode."""

import functools
from contextlib import closing

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import shoal
from shoal.batch import BatchEnv, Streams, compare, seed_states
from shoal.errors import ConfigError, EnvError, EnvOutputError, ResetNeededError

from fakes.batch import BadBatch, Walk, WalkSingle
from helpers import assert_same, run_readme_block


def actions_for(n, steps, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 3, size=(steps, n))


def twins(n, seed):
    """``n`` single-instance Walks reset with seeds ``seed + i``, and each one's current observation."""
    refs = [WalkSingle() for _ in range(n)]
    return refs, {i: refs[i].reset(seed=seed + i)[0] for i in range(n)}


def held_batch(obs, info, expected, rng):
    """The env ids of the batch handed out, its observations checked against their twins', and random actions."""
    ids = info["env_id"].tolist()
    for row, i in enumerate(ids):
        np.testing.assert_array_equal(obs[row], expected[i])
    return ids, rng.integers(0, 3, len(ids))


def test_walk_equals_its_single_instance_twin_with_infos():
    ended = compare(Walk, WalkSingle, 8, steps=120, seed=3)
    assert ended > 50  # episodes ended by termination and by truncation, each reset from the env's own stream


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_every_backend_steps_the_same_as_gymnasium(backend, mode):
    """Observations, rewards, flags and infos (with same-step's final_obs/final_info) against Gymnasium's
    SyncVectorEnv of the single-instance env, on every backend."""
    acts = actions_for(6, 60)
    gym_mode = gym.vector.AutoresetMode("NextStep" if mode == "next_step" else "SameStep")
    with shoal.make(Walk, 6, autoreset_mode=mode, **backend) as ours, \
            closing(gym.vector.SyncVectorEnv([WalkSingle] * 6, autoreset_mode=gym_mode)) as theirs:
        assert_same(ours.reset(seed=5)[0], theirs.reset(seed=5)[0])
        for t in range(60):
            mine, other = ours.step(acts[t]), theirs.step(acts[t])
            for name, a, b in zip(("obs", "reward", "term", "trunc"), mine[:4], other[:4]):
                np.testing.assert_array_equal(a, b, err_msg=f"step {t} {name}")
            assert_same(mine[4], other[4], f"step {t} info")  # same-step: final_obs, final_info["final_x"]


def test_asynchronous_batches_partial_resets_and_sequences():
    """First-N-of-M batches (rows the engine cannot write in place: it scatters them), then a partial reset, then
    action sequences with gamma: each env's trajectory equals its single-instance twin stepped by hand."""
    refs, expected = twins(8, seed=11)
    ended = dict.fromkeys(range(8), False)
    with shoal.make(Walk, 8, num_workers=2, batch_size=2, context="fork") as envs:
        obs, info = envs.reset(seed=11)
        rng = np.random.default_rng(0)
        for _ in range(40):
            ids, actions = held_batch(obs, info, expected, rng)
            for i, a in zip(ids, actions.tolist()):  # next-step autoreset: an env that ended resets instead
                if ended[i]:
                    expected[i], _ = refs[i].reset()
                    ended[i] = False
                else:
                    expected[i], _, term_i, trunc_i, _ = refs[i].step(a)
                    ended[i] = term_i or trunc_i
            envs.send(actions)
            obs, reward, term, trunc, info = envs.recv()
        mask = np.zeros(8, bool)
        mask[info["env_id"][0]] = True
        obs, info = envs.reset(options={"reset_mask": mask})
        i = int(info["env_id"][0])
        np.testing.assert_array_equal(obs[0], refs[i].reset()[0])

    with shoal.make(Walk, 4, backend="serial", autoreset_mode="same_step") as envs, \
            shoal.make(Walk, 4, backend="serial", autoreset_mode="same_step") as single:
        envs.reset(seed=2)
        single.reset(seed=2)
        seqs = [np.array([2, 2, 2, 2]), np.array([1]), np.array([], np.int64), np.array([0, 0, 0])]
        obs, ret, term, trunc, info = envs.step(seqs, gamma=0.5)
        expected = np.zeros(4)
        for k in range(4):
            acts = np.array([s[k] if k < len(s) else 1 for s in seqs])
            o, r, te, tr, _ = single.step(acts)
            live = np.array([k < len(s) for s in seqs]) & (info["steps_taken"] > k)
            expected += np.where(live, 0.5**k * r, 0)
        np.testing.assert_allclose(ret, expected)
        assert info["steps_taken"][2] == 0


def test_asynchronous_batches_same_step_final_observations_and_infos():
    """Same-step mode in first-N-of-M batches: each ended env's final observation and final info land in its row of
    the batch (not its env id's), next to the first observation of its next episode, as its twin stepped by hand
    gives them."""
    refs, expected = twins(8, seed=21)
    finals_seen, final = 0, {}  # env -> (final obs, final info) until a batch hands it out
    with shoal.make(Walk, 8, num_workers=4, batch_size=4, autoreset_mode="same_step", context="fork") as envs:
        obs, info = envs.reset(seed=21)
        rng = np.random.default_rng(1)
        for _ in range(60):
            ids, actions = held_batch(obs, info, expected, rng)
            for i, a in zip(ids, actions.tolist()):
                expected[i], _, term_i, trunc_i, step_info = refs[i].step(a)
                if term_i or trunc_i:
                    final[i] = (expected[i], step_info)
                    expected[i], _ = refs[i].reset()
            envs.send(actions)
            obs, reward, term, trunc, info = envs.recv()  # envs of this send or of an earlier one
            ended = [int(i) in final for i in info["env_id"]]
            if not any(ended):
                assert "final_obs" not in info
                continue
            np.testing.assert_array_equal(info["_final_obs"], ended)
            np.testing.assert_array_equal(info["_final_info"], ended)
            for row in np.flatnonzero(ended).tolist():
                final_obs, final_info = final.pop(int(info["env_id"][row]))
                np.testing.assert_array_equal(info["final_obs"][row], final_obs)
                assert info["final_info"]["final_x"][row] == final_info["final_x"]
                finals_seen += 1
    assert finals_seen > 20


def test_torch_ops_step_a_batch_native_env():
    """envs.torch()'s step op (with an action sequence, flat) equals the numpy step on the same env."""
    torch = pytest.importorskip("torch")
    with shoal.make("shoal/Squared-v0", 16, backend="serial") as envs, \
            shoal.make("shoal/Squared-v0", 16, backend="serial") as plain:
        envs.reset(seed=0)
        plain.reset(seed=0)
        handle, send, step, recv, get_last_info, unregister = envs.torch()
        actions = torch.arange(16) % 8
        obs, reward, terminated, truncated, steps_taken = step(handle, actions)
        expected = plain.step(actions.numpy())
        np.testing.assert_array_equal(obs.numpy(), expected[0])
        np.testing.assert_array_equal(reward.numpy(), expected[1])
        values, offsets = torch.tensor([1, 2, 3] * 16), torch.arange(0, 49, 3)
        obs, reward, terminated, truncated, steps_taken = step(handle, values, offsets, 0.9)
        expected = plain.step([np.array([1, 2, 3])] * 16, gamma=0.9)
        np.testing.assert_array_equal(obs.numpy(), expected[0])
        np.testing.assert_allclose(reward.numpy(), expected[1])
        np.testing.assert_array_equal(steps_taken.numpy(), expected[4]["steps_taken"])
        unregister(handle)


def test_bad_outputs_are_typed_errors_naming_the_env():
    with shoal.make(functools.partial(BadBatch, kind="obs"), 3, backend="serial") as envs:
        envs.reset(seed=0)
        with pytest.raises(EnvOutputError, match=r"BadBatch wrote observations outside Box.* \(env 1 is one\)"):
            envs.step(np.zeros(3, np.int64))
    with shoal.make(functools.partial(BadBatch, kind="reward"), 3, backend="serial") as envs:
        envs.reset(seed=0)
        with pytest.raises(EnvOutputError, match=r"BadBatch wrote a non-finite reward for env 1"):
            envs.step(np.zeros(3, np.int64))
    with shoal.make(functools.partial(BadBatch, kind="raise"), 4, num_workers=2, context="fork") as envs:
        envs.reset(seed=0)
        message = r"batch-native env BadBatch \(envs 0..1\) raised ValueError in step\(\): instance 1 broke"
        with pytest.raises(EnvError, match=message) as caught:
            envs.step(np.zeros(4, np.int64))
        assert isinstance(caught.value, ValueError) and caught.value.env_id == 0  # the first env of its group


def test_an_env_cannot_change_the_ids_it_is_given():
    # shoal hands a group the same ids array every step: one changed in place would misdirect the next step
    with shoal.make(functools.partial(BadBatch, kind="ids"), 3, backend="serial") as envs:
        envs.reset(seed=0)
        message = r"batch-native env BadBatch \(envs 0..2\) raised ValueError in step\(\): .*read-only"
        with pytest.raises(EnvError, match=message) as caught:
            envs.step(np.zeros(3, np.int64))
        assert isinstance(caught.value, ValueError)


def test_spaces_without_a_fixed_size_and_positional_arguments_are_refused():
    class Texts(BatchEnv):
        single_observation_space = spaces.Text(5)
        single_action_space = spaces.Discrete(2)

        def reset(self, ids, seeds, out):
            pass

        def step(self, ids, actions, out):
            pass

    with pytest.raises(ConfigError, match=r"Texts's observation space Text.* has leaves without a fixed size"):
        shoal.make(Texts, 2, backend="serial")
    with pytest.raises(ConfigError, match="by keyword"):
        shoal.make(functools.partial(Walk, 6), 2)
    with pytest.raises(ConfigError, match="observation_mode applies to lists of Gymnasium envs"):
        shoal.make(Walk, 2, observation_mode="different")


def test_keywords_reach_the_env_through_make_and_partial():
    with shoal.make("shoal/Squared-v0", 3, backend="serial", distance=1) as envs:
        assert envs.single_observation_space.shape == (3, 3)
    with shoal.make(functools.partial(Walk, limit=2), 2, backend="serial") as envs:
        envs.reset(seed=0)
        envs.step(np.ones(2, np.int64))
        _, _, term, trunc, _ = envs.step(np.ones(2, np.int64))
        assert (term | trunc).all()
        assert envs.get_attr("limit") == (2, 2)  # the one object hosting both answers for each


def test_readme_example_of_a_batch_native_env_runs():
    """The README's complete example: a user's own numpy env, made, stepped and checked against its twin."""
    assert run_readme_block("batch-example")["episodes"] > 0


def test_disabled_autoreset_needs_a_partial_reset():
    with shoal.make("shoal/Bandit-v0", 4, backend="serial", autoreset_mode="disabled") as envs:
        envs.reset(seed=0)
        _, _, term, _, _ = envs.step(np.zeros(4, np.int64))  # one pull ends every episode
        assert term.all()
        with pytest.raises(ResetNeededError, match=r"envs \[0, 1, 2, 3\] ended their episode"):
            envs.step(np.zeros(4, np.int64))
        envs.reset(options={"reset_mask": np.ones(4, bool)})
        _, _, term, _, _ = envs.step(np.zeros(4, np.int64))
        assert term.all()


def test_streams_seed_what_is_unseeded_and_nothing_else():
    rng = Streams(4)
    rng.seed(np.array([0, 1]), [7, 8])
    seeded = rng.state.copy()
    rng.seed(np.arange(4), [None] * 4)  # an autoreset: instances 2 and 3 never had a seed, so they get one
    assert (rng.state[:2] == seeded[:2]).all() and rng.seeded.all() and (rng.state[2:] != 0).all()
    after = rng.state.copy()
    rng.seed(np.arange(4), [None] * 4)  # every instance has a seed now: nothing changes
    assert (rng.state == after).all()
    rng.seed(np.array([3]), [7])  # an explicit seed restarts a stream; the same seed gives the same stream
    assert rng.state[3] == seeded[0]
    assert rng.uniform(np.array([3]))[0] == rng.uniform(np.array([0]))[0]


def test_streams_start_where_numpys_seed_sequence_does():
    """Seeds are turned into stream states for a whole batch at once (shoal.batch.seed_states), as numpy's
    SeedSequence would one at a time: one-word and two-word seeds, the edges between them, more than 64 bits."""
    edges = [0, 1, 2, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**63 - 1, 2**63, 2**64 - 1]
    drawn = np.random.default_rng(0).integers(0, 2**64 - 1, 500, dtype=np.uint64, endpoint=True).tolist()
    seeds = edges + drawn + list(range(3, 300))
    expected = np.array([np.random.SeedSequence(s).generate_state(1, np.uint64)[0] for s in seeds], np.uint64)
    assert np.array_equal(seed_states(np.array(seeds, np.uint64)), expected)
    rng = Streams(len(seeds) + 2)
    rng.seed(np.arange(len(seeds) + 2), seeds + [2**70, None])  # a seed past 64 bits, and one from the OS
    assert np.array_equal(rng.state[: len(seeds)], expected)
    assert rng.state[-2] == np.random.SeedSequence(2**70).generate_state(1, np.uint64)[0]
    assert rng.seeded.all() and rng.state[-1] != 0


def test_an_autoreset_hands_the_env_seeds_that_read_as_a_list_of_nones():
    """The autoreset's seeds are not a list (building [None] * 65536 cost a step ~90 us) but read as one."""
    seen = []

    class Recorder(BatchEnv):
        single_observation_space = spaces.Box(0, 1, (1,), np.float32)
        single_action_space = spaces.Discrete(2)

        def reset(self, ids, seeds, out):
            out.obs[:] = 0
            if seeds[0] is not None:  # the user's reset(seed=1)
                return
            nones = [None] * len(ids)
            with pytest.raises(IndexError):
                seeds[len(ids)]
            seen.append((list(seeds) == nones, len(seeds) == len(ids), seeds[-1] is None,
                         list(seeds[1:]) == nones[1:], seeds.count(None) == len(ids), seeds.count(0) == 0))

        def step(self, ids, actions, out):
            out.obs[:] = 0
            out.terminations[:] = True

    with shoal.make(Recorder, 3, backend="serial") as envs:
        envs.reset(seed=1)
        envs.step(np.zeros(3, np.int64))
        envs.step(np.zeros(3, np.int64))  # every env autoresets
    assert len(seen) == 1 and all(seen[0]), seen
