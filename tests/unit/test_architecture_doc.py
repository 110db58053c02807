"""docs/architecture.md, the newcomer's map, names every module: its module map is generated.

The map is what `tests.modulemap` writes (`uv run python -m tests.modulemap --write`),
and each of its lines is checked against the module it names besides.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from modulemap import BEGIN, END, REGENERATE, module_map, written_map

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "codefleet"
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _tree_block() -> str:
    start = DOC.index(BEGIN)
    return DOC[start : DOC.index(END, start)]


def _map_lines() -> list[tuple[Path, str]]:
    """Each line of the map as (the path it names, its text): folders nest by two spaces."""
    folders: list[str] = []
    found = []
    for line in _tree_block().splitlines():
        if not (m := re.match(r"(  +)([\w.]+/?)\s+(.*)$", line)):
            continue
        depth = len(m[1]) // 2 - 1
        del folders[depth:]
        name, text = m[2], m[3]
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
            found.append((SRC.joinpath(*folders, "__init__.py"), text.removeprefix("— ")))
        else:
            found.append((SRC.joinpath(*folders, name), text))
    return found


def test_the_map_lists_every_module_under_its_package() -> None:
    listed = {
        str(path.relative_to(SRC))
        for path, _ in _map_lines()
        if path.suffix == ".py" and path.name != "__init__.py"
    }
    modules = {
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    }
    assert modules - listed == set(), "modules missing from docs/architecture.md's tree"
    assert listed - modules == set(), "docs/architecture.md lists modules that no longer exist"
    folders = {p.parent for p in SRC.rglob("__init__.py")} - {SRC}
    drawn = {path.parent for path, _ in _map_lines() if path.name == "__init__.py"}
    assert folders == drawn, "every folder is drawn in docs/architecture.md's tree, and only those"


def test_each_line_of_the_map_is_its_modules_first_docstring_line() -> None:
    stale = {}
    for path, text in _map_lines():
        if path.suffix != ".py":
            continue
        first = (ast.get_docstring(ast.parse(path.read_text())) or "").split("\n")[0]
        if text != first:
            stale[str(path.relative_to(SRC))] = first
    assert stale == {}, "docs/architecture.md's line differs from the module's docstring"


def test_the_map_on_the_page_is_the_one_the_command_writes() -> None:
    assert written_map(DOC) == module_map(), (
        f"docs/architecture.md's module map is stale: {REGENERATE}"
    )


def test_the_readme_links_the_map() -> None:
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text()
