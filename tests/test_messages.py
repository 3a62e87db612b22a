"""What crosses between the caller and a worker (shoal.vector.commands, shoal.vector._worker): commands and action
sequences pickled and back, a worker's answers through its one pickler, and same-step final observations left in
shared memory."""

from __future__ import annotations

import pickle
import sys
import threading

import numpy as np
import pytest
from gymnasium import spaces

from shoal.spaces import Layout
from shoal.errors import EnvOutputError
from shoal.vector._worker import FINALS, OK, Replies, decode, finals_of, park_finals, parked_finals
from shoal.vector.buffers import BufferSpec
from shoal.vector.infos import Finals


def test_a_worker_leaves_same_step_final_observations_in_shared_memory():
    """What a worker does with an engine's same-step Finals (shoal.vector._worker): observations that fit the
    records wait in the buffers, and a step whose only info is which envs ended sends nothing but a code."""
    spec = BufferSpec(4, Layout(spaces.Box(-9, 9, (2,), np.float32)), Layout(spaces.Discrete(2)), finals=True)
    buffers = spec.allocate()
    group = np.arange(2, 4)
    a, b = np.array([1, 2], np.float32), np.array([3, 4], np.float32)
    value, code = park_finals([Finals(np.array([3]), [b], [{}])], buffers, group)
    assert value is None and code == FINALS
    (rebuilt,) = finals_of(buffers, group)
    assert rebuilt.ids.tolist() == [3] and rebuilt.obs.tolist() == [[3, 4]] and rebuilt.obs.dtype == np.float32
    b[:] = 0  # the env reuses its array: what was parked stays
    assert finals_of(buffers, group)[0].obs.tolist() == [[3, 4]]
    # with infos the entries still travel, without their observations, which the parent reads back
    value, code = park_finals([Finals(np.array([2, 3]), [a, b], [{"x": 1}, {}]), (3, {"reset": True})], buffers, group)
    assert code == 0 and value[0].obs is None and value[1] == (3, {"reset": True})
    restored = parked_finals(pickle.loads(pickle.dumps(value)), buffers)
    assert restored[0].obs.tolist() == [[1, 2], [0, 0]] and restored[0].infos == [{"x": 1}, {}]
    # a value the records would not give back as it came (float64 in a float32 space) is sent as it is
    odd = [np.array([5, 6], np.float64)]
    value, code = park_finals([Finals(np.array([2]), odd, [])], buffers, group)
    assert code == 0 and value[0].obs is odd


def test_a_workers_answers_each_unpickle_on_their_own_through_one_pickler():
    """The worker's one pickler forgets each answer's objects (a later answer refers to none of them), gives its
    large answer's buffer back, and is whole again after an answer that cannot be pickled."""
    replies = Replies()
    shared = {"episode": {"r": 9.0, "l": 9, "t": 0.5}}
    first = [(3, shared), (4, np.float32(2.5))]
    second = [(5, shared), (6, "x" * 10)]  # the same dict again: its memo entry must not be referred to
    answers = [replies(first, [3, 4]), replies(second, [5, 6])]
    assert [decode(answer) for answer in answers] == [(True, first), (True, second)]
    assert answers[1] == pickle.dumps((True, second), protocol=pickle.HIGHEST_PROTOCOL)
    assert type(decode(answers[0])[1][1][1]) is np.float32
    big = replies([(0, np.zeros(1 << 20))], [0])
    assert len(big) > 1 << 23 and len(replies([(0, 1.0)], [0])) < 100
    assert sys.getsizeof(replies._out) < 1 << 12  # (its room given back: it held 8 MiB after the large one)
    with pytest.raises(EnvOutputError, match="env 8 returned an info that cannot be pickled"):
        replies([(7, {"a": 1.0}), (8, {"lock": threading.Lock()})], [7, 8])
    assert decode(replies(second, [5, 6])) == (True, second)
    assert replies(None) == replies([]) == OK


def test_a_command_crosses_with_its_op_ids_and_payload():
    """A command pickles as its op's number, its ids' bytes and its payload (cloudpickle's too, for a lambda in a
    call's arguments), and comes back equal: the same op member, ids of the same dtype and values (a strided view's
    too), writeable; the payload as pickle gives it."""
    from shoal.vector.commands import Command, Op
    from shoal.vector.transport import pickled

    ids = np.arange(3, 11, dtype=np.intp)
    commands = [
        Command(Op.RESET, ids[:1], ([None], None)),
        Command(Op.RESET, ids[::3], ([1, None, 2**40], {"x": np.float32(1.5)})),
        Command(Op.STEP, ids, np.arange(8) % 2),
        Command(Op.CALL, ids.astype(np.int32), ("scaled", (lambda v: v * 2,), {})),
        Command(Op.GET_ATTR, ids[:0], "t"),
        Command(Op.SET_ATTR, ids, ("tag", list("abcdefgh"))),
    ]
    for command in commands:
        back = pickle.loads(pickled(command, "a command"))
        assert type(back) is Command and back.op is command.op
        assert back.ids.dtype == command.ids.dtype and back.ids.tolist() == command.ids.tolist()
        assert back.ids.flags.writeable
        if command.op is Op.CALL:
            assert back.payload[1][0](21) == 42
        elif command.op is Op.STEP:
            assert back.payload.tolist() == command.payload.tolist()
        else:
            assert repr(back.payload) == repr(command.payload)


def test_action_sequences_cross_with_their_types_shapes_and_values():
    """Sequences pickle as their arrays' types, shapes and bytes and come back equal and writeable: a part split off
    a larger batch (a view with offsets rebased), actions of several axes, float actions, none at all."""
    from shoal.vector.commands import Command, Op, Sequences
    from shoal.vector.transport import pickled

    rng = np.random.default_rng(3)
    whole = Sequences(rng.integers(0, 5, 11), np.array([0, 4, 4, 9, 11]), 0.9)
    cases = [
        whole,
        whole.split([0, 2])[1],  # envs 2 and 3: values[4:11], offsets [0, 5, 7]
        Sequences(rng.integers(0, 3, (6, 2)).astype(np.int32), np.array([0, 1, 6]), 1.0),
        Sequences(rng.standard_normal((3, 2, 2)).astype(np.float32), np.array([0, 3]), 0.0),
        Sequences(np.zeros((0, 3), np.float32), np.array([0, 0, 0]), 0.5),
        Sequences(np.arange(5), np.array([0, 2, 5], np.int32), 0.25),  # (offsets of another integer type)
    ]
    for seqs in cases:
        back = pickle.loads(pickled(Command(Op.SEQUENCES, np.arange(len(seqs.offsets) - 1), seqs), "a command"))
        got = back.payload
        assert type(got) is Sequences and got.gamma == seqs.gamma
        assert got.values.dtype == seqs.values.dtype and got.values.shape == seqs.values.shape
        assert got.values.tolist() == seqs.values.tolist()
        assert got.offsets.dtype == np.int64 and got.offsets.tolist() == seqs.offsets.tolist()
        assert got.values.flags.writeable and got.offsets.flags.writeable
