"""Does ALE's ``reset_game`` always give the same state? Why shoal emulates every reset instead of restoring one.

    python benchmarks/reset_states.py [ROM ...]    (default: every ROM ale-py ships)

For each ROM, two emulators with the same seed and sticky actions off play the same random actions. One resets
with ``reset_game`` at every game over (or after 1,500 frames). The other restores the state it saved after its
first reset. After each reset, the script compares RAM, screen, lives and frame numbers, and it compares the two
again at every later frame. A ROM that differs would play differently from a restored state. Each ROM runs in its
own process: ALE exits the process on the ROMs it cannot load alone (combat, joust, maze_craze, warlords).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np

FRAMES_PER_EPISODE = 1500


def emulator(game: str) -> object:
    import ale_py
    from ale_py import roms

    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.setFloat("repeat_action_probability", 0.0)
    ale.setInt("random_seed", 7)
    ale.setInt("max_num_frames_per_episode", FRAMES_PER_EPISODE)
    ale.loadROM(roms.get_rom_path(game))
    return ale


def first_difference(game: str, resets: int = 4, max_frames: int = 8000) -> str | None:
    """How the restored emulator first differs from the one that resets for real, or None."""
    real, restored = emulator(game), emulator(game)
    real.reset_game()
    restored.reset_game()
    saved, saved_frame, offset = restored.cloneState(include_rng=False), restored.getFrameNumber(), 0
    actions = real.getMinimalActionSet()
    rng = np.random.default_rng(1)
    done = frames = 0
    while done < resets and frames < max_frames:
        action = actions[rng.integers(len(actions))]
        if real.act(action) != restored.act(action):
            return f"reward at frame {frames}"
        frames += 1
        checks = {
            "screen": np.array_equal(real.getScreen(), restored.getScreen()),
            "RAM": np.array_equal(real.getRAM(), restored.getRAM()),
            "lives": real.lives() == restored.lives(),
            "episode frame number": real.getEpisodeFrameNumber() == restored.getEpisodeFrameNumber(),
            "frame number": real.getFrameNumber() == restored.getFrameNumber() + offset,
            "game over": real.game_over() == restored.game_over(),
        }
        wrong = [name for name, same in checks.items() if not same]
        if wrong:
            return f"{', '.join(wrong)} at frame {frames}, {done} resets in"
        if real.game_over():
            real.reset_game()
            offset += restored.getFrameNumber() - saved_frame
            restored.restoreState(saved)
            done += 1
            if not np.array_equal(real.getRAM(), restored.getRAM()):
                return f"RAM right after reset {done}"
            if real.lives() != restored.lives():
                return f"lives right after reset {done}"
    return None


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(first_difference(sys.argv[2]) or "same")
        return
    from ale_py import roms

    games = sys.argv[1:] or roms.get_all_rom_ids()
    ran, differ = 0, []
    for game in games:
        run = subprocess.run([sys.executable, __file__, "--one", game], capture_output=True, text=True)
        lines = run.stdout.strip().splitlines()
        if run.returncode != 0 or not lines:
            print(f"{game:24s} did not run (exit code {run.returncode})", flush=True)
            continue
        ran += 1
        print(f"{game:24s} {lines[-1]}", flush=True)
        if lines[-1] != "same":
            differ.append(game)
    print(f"\n{len(differ)} of the {ran} ROMs that ran differ after a reset: {', '.join(differ) or 'none'}")


if __name__ == "__main__":
    main()
