"""The Atari engine: a group of ALE emulators, each running its own ROM, stepped in one process.

One ``ale_py.ALEInterface`` per env; the frame loop is Python (a few calls per emulator frame), and everything
between emulator calls is batched across the group: the screens of all envs are max-pooled, resized and pushed onto
their frame stacks in one C call (:mod:`shoal.atari.frames`), directly in the shared observation buffer.

A step follows Gymnasium's ``AtariPreprocessing`` exactly (the reference the tests compare against): the action is
repeated ``frameskip`` frames, summing rewards; the loop stops at a game over, a truncation or (``episodic_life``) a
lost life, before reading that frame's screen; the last two screens of the step are read for the max-pool. With
``obs_type="ram"`` the RAM is read once, at the end of the step. Seeding follows ``ale_py.env.AtariEnv``: a seed
derives the ALE seed and the env's generator (no-ops, stochastic frameskip) through ``SeedSequence``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode

from shoal.atari import frames
from shoal.atari.config import AtariConfig
from shoal.atari.frames import FrameStack, RamStack
from shoal.atari.roms import FIRE, NOOP, action_meanings, new_ale
from shoal.errors import ConfigError, StateError
from shoal.vector import _worker
from shoal.vector.buffers import Buffers
from shoal.vector.engine import Engine

INFO_ARRAYS: dict[str, tuple[np.dtype, tuple[int, ...]]] = {
    "lives": (np.dtype(np.int32), ()),
    "frame_number": (np.dtype(np.int64), ()),
    "episode_frame_number": (np.dtype(np.int64), ()),
    "raw_reward": (np.dtype(np.float64), ()),
    "game_over": (np.dtype(np.bool_), ()),
}
"""Per-env arrays the engine writes every step; the vector env returns them in ``info``."""


@dataclass(frozen=True)
class AtariState:
    """A snapshot of one env: the emulator, its frame stack and episode bookkeeping. Picklable.

    Restoring it (:meth:`shoal.AtariVectorEnv.restore_state`) puts the env back exactly: the next step continues
    from ``observation``, with the same lives and episode progress.
    """

    game: str
    ale_state: Any
    observation: np.ndarray
    screens: np.ndarray
    lives: int
    needs_reset: bool
    play_on: bool = False
    """A lost life ended the episode and the next one continues the game (``life_loss_reset="continue"``)."""
    frame_offset: int = 0
    """Frames of episode starts restored rather than emulated (``reset_cache``), which ``frame_number`` counts."""


class SavedStart(NamedTuple):
    """An episode start kept by ``reset_cache``: the emulator after it (without its random generator), how many
    frames emulating it took, the screen it showed and the lives it had. (A restored state does not bring back
    everything ALE keeps: not the screen, nor some ROMs' lives counter, which in Atlantis 2 reports the game before's
    lives until the next frame.)"""

    state: Any
    frames: int
    screen: np.ndarray
    lives: int


@dataclass(frozen=True)
class AtariEngineFactory:
    """Builds the engine of a group of envs; pickled into each worker."""

    config: AtariConfig
    action_sets: tuple[tuple[int, ...], ...]
    screen_heights: tuple[int, ...]
    """Each env's screen height (:attr:`GameInfo.screen_height <shoal.atari.roms.GameInfo.screen_height>`), read by
    the parent, which has loaded every ROM for its actions already."""
    affinity_offset: int = -1

    def __call__(self, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode) -> AtariEngine:
        return AtariEngine(self, env_ids, buffers, autoreset_mode)


class AtariEngine(Engine):
    """The ALE emulators of envs ``env_ids``."""

    discounted_extras = ("raw_reward",)

    def __init__(
        self, factory: AtariEngineFactory, env_ids: range, buffers: Buffers, autoreset_mode: AutoresetMode
    ) -> None:
        super().__init__(env_ids, buffers, autoreset_mode)
        self._pin(factory.affinity_offset)
        config = self.config = factory.config
        self.ales = []
        for _ in env_ids:
            ale = new_ale()
            ale.setFloat("repeat_action_probability", float(config.repeat_action_probability))
            ale.setInt("max_num_frames_per_episode", int(config.max_num_frames_per_episode))
            self.ales.append(ale)
        self._loaded = [False] * len(env_ids)
        self._rngs: list[np.random.Generator | None] = [None] * len(env_ids)
        self._seeds = [-1] * len(env_ids)  # each env's last reset seed (np_random_seed)
        self.action_sets = [factory.action_sets[i] for i in env_ids]
        self._has_fire = [FIRE in a for a in self.action_sets]
        self._lives = np.zeros(len(env_ids), np.int64)
        self._game_over = np.zeros(len(env_ids), np.bool_)  # the episode ended: reset next (life_loss_info aside)
        self._play_on = np.zeros(len(env_ids), np.bool_)  # a lost life ended the episode; the game goes on
        # reset_cache: which envs restore saved starts; each episode start emulated so far, by (game, mode,
        # difficulty, no-ops), each from the state a freshly loaded ROM powers on in (by game, mode, difficulty: the
        # same whatever the seed), so that a start does not depend on which env's game came before it, nor on how
        # envs are grouped; and per env the frames its restored starts did not emulate (frame_number counts them, as
        # if they had been).
        self._restores = [config.restores_starts(i) for i in env_ids]
        self._starts: dict[tuple, SavedStart] = {}
        self._power_on: dict[tuple, Any] = {}
        self._frame_offset = np.zeros(len(env_ids), np.int64)
        # Each env's palette table (gray value of each index, learned from its ALE; see frames.screen_reader).
        self._palettes = np.zeros((len(env_ids), 2, 256), np.uint8)
        self._ram = config.obs_type == "ram"
        self._frames: FrameStack | RamStack
        if self._ram:
            self._frames = RamStack(buffers.obs, len(env_ids), config.padding_type)
            self._readers = [frames.ram_reader(ale) for ale in self.ales]
        else:
            heights = [factory.screen_heights[i] for i in env_ids]
            self._frames = FrameStack(
                buffers.obs, config.grayscale, config.maxpool, len(env_ids), heights, config.padding_type
            )
            raw = {h: np.zeros((h, frames.SCREEN_WIDTH), np.uint8) for h in heights}  # palette indices being read
            self._readers = [
                frames.screen_reader(ale, config.grayscale, table if frames.PALETTE_LOOKUP else None, raw[h])
                for ale, table, h in zip(self.ales, self._palettes, heights)
            ]
        extras = buffers.extras
        self._lives_out, self._frame_out = extras["lives"], extras["frame_number"]
        self._episode_frame_out, self._raw_out = extras["episode_frame_number"], extras["raw_reward"]
        self._game_over_out = extras["game_over"]
        if config.continuous:
            self._joystick = joystick_table()

    @staticmethod
    def _pin(offset: int) -> None:
        """Pin worker ``w`` to core ``offset + w`` (modulo the cores it may use), as ale-py pins its threads
        (``thread_affinity_offset``); the calling process, and any process that is not a worker, is left alone."""
        if offset < 0 or _worker.host_index is None:
            return
        if not hasattr(os, "sched_setaffinity"):
            raise ConfigError("thread_affinity_offset needs os.sched_setaffinity, which this platform lacks")
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[(offset + _worker.host_index) % len(cores)]})

    # -- reset -----------------------------------------------------------------------------------------------------

    def _load(self, local: int, seed: int | None) -> None:
        """Seed and (re)load the ROM, as ``AtariEnv.seed_game`` + ``load_game`` do."""
        env_id = self.env_ids.start + local
        ale = self.ales[local]
        np_seed, ale_seed = np.random.SeedSequence(seed).generate_state(n_words=2)
        self._rngs[local], _ = seeding.np_random(int(np_seed))
        self._seeds[local] = -1 if seed is None else seed
        ale.setInt("random_seed", int(np.int64(ale_seed).astype(np.int32)))
        from ale_py import roms

        ale.loadROM(roms.get_rom_path(self.config.games[env_id]))
        self._palettes[local] = 0  # learned anew for the ROM just loaded
        self._frame_offset[local] = 0  # the emulator counts frames from 0 again
        if self.config.modes[env_id] is not None:
            ale.setMode(self.config.modes[env_id])
        if self.config.difficulties[env_id] is not None:
            ale.setDifficulty(self.config.difficulties[env_id])
        self._loaded[local] = True
        if self._restores[local]:
            self._power_on.setdefault(self._rom_key(env_id), ale.cloneState(include_rng=False))

    def _reset_envs(self, ids: np.ndarray, seeds: Sequence[int | None], options: dict | None) -> list[dict]:
        local_ids = ids - self.env_ids.start
        for local, seed in zip(local_ids.tolist(), seeds):
            if seed is not None or not self._loaded[local]:
                self._load(local, seed)
            self._new_game(local)
        self._play_on[local_ids] = False
        target = self.buffers.target_rows(ids)
        self._frames.push(local_ids, target, target, fill=True)
        return [{} for _ in range(len(ids))]

    def _autoreset_envs(self, ids: np.ndarray) -> list[dict]:
        """A new game, except (``life_loss_reset="continue"``) where a lost life ended the episode: that game plays
        on from the no-ops and FIRE of a reset, its new screen pushed onto the frame stack (EnvPool's episodic
        life). A game that ends during those no-ops restarts, and its stack is filled as at a reset."""
        local_ids = ids - self.env_ids.start
        on = self._play_on[local_ids]
        if not np.count_nonzero(on):
            return super()._autoreset_envs(ids)
        if not on.all():
            super()._autoreset_envs(ids[~on])
        playing, local = ids[on], local_ids[on]
        self._play_on[local] = False
        restarted = np.array([self._start(i) for i in local.tolist()])
        target = self.buffers.target_rows(playing)
        self._frames.push(local, target, self.buffers.obs_rows(playing))
        if restarted.any():
            self._frames.push(local[restarted], target[restarted], target[restarted], fill=True)
        return [{} for _ in range(len(ids))]

    def _new_game(self, local: int) -> None:
        """``reset_game`` and the start of an episode; with ``reset_cache``, a saved start restored (see
        :attr:`AtariConfig.reset_cache <shoal.atari.config.AtariConfig.reset_cache>`)."""
        ale = self.ales[local]
        if not self._restores[local]:
            ale.reset_game()
            self._start(local)
            return
        rom, noops = self._rom_key(self.env_ids.start + local), self._noops(local)
        before = ale.getFrameNumber() + self._frame_offset[local]  # what frame_number says before this start
        saved = self._starts.get(rom + (noops,))
        if saved is None:  # this worker's first start of the ROM (recording runs on this env's emulator)
            self._record_starts(local, rom)
            saved = self._starts[rom + (noops,)]
        ale.restoreState(saved.state)
        self._frame_offset[local] = before + saved.frames - ale.getFrameNumber()
        self._begin(local, saved.screen, saved.lives)  # what a restored state does not bring back (SavedStart)

    def _record_starts(self, local: int, rom: tuple) -> None:
        """Emulate, on env ``local``'s emulator, every episode start of ``rom`` (one per no-op count) as
        :meth:`_start` plays it after ``reset_game`` from the power-on state, and save each: one reset, then one
        no-op frame (and the FIRE of the start it ends) at a time."""
        config, ale = self.config, self.ales[local]
        fire = config.use_fire_reset and self._has_fire[local]
        screen = np.empty_like(self._frames.views[local][0])
        ale.restoreState(self._power_on[rom])
        powered = ale.getFrameNumber()
        ale.reset_game()
        noops = 0
        for count in range(1, config.noop_max + 1) if config.noop_max > 0 else (0,):
            while noops < count:
                ale.act(NOOP)
                if ale.game_over():
                    ale.reset_game()
                noops += 1
            if fire:
                after_noops = ale.cloneState(include_rng=False)
                ale.act(FIRE)
                if ale.game_over():
                    ale.reset_game()
            self._readers[local](screen)
            self._starts[rom + (count,)] = SavedStart(
                ale.cloneState(include_rng=False), ale.getFrameNumber() - powered, screen.copy(), ale.lives()
            )
            if fire:
                ale.restoreState(after_noops)

    def _rom_key(self, env_id: int) -> tuple:
        config = self.config
        return config.games[env_id], config.modes[env_id], config.difficulties[env_id]

    def _noops(self, local: int) -> int:
        """How many no-op frames start the next episode (drawn from the env's generator, as AtariEnv does)."""
        config, rng = self.config, self._rngs[local]
        assert rng is not None  # seeded by the env's first reset (_load)
        return int(rng.integers(1, config.noop_max + 1)) if config.noop_max > 0 else 0

    def _start(self, local: int, noops: int | None = None) -> bool:
        """The no-ops (``noops``, or drawn) and FIRE that start an episode (after ``reset_game``, or where a lost life
        ended the last one), then read its first screen. Returns whether the game ended and restarted on the way."""
        config, ale = self.config, self.ales[local]
        restarted = False
        for _ in range(self._noops(local) if noops is None else noops):
            ale.act(NOOP)
            if ale.game_over():
                ale.reset_game()
                restarted = True
        if config.use_fire_reset and self._has_fire[local]:
            ale.act(FIRE)
            if ale.game_over():
                ale.reset_game()
                restarted = True
        self._begin(local)
        return restarted

    def _begin(self, local: int, screen: np.ndarray | None = None, lives: int | None = None) -> None:
        """The bookkeeping of an episode that starts now: lives, flags, infos and its first screen (read from the
        emulator, or ``screen`` and ``lives``)."""
        self._lives[local] = self.ales[local].lives() if lives is None else lives
        self._game_over[local] = False
        self._game_over_out[self.env_ids.start + local] = False
        if screen is None:
            self._readers[local](self._frames.views[local][0])
        else:
            self._frames.views[local][0][...] = screen
        self._frames.views[local][1][...] = 0
        self._write_info(local, 0.0)

    # -- step ------------------------------------------------------------------------------------------------------

    def _step_envs(self, ids: np.ndarray, actions: np.ndarray) -> list[dict]:
        config, b = self.config, self.buffers
        first = self.env_ids.start
        local_ids = ids - first
        if config.continuous:
            action_ids, strengths = self._continuous_actions(actions)
        else:
            action_ids, strengths = actions.tolist(), [1.0] * len(ids)
        for j, local in enumerate(local_ids.tolist()):
            action = action_ids[j] if config.continuous else self.action_sets[local][action_ids[j]]
            reward, ended, lost_life = self._run_frames(local, action, strengths[j])
            if self._ram:  # the RAM at the end of the step, however it ended
                self._readers[local](self._frames.views[local][0])
            ale, env_id = self.ales[local], first + local
            now = ale.lives()
            lost_life = lost_life or (config.life_loss_info and now < self._lives[local])
            self._lives[local] = now
            b.terminations[env_id] = lost_life or (ended and ale.game_over(with_truncation=False))
            b.truncations[env_id] = ended and ale.game_truncated()
            self._game_over[local] = ended or (config.episodic_life and lost_life)
            self._play_on[local] = config.life_loss_reset == "continue" and lost_life and not ended
            self._game_over_out[env_id] = ended and ale.game_over(with_truncation=False)
            b.rewards[env_id] = max(-1, min(1, reward)) if config.reward_clipping else reward
            self._write_info(local, float(reward))
        self._frames.push(local_ids, b.target_rows(ids), b.obs_rows(ids))
        return [{} for _ in range(len(ids))]

    def _run_frames(self, local: int, action: int, strength: float) -> tuple[int, bool, bool]:
        """Repeat ``action`` for up to ``frameskip`` frames, reading the last two screens.

        Returns the summed reward, whether the game ended (game over or ALE's frame limit) and whether a life was
        lost (``episodic_life`` only). Like ``AtariPreprocessing``, the loop stops at either, before reading that
        frame's screen, so an ending step shows the screens of the frames before it. A stochastic frameskip draws
        the step's frame count from the env's generator first, as ``AtariEnv`` does; RAM is read by the caller.
        """
        ale, shown, lives, read = self.ales[local], self._frames.views[local], self._lives, self._readers[local]
        frameskip, episodic = self.config.frameskip, self.config.episodic_life
        if isinstance(frameskip, tuple):
            rng = self._rngs[local]
            assert rng is not None  # seeded by the env's first reset (_load)
            frameskip = int(rng.integers(*frameskip))
        before_last = frameskip - 2 if self.config.maxpool and not self._ram else -1
        last = frameskip - 1 if not self._ram else -1
        reward = 0
        for t in range(frameskip):
            reward += ale.act(action, strength)
            if ale.game_over():
                return reward, True, False
            if episodic:
                now = ale.lives()
                if now < lives[local]:
                    lives[local] = now
                    return reward, False, True
                lives[local] = now
            if t == before_last:
                read(shown[1])
            elif t == last:
                read(shown[0])
        return reward, False, False

    def _write_info(self, local: int, raw_reward: float) -> None:
        """Write env ``local``'s info arrays; ``self._lives`` must already hold its lives."""
        env_id, ale = self.env_ids.start + local, self.ales[local]
        self._lives_out[env_id] = self._lives[local]
        self._frame_out[env_id] = ale.getFrameNumber() + self._frame_offset[local]
        self._episode_frame_out[env_id] = ale.getEpisodeFrameNumber()
        self._raw_out[env_id] = raw_reward

    def _continuous_actions(self, actions: np.ndarray) -> tuple[list[int], list[float]]:
        """ale-py's continuous mapping: (radius, theta, fire) to a joystick action and a paddle strength."""
        threshold = self.config.continuous_action_threshold
        radius, theta, fire = actions[:, 0], actions[:, 1], actions[:, 2]
        x, y = radius * np.cos(theta), radius * np.sin(theta)
        horizontal = (x > threshold).astype(np.int64) - (x < -threshold) + 1
        vertical = (y > threshold).astype(np.int64) - (y < -threshold) + 1
        action_ids = self._joystick[horizontal, vertical, (fire > threshold).astype(np.int64)]
        return action_ids.tolist(), radius.astype(np.float64).tolist()

    # -- semantics hooks -------------------------------------------------------------------------------------------

    def _episode_over(self, ids: np.ndarray) -> np.ndarray:
        return self._game_over[ids - self.env_ids.start]  # set on game over, ALE's truncation and episodic lives

    def _final_infos(self, ids: np.ndarray, infos: list[dict]) -> list[dict]:
        columns = [self.buffers.extras[name][ids].tolist() for name in INFO_ARRAYS]
        return [dict(zip(INFO_ARRAYS, values)) for values in zip(*columns)]

    # -- calls -----------------------------------------------------------------------------------------------------

    def call(self, ids: np.ndarray, name: str, args: tuple, kwargs: dict) -> list[Any]:
        local_ids = (ids - self.env_ids.start).tolist()
        if name == "clone_state":
            with_rng = args[0] if args else [True] * len(local_ids)
            return [self._clone(local, flag) for local, flag in zip(local_ids, with_rng)]
        if name == "restore_state":
            (states,) = args
            for local, state in zip(local_ids, states):
                self._restore(local, state)
            return [None] * len(local_ids)
        if name == "get_ram":
            return [self._ale(local).getRAM() for local in local_ids]
        if name == "render":  # the full-size RGB screen, as ale_py.env.AtariEnv.render() returns it
            return [self._ale(local).getScreenRGB() for local in local_ids]
        if name == "get_action_meanings":
            return [action_meanings(self.action_sets[local]) for local in local_ids]
        raise AttributeError(f"AtariVectorEnv envs have no method {name!r}")

    def get_attr(self, ids: np.ndarray, name: str) -> list[Any]:
        """Gymnasium's ``AtariEnv`` attributes a vector env reads per env: ``np_random``, the generator of the no-ops
        and random frameskips (seeded as ``AtariEnv.seed_game`` seeds its own), and ``np_random_seed``, the seed of
        the last seeded reset (-1 if none was: Gymnasium's "unknown")."""
        local_ids = (ids - self.env_ids.start).tolist()
        for local in local_ids:
            self._ale(local)  # (reset first)
        if name == "np_random":
            return [self._rngs[local] for local in local_ids]
        if name == "np_random_seed":
            return [self._seeds[local] for local in local_ids]
        raise AttributeError(f"AtariVectorEnv envs have no attribute {name!r} (np_random and np_random_seed only)")

    def _ale(self, local: int) -> Any:
        if not self._loaded[local]:
            raise StateError(f"env {self.env_ids.start + local} has not been reset yet")
        return self.ales[local]

    def _clone(self, local: int, include_rng: bool = True) -> AtariState:
        env_id = self.env_ids.start + local
        return AtariState(
            game=self.config.games[env_id],
            ale_state=self._ale(local).cloneState(include_rng=include_rng),
            observation=self.buffers.obs[self.buffers.obs_rows(env_id)].copy(),
            screens=np.stack(self._frames.views[local]),
            lives=int(self._lives[local]),
            needs_reset=bool(self.buffers.needs_reset[env_id]),
            play_on=bool(self._play_on[local]),
            frame_offset=int(self._frame_offset[local]),
        )

    def _restore(self, local: int, state: AtariState) -> None:
        env_id = self.env_ids.start + local
        if not isinstance(state, AtariState):
            raise ConfigError(f"env {env_id}: expected an AtariState from clone_state(), got {type(state).__name__}")
        if state.game != self.config.games[env_id]:
            raise ConfigError(f"env {env_id} runs {self.config.games[env_id]!r}; this state is of {state.game!r}")
        self._ale(local).restoreState(state.ale_state)
        self.buffers.obs[self.buffers.obs_rows(env_id)] = state.observation
        for view, screen in zip(self._frames.views[local], state.screens):
            view[...] = screen
        self._lives[local] = state.lives
        self._game_over[local] = state.needs_reset
        self.buffers.needs_reset[env_id] = state.needs_reset
        self._clean = None  # (what the engine knew of needs_reset)
        self._play_on[local] = state.play_on
        self._frame_offset[local] = state.frame_offset
        self._write_info(local, 0.0)


def joystick_table() -> np.ndarray:
    """ALE action id for (horizontal, vertical, fire) with -1/0/1 components offset by one, as ale-py maps them
    (its pool's ``map_action_idx``)."""
    from ale_py.env import AtariEnv

    table = np.zeros((3, 3, 2), np.int32)
    for h in (-1, 0, 1):
        for v in (-1, 0, 1):
            for f in (0, 1):
                table[h + 1, v + 1, f] = int(AtariEnv.map_action_idx(h, v, bool(f)).value)
    return table
