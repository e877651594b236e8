"""``shape_comment``: the shape comments a program carries (``# (B, nh, T, hs)``), checked
against the shapes that ran, driven through ``shapelens run`` as a user runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from shapelens.engine.source.shape_comments import parse_comment

from conftest import LspSession, line_of, need, run_cli

need("torch")


@pytest.mark.parametrize(
    ("comment", "result", "inputs", "target"),
    [
        ("# (B, nh, T, hs)", "(B, nh, T, hs)", [], None),
        ("# (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)", "(B, nh, T, hs)",
         ["(B, nh, T, T)", "(B, nh, T, hs)"], None),
        ("# shape (t)", "(t)", [], None),
        ("# token embeddings of shape (b, t, n_embd)", "(b, t, n_embd)", [], None),
        ("# x: [batch, seq, dim]", "[batch, seq, dim]", [], "x"),
        ("# (2N, D)", "(2N, D)", [], None),
        ("# (beam * V,)", "(beam * V,)", [], None),
        ("# (*batch, C)", "(*batch, C)", [], None),
        ("# -> (B, T, C)", "(B, T, C)", [], None),
        ("# (N, 1) per-sample scale", "(N, 1)", [], None),
    ],
)  # fmt: skip
def test_the_forms_people_write_are_read(
    comment: str, result: str, inputs: list[str], target: str | None
) -> None:
    parsed = parse_comment(comment)
    assert parsed is not None
    assert parsed.result.text == result
    assert [shape.text for shape in parsed.inputs] == inputs
    assert parsed.target == target
    assert comment[parsed.result.start : parsed.result.end] == result  # the span to rewrite


@pytest.mark.parametrize(
    "comment",
    [
        "# batch size, sequence length, embedding dimensionality (n_embd)",
        "# note: using list [-1] to preserve the time dim",
        "# (see paper)",
        "# (optional)",
        "# kernel size (3, 3)",
        "# (N, D) - (D,)",
        "# (a, b) and (c, d)",
    ],
)
def test_prose_in_brackets_is_no_shape(comment: str) -> None:
    assert parse_comment(comment) is None


_MODEL = """
import torch
import torch.nn as nn
from dataclasses import dataclass
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class Config:
    n_embd: int = 32
    n_head: int = 4
    batch_size: int = 8


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.n_head = config.n_head

    def forward(self, x):  # x: (B, T, n_embd)
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  {K}
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  {V}
        att = q @ k.transpose(-2, -1)  {ATT}
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(B, T, C)  {Y}
        return y  {RETURN}


config = Config()
model = Attention(config)
data = TensorDataset(torch.randn(20, 6, config.n_embd))
for T in (6, 3):
    for (xb,) in DataLoader(data, batch_size=config.batch_size):
        x = xb[:, :T]  # (batch_size, T, n_embd)
        out = model(x)  # (B, T, C)
