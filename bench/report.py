"""Shared by the bench scripts: print a section and append it to the results file."""

from __future__ import annotations

from pathlib import Path


def emit(lines: list[str], out: Path | None) -> None:
    table = "\n".join(lines)
    print(table)
    if out is not None:
        with out.open("a") as handle:
            handle.write("\n" + table + "\n")


def emit_table(caption: str, rows: list[str], out: Path | None) -> None:
    """A table's section: its caption, a blank line, its rows."""
    emit([caption, "", *rows], out)
