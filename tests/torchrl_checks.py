"""TorchRL on shoal, in a process of its own (test_torchrl.py runs it): importing TorchRL makes 'spawn' the start
method of every process made afterwards, so in the test session it would change how every later test starts its
workers. Here shoal's workers start under it, as they do in a user's TorchRL script.

TorchRL's ``GymWrapper`` takes a Gymnasium vector env whose autoreset mode is same-step or disabled (TorchRL's
preferred). For each check, the wrapper over a shoal vector env on two workers and over Gymnasium's ``SyncVectorEnv``
of the same envs roll out the same number of steps from the same seeds, with TorchRL's random policy seeded alike,
without stopping at episode ends, and every entry of the two rollouts (observations, actions, rewards, the three
flags, the infos TorchRL keeps, and the ``next`` of each) is equal. For Atari: shoal's ``AtariVectorEnv`` of two ROMs
against its reference (tests/atari_reference.py); shoal's rollout also carries the infos its Atari env reports as
EnvPool does, which the reference lacks.

Prints one line per check (TorchRL logs there too); exits non-zero on the first difference."""

from __future__ import annotations

import functools
import sys

import gymnasium as gym

import shoal

DISABLED, SAME_STEP = gym.vector.AutoresetMode.DISABLED, gym.vector.AutoresetMode.SAME_STEP
CHECKS = [
    ("CartPole-v1", DISABLED, 60),  # Box observations, Discrete actions
    ("CartPole-v1", SAME_STEP, 60),
    ("gymnasium_robotics:PointMaze_UMaze-v3", DISABLED, 40),  # a Dict of float64 goals, Box actions, an info
    # (not same-step: TorchRL 0.14.1, as 0.13.3, fails to read a Dict's final observations, over Gymnasium's
    # SyncVectorEnv too)
    ("atari:pong+breakout", SAME_STEP, 60),  # two ROMs in one vector env, the full action space (the README's)
    ("atari:pong+breakout", DISABLED, 60),
]

ATARI_ONLY_OURS = {"env_id", "game_over", "raw_reward"}
"""The infos shoal's Atari env reports as EnvPool does, which the reference lacks (TorchRL keeps infos in same-step
mode only)."""
ATARI_LIVES = "lives"
"""An info whose dtype differs: Gymnasium's vector env stacks ALE's Python ints as int64; shoal's is EnvPool's int32."""


def vector_envs(name: str, mode: gym.vector.AutoresetMode):
    """Gymnasium's vector env and shoal's of the same envs, and the info entries only shoal's reports."""
    if name.startswith("atari:"):
        from atari_reference import reference_env, shoal_env  # (here: the spawned workers need neither)

        games = name.removeprefix("atari:").split("+")
        settings = dict(frameskip=4, size=(84, 84), grayscale=True, stack=4, episodic_life=False, max_frames=160)
        refs = [functools.partial(reference_env, game, full_action_space=True, **settings) for game in games]
        ours = shoal_env(games, full_action_space=True, autoreset_mode=mode.value, num_workers=2, **settings)
        return gym.vector.SyncVectorEnv(refs, autoreset_mode=mode), ours, ATARI_ONLY_OURS
    fns = [functools.partial(gym.make, name, max_episode_steps=9 + 4 * i) for i in range(4)]
    return (gym.vector.SyncVectorEnv(fns, autoreset_mode=mode),
            shoal.make(fns, num_workers=2, autoreset_mode=mode.value), set())


def check(name: str, mode: gym.vector.AutoresetMode, steps: int) -> None:
    import torch  # (here, not at the top: each spawned worker imports this module again, and needs neither)
    from torchrl.envs import GymWrapper

    *pair, only_ours = vector_envs(name, mode)
    rollouts = []
    for vec in pair:
        env = GymWrapper(vec, device="cpu")
        env.set_seed(3)
        torch.manual_seed(0)
        rollouts.append(env.rollout(steps, break_when_any_done=False))
        env.close()
    want, got = rollouts
    keys = sorted(want.keys(True, True), key=str)
    ours = sorted((key for key in got.keys(True, True) if _leaf(key) not in only_ours), key=str)
    if keys != ours:
        sys.exit(f"{name} {mode.value}: entries {sorted(got.keys(True, True), key=str)} != {keys} (+ {only_ours})")
    for key in keys:
        same_dtype = want[key].dtype == got[key].dtype or (name.startswith("atari:") and _leaf(key) == ATARI_LIVES)
        if not same_dtype or not torch.equal(want[key], got[key]):
            sys.exit(f"{name} {mode.value}, {key}: {got[key]} != {want[key]}")
    done = int(want["next", "done"].sum())
    print(f"{name} {mode.value}: {steps} steps equal, {len(keys)} entries, {done} episode ends")


def _leaf(key) -> str:
    return key if isinstance(key, str) else key[-1]


if __name__ == "__main__":  # (shoal's workers start with 'spawn' here, which runs this module again in each)
    for env_id, mode, steps in CHECKS:
        check(env_id, mode, steps)
