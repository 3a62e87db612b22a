"""Generated programs of steps, full resets and partial resets: every backend equals Gymnasium's SyncVectorEnv.

The fixed tables (test_autoreset) and rollouts (test_equivalence) check chosen sequences; here hypothesis draws
the sequences: how many envs, their spaces and episode lengths, the autoreset mode, and an interleaving of steps,
seeded and unseeded resets and partial resets (``reset_mask``) landing anywhere, including on envs waiting for their
autoreset. Every result is compared with Gymnasium's, bit for bit, and once the program has run every result handed
out is compared again: an array that a later step wrote into (a view of memory the vector env reuses, such as the
final observations workers leave in shared memory) fails there.

Programs with multi-step action sequences among those operations, which Gymnasium's vector envs do not have, are
compared with the envs stepped by hand (:class:`ByHand`), a reference that equals Gymnasium's ``SyncVectorEnv`` on
the programs without sequences. Multi-agent (PettingZoo) programs, whole envs reset and masked, compare the worker
backends with the serial one.
"""

from __future__ import annotations

import copy
import functools
from contextlib import closing
from unittest import mock

import gymnasium as gym
import numpy as np
import pytest
from fakes.batch import Walk, WalkSingle
from fakes.envs import AsReturned, SpaceEnv
from fakes.multiagent import Chatter, DictJoinLeave, JoinLeave, Mixed, VariedAgents
from gymnasium.vector import AutoresetMode
from helpers import assert_same, own_trajectories
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import shoal
from shoal.multiagent.engine import PettingZooEngine, _no_fast_path

CONFIGS = [
    pytest.param({"backend": "serial", "num_workers": 2}, id="serial"),
    pytest.param({"backend": "multiprocessing", "num_workers": 2, "context": "fork"}, id="mp-fork"),
    pytest.param(
        {"backend": "multiprocessing", "num_workers": 2, "context": "fork", "inline": False}, id="mp-fork-noinline"
    ),
]
RAY = {"backend": "ray", "num_workers": 2}
OBS = ["box_f32", "box_u8_img", "discrete", "dict", "tuple", "int", "f32", "own", "walk"]
"""SpaceEnv's observation spaces; AsReturned's kinds "int", "f32" and "own" (no infos: a worker's same-step final
observations stay in shared memory); "walk": the batch-native Walk (shoal's side) against its single-instance twin
(Gymnasium's)."""
ENDING_TOGETHER = [functools.partial(AsReturned, "own", 2, tag) for tag in range(4)]
"""Envs whose episodes end in the same steps with different final observations (each worker's group has several)."""
ACTS = ["discrete", "box_f32", "dict"]


def _env(obs: str, act: str, length: int, tag: int = 0):
    if obs in ("int", "f32", "own"):
        return AsReturned(obs, length, tag)
    if obs == "walk":
        return WalkSingle(length)
    return SpaceEnv(obs, act, max_steps=length)


def _shoal(obs: str, fns: list, mode: AutoresetMode, config: dict):
    """shoal's vector env of the program's envs; for "walk", the batch-native Walk."""
    if obs == "walk":
        return shoal.make(functools.partial(Walk, limit=fns[0].args[2]), len(fns), autoreset_mode=mode, **config)
    return shoal.make(fns, autoreset_mode=mode, **config)


def _pair(obs: str, fns: list, mode: AutoresetMode, config: dict):
    """(shoal's vector env, Gymnasium's SyncVectorEnv) of the program's envs."""
    return _shoal(obs, fns, mode, config), gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)


@st.composite
def programs(draw, acts=ACTS):
    """(kind of env, env factories, autoreset mode, ops): ops are ``("step",)``, ``("reset", seed)`` (an int, a list
    of seeds, or None: unseeded) and ``("mask", bits, seeds)``; the first is always a seeded reset. ``acts``: the
    SpaceEnv action spaces to draw from."""
    n = draw(st.integers(2, 5))
    obs = draw(st.sampled_from(OBS))
    act = "discrete" if obs in ("int", "f32", "own", "walk") else draw(st.sampled_from(acts))
    lengths = draw(st.lists(st.integers(1, 6), min_size=n, max_size=n))
    if obs == "walk":  # one limit for every instance of the batch-native env
        lengths = [lengths[0]] * n
    fns = [functools.partial(_env, obs, act, length, tag) for tag, length in enumerate(lengths)]
    mode = draw(st.sampled_from(list(AutoresetMode)))
    return obs, fns, mode, draw(_ops(n))


