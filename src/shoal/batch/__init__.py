"""Batch-native environments: one object simulates many instances of an env in numpy, and shoal hosts it.

A :class:`BatchEnv` steps every instance it is asked to in one call, writing observations, rewards, terminations
and truncations straight into the arrays shoal hands it (rows of the shared buffers when they are contiguous), with
no Python per instance. Everything the vector API means (autoreset in its three modes, partial resets, first-N-of-M
batches, action sequences with ``gamma``, ``envs.torch()``) is shoal's engine's, written once: an env only resets
and steps. Every backend hosts one: the serial backend one object for all envs, each multiprocessing worker or Ray
actor one object for its share.

A complete env (a coin to guess; ``shoal.make(Coin, 4096)`` steps 4096 of them)::

    import numpy as np
    from gymnasium import spaces
    from shoal.batch import BatchEnv, Streams

    class Coin(BatchEnv):
        single_observation_space = spaces.Box(0, 1, (1,), np.float32)
        single_action_space = spaces.Discrete(2)

        def __init__(self, num_envs):
            super().__init__(num_envs)
            self.rng = Streams(num_envs)             # one random stream per instance, drawn for many at once
            self.coin = np.zeros(num_envs, np.int64)

        def reset(self, ids, seeds, out):
            self.rng.seed(ids, seeds)
            self.coin[ids] = self.rng.integers(ids, 2)
            out.obs[:] = 0

        def step(self, ids, actions, out):
            out.rewards[:] = actions == self.coin[ids]
            out.terminations[:] = True
            out.obs[:] = 0

``ids`` index this object's instances (``0 .. num_envs - 1``; a read-only array, the same one again on later
calls for the same instances); row ``j`` of ``actions`` (read-only too: it may be the caller's own batch) and of
every array of ``out`` belongs to instance ``ids[j]``. Spaces must have a fixed size (Box, Discrete, MultiDiscrete,
MultiBinary and Dict/Tuple of them): a structured observation arrives in ``out.obs`` as Gymnasium's batched shape (a
dict of arrays for a Dict), and so do structured actions.

:func:`compare` checks a batch-native env against a single-instance Gymnasium env of the same game, step for step.
"""

from shoal.batch.compare import compare
from shoal.batch.engine import BatchEngine, BatchEngineFactory, check_spaces
from shoal.batch.env import BatchEnv, Outputs, batch_class_of, load, register, registry
from shoal.batch.streams import Streams, seed_states

__all__ = [
    "BatchEngine", "BatchEngineFactory", "BatchEnv", "Outputs", "Streams", "batch_class_of", "check_spaces",
    "compare", "load", "register", "registry", "seed_states",
]
