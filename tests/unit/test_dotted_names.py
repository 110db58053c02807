"""Every dotted name that docs/ and the docstrings cite resolves, so a move that forgets one fails.

Cited: in backticks in `README.md`, `docs/*.md` (so not `docs/decisions/` nor `docs/history/`:
history names things as they were) and the docstrings under `src/codefleet`. Checked:

- a module path, `codefleet.` optional when its first part is right under it
  (`coord.tables.leases`, `parts.kinds.MAPPERS`): the module imports, each further part is
  an attribute (a class's fields and the attributes its methods set on `self` count);
- `engine.X`, an attribute of the `Engine`; `bench.X`, a file `bench/X.py`;
- `Class.attr` when one codefleet module defines `Class` (else `Class` must be in `FOREIGN`);
- a path whose first folder is a codefleet package (`fleet/landingworker.py`, also
  `server/front.Front`) or a repository folder (`bench/leases.py`): it exists;
- `x.name` where no module is called `x` but codefleet defines `name`: a module that moved.
Anything else is not taken for a name; `NOT_NAMES` lists the few that look like one.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import textwrap
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "codefleet"
# History names things as they were: docs/decisions/ and docs/history/ are not read (only
# docs/*.md is). Until the dated logs and the rename table move to docs/history/ (issue 54),
# they are set aside where they are: the rename table and the dated logs.
LOGS_MOVED = (ROOT / "docs" / "history").is_dir()
HISTORY_SECTIONS = {} if LOGS_MOVED else {"architecture.md": "## What moved where"}
DATED_LOGS = frozenset() if LOGS_MOVED else frozenset({"performance.md"})
REPO_FOLDERS = ("bench/", "deploy/", "docs/", "examples/", "src/codefleet/", "tests/", ".ci/")
# Other libraries' classes, cited with an attribute (the SDKs', FastAPI, sortedcontainers).
FOREIGN = frozenset({"AsyncCodex", "FastAPI", "HookMatcher", "SortedList"})
# Cited text shaped like a name that is not one: git config keys, and variables named like
# a module or a function (an attempt's fields, a fleet's options, uvicorn's transport).
NOT_NAMES = frozenset(
    {
        "codefleet.cursor",
        "codefleet.since",
        "attempt.number",
        "attempt.commands",
        "transport.write",
        "options.runners",
    }
)
FILE_SUFFIXES = frozenset(
    {"py", "pyi", "md", "json", "yaml", "yml", "toml", "db", "txt", "sh", "js", "sql", "html"}
)
# Objects the prose names by a variable: `engine.store` is an attribute of the `Engine`.
OBJECTS = {"engine": "codefleet.coord.engine.Engine"}
CITED = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"\.?[\w-]+(?:/[\w.-]+)+/?")


def _docstrings(path: Path) -> Iterator[str]:
    kinds = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, kinds) and (text := ast.get_docstring(node)):
            yield text


def _doc_text(path: Path) -> str:
    text = path.read_text()
    if heading := HISTORY_SECTIONS.get(path.name):
        start = text.find(heading)
        end = text.find("\n## ", start + len(heading)) if start >= 0 else -1
        if start >= 0:
            text = text[:start] + (text[end:] if end >= 0 else "")
    return text


def sources() -> Iterator[tuple[str, str]]:
    """(where, text) for every text whose backticked names are checked."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if path.name not in DATED_LOGS:
            yield str(path.relative_to(ROOT)), _doc_text(path)
    for path in sorted(SRC.rglob("*.py")):
        yield str(path.relative_to(ROOT)), "\n".join(_docstrings(path))


def cited() -> Iterator[tuple[str, str]]:
    """(where, name) for every backticked token, `()` after a callable dropped."""
    for where, text in sources():
        for match in CITED.finditer(text):
            yield where, match[1].strip().removesuffix("()")


@cache
def modules() -> frozenset[str]:
    """Every importable codefleet module and package, dotted."""
    found = set()
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return frozenset(found)


def _module_file(module: str) -> Path:
    path = SRC.parent.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


@cache
def classes() -> dict[str, list[str]]:
    """Each top-level class name -> the modules that define one."""
    found: dict[str, list[str]] = {}
    for module in sorted(modules()):
        for node in ast.parse(_module_file(module).read_text()).body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(module)
    return found


def _has(owner: Any, name: str) -> bool:
    """An attribute, a field a class declares, or one its methods set on `self`."""
    if hasattr(owner, name):
        return True
    if not isinstance(owner, type):
        return False
    ours = [k for k in owner.__mro__ if k.__module__.startswith("codefleet")]
    return any(name in getattr(k, "__annotations__", {}) for k in owner.__mro__) or any(
        name in _set_on_self(k) for k in ours
    )