def _ops(n: int):
    """Programs over ``n`` envs: ``("step",)``, ``("reset", seed)`` (an int, a list of seeds, or None: unseeded)
    and ``("mask", bits, seeds)``, after a first seeded reset."""
    seeds = st.integers(0, 2**16)
    op = st.one_of(
        st.tuples(st.just("step")),
        st.tuples(st.just("reset"), st.one_of(st.none(), seeds, st.lists(seeds, min_size=n, max_size=n))),
        st.tuples(
            st.just("mask"),
            st.tuples(st.lists(st.booleans(), min_size=n, max_size=n), st.integers(0, n - 1)).map(
                lambda bits_one: [b or i == bits_one[1] for i, b in enumerate(bits_one[0])]  # at least one env
            ),
            st.one_of(st.none(), st.lists(seeds, min_size=n, max_size=n)),
        ),
    )
    first = st.tuples(st.just("reset"), seeds)
    return st.tuples(first, st.lists(op, min_size=1, max_size=24)).map(lambda parts: [parts[0], *parts[1]])


def _run(envs, mode: AutoresetMode, ops: list, rows_per_env: int = 1) -> list:
    """Every result of ``ops`` on ``envs``. In disabled mode an env that ended is reset (with a mask, unseeded)
    before the next step, as the caller must. ``rows_per_env``: a multi-agent env's rows (its agents), all ended
    when its episode is; masks are then one bool per env."""
    n = envs.num_envs
    space = gym.vector.utils.batch_space(envs.single_action_space, n)
    space.seed(5)
    single = copy.deepcopy(envs.single_action_space)
    single.seed(6)
    out, ended = [], np.zeros(n // rows_per_env, bool)
    for op in ops:
        if op[0] in ("step", "seq"):
            if mode is AutoresetMode.DISABLED and ended.any():
                out.append(envs.reset(options={"reset_mask": ended.copy()}))
            if op[0] == "step":
                result = envs.step(space.sample())
            else:
                result = envs.step(_sequences(single, op[1]), gamma=op[2])
            ended = (result[2] | result[3]).reshape(-1, rows_per_env).all(axis=1)
        elif op[0] == "reset":
            result = envs.reset(seed=op[1])
            ended[:] = False
        else:
            mask = np.array(op[1])
            result = envs.reset(seed=op[2], options={"reset_mask": mask})
            ended &= ~mask
        out.append(result)
    return out


def _same_results(envs, ref, mode: AutoresetMode, ops: list, rows_per_env: int = 1) -> None:
    """Run ``ops`` on ``envs`` and on the reference ``ref`` (both closed afterwards): every result equal, and equal
    again after the program and ``close()`` (nothing handed out was written into afterwards)."""
    with closing(envs), closing(ref):
        got, expected = _run(envs, mode, ops, rows_per_env), _run(ref, mode, ops, rows_per_env)
        _compare(got, expected, ops)
    _compare(got, expected, ops, "after the program and close()")


def _compare(got: list, expected: list, ops: list, when: str = "") -> None:
    """Every result of a program equal, bit for bit."""
    assert len(got) == len(expected)
    for t, (g, e) in enumerate(zip(got, expected)):
        assert_same(g, e, f"result {t}{', ' + when if when else ''} of {ops}")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("config", CONFIGS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs())
@example(program=("own", ENDING_TOGETHER, AutoresetMode.SAME_STEP, [("reset", 3)] + [("step",)] * 5))
def test_generated_programs_equal_gymnasium(config, program):
    obs, fns, mode, ops = program
    _same_results(*_pair(obs, fns, mode, config), mode, ops)


@st.composite
def async_programs(draw):
    n = draw(st.integers(2, 6))
    obs = draw(st.sampled_from([o for o in OBS if o != "walk"]))
    lengths = draw(st.lists(st.integers(1, 6), min_size=n, max_size=n))
    workers = draw(st.sampled_from([w for w in (1, 2, 3) if n % w == 0]))
    batch = draw(st.integers(1, n - 1))
    mode = draw(st.sampled_from([AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]))
    fns = [functools.partial(_env, obs, "discrete", length, tag) for tag, length in enumerate(lengths)]
    sequences = draw(st.booleans())
    return obs, fns, workers, batch, mode, sequences


@pytest.mark.timeout(300)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=async_programs())
@example(program=("own", ENDING_TOGETHER, 2, 2, AutoresetMode.SAME_STEP, False))
@example(program=("own", ENDING_TOGETHER, 2, 2, AutoresetMode.SAME_STEP, True))
def test_generated_asynchronous_batches_follow_each_envs_own_trajectory(program):
    """First-N-of-M batches of any size over 1 to 3 workers, of single actions or of action sequences (empty ones
    included): each env's own steps (observations, rewards, flags, steps taken, same-step final observations)
    equal the same env's stepped synchronously with the same actions."""
    obs, fns, workers, batch, mode, sequences = program
    n = len(fns)

    def action_of(env, t):
        return (env * 7 + t * 3) % 2 if obs in ("int", "f32", "own") else (env * 7 + t * 3) % 7 - 2

    def length_of(env, t):
        return (env * 5 + t * 3) % 4

    length = length_of if sequences else None
    with shoal.make(fns, backend="serial", autoreset_mode=mode) as sync:
        expected = own_trajectories(sync, action_of, 11, 8, length)
    with shoal.make(fns, num_workers=workers, batch_size=batch, autoreset_mode=mode, context="fork") as envs:
        got = own_trajectories(envs, action_of, 11, 8 * n // batch + n, length, each_at_least=1)
    for i in range(n):
        k = min(len(got[i]), len(expected[i]))
        assert k >= 1, f"env {i} never stepped"
        for t in range(k):
            assert_same(got[i][t], expected[i][t], f"env {i}, its step {t}")


class ByHand:
    """The program's envs stepped one at a time by hand, the reference for programs with action sequences (which
    Gymnasium's vector envs do not have): Gymnasium's ``SyncVectorEnv`` rules for steps and resets, and shoal's
    documented ones for sequences. Each env runs its own sequence and stops where its episode ends; its reward is
    ``sum_k gamma**k r_k`` over the steps taken, ``info["steps_taken"]`` counts them, its info is its last step's;
    an env due for its next-step autoreset resets instead (that is its whole step: 0 steps, reward 0); an empty
    sequence leaves its env as it was (its observation, reward 0, no flag, an autoreset still due)."""

    def __init__(self, fns: list, mode: AutoresetMode) -> None:
        self.envs = [fn() for fn in fns]
        self.num_envs, self.mode = len(fns), mode
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.obs: list = [None] * self.num_envs
        self.due = np.zeros(self.num_envs, bool)  # next-step mode: the env's next step is its autoreset

    _add_info = gym.vector.VectorEnv._add_info  # Gymnasium's own merge of one env's info (it reads num_envs)

    def _batch(self):
        from gymnasium.vector.utils import concatenate, create_empty_array

        space = self.single_observation_space
        return concatenate(space, self.obs, create_empty_array(space, self.num_envs))

    def reset(self, seed=None, options=None):
        n = self.num_envs
        mask = np.ones(n, bool) if options is None else options["reset_mask"]
        seeds = [None] * n if seed is None else [seed + i for i in range(n)] if isinstance(seed, int) else seed
        infos: dict = {}
        for i in np.flatnonzero(mask).tolist():
            self.obs[i], info = self.envs[i].reset(seed=seeds[i])
            infos = self._add_info(infos, info, i)
        self.due &= ~mask
        return self._batch(), infos

    def step(self, actions, gamma=None):
        from gymnasium.vector.utils import batch_space, iterate

        n, sequences = self.num_envs, isinstance(actions, list)
        if not sequences:  # a plain step: a sequence of one action, without steps_taken
            actions = [[a] for a in iterate(batch_space(self.single_action_space, n), actions)]
        rewards, terms, truncs = np.zeros(n), np.zeros(n, bool), np.zeros(n, bool)
        taken, infos = np.zeros(n, np.int32), {}
        for i, seq in enumerate(actions):
            env, info = self.envs[i], {}
            if len(seq) and self.due[i]:  # the autoreset is this env's whole step
                self.obs[i], info = env.reset()
                self.due[i] = False
            else:
                discount = 1.0
                for action in seq:
                    self.obs[i], reward, terms[i], truncs[i], info = env.step(action)
                    rewards[i] += discount * float(reward)
                    discount *= 1.0 if gamma is None else gamma
                    taken[i] += 1
                    if terms[i] or truncs[i]:
                        break
                ended = bool(terms[i] or truncs[i])
                if ended and self.mode is AutoresetMode.SAME_STEP:
                    infos = self._add_info(infos, {"final_obs": self.obs[i], "final_info": info}, i)
                    self.obs[i], info = env.reset()
                elif self.mode is AutoresetMode.NEXT_STEP and len(seq):
                    self.due[i] = ended
            infos = self._add_info(infos, info, i)
        if sequences:
            infos["steps_taken"] = taken
        return self._batch(), rewards, terms, truncs, infos

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _sequences(space, lengths: list[int]) -> list[np.ndarray]:
    """One action sequence per env, of ``lengths``, drawn from ``space`` (seeded by the caller)."""
    return [np.array([space.sample() for _ in range(k)], dtype=space.dtype).reshape(k, *space.shape)
            for k in lengths]


@st.composite
def sequence_programs(draw):
    """:func:`programs` of array action spaces with ``("seq", lengths, gamma)`` ops among the others: one
    sequence per env of ``lengths`` (0: skipped), discounted by ``gamma`` (None: 1)."""
    obs, fns, mode, ops = draw(programs(acts=["discrete", "box_f32"]))
    n = len(fns)
    seq = st.tuples(
        st.just("seq"),
        st.lists(st.integers(0, 4), min_size=n, max_size=n),
        st.sampled_from([None, 0.0, 0.5, 0.9, 1.0]),
    )
    extra = draw(st.lists(st.tuples(st.integers(1, len(ops)), seq), min_size=1, max_size=8))
    for at, op in sorted(extra, key=lambda e: e[0], reverse=True):  # after the first reset, anywhere
        ops.insert(at, op)
    return obs, fns, mode, ops


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs(acts=["discrete", "box_f32"]))
def test_the_hand_stepped_reference_equals_gymnasium(program):
    """ByHand is the reference below only because on programs without sequences it is Gymnasium's SyncVectorEnv."""
    _, fns, mode, ops = program
    _same_results(ByHand(fns, mode), gym.vector.SyncVectorEnv(fns, autoreset_mode=mode), mode, ops)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("config", CONFIGS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=sequence_programs())
