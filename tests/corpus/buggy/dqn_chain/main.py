"""DQN on a slippery chain world (main.py + agent.py + env.py); bug in agent.py: Huber loss of (B, 1) Q-values vs (B,) targets, torch warns about the target size."""

import random

import torch
from agent import Agent
from env import ChainEnv

random.seed(0)
torch.manual_seed(0)

env = ChainEnv(seed=0)
agent = Agent(n_observations=env.n_states, n_actions=env.n_actions)

for i_episode in range(25):
    state = torch.tensor(env.reset(), dtype=torch.float32).unsqueeze(0)
    total_reward, losses = 0.0, []
    done = False
    while not done:
        action = agent.select_action(state)
        observation, reward, done = env.step(action.item())
        total_reward += reward
        reward = torch.tensor([reward])
        next_state = None if done else torch.tensor(observation).unsqueeze(0)
        agent.memory.push(state, action, next_state, reward)
        state = next_state
        loss = agent.optimize_model()
        if loss is not None:
            losses.append(loss)
        agent.soft_update()
    if i_episode % 5 == 0:
        mean_loss = f"{sum(losses) / len(losses):.4f}" if losses else "n/a"
        print(f"episode {i_episode}: return {total_reward:+.2f} mean loss {mean_loss}")
