"""EnvPool's Atari API on shoal's engine: ``from shoal import envpool`` in place of ``import envpool``.

``envpool.make("Breakout-v5", env_type="gymnasium", num_envs=8, episodic_life=True, reward_clip=True)`` takes
EnvPool's task ids, keyword names and defaults and returns a pool with its methods (``reset(env_id)``,
``step(action, env_id)``, ``async_reset``/``send``/``recv``), its outputs (observations ``(stack, h, w)``, channels
first for RGB too; float32 rewards) and its info keys: ``env_id``, ``players``, ``lives``, ``reward`` (unclipped),
``terminated`` (EnvPool's real game over, int32) and ``elapsed_step`` (steps since the game started). As in
EnvPool, ``observation_space``/``action_space`` are one env's spaces, and the ids of an asynchronous batch come in
``info["env_id"]``.

``episodic_life=True`` means what it means in EnvPool: a lost life ends the episode, and the next step plays the
same game on (:class:`~shoal.AtariVectorEnv`'s ``life_loss_reset="continue"``); the game restarts at a game over.

shoal's extension: ``task_id`` may be a list of task ids, one per env, to mix games in one pool (their action
counts must agree, or pass ``full_action_space=True``). The README's conventions table lists where the emulation
differs from EnvPool's (no-op counts, frames read at a life loss, how episodes are truncated).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Literal, NamedTuple, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from shoal.atari.env import AtariVectorEnv
from shoal.atari.roms import game_ids
from shoal.errors import ConfigError, ShoalError

EnvType = Literal["gymnasium", "gym", "dm"]

DEFAULTS: dict[str, Any] = {
    "num_envs": 1,
    "batch_size": 0,
    "num_threads": 0,
    "max_num_players": 1,
    "thread_affinity_offset": -1,
    "seed": 42,
    "gym_reset_return_info": None,
    "max_episode_steps": 27000,
    "stack_num": 4,
    "frame_skip": 4,
    "noop_max": 30,
    "zero_discount_on_life_loss": False,
    "episodic_life": False,
    "reward_clip": False,
    "use_fire_reset": True,
    "img_height": 84,
    "img_width": 84,
    "mode": -1,
    "difficulty": -1,
    "full_action_space": False,
    "repeat_action_probability": 0.0,
    "use_inter_area_resize": True,
    "gray_scale": True,
}
"""EnvPool's Atari keywords and their defaults (``envpool/atari/atari_env.h`` and ``envpool/core/env_spec.h``)."""

SHOAL_KEYWORDS = ("backend", "num_workers", "context", "daemon", "inline", "address", "render_mode")
"""shoal's own keywords, passed on to :class:`~shoal.AtariVectorEnv`."""


def list_all_envs() -> list[str]:
    """The task ids :func:`make` takes: EnvPool's name of every ROM ale-py ships (``"Pong-v5"``, ...)."""
    return sorted(f"{_task_name(game)}-v5" for game in game_ids())


def make(task_id: str | Sequence[str], env_type: EnvType = "gymnasium", **kwargs: Any) -> EnvPool:
    """An EnvPool-style Atari pool on shoal.

    Args:
        task_id: EnvPool's id (``"Breakout-v5"``), or one per env (shoal's multi-ROM extension).
        env_type: ``"gymnasium"``, ``"gym"`` (the API of the ``gym`` package installed: 4-tuple steps before 0.26)
            or ``"dm"`` (``dm_env.TimeStep``).
        **kwargs: EnvPool's keywords (see :data:`DEFAULTS`), and shoal's ``backend``, ``num_workers``, ...

    Example:
        >>> import numpy as np
        >>> from shoal import envpool
        >>> envs = envpool.make("Pong-v5", env_type="gymnasium", num_envs=2, backend="serial")
        >>> obs, info = envs.reset()
        >>> obs.shape, sorted(info)
        ((2, 4, 84, 84), ['elapsed_step', 'env_id', 'lives', 'players', 'reward', 'terminated'])
        >>> obs, reward, terminated, truncated, info = envs.step(np.zeros(2, np.int32))
        >>> envs.close()
    """
    if env_type not in ("gymnasium", "gym", "dm"):
        raise ConfigError(f"env_type must be 'gymnasium', 'gym' or 'dm', got {env_type!r}")
    unknown = sorted(set(kwargs) - set(DEFAULTS) - set(SHOAL_KEYWORDS) - {"task"})
    if unknown:
        raise ConfigError(
            f"unknown keyword(s) {unknown} for an EnvPool Atari task; EnvPool's are {sorted(DEFAULTS)} and shoal "
            f"adds {list(SHOAL_KEYWORDS)}"
        )
    settings = {**DEFAULTS, **{k: v for k, v in kwargs.items() if k in DEFAULTS}}
    games = _games(task_id, settings["num_envs"], kwargs.get("task"))
    atari = AtariVectorEnv(games=games, seed=None, **_atari_keywords(settings, kwargs))
    try:
        return EnvPool(atari, env_type, settings)
    except BaseException:
        atari.close()
        raise


