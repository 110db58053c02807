"""The test index: which test files exercise each module of `src/codefleet`, as `tests/README.md`.

A test file counts for a module when it imports it (`import codefleet.x`, or
`from codefleet.x import y`, which is `codefleet.x.y` when that is a module) or
runs it (`"-m", "codefleet.cli"` in a command line runs `codefleet.cli.__main__`).
A module no test file names that way is tested through another module: `THROUGH`
says which and why, and `tests/unit/test_test_index.py` holds that module to
reaching it. A module that is only its docstring (most packages' `__init__`) has
nothing to test and no row.

Run from the repository root: `uv run python -m tests.testindex` writes the index;
`--check` only says whether it is current (exit 1 when stale).
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Iterator
from functools import cache
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
TESTS = ROOT / "tests"
INDEX = TESTS / "README.md"
REGENERATE = "uv run python -m tests.testindex"
TIERS = ("unit", "integration", "cli", "agents", "browser", "hosts", "soak", "live")
# A module that imports others by name at run time: the tuple that names them and their prefix.
# (`cli.app.COMMANDS` maps each command to a row whose first item is its module.)
REGISTRIES = {"codefleet.cli.app": ("COMMANDS", "codefleet.cli.")}

ENGINE_PART = (
    "a table or a call the engine composes; tests drive it through `Engine` and its "
    "transition on a real SQLite file, never alone"
)
COMMAND = (
    "a command module, which `cli.app` imports to register its commands; tests run "
    "them through `cli.app` (Typer's runner) or `python -m codefleet.cli`"
)
COMMAND_PART = "a part of `codefleet run`, `load` or `plan`, tested through the commands"
HTTP_PART = "a part of the HTTP app, tested over the wire through the app a `ServerThread` serves"
# (the module tested directly, why, the modules tested through it)
THROUGH: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "codefleet.coord.engine",
        ENGINE_PART,
        (
            "codefleet.coord.calls.arrivals",
            "codefleet.coord.calls.callparts",
            "codefleet.coord.calls.landingoutcomes",
            "codefleet.coord.calls.landingqueue",
            "codefleet.coord.calls.landingsteps",
            "codefleet.coord.calls.leasewaiting",
            "codefleet.coord.calls.operatorcalls",
            "codefleet.coord.calls.outcomes",
            "codefleet.coord.calls.runnercalls",
            "codefleet.coord.calls.takebacks",
            "codefleet.coord.tables.agentregistry",
            "codefleet.coord.tables.checkregistry",
            "codefleet.coord.tables.fleetlimits",
            "codefleet.coord.tables.leases",
            "codefleet.coord.tables.messages",
            "codefleet.coord.tables.persons",
            "codefleet.coord.tables.questions",
            "codefleet.coord.tables.readevents",
            "codefleet.coord.tables.recovery",
            "codefleet.coord.tables.restores",
        ),
    ),
    (
        "codefleet.coord.storage.store",
        "a layer under `Store` (its event log, its typed rows), tested through the store",
        ("codefleet.coord.storage.eventlog", "codefleet.coord.storage.rows"),
    ),
    (
        "codefleet.coord.storage.database",
        "the held row updates of `Database`'s transaction, tested through it",
        ("codefleet.coord.storage.held",),
    ),
    (
        "codefleet.coord.tables.liveindex",
        "the one readiness rule; `unit/test_readiness.py` holds every read to the live index's answer",
        ("codefleet.coord.policy.readiness",),
    ),
    (
        "codefleet.server.httpapp",
        HTTP_PART,
        (
            "codefleet.server.front",
            "codefleet.server.landing_routes",
            "codefleet.server.person_routes",
        ),
    ),
    (
        "codefleet.server.httpapp",
        "the landed line and the metrics the app serves, tested over the wire "
        "(`integration/test_landed_line.py`, `integration/test_metrics.py`)",
        (
            "codefleet.server.landed_routes",
            "codefleet.server.metrics",
        ),
    ),
    (
        "codefleet.transport.routes",
        "the JSON of the engine's answers, written by the routes that answer",
        ("codefleet.transport.answerjson",),
    ),
    (
        "codefleet.cli.app",
        COMMAND,
        (
            "codefleet.cli.operate.limitcmds",
            "codefleet.cli.operate.watch",
            "codefleet.cli.results.reviewcmds",
            "codefleet.cli.results.runs",
            "codefleet.cli.run.fleetcmds",
            "codefleet.cli.run.join",
            "codefleet.cli.run.load",
            "codefleet.cli.run.serve",
            "codefleet.cli.start.demo",
            "codefleet.cli.start.doctor",
            "codefleet.cli.start.init",
            "codefleet.cli.start.plancmds",
        ),
    ),
    (
        "codefleet.cli.app",
        COMMAND_PART,
        (
            "codefleet.cli.run.agentchoice",
            "codefleet.cli.run.fleetrun",
            "codefleet.cli.run.shellopts",
            "codefleet.planning.plansession",
        ),
    ),
    (
        "codefleet.cli.app",
        "`codefleet land`, tested through the command",
        ("codefleet.review.land",),
    ),
    (
        "codefleet.cli.app",
        "the run directory's contents, tested through `codefleet runs` and `--prune`",
        ("codefleet.cli.results.rundirs",),
    ),
    (
        "codefleet.cli.operate.taskcmds",
        "the hint of the next `run` after a failure, tested through the commands that print it",
        ("codefleet.cli.operate.again",),
    ),
    (
        "codefleet.cli.operate.quick",
        "the fast commands' shared I/O, tested through them",
        ("codefleet.cli.operate.quickio",),
    ),
    (
        "codefleet.cli.start.demo_run",
        "a piece of a run the demo drives end to end (the commit series, `--commit`, the Codex runners)",
        (
            "codefleet.review.commitview",
            "codefleet.session.codexagents",
        ),
    ),
    (
        "codefleet.planning.check",
        "the facts `graph check` gathers from the tree, tested through the check",
        ("codefleet.analysis.scopefacts",),
    ),
    (
        "codefleet.api.client",
        "the client's keep-alive pre-write lane, tested through the client",
        ("codefleet.api.lane",),
    ),
    (
        "codefleet.fleet.scripted",
        "the end of a session, tested through the scripted brain's sessions",
        ("codefleet.fleet.reconcile",),
    ),
    (
        "codefleet.session.sdk",
        "the SDK session's conversation, tested through the session",
        ("codefleet.session.conversation",),
    ),
    (
        "codefleet.offlinemodels.anthropicapi",
        "the wire format of the fake model, tested through the fake it serves",
        ("codefleet.offlinemodels.anthropicwire",),
    ),
    (
        "codefleet.offlinemodels.openaiapi",
        "the wire format of the fake model, tested through the fake it serves",
        ("codefleet.offlinemodels.openaiwire",),
    ),
    (
        "codefleet.review.git",
        "the private index's directory, tested through the commits that use it",
        ("codefleet.review.indexdir",),
    ),
    (
        "codefleet.review.report.runreport",
        "the report's landing section, tested through the report",
        ("codefleet.review.report.landingsections",),
    ),
    (
        "codefleet.cli.output",
        "the escaping of untrusted text, tested through the output that shows it",
        ("codefleet.safetext",),
    ),
    (
        "codefleet.ui.dashboardrender",
        "the dashboard's frame shown escaped, tested through its rendering",
        ("codefleet.ui.escaped",),
    ),
    (
        "codefleet.ui.viewmodel",
        "the landing panel's values, tested through the view model that holds them",
        ("codefleet.ui.landingview",),
    ),
    (
        "codefleet.cli.app",
        "whether a found server record is this tree's server, asked before the token is sent "
        "(`integration/test_state_dir.py`)",
        ("codefleet.api.treeserver",),
    ),
)


def exceptions() -> dict[str, tuple[str, str]]:
    """Each module `THROUGH` names: the module it is tested through, and why."""
    return {m: (via, why) for via, why, modules in THROUGH for m in modules}


def module_name(path: Path, src: Path) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def product_modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of the package under `src`, by dotted name."""
    files = sorted(p for p in src.rglob("*.py") if "__pycache__" not in p.parts)
    return {module_name(p, src): p for p in files}


