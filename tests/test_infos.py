"""shoal's merge of per-env infos into Gymnasium's vector form against Gymnasium's own (``VectorEnv._add_info``,
env by env): the same keys in the same order, dtypes, values and masks, for every kind of info, and add_info (in C)
path by path, its errors and its references; Blocks (a hosted vector env's infos, in vector form) against their rows
added one by one. (Columns, which merge a key at a time: tests/test_info_table.py.)"""

from __future__ import annotations

import collections
import enum
import pickle
import sys
import types

import gymnasium as gym
import numpy as np
import pytest
from helpers import memory_grown

from shoal.vector import infos as merging
from shoal.vector._infos import add_info


def gymnasiums(entries, size, row_of=None):
    """Gymnasium's vector infos of ``entries``, each env's info added at its row in turn."""
    vector_env = types.SimpleNamespace(num_envs=size)
    vector_env._add_info = types.MethodType(gym.vector.VectorEnv._add_info, vector_env)
    infos: dict = {}
    for env, info in entries:
        infos = vector_env._add_info(infos, info, env if row_of is None else row_of[env])
    return infos


def assert_same(theirs, ours, ordered=True):
    if ordered:
        assert list(theirs) == list(ours)  # the same keys, in the same order (each key, then its mask)
    else:
        assert sorted(map(repr, theirs)) == sorted(map(repr, ours))
    masks = [value for key, value in ours.items() if isinstance(key, str) and key.startswith("_")]
    assert len({id(mask) for mask in masks}) == len(masks)  # each key its own mask, as Gymnasium's
    for key, value in theirs.items():
        if isinstance(value, dict):
            assert_same(value, ours[key], ordered)
            continue
        if type(value) is not np.ndarray:  # (what a dict holds at a row: the value stored there)
            assert type(ours[key]) is type(value) and ours[key] == value, key
            continue
        assert type(ours[key]) is np.ndarray and ours[key].dtype == value.dtype, key
        assert ours[key].shape == value.shape, key
        for a, b in zip(value.tolist(), ours[key].tolist()):
            assert type(a) is type(b), (key, a, b)
            if isinstance(a, np.ndarray):  # (in an object array)
                assert a.dtype == b.dtype and np.array_equal(a, b), (key, a, b)
            else:
                assert a == b or a != a and b != b or type(a) is list and np.array_equal(a, b, equal_nan=True), (
                    key, a, b)  # (NaN equals NaN here, also in the rows of a 2-d array)


def mujoco_like(rng, env):
    """HalfCheetah's four numpy floats, and one of each scalar type a key at a time takes."""
    return {
        "x_position": np.float64(rng.normal()), "reward_ctrl": np.float32(rng.normal()),
        "count": int(rng.integers(-2**62, 2**62)), "ratio": float(rng.normal()), "flag": bool(env % 2),
        "lives": np.int32(rng.integers(0, 5)), "id": np.uint8(env), "phase": np.complex64(1j * env),
        "nan": float("nan"),
    }


@pytest.mark.parametrize("size", [9, 16, 64])
def test_numeric_infos_equal_gymnasiums(size):
    rng = np.random.default_rng(size)
    entries = [(env, mujoco_like(rng, env)) for env in range(size)]
    assert_same(gymnasiums(entries, size), merging.merge_infos(entries, size))
    # an asynchronous batch: some envs, in the order they came, at their rows of the batch
    envs = rng.permutation(3 * size)[:size].tolist()
    row_of = {env: row for row, env in enumerate(envs)}
    missing = size // 2  # (a row without an info; the others' entries in another order than their rows)
    part = [(envs[row], mujoco_like(rng, envs[row])) for row in rng.permutation(size).tolist() if row != missing]
    assert_same(gymnasiums(part, size, row_of), merging.merge_infos(part, size, row_of))
    assert not merging.merge_infos(part, size, row_of)["_x_position"][missing]


