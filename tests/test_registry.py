"""Every env in Gymnasium's registry that Gymnasium can make here steps bit for bit as in Gymnasium's SyncVectorEnv.

The ids of Gymnasium (classic control, toy text, Box2D, MuJoCo), of MiniGrid and BabyAI, and shoal's own: real envs
with their own spaces (MiniGrid's ``MissionSpace``, Blackjack's ``Tuple``, CarRacing's images) and infos (Taxi's
action masks, MuJoCo's reward terms), on the multiprocessing backend, episodes cut short so that every env resets
several times at different steps; and in asynchronous batches, where each env follows its own trajectory. Atari's
ids are the Atari tests' (``test_atari_equivalence.py``, ``test_ale_py.py``).
"""

from __future__ import annotations

import functools
import importlib.util
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.vector import AutoresetMode
from helpers import assert_same, beside_gymnasium, own_trajectories

import shoal
import shoal.sanity  # noqa: F401  (registers shoal's ids)

minigrid = pytest.importorskip("minigrid", reason="the test extra installs it")  # (registers MiniGrid's and BabyAI's)

NUM_ENVS, STEPS = 3, 60


JAX_ENVS_MADE = all(importlib.util.find_spec(name) is not None for name in ("jax", "flax"))
JAX_NAMESPACES = ("phys2d", "tabular")
"""Gymnasium's JAX envs: compared in a process of their own (tests/jax_checks.py), where JAX may start; once it has
started here, JAX would warn at every later fork of this session, which the session makes errors."""

FAMILIES_NOT_INSTALLED = [
    ("gymnasium.envs.box2d", "Box2D", "Box2D is not installed (the test extra leaves it out on Python 3.14: swig)"),
    ("gymnasium.envs.mujoco", "mujoco", "MuJoCo is not installed"),
]


def _left_out(spec) -> str | None:
    """Why Gymnasium cannot make the env of ``spec`` here, or None."""
    if not isinstance(spec.entry_point, str):
        return "an id Gymnasium keeps only to say where its env moved (mujoco-py's v2 and v3, shimmy's)"
    if spec.namespace in JAX_NAMESPACES and not JAX_ENVS_MADE:
        return "a functional env of JAX arrays; it needs JAX and flax, which are not both installed"
    for family, module, why in FAMILIES_NOT_INSTALLED:
        if spec.entry_point.startswith(family) and importlib.util.find_spec(module) is None:
            return why
    if spec.id == "Pusher-v4":
        return "needs mujoco < 3 (the test extra installs MuJoCo 3, which Pusher-v5 runs on)"
    if spec.id.startswith("MiniGrid-WFC-"):
        return "MiniGrid's wheel lacks the pattern images its wave-function-collapse envs load"
    return None


LOOPS = {"BabyAI-SynthS5R2-v0": "from these seeds, a reset's level generation loops without end in MiniGrid's "
                                "place_obj (in Gymnasium's SyncVectorEnv too)"}


PACKAGES = ("gymnasium", "minigrid", "shoal")  # (not the ids other test modules register for their own envs)


def _package(spec) -> str:
    entry = spec.entry_point
    return (entry if isinstance(entry, str) else getattr(entry, "__module__", "")).split(".")[0]


SPECS = sorted((s for s in gym.registry.values() if s.namespace != "ALE" and _package(s) in PACKAGES),
               key=lambda s: s.id)
JAX_IDS = [s.id for s in SPECS if s.namespace in JAX_NAMESPACES and _left_out(s) is None]
IDS = [s.id for s in SPECS if _left_out(s) is None and s.id not in LOOPS and s.id not in JAX_IDS]
LEFT_OUT = {s.id: _left_out(s) for s in SPECS if _left_out(s) is not None}
ONE_PER_CLASS = list({s.entry_point: s.id for s in reversed(SPECS) if s.id in IDS}.values())  # (the first id of each)


def _fns(env_id):
    return [functools.partial(gym.make, env_id, max_episode_steps=9 + 5 * i) for i in range(NUM_ENVS)]


