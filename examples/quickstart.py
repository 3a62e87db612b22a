"""Twelve Atari envs over three games in one shoal vector env, against ale-py's C++ pools; prints steps/s of each."""

import time

import numpy as np
from ale_py.vector_env import AtariVectorEnv as AlePool

import shoal

GAMES = ["pong", "breakout", "space_invaders"]


def steps_per_second(step, num_envs, seconds=3.0):
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        steps += num_envs
    return steps / (time.perf_counter() - start)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    with shoal.AtariVectorEnv(games=list(np.repeat(GAMES, 4)), batch_size=6) as envs:  # first 6 of 12 to finish
        envs.reset(seed=0)
        ours = steps_per_second(lambda: envs.step(envs.action_space.sample()), envs.batch_size)
    pools = [AlePool(game, 4) for game in GAMES]  # ale-py: one vector env per game
    for pool in pools:
        pool.reset(seed=0)

    def step_pools():
        for pool in pools:
            pool.send(rng.integers(0, pool.single_action_space.n, pool.num_envs))
        for pool in pools:
            pool.recv()

    theirs = steps_per_second(step_pools, 12)
    for pool in pools:
        pool.close()
    print(f"shoal.AtariVectorEnv, 3 games x 4       {ours:8,.0f} steps/s")
    print(f"ale-py AtariVectorEnv, 3 pools of 4     {theirs:8,.0f} steps/s   (shoal: {ours / theirs:.2f}x)")
