"""``shoal.make``: a vector env of any Gymnasium env, on any backend."""

from __future__ import annotations

import copy
import functools
from typing import Any, Callable, Sequence

import gymnasium
from gymnasium import Env, Space
from gymnasium.envs.registration import EnvSpec, find_highest_version, get_env_id, parse_env_id
from gymnasium.vector import AutoresetMode, VectorEnv as GymVectorEnv
from gymnasium.vector.utils import batch_differing_spaces

from shoal.batch import BatchEngineFactory, BatchEnv, batch_class_of, check_spaces
from shoal.errors import ConfigError
from shoal.multiagent.engine import is_pettingzoo
from shoal.vector.base import Backend, VectorEnv
from shoal.vector.checks import check_positive_int, parse_autoreset_mode
from shoal.vector.gym_engine import GymEngineFactory, refuse_foreign
from shoal.vector.hosted import HostedEngineFactory, check_hostable
from shoal.vector.load import env_share_cost, native_share_cost

EnvLike = str | EnvSpec | Callable[[], Env] | Sequence[Callable[[], Env]]


def env_fns_of(env: EnvLike, num_envs: int | None, env_kwargs: dict[str, Any]) -> list[Callable[[], Env]]:
    """One env constructor per env, from a Gymnasium id or ``EnvSpec``, one callable, or a list of callables."""
    if num_envs is not None:
        num_envs = check_positive_int("num_envs", num_envs)
    if isinstance(env, (str, EnvSpec)):  # (gymnasium.make takes either)
        name = env if isinstance(env, str) else env.id
        if num_envs is None:
            raise ConfigError(f"num_envs is required with a Gymnasium id ({name!r})")
        if "vectorization_mode" in env_kwargs or "vector_kwargs" in env_kwargs:
            raise ConfigError(
                f"vectorization_mode and vector_kwargs are gymnasium.make_vec's; shoal.make vectorizes {name!r} "
                f"itself. To host the env's own vector env instead, pass a callable that makes one: shoal.make("
                f"functools.partial(gymnasium.make_vec, {name!r}, M, vectorization_mode='vector_entry_point'), N) "
                f"makes N of M sub-envs each"
            )
        made = registering(env) if isinstance(env, str) else env
        return [functools.partial(gymnasium.make, made, **env_kwargs)] * num_envs
    if env_kwargs:
        raise ConfigError(f"keyword arguments {sorted(env_kwargs)} are for gymnasium.make; pass a Gymnasium id")
    if callable(env):
        if num_envs is None:
            raise ConfigError("num_envs is required with a single env constructor")
        return [env] * num_envs
    if isinstance(env, (list, tuple)) and env and all(callable(fn) for fn in env):
        if num_envs is not None and num_envs != len(env):
            raise ConfigError(f"num_envs={num_envs} but {len(env)} env constructors were given")
        return list(env)
    if hasattr(env, "step") or hasattr(env, "possible_agents"):  # an env instance: a PettingZoo or old gym one says so
        refuse_foreign(env, "as `env`")
    if isinstance(env, Env):
        raise ConfigError(
            f"env is a {type(env).__name__} instance; shoal makes one env per index, so pass a callable that makes "
            f"it (e.g. functools.partial of its class, or a lambda) or a Gymnasium id"
        )
    got = type(env).__name__
    if isinstance(env, (list, tuple)):
        at = next((i for i, fn in enumerate(env) if not callable(fn)), None)
        got = f"an empty {got}" if at is None else f"a {got} whose item {at} is {type(env[at]).__name__}, not callable"
    raise ConfigError(
        f"env must be a Gymnasium id, a callable returning a gymnasium.Env, or a non-empty list of such callables; "
        f"got {got}"
    )


class Wrapped:
    """An env constructor whose env gets ``wrappers`` applied in order (``shoal.make(..., wrappers=...)``, as
    ``gymnasium.make_vec``'s): pickles wherever its parts do, so that each worker wraps the envs it makes."""

    def __init__(self, make: Callable[[], Any], wrappers: tuple[Callable[[Any], Any], ...]) -> None:
        self.make, self.wrappers = make, wrappers

    def __call__(self) -> Any:
        env = self.make()
        for wrapper in self.wrappers:
            env = wrapper(env)
        return env