def _compare(env_id, mode):
    with beside_gymnasium(_fns(env_id), mode, num_workers=2) as (envs, ref):
        assert envs.single_observation_space == ref.single_observation_space
        assert envs.single_action_space == ref.single_action_space
        assert_same(envs.reset(seed=3), ref.reset(seed=3), "reset")
        ref.action_space.seed(5)
        for t in range(STEPS):
            actions = ref.action_space.sample()
            expected = ref.step(actions)
            assert_same(envs.step(actions), expected, f"step {t}")
            ended = expected[2] | expected[3]
            if mode is AutoresetMode.DISABLED and ended.any():
                options = {"reset_mask": ended}
                assert_same(envs.reset(options=options), ref.reset(options=options), f"reset after step {t}")


@pytest.mark.parametrize("env_id", IDS)
def test_every_registered_env_equals_gymnasium(env_id):
    _compare(env_id, AutoresetMode.NEXT_STEP)


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED], ids=lambda m: m.value)
@pytest.mark.parametrize("env_id", ONE_PER_CLASS)
def test_every_registered_env_class_equals_gymnasium_in_the_other_autoreset_modes(env_id, mode):
    _compare(env_id, mode)


def test_the_registry_is_covered_and_the_ids_left_out_are_those_gymnasium_cannot_make_here():
    """The families above are all there, and each id left out fails in Gymnasium itself (an id that Gymnasium can
    make once a dependency is installed here must be compared, not left out)."""
    families = ["CartPole-v1", "Blackjack-v1", "Taxi-v4", "CarRacing-v3", "Ant-v5", "MiniGrid-DoorKey-5x5-v0",
                "BabyAI-GoToLocal-v0", "shoal/Memory-v0"]
    assert set(families) - set(LEFT_OUT) <= set(IDS), sorted(set(families) - set(IDS))
    assert len(IDS) >= 170, len(IDS)  # (216 with every test dependency installed; and the 5 JAX_IDS)
    for env_id in LEFT_OUT:
        with pytest.raises((ImportError, gym.error.DependencyNotInstalled, FileNotFoundError)):
            env = gym.make(env_id)
            env.reset(seed=0)
            env.close()


@pytest.mark.timeout(300)
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason='JAX is not installed (pip install "shoal[jax]")')
def test_envs_calling_jax_on_workers_after_jax_has_started_equal_gymnasium():
    """tests/jax_checks.py envs: an env whose steps call JAX, then each of Gymnasium's JAX envs where flax is
    installed too, on 2 workers made after JAX has started in that process, steps as in Gymnasium's SyncVectorEnv;
    the workers start with forkserver (forked ones hung at the first reset, in JAX's calls)."""
    script = Path(__file__).with_name("jax_checks.py")
    done = subprocess.run([sys.executable, "-W", "ignore", str(script), "envs", *JAX_IDS], capture_output=True,
                          text=True, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [f"{env_id} on forkserver workers: 40 steps equal"
                                        for env_id in ["JaxWalk", *JAX_IDS]]


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
@pytest.mark.parametrize("env_id", ONE_PER_CLASS)
def test_every_registered_env_class_in_asynchronous_batches_follows_its_own_trajectory(env_id, mode):
    """First 2 of 4 on two workers: whichever envs come back, each env's own steps (its own actions, observations,
    rewards, flags and final observations) are those it takes when the four step synchronously."""
    space = gym.make(env_id).action_space
    table = []
    for env in range(4):
        space.seed(100 + env)
        table.append([space.sample() for _ in range(200)])
    fns = [functools.partial(gym.make, env_id, max_episode_steps=5 + 3 * i) for i in range(4)]
    with shoal.make(fns, backend="serial", autoreset_mode=mode) as envs:
        expected = own_trajectories(envs, lambda env, t: table[env][t], 3, 16)
    with shoal.make(fns, num_workers=2, batch_size=2, autoreset_mode=mode) as envs:
        got = own_trajectories(envs, lambda env, t: table[env][t], 3, 40, each_at_least=3)
    for env in range(4):
        k = min(len(got[env]), 16)
        assert k >= 3, f"env {env} made too little progress ({k} steps)"
        assert_same(tuple(got[env][:k]), tuple(expected[env][:k]), f"env {env}, against its synchronous trajectory")
