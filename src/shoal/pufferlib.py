"""PufferLib's vector API on shoal's backends: ``shoal.pufferlib.make`` in place of ``pufferlib.vector.make``.

    >>> import pufferlib.emulation, pufferlib.vector, shoal.pufferlib
    >>> creator = lambda buf=None, seed=0: pufferlib.emulation.GymnasiumPufferEnv(gymnasium.make("CartPole-v1"))
    >>> vecenv = shoal.pufferlib.make(creator, backend=pufferlib.vector.Multiprocessing, num_envs=8, num_workers=2)
    >>> obs, infos = vecenv.reset(seed=0)
    >>> vecenv.send(actions)
    >>> obs, rewards, terminals, truncations, teacher_actions, infos, env_ids, masks = vecenv.recv()

The arguments are ``pufferlib.vector.make``'s (``backend`` as PufferLib's class or its name, ``num_workers``,
``batch_size``, ``zero_copy``, ``sync_traj``, ``overwork``, and ``seed``, which PufferLib does not use either),
checked as it checks them, and the outputs are its outputs: flat observation rows (PufferLib's emulation of the env's
spaces), float32 rewards, the infos as a list of the envs' non-empty dicts, ``env_ids``, masks, and the teacher
actions where the installed PufferLib has them. Each env is the one its creator returns, stepped as PufferLib steps
it (an ended episode is reset by the next ``send``, its action unused; the seeds each backend gives the creators and
the resets are PufferLib's), so the same seeds and actions give the same batches. What differs is how they are
stepped: shoal's workers and shared memory, several envs per worker, shoal's default worker count where
``num_workers`` is not given (PufferLib starts one per env).

``batch_size < num_envs``: ``num_envs / batch_size`` blocks of consecutive envs, each its own shoal vector env with
its share of the workers, returned in turn (PufferLib's order with ``sync_traj=True``, its default) while the others
step; with ``sync_traj=False, zero_copy=False``, the first ``batch_size`` envs to finish, whichever they are. (With
``sync_traj=False`` and ``zero_copy=True`` the blocks come in turn too, where PufferLib returns whichever finishes
first: the same batches of each block, in an order PufferLib may also give.)

Every kind of PufferLib env runs on ``Multiprocessing`` and ``Ray``: envs made by
``pufferlib.emulation.GymnasiumPufferEnv``; ``PettingZooPufferEnv`` (its agents as PufferLib's rows: an absent
agent's row zeros, terminal and masked out; the env reset by the ``send`` after all its agents are done); and native
``PufferEnv``s (their rows as their ``step`` wrote them, teacher actions included; they reset their own agents, so
shoal resets them only at ``async_reset``; ``notify()`` reaches each env's own before its next step or reset). An
env whose spaces or agent count differ from env 0's is refused, as PufferLib refuses it. ``backend=Serial`` and
``backend=PufferEnv`` (PufferLib's default: an env that vectorizes itself) return what PufferLib makes: in one
process shoal has nothing faster.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import gymnasium
import numpy as np

from shoal.errors import ActionError, ConfigError, MissingDependencyError
from shoal.vector.cpus import usable_cores
from shoal.vector.infos import InfoParts, by_env, each, owned

try:
    import pufferlib
    import pufferlib.emulation
    import pufferlib.spaces
    import pufferlib.vector
except ImportError as exc:  # this module is only imported by those who use it
    raise MissingDependencyError(
        "shoal.pufferlib runs PufferLib's envs and needs PufferLib: pip install pufferlib (pufferlib-core pins a "
        "torch: pip install --no-deps pufferlib-core after installing torch)"
    ) from exc

__all__ = ["APIUsageError", "PufferVecEnv", "make"]


class APIUsageError(ConfigError, pufferlib.APIUsageError):
    """A bad argument or a call out of order: PufferLib's ``APIUsageError`` (so ``except`` clauses written for it
    hold) and shoal's :class:`~shoal.errors.ConfigError`."""


_KEYWORDS = ("num_workers", "batch_size", "zero_copy", "sync_traj", "overwork", "backend")
_BACKENDS = {"Multiprocessing": "multiprocessing", "Ray": "ray"}
_RESET, _SEND, _RECV = "reset", "send", "recv"


