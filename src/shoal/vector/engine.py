"""The engine: a group of envs stepped in one process, writing into their rows of the shared buffers.

Autoreset (next-step, same-step, disabled), multi-step action sequences with discounting, and the per-env info
entries are written here once. Every backend runs engines (the serial backend in-process, each multiprocessing
worker or Ray actor one engine over its group of envs), so every backend has the same semantics by construction.

A concrete engine supplies two primitives, both working on a batch of env ids so that an engine can batch work
across its envs (the Atari engine resizes all its screens in one call):

* ``_reset_envs(ids, seeds, options)``: reset those envs, write their observations; return their info dicts.
* ``_step_envs(ids, actions)``: one primitive step each; write observations, rewards, terminations, truncations.

and may override ``_autoreset_envs(ids)``, how an env starts its next episode on its own (by default a reset with no
seed or options), ``_advance_envs(ids, actions, ended)``, a step in which some envs autoreset instead (by default
the two primitives one after the other), and ``_step_in_turn(ids, actions)``, a same-step batch in which each env that
ends its episode resets right after its own step (by default the engine resets them after the batch).
"""

from __future__ import annotations

import traceback
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import contextmanager
from itertools import repeat
from typing import Any, Iterable, Iterator

import numpy as np
from gymnasium.vector import AutoresetMode

from shoal.errors import EnvError, ResetNeededError, ShoalError
from shoal.vector.buffers import Buffers
from shoal.vector.commands import Command, InfoEntries, LooseObs, NoSeeds, Op, Sequences
from shoal.vector.infos import Entry, Finals, owned


def env_error(env_id: int, exc: Exception, name: str | None = None, where: str = "") -> Exception:
    """What to raise for ``exc`` raised by env ``env_id``: an :class:`EnvError` naming it, with its traceback.

    ``name``: how the message names the env (default ``env {env_id}``); ``where``: text after the exception's type
    (`` in step()``). Call it inside the ``except`` block (it reads the traceback being handled); shoal's own errors
    pass through.
    """
    if isinstance(exc, ShoalError):
        return exc
    error = EnvError.of(type(exc))(
        f"{name or f'env {env_id}'} raised {type(exc).__name__}{where}: {exc}",
        env_id=env_id,
        remote_traceback=traceback.format_exc(),
    )
    error.__cause__ = exc
    return error


@contextmanager
def blame(env_id: int) -> Iterator[None]:
    """Context manager form of :func:`env_error`, for paths off the per-step loop."""
    try:
        yield
    except Exception as exc:
        raise env_error(env_id, exc) from exc


def close_all(closables: Iterable[tuple[int | None, Any]]) -> None:
    """Close each of ``closables`` (``(env_id, env)`` pairs; ``env_id`` None for what is no env, such as an
    engine), also after one raised, then raise the first error (an env's blamed on it, :func:`blame`): one failing
    ``close`` leaves nothing after it open."""
    first: Exception | None = None
    for env_id, closable in closables:
        try:
            if env_id is None:
                closable.close()
            else:
                with blame(env_id):
                    closable.close()
        except Exception as exc:
            first = first or exc
    if first is not None:
        raise first


