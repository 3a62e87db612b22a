"""Run an agent on the sanity suite: train it on each env, measure the trained policy, compare with the optimum.

An agent is a function ``train(env_id, total_steps, seed) -> policy`` (``policy(obs, starts) -> actions``, see
:mod:`shoal.sanity.suite`); :func:`load_agent` finds one from ``"path/to/file.py:train"`` or
``"package.module:train"``. An env counts as solved when the policy reaches ``threshold`` (0.9) of its optimal
return.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from shoal.errors import ConfigError
from shoal.sanity import IDS
from shoal.sanity.suite import SUITE, evaluate

Agent = Callable[..., Any]


@dataclass(frozen=True)
class SanityResult:
    """How one trained policy did on one env."""

    env_id: str
    checks: str
    reached: float
    """Mean return of the trained policy over ``episodes`` episodes."""
    optimal: float
    random: float
    steps: int
    """Env steps the agent was given to train."""
    seconds: float
    """Training time."""
    threshold: float

    @property
    def fraction(self) -> float:
        """``reached`` as a fraction of the optimum."""
        return self.reached / self.optimal

    @property
    def solved(self) -> bool:
        return self.reached >= self.threshold * self.optimal


@dataclass(frozen=True)
class SanityReport:
    agent: str
    seed: int
    results: list[SanityResult]

    @property
    def solved(self) -> list[str]:
        return [r.env_id for r in self.results if r.solved]

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "seed": self.seed,
                "results": [{**asdict(r), "fraction": r.fraction, "solved": r.solved} for r in self.results]}


def load_agent(spec: str) -> Agent:
    """The function ``spec`` names: ``"file.py:name"`` (a path) or ``"package.module:name"``."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise ConfigError(f"an agent is 'path/to/file.py:function' or 'module:function', got {spec!r}")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise ConfigError(f"agent file {where!r} does not exist")
        module_name = f"_shoal_agent_{path.stem}_{abs(hash(str(path.resolve())))}"
        loader = importlib.util.spec_from_file_location(module_name, path)
        if loader is None or loader.loader is None:
            raise ConfigError(f"cannot load {where!r} as a Python file")
        module = importlib.util.module_from_spec(loader)
        sys.modules[module_name] = module
        loader.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise ConfigError(f"cannot import agent module {where!r}: {exc}") from None
    agent = getattr(module, name, None)
    if not callable(agent):
        raise ConfigError(f"{where!r} has no function {name!r}")
    return agent


def sanity(
    agent: Agent | str,
    env_ids: Sequence[str] = IDS,
    *,
    seed: int = 1,
    budget_scale: float = 1.0,
    episodes: int = 1000,
    threshold: float = 0.9,
    progress: Callable[[str, int, int], None] | None = None,
) -> SanityReport:
    """Train ``agent`` on each env of ``env_ids`` (the suite's budget times ``budget_scale``) and measure it.

    ``progress(env_id, done, total)`` is called before each env.
    """
    name = agent if isinstance(agent, str) else getattr(agent, "__qualname__", repr(agent))
    train = load_agent(agent) if isinstance(agent, str) else agent
    unknown = [e for e in env_ids if e not in SUITE]
    if unknown:
        raise ConfigError(f"not sanity envs: {unknown}; the suite is {list(SUITE)}")
    results = []
    for k, env_id in enumerate(env_ids):
        if progress is not None:
            progress(env_id, k, len(env_ids))
        entry = SUITE[env_id]
        steps = max(1, int(entry.budget * budget_scale))
        start = time.perf_counter()
        policy = train(env_id, total_steps=steps, seed=seed)
        seconds = time.perf_counter() - start
        reached = evaluate(policy, env_id, episodes=episodes, seed=10_000 + seed)
        results.append(SanityResult(env_id, entry.checks, reached, entry.optimal, entry.random, steps, seconds,
                                    threshold))
    return SanityReport(name, seed, results)
