"""Advantage actor-critic on a toy corridor walk; bug: the critic's values are (T, 1) and torch.sub(returns, values) with returns (T,) makes a (T, T) advantage, so both losses train on every pair of steps."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical

torch.manual_seed(0)

LENGTH = 6  # cells 0..5; the goal is the last one
GAMMA = 0.9


class Corridor:
    """Walk left or right; +1 at the goal, -0.01 per step, at most 20 steps."""

    def reset(self):
        self.position, self.steps = 0, 0
        return self.observe()

    def observe(self):
        return F.one_hot(torch.tensor(self.position), LENGTH).float()

    def step(self, action):
        self.position = max(0, min(LENGTH - 1, self.position + (1 if action == 1 else -1)))
        self.steps += 1
        done = self.position == LENGTH - 1 or self.steps >= 20
        reward = 1.0 if self.position == LENGTH - 1 else -0.01
        return self.observe(), reward, done


class ActorCritic(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(LENGTH, hidden), nn.Tanh())
        self.policy = nn.Linear(hidden, 2)
        self.value = nn.Linear(hidden, 1)

    def forward(self, state):
        h = self.body(state)
        return self.policy(h), self.value(h)


def discounted(rewards):
    returns, running = [], 0.0
    for reward in reversed(rewards):
        running = reward + GAMMA * running
        returns.append(running)
    return torch.tensor(returns[::-1])


env = Corridor()
net = ActorCritic()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)

for episode in range(30):
    state, done = env.reset(), False
    log_probs, values, rewards = [], [], []
    while not done:
        logits, value = net(state.unsqueeze(0))
        dist = Categorical(logits=logits.squeeze(0))
        action = dist.sample()
        state, reward, done = env.step(action.item())
        log_probs.append(dist.log_prob(action))
        values.append(value.squeeze(0))  # (1,): stacked below into (T, 1)
        rewards.append(reward)
    returns = discounted(rewards)  # (T,)
    values = torch.stack(values)  # (T, 1)
    log_probs = torch.stack(log_probs)  # (T,)
    advantage = torch.sub(returns, values)  # expect: broadcast
    actor_loss = -(log_probs * advantage.detach()).mean()
    critic_loss = advantage.pow(2).mean()
    optimizer.zero_grad()
    (actor_loss + 0.5 * critic_loss).backward()
    optimizer.step()
    if episode % 10 == 0:
        print(f"episode {episode}: {len(rewards)} steps, return {returns[0].item():.3f}")
