"""The default number of workers follows the machine's load and the env's step cost (shoal.vector.load), with real
busy processes beside the test; results are the same whichever configuration it picks."""

import functools
import multiprocessing as mp
import statistics
import sys
import time

import gymnasium as gym
import numpy as np
import pytest

import shoal
from shoal.vector import load
from shoal.vector.cpus import usable_cores
from shoal.vector.load import (
    CHEAP_BATCH_S,
    CHEAP_NATIVE_SHARE_S,
    TINY_BATCH_S,
    TINY_NATIVE_SHARE_S,
    ShareCost,
    batch_step_seconds,
    choose_workers,
    env_share_cost,
    other_runnable,
    step_seconds,
)
from shoal.vector.serial import SerialTransport

from fakes.batch import Walk
from fakes.envs import CountingEnv
from fakes.faults import FaultyEnv, SlowEnv
from helpers import assert_same, rollout

CORES = usable_cores()
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the load is read from /proc/loadavg")


def _spin(started):
    started.set()
    while True:
        pass


@pytest.fixture
def busy_machine():
    """One more process that never sleeps than there are cores, for the length of the test: spinning, and seen by
    the kernel as runnable, before the test starts (a vector env made while they were still starting read an idle
    machine now and then in a full run)."""
    ctx = mp.get_context("fork")
    started = [ctx.Event() for _ in range(CORES + 1)]
    hogs = [ctx.Process(target=_spin, args=(event,), daemon=True) for event in started]
    for hog in hogs:
        hog.start()
    try:
        assert all(event.wait(10) for event in started)
        deadline = time.monotonic() + 5
        while other_runnable() < CORES and time.monotonic() < deadline:
            time.sleep(0.01)
        yield len(hogs)
    finally:
        for hog in hogs:
            hog.kill()
            hog.join()


TINY, CHEAP, DEAR = 1e-6, 10e-6, 1e-3  # seconds a step


