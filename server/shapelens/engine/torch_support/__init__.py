"""Where the engine meets torch: private names behind one module (:mod:`.torch_compat`),
torch.compile, shape-only runs on fake tensors, the device rules a GPU enforces."""
