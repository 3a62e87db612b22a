"""put_agents: a multi-agent env's rows written at once (shoal.vector._rows, used by shoal.multiagent.engine): live
agents' results where their rows are, padding for the rest, and anything inexact left to the slow path."""

from __future__ import annotations

from collections import OrderedDict, defaultdict

import numpy as np
import pytest
from gymnasium import spaces

from shoal.spaces import Layout
from shoal.vector._rows import RowWriter


AGENTS = ("a", "b", "c")


def _agent_buffers(rows=6):
    """A writer over rows of Box(2,) float32 observations, every buffer full of values no call writes."""
    layout = Layout(spaces.Box(-1, 1, (2,), np.float32))
    batch = np.full((rows, 2), 7.0, np.float32)
    rewards, terms, truncs, mask = np.full(rows, 9.0), np.ones(rows, bool), np.ones(rows, bool), np.ones(rows, bool)
    writer = RowWriter(layout.leaf_views(batch), rewards, terms, truncs, mask)
    return writer.put_agents, batch, rewards, terms, truncs, mask


def test_put_agents_writes_live_agents_and_pads_the_rest():
    put_agents, batch, rewards, terms, truncs, mask = _agent_buffers()
    a_info = {"t": 3}
    observations = OrderedDict(c=np.array([0.5, 0.25]), a=np.array([1, 2], np.float32))  # float64 into float32
    flag_rewards = defaultdict(float, a=1.5, c=np.float32(0.5))  # as PettingZoo's aec_to_parallel returns them
    infos, over = put_agents(3, 0, AGENTS, observations, flag_rewards, {"a": False, "c": 1},
                             {"a": np.bool_(True), "c": False}, {"a": a_info, "b": {"ignored": 1}})
    assert batch.tolist() == [[1, 2], [0, 0], [0.5, 0.25], [7, 7], [7, 7], [7, 7]]  # from target row 0
    assert rewards.tolist() == [9, 9, 9, 1.5, 0, 0.5]  # from row 3; b is padding
    assert terms.tolist() == [1, 1, 1, 0, 1, 1] and truncs.tolist() == [1, 1, 1, 1, 0, 0]
    assert mask.tolist() == [1, 1, 1, 1, 0, 1]
    assert infos[0] is a_info and infos[1:] == [{}, {}] and infos[1] is not infos[2]  # a padding row's info is {}
    assert over is True  # a truncated, c terminated: every agent with an observation ended

    live = {"a": np.zeros(2, np.float32), "b": np.zeros(2, np.float32)}
    assert put_agents(0, 3, AGENTS, live, {"a": 0.0, "b": 0.0}, {"a": False, "b": False}, {"a": True, "b": False},
                      {})[1] is False  # b goes on
    assert put_agents(0, 3, AGENTS, live, {"a": 0.0, "b": 0.0}, {"a": False, "b": 0}, {"a": True, "b": 1},
                      {})[1] is True  # b truncated
    assert truncs[:3].tolist() == [1, 1, 0] and terms[:3].tolist() == [0, 0, 1]
    assert put_agents(0, 3, AGENTS, {}, {}, {}, {}, {}) == ([{}, {}, {}], True)  # no agent left: all padding
    assert not batch[3:].any() and not mask[:3].any() and terms[:3].all() and not truncs[:3].any()


def test_put_agents_on_a_reset_writes_observations_and_mask_only():
    put_agents, batch, rewards, terms, truncs, mask = _agent_buffers()
    infos, over = put_agents(0, 0, AGENTS, {"b": np.ones(2, np.float32)}, None, None, None, {"b": {"hello": 1}})
    assert infos == [{}, {"hello": 1}, {}] and over is False
    assert batch[:3].tolist() == [[0, 0], [1, 1], [0, 0]] and mask[:3].tolist() == [0, 1, 0]
    assert rewards.tolist() == [9.0] * 6 and terms.all() and truncs.all()  # left to the engine's reset


class _OwnDict(dict):
    pass


GOOD = ({"a": np.zeros(2, np.float32)}, {"a": 1.0}, {"a": False}, {"a": False}, {"a": {}})


