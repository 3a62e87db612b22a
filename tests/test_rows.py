"""The engine's fast write of a step's results (shoal.vector._rows): it stores exactly what numpy's writes would
store for the values it takes, writes nothing when any value is not one of them, and a well-behaved env never leaves
it; everything it leaves gets the full checks (tests/test_bad_data.py), so what is stored equals Gymnasium's
SyncVectorEnv whatever types an env returns. Its numbers: test_rows_numbers.py; a multi-agent env's rows:
test_rows_agents.py."""

from __future__ import annotations

import functools
import importlib.util
import warnings
from collections import OrderedDict, namedtuple
from contextlib import closing

import gymnasium as gym
import numpy as np
import pytest
from fakes.varied import DICT_SPACE, FLOAT_OBS, Said, TextOnly, Varied, VariedDict
from gymnasium import spaces
from helpers import assert_same

import shoal
from shoal.spaces import Layout
from shoal.vector._rows import RowWriter
from shoal.vector.outputs import observation_check
from shoal.vector import gym_engine


@pytest.mark.parametrize("env_fn", [Varied, VariedDict, Said, TextOnly])
def test_any_types_of_results_store_as_gymnasiums_sync_vector_env_stores_them(backend, env_fn):
    fns = [env_fn] * 4
    actions = [np.array([t % 2, 1, 0, (t // 2) % 2]) for t in range(60)]
    with shoal.make(fns, **backend) as envs, closing(gym.vector.SyncVectorEnv(fns)) as ref:
        assert_same(envs.reset(seed=3), ref.reset(seed=3))
        for action in actions:
            assert_same(envs.step(action), ref.step(action))


def _batch(space, n=3):
    layout = Layout(space)
    return layout, layout.empty(n)


def test_what_it_takes_is_stored_as_numpys_writes_store_it():
    overflowed = 0
    for space, values in [
        (spaces.Box(-np.inf, np.inf, (4,), np.float32), FLOAT_OBS[:2] + [np.array([1e300, -1e300, 0.0, 1.0])]),
        (spaces.Box(0, 255, (2, 3), np.uint8), [np.arange(6, dtype=np.uint8).reshape(2, 3)]),
        (spaces.Discrete(7), [3, np.int64(6), np.array(5)]),
        (spaces.Box(-1, 1, (), np.float32), [0.1, np.float32(-0.5), np.array(0.25, np.float32), 1e300, -1e39]),
        (spaces.Box(-1, 1, (), np.float64), [0.1, np.float64(-0.5)]),
        (spaces.MultiBinary(5), [np.array([1, 0, 1, 1, 0], np.int8)]),
        (spaces.Box(0, 1, (3,), np.bool_), [np.array([True, False, True])]),
        # lists: Python floats (-0.0, NaN, a subnormal, one rounded), numpy floats, ints rounded through a double
        (spaces.Box(-np.inf, np.inf, (4,), np.float32), [
            [0.25, -0.0, float("nan"), float("inf")], [1, 2**60 + 2**36 + 1, -3, 0.1],
            [np.float32(1 / 3), np.float64(1 / 3), 1e-45, -1e-40], [1, 2, 3, 4]]),
        (spaces.Box(-np.inf, np.inf, (3,), np.float64), [[0.1, 2**62 + 1, np.float32(0.1)]]),
        (spaces.Box(-1, 1, (0,), np.float32), [[]]),
        (spaces.Box(-128, 127, (3,), np.int8), [[-128, 127, 0]]),
        (spaces.Box(0, 9, (2,), np.int32), [[2**31 - 1, -2**31]]),
        (spaces.Box(0, 9, (2,), np.int64), [[2**63 - 1, -2**63]]),
        (spaces.MultiDiscrete([3, 4]), [[2, 3]]),
        (spaces.MultiBinary(3), [[1, 0, 1]]),
        # arrays numpy casts to the leaf's dtype safely: widened item by item as that cast converts them
        (spaces.Box(-9, 9, (3,), np.int64), [
            np.array([-2**31, 2**31 - 1, 5], np.int32), np.array([-128, 127, 0], np.int8),
            np.array([0, 255, 7], np.uint8), np.array([0, 2**32 - 1, 1], np.uint32), np.array([True, False, True])]),
        (spaces.Box(-np.inf, np.inf, (3,), np.float64), [
            np.array([np.nan, -0.0, 1e-45], np.float32), np.array([np.inf, 1 / 3, -2.5], np.float32),
            np.array([2**53 + 1, -2**63, 7], np.int64), np.array([2**64 - 1, 0, 3], np.uint64),
            np.array([-2**31, 1, 2], np.int32), np.array([True, False, True])]),
        (spaces.Box(-9, 9, (3,), np.float32), [
            np.array([-2**15, 2**15 - 1, 3], np.int16), np.array([0, 255, 9], np.uint8),
            np.array([False, True, True])]),
        (spaces.Box(0, 9, (2,), np.uint32), [np.array([255, 0], np.uint8), np.array([2**16 - 1, 1], np.uint16)]),
        (spaces.Box(-9, 9, (2,), np.int16), [np.array([-128, 127], np.int8), np.array([255, 0], np.uint8)]),
        (spaces.Discrete(7), [np.array(5, np.int32), np.array(6, np.uint8)]),
        (spaces.MultiDiscrete([3, 4]), [np.array([2, 3], np.int32)]),
        # arrays numpy casts as the same kind: ints rounded into float32 (directly, not through a double), narrower
        # ints within the leaf's range (the full checks refuse the others), bools of any nonzero byte as 1
        (spaces.Box(-9, 9, (4,), np.float32), [
            np.array([2**60 + 2**36 + 1, -2**63, 2**24 + 1, 7]),
            np.array([2**64 - 1, 2**63 + 2**39 + 1, 0, 5], np.uint64),
            np.array([2**31 - 1, -2**31, 2**24 + 3, -(2**25 + 3)], np.int32),
            np.array([2**32 - 1, 0, 1, 9], np.uint32)]),
        (spaces.Box(-9, 9, (3,), np.int32), [
            np.array([-2**31, 2**31 - 1, 0]), np.array([0, 2**31 - 1, 7], np.uint64),
            np.array([0, 2**31 - 1, 3], np.uint32)]),
        (spaces.Box(-9, 9, (3,), np.int8), [np.array([-128, 127, 0], np.int64), np.array([127, 0, 1], np.uint16)]),
        (spaces.Box(0, 9, (3,), np.uint8), [np.array([255, 0, 1], np.uint64), np.array([255, 0, 1], np.uint16)]),
        (spaces.Box(0, 9, (2,), np.uint32), [np.array([2**32 - 1, 0], np.uint64)]),
        (spaces.Box(0, 9, (2,), np.int64), [np.array([2**63 - 1, 0], np.uint64)]),
        (spaces.Box(-9, 9, (3,), np.int64), [np.array([2, 255, 0], np.uint8).view(np.bool_)]),
        (spaces.Box(-9, 9, (3,), np.float32), [np.array([2, 255, 0], np.uint8).view(np.bool_)]),
        # arrays of the leaf's dtype, not C-contiguous (slices, transposes, reversed, broadcast): numpy's own copy
        (spaces.Box(-np.inf, np.inf, (4,), np.float32), [
            np.arange(8, dtype=np.float32)[::2], np.arange(4, dtype=np.float32)[::-1],
            np.broadcast_to(np.float32(-0.0), (4,)), np.array([np.nan, 1e-45, -1.0, 2.0], np.float32)[::-1]]),
        (spaces.Box(0, 255, (2, 3), np.uint8), [
            np.arange(6, dtype=np.uint8).reshape(3, 2).T, np.asfortranarray(np.arange(6, dtype=np.uint8).reshape(2, 3)),
            np.arange(24, dtype=np.uint8).reshape(4, 6)[::2, ::2]]),
        # tuples, read as numpy reads lists
        (spaces.Box(-np.inf, np.inf, (4,), np.float32), [
            (0.25, -0.0, float("nan"), float("inf")), (1, 2**60 + 2**36 + 1, -3, 0.1),
            (np.float32(1 / 3), 1e-45, 0, 1)]),
        (spaces.Box(-np.inf, np.inf, (2,), np.float64), [(0.1, 2**62 + 1)]),
        (spaces.Box(0, 9, (2,), np.int32), [(2**31 - 1, -2**31)]),
        (spaces.Box(-1, 1, (0,), np.float32), [()]),
        # nested lists and tuples for a leaf of more dims, read as numpy reads them
        (spaces.Box(-np.inf, np.inf, (2, 3), np.float32), [
            [[0.25, -0.0, float("nan")], [float("inf"), 1e-45, 2**60 + 2**36 + 1]],
            ([1, 2, 3], (np.float32(1 / 3), np.float64(0.1), -1))]),
        (spaces.Box(-9, 9, (2, 2, 2), np.int8), [[[[-128, 127], [0, 1]], [(2, 3), [-1, -2]]]]),
        (spaces.Box(-9, 9, (2, 1), np.float64), [[[0.1], [2**62 + 1]]]),
        # lists and tuples of arrays of the leaf's dtype (a frame stack kept as a list of frames), at any level
        (spaces.Box(0, 255, (4, 3, 2), np.uint8), [
            [np.full((3, 2), k, np.uint8) for k in (0, 255, 7, 128)],
            tuple(np.arange(6, dtype=np.uint8).reshape(3, 2) + k for k in range(4)),
            [[np.array([k, j], np.uint8) for j in range(3)] for k in range(4)],
            [[np.array([9, j], np.uint8) for j in range(3)], np.zeros((3, 2), np.uint8)] * 2]),  # (a mix of levels)
        (spaces.Box(-np.inf, np.inf, (2, 3), np.float32), [
            [np.array([np.nan, -0.0, 1e-45], np.float32), np.array([np.inf, 1 / 3, -2.5], np.float32)]]),
        (spaces.Box(-9, 9, (2, 2), np.int64), [(np.array([2**63 - 1, -2**63]), np.array([0, 1]))]),
        (spaces.Box(0, 1, (2, 2), np.bool_), [[np.array([True, False]), np.array([False, True])]]),
        (spaces.MultiBinary((2, 3)), [[np.array([1, 0, 1], np.int8), np.array([0, 0, 1], np.int8)]]),
    ]:
        layout, fast = _batch(space)
        _, slow = _batch(space)
        put = RowWriter([((), (), fast)], np.zeros(3), np.zeros(3, np.bool_), np.zeros(3, np.bool_)).put
        full_check = observation_check(layout)
        for value in values:
            full_check(value)  # (raises if the full checks would refuse it: the writer takes nothing they refuse)
            with warnings.catch_warnings(record=True) as fast_warned:
                warnings.simplefilter("always")
                assert put(1, 2, value, 1.0, False, False) == 1, (space, value)
            with warnings.catch_warnings(record=True) as slow_warned:
                warnings.simplefilter("always")
                slow[1] = value
            assert fast.dtype == slow.dtype and fast.tobytes() == slow.tobytes(), (space, value)  # -0.0, NaN: bits
            # past float32's range: numpy's RuntimeWarning from both
            assert [(w.category, str(w.message)) for w in fast_warned] == [
                (w.category, str(w.message)) for w in slow_warned], (space, value)
            overflowed += bool(slow_warned)
    assert overflowed == 3  # the array with 1e300, 1e300 and -1e39: numpy warned of each, and so did the writer


Pair = namedtuple("Pair", "x y")


@pytest.mark.parametrize(
    "space,value",
    [
        (spaces.Box(-1, 1, (2,), np.float32), [0.5, 1e300]),  # past float32's range: numpy warns per item
        (spaces.Box(-1, 1, (2,), np.float32), [0.5, 2**63]),  # an int past int64
        (spaces.Box(-1, 1, (2,), np.float32), [0.5, True]),  # a bool
        (spaces.Box(-1, 1, (2,), np.float32), [0.5, "1"]),
        (spaces.Box(-1, 1, (2,), np.float32), [0.5]),  # too short: numpy would broadcast it
        (spaces.Box(-1, 1, (2,), np.float16), [0.5, 0.25]),  # a leaf of another dtype
        (spaces.Box(0, 1, (2,), np.bool_), [True, False]),
        (spaces.Box(-1, 1, (2, 2), np.float32), [[0.5, 0.5], [0.5]]),  # ragged
        (spaces.Box(-1, 1, (), np.float32), [0.5]),  # for a 0-d leaf
        (spaces.Box(-128, 127, (2,), np.int8), [1, 128]),  # past the leaf's range
        (spaces.Box(0, 255, (2,), np.uint8), [1, 2]),  # ints for an unsigned leaf: refused, as Gymnasium refuses them
        (spaces.Box(0, 255, (2,), np.uint64), [1, 2]),
        (spaces.Box(0, 255, (2,), np.int32), [1, 1.0]),  # a float for an integer leaf
        (spaces.Box(0, 255, (2,), np.int64), [1, np.int64(2)]),  # numpy's int (a list of them may promote otherwise)
        (spaces.Box(0, 255, (0,), np.int64), []),  # empty: float64 to numpy
        # arrays numpy does not cast as the same kind, or past the leaf's range (the full checks decide), or that the
        # writer leaves to numpy
        (spaces.Box(0, 255, (2,), np.int32), np.array([1, 2**31])),  # narrower, past the leaf's range: refused there
        (spaces.Box(0, 255, (2,), np.int32), np.array([-2**31 - 1, 2])),
        (spaces.Box(0, 255, (2,), np.int64), np.array([1, 2**63], np.uint64)),
        (spaces.Box(0, 255, (2,), np.uint8), np.array([1, 256], np.uint16)),
        (spaces.Box(0, 255, (2,), np.uint8), np.array([1, 2], np.int8)),  # signed into unsigned
        (spaces.Box(0, 255, (2,), np.int64), np.array([1.0, 2.0])),  # floats for an integer leaf
        (spaces.Box(0, 255, (2,), np.float16), np.array([1, 2], np.int32)),  # a float16 leaf
        (spaces.Box(0, 255, (2,), np.float32), np.array([1, 2], np.float16)),
        (spaces.Box(0, 255, (2,), np.int64), np.array([1, 2], ">i4")),  # big-endian
        (spaces.Box(0, 255, (2,), np.int64), np.arange(4, dtype=np.int32)[::2]),  # not contiguous, another dtype
        (spaces.Box(0, 255, (2,), np.int64), np.array([1, 2, 3], np.int32)),  # another shape
        (spaces.Box(0, 255, (2, 2), np.uint8), np.zeros((4, 6), np.uint8)[::2, ::2]),  # strided, another shape
        (spaces.Box(-1, 1, (2,), np.float32), (0.5, True)),  # tuples: as lists
        (spaces.Box(-1, 1, (2,), np.float32), (0.5,)),
        (spaces.Box(0, 255, (2,), np.uint8), (1, 2)),
        (spaces.Box(-1, 1, (2, 2), np.float32), [[0.5, 0.5], np.array([0.5, 0.5])]),  # numbers and an array
        (spaces.Box(-1, 1, (2, 2), np.float32), [np.array([0.5, 0.5], np.float32), [0.5, 0.5]]),
        (spaces.Box(0, 255, (2, 2), np.uint8), [np.array([1, 2], np.uint8), [3, 4]]),  # int64 to numpy: refused
        (spaces.Box(0, 255, (2, 2), np.uint8), [np.array([1, 2], np.uint8), np.array([1, 2])]),  # another dtype
        (spaces.Box(-1, 1, (2, 2), np.float32), [np.array([0.5, 0.5]), np.array([0.5, 0.5])]),  # (float64)
        (spaces.Box(0, 255, (2, 2), np.uint8), [np.arange(4, dtype=np.uint8)[::2]] * 2),  # not contiguous
        (spaces.Box(0, 255, (2, 2), np.uint8), [np.zeros(3, np.uint8), np.zeros(3, np.uint8)]),  # another shape
        (spaces.Box(0, 255, (2, 2), np.uint8), [np.zeros((1, 2), np.uint8), np.zeros((1, 2), np.uint8)]),
        (spaces.Box(0, 255, (2, 2), np.uint8), [np.uint8(1), np.zeros(2, np.uint8)]),  # a scalar for a level
        (spaces.Box(-1, 1, (2,), np.float32), [np.array(0.5, np.float32), np.array(0.25, np.float32)]),  # 0-d
        (spaces.Box(0, 255, (2, 2), np.uint8), [np.ma.zeros(2, np.uint8)] * 2),  # an array's subclass
        (spaces.Box(0, 255, (2, 2), np.dtype(">u2")), [np.zeros(2, "<u2")] * 2),  # another byte order
        (spaces.Box(-1, 1, (2, 2), np.float32), [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]),
        (spaces.Box(-1, 1, (2, 2), np.float32), [0.5, 0.5]),  # flat for a 2-D leaf: numpy would broadcast it
        (spaces.Box(-1, 1, (2, 2), np.float32), [[0.5, 0.5], [0.5, 1e300]]),
        (spaces.Box(-1, 1, (2, 2), np.float32), [[0.5, 0.5], Pair(0.5, 0.25)]),
        (spaces.Box(-9, 9, (2, 2), np.int8), [[1, 2], [3, 128]]),
        (spaces.Box(-1, 1, (2, 0), np.float32), [[], []]),  # no items: left to the full checks
        (spaces.Box(-1, 1, (2,), np.float32), Pair(0.5, 0.25)),  # a tuple's subclass
    ],
    ids=["past-float32", "int-past-int64", "bool", "str", "short", "float16", "bool-leaf", "ragged", "0-d", "int8-128",
         "uint8", "uint64", "float-for-int", "numpy-int", "empty-for-int", "int64-past-int32", "int64-below-int32",
         "uint64-past-int64", "uint16-past-uint8", "int8-for-uint8", "float64-for-int64", "int32-for-float16",
         "float16", "big-endian", "strided", "shape", "strided-shape", "tuple-bool", "tuple-short", "tuple-uint8",
         "array-inside", "array-then-list", "array-then-ints", "arrays-of-two-dtypes", "float64-arrays",
         "strided-arrays", "arrays-of-another-shape", "arrays-of-more-dims", "scalar-beside-array", "0-d-arrays",
         "masked-arrays", "arrays-of-another-byte-order", "nested-long", "flat-for-2d", "nested-past-float32",
         "nested-namedtuple", "nested-int8-128", "nested-empty", "namedtuple"],
)
def test_values_the_writer_does_not_store_as_numpy_does_go_the_slow_path(space, value):
    layout, batch = _batch(space)
    before = batch.copy()
    put = RowWriter([((), (), batch)], np.zeros(3), np.zeros(3, np.bool_), np.zeros(3, np.bool_)).put
    assert put(1, 1, value, 1.0, False, False) == 0
    assert batch.tobytes() == before.tobytes()


@pytest.mark.parametrize(
    "obs,reward,terminated,truncated",
    [
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": "x"}, 1.0, False,
         False),  # the last leaf a string
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8))}, 1.0, False, False),
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5, "x": 1},
         1.0, False, False),  # a key too many
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8), 2), "level": 0.5}, 1.0,
         False, False),  # an item too many
        ({"id": 1, "pos": np.zeros(1, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5}, 1.0,
         False, False),  # a leaf numpy would broadcast
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.float64)), "level": 0.5}, 1.0,
         False, False),  # floats for uint8
        ({"id": 1.0, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5}, 1.0,
         False, False),  # a float for a Discrete
        ({"id": 2**70, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5}, 1.0,
         False, False),  # an int past int64
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5}, None,
         False, False),
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5}, "1.0",
         False, False),
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5}, 1.0,
         2, False),
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5}, 1.0,
         False, None),
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5}, 1.0,
         np.int64(2), False),
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5},
         np.complex64(1), False, False),
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5},
         np.longdouble(0.1), False, False),  # (the full checks take it; numpy rounds it to float64)
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5},
         np.array(0.1, np.longdouble), False, False),  # the same, 0-d
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5},
         np.array(1 + 0j), False, False),
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5},
         np.array(1.0, object), False, False),
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5},
         np.array([1.0]), False, False),  # one item, not 0-d
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5}, 1.0,
         np.array(1), False),  # a 0-d int array for a flag: the full checks refuse it
        ({"id": 1, "pos": np.zeros(2, np.float32), "pair": (1, np.zeros((3, 2), np.uint8)), "level": 0.5}, 1.0,
         False, np.array([True])),
    ],
    ids=["leaf-str", "missing-key", "extra-key", "extra-item", "broadcast", "float-for-uint8", "float-for-discrete",
         "int-past-int64", "reward-none", "reward-str", "flag-int", "flag-none", "flag-numpy-2", "reward-complex",
         "reward-longdouble", "reward-0-d-longdouble", "reward-0-d-complex", "reward-0-d-object", "reward-1-item",
         "flag-0-d-int", "flag-1-item"],
)
def test_anything_else_writes_nothing(obs, reward, terminated, truncated):
    """All or nothing: the caller's slow path decides, so no row is left half written."""
    layout, batch = _batch(DICT_SPACE)
    rewards, terms, truncs = np.full(3, 9.0), np.ones(3, np.bool_), np.ones(3, np.bool_)
    before = batch.copy()
    put = RowWriter(layout.leaf_views(batch), rewards, terms, truncs).put
    assert put(1, 1, obs, reward, terminated, truncated) == 0
    assert batch.tobytes() == before.tobytes()
    assert rewards.tolist() == [9.0] * 3 and terms.all() and truncs.all()
    good = {"id": 4, "pos": np.full(2, 0.5, np.float32), "pair": (2, np.full((3, 2), 7, np.uint8)), "level": 0.5}
    assert put(1, 1, good, 1.0, False, False) == 1
    assert batch[1]["id"] == 4 and batch[1]["pair"]["f1"].tolist() == [[7, 7]] * 3 and batch[1]["level"] == 0.5
    assert batch[0].tobytes() == before[0].tobytes() and batch[2].tobytes() == before[2].tobytes()


