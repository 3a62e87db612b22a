"""A step's numeric infos through shared memory (shoal.vector.info_table): what a worker puts comes back with the
same keys, types and values; what does not fit goes on the pipe as before; and the vector infos merged from it equal
Gymnasium's, in a vector env and against ``VectorEnv._add_info`` itself."""

from __future__ import annotations

import collections
import functools
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from fakes.envs import NumericInfos
from helpers import beside_gymnasium, memory_grown, rollout
from test_infos import assert_same, gymnasiums

import shoal
from shoal.vector import info_table
from shoal.vector.infos import Columns, Finals, each, merge_infos
from shoal.vector.info_table import SCHEMA_BYTES, SLOTS, InfoTable


def tables(num_envs=16):
    """A worker's table and the calling process's, over the same memory (as a worker and its parent map it)."""
    words = np.zeros((num_envs, SLOTS), np.uint64)
    schemas = np.zeros((num_envs, SCHEMA_BYTES), np.uint8)
    return InfoTable(words, schemas), InfoTable(words, schemas)


def group_infos(start, n, t=1, vary=False):
    return [(env, NumericInfos(env, vary=vary).info_at(t)) for env in range(start, start + n)]


def assert_entries_equal(expected, got):
    """The same envs, keys in the same order, and values of the same types, equal (NaN to NaN, -0.0 to -0.0)."""
    assert [env for env, _ in expected] == [env for env, _ in got]
    for (_, want), (_, have) in zip(expected, got):
        assert list(want) == list(have)
        for key, value in want.items():
            assert type(have[key]) is type(value), (key, have[key], value)
            assert repr(have[key]) == repr(value), (key, have[key], value)  # (NaN, the sign of -0.0, every digit)


def test_what_a_worker_puts_comes_back_with_its_types_and_values():
    worker, parent = tables()
    for t in range(1, 12):  # (extremes of every type; NaN, -0.0, infinities)
        entries = group_infos(4, 6, t)
        assert worker.put(entries, np.arange(4, 10))
        columns = parent.read(np.arange(4, 10))
        assert_entries_equal(entries, columns.entries())
        assert_entries_equal(entries, list(each([columns])))
        assert_same(gymnasiums(entries, 16), merge_infos([columns], 16))


