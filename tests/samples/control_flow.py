"""Golden sample: loops, recursion, generators, comprehensions, closures, methods."""

import numpy as np


def grow(n):
    seq = np.zeros((n, 3))
    return seq


def fact(k):
    if k == 0:
        base = np.ones(1)
        return base
    deeper = fact(k - 1)
    return deeper


def gen(n):
    for i in range(n):
        item = np.zeros(i + 1)
        yield item


def outer():
    scale = np.ones((2, 2))

    def inner(v):
        scaled = v * scale
        return scaled

    return inner(np.ones((2, 2)))


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def apply(self, x):
        product = x * self.factor
        return product


for n in range(2, 6):
    out = grow(n)
r = fact(3)
items = [g for g in gen(3)]
squares = [np.zeros(j) for j in range(4)]
total = sum(x.size for x in squares)
nest = outer()
result = Scaler(2.0).apply(np.ones((2, 2)))
multi = np.concatenate([np.zeros(2), np.ones(3)])