class Engine(ABC):
    """A group of envs (global ids ``env_ids``) stepped in this process.

    Args:
        env_ids: the global ids of the envs this engine hosts (consecutive).
        buffers: the vector env's buffers; this engine writes only its own rows.
        autoreset_mode: Gymnasium's autoreset mode, applied here for every backend.
    """

    discounted_extras: tuple[str, ...] = ()
    """Names of per-env ``extras`` arrays that sum like rewards over a sequence (Atari's unclipped reward)."""

    def __init__(self, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode) -> None:
        self.env_ids = env_ids
        self.buffers = buffers
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self._run_ids = np.arange(0)  # see _run
        self._run_at: slice | np.ndarray = slice(0)
        self._run_list: list[int] = []
        # What this engine knows of its rows without reading them (each step would otherwise pay a numpy call for
        # each; kept per group's ids array, which comes back every step, as for _run): no env of ``_clean`` needs a
        # reset (none is marked in ``needs_reset``: any write of a mark forgets it), and every env of ``_one_taken``
        # has ``steps_taken`` 1 (any other write there forgets it)
        self._clean: np.ndarray | None = None
        self._one_taken: np.ndarray | None = None
        self._quiet = False
        """Set by a :meth:`_step_envs` that saw no env of its batch return ``terminated`` or ``truncated``, so that
        :meth:`step` need not read the flags back to know that no episode ended (only for an engine whose
        :meth:`_episode_over` is the default, or never more than the flags)."""
        self.loose_obs: dict[int, tuple] = {}
        """Where an engine puts the loose leaves of the observations it writes (by env id): they go back with the
        answer (:class:`LooseObs`). Empty unless the observation space has leaves without a fixed size."""

    # -- primitives ------------------------------------------------------------------------------------------------

    @abstractmethod
    def _reset_envs(self, ids: np.ndarray, seeds: Sequence[int | None], options: dict | None) -> list[dict]:
        """Reset envs ``ids``; write their observations; return one info dict each (or an empty list: none)."""

    @abstractmethod
    def _step_envs(self, ids: np.ndarray, actions: np.ndarray) -> list[dict]:
        """Step envs ``ids`` once with ``actions`` (one row each; for an action space with loose leaves, one whole
        action each, in a list); write obs/reward/term/trunc; return infos: one dict per env, or an empty list
        when no env has one (what a batch-native engine returns on most steps, with no Python per env)."""

    def _autoreset_envs(self, ids: np.ndarray) -> list[dict]:
        """Start the next episode of envs ``ids``, whose episode ended (the autoreset); a user's ``reset`` never
        comes here. By default a reset with no seed or options; Atari's ``life_loss_reset="continue"`` plays on the
        game an episodic life ended."""
        return self._reset_envs(ids, NoSeeds(len(ids)), None)

    def _step_in_turn(self, ids: np.ndarray, actions: Any) -> tuple[list[dict], Finals | None]:
        """A same-step batch: by default :meth:`_step_envs`, after which :meth:`step` resets the envs whose episode
        ended (None). An engine may instead reset each of them right after its own step, as Gymnasium's
        ``SyncVectorEnv`` does, and return their :class:`~shoal.vector.infos.Finals` (None if none ended): the infos
        it returns for them are then their resets'."""
        return self._step_envs(ids, actions), None

    def _advance_envs(self, ids: np.ndarray, actions: Any, ended: np.ndarray) -> list[dict]:
        """One next-step batch: envs ``ids[ended]`` start their next episode (:meth:`_autoreset_envs`; that is their
        whole step, and their rows of ``actions`` are ignored), the others step with their rows of ``actions``.
        A reset env's step writes reward 0 and neither flag. Return one info dict per env of ``ids`` (a reset env's
        is its reset's), or an empty list when none has one.

        By default the two primitives one after the other; an engine may do both in one pass over its envs (the
        order of independent envs does not change their results)."""
        stepping = ~ended
        resetting = ids[ended]
        reset_infos = self._autoreset_envs(resetting)
        self._settle_reset(resetting, [])
        if isinstance(actions, np.ndarray):
            actions = actions[stepping]
        else:  # one whole action per env (an action space with loose leaves)
            actions = [action for action, over in zip(actions, ended.tolist()) if not over]
        step_infos = self._step_envs(ids[stepping], actions) if len(actions) else []
        if not any(reset_infos) and not any(step_infos):
            return []
        resets = iter(reset_infos) if reset_infos else repeat({})
        steps = iter(step_infos) if step_infos else repeat({})
        return [next(resets) if over else next(steps) for over in ended.tolist()]

    def _final_obs(self, ids: np.ndarray) -> np.ndarray | list[Any]:
        """The observations of envs ``ids``, for ``info["final_obs"]``: a copy of their records (one array, which
        the calling process reads per env), or a list of one standalone value per env."""
        b, layout = self.buffers, self.buffers.spec.obs
        rows = b.obs_rows(ids)
        records = b.obs[rows]  # indexing with ids copies
        if not layout.loose:
            return records
        # leaves without a fixed size are not in the records: each env's values as this step wrote them
        return [layout.item(records, j, self.loose_obs[row]) for j, row in enumerate(np.asarray(rows).tolist())]

    def _final_infos(self, ids: np.ndarray, infos: list[dict]) -> list[dict]:
        """The infos of the steps that ended the episodes of envs ``ids`` (one per env, or an empty list: none has
        any), for ``info["final_info"]`` (same-step mode)."""
        return infos

    def _episode_over(self, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` ended their episode this step (and so reset): by default, terminated or truncated.

        An engine may signal ``terminated`` without ending the episode (Atari's ``life_loss_info``).
        """
        b, at = self.buffers, self._run(ids)
        return b.terminations[at] | b.truncations[at]

    def _run(self, ids: np.ndarray) -> slice | np.ndarray:
        """:func:`run_of` ``ids``, kept for the array last asked about: a group's ids array comes back every step, and
        a step asks about it four times."""
        if ids is not self._run_ids:
            self._run_ids, self._run_at, self._run_list = ids, run_of(ids), ids.tolist()
        return self._run_at

    def _listed(self, ids: np.ndarray) -> list[int]:
        """``ids.tolist()``, kept as :meth:`_run` keeps its slice."""
        if ids is not self._run_ids:
            self._run(ids)
        return self._run_list

    def call(self, ids: np.ndarray, name: str, args: tuple, kwargs: dict) -> list[Any]:
        raise NotImplementedError(f"{type(self).__name__} does not support call({name!r})")

    def get_attr(self, ids: np.ndarray, name: str) -> list[Any]:
        raise NotImplementedError(f"{type(self).__name__} does not support get_attr({name!r})")

    def set_attr(self, ids: np.ndarray, name: str, values: list[Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support set_attr({name!r})")

    def close(self) -> None:
        """Release the envs."""

    # -- semantics, written once -----------------------------------------------------------------------------------

    def execute(self, command: Command) -> Any:
        """Run one command; what every backend calls."""
        op, ids, payload = command
        if op is Op.STEP:
            return self._answer(self.step(ids, payload))
        if op is Op.SEQUENCES:
            return self._answer(self.step_sequences(ids, payload))
        if op is Op.RESET:
            seeds, options = payload
            return self._answer(self.reset(ids, seeds, options))
        if op is Op.CALL:
            name, args, kwargs = payload
            return self.call(ids, name, args, kwargs)
        if op is Op.GET_ATTR:
            return self.get_attr(ids, payload)
        if op is Op.SET_ATTR:
            name, values = payload
            return self.set_attr(ids, name, values)
        raise ValueError(f"unknown op {op!r}")

    def run_step(self, ids: np.ndarray, actions: np.ndarray | None = None) -> Any:
        """:meth:`execute` of a plain step (the hot path, without a :class:`Command`); ``actions``: see :meth:`step`."""
        return self._answer(self.step(ids, actions=actions))

    def _answer(self, entries: InfoEntries) -> Any:
        """What goes back for a command that wrote observations: the info entries, with the loose leaves' values
        of the observations written (:class:`LooseObs`) when there are any."""
        if not self.loose_obs:
            return entries
        values = dict(self.loose_obs)
        self.loose_obs.clear()  # in place: the engine's writers hold this dict
        return LooseObs(entries, values)

    def reset(self, ids: np.ndarray, seeds: Sequence[int | None], options: dict | None) -> InfoEntries:
        return self._settle_reset(ids, self._reset_envs(ids, seeds, options))

    def _settle_reset(self, ids: np.ndarray, infos: list[dict]) -> InfoEntries:
        """The per-step arrays of envs ``ids``, just reset, as a reset leaves them; their info entries."""
        b, at = self.buffers, run_of(ids)
        b.settle(ids)
        b.rewards[at] = 0.0  # an async batch may hand out a reset env in a later recv(): no stale reward
        b.steps_taken[at] = 0
        self._one_taken = None
        b.terminations[at] = False
        b.truncations[at] = False
        b.needs_reset[at] = False
        return _entries(ids.tolist(), infos)

    def step(
        self, ids: np.ndarray, loose_actions: Sequence[tuple] | None = None, actions: np.ndarray | None = None
    ) -> InfoEntries:
        """One step of envs ``ids`` with the actions in their rows of ``buffers.actions`` (and, for an action space
        with loose leaves, those leaves' values: one tuple per env of ``ids``), or with ``actions`` (one row per env
        of ``ids``, as those rows would hold them) where the calling process hands its own engine the batch it
        checked instead of writing it into the buffers first."""
        b, at = self.buffers, self._run(ids)
        batch: Any = b.actions[at] if actions is None else actions
        if loose_actions is not None:  # one value per env
            batch = [b.spec.action.item(batch, j, loose) for j, loose in enumerate(loose_actions)]
        self._quiet = False
        ended = self._ended(ids)
        if ended is None:
            if ids is not self._one_taken:
                b.steps_taken[at] = 1
                self._one_taken = ids
            if self.autoreset_mode is AutoresetMode.SAME_STEP:
                infos, finals = self._step_in_turn(ids, batch)
                if finals is not None:  # the engine reset its ended envs itself
                    b.settle(ids)
                    return self._finished(ids, infos, finals)
            else:
                infos = self._step_envs(ids, batch)
        elif np.count_nonzero(ended) == len(ended):  # every env of the group autoresets: no step at all
            return self._settle_reset(ids, self._autoreset_envs(ids))
        else:  # the whole group in one call, not the resets then the rest: a subset of a group is not a slice.
            # _finish sets needs_reset from the flags the step wrote
            b.steps_taken[at] = ~ended
            self._one_taken = None
            infos = self._advance_envs(ids, batch, ended)
        b.settle(ids)
        return self._finish(ids, infos, self._quiet)

    def step_sequences(self, ids: np.ndarray, seqs: Sequences) -> InfoEntries:
        """Each env runs its own action sequence, stopping early when its episode ends.

        The reward written is the discounted sum ``sum_k gamma**k * r_k`` over the steps taken, ``steps_taken`` says
        how many ran, and an empty sequence leaves its env untouched (last observation, reward 0, no step).
        """
        b = self.buffers
        lengths = np.diff(seqs.offsets)
        stepping, starts = ids, seqs.offsets[:-1]  # the envs that step, or autoreset, and where their actions start
        b.steps_taken[self._run(ids)] = 0
        self._one_taken = None
        if np.count_nonzero(lengths) < len(ids):
            skipped = ids[lengths == 0]
            b.carry(skipped)
            for array in self._summed():
                array[skipped] = 0
            b.terminations[skipped] = False
            b.truncations[skipped] = False
            rows = np.flatnonzero(lengths)
            stepping, starts, lengths = ids[rows], starts[rows], lengths[rows]
        entries, left = self._autoreset_before(stepping)
        if type(left) is not slice:  # (a slice: none autoreset, all of them step)
            stepping, starts, lengths = stepping[left], starts[left], lengths[left]
        if len(stepping):
            infos = self._run_sequences(stepping, seqs.values, starts, lengths, seqs.gamma)
            entries += self._finish(stepping, infos, self._quiet)
        return sorted(entries, key=_env_of)

    def _summed(self) -> list[np.ndarray]:
        """The per-env arrays a sequence sums with its discount: rewards and :attr:`discounted_extras`."""
        b = self.buffers
        return [b.rewards] + [b.extras[name] for name in self.discounted_extras]

    def _run_sequences(self, ids: np.ndarray, values: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                       gamma: float) -> list[dict]:
        """Envs ``ids`` each run their sequence, ``values[starts[j]:starts[j] + lengths[j]]`` (at least one action),
        stopping where its episode ends; write each env's last observation and flags, its discounted sums
        (:meth:`_summed`) and ``steps_taken``; set :attr:`_quiet` as :meth:`_step_envs` does. Return the info of each
        env's last step (or an empty list: none has any).

        By default one :meth:`_step_envs` batch per position in the sequences, over the envs still running (an
        engine that steps its envs one at a time can instead run each env's whole sequence in turn)."""
        b = self.buffers
        summed = self._summed()
        totals = [np.zeros(len(ids)) for _ in summed]
        discount = np.ones(len(ids))
        active = np.ones(len(ids), bool)
        infos: list[dict] = [{}] * len(ids)
        quiet = True
        for k in range(int(lengths.max())):
            rows = np.flatnonzero(active & (lengths > k))
            if not len(rows):
                break
            sub = ids[rows]
            self._quiet = False  # (as step() leaves it for an engine that does not set it)
            for j, info in zip(rows.tolist(), self._step_envs(sub, values[starts[rows] + k])):
                infos[j] = info
            quiet = quiet and self._quiet
            b.settle(sub)
            for total, array in zip(totals, summed):
                total[rows] += discount[rows] * array[sub]
            discount[rows] *= gamma
            b.steps_taken[sub] += 1
            active[rows[b.terminations[sub] | b.truncations[sub]]] = False
        for total, array in zip(totals, summed):
            array[ids] = total
        self._quiet = quiet
        return infos if any(infos) else []

    def _autoreset_before(self, ids: np.ndarray) -> tuple[InfoEntries, np.ndarray | slice]:
        """Next-step mode: reset the envs whose episode ended last call (that is their whole step).

        Returns the info entries of those resets and where in ``ids`` the envs left to step are (a mask, or a slice
        of all of them).
        """
        ended = self._ended(ids)
        if ended is None:
            return [], slice(None)
        resetting = ids[ended]
        return self._settle_reset(resetting, self._autoreset_envs(resetting)), ~ended

    def _ended(self, ids: np.ndarray) -> np.ndarray | None:
        """Which of ``ids`` autoreset now, their episode having ended last call (next-step mode); None when none does.
        With autoreset disabled, an ended env is an error."""
        if ids is self._clean:
            return None
        ended = self.buffers.needs_reset[self._run(ids)]
        if not np.count_nonzero(ended):  # not .any(): on a few envs, that reduction costs three times as much
            return None
        if self.autoreset_mode is AutoresetMode.DISABLED:
            raise ResetNeededError(
                f"envs {ids[ended].tolist()} ended their episode and autoreset_mode='disabled': reset them with "
                f"reset(options={{'reset_mask': mask}}) before stepping them again"
            )
        if self.autoreset_mode is AutoresetMode.SAME_STEP:  # same-step envs are reset when they end
            return None
        return ended.copy()  # the resets clear needs_reset

    def _finish(self, ids: np.ndarray, step_infos: list[dict], quiet: bool = False) -> InfoEntries:
        """After stepping ``ids``: mark ended episodes and, in same-step mode, reset them right away. ``quiet``: no
        env of ``ids`` returned either flag (:attr:`_quiet`)."""
        b = self.buffers
        ended = None if quiet else self._episode_over(ids)
        if ended is None or not np.count_nonzero(ended):
            if ids is not self._clean:
                b.needs_reset[self._run(ids)] = False
                self._clean = ids
            return _entries(self._listed(ids), step_infos)
        self._clean = None
        b.needs_reset[self._run(ids)] = ended
        if self.autoreset_mode is not AutoresetMode.SAME_STEP:
            return _entries(self._listed(ids), step_infos)
        done, overs = ids[ended], ended.tolist()
        # as they are now, before the resets: an env may hand out the info dict it keeps and change it in reset
        ended_infos = [owned(info) for info, over in zip(step_infos, overs) if over]  # empty when step_infos is
        finals = Finals(done, self._final_obs(done), self._final_infos(done, ended_infos))
        reset_infos = self._autoreset_envs(done)
        b.needs_reset[done] = False
        if not any(step_infos) and not any(reset_infos):
            return [finals]
        resets = iter(reset_infos or repeat({}))
        infos = [next(resets) if over else info for info, over in zip(step_infos or repeat({}), overs)]
        return _with_finals(self._listed(ids), infos, finals)

    def _finished(self, ids: np.ndarray, infos: list[dict], finals: Finals) -> InfoEntries:
        """:meth:`_finish` where the engine reset the envs that ended already (:meth:`_step_in_turn`): none needs
        a reset."""
        if ids is not self._clean:
            self.buffers.needs_reset[self._run(ids)] = False
            self._clean = ids
        return _with_finals(self._listed(ids), infos, finals)


def _with_finals(ids: list[int], infos: list[dict], finals: Finals) -> InfoEntries:
    """The info entries of envs ``ids`` (one info each, an ended env's that of its reset; or an empty list: none
    has any), with ``finals`` where the first env that ended is."""
    if not any(infos):
        return [finals]
    first = int(finals.ids[0])
    entries: InfoEntries = []
    for env_id, info in zip(ids, infos):
        if env_id == first:
            entries.append(finals)
        if info:
            entries.append((env_id, info))
    return entries


def _entries(ids: list[int], infos: list[dict]) -> InfoEntries:
    """The info entries of envs ``ids`` whose info (one per env, or an empty list: none has any) is not empty."""
    return [(i, info) for i, info in zip(ids, infos) if info] if any(infos) else []


def run_of(ids: np.ndarray) -> slice | np.ndarray:
    """Sorted, distinct env ids as a slice when they are consecutive (a group, the usual case): indexing a buffer
    with it is a view, not a gather, which counts with thousands of envs per group (batch-native envs)."""
    n = len(ids)
    if n and int(ids[-1]) - int(ids[0]) == n - 1:
        return slice(int(ids[0]), int(ids[-1]) + 1)
    return ids


def split_by(ids: np.ndarray, keys: np.ndarray) -> tuple[list[int], list[np.ndarray]]:
    """``ids`` (sorted) cut where ``keys`` (one per id, in runs: a group's, a unit's) changes: each run's key, and its
    ids."""
    if not len(ids):
        return [], []
    if keys[0] == keys[-1]:
        return [int(keys[0])], [ids]
    cuts = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    return keys[np.concatenate(([0], cuts))].tolist(), np.split(ids, cuts)


def _env_of(entry: Entry) -> int:
    return int(entry.ids[0]) if isinstance(entry, Finals) else entry[0]  # (a Block's first field is its first env)
