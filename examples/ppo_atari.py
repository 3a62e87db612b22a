"""PPO on several Atari games at once: one multi-ROM shoal vector env, stepped through its PyTorch ops.

    python examples/ppo_atari.py --games pong,breakout,space_invaders --envs-per-game 4 --total-steps 200000

One policy plays every game (the games' minimal action sets differ, so the logits beyond each env's own action
count are masked). The rollout loop calls shoal's ``step`` op, whose tensors come from preallocated buffers; the rest
is cleanrl's PPO.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, fields

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

import shoal


@dataclass
class Args:
    games: str = "pong,breakout"
    """comma-separated ROM ids"""
    envs_per_game: int = 4
    total_steps: int = 100_000
    """agent steps over all envs"""
    num_steps: int = 128
    """rollout length per env"""
    backend: str = "multiprocessing"
    lr: float = 2.5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    epochs: int = 4
    minibatches: int = 4
    clip: float = 0.1
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    seed: int = 1


def parse() -> Args:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in fields(Args):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    return Args(**vars(parser.parse_args()))


class Agent(nn.Module):
    """The Nature-DQN torso with a policy and a value head."""

    def __init__(self, actions: int) -> None:
        super().__init__()
        self.torso = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(), nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(),
        )
        self.policy, self.value = nn.Linear(512, actions), nn.Linear(512, 1)

    def forward(self, obs: torch.Tensor, illegal: torch.Tensor) -> tuple[Categorical, torch.Tensor]:
        hidden = self.torso(obs.float() / 255.0)
        logits = self.policy(hidden).masked_fill(illegal, float("-inf"))
        return Categorical(logits=logits), self.value(hidden).squeeze(-1)


def main(args: Args) -> None:
    torch.manual_seed(args.seed)
    games = [g for g in args.games.split(",") for _ in range(args.envs_per_game)]
    envs = shoal.AtariVectorEnv(games=games, backend=args.backend, episodic_life=True, reward_clipping=True)
    n, t_max = envs.num_envs, args.num_steps
    illegal = torch.arange(max(envs.num_actions))[None, :] >= torch.tensor(envs.num_actions)[:, None]
    agent = Agent(max(envs.num_actions))
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)
    obs_buf = torch.zeros((t_max, n, *envs.single_observation_space.shape), dtype=torch.uint8)
    actions, logprobs, rewards, dones, values = (torch.zeros((t_max, n)) for _ in range(5))

    next_obs = torch.from_numpy(envs.reset(seed=args.seed)[0])
    next_done = torch.zeros(n)
    handle, send, step, recv, get_last_info, unregister = envs.torch()
    returns, finished = torch.zeros(n), []
    start, steps, said = time.perf_counter(), 0, time.perf_counter()
    updates = max(1, args.total_steps // (n * t_max))

    def progress(what: str) -> None:  # a line every 10 s, so a long update is never silent
        nonlocal said
        if time.perf_counter() - said > 10:
            said = time.perf_counter()
            print(f"  update {update + 1}/{updates}: {what}", flush=True)

    for update in range(updates):
        for t in range(t_max):
            progress(f"stepping {t}/{t_max}")
            obs_buf[t].copy_(next_obs)
            dones[t] = next_done
            with torch.no_grad():
                dist, values[t] = agent(next_obs, illegal)
                action = dist.sample()
            actions[t], logprobs[t] = action, dist.log_prob(action)
            next_obs, reward, terminated, truncated, _ = step(handle, action)
            rewards[t] = reward.float()
            next_done = (terminated | truncated).float()
            returns += get_last_info(handle)["raw_reward"].float()  # unclipped; per life with episodic_life
            for i in torch.nonzero(next_done).flatten().tolist():
                finished.append((games[i], returns[i].item()))
                returns[i] = 0
        steps += n * t_max

        with torch.no_grad():  # generalized advantage estimation
            _, next_value = agent(next_obs, illegal)
            advantages, last = torch.zeros_like(rewards), torch.zeros(n)
            for t in reversed(range(t_max)):
                not_done = 1.0 - (next_done if t == t_max - 1 else dones[t + 1])
                following = next_value if t == t_max - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * following * not_done - values[t]
                last = delta + args.gamma * args.gae_lambda * not_done * last
                advantages[t] = last
            targets = advantages + values

        flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
        b_obs, b_actions, b_logprobs = flat(obs_buf), flat(actions), flat(logprobs)
        b_adv, b_targets, b_illegal = flat(advantages), flat(targets), illegal.repeat(t_max, 1)
        size = n * t_max
        for epoch in range(args.epochs):
            progress(f"learning, epoch {epoch + 1}/{args.epochs}")
            for idx in torch.randperm(size).chunk(args.minibatches):
                dist, value = agent(b_obs[idx], b_illegal[idx])
                ratio = (dist.log_prob(b_actions[idx]) - b_logprobs[idx]).exp()
                adv = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
                policy_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
                value_loss = ((value - b_targets[idx]) ** 2).mean()
                loss = policy_loss + args.vf_coef * value_loss - args.ent_coef * dist.entropy().mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()

        recent = {g: [r for game, r in finished[-100:] if game == g] for g in dict.fromkeys(games)}
        scores = ", ".join(f"{g} {np.mean(r):.1f}" if r else f"{g} (no life ended yet)" for g, r in recent.items())
        print(f"update {update + 1}: {steps} steps, SPS {steps / (time.perf_counter() - start):,.0f}, "
              f"recent life returns: {scores}", flush=True)
    unregister(handle)
    envs.close()


if __name__ == "__main__":
    main(parse())
