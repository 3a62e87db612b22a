"""Videos of chosen envs of a vector env, one file per episode: Gymnasium's ``RecordVideo`` for a whole vector env.

    >>> envs = shoal.AtariVectorEnv(games=["pong", "breakout"], render_mode="rgb_array")
    >>> envs = shoal.video.RecordEpisodes(envs, "videos", env_ids=[0, 1], every=10)
    >>> # train as usual: envs.reset(...), envs.step(...); every 10th episode of env 0 and of env 1 is written as
    >>> # videos/env0-pong-episode0.mp4, videos/env1-breakout-episode10.mp4, ...

Only the envs being recorded are rendered, and only during the episodes being recorded, so the cost between those
episodes is a few Python operations per step. Frames are the envs' ``render()`` (full-size RGB for Atari), taken
after every reset and step; an episode's file is written when it ends. Encoding is ``imageio``'s (MP4 with H.264
through PyAV, GIF through Pillow): ``pip install "shoal[video]"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode, VectorWrapper

from shoal.bench.output import output_folder
from shoal.errors import ConfigError, MissingDependencyError
from shoal.vector.checks import check_positive_int


class RecordEpisodes(VectorWrapper):
    """Record every ``every``-th episode of each env in ``env_ids`` into ``folder`` (MP4 or GIF).

    Args:
        env: a vector env made with ``render_mode="rgb_array"`` whose ``render(env_ids)`` returns those envs'
            frames (:class:`shoal.AtariVectorEnv`); next-step autoreset (the default).
        folder: where the files go (created if needed).
        env_ids: the envs to record.
        every: record an env's episodes 0, every, 2 * every, ...
        fps: frames per second of the files.
        format: ``"mp4"`` or ``"gif"``.

    ``written`` lists the files written so far.
    """

    _recording = False
    """Set once the constructor is through: until then :meth:`close` leaves the env alone. (Gymnasium 1.1's
    ``VectorEnv.__del__`` closes a wrapper it collects, and a wrapper's ``close`` closes its env: a constructor that
    refused its arguments would otherwise close the caller's env, which the caller still holds.)"""

    def __init__(
        self,
        env: Any,
        folder: str | Path,
        env_ids: Sequence[int] = (0,),
        every: int = 1,
        fps: int = 30,
        format: str = "mp4",
    ) -> None:
        super().__init__(env)
        if getattr(env, "render_mode", None) != "rgb_array":
            raise ConfigError("RecordEpisodes needs a vector env made with render_mode='rgb_array'")
        if getattr(env, "autoreset_mode", AutoresetMode.NEXT_STEP) is not AutoresetMode.NEXT_STEP:
            raise ConfigError("RecordEpisodes follows next-step autoreset (the default): the frame that ends an "
                              "episode is rendered before the env resets")
        if format not in ("mp4", "gif"):
            raise ConfigError(f"format must be 'mp4' or 'gif', got {format!r}")
        every = check_positive_int("every", every)
        ids = [int(i) for i in env_ids]
        if not ids or any(not 0 <= i < env.num_envs for i in ids):
            raise ConfigError(f"env_ids must name envs in [0, {env.num_envs}), got {list(env_ids)!r}")
        try:
            import imageio.v3  # noqa: F401

            if format == "mp4":
                import av  # noqa: F401  (imageio's MP4 writer here; GIF needs only Pillow)
        except ImportError as exc:
            raise MissingDependencyError(
                f'RecordEpisodes needs {exc.name} to write {format} files: pip install "shoal[video]"'
            ) from exc
        self.folder = output_folder(folder, "folder")
        self.every, self.fps, self.format = every, fps, format
        self.episodes = dict.fromkeys(ids, -1)  # the episode each recorded env is in (-1: before its first reset)
        self.frames: dict[int, list[np.ndarray]] = {}  # env -> frames of its episode being recorded
        self._ended: set[int] = set()  # envs whose last step ended their episode: they reset on their next step
        self.written: list[Path] = []
        self._render: Callable[[list[int]], Sequence[Any]] = env.render  # frames of the envs named
        self._recording = True

    def reset(self, *, seed: Any = None, options: dict | None = None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        mask = (options or {}).get("reset_mask")
        for env_id in self.episodes:
            if mask is None or mask[env_id]:
                self.frames.pop(env_id, None)  # an episode cut short by a reset is not written
                self._begin(env_id)
        self._capture(self._rows(info))
        return obs, info

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        rows = self._rows(info)
        for env_id in rows:
            if env_id in self._ended:  # this step was its autoreset: a new episode starts with this frame
                self._begin(env_id)
        self._capture(rows)
        for env_id, row in rows.items():
            if terminated[row] or truncated[row]:
                frames = self.frames.pop(env_id, None)
                if frames:
                    self.written.append(self._write(env_id, frames))
                self._ended.add(env_id)
        return obs, reward, terminated, truncated, info

    def close(self, **kwargs: Any) -> None:
        if not self._recording:
            return
        self.frames.clear()  # episodes that never ended are not written
        super().close(**kwargs)

    # -- helpers -------------------------------------------------------------------------------------------------

    def _rows(self, info: dict) -> dict[int, int]:
        """The recorded envs in this batch, with their rows."""
        ids = info.get("env_id")
        ids = range(self.env.num_envs) if ids is None else np.asarray(ids).tolist()
        return {env_id: row for row, env_id in enumerate(ids) if env_id in self.episodes}

    def _begin(self, env_id: int) -> None:
        """``env_id`` starts its next episode: record it if it is one of every ``every``."""
        self._ended.discard(env_id)
        self.episodes[env_id] += 1
        if self.episodes[env_id] % self.every == 0:
            self.frames[env_id] = []

    def _capture(self, rows: dict[int, int]) -> None:
        wanted = [env_id for env_id in rows if env_id in self.frames]
        if wanted:
            for env_id, frame in zip(wanted, self._render(wanted)):
                self.frames[env_id].append(np.asarray(frame))

    def _write(self, env_id: int, frames: list[np.ndarray]) -> Path:
        import imageio.v3 as iio

        games = getattr(self.env, "games", None)
        name = f"env{env_id}" + (f"-{games[env_id]}" if games else "") + f"-episode{self.episodes[env_id]}"
        path = self.folder / f"{name}.{self.format}"
        if self.format == "gif":
            iio.imwrite(path, np.stack(frames), duration=1000 / self.fps, loop=0)
        else:
            iio.imwrite(path, np.stack(frames), plugin="pyav", fps=self.fps, codec="libx264")
        return path