def test_rows_and_envs_outside_the_buffers_are_errors_not_writes():
    batch = np.zeros((2, 4), np.float32)
    put = RowWriter([((), (), batch)], np.zeros(2), np.zeros(2, np.bool_), np.zeros(2, np.bool_)).put
    obs = np.ones(4, np.float32)
    for row, env in [(2, 0), (-1, 0), (0, 2), (0, -1)]:
        with pytest.raises(IndexError, match="outside the 2"):
            put(row, env, obs, 0.0, False, False)
    assert not batch.any()
    with pytest.raises(TypeError, match="takes 6 arguments"):
        put(0, 0, obs)
    with pytest.raises(TypeError, match="takes 6 arguments"):
        put()
    with pytest.raises(TypeError, match=r"put_obs\(row, obs\) takes 2 arguments"):
        RowWriter([((), (), batch)], np.zeros(2), np.zeros(2, np.bool_), np.zeros(2, np.bool_)).put_obs(0)
    with pytest.raises(ValueError, match="not initialised"):
        RowWriter.__new__(RowWriter).put(0, 0, obs, 0.0, False, False)
    half = RowWriter.__new__(RowWriter)  # an __init__ that failed late leaves a writer that writes nothing
    with pytest.raises(ValueError, match="one item per env"):
        half.__init__([((), (), batch)], np.zeros(2), np.zeros(3, np.bool_), np.zeros(2, np.bool_))
    with pytest.raises(ValueError, match="not initialised"):
        half.put(0, 0, obs, 0.0, False, False)
    writer = RowWriter([((), (), batch)], np.zeros(2), np.zeros(2, np.bool_), np.zeros(2, np.bool_))
    with pytest.raises(TypeError, match="already initialised"):  # (its views are held: none may be swapped)
        writer.__init__([((), (), np.zeros((9, 4), np.float32))], np.zeros(9), np.zeros(9, bool), np.zeros(9, bool))


