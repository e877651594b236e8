"""Real CUDA's device rules, one user line (or a few) per rule: whether a GPU raises there.

Each rule runs after :data:`PRELUDE` (``dev = "cuda"``). ``raises`` is the exception class a
real GPU raises (``None``: it runs), ``says`` a phrase of the error's first line on the GPU,
``note`` why, where it is not obvious (a boolean mask's result has a data-dependent size: a
shape-only run runs it at its bound). ``tests/test_cuda_device_rules.py`` runs every
rule through ``shapelens run --fake``; ``scripts/record_cuda_rules.py`` records what a real GPU
does with each and compares. Only the standard library and torch read this file.

Where CUDA's rule comes from: TensorIterator ops (arithmetic, comparisons, ``where``, in-place
ops) take the device of their first non-CPU operand and allow CPU 0-dim tensors beside it, and
nothing else from another device; kernels with their own device check (``index_select``,
``gather``, ``scatter``, ``cat``, ``mm``, ``addmm``, ``nll_loss``, convolutions, batch norm)
allow nothing from another device; advanced indexing moves CPU indices to the indexed tensor's
device; ``.to``, ``.cuda()``, ``copy_`` cross devices by design.
"""

SAME = "Expected all tensors to be on the same device"

PRELUDE = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
dev = "cuda"
"""

# A table, one rule to a few lines, its code as a user writes it: not reformatted.
# fmt: off
RULES: list[dict[str, object]] = [
    # -- factories: with device= on the GPU, without it on the CPU ---------------------------
    dict(name="zeros_with_device", raises=None, code="""
x = torch.zeros(4, 3, device=dev)
y = x + torch.ones(4, 3, device=dev)
"""),
    dict(name="zeros_without_device", raises="RuntimeError", says=SAME, code="""
x = torch.randn(4, 3, device=dev)
bias = torch.zeros(4, 3)
y = x + bias
"""),
    dict(name="arange_without_device", raises="RuntimeError", says=SAME, code="""
x = torch.randn(2, 5, device=dev)
pos = torch.arange(5)
y = x + pos
"""),
    dict(name="arange_with_device", raises=None, code="""
x = torch.randn(2, 5, device=dev)
pos = torch.arange(5, device=dev)
y = x + pos
"""),
    dict(name="tensor_list_without_device", raises="RuntimeError", says=SAME, code="""
x = torch.randn(2, 3, device=dev)
scale = torch.tensor([1.0, 2.0, 3.0])
y = x * scale
"""),
    dict(name="tensor_list_with_device", raises=None, code="""
x = torch.randn(2, 3, device=dev)
scale = torch.tensor([1.0, 2.0, 3.0], device=dev)
y = x * scale
"""),
    dict(name="randint_with_device_indexes", raises=None, code="""
table = torch.randn(10, 3, device=dev)
idx = torch.randint(0, 10, (4,), device=dev)
rows = table[idx]
"""),
    dict(name="randn_like_follows_its_input", raises=None, code="""
x = torch.randn(4, 3, device=dev)
noise = torch.randn_like(x)
y = x + noise
"""),
    dict(name="new_zeros_follows_self", raises=None, code="""
x = torch.randn(4, 3, device=dev)
pad = x.new_zeros(4, 1)
y = torch.cat([x, pad], dim=1)
"""),
    # -- .to / .cuda() / .cpu() ------------------------------------------------------------
    dict(name="to_device", raises=None, code="""
x = torch.randn(4, 3).to(dev)
w = torch.randn(3, 2, device=dev)
y = x @ w
"""),
    dict(name="cuda_method", raises=None, code="""
x = torch.randn(4, 3).cuda()
w = torch.randn(3, 2).cuda()
y = x @ w
"""),
    dict(name="to_another_tensor", raises=None, code="""
x = torch.randn(4, 3, device=dev)
mask = torch.ones(4, 3).to(x)
y = x * mask
"""),
    dict(name="cpu_copy_meets_the_gpu_tensor", raises="RuntimeError", says=SAME, code="""
x = torch.randn(4, 3, device=dev)
y = x.cpu() + x
"""),
    dict(name="copy_across_devices", raises=None, code="""
buf = torch.zeros(4, 3, device=dev)
buf.copy_(torch.randn(4, 3))
"""),
    # -- nn.Linear / F.linear / matmul ------------------------------------------------------
    dict(name="model_on_gpu_input_on_cpu", raises="RuntimeError", says=SAME, code="""
