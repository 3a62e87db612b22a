"""Which ROMs' episode starts can be restored instead of emulated, with the same rollouts.

A reset (``reset_game``, then no-ops and FIRE) emulates ~70-100 frames. For a ROM whose ``reset_game`` gives the same
emulator state whatever came before it, a start saved once (from the state the ROM powers on in) can be restored
instead, and every later frame is the same as after an emulated reset. :func:`first_difference` checks one ROM; the
ROMs that passed it with the ale-py version this file names are listed in ``shoal/data/exact_starts.txt``, and
``reset_cache="auto"`` (the default) restores starts for them alone.

    python -m shoal.atari.starts [ROM ...]     # check ROMs, print each verdict; with none named: all, and rewrite
                                               # the list (~3.5 min on 2 cores)

The check, per ROM, is a rollout with and without restored starts, as an env plays them: two emulators (each with
its own ALE seed, and neither with the seed the start was saved with, as envs' seeds differ) play the same actions
in lockstep; every so often one calls ``reset_game`` and the other restores the start, and they play on. Each of
``RESETS`` resets (per pair of seeds) comes after a history of random length (up to ``MAX_HISTORY`` frames, or a game
over) played with uniformly random actions, random actions held ~10 frames, or one action throughout; ``FUZZES``
more come after both overwrote their 128 bytes of RAM with the same random values, which stand for any RAM content a
game could leave behind. At every frame the two must show the same screen, RAM, reward, lives, game over and
episode frame number, and the frame number of the one that resets must run ahead by exactly the frames before each
restore (``info["frame_number"]`` counts restored starts' frames as if emulated); right after each reset, the one
that resets must show the screen saved with the start. A restored state does not bring back everything ALE keeps:
not the frame buffer (the first frames after a restore can show parts of what was drawn before it, as in Amidar),
which is why the two play the same game before each reset rather than from separate states, nor some ROMs' lives
counter (Atlantis 2's reports the lives of the game before until the next frame). The engine reports a restored
start's screen and lives as saved with it, so right after a reset the check compares those. A ROM passes if nothing
ever differs. This is evidence, not proof: a history no check played could still leave a trace (Assault differs
only after some histories, which is why they are many and varied); RAM on a cartridge, which a few ROMs carry, is
covered by the played histories alone.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from shoal.atari.roms import game_ids, new_ale
from shoal.vector.cpus import usable_cores

SEEDS = ((11, 12), (2024, 7))
"""ALE seeds of each pair of emulators that play in lockstep (the start is saved with seed 5)."""
RESETS = 40
MAX_HISTORY = 3000
FUZZES = 6
LIST = "exact_starts.txt"


@lru_cache(maxsize=1)
def exact_starts() -> tuple[str, frozenset[str]]:
    """The ale-py version the list was checked with (``major.minor``) and the ROMs that passed."""
    text = resources.files("shoal.data").joinpath(LIST).read_text()
    version, games = "", set()
    for line in text.splitlines():
        if line.startswith("# ale-py "):
            version = line.split()[2]
        elif line and not line.startswith("#"):
            games.add(line.strip())
    return version, frozenset(games)


def restores_exactly(game: str) -> bool:
    """Whether ``game``'s episode starts (default mode and difficulty) can be restored with unchanged rollouts on the
    installed ale-py: it passed :func:`first_difference` with this ale-py's major.minor version."""
    import ale_py

    version, games = exact_starts()
    return game in games and _major_minor(ale_py.__version__) == version


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _emulator(game: str, seed: int) -> Any:
    from ale_py import roms

    ale = new_ale()
    ale.setFloat("repeat_action_probability", 0.0)
    ale.setInt("random_seed", seed)
    ale.loadROM(roms.get_rom_path(game))
    return ale