@pytest.mark.parametrize(
    "args,match",
    [
        (([((), (), np.zeros((2, 4), np.float32)[:, ::2])], np.zeros(2), np.zeros(2, bool), np.zeros(2, bool)),
         "rows must each be C-contiguous"),
        (([((), (), np.zeros((2, 4), np.float32))], np.zeros(2, np.float32), np.zeros(2, bool), np.zeros(2, bool)),
         "rewards must be"),
        (([((), (), np.zeros((2, 4), np.float32))], np.zeros(2), np.zeros(3, bool), np.zeros(2, bool)),
         "one item per env"),
        (([(("a",), (), np.zeros((2, 4), np.float32))], np.zeros(2), np.zeros(2, bool), np.zeros(2, bool)),
         r"\(path, sizes, array or None\)"),
        (([((), (), [[0.0] * 4] * 2)], np.zeros(2), np.zeros(2, bool), np.zeros(2, bool)),
         r"\(path, sizes, array or None\)"),
        (([((1.5,), (1,), np.zeros((2, 4), np.float32))], np.zeros(2), np.zeros(2, bool), np.zeros(2, bool)),
         "keys must be str or int"),
        (([((), (), np.zeros((2, 4), np.float32)), (("a",), (-1,), np.zeros((2, 4), np.float32))], np.zeros(2),
          np.zeros(2, bool), np.zeros(2, bool)), "sizes must be counts"),
        (([((), (), np.zeros(2, [("a", np.float32)]))], np.zeros(2), np.zeros(2, bool), np.zeros(2, bool)),
         "plain number type"),
    ],
    ids=["strided-rows", "float32-rewards", "flags-length", "sizes-length", "list-view", "float-key", "negative-size",
         "record-leaf"],
)
def test_a_writer_over_buffers_it_cannot_serve_is_refused(args, match):
    with pytest.raises(ValueError, match=match):
        RowWriter(*args)