@cache
def _set_on_self(cls: type) -> frozenset[str]:
    """The attributes a class's own methods assign on `self` (`self.clock = clock`)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    return frozenset(
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def resolve_dotted(full: str) -> str | None:
    """None when `full` (codefleet.x.y.Attr.attr) names something; else what is missing."""
    parts = full.split(".")
    cut = max(n for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in modules())
    owner: Any = importlib.import_module(".".join(parts[:cut]))
    for n, name in enumerate(parts[cut:], start=cut):
        if not _has(owner, name):
            return f"{'.'.join(parts[:n])} has no {name}"
        if not hasattr(owner, name):
            return None  # a field or an attribute set on `self`: its type is not followed
        owner = getattr(owner, name)
    return None


def check(name: str) -> str | None:
    """What is wrong with the cited `name` (None: it resolves, or it is not a checked form)."""
    if PATH.fullmatch(name):
        return _check_path(name)
    if name in NOT_NAMES or FILE_SUFFIXES.intersection(name.split(".")[1:]):
        return None
    if not DOTTED.fullmatch(name):
        return None
    head = name.split(".")[0]
    if head == "codefleet" or f"codefleet.{head}" in modules():
        return resolve_dotted(name if head == "codefleet" else f"codefleet.{name}")
    if head in OBJECTS:
        return resolve_dotted(OBJECTS[head] + name[len(head) :])
    if head == "bench":
        return None if (ROOT / f"{name.replace('.', '/')}.py").exists() else f"no {name}"
    if head[0].isupper() and any(c.islower() for c in head):
        return _check_class(head, name)
    return _check_moved(name)


def _check_path(name: str) -> str | None:
    """A file or folder must exist; `pkg/module.Attr` is a module path with its attribute."""
    head = name.split("/")[0]
    if f"codefleet.{head}" in modules() and (SRC / head).is_dir():
        if name.endswith("/") or name.rpartition(".")[2] in FILE_SUFFIXES:
            return None if (SRC / name).exists() else f"no src/codefleet/{name}"
        return resolve_dotted("codefleet." + name.replace("/", "."))
    if name.startswith(REPO_FOLDERS):
        return None if (ROOT / name).exists() else f"no {name}"
    return None


def _check_moved(name: str) -> str | None:
    """`graph.load_graph` when no module is called `graph` but codefleet defines `load_graph`:
    the name of a module that moved or was renamed."""
    *owner, last = name.split(".")
    if owner[-1] in {m.rsplit(".", 1)[-1] for m in modules()} or _in_stdlib(name):
        return None
    homes = top_level().get(last, [])
    return f"no module {owner[-1]}; {last} is in {', '.join(homes)}" if homes else None


def _in_stdlib(name: str) -> bool:
    """`gc.collect`: a name the standard library has."""
    head, *rest = name.split(".")
    if head not in sys.stdlib_module_names:
        return False
    owner: Any = importlib.import_module(head)
    return all((owner := getattr(owner, part, None)) is not None for part in rest)


@cache
def top_level() -> dict[str, list[str]]:
    """Each function, class and CONSTANT defined at a module's top level -> its modules."""
    found: dict[str, list[str]] = {}
    for module in sorted(modules()):
        for node in ast.parse(_module_file(module).read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found.setdefault(node.name, []).append(module)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id.isupper():
                        found.setdefault(target.id, []).append(module)
    return found


def _check_class(head: str, name: str) -> str | None:
    defined = classes().get(head, [])
    if len(defined) == 1:
        return resolve_dotted(f"{defined[0]}.{name}")
    if not defined and head not in FOREIGN:
        return f"no codefleet class {head}"
    return None


def test_every_cited_dotted_name_and_path_resolves() -> None:
    unresolved = sorted(
        f"{where}: `{name}`: {why}" for where, name in set(cited()) if (why := check(name))
    )
    assert unresolved == [], "stale names (move the name, or fix the citation):\n" + "\n".join(
        unresolved
    )


def test_the_check_catches_a_moved_module_a_missing_attribute_and_a_missing_file() -> None:
    assert check("coord.tables.leases") is None
    assert check("codefleet.parts.kinds") is None
    assert check("coord.tables.nosuchmodule") == "codefleet.coord.tables has no nosuchmodule"
    assert check("parts.kinds.NO_SUCH_NAME") == "codefleet.parts.kinds has no NO_SUCH_NAME"
    assert check("fleet/nosuch.py") == "no src/codefleet/fleet/nosuch.py"
    assert check("bench/nosuch.py") == "no bench/nosuch.py"
    assert check("NoSuchClass.method") == "no codefleet class NoSuchClass"


def test_a_module_cited_by_its_old_name_is_told_where_the_name_lives_now() -> None:
    assert check("graph.load_graph") == "no module graph; load_graph is in codefleet.api.graphfile"
    assert check("engine.store") is None
    assert check("engine.nosuch") == "codefleet.coord.engine.Engine has no nosuch"
    assert check("server/front.Front") is None
    assert check("coord/restores") == "codefleet.coord has no restores"


def test_names_outside_the_checked_forms_are_left_alone() -> None:
    for name in ("asyncio.to_thread", "a/b.py", "gc.collect", "FastAPI.__call__", "--flag"):
        assert check(name) is None, name
