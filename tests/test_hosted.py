"""Gymnasium's own vector envs hosted by shoal (shoal.vector.hosted): each a unit of rows, stepped in one call.

The reference is Gymnasium stepped by hand: the same vector envs side by side (Gymnasium's batch-native
CartPoleVectorEnv), or one SyncVectorEnv of all the sub-envs (SyncVectorEnvs of m sub-envs as the units)."""

from __future__ import annotations

import contextlib
import functools

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.vector import AutoresetMode

import shoal
from shoal.errors import ConfigError, EnvError, EnvOutputError, ResetNeededError
from shoal.vector.infos import unbatch_info

from fakes.envs import LooseSpaceEnv, SpaceEnv
from helpers import assert_same, generator_states, run_readme_block

BACKENDS = [{"backend": "serial"}, {"num_workers": 2}]


def test_cartpole_vector_envs_step_as_each_stepped_by_hand(backend):
    m, n = 16, 4
    refs = [CartPoleVectorEnv(num_envs=m, max_episode_steps=30) for _ in range(n)]
    with shoal.make(functools.partial(CartPoleVectorEnv, num_envs=m, max_episode_steps=30), n, **backend) as envs:
        assert envs.num_envs == n * m and envs.single_observation_space == refs[0].single_observation_space
        obs, info = envs.reset(seed=3)
        assert info == {}
        np.testing.assert_array_equal(obs, np.concatenate([r.reset(seed=3 + k * m)[0] for k, r in enumerate(refs)]))
        rng = np.random.default_rng(0)
        ended = 0
        for t in range(120):
            actions = rng.integers(0, 2, n * m)
            got = envs.step(actions)
            outs = [r.step(actions[k * m:(k + 1) * m]) for k, r in enumerate(refs)]
            for i in range(4):  # (rewards as shoal's are, float64: CartPoleVectorEnv's are float32)
                want = np.concatenate([o[i] for o in outs])
                assert_same(got[i], want.astype(np.float64) if i == 1 else want, f"step {t} output {i}")
            ended += int(np.count_nonzero(got[2] | got[3]))
        assert ended > n * m  # episodes ended (truncated at 30 steps at the latest) and restarted inside the units


def _sync(m, mode):
    return gym.vector.SyncVectorEnv([functools.partial(SpaceEnv, "dict")] * m, autoreset_mode=mode)


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("config", BACKENDS, ids=["serial", "mp-inline"])
def test_units_of_sync_vector_envs_step_as_one_sync_vector_env_of_them_all(mode, config):
    """Three SyncVectorEnvs of 4 sub-envs hosted: every output, infos and same-step final observations included,
    equals one SyncVectorEnv of the 12 sub-envs, seeded alike; with autoreset disabled, partial resets of some rows
    of a unit go to it as Gymnasium's reset_mask."""
    m, n = 4, 3
    ref = _sync(m * n, mode)
    with shoal.make(functools.partial(_sync, m, mode), n, autoreset_mode=mode, **config) as envs:
        assert_same(envs.reset(seed=5), ref.reset(seed=5))
        rng = np.random.default_rng(1)
        for t in range(60):
            actions = rng.integers(-2, 5, n * m)
            got, want = envs.step(actions), ref.step(actions)
            assert_same(got, want, f"step {t}")
            ended = got[2] | got[3]
            if mode is AutoresetMode.DISABLED and ended.any():
                assert_same(envs.reset(options={"reset_mask": ended}), ref.reset(options={"reset_mask": ended}))
    ref.close()