class NumpyScalars(gym.Wrapper):
    """CartPole whose reward is a numpy int and flags numpy ints 0 and 1 (as an env computing them with numpy
    returns them)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, np.int64(reward), np.int64(terminated), np.uint8(truncated), info


class ZeroDResults(gym.Wrapper):
    """CartPole whose reward and flags are 0-d arrays (``np.where`` and ``np.asarray`` of scalars return them)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, np.where(terminated, 0.0, reward), np.asarray(terminated), np.asarray(truncated), info


def _minigrid():
    import minigrid  # noqa: F401 (registers its ids)

    return gym.make("MiniGrid-Empty-5x5-v0")  # a Dict with a Text leaf (the mission)


@pytest.mark.parametrize(
    "env_fn",
    [
        lambda: gym.make("CartPole-v1"),
        lambda: gym.make("Pendulum-v1"),
        functools.partial(VariedDict, exact=True),
        lambda: gym.wrappers.TransformObservation(VariedDict(exact=True), OrderedDict, DICT_SPACE),
        lambda: gym.wrappers.TransformObservation(  # float64 observations for a float32 space, every step
            gym.make("CartPole-v1"), lambda obs: obs.astype(np.float64), gym.make("CartPole-v1").observation_space
        ),
        functools.partial(Said, exact=True),
        TextOnly,
        lambda: NumpyScalars(gym.make("CartPole-v1")),
        lambda: ZeroDResults(gym.make("CartPole-v1")),
        pytest.param(_minigrid, marks=pytest.mark.skipif(
            importlib.util.find_spec("minigrid") is None, reason="minigrid is not installed (the test extra has it)")),
    ],
    ids=["cartpole", "pendulum", "dict-of-python-and-numpy-scalars", "ordered-dict", "float64-for-float32",
         "dict-with-text", "text", "numpy-int-rewards-and-flags", "0-d-array-rewards-and-flags", "minigrid"],
)
def test_well_behaved_envs_never_take_the_slow_path(monkeypatch, env_fn):
    slow = []  # the observations the full checks saw (the slow path of a step or a reset)
    full_checks = gym_engine.observation_check
    monkeypatch.setattr(gym_engine, "observation_check", lambda layout: lambda obs: slow.append(obs) or
                        full_checks(layout)(obs))
    with shoal.make(env_fn, 4, backend="serial") as envs:
        envs.reset(seed=0)
        for _ in range(300):
            envs.step(envs.action_space.sample())
    assert slow == []


