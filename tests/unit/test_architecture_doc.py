"""docs/architecture.md, the newcomer's map, names every module and every boundary rule."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "codefleet"
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _tree_block() -> str:
    start = DOC.index("## The tree")
    return DOC[start : DOC.index("## The boundaries", start)]


def test_the_map_lists_every_module_under_its_package() -> None:
    tree = _tree_block()
    listed: set[str] = set()
    package = ""
    for line in tree.splitlines():
        if m := re.match(r"  (\w+)/\s", line):
            package = m[1]
        elif m := re.match(r"    (\w+)\.py\s", line):
            listed.add(f"{package}/{m[1]}.py")
        elif m := re.match(r"  (\w+)\.py\s", line):
            listed.add(f"{m[1]}.py")
    modules = {
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    }
    assert modules - listed == set(), "modules missing from docs/architecture.md's tree"
    assert listed - modules == set(), "docs/architecture.md lists modules that no longer exist"


def test_each_line_of_the_map_is_its_modules_first_docstring_line() -> None:
    package, stale = "", {}
    for line in _tree_block().splitlines():
        if m := re.match(r"  (\w+)/\s", line):
            package = m[1]
        elif m := re.match(r"(?:    (\w+\.py)|  (\w+\.py))\s+(.*)$", line):
            module = SRC / (f"{package}/{m[1]}" if m[1] else m[2])
            first = (ast.get_docstring(ast.parse(module.read_text())) or "").split("\n")[0]
            if m[3] != first:
                stale[str(module.relative_to(SRC))] = first
    assert stale == {}, "docs/architecture.md's line differs from the module's docstring"


def test_the_readme_links_the_map() -> None:
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text()
