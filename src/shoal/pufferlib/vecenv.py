"""``PufferVecEnv``: PufferLib's vector env (its calls, their order, its outputs) over shoal vector envs."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import gymnasium
import numpy as np

from shoal.errors import ActionError
from shoal.pufferlib.errors import APIUsageError, pufferlib
from shoal.pufferlib.hosting import BUFFERS, Agents, Hosted, Native, logs
from shoal.vector.cpus import usable_cores
from shoal.vector.infos import by_env, each, owned

_RESET, _SEND, _RECV = pufferlib.vector.RESET, pufferlib.vector.SEND, pufferlib.vector.RECV  # ``flag``'s values


def _reset_seeds(backend: str, seed: int | None, n: int, per_worker: int) -> list[int | None] | None:
    """The seed PufferLib's backend gives each env's ``reset`` for ``async_reset(seed)``: on Multiprocessing
    ``seed + w + j`` for the ``j``-th env of worker ``w`` (so seeds repeat across workers), on Ray ``seed + j``."""
    if seed is None:
        return None
    if backend == "multiprocessing":
        return [seed + i // per_worker + i % per_worker for i in range(n)]
    return [seed + i % per_worker for i in range(n)]


_DEFAULT_RESET_SEED = {"multiprocessing": 0, "ray": 42}
"""Each PufferLib backend's ``async_reset`` default (its ``reset`` passes 42)."""
_BACKEND_DEFAULT: Any = object()  # async_reset() without a seed


