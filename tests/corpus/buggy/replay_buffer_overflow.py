"""DQN (CleanRL-style: argparse, epsilon-greedy, a replay buffer of preallocated tensors, a target network) on a toy 1-D reach-the-goal task; bug: ReplayBuffer.add() writes at self.size and never wraps around (self.ptr = (self.ptr + 1) % capacity), so the 10,001st transition of the 12,000-step run is written at index 10000 of the 10,000-row buffer."""

import argparse
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class LineWorld:
    """The agent sits on [-1, 1] and must reach the goal at +1; actions: left, stay, right."""

    def __init__(self, max_steps=40):
        self.max_steps = max_steps

    def reset(self):
        self.pos, self.t = random.uniform(-1.0, 0.5), 0
        return self._obs()

    def _obs(self):
        return torch.tensor([self.pos, self.t / self.max_steps])

    def step(self, action):
        self.pos = max(-1.0, min(1.0, self.pos + 0.1 * (action - 1) + random.gauss(0.0, 0.02)))
        self.t += 1
        reached = self.pos >= 0.95
        reward = 1.0 if reached else -0.01
        done = reached or self.t >= self.max_steps
        return self._obs(), reward, done


class ReplayBuffer:
    def __init__(self, capacity, obs_dim):
        self.capacity = capacity
        self.obs = torch.zeros(capacity, obs_dim)
        self.actions = torch.zeros(capacity, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.next_obs = torch.zeros(capacity, obs_dim)
        self.dones = torch.zeros(capacity)
        self.size = 0

    def add(self, obs, action, reward, next_obs, done):
        i = self.size
        self.obs[i] = obs  # expect: shape_mismatch
        self.actions[i] = action
        self.rewards[i] = reward
        self.next_obs[i] = next_obs
        self.dones[i] = float(done)
        self.size += 1

    def sample(self, batch_size):
        idx = torch.randint(0, min(self.size, self.capacity), (batch_size,))
        return self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx], self.dones[idx]


class QNetwork(nn.Module):
    def __init__(self, obs_dim, n_actions):
        super().__init__()
        self.network = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU(), nn.Linear(32, n_actions))

    def forward(self, x):
        return self.network(x)


def linear_schedule(start_e, end_e, duration, t):
    return max(end_e, start_e + (end_e - start_e) * t / duration)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--total-timesteps", type=int, default=12_000)
    parser.add_argument("--buffer-size", type=int, default=10_000)
    parser.add_argument("--learning-starts", type=int, default=500)
    parser.add_argument("--train-frequency", type=int, default=20)
    parser.add_argument("--target-network-frequency", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--learning-rate", type=float, default=5e-3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    env = LineWorld()
    q_network = QNetwork(2, 3)
    target_network = QNetwork(2, 3)
    target_network.load_state_dict(q_network.state_dict())
    optimizer = torch.optim.Adam(q_network.parameters(), lr=args.learning_rate)
    rb = ReplayBuffer(args.buffer_size, obs_dim=2)

    obs = env.reset()
    episode_return, returns = 0.0, []
    for global_step in range(args.total_timesteps):
        epsilon = linear_schedule(1.0, 0.05, args.total_timesteps // 2, global_step)
        if random.random() < epsilon:
            action = random.randrange(3)
        else:
            with torch.no_grad():
                action = q_network(obs).argmax().item()
        next_obs, reward, done = env.step(action)
        rb.add(obs, action, reward, next_obs, done)
        episode_return += reward
        obs = next_obs
        if done:
            returns.append(episode_return)
            episode_return, obs = 0.0, env.reset()

        if global_step > args.learning_starts and global_step % args.train_frequency == 0:
            b_obs, b_actions, b_rewards, b_next_obs, b_dones = rb.sample(args.batch_size)
            with torch.no_grad():
                target_max, _ = target_network(b_next_obs).max(dim=1)
                td_target = b_rewards + args.gamma * target_max * (1 - b_dones)
            old_val = q_network(b_obs).gather(1, b_actions.unsqueeze(1)).squeeze(1)
            loss = F.mse_loss(td_target, old_val)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if global_step % 2000 == 0:
                recent = sum(returns[-20:]) / max(1, len(returns[-20:]))
                print(f"step {global_step}: td_loss {loss.item():.4f} return {recent:.3f} eps {epsilon:.2f}")
        if global_step % args.target_network_frequency == 0:
            target_network.load_state_dict(q_network.state_dict())


if __name__ == "__main__":
    main()