def make(
    env_creator_or_creators: Callable[..., Any] | Sequence[Callable[..., Any]],
    env_args: Any = None,
    env_kwargs: Any = None,
    backend: Any = pufferlib.PufferEnv,
    num_envs: int = 1,
    seed: int | None = 0,
    **kwargs: Any,
) -> Any:
    """``pufferlib.vector.make`` on shoal: the same arguments, checks and outputs (see the module's docstring)."""
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
    if name in ("PufferEnv", "Serial"):  # an env that vectorizes itself, or every env in this process, one after
        # another: PufferLib's own (shoal's serial backend, with this module's conversions, ran at 0.80x of it on
        # CartPole x 8)
        return pufferlib.vector.make(env_creator_or_creators, env_args, env_kwargs, getattr(pufferlib.vector, name),
                                     num_envs, seed, **kwargs)
    if name not in _BACKENDS:
        raise APIUsageError(f"Invalid backend: {backend!r} (PufferLib's Serial, Multiprocessing, Ray or PufferEnv)")
    if not _is_count(num_envs):
        raise APIUsageError(f"num_envs must be a positive integer, got {num_envs!r}")
    for key in kwargs:
        if key not in _KEYWORDS:
            raise APIUsageError(f"Invalid argument: {key} (pufferlib.vector.make takes {', '.join(_KEYWORDS)})")
    num_envs = int(num_envs)
    creators, args, kw = _creators(env_creator_or_creators, env_args, env_kwargs, num_envs)
    num_workers = num_envs if kwargs.get("num_workers") == "auto" else kwargs.get("num_workers")
    batch_size = kwargs.get("batch_size")
    if batch_size == "auto":
        batch_size = 1 if num_envs == 1 else num_envs // 2
    batch_size = num_envs if batch_size is None else batch_size
    workers = num_envs if num_workers is None else num_workers  # PufferLib's default: a worker per env
    if not _is_count(workers) or workers > num_envs or num_envs % workers:
        raise APIUsageError(f"num_envs must be divisible by num_workers ({num_envs} envs, num_workers={workers!r})")
    per_worker = num_envs // workers
    if not _is_count(batch_size) or batch_size > num_envs or batch_size % per_worker or num_envs % batch_size:
        raise APIUsageError(  # (PufferLib requires the last with zero_copy; its other paths would drop envs)
            f"batch_size must divide num_envs ({num_envs}) and be divisible by num_envs / num_workers "
            f"({per_worker}), got {batch_size!r}"
        )
    driver_env = creators[0](*args[0], **kw[0])
    try:
        host = _host_of(driver_env, "env_creators[0]")
    except APIUsageError:
        getattr(driver_env, "close", lambda: None)()
        raise
    like = _signature(driver_env)
    fns = [functools.partial(host, creators[i], args[i], kw[i], _made_seed(name, i, per_worker), i, like)
           for i in range(num_envs)]
    first_ready = batch_size < num_envs and not kwargs.get("sync_traj", True) and not kwargs.get("zero_copy", True)
    return PufferVecEnv(fns, _BACKENDS[name], driver_env, host, batch_size, per_worker, num_workers, first_ready)


