"""Atari: many ROMs in one vector env, on ale-py's emulator, with shoal's own batched preprocessing.

A domain pack over :mod:`shoal.vector`: ROM lookup (:mod:`~shoal.atari.roms`), settings
(:mod:`~shoal.atari.config`), batched frame preprocessing (:mod:`~shoal.atari.frames`), the multi-ROM engine any
backend hosts (:mod:`~shoal.atari.engine`) and the user-facing :class:`AtariVectorEnv` (:mod:`~shoal.atari.env`).
"""

from shoal.atari.config import AtariConfig
from shoal.atari.engine import AtariState
from shoal.atari.env import AtariVectorEnv
from shoal.atari.roms import GameInfo, game_ids, game_info

__all__ = ["AtariConfig", "AtariState", "AtariVectorEnv", "GameInfo", "game_ids", "game_info"]