def first_difference(game: str) -> str | None:
    """How a rollout of ``game`` with restored starts first differed from one with emulated resets, or None."""
    saver = _emulator(game, 5)
    powered = saver.getFrameNumber()  # loading the ROM emulates a reset already
    saver.reset_game()
    start, start_screen, start_lives = saver.cloneState(include_rng=False), saver.getScreen(), saver.lives()
    start_frames = saver.getFrameNumber() - powered
    actions = saver.getMinimalActionSet()
    rng = np.random.default_rng(0)
    for seeds in SEEDS:
        real, restored = _emulator(game, seeds[0]), _emulator(game, seeds[1])
        ahead = 0  # frames the emulated resets took that the restores skipped
        for k in range(RESETS + FUZZES + 1):
            history = "power on"
            if k:
                history, wrong = _play(real, restored, ahead, actions, rng)
                if wrong:
                    return f"{wrong} (ALE seeds {seeds}, {history} after reset {k})"
            if k > RESETS:
                history += ", then random RAM"
                for address in range(128):
                    value = int(rng.integers(256))
                    real.setRAM(address, value)
                    restored.setRAM(address, value)
            before = real.getFrameNumber()
            real.reset_game()
            restored.restoreState(start)
            ahead = real.getFrameNumber() - restored.getFrameNumber()
            where = f"reset {k + 1} (ALE seeds {seeds}, after {history})"
            if real.getFrameNumber() - before != start_frames:
                return f"{where} took {real.getFrameNumber() - before} frames, {start_frames} from power on"
            if not np.array_equal(real.getScreen(), start_screen):
                return f"screen right after {where}"
            wrong = _differ(real, restored, ahead, lives=start_lives)
            if wrong:
                return f"{wrong} right after {where}"
        history, wrong = _play(real, restored, ahead, actions, rng)
        if wrong:
            return f"{wrong} (ALE seeds {seeds}, {history} after the last reset)"
    return None


def _play(real: Any, restored: Any, ahead: int, actions: Any, rng: np.random.Generator) -> tuple[str, str | None]:
    """Play both on for a random number of frames (up to a game over) in one of three styles, comparing them at
    every frame; say what was played and the first difference, or None."""
    frames = int(np.exp(rng.uniform(0, np.log(MAX_HISTORY))))
    style = ("uniformly random actions", "random actions held ~10 frames", "one action")[rng.integers(3)]
    action = actions[rng.integers(len(actions))]
    for t in range(frames):
        if style[0] == "u" or (style[0] == "r" and rng.random() < 0.1):
            action = actions[rng.integers(len(actions))]
        if real.act(action) != restored.act(action):
            return f"{t + 1} frames of {style}", f"reward at frame {t + 1}"
        wrong = _differ(real, restored, ahead, screen=True)
        if wrong:
            return f"{t + 1} frames of {style}", f"{wrong} at frame {t + 1}"
        if real.game_over():
            return f"{t + 1} frames of {style} to a game over", None
    return f"{frames} frames of {style}", None


def _differ(real: Any, restored: Any, ahead: int, screen: bool = False, lives: int | None = None) -> str | None:
    """What differs between the two emulators now (``lives``: the restored one's, as the engine reports them), or
    None."""
    checks = [
        ("RAM", lambda: np.array_equal(real.getRAM(), restored.getRAM())),
        ("lives", lambda: real.lives() == (restored.lives() if lives is None else lives)),
        ("game over", lambda: real.game_over() == restored.game_over()),
        ("episode frame number", lambda: real.getEpisodeFrameNumber() == restored.getEpisodeFrameNumber()),
        ("frame number", lambda: real.getFrameNumber() == restored.getFrameNumber() + ahead),
        ("screen", lambda: not screen or np.array_equal(real.getScreen(), restored.getScreen())),
    ]
    return next((what for what, same in checks if not same()), None)


def main(argv: list[str]) -> None:
    """Check ROMs, each in its own process (ALE ends the process on a ROM it cannot load), and rewrite the list."""
    import subprocess
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    import ale_py

    if len(argv) == 2 and argv[0] == "--one":
        print(first_difference(argv[1]) or "same")
        return
    games = argv or list(game_ids())
    same: list[str] = []
    differ: list[str] = []

    def verdict(game: str) -> str:
        command = [sys.executable, "-m", "shoal.atari.starts", "--one", game]
        run = subprocess.run(command, capture_output=True, text=True)
        return run.stdout.strip().splitlines()[-1] if run.returncode == 0 and run.stdout.strip() else "did not run"

    with ThreadPoolExecutor(usable_cores()) as pool:
        for game, said in zip(games, pool.map(verdict, games)):
            print(f"{game:24s} {said}", flush=True)
            (same if said == "same" else differ).append(game)
    print(f"\n{len(same)} of {len(games)} ROMs restore their starts exactly; the others: {', '.join(differ) or 'none'}")
    if not argv:
        path = Path(str(resources.files("shoal.data").joinpath(LIST)))
        header = [
            "# ROMs whose episode starts can be restored with unchanged rollouts (shoal.atari.starts checked each).",
            f"# ale-py {_major_minor(ale_py.__version__)}",
        ]
        path.write_text("\n".join(header + sorted(same)) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