def _is_count(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and bool(value >= 1)


def _creators(creators: Any, args: Any, kwargs: Any, n: int) -> tuple[list, list, list]:
    """One creator, argument list and keyword dict per env, checked as ``pufferlib.vector.make`` checks them."""
    args = [] if args is None else args
    kwargs = {} if kwargs is None else kwargs
    if isinstance(creators, (list, tuple)):
        creators, args, kwargs = list(creators), list(args), list(kwargs)
    else:
        creators, args, kwargs = [creators] * n, [args] * n, [kwargs] * n
    for what, values in (("env_creators", creators), ("env_args", args), ("env_kwargs", kwargs)):
        if len(values) != n:
            raise APIUsageError(f"{what} must be a list of length num_envs ({n}), got {len(values)}")
    for i in range(n):
        if not callable(creators[i]):
            raise APIUsageError(f"env_creators must be a list of callables (env_creators[{i}]: {creators[i]!r:.60})")
        if not isinstance(args[i], (list, tuple)):
            raise APIUsageError(f"env_args must be a list of lists or tuples (env_args[{i}]: {args[i]!r:.60})")
        if not isinstance(kwargs[i], dict):
            raise APIUsageError(f"env_kwargs must be a list of dictionaries (env_kwargs[{i}]: {kwargs[i]!r:.60})")
    return creators, args, kwargs


def _host_of(env: Any, what: str) -> type[_Hosted]:
    """How shoal hosts what a creator made (:class:`_Emulated`, :class:`_Agents` or :class:`_Native`); anything but
    a PufferLib env is refused, saying how to wrap it."""
    emulation = pufferlib.emulation
    if isinstance(env, emulation.PettingZooPufferEnv):
        return _Agents
    if isinstance(env, emulation.GymnasiumPufferEnv):
        return _Emulated
    if isinstance(env, pufferlib.PufferEnv):
        return _Native
    raise APIUsageError(
        f"{what} made {type(env).__name__}, not a PufferLib env: wrap it as PufferLib requires "
        f"(pufferlib.emulation.GymnasiumPufferEnv(env=...) or (env_creator=...), or PettingZooPufferEnv)"
    )


def _made_seed(backend: str, i: int, per_worker: int) -> int:
    """The ``seed`` PufferLib's backend passes to env ``i``'s creator: each worker's (or Ray actor's) Serial makes
    its ``j``-th env with its own seed + ``j``, that seed being ``w * per_worker`` on Multiprocessing (worker ``w``)
    and 0 on Ray. (``make``'s own ``seed`` does not reach them: PufferLib does not pass it on.)"""
    return i % per_worker if backend == "Ray" else i


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


def _buffers() -> frozenset[str]:
    """The buffers the installed PufferLib gives an env: pufferlib-core 3.0.x's include teacher actions, which its
    ``recv`` returns; PufferLib 3.0.0's do not, and its ``recv`` returns seven values."""
    probe = SimpleNamespace(single_observation_space=gymnasium.spaces.Box(0, 1, (1,)),
                            single_action_space=gymnasium.spaces.Discrete(2), num_agents=1)
    known = set(vars(probe))
    getattr(pufferlib, "set_buffers", lambda env: None)(probe)
    return frozenset(vars(probe)) - known


_BUFFERS = _buffers()


_SIGNATURE = ("single_observation_space", "single_action_space", "num_agents")


def _signature(env: Any) -> tuple:
    """What every env of a vector env must share with env 0 (:data:`_SIGNATURE`)."""
    return tuple(getattr(env, name) for name in _SIGNATURE)


class _Hosted(gymnasium.Env):
    """A PufferLib env (``self.puffer``, made by its creator as PufferLib's backends make it, with its own buffers)
    as the Gymnasium env shoal's engine steps: what the three kinds share. ``made`` names the kind it hosts."""

    made = ""

    def __init__(self, creator: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], seed: int | None,
                 index: int, like: tuple) -> None:
        self.puffer = puffer = creator(*args, buf=None, seed=seed, **kwargs)
        what = f"env_creators[{index}]"
        try:
            if _host_of(puffer, what) is not type(self):
                raise APIUsageError(f"{what} made a {type(puffer).__name__} where env 0 is a {self.made}")
            for name, mine, env0s in zip(_SIGNATURE, _signature(puffer), like):
                if mine != env0s:  # (PufferLib's backends check the spaces too)
                    raise APIUsageError(f"{what} made an env whose {name} is {mine}, where env 0's is {env0s}")
        except APIUsageError:
            getattr(puffer, "close", lambda: None)()
            raise
        self.metadata = getattr(puffer, "metadata", self.metadata)
        self._bind(puffer)

    def _bind(self, puffer: Any) -> None:
        """Take the spaces and buffers this kind steps from ``puffer``."""
        raise NotImplementedError

    @property
    def render_mode(self) -> Any:  # type: ignore[override]
        # (an emulated env's property raises where its env has none)
        return getattr(getattr(self.puffer, "env", self.puffer), "render_mode", None)

    def render(self) -> Any:
        return self.puffer.render()

    def notify(self) -> None:
        self.puffer.notify()

    def close(self) -> None:
        self.puffer.close()


