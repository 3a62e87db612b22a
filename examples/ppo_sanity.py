"""A small PPO (cleanrl's, MLP, CPU) that solves every shoal sanity env.

    python examples/ppo_sanity.py --env shoal/Squared-v0          # train, then report the return vs optimal
    shoal sanity --agent examples/ppo_sanity.py:train              # the whole suite: table and chart

``train(env_id, total_steps, seed)`` returns a policy ``policy(obs, starts) -> actions``, the interface
``shoal sanity`` evaluates. Any observation space is flattened into features (a Dict's parts side by side); any
Discrete, MultiDiscrete or Dict-of-Discrete action space becomes one categorical head per part. ``stack`` gives
the MLP the last few observations (Memory needs them), reset at episode starts.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.distributions import Categorical

import shoal


@dataclass
class Args:
    env: str = "shoal/Squared-v0"
    total_steps: int = 0
    """env steps over all envs (0: the suite's budget for the env)"""
    num_envs: int = 64
    num_steps: int = 16
    """rollout length per env"""
    stack: int = 1
    """observations the MLP sees (the current one and the stack - 1 before it)"""
    lr: float = 3e-3
    gamma: float = 0.99
    gae_lambda: float = 0.95
    epochs: int = 4
    minibatches: int = 4
    clip: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    hidden: int = 64
    seed: int = 1


SETTINGS: dict[str, dict[str, Any]] = {
    "shoal/Memory-v0": {"stack": 4},
    "shoal/Password-v0": {"ent_coef": 0.05},
    "shoal/Stochastic-v0": {"ent_coef": 0.0},
}
"""Per-env settings beside the defaults."""


def features(obs: Any) -> np.ndarray:
    """A batch of any observation as float32 rows (a Dict's parts side by side, in key order)."""
    parts = obs.values() if isinstance(obs, dict) else [obs]
    n = len(next(iter(parts)))
    return np.concatenate([np.asarray(p, np.float32).reshape(n, -1) for p in parts], axis=1)


def heads(space: spaces.Space) -> list[int]:
    """One categorical head per part of the action space."""
    if isinstance(space, spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, spaces.MultiDiscrete):
        return [int(k) for k in space.nvec]
    if isinstance(space, spaces.Dict):
        return [k for part in space.values() for k in heads(part)]
    raise TypeError(f"no categorical heads for {space}")


def env_actions(space: spaces.Space, actions: np.ndarray) -> Any:
    """The heads' choices ``(n, heads)`` as the env's action batch."""
    if isinstance(space, spaces.Discrete):
        return actions[:, 0]
    if isinstance(space, spaces.Dict):
        return {key: actions[:, k] for k, key in enumerate(space.keys())}
    return actions


class Agent(nn.Module):
    def __init__(self, inputs: int, nvec: list[int], hidden: int) -> None:
        super().__init__()
        self.nvec = nvec
        self.torso = nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.policy, self.value = nn.Linear(hidden, sum(nvec)), nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> tuple[list[Categorical], torch.Tensor]:
        hidden = self.torso(x)
        logits = torch.split(self.policy(hidden), self.nvec, dim=-1)
        return [Categorical(logits=part) for part in logits], self.value(hidden).squeeze(-1)


class Window:
    """The last ``stack`` feature rows of each env, zeros before an episode's first observation."""

    def __init__(self, n: int, width: int, stack: int) -> None:
        self.rows = np.zeros((n, stack, width), np.float32)

    def push(self, obs: Any, starts: np.ndarray) -> np.ndarray:
        self.rows[starts] = 0
        self.rows[:, :-1] = self.rows[:, 1:]
        self.rows[:, -1] = features(obs)
        return self.rows.reshape(len(self.rows), -1).copy()


def train(env_id: str, total_steps: int = 0, seed: int = 1, **overrides: Any) -> Any:
    """Train on ``env_id``; return the trained policy ``policy(obs, starts) -> actions`` (it samples)."""
    from shoal.sanity.suite import SUITE

    args = replace(Args(env=env_id, seed=seed), **{**SETTINGS.get(env_id, {}), **overrides})
    steps = total_steps or args.total_steps or SUITE[env_id].budget
    torch.manual_seed(args.seed)
    envs = shoal.make(env_id, args.num_envs, backend="serial", autoreset_mode="same_step")
    n, t_max = envs.num_envs, args.num_steps
    nvec = heads(envs.single_action_space)
    obs, _ = envs.reset(seed=args.seed)
    window = Window(n, features(obs).shape[1], args.stack)
    agent = Agent(window.rows.shape[1] * window.rows.shape[2], nvec, args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    x_buf = torch.zeros((t_max, n, window.rows.shape[1] * window.rows.shape[2]))
    a_buf = torch.zeros((t_max, n, len(nvec)), dtype=torch.long)
    logprobs, rewards, dones, values = (torch.zeros((t_max, n)) for _ in range(4))
    next_x = torch.from_numpy(window.push(obs, np.ones(n, np.bool_)))
    next_done = torch.zeros(n)
    updates = max(1, steps // (n * t_max))
    for update in range(updates):
        optimizer.param_groups[0]["lr"] = args.lr * (1 - update / updates)
        for t in range(t_max):
            x_buf[t], dones[t] = next_x, next_done
            with torch.no_grad():
                dists, values[t] = agent(next_x)
                action = torch.stack([d.sample() for d in dists], dim=-1)
            a_buf[t] = action
            logprobs[t] = sum(d.log_prob(action[:, k]) for k, d in enumerate(dists))
            obs, reward, term, trunc, _ = envs.step(env_actions(envs.single_action_space, action.numpy()))
            rewards[t] = torch.as_tensor(reward, dtype=torch.float32)
            ended = term | trunc
            next_x = torch.from_numpy(window.push(obs, ended))  # same-step autoreset: obs starts the next episode
            next_done = torch.as_tensor(ended, dtype=torch.float32)

        with torch.no_grad():
            _, next_value = agent(next_x)
            advantages = torch.zeros_like(rewards)
            last = 0.0
            for t in reversed(range(t_max)):
                nonterminal = 1.0 - (next_done if t == t_max - 1 else dones[t + 1])
                following = next_value if t == t_max - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * following * nonterminal - values[t]
                advantages[t] = last = delta + args.gamma * args.gae_lambda * nonterminal * last
            returns = advantages + values

        b_x, b_a = x_buf.reshape(n * t_max, -1), a_buf.reshape(n * t_max, -1)
        b_logp, b_adv, b_ret = logprobs.reshape(-1), advantages.reshape(-1), returns.reshape(-1)
        size = n * t_max // args.minibatches
        for _ in range(args.epochs):
            for idx in torch.randperm(n * t_max).split(size):
                dists, value = agent(b_x[idx])
                logp = sum(d.log_prob(b_a[idx, k]) for k, d in enumerate(dists))
                entropy = sum(d.entropy() for d in dists).mean()
                ratio = (logp - b_logp[idx]).exp()
                adv = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
                v_loss = 0.5 * ((value - b_ret[idx]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()
    envs.close()
    return _policy(agent, args.stack, envs.single_action_space)


def _policy(agent: Agent, stack: int, space: spaces.Space) -> Any:
    window: list[Window] = []

    def act(obs: Any, starts: np.ndarray) -> Any:
        if not window:
            window.append(Window(len(starts), features(obs).shape[1], stack))
        with torch.no_grad():
            dists, _ = agent(torch.from_numpy(window[0].push(obs, starts)))
            return env_actions(space, torch.stack([d.sample() for d in dists], dim=-1).numpy())
    return act


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(Args):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=None)
    given = {k: v for k, v in vars(parser.parse_args()).items() if v is not None}
    env_id = given.pop("env", Args.env)
    from shoal.sanity.suite import SUITE, evaluate

    policy = train(env_id, **given)
    reached, entry = evaluate(policy, env_id), SUITE[env_id]
    print(f"{env_id}: return {reached:.3f}, optimal {entry.optimal:.3f}, random {entry.random:.3f} "
          f"({reached / entry.optimal:.0%} of optimal)")


if __name__ == "__main__":
    main()