def test_a_loose_leaf_is_walked_but_not_written():
    """A loose leaf's entry (view None): the containers on its path must be exact, its value is the caller's."""
    layout, batch = _batch(Said.observation_space)
    leaves = layout.writer_leaves(batch)
    assert [(path, sizes, view is None) for path, sizes, view in leaves[-1:]] == [(("note", "said"), (3, 1), True)]
    rewards, terms, truncs, mask = np.zeros(3), np.zeros(3, bool), np.zeros(3, bool), np.zeros(3, bool)
    writer = RowWriter(leaves, rewards, terms, truncs, mask)
    pos = np.array([0.5, -0.5], np.float32)
    assert writer.put(1, 1, {"pos": pos, "note": {"said": "anything"}, "id": 2}, 1.0, False, True) == 2
    assert batch[1]["pos"].tolist() == [0.5, -0.5] and batch[1]["id"] == 2 and truncs.tolist() == [0, 1, 0]
    for note in [{}, {"said": "x", "extra": 1}, "said", ("x",)]:
        assert writer.put(2, 2, {"pos": pos, "note": note, "id": 1}, 1.0, False, False) == 0
        assert writer.put_obs(2, {"pos": pos, "note": note, "id": 1}) == 0
    assert not batch[2]["pos"].any() and batch[2]["id"] == 0
    live = {"a": {"pos": pos, "note": {"said": 1}, "id": 1}, "c": {"pos": pos, "note": {"said": None}, "id": 1}}
    assert writer.put_agents(0, 0, ("a", "b", "c"), live, None, None, None, {}) == ([{}, {}, {}], False)
    assert batch["id"].tolist() == [1, 0, 1] and not batch[1]["pos"].any()  # b is padding: its fixed leaves zeroed
    assert mask.tolist() == [1, 0, 1]
