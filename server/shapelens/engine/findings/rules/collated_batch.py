"""The operands of a torch call that a DataLoader's collate function made, named as the user
reaches them: each tensor by the sample it came from (``loader.dataset[37]['input_ids']``),
the odd ones those whose shape most of the batch does not share, and where each sample was
made when nothing watched it being made (the dataset's ``__getitem__`` that returned it).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from collections.abc import Mapping
from typing import Any

from shapelens.engine.findings.call_trials import tensors_of
from shapelens.engine.findings.collate import Collated, OwnCheck
from shapelens.engine.findings.context import Named, RunFacts, load_paths
from shapelens.engine.findings.op_names import op_label
from shapelens.engine.findings.op_watch import FailedCall

MAX_SHOWN = 8
"""Tensors of a batch named in a finding: the odd ones first, then the others in order."""
_DATASET_ATTRIBUTES = ("dataset", "train_dataset", "eval_dataset")
"""Where a loader (or a library's trainer) keeps the dataset it batches."""
_MAX_WRAPPERS = 4
"""Datasets wrapped in others (``Subset``): how deep to look for the user's own."""
_MAX_DEPTH = 4
_MAX_NODES = 256
"""A sample's containers and leaves looked at, how deep and how many."""

_PATH_KEY = re.compile(r"\[([^\]]+)\]")
"""One step of a sample's path (``[0]``, ``['input_ids']``): what is inside the brackets."""
Born = tuple[str, int, str]
"""(file, line, what it was there): where a sample's tensor was made."""


class CollatedBatch:
    """A failed collate call's tensors (or the lists of numbers ``torch.tensor`` refused), as
    :class:`Named` operands (``named``, ``odd``), the call's label (``op``), where the odd
    samples were made when nothing else tells (``born``), and ``kind`` when the verdict on
    the call has none to give (a ragged batch of lists is a shape mismatch)."""

    def __init__(
        self,
        failed: FailedCall,
        collated: Collated,
        statement: ast.AST | None,
        resolve: Any,
        facts: RunFacts,
    ) -> None:
        torch = sys.modules["torch"]
        where = _sample_paths(torch, collated.samples)
        base = _dataset_text(statement, resolve, collated.dataset)
        iterable = collated.indices is None
        returned = _returned_at(collated.dataset, facts, iterable=iterable)
        made_as = "<yield>" if iterable else "<return>"
        self.born: dict[int, Born] = {}
        self.kind: str | None = None
        named: list[Named] = []
        passed = tensors_of(torch, failed.args, failed.kwargs) or _lists_passed(failed, where)
        for index, value in enumerate(passed):
            found = where.get(id(value)) or where.get(_address(value))
            label = f"argument {index + 1}"
            if found is not None:
                position, path = found
                sample = collated.index_of(position)
                label = (
                    f"{base}[{sample}]{path}" if sample is not None else f"batch[{position}]{path}"
                )
                if returned is not None:
                    file, node, function = returned
                    self.born[id(value)] = _bound_at(file, node, function, path) or (
                        file,
                        node.lineno,
                        f"{made_as}{path}",
                    )
            if isinstance(value, torch.Tensor):
                shape, dtype, device = tuple(value.shape), value.dtype, value.device
            else:
                shape, dtype, device = (len(value),), type(value).__name__, None
            named.append(Named(label, value, shape, dtype, device, False))
        shapes = Counter(n.shape for n in named)
        usual, count = shapes.most_common(1)[0] if shapes else ((), 0)
        odd = [n for n in named if n.shape != usual] if count * 2 > len(named) else []
        self.odd = {id(n.value) for n in odd}
        if odd and not isinstance(odd[0].value, torch.Tensor):
            self.kind = "shape_mismatch"
        if not odd:  # no shape most share (every length differs): each shape's first first
            firsts: dict[Any, Named] = {}
            for n in named:
                firsts.setdefault(n.shape, n)
            named = [*firsts.values(), *(n for n in named if firsts[n.shape] is not n)]
        self.named = (odd + [n for n in named if n.shape == usual or not odd])[:MAX_SHOWN]
        self.followed = odd or named[:2]
        """What the chain follows, and whose births are shown: the odd samples, else those
        of the first two shapes (the others' were made on the same lines)."""
        kept = {id(n.value) for n in self.followed}
        self.born = {key: born for key, born in self.born.items() if key in kept}
        collate = _collate_name(collated.collate_fn)
        within = f"`{collate}`" if collate else "the collate function"
        samples = f" of {len(named)} samples" if len(named) > len(self.named) else ""
        if isinstance(failed.func, OwnCheck):  # its own Python check raised, no torch call
            self.op = f"{within}'s own check{samples}"
        else:  # `torch.stack of 64 samples in `default_collate``
            self.op = f"{op_label(failed.func)}{samples} in {within}"

    def shows_birth(self, value: Any) -> bool:
        """Whether ``value``'s operand names where it was made (see ``followed``)."""
        return any(value is n.value for n in self.followed)


def _lists_passed(failed: FailedCall, where: dict[int, tuple[int, str]]) -> list[Any]:
    """The samples' lists a call was given in a list (``torch.tensor([f["input_ids"] for f in
    features])``): what it refused when their lengths differ."""
    return [
        item
        for argument in failed.args
        if isinstance(argument, list | tuple)
        for item in argument
        if isinstance(item, list | tuple) and id(item) in where
    ]


def _sample_paths(torch: Any, samples: list[Any]) -> dict[int, tuple[int, str]]:
    """Each tensor and list (by id) or array (by its data's address) of the samples: (its
    sample's position in the batch, its path in the sample: ``[0]``, ``['input_ids']``)."""
    found: dict[int, tuple[int, str]] = {}
    for position, sample in enumerate(samples):
        pending: list[tuple[Any, str, int]] = [(sample, "", 0)]
        for _ in range(_MAX_NODES):
            if not pending:
                break
            node, path, depth = pending.pop()
            found.setdefault(id(node), (position, path))
            address = _address(node)
            if address:  # numpy: the collate made a tensor of it (`torch.as_tensor`)
                found.setdefault(address, (position, path))
            if depth >= _MAX_DEPTH or isinstance(node, torch.Tensor):
                continue
            entries: list[tuple[Any, str, int]] = []
            if isinstance(node, Mapping):
                entries = [(v, f"{path}[{k!r}]", depth + 1) for k, v in node.items()]
            elif isinstance(node, list | tuple) and node and not _is_number(node[0]):
                entries = [(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(node)]
            pending += reversed(entries)  # the first entry first: it names a value held twice
    return found


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | bool)


def _address(value: Any) -> int:
    """Where a CPU tensor's or an array's data starts (0 when there is none to compare)."""
    try:
        interface = getattr(value, "__array_interface__", None)
        if interface is not None:
            return int(interface["data"][0])
        if getattr(value, "device", None) is not None and value.device.type == "cpu":
            return int(value.data_ptr())
    except Exception:
        pass
    return 0


def _dataset_text(statement: ast.AST | None, resolve: Any, dataset: Any) -> str:
    """How the user's line reaches the dataset: ``loader.dataset`` for ``for x, y in
    enumerate(loader)``, ``trainer.train_dataset``; else ``dataset``."""
    if statement is not None:
        header = statement.iter if isinstance(statement, ast.For | ast.AsyncFor) else statement
        for path in load_paths(header):
            value = resolve(path)
            for attribute in _DATASET_ATTRIBUTES:
                if value is not None and getattr(value, attribute, None) is dataset:
                    return ".".join(path) + "." + attribute
    return "dataset"


Returned = tuple[str, ast.Return | ast.Yield, ast.FunctionDef | ast.AsyncFunctionDef]
"""(file, the one return or yield, the function): where a dataset's samples are made."""


def _returned_at(dataset: Any, facts: RunFacts, *, iterable: bool) -> Returned | None:
    """The one ``return`` of the user's ``__getitem__`` that made the samples (through
    wrappers such as ``Subset``), or the one ``yield`` of an iterable dataset's
    ``__iter__``, if it has just one."""
    method, made_by = ("__iter__", ast.Yield) if iterable else ("__getitem__", ast.Return)
    for _ in range(_MAX_WRAPPERS):
        code = getattr(getattr(type(dataset), method, None), "__code__", None)
        if code is None:
            return None
        file = facts.scope.user_file(code.co_filename)
        if file is not None:
            source = facts.sources.get(file)  # its def line: after any decorators
            function = source.statements.get(
                source.def_line_of.get(code.co_firstlineno, code.co_firstlineno)
            )
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                return None
            nodes = [node for node in _own_nodes(function) if isinstance(node, made_by)]
            return (file, nodes[0], function) if len(nodes) == 1 else None
        dataset = getattr(dataset, "dataset", None)
    return None


def _bound_at(file: str, made: ast.Return | ast.Yield, function: ast.AST, path: str) -> Born | None:
    """Where the tensor at ``path`` of what ``made`` returns was made, when the return names
    it (``return x, y``, ``return {"input_ids": ids}``) and the function binds that name on
    one line only: ``x = torch.zeros(len(word) + 1)``, where its size was set (an item
    assigned into it later changes no shape). None where it is made on the return line
    itself (``return chunk[:-1], chunk[1:]``), or bound on several lines or as a parameter."""
    node: ast.AST | None = made.value
    for key in _PATH_KEY.findall(path):
        node = _element(node, ast.literal_eval(key))
    if not isinstance(node, ast.Name):
        return None
    arguments = getattr(function, "args", None)
    if arguments is not None and node.id in {
        a.arg for a in ast.walk(arguments) if isinstance(a, ast.arg)
    }:
        return None
    lines = {
        target.lineno
        for target in _own_nodes(function)
        if isinstance(target, ast.Name)
        and target.id == node.id
        and isinstance(target.ctx, ast.Store)
    }
    if len(lines) != 1:
        return None
    return file, lines.pop(), node.id


def _element(node: ast.AST | None, key: Any) -> ast.AST | None:
    """The part of a tuple, list or dict display that ``[key]`` takes."""
    if isinstance(node, ast.Tuple | ast.List) and isinstance(key, int):
        return node.elts[key] if -len(node.elts) <= key < len(node.elts) else None
    if isinstance(node, ast.Dict):
        for name, value in zip(node.keys, node.values, strict=True):
            if isinstance(name, ast.Constant) and name.value == key:
                return value
    return None


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    """The nodes of ``function``'s body, not those of functions nested in it."""
    found: list[ast.AST] = []
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        found.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return found


def _collate_name(collate_fn: Any) -> str | None:
    """``default_collate``; a collator object by its class (``DataCollatorWithPadding``),
    the one it wraps when it only wraps one (transformers' ``RemoveColumnsCollator``)."""
    inner = getattr(collate_fn, "data_collator", None)
    if callable(inner):
        collate_fn = inner
    name = getattr(collate_fn, "__name__", None)
    if isinstance(name, str):
        return name
    return type(collate_fn).__name__ if collate_fn is not None else None
