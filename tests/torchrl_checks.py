"""TorchRL on shoal, in a process of its own (test_torchrl.py runs it): importing TorchRL makes 'spawn' the start
method of every process made afterwards, so in the test session it would change how every later test starts its
workers. Here shoal's workers start under it, as they do in a user's TorchRL script.

TorchRL's ``GymWrapper`` takes a Gymnasium vector env whose autoreset mode is same-step or disabled (TorchRL's
preferred). For each check, the wrapper over a shoal vector env on two workers and over Gymnasium's ``SyncVectorEnv``
of the same envs roll out the same number of steps from the same seeds, with TorchRL's random policy seeded alike,
without stopping at episode ends, and every entry of the two rollouts (observations, actions, rewards, the three
flags, the infos TorchRL keeps, and the ``next`` of each) is equal.

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
    # (not same-step: TorchRL 0.13.3 fails to read a Dict's final observations, over Gymnasium's SyncVectorEnv too)
]


def check(env_id: str, mode: gym.vector.AutoresetMode, steps: int) -> None:
    import torch  # (here, not at the top: each spawned worker imports this module again, and needs neither)
    from torchrl.envs import GymWrapper

    fns = [functools.partial(gym.make, env_id, max_episode_steps=9 + 4 * i) for i in range(4)]
    rollouts = []
    for vec in (gym.vector.SyncVectorEnv(fns, autoreset_mode=mode),
                shoal.make(fns, num_workers=2, autoreset_mode=mode.value)):
        env = GymWrapper(vec, device="cpu")
        env.set_seed(3)
        torch.manual_seed(0)
        rollouts.append(env.rollout(steps, break_when_any_done=False))
        env.close()
    want, got = rollouts
    keys = sorted(want.keys(True, True), key=str)
    if keys != sorted(got.keys(True, True), key=str):
        sys.exit(f"{env_id} {mode.value}: entries {sorted(got.keys(True, True), key=str)} != {keys}")
    for key in keys:
        if want[key].dtype != got[key].dtype or not torch.equal(want[key], got[key]):
            sys.exit(f"{env_id} {mode.value}, {key}: {got[key]} != {want[key]}")
    done = int(want["next", "done"].sum())
    print(f"{env_id} {mode.value}: {steps} steps equal, {len(keys)} entries, {done} episode ends")


if __name__ == "__main__":  # (shoal's workers start with 'spawn' here, which runs this module again in each)
    for env_id, mode, steps in CHECKS:
        check(env_id, mode, steps)
