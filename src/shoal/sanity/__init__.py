"""Sanity envs: seven tiny environments that catch broken RL code (seed 004's list, after PufferLib's Ocean).

Each id is a batch-native env for :func:`shoal.make` (``shoal.make("shoal/Squared-v0", 4096)`` steps 4096 instances
in a few numpy calls per step) and a plain Gymnasium env under the same id for any other vector env
(``gymnasium.make("shoal/Squared-v0")``); the two are equal step for step for the same seeds and actions.
Multiagent's batch-native env is multi-agent (``shoal.make`` returns agents as rows, two per env); its Gymnasium env
holds both agents (their rows as its observation, their actions as one ``MultiDiscrete``, the mean of their rewards),
and :class:`shoal.sanity.parallel.MultiagentParallel` is its PettingZoo twin.

==================  ===========================================================================  =========  =========
id                  what it checks                                                               optimal    random
==================  ===========================================================================  =========  =========
shoal/Squared-v0    credit over several steps: reach the targets on a grid's edge                 4          1.226
shoal/Password-v0   exploration: a fixed 5-bit password, reward only when all bits are right      1          1/32
shoal/Stochastic-v0 a stochastic optimum: a constant observation, an env that punishes bias       12.359     9.621
shoal/Memory-v0     memory: repeat 2 bits after a delay of 1                                      2          1
shoal/Multiagent-v0 two agents as rows: agent 0 must play 0, agent 1 must play 1                   1          0.5
shoal/Spaces-v0     structured spaces: Dict observation and Dict action                           1          0.5
shoal/Bandit-v0     stochastic rewards: four arms paying 1 with probability 0.2, 0.5, 0.8, 0.4    0.8        0.475
==================  ===========================================================================  =========  =========

:data:`SUITE` holds each env's optimal return, a uniform random policy's and a scripted optimal policy;
:func:`evaluate` measures a policy's mean episodic return. Importing :mod:`shoal` registers the ids.
"""

from __future__ import annotations

import gymnasium

from shoal import batch

NAMES = ("Squared", "Password", "Stochastic", "Memory", "Multiagent", "Spaces", "Bandit")
IDS = tuple(f"shoal/{name}-v0" for name in NAMES)


def register() -> None:
    """Register every sanity id with Gymnasium (single-instance) and with :mod:`shoal.batch` (batch-native)."""
    for name, env_id in zip(NAMES, IDS):
        batch.register(env_id, f"shoal.sanity.native:{name}")
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=f"shoal.sanity.single:{name}")


register()