def wrapped(env_fns: list[Callable[[], Env]], wrappers: Any) -> list[Callable[[], Env]]:
    """``env_fns`` with ``wrappers`` (None, or a sequence of callables ``wrapper(env) -> env``) applied to each env."""
    if wrappers is None:
        return env_fns
    if isinstance(wrappers, (str, bytes)) or not isinstance(wrappers, Sequence) or callable(wrappers):
        raise ConfigError(
            f"wrappers must be a sequence of callables wrapper(env) -> env (a list of wrapper classes, say), got "
            f"{type(wrappers).__name__}: pass a list, wrappers=[...]"
        )
    refused = [w for w in wrappers if not callable(w)]
    if refused:
        raise ConfigError(f"wrappers must be callables wrapper(env) -> env; {refused[0]!r} is not callable")
    if not wrappers:
        return env_fns
    return [Wrapped(fn, tuple(wrappers)) for fn in env_fns]


_NAMESPACE_MODULES = {"ALE": "ale_py"}
"""Namespaces of Gymnasium ids whose envs a module registers when imported (Gymnasium 1 no longer imports it), for
packages shoal depends on."""


def registering(env_id: str) -> str:
    """``env_id`` in Gymnasium's ``"module:id"`` form where its namespace's module registers it (``"ALE/Pong-v5"``
    -> ``"ale_py:ALE/Pong-v5"``), so that ``gymnasium.make`` imports that module first in whichever process makes the
    env (a spawned worker too), as ``gym.make("ALE/Pong-v5")`` once did by itself; any other id as it is."""
    module = _NAMESPACE_MODULES.get(env_id.split("/", 1)[0]) if "/" in env_id and ":" not in env_id else None
    return f"{module}:{env_id}" if module else env_id


def make(
    env: EnvLike,
    num_envs: int | None = None,
    *,
    backend: Backend = "multiprocessing",
    num_workers: int | None = None,
    batch_size: int | None = None,
    autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
    seed: int | None = None,
    copy: bool = True,
    flatten: bool = False,
    context: str | None = None,
    daemon: bool = True,
    inline: bool | None = None,
    observation_mode: str | tuple[Space, Space] = "same",
    address: str | None = None,
    wrappers: Sequence[Callable[[Any], Any]] | None = None,
    **env_kwargs: Any,
) -> VectorEnv:
    """A vector env of ``num_envs`` copies of ``env`` (or of each callable in a list).

    Args:
        env: a Gymnasium id or ``EnvSpec`` (``**env_kwargs`` go to ``gymnasium.make``), a callable returning an
            env, or a list of callables (``num_envs`` is then their count).
        num_envs: how many envs.
        backend: ``"serial"`` (in this process), ``"multiprocessing"`` (worker processes, shared memory) or
            ``"ray"`` (a Ray actor per node, each running its node's workers; one machine or a cluster;
            ``pip install "shoal[ray]"``).
        num_workers: how many workers step envs in parallel (processes); default: one per core (Ray: one per CPU
            of the cluster, shared among its nodes). Envs are split evenly into consecutive shares, several envs
            per worker.
        batch_size: with ``batch_size < num_envs``, ``recv()`` returns the first ``batch_size`` envs to finish
            (``info["env_id"]`` names them) and ``send()`` takes their actions in that order; ``num_envs`` must then
            be divisible by ``num_workers``. Each worker's share is cut into groups that divide the batch (at
            least two per worker), and a worker steps its next group while you handle the one it returned.
        autoreset_mode: ``"next_step"``, ``"same_step"`` or ``"disabled"``, with Gymnasium's semantics.
        seed: seed of the first ``reset()`` when it is called without one.
        copy: return copies of the observations (else views into shared memory, valid until the next step).
        flatten: return observations as one flat ``(batch, D)`` array; :meth:`VectorEnv.unflatten` restores them.
        context: multiprocessing start method: ``"fork"``, ``"spawn"``, ``"forkserver"`` or the platform default.
        daemon: start workers as daemon processes.
        inline: the calling process steps one group itself (default: on in synchronous multiprocessing).
        observation_mode: ``"same"``, ``"different"`` (spaces that differ only in bounds) or a tuple
            ``(batched space, single space)``, as in Gymnasium.
        address: the Ray cluster to join with ``backend="ray"`` (default: ``RAY_ADDRESS``, an initialized Ray, or
            a local Ray with this machine's cores, shut down when the last env using it closes).
        wrappers: callables ``wrapper(env) -> env`` (wrapper classes, SuperSuit's functions), applied in order to
            each env where it is made, as ``gymnasium.make_vec``'s ``wrappers``; the spaces are the wrapped env's.

    A batch-native env (:mod:`shoal.batch`: a registered id such as ``"shoal/Squared-v0"``, a ``BatchEnv``
    subclass, or a ``functools.partial`` of one; ``**env_kwargs`` go to its constructor) is hosted as one object per
    worker stepping its share of the envs in one call. A callable returning a Gymnasium ``VectorEnv`` of ``m``
    sub-envs makes ``num_envs`` of them, ``num_envs * m`` rows, each stepped in one call in its worker
    (:mod:`shoal.vector.hosted`), in its own autoreset mode.

    Example:
        >>> import shoal
        >>> envs = shoal.make("CartPole-v1", 8, num_workers=2)
        >>> obs, info = envs.reset(seed=42)
        >>> obs.shape
        (8, 4)
        >>> envs.close()
    """
    options: dict[str, Any] = dict(
        backend=backend, num_workers=num_workers, batch_size=batch_size, autoreset_mode=autoreset_mode, seed=seed,
        copy=copy, flatten=flatten, context=context, daemon=daemon, inline=inline, address=address,
    )
    native = batch_class_of(env)
    if native is not None:
        if observation_mode != "same":
            raise ConfigError("observation_mode applies to lists of Gymnasium envs, not to a batch-native env")
        if wrappers is not None:
            raise ConfigError(
                "wrappers wrap one env each; a batch-native env steps all of its instances in one object: wrap the "
                "vector env instead (gymnasium.wrappers.vector)"
            )
        cls, kwargs = native
        return build_batch(cls, {**kwargs, **env_kwargs}, num_envs, **options)
    env_fns = wrapped(env_fns_of(env, num_envs, env_kwargs), wrappers)
    envs = build(env_fns, "shoal.make", observation_mode=observation_mode, **options)
    if isinstance(env, (str, EnvSpec)):
        try:
            mode = "sync" if backend == "serial" else "async"
            envs.spec = vector_spec(env, envs.num_envs, env_kwargs, mode, wrappers)
        except BaseException:
            envs.close()
            raise
    return envs


