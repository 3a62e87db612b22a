"""The settings of a multi-ROM Atari vector env, validated once, shared by the env and its engines."""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from shoal.atari.frames import SCREEN_HEIGHT, SCREEN_WIDTH
from shoal.atari.roms import FULL_ACTIONS, check_game, game_info
from shoal.errors import ConfigError
from shoal.vector.checks import check_positive_int, integer

ObsType = Literal["rgb", "grayscale", "ram"]
LifeLossReset = Literal["game", "continue"]
Padding = Literal["reset", "zero"]
OBS_TYPES = ("rgb", "grayscale", "ram")
RAM_SIZE = 128
"""Bytes of Atari 2600 RAM: the observation of ``obs_type="ram"`` (per stacked frame)."""


@dataclass(frozen=True)
class AtariConfig:
    """What every env of an :class:`~shoal.AtariVectorEnv` runs; the names and defaults are ale-py 0.12's."""

    games: tuple[str, ...]
    """One ale-py ROM id per env; the same id may repeat."""
    modes: tuple[int | None, ...]
    """Game mode per env (None: the ROM's default)."""
    difficulties: tuple[int | None, ...]
    """Difficulty per env (None: the ROM's default)."""
    max_num_frames_per_episode: int = 108000
    """Truncate an episode after this many emulator frames (ALE's own setting, as in Gymnasium)."""
    repeat_action_probability: float = 0.0
    """Sticky actions: the probability that the emulator repeats the previous action for a frame."""
    full_action_space: bool = False
    """All 18 ALE actions for every game, instead of each game's minimal set."""
    continuous: bool = False
    """Actions are (radius, theta, fire) in a Box, mapped onto the full action set (ale-py's continuous mode)."""
    continuous_action_threshold: float = 0.5
    """Threshold on the joystick components and fire for continuous actions."""
    img_height: int = 84
    """Observation height."""
    img_width: int = 84
    """Observation width."""
    grayscale: bool = True
    """Gray observations ``(stack, h, w)``; else RGB ``(stack, h, w, 3)`` (follows ``obs_type``)."""
    obs_type: ObsType = "grayscale"
    """``"grayscale"`` or ``"rgb"`` screens (max-pooled, resized, stacked), or ``"ram"``: the console's 128 bytes
    of RAM at the end of each step, stacked ``(stack, 128)``, neither resized nor max-pooled."""
    stack_num: int = 4
    """How many frames an observation stacks, oldest first."""
    padding_type: Padding = "reset"
    """What fills the stack before an episode's first frame (Gymnasium's ``FrameStackObservation`` keyword):
    ``"reset"`` that frame repeated (Gymnasium's default, EnvPool's), ``"zero"`` zeros (ale-py's
    ``AtariVectorEnv``, SB3's ``VecFrameStack``)."""
    frameskip: int | tuple[int, int] = 4
    """Emulator frames per step, each repeating the action; ``(low, high)``: a number in ``[low, high)`` drawn each
    step from the env's own generator, as Gymnasium's ``AtariEnv`` does."""
    maxpool: bool = True
    """Observe the max of the last two frames of a step (Atari sprites flicker)."""
    noop_max: int = 30
    """Each reset runs between 1 and noop_max NOOP frames (0: none)."""
    episodic_life: bool = False
    """A lost life ends the episode (``terminated``); what the autoreset does next is ``life_loss_reset``."""
    life_loss_reset: LifeLossReset = "game"
    """With ``episodic_life``, what the autoreset after a lost life does: ``"game"`` restarts the game (ale-py's
    ``AtariVectorEnv``); ``"continue"`` plays the same game on, after the no-ops and FIRE of a reset, with the new
    screen pushed onto the frame stack, until a game over or truncation restarts it (EnvPool and SB3's
    ``EpisodicLifeEnv``). ``info["game_over"]`` tells a real game over from a lost life either way."""
    life_loss_info: bool = False
    """A lost life sets ``terminated`` without ending the episode (no reset follows)."""
    reward_clipping: bool = True
    """Clip each step's reward to [-1, 1]; ``info["raw_reward"]`` keeps the unclipped one."""
    use_fire_reset: bool = True
    """Press FIRE once after the no-ops of a reset, in games whose action set has FIRE."""
    reset_cache: bool | Literal["auto"] = "auto"
    """Restore saved episode starts instead of emulating each reset: each worker emulates each distinct start (ROM,
    mode, difficulty, number of no-ops) once, from the state the ROM powers on in, then restores it, so a reset costs
    a state restore instead of ~67 + up to 30 emulated frames. ``"auto"`` (the default) does it only where rollouts
    stay exactly as emulated resets give them: with ``repeat_action_probability=0`` (sticky actions make every start
    random), the default mode and difficulty, and a ROM that :mod:`shoal.atari.starts` found to reset to the same
    state whatever game came before (``shoal/data/exact_starts.txt``: Breakout, Pong and Space Invaders among them),
    checked with the installed ale-py's version; elsewhere it emulates. ``True`` restores starts for every ROM: in the
    others every episode starts as a fresh game's first does, instead of carrying RAM over from the game before
    (same seeds still give the same rollouts on every backend); it needs ``repeat_action_probability=0``.
    ``False`` emulates every reset. ``info["frame_number"]`` counts the frames of restored starts either way."""

    def restores_starts(self, env_id: int) -> bool:
        """Whether env ``env_id``'s resets restore saved starts (:attr:`reset_cache`)."""
        if self.reset_cache != "auto":
            return bool(self.reset_cache)
        if self.repeat_action_probability or self.modes[env_id] is not None or self.difficulties[env_id] is not None:
            return False
        from shoal.atari.starts import restores_exactly

        return restores_exactly(self.games[env_id])

    def __post_init__(self) -> None:
        self._take_numbers()
        n = len(self.games)
        if n == 0:
            raise ConfigError("games must name at least one ROM")
        if len(self.modes) != n or len(self.difficulties) != n:
            raise ConfigError(f"mode and difficulty need one value per env ({n}) or a single value")
        for game in self.games:
            check_game(game)
        for env_id, (game, mode, difficulty) in enumerate(zip(self.games, self.modes, self.difficulties)):
            info = game_info(game)
            if mode is not None and (integer(mode) is None or mode not in info.modes):
                raise ConfigError(f"env {env_id} ({game!r}): mode {mode!r} is not one of its modes {list(info.modes)}")
            if difficulty is not None and (integer(difficulty) is None or difficulty not in info.difficulties):
                raise ConfigError(
                    f"env {env_id} ({game!r}): difficulty {difficulty!r} is not one of {list(info.difficulties)}"
                )
        if not isinstance(self.frameskip, tuple):
            check_positive_int("frameskip", self.frameskip)
        elif not (len(self.frameskip) == 2 and all(integer(v) is not None for v in self.frameskip)
                  and 1 <= self.frameskip[0] < self.frameskip[1]):
            raise ConfigError(
                f"frameskip as a tuple must be (low, high) with 1 <= low < high (each step repeats its action a "
                f"number of frames drawn from [low, high)), got {self.frameskip!r}"
            )
        if self.life_loss_reset not in ("game", "continue"):
            raise ConfigError(f"life_loss_reset must be 'game' or 'continue', got {self.life_loss_reset!r}")
        if self.life_loss_reset == "continue" and not self.episodic_life:
            raise ConfigError(
                "life_loss_reset='continue' says what follows an episode that a lost life ended: it needs "
                "episodic_life=True (for a life-loss signal without ending episodes, use life_loss_info=True)"
            )
        if self.obs_type not in OBS_TYPES:
            raise ConfigError(f"obs_type must be one of {', '.join(map(repr, OBS_TYPES))}, got {self.obs_type!r}")
        if self.obs_type != "ram" and self.grayscale != (self.obs_type == "grayscale"):
            raise ConfigError(f"obs_type={self.obs_type!r} and grayscale={self.grayscale!r} disagree")
        if self.padding_type not in ("reset", "zero"):
            raise ConfigError(f"padding_type must be 'reset' or 'zero', got {self.padding_type!r}")
        if integer(self.noop_max) is None or self.noop_max < 0:
            raise ConfigError(f"noop_max must be a non-negative integer, got {self.noop_max!r}")
        sticky = self.repeat_action_probability
        if not isinstance(sticky, numbers.Real) or not 0.0 <= sticky <= 1.0:
            raise ConfigError(f"repeat_action_probability must be in [0, 1], got {sticky!r}")
        if self.reset_cache not in (True, False, "auto"):
            raise ConfigError(f"reset_cache must be True, False or 'auto', got {self.reset_cache!r}")
        if self.reset_cache is True and sticky:
            raise ConfigError(
                f"reset_cache=True restores saved episode starts, but with repeat_action_probability={sticky} every "
                f"start is random (sticky actions in the reset frames); use repeat_action_probability=0 or "
                f"reset_cache=False"
            )
        if self.img_height > SCREEN_HEIGHT * 4 or self.img_width > SCREEN_WIDTH * 4:
            raise ConfigError(f"img_height/img_width larger than 4x the {SCREEN_HEIGHT}x{SCREEN_WIDTH} screen")

    def _take_numbers(self) -> None:
        """Numpy's numbers as Python's (ale-py takes either): the sizes, refused unless positive integers, and the
        frameskip, no-ops, modes, difficulties and probability, whose checks follow."""
        def keep(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name in ("stack_num", "img_height", "img_width", "max_num_frames_per_episode"):
            keep(name, check_positive_int(name, getattr(self, name)))

        def plain(value: Any) -> Any:  # an integer as Python's; anything else stays, for its check to name
            number = integer(value)
            return value if number is None else number

        frameskip = self.frameskip
        keep("frameskip", tuple(map(plain, frameskip)) if isinstance(frameskip, tuple) else plain(frameskip))
        keep("noop_max", plain(self.noop_max))
        keep("modes", tuple(map(plain, self.modes)))
        keep("difficulties", tuple(map(plain, self.difficulties)))
        if isinstance(self.repeat_action_probability, numbers.Real):
            keep("repeat_action_probability", float(self.repeat_action_probability))

    @property
    def num_envs(self) -> int:
        return len(self.games)

    def action_set(self, env_id: int) -> tuple[int, ...]:
        """The ALE action ids env ``env_id`` maps its action indices onto."""
        if self.full_action_space or self.continuous:
            return FULL_ACTIONS
        return game_info(self.games[env_id]).minimal_actions

    @property
    def num_actions(self) -> list[int]:
        """How many actions each env takes."""
        return [len(self.action_set(i)) for i in range(self.num_envs)]

    @property
    def obs_shape(self) -> tuple[int, ...]:
        if self.obs_type == "ram":
            return (self.stack_num, RAM_SIZE)
        shape = (self.stack_num, self.img_height, self.img_width)
        return shape if self.grayscale else (*shape, 3)


def observation_type(obs_type: str | None, grayscale: bool | None) -> tuple[ObsType, bool]:
    """``(obs_type, grayscale)`` from Gymnasium's ``obs_type`` and ale-py's ``grayscale`` keyword, which mean the same
    for screens: either may be given (neither: gray), both only if they agree."""
    if obs_type is None:
        return ("rgb", False) if grayscale is False else ("grayscale", True)
    if obs_type == "ram":
        if grayscale is not None:
            raise ConfigError("grayscale= has no meaning with obs_type='ram' (the observation is the RAM)")
        return "ram", True
    if obs_type not in ("rgb", "grayscale"):
        raise ConfigError(f"obs_type must be one of {', '.join(map(repr, OBS_TYPES))}, got {obs_type!r}")
    if grayscale is not None and grayscale != (obs_type == "grayscale"):
        raise ConfigError(f"obs_type={obs_type!r} and grayscale={grayscale!r} disagree: pass one of them")
    return ("grayscale", True) if obs_type == "grayscale" else ("rgb", False)


def per_env(name: str, value: Any, n: int) -> tuple[Any, ...]:
    """One value for every env, or a list of ``n`` values, as a tuple of ``n``."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ConfigError(f"{name} needs one value per env ({n}), got {len(value)}")
        return tuple(value)
    return (value,) * n


def games_of(games: Sequence[str] | None, game: str | None, num_envs: int | None) -> tuple[str, ...]:
    """The per-env ROM ids from ale-py's two forms: ``games=[...]`` or ``game=..., num_envs=...``."""
    if games is not None:
        if game is not None:
            raise ConfigError("pass games=[...] or game=... with num_envs, not both")
        if isinstance(games, str):
            raise ConfigError(f"games must be a list of ROM ids; for one game use game={games!r}, num_envs=N")
        games = tuple(games)
        if num_envs is not None and num_envs != len(games):
            raise ConfigError(f"num_envs={num_envs} but {len(games)} games were given (num_envs is inferred)")
        return games
    if game is None:
        raise ConfigError("name the ROMs: games=['pong', 'breakout', ...] or game='pong', num_envs=N")
    return (game,) * check_positive_int("num_envs", num_envs, f" with game={game!r}")
