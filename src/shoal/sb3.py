"""Stable-Baselines3: any shoal vector env as an SB3 ``VecEnv``, so ``PPO("MlpPolicy", env)`` trains on it.

    >>> envs = shoal.make("CartPole-v1", 8, autoreset_mode="same_step")
    >>> model = stable_baselines3.PPO("MlpPolicy", shoal.sb3.VecEnv(envs)).learn(10_000)

or, as SB3's own classes take env constructors, their drop-ins: :class:`DummyVecEnv` (the envs in this process) and
:class:`SubprocVecEnv` (in worker processes, several envs per worker, one worker per core):

    >>> from shoal.sb3 import SubprocVecEnv
    >>> envs = make_vec_env("CartPole-v1", n_envs=8, vec_env_cls=SubprocVecEnv)

A thin translation of SB3's API onto the one :class:`~shoal.vector.base.VectorEnv`: ``step_async``/``step_wait``
are its ``send``/``recv`` (so the envs step while SB3 does other work), ``dones`` are ``terminated | truncated``,
each done env's ``infos[i]`` holds its episode's last info with ``terminal_observation`` and
``TimeLimit.truncated``, and ``reset_infos[i]`` the info of the reset that followed (SB3 resets in the step that
ends an episode, Gymnasium's same-step autoreset, which the vector env must use). Actions are SB3's: ``actions[i]``
is env ``i``'s (for a Dict or Tuple space, a list of per-env dicts or tuples, batched here). A multi-agent env's
padding rows (their agent is absent) are done, with their own zero observation as ``terminal_observation``. ``seed``
and ``set_options`` apply to the next ``reset``, as in SB3; ``get_attr``/``set_attr``/``env_method`` reach only the
envs of ``indices`` (negative ones count from the end).
Needs ``pip install "shoal[sb3]"`` (with PyTorch installed first, or pip pulls its CUDA build).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import concatenate, create_empty_array

from shoal.errors import ActionError, ConfigError, MissingDependencyError
from shoal.spaces import FIXED_LEAVES
from shoal.vector.infos import InfoParts, per_env
from shoal.vector.state import AsyncState

try:
    from stable_baselines3.common.vec_env import VecEnv as _SB3VecEnv
except ImportError as exc:  # this module is only imported by those who use it
    raise MissingDependencyError(
        'shoal.sb3 needs Stable-Baselines3: pip install "shoal[sb3]" (install torch first: pip install torch)'
    ) from exc

__all__ = ["DummyVecEnv", "SubprocVecEnv", "VecEnv"]


class VecEnv(_SB3VecEnv):
    """A shoal vector env (``autoreset_mode="same_step"``, every env in each batch) seen as an SB3 ``VecEnv``.

    Args:
        envs: the shoal vector env; closing this closes it.
    """

    def __init__(self, envs: Any) -> None:
        if envs.autoreset_mode is not AutoresetMode.SAME_STEP:
            raise ConfigError(
                "SB3 resets an env in the step that ends its episode: make the shoal vector env with "
                f"autoreset_mode='same_step' (it has {envs.autoreset_mode.value!r})"
            )
        if envs.batch_size != envs.num_envs:
            raise ConfigError("SB3 steps every env each step: make the vector env without batch_size < num_envs")
        if envs.single_action_space is None:
            raise ConfigError(
                "SB3 needs one action space for every env; these Atari games take different numbers of actions: "
                "make the vector env with full_action_space=True"
            )
        self.venv_shoal = envs
        super().__init__(envs.num_envs, envs.single_observation_space, envs.single_action_space)

    # -- stepping --------------------------------------------------------------------------------------------------

    def reset(self) -> Any:
        n = self.num_envs
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        parts: list[tuple[dict, list[int]]] = []  # each set of options, and the envs it is for
        for i, options in enumerate(self._options or [{}] * n):
            same = next((ids for o, ids in parts if o == options), None)
            if same is None:
                parts.append((options, [i]))
            else:
                same.append(i)
        if len(parts) == 1:
            obs, info = self.venv_shoal._reset_parts(seed=seeds, options=dict(parts[0][0]) or None)
            self.reset_infos, _ = self._per_env(info, None)
        else:  # envs with different options: a partial reset of each set (its reset_mask), in turn
            self.reset_infos = [{} for _ in range(n)]
            for options, ids in parts:
                mask = np.zeros(n, np.bool_)
                mask[ids] = True
                obs, info = self.venv_shoal._reset_parts(seed=seeds, options={**options, "reset_mask": mask})
                infos, _ = self._per_env(info, None)
                for i in ids:
                    self.reset_infos[i] = infos[i]
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: Any) -> None:
        space = self.action_space
        if not isinstance(space, FIXED_LEAVES):  # per-env values (actions[i] is env i's) as one batch
            actions = _batched(space, actions, self.num_envs)
        self.venv_shoal.send(actions)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, list[dict]]:
        # the infos as they came, not in Gymnasium's vector form (which this would take apart again)
        obs, reward, terminated, truncated, parts = self.venv_shoal._recv_parts()
        dones = terminated | truncated
        cuts = (truncated & ~terminated).tolist()
        infos, finals = self._per_env(parts, dones)
        # SB3's keys in SB3's order: the env's own, then TimeLimit.truncated, then a done env's terminal_observation
        for i, (last, final) in finals.items():  # the envs reset this step
            self.reset_infos[i] = infos[i]  # what came with the row after the reset: its reset info
            final["TimeLimit.truncated"] = cuts[i]
            # the engine's copy, taken before the reset (SB3's DummyVecEnv deep-copies its infos): wrappers such as
            # VecFrameStack rewrite it in place, and the env may keep and change the object it returned
            final["terminal_observation"] = last
            infos[i] = final
        for info, cut in zip(infos, cuts):  # (a final info has the key already: it stays where it is)
            info["TimeLimit.truncated"] = cut
        done = dones.tolist()
        if len(finals) < done.count(True):  # (a list: on a few envs numpy's reductions cost more than the whole test)
            for i, over in enumerate(done):  # a multi-agent padding row (its agent is absent) ends without a reset
                if over and i not in finals:
                    infos[i]["terminal_observation"] = _row(obs, i)
        return obs, reward.astype(np.float32), dones, infos

    def _per_env(
        self, parts: InfoParts, dones: np.ndarray | None
    ) -> tuple[list[dict[str, Any]], dict[int, tuple[Any, dict[str, Any]]]]:
        """A batch's infos one dict per env, and its final observations and infos by env (:func:`per_env`);
        ``dones`` is None at a reset. (A subclass may check them, or leave some out.)"""
        return per_env(parts, self.num_envs, self.venv_shoal._records)

    def close(self) -> None:
        self.venv_shoal.close()

    # -- the envs --------------------------------------------------------------------------------------------------

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        if attr_name == "render_mode":  # the vector env's (SB3 asks for it while it is being built)
            return [self.venv_shoal.render_mode] * len(self._indices(indices))
        return self.venv_shoal.get_attr_envs(self._indices(indices), attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        ids = self._indices(indices)
        self.venv_shoal.set_attr_envs(ids, attr_name, [value] * len(ids))

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list[Any]:
        return self.venv_shoal.call_envs(self._indices(indices), method_name, *method_args, **method_kwargs)

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        from stable_baselines3.common.env_util import is_wrapped

        from shoal.atari import AtariVectorEnv

        ids = self._indices(indices)
        if isinstance(self.venv_shoal, AtariVectorEnv):  # emulators, not Gymnasium envs: wrapped by nothing
            return [False] * len(ids)
        return [bool(w) for w in self.venv_shoal.call_envs(ids, is_wrapped, wrapper_class)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return list(self.venv_shoal.render())

    def _indices(self, indices: Any) -> list[int]:
        envs = range(self.num_envs)  # negative indices count from the end, as in SB3's envs[i]
        return [envs[i] for i in self._get_indices(indices)]


class DummyVecEnv(VecEnv):
    """SB3's ``DummyVecEnv``: the envs made by ``env_fns``, stepped in this process (shoal's serial backend).

    ``envs`` is the list of envs, as on SB3's.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        from shoal.vector import SyncVectorEnv

        super().__init__(SyncVectorEnv(list(env_fns), autoreset_mode=AutoresetMode.SAME_STEP))

    @property
    def envs(self) -> list[gym.Env]:
        """The envs, in order."""
        return self.venv_shoal.envs


