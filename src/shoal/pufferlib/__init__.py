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
from typing import Any, Callable, Sequence

from shoal.pufferlib.errors import APIUsageError, pufferlib
from shoal.pufferlib.hosting import host_of, signature
from shoal.pufferlib.vecenv import PufferVecEnv
from shoal.vector.checks import integer

__all__ = ["APIUsageError", "PufferVecEnv", "make"]

_KEYWORDS = ("num_workers", "batch_size", "zero_copy", "sync_traj", "overwork", "backend")
_BACKENDS = {"Multiprocessing": "multiprocessing", "Ray": "ray"}


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
        host = host_of(driver_env, "env_creators[0]")
    except APIUsageError:
        getattr(driver_env, "close", lambda: None)()
        raise
    like = signature(driver_env)
    fns = [functools.partial(host, creators[i], args[i], kw[i], _made_seed(name, i, per_worker), i, like)
           for i in range(num_envs)]
    first_ready = batch_size < num_envs and not kwargs.get("sync_traj", True) and not kwargs.get("zero_copy", True)
    return PufferVecEnv(fns, _BACKENDS[name], driver_env, host, batch_size, per_worker, num_workers, first_ready,
                        kwargs.get("zero_copy", True), kwargs.get("sync_traj", True))


def _is_count(value: Any) -> bool:
    number = integer(value)
    return number is not None and number >= 1


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


def _made_seed(backend: str, i: int, per_worker: int) -> int:
    """The ``seed`` PufferLib's backend passes to env ``i``'s creator: each worker's (or Ray actor's) Serial makes
    its ``j``-th env with its own seed + ``j``, that seed being ``w * per_worker`` on Multiprocessing (worker ``w``)
    and 0 on Ray. (``make``'s own ``seed`` does not reach them: PufferLib does not pass it on.)"""
    return i % per_worker if backend == "Ray" else i