@pytest.mark.parametrize(
    "index, value",
    [
        (0, _OwnDict(GOOD[0])),  # a dict subclass may read its items its own way
        (0, {"a": [0.0, True]}),  # a list with a bool
        (0, {"a": np.zeros(3, np.float32)}),
        (0, {"a": np.zeros(2, np.float32), "z": np.zeros(2, np.float32)}),  # an agent not in agents
        (1, {}),  # no reward
        (1, {"a": "1"}),
        (1, {"a": np.complex64(1)}),
        (2, {"a": 2}),
        (3, {"a": None}),
        (3, _OwnDict(GOOD[3])),
        (4, {"a": 5}),  # an info that is not a dict
        (4, [{}]),
    ],
    ids=["obs-subclass", "obs-list-bool", "obs-shape", "unknown-agent", "no-reward", "reward-str", "reward-complex",
         "flag-2", "flag-none", "flags-subclass", "info-int", "infos-list"],
)
def test_put_agents_leaves_anything_inexact_to_the_slow_path(index, value):
    put_agents = _agent_buffers()[0]
    assert put_agents(0, 0, AGENTS, *GOOD) == ([{}, {}, {}], False)
    args = list(GOOD)
    args[index] = value
    assert put_agents(0, 0, AGENTS, *args) is None
    assert put_agents(0, 0, AGENTS, GOOD[0], None, None, {"a": False}, {}) is None  # a reset's flags are all None


def test_put_agents_outside_the_buffers_or_without_a_mask_is_an_error():
    put_agents, batch, rewards, *_ = _agent_buffers(rows=4)
    for row, target in [(2, 0), (-1, 0), (0, 2), (0, -1)]:
        with pytest.raises(IndexError, match="outside the 4"):
            put_agents(row, target, AGENTS, *GOOD)
    assert (batch == 7).all() and (rewards == 9).all()
    with pytest.raises(TypeError, match="agents must be a tuple"):
        put_agents(0, 0, list(AGENTS), *GOOD)
    with pytest.raises(TypeError, match="takes 8 arguments"):
        put_agents(0, 0, AGENTS, *GOOD[:4])
    unmasked = RowWriter([((), (), batch)], np.zeros(4), np.zeros(4, bool), np.zeros(4, bool))
    with pytest.raises(ValueError, match="no mask"):
        unmasked.put_agents(0, 0, AGENTS, *GOOD)
    with pytest.raises(ValueError, match="one item per env"):
        RowWriter([((), (), batch)], np.zeros(4), np.zeros(4, bool), np.zeros(4, bool), np.zeros(3, bool))


def test_agents_of_their_own_leaves_write_where_their_writers_say():
    """A writer per agent (flattened rows: shoal.multiagent.rows.AgentRows.flat_leaves): agent k's values go through
    its writer's leaves, a (None, (), view) leaf is zeroed on every write, padding zeroes all of an agent's leaves."""
    batch = np.full((3, 4), 7.0, np.float32)
    per_row = (np.zeros(3), np.zeros(3, bool), np.zeros(3, bool))
    mask = np.zeros(3, bool)
    short = RowWriter([((), (), batch[:, :2]), (None, (), batch[:, 2:])], *per_row)  # a Box (2,), then zeros
    square = RowWriter([((), (), batch[:, :4].reshape(3, 2, 2))], *per_row)  # a Box (2, 2)
    writer = RowWriter([], *per_row, mask, [short, square, short])
    two, square_value = np.array([1, 2], np.float32), np.arange(4, dtype=np.float32).reshape(2, 2)
    assert writer.put_agents(0, 0, AGENTS, {"a": two, "b": square_value}, None, None, None, {})[1] is False
    assert batch.tolist() == [[1, 2, 0, 0], [0, 1, 2, 3], [0, 0, 0, 0]] and mask.tolist() == [1, 1, 0]
    assert writer.put_agents(0, 0, AGENTS, {"a": square_value}, None, None, None, {}) is None  # not a's shape
    with pytest.raises(ValueError, match="3 agents, the writer has writers for 2"):
        RowWriter([], *per_row, mask, [short, square]).put_agents(0, 0, AGENTS, {}, None, None, None, {})
    with pytest.raises(ValueError, match="agents must be RowWriters"):
        RowWriter([], *per_row, mask, [short, "square"])
    with pytest.raises(ValueError, match="agents must be RowWriters"):
        RowWriter([], *per_row, mask, [RowWriter.__new__(RowWriter)])  # one whose __init__ never ran
    for leaf in [(None, (1,), batch), (None, (), None)]:
        with pytest.raises(ValueError, match=r"or \(None, \(\), array\) tuple"):
            RowWriter([leaf], *per_row)
    with pytest.raises(IndexError, match="outside the 3 rows"):
        writer.put_agents(0, 1, AGENTS, {}, None, None, None, {})