def cases():
    """Infos of other kinds, each a batch of them: each must equal Gymnasium's."""
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
    yield "fewer envs than the batch", base[:7]
    yield "episodes ending in a few envs (RecordEpisodeStatistics), of numpy and Python scalars", [
        (3, {"episode": {"r": 23.0, "l": 23, "t": 1.5}}),
        (5, {"episode": {"r": np.float32(2.0), "l": np.int32(2), "t": 0.25}, "lives": np.uint8(3)}),
        (6, {"lives": True, "episode": {"t": np.float16(0.5)}}),
    ]


@pytest.mark.parametrize("entries", [pytest.param(entries, id=name) for name, entries in cases()])
def test_other_infos_equal_gymnasiums(entries):
    assert_same(gymnasiums(entries, 8), merging.merge_infos(entries, 8))


class Label(str):
    """A str subclass: equal to the plain string it holds."""


class Kind(enum.IntEnum):
    A = 1


def one_by_one():
    """Infos that take each of add_info's paths (written in C): each must merge as Gymnasium's ``_add_info`` does."""
    nested = collections.OrderedDict(r=1.5, l=2)
    yield "keys that are not strings (their masks named by format())", [(1, {3: 1.0, (1, 2): "x", None: 2})]
    yield "dict subclasses, outside and nested", [
        (0, collections.OrderedDict(a=1.0, episode=nested)), (2, collections.defaultdict(int, a=2.0, b=True)),
    ]
    yield "casts into the first value's array", [
        (0, {"i": 7, "f": 0.5, "b": True, "u": np.uint8(3)}),
        (1, {"i": 2.7, "f": 3, "b": 0, "u": 200}),
        (2, {"i": np.float32(-1.5), "f": np.int16(4), "b": np.float64(2.0), "u": np.uint8(250)}),
    ]
    yield "values of types Gymnasium puts in object arrays", [
        (0, {"e": Kind.A, "nb": np.bool_(True), "c": 1 + 2j, "s": b"x", "o": object.__name__}),
        (4, {"e": 5, "nb": False, "c": 0, "s": "y", "o": None}),
    ]
    yield "numpy scalars into their own type, and the extremes", [
        (0, {"a": np.float32(-0.0), "b": np.int64(-(2**63)), "c": np.uint64(2**64 - 1), "d": float("-inf")}),
        (5, {"a": np.float32("nan"), "b": np.int64(2**63 - 1), "c": np.uint64(0), "d": -0.0}),
    ]
    yield "arrays of every shape, and a 0-d one", [
        (0, {"v": np.arange(6.0).reshape(2, 3), "z": np.array(3, np.int8), "o": np.array([None, 1], object)}),
        (3, {"v": np.ones((2, 3), np.float32), "z": np.array(4, np.int8), "o": np.array(["a", 2.0], object)}),
    ]
    yield "final_obs of any kind, and a key equal to it", [
        (0, {"final_obs": {"x": np.zeros(2)}}), (1, {Label("final_obs"): 3}), (2, {"final_obs": np.ones(3)}),
    ]
    yield "a key holding a dict, then a value (stored into the dict, as Gymnasium does)", [
        (0, {"a": {"x": 1}}), (1, {"a": 2.0}),
    ]
    yield "a batch of one env", [(0, {"episode": {"r": 1.0, "l": 1, "t": 0.5}})]


@pytest.mark.parametrize("entries", [pytest.param(entries, id=name) for name, entries in one_by_one()])
def test_each_kind_of_info_added_as_gymnasium_adds_it(entries):
    size = 1 if entries == [(0, entries[0][1])] else 8
    infos: dict = {}
    for env, info in entries:
        assert add_info(infos, info, env, size) is infos
    assert_same(gymnasiums(entries, size), infos)


