"""Code actions (``textDocument/codeAction``) as a user drives them: run a GPT-like program
through the language server, ask for actions on its lines, apply their edits.

"Add shape comment" writes the observed shape with the names the code built it from;
"Annotate with jaxtyping" writes a function's observed argument and return shapes, and the
annotated program then runs under jaxtyping's import hook with beartype checking every call
(a wrong annotation fails it, so the check is real)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from lsprotocol import types

from shapelens.present.annotations import TextChange, shape_comment, shape_comment_edits
from shapelens.present.signatures import jaxtyping_changes
from shapelens.trace import TracedLine, TracedVar

from conftest import LspSession, line_of, need

need("torch")

PROGRAM = """
from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn import functional as F


class SelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # back to one row per token
        return y


def embed(idx, wte, wpe):
    B, T = idx.size()
    pos = torch.arange(0, T, dtype=torch.long)
    return wte(idx) + wpe(pos)


def causal_mask(scores):
    T = scores.size(-1)
    keep = torch.tril(torch.ones(T, T, dtype=torch.bool))
    return scores.masked_fill(~keep, float("-inf")), keep


def head(h, labels):
    logits = h.mean(dim=1)
    return F.cross_entropy(logits, labels)


def flat(x):
    return x.reshape(-1)


wte = nn.Embedding(50, 32)
wpe = nn.Embedding(16, 32)
attn = SelfAttention(32, 4)
for T in (3, 5, 8):
    x = embed(torch.randint(0, 50, (4, T)), wte, wpe)
    y = attn(x)
    masked, keep = causal_mask(torch.randn(4, T, T))
    loss = head(torch.randn(2, 6, 10), torch.tensor([1, 2]))
for shape in ((6,), (2, 3)):
    z = flat(torch.ones(shape))
print("done")
"""

SIGNATURES = {
    "def forward": (
        'def forward(self, x: Float[Tensor, "4 T 32"]) -> Float[Tensor, "4 T 32"]:'
    ),  # the return's dims: `view(B, T, C)` on the line that made `y`
    "def embed": 'def embed(idx: Int[Tensor, "4 T"], wte, wpe) -> Float[Tensor, "4 ret_dim1 32"]:',
    "def causal_mask": (
        'def causal_mask(scores: Float[Tensor, "4 scores_dim1 T"]) -> tuple[Float[Tensor,'
        ' "4 ret0_dim1 ret0_dim2"], Bool[Tensor, "ret1_dim0 ret1_dim1"]]:'
    ),  # T: `T = scores.size(-1)`; nothing says which other dims are equal
    "def head": (
        'def head(h: Float[Tensor, "2 6 10"], labels: Int[Tensor, "2"]) -> Float[Tensor, ""]:'
    ),
    "def flat": 'def flat(x: Float[Tensor, "*x_batch"]) -> Float[Tensor, "6"]:',
}


def _apply(text: str, edits: list[types.TextEdit]) -> str:
    """A WorkspaceEdit's edits applied as an editor does (all against the same text)."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(position: types.Position) -> int:
        return offsets[min(position.line, len(lines))] + position.character

    for edit in sorted(edits, key=lambda e: at(e.range.start), reverse=True):
        text = text[: at(edit.range.start)] + edit.new_text + text[at(edit.range.end) :]
    return text


def _edits(action: types.CodeAction, uri: str) -> list[types.TextEdit]:
    assert action.edit is not None and action.edit.changes is not None
    return list(action.edit.changes[uri])


def _line(text: str, marker: str) -> int:
    """0-based line of the first line starting with ``marker``."""
    return next(i for i, t in enumerate(text.splitlines()) if t.strip().startswith(marker))