def refused():
    """Answers that must go on the pipe, each with why."""
    base = group_infos(0, 4)
    yield "an env without an info", base[:3]
    yield "an env with another key", base[:3] + [(3, {**base[3][1], "extra": 1.0})]
    yield "an env missing a key", base[:3] + [(3, {k: v for k, v in base[3][1].items() if k != "f32"})]
    yield "a value of another type", base[:3] + [(3, {**base[3][1], "f64": 1.5})]
    yield "an env's keys in another order", [(env, {"a": env + 0.5, "b": -env - 0.5}) for env in range(3)] + [
        (3, {"b": -3.5, "a": 3.5})]  # (of one type: only the order tells which value is which key's)
    yield "a subclass of int", [(env, {"a": type("Count", (int,), {})(env)}) for env in range(4)]
    yield "numpy bools (an object array)", [(env, {"a": np.bool_(env % 2)}) for env in range(4)]
    yield "complex numbers", [(env, {"a": np.complex64(env)}) for env in range(4)]
    yield "long doubles", [(env, {"a": np.longdouble(env) / 3}) for env in range(4)]
    yield "strings", [(env, {"a": "x" * env}) for env in range(4)]
    yield "arrays", [(env, {"a": np.ones(2) * env}) for env in range(4)]
    yield "nested dicts", [(env, {"episode": {"r": 1.0}}) for env in range(4)]
    yield "final_obs", [(env, {"final_obs": 1.0}) for env in range(4)]
    yield "empty infos", [(env, {}) for env in range(4)]
    yield "an int beyond int64", [(env, {"a": 2**63 + env}) for env in range(4)]
    yield "an int below int64 beside numpy's", [(env, {"a": -(2**63) - env, "b": np.int8(env)}) for env in range(4)]
    yield "more keys than slots", [(env, {f"k{j}": 1.0 for j in range(SLOTS + 1)}) for env in range(4)]
    yield "a schema over its room", [(env, {"k" * (SCHEMA_BYTES // 2) + str(j): 1.0 for j in range(2)})
                                     for env in range(4)]
    yield "entries out of order", [base[1], base[0], base[2], base[3]]
    yield "an env twice", [base[0], base[0], base[2], base[3]]
    yield "a Finals entry", base[:3] + [Finals(np.array([3]), [np.zeros(1)], [])]
    yield "an info that is not a dict", base[:3] + [(3, list(base[3][1]))]
    yield "an info that is a dict's subclass", base[:3] + [(3, collections.OrderedDict(base[3][1]))]
    yield "only infos that are not dicts", [(env, ["a", "b"]) for env in range(4)]


@pytest.mark.parametrize("entries", [pytest.param(entries, id=name) for name, entries in refused()])
def test_answers_that_do_not_fit_are_refused_and_leave_what_is_read_alone(entries):
    worker, parent = tables()
    ids = np.arange(4)
    before = group_infos(0, 4, t=3)
    assert worker.put(before, ids)
    assert not worker.put(entries, ids)
    after = group_infos(0, 4, t=5)
    assert worker.put(after, ids)  # (the next answer through the table: none of the refused one's values remain)
    assert_entries_equal(after, parent.read(ids).entries())


def test_a_group_s_schema_is_read_again_only_when_it_changed(monkeypatch):
    worker, parent = tables()
    ids = np.arange(8, 12)
    first = group_infos(8, 4)
    other = [(env, {"b": env, "a": np.float32(env)}) for env in range(8, 12)]
    loads = []
    real_loads = info_table.pickle.loads
    monkeypatch.setattr(info_table.pickle, "loads", lambda data: loads.append(data) or real_loads(data))
    for entries, reloaded in ((first, 1), (first, 1), (other, 2), (first, 3), (first, 3)):
        assert worker.put(entries, ids)
        assert_entries_equal(entries, parent.read(ids).entries())
        assert len(loads) == reloaded
    # another group keeps its own schema
    assert worker.put(group_infos(0, 4), np.arange(4))
    assert_entries_equal(group_infos(0, 4), parent.read(np.arange(4)).entries())
    assert_entries_equal(first, parent.read(ids).entries())


def columns_of(entries):
    worker, parent = tables(64)
    ids = np.array([env for env, _ in entries])
    assert worker.put(entries, ids)
    return parent.read(ids)


def test_columns_merge_with_other_entries_as_gymnasium_merges_their_dicts():
    a, b, c = group_infos(0, 4), group_infos(4, 4), group_infos(8, 4)
    later = [(env, {**info, "int": np.float32(env)}) for env, info in group_infos(12, 4)]  # another type for a key
    reordered = [(env, dict(reversed(list(info.items())))) for env, info in group_infos(12, 4)]
    for entries, merged in [
        (a + b + c, [columns_of(a), columns_of(b), columns_of(c)]),
        (a + b, [columns_of(a), *b]),  # (the calling process's own group is plain dicts)
        (b + a, [*b, columns_of(a)]),
        (a + later, [columns_of(a), columns_of(later)]),
        (a + reordered, [columns_of(a), columns_of(reordered)]),
        (reordered + a, [columns_of(reordered), *a]),
        (a[:2], [columns_of(a[:2])]),  # (fewer envs than a key at a time pays for when all are dicts)
    ]:
        assert_same(gymnasiums(entries, 16), merge_infos(merged, 16))
    # a later group's numpy values into an earlier group's array of another type: numpy's cast of a numpy scalar
    # (np.int64(-1) into uint8 is 255, where a Python -1 would be an OverflowError)
    small = [(env, {"u": np.uint8(env), "f": np.float32(env)}) for env in range(4)]
    wider = [(env, {"u": np.int64(-env), "f": np.float64(-env - 0.5)}) for env in range(4, 8)]
    assert_same(gymnasiums(small + wider, 16), merge_infos([columns_of(small), columns_of(wider)], 16))
    # keys that are other keys' mask names, in a group's infos or in an earlier env's (a value array, a dict)
    clash = [(env, {"a": float(env), "_a": np.float32(-env)}) for env in range(4, 8)]
    swapped = [(env, {"_a": np.int8(env - 6), "a": float(env)}) for env in range(4, 8)]
    named = [(0, {"_f64": 2.5, "_int": np.float32(1)})]
    nested = [(0, {"_f64": {"x": 1.0}})]
    for entries, merged in [
        (a[:1] + clash, [*a[:1], columns_of(clash)]),
        (swapped, [columns_of(swapped)]),
        (named + b, [*named, columns_of(b)]),
        (nested + b, [*nested, columns_of(b)]),
        (clash + named, [columns_of(clash), *named]),
    ]:
        assert_same(gymnasiums(entries, 16), merge_infos(merged, 16))
    # a later group's value that the first group's type cannot hold: an error, as Gymnasium's (not a wrapped value)
    huge = [(env, {**info, "int": np.uint64(2**64 - 1)}) for env, info in group_infos(4, 4)]
    with pytest.raises(OverflowError):
        gymnasiums(a + huge, 16)
    with pytest.raises(OverflowError):
        merge_infos([columns_of(a), columns_of(huge)], 16)
    # an asynchronous batch: groups in the order they came, at their rows of the batch
    row_of = {env: row for row, env in enumerate([9, 10, 11, 8, 3, 0, 1, 2])}
    assert_same(gymnasiums(c + a, 8, row_of), merge_infos([columns_of(c), columns_of(a)], 8, row_of))
    # with a step's finals
    finals = Finals(np.array([5]), [np.zeros(1)], [{"f64": 1.0}])
    merged = merge_infos([columns_of(a), finals], 16)
    assert merged["final_obs"][5].tolist() == [0.0] and merged["final_info"]["f64"][5] == 1.0
    assert_same(gymnasiums(a, 16), {k: v for k, v in merged.items() if "final" not in k})


def test_groups_of_the_same_keys_and_types_merge_a_key_at_a_time(monkeypatch):
    """The usual batch (the calling process's own group as dicts, then each worker's group as columns, all of one
    schema) never takes the columns apart into dicts: each adds a key at a time."""
    a, b, c = group_infos(0, 4), group_infos(4, 4), group_infos(8, 4)
    merged = [*a, columns_of(b), columns_of(c)]
    expected = gymnasiums(a + b + c, 16)
    monkeypatch.setattr(Columns, "entries", lambda self: pytest.fail("columns taken apart into dicts"))
    assert_same(expected, merge_infos(merged, 16))
    row_of = {env: row for row, env in enumerate([9, 10, 11, 8, 3, 0, 1, 2])}
    assert_same(gymnasiums(c + a, 8, row_of), merge_infos([columns_of(c), *a], 8, row_of))


def test_merging_columns_keeps_no_reference_and_no_memory():
    """Nothing a merge of columns made or was given outlives the merged infos: at a group's rows, at rows of an
    asynchronous batch, where a key's array refuses them, and where numpy refuses a value."""
    columns = columns_of(group_infos(4, 4))
    row_of = {env: row for row, env in enumerate([5, 7, 4, 6])}
    other = [(0, {"int": np.float32(1.0)})]  # ("int" as float32: the columns' ints go in one by one)
    small = columns_of([(env, {"u": np.uint8(env)}) for env in range(4)])
    huge = columns_of([(env, {"u": 300 + env}) for env in range(4, 8)])  # (Python ints too big for a uint8)
    before = sys.getrefcount(columns.words), sys.getrefcount(columns.keys)

    def merge_many():
        for _ in range(3000):
            merge_infos([columns], 16)
            merge_infos([columns], 4, row_of)
            merge_infos([*other, columns], 16)
            with pytest.raises(OverflowError):
                merge_infos([small, huge], 16)

    grown = memory_grown(merge_many)
    assert grown < 4096, grown
    assert (sys.getrefcount(columns.words), sys.getrefcount(columns.keys)) == before


def counted_columns(monkeypatch):
    """A list to which each batch's infos merged in the calling process add the :class:`Columns` among them."""
    from shoal.vector.base import VectorEnv

    columns = []
    merged = VectorEnv._merged

    def counting(self, parts):
        columns.extend(entry for entry in parts.entries if type(entry) is Columns)
        return merged(self, parts)

    monkeypatch.setattr(VectorEnv, "_merged", counting)
    return columns


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
@pytest.mark.parametrize("config", [
    pytest.param({"num_workers": 2}, id="inline"),
    pytest.param({"num_workers": 2, "inline": False}, id="workers"),
    pytest.param({"num_workers": 4, "inline": False}, id="4-workers"),
    pytest.param({"backend": "ray", "num_workers": 2}, id="ray", marks=pytest.mark.ray),
])
def test_numeric_infos_from_workers_equal_gymnasiums(mode, config, monkeypatch):
    """Every step's infos, key order and dtypes included, equal SyncVectorEnv's, with steps whose infos go through
    the table and steps whose do not (an empty info, a key of another type, a reset's info) in the same batches. On
    Ray a node's pool reads its workers' tables and sends the columns on to the calling process."""
    columns = counted_columns(monkeypatch)
    fns = [functools.partial(NumericInfos, offset=i) for i in range(8)]
    with beside_gymnasium(fns, mode, **config) as (envs, ref):
        for t, (g, e) in enumerate(zip(rollout(envs, lambda t: np.zeros(8, np.int64), 40, 3),
                                       rollout(ref, lambda t: np.zeros(8, np.int64), 40, 3), strict=True)):
            for ours, theirs in zip(g, e):
                if isinstance(theirs, dict):
                    assert_same(theirs, ours)
                else:
                    np.testing.assert_array_equal(theirs, ours, err_msg=f"step {t}")
    assert len(columns) >= 5  # (the table carried some of them)


def test_an_asynchronous_batch_s_numeric_infos_are_its_envs(monkeypatch):
    reads = []
    real_read = InfoTable.read
    monkeypatch.setattr(InfoTable, "read", lambda self, ids: reads.append(ids) or real_read(self, ids))
    fns = [functools.partial(NumericInfos, offset=i, vary=False) for i in range(8)]
    with shoal.make(fns, num_workers=4, batch_size=4) as envs:
        envs.reset(seed=0)
        for _ in range(30):
            envs.send(np.zeros(4, np.int64))
            obs, _, _, _, info = envs.recv()
            expected = [(int(env), NumericInfos(int(env), vary=False).info_at(int(t)))
                        for env, t in zip(info["env_id"], obs[:, 0])]
            rows = {env: row for row, (env, _) in enumerate(expected)}
            theirs = gymnasiums(expected, 4, rows)
            assert_same(theirs, {k: v for k, v in info.items() if k != "env_id"})
    assert len(reads) >= 30


def test_sb3_s_per_env_infos_keep_their_types_through_the_table():
    """SB3's infos are one dict per env: each value of the type the env returned (SB3's own DummyVecEnv's)."""
    pytest.importorskip("stable_baselines3", reason="Stable-Baselines3 is the sb3 extra: pip install 'shoal[sb3]'")
    import shoal.sb3 as sb3
    fns = [functools.partial(NumericInfos, offset=i, vary=False) for i in range(4)]
    venv = sb3.VecEnv(shoal.make(fns, num_workers=2, inline=False, autoreset_mode="same_step"))
    try:
        venv.reset()
        for t in range(1, 4):
            venv.step_async(np.zeros(4, np.int64))
            _, _, _, infos = venv.step_wait()
            for env, info in enumerate(infos):
                want = NumericInfos(env, vary=False).info_at(t)
                assert_entries_equal([(env, want)], [(env, {k: info[k] for k in want})])
    finally:
        venv.close()


def test_gymnasium_env_infos_are_numeric_infos_for_mujoco():
    """HalfCheetah's infos (three numpy float64s and a float32) fit the table."""
    pytest.importorskip("mujoco", reason="the test extra installs it (gymnasium[mujoco])")
    env = gym.make("HalfCheetah-v5")
    env.reset(seed=0)
    entries = [(i, env.step(env.action_space.sample())[4]) for i in range(4)]
    assert_entries_equal(entries, columns_of(entries).entries())
    env.close()
