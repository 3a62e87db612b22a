"""shoal's one vector env: the Gymnasium API, written once above the backends.

``reset``/``step`` are ``*_async`` + ``*_wait`` (``send``/``recv``); the async state machine, input checks and
resets live here. Engines own per-env semantics (autoreset, sequences); backends only move commands and results
(:mod:`shoal.vector.transport`). Beside it: a step's halves, ``send``/``recv`` with the first-N-of-M batching
(:mod:`~shoal.vector.batches`), the layout of envs into groups and workers (:mod:`~shoal.vector.layout`), how
results come out of the buffers (:mod:`~shoal.vector.results`), calls (:mod:`~shoal.vector.calls`), what an
interrupted call leaves (:mod:`~shoal.vector.recovery`) and whose the backend is across forks
(:mod:`~shoal.vector.ownership`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Literal, Sequence, TypeVar

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from shoal.errors import (
    ConfigError,
    MissingDependencyError,
    NotResetError,
    ResetArgumentError,
    ResetArgumentTypeError,
    UnpicklableError,
)
from shoal.spaces import Layout
from shoal.vector.batches import Batches
from shoal.vector.buffers import BufferSpec
from shoal.vector.calls import Calls
from shoal.vector.checks import check_batch, check_positive_int, check_reset_mask, check_seeds, parse_autoreset_mode
from shoal.vector.copies import SplitCopies
from shoal.vector.commands import Command, Op
from shoal.vector.engine import split_by
from shoal.vector.infos import InfoParts
from shoal.vector.layout import checked_batch_size, group_layout, worker_count
from shoal.vector.load import BUSY, ShareCost
from shoal.vector.ownership import Owned
from shoal.vector.recovery import Recovery
from shoal.vector.results import ALL_ROWS, Results, batch_rows
from shoal.vector._guard import CallGuard
from shoal.vector.state import AsyncState, check_timeout, guarded, refuse_concurrent, whole
from shoal.vector.transport import EngineFactory, make_transport

Backend = Literal["serial", "multiprocessing", "ray"]
_Self = TypeVar("_Self", bound="VectorEnv")


# np_random and np_random_seed are per-env tuples, as on Gymnasium's Sync/AsyncVectorEnv (the base class types one)
class VectorEnv(Batches, Calls, Results, Recovery, Owned, gymnasium.vector.VectorEnv):  # type: ignore[misc]
    """A batch of envs stepped by a backend, behind Gymnasium's ``VectorEnv`` API.

    Build one with :func:`shoal.make`, :class:`shoal.AtariVectorEnv` or the drop-in
    :class:`shoal.vector.SyncVectorEnv` / :class:`shoal.vector.AsyncVectorEnv`; the arguments are documented on
    :func:`shoal.make`.

    Example:
        >>> import shoal
        >>> with shoal.make("CartPole-v1", 4, backend="serial") as envs:
        ...     obs, info = envs.reset(seed=0)
        ...     obs, rew, term, trunc, info = envs.step(envs.action_space.sample())
        >>> obs.shape
        (4, 4)
    """

    always_env_id = False
    """Report ``info["env_id"]`` in synchronous mode too (ale-py's vector env does; Gymnasium's do not)."""

    warn_close_pending = False
    """Warn when ``close()`` drops a pending call's results (Gymnasium's AsyncVectorEnv does)."""

    def __init__(
        self,
        factory: EngineFactory,
        *,
        num_envs: int,
        single_observation_space: spaces.Space,
        single_action_space: spaces.Space,
        observation_space: spaces.Space | None = None,
        metadata: dict[str, Any] | None = None,
        render_mode: str | None = None,
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
        extras: dict[str, tuple[np.dtype, tuple[int, ...]]] | None = None,
        address: str | None = None,
        rows_per_env: int = 1,
        share_cost: ShareCost | None = None,
    ) -> None:
        self.closed = True  # until the backend is up, so __del__ of a half-built env does nothing
        self._guard = CallGuard(refuse_concurrent)  # one call at a time, whichever threads call (see state.py)
        self._track()  # (shoal.vector.ownership)
        self.num_envs = check_positive_int("num_envs", num_envs)
        self.rows_per_env = rows_per_env
        """Consecutive rows an engine steps as one (a multi-agent env's agents): groups, asynchronous batches and
        workers' shares are made of whole units of that many rows."""
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        self.backend = backend
        # The default may follow load and cost (shoal.vector.load) where no worker processes were asked for (a start
        # method, or every env in a worker): it may choose the calling process alone.
        chooses = batch_size in (None, num_envs) and context is None and inline is not False
        units = self.num_envs // rows_per_env
        workers = worker_count(
            backend, num_workers, units=units, rows=rows_per_env, address=address,
            share_cost=share_cost if chooses else None,
        )
        # _others: runnable tasks besides this one when the default chose; _alone: it chose the calling process alone
        self.num_workers, self._others, self._alone = workers
        self.batch_size = checked_batch_size(
            batch_size, num_envs=self.num_envs, rows=rows_per_env, num_workers=self.num_workers
        )
        self.is_async = self.batch_size < self.num_envs
        if inline is None:  # the calling process steps a share; all of them where the default chose it alone
            inline = backend == "multiprocessing" and not self.is_async and (self.num_workers > 1 or self._alone)
        if inline and self.is_async:
            raise ConfigError(
                "inline=True (the calling process steps a group of envs) needs batch_size == num_envs: in "
                "asynchronous mode the calling process must stay free while envs step"
            )
        self.copy = copy
        self.flatten = flatten
        self._default_seed = seed
        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self._single_action = single_action_space  # what actions are checked against (a subclass may hide it)
        self._check_actions = check_batch.dispatch(type(single_action_space))  # resolved once: every step checks
        self._obs_layout = Layout(single_observation_space)
        if flatten:
            self._obs_layout.check_flattenable()
        self._plain_obs = not flatten and not self._obs_layout.structured  # observations are one array per batch
        self._action_layout = Layout(single_action_space)
        # Leaves without a fixed size (Text, Graph, ...) travel with the answers; the latest value of each, per env:
        self._loose_obs: list[list[Any]] = [[None] * self.num_envs for _ in self._obs_layout.loose]
        self.metadata = dict(metadata or {})
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = render_mode
        if flatten:
            self.observation_space = self._obs_layout.flat_space(self.batch_size)
        else:
            self.observation_space = observation_space or batch_space(single_observation_space, self.batch_size)
        self.action_space = batch_space(single_action_space, self.batch_size)

        self.groups, hosts = group_layout(
            num_envs=self.num_envs, rows=rows_per_env, num_workers=self.num_workers, batch_size=self.batch_size
        )
        self._owners = np.repeat(np.arange(len(self.groups)), [len(g) for g in self.groups])  # env -> its group
        self._batches: dict[tuple[int, ...], tuple[np.ndarray, Any, Any]] = {}  # held groups -> see _hold
        spec = BufferSpec(self.num_envs, self._obs_layout, self._action_layout, dict(extras or {}))
        self._transport = make_transport(
            backend, factory, self.groups, spec, self.autoreset_mode, hosts, context=context, daemon=daemon,
            inline=inline, address=address, spin_us=0.0 if self._others >= BUSY else None,
        )
        self._buffers = self._transport.buffers
        self._no_sequences: str | None = getattr(factory, "no_sequences", None)  # why its engines refuse them
        # The rows whose actions a step hands the engines in this process directly (see send): synchronous steps
        # of an action space that is one plain array, by engines that never write into their actions
        in_place = getattr(factory, "actions_in_place", False) and not self.is_async
        plain_actions = not self._action_layout.structured and not self._action_layout.loose
        self._own_rows = self._transport.own_rows if in_place and plain_actions else None
        self._obs_slot0 = self._buffers.slot(0)
        self._split = self._split_rows()  # see _receive
        self._split_copies: SplitCopies | None = None
        self._state = AsyncState.DEFAULT
        self._interrupted = False  # an interrupt (Ctrl-C) cut a wait short: see _cut_short and _check_idle
        self._held: list[int] | None = None  # groups whose envs the caller holds (None before the first reset)
        self._held_ids = np.arange(0)  # their env ids, in batch order (set with _held by _hold)
        self._held_rows: Any = slice(0)  # and their buffer rows (a slice when consecutive)
        self._wanted = self.batch_size // len(self.groups[0])  # groups per asynchronous batch
        self._ready: list[tuple[int, Any]] = []  # answers collected early (async mode), handed out first by recv
        self._handout: list[tuple[int, Any]] | None = None  # the answers of the batch a wait is handing out
        self._calling = False  # async mode: a call has parked what stepped and not yet collected its answers
        self._sent: list[int] = []
        self._reset_request: tuple[list[int], bool] = ([], False)
        self._used_sequences: set[int] = set()
        self._torch_handles: set[int] = set()
        self._write_slot = 0  # the observation slot the next step writes to (the torch ops set it)
        self._torch_slots: Any = None  # the observation slots the torch ops hand out (shoal.torch_ops.SharedSlots)
        self._own_backend()
        self.closed = False

    # -- reset -------------------------------------------------------------------------------------------------------

    @whole
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env (or those of ``options["reset_mask"]``); return the first batch and its infos.

        ``seed``: None, an int (env ``i`` gets ``seed + i``) or one int/None per env. In asynchronous mode
        (``batch_size < num_envs``) a full reset returns the first ``batch_size`` envs to finish; a partial reset may
        only name envs of the batch the caller holds, and returns that batch again.
        """
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    @whole
    def _reset_parts(
        self, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, InfoParts]:
        """:meth:`reset` with its infos as they came (for an adapter that hands them out per env)."""
        self.reset_async(seed=seed, options=options)
        return self._reset_wait_parts()

    @guarded
    def reset_async(
        self, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Start a reset; :meth:`reset_wait` returns its results."""
        if options is not None and not isinstance(options, Mapping):
            raise ResetArgumentTypeError(
                f"options must be a dict (the same options for every env reset) or None, got {type(options).__name__}"
            )
        self._check_idle("reset_async", full="reset_mask" not in (options or {}))
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if seed is None and self._held is None:
            seed = self._default_seed
        seeds = self._seeds(seed)
        payload_options = options or None
        if mask is None:
            if self.is_async:  # drop what is in flight, by the transport's own count: it holds even where an
                self._drop_owed()  # interrupt lost a batch's answers between their taking and their holding
            groups = list(range(len(self.groups)))
            ids = [self._group_ids(g) for g in groups]
            self._buffers.obs_target[:] = 0
        else:
            mask = self._reset_mask(mask)
            if self._held is None and not self.is_async:  # as in Gymnasium: the others keep their initial zeros
                self._hold(list(range(len(self.groups))))
            if self._held is None:
                raise NotResetError("in asynchronous mode a partial reset (reset_mask) needs a full reset() first")
            if self.is_async:  # (in synchronous mode the caller holds every env)
                held_ids = np.zeros(self.num_envs, np.bool_)
                held_ids[self._held_ids] = True
                if (mask & ~held_ids).any():
                    raise ResetArgumentError(
                        f"envs {np.flatnonzero(mask & ~held_ids).tolist()} are stepping (sent, not yet received); in "
                        f"asynchronous mode only envs of the batch you hold ({self._held_ids.tolist()}) can be reset"
                    )
            envs = mask.nonzero()[0]  # (a subclass's mask may name none: ale-py's, which hands out the batch again)
            groups, ids = split_by(envs, self._owners[envs])
            self._buffers.obs_target[mask] = 0
        commands = {
            g: Command(Op.RESET, i, ([seeds[e] for e in i.tolist()], payload_options)) for g, i in zip(groups, ids)
        }
        self._transport.dispatch(commands)
        self._reset_request = (groups, mask is None)
        self._state = AsyncState.WAITING_RESET

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        """The results of :meth:`reset_async`.

        ``timeout``: seconds to wait at most; past it, :class:`~shoal.errors.WaitTimeoutError` (a
        ``multiprocessing.TimeoutError``) is raised and the reset goes on: call ``reset_wait`` again to collect it.
        """
        obs, parts = self._reset_wait_parts(timeout)
        return obs, self._merged(parts)

    @guarded
    def _reset_wait_parts(self, timeout: float | None = None) -> tuple[Any, InfoParts]:
        check_timeout(timeout)
        self._check_waiting(AsyncState.WAITING_RESET, "reset_wait")
        groups, full = self._reset_request
        try:
            if full and self.is_async:
                answers = self._hand_out(timeout)
            else:
                answers = self._absorb(self._transport.collect(groups, timeout))
                if full:
                    self._hold(list(range(len(self.groups))))
        except BaseException as exc:
            self._cut_short(exc)
            raise
        self._state, self._interrupted, self._handout = AsyncState.DEFAULT, False, None
        if self.is_async:
            ids, rows = self._held_ids, self._held_rows
            return self._observations(rows), self._info_parts(answers, ids, rows)
        return self._observations(ALL_ROWS), self._info_parts(answers, None, ALL_ROWS)

    # -- step --------------------------------------------------------------------------------------------------------

    @whole
    def step(self, actions: Any, gamma: float | None = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step the envs of the current batch; ``actions`` may be one action per env or one sequence per env.

        With sequences (a list holding one numpy array of actions per env), each env runs its sequence inside its
        worker and stops early when its episode ends; the reward is ``sum_k gamma**k * r_k`` over the steps taken
        and ``info["steps_taken"]`` counts them. An empty sequence skips its env (last observation, reward 0).
        """
        self.send(actions, gamma=gamma)  # (one call: another thread's call between the halves got this recv refused,
        return self.recv()  # the step left pending)

    step_async = Batches.send
    step_wait = Batches.recv

    # -- flat observations -----------------------------------------------------------------------------------------

    def unflatten(self, flat: np.ndarray) -> Any:
        """A flat observation batch (``flatten=True``) back in Gymnasium shape, as views without a copy."""
        return self._obs_layout.unflatten(flat)

    # -- PyTorch ------------------------------------------------------------------------------------------------------

    @guarded
    def torch(self, device: Any = "cpu") -> tuple:
        """PyTorch custom ops over this env: ``handle, send, step, recv, get_last_info, unregister``.

        ``send(handle, actions)`` returns at once (run the model meanwhile); ``recv(handle)`` returns ``(obs,
        reward, terminated, truncated, steps_taken)`` as tensors on ``device``: on CPU the observations are the
        shared memory the envs wrote (no copy), the rest buffers allocated once; nothing is reused while anything
        holds it (a returned tensor never changes under its holder); ``step`` is both. Action sequences go flat:
        ``send(handle, values, offsets, gamma)``. The ops compile with ``torch.compile(fullgraph=True)``. See
        :mod:`shoal.torch_ops`. Reset with :meth:`reset` first.

        ``send`` returns before the envs have stepped when every group runs in a worker: build the env with
        ``inline=False`` (or ``batch_size < num_envs``) to overlap a model with stepping; by default, synchronous
        multiprocessing steps one group in the calling process, inside ``send``.

        Example:
            >>> import torch, shoal
            >>> envs = shoal.AtariVectorEnv(game="pong", num_envs=2, backend="serial")
            >>> _ = envs.reset(seed=0)
            >>> handle, send, step, recv, get_last_info, unregister = envs.torch()
            >>> obs, reward, terminated, truncated, steps_taken = step(handle, torch.zeros(2, dtype=torch.int64))
            >>> obs.shape, get_last_info(handle)["lives"].tolist()
            (torch.Size([2, 4, 84, 84]), [0, 0])
            >>> envs.close()
        """
        try:
            from shoal import torch_ops
        except ImportError as exc:
            if exc.name != "torch":
                raise
            raise MissingDependencyError(
                'envs.torch() needs PyTorch, which is not installed: pip install "shoal[torch]"'
            ) from exc
        self._check_idle("torch")
        return torch_ops.register(self, device)

    # -- closing -----------------------------------------------------------------------------------------------------

    def close_extras(self, terminate: bool = False, **kwargs: Any) -> None:
        """Stop the workers (``terminate``: at once, without letting them finish what they are doing). With
        :attr:`warn_close_pending`, closing with a call pending warns afterwards (a warning turned into an error
        must not leave the workers running). Refused while another thread is inside a call (ConcurrentCallError): its
        waits would read pipes and memory closed under them."""
        guard = getattr(self, "_guard", None)  # (none if the constructor failed before making it)
        if guard is None:
            self._close_extras(terminate)
        else:
            guard.run(self._close_extras, terminate)

    def _close_extras(self, terminate: bool) -> None:
        state = getattr(self, "_state", AsyncState.DEFAULT)
        self._state = AsyncState.DEFAULT
        if getattr(self, "_torch_handles", None):
            from shoal.torch_ops import unregister

            for handle in list(self._torch_handles):
                unregister(handle)
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None and finalizer.detach() is not None:
            self._transport.close(terminate=terminate)
        if state is not AsyncState.DEFAULT and self.warn_close_pending:
            self.closed = True
            warnings.warn(
                f"Calling `close` while waiting for a pending call to `{state.value}` to complete.", UserWarning,
                stacklevel=3,
            )

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *args: Any) -> None:
        self.close()

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Refused (pickle, ``copy.copy``, ``copy.deepcopy``): a vector env owns its workers, Ray actors and shared
        memory, which no copy could share or own. Without this, pickle failed deep inside on a function it could not
        find by name, and a Ray task or a closure that captured the env said nothing of why."""
        raise UnpicklableError(
            f"a shoal vector env ({type(self).__name__}) cannot be pickled or copied: it owns its worker processes "
            f"and shared memory. Pass what makes it instead (shoal.make's arguments) and make it where it is used"
        )

    # -- helpers -----------------------------------------------------------------------------------------------------

    def _group_ids(self, group: int) -> np.ndarray:
        return self._transport.group_ids[group]

    def _hold(self, groups: list[int]) -> None:
        """The caller now holds ``groups``: set :attr:`_held`, the batch's env ids and buffer rows, and its
        :meth:`_batch_action_space`, all cached per set of groups (a few sets recur: in synchronous mode one, in
        asynchronous mode the ways of drawing a batch from the groups)."""
        self._held = groups
        key = tuple(groups)
        batch = self._batches.get(key)
        if batch is None:
            if len(self._batches) > 256:  # many groups: do not keep every combination ever drawn
                self._batches.clear()
            ids = np.concatenate([self._transport.group_ids[g] for g in key])
            batch = self._batches[key] = (ids, batch_rows(ids), self._batch_action_space(ids))
        self._held_ids, self._held_rows, space = batch
        if space is not None:
            self.action_space = space

    def _seeds(self, seed: Any) -> list[int | None]:
        """One seed (or None) per env row from what ``reset(seed=...)`` got (a subclass's hook)."""
        return check_seeds(seed, self.num_envs)

    def _reset_mask(self, mask: Any) -> np.ndarray:
        """``options["reset_mask"]`` checked, one bool per env row (a subclass's hook)."""
        return check_reset_mask(mask, self.num_envs)

    def _check_env_actions(self, ids: np.ndarray, values: np.ndarray, offsets: np.ndarray | None) -> None:
        """Per-env checks beyond the action space (a subclass's hook): ``values`` holds one action per env of
        ``ids``, or with ``offsets`` the concatenated sequences (env ``j``: ``values[offsets[j]:offsets[j + 1]]``)."""

    def _batch_action_space(self, ids: np.ndarray) -> spaces.Space | None:
        """The ``action_space`` of a batch of envs ``ids`` when it depends on which envs they are (a subclass's hook;
        None: it does not)."""
        return None

