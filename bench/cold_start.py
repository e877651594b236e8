"""Cold-start probe: the smallest torch script, timed wall-clock by run_bench.py."""

import torch

x = torch.zeros(3)
