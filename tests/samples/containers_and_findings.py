"""Golden sample: containers, a broadcast, a NaN, a handled exception, a loop."""

from collections import namedtuple

import numpy as np

Pair = namedtuple("Pair", "left right")

batch = {"image": np.zeros((2, 3, 4)), "label": np.zeros(2, dtype=np.int64), "id": 7}
pair = Pair(np.ones(1), np.ones(2))
y = np.ones(4)
col = np.ones((4, 1))
bad = y - col
acc = np.zeros(4)
for step in range(200):
    delta = np.full(4, float(step))
    acc = acc + delta
with np.errstate(all="ignore"):
    ratio = np.zeros(3) / np.zeros(3)
try:
    raise ValueError("handled")
except ValueError:
    recovered = np.ones(2)