def make_gymnasium(task_id: str | Sequence[str], **kwargs: Any) -> EnvPool:
    """:func:`make` with ``env_type="gymnasium"``."""
    return make(task_id, "gymnasium", **kwargs)


def make_gym(task_id: str | Sequence[str], **kwargs: Any) -> EnvPool:
    """:func:`make` with ``env_type="gym"``."""
    return make(task_id, "gym", **kwargs)


def make_dm(task_id: str | Sequence[str], **kwargs: Any) -> EnvPool:
    """:func:`make` with ``env_type="dm"``."""
    return make(task_id, "dm", **kwargs)


# -- settings ---------------------------------------------------------------------------------------------------------


def _task_name(game: str) -> str:
    return "".join(part.capitalize() for part in game.split("_"))


def _games(task_id: str | Sequence[str], num_envs: Any, task: str | None) -> list[str]:
    names = {_task_name(game): game for game in game_ids()}

    def game_of(tid: Any) -> str:
        if not isinstance(tid, str):
            raise ConfigError(f"a task id is a string like 'Pong-v5', got {tid!r}")
        name, _, version = tid.rpartition("-")
        if version != "v5" or name not in names:
            hint = _suggestion(tid, names)
            raise ConfigError(
                f"{tid!r} is not an Atari task of shoal.envpool (EnvPool's Atari ids: '<Game>-v5', e.g. 'Pong-v5', "
                f"'SpaceInvaders-v5'; see list_all_envs()). {hint}For EnvPool's other tasks, shoal.make takes the "
                f"Gymnasium env of the same name, e.g. shoal.make('CartPole-v1', 8)."
            )
        return names[name]

    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ConfigError(f"num_envs must be a positive integer, got {num_envs!r}")
    if isinstance(task_id, str):
        game = game_of(task_id)
        if task is not None and task != game:
            raise ConfigError(f"task={task!r} disagrees with task id {task_id!r} (whose ROM is {game!r})")
        return [game] * num_envs
    games = [game_of(t) for t in task_id]
    if len(games) != num_envs and num_envs != 1:
        raise ConfigError(f"{len(games)} task ids were given for num_envs={num_envs}: give one per env")
    return games


def _suggestion(tid: str, names: dict[str, str]) -> str:
    """A "Did you mean ...?" where ``tid`` names a ROM in another spelling (``"pong"``, ``"ALE/Pong-v5"``,
    ``"PongNoFrameskip-v4"``, ``"space_invaders"``); else nothing."""
    stem = tid.split("/")[-1]
    stem = re.sub(r"-v\d+$", "", stem)
    stem = re.sub(r"(NoFrameskip|Deterministic)$", "", stem)
    key = stem.replace("_", "").replace("-", "").lower()
    match = [name for name in names if name.lower() == key]
    return f"Did you mean {match[0]}-v5? " if match and f"{match[0]}-v5" != tid else ""


