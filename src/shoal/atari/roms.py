"""The ROMs ale-py ships: ids, lookup with suggestions, and what each game offers (actions, modes, difficulties)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from shoal.errors import UnknownGameError


@dataclass(frozen=True)
class GameInfo:
    """What one ROM offers.

    Attributes:
        id: ale-py's snake_case ROM id (``"space_invaders"``).
        minimal_actions: the ALE action ids of its minimal action set, in ale-py's order.
        modes: the game modes it accepts (the first is the default).
        difficulties: the difficulties it accepts (the first is the default).
        screen_height: the height of its screen (210 for most ROMs, up to 250; every screen is 160 wide).
    """

    id: str
    minimal_actions: tuple[int, ...]
    modes: tuple[int, ...]
    difficulties: tuple[int, ...]
    screen_height: int = 210

    @property
    def num_actions(self) -> int:
        return len(self.minimal_actions)


FULL_ACTIONS = tuple(range(18))
"""The ALE's legal (full) action set: every joystick direction with and without fire."""

NOOP, FIRE = 0, 1


MULTIPLAYER_ONLY = frozenset({"combat", "joust", "maze_craze", "warlords"})
"""ROMs ale-py ships with no single-player mode: loading one in the ALE ends the process (ale-py's registration
skips the same four)."""


@lru_cache(maxsize=None)
def game_ids() -> tuple[str, ...]:
    """Every single-player ROM id ale-py ships, sorted."""
    from ale_py import roms

    return tuple(sorted(set(roms.get_all_rom_ids()) - MULTIPLAYER_ONLY))


def check_game(game: object) -> str:
    """``game`` if it is a ROM id ale-py ships, else an :class:`UnknownGameError` naming the closest ids."""
    if not isinstance(game, str):
        raise UnknownGameError(f"a game must be an ale-py ROM id (a str such as 'breakout'), got {game!r}")
    ids = game_ids()
    if game in ids:
        return game
    if game in MULTIPLAYER_ONLY:
        raise UnknownGameError(
            f"{game!r} is a multi-player ROM with no single-player mode in the ALE (ale-py registers no env for it)"
        )
    snake = "".join("_" + c.lower() if c.isupper() else c for c in game).lstrip("_").replace("-", "_")
    close = difflib.get_close_matches(snake, ids, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(repr(c) for c in close)}? " if close else ""
    raise UnknownGameError(
        f"unknown ROM id {game!r}: {hint}ROM ids are ale-py's snake_case ids ('ms_pacman', not 'MsPacman'); "
        f"`shoal games` lists all {len(ids)}"
    )


def new_ale() -> Any:
    """A new ``ale_py.ALEInterface``, ALE's logging turned down to errors first: set on an instance, as ale-py's own
    envs do, it comes after the constructor has printed ALE's banner, which breaks the command's progress bars."""
    import ale_py

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    return ale_py.ALEInterface()


@lru_cache(maxsize=None)
def game_info(game: str) -> GameInfo:
    """The actions, modes and difficulties of ROM ``game`` (read once from the ROM itself)."""
    from ale_py import roms

    check_game(game)
    ale = new_ale()
    ale.loadROM(roms.get_rom_path(game))
    return GameInfo(
        id=game,
        minimal_actions=tuple(int(a.value) for a in ale.getMinimalActionSet()),
        modes=tuple(int(m) for m in ale.getAvailableModes()),
        difficulties=tuple(int(d) for d in ale.getAvailableDifficulties()),
        screen_height=int(ale.getScreenDims()[0]),
    )


def action_meanings(actions: tuple[int, ...]) -> list[str]:
    """The ALE names of action ids (``[0, 1] -> ["NOOP", "FIRE"]``), as ale-py's ``get_action_meanings``."""
    import ale_py

    names = {int(v.value): k for k, v in ale_py.Action.__members__.items()}
    return [names[a] for a in actions]