model = nn.Linear(3, 2).to(dev)
x = torch.randn(4, 3)
y = model(x)
"""),
    dict(name="model_on_cpu_input_on_gpu", raises="RuntimeError", says=SAME, code="""
model = nn.Linear(3, 2)
x = torch.randn(4, 3, device=dev)
y = model(x)
"""),
    dict(name="model_and_input_on_gpu", raises=None, code="""
model = nn.Linear(3, 2).cuda()
x = torch.randn(4, 3).to(dev)
y = model(x)
"""),
    dict(name="linear_bias_on_cpu", raises="RuntimeError", says=SAME, code="""
x = torch.randn(4, 3, device=dev)
w = torch.randn(2, 3, device=dev)
b = torch.zeros(2)
y = F.linear(x, w, b)
"""),
    dict(name="matmul_operator_mixed", raises="RuntimeError", says=SAME, code="""
x = torch.randn(4, 3, device=dev)
w = torch.randn(3, 2)
y = x @ w
"""),
    dict(name="batched_matmul_mixed", raises="RuntimeError", says=SAME, code="""
q = torch.randn(2, 4, 8, device=dev)
k = torch.randn(2, 4, 8)
att = torch.matmul(q, k.transpose(-2, -1))
"""),
    dict(name="bmm_on_gpu", raises=None, code="""
q = torch.randn(2, 4, 8, device=dev)
k = torch.randn(2, 8, 4, device=dev)
att = torch.bmm(q, k)
"""),
    # -- embedding: indices must be on the weight's device ---------------------------------
    dict(name="embedding_arange_on_cpu", raises="RuntimeError", says=SAME, code="""
emb = nn.Embedding(10, 4).to(dev)
pos = torch.arange(6)
y = emb(pos)
"""),
    dict(name="embedding_tensor_on_cpu", raises="RuntimeError", says=SAME, code="""
emb = nn.Embedding(10, 4).to(dev)
tokens = torch.tensor([[1, 2, 3]])
y = emb(tokens)
"""),
    dict(name="embedding_randint_on_cpu", raises="RuntimeError", says=SAME, code="""
emb = nn.Embedding(10, 4).to(dev)
tokens = torch.randint(0, 10, (2, 5))
y = emb(tokens)
"""),
    dict(name="functional_embedding_on_cpu", raises="RuntimeError", says=SAME, code="""
weight = torch.randn(10, 4, device=dev)
tokens = torch.randint(0, 10, (2, 5))
y = F.embedding(tokens, weight)
"""),
    dict(name="embedding_on_cpu_tokens_on_gpu", raises="RuntimeError", says=SAME, code="""
emb = nn.Embedding(10, 4)
tokens = torch.randint(0, 10, (2, 5), device=dev)
y = emb(tokens)
"""),
    dict(name="embedding_tokens_moved", raises=None, code="""
emb = nn.Embedding(10, 4).to(dev)
tokens = torch.randint(0, 10, (2, 5)).to(dev)
y = emb(tokens)
"""),
    dict(name="embedding_arange_with_device", raises=None, code="""
emb = nn.Embedding(10, 4).to(dev)
pos = torch.arange(6, device=dev)
y = emb(pos)
"""),
    # -- index_select / gather / scatter: their own device check ---------------------------
    dict(name="index_select_cpu_index", raises="RuntimeError", says=SAME, code="""
x = torch.randn(5, 3, device=dev)
idx = torch.tensor([0, 2])
y = x.index_select(0, idx)
"""),
    dict(name="index_select_gpu_index", raises=None, code="""
x = torch.randn(5, 3, device=dev)
idx = torch.tensor([0, 2], device=dev)
y = torch.index_select(x, 0, idx)
"""),
    dict(name="gather_cpu_labels", raises="RuntimeError", says=SAME, code="""
logits = torch.randn(4, 10, device=dev)
labels = torch.randint(0, 10, (4, 1))
picked = logits.gather(1, labels)
"""),
    dict(name="gather_gpu_labels", raises=None, code="""
logits = torch.randn(4, 10, device=dev)
labels = torch.randint(0, 10, (4, 1), device=dev)
picked = torch.gather(logits, 1, labels)
"""),
    dict(name="scatter_cpu_index", raises="RuntimeError", says=SAME, code="""