def vector_spec(env: str | EnvSpec, num_envs: int, env_kwargs: dict[str, Any], mode: str, wrappers: Any) -> EnvSpec:
    """The ``spec`` of a vector env made from a Gymnasium id, as ``gymnasium.make_vec`` sets it: the id's, with
    ``env_kwargs``, ``num_envs``, ``wrappers`` and the ``vectorization_mode`` of Gymnasium's that steps the same envs
    (``mode``) in its kwargs, so that ``gymnasium.make_vec(envs.spec)`` makes its like."""
    spec = copy.deepcopy(env if isinstance(env, EnvSpec) else _registered(env))
    spec.kwargs = {**spec.kwargs, **env_kwargs}
    if num_envs != 1:
        spec.kwargs["num_envs"] = num_envs
    spec.kwargs["vectorization_mode"] = mode
    if wrappers:
        spec.kwargs["wrappers"] = list(wrappers)
    return spec


def _registered(env_id: str) -> EnvSpec:
    """The spec ``gymnasium.make(env_id)`` made its env of: a ``module:`` prefix dropped (that module is imported by
    now: the env probed in this process was made), and an id without a version its latest version's."""
    ns, name, version = parse_env_id(env_id.split(":", 1)[-1])
    if version is None:
        version = find_highest_version(ns, name)
    return gymnasium.spec(get_env_id(ns, name, version))


def build_batch(cls: type[BatchEnv], kwargs: dict[str, Any], num_envs: int | None, **options: Any) -> VectorEnv:
    """The vector env of :func:`make` over a batch-native env class: one instance of ``cls`` per group of envs."""
    num_envs = check_positive_int("num_envs", num_envs)
    probe = cls(num_envs=max(1, len(cls.possible_agents)), **kwargs)
    try:
        single_obs, single_act = check_spaces(cls, probe)
        metadata = dict(getattr(probe, "metadata", {}) or {})
    finally:
        probe.close()
    # asked where the default has a choice: a serial step of a worker's share, in the same autoreset mode
    mode = {"autoreset_mode": options["autoreset_mode"]} if "autoreset_mode" in options else {}
    cost = native_share_cost(lambda units: build_batch(cls, kwargs, units, backend="serial", **mode))
    if cls.possible_agents:  # agents as rows: num_envs counts envs, each of len(possible_agents) rows
        from shoal.multiagent.rows import AgentRows
        from shoal.multiagent.vector import MultiAgentVectorEnv

        a = len(cls.possible_agents)
        rows = AgentRows(tuple(cls.possible_agents), (single_obs,) * a, (single_act,) * a, single_obs, single_act,
                         False)
        return MultiAgentVectorEnv(
            BatchEngineFactory(cls, kwargs, rows), num_envs, metadata=metadata, share_cost=cost, **options
        )
    return VectorEnv(
        BatchEngineFactory(cls, kwargs),
        num_envs=num_envs,
        single_observation_space=single_obs,
        single_action_space=single_act,
        metadata=metadata,
        share_cost=cost,
        **options,
    )