def test_generated_programs_with_action_sequences_equal_envs_stepped_by_hand(config, program):
    """Action sequences (with gamma, empty ones, episodes ending inside them) among steps, resets and partial
    resets, in every autoreset mode: each env's results equal the env stepped by hand, and stay so after close."""
    obs, fns, mode, ops = program
    _same_results(_shoal(obs, fns, mode, config), ByHand(fns, mode), mode, ops)


MULTIAGENT = [JoinLeave, DictJoinLeave, VariedAgents, Mixed, *[functools.partial(Chatter, n) for n in (1, 2, 4)]]
"""The scripted variable population JoinLeave (and with Dict observations), VariedAgents (every type of result, some
for the C writer, some for the full checks), Mixed (agents of different spaces, flattened) and Chatter (a Text leaf,
episodes of 1, 2 or 4 steps)."""


@st.composite
def multiagent_programs(draw):
    """(PettingZoo env factory, how many envs, autoreset mode, ops), the env one of :data:`MULTIAGENT`."""
    n = draw(st.integers(2, 4))  # at least one per worker
    fn = draw(st.sampled_from(MULTIAGENT))
    mode = draw(st.sampled_from(list(AutoresetMode)))
    return fn, n, mode, draw(_ops(n))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("config", CONFIGS[1:])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=multiagent_programs())
