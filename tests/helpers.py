"""Comparison helpers shared by the tests."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import numpy as np


def assert_same(a, b, path="value"):
    """Bit-for-bit equality of nested dicts/tuples/arrays/scalars, dtypes included."""
    if isinstance(a, dict) or isinstance(b, dict):
        assert isinstance(a, dict) and isinstance(b, dict), f"{path}: {type(a)} vs {type(b)}"
        assert set(a) == set(b), f"{path}: keys {sorted(a)} vs {sorted(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, tuple) or isinstance(b, tuple):
        assert isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b), f"{path}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray) and a.dtype == object:
        assert isinstance(b, np.ndarray) and b.dtype == object and a.shape == b.shape, f"{path}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif a is None or b is None:
        assert a is None and b is None, f"{path}: {a!r} vs {b!r}"
    else:
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        assert a_arr.dtype == b_arr.dtype, f"{path}: dtype {a_arr.dtype} vs {b_arr.dtype}"
        assert a_arr.shape == b_arr.shape, f"{path}: shape {a_arr.shape} vs {b_arr.shape}"
        np.testing.assert_array_equal(a_arr, b_arr, err_msg=path)


def public_names(obj) -> set[str]:
    """The names ``dir(obj)`` lists without a leading underscore: what a peer's object offers the code that uses it."""
    return {name for name in dir(obj) if not name.startswith("_")}


def assert_same_attribute(got, want, name):
    """An attribute as a peer's: a method callable on both, an array equal with its dtype, any other value equal and
    of the same type."""
    if callable(want):
        assert callable(got), name
    elif isinstance(want, np.ndarray):
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert got.dtype == want.dtype, name
    else:
        assert got == want and type(got) is type(want), name


def generator_states(envs):
    """The state of each env's ``np_random`` (generators compare by identity; from workers they are copies)."""
    return [rng.bit_generator.state for rng in envs.np_random]


@contextlib.contextmanager
def beside_gymnasium(fns, mode, **config):
    """``(shoal's vector env of fns with config, Gymnasium's SyncVectorEnv of the same fns)``, both with autoreset
    ``mode``, both closed afterwards: the pair every equivalence test steps side by side."""
    import gymnasium as gym

    import shoal

    with contextlib.closing(gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)) as ref, shoal.make(
        fns, autoreset_mode=mode, **config
    ) as envs:
        yield envs, ref


def rollout(envs, actions_of, steps, seed, gamma=None):
    """Reset with ``seed`` then step ``steps`` times with ``actions_of(t)``; every result, in order."""
    out = [envs.reset(seed=seed)]
    for t in range(steps):
        out.append(envs.step(actions_of(t)) if gamma is None else envs.step(actions_of(t), gamma=gamma))
    return out


def own_trajectories(envs, action_of, seed, calls, length_of=None, each_at_least=0, within_s=60.0):
    """Reset ``envs`` with ``seed`` and step them ``calls`` times (an asynchronous vector env: whichever envs come
    back), each env with ``action_of(env, its own step count)``, or with ``length_of`` an action sequence of
    ``length_of(env, its own step count)`` actions (``action_of(env, 4 * count + k)``, gamma 0.5); then on, for up
    to ``within_s`` seconds, until every env has taken ``each_at_least`` steps of its own (which envs come back first
    is the scheduler's choice: on a loaded host one worker can miss every batch of a few dozen). Per env, what each
    of its own steps returned: ``(observation, reward, terminated, truncated, steps taken (-1 without sequences),
    final observation (same-step mode, an episode that ended; else None))``, to compare with the same envs stepped
    synchronously."""
    from gymnasium import spaces as gym_spaces
    from gymnasium.vector.utils import concatenate, create_empty_array, iterate

    def act(i: int, t: int):
        if length_of is None:
            return action_of(i, t)
        return np.array([action_of(i, 4 * t + k) for k in range(length_of(i, t))], np.int64)

    _, info = envs.reset(seed=seed)
    ids = info["env_id"].tolist() if "env_id" in info else list(range(envs.num_envs))
    t_of, got = {i: 0 for i in range(envs.num_envs)}, {i: [] for i in range(envs.num_envs)}
    made, deadline = 0, time.monotonic() + within_s
    while made < calls or (min(map(len, got.values())) < each_at_least and time.monotonic() < deadline):
        made += 1
        actions = [act(i, t_of[i]) for i in ids]
        if length_of is None:
            space = envs.single_action_space  # (None for Atari games of different action counts: arrays)
            structured = isinstance(space, (gym_spaces.Dict, gym_spaces.Tuple))
            envs.send(concatenate(space, actions, create_empty_array(space, len(actions))) if structured
                      else np.array(actions))
        else:
            envs.send(actions, gamma=0.5)
        for i in ids:
            t_of[i] += 1
        obs, reward, term, trunc, info = envs.recv()
        ids = info["env_id"].tolist() if "env_id" in info else list(range(envs.num_envs))
        ended = info.get("_final_obs", np.zeros(len(ids), bool))
        taken = info.get("steps_taken", np.full(len(ids), -1))
        for row, (i, o) in enumerate(zip(ids, iterate(envs.observation_space, obs))):
            if len(got[i]) < t_of[i]:  # a step's result (an env's first batch after a reset brings its reset)
                final = info["final_obs"][row] if ended[row] else None
                got[i].append((o, reward[row], term[row], trunc[row], taken[row], final))
    return got


def run_without(module, code, timeout=60):
    """Run ``code`` in a fresh Python where importing ``module`` (or a submodule) fails as if it were not installed."""
    hide = textwrap.dedent(
        f"""
        import sys
        class Hide:
            def find_spec(self, name, path=None, target=None):
                if name == {module!r} or name.startswith({module + "."!r}):
                    raise ModuleNotFoundError("No module named {module!r}", name={module!r})
        sys.meta_path.insert(0, Hide())
        """
    )
    return subprocess.run([sys.executable, "-c", hide + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


def memory_grown(run):
    """Bytes of traced memory a second call of ``run`` left held (the first fills every cache): a leak's measure."""
    run()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        run()
        return tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()


def run_readme_block(marker: str, namespace: dict | None = None, edits: dict[str, str] | None = None) -> dict:
    """Run the README's Python block marked ``<!-- marker -->`` in ``namespace`` (a new one by default; a caller's own
    holds what the block made even where it raises), with each text of ``edits`` (a training budget, say) replaced;
    the names it left."""
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = re.search(rf"<!-- {marker} -->\n```python\n(.*?)```", text, re.S)
    assert block, f"the README's example is marked <!-- {marker} -->"
    code = block.group(1)
    for old, new in (edits or {}).items():
        assert old in code, f"the README's example {marker} has {old!r}"
        code = code.replace(old, new)
    namespace = {} if namespace is None else namespace
    exec(compile(code, "README.md", "exec"), namespace)
    return namespace
