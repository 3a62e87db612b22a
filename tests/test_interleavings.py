"""Generated programs of steps, full resets and partial resets: every backend equals Gymnasium's SyncVectorEnv.

The fixed tables (test_autoreset) and rollouts (test_equivalence) check chosen sequences; here hypothesis draws
the sequences: how many envs, their spaces and episode lengths, the autoreset mode, and an interleaving of steps,
seeded and unseeded resets and partial resets (``reset_mask``) landing anywhere, including on envs waiting for their
autoreset. Every result is compared with Gymnasium's, bit for bit, and once the program has run every result handed
out is compared again: an array that a later step wrote into (a view of memory the vector env reuses, such as the
final observations workers leave in shared memory) fails there.
"""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest

import shoal
from contextlib import closing

from fakes import AsReturned, SpaceEnv, Walk, WalkSingle
from gymnasium.vector import AutoresetMode
from helpers import assert_same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CONFIGS = [
    pytest.param({"backend": "serial", "num_workers": 2}, id="serial"),
    pytest.param({"backend": "multiprocessing", "num_workers": 2, "context": "fork"}, id="mp-fork"),
    pytest.param(
        {"backend": "multiprocessing", "num_workers": 2, "context": "fork", "inline": False}, id="mp-fork-noinline"
    ),
]
OBS = ["box_f32", "box_u8_img", "discrete", "dict", "tuple", "int", "f32", "walk"]
"""SpaceEnv's observation spaces; AsReturned's kinds "int" and "f32"; "walk": the batch-native Walk (shoal's side)
against its single-instance twin (Gymnasium's)."""
ACTS = ["discrete", "box_f32", "dict"]


def _env(obs: str, act: str, length: int):
    if obs in ("int", "f32"):
        return AsReturned(obs, length)
    if obs == "walk":
        return WalkSingle(length)
    return SpaceEnv(obs, act, max_steps=length)


def _pair(obs: str, fns: list, mode: AutoresetMode, config: dict):
    """(shoal's vector env, Gymnasium's SyncVectorEnv) of the program's envs; for "walk" shoal's is batch-native."""
    ref = gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
    if obs == "walk":
        return shoal.make(functools.partial(Walk, limit=fns[0].args[2]), len(fns), autoreset_mode=mode, **config), ref
    return shoal.make(fns, autoreset_mode=mode, **config), ref


@st.composite
def programs(draw):
    """(kind of env, env factories, autoreset mode, ops): ops are ``("step", t)``, ``("reset", seed)`` (an int,
    a list of seeds, or None: unseeded) and ``("mask", bits, seed)``."""
    n = draw(st.integers(2, 5))
    obs = draw(st.sampled_from(OBS))
    act = "discrete" if obs in ("int", "f32", "walk") else draw(st.sampled_from(ACTS))
    lengths = draw(st.lists(st.integers(1, 6), min_size=n, max_size=n))
    if obs == "walk":  # one limit for every instance of the batch-native env
        lengths = [lengths[0]] * n
    fns = [functools.partial(_env, obs, act, length) for length in lengths]
    mode = draw(st.sampled_from(list(AutoresetMode)))
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
    ops = draw(st.lists(op, min_size=1, max_size=24).map(lambda rest: [("reset", draw(seeds))] + rest))
    return obs, fns, mode, ops


def _run(envs, mode: AutoresetMode, ops: list) -> list:
    """Every result of ``ops`` on ``envs``. In disabled mode an env that ended is reset (with a mask, unseeded)
    before the next step, as the caller must."""
    n = envs.num_envs
    space = gym.vector.utils.batch_space(envs.single_action_space, n)
    space.seed(5)
    out, ended = [], np.zeros(n, bool)
    for op in ops:
        if op[0] == "step":
            if mode is AutoresetMode.DISABLED and ended.any():
                out.append(envs.reset(options={"reset_mask": ended.copy()}))
            result = envs.step(space.sample())
            ended = result[2] | result[3]
        elif op[0] == "reset":
            result = envs.reset(seed=op[1])
            ended[:] = False
        else:
            mask = np.array(op[1])
            result = envs.reset(seed=op[2], options={"reset_mask": mask})
            ended &= ~mask
        out.append(result)
    return out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("config", CONFIGS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs())
def test_generated_programs_equal_gymnasium(config, program):
    obs, fns, mode, ops = program
    envs, ref = _pair(obs, fns, mode, config)
    with envs, closing(ref):
        got, expected = _run(envs, mode, ops), _run(ref, mode, ops)
        assert len(got) == len(expected)
        for t, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, f"result {t} of {ops}")
    for t, (g, e) in enumerate(zip(got, expected)):  # nothing handed out changed afterwards, closing included
        assert_same(g, e, f"result {t}, after the program, of {ops}")
