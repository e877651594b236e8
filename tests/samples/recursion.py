"""Golden sample: hot recursion, direct and through a helper. The lines after a recursive
call run while the calls unwind, when no call is made: a backend that estimates a line's
hits from its function's calls must count these."""

import numpy as np


def depth_of(n):
    if n == 0:
        return np.zeros(1)
    inner = depth_of(n - 1)
    return inner + 1


def walk(node):
    below = children_of(node)
    return below + 1


def children_of(node):
    total = np.zeros(2)
    for child in node:
        total = total + walk(child)
    return total


chain = []
for _ in range(300):
    chain = [chain]
deep = depth_of(300)
size = walk(chain)