@cache
def source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@cache
def parsed(path: Path) -> ast.Module:
    """A file's AST, parsed once per process (the index's test asks for each file three times)."""
    return ast.parse(source(path))


def has_code(path: Path) -> bool:
    """Whether a module holds more than its docstring and `from __future__` imports."""
    for node in parsed(path).body:
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (docstring or future):
            return True
    return False


def imported(
    tree: ast.Module, modules: dict[str, Path], package: str = "", commands: bool = True
) -> Iterator[str]:
    """The product modules an AST imports, or runs with `-m` (read only when `commands`)."""
    for node in ast.walk(tree) if commands else statements(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in modules or base in modules:
                    yield full if full in modules else base
        elif isinstance(node, ast.List | ast.Tuple):
            yield from _run_with_dash_m(node.elts, modules)


def statements(tree: ast.AST) -> Iterator[ast.AST]:
    """Every statement of a tree, in any block (imports are statements): faster than a full walk."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            stack.extend(getattr(node, block, []))


def imports_of(path: Path, modules: dict[str, Path], package: str = "") -> set[str]:
    """What a file imports or runs; only a file that says `-m` is read for command lines."""
    return set(imported(parsed(path), modules, package, commands="-m" in source(path)))


def _run_with_dash_m(elts: list[ast.expr], modules: dict[str, Path]) -> Iterator[str]:
    words = [e.value if isinstance(e, ast.Constant) else None for e in elts]
    for flag, name in pairwise(words):
        if flag == "-m" and isinstance(name, str):
            run = f"{name}.__main__" if f"{name}.__main__" in modules else name
            if run in modules:
                yield run


def test_files(tests: Path = TESTS) -> list[Path]:
    """Every Python file under `tests`: the tests and their support modules."""
    return sorted(
        p
        for p in tests.rglob("*.py")
        if not {"__pycache__", "node_modules"} & set(p.parts) and p.name != "testindex.py"
    )


@cache
def importers(tests: Path = TESTS, src: Path = SRC) -> dict[str, set[Path]]:
    """For each product module, the test files that import or run it."""
    modules = product_modules(src)
    found: dict[str, set[Path]] = {m: set() for m in modules}
    for path in test_files(tests):
        for module in imports_of(path, modules):
            found[module].add(path)
    return found


@cache
def source_edges(src: Path = SRC) -> dict[str, set[str]]:
    """The product modules each product module imports (with the ones a registry names)."""
    modules = product_modules(src)
    edges = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges[name] = imports_of(path, modules, package) - {name}
        if name in REGISTRIES:
            edges[name] |= _registered(parsed(path), *REGISTRIES[name])
    return edges


def _registered(tree: ast.Module, variable: str, prefix: str) -> set[str]:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == variable for t in targets):
            named = ast.literal_eval(node.value)
            rows = named.values() if isinstance(named, dict) else named
            return {prefix + (row[0] if isinstance(row, tuple) else row) for row in rows}
    return set()  # none: the modules it named are then unreached, and the index's test says so


def reaches(edges: dict[str, set[str]], start: str, target: str) -> bool:
    """Whether importing `start` imports `target`, at once or on a call (function-level imports)."""
    seen, queue = {start}, deque([start])
    while queue:
        for nxt in edges[queue.popleft()] - seen:
            if nxt == target:
                return True
            seen.add(nxt)
            queue.append(nxt)
    return False


def summary_line(path: Path) -> str:
    """A file's docstring's first paragraph, on one line."""
    doc = ast.get_docstring(parsed(path)) or ""
    return " ".join(doc.split("\n\n")[0].split()).replace("|", "\\|")


def tier_key(path: Path, tests: Path = TESTS) -> tuple[int, str]:
    parts = path.relative_to(tests).parts
    tier = parts[0] if len(parts) > 1 else ""
    return (TIERS.index(tier) if tier in TIERS else len(TIERS), path.relative_to(tests).as_posix())


def own_unit_file(module: str, tests: Path = TESTS) -> Path:
    return tests / "unit" / f"test_{module.rpartition('.')[2]}.py"


def module_cell(module: str, files: set[Path], tests: Path = TESTS) -> str:
    """A module's row: its own unit file first (bold), then every other file by tier."""
    if not files:
        via, why = exceptions().get(module, ("", "no test file imports it"))
        return f"none directly; through `{via}`: {why}" if via else why
    own = own_unit_file(module, tests)
    ordered = sorted(files, key=lambda p: (p != own, tier_key(p, tests)))
    names = [p.relative_to(tests).as_posix() for p in ordered]
    return ", ".join(f"**{n}**" if p == own else n for p, n in zip(ordered, names, strict=True))


RULE = f"""# Tests: which files test which module

Generated from what each test file imports, by `{REGENERATE}`
([testindex.py](testindex.py)); `tests/unit/test_test_index.py` fails when this
file is stale. Do not edit it by hand.

- **Where a module's tests are:** its row below. A test file counts for a module
  when it imports it (`import codefleet.x`, or `from codefleet.x import y`, which
  is `codefleet.x.y` when that is a module) or runs it (`python -m codefleet.cli`).
  A module no test file imports says which module it is tested through and why
  (`THROUGH` in `testindex.py`, a short list); every module is one or the other.
- **How test files are named:** for the behaviour they prove, in the tier that
  proves it ([docs/testing.md](../docs/testing.md) says what each tier needs). A
  module's own unit file is `tests/unit/test_<module>.py` when it has one (shown
  first, in bold); no two modules share a file name, so the name is never ambiguous.
- **After adding a test file or a module, or changing what one imports:** run
  `{REGENERATE}` and commit this file with the change.

A module that is only its docstring (most packages' `__init__`) has no row. The
folders are the layers of [docs/architecture.md](../docs/architecture.md#the-layers).
"""


def render(tests: Path = TESTS, src: Path = SRC) -> str:
    """The whole index, as `tests/README.md` holds it."""
    modules = product_modules(src)
    found = importers(tests, src)
    rows = {m: found[m] for m, p in modules.items() if has_code(p)}
    direct = sum(1 for files in rows.values() if files)
    out = [
        RULE,
        f"{len(rows)} modules: {direct} imported by a test file, {len(rows) - direct} "
        "tested through another module.\n",
        "## Modules\n",
    ]
    folders = sorted(
        {m if modules[m].name == "__init__.py" else m.rpartition(".")[0] for m in modules}
    )
    for folder in folders:
        members = sorted(m for m in rows if m == folder or m.rpartition(".")[0] == folder)
        if not members:
            continue
        out.append(f"### `{folder}`\n")
        out.append(f"{summary_line(modules[folder])}\n")
        out.append("| Module | Test files |\n|---|---|")
        out.extend(f"| `{m}` | {module_cell(m, rows[m], tests)} |" for m in members)
        out.append("")
    out.append("## Test files\n")
    out.extend(_file_tables(tests))
    return "\n".join(out)


def _file_tables(tests: Path) -> Iterator[str]:
    by_tier: dict[str, list[Path]] = {}
    for path in sorted(test_files(tests), key=lambda p: tier_key(p, tests)):
        parts = path.relative_to(tests).parts
        by_tier.setdefault(parts[0] if len(parts) > 1 else "", []).append(path)
    for tier, paths in by_tier.items():
        yield f"### `tests/{tier}`\n" if tier else "### `tests/` (shared support)\n"
        yield "| File | What it proves |\n|---|---|"
        for path in paths:
            name = path.relative_to(tests).as_posix()
            yield f"| [{path.name}]({name}) | {summary_line(path)} |"
        yield ""


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        current = INDEX.is_file() and INDEX.read_text(encoding="utf-8") == text
        print(
            "tests/README.md is current" if current else f"tests/README.md is stale: {REGENERATE}"
        )
        return 0 if current else 1
    INDEX.write_text(text, encoding="utf-8")
    print(f"wrote {INDEX.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
