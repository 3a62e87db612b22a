"""Gymnasium's own vector envs as engines: ``shoal.make(lambda: CartPoleVectorEnv(num_envs=1024), 8)``.

A Gymnasium ``VectorEnv`` that simulates its sub-envs together (Gymnasium's ``CartPoleVectorEnv``, an env written in
numpy behind Gymnasium's vector API) is one unit of ``m`` rows, ``m`` being its ``num_envs``: shoal hosts ``n`` of
them, each worker stepping its share in one call each, and the vector env has ``n * m`` rows. Such an env steps all
its sub-envs at once and starts their next episodes itself, in its own autoreset mode (``metadata["autoreset_mode"]``),
which the shoal vector env must share. So groups, asynchronous batches and workers' shares are whole units
(``rows_per_env``), a partial reset of some of a unit's rows is the env's own ``reset(options={"reset_mask": ...})``
(Gymnasium's API for disabled autoreset; one that changes the unit's other rows is refused), and action sequences,
which stop each env where its episode ends, are refused. The env's outputs are checked as any env's are: an
:class:`~shoal.errors.EnvOutputError` names the row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence, cast

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv as GymVectorEnv
from gymnasium.vector.utils import batch_space

from shoal.errors import ConfigError, EnvOutputError
from shoal.spaces import Layout
from shoal.vector.buffers import Buffers
from shoal.vector.checks import parse_autoreset_mode
from shoal.vector.commands import InfoEntries, Sequences
from shoal.vector.engine import Engine, close_all, env_error, run_of, split_by
from shoal.vector.gym_engine import standalone
from shoal.vector.infos import Block, Finals, check_block, owned, unbatch_info

FINAL_KEYS = frozenset(("final_obs", "_final_obs", "final_info", "_final_info"))
"""The keys with which a same-step vector env hands out its ended envs' last observations and infos."""


def own_mode(env: GymVectorEnv) -> AutoresetMode:
    """The autoreset mode ``env`` applies itself (Gymnasium's default, next-step, where its metadata names none)."""
    return parse_autoreset_mode((getattr(env, "metadata", None) or {}).get("autoreset_mode", AutoresetMode.NEXT_STEP))


def check_hostable(env: GymVectorEnv, autoreset_mode: AutoresetMode) -> None:
    """Refuse, with the reason, a vector env shoal cannot host: spaces with leaves of no fixed size (the rows are
    written in place), or an autoreset mode other than the vector env's own."""
    name = type(env).__name__
    for what in ("observation", "action"):
        space = getattr(env, f"single_{what}_space", None)
        if not isinstance(space, spaces.Space):
            raise ConfigError(f"{name} (a Gymnasium VectorEnv) has no single_{what}_space, got {space!r}")
        if Layout(space).loose:
            raise ConfigError(
                f"{name}'s single {what} space {space} has leaves without a fixed size: a hosted Gymnasium VectorEnv "
                f"writes whole batches into shared memory, so its spaces must be Box/Discrete/MultiDiscrete/"
                f"MultiBinary (and Dict/Tuple of them)"
            )
    mode = own_mode(env)
    if mode is not autoreset_mode:
        raise ConfigError(
            f"{name} (a Gymnasium VectorEnv) starts its sub-envs' next episodes itself, in its autoreset mode "
            f"{mode.name.lower()!r} (its metadata['autoreset_mode']); make the shoal vector env with "
            f"autoreset_mode={mode.name.lower()!r}, got {autoreset_mode.name.lower()!r}"
        )


@dataclass
class HostedEngineFactory:
    """Builds the engine of a group of units (whole vector envs); pickled (with cloudpickle) into each worker."""

    env_fns: Sequence[Callable[[], GymVectorEnv]]
    rows: int
    """Sub-envs per vector env (env 0's ``num_envs``): unit ``u`` is rows ``u * rows`` to ``(u + 1) * rows - 1``."""
    single_observation_space: spaces.Space
    single_action_space: spaces.Space

    no_sequences: ClassVar[str] = (
        "action sequences stop each env where its episode ends, and a hosted Gymnasium VectorEnv steps all its "
        "sub-envs in one call: step them one action at a time"
    )
    """Why its engines refuse action sequences: the vector env refuses them in ``send`` with this."""

    def __call__(self, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode) -> HostedEngine:
        return HostedEngine(self, env_ids, buffers, autoreset_mode)


