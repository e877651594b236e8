"""A 1-D chain world: start in the middle, reward 1 at the right end, -1 at the left end."""

import random


class ChainEnv:
    def __init__(self, n_states=7, max_steps=20, seed=0):
        self.n_states = n_states
        self.max_steps = max_steps
        self.rng = random.Random(seed)
        self.n_actions = 2  # 0: left, 1: right

    def observe(self):
        obs = [0.0] * self.n_states
        obs[self.pos] = 1.0
        return obs

    def reset(self):
        self.pos = self.n_states // 2
        self.steps = 0
        return self.observe()

    def step(self, action):
        # the chain is slippery: 10% of moves go the other way
        move = 1 if action == 1 else -1
        if self.rng.random() < 0.1:
            move = -move
        self.pos += move
        self.steps += 1
        if self.pos == self.n_states - 1:
            return self.observe(), 1.0, True
        if self.pos == 0:
            return self.observe(), -1.0, True
        return self.observe(), -0.01, self.steps >= self.max_steps