one_hot = torch.zeros(4, 10, device=dev)
labels = torch.randint(0, 10, (4, 1))
one_hot.scatter_(1, labels, 1.0)
"""),
    dict(name="scatter_add_cpu_src", raises="RuntimeError", says=SAME, code="""
total = torch.zeros(3, device=dev)
idx = torch.tensor([0, 1, 0, 2], device=dev)
counts = torch.ones(4)
total.scatter_add_(0, idx, counts)
"""),
    dict(name="scatter_add_on_gpu", raises=None, code="""
total = torch.zeros(3, device=dev)
idx = torch.tensor([0, 1, 0, 2], device=dev)
total = total.scatter_add(0, idx, torch.ones(4, device=dev))
"""),
    # -- where / masked_fill --------------------------------------------------------------
    dict(name="where_cpu_0dim_other", raises=None, code="""
x = torch.randn(4, device=dev)
y = torch.where(x > 0, x, torch.tensor(0.0))
"""),
    dict(name="where_python_scalar", raises=None, code="""
x = torch.randn(4, device=dev)
y = torch.where(x > 0, x, 0.0)
"""),
    dict(name="where_cpu_tensor_other", raises="RuntimeError", says=SAME, code="""
x = torch.randn(4, device=dev)
y = torch.where(x > 0, x, torch.zeros(4))
"""),
    dict(name="where_cpu_condition", raises="RuntimeError", says=SAME, code="""
x = torch.randn(4, device=dev)
keep = torch.ones(4, dtype=torch.bool)
y = torch.where(keep, x, x * 2)
"""),
    dict(name="masked_fill_cpu_causal_mask", raises="RuntimeError", says="same device",
         note="masked_fill_ on CUDA: 'expected self and mask to be on the same device'", code="""
scores = torch.randn(2, 4, 4, device=dev)
mask = torch.tril(torch.ones(4, 4)) == 0
scores = scores.masked_fill(mask, float("-inf"))
"""),
    dict(name="masked_fill_gpu_causal_mask", raises=None, code="""
scores = torch.randn(2, 4, 4, device=dev)
mask = torch.tril(torch.ones(4, 4, device=dev)) == 0
scores = scores.masked_fill(mask, float("-inf"))
"""),
    dict(name="masked_fill_cpu_0dim_value", raises=None,
         note="a 0-dim value tensor is read as a number (masked_fill_.Tensor calls .item())",
         code="""
scores = torch.randn(2, 4, device=dev)
scores = scores.masked_fill(scores < 0, torch.tensor(0.0))
"""),
    # -- cat / stack ----------------------------------------------------------------------
    dict(name="cat_mixed", raises="RuntimeError", says=SAME, code="""
a = torch.randn(2, 3, device=dev)
b = torch.randn(2, 3)
c = torch.cat([a, b])
"""),
    dict(name="stack_mixed", raises="RuntimeError", says=SAME, code="""
a = torch.randn(3, device=dev)
b = torch.randn(3)
c = torch.stack([a, b])
"""),
    # -- convolutions, normalisation, recurrent layers ------------------------------------
    dict(name="conv_on_gpu_image_on_cpu", raises="RuntimeError", says="Input type",
         note="worded by the convolution: Input type (torch.FloatTensor) and weight type "
         "(torch.cuda.FloatTensor) should be the same", code="""
conv = nn.Conv2d(3, 8, 3).to(dev)
img = torch.randn(1, 3, 16, 16)
y = conv(img)
"""),
    dict(name="conv_on_cpu_image_on_gpu", raises="RuntimeError", says="Input type", code="""
conv = nn.Conv2d(3, 8, 3)
img = torch.randn(1, 3, 16, 16, device=dev)
y = conv(img)
"""),
    dict(name="conv_on_gpu", raises=None, code="""
conv = nn.Conv2d(3, 8, 3).cuda()
img = torch.randn(1, 3, 16, 16).cuda()
y = conv(img)
"""),
    dict(name="batch_norm_on_cpu_input_on_gpu", raises="RuntimeError", says=SAME, code="""
bn = nn.BatchNorm1d(3)
x = torch.randn(4, 3, device=dev)
y = bn(x)
"""),
    dict(name="gru_cpu_hidden_state", raises="RuntimeError", says="same device",
         note="'Input and hidden tensors are not at the same device, found input tensor at "
         "cuda:0 and hidden tensor at cpu'", code="""
