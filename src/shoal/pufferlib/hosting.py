"""How a worker hosts each kind of PufferLib env as the Gymnasium env shoal's engine steps: an emulated
Gymnasium env (:class:`Emulated`), a PettingZoo env's agents (:class:`Agents`), a native ``PufferEnv``
(:class:`Native`); and what every env must share with env 0."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Sequence

import gymnasium
import numpy as np

from shoal.pufferlib.errors import APIUsageError, pufferlib
from shoal.vector.infos import InfoParts, each, owned


def host_of(env: Any, what: str) -> type[Hosted]:
    """How shoal hosts what a creator made (:class:`Emulated`, :class:`Agents` or :class:`Native`); anything but
    a PufferLib env is refused, saying how to wrap it."""
    emulation = pufferlib.emulation
    if isinstance(env, emulation.PettingZooPufferEnv):
        return Agents
    if isinstance(env, emulation.GymnasiumPufferEnv):
        return Emulated
    if isinstance(env, pufferlib.PufferEnv):
        return Native
    raise APIUsageError(
        f"{what} made {type(env).__name__}, not a PufferLib env: wrap it as PufferLib requires "
        f"(pufferlib.emulation.GymnasiumPufferEnv(env=...) or (env_creator=...), or PettingZooPufferEnv)"
    )


def _buffers() -> frozenset[str]:
    """The buffers the installed PufferLib gives an env: pufferlib-core 3.0.x's include teacher actions, which its
    ``recv`` returns; PufferLib 3.0.0's do not, and its ``recv`` returns seven values."""
    probe = SimpleNamespace(single_observation_space=gymnasium.spaces.Box(0, 1, (1,)),
                            single_action_space=gymnasium.spaces.Discrete(2), num_agents=1)
    known = set(vars(probe))
    getattr(pufferlib, "set_buffers", lambda env: None)(probe)
    return frozenset(vars(probe)) - known


BUFFERS = _buffers()


SIGNATURE = ("single_observation_space", "single_action_space", "num_agents")


def signature(env: Any) -> tuple:
    """What every env of a vector env must share with env 0 (:data:`SIGNATURE`)."""
    return tuple(getattr(env, name) for name in SIGNATURE)


class Hosted(gymnasium.Env):
    """A PufferLib env (``self.puffer``, made by its creator as PufferLib's backends make it, with its own buffers)
    as the Gymnasium env shoal's engine steps: what the three kinds share. ``made`` names the kind it hosts."""

    made = ""

    def __init__(self, creator: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], seed: int | None,
                 index: int, like: tuple) -> None:
        self.puffer = puffer = creator(*args, buf=None, seed=seed, **kwargs)
        what = f"env_creators[{index}]"
        try:
            if host_of(puffer, what) is not type(self):
                raise APIUsageError(f"{what} made a {type(puffer).__name__} where env 0 is a {self.made}")
            for name, mine, env0s in zip(SIGNATURE, signature(puffer), like):
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


class Emulated(Hosted):
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


class Agents(Hosted):
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


class Native(Agents):
    """One native ``PufferEnv`` (``k`` agents, stepped together; it resets its agents' episodes itself, so its
    episode never ends here and shoal never resets it but at ``async_reset``) as a single Gymnasium env: its
    observation its PufferLib rows as its ``step`` wrote them into its own buffers (teacher actions too, where the
    installed PufferLib has them), its action the ``k`` actions (in its action buffer, as PufferLib's Multiprocessing
    hands them to a worker's envs), and its info the list of dicts it returned, under :data:`_LOGS`."""

    made = "native PufferEnv"
    rows = Agents.rows + (("teacher_actions",) if "teacher_actions" in BUFFERS else ())

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
    """The space of one multi-agent env's PufferLib rows (:class:`Agents`): those of ``rows`` its buffers hold."""
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


def logs(parts: InfoParts) -> list[dict[str, Any]]:
    """A batch's infos from native envs: the dicts each returned, one env after another (:class:`Native`)."""
    return [owned(log) for _, info in each(parts.entries) for log in info.get(_LOGS, ())]  # type: ignore[misc]