def _run_checked(folder: Path, *modules: str) -> subprocess.CompletedProcess[str]:
    """Import (run) each of ``modules`` in one interpreter, every function checked by
    jaxtyping + beartype at each call; a module that fails prints its error and the next
    one runs."""
    code = "import jaxtyping\n" + "".join(
        f"with jaxtyping.install_import_hook({m!r}, 'beartype.beartype'):\n"
        "    try:\n"
        f"        import {m}\n"
        "    except Exception as error:\n"
        f"        print({m!r}, 'failed:', type(error).__name__, error)\n"
        for m in modules
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=120
    )


async def test_code_actions_write_shape_comments_and_checked_jaxtyping(lsp: LspSession) -> None:
    need("jaxtyping")
    need("beartype")
    path, uri = lsp.write("gptlike.py", PROGRAM)
    lsp.open(path)
    result = await lsp.run(uri)
    assert result["status"] == "ok", result
    text = path.read_text()

    # "Add shape comment": names where the statement built the dim from one, sizes elsewhere
    k_line = line_of(path, "k = k.view(") - 1
    [action] = await lsp.code_actions(uri, k_line)
    assert action.title == "Add shape comment: # (B, n_head, T, C // n_head)"
    assert action.kind == types.CodeActionKind.RefactorRewrite
    commented = _apply(text, _edits(action, uri)).splitlines()[k_line]
    assert commented == (
        "        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)"
        "  # (B, n_head, T, C // n_head)"
    )
    # a dim that varied with no name the code gave it: the range seen, never a made-up name
    [pos] = await lsp.code_actions(uri, line_of(path, "pos = ") - 1)
    assert pos.title == "Add shape comment: # (3‥8,)"
    [logits] = await lsp.code_actions(uri, line_of(path, "logits = ") - 1)
    assert logits.title == "Add shape comment: # (2, 10)"
    # q, k, v of one shape: one comment
    [split] = await lsp.code_actions(uri, line_of(path, "q, k, v = ") - 1)
    assert split.title == "Add shape comment: # (4, 3‥8, 32)"

    # none on a line with a comment, one that did not run, past the end, an unknown file
    assert await lsp.code_actions(uri, line_of(path, "y = y.transpose(") - 1) == []
    assert await lsp.code_actions(uri, line_of(path, "import torch") - 1) == []
    assert await lsp.code_actions(uri, 999) == []
    assert await lsp.code_actions(uri, k_line, only=[types.CodeActionKind.QuickFix]) == []
    assert len(await lsp.code_actions(uri, k_line, only=[types.CodeActionKind.Refactor])) == 1
    assert await lsp.code_actions((lsp.root / "other.py").as_uri(), 0) == []

    # "Annotate with jaxtyping", def after def, each applied to the document as it now is
    version = 1
    for marker, signature in SIGNATURES.items():
        actions = await lsp.code_actions(uri, _line(text, marker))
        [annotate] = [a for a in actions if a.title == "Annotate with jaxtyping"]
        text = _apply(text, _edits(annotate, uri))
        assert text.splitlines()[_line(text, marker)].strip() == signature
        version += 1
        lsp.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
    head = text.split("\n\n\nclass")[0].splitlines()
    assert head[-3:] == [  # after the imports, only the names used, each imported once
        "from torch.nn import functional as F",
        "from jaxtyping import Bool, Float, Int",
        "from torch import Tensor",
    ]
    path.write_text(text)
    # the check is real: a name that holds two dims equal fails the same run
    wrong = lsp.root / "gptlike_wrong.py"
    wrong.write_text(text.replace('x: Float[Tensor, "4 T 32"]', 'x: Float[Tensor, "4 T T"]'))
    checked = _run_checked(lsp.root, "gptlike", "gptlike_wrong")
    assert checked.returncode == 0, checked.stderr
    done, failed = checked.stdout.splitlines()[:2]
    assert done == "done", checked.stdout
    assert failed.startswith("gptlike_wrong failed: TypeCheckError"), checked.stdout


# -- the text alone ---------------------------------------------------------------------------