@pytest.mark.parametrize(
    "units, cores, others, cost, workers",
    [
        (8, 2, 0.0, CHEAP, 2),  # idle: one per core
        (8, 2, 0.0, DEAR, 2),
        (8, 2, 0.0, None, 2),
        (8, 2, 0.6, CHEAP, 2),  # a transient process is not a busy machine
        (1, 2, 0.0, CHEAP, 1),
        (8, 2, 0.0, TINY, 1),  # a worker's share of 4 us of env work: not worth a hand-off, even idle
        (16, 2, 0.0, TINY, 2),  # 8 us: worth it
        (8, 2, 2.0, TINY, 1),
        (8, 2, 1.0, CHEAP, 1),  # busy and cheap: the calling process alone
        (8, 2, 4.0, CHEAP, 1),
        (8, 2, 2.0, DEAR, 2),  # busy and dear: workers still gain on shared cores
        (8, 2, 2.0, None, 2),  # a cost that could not be measured counts as dear
        (64, 16, 4.0, CHEAP, 12),  # busy, cheap, twelve cores free: one worker each
        (8, 16, 4.0, CHEAP, 8),
        (64, 16, 14.6, CHEAP, 1),  # one core free: not worth a hand-off
        # the boundary: a worker's share of a batch at CHEAP_BATCH_S of env work is dear
        (8, 2, 1.0, CHEAP_BATCH_S / 4, 2),
        (8, 2, 1.0, CHEAP_BATCH_S / 4 * 0.99, 1),
    ],
)
def test_choose_workers(units, cores, others, cost, workers):
    asked = []

    def seconds(share):
        asked.append(share)
        return None if cost is None else cost * share

    assert choose_workers(units, cores, others, ShareCost(seconds, TINY_BATCH_S, CHEAP_BATCH_S)) == workers
    # an env is made and stepped to time it only where there is a choice, and a share is the most envs a worker gets
    assert asked == ([-(-units // min(units, cores))] if min(units, cores) > 1 else [])


@pytest.mark.parametrize(
    "units, cores, others, shares, workers",
    [
        (64, 16, 0.0, [4, 8], 8),  # 4 us a worker is under TINY_BATCH_S: half as many workers, 8 us each
        (16, 16, 0.0, [1, 2, 4, 8], 2),
        (8, 16, 0.0, [1, 2, 4], 1),  # even two workers' shares are tiny: the calling process alone
        (48, 12, 0.0, [4, 8], 6),
        (64, 16, 4.0, [4, 8], 8),  # busy, with twelve cores free: the halved count fits
        (64, 16, 12.0, [4, 8], 4),  # four free: one worker each
    ],
)
def test_many_cores_and_a_tiny_share_halve_the_workers_until_a_share_pays(units, cores, others, shares, workers):
    asked = []

    def seconds(share):
        asked.append(share)
        return TINY * share

    assert choose_workers(units, cores, others, ShareCost(seconds, TINY_BATCH_S, CHEAP_BATCH_S)) == workers
    assert asked == shares


@pytest.mark.parametrize(
    "share, others, workers",
    [
        (TINY_NATIVE_SHARE_S * 0.9, 0.0, 1),  # a batch-native share of ~45 us: the calling process alone, even idle
        (TINY_NATIVE_SHARE_S * 1.1, 0.0, 2),
        (CHEAP_NATIVE_SHARE_S * 0.9, 0.0, 2),
        (CHEAP_NATIVE_SHARE_S * 0.9, 2.0, 1),  # busy: a batch-native share of ~1.4 ms is cheap (a Gymnasium env's dear)
        (CHEAP_NATIVE_SHARE_S, 2.0, 2),  # busy and dear
    ],
)
def test_choose_workers_for_a_batch_native_env(share, others, workers):
    cost = ShareCost(lambda units: share, TINY_NATIVE_SHARE_S, CHEAP_NATIVE_SHARE_S)
    assert choose_workers(4096, 2, others, cost) == workers


def test_env_share_cost_times_one_env_once():
    made = []

    def make():
        made.append(True)
        return SlowEnv(delay=0.002)

    cost = env_share_cost(make)
    assert cost.seconds(4) >= 4 * 0.002 and cost.seconds(2) >= 2 * 0.002
    assert len(made) == 1 and (cost.tiny_s, cost.cheap_s) == (TINY_BATCH_S, CHEAP_BATCH_S)


def test_batch_step_seconds_times_a_serial_vector_env():
    assert batch_step_seconds(lambda: shoal.make(Walk, 64, backend="serial")) < 0.01
    slow = [functools.partial(SlowEnv, delay=0.002)] * 2
    assert batch_step_seconds(lambda: shoal.make(slow, backend="serial")) >= 0.004

    def cannot_be_made():
        raise RuntimeError("no such env")

    assert batch_step_seconds(cannot_be_made) is None
    assert batch_step_seconds(lambda: shoal.make([functools.partial(FaultyEnv, at=1)] * 2, backend="serial")) is None


@pytest.mark.skipif(CORES < 2, reason="one core: one worker whatever the env")
def test_a_batch_native_env_is_timed_on_a_share_of_its_instances(monkeypatch):
    """make() times a worker's share of a batch-native env's instances on the serial backend (at most PROBED_UNITS of
    them, scaled up) and steps them all in the calling process where that share is tiny; same results either way."""
    probed = []
    timed = load.batch_step_seconds

    def spy(make_envs, *args, **kwargs):
        envs = make_envs()
        probed.append((envs.num_envs, envs.backend))
        return timed(lambda: envs, *args, **kwargs)

    monkeypatch.setattr(load, "batch_step_seconds", spy)
    monkeypatch.setattr(load, "PROBED_UNITS", 8)
    monkeypatch.setattr(load, "TINY_NATIVE_SHARE_S", 10.0)  # every share tiny
    actions = np.random.default_rng(0).integers(0, 3, size=(30, 64))
    with shoal.make(Walk, 64) as envs:
        assert envs.num_workers == 1 and isinstance(envs._transport, SerialTransport)
        assert probed == [(8, "serial")]  # a share of 32 instances, timed at 8
        ours = rollout(envs, lambda t: actions[t], 30, seed=5)
    monkeypatch.setattr(load, "TINY_NATIVE_SHARE_S", 0.0)  # no share tiny,
    monkeypatch.setattr(load, "CHEAP_NATIVE_SHARE_S", 0.0)  # nor cheap: workers however busy the machine is (CI's was)
    with shoal.make(Walk, 64) as envs:
        assert envs.num_workers == min(64, CORES) and not isinstance(envs._transport, SerialTransport)
        for a, b in zip(ours, rollout(envs, lambda t: actions[t], 30, seed=5), strict=True):
            assert_same(a, b)


@linux_only
def test_busy_processes_are_counted(busy_machine):
    assert other_runnable() >= busy_machine - 0.5


def test_step_seconds_times_a_few_steps():
    assert step_seconds(functools.partial(SlowEnv, delay=0.002)) >= 0.002
    assert step_seconds(lambda: gym.make("CartPole-v1")) < 0.002


def test_steps_that_lost_the_cpu_are_not_counted_while_others_are(monkeypatch):
    """A step during which the scheduler gave the CPU to another task (an involuntary switch) is left out of the
    median while steps that kept it are there: three of them are timed past any preempted ones. Only preempted steps:
    their median."""
    switches = [0]
    monkeypatch.setattr(load, "involuntary_switches", lambda: switches[0])

    def timed_as(durations, preempted):
        def timed(k):
            switches[0] += k in preempted
            return durations[k]
        return timed

    durations = [1.0, 2.0, 0.001, 0.002, 0.003, 0.004]
    assert load._median_of(timed_as(durations, {0, 1}), budget_s=0.0, max_steps=6) == 0.002
    assert load._median_of(timed_as(durations, set()), budget_s=0.0, max_steps=6) == 1.0  # (the first three)
    assert load._median_of(timed_as(durations, set(range(6))), budget_s=0.0, max_steps=4) == statistics.median(
        durations[:4])


class StalledOnceEnv(CountingEnv):
    """A cheap env whose third step stalls 20 ms, as a step does when a busy machine takes the core away."""

    def step(self, action):
        self.stalls = getattr(self, "stalls", 0) + 1
        if self.stalls == 3:
            time.sleep(0.02)
        return super().step(action)


def test_step_seconds_does_not_count_a_lost_core_against_the_env():
    """One stalled step among a few: a mean would make the env look ~1 ms a step (dear: it would keep workers on a
    busy machine); the median says what a step costs."""
    assert step_seconds(StalledOnceEnv, budget_s=0.05) < 1e-3
    # a stall that uses up the whole budget (the second timed step) is one of three steps, not one of two
    assert step_seconds(StalledOnceEnv, budget_s=1e-3) < 1e-3


def test_step_seconds_of_an_env_that_cannot_be_timed_is_unknown():
    assert step_seconds(functools.partial(FaultyEnv, at=1)) is None  # raises in its first step
    assert step_seconds(lambda: gym.make("CartPole-v1", render_mode="human")) is None  # would open a window

    def cannot_be_made():
        raise RuntimeError("no display")

    assert step_seconds(cannot_be_made) is None


@linux_only
def test_on_a_busy_machine_cheap_envs_step_in_the_calling_process(busy_machine):
    fns = [lambda: gym.make("CartPole-v1")] * 8
    actions = np.random.default_rng(0).integers(0, 2, size=(60, 8))
    with shoal.make(fns) as envs:
        assert envs.num_workers == 1 and isinstance(envs._transport, SerialTransport)  # no worker process
        ours = rollout(envs, lambda t: actions[t], 60, seed=5)
    with shoal.make(fns, backend="serial") as envs:
        for a, b in zip(ours, rollout(envs, lambda t: actions[t], 60, seed=5), strict=True):
            assert_same(a, b)


@linux_only
def test_on_a_busy_machine_dear_envs_keep_their_workers(busy_machine):
    with shoal.make(functools.partial(SlowEnv, delay=0.002), 4) as envs:
        assert envs.num_workers == min(4, CORES)
        if CORES > 1:
            assert len(envs._transport._procs) == min(4, CORES) - 1  # and the calling process steps a share
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))


@linux_only
def test_an_explicit_configuration_is_kept_on_a_busy_machine(busy_machine):
    with shoal.make("CartPole-v1", 4, num_workers=2) as envs:
        assert envs.num_workers == 2 and len(envs._transport._procs) == 1


@pytest.mark.skipif(CORES < 2, reason="one core: one worker whatever the env")
def test_an_env_of_a_few_microseconds_steps_in_the_calling_process_unless_workers_are_asked_for():
    with shoal.make([CountingEnv] * 2) as envs:  # a share of ~1 us: a hand-off costs more
        assert envs.num_workers == 1 and isinstance(envs._transport, SerialTransport)
        envs.reset(seed=0)
        _, rewards, *_ = envs.step(np.zeros(2, np.int64))
        assert rewards.tolist() == [1.0, 1.0]
    for asked in ({"context": "fork"}, {"inline": False}):
        with shoal.make([CountingEnv] * 2, **asked) as envs:
            assert envs.num_workers == 2 and not isinstance(envs._transport, SerialTransport)


@linux_only
def test_on_a_busy_machine_a_cheap_batch_native_env_steps_in_the_calling_process(busy_machine):
    with shoal.make(Walk, 256) as envs:  # a share of 128 instances: 0.2-1 ms, under the 1.5 ms that counts as cheap
        assert envs.num_workers == 1 and isinstance(envs._transport, SerialTransport)
