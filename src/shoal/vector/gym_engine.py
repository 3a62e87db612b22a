"""The engine for any Gymnasium env: a list of envs stepped one after another, results written in place."""

from __future__ import annotations

import copy
import inspect
import sys
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
from gymnasium import Env, spaces
from gymnasium.vector import AutoresetMode
from gymnasium.spaces.utils import is_space_dtype_shape_equiv

from shoal.errors import ConfigError, SpaceMismatchError
from shoal.vector._rows import RowWriter
from shoal.vector.buffers import Buffers, item_writers
from shoal.vector.engine import Engine, blame, close_all, env_error
from shoal.vector.infos import Finals, owned
from shoal.vector.outputs import (
    RESET_RESULT,
    STEP_RESULT,
    Rejected,
    check_flag,
    check_reward,
    observation_check,
    rejected,
    unexpected_result,
)



def refuse_foreign(env: Any, came: str = "from the env constructor") -> None:
    """Raise :class:`ConfigError` saying what ``env`` (which ``came`` as the user gave it) is when it is not a
    single-agent Gymnasium env shoal can step (a PettingZoo env, an env of the old ``gym`` package, something without
    spaces)."""
    module = type(env).__module__ or ""
    name = type(env).__name__
    if module.split(".")[0] == "pettingzoo" or hasattr(env, "possible_agents"):
        pettingzoo = sys.modules.get("pettingzoo.utils.env")  # loaded if env is one of its envs
        kind = "multi-agent env"
        if pettingzoo is not None and isinstance(env, pettingzoo.AECEnv):
            kind = "AECEnv"
        elif pettingzoo is not None and isinstance(env, pettingzoo.ParallelEnv):
            kind = "ParallelEnv"
        raise ConfigError(
            f"{name} is a PettingZoo {kind} (a multi-agent env) where a single-agent gymnasium.Env was expected: "
            f"shoal.make vectorizes PettingZoo envs with agents as rows when given a callable that makes one (e.g. "
            f"pistonball_v6.parallel_env), and one vector env holds one kind of env (env 0's)"
        )
    if module.split(".")[0] == "gym":
        raise ConfigError(
            f"{name} is an env of the old `gym` package; shoal needs a gymnasium.Env. Convert it with Shimmy "
            f"(pip install shimmy; gymnasium.make('GymV26Environment-v0', env=...)) or port it to gymnasium"
        )
    if not (hasattr(env, "observation_space") and hasattr(env, "action_space") and hasattr(env, "step")):
        raise ConfigError(
            f"expected a gymnasium.Env (with observation_space, action_space, reset and step) {came}, got {name} "
            f"from module {module or '?'}"
        )
    for which in ("observation_space", "action_space"):
        space = getattr(env, which)
        if not isinstance(space, spaces.Space):
            raise ConfigError(
                f"{name}.{which} is {type(space).__name__} {space!r:.60}, not a gymnasium Space (e.g. "
                f"gymnasium.spaces.Box(low, high, shape))"
            )


_MODE_TEXT = {"different": "'different'", "custom": "(batched space, single space)"}  # as the user wrote it


@dataclass(frozen=True)
class GymEngineFactory:
    """Builds the engine for a group of envs; pickled (with cloudpickle) into each worker."""

    env_fns: Sequence[Callable[[], Env]]
    single_observation_space: spaces.Space
    single_action_space: spaces.Space
    observation_mode: str = "same"
    """``"same"`` (spaces equal env 0's), ``"different"`` or ``"custom"`` (equal in dtype and shape)."""
    caller: str = "shoal.make"
    """What the user called (errors about the sub-envs name it)."""

    infos_per_env: ClassVar[bool] = True
    """Its envs return an info dict each a step: worker processes carry the numeric ones in an info table
    (:mod:`shoal.vector.info_table`)."""

    def __call__(self, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode) -> GymEngine:
        return GymEngine(self, env_ids, buffers, autoreset_mode)


