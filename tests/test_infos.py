"""shoal's merge of per-env infos into Gymnasium's vector form against Gymnasium's own (``VectorEnv._add_info``,
env by env): the same keys in the same order, dtypes, values and masks, on the path that builds a key at a time
(MuJoCo-like infos) and on the infos it leaves to the env-by-env path."""

from __future__ import annotations

import types

import gymnasium as gym
import numpy as np
import pytest

from shoal.vector import infos as merging


def gymnasiums(entries, size, row_of=None):
    """Gymnasium's vector infos of ``entries``, each env's info added at its row in turn."""
    vector_env = types.SimpleNamespace(num_envs=size)
    vector_env._add_info = types.MethodType(gym.vector.VectorEnv._add_info, vector_env)
    infos: dict = {}
    for env, info in entries:
        infos = vector_env._add_info(infos, info, env if row_of is None else row_of[env])
    return infos


def assert_same(theirs, ours):
    assert list(theirs) == list(ours)  # the same keys, in the same order (each key, then its mask)
    masks = [value for key, value in ours.items() if key.startswith("_")]
    assert len({id(mask) for mask in masks}) == len(masks)  # each key its own mask, as Gymnasium's
    for key, value in theirs.items():
        if isinstance(value, dict):
            assert_same(value, ours[key])
            continue
        assert type(ours[key]) is np.ndarray and ours[key].dtype == value.dtype, key
        assert ours[key].shape == value.shape, key
        for a, b in zip(value.tolist(), ours[key].tolist()):
            assert type(a) is type(b), (key, a, b)
            if isinstance(a, np.ndarray):  # (in an object array)
                assert a.dtype == b.dtype and np.array_equal(a, b), (key, a, b)
            else:
                assert a == b or a != a and b != b, (key, a, b)  # (NaN equals NaN here)


def mujoco_like(rng, env):
    """HalfCheetah's four numpy floats, and one of each scalar type a key at a time takes."""
    return {
        "x_position": np.float64(rng.normal()), "reward_ctrl": np.float32(rng.normal()),
        "count": int(rng.integers(-2**62, 2**62)), "ratio": float(rng.normal()), "flag": bool(env % 2),
        "lives": np.int32(rng.integers(0, 5)), "id": np.uint8(env), "phase": np.complex64(1j * env),
        "nan": float("nan"),
    }


@pytest.mark.parametrize("size", [9, 16, 64])
def test_numeric_infos_built_a_key_at_a_time_equal_gymnasiums(size):
    rng = np.random.default_rng(size)
    entries = [(env, mujoco_like(rng, env)) for env in range(size)]
    assert merging._by_key(entries, [], size, None) is not None  # (this path)
    assert_same(gymnasiums(entries, size), merging.merge_infos(entries, size))
    # an asynchronous batch: some envs, in the order they came, at their rows of the batch
    envs = rng.permutation(3 * size)[:size].tolist()
    row_of = {env: row for row, env in enumerate(envs)}
    missing = size // 2  # (a row without an info; the others' entries in another order than their rows)
    part = [(envs[row], mujoco_like(rng, envs[row])) for row in rng.permutation(size).tolist() if row != missing]
    assert merging._by_key(part, [], size, row_of) is not None
    assert_same(gymnasiums(part, size, row_of), merging.merge_infos(part, size, row_of))
    assert not merging.merge_infos(part, size, row_of)["_x_position"][missing]


def cases():
    """Infos a key at a time would get wrong, so left to the env-by-env path: each must still equal Gymnasium's."""
    rng = np.random.default_rng(0)
    base = [(env, {"a": float(env), "b": np.float64(env)}) for env in range(8)]
    yield "an int then floats (cast into the first value's type)", [(0, {"a": 1})] + base[1:]
    yield "a Python float then a numpy float", [(0, {"a": 0.5, "b": 1.5})] + base[1:]
    yield "numpy bools (an object array)", [(env, {"a": np.bool_(env % 2)}) for env in range(8)]
    yield "arrays", [(env, {"a": rng.normal(size=3)}) for env in range(8)]
    yield "nested dicts", [(env, {"episode": {"r": float(env), "l": env}}) for env in range(8)]
    yield "strings and None", [(env, {"a": "x" * env, "b": None}) for env in range(8)]
    yield "different keys", base[:4] + [(env, {"a": float(env)}) for env in range(4, 8)]
    yield "an env twice (the later info wins)", base + [(3, {"a": -1.0, "b": np.float64(-1)})]
    yield "empty infos", [(env, {}) for env in range(8)]
    yield "final observations", [(env, {"final_obs": np.ones(2) * env, "a": 1.0}) for env in range(8)]
    yield "fewer envs than a key at a time pays for", base[: merging.BY_KEY_FROM - 1]
    yield "episodes ending in a few envs (RecordEpisodeStatistics), of numpy and Python scalars", [
        (3, {"episode": {"r": 23.0, "l": 23, "t": 1.5}}),
        (5, {"episode": {"r": np.float32(2.0), "l": np.int32(2), "t": 0.25}, "lives": np.uint8(3)}),
        (6, {"lives": True, "episode": {"t": np.float16(0.5)}}),
    ]


@pytest.mark.parametrize("entries", [pytest.param(entries, id=name) for name, entries in cases()])
def test_other_infos_equal_gymnasiums(entries):
    if entries[0][1] and "final_obs" not in entries[0][1] and len(entries) >= merging.BY_KEY_FROM:
        assert merging._by_key(entries, [], 8, None) is None  # (the env-by-env path)
    assert_same(gymnasiums(entries, 8), merging.merge_infos(entries, 8))


def test_a_step_s_finals_go_env_by_env():
    entries = [(0, {"a": 1.0}), merging.Finals(np.array([1, 2]), [np.zeros(2), np.ones(2)], [{"a": 2.0}, {}])]
    entries += [(env, {"a": float(env)}) for env in range(3, 8)]
    assert merging._by_key(entries, [], 8, None) is None
    infos = merging.merge_infos(entries, 8)
    assert infos["_final_obs"].tolist() == [False, True, True, False, False, False, False, False]
    assert infos["a"].tolist()[:5] == [1.0, 0.0, 0.0, 3.0, 4.0] and infos["final_info"]["a"][1] == 2.0


def test_per_env_infos_are_in_batch_order_copied_and_apart_from_the_finals():
    """``by_env`` (what SB3's and PufferLib's adapters hand out per env): an asynchronous batch's envs 5, 2, 7 in that
    order take rows 0, 1, 2; columns of numeric infos are expanded; each dict and array is a copy; Finals stay apart."""
    vector = np.arange(3.0)
    kept = {"a": 1, "nested": {"v": vector}}
    columns = merging.Columns(np.array([7]), ("a",), (int,), np.array([[3]], np.int64))
    finals = merging.Finals(np.array([5]), [np.zeros(2)], [{"last": True}])
    parts = merging.InfoParts([(2, kept), finals, (5, {"a": 2}), columns], np.array([5, 2, 7]), {})
    infos, ended = merging.by_env(parts, 3)
    assert infos[0] == {"a": 2} and infos[2] == {"a": 3} and list(infos[1]) == ["a", "nested"] and infos[1]["a"] == 1
    assert len(ended) == 1 and ended[0] is finals
    assert infos[1] is not kept and infos[1]["nested"] is not kept["nested"]
    assert infos[1]["nested"]["v"] is not vector and np.array_equal(infos[1]["nested"]["v"], vector)
    infos, _ = merging.by_env(merging.InfoParts([(1, {"b": 4})], None, {}), 2)  # all envs in order: env = row
    assert infos == [{}, {"b": 4}]
