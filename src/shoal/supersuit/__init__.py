"""SuperSuit's vector envs on shoal: code that vectorizes PettingZoo envs with SuperSuit runs with its import changed.

PettingZoo's own tutorials train SB3 on a PettingZoo env this way::

    import shoal.supersuit as ss                   # was: import supersuit as ss
    env = ss.black_death_v3(knights_archers_zombies_v11.parallel_env())    # SuperSuit's wrappers, as they are
    env = ss.pettingzoo_env_to_vec_env_v1(env)
    envs = ss.concat_vec_envs_v1(env, 8, num_cpus=2, base_class="stable_baselines3")
    PPO("MlpPolicy", envs).learn(100_000)

:func:`concat_vec_envs_v1` makes the ``num_vec_envs`` copies of the env (cloudpickled, as SuperSuit does) on
shoal's serial backend (``num_cpus`` 0 or 1, as SuperSuit steps them in this process) or its multiprocessing backend
(``num_workers=num_cpus``). Each copy's agents are rows (:mod:`shoal.multiagent`), and the rows come out in
SuperSuit's form:

* ``observation_space`` and ``action_space`` are one agent's (all agents must have the same: SuperSuit's
  ``pad_observations_v0`` and ``pad_action_space_v0`` make them so);
* ``step`` returns float32 rewards, ``terminated`` and ``truncated`` as bools, and ``infos`` as a list of one dict
  per row; an env whose agents are all done is reset in the same step, and each of its rows' infos holds the last
  step's info, ``terminal_observation`` and then the reset's info over them, as SuperSuit merges them;
* every agent must be present from the reset until its env's episode ends (SuperSuit's ``black_death_v3`` keeps a
  done agent present with zeros): an agent done or absent before then is an :class:`~shoal.errors.AgentPresenceError`
  naming the env and the agent (an ``EnvOutputError`` and, as SuperSuit's failed ``assert``, an ``AssertionError``).

Differences from SuperSuit, each a SuperSuit bug: ``reset(seed=s)`` gives env ``e`` the seed ``s + e`` on every
backend (SuperSuit's processes seed their first envs alike: ``s + p + j`` for process ``p``'s ``j``-th env); the SB3
form has SB3's ``seed()`` (so ``PPO(..., seed=s)`` runs; on SuperSuit's it raises ``AttributeError``) and marks a
truncation ``TimeLimit.truncated``, so SB3 bootstraps from its ``terminal_observation`` (SuperSuit's infos lack the
key).

Every other name (SuperSuit's wrappers: ``black_death_v3``, ``color_reduction_v0``, ``frame_stack_v1``, ...) is
SuperSuit's own, so ``import shoal.supersuit as ss`` replaces ``import supersuit as ss``; those need
``pip install supersuit``, the vector envs here do not.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import cloudpickle
import gymnasium
import numpy as np

from shoal.errors import AgentPresenceError, AgentSpacesError, ConfigError, MissingDependencyError, UnpicklableError
from shoal.vector.infos import InfoParts, per_env
from shoal.vector.checks import check_positive_int, integer

__all__ = [
    "ConcatVecEnv",
    "MarkovVectorEnv",
    "concat_vec_envs_v1",
    "gym_vec_env_v0",
    "pettingzoo_env_to_vec_env_v1",
    "stable_baselines3_vec_env_v0",
]

BASE_CLASSES = ("gymnasium", "stable_baselines3")


class ConcatVecEnv(gymnasium.vector.VectorEnv):
    """What SuperSuit's ``concat_vec_envs_v1(..., base_class="gymnasium")`` returns (its ``ConcatVecEnv``, or
    ``ProcConcatVec`` with ``num_cpus > 1``), over a shoal vector env of PettingZoo envs made with same-step autoreset.

    Args:
        envs: the shoal :class:`~shoal.multiagent.MultiAgentVectorEnv`; closing this closes it.
        metadata: the PettingZoo env's metadata (SuperSuit's vector envs carry it: ``metadata["name"]``).
    """

    def __init__(self, envs: Any, metadata: dict[str, Any]) -> None:
        self._envs = envs
        self.num_envs = envs.num_envs
        self.observation_space = envs.single_observation_space  # SuperSuit's: one agent's spaces
        self.action_space = envs.single_action_space
        self.metadata = dict(metadata)
        self.render_mode = envs.render_mode

    @property
    def venv_shoal(self) -> Any:
        """The shoal vector env behind this one."""
        return self._envs

    # (SuperSuit's form, not Gymnasium's: infos are a list of one dict per row)
    def reset(  # type: ignore[override]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, list[dict]]:
        obs, parts = self.venv_shoal._reset_parts(seed=seed, options=options)
        return obs, rows_infos(parts, None, self.venv_shoal)[0]

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, list[dict]]:  # type: ignore[override]
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        self.venv_shoal.send(actions)

    def step_wait(self) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        obs, reward, terminated, truncated, parts = self.venv_shoal._recv_parts()
        infos, finals = rows_infos(parts, terminated | truncated, self.venv_shoal)
        for i, (last, final) in finals.items():  # the rows of envs reset this step
            final["terminal_observation"] = last
            final.update(infos[i])  # the reset's info over the last step's, as SuperSuit merges them
            infos[i] = final
        return obs, reward.astype(np.float32), terminated, truncated, infos

    def render(self) -> Any:
        """The first env's ``render()``, as SuperSuit's."""
        return self.venv_shoal.call_envs([0], "render")[0]

    def env_is_wrapped(self, wrapper_class: type) -> list[bool]:
        """False for every row, as SuperSuit answers for PettingZoo envs."""
        return [False] * self.num_envs

    def close_extras(self, **kwargs: Any) -> None:
        self.venv_shoal.close()


class MarkovVectorEnv(ConcatVecEnv):
    """SuperSuit's ``MarkovVectorEnv``: one PettingZoo ``ParallelEnv``'s agents as a vector env of one row per
    agent, the env itself stepped in this process. :func:`concat_vec_envs_v1` takes it to make copies of the env.

    Example:
        >>> import shoal.supersuit as ss
        >>> from mpe2 import simple_spread_v3
        >>> env = ss.pettingzoo_env_to_vec_env_v1(simple_spread_v3.parallel_env())
        >>> obs, infos = env.reset(seed=0)
        >>> obs.shape, env.observation_space.shape
        ((3, 18), (18,))
        >>> env.close()
    """

    def __init__(self, par_env: Any) -> None:
        check_parallel(par_env)
        agent = par_env.possible_agents[0]
        self.par_env = par_env
        self._envs = None
        self.num_envs = len(par_env.possible_agents)
        self.observation_space = par_env.observation_space(agent)
        self.action_space = par_env.action_space(agent)
        self.metadata = dict(getattr(par_env, "metadata", None) or {})
        self.render_mode = getattr(par_env, "render_mode", None)

    @property
    def venv_shoal(self) -> Any:
        """Made at first use: :func:`concat_vec_envs_v1` only copies the env, and then this one never holds it (nor
        closes it when it is dropped, as SuperSuit's does not)."""
        if self._envs is None:
            from shoal.multiagent import build

            par_env = self.par_env
            self._envs = build([lambda: par_env], par_env, backend="serial", autoreset_mode="same_step")
        return self._envs

    def close_extras(self, **kwargs: Any) -> None:
        if self._envs is None:
            self.par_env.close()  # (SuperSuit's closes the env)
        else:
            self._envs.close()


def pettingzoo_env_to_vec_env_v1(parallel_env: Any) -> MarkovVectorEnv:
    """SuperSuit's ``pettingzoo_env_to_vec_env_v1``: ``parallel_env``'s agents as a vector env (one row each)."""
    return MarkovVectorEnv(parallel_env)


def concat_vec_envs_v1(vec_env: Any, num_vec_envs: int, num_cpus: int = 0, base_class: str = "gymnasium") -> Any:
    """SuperSuit's ``concat_vec_envs_v1``: ``num_vec_envs`` copies of ``vec_env``'s PettingZoo env as one vector env
    of all their rows.

    Args:
        vec_env: what :func:`pettingzoo_env_to_vec_env_v1` returned (SuperSuit's own ``MarkovVectorEnv`` is taken
            too); its env is copied, never stepped.
        num_vec_envs: how many copies.
        num_cpus: 0 or 1: the copies step in this process (shoal's serial backend); more: in that many workers
            (shoal's multiprocessing backend; at most one per copy).
        base_class: ``"gymnasium"`` (:class:`ConcatVecEnv`) or ``"stable_baselines3"`` (an SB3 ``VecEnv``).
    """
    if base_class not in BASE_CLASSES:
        raise ConfigError(f"base_class: expected one of {BASE_CLASSES}, got {base_class!r}")
    num_vec_envs = check_positive_int("num_vec_envs", num_vec_envs)
    cpus = integer(num_cpus)
    if cpus is None or cpus < 0:
        raise ConfigError(f"num_cpus must be a non-negative integer, got {num_cpus!r}")
    par_env = getattr(vec_env, "par_env", None)
    if par_env is None:
        raise ConfigError(
            f"vec_env: expected what pettingzoo_env_to_vec_env_v1 returns, got {type(vec_env).__name__}; for copies "
            f"of a Gymnasium env use shoal.make (or gym_vec_env_v0 here)"
        )
    check_parallel(par_env)
    from shoal.make import make

    workers = min(cpus, num_vec_envs)
    backend = dict(backend="serial") if workers <= 1 else dict(backend="multiprocessing", num_workers=workers)
    envs = make(copies(par_env), num_vec_envs, autoreset_mode="same_step", **backend)  # type: ignore[arg-type]
    metadata = getattr(par_env, "metadata", None) or {}
    try:
        if base_class == "gymnasium":
            return ConcatVecEnv(envs, metadata)
        from shoal.supersuit.sb3 import SB3VecEnv

        return SB3VecEnv(envs, metadata)
    except BaseException:
        envs.close()
        raise


def gym_vec_env_v0(env: gymnasium.Env, num_envs: int, multiprocessing: bool = False) -> Any:
    """SuperSuit's ``gym_vec_env_v0``: ``num_envs`` copies of Gymnasium env ``env`` in shoal's ``SyncVectorEnv``, or
    its ``AsyncVectorEnv`` with ``multiprocessing=True`` (Gymnasium's classes in SuperSuit)."""
    from shoal.vector import AsyncVectorEnv, SyncVectorEnv

    cls = AsyncVectorEnv if multiprocessing else SyncVectorEnv
    return cls([copies(env)] * num_envs)


def stable_baselines3_vec_env_v0(env: gymnasium.Env, num_envs: int, multiprocessing: bool = False) -> Any:
    """SuperSuit's ``stable_baselines3_vec_env_v0``: ``num_envs`` copies of Gymnasium env ``env`` in shoal's SB3
    ``DummyVecEnv``, or its ``SubprocVecEnv`` with ``multiprocessing=True`` (:mod:`shoal.sb3`)."""
    from shoal.sb3 import DummyVecEnv, SubprocVecEnv

    cls = SubprocVecEnv if multiprocessing else DummyVecEnv
    return cls([copies(env)] * num_envs)


def copies(env: Any) -> Callable[[], Any]:
    """A constructor of copies of ``env`` as it is now: it is cloudpickled once, here, and each call loads a new
    copy (SuperSuit copies it so, with whatever state its pickling keeps)."""
    try:
        blob = cloudpickle.dumps(env)
    except Exception as exc:
        raise UnpicklableError(
            f"the env ({type(env).__name__}) cannot be copied: cloudpickle refused it ({type(exc).__name__}: {exc}); "
            f"the vector env makes its copies by pickling it, as SuperSuit does (or pass shoal.make a function that "
            f"makes one)"
        ) from exc
    return functools.partial(cloudpickle.loads, blob)


def check_parallel(env: Any) -> None:
    """SuperSuit's conditions on the env: a PettingZoo ``ParallelEnv`` whose agents share one observation space and
    one action space."""
    from pettingzoo import ParallelEnv

    if not isinstance(env, ParallelEnv):
        raise ConfigError(
            f"expected a PettingZoo ParallelEnv, got {type(env).__name__}; make one with the env module's "
            f"parallel_env(), or convert an AEC env with pettingzoo.utils.conversions.aec_to_parallel"
        )
    agents = list(getattr(env, "possible_agents", None) or [])
    if not agents:
        raise ConfigError(f"{type(env).__name__} has no possible_agents; each possible agent is a row")
    for kind, pad in (("observation", "pad_observations_v0"), ("action", "pad_action_space_v0")):
        first = getattr(env, f"{kind}_space")(agents[0])
        for agent in agents[1:]:
            space = getattr(env, f"{kind}_space")(agent)
            if space != first:
                raise AgentSpacesError(
                    f"SuperSuit's vector envs need one {kind} space for every agent: agent {agents[0]!r} has {first}, "
                    f"agent {agent!r} has {space}; wrap the env with supersuit.{pad} (or step it with shoal.make, "
                    f"whose rows share agents' different spaces: shoal.multiagent)"
                )


def rows_infos(
    parts: InfoParts, over: np.ndarray | None, envs: Any
) -> tuple[list[dict[str, Any]], dict[int, tuple[Any, dict[str, Any]]]]:
    """A batch's infos one dict per row, as SuperSuit's (without shoal's ``agent_mask``, ``env_index`` and
    ``agent_index``: in SuperSuit's form every agent is present, and the rest follows from the row), and the final
    observations and infos of the rows reset in the step; after checking SuperSuit's rule that every agent is present
    from its env's reset until the env's episode ends (shoal's rows of an env that ends are all done). ``over``: the
    rows' ``terminated | truncated`` (None at a reset)."""
    infos, finals = per_env(parts._replace(arrays={}), envs.num_envs, envs._records)
    mask = parts.arrays["agent_mask"]
    reset = np.zeros(len(mask), np.bool_)  # the rows reset this step, which are the rows done (none, most steps)
    if finals:
        reset[list(finals)] = True
    if not mask.all() or (over is not None and (over != reset).any()):  # (an env ends with all its rows done)
        row = int(np.argmin(mask & (True if over is None else over == reset)))
        env, agent = row // envs.agents_per_env, envs.row_agent[row]
        raise AgentPresenceError(
            f"env {env}: agent {agent!r} (row {row}) is done or absent before the env's episode ended; SuperSuit's "
            f"vector envs need every agent present until then: wrap the env with supersuit.black_death_v3 (zero "
            f"observations and rewards for done agents), or step it with shoal.make, whose rows pad absent agents "
            f"(shoal.multiagent)",
            env,
        )
    return infos, finals


def __getattr__(name: str) -> Any:
    """SuperSuit's other names (its wrappers) are SuperSuit's own."""
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        import supersuit
    except ImportError as exc:
        raise MissingDependencyError(
            f"shoal.supersuit.{name} is SuperSuit's own: pip install supersuit (shoal's vector envs here do not "
            f"need it)"
        ) from exc
    try:
        return getattr(supersuit, name)
    except (AttributeError, ImportError):  # (SuperSuit's own __getattr__ raises ImportError)
        raise AttributeError(f"module 'shoal.supersuit' has no attribute {name!r} (nor has SuperSuit)") from None