@example(program=(JoinLeave, 2, AutoresetMode.SAME_STEP, [("reset", 0)] + [("step",)] * 8))
@example(program=(JoinLeave, 3, AutoresetMode.NEXT_STEP,
                  [("reset", None), ("step",), ("step",), ("mask", [False, True, False], None)] + [("step",)] * 8))
def test_generated_multiagent_programs_equal_the_serial_backend(config, program):
    """Multi-agent rows (agents joining and leaving, a loose Text leaf in same-step final observations) under
    steps, resets and partial resets of whole envs in every autoreset mode: the worker backends equal the serial one
    (itself checked against the envs stepped by hand and written tables in test_multiagent_population), bit for bit."""
    _multiagent_results(config, *program)


@pytest.mark.timeout(300)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=multiagent_programs())
def test_generated_multiagent_programs_equal_the_full_checks_path(program):
    """The C writer of an env's rows (RowWriter.put_agents) against the engine's full checks and numpy writes, which
    it replaced where results are exact: the same programs on the serial backend with and without it, bit for bit."""
    fn, n, mode, ops = program
    with mock.patch.object(PettingZooEngine, "_fast_writer", lambda self, layout, buffers: _no_fast_path):
        ref = shoal.make(fn, n, autoreset_mode=mode, backend="serial")
    assert all(engine._put_agents is _no_fast_path for engine in ref._transport.engines)
    envs = shoal.make(fn, n, autoreset_mode=mode, backend="serial")
    _same_results(envs, ref, mode, ops, envs.agents_per_env)


def _multiagent_results(config: dict, fn, n: int, mode: AutoresetMode, ops: list) -> None:
    ref = shoal.make(fn, n, autoreset_mode=mode, backend="serial")
    envs = shoal.make(fn, n, autoreset_mode=mode, **config)
    _same_results(envs, ref, mode, ops, envs.agents_per_env)


@pytest.mark.ray
@pytest.mark.timeout(300)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs(), with_sequences=sequence_programs(), multiagent=multiagent_programs())
def test_a_few_generated_programs_of_each_kind_on_ray(program, with_sequences, multiagent):
    """The three comparisons above on the Ray backend, a few programs each (a Ray vector env takes ~1 s to make;
    150 programs of each kind passed once, in 8 minutes)."""
    obs, fns, mode, ops = program
    _same_results(*_pair(obs, fns, mode, RAY), mode, ops)
    obs, fns, mode, ops = with_sequences
    _same_results(_shoal(obs, fns, mode, RAY), ByHand(fns, mode), mode, ops)
    _multiagent_results(RAY, *multiagent)
