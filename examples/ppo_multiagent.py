"""PPO with one policy shared by every agent of a PettingZoo env (cleanrl style, one file, MLP, CPU), through shoal.

    python examples/ppo_multiagent.py --total-steps 2000000 --plot curve.png

shoal turns ``num_envs`` copies of MPE's cooperative ``simple_spread`` (three agents cover three landmarks) into one
batch of ``num_envs * 3`` rows, one per agent: the policy sees rows, as a single-agent PPO sees envs. Rows whose
agent is absent (``info["agent_mask"]`` False; simple_spread never removes agents, other envs do) are left out of
the losses, so the same file trains on envs whose agents leave and join. The shared policy also sees a one-hot of
each row's agent. Prints the mean episode return (summed over an episode, averaged over agents) after each update;
``--plot`` draws the curve.

Status: it learns, slowly: with three agents the mean episode return rises from -26.4 (random play: -26.1) to about
-21.7 in 2 M agent steps, where a scripted policy that sends agent k to landmark k scores -14.9 (see the README).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

import shoal


@dataclass
class Args:
    total_steps: int = 2_000_000
    """agent steps over all rows"""
    num_envs: int = 32
    """PettingZoo envs (each gives one row per agent)"""
    num_workers: int = 2
    num_steps: int = 50
    """rollout length per row"""
    max_cycles: int = 25
    """simple_spread's episode length"""
    agents: int = 3
    """simple_spread's agents (and landmarks)"""
    local_ratio: float = 0.5
    """simple_spread's weight of each agent's own collisions against the shared reward (landmarks covered)"""
    lr: float = 7e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    epochs: int = 4
    minibatches: int = 4
    clip: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    hidden: int = 64
    seed: int = 1


def make_env(agents: int, max_cycles: int, local_ratio: float) -> Any:
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(N=agents, max_cycles=max_cycles, local_ratio=local_ratio)


class Agent(nn.Module):
    """An actor and a critic of their own, as cleanrl's PPO for vector observations has them: a shared torso is
    pulled by the critic's regression onto returns of ~-25 and the policy degrades (it did here, from -26 to -32)."""

    def __init__(self, inputs: int, actions: int, hidden: int) -> None:
        super().__init__()

        def mlp(outputs: int) -> nn.Sequential:
            return nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, outputs))

        self.policy, self.value = mlp(actions), mlp(1)

    def forward(self, x: torch.Tensor) -> tuple[Categorical, torch.Tensor]:
        return Categorical(logits=self.policy(x)), self.value(x).squeeze(-1)


def train(**overrides: Any) -> tuple[Agent, list[tuple[int, float]]]:
    """Train; return the agent and the curve: ``(agent steps so far, mean episode return)`` per update with
    finished episodes."""
    args = replace(Args(), **overrides)
    torch.manual_seed(args.seed)
    envs = shoal.make(
        lambda: make_env(args.agents, args.max_cycles, args.local_ratio),
        args.num_envs,
        num_workers=args.num_workers,
        autoreset_mode="same_step",
    )
    n, t_max = envs.num_envs, args.num_steps  # n rows: num_envs * agents
    obs, info = envs.reset(seed=args.seed)
    # the policy is shared, so it sees which agent a row is (a one-hot of info["agent_index"]); without it, agents
    # with the same view of the world act alike and crowd onto one landmark
    who = torch.nn.functional.one_hot(torch.as_tensor(info["agent_index"]), envs.agents_per_env).float()

    def features(obs: np.ndarray) -> torch.Tensor:
        return torch.cat([torch.as_tensor(obs).reshape(n, -1), who], dim=1)

    width = int(np.prod(envs.single_observation_space.shape)) + envs.agents_per_env
    agent = Agent(width, int(envs.single_action_space.n), args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    obs_buf = torch.zeros((t_max, n, width))
    actions, logprobs, rewards, dones, values, masks = (torch.zeros((t_max, n)) for _ in range(6))
    next_obs, next_done = features(obs), torch.zeros(n)
    next_mask = torch.as_tensor(info["agent_mask"], dtype=torch.float32)
    running, curve, steps = np.zeros(n), [], 0
    updates = max(1, args.total_steps // (n * t_max))
    for update in range(updates):
        optimizer.param_groups[0]["lr"] = args.lr * (1 - update / updates)
        finished: list[float] = []
        for t in range(t_max):
            obs_buf[t], dones[t], masks[t] = next_obs, next_done, next_mask
            with torch.no_grad():
                dist, values[t] = agent(next_obs)
                action = dist.sample()
            actions[t], logprobs[t] = action, dist.log_prob(action)
            obs, reward, term, trunc, info = envs.step(action.numpy())
            rewards[t] = torch.as_tensor(reward, dtype=torch.float32)
            running += reward
            ended = term | trunc
            # an env's episode ends for all its rows at once (same-step autoreset: obs starts the next episode)
            over = ended.reshape(args.num_envs, -1).all(axis=1)
            for e in np.flatnonzero(over):
                finished.append(float(running.reshape(args.num_envs, -1)[e].mean()))
                running.reshape(args.num_envs, -1)[e] = 0
            next_obs = features(obs)
            next_done = torch.as_tensor(ended, dtype=torch.float32)
            next_mask = torch.as_tensor(info["agent_mask"], dtype=torch.float32)
        steps += n * t_max
        if finished:
            curve.append((steps, float(np.mean(finished))))
            print(f"agent steps {steps:>9,d}  episode return {curve[-1][1]:8.2f}", flush=True)

        with torch.no_grad():
            _, next_value = agent(next_obs)
            advantages = torch.zeros_like(rewards)
            last = torch.zeros(n)
            for t in reversed(range(t_max)):
                nonterminal = 1.0 - (next_done if t == t_max - 1 else dones[t + 1])
                following = next_value if t == t_max - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * following * nonterminal - values[t]
                advantages[t] = last = delta + args.gamma * args.gae_lambda * nonterminal * last
            returns = advantages + values

        b_obs, b_act, b_logp = obs_buf.reshape(n * t_max, -1), actions.reshape(-1), logprobs.reshape(-1)
        b_adv, b_ret, b_mask = advantages.reshape(-1), returns.reshape(-1), masks.reshape(-1)
        live = torch.nonzero(b_mask).squeeze(-1)  # rows of live agents only: padding rows carry no transition
        size = max(1, len(live) // args.minibatches)
        for _ in range(args.epochs):
            for idx in live[torch.randperm(len(live))].split(size):
                dist, value = agent(b_obs[idx])
                logp = dist.log_prob(b_act[idx])
                ratio = (logp - b_logp[idx]).exp()
                adv = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
                v_loss = 0.5 * ((value - b_ret[idx]) ** 2).mean()
                loss = pg_loss - args.ent_coef * dist.entropy().mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()
    envs.close()
    return agent, curve


def plot(curve: list[tuple[int, float]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([s for s, _ in curve], [r for _, r in curve])
    ax.set_xlabel("agent steps")
    ax.set_ylabel("episode return (mean over agents)")
    ax.set_title("PPO, one shared policy, simple_spread through shoal")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(Args):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=None)
    parser.add_argument("--plot", default=None, help="save the learning curve to this image file")
    given = {k: v for k, v in vars(parser.parse_args()).items() if v is not None}
    path = given.pop("plot", None)
    start = time.perf_counter()
    _, curve = train(**given)
    print(f"{curve[-1][0]:,d} agent steps in {time.perf_counter() - start:.0f} s")
    if path:
        plot(curve, path)


if __name__ == "__main__":
    main()