class HostedEngine(Engine):
    """Hosts rows ``env_ids`` (whole units) as the sub-envs of Gymnasium vector envs, one call per unit."""

    def __init__(
        self, factory: HostedEngineFactory, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode
    ) -> None:
        super().__init__(env_ids, buffers, autoreset_mode)
        m = self._m = factory.rows
        self._first = env_ids.start // m
        self._obs, self._action = buffers.spec.obs, buffers.spec.action
        self._batch_obs = batch_space(factory.single_observation_space, m)
        self._checked = {"reset": False, "step": False}  # every value checked against the space on the first of each
        self._blocks: list[Block] = []  # the infos of the units a command stepped or reset whole, in vector form
        self.envs: list[GymVectorEnv] = []
        try:
            for unit in range(self._first, env_ids.stop // m):
                self.envs.append(self._made(factory, unit))
        except BaseException:
            close_all((None, env) for env in self.envs)
            raise

    def _made(self, factory: HostedEngineFactory, unit: int) -> GymVectorEnv:
        first = unit * self._m
        try:
            env = factory.env_fns[unit]()
        except Exception as exc:
            raise env_error(first, exc, f"vector env {unit} (rows {first}..{first + self._m - 1})") from exc
        try:
            self._check_unit(factory, unit, env)
        except BaseException:
            close = getattr(env, "close", None)
            if callable(close):
                close()
            raise
        return env

    def _check_unit(self, factory: HostedEngineFactory, unit: int, env: Any) -> None:
        """Refuse a unit that is not a vector env like env 0's (its count of sub-envs, its spaces, its mode)."""
        name = type(env).__name__
        if not isinstance(env, GymVectorEnv):
            raise ConfigError(f"env constructor {unit} returned a {name}, where env 0's returned a Gymnasium VectorEnv")
        if env.num_envs != self._m:
            raise ConfigError(f"vector env {unit} ({name}) has {env.num_envs} sub-envs, env 0's {self._m}")
        for what, mine in (("observation", factory.single_observation_space),
                           ("action", factory.single_action_space)):
            theirs = getattr(env, f"single_{what}_space")
            if theirs != mine:
                raise ConfigError(f"vector env {unit} ({name}) has single {what} space {theirs}, env 0's {mine}")
        check_hostable(env, self.autoreset_mode)

    # -- the units of a batch of rows -----------------------------------------------------------------------------

    def _units(self, ids: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """``(unit, its rows among ids)`` for each unit that ``ids`` (sorted) touch."""
        units, parts = split_by(ids, ids // self._m)
        return list(zip(units, parts))

    def _whole(self, ids: np.ndarray, what: str) -> list[tuple[int, np.ndarray]]:
        """The units of ``ids``, which must be whole (groups and batches are: a vector env steps all its sub-envs)."""
        first, m = int(ids[0]), self._m
        if first % m == 0 and len(ids) % m == 0 and isinstance(self._run(ids), slice):  # a group: consecutive units
            return [(first // m + k, ids[k * m : (k + 1) * m]) for k in range(len(ids) // m)]
        parts = self._units(ids)
        if any(len(rows) != m for _, rows in parts):
            raise ConfigError(f"{what} of some of a hosted Gymnasium VectorEnv's sub-envs: it steps them all at once")
        return parts

    def _name(self, unit: int) -> str:
        first = unit * self._m
        kind = type(self.envs[unit - self._first]).__name__
        return f"vector env {unit} ({kind}, rows {first}..{first + self._m - 1})"

    # -- commands: the infos of whole units go back as they came ------------------------------------------------------

    def reset(self, ids: np.ndarray, seeds: Sequence[int | None], options: dict | None) -> InfoEntries:
        self._blocks = []
        entries = super().reset(ids, seeds, options)
        return [*entries, *self._blocks] if self._blocks else entries

    def step(self, ids: np.ndarray, loose_actions: Sequence[tuple] | None = None,
             actions: np.ndarray | None = None) -> InfoEntries:
        """The base step (autoreset written once), with each unit's infos as one :class:`Block` of its rows: a dict
        per row cost a unit of 2048 sub-envs with one info ~10 times its step."""
        self._blocks = []
        entries = super().step(ids, loose_actions, actions)
        return [*entries, *self._blocks] if self._blocks else entries

    # -- primitives -----------------------------------------------------------------------------------------------

    def _reset_envs(self, ids: np.ndarray, seeds: Sequence[int | None], options: dict | None) -> list[dict]:
        infos: list[tuple[int, list[dict]]] = []
        at = 0
        for unit, rows in self._units(ids):
            unit_seeds = list(seeds[at : at + len(rows)])
            at += len(rows)
            env, local = self.envs[unit - self._first], rows - unit * self._m
            if len(rows) == self._m:
                seed, unit_options = _unit_seed(unit_seeds), options
            else:  # Gymnasium's partial reset; the seeds of the others are None
                full: list[int | None] = [None] * self._m
                for j, s in zip(local.tolist(), unit_seeds):
                    full[j] = s
                mask = np.zeros(self._m, np.bool_)
                mask[local] = True
                seed = None if unit_seeds.count(None) == len(unit_seeds) else full
                unit_options = {**(options or {}), "reset_mask": mask}
            try:
                result = env.reset(seed=seed, options=unit_options)  # type: ignore[arg-type]  # (a list: Gymnasium's
                # Sync and Async vector envs take one seed per sub-env, though VectorEnv's annotation says int)
            except Exception as exc:
                raise env_error(int(rows[0]), exc, self._name(unit), " in reset()") from exc
            if type(result) not in (tuple, list) or len(result) != 2:
                raise self._bad(unit, "reset", f"expected (obs, info), got {type(result).__name__}")
            obs, info = result
            batch = self._write_obs(unit, rows, None if len(rows) == self._m else local, obs, "reset")
            if len(rows) < self._m:
                self._check_kept(unit, local, batch)
            if not self._has_infos(unit, info, "reset"):
                continue
            if len(rows) == self._m:
                self._block(unit, info, "reset")
            else:
                per_env = self._unbatched(unit, info, "reset")
                infos.append((at - len(rows), [per_env[j] for j in local.tolist()]))
        return _placed(len(ids), infos)

    def _step_envs(self, ids: np.ndarray, actions: np.ndarray) -> list[dict]:
        self._step_units(ids, actions)
        return []  # (the units' infos are blocks)

    def _step_units(self, ids: np.ndarray, actions: np.ndarray) -> list[Finals]:
        """Step the units of ``ids`` (whole) with their rows of ``actions``, their infos kept as blocks; in same-step
        mode, the :class:`Finals` of each unit whose sub-envs ended."""
        b, m = self.buffers, self._m
        finals: list[Finals] = []
        for k, (unit, rows) in enumerate(self._whole(ids, "a step")):
            env = self.envs[unit - self._first]
            batch = actions[k * m : (k + 1) * m]
            try:
                result = env.step(self._action.read(batch) if self._action.structured else batch)
            except Exception as exc:
                raise env_error(int(rows[0]), exc, self._name(unit), " in step()") from exc
            if type(result) not in (tuple, list) or len(result) != 5:
                raise self._bad(unit, "step", f"expected (obs, rewards, terminations, truncations, info), got "
                                              f"{type(result).__name__}")
            obs, rewards, terminations, truncations, info = result
            at = slice(int(rows[0]), int(rows[-1]) + 1)
            b.rewards[at] = self._column(unit, "rewards", rewards, np.number)
            b.terminations[at] = self._column(unit, "terminations", terminations, np.bool_)
            b.truncations[at] = self._column(unit, "truncations", truncations, np.bool_)
            self._write_obs(unit, rows, None, obs, "step")
            if self.autoreset_mode is AutoresetMode.SAME_STEP and isinstance(info, dict) and "_final_obs" in info:
                finals.append(self._finals(unit, rows, info))
                info = {key: value for key, value in info.items() if key not in FINAL_KEYS}
            if self._has_infos(unit, info, "step"):
                self._block(unit, info, "step")
        return finals

    def _step_in_turn(self, ids: np.ndarray, actions: Any) -> tuple[list[dict], Finals | None]:
        """Same-step: the vector envs reset their ended sub-envs themselves, handing out their last observations and
        infos (``final_obs``, ``final_info``)."""
        finals = self._step_units(ids, actions)
        ended = self._episode_over(ids)
        if not ended.any():
            return [], None
        done = ids[ended]
        if not finals or not np.array_equal(np.concatenate([f.ids for f in finals]), done):
            unit = int(done[0]) // self._m
            raise self._bad(unit, "step", "in same-step mode, expected info['final_obs'] (and its mask '_final_obs') "
                                          "for exactly the sub-envs that terminated or truncated")
        obs = [value for f in finals for value in cast(list, f.obs)]  # (_finals' lists)
        final_infos = [info for f in finals for info in (f.infos or [{}] * len(f.ids))]
        return [], Finals(done, obs, final_infos if any(final_infos) else [])

    def _advance_envs(self, ids: np.ndarray, actions: Any, ended: np.ndarray) -> list[dict]:
        """Next-step: one call of each vector env, which resets the sub-envs that ended last call itself."""
        return self._step_envs(ids, actions)

    def _autoreset_envs(self, ids: np.ndarray) -> list[dict]:
        """Next-step, every sub-env of these units having ended: their call resets them all (the actions, this
        step's in the buffers, are ignored)."""
        return self._step_envs(ids, self.buffers.actions[self._run(ids)])

    def step_sequences(self, ids: np.ndarray, seqs: Sequences) -> Any:
        raise ConfigError(HostedEngineFactory.no_sequences)  # (the vector env refuses them before they come here)

    # -- outputs --------------------------------------------------------------------------------------------------

    def _bad(self, unit: int, what: str, detail: str, row: int | None = None) -> EnvOutputError:
        row = unit * self._m if row is None else row
        return EnvOutputError(f"{self._name(unit)} returned bad data from {what}(): {detail}", env_id=row)

    def _column(self, unit: int, what: str, values: Any, kind: type) -> np.ndarray:
        """``values``, one per sub-env, of dtype ``kind`` (``np.number``: rewards, which must also be finite;
        ``np.bool_``: flags), or an :class:`EnvOutputError`."""
        array = np.asarray(values)
        if array.shape != (self._m,) or not np.issubdtype(array.dtype, kind):
            raise self._bad(unit, "step", f"expected {what} as an array of shape ({self._m},) of "
                                          f"{'bools' if kind is np.bool_ else 'numbers'}, got "
                                          f"{type(values).__name__} of shape {array.shape} and dtype {array.dtype}")
        if kind is np.number and not np.isfinite(array).all():
            j = int(np.flatnonzero(~np.isfinite(array))[0])
            row = unit * self._m + j
            raise self._bad(unit, "step", f"sub-env {j} (row {row}) returned reward {array[j]}", row)
        return array

    def _write_obs(self, unit: int, rows: np.ndarray, local: np.ndarray | None, obs: Any, what: str) -> np.ndarray:
        """Write the observations of sub-envs ``local`` (rows ``rows``; None: all of them) out of the unit's whole
        batch ``obs``; that batch as the buffers hold it (records)."""
        if not self._checked[what] and not self._batch_obs.contains(obs):
            raise self._bad(unit, what, f"observations outside {self._batch_obs}")
        try:
            if self._obs.structured:  # leaf by leaf into records, each of the batch's shape (none broadcast)
                records = self._obs.empty(self._m)
                for path, _, view in self._obs.leaf_views(records):
                    leaf = obs
                    for key in path:
                        leaf = leaf[key]
                    _same_shape(np.asarray(leaf), view.shape, path)
                    view[:] = leaf
                obs = records
            else:
                obs = np.asarray(obs)
                _same_shape(obs, (self._m, *self._obs.item_shape), ())
                obs = obs.astype(self._obs.item_dtype, copy=False)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise self._bad(unit, what, f"observations not of {self._batch_obs} ({exc})") from None
        self._checked[what] = True
        b = self.buffers
        b.obs[run_of(np.asarray(b.target_rows(rows)))] = obs if local is None else obs[local]
        return obs

    def _check_kept(self, unit: int, local: np.ndarray, batch: np.ndarray) -> None:
        """A partial reset of sub-envs ``local`` left the others' observations as they were: else the vector env
        does not take Gymnasium's ``reset_mask`` (``CartPoleVectorEnv`` resets every sub-env whatever it says), and
        its state no longer matches the rows."""
        others = np.setdiff1d(np.arange(self._m), local)
        b = self.buffers
        if batch[others].tobytes() != b.obs[b.obs_rows(unit * self._m + others)].tobytes():
            raise self._bad(unit, "reset", f"a reset with options['reset_mask'] of sub-envs {local.tolist()} changed "
                                           f"the observations of others: it does not take Gymnasium's partial "
                                           f"resets, so reset all {self._m} rows of a unit at once")

    def _has_infos(self, unit: int, info: Any, what: str) -> bool:
        """Whether the unit's ``info`` (checked: a dict) holds any."""
        if not isinstance(info, dict):
            raise self._bad(unit, what, f"expected info as a dict, got {type(info).__name__}")
        return bool(info)

    def _block(self, unit: int, info: dict, what: str) -> None:
        """Keep the unit's vector-form ``info`` (checked) as the :class:`Block` of its rows."""
        try:
            check_block(info, self._m)
        except ValueError as exc:
            raise self._not_vector_form(unit, what, exc) from None
        self._blocks.append(Block(unit * self._m, self._m, info))

    def _unbatched(self, unit: int, info: dict, what: str) -> list[dict]:
        """The unit's vector-form ``info`` as one dict per sub-env (:func:`unbatch_info`), or an
        :class:`EnvOutputError` naming the unit where it is not in that form."""
        try:
            return unbatch_info(info, self._m)
        except (TypeError, ValueError, IndexError, KeyError) as exc:
            raise self._not_vector_form(unit, what, exc) from None

    def _not_vector_form(self, unit: int, what: str, exc: Exception) -> EnvOutputError:
        return self._bad(unit, what, f"info not in Gymnasium's vector form ({exc})")

    def _finals(self, unit: int, rows: np.ndarray, info: dict) -> Finals:
        """The ended sub-envs of a same-step call, their last observations and infos out of ``info``."""
        mask = np.asarray(info["_final_obs"], np.bool_)
        if mask.shape != (self._m,) or "final_obs" not in info:
            raise self._bad(unit, "step", "expected info['final_obs'] with its mask '_final_obs', one bool a sub-env")
        ended = np.flatnonzero(mask).tolist()
        obs = [standalone(info["final_obs"][j]) for j in ended]  # (they outlive the vector env's next call)
        final_info = info.get("final_info")
        per_env = self._unbatched(unit, final_info, "step") if final_info else []
        return Finals(rows[ended], obs, [owned(per_env[j]) for j in ended] if per_env else [])

    # -- calls ----------------------------------------------------------------------------------------------------

    def call(self, ids: np.ndarray, name: str, args: tuple, kwargs: dict) -> list[Any]:
        """``name`` called (or read) on each unit, its result given to each of the unit's rows; ``render`` returns one
        frame per sub-env (Gymnasium's ``VectorEnv.render``), so each row gets its own."""
        results: list[Any] = []
        for unit, rows in self._units(ids):
            env = self.envs[unit - self._first]
            try:
                value = name(env, *args, **kwargs) if callable(name) else getattr(env, name)
                if not callable(name) and callable(value):
                    value = value(*args, **kwargs)
            except Exception as exc:
                raise env_error(int(rows[0]), exc, self._name(unit), " in call()") from exc
            results += self._per_row(value, unit, rows, name == "render")
        return results

    def get_attr(self, ids: np.ndarray, name: str) -> list[Any]:
        """Each unit's attribute, given to each of its rows; a unit that keeps ``np_random``/``np_random_seed`` per
        sub-env (Gymnasium's Sync/AsyncVectorEnv: a tuple of them) gives each row its own."""
        results: list[Any] = []
        for unit, rows in self._units(ids):
            value = getattr(self.envs[unit - self._first], name)
            results += self._per_row(value, unit, rows, name in ("np_random", "np_random_seed"))
        return results

    def _per_row(self, value: Any, unit: int, rows: np.ndarray, per_sub_env: bool) -> list[Any]:
        """``value`` of ``unit`` for each of its ``rows``: its own item where ``value`` has one per sub-env."""
        if per_sub_env and isinstance(value, (list, tuple, np.ndarray)) and len(value) == self._m:
            return [value[j] for j in (rows - unit * self._m).tolist()]
        return [value] * len(rows)

    def set_attr(self, ids: np.ndarray, name: str, values: list[Any]) -> None:
        """Each unit's attribute set once, to the value of the last of its rows named (a unit has one)."""
        at = 0
        for unit, rows in self._units(ids):
            at += len(rows)
            setattr(self.envs[unit - self._first], name, values[at - 1])

    def close(self) -> None:
        close_all((unit * self._m, env) for unit, env in enumerate(self.envs, self._first))


def _placed(n: int, parts: list[tuple[int, list[dict]]]) -> list[dict]:
    """One info per env of a batch of ``n``, from ``(offset, infos)`` parts (an empty list: no part)."""
    if not parts:
        return []
    infos: list[dict] = [{}] * n
    for at, part in parts:
        infos[at : at + len(part)] = part
    return infos


def _same_shape(array: np.ndarray, shape: tuple[int, ...], path: tuple) -> None:
    if array.shape != shape:
        at = f" at {list(path)}" if path else ""
        raise ValueError(f"expected a batch of shape {shape}{at}, got {array.shape}")


def _unit_seed(seeds: list[int | None]) -> int | list[int | None] | None:
    """What a vector env's ``reset(seed=...)`` gets for its sub-envs' seeds: None, the first seed where they count up
    from it (Gymnasium's vector envs give sub-env ``j`` seed ``seed + j``), else the list."""
    if seeds.count(None) == len(seeds):
        return None
    first = seeds[0]
    if isinstance(first, int) and seeds == list(range(first, first + len(seeds))):
        return first
    return seeds