class _Emulated(_Hosted):
    """One env made by a PufferLib creator, as the single-agent Gymnasium env shoal's engine steps: its observation
    row, and its action handed over as PufferLib's row of one (int32 for discrete spaces, as its buffers hold).

    Where the creator's env is a plain ``GymnasiumPufferEnv`` that emulates neither space, steps after the first
    (which checks the action, as PufferLib's does) call its Gymnasium env directly and do what its ``step`` does
    around it (the action row read as its ``step`` reads it, the observation cast into its row, the reward summed
    into a float, the flags into bools): the same values, without a second wrapper's cost (~2.4 us a step)."""

    made = "GymnasiumPufferEnv"

    def _bind(self, puffer: Any) -> None:
        self.observation_space = puffer.single_observation_space
        self.action_space = puffer.single_action_space
        self._action = np.zeros_like(puffer.actions)
        self._plain = type(puffer) is pufferlib.emulation.GymnasiumPufferEnv and not (
            puffer.is_obs_emulated or puffer.is_atn_emulated)
        self._direct = False  # (from the second step on, where plain)
        self._discrete = isinstance(self.action_space, gymnasium.spaces.Discrete)
        self._obs_dtype = puffer.observations.dtype

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        obs, info = self.puffer.reset(seed=seed)
        return obs[0], info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        if not self._direct:
            self._action[0] = action
            obs, reward, terminated, truncated, info = self.puffer.step(self._action)
            self._direct = self._plain
            return obs[0], reward, terminated, truncated, info
        if self._discrete:  # (its step reads the int32 row's one value)
            obs, reward, terminated, truncated, info = self.puffer.env.step(np.int32(action))
        else:
            self._action[0] = action
            obs, reward, terminated, truncated, info = self.puffer.env.step(self._action.ravel())
        if type(obs) is not np.ndarray or obs.dtype != self._obs_dtype:  # cast as its row would cast it
            row = self.puffer.observations
            row[:] = obs
            obs = row[0]
        if type(reward) is not float:
            reward = np.asarray(reward)
            reward = float(reward.sum()) if reward.shape else float(reward)
        if type(terminated) is not bool:
            terminated = np.asarray(terminated)
            terminated = bool(terminated.any()) if terminated.shape else bool(terminated)
        if type(truncated) is not bool:
            truncated = np.asarray(truncated)
            truncated = bool(truncated.any()) if truncated.shape else bool(truncated)
        return obs, reward, terminated, truncated, info


class _Agents(_Hosted):
    """One ``PettingZooPufferEnv`` (``k`` agents) as a single Gymnasium env shoal's engine steps: its observation is
    the env's PufferLib rows (observations, rewards, terminals, truncations, masks of its ``k`` agents, as its step
    wrote them: an absent agent's row zeros, terminal, masked out), its action the ``k`` agents' actions, and it
    ends when PufferLib's ``done`` says so (every agent gone, or all done), so the next step resets it, as
    PufferLib's ``send`` does. Its reward is 0: the rows carry the agents'."""

    made = "PettingZooPufferEnv"
    rows: tuple[str, ...] = ("observations", "rewards", "terminals", "truncations", "masks")

    def _bind(self, puffer: Any) -> None:
        transport = getattr(puffer, "single_transport_action_space", puffer.single_action_space)
        self.observation_space = _rows_space(puffer, self.rows)
        self.action_space = pufferlib.spaces.joint_space(transport, puffer.num_agents)
        self._action = puffer.actions  # (where PufferLib's backends write them too)
        self._rows = {key: getattr(puffer, key) for key in self.rows}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        _, info = self.puffer.reset(seed=seed)
        return self._rows, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self._action[:] = action
        _, _, _, _, info = self.puffer.step(self._action)
        return self._rows, 0.0, self.puffer.done, False, info


class _Native(_Agents):
    """One native ``PufferEnv`` (``k`` agents, stepped together; it resets its agents' episodes itself, so its
    episode never ends here and shoal never resets it but at ``async_reset``) as a single Gymnasium env: its
    observation its PufferLib rows as its ``step`` wrote them into its own buffers (teacher actions too, where the
    installed PufferLib has them), its action the ``k`` actions (in its action buffer, as PufferLib's Multiprocessing
    hands them to a worker's envs), and its info the list of dicts it returned, under :data:`_LOGS`."""

    made = "native PufferEnv"
    rows = _Agents.rows + (("teacher_actions",) if "teacher_actions" in _BUFFERS else ())

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        _, infos = self.puffer.reset(seed=seed)
        return self._rows, _logged(infos)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self._action[:] = action
        _, _, _, _, infos = self.puffer.step(self._action)
        return self._rows, 0.0, False, False, _logged(infos)


def _logged(infos: Any) -> dict[str, Any]:
    """A native env's infos as the info of its host: a list of dicts (one dict, as PufferLib's backends take it,
    is a list of one) under :data:`_LOGS`; nothing where it returned none."""
    if not infos:
        return {}
    return {_LOGS: infos if isinstance(infos, list) else [infos]}


_LOGS = "pufferlib infos"
"""The info key under which a native env's list of info dicts travels (its ``reset`` and ``step`` return lists)."""


def _rows_space(puffer: Any, rows: Sequence[str]) -> gymnasium.spaces.Dict:
    """The space of one multi-agent env's PufferLib rows (:class:`_Agents`): those of ``rows`` its buffers hold."""
    k = puffer.num_agents
    flag = gymnasium.spaces.Box(0, 1, (k,), np.bool_)  # type: ignore[arg-type]
    spaces = {
        "observations": pufferlib.spaces.joint_space(puffer.single_observation_space, k),
        "rewards": gymnasium.spaces.Box(-np.inf, np.inf, (k,), np.float32),
        "terminals": flag, "truncations": flag, "masks": flag,
    }
    if "teacher_actions" in rows:  # (as its action buffer: int32 for discrete spaces)
        spaces["teacher_actions"] = _any_value(puffer.teacher_actions)
    return gymnasium.spaces.Dict({key: spaces[key] for key in rows})


