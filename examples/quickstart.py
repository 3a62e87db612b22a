"""Step 16 CartPoles on shoal's multiprocessing backend and on Gymnasium's vector envs; print steps/s of each."""

import time

import gymnasium as gym
import numpy as np

import shoal


def steps_per_second(envs, seconds=2.0):
    envs.reset(seed=0)
    actions = np.zeros(envs.num_envs, np.int64)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        envs.step(actions)
        steps += envs.num_envs
    envs.close()
    return steps / (time.perf_counter() - start)


if __name__ == "__main__":
    fns = [lambda: gym.make("CartPole-v1")] * 16
    for name, envs in [
        ("shoal multiprocessing", shoal.make("CartPole-v1", 16)),
        ("gymnasium SyncVectorEnv", gym.vector.SyncVectorEnv(fns)),
        ("gymnasium AsyncVectorEnv", gym.vector.AsyncVectorEnv(fns)),
    ]:
        print(f"{name:26s} {steps_per_second(envs):10,.0f} steps/s")
