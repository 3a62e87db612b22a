"""The engine for PettingZoo envs: each env's agents are consecutive rows (:mod:`shoal.multiagent.rows`).

The engine's ids are rows; a group always holds whole envs (the vector env cuts groups and batches in units of
``A`` rows), so a command's rows are whole envs and each env steps once with its live agents' actions. An env's
episode ends when every agent it returned terminated or truncated (or it returned none); then all its rows end
together and the engine's autoreset resets the env. An env that empties its ``agents`` list while an agent it
returned is neither is an ``EnvOutputError`` (PettingZoo's API forbids it; its rows would end with no flag).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode

from shoal.errors import ConfigError, EnvOutputError, ShoalError, SpaceMismatchError
from shoal.multiagent.rows import AgentRows
from shoal.spaces import Layout
from shoal.vector._rows import RowWriter
from shoal.vector.buffers import Buffers, item_writers
from shoal.vector.engine import Engine, blame, close_all, env_error
from shoal.vector.outputs import Rejected, check_flag, check_reward, observation_check

EXTRAS: dict[str, tuple[np.dtype, tuple[int, ...]]] = {
    "agent_mask": (np.dtype(np.bool_), ()),
    "env_index": (np.dtype(np.int64), ()),
    "agent_index": (np.dtype(np.int64), ()),
}
"""Per-row arrays in every step's infos: whether the row's agent is live this step, which env (of the ``num_envs``
given to ``shoal.make``) and which agent (index into ``possible_agents``) the row is."""


def is_pettingzoo(env: Any) -> bool:
    """Whether ``env`` is a PettingZoo env (AEC or Parallel)."""
    module = type(env).__module__ or ""
    if module.split(".")[0] == "pettingzoo":
        return True
    classes = sys.modules.get("pettingzoo.utils.env")  # loaded if env is a PettingZoo env: no import here
    return classes is not None and isinstance(env, (classes.AECEnv, classes.ParallelEnv))


def as_parallel(env: Any, name: str) -> Any:
    """``env`` as a PettingZoo ``ParallelEnv``: as it is, or converted from an AEC env (``aec_to_parallel`` when its
    metadata says ``is_parallelizable``, else ``turn_based_aec_to_parallel``: one agent acts per step, the others'
    actions are ignored, and the infos name the ``active_agent``)."""
    from pettingzoo import AECEnv, ParallelEnv
    from pettingzoo.utils.conversions import aec_to_parallel, turn_based_aec_to_parallel

    if isinstance(env, ParallelEnv):
        return env
    if not isinstance(env, AECEnv):
        raise ConfigError(f"{name}: expected a PettingZoo AECEnv or ParallelEnv, got {type(env).__name__}")
    convert = aec_to_parallel if (getattr(env, "metadata", None) or {}).get("is_parallelizable") else (
        turn_based_aec_to_parallel
    )
    try:
        return convert(env)
    except Exception as exc:
        raise ConfigError(
            f"{name} is an AECEnv that PettingZoo's {convert.__name__} could not convert to a ParallelEnv "
            f"({type(exc).__name__}: {exc}); shoal steps Parallel envs: pass a ParallelEnv constructor"
        ) from exc


_FIVE_DICTS = "expected five dicts (observations, rewards, terminations, truncations, infos)"


def _no_fast_path(*args: Any) -> None:
    """``put_agents`` where no RowWriter serves (loose leaves, one-hot flattening): every step is checked."""
    return None


@dataclass(frozen=True)
class PettingZooEngineFactory:
    """Builds the engine of a group of rows; pickled (with cloudpickle) into each worker."""

    env_fns: Sequence[Callable[[], Any]]
    rows: AgentRows

    def __call__(self, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode) -> PettingZooEngine:
        return PettingZooEngine(self, env_ids, buffers, autoreset_mode)


class PettingZooEngine(Engine):
    """Hosts the envs ``factory.env_fns[e]`` whose rows are ``env_ids`` (``A`` consecutive rows per env)."""

    def __init__(
        self, factory: PettingZooEngineFactory, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode
    ) -> None:
        super().__init__(env_ids, buffers, autoreset_mode)
        self.rows = rows = factory.rows
        a = rows.count
        self.first_env = env_ids.start // a
        self.envs: list[Any] = []
        for e in range(self.first_env, env_ids.stop // a):
            with blame(e):
                env = as_parallel(factory.env_fns[e](), f"env {e}")
            self.envs.append(env)
            self._check_spaces(e, env)
        layout = Layout(rows.observation_space)
        self._write = layout.row_writer(buffers.obs, self.loose_obs)
        self._checks = [observation_check(Layout(space)) for space in rows.observation_spaces]
        self._index = {agent: k for k, agent in enumerate(rows.agents)}
        self._over = np.zeros(len(self.envs), np.bool_)  # which envs ended their episode in their last step
        self._zero = layout.empty(1)[0]
        self._action = buffers.spec.action
        # None where every agent's action space is the rows' own (a row's action is then the agent's as it is)
        self._convert = None if all(space == rows.action_space for space in rows.action_spaces) else rows.action
        self._scalars = item_writers(
            buffers.extras["agent_mask"], buffers.rewards, buffers.terminations, buffers.truncations
        )
        self._put_agents = self._fast_writer(layout, buffers)
        mine = slice(env_ids.start, env_ids.stop)
        buffers.extras["env_index"][mine] = np.repeat(np.arange(self.first_env, self.first_env + len(self.envs)), a)
        buffers.extras["agent_index"][mine] = np.tile(np.arange(a), len(self.envs))

    def _fast_writer(self, layout: Layout, b: Buffers) -> Callable[..., Any]:
        """``put_agents(row, target, agents, observations, rewards, terminations, truncations, infos)``: an env's
        rows written in one C call when every value is exactly what the buffers hold, returning ``(infos, over)``,
        else None (shoal.vector._rows). Flattened observations are written by a writer per agent, whose leaves lie
        where ``gymnasium.spaces.flatten`` puts them in the row (:meth:`AgentRows.flat_leaves`); loose leaves, and
        flattening that is not a copy (one-hot Discretes), always take the slow path."""
        rows = self.rows
        per_row = (b.rewards, b.terminations, b.truncations)
        try:
            if rows.flat_observations:
                placed = [rows.flat_leaves(k, b.obs) for k in range(rows.count)]
                if all(leaves is not None for leaves in placed):
                    agents = [RowWriter(leaves, *per_row) for leaves in placed]
                    return RowWriter([], *per_row, b.extras["agent_mask"], agents).put_agents
            elif not layout.loose:
                return RowWriter(layout.leaf_views(b.obs), *per_row, b.extras["agent_mask"]).put_agents
        except ValueError:  # a leaf it cannot take (a key neither str nor int)
            pass
        return _no_fast_path

    def _check_spaces(self, e: int, env: Any) -> None:
        rows = self.rows
        agents = tuple(getattr(env, "possible_agents", ()) or ())
        if agents != rows.agents:
            raise SpaceMismatchError(f"env {e} has possible_agents {list(agents)}, env 0 has {list(rows.agents)}")
        for agent, obs_space, act_space in zip(agents, rows.observation_spaces, rows.action_spaces):
            if env.observation_space(agent) != obs_space or env.action_space(agent) != act_space:
                raise SpaceMismatchError(
                    f"env {e} agent {agent!r} has observation space {env.observation_space(agent)} and action space "
                    f"{env.action_space(agent)}; env 0's agent has {obs_space} and {act_space}"
                )

    def _name(self, e: int) -> str:
        a = self.rows.count
        env = self.envs[e - self.first_env]
        metadata = getattr(env, "metadata", None) or {}
        kind = metadata.get("name") or type(getattr(env, "unwrapped", env)).__name__
        return f"env {e} ({kind}, rows {e * a}-{e * a + a - 1})"

    def _fail(self, e: int, agent: Any, what: str, during: str) -> EnvOutputError:
        who = "" if agent is None else f" for agent {agent!r}"
        return EnvOutputError(f"{self._name(e)} returned bad data{who} from {during}(): {what}", env_id=e)

    def _raised(self, e: int, exc: Exception, during: str) -> Exception:
        """The error for env ``e`` raising ``exc``: it names the env, and the agent when it is known (an AEC env
        converted to Parallel steps one agent at a time)."""
        agent = getattr(getattr(self.envs[e - self.first_env], "aec_env", None), "agent_selection", None)
        who = f" stepping agent {agent!r}" if agent is not None and during == "step" else ""
        return env_error(e, exc, self._name(e), f"{who} in {during}()")

    # -- primitives ------------------------------------------------------------------------------------------------

    def _envs_of(self, ids: np.ndarray) -> np.ndarray:
        """The envs of rows ``ids`` (whole envs, in order)."""
        return ids[:: self.rows.count] // self.rows.count

    def _reset_envs(self, ids: np.ndarray, seeds: Sequence[int | None], options: dict | None) -> list[dict]:
        a = self.rows.count
        infos: list[dict] = []
        targets = self.buffers.target_rows(ids[::a]).tolist()
        for j, e in enumerate(self._envs_of(ids).tolist()):
            env = self.envs[e - self.first_env]
            try:
                result = env.reset(seed=seeds[j * a], options=options)
            except Exception as exc:
                raise self._raised(e, exc, "reset") from exc
            if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], dict)):
                raise self._fail(e, None, f"expected (observations, infos) dicts, got {type(result).__name__}", "reset")
            observations, agent_infos = result
            self._over[e - self.first_env] = False
            infos += self._write_rows(e, targets[j], observations, None, agent_infos, "reset")[0]
        return infos

    def _settle_reset(self, ids: np.ndarray, infos: list[dict]) -> Any:
        entries = super()._settle_reset(ids, infos)
        b = self.buffers
        b.terminations[ids] = ~b.extras["agent_mask"][ids]  # padding rows say terminated, as on every step
        return entries

    def _step_envs(self, ids: np.ndarray, actions: Any) -> list[dict]:
        a = self.rows.count
        index, convert = self._index, self._convert
        if self._action.structured and isinstance(actions, np.ndarray):
            actions = [self._action.item(actions, j) for j in range(len(ids))]
        infos: list[dict] = []
        targets = self.buffers.target_rows(ids[::a]).tolist()
        for j, e in enumerate(self._envs_of(ids).tolist()):
            env = self.envs[e - self.first_env]
            first = j * a
            if convert is None:
                step_actions = {agent: actions[first + index[agent]] for agent in env.agents}
            else:
                step_actions = {agent: convert(index[agent], actions[first + index[agent]]) for agent in env.agents}
            try:
                result = env.step(step_actions)
            except Exception as exc:
                raise self._raised(e, exc, "step") from exc
            if not (isinstance(result, tuple) and len(result) == 5):  # (that they are dicts: _write_rows)
                got = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
                raise self._fail(e, None, f"{_FIVE_DICTS}, got {got}", "step")
            env_infos, over = self._write_rows(e, targets[j], result[0], result[1:4], result[4], "step")
            if not (over or env.agents):
                raise self._emptied(e, result)
            infos += env_infos
            self._over[e - self.first_env] = over
        return infos

    def _emptied(self, e: int, result: tuple) -> EnvOutputError:
        """Env ``e`` emptied its agents list in a step where an agent it returned is neither terminated nor
        truncated: PettingZoo removes an agent only once it is done (its API test checks it), and rows that end
        without a flag would read as a transition into the next episode."""
        observations, _, terminations, truncations, _ = result
        agent = next((a for a in observations if not (terminations[a] or truncations[a])), None)
        return self._fail(
            e, agent, "an observation with terminated and truncated both False, and then an empty agents list; "
            "PettingZoo removes an agent from agents only once it is terminated or truncated: flag it done in the "
            "step that ends it", "step"
        )

    def _write_rows(
        self, e: int, target: int, observations: dict, flags: tuple | None, agent_infos: dict, during: str
    ) -> tuple[list[dict], bool]:
        """Write env ``e``'s rows (observations from row ``target`` on) from its dicts (``flags``: rewards,
        terminations, truncations; None on reset); rows of agents without an observation become padding. One info
        dict per row, and whether every agent with an observation ended its episode. One C call when every value is
        exactly what the buffers hold, else the full checks (:mod:`shoal.vector.outputs`) and numpy's writes."""
        base = e * self.rows.count
        flag_dicts = (None, None, None) if flags is None else flags
        try:
            done = self._put_agents(base, target, self.rows.agents, observations, *flag_dicts, agent_infos)
            if done is None:
                done = self._write_checked(e, target, observations, flags, agent_infos, during)
        except ShoalError:  # the full checks' EnvOutputError, as it is
            raise
        except Exception as exc:  # what numpy refused, or warned of where warnings are errors
            raise env_error(e, exc, self._name(e), f" writing its rows from {during}()") from exc
        return done

    def _write_checked(
        self, e: int, target: int, observations: dict, flags: tuple | None, agent_infos: dict, during: str
    ) -> tuple[list[dict], bool]:
        """:meth:`_write_rows` for what the C writer did not take: every row checked, then written (again)."""
        rows = self.rows
        a = rows.count
        base = e * a
        if flags is not None and not all(isinstance(d, dict) for d in (observations, *flags, agent_infos)):
            got = ", ".join(type(d).__name__ for d in (observations, *flags, agent_infos))
            raise self._fail(e, None, f"{_FIVE_DICTS}, got ({got})", during)
        unknown = [agent for agent in observations if agent not in self._index]
        if unknown:
            raise self._fail(e, unknown[0], f"an agent not in possible_agents {list(rows.agents)}", during)
        mask, rewards, terms, truncs = self._scalars
        write, checks, observation = self._write, self._checks, rows.observation
        by_agent = isinstance(agent_infos, dict)
        if flags is not None:
            agent_rewards, agent_terms, agent_truncs = flags
        infos: list[dict] = []
        over = True
        for k, agent in enumerate(rows.agents):
            row = base + k
            if agent not in observations:
                write(target + k, self._zero)
                mask[row] = False
                if flags is not None:  # a reset leaves them to _settle_reset (same-step mode keeps the final step's)
                    rewards[row] = 0.0
                    terms[row] = True
                    truncs[row] = False
                infos.append({})
                continue
            obs = observations[agent]
            try:
                checks[k](obs)
                if flags is not None:
                    reward, terminated, truncated = agent_rewards[agent], agent_terms[agent], agent_truncs[agent]
                    check_reward(reward)
                    check_flag(terminated, "terminated")
                    check_flag(truncated, "truncated")
                if not by_agent:
                    raise Rejected(f"expected infos as a dict of dicts by agent, got {type(agent_infos).__name__}")
                info = agent_infos.get(agent, {})
                if not isinstance(info, dict):
                    raise Rejected(f"expected its info as a dict, got {type(info).__name__} {info!r:.60}")
            except Rejected as bad:
                raise self._fail(e, agent, bad.what, during) from None
            except KeyError:
                names = ("rewards", "terminations", "truncations")
                missing = ", ".join(name for name, flag in zip(names, flags or ()) if agent not in flag)
                raise self._fail(e, agent, f"an observation but no entry in {missing}", during) from None
            write(target + k, observation(k, obs))
            mask[row] = True
            if flags is not None:
                rewards[row] = reward
                terms[row] = terminated
                truncs[row] = truncated
                over = over and bool(terminated or truncated)
            infos.append(info)
        return infos, flags is not None and over

    def _episode_over(self, ids: np.ndarray) -> np.ndarray:
        return np.repeat(self._over[self._envs_of(ids) - self.first_env], self.rows.count)

    # -- calls (once per env; each of its rows gets the result) ------------------------------------------------------

    def _each_env(self, ids: np.ndarray, fn: Callable[[int, Any], Any]) -> list[Any]:
        results: dict[int, Any] = {}
        out = []
        for row in ids.tolist():
            e = row // self.rows.count
            if e not in results:
                with blame(e):
                    results[e] = fn(e, self.envs[e - self.first_env])
            out.append(results[e])
        return out

    def call(self, ids: np.ndarray, name: str, args: tuple, kwargs: dict) -> list[Any]:
        def run(e: int, env: Any) -> Any:
            if callable(name):
                return name(env, *args, **kwargs)
            attr = getattr(env, name)
            return attr(*args, **kwargs) if callable(attr) else attr

        return self._each_env(ids, run)

    def get_attr(self, ids: np.ndarray, name: str) -> list[Any]:
        return self._each_env(ids, lambda e, env: getattr(env, name))

    def set_attr(self, ids: np.ndarray, name: str, values: list[Any]) -> None:
        first: dict[int, Any] = {}
        for row, value in zip(ids.tolist(), values):
            first.setdefault(row // self.rows.count, value)
        self._each_env(ids, lambda e, env: setattr(env, name, first[e]))

    def close(self) -> None:
        envs, self.envs = self.envs, []
        close_all(enumerate(envs, start=self.first_env))