def errors():
    """Infos Gymnasium's merge raises on: add_info raises the same."""
    looped: dict = {"a": 1.0}
    looped["self"] = looped
    yield "an int past int64 after an int", [(0, {"a": 1}), (1, {"a": 2**64})]
    yield "a value, then a dict under its key", [(0, {"a": 1.0}), (1, {"a": {"x": 1}})]
    yield "arrays of two shapes", [(0, {"v": np.zeros(3)}), (1, {"v": np.zeros(4)})]
    yield "a string into a float array", [(0, {"a": 1.0}), (1, {"a": "x"})]
    yield "a dict that holds itself", [(0, looped)]


@pytest.mark.parametrize("entries", [pytest.param(entries, id=name) for name, entries in errors()])
def test_infos_gymnasium_refuses_are_refused_alike(entries):
    with pytest.raises(Exception) as theirs:
        gymnasiums(entries, 8)
    infos: dict = {}
    with pytest.raises(theirs.type):
        for env, info in entries:
            add_info(infos, info, env, 8)


def test_add_info_keeps_no_reference_and_no_memory():
    """Nothing a merge made or was given stays alive after the merged infos are gone, on success and on error."""
    value, inner = 2.5, {"r": 1.0, "l": 3, "v": np.zeros(3)}
    info = {"episode": inner, "x": value, "final_obs": np.ones(2)}
    bad = [{"a": 1}, {"a": 2**64}]
    before = sys.getrefcount(inner), sys.getrefcount(info["final_obs"])

    def merge_many():
        for _ in range(20000):
            add_info({}, info, 3, 8)
            partial: dict = {}
            add_info(partial, bad[0], 0, 8)
            with pytest.raises(OverflowError):
                add_info(partial, bad[1], 1, 8)

    grown = memory_grown(merge_many)
    assert grown < 4096, grown
    assert (sys.getrefcount(inner), sys.getrefcount(info["final_obs"])) == before


def test_a_step_s_finals_go_env_by_env():
    entries = [(0, {"a": 1.0}), merging.Finals(np.array([1, 2]), [np.zeros(2), np.ones(2)], [{"a": 2.0}, {}])]
    entries += [(env, {"a": float(env)}) for env in range(3, 8)]
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


def _vector_form(rng, m, kinds):
    """A vector env's infos for ``m`` sub-envs, batched by Gymnasium's own ``_add_info`` from one random dict per
    sub-env: each key present in some of them (or none), of the kind ``kinds`` gives it, now and then another."""
    pool = {
        "int": lambda: int(rng.integers(-5, 5)), "float": lambda: float(rng.normal()),
        "bool": lambda: bool(rng.random() < .5), "f32": lambda: np.float32(rng.normal()),
        "i32": lambda: np.int32(rng.integers(9)), "u8": lambda: np.uint8(7), "c64": lambda: np.complex64(1j),
        "vec": lambda: rng.normal(size=2).astype(np.float32), "grid": lambda: rng.integers(0, 9, (2, 2)),
        "col": lambda: rng.integers(0, 9, 1), "str": lambda: "s" * int(rng.integers(3)), "none": lambda: None,
        "list": lambda: [1, 2], "np_bool": lambda: np.bool_(True),
        "nested": lambda: {"r": float(rng.normal()), "l": int(rng.integers(9))} if rng.random() < .7 else {"r": 1.0},
    }
    while True:
        per_env = [{key: pool[kind if rng.random() < .9 else rng.choice(list(pool))]()
                    for key, kind in kinds.items() if rng.random() < .6} for _ in range(m)]
        try:
            info = gymnasiums(list(enumerate(per_env)), m)
            merging.check_block(info, m)  # (a value stored into a dict under its key: not in vector form)
        except Exception:  # (kinds Gymnasium cannot batch together, or warns of: draw again)
            continue
        if rng.random() < .3:  # as RecordEpisodeStatistics makes it: a nested dict's values without masks of their own
            info["episode"] = {"r": rng.normal(size=m), "l": rng.integers(1, 9, m)}
            info["_episode"] = rng.random(m) < .4
        return info