@pytest.mark.parametrize(("obs", "act"), [("nested", "multidiscrete"), ("box_u8_img", "tuple"), ("tuple", "dict")])
def test_units_of_every_kind_of_space_step_as_one_sync_vector_env(obs, act):
    """Nested Dict/Tuple observations and actions, images: the units' rows equal one SyncVectorEnv of all sub-envs."""
    m, n = 3, 2
    fn = functools.partial(SpaceEnv, obs, act)
    ref = gym.vector.SyncVectorEnv([fn] * (m * n))
    with shoal.make(lambda: gym.vector.SyncVectorEnv([fn] * m), n, num_workers=2) as envs:
        assert_same(envs.reset(seed=9), ref.reset(seed=9))
        ref.action_space.seed(0)
        for t in range(30):
            actions = ref.action_space.sample()
            assert_same(envs.step(actions), ref.step(actions), f"step {t}")
    ref.close()


def test_asynchronous_batches_are_whole_units_each_as_stepped_by_hand():
    m, n = 8, 4
    fn = functools.partial(CartPoleVectorEnv, num_envs=m, max_episode_steps=15)
    refs = [fn() for _ in range(n)]
    last = {u: (ref.reset(seed=u * m)[0], np.zeros(m), np.zeros(m, bool), np.zeros(m, bool))
            for u, ref in enumerate(refs)}
    rng = np.random.default_rng(2)
    with shoal.make(fn, n, num_workers=2, batch_size=2 * m) as envs:
        obs, info = envs.reset(seed=0)
        got = (obs, np.zeros(2 * m), np.zeros(2 * m, bool), np.zeros(2 * m, bool))
        seen = set()
        for t in range(40):
            units = info["env_id"].reshape(-1, m)
            assert (units == units[:, :1] + np.arange(m)).all() and (units[:, 0] % m == 0).all()
            for k, u in enumerate((units[:, 0] // m).tolist()):  # each unit as that vector env stepped alone
                seen.add(u)
                for i in range(4):
                    np.testing.assert_array_equal(got[i][k * m:(k + 1) * m], last[u][i], err_msg=f"call {t}")
            actions = rng.integers(0, 2, 2 * m)
            for k, u in enumerate((units[:, 0] // m).tolist()):
                last[u] = refs[u].step(actions[k * m:(k + 1) * m])[:4]
            envs.send(actions)
            *got, info = envs.recv()
        assert seen == set(range(n))


def _rows_of(info, rows):
    """A vector info's part for ``rows`` (a slice): each key's values and mask there, keys no env there has left out."""
    part = {}
    for key, value in info.items():
        if key.startswith("_") and key[1:] in info:
            continue
        mask = info[f"_{key}"][rows]
        if mask.any():
            part[key] = _rows_of(value, rows) if isinstance(value, dict) else value[rows]
            part[f"_{key}"] = mask
    return part


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_asynchronous_batches_carry_each_units_infos_at_its_rows(mode):
    """Units whose sub-envs return infos (nested, arrays, some steps only; resets' too), in asynchronous batches of two
    units out of four: each unit's part of a batch's infos is what that vector env returned, stepped by hand."""
    m, n = 3, 4
    refs = [_sync(m, mode) for _ in range(n)]
    last = {u: ref.reset(seed=7 + u * m)[1] for u, ref in enumerate(refs)}
    rng = np.random.default_rng(4)
    with shoal.make(functools.partial(_sync, m, mode), n, autoreset_mode=mode, num_workers=2, batch_size=2 * m) as envs:
        _, info = envs.reset(seed=7)
        for t in range(40):
            units = (info["env_id"][::m] // m).tolist()
            for k, u in enumerate(units):
                part = _rows_of({key: v for key, v in info.items() if key != "env_id"}, slice(k * m, (k + 1) * m))
                assert_same(part, _rows_of(last[u], slice(0, m)), f"call {t}, unit {u}")
            actions = rng.integers(0, 4, 2 * m)
            for k, u in enumerate(units):
                last[u] = refs[u].step(actions[k * m:(k + 1) * m])[4]
            envs.send(actions)
            *_, info = envs.recv()
    for ref in refs:
        ref.close()


@pytest.mark.parametrize("wrapped", ["by-the-constructor", "by-wrappers"])
def test_record_episode_statistics_on_each_unit_reports_as_on_one_vector_env_of_them_all(backend, wrapped):
    """Gymnasium's vector RecordEpisodeStatistics (its ``episode`` values without masks of their own, under
    ``_episode``) on each unit, on every backend (a unit's infos go back as one Block): the episodes' returns and
    lengths, at their rows, as the wrapper on one SyncVectorEnv of all the sub-envs reports them (their times
    differ). The units' constructor wraps them, or ``shoal.make``'s ``wrappers`` do."""
    m, n = 4, 3

    def plain(count):
        return gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1", max_episode_steps=12)] * count)

    def units(count):
        return gym.wrappers.vector.RecordEpisodeStatistics(plain(count))

    ref = units(m * n)
    wrappers = [gym.wrappers.vector.RecordEpisodeStatistics] if wrapped == "by-wrappers" else None
    with shoal.make(functools.partial(plain if wrappers else units, m), n, wrappers=wrappers, **backend) as envs:
        envs.reset(seed=1)
        ref.reset(seed=1)
        rng = np.random.default_rng(3)
        episodes = 0
        for t in range(50):
            actions = rng.integers(0, 2, m * n)
            *got, info = envs.step(actions)
            *want, theirs = ref.step(actions)
            assert_same(tuple(got), tuple(want), f"step {t}")
            assert set(info) == set(theirs)
            if "episode" in theirs:
                assert_same(info["_episode"], theirs["_episode"], f"step {t}")
                for key in ("r", "l"):
                    assert_same(info["episode"][key], theirs["episode"][key], f"step {t} episode {key}")
                episodes += int(theirs["_episode"].sum())
        assert episodes > m * n
    ref.close()


def test_action_sequences_other_autoreset_modes_and_batches_of_parts_are_refused_with_the_reason():
    fn = functools.partial(CartPoleVectorEnv, num_envs=4)
    with pytest.raises(ConfigError, match=r"batch_size must be a multiple of 4 .* a vector env's sub-envs"):
        shoal.make(fn, 4, num_workers=2, batch_size=6)
    with pytest.raises(ConfigError, match=r"CartPoleVectorEnv .* mode 'next_step'.*autoreset_mode='next_step'"):
        shoal.make(fn, 2, autoreset_mode="same_step")
    for config in ({"backend": "serial"}, {"num_workers": 2, "batch_size": 4}):
        with shoal.make(fn, 2, **config) as envs:
            envs.reset(seed=0)
            n = envs.batch_size
            with pytest.raises(ConfigError, match="action sequences .* steps all its sub-envs in one call"):
                envs.step([np.zeros(2, np.int64)] * n)  # in asynchronous mode too: before anything is sent
            for _ in range(3):
                assert envs.step(np.zeros(n, np.int64))[0].shape == (n, 4)  # the vector env is still usable


def test_a_partial_reset_of_a_unit_that_ignores_reset_mask_is_an_error_and_whole_units_reset():
    """CartPoleVectorEnv resets every sub-env whatever options['reset_mask'] says: resetting some of its rows would
    leave the rows out of step with the env, so it is refused; a mask of whole units resets those units alone."""
    m = 4
    fn = functools.partial(CartPoleVectorEnv, num_envs=m)
    with shoal.make(fn, 2, backend="serial") as envs:
        envs.reset(seed=0)
        obs = envs.step(np.zeros(2 * m, np.int64))[0]
        with pytest.raises(EnvOutputError, match=r"vector env 1 .* sub-envs \[1\] changed the observations of others"):
            envs.reset(options={"reset_mask": np.arange(2 * m) == m + 1})
        whole = np.arange(2 * m) >= m
        again, _ = envs.reset(options={"reset_mask": whole})
        np.testing.assert_array_equal(again[:m], obs[:m])  # unit 0 untouched
        assert not np.array_equal(again[m:], obs[m:])


def test_disabled_autoreset_needs_a_reset_of_the_ended_rows():
    fn = functools.partial(_sync, 3, AutoresetMode.DISABLED)
    with shoal.make(fn, 2, autoreset_mode="disabled", backend="serial") as envs:
        envs.reset(seed=0)
        for _ in range(40):
            _, _, term, trunc, _ = envs.step(np.zeros(6, np.int64))
            if (term | trunc).any():
                break
        with pytest.raises(ResetNeededError, match="reset_mask"):
            envs.step(np.zeros(6, np.int64))


class _BadVector(gym.vector.VectorEnv):
    """A numpy vector env of 4 sub-envs that returns ``bad`` from its second step on (past the checks of every value
    against the space on the first): ``"reward_shape"``, ``"nan"``, ``"obs_shape"``, ``"flags"``, ``"raise"``,
    ``"info"``."""

    def __init__(self, bad: str) -> None:
        self.num_envs, self.bad, self.steps = 4, bad, 0
        self.single_observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 4)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 4)
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def reset(self, *, seed=None, options=None):
        return np.zeros((4, 2), np.float32), {}

    def step(self, actions):
        obs, rewards = np.zeros((4, 2), np.float32), np.zeros(4)
        flags = np.zeros(4, np.bool_)
        self.steps += 1
        if self.steps == 1:
            return obs, rewards, flags, flags, {}
        if self.bad == "raise":
            raise KeyError("boom")
        if self.bad == "reward_shape":
            rewards = np.zeros(3)
        if self.bad == "nan":
            rewards[2] = np.nan
        if self.bad == "obs_shape":
            obs = np.zeros(2, np.float32)  # would broadcast over the rows
        if self.bad == "flags":
            flags = np.zeros(4)
        if self.bad == "info":
            return obs, rewards, flags, np.zeros(4, np.bool_), {"score": 3.0}  # one value, not one per sub-env
        return obs, rewards, flags, np.zeros(4, np.bool_), {}


@pytest.mark.parametrize(("bad", "error", "match"), [
    ("reward_shape", EnvOutputError, r"vector env 1 \(_BadVector, rows 4\.\.7\) .* rewards .* shape \(4,\).* \(3,\)"),
    ("nan", EnvOutputError, r"sub-env 2 \(row 6\) returned reward nan"),
    ("obs_shape", EnvOutputError, r"observations not of .*expected a batch of shape \(4, 2\), got \(2,\)"),
    ("flags", EnvOutputError, r"terminations as an array of shape \(4,\) of bools"),
    ("raise", EnvError, r"vector env 1 \(_BadVector, rows 4\.\.7\) raised KeyError in step\(\)"),
    ("info", EnvOutputError, r"info not in Gymnasium's vector form \(info\['score'\] is not one value per sub-env"),
])
def test_bad_outputs_are_typed_errors_naming_the_vector_env_and_row(bad, error, match):
    fns = [functools.partial(_BadVector, "none"), functools.partial(_BadVector, bad)]
    with shoal.make(fns, num_workers=2, inline=False) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(8, np.int64))
        with pytest.raises(error, match=match) as caught:
            envs.step(np.zeros(8, np.int64))
        assert caught.value.env_id == (6 if bad == "nan" else 4)


def test_spaces_without_a_fixed_size_are_refused_with_the_reason():
    fn = functools.partial(gym.vector.SyncVectorEnv, [functools.partial(LooseSpaceEnv, "text", "discrete")] * 2)
    with pytest.raises(ConfigError, match=r"single observation space .*Text.* leaves without a fixed size"):
        shoal.make(fn, 2, backend="serial")


class _Closes(CartPoleVectorEnv):
    closed_sizes: list[int] = []

    def close(self, **kwargs):
        _Closes.closed_sizes.append(self.num_envs)
        super().close(**kwargs)


def test_units_that_differ_from_env_0s_are_refused_and_every_vector_env_made_is_closed():
    fns = [functools.partial(_Closes, num_envs=4), functools.partial(_Closes, num_envs=5)]
    _Closes.closed_sizes.clear()
    with pytest.raises(ConfigError, match=r"vector env 1 \(_Closes\) has 5 sub-envs, env 0's 4"):
        shoal.make(fns, backend="serial")
    assert sorted(_Closes.closed_sizes) == [4, 4, 5]  # the probe, unit 0, and the refused unit 1


def test_unbatch_info_reads_gymnasiums_vector_form():
    """Per-env infos batched by Gymnasium's own VectorEnv._add_info come back as they were, and batch again into the
    same vector form."""
    per_env = [
        {"t": 3, "vec": np.full(2, 3, np.float32), "nested": {"half": 1.5, "flag": True}, "f32": np.float32(0.25)},
        {},
        {"t": 6, "nested": {"flag": False}, "label": "x", "i32": np.int32(-4)},
    ]
    batcher = gym.vector.VectorEnv()
    batcher.num_envs = 3
    batched: dict = {}
    for j, info in enumerate(per_env):
        batched = batcher._add_info(batched, info, j)
    rows = unbatch_info(batched, 3)
    for got, want in zip(rows, per_env):
        assert_same(got, want)
    again: dict = {}
    for j, info in enumerate(rows):
        again = batcher._add_info(again, info, j)
    assert_same(again, batched)


def test_readme_example_runs():
    namespace = run_readme_block("hosted-example")
    assert namespace["obs"].shape == (65536, 4) and namespace["envs"].closed


def test_make_vecs_arguments_say_how_to_host_the_envs_own_vector_env():
    with pytest.raises(ConfigError, match=r"gymnasium.make_vec's; .*partial\(gymnasium.make_vec, 'CartPole-v1', M"):
        shoal.make("CartPole-v1", 8, vectorization_mode="vector_entry_point")
    fn = functools.partial(gym.make_vec, "CartPole-v1", 4, vectorization_mode="vector_entry_point")
    with shoal.make(fn, 2, backend="serial") as envs:  # what the message says to write
        assert envs.num_envs == 8 and envs.reset(seed=0)[0].shape == (8, 4)


def test_render_gives_each_row_its_own_sub_envs_frame():
    pytest.importorskip("pygame")
    fn = functools.partial(CartPoleVectorEnv, num_envs=3, render_mode="rgb_array")
    refs = [fn() for _ in range(2)]
    with shoal.make(fn, 2, num_workers=2) as envs:
        envs.reset(seed=0)
        for k, ref in enumerate(refs):
            ref.reset(seed=3 * k)
        frames = envs.render()
        assert len(frames) == 6
        for row, frame in enumerate(frames):
            np.testing.assert_array_equal(frame, refs[row // 3].render()[row % 3])
        assert not np.array_equal(frames[0], frames[1])  # the sub-envs' own frames, not one repeated


@pytest.mark.parametrize("backend", [{"backend": "serial"}, {"num_workers": 2}])
def test_np_random_of_each_row_is_its_sub_envs(backend):
    # units of Gymnasium's SyncVectorEnv keep one generator per sub-env: each row gets its own, as a SyncVectorEnv of
    # all the envs gives them; a unit with one generator (Gymnasium's CartPoleVectorEnv) gives it to each of its rows
    sync = functools.partial(gym.make_vec, "CartPole-v1", 2, vectorization_mode="sync")
    ref = gym.make_vec("CartPole-v1", 4, vectorization_mode="sync")
    with shoal.make(sync, 2, **backend) as envs, contextlib.closing(ref):
        envs.reset(seed=3)  # row i seeded 3 + i: a unit takes its first row's seed, and seeds its sub-envs from it
        ref.reset(seed=3)
        assert envs.np_random_seed == ref.np_random_seed == (3, 4, 5, 6)
        assert generator_states(envs) == generator_states(ref)
    with shoal.make(functools.partial(CartPoleVectorEnv, num_envs=3), 2, **backend) as envs:
        envs.reset(seed=3)
        assert envs.np_random_seed == (3, 3, 3, 6, 6, 6)