def _var(name: str, *shapes: tuple[int, ...], dtype: str = "float32") -> TracedVar:
    ranks = {len(s) for s in shapes}
    ranges = None
    if len(shapes) > 1 and len(ranks) == 1:
        ranges = tuple((min(d), max(d)) for d in zip(*shapes, strict=True))
    return TracedVar(
        name=name, type="torch.Tensor", shape=shapes[-1], dtype=dtype, device="cpu",
        requires_grad=False, hits=len(shapes), shapes=shapes, dim_ranges=ranges,
    )  # fmt: skip


def _changed(source: str, changes: list[TextChange]) -> str:
    lines = source.splitlines(keepends=True)
    for c in sorted(changes, key=lambda c: (c.line, c.column), reverse=True):
        row = lines[c.line] if c.line < len(lines) else ""
        assert c.end_line == c.line
        row = row[: c.column] + c.text + row[c.end_column :]
        if c.line < len(lines):
            lines[c.line] = row
        else:
            lines.append(row)
    return "".join(lines)


def test_shape_comment_text() -> None:
    k = _var("k", (4, 4, 3, 8), (4, 4, 8, 8))
    statement = "k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)"
    assert shape_comment(k, statement) == "# (B, n_head, T, C // n_head)"
    assert shape_comment(k, "k = f(k)") == "# (4, 4, 3‥8, 8)"
    assert shape_comment(_var("x", (6,), (2, 3)), "x = f()") is None  # its rank varied
    returned = _var("<return>[1]", (2, 5))
    assert shape_comment(returned, "return a, b.view(N, 5)") == "# (N, 5)"


def test_shape_comment_edits_place_the_comment() -> None:
    source = "import torch\nx = torch.ones(2, 3)   \ny = x; z = x\nw = x  # mine\n"
    line = TracedLine(file="/w/m.py", line=2, hits=1, vars=(_var("x", (2, 3)),))
    [edit] = shape_comment_edits(source, 1, line)
    assert _changed(source, [edit.change]).splitlines()[1] == "x = torch.ones(2, 3)  # (2, 3)"
    assert shape_comment_edits(source, 2, line) == []  # two statements
    assert shape_comment_edits(source, 3, line) == []  # a comment already
    two = TracedLine(file="/w/m.py", line=2, hits=1, vars=(_var("a", (2,)), _var("b", (3,))))
    titles = [e.comment for e in shape_comment_edits("a, b = f()\n", 0, two)]
    assert titles == ["# a: (2,)", "# b: (3,)"]  # shapes that differ: each names its tensor


def test_jaxtyping_keeps_what_the_author_wrote_and_what_ran_not() -> None:
    source = textwrap.dedent(
        '''\
        """Doc."""
        import torch


        def f(x: torch.Tensor, mask: list[int] | None = None, y=None, *rest):
            if x.dim() > 1:
                return x
        '''
    )
    header = TracedLine(
        file="/w/m.py", line=5, hits=2,
        vars=(_var("x", (2, 3), (2, 5)), _var("mask", (2,), (2,)), _var("y", (4,), (4,))),
    )  # fmt: skip
    returned = TracedLine(file="/w/m.py", line=7, hits=2, vars=(_var("<return>", (2, 3), (2, 3)),))
    changes = jaxtyping_changes(source, 4, {4: header, 6: returned})
    assert changes is not None
    assert _changed(source, changes).splitlines()[1:5] == [
        "import torch",
        "from jaxtyping import Float",
        "from torch import Tensor",
        "",
    ]
    # torch.Tensor is replaced, list[int] stays; y defaults to None; no return annotation:
    # f may end without a return statement (an implicit None)
    assert _changed(source, changes).splitlines()[6] == (
        'def f(x: Float[Tensor, "2 x_dim1"], mask: list[int] | None = None,'
        ' y: Float[Tensor, "4"] | None = None, *rest):'
    )
    assert jaxtyping_changes(source, 5, {4: header}) is None  # not a def line
    assert jaxtyping_changes(source, 4, {}) is None  # never called
    assert jaxtyping_changes("def f(:\n", 0, {0: header}) is None  # does not parse
