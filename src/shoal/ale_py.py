"""ale-py's ``AtariVectorEnv`` on shoal: its constructor, and its outputs as ale-py 0.12 gives them.

    from shoal.ale_py import AtariVectorEnv                 # was: from ale_py.vector_env import AtariVectorEnv
    envs = AtariVectorEnv("breakout", 16)

Code that builds the pool through Gymnasium (``gym.make_vec("ALE/Breakout-v5", 16)``) calls
:func:`register_vector_envs` once first. :class:`shoal.AtariVectorEnv` takes the same keywords but follows Gymnasium's
conventions where the two differ; this class follows ale-py's:

* an episode's first observation has zeros before its first frame (``padding_type="zero"``; Gymnasium's and
  shoal's default repeats the frame);
* an episode is truncated at frame ``max_num_frames_per_episode + 1``, as ale-py's pool does (ALE and Gymnasium's
  ``AtariEnv`` truncate at that frame number itself);
* rewards are int32, and ``info`` holds exactly ``env_id``, ``lives``, ``frame_number`` and ``episode_frame_number``
  (int32; no ``raw_reward`` or ``game_over``); in same-step autoreset mode ``info["final_obs"]``, when an episode
  ended, is one array of the batch's rows, zeros where none ended (no ``final_info``, no masks);
* ``reset(seed=s, options={"reset_mask": mask})`` seeds the envs it resets ``s, s + 1, ...`` in order (an array: one
  seed per env reset), an all-False mask resets nothing and returns the current batch, and the first reset must
  reset every env.

What stays shoal's: partial resets in asynchronous mode (of the batch held), action sequences (their discounted
returns stay float64), the backends, and how many no-ops a reset runs (drawn as Gymnasium's ``AtariPreprocessing`` draws
them; ale-py's pool draws from its own generator, so with ``noop_max > 0`` episodes start apart). ale-py's C++ handle
``envs.ale`` and ``xla()`` are not provided (``is_xla_registered`` stays False); its other attributes are
(``continuous``, ``continuous_action_threshold``, ``grayscale``, ``map_action_idx``, ``batch_size``, ...), read-only
where they are the settings the envs were made with.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from shoal.atari.engine import joystick_table
from shoal.atari.env import AtariVectorEnv as _ShoalAtari
from shoal.errors import NotResetError, ResetArgumentError, ResetArgumentTypeError
from shoal.vector.checks import integer

INFO_KEYS = ("env_id", "lives", "frame_number", "episode_frame_number")
"""ale-py's info arrays, in its order."""
ALE_PY_ENTRY_POINT = "ale_py.vector_env:AtariVectorEnv"
ENTRY_POINT = "shoal.ale_py:AtariVectorEnv"