def standalone(obs: Any) -> Any:
    """A copy of ``obs`` that nothing else holds (``info["final_obs"]`` outlives the reset that follows), or ``obs``
    itself where it cannot be copied (a custom space's value holding a handle, say: as Gymnasium hands it out)."""
    if type(obs) is np.ndarray and obs.dtype != object:  # the common case: a whole copy, ~20 times deepcopy's speed
        return obs.copy()
    try:
        return copy.deepcopy(obs)
    except Exception:
        return obs


def needs_options(env: Env) -> bool:
    """Whether ``env.reset`` must be passed ``options`` on every reset, as Gymnasium's vector envs pass it: it takes
    them with no default (``reset(self, seed, options)``) or takes ``**kwargs``. Other envs get ``options`` only when
    there are some, as SB3 passes them: one written with a default (Gymnasium's signature) sees no difference and
    its wrappers pass one argument less, and one written without it (``reset(self, seed=None)``, as SB3's tests
    write some) works until options are given, then raises its own TypeError."""
    try:
        parameters = inspect.signature(env.reset).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a method written in C): Gymnasium's call
        return True
    return any(p.kind is p.VAR_KEYWORD or p.name == "options" and p.default is p.empty for p in parameters)


def _slow_path(*results: Any) -> int:
    """``put`` and ``put_obs`` where no RowWriter serves: nothing written, every step takes the slow path."""
    return 0