def _any_value(array: np.ndarray) -> gymnasium.spaces.Box:
    """A Box that holds any array of ``array``'s shape and dtype."""
    dtype = array.dtype
    limits = np.finfo(dtype) if np.issubdtype(dtype, np.floating) else np.iinfo(dtype)
    return gymnasium.spaces.Box(limits.min, limits.max, array.shape, dtype)  # type: ignore[arg-type]


def _logs(parts: InfoParts) -> list[dict[str, Any]]:
    """A batch's infos from native envs: the dicts each returned, one env after another (:class:`_Native`)."""
    return [owned(log) for _, info in each(parts.entries) for log in info.get(_LOGS, ())]  # type: ignore[misc]


class PufferVecEnv:
    """What :func:`make` returns: PufferLib's vector env (``reset``, ``step``, ``async_reset``, ``send``, ``recv``,
    ``close`` and its attributes) over one shoal vector env per block of ``batch_size`` envs, taken in turn, or one
    shoal vector env returning the first ``batch_size`` envs to finish (``first_ready``)."""

    def __init__(self, fns: Sequence[Callable[[], Any]], backend: str, driver_env: Any, host: type[_Hosted],
                 batch_size: int, per_worker: int, num_workers: int | None, first_ready: bool) -> None:
        from shoal.make import make as shoal_make

        n, k = len(fns), driver_env.num_agents
        self.driver_env = driver_env
        self.emulated = driver_env.emulated
        self.num_agents = n * k
        self.agents_per_batch = batch_size * k
        self.envs_per_worker = per_worker
        self._rows = host.rows if issubclass(host, _Agents) else ()  # an env's rows, where it has several
        self._agents = k if self._rows else 0
        self._native = host is _Native
        self.backend = backend
        self.single_observation_space = driver_env.single_observation_space
        self.single_action_space = driver_env.single_action_space
        self.transport_single_action_space = transport = getattr(
            driver_env, "single_transport_action_space", self.single_action_space)
        self.action_space = pufferlib.spaces.joint_space(transport, batch_size * k)
        self.observation_space = pufferlib.spaces.joint_space(self.single_observation_space, batch_size * k)
        self.agent_ids = np.arange(n * k)
        self._batch = batch_size
        self._action_shape = (batch_size, *((k, *transport.shape) if self._agents else transport.shape))
        self._action_size = int(np.prod(self._action_shape))
        self.initialized = False
        self._flag = _RESET
        self._masks = np.ones(batch_size * k, np.bool_)
        self._teacher: np.ndarray | None = None
        if "teacher_actions" in _BUFFERS:  # zeros, as PufferLib's are unless a native env writes them
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
        self._flag = _RECV

    def send(self, actions: Any) -> None:
        if self._flag != _SEND:
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
        self._flag = _RECV

    def recv(self) -> tuple:
        """The next batch: ``(obs, rewards, terminals, truncations[, teacher_actions], infos, env_ids, masks)``."""
        if self._flag != _RECV:
            raise APIUsageError("Call reset before stepping")
        b, n = self._turn, self._batch
        envs = self._envs[b]
        try:
            if self._in_flight[b] == "reset":  # a reset's batch: every env's info, empty ones too
                obs, parts = envs._reset_wait_parts()
                rewards = np.zeros(n, np.float32)
                terminals, truncations = np.zeros(n, np.bool_), np.zeros(n, np.bool_)
                infos = _logs(parts) if self._native else by_env(parts, n)[0]  # (next-step: no Finals)
            else:  # a step's: the infos that hold something
                obs, rewards, terminals, truncations, parts = envs._recv_parts()
                rewards = rewards.astype(np.float32)
                if self._native:
                    infos = _logs(parts)
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
            env_ids = self.agent_ids[b * rows:(b + 1) * rows]
        else:  # the first envs to finish: their rows
            env_ids = (parts.ids[:, None] * k + np.arange(k)).ravel() if k else parts.ids.copy()
        if k:  # each env's agents' rows, as its PufferLib env wrote them
            leaves = {key: obs[key].reshape(rows, *obs[key].shape[2:]) for key in self._rows}
            obs, rewards, terminals, truncations, masks = (leaves[key] for key in _Agents.rows)
            teacher = leaves.get("teacher_actions", teacher)  # (a native env's)
        self._flag = _SEND
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
