"""The docs stay true to the tree: the paths they name exist, their links resolve, and the
README stays a short first page (the rest belongs in docs/)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "server" / "shapelens"
README_MAX_LINES = 200
# Paths in docs/architecture.md are relative to the package unless they start here.
ROOT_FOLDERS = ("tests/", "bench/", "vscode-extension/", "examples/", "docs/", "server/")
_PATH = re.compile(r"[\w.-]+(?:/[\w.<>-]+)*(?:/|\.(?:py|c|json|ts|md|mjs|sh))")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def named_paths(text: str) -> list[str]:
    """The file and folder paths a page names in code spans (`engine/backends/settrace.py`,
    `lsp/features/`); a name without a slash (`setup.py`) or a placeholder
    (`engine/findings/<kind>.py`) is not checked."""
    names = (span.strip() for span in _CODE_SPAN.findall(_FENCE.sub("", text)))
    return [n for n in names if "/" in n and "<" not in n and _PATH.fullmatch(n)]


def missing_paths(text: str) -> list[str]:
    missing = []
    for name in dict.fromkeys(named_paths(text)):  # each name once, in page order
        base = ROOT if name.startswith(ROOT_FOLDERS) else PACKAGE
        if not (base / name).exists():
            missing.append(name)
    return missing


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces → hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors: set[str] = set()
    for line in _FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if line.startswith("#"):
            slug = _slug(line.lstrip("#"))
            count = 0
            while (slug if count == 0 else f"{slug}-{count}") in anchors:
                count += 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def broken_links(page: Path) -> list[str]:
    """Relative links of ``page`` whose file (or, for a Markdown file, heading) is not
    there; links to the web are not followed."""
    text = _CODE_SPAN.sub("", _FENCE.sub("", page.read_text(encoding="utf-8")))
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no such heading)")
    return broken


def test_architecture_names_only_paths_that_exist() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert len(named_paths(text)) > 40  # the check reads the page's paths at all
    missing = missing_paths(text)
    assert not missing, (
        "docs/architecture.md names paths that do not exist (in server/shapelens/ unless they "
        f"start with {', '.join(ROOT_FOLDERS)}): {', '.join(missing)}"
    )


def test_every_package_is_in_the_architecture() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    absent = [name for name in packages if f"`{name}/`" not in text]
    assert not absent, f"docs/architecture.md does not describe: {', '.join(absent)}"


def test_relative_links_resolve() -> None:
    broken = {str(p.relative_to(ROOT)): broken_links(p) for p in _pages()}
    assert not {page: links for page, links in broken.items() if links}


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to docs/"


def test_speed_page_shows_the_latest_bench_report() -> None:
    """docs/speed.md holds bench/results/latest.md between its markers, as `make bench`'s
    last step (bench/speed_doc.py) leaves it: the page quotes the report the run wrote."""
    spec = importlib.util.spec_from_file_location("speed_doc", ROOT / "bench" / "speed_doc.py")
    assert spec is not None and spec.loader is not None
    speed_doc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(speed_doc)
    page = (ROOT / "docs" / "speed.md").read_text(encoding="utf-8")
    report = (ROOT / "bench" / "results" / "latest.md").read_text(encoding="utf-8")
    assert speed_doc.with_report(page, report) == page, "run: python bench/speed_doc.py"


def test_the_checks_see_what_is_wrong(tmp_path: Path) -> None:
    """The checks themselves: a stale module name, a dead link and a dead anchor."""
    assert missing_paths("`engine/backends/settrace.py`, `cli/listing.py`, `tests/nowhere/`") == [
        "cli/listing.py",
        "tests/nowhere/",
    ]
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n## The model as it ran: `--modules`\n")
    page.write_text(
        "[ok](other.md) [ok](other.md#the-model-as-it-ran---modules) [web](https://x.org)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere) `[in code](nowhere.md)`\n"
        "```\n[in a block](nowhere.md)\n```\n"
    )
    assert broken_links(page) == ["missing.md (no such file)", "other.md#nowhere (no such heading)"]
