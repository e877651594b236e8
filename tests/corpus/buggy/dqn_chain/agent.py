"""DQN agent after the PyTorch DQN tutorial: replay memory, policy/target nets, Huber loss."""

import math
import random
from collections import deque, namedtuple

import torch
import torch.nn as nn

Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class ReplayMemory:
    def __init__(self, capacity):
        self.memory = deque([], maxlen=capacity)

    def push(self, *args):
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class DQN(nn.Module):
    def __init__(self, n_observations, n_actions):
        super().__init__()
        self.layer1 = nn.Linear(n_observations, 32)
        self.layer2 = nn.Linear(32, 32)
        self.layer3 = nn.Linear(32, n_actions)

    def forward(self, x):
        x = torch.relu(self.layer1(x))
        x = torch.relu(self.layer2(x))
        return self.layer3(x)


class Agent:
    def __init__(self, n_observations, n_actions, batch_size=32, gamma=0.95, lr=1e-3,
                 tau=0.01, eps_start=0.9, eps_end=0.05, eps_decay=200):
        self.n_actions = n_actions
        self.batch_size = batch_size
        self.gamma = gamma
        self.tau = tau
        self.eps_start, self.eps_end, self.eps_decay = eps_start, eps_end, eps_decay
        self.policy_net = DQN(n_observations, n_actions)
        self.target_net = DQN(n_observations, n_actions)
        self.target_net.load_state_dict(self.policy_net.state_dict())
        self.optimizer = torch.optim.AdamW(self.policy_net.parameters(), lr=lr, amsgrad=True)
        self.memory = ReplayMemory(2000)
        self.steps_done = 0

    def select_action(self, state):
        sample = random.random()
        eps_threshold = self.eps_end + (self.eps_start - self.eps_end) * math.exp(
            -1.0 * self.steps_done / self.eps_decay
        )
        self.steps_done += 1
        if sample > eps_threshold:
            with torch.no_grad():
                return self.policy_net(state).max(1).indices.view(1, 1)
        return torch.tensor([[random.randrange(self.n_actions)]], dtype=torch.long)

    def optimize_model(self):
        if len(self.memory) < self.batch_size:
            return None
        transitions = self.memory.sample(self.batch_size)
        # Transpose the batch: a Transition of batch-arrays.
        batch = Transition(*zip(*transitions))

        non_final_mask = torch.tensor(
            tuple(s is not None for s in batch.next_state), dtype=torch.bool
        )
        non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
        state_batch = torch.cat(batch.state)
        action_batch = torch.cat(batch.action)
        reward_batch = torch.cat(batch.reward)

        # Q(s_t, a): the model computes Q(s_t), then we select the columns of actions taken.
        state_action_values = self.policy_net(state_batch).gather(1, action_batch)  # (B, 1)

        # V(s_{t+1}) for all next states; 0 for final states.
        next_state_values = torch.zeros(self.batch_size)
        with torch.no_grad():
            next_state_values[non_final_mask] = self.target_net(non_final_next_states).max(1).values
        expected_values = (next_state_values * self.gamma) + reward_batch  # (B,)

        # Compute Huber loss
        criterion = nn.SmoothL1Loss()
        loss = criterion(state_action_values, expected_values)  # expect: library_warning

        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(self.policy_net.parameters(), 100)
        self.optimizer.step()
        return loss.item()

    def soft_update(self):
        target_state = self.target_net.state_dict()
        policy_state = self.policy_net.state_dict()
        for key in policy_state:
            target_state[key] = policy_state[key] * self.tau + target_state[key] * (1 - self.tau)
        self.target_net.load_state_dict(target_state)