class AtariVectorEnv(_ShoalAtari):
    """ale-py 0.12's ``AtariVectorEnv(game, num_envs, **kwargs)`` on shoal's backends (see the module docstring);
    shoal's own keywords (``backend``, ``num_workers``, ``games``, ``obs_type``, ...) work too."""

    # ale-py's pool has Gymnasium's one vector-level generator (its resets leave it alone), not a tuple of the envs'
    np_random = gym.vector.VectorEnv.np_random  # type: ignore[assignment]  # (its type, not a tuple)
    np_random_seed = gym.vector.VectorEnv.np_random_seed  # type: ignore[assignment]
    is_xla_registered = False  # (xla() is not provided)

    def __init__(
        self, game: str | None = None, num_envs: int | None = None, *, max_num_frames_per_episode: int = 108000,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("padding_type", "zero")
        # ale-py's pool plays the limit's frames and truncates at the next one; ALE, at the limit (tested equal). A
        # limit that is not a positive int goes on as it came, for the check to name it.
        limit = max_num_frames_per_episode
        if integer(limit) is not None and limit > 0:
            limit = int(limit) + 1
        super().__init__(game=game, num_envs=num_envs, max_num_frames_per_episode=limit, **kwargs)
        self.map_action_idx = joystick_table()  # (ale-py's attribute; the workers map continuous actions)

    @property
    def continuous(self) -> bool:
        return self.config.continuous

    @property
    def continuous_action_threshold(self) -> float:
        return self.config.continuous_action_threshold

    @property
    def grayscale(self) -> bool:
        return self.config.grayscale

    def reset_async(self, seed: Any = None, options: dict[str, Any] | None = None) -> None:
        mask = (options or {}).get("reset_mask")
        if mask is not None:
            mask = _checked_mask(mask, self.num_envs)
            if self._held is None:
                raise NotResetError(
                    f"The first reset() must reset every environment (got {int(mask.sum())} of {self.num_envs})"
                )
            seed = _seeds_of_reset(seed, mask)
        super().reset_async(seed=seed, options=options)

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = super().reset_wait(timeout)
        return obs, self._ale_info(info)

    def recv(self, timeout: float | None = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        obs, rewards, terminations, truncations, info = super().recv(timeout)
        if "steps_taken" not in info:  # a sequence's return is discounted: it stays float64
            rewards = rewards.astype(np.int32)
        return obs, rewards, terminations, truncations, self._ale_info(info)

    def xla(self) -> Any:
        raise NotImplementedError(
            "xla() hands ale-py's C++ pool to JAX as an XLA custom call; shoal's envs step in worker processes and "
            "have no such handle. Step with step()/send()/recv() and move the arrays with jax.numpy.asarray."
        )

    def _reset_mask(self, mask: Any) -> np.ndarray:
        return _checked_mask(mask, self.num_envs)  # all False is allowed: nothing is reset

    def _ale_info(self, info: dict[str, Any]) -> dict[str, Any]:
        out = {key: info[key].astype(np.int32, copy=False) for key in INFO_KEYS}
        if "final_obs" in info:
            ended, finals = info["_final_obs"], info["final_obs"]
            dense = np.zeros((len(ended), *self.single_observation_space.shape), np.uint8)  # type: ignore[misc]
            for row in np.flatnonzero(ended).tolist():
                dense[row] = finals[row]
            out["final_obs"] = dense
        if "steps_taken" in info:
            out["steps_taken"] = info["steps_taken"]
        return out


def _checked_mask(mask: Any, n: int) -> np.ndarray:
    """ale-py's checks of ``reset_mask``: a bool numpy array of shape ``(n,)`` (all False allowed)."""
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
        raise ResetArgumentTypeError(
            f"`reset_mask` must be a boolean numpy array, got {type(mask).__name__} with dtype "
            f"{getattr(mask, 'dtype', None)}"
        )
    if mask.shape != (n,):
        raise ResetArgumentError(f"`reset_mask` must have shape {(n,)}, got {mask.shape}")
    return mask


def _seeds_of_reset(seed: Any, mask: np.ndarray) -> list[int | None] | None:
    """One seed per env from ale-py's seeds of a partial reset: an int ``s`` seeds the envs reset ``s, s + 1, ...``
    in order, an array has one seed per env reset."""
    if seed is None:
        return None
    reset = np.flatnonzero(mask)
    first = integer(seed)
    if first is not None:
        values = [first + k for k in range(len(reset))]
    elif isinstance(seed, (np.ndarray, list, tuple)):
        if np.shape(seed) != (len(reset),):
            raise ResetArgumentError(
                f"`seed` must have one entry per sub-environment being reset, expected shape {(len(reset),)}, got "
                f"{np.shape(seed)}"
            )
        values = np.asarray(seed).tolist()
    else:
        raise ResetArgumentTypeError(f"seed must be an int or one int per env reset, got {type(seed).__name__}")
    seeds: list[int | None] = [None] * len(mask)
    for env_id, value in zip(reset.tolist(), values):
        seeds[env_id] = value
    return seeds


def register_vector_envs() -> list[str]:
    """Make ``gym.make_vec`` build this class for every env id registered with ale-py's ``AtariVectorEnv`` as its
    vector entry point (``ALE/Breakout-v5``, ...; ``import ale_py`` registers them); the ids changed."""
    import ale_py  # noqa: F401  (registers the ALE ids)

    changed = []
    for env_id, spec in gym.registry.items():
        if spec.vector_entry_point == ALE_PY_ENTRY_POINT:
            spec.vector_entry_point = ENTRY_POINT
            changed.append(env_id)
    return changed
