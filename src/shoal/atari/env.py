"""``shoal.AtariVectorEnv``: many Atari games in one vector env, with ale-py's ``AtariVectorEnv`` API."""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from shoal.atari.config import AtariConfig, LifeLossReset, ObsType, Padding, games_of, observation_type, per_env
from shoal.atari.engine import INFO_ARRAYS, AtariEngineFactory, AtariState
from shoal.atari.roms import game_info
from shoal.errors import ActionError, ConfigError
from shoal.vector.base import Backend, VectorEnv
from shoal.vector.checks import integer


class AtariVectorEnv(VectorEnv):
    """Atari 2600 games on ale-py's emulator, one ROM per env, stepped by any shoal backend.

    Each env runs its own ROM, episode and action set; keyword arguments are ale-py 0.12's ``AtariVectorEnv``
    ones, with the same names, meanings and defaults (see :class:`~shoal.atari.config.AtariConfig` for each), plus
    ``mode``/``difficulty`` (one value or one per env) and shoal's ``backend``/``num_workers``.

    With ``full_action_space=False`` and games whose minimal action sets differ in size, ``single_action_space`` is
    None, ``action_space`` is a ``MultiDiscrete`` of the per-env counts and :attr:`num_actions` lists them; an
    action outside its env's range is an :class:`~shoal.errors.ActionError` naming the env and its game.

    ``info`` holds ``env_id``, ``lives``, ``frame_number``, ``episode_frame_number``, ``raw_reward`` (the
    unclipped reward) and ``game_over`` (the game ended: not a lost life, not a truncation) arrays; :attr:`games`
    names each env's ROM.

    ``obs_type`` is Gymnasium's ``AtariEnv`` keyword, for the whole vector env (observations of one batch share a
    shape): ``"grayscale"`` (the default) and ``"rgb"`` are the screens (ale-py's ``grayscale=True/False``, which
    still works), ``"ram"`` the 128 bytes of console RAM at the end of each step, stacked ``(stack_num, 128)``.
    ``padding_type`` is Gymnasium's ``FrameStackObservation`` keyword: an episode's first observation holds its
    first frame repeated (``"reset"``, the default) or zeros before it (``"zero"``, as ale-py's pool).
    ``frameskip=(low, high)`` repeats each action a number of frames drawn per step from ``[low, high)`` with the
    env's own generator (same seeds, same rollouts, on every backend). ``render_mode="rgb_array"`` makes
    :meth:`render` return each env's full-size RGB screen. Resets restore saved episode starts instead of emulating them
    where that changes no rollout (``reset_cache="auto"``; ``True`` for every ROM, ``False`` never: exactly what each
    does, :attr:`AtariConfig.reset_cache`).

    Example:
        >>> import numpy as np, shoal
        >>> envs = shoal.AtariVectorEnv(games=["pong", "breakout"], backend="serial")
        >>> envs.num_actions
        [6, 4]
        >>> obs, info = envs.reset(seed=0)
        >>> obs.shape
        (2, 4, 84, 84)
        >>> obs, reward, term, trunc, info = envs.step([np.array([0, 2, 1]), np.array([3])], gamma=0.99)
        >>> info["steps_taken"].tolist()
        [3, 1]
        >>> envs.close()
    """

    always_env_id = True

    def __init__(
        self,
        games: Sequence[str] | None = None,
        num_envs: int | None = None,
        *,
        game: str | None = None,
        batch_size: int = 0,
        num_threads: int = 0,
        thread_affinity_offset: int = -1,
        max_num_frames_per_episode: int = 108000,
        repeat_action_probability: float = 0.0,
        full_action_space: bool = False,
        continuous: bool = False,
        continuous_action_threshold: float = 0.5,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        img_height: int = 84,
        img_width: int = 84,
        grayscale: bool | None = None,
        obs_type: ObsType | None = None,
        stack_num: int = 4,
        padding_type: Padding = "reset",
        frameskip: int | tuple[int, int] = 4,
        maxpool: bool = True,
        noop_max: int = 30,
        episodic_life: bool = False,
        life_loss_reset: LifeLossReset = "game",
        life_loss_info: bool = False,
        reward_clipping: bool = True,
        use_fire_reset: bool = True,
        reset_cache: bool | Literal["auto"] = "auto",
        mode: int | Sequence[int | None] | None = None,
        difficulty: int | Sequence[int | None] | None = None,
        backend: Backend = "multiprocessing",
        num_workers: int | None = None,
        seed: int | None = None,
        copy: bool = True,
        context: str | None = None,
        daemon: bool = True,
        inline: bool | None = None,
        address: str | None = None,
        render_mode: str | None = None,
    ) -> None:
        if isinstance(games, str):  # ale-py's positional form: AtariVectorEnv("breakout", 4)
            games, game = None, games
        names = games_of(games, game, num_envs)
        n = len(names)
        obs_type, grayscale = observation_type(obs_type, grayscale)
        if render_mode not in (None, "rgb_array"):
            raise ConfigError(f"render_mode must be None or 'rgb_array' (frames to record), got {render_mode!r}")
        if isinstance(frameskip, list):
            frameskip = tuple(frameskip)
        self.config = AtariConfig(
            games=names,
            modes=per_env("mode", mode, n),
            difficulties=per_env("difficulty", difficulty, n),
            max_num_frames_per_episode=max_num_frames_per_episode,
            repeat_action_probability=repeat_action_probability,
            full_action_space=full_action_space,
            continuous=continuous,
            continuous_action_threshold=continuous_action_threshold,
            img_height=img_height,
            img_width=img_width,
            grayscale=grayscale,
            obs_type=obs_type,
            stack_num=stack_num,
            padding_type=padding_type,
            frameskip=frameskip,
            maxpool=maxpool,
            noop_max=noop_max,
            episodic_life=episodic_life,
            life_loss_reset=life_loss_reset,
            life_loss_info=life_loss_info,
            reward_clipping=reward_clipping,
            use_fire_reset=use_fire_reset,
            reset_cache=reset_cache,
        )
        if num_threads and num_workers and num_threads != num_workers:
            raise ConfigError(f"num_threads={num_threads} and num_workers={num_workers} disagree; pass one")
        affinity = integer(thread_affinity_offset)
        if affinity is None:
            raise ConfigError(
                f"thread_affinity_offset must be an integer (-1: no pinning), got {thread_affinity_offset!r}"
            )
        self.games: list[str] = list(names)
        self.num_actions: list[int] = self.config.num_actions
        factory = AtariEngineFactory(
            self.config, tuple(self.config.action_set(i) for i in range(n)),
            tuple(game_info(g).screen_height for g in names), affinity,
        )
        action: spaces.Space
        if continuous:
            action = spaces.Box(
                np.array([0.0, -np.pi, 0.0], np.float32), np.array([1.0, np.pi, 1.0], np.float32), (3,), np.float32
            )
        else:
            action = spaces.Discrete(max(self.num_actions))
        super().__init__(
            factory,
            num_envs=n,
            single_observation_space=spaces.Box(0, 255, self.config.obs_shape, np.uint8),
            single_action_space=action,
            metadata={"games": list(names), "render_modes": ["rgb_array"], "render_fps": 60},
            render_mode=render_mode,
            backend=backend,
            num_workers=num_workers or num_threads or None,
            batch_size=batch_size or None,
            autoreset_mode=autoreset_mode,
            seed=seed,
            copy=copy,
            context=context,
            daemon=daemon,
            inline=inline,
            extras=INFO_ARRAYS,
            address=address,
        )
        self._counts = np.asarray(self.num_actions)
        self._mixed = not continuous and len(set(self.num_actions)) > 1
        if self._mixed:  # no one action space: the games' action counts differ
            self.single_action_space = None  # type: ignore[assignment]
            self.action_space = spaces.MultiDiscrete(self._counts[: self.batch_size])  # the first batch's

    # -- actions ---------------------------------------------------------------------------------------------------

    def _batch_action_space(self, ids: np.ndarray) -> spaces.MultiDiscrete | None:
        """With games of different action counts, each batch's ``MultiDiscrete`` of its envs' counts (the vector
        env builds it once per batch composition: building one costs ~15 us)."""
        return spaces.MultiDiscrete(self._counts[ids]) if self._mixed else None

    def _check_env_actions(self, ids: np.ndarray, values: np.ndarray, offsets: np.ndarray | None) -> None:
        if self.config.continuous or not self._mixed:
            return
        limits = self._counts[ids]
        if offsets is not None:
            limits = np.repeat(limits, np.diff(offsets))
        over = values >= limits
        if np.count_nonzero(over):
            bad = np.flatnonzero(over)
            row = int(bad[0]) if offsets is None else int(np.searchsorted(offsets, bad[0], side="right") - 1)
            env_id = int(ids[row])
            where = f"sequence {row}" if offsets is not None else f"actions[{row}]"
            raise ActionError(
                f"{where}: action {values[bad[0]]} is outside the range of env {env_id} "
                f"({self.games[env_id]!r} takes actions 0..{self.num_actions[env_id] - 1})"
            )

    # -- per-env emulator access (ale-py's AtariEnv methods, for several envs) -----------------------------------

    def clone_state(self, env_ids: Sequence[int] | None = None, include_rng: bool = True) -> list[AtariState]:
        """Snapshots of envs ``env_ids`` (all if None): emulator, frame stack and episode; picklable."""
        return self._call_each("clone_state", env_ids, None if include_rng else [False] * self._count(env_ids))

    def restore_state(self, states: Sequence[AtariState], env_ids: Sequence[int] | None = None) -> None:
        """Put envs ``env_ids`` (all if None) back into ``states`` (from :meth:`clone_state` of the same games).

        The next step continues exactly as it did after the clone, with one exception that is ALE's: its saved
        state lacks the previous action, which a sticky repeat (``repeat_action_probability > 0``) replays, so
        with sticky actions the first frames after a restore may repeat a different action.
        """
        states = list(states)
        self._call_each("restore_state", env_ids, states)

    def render(self, env_ids: Sequence[int] | None = None) -> tuple[np.ndarray, ...]:
        """Each env's full-size RGB screen (210 x 160 x 3), as ``AtariEnv.render()`` returns it; ``env_ids``: only
        those envs' (cheaper: what a video recorder asks for). Needs ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array":
            raise ConfigError(
                f"render() needs render_mode='rgb_array' when the vector env is made; it was made with "
                f"render_mode={self.render_mode!r}"
            )
        return tuple(self._call_each("render", env_ids))

    def get_ram(self, env_ids: Sequence[int] | None = None) -> np.ndarray:
        """The 128 bytes of Atari RAM of each env of ``env_ids`` (all if None), shape ``(len(env_ids), 128)``."""
        return np.stack(self._call_each("get_ram", env_ids))

    def get_action_meanings(self, env_ids: Sequence[int] | None = None) -> list[list[str]]:
        """Each env's action names (``["NOOP", "FIRE", ...]``), as ale-py's ``AtariEnv.get_action_meanings``."""
        return self._call_each("get_action_meanings", env_ids)

    def _count(self, env_ids: Sequence[int] | None) -> int:
        return self.num_envs if env_ids is None else len(env_ids)

    def __repr__(self) -> str:
        kinds = dict.fromkeys(self.games)
        return f"AtariVectorEnv({', '.join(f'{g}x{self.games.count(g)}' for g in kinds)}, backend={self.backend!r})"