"""

_AGREEING = {
    "K": "# (B, nh, T, hs)",
    "V": "# (B, nh, T, C // nh)",
    "ATT": "# (B, nh, T, T)",
    "Y": "# (B, T, nh * hs)",
    "RETURN": "# (B, T, n_embd)",
}


_CODE = {"K": "k = k.view", "V": "v = v.view", "ATT": "att = q @", "Y": "y = y.transpose",
         "RETURN": "return y"}  # fmt: skip


def _program(script: Any, **comments: str) -> Path:
    source = _MODEL
    for key, default in _AGREEING.items():
        source = source.replace("{" + key + "}", comments.get(key, default))
    path: Path = script(source)
    return path


def _comment_findings(path: Path) -> list[dict[str, Any]]:
    run = run_cli(str(path), cwd=path.parent)
    assert run.returncode == 0, run.stderr
    assert run.trace is not None
    return [f for f in run.trace["findings"] if f["kind"] == "shape_comment"]


@pytest.mark.backend
def test_comments_that_agree_make_no_finding(script) -> None:  # type: ignore[no-untyped-def]
    """Free names (nh, hs) bound by the first comment of each call, names the program binds
    (B, T, C, self.config.n_embd), arithmetic, a def line's argument, a return, a last batch
    smaller than batch_size, and T changing between calls and loop passes: no finding."""
    assert _comment_findings(_program(script)) == []


@pytest.mark.backend
@pytest.mark.parametrize(
    ("key", "stale", "says"),
    [
        ("K", "# (B, T, hs)", "3 dims in the comment, 4 in the run"),
        ("ATT", "# (B, nh, T, hs)", "dim 3 is hs, 8 at line {q} of this call, but {T} in the run"),
        ("V", "# (B, nh, T, n_embd // 2)", "dim 3 is n_embd // 2 = 16 (n_embd=32), 8 in the run"),
        ("RETURN", "# (B, T, 3 * n_embd)", "dim 2 is 3 * n_embd = 96 (n_embd=32), 32 in the run"),
        ("Y", "# (B, nh, T, hs)", "4 dims in the comment, 3 in the run"),
    ],
)
def test_a_stale_comment_is_found_at_its_line(  # type: ignore[no-untyped-def]
    script, key: str, stale: str, says: str
) -> None:
    path = _program(script, **{key: stale})
    found = _comment_findings(path)
    assert len(found) == 1, found
    finding = found[0]
    line = line_of(path, _CODE[key])
    assert (finding["line"], finding["severity"]) == (line, "info")
    assert finding["expression"] == stale
    assert finding["expected"] == stale.removeprefix("# ")
    assert finding["advice"] == says.format(q=line_of(path, "q = q.view"), T=6)
    assert len(finding["operands"][0]["shape"]) >= 3  # what really ran


@pytest.mark.backend
def test_a_free_name_is_one_size_within_a_call_not_across_calls(script) -> None:  # type: ignore[no-untyped-def]
    """``hidden`` is free: it is 16 in one call and 8 in the next (no finding), but two
    comments of one call that disagree on it are a finding."""
    path = script(
        """
        import torch

        def encode(x, width):
            h = torch.zeros(x.shape[0], width)  # (N, hidden)
            return torch.cat([h, h], 1)  # (N, 2 * hidden)

        def decode(x, width):
            h = torch.zeros(x.shape[0], width)  # (N, hidden)
            z = torch.zeros(x.shape[0], width + 1)  # (N, hidden)
            return z

        for width in (16, 8):
            encode(torch.ones(4, 3), width)
        decode(torch.ones(4, 3), 5)
        """
    )
    found = _comment_findings(path)
    decode_h = line_of(path, "def decode") + 1
    assert [(f["line"], f["advice"]) for f in found] == [
        (
            line_of(path, "z = torch.zeros"),
            f"dim 1 is hidden, 5 at line {decode_h} of this call, but 6 in the run",
        )
    ]


@pytest.mark.backend
def test_a_free_name_bound_in_a_loop_is_rebound_on_each_pass(script) -> None:  # type: ignore[no-untyped-def]
    """``N`` is each batch's size: another pass, or another loop of the same call, binds it
    again (no finding), while two lines of one pass must agree."""
    path = script(
        """
        import torch

        def evaluate(train, test):
            for xb in train:
                h = xb * 2  # (N, D)
                score = h.sum(1)  # (N,)
            for xb in test:
                h = xb + 1  # (N, D)
                total = torch.cat([h, h]).sum(1)  # (N,)

        evaluate(torch.ones(10, 4).split(4), torch.ones(9, 4).split(3))
        """
    )
    found = _comment_findings(path)
    assert [(f["line"], f["advice"]) for f in found] == [
        (
            line_of(path, "total ="),
            f"dim 0 is N, 3 at line {line_of(path, 'h = xb + 1')} of this call, but 6 in the run",
        )
    ]


@pytest.mark.backend
def test_a_comment_above_the_line_is_checked_and_the_setting_turns_it_off(script) -> None:  # type: ignore[no-untyped-def]
    path = script(
        """
        import torch
        n_classes = 10
        # (batch, n_classes)
        logits = torch.zeros(4, 12)
        """
    )
    found = _comment_findings(path)
    says = "dim 1 is n_classes, 10 as the program binds it, but 12 in the run"
    assert [(f["line"], f["advice"]) for f in found] == [(line_of(path, "# (batch"), says)]
    run = run_cli("--no-findings", "shape_comments", str(path), cwd=path.parent)
    assert run.trace is not None
    assert [f for f in run.trace["findings"] if f["kind"] == "shape_comment"] == []


async def test_update_shape_comment_rewrites_it_as_it_ran(lsp: LspSession) -> None:
    """The quick fix on a stale comment writes the shape that ran in the comment's own
    names (``(B, nh, T, hs)`` on the scores: ``(B, nh, T, T)``); the next run finds nothing."""
    path, uri = lsp.write(
        "attention.py",
        """
        import torch

        def scores(q, k):
            B, T, C = q.shape
            q = q.view(B, T, 2, C // 2).transpose(1, 2)  # (B, nh, T, hs)
            k = k.view(B, T, 2, C // 2).transpose(1, 2)  # (B, nh, T, hs)
            att = q @ k.transpose(-2, -1)  # (B, nh, T, hs), scaled next
            return att

        att = scores(torch.randn(3, 5, 8), torch.randn(3, 5, 8))
        """,
    )
    lsp.open(path)
    result = await lsp.run(uri)
    assert result["status"] == "ok", result
    line = line_of(path, "att = q @") - 1
    [fix] = await lsp.code_actions(uri, line, only=[types.CodeActionKind.QuickFix])
    assert (fix.title, fix.kind, fix.is_preferred) == (
        "Update shape comment: (B, nh, T, T)",
        types.CodeActionKind.QuickFix,
        True,
    )
    assert fix.edit is not None and fix.edit.changes is not None
    [edit] = fix.edit.changes[uri]
    text = path.read_text().splitlines()
    start, end = edit.range.start.character, edit.range.end.character
    fixed = text[line][:start] + edit.new_text + text[line][end:]
    assert fixed == "    att = q @ k.transpose(-2, -1)  # (B, nh, T, T), scaled next"
    assert await lsp.code_actions(uri, line - 1, only=[types.CodeActionKind.QuickFix]) == []
    text[line] = fixed
    path.write_text("\n".join(text) + "\n")
    lsp.client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=path.read_text())],
        )
    )
    again = await lsp.run(uri)
    assert again["status"] == "ok", again
    assert await lsp.code_actions(uri, line, only=[types.CodeActionKind.QuickFix]) == []


PUBLISHED = """
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, tokens):
        # Shape: (B, T, D)
        x = self.embed(tokens)
        h = self.proj(x)  # shape = [B, T, D]
        # -> (B, D)
        pooled = h.mean(dim=1)
        scores = pooled @ self.embed.weight.T  # scores: [B, V]
        return scores  # Shape: (B, V)


model = Encoder()
for batch in (4, 4, 3):
    out = model(torch.randint(0, 50, (batch, 7)))  # output shape: (B, V)
"""


@pytest.mark.backend
@pytest.mark.parametrize(
    ("stale", "written"),
    [
        (None, None),
        ("# -> (B, D)", "# -> (B, T, D)"),
        ("# shape = [B, T, D]", "# shape = [B, D]"),
        ("# Shape: (B, T, D)", "# Shape: (B, T)"),
        ("# scores: [B, V]", "# scores: [B, V, D]"),
    ],
)
def test_the_prefixes_published_code_writes_are_read(  # type: ignore[no-untyped-def]
    script, stale: str | None, written: str | None
) -> None:
    """``# Shape: (B, T, C)``, ``# shape = [B, T]``, ``# -> (B, T, C)`` alone on the line
    above, ``# x: [B, T, C]``: checked as a bare ``# (B, T, C)`` is, and prose ("output
    shape: ...") is no target."""
    source = PUBLISHED if stale is None else PUBLISHED.replace(stale, written or "")
    path = script(source)
    found = _comment_findings(path)
    if written is None:
        assert found == []
        return
    assert len(found) == 1, found
    line = next(n for n, text in enumerate(source.splitlines()) if written in text)
    assert found[0]["line"] == line  # the source starts with a newline: 0-based is 1-based