class GymEngine(Engine):
    """Hosts the envs ``factory.env_fns[i]`` for ``i`` in ``env_ids``."""

    def __init__(
        self, factory: GymEngineFactory, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode
    ) -> None:
        super().__init__(env_ids, buffers, autoreset_mode)
        self.envs: list[Env] = []
        made: dict[int, int] = {}  # each env object's env id: a constructor must not hand out one object twice
        for i in env_ids:
            with blame(i):
                env = factory.env_fns[i]()
            if id(env) in made:
                raise ConfigError(
                    f"env_fns[{i}] returned the same env object as env_fns[{made[id(env)]}]: each function must "
                    f"make a new env (lambda: gym.make(...), not lambda: env), or the two would step as one"
                )
            made[id(env)] = i
            self.envs.append(env)
            self._check_spaces(i, env, factory)
        self._with_options = [needs_options(env) for env in self.envs]
        self._obs = buffers.spec.obs
        self._action = buffers.spec.action
        self._write_obs = self._obs.row_writer(buffers.obs, self.loose_obs)
        self._scalars = item_writers(buffers.rewards, buffers.terminations, buffers.truncations)
        self._check_obs = observation_check(self._obs)
        self._put, self._put_obs = self._fast_writers(buffers)
        self._finals: dict[int, Any] = {}  # the observation each env returned when its episode ended (same-step)

    def _fast_writers(self, b: Buffers) -> tuple[Callable[..., int], Callable[[int, Any], int]]:
        """``put(row, env_id, obs, reward, terminated, truncated)`` and ``put_obs(row, obs)`` (a reset's): they write
        results that are exactly what the buffers hold in one C call and return 2 (``put``: the episode ended) or 1,
        and return 0, with nothing written, for anything else (shoal.vector._rows). Loose leaves (Text, Graph, ...)
        are kept as they come, as the slow path keeps them, once the C call has taken the rest."""
        try:
            writer = RowWriter(self._obs.writer_leaves(b.obs), b.rewards, b.terminations, b.truncations)
        except ValueError:  # a leaf it cannot take (a key neither str nor int)
            return _slow_path, _slow_path
        if not self._obs.loose:
            return writer.put, writer.put_obs
        keep, sink = self._obs.loose_values, self.loose_obs

        def put(row: int, env_id: int, obs: Any, reward: Any, terminated: Any, truncated: Any) -> int:
            written = writer.put(row, env_id, obs, reward, terminated, truncated)
            if written:
                sink[row] = keep(obs)
            return written

        def put_obs(row: int, obs: Any) -> int:
            written = writer.put_obs(row, obs)
            if written:
                sink[row] = keep(obs)
            return written

        return put, put_obs

    def _check_spaces(self, env_id: int, env: Env, factory: GymEngineFactory) -> None:
        refuse_foreign(env)
        same = factory.observation_mode == "same"
        space = factory.single_observation_space
        if not (env.observation_space == space if same else is_space_dtype_shape_equiv(env.observation_space, space)):
            mode = _MODE_TEXT.get(factory.observation_mode, "'same'")
            hint = " (that of env 0). If this is intentional, use `observation_mode='different'` instead."
            raise SpaceMismatchError(
                f"{factory.caller}(..., observation_mode={mode}) however the sub-environments observation spaces are "
                f"not equivalent. env {env_id} has {env.observation_space}, expected {space}"
                + (hint if same else " in dtype and shape.")
            )
        if env.action_space != factory.single_action_space:
            raise SpaceMismatchError(
                f"{factory.caller}(...) however the sub-environments action spaces are not equivalent: env {env_id} "
                f"has {env.action_space}, expected {factory.single_action_space} (that of env 0); every env of one "
                f"vector env takes the same actions"
            )

    def _env(self, env_id: int) -> Env:
        return self.envs[env_id - self.env_ids.start]

    def _check_step(self, env_id: int, obs: Any, reward: Any, terminated: Any, truncated: Any, info: Any) -> None:
        """The full checks of a step's results (raises if they are bad)."""
        try:
            self._check_obs(obs)
            check_reward(reward)
            check_flag(terminated, "terminated")
            check_flag(truncated, "truncated")
            if not isinstance(info, dict):
                raise Rejected(f"expected info as a dict, got {type(info).__name__}")
        except Rejected as bad:
            raise rejected(env_id, self._env(env_id), bad, "step") from None

    def _reset_envs(self, ids: np.ndarray, seeds: Sequence[int | None], options: dict | None) -> list[dict]:
        rows = self.buffers.target_rows(ids).tolist()
        return [self._reset(env_id, row, seed, options) for env_id, row, seed in zip(ids.tolist(), rows, seeds)]

    def _reset(self, env_id: int, row: int, seed: int | None, options: dict | None) -> dict:
        """Reset one env and write its observation to ``row`` (by ``put_obs`` if it is exactly what the buffers hold,
        else checked in full, then by numpy); its info."""
        k = env_id - self.env_ids.start
        env = self.envs[k]
        try:  # not blame(): a context manager costs more than the reset of a cheap env
            if options is None and not self._with_options[k]:
                result = env.reset(seed=seed)
            else:
                result = env.reset(seed=seed, options=options)
        except Exception as exc:
            raise env_error(env_id, exc) from exc
        if type(result) not in (tuple, list) or len(result) != 2:  # (an observation of two values would unpack)
            raise rejected(env_id, env, unexpected_result(result, RESET_RESULT), "reset")
        obs, info = result
        try:
            if type(info) is dict and self._put_obs(row, obs):
                return info
            self._check_obs(obs)
            if type(info) is not dict:
                raise Rejected(f"expected info as a dict, got {type(info).__name__}")
            self._write_obs(row, obs)
        except Rejected as bad:
            raise rejected(env_id, env, bad, "reset") from None
        except Exception as exc:  # what numpy refused or warned of as an error: say which env and why
            raise env_error(env_id, exc) from exc
        return info

    def _step_envs(self, ids: np.ndarray, actions: np.ndarray) -> list[dict]:
        return self._advance_envs(ids, actions, None)

    def _step_in_turn(self, ids: np.ndarray, actions: Any) -> tuple[list[dict], Finals | None]:
        # each env that ends its episode resets right after its step, before the next env steps (Gymnasium's
        # order), and the batch needs no second pass over the envs that ended
        ended: list[tuple[int, Any, dict]] = []
        infos = self._advance_envs(ids, actions, None, ended)
        if not ended:
            return infos, None
        done, obs, final_infos = zip(*ended)
        return infos, Finals(np.array(done, ids.dtype), list(obs), list(final_infos) if any(final_infos) else [])

    def _advance_envs(
        self,
        ids: np.ndarray,
        actions: Any,
        ended: np.ndarray | None,
        in_turn: list[tuple[int, Any, dict]] | None = None,
    ) -> list[dict]:
        # The hot loop: a few Python operations per env beyond env.step itself; an env that ended its episode last step
        # resets in its turn (``ended``; None: none did), and so, in same-step mode, does one that ends it now where
        # ``in_turn`` collects its final observation and info (else ``_finals`` keeps the observation and step() resets
        # it after the batch). A step's results are written by one C call when they are exactly what the buffers hold
        # (_fast_writers: arrays of the leaf's shape and dtype, Python or numpy floats and bools, ...); anything else,
        # and an info that is not a dict, gets the full checks (shoal.vector.outputs) before numpy writes it, so an
        # observation numpy would broadcast or cast with loss is an error naming the env on any step, not only the first
        # (seed 004 checks the first batch).
        b = self.buffers
        envs, first = self.envs, self.env_ids.start
        put, (rewards, terms, truncs) = self._put, self._scalars
        finals = self._finals if self.autoreset_mode is AutoresetMode.SAME_STEP else None
        if self._action.structured and isinstance(actions, np.ndarray):
            actions = [self._action.item(actions, row) for row in range(len(ids))]
        overs = repeat(False) if ended is None else ended.tolist()
        listed, targets = self._listed(ids), b.target_rows(ids)
        infos = []
        flagged = False
        for env_id, row, action, over in zip(listed, listed if targets is ids else targets.tolist(), actions, overs):
            if over:  # the autoreset: a reset with no seed or options is this env's whole step
                infos.append(self._reset(env_id, row, None, None))
                rewards[env_id] = 0.0
                terms[env_id] = truncs[env_id] = False
                continue
            # _step_one, written out (a call per env would cost ~0.7% of CartPole x 8's step)
            try:
                result = envs[env_id - first].step(action)
            except Exception as exc:
                raise env_error(env_id, exc) from exc
            try:  # (free unless it fails: no test on the hot path)
                obs, reward, terminated, truncated, info = result
            except (TypeError, ValueError):
                raise rejected(env_id, envs[env_id - first], unexpected_result(result, STEP_RESULT), "step") from None
            try:  # (a float64 past float32's range warns, as numpy's cast does: an error where warnings are)
                written = put(row, env_id, obs, reward, terminated, truncated) if isinstance(info, dict) else 0
            except Exception as exc:
                raise env_error(env_id, exc) from exc
            if not written:
                written = self._put_checked(env_id, row, obs, reward, terminated, truncated, info)
            if written == 2:  # the episode ended
                flagged = True
                if in_turn is not None:  # copies: an env may return the array or dict it keeps and change it in reset
                    in_turn.append((env_id, standalone(obs), owned(info)))
                    info = self._reset(env_id, row, None, None)
                elif finals is not None:
                    finals[env_id] = standalone(obs)
            infos.append(info)
        self._quiet = not flagged
        return infos

    def _step_one(self, env: Env, env_id: int, row: int, action: Any) -> tuple[int, Any, Any]:
        """Step ``env`` (env ``env_id``) with ``action`` and write its results to ``row``: 2 if its episode ended,
        else 1; the observation and info it returned. (:meth:`_advance_envs` has the same written out.)"""
        try:
            result = env.step(action)
        except Exception as exc:
            raise env_error(env_id, exc) from exc
        try:
            obs, reward, terminated, truncated, info = result
        except (TypeError, ValueError):
            raise rejected(env_id, env, unexpected_result(result, STEP_RESULT), "step") from None
        try:
            written = self._put(row, env_id, obs, reward, terminated, truncated) if isinstance(info, dict) else 0
        except Exception as exc:
            raise env_error(env_id, exc) from exc
        if not written:
            written = self._put_checked(env_id, row, obs, reward, terminated, truncated, info)
        return written, obs, info

    def _run_sequences(self, ids: np.ndarray, values: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                       gamma: float) -> list[dict]:
        # Each env runs its whole sequence in turn (envs are independent, so the order changes nothing), its sums kept
        # in Python floats, which round as the default's float64 arrays do.
        b = self.buffers
        envs, first, step_one, rewards = self.envs, self.env_ids.start, self._step_one, self._scalars[0]
        finals = self._finals if self.autoreset_mode is AutoresetMode.SAME_STEP else None
        listed = ids.tolist()
        targets = b.target_rows(ids)
        totals, taken, infos = [], [], []
        flagged = False
        for env_id, row, start, length in zip(listed, listed if targets is ids else targets.tolist(), starts.tolist(),
                                              lengths.tolist()):
            env, total, discount = envs[env_id - first], 0.0, 1.0
            info: Any = {}
            for i in range(start, start + length):
                written, obs, info = step_one(env, env_id, row, values[i])  # (sequences are of array spaces)
                total += discount * rewards[env_id]
                discount *= gamma
                if written == 2:  # the episode ended: the sequence stops here
                    flagged = True
                    if finals is not None:
                        finals[env_id] = standalone(obs)
                    break
            totals.append(total)
            taken.append(i - start + 1)
            infos.append(info)
        b.rewards[ids] = totals
        b.steps_taken[ids] = taken
        b.settle(ids)
        self._quiet = not flagged
        return infos if any(infos) else []

    def _put_checked(self, env_id: int, row: int, obs: Any, reward: Any, terminated: Any, truncated: Any,
                     info: Any) -> int:
        """What ``put`` did not take: the full checks (raises if the results are bad), then numpy's writes; 2 if the
        episode ended, else 1."""
        self._check_step(env_id, obs, reward, terminated, truncated, info)
        rewards, terms, truncs = self._scalars
        try:
            self._write_obs(row, obs)
            rewards[env_id] = reward
            terms[env_id] = terminated
            truncs[env_id] = truncated
        except Exception as exc:  # what the checks let through and numpy refused: say which env and why
            raise env_error(env_id, exc) from exc
        return 2 if terminated or truncated else 1

    def _final_obs(self, ids: np.ndarray) -> list[Any]:
        """What each env returned when its episode ended, as Gymnasium's ``info["final_obs"]`` holds it."""
        return [self._finals.pop(env_id) for env_id in ids.tolist()]

    def call(self, ids: np.ndarray, name: str, args: tuple, kwargs: dict) -> list[Any]:
        results = []
        for env_id in ids.tolist():
            with blame(env_id):
                if callable(name):  # a function to run on the env itself (VectorEnv.call_envs)
                    results.append(name(self._env(env_id), *args, **kwargs))
                    continue
                attr = self._env(env_id).get_wrapper_attr(name)
                results.append(attr(*args, **kwargs) if callable(attr) else attr)
        return results

    def get_attr(self, ids: np.ndarray, name: str) -> list[Any]:
        results = []
        for env_id in ids.tolist():
            with blame(env_id):
                results.append(self._env(env_id).get_wrapper_attr(name))
        return results

    def set_attr(self, ids: np.ndarray, name: str, values: list[Any]) -> None:
        for env_id, value in zip(ids.tolist(), values):
            with blame(env_id):
                self._env(env_id).set_wrapper_attr(name, value)

    def close(self) -> None:
        envs, self.envs = self.envs, []
        close_all(zip(self.env_ids, envs))