class SubprocVecEnv(VecEnv):
    """SB3's ``SubprocVecEnv``: the envs made by ``env_fns`` in worker processes. Unlike SB3's (a process per env),
    each worker hosts several envs, one worker per core (shoal's multiprocessing backend and its defaults).

    Args:
        env_fns: the env constructors.
        start_method: the ``multiprocessing`` start method (``"fork"``, ``"spawn"``, ``"forkserver"``; None: the
            platform's default).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], start_method: str | None = None) -> None:
        from shoal.make import make

        super().__init__(make(list(env_fns), autoreset_mode="same_step", context=start_method))

    @property
    def waiting(self) -> bool:
        """Whether a step was sent and its results not collected yet (SB3's ``SubprocVecEnv.waiting``)."""
        return self.venv_shoal._state is AsyncState.WAITING_STEP

    @property
    def closed(self) -> bool:
        """Whether the envs are closed (SB3's ``SubprocVecEnv.closed``)."""
        return self.venv_shoal.closed


def _batched(space: spaces.Space, actions: Any, n: int) -> Any:
    """SB3's per-env actions of a space whose batch is not one array (Dict, Tuple, ...) as the vector env's batch."""
    if isinstance(actions, (str, bytes, dict)) or not hasattr(actions, "__len__") or len(actions) != n:
        raise ActionError(
            f"actions: expected one action of {space} per env ({n}; SB3's form: actions[i] is env i's), got "
            f"{type(actions).__name__}{f' of length {len(actions)}' if hasattr(actions, '__len__') else ''}"
        )
    out: Any = create_empty_array(space, n)  # (None for a custom space: its batch is a tuple of the values)
    try:
        return concatenate(space, [actions[i] for i in range(n)], out)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ActionError(f"actions: expected one action of {space} per env, could not batch them ({exc!r})") from exc


def _row(batch: Any, i: int) -> Any:
    """Row ``i`` of a batch of observations (a dict or tuple of arrays, or an array)."""
    if isinstance(batch, dict):
        return {key: _row(value, i) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_row(value, i) for value in batch)
    return batch[i]