rnn = nn.GRU(3, 4, batch_first=True).to(dev)
h0 = torch.zeros(1, 2, 4)
out, h = rnn(torch.randn(2, 5, 3, device=dev), h0)
"""),
    # -- losses ---------------------------------------------------------------------------
    dict(name="cross_entropy_cpu_targets", raises="RuntimeError", says=SAME, code="""
logits = torch.randn(8, 5, device=dev)
targets = torch.randint(0, 5, (8,))
loss = F.cross_entropy(logits, targets)
"""),
    dict(name="cross_entropy_cpu_class_weights", raises="RuntimeError", says=SAME, code="""
logits = torch.randn(8, 5, device=dev)
targets = torch.randint(0, 5, (8,), device=dev)
criterion = nn.CrossEntropyLoss(weight=torch.ones(5))
loss = criterion(logits, targets)
"""),
    dict(name="cross_entropy_on_gpu", raises=None, code="""
logits = torch.randn(8, 5, device=dev)
targets = torch.randint(0, 5, (8,)).to(dev)
loss = nn.CrossEntropyLoss()(logits, targets)
"""),
    dict(name="mse_cpu_target", raises="RuntimeError", says=SAME, code="""
pred = torch.randn(8, 1, device=dev)
target = torch.randn(8, 1)
loss = F.mse_loss(pred, target)
"""),
    dict(name="bce_with_logits_cpu_target", raises="RuntimeError", says=SAME, code="""
logits = torch.randn(8, device=dev)
target = torch.ones(8)
loss = nn.BCEWithLogitsLoss()(logits, target)
"""),
    dict(name="loss_scaled_by_cpu_0dim", raises=None, code="""
loss = F.mse_loss(torch.randn(8, device=dev), torch.randn(8, device=dev))
loss = loss * torch.tensor(0.5)
"""),
    # -- optimizers -----------------------------------------------------------------------
    dict(name="sgd_step_on_gpu", raises=None, code="""
model = nn.Linear(3, 1).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.randn(4, 3, device=dev)).pow(2).mean()
loss.backward()
opt.step()
"""),
    dict(name="adam_step_on_gpu", raises=None, code="""
model = nn.Linear(3, 1).to(dev)
opt = torch.optim.Adam(model.parameters())
loss = model(torch.randn(4, 3, device=dev)).pow(2).mean()
loss.backward()
opt.step()
opt.zero_grad()
"""),
    dict(name="optimizer_made_before_cuda", raises=None,
         note="Module.cuda() moves each parameter's data in place: the optimizer holds them",
         code="""
model = nn.Linear(3, 1)
opt = torch.optim.Adam(model.parameters())
model.cuda()
loss = model(torch.randn(4, 3, device=dev)).sum()
loss.backward()
opt.step()
"""),
    dict(name="adam_with_a_cpu_param_group", raises=None,
         note="optimizers group tensors by device: a CPU parameter beside GPU ones steps",
         code="""
model = nn.Linear(3, 1).to(dev)
temperature = nn.Parameter(torch.ones(1))
opt = torch.optim.Adam([{"params": model.parameters()}, {"params": [temperature]}])
model(torch.randn(4, 3, device=dev)).sum().backward()
(temperature * 2).sum().backward()
opt.step()
"""),
    dict(name="load_state_dict_from_cpu", raises=None,
         note="load_state_dict copies each tensor into the parameter, across devices", code="""
src = nn.Linear(3, 2)
model = nn.Linear(3, 2).to(dev)
model.load_state_dict(src.state_dict())
y = model(torch.randn(4, 3, device=dev))
"""),
    dict(name="clip_grad_norm_on_gpu", raises=None, code="""
model = nn.Linear(3, 1).to(dev)
model(torch.randn(4, 3, device=dev)).sum().backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
"""),
    dict(name="cpu_grad_assigned_to_gpu_param", raises="RuntimeError", says="device",
         note="'attempting to assign a gradient with device type 'cpu' to a tensor with "
         "device type 'cuda''", code="""
model = nn.Linear(3, 1).to(dev)
model.weight.grad = torch.zeros(1, 3)
"""),
    # -- indexing: CPU indices into a GPU tensor are moved; a GPU index into a CPU one is not
    dict(name="gpu_tensor_cpu_long_index", raises=None, code="""
