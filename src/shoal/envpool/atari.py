"""EnvPool's Atari tasks on shoal's multi-ROM engine: their ids, keywords and defaults, and their bookkeeping
(lives, EnvPool's game over, ``elapsed_step``) over an :class:`~shoal.AtariVectorEnv`."""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from shoal.atari.env import AtariVectorEnv
from shoal.atari.roms import game_ids
from shoal.envpool.formats import Batch
from shoal.envpool.pool import COMMON_DEFAULTS
from shoal.errors import ConfigError
from shoal.vector.checks import check_positive_int

DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,
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
"""EnvPool's keywords of an Atari task and their defaults (``envpool/atari/atari_env.h``, and every task's)."""


def atari_ids() -> list[str]:
    """EnvPool's name of every ROM ale-py ships (``"Pong-v5"``, ...)."""
    return sorted(f"{_task_name(game)}-v5" for game in game_ids())


def make_atari(task_id: str | Sequence[str], settings: dict[str, Any], shoal_options: dict[str, Any]) -> tuple[
        AtariVectorEnv, AtariBook]:
    """The vector env and bookkeeping of an Atari pool; ``settings``: EnvPool's keywords with :data:`DEFAULTS`
    filled in."""
    games = _games(task_id, settings["num_envs"], settings.get("task"))
    atari = AtariVectorEnv(games=games, seed=None, **_atari_keywords(settings), **shoal_options)
    try:
        if atari.single_action_space is None:
            raise ConfigError(
                f"the games {sorted(set(atari.games))} have different action counts "
                f"{sorted(set(atari.num_actions))}: an EnvPool pool has one Discrete action space; pass "
                f"full_action_space=True (18 actions each)"
            )
        return atari, AtariBook(atari, settings)
    except BaseException:
        atari.close()
        raise


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
                f"{tid!r} is not a task of shoal.envpool, which takes EnvPool's Atari ids ('<Game>-v5', e.g. "
                f"'Pong-v5', 'SpaceInvaders-v5') and EnvPool's tasks that Gymnasium has too ('CartPole-v1', "
                f"'HalfCheetah-v5', ...; see list_all_envs()). {hint}For any other Gymnasium env, "
                f"shoal.make(id, num_envs) vectorizes it."
            )
        return names[name]

    check_positive_int("num_envs", num_envs)
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


def _atari_keywords(s: dict[str, Any]) -> dict[str, Any]:
    """:class:`~shoal.AtariVectorEnv`'s keywords for EnvPool's settings ``s``."""
    if s["max_num_players"] != 1:
        raise ConfigError(f"Atari tasks have one player; max_num_players={s['max_num_players']!r}")
    if not s["use_inter_area_resize"]:
        raise ConfigError(
            "use_inter_area_resize=False (bilinear resizing) is not offered: shoal resizes with OpenCV's INTER_AREA "
            "(EnvPool's default)"
        )
    for name in ("max_episode_steps", "frame_skip"):
        check_positive_int(name, s[name])
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
    }


class AtariBook:
    """EnvPool's bookkeeping of an Atari pool: ``elapsed_step`` (steps since the game started: a lost life under
    ``episodic_life`` ends the episode, not the game), lives, the real game over, the unclipped reward, and RGB stacks
    channels first."""

    def __init__(self, atari: AtariVectorEnv, settings: dict[str, Any]) -> None:
        self.episodic_life = atari.config.episodic_life
        self._rgb = not settings["gray_scale"]
        stack, h, w = settings["stack_num"], settings["img_height"], settings["img_width"]
        self.observation_space = spaces.Box(0, 255, (stack * (3 if self._rgb else 1), h, w), np.uint8)
        self.action_space = spaces.Discrete(max(atari.num_actions))  # (every game's, checked by make_atari)
        n = atari.num_envs
        self._elapsed = np.zeros(n, np.int32)
        self._lives = np.zeros(n, np.int32)
        self._ended = np.zeros(n, np.int8)  # how each env's last step ended: 0 not, 1 life lost, 2 game

    def batch(self, obs: np.ndarray, reward: Any, terminated: Any, truncated: Any, info: dict[str, Any],
              ids: np.ndarray, reset: np.ndarray | None) -> Batch:
        n = len(ids)
        lives = info["lives"].astype(np.int32)
        game_over = info["game_over"]
        first = np.isin(ids, reset) if reset is not None else np.full(n, reward is None)
        if reward is None:  # a reset: a partial one leaves the others' bookkeeping as it is (their rows are dropped)
            self._elapsed[ids[first]] = 0
            reward = np.zeros(n, np.float32)
            terminated = truncated = np.zeros(n, np.bool_)
            self._lives[ids[first]] = lives[first]
            self._ended[ids[first]] = 0
        else:  # envs just reset (asynchronous mode), or the autoreset step of an env whose episode had ended
            ended = self._ended[ids]
            restart = first | (ended == 2)
            first |= ended > 0
            self._elapsed[ids] = np.where(restart, 0, self._elapsed[ids] + (ended == 0))
            reward = reward.astype(np.float32)
            # how each env's step ended, for the next step's elapsed_step: 2 the game (or a truncation), 1 a life
            game_ended = truncated | game_over if self.episodic_life else terminated | truncated
            self._ended[ids] = np.where(game_ended, 2, np.where(terminated, 1, 0))
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
        }
        return Batch(obs, reward, terminated, truncated, out_info, ids, first, lost_life)

    def render(self, envs: Any, ids: list[int]) -> np.ndarray:
        """Full-size RGB screens."""
        return np.stack(envs.render(ids))

    def dm_fields(self, specs: Any) -> dict[str, Any]:
        i32 = np.iinfo(np.int32)
        return {
            "lives": specs.BoundedArray((), np.int32, i32.min, i32.max, "lives"),
            "reward": specs.Array((), np.float32, "reward"),
            "terminated": specs.DiscreteArray(2, np.int32, "terminated"),
        }
