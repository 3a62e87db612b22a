"""Checking a batch-native env against a single-instance Gymnasium env of the same game, step for step."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from gymnasium.vector import AutoresetMode


def compare(batch_env: Any, single_env: Callable[[], Any], num_envs: int, *, steps: int, seed: int,
            actions: Callable[[int], Any] | None = None, autoreset_mode: str | AutoresetMode = "next_step") -> int:
    """Step a batch-native env (through ``shoal.make``, serial) and ``num_envs`` single-instance Gymnasium envs
    (``single_env()`` each, in Gymnasium's ``SyncVectorEnv``) side by side with the same seeds and actions, and
    raise ``AssertionError`` at the first step where observations, rewards, terminations, truncations or infos
    (with same-step's ``final_obs`` and ``final_info``) differ.

    ``actions(t)``: the batch of actions at step ``t`` (default: sampled from the action space, seeded).
    Returns how many episodes ended (so a caller can require that the comparison went through episode ends).
    """
    import gymnasium

    from shoal.make import make

    from shoal.vector.checks import parse_autoreset_mode

    mode = parse_autoreset_mode(autoreset_mode)
    ours = make(batch_env, num_envs, backend="serial", autoreset_mode=mode)
    theirs = gymnasium.vector.SyncVectorEnv([single_env] * num_envs, autoreset_mode=mode)
    try:
        if actions is None:
            ours.action_space.seed(seed)
            actions = lambda t: ours.action_space.sample()  # noqa: E731
        _same("reset", ours.reset(seed=seed)[0], theirs.reset(seed=seed)[0])
        ended = 0
        for t in range(steps):
            a = actions(t)
            mine, other = ours.step(a), theirs.step(a)
            for name, x, y in zip(("observations", "rewards", "terminations", "truncations"), mine, other):
                _same(f"step {t}: {name}", x, y)
            _same_infos(f"step {t}: info", mine[4], other[4])
            ended += int(np.count_nonzero(mine[2] | mine[3]))
        return ended
    finally:
        ours.close()
        theirs.close()


def _same_infos(where: str, mine: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Vector infos agree: the same keys, and where a key's mask is set, the same values (element by element for
    object arrays such as ``final_obs``, whose other elements are None)."""
    if sorted(mine) != sorted(theirs):
        raise AssertionError(f"{where}: batch-native and single-instance envs differ in keys: {sorted(mine)} vs "
                             f"{sorted(theirs)}")
    for key, value in mine.items():
        if key.startswith("_"):
            _same(f"{where}[{key!r}]", value, theirs[key])
        elif isinstance(value, dict):
            _same_infos(f"{where}[{key!r}]", value, theirs[key])
        else:
            for row in np.flatnonzero(mine[f"_{key}"]).tolist():
                _same(f"{where}[{key!r}][{row}]", value[row], theirs[key][row])


def _same(where: str, mine: Any, theirs: Any) -> None:
    if isinstance(mine, dict):
        for key in mine:
            _same(f"{where}[{key!r}]", mine[key], theirs[key])
        return
    if isinstance(mine, tuple):
        for k, (a, b) in enumerate(zip(mine, theirs)):
            _same(f"{where}[{k}]", a, b)
        return
    a, b = np.asarray(mine), np.asarray(theirs)
    if a.shape != b.shape or not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-6, atol=1e-6):
        rows: Any = np.flatnonzero((a != b).reshape(len(a), -1).any(axis=1)) if a.shape == b.shape else []
        raise AssertionError(f"{where}: batch-native and single-instance envs differ (envs {list(rows)}):\n{a}\n{b}")