def test_blocks_merge_as_their_rows_added_one_by_one():
    """A hosted vector env's infos come as a Block of its rows in Gymnasium's vector form, merged a key at a time
    where that gives the same arrays: every batch of blocks (at consecutive rows, or scattered through an
    asynchronous batch's order), after other envs' entries with keys of the same or other types, equals each
    block's rows taken apart (``unbatch_info``) and added env by env by Gymnasium's ``_add_info``."""
    rng = np.random.default_rng(7)
    names = ["int", "float", "bool", "f32", "i32", "u8", "c64", "vec", "grid", "col", "str", "none", "list",
             "np_bool", "nested"]
    for trial in range(300):
        m, units = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        size = m * units + int(rng.integers(0, 3))
        kinds = {f"k{j}": names[int(rng.integers(len(names)))] for j in range(int(rng.integers(1, 5)))}
        entries, expanded = [], []
        for env in rng.permutation(size)[: int(rng.integers(0, 3))].tolist():  # envs of other kinds, first
            choices = [1.5, 7, "x", np.float32(2), {"r": 0.5}, np.array([3])]
            plain = {key: choices[int(rng.integers(len(choices)))] for key in [*kinds, "episode"]}
            entries.append((env, plain))
            expanded.append((env, plain))
        for unit in rng.permutation(units).tolist():
            block = merging.Block(unit * m, m, _vector_form(rng, m, kinds))
            entries.append(block)
            expanded += [(unit * m + j, row) for j, row in enumerate(merging.unbatch_info(block.info, m)) if row]
        row_of = None
        if trial % 3 == 1:  # an asynchronous batch: units in the order they came (rows consecutive within each)
            order = [env for u in rng.permutation(units).tolist() for env in range(u * m, (u + 1) * m)]
            row_of = {env: row for row, env in enumerate(order + list(range(m * units, size)))}
        elif trial % 3 == 2:  # scattered
            row_of = {env: row for row, env in enumerate(rng.permutation(size).tolist())}
        try:
            theirs = gymnasiums(expanded, size, row_of)
        except Exception:  # a value Gymnasium cannot put where the key holds another kind: an error here too (not
            with pytest.raises(Exception):  # always the same one, the keys coming in another order)
                merging.merge_infos(entries, size, row_of)
            continue
        # (the same keys, not always in the same order: a block's keys come in its own order, as one vector env of
        # all the rows would hand them out, where env by env they come in the order of the first env that has each)
        assert_same(theirs, merging.merge_infos(entries, size, row_of), ordered=False)
        # as a worker's answer brings them, pickled
        sent = pickle.loads(pickle.dumps(entries, protocol=pickle.HIGHEST_PROTOCOL))
        assert_same(theirs, merging.merge_infos(sent, size, row_of), ordered=False)
        listed = list(merging.each(entries))
        assert [e for e, _ in listed] == [e for e, _ in expanded]
        for (_, got), (_, want) in zip(listed, expanded):
            assert_same(gymnasiums([(0, want)], 1), gymnasiums([(0, got)], 1))


@pytest.mark.parametrize(("info", "match"), [
    ({"a": np.zeros(3)}, r"info\['a'\] is not one value per sub-env \(4\): ndarray"),
    ({"a": np.zeros(4), "_a": np.zeros(3, bool)}, r"info\['_a'\] is not one bool per sub-env \(4\): shape \(3,\)"),
    ({"a": 1.0}, r"info\['a'\] is not one value per sub-env \(4\): float"),
    ({"a": np.float64(1.0)}, r"info\['a'\] is not one value per sub-env \(4\): float64"),
    ({"a": "abcd"}, r"info\['a'\] is not one value per sub-env \(4\): str"),
    ({"e": {"r": np.zeros(2)}}, r"info\['r'\] is not one value per sub-env \(4\)"),
])
def test_blocks_not_in_vector_form_are_refused(info, match):
    with pytest.raises(ValueError, match=match):
        merging.check_block(info, 4)

