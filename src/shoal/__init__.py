"""shoal: step many reinforcement-learning environments at once, fast, behind the Gymnasium vector API.

>>> import shoal
>>> envs = shoal.make("CartPole-v1", 8)                       # any Gymnasium env, several per worker
>>> envs.close()
>>> envs = shoal.AtariVectorEnv(games=["pong", "breakout"])  # many ROMs in one vector env
>>> envs.close()
"""

from shoal import errors, sanity, video
from shoal.atari import AtariVectorEnv
from shoal.make import make
from shoal.spaces import Layout
from shoal.vector import AsyncVectorEnv, SyncVectorEnv, VectorEnv

__version__ = "0.1.0"
__all__ = [
    "AsyncVectorEnv", "AtariVectorEnv", "Layout", "SyncVectorEnv", "VectorEnv", "errors", "make", "sanity", "video",
    "__version__",
]