def build_hosted(
    env_fns: list[Callable[[], Any]], probe: GymVectorEnv, *, observation_mode: Any, **options: Any
) -> VectorEnv:
    """The vector env of :func:`make` over constructors of Gymnasium vector envs (:mod:`shoal.vector.hosted`):
    ``len(env_fns)`` of them, of ``probe.num_envs`` rows each."""
    if observation_mode != "same":
        raise ConfigError("observation_mode applies to lists of Gymnasium envs, not to Gymnasium vector envs")
    check_hostable(probe, parse_autoreset_mode(options.get("autoreset_mode", AutoresetMode.NEXT_STEP)))
    m = probe.num_envs
    single_obs, single_act = probe.single_observation_space, probe.single_action_space
    return VectorEnv(
        HostedEngineFactory(env_fns, m, single_obs, single_act),
        num_envs=len(env_fns) * m,
        single_observation_space=single_obs,
        single_action_space=single_act,
        metadata=dict(getattr(probe, "metadata", None) or {}),
        render_mode=getattr(probe, "render_mode", None),
        rows_per_env=m,
        **options,
    )


def build(
    env_fns: list[Callable[[], Env]],
    caller: str,
    *,
    observation_mode: str | tuple[Space, Space] = "same",
    batch_size: int | None = None,
    **options: Any,
) -> VectorEnv:
    """The vector env of :func:`make` over ``env_fns``; ``caller`` names the class or function the user called
    (errors about the sub-envs name it, as Gymnasium's do). PettingZoo envs make a multi-agent vector env
    (:mod:`shoal.multiagent`)."""
    probe = env_fns[0]()
    try:
        if is_pettingzoo(probe):
            from shoal.multiagent import build as build_multiagent

            return build_multiagent(env_fns, probe, observation_mode=observation_mode, batch_size=batch_size, **options)
        if isinstance(probe, GymVectorEnv):
            return build_hosted(env_fns, probe, observation_mode=observation_mode, batch_size=batch_size, **options)
        refuse_foreign(probe)
        single_obs, single_act = probe.observation_space, probe.action_space
        metadata, render_mode = dict(probe.metadata), probe.render_mode
    finally:
        close = getattr(probe, "close", None)
        if callable(close):
            close()
    observation_space = None
    if isinstance(observation_mode, tuple):
        if len(observation_mode) != 2 or not all(isinstance(s, Space) for s in observation_mode):
            raise ConfigError(
                f"observation_mode as a tuple must be (batched observation space, single observation space), got "
                f"{observation_mode!r}"
            )
        observation_space, single_obs = observation_mode
        observation_mode = "custom"
    elif observation_mode == "different":
        probes = [fn() for fn in env_fns]
        try:
            observation_space = batch_differing_spaces([p.observation_space for p in probes])
        finally:
            for p in probes:
                p.close()
    elif observation_mode != "same":
        raise ConfigError(
            f"Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and batch observation "
            f"space, actual got {observation_mode}"
        )
    if observation_space is not None and batch_size not in (None, len(env_fns)):
        raise ConfigError(f"observation_mode={observation_mode!r} needs batch_size == num_envs")
    factory = GymEngineFactory(env_fns, single_obs, single_act, observation_mode, caller)
    return VectorEnv(
        factory,
        num_envs=len(env_fns),
        single_observation_space=single_obs,
        single_action_space=single_act,
        observation_space=observation_space,
        metadata=metadata,
        render_mode=render_mode,
        batch_size=batch_size,
        share_cost=env_share_cost(env_fns[0]),  # asked where the default has a choice
        **options,
    )