class PufferVecEnv:
    """What :func:`make` returns: PufferLib's vector env (``reset``, ``step``, ``async_reset``, ``send``, ``recv``,
    ``close`` and its attributes) over one shoal vector env per block of ``batch_size`` envs, taken in turn, or one
    shoal vector env returning the first ``batch_size`` envs to finish (``first_ready``).

    The attributes are those of PufferLib's class for the backend, with its values (its workers' layout in
    ``agent_ids``, ``workers_per_batch`` and ``atn_batch_shape``: ``envs_per_worker`` envs each), but for
    ``num_workers``, the processes shoal started. PufferLib's shared arrays, pipes, processes and Ray actors
    (``buf``, ``actions``, ``shm``, ``processes``, ``send_pipes``, ``envs``, ...) have no counterpart."""

    def __init__(self, fns: Sequence[Callable[[], Any]], backend: str, driver_env: Any, host: type[Hosted],
                 batch_size: int, per_worker: int, num_workers: int | None, first_ready: bool,
                 zero_copy: bool = True, sync_traj: bool = True) -> None:
        from shoal.make import make as shoal_make

        n, k = len(fns), driver_env.num_agents
        self.driver_env = driver_env
        self.emulated = driver_env.emulated
        self.num_agents = n * k
        self.agents_per_batch = batch_size * k
        self.envs_per_worker = per_worker
        self.workers_per_batch = batch_size // per_worker
        if backend == "multiprocessing":
            self.num_environments = n
            self.zero_copy, self.sync_traj = zero_copy, sync_traj
        else:
            self.env_pool = batch_size != n
        self._rows = host.rows if issubclass(host, Agents) else ()  # an env's rows, where it has several
        self._agents = k if self._rows else 0
        self._native = host is Native
        self.backend = backend
        self.single_observation_space = driver_env.single_observation_space
        self.single_action_space = driver_env.single_action_space
        self.transport_single_action_space = transport = getattr(
            driver_env, "single_transport_action_space", self.single_action_space)
        self.action_space = pufferlib.spaces.joint_space(transport, batch_size * k)
        self.observation_space = pufferlib.spaces.joint_space(self.single_observation_space, batch_size * k)
        self.obs_batch_shape = (batch_size * k, *self.single_observation_space.shape)
        self.atn_shape = tuple(self.single_action_space.shape)
        self.atn_batch_shape = (self.workers_per_batch, per_worker * k, *self.atn_shape)
        self.agent_ids = np.arange(n * k).reshape(n // per_worker, per_worker * k)  # a row per PufferLib worker
        self._batch = batch_size
        self._action_shape = (batch_size, *((k, *transport.shape) if self._agents else transport.shape))
        self._action_size = int(np.prod(self._action_shape))
        self.initialized = False
        self.flag = _RESET
        self._masks = np.ones(batch_size * k, np.bool_)
        self._teacher: np.ndarray | None = None
        if "teacher_actions" in BUFFERS:  # zeros, as PufferLib's are unless a native env writes them
            box = isinstance(self.single_action_space, gymnasium.spaces.Box)
            self._teacher = np.zeros(self.action_space.shape, self.single_action_space.dtype if box else np.int32)
        blocks = 1 if first_ready else n // batch_size
        options: dict[str, Any] = dict(backend=backend, autoreset_mode="next_step", copy=False)
        if num_workers is not None:
            options["num_workers"] = num_workers // blocks  # PufferLib's workers of a batch
        elif blocks > 1:  # the cores, shared by the blocks
            options["num_workers"] = max(1, usable_cores() // blocks)
        if first_ready:
            options["batch_size"] = batch_size
        elif blocks > 1 and backend == "multiprocessing":
            options["inline"] = False  # each block steps in its workers while the caller handles another
        size = n // blocks
        self._envs: list[Any] = []
        try:
            for b in range(blocks):
                self._envs.append(shoal_make(fns[b * size:(b + 1) * size], **options))
        except BaseException:
            self.close()
            raise
        self._in_flight: list[str | None] = [None] * blocks  # each block's reset or step, sent and not yet received
        self._notify = [False] * blocks  # each block's notify(), not yet delivered
        self._turn = 0

    @property
    def num_envs(self) -> int:
        """PufferLib's meaning: the rows of a batch."""
        return self.agents_per_batch

    @property
    def num_workers(self) -> int:
        return sum(getattr(envs, "num_workers", 1) for envs in self._envs)

    def reset(self, seed: int | None = 42) -> tuple[Any, list[dict[str, Any]]]:
        self.async_reset(seed)
        obs, *_, infos, _, _ = self.recv()
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        self.send(actions)
        obs, rewards, terminals, truncations, *_, infos, _, _ = self.recv()
        return obs, rewards, terminals, truncations, infos

    def async_reset(self, seed: Any = _BACKEND_DEFAULT) -> None:
        """Reset every env, with PufferLib's seeds for this backend (and its default seed when none is given); a
        step or reset still in flight is collected and dropped first."""
        if seed is _BACKEND_DEFAULT:
            seed = _DEFAULT_RESET_SEED[self.backend]
        for b, envs in enumerate(self._envs):
            if self._in_flight[b] == "step":
                envs.recv()
            elif self._in_flight[b] == "reset":
                envs.reset_wait()
            self._deliver_notify(b)
        size = self._envs[0].num_envs
        seeds = _reset_seeds(self.backend, seed, size * len(self._envs), self.envs_per_worker)
        for b, envs in enumerate(self._envs):
            envs.reset_async(seed=None if seeds is None else seeds[b * size:(b + 1) * size])
            self._in_flight[b] = "reset"
        self._turn = 0
        self.flag = _RECV

    def send(self, actions: Any) -> None:
        if self.flag != _SEND:
            raise APIUsageError("Call (async) reset + recv before sending")
        actions = np.asarray(actions)
        if not self.initialized:
            self.initialized = True
            if not self.action_space.contains(actions):
                raise APIUsageError(
                    f"Actions do not match action space: expected {self.action_space}, got an array of shape "
                    f"{actions.shape} and dtype {actions.dtype}"
                )
        b = self._turn
        shape = self._action_shape
        if actions.size != self._action_size:
            raise ActionError(
                f"actions: expected one action per row of the batch ({self.agents_per_batch} of "
                f"{self.single_action_space}: {self.action_space.shape} in all), got an array of shape {actions.shape}"
            )
        self._deliver_notify(b)
        self._envs[b].send(actions.reshape(shape))
        self._in_flight[b] = "step"
        self._turn = (b + 1) % len(self._envs)
        self.flag = _RECV

    def recv(self) -> tuple:
        """The next batch: ``(obs, rewards, terminals, truncations[, teacher_actions], infos, env_ids, masks)``."""
        if self.flag != _RECV:
            raise APIUsageError("Call reset before stepping")
        b, n = self._turn, self._batch
        envs = self._envs[b]
        try:
            if self._in_flight[b] == "reset":  # a reset's batch: every env's info, empty ones too
                obs, parts = envs._reset_wait_parts()
                rewards = np.zeros(n, np.float32)
                terminals, truncations = np.zeros(n, np.bool_), np.zeros(n, np.bool_)
                infos = logs(parts) if self._native else by_env(parts, n)[0]  # (next-step: no Finals)
            else:  # a step's: the infos that hold something
                obs, rewards, terminals, truncations, parts = envs._recv_parts()
                rewards = rewards.astype(np.float32)
                if self._native:
                    infos = logs(parts)
                else:
                    infos = [owned(info) for _, info in each(parts.entries) if info]  # type: ignore[misc]
        except KeyboardInterrupt:  # the wait stays pending: recv() again, or async_reset() collects it
            raise
        except BaseException:  # an env's error ends the step (async_reset() starts anew)
            self._in_flight[b] = None
            raise
        self._in_flight[b] = None
        rows, k, masks, teacher = self.agents_per_batch, self._agents, self._masks, self._teacher
        if parts.ids is None:  # block b
            env_ids = self.agent_ids.reshape(-1)[b * rows:(b + 1) * rows]  # (as PufferLib, from agent_ids)
        else:  # the first envs to finish: their rows
            env_ids = (parts.ids[:, None] * k + np.arange(k)).ravel() if k else parts.ids.copy()
        if k:  # each env's agents' rows, as its PufferLib env wrote them
            leaves = {key: obs[key].reshape(rows, *obs[key].shape[2:]) for key in self._rows}
            obs, rewards, terminals, truncations, masks = (leaves[key] for key in Agents.rows)
            teacher = leaves.get("teacher_actions", teacher)  # (a native env's)
        self.flag = _SEND
        head = (obs, rewards, terminals, truncations) + (() if teacher is None else (teacher,))
        return head + (infos, env_ids, masks)

    def notify(self) -> None:
        """PufferLib's: every env's own ``notify()`` (a native env's hook), called in its worker before its next
        step or reset (by the ``send`` of its block, or ``async_reset``)."""
        self._notify = [True] * len(self._envs)

    def _deliver_notify(self, b: int) -> None:
        if self._notify[b]:
            self._notify[b] = False
            self._envs[b].call("notify")

    def close(self) -> None:
        for envs in self._envs:
            envs.close()
        self.driver_env.close()

    def __repr__(self) -> str:
        return (f"shoal.pufferlib.PufferVecEnv({self.backend}, {self.num_agents} envs, batch {self.agents_per_batch}, "
                f"{len(self._envs)} shoal vector env(s))")
