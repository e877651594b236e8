"""``textDocument/hover``: the full story of a traced variable, or of a traced line."""

from __future__ import annotations

from lsprotocol import types
from pygls.workspace import TextDocument

from shapelens.lsp.features.lookup import binding_near
from shapelens.lsp.features.text import end_of_line, line_text
from shapelens.lsp.results import FileView
from shapelens.present.dim_names import dim_names
from shapelens.present.findings import SEVERITY_MARKS, finding_detail, mentions, step_text
from shapelens.present.markdown import simulated_line_text, var_table
from shapelens.present.memory import line_figures
from shapelens.trace import TracedVar

_LINE_KEYWORDS = {"def", "return", "yield", "class", "for", "with", ""}


def hover_for(
    view: FileView, document: TextDocument, position: types.Position
) -> types.Hover | None:
    lines = document.lines
    line = position.line
    if not 0 <= line < len(lines):
        return None
    if position.character > end_of_line(document, lines, line).character:
        return None  # past the end of the line: an empty answer, not a guess
    try:
        word = document.word_at_position(position)
    except (IndexError, ValueError):
        return None
    sections: list[str] = []
    found = None if word in _LINE_KEYWORDS else binding_near(view, word, line)
    if found is not None:
        bound_line, var = found
        traced = view.lines[bound_line]
        entries = [
            v for v in traced.vars if v.name == word or v.name.startswith((word + "[", word + "."))
        ]
        statement = line_text(lines, bound_line).strip()
        born = f"line {bound_line + 1}: `{statement}`"
        sections += [
            var_table(v, born=born, sampled=traced.sampled, dims=_dims(statement, v))
            for v in entries or [var]
        ]
        findings_line = bound_line
    elif line in view.lines:
        traced = view.lines[line]
        sections += [var_table(v, sampled=traced.sampled) for v in traced.vars]
        findings_line = line
    else:
        return None
    ran = view.lines.get(findings_line)
    cost = view.results.costs.get(ran.line) if ran is not None else None
    if cost is not None:
        sections.append(f"**memory** {line_figures(cost)}")
    here = view.lines.get(line)  # the hovered line's own stand-ins, whatever word is hovered
    read = view.results.simulated.get(here.line) if here is not None else None
    if read is not None and here is not None and not any(v.simulated for v in here.vars):
        sections.append(simulated_line_text(read.values, read.decisions))
    for current, finding in view.findings:
        if current == findings_line or mentions(finding, word):
            mark = SEVERITY_MARKS.get(finding.severity, "ℹ")
            where = f"(line {current + 1})"
            chain = "".join(
                f"\n- ↳ line {step.line}: {step_text(step)}" for step in finding.chain
            )  # how the failing value came to be, earliest first
            sections.append(f"{mark} **{finding.kind}** {where}: {finding_detail(finding)}{chain}")
    if not sections:
        return None
    shape_only = view.results.shape_only
    if shape_only is not None:
        simulated = (
            " CUDA was simulated (on torch's `meta` device)." if shape_only.simulated_cuda else ""
        )
        sections.append(
            f"*Shape-only run (fake tensors): shapes, dtypes and devices, no values.{simulated}*"
        )
    return types.Hover(
        contents=types.MarkupContent(
            kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(sections)
        )
    )


def _dims(statement: str, var: TracedVar) -> tuple[str | None, ...] | None:
    """The names behind ``var``'s dims, when its statement built the shape from names."""
    if var.shape is None:
        return None
    return dim_names(statement, var.name, len(var.shape))
