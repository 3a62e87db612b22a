"""The layout of envs into workers and groups (shoal.vector.layout), by its properties over every valid shape."""

import pytest
from hypothesis import given, settings, strategies as st

from shoal.errors import ConfigError
from shoal.vector.layout import checked_batch_size, group_layout, worker_count


@st.composite
def shapes(draw):
    """(num_envs, rows, num_workers, batch_size) that the constructor accepts."""
    rows = draw(st.sampled_from([1, 1, 2, 3]))
    workers = draw(st.integers(1, 6))
    asynchronous = draw(st.booleans())
    if asynchronous:
        units = workers * draw(st.integers(1, 8))
        batch_units = draw(st.sampled_from([d for d in range(1, units + 1)]))
    else:
        units = draw(st.integers(workers, 40))
        batch_units = units
    return units * rows, rows, workers, batch_units * rows


@settings(max_examples=300, deadline=None)
@given(shapes())
def test_groups_partition_the_rows_in_whole_units_and_shares(shape):
    num_envs, rows, workers, batch_size = shape
    assert checked_batch_size(batch_size, num_envs=num_envs, rows=rows, num_workers=workers) == batch_size
    groups, hosts = group_layout(num_envs=num_envs, rows=rows, num_workers=workers, batch_size=batch_size)
    # every row once, in order, in groups of whole units
    assert [r for g in groups for r in g] == list(range(num_envs))
    assert all(len(g) > 0 and g.start % rows == 0 and len(g) % rows == 0 for g in groups)
    # each worker hosts consecutive groups; every group has one host
    assert sorted(g for h in hosts for g in h) == list(range(len(groups)))
    assert len(hosts) == workers and all(h == list(range(h[0], h[-1] + 1)) for h in hosts)
    shares = [sum(len(groups[g]) for g in h) for h in hosts]
    if batch_size == num_envs:  # one group per worker, sizes within one unit of each other
        assert all(len(h) == 1 for h in hosts)
        assert max(shares) - min(shares) <= rows
    else:  # equal shares; groups of one size that a batch holds whole; two a worker wherever a share has two units
        assert len(set(shares)) == 1
        size = len(groups[0])
        assert all(len(g) == size for g in groups) and batch_size % size == 0
        assert len(hosts[0]) >= 2 or shares[0] == rows


def test_layout_refusals_name_the_rule():
    with pytest.raises(ConfigError, match="batch_size must be a multiple of 2"):
        checked_batch_size(3, num_envs=8, rows=2, num_workers=2)
    with pytest.raises(ConfigError, match=r"the number of envs \(3, of 2 rows each\) must be divisible by num_workers"):
        checked_batch_size(2, num_envs=6, rows=2, num_workers=2)
    with pytest.raises(ConfigError, match=r"num_envs \(5\) must be divisible by num_workers \(2\)"):
        checked_batch_size(1, num_envs=5, rows=1, num_workers=2)
    with pytest.raises(ConfigError, match="between 1 and num_envs=4, got 5"):
        checked_batch_size(5, num_envs=4, rows=1, num_workers=1)
    with pytest.raises(ConfigError, match="num_workers must be between 1 and num_envs=4, got 5"):
        worker_count("multiprocessing", 5, units=4, rows=1)
    with pytest.raises(ConfigError, match="backend must be 'serial'"):
        worker_count("threads", None, units=4, rows=1)
    with pytest.raises(ConfigError, match="needs backend='ray'"):
        worker_count("serial", None, units=4, rows=1, address="auto")


def test_default_workers_one_per_core_up_to_the_units(monkeypatch):
    import shoal.vector.layout as layout

    monkeypatch.setattr(layout, "usable_cores", lambda: 3)
    assert worker_count("multiprocessing", None, units=8, rows=1).number == 3
    assert worker_count("multiprocessing", None, units=2, rows=1).number == 2
    assert worker_count("serial", None, units=8, rows=1) == (1, 0.0, False)
