"""shoal's vector env API and its drop-in Gymnasium classes."""

from shoal.vector.base import AsyncState, VectorEnv
from shoal.vector.compat import AsyncVectorEnv, SyncVectorEnv

__all__ = ["AsyncState", "AsyncVectorEnv", "SyncVectorEnv", "VectorEnv"]