x = torch.randn(10, 3, device=dev)
idx = torch.tensor([0, 4, 7])
y = x[idx]
"""),
    dict(name="gpu_tensor_cpu_randperm_index", raises=None, code="""
x = torch.randn(10, 3, device=dev)
perm = torch.randperm(10)
y = x[perm[:4]]
"""),
    dict(name="gpu_tensor_cpu_0dim_index", raises=None, code="""
x = torch.randn(10, 3, device=dev)
y = x[torch.tensor(2)]
"""),
    dict(name="gpu_tensor_cpu_bool_mask", raises=None, code="""
x = torch.randn(5, 3, device=dev)
keep = torch.tensor([True, False, True, True, False])
y = x[keep]
"""),
    dict(name="gpu_tensor_cpu_index_assigned", raises=None, code="""
x = torch.zeros(10, device=dev)
idx = torch.tensor([1, 3])
x[idx] = 1.0
"""),
    dict(name="gpu_tensor_cpu_bool_mask_assigned", raises=None, code="""
x = torch.randn(5, device=dev)
keep = torch.tensor([True, False, True, True, False])
x[keep] = 0.0
"""),
    dict(name="cpu_tensor_gpu_index", raises="RuntimeError", says="same device",
         note="'indices should be either on cpu or on the same device as the indexed tensor "
         "(cpu)'", code="""
table = torch.randn(10, 3)
idx = torch.tensor([1, 2], device=dev)
y = table[idx]
"""),
    dict(name="cpu_tensor_gpu_bool_mask", raises="RuntimeError", says="same device", code="""
x = torch.randn(5)
keep = torch.randn(5, device=dev) > 0
y = x[keep]
"""),
    # -- Python scalars and CPU 0-dim tensors beside GPU tensors ---------------------------
    dict(name="python_scalar", raises=None, code="""
x = torch.randn(4, 3, device=dev)
y = x * 0.5 + 1
"""),
    dict(name="cpu_0dim_tensor", raises=None, code="""
x = torch.randn(4, 3, device=dev)
y = x + torch.tensor(1.0)
"""),
    dict(name="cpu_one_element_1d_tensor", raises="RuntimeError", says=SAME,
         note="one element but one dim: not a scalar to TensorIterator", code="""
x = torch.randn(4, 3, device=dev)
y = x + torch.tensor([1.0])
"""),
    dict(name="cpu_tensor_times_gpu_0dim", raises="RuntimeError", says=SAME,
         note="the common device is the first non-CPU operand's; only CPU 0-dim tensors "
         "may join it, not a full CPU tensor", code="""
x = torch.randn(3)
s = torch.tensor(2.0, device=dev)
y = x * s
"""),
    dict(name="cpu_0dim_plus_gpu_0dim", raises=None, code="""
a = torch.tensor(1.0)
b = torch.tensor(2.0, device=dev)
c = a + b
"""),
    # -- in-place ops ---------------------------------------------------------------------
    dict(name="gpu_add_inplace_cpu_tensor", raises="RuntimeError", says=SAME, code="""
x = torch.zeros(3, device=dev)
x.add_(torch.ones(3))
"""),
    dict(name="gpu_add_inplace_cpu_0dim", raises=None, code="""
x = torch.zeros(3, device=dev)
x.add_(torch.tensor(1.0))
"""),
    dict(name="cpu_add_inplace_gpu_0dim", raises="RuntimeError", says=SAME,
         note="the CPU output is not a scalar, so the GPU 0-dim operand sets the device "
         "(fairly sure; recorded by scripts/record_cuda_rules.py)", code="""
x = torch.zeros(3)
x.add_(torch.tensor(1.0, device=dev))
"""),
    dict(name="cpu_accumulator_plus_gpu", raises="RuntimeError", says=SAME, code="""
total = torch.zeros(3)
total += torch.randn(3, device=dev)
"""),
    dict(name="ema_update_inplace_on_gpu", raises=None, code="""
ema = torch.zeros(3, device=dev)
w = torch.randn(3, device=dev)
ema.mul_(0.9).add_(w, alpha=0.1)
"""),
    dict(name="gpu_mul_inplace_scalar", raises=None, code="""
x = torch.ones(3, device=dev)
x.mul_(2)
"""),
]
# fmt: on
