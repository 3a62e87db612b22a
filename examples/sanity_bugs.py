"""Classic PPO mistakes planted in copies of ``ppo_sanity.py``, and the sanity envs that catch them.

    python examples/sanity_bugs.py                  # every bug on the envs listed for it (a few minutes)
    python examples/sanity_bugs.py --bug entropy-sign

Each bug is one line of ``ppo_sanity.py`` changed; the copy is written to a temporary folder and run through
``shoal.bench.sanity``. A bug is caught when at least one env stays below 90% of its optimal return (the correct
``ppo_sanity.py`` solves every env).
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

from shoal.bench import SanityReport, sanity

EXAMPLE = Path(__file__).resolve().parent / "ppo_sanity.py"


@dataclass(frozen=True)
class Bug:
    name: str
    what: str
    line: str
    """The line of ppo_sanity.py the bug changes (stripped)."""
    bugged: str
    caught_by: tuple[str, ...]
    """The envs that caught it in our run (seed 1, the suite's budgets; see the README); empty: none did."""


BUGS = (
    Bug("obs-action-off-by-one", "the rollout stores each action beside the observation that came after it",
        "x_buf[t], dones[t] = next_x, next_done", "x_buf[t - 1], dones[t] = next_x, next_done",
        ("shoal/Squared-v0", "shoal/Password-v0", "shoal/Memory-v0", "shoal/Spaces-v0")),
    Bug("greedy-rollouts", "the rollout plays each head's most likely action instead of sampling it",
        "action = torch.stack([d.sample() for d in dists], dim=-1)",
        "action = torch.stack([d.probs.argmax(-1) for d in dists], dim=-1)",
        ("shoal/Squared-v0", "shoal/Password-v0", "shoal/Stochastic-v0", "shoal/Memory-v0", "shoal/Spaces-v0",
         "shoal/Bandit-v0")),
    Bug("reward-off-by-one", "each step's reward is stored against the action before it",
        "rewards[t] = torch.as_tensor(reward, dtype=torch.float32)",
        "rewards[t - 1] = torch.as_tensor(reward, dtype=torch.float32)",
        ("shoal/Squared-v0", "shoal/Memory-v0", "shoal/Multiagent-v0", "shoal/Spaces-v0", "shoal/Bandit-v0")),
    Bug("entropy-sign", "the entropy bonus is subtracted from the objective: the policy is pushed to determinism",
        "loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss",
        "loss = pg_loss + args.ent_coef * entropy + args.vf_coef * v_loss",
        ()),
    Bug("first-head-only", "the probability ratio uses only the first action head's log-probability",
        "logp = sum(d.log_prob(b_a[idx, k]) for k, d in enumerate(dists))",
        "logp = dists[0].log_prob(b_a[idx, 0])",
        ("shoal/Spaces-v0",)),
    Bug("gae-not-reset", "advantages run on across episode ends (GAE's recursion ignores done)",
        "advantages[t] = last = delta + args.gamma * args.gae_lambda * nonterminal * last",
        "advantages[t] = last = delta + args.gamma * args.gae_lambda * last",
        ("shoal/Multiagent-v0",)),  # at seed 1; not at seeds 2-4 (see the README)
    Bug("bootstrap-ignores-terminated", "the value of the next episode's first observation is bootstrapped into "
        "the last step of the one that ended",
        "delta = rewards[t] + args.gamma * following * nonterminal - values[t]",
        "delta = rewards[t] + args.gamma * following - values[t]",
        ()),
)


def planted(bug: Bug, folder: Path) -> Path:
    """A copy of ppo_sanity.py with ``bug`` in it, written to ``folder``."""
    source = EXAMPLE.read_text()
    lines = source.splitlines(keepends=True)
    hits = [k for k, line in enumerate(lines) if line.strip() == bug.line]
    if len(hits) != 1:
        raise ValueError(f"{bug.name}: the line {bug.line!r} is in ppo_sanity.py {len(hits)} times, not once")
    k = hits[0]
    indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())]
    lines[k] = indent + bug.bugged + "\n"
    path = folder / f"ppo_{bug.name.replace('-', '_')}.py"
    path.write_text("".join(lines))
    return path


def run(bug: Bug, env_ids: tuple[str, ...], folder: Path, seed: int = 1) -> SanityReport:
    return sanity(f"{planted(bug, folder)}:train", env_ids, seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bug", choices=[b.name for b in BUGS], help="one bug (default: all)")
    parser.add_argument("--all-envs", action="store_true", help="run each bug on all seven envs")
    args = parser.parse_args()
    from shoal.sanity import IDS

    with tempfile.TemporaryDirectory() as tmp:
        for bug in BUGS:
            if args.bug and bug.name != args.bug:
                continue
            envs = IDS if args.all_envs or not bug.caught_by else bug.caught_by
            report = run(bug, envs, Path(tmp))
            failed = [f"{r.env_id} {r.fraction:.0%}" for r in report.results if not r.solved]
            verdict = f"caught by {', '.join(failed)}" if failed else "NOT caught"
            print(f"{bug.name}: {bug.what}\n    {verdict}", flush=True)


if __name__ == "__main__":
    main()
