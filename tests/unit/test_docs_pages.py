"""The docs are readable reference: one short page per mechanism, each naming its modules.

A page of docs/ (docs/history/ and docs/decisions/ aside) is at most `MAX_LINES`
lines (architecture.md's generated module map aside) and names, on its `Modules:`
line, the modules that hold its rule, each a file that exists. The README stays
under `README_MAX` lines. Every relative link of the docs and the README reaches a
file, and a link into a reference page or the history reaches a heading there.
Each benchmark of bench/ has its section, with its command, on a performance page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from modulemap import BEGIN, END

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SRC = ROOT / "src" / "codefleet"
MAX_LINES = 150
README_MAX = 250
PAGES = sorted(DOCS.glob("*.md"))
LINK = re.compile(r"\]\((?!https?:|mailto:)([^)\s#]*)(?:#([^)\s]+))?\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
# bench/ modules that are not benchmarks: shared pieces and the tables' tools.
NOT_A_BENCHMARK = {
    "__init__",
    "harness",
    "summarize",
    "profile_summary",
    "scripted_run",
    "libsuite",
}


def reading_lines(page: Path) -> int:
    """The page's lines as a reader meets them: a generated module map is not prose."""
    text = page.read_text(encoding="utf-8")
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + text[text.index(END) + len(END) :]
    return len(text.splitlines())


def modules_named(page: Path) -> list[str]:
    """The backticked paths of the page's `Modules:` line."""
    lines = [line for line in page.read_text(encoding="utf-8").splitlines()[:8]]
    named = [line for line in lines if line.startswith("Modules: ")]
    return re.findall(r"`([^`]+)`", named[0]) if named else []


def anchors(page: Path) -> set[str]:
    """The anchors a page's headings make, as a Markdown renderer spells them."""
    found: set[str] = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            slug = re.sub(r"[^\w\- ]", "", m[1].strip().lower()).replace(" ", "-")
            n, candidate = 0, slug
            while candidate in found:
                n += 1
                candidate = f"{slug}-{n}"
            found.add(candidate)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_reference_page_is_short(page: Path) -> None:
    assert reading_lines(page) <= MAX_LINES, f"{page.name}: split it in two, or move history out"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_reference_page_names_its_modules_and_each_exists(page: Path) -> None:
    named = modules_named(page)

    assert named, f"{page.name} has no `Modules:` line under its title"
    assert [m for m in named if not ((SRC / m).is_file() or (ROOT / m).is_file())] == []


def test_the_readme_stays_under_its_bound() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < README_MAX


def reference_anchor(page: Path, target: Path, anchor: str) -> bool:
    """Whether a link's anchor is held to a heading: into a page, from outside the records."""
    return bool(anchor) and target.suffix == ".md" and "decisions" not in page.parts


def test_every_relative_link_reaches_a_file_and_a_heading() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for target, anchor in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                broken.append((page.name, target))
            elif reference_anchor(page, path, anchor) and anchor not in anchors(path):
                broken.append((page.name, f"{target}#{anchor}"))
    assert broken == []


def bench_sections() -> dict[str, str]:
    """Each `### ` section of the performance pages, by its heading."""
    sections = {}
    for page in DOCS.glob("performance*.md"):
        for part in page.read_text(encoding="utf-8").split("\n### ")[1:]:
            heading, _, body = part.partition("\n")
            sections[heading] = body.split("\n## ")[0]
    return sections


@pytest.mark.parametrize(
    "name", sorted({p.stem for p in (ROOT / "bench").glob("*.py")} - NOT_A_BENCHMARK)
)
def test_every_benchmark_has_its_current_table_and_command(name: str) -> None:
    found = {h: body for h, body in bench_sections().items() if f"`bench/{name}.py`" in h}

    assert found, f"no performance page has a section for bench/{name}.py"
    body = next(iter(found.values()))
    assert "python" in body, f"bench/{name}.py's section gives no command"
    assert "|---" in body or "no run recorded" in body, f"bench/{name}.py's section has no table"
