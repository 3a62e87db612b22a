"""Every PettingZoo env installed here equals PettingZoo's own, stepped by hand, as rows on the multiprocessing backend.

PettingZoo's butterfly, classic, SISL and Atari families and MPE2's scenarios: Parallel envs, and AEC envs that shoal
converts (board and card games with action masks beside the board, one agent acting per step), their episodes cut
short or ended by illegal moves so that every env resets several times. ``test_multiagent.py`` tests the rules
themselves (padding, masks, seeds, errors) on a few of them and on scripted envs.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import re
import warnings
from functools import partial

import ale_py.roms
import pytest

pytest.importorskip("pettingzoo")
from pettingzoo.utils.conversions import aec_to_parallel, turn_based_aec_to_parallel  # noqa: E402
from pettingzoo.utils.env import AECEnv  # noqa: E402
from test_multiagent import run_beside  # noqa: E402

FAMILIES = ("pettingzoo.butterfly", "pettingzoo.classic", "pettingzoo.sisl", "pettingzoo.atari", "mpe2")
ATARI = ("pong_v3", "quadrapong_v4", "othello_v3", "space_invaders_v2")
"""PettingZoo's Atari games compared (of 24, each ~1.5 s: the games differ only in their ROM, which ale-py's own
Atari tests cover): two players, four, turns in a board game, and two players sharing one screen."""

NOT_COMPARED = {
    "hanabi_v5": "OpenSpiel's Hanabi (through Shimmy) deals a new deck from outside the env's seed at each unseeded "
                 "reset, so two copies of it stepped alike part after their first episode (by hand too)",
}


def _modules() -> tuple[dict[str, object], dict[str, str]]:
    """The env modules of each family (``name_vN``) that import here, and why the others do not."""
    found, missing = {}, {}
    for family in FAMILIES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            package = importlib.import_module(family)
            for info in pkgutil.iter_modules(package.__path__):
                if not re.search(r"_v\d+$", info.name) or info.name in NOT_COMPARED:
                    continue
                if family == "pettingzoo.atari" and info.name not in ATARI:
                    continue
                try:
                    found[info.name] = importlib.import_module(f"{family}.{info.name}")
                except ImportError as exc:  # (PettingZoo's DependencyNotInstalled is one)
                    missing[info.name] = f"{type(exc).__name__}: {exc}"
    return found, missing


MODULES, MISSING = _modules()


def _env_fn(module):
    """The env's constructor, with episodes cut to 7 cycles where it takes ``max_cycles``; an AEC env where the
    module has no Parallel API (the classic games), which shoal converts as PettingZoo does."""
    fn = getattr(module, "parallel_env", None) or module.env
    if module.__name__.startswith("pettingzoo.atari."):  # (the ROMs ale-py ships, where PettingZoo looks for them)
        fn = partial(fn, auto_rom_install_path=os.path.dirname(ale_py.roms.get_rom_path("pong")))
    try:
        fn(max_cycles=7).close()
        return partial(fn, max_cycles=7)
    except TypeError:
        return fn


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_pettingzoo_env_installed_here_equals_pettingzoo_by_hand(name):
    fn = _env_fn(MODULES[name])
    probe = fn()
    convert = None  # (what shoal does to an AEC env, done by hand: PettingZoo's own conversions)
    if isinstance(probe, AECEnv):
        convert = aec_to_parallel if probe.metadata.get("is_parallelizable") else turn_based_aec_to_parallel
    probe.close()
    run_beside(fn, 3, 25, {"backend": "multiprocessing", "num_workers": 2}, convert=convert)


def test_the_catalogue_covers_every_family_and_every_env_of_them_imports():
    """The test extra installs what each family's envs import (chess and RLCard for the classic games, the
    multi-agent ALE for the Atari games), except Box2D on Python 3.14 (SISL's multiwalker)."""
    box2d = ["multiwalker_v9"] if importlib.util.find_spec("Box2D") is None else []
    assert sorted(MISSING) == box2d, MISSING
    expected = [*ATARI, "pistonball_v6", "knights_archers_zombies_v11", "cooperative_pong_v6", "tictactoe_v3",
                "connect_four_v3", "go_v5", "rps_v2", "chess_v6", "leduc_holdem_v4", "texas_holdem_v4",
                "multiwalker_v9", "pursuit_v5", "simple_spread_v3", "simple_speaker_listener_v4"]
    assert set(expected) - set(MODULES) == set(box2d), (sorted(set(expected) - set(MODULES)), MISSING)