def _atari_keywords(s: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """:class:`~shoal.AtariVectorEnv`'s keywords for EnvPool's settings ``s``."""
    if s["max_num_players"] != 1:
        raise ConfigError(f"Atari tasks have one player; max_num_players={s['max_num_players']!r}")
    if not s["use_inter_area_resize"]:
        raise ConfigError(
            "use_inter_area_resize=False (bilinear resizing) is not offered: shoal resizes with OpenCV's INTER_AREA "
            "(EnvPool's default)"
        )
    for name in ("max_episode_steps", "frame_skip"):
        value = s[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return {
        "batch_size": s["batch_size"],
        "num_threads": s["num_threads"],
        "thread_affinity_offset": s["thread_affinity_offset"],
        # EnvPool counts steps; ALE counts frames (a reset's no-ops included), which shoal truncates on
        "max_num_frames_per_episode": s["max_episode_steps"] * s["frame_skip"],
        "repeat_action_probability": s["repeat_action_probability"],
        "full_action_space": s["full_action_space"],
        "img_height": s["img_height"],
        "img_width": s["img_width"],
        "obs_type": "grayscale" if s["gray_scale"] else "rgb",
        "stack_num": s["stack_num"],
        "frameskip": s["frame_skip"],
        "noop_max": s["noop_max"],
        "episodic_life": bool(s["episodic_life"]),
        "life_loss_reset": "continue" if s["episodic_life"] else "game",
        "reward_clipping": bool(s["reward_clip"]),
        "use_fire_reset": s["use_fire_reset"],
        "mode": None if s["mode"] < 0 else s["mode"],
        "difficulty": None if s["difficulty"] < 0 else s["difficulty"],
        "autoreset_mode": AutoresetMode.NEXT_STEP,
        **{k: kwargs[k] for k in SHOAL_KEYWORDS if k in kwargs},
    }


# -- the pool ---------------------------------------------------------------------------------------------------------


@dataclass
class _Batch:
    """One batch as shoal returns it, before it takes EnvPool's form."""

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    info: dict[str, Any]
    env_id: np.ndarray
    first: np.ndarray  # the step was a reset (dm's StepType.FIRST)


class EnvPool:
    """An EnvPool-style pool of Atari envs (made by :func:`make`), stepping a :class:`~shoal.AtariVectorEnv`.

    ``send(action, env_id)`` takes the ids of the batch the last ``recv`` returned (in any order); shoal's
    asynchronous batches are whole groups of envs (one worker's), so ``batch_size`` is a multiple of the envs per
    worker. ``xla()`` is not offered.
    """

    def __init__(self, atari: AtariVectorEnv, env_type: EnvType, settings: dict[str, Any]) -> None:
        self.atari = atari
        self.env_type = env_type
        if atari.single_action_space is None:
            raise ConfigError(
                f"the games {sorted(set(atari.games))} have different action counts {sorted(set(atari.num_actions))}: "
                "an EnvPool pool has one Discrete action space; pass full_action_space=True (18 actions each)"
            )
        num_envs = atari.num_envs
        self.config: dict[str, Any] = {
            **settings, "num_envs": num_envs, "batch_size": atari.batch_size, "task": atari.games[0]
        }
        seed = settings["seed"]
        self._seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else list(seed)
        stack, h, w = settings["stack_num"], settings["img_height"], settings["img_width"]
        self._rgb = not settings["gray_scale"]
        obs_space = spaces.Box(0, 255, (stack * (3 if self._rgb else 1), h, w), np.uint8)
        action_space = spaces.Discrete(max(atari.num_actions))  # (every game's, checked above)
        self._format = _FORMATS[env_type](self, obs_space, action_space, settings)
        # EnvPool's spaces are one env's; plain attributes, which code written for EnvPool sets (cleanrl does)
        self.observation_space = self.single_observation_space = self._format.observation_space
        self.action_space = self.single_action_space = self._format.action_space
        self.num_envs = num_envs
        self.all_env_ids = np.arange(num_envs, dtype=np.int32)
        self.is_async = atari.batch_size != num_envs
        self._elapsed = np.zeros(num_envs, np.int32)
        self._lives = np.zeros(num_envs, np.int32)
        self._ended = np.zeros(num_envs, np.int8)  # how each env's last step ended: 0 not, 1 life lost, 2 game
        self._reset_pending = False
        self._reset_once = False

    # -- EnvPool's methods ---------------------------------------------------------------------------------------

    def reset(self, env_id: np.ndarray | None = None, **kwargs: Any) -> Any:
        """Reset envs ``env_id`` (all if None) and return their first observations (and infos)."""
        if kwargs.get("seed") is not None:
            warnings.warn("EnvPool seeds are fixed when the pool is made: reset(seed=...) is ignored; pass seed to "
                          "make", stacklevel=2)
        options = kwargs.get("options") or {}
        if "reset_mask" in options:
            if env_id is not None:
                raise ConfigError("pass either env_id or options['reset_mask'], not both")
            env_id = np.flatnonzero(np.asarray(options["reset_mask"], np.bool_))
        ids = self.all_env_ids if env_id is None else _env_ids(env_id, self.num_envs)
        if self.is_async and len(ids) != self.num_envs:
            raise ShoalError("in asynchronous mode reset() resets every env; use async_reset() and recv()")
        if len(ids) == self.num_envs and np.array_equal(np.sort(ids), self.all_env_ids):
            obs, info = self.atari.reset(seed=self._first_seed())
        else:
            mask = np.zeros(self.num_envs, np.bool_)
            mask[ids] = True
            obs, info = self.atari.reset(seed=self._first_seed(), options={"reset_mask": mask})
        batch = self._batch(obs, None, None, None, info, reset=ids)
        if not self.is_async:
            batch = _select(batch, ids)
        return self._format.reset(batch)

    def async_reset(self) -> None:
        """Start a reset of every env; :meth:`recv` returns the first batch to finish, as a step."""
        self.atari.reset_async(seed=self._first_seed())
        self._reset_pending = True

    def send(self, action: Any, env_id: np.ndarray | None = None) -> None:
        """Send the actions of the batch the caller holds; ``env_id`` says whose each action is."""
        if self._reset_pending:
            raise ShoalError("call recv() for the batch of async_reset() before send()")
        action = np.asarray(action)
        if env_id is not None:
            ids = _env_ids(env_id, self.num_envs)
            held = self._held_ids()
            if len(ids) != len(held) or not np.array_equal(np.sort(ids), np.sort(held)):
                raise ShoalError(
                    f"send(action, env_id={ids.tolist()}): shoal steps the batch the last recv() returned "
                    f"(env_id {held.tolist()}); send actions for exactly those envs"
                )
            if not np.array_equal(ids, held):
                order = np.argsort(ids)[np.argsort(np.argsort(held))]
                action = action[order]
        self.atari.send(action)

    def recv(self, reset: bool = False, return_info: bool = True) -> Any:
        """The next batch, as a step's outputs (after :meth:`async_reset`: the reset envs, reward 0)."""
        if self._reset_pending:
            self._reset_pending = False
            obs, info = self.atari.reset_wait()
            return self._format.step(self._batch(obs, None, None, None, info, reset=info["env_id"]))
        obs, reward, terminated, truncated, info = self.atari.recv()
        return self._format.step(self._batch(obs, reward, terminated, truncated, info, reset=None))

    def step(self, action: Any, env_id: np.ndarray | None = None) -> Any:
        """:meth:`send` then :meth:`recv`."""
        self.send(action, env_id)
        return self.recv()

    def seed(self, seed: Any = None) -> None:
        warnings.warn("EnvPool's seed() is abandoned: pass seed to make(..., seed=seed)", stacklevel=2)

    def render(self, env_ids: Any = None) -> np.ndarray:
        """Full-size RGB screens of envs ``env_ids`` (env 0 if None), stacked; needs ``render_mode="rgb_array"``."""
        ids = [0] if env_ids is None else _env_ids(env_ids, self.num_envs).tolist()
        return np.stack(self.atari.render(ids))

    def xla(self) -> Any:
        raise ShoalError(
            "shoal.envpool has no xla(): EnvPool's XLA functions step its C++ pool inside jax.jit, which shoal's "
            "worker processes cannot join; use send()/recv() (or step()) from Python"
        )

    def close(self, **kwargs: Any) -> None:
        self.atari.close()

    def __len__(self) -> int:
        return self.num_envs

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EnvPool({self.env_type!r}, " + ", ".join(f"{k}={v!r}" for k, v in self.config.items()) + ")"

    # -- conversion ------------------------------------------------------------------------------------------------

    def _first_seed(self) -> Any:
        """The seed of the first reset; later resets go on with each env's generator (EnvPool seeds at make)."""
        if self._reset_once:
            return None
        self._reset_once = True
        return self._seed

    def _held_ids(self) -> np.ndarray:
        return np.asarray(self.atari._held_ids if self.is_async else self.all_env_ids)

    def _batch(self, obs: np.ndarray, reward: Any, terminated: Any, truncated: Any, info: dict,
               reset: np.ndarray | None) -> _Batch:
        """shoal's batch with EnvPool's bookkeeping; ``reset``: the envs a reset started (None: a step)."""
        ids = np.asarray(info["env_id"], np.int32) if self.is_async else self.all_env_ids
        n = len(ids)
        lives = info["lives"].astype(np.int32)
        game_over = info["game_over"]
        if reset is not None:  # a partial reset leaves the others' bookkeeping as it is (their rows are dropped)
            first = np.isin(ids, reset)
            self._elapsed[reset] = 0
            reward = np.zeros(n, np.float32)
            terminated = truncated = np.zeros(n, np.bool_)
            self._lives[reset] = lives[first]
            self._ended[reset] = 0
            return self._finish_batch(obs, reward, terminated, truncated, info, ids, first, lives, game_over)
        ended = self._ended[ids]
        first = ended > 0  # the step was the autoreset of an env whose episode had ended
        self._elapsed[ids] = np.where(ended == 2, 0, self._elapsed[ids] + (ended == 0))
        reward = reward.astype(np.float32)
        # how each env's step ended, for the next step's elapsed_step: 2 the game (or a truncation), 1 a life
        game_ended = truncated | game_over if self.atari.config.episodic_life else terminated | truncated
        self._ended[ids] = np.where(game_ended, 2, np.where(terminated, 1, 0))
        return self._finish_batch(obs, reward, terminated, truncated, info, ids, first, lives, game_over)

    def _finish_batch(self, obs: np.ndarray, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                      info: dict, ids: np.ndarray, first: np.ndarray, lives: np.ndarray,
                      game_over: np.ndarray) -> _Batch:
        lost_life = ~first & (lives < self._lives[ids])
        self._lives[ids] = lives
        if self._rgb:  # EnvPool's RGB stacks are channels first: (stack * 3, h, w)
            n_, stack, h, w, c = obs.shape
            obs = obs.transpose(0, 1, 4, 2, 3).reshape(n_, stack * c, h, w)
        out_info = {
            "env_id": ids,
            "players": {"env_id": ids},
            "lives": lives,
            "reward": info["raw_reward"].astype(np.float32),
            "terminated": game_over.astype(np.int32),
            "elapsed_step": self._elapsed[ids].copy(),
            "lost_life": lost_life,
        }
        return _Batch(obs, reward, terminated, truncated, out_info, ids, first)


def _env_ids(env_id: Any, num_envs: int) -> np.ndarray:
    ids = np.asarray(env_id).reshape(-1)
    if ids.dtype.kind not in "iu" or (ids.size and (ids.min() < 0 or ids.max() >= num_envs)):
        raise ConfigError(f"env_id must be env indices in [0, {num_envs}), got {env_id!r}")
    return ids.astype(np.int32)


def _select(batch: _Batch, ids: np.ndarray) -> _Batch:
    """The rows of envs ``ids`` of a batch of every env (in env order), as EnvPool's partial reset returns."""
    if len(ids) == len(batch.env_id) and np.array_equal(ids, batch.env_id):
        return batch
    info = {k: ({"env_id": ids} if k == "players" else v[ids]) for k, v in batch.info.items()}
    return _Batch(batch.obs[ids], batch.reward[ids], batch.terminated[ids], batch.truncated[ids], info, ids,
                  batch.first[ids])


# -- the three APIs ---------------------------------------------------------------------------------------------------


class _Gymnasium:
    """``(obs, info)`` resets and ``(obs, reward, terminated, truncated, info)`` steps."""

    def __init__(self, pool: EnvPool, obs_space: spaces.Box, action_space: spaces.Discrete,
                 settings: dict[str, Any]) -> None:
        if settings["gym_reset_return_info"] is False:
            raise ConfigError("gym_reset_return_info=False: a Gymnasium reset always returns (obs, info)")
        self.observation_space: Any = obs_space
        self.action_space: Any = action_space

    @staticmethod
    def _info(batch: _Batch) -> dict[str, Any]:
        info = dict(batch.info)
        del info["lost_life"]
        return info

    def reset(self, batch: _Batch) -> Any:
        return batch.obs, self._info(batch)

    def step(self, batch: _Batch) -> Any:
        return batch.obs, batch.reward, batch.terminated, batch.truncated, self._info(batch)


class _Gym(_Gymnasium):
    """The installed ``gym``'s API, as EnvPool chose it: from gym 0.26 as Gymnasium's; before, ``obs`` resets
    (``(obs, info)`` with ``gym_reset_return_info=True``) and ``(obs, reward, done, info)`` steps with
    ``info["TimeLimit.truncated"]``; spaces are ``gym.spaces``."""

    def __init__(self, pool: EnvPool, obs_space: spaces.Box, action_space: spaces.Discrete,
                 settings: dict[str, Any]) -> None:
        try:
            import gym
        except ImportError as exc:
            raise ConfigError('env_type="gym" needs the gym package: pip install "gym==0.23.1"') from exc
        version = tuple(int(p) for p in gym.__version__.split(".")[:2] if p.isdigit())
        self.new_api = version >= (0, 26)
        self.return_info = bool(settings["gym_reset_return_info"]) or self.new_api
        self.observation_space = gym.spaces.Box(0, 255, obs_space.shape, np.uint8)
        self.action_space = gym.spaces.Discrete(int(action_space.n))

    def reset(self, batch: _Batch) -> Any:
        return (batch.obs, self._info(batch)) if self.return_info else batch.obs

    def step(self, batch: _Batch) -> Any:
        if self.new_api:
            return super().step(batch)
        info = self._info(batch)
        info["TimeLimit.truncated"] = batch.truncated
        return batch.obs, batch.reward, batch.terminated | batch.truncated, info


class _DM:
    """``dm_env.TimeStep`` batches: step_type FIRST at a reset, LAST when the episode ends; the observation is
    EnvPool's ``State`` (obs and infos); discount 0 at the end (and at a lost life with zero_discount_on_life_loss)."""

    def __init__(self, pool: EnvPool, obs_space: spaces.Box, action_space: spaces.Discrete,
                 settings: dict[str, Any]) -> None:
        try:
            import dm_env
            from dm_env import specs
        except ImportError as exc:
            raise ConfigError('env_type="dm" needs dm_env: pip install dm-env') from exc
        self.TimeStep = dm_env.TimeStep
        self.zero_on_life_loss = bool(settings["zero_discount_on_life_loss"])
        self.observation_space = obs_space
        self.action_space = action_space
        i32 = np.iinfo(np.int32)
        scalar = lambda name: specs.BoundedArray((), np.int32, i32.min, i32.max, name)  # noqa: E731
        self.obs_spec = State(
            scalar("env_id"), Players(scalar("env_id")),
            specs.BoundedArray(obs_space.shape, np.uint8, 0, 255, "obs"), scalar("lives"),
            specs.Array((), np.float32, "reward"), specs.DiscreteArray(2, np.int32, "terminated"),
        )
        self.act_spec = specs.DiscreteArray(int(action_space.n), np.int32, "action")
        pool.observation_spec = lambda: self.obs_spec  # type: ignore[attr-defined]
        pool.action_spec = lambda: self.act_spec  # type: ignore[attr-defined]

    def reset(self, batch: _Batch) -> Any:
        return self.step(batch)

    def step(self, batch: _Batch) -> Any:
        done = batch.terminated | batch.truncated
        ending = done | (batch.info["lost_life"] if self.zero_on_life_loss else False)
        step_type = np.where(batch.first, 0, np.where(done, 2, 1)).astype(np.int32)
        i = batch.info
        state = State(i["env_id"], Players(i["env_id"]), batch.obs, i["lives"], i["reward"], i["terminated"])
        return self.TimeStep(step_type, batch.reward, (~ending).astype(np.float32), state)


class Players(NamedTuple):
    env_id: Any


class State(NamedTuple):
    """EnvPool's dm observation: the observation and the infos of each env."""

    env_id: Any
    players: Players
    obs: Any
    lives: Any
    reward: Any
    terminated: Any


_FORMATS: dict[str, Callable[..., Any]] = {"gymnasium": _Gymnasium, "gym": _Gym, "dm": _DM}
