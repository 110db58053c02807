"""The architecture, tested: which package may import what, stated as data.

Each rule names importers by package prefix (every module under it, today's and
tomorrow's), the prefixes they must never import, and why. `imports_of` records
`from X import name` as both `X` and `X.name`, so `from codefleet.coord import
store` counts as an import of `codefleet.coord.storage.store`. Guards check that each
rule still guards something and that the modules meant to cross a seam do.
docs/boundaries.md prints these rules for a newcomer.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "codefleet"
WEB_FRAMEWORKS = ("fastapi", "starlette", "uvicorn", "httpx")
# the store, from the bottom up: the file's upkeep, the connection, the event log, the rows
STORE_MODULES = (
    "codefleet.coord.storage.sqlitefile",
    "codefleet.coord.storage.database",
    "codefleet.coord.storage.eventlog",
    "codefleet.coord.storage.store",
)
# the engine's pieces: handed the parts they write through, never the engine itself
ENGINE_PIECES = (
    "codefleet.coord.calls.arrivals",
    "codefleet.coord.calls.leasewaiting",
    "codefleet.coord.calls.operatorcalls",
    "codefleet.coord.calls.outcomes",
    "codefleet.coord.tables.restores",
    "codefleet.coord.calls.runnercalls",
    "codefleet.coord.calls.takebacks",
    "codefleet.coord.calls.ticks",
)


# the dashboard's view model: frozen values for a frame, the landing panel among them
VIEW_MODEL = ("codefleet.ui.viewmodel", "codefleet.ui.landingview")


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def imports_in(source: str, module: str, *, package: bool = False) -> set[str]:
    """Every module `source` imports, anywhere in it; `from X import n` adds `X` and `X.n`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, package)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def _absolute(node: ast.ImportFrom, module: str, package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if package else module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def imports_of(path: Path) -> set[str]:
    return imports_in(path.read_text(), module_name(path), package=path.name == "__init__.py")


PATHS = {module_name(p): p for p in SRC.rglob("*.py")}
MODULES = {name: imports_of(path) for name, path in PATHS.items()}


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def modules_under(prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in MODULES if any(under(m, p) for p in prefixes))


def importers_of(prefix: str) -> set[str]:
    return {name for name, imported in MODULES.items() if any(under(i, prefix) for i in imported)}


class Rule(NamedTuple):
    importers: tuple[str, ...]  # package prefixes the rule binds
    forbidden: tuple[str, ...]  # prefixes they must never import
    why: str
    allowed: tuple[str, ...] = ()  # prefixes exempt from `forbidden`, each explained in `why`


RULES = [
    Rule(
        ("codefleet.fleet", "codefleet.session"),
        ("codefleet.coord", "codefleet.server"),
        "the runner side never imports the server's brain: the wire (api.client) is the only bridge",
    ),
    Rule(
        ("codefleet.coord",),
        ("codefleet.fleet", "codefleet.session"),
        "the server's brain never imports the runner side: the wire is the only bridge",
    ),
    Rule(
        ("codefleet.coord",),
        (*WEB_FRAMEWORKS, "codefleet.server", "codefleet.transport", "codefleet.cli"),
        "the engine knows no web framework and no command line: server/, transport/ and cli/ "
        "adapt it",
    ),
    Rule(
        ("codefleet.server", "codefleet.transport"),
        STORE_MODULES,
        "the server reads the engine's record through its read-only interface (coord.engineview) or "
        "the read model, and opens and closes it through coord.opening: no store object in the "
        "HTTP layer",
    ),
    Rule(
        ("codefleet.server.front",),
        ("codefleet.transport", "codefleet.server", "codefleet.coord"),
        "the front knows the fast path only by its one interface (front.Shortcut): not its "
        "route table, its headers or the engine; the app factory wires transport.fastpath in. "
        "Of the server it uses the guards alone",
        allowed=("codefleet.transport.guards",),
    ),
    Rule(
        ("codefleet.api", "codefleet.hook", "codefleet.fleet", "codefleet.session"),
        ("codefleet.transport",),
        "the client side shares only the standard-library HTTP codec (api.http1) and its "
        "blocking client (api.blockingclient); the rest of transport/ is the server's",
        allowed=("codefleet.api.http1", "codefleet.api.blockingclient"),
    ),
    Rule(
        ("codefleet.fleet",),
        ("codefleet.session", "codefleet.cli"),
        "the runner side runs any Executor it is handed: which agents a fleet runs (real "
        "sessions, the offline model, a script) is command-line wiring, in cli.run.agentchoice",
    ),
    Rule(
        ("codefleet.dag",),
        ("codefleet",),
        "the DAG helpers sit below the graph loader (api.graphfile) and planning: pure functions "
        "over a mapping, importing no other module of codefleet",
    ),
    Rule(
        ("codefleet.api",),
        (
            "codefleet.planning",
            "codefleet.coord",
            "codefleet.server",
            "codefleet.fleet",
            "codefleet.session",
            "codefleet.cli",
            "codefleet.ui",
            "codefleet.review",
        ),
        "the wire is below everything that uses it: the graph loader checks cycles with the "
        "DAG helpers below both it and planning (codefleet.dag), never planning itself",
    ),
    Rule(
        ("codefleet.api.graphfile", "codefleet.planning"),
        ("codefleet.coord", "codefleet.server"),
        "the graph loader and `graph check` run with no server; the one exception is the pure "
        "scheduler, which the simulation plays so it predicts with the real policy",
        allowed=("codefleet.coord.policy.scheduler",),
    ),
    Rule(
        ("codefleet.ui", "codefleet.review", "codefleet.cli"),
        ("codefleet.coord",),
        "dashboards, review and the CLI read the server through api.client, never its brain",
    ),
    Rule(
        ("codefleet.attempt",),
        (
            *WEB_FRAMEWORKS,
            "pydantic",
            "codefleet.api",
            "codefleet.coord",
            "codefleet.server",
            "codefleet.fleet",
            "codefleet.session",
        ),
        "an attempt's records are shared by the runner and the server: standard library only, "
        "serialized at the wire (pydantic validates there, in api.wire)",
    ),
    Rule(
        ("codefleet.readmodel",),
        (*WEB_FRAMEWORKS, "codefleet.coord", "codefleet.server", "codefleet.cli"),
        "the read model is fed only by the engine's typed read-only interface (coord.engineview) "
        "and derives `runnable` from the engine's own rule (coord.policy.readiness): no store, no "
        "engine, no web framework",
        allowed=("codefleet.coord.engineview", "codefleet.coord.policy.readiness"),
    ),
    Rule(
        ("codefleet.coord",),
        ("codefleet.readmodel",),
        "the engine does not know what the reads say: the read model depends on it, never back",
    ),
    Rule(
        ("codefleet.review.report.reportblocks", "codefleet.review.report.reportrender"),
        ("codefleet",),
        "the report's blocks and their renderer know nothing of a run: the section builders "
        "fill the blocks from the facts, the renderer draws whatever blocks it is handed "
        "(showing their text escaped, by codefleet.safetext, which knows no run either)",
        allowed=("codefleet.review.report.reportblocks", "codefleet.safetext"),
    ),
    Rule(
        (
            "codefleet.coord.storage.sqlitefile",
            "codefleet.coord.storage.database",
            "codefleet.coord.storage.eventlog",
        ),
        ("codefleet.coord",),
        "below the rows: the file's upkeep, the connection and the event log know no table's "
        "rows (coord.storage.store) and no part of the engine; they use only the statements, the held "
        "updates, the JSON text and the layers below them",
        allowed=(
            "codefleet.coord.storage.queries",
            "codefleet.coord.storage.held",
            "codefleet.coord.storage.jsontext",
            "codefleet.coord.storage.sqlitefile",
            "codefleet.coord.storage.database",
        ),
    ),
    Rule(
        ENGINE_PIECES,
        ("codefleet.coord.engine", "codefleet.coord.opening", "codefleet.coord.engineview"),
        "a piece of the engine is handed the parts it writes through (coord.calls.callparts) and the "
        "engine's `transition` and `kick`, never the engine (docs/decisions/0066-the-engine-is-parts-not-mixins.md, \"The engine is "
        'parts, not mixins")',
    ),
    Rule(
        ("codefleet.coord.policy.scheduler",),
        ("sqlite3", "asyncio", "time", "codefleet.coord", "codefleet.server", *WEB_FRAMEWORKS),
        "the scheduler is a pure function: no I/O, no clock, no database, no engine",
    ),
    Rule(
        VIEW_MODEL,
        ("rich", "codefleet.ui"),
        "the dashboard's view model is values, not drawing: a frame is built (and tested) "
        "without Rich, and ui.dashboardrender alone draws it; the rest of ui/ renders too, "
        "so the view model imports none of it",
        allowed=VIEW_MODEL,
    ),
]

# `codefleet hook` runs on every write of a person's session: standard library only (the part
# mappers' parser, tree-sitter, aside: the gate maps parts in the runner, never in the hook).
PARSER = "tree_sitter"
HOOK_SIDE = (
    "codefleet.hook",
    "codefleet.parts",
    "codefleet.toolcalls",
    "codefleet.paths",
    "codefleet.statedir",
    "codefleet.models",
    "codefleet.api.http1",
    "codefleet.api.blockingclient",
)
# The commands a person types while a fleet runs (`cli.operate.quick`): standard library only too.
QUICK_SIDE = (
    *HOOK_SIDE,
    "codefleet.cli.operate.quick",
    "codefleet.cli.operate.quickio",
    "codefleet.cli.operate.quicktable",
    "codefleet.safetext",
    "codefleet.treelock",
    "codefleet.mountpaths",
    "codefleet.api.treeserver",
)

# (library, the only modules allowed to import it, why)
EXCLUSIVE = [
    (
        "httpx",
        {"codefleet.api.client"},
        "one HTTP client of the wire API: base URL, epoch header, error decoding live there only",
    ),
    ("sqlite3", set(STORE_MODULES), "only the store's modules speak SQL"),
    (
        "uvicorn",
        {"codefleet.transport.uvicorn_internals"},
        "uvicorn's internals are used in one module, beside its pin (UVICORN_PIN) and the "
        "byte-for-byte test (tests/unit/test_uvicorn_internals.py)",
    ),
    (
        "claude_agent_sdk",
        {
            "codefleet.session.sdk",
            "codefleet.session.attempthooks",
            "codefleet.session.clistream",
            "codefleet.session.readonly",
            "codefleet.session.conversation",
        },
        "only the session package's fleet and read-only sessions (with the fleet session's "
        "hooks and stream reader, and the multi-turn conversation they run in) touch the SDK; "
        "everything else runs without it",
    ),
    (
        "openai_codex",
        {"codefleet.session.codex"},
        "only the session package's Codex executor touches the Codex SDK; everything else "
        "(the runner, the hook bridge, the server) runs without it",
    ),
    (
        "tree_sitter",
        {"codefleet.parts.grammars", "codefleet.parts.treesitter"},
        "tree-sitter is reached in two places: parts.grammars loads the pinned grammars, "
        "parts.treesitter parses; the language modules read its nodes through the latter",
    ),
    (
        "codex_cli_bin",
        set(),
        "the Codex CLI runtime is the SDK's to find (CodexConfig.codex_bin stays unset)",
    ),
]

# (module, an import it must make, why): the seams the rules above leave open, really used.
REQUIRED = [
    ("codefleet.fleet.runner", "codefleet.api.client", "the runner reaches the server by wire"),
    (
        "codefleet.analysis.simulate",
        "codefleet.coord.policy.scheduler",
        "graph check predicts parallelism with scheduler.schedule, not a second implementation",
    ),
    ("codefleet.hook.command", "codefleet.paths", "the hook canonicalizes with TreeRoot"),
    (
        "codefleet.fleet.gate.prewrite",
        "codefleet.paths",
        "the runner's gate shares the path function",
    ),
    (
        "codefleet.hook.command",
        "codefleet.toolcalls.writepaths",
        "paths and denials from toolcalls.writepaths",
    ),
    (
        "codefleet.fleet.gate.prewrite",
        "codefleet.toolcalls.writepaths",
        "paths and denials from toolcalls.writepaths",
    ),
    (
        "codefleet.session.attempthooks",
        "codefleet.toolcalls.writepaths",
        "paths and denials from toolcalls.writepaths",
    ),
    (
        "codefleet.session.codex",
        "codefleet.toolcalls.writepaths",
        "patch targets and denials from toolcalls.writepaths",
    ),
    (
        "codefleet.fleet.gate.codexbridge",
        "codefleet.toolcalls.writepaths",
        "the bridge's denial is THE denial",
    ),
    ("codefleet.server.httpapp", "codefleet.coord.engine", "routes call the engine"),
    (
        "codefleet.server.httpapp",
        "codefleet.readmodel.readapi",
        "read routes answer from the read model",
    ),
    (
        "codefleet.readmodel.readapi",
        "codefleet.coord.engineview",
        "the read model reads the engine there",
    ),
    (
        "codefleet.readmodel.wirerows",
        "codefleet.coord.policy.readiness",
        "`runnable` is the engine's own readiness rule, not a copy",
    ),
    (
        "codefleet.readmodel.projection",
        "codefleet.coord.policy.readiness",
        "`runnable` is the engine's own readiness rule, not a copy",
    ),
    (
        "codefleet.coord.tables.liveindex",
        "codefleet.coord.policy.readiness",
        "the live index files tasks by the same rule the reads use",
    ),
    (
        "codefleet.cli.run.fleetcmds",
        "codefleet.api.client",
        "the CLI reads the server through the client",
    ),
    ("codefleet.api.lane", "codefleet.api.http1", "the lane speaks the shared HTTP codec"),
    (
        "codefleet.hook.command",
        "codefleet.api.blockingclient",
        "the hook sends its requests with the shared blocking client, keeping only its policy",
    ),
    (
        "codefleet.api.blockingclient",
        "codefleet.api.http1",
        "the blocking client speaks the shared HTTP codec",
    ),
    (
        "codefleet.cli.operate.quickio",
        "codefleet.api.blockingclient",
        "the fast commands send their requests with the shared blocking client",
    ),
    (
        "codefleet.api.graphfile",
        "codefleet.dag",
        "the graph loader finds cycles with the DAG helpers",
    ),
    (
        "codefleet.server.httpapp",
        "codefleet.transport.fastpath",
        "the app factory wires the fast path",
    ),
    (
        "codefleet.transport.fastpath",
        "codefleet.transport.routes",
        "the fast path's table is compiled from the one route table",
    ),
    ("codefleet.server.httpapp", "codefleet.coord.opening", "the app opens the engine there"),
]


def crossings(rule: Rule, imported: set[str]) -> list[str]:
    """The imports in `imported` that `rule` forbids."""
    return sorted(
        i
        for i in imported
        if any(under(i, f) for f in rule.forbidden) and not any(under(i, a) for a in rule.allowed)
    )


def _rule_id(rule: Rule) -> str:
    return f"{'+'.join(rule.importers)}-not-{'+'.join(rule.forbidden[:2])}"


@pytest.mark.parametrize("rule", RULES, ids=[_rule_id(r) for r in RULES])
def test_no_module_of_a_package_crosses_its_boundary(rule: Rule) -> None:
    bound = modules_under(rule.importers)
    assert bound, f"guard: no module under {rule.importers}; update this rule"
    crossed = {m: crossings(rule, MODULES[m]) for m in bound}
    crossed = {m: c for m, c in crossed.items() if c}
    assert not crossed, f"{crossed}: {rule.why}"


def test_the_hook_side_imports_only_the_standard_library_and_itself() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    bound = modules_under(HOOK_SIDE)
    assert "codefleet.hook.command" in bound, "guard: the hook moved; update HOOK_SIDE"
    heavy = {
        m: sorted(
            i
            for i in MODULES[m]
            if i.split(".")[0] not in stdlib
            and not any(under(i, p) for p in HOOK_SIDE)
            and not (under(m, "codefleet.parts") and under(i, PARSER))
        )
        for m in bound
    }
    heavy = {m: found for m, found in heavy.items() if found}
    assert not heavy, (
        f"{heavy}: `codefleet hook` runs on every write of a person's session: standard library only"
    )


def test_the_hook_never_reaches_the_part_mappers_parser() -> None:
    reached, todo = set(), ["codefleet.hook.command"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += [i for i in MODULES[module] if i in PATHS]
    assert "codefleet.paths" in reached, "guard: the hook's imports moved; update this"
    parsing = sorted(m for m in reached if any(under(i, PARSER) for i in MODULES[m]))
    assert parsing == [], (
        f"the hook reaches tree-sitter through {parsing}: it maps no parts (the runner's gate "
        "does), and it runs on every write of a person's session"
    )


def test_the_fast_commands_import_only_the_standard_library_and_the_hook_side() -> None:
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    bound = modules_under(QUICK_SIDE[len(HOOK_SIDE) :])
    assert "codefleet.cli.operate.quick" in bound, (
        "guard: the fast commands moved; update QUICK_SIDE"
    )
    heavy = {
        m: sorted(
            i
            for i in MODULES[m]
            if i.split(".")[0] not in stdlib and not any(under(i, p) for p in QUICK_SIDE)
        )
        for m in bound
    }
    heavy = {m: found for m, found in heavy.items() if found}
    assert not heavy, f"{heavy}: the fleet-time commands start fast: standard library only"


def test_nothing_the_view_model_imports_reaches_rich() -> None:
    reached, todo = set(), list(VIEW_MODEL)
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += [i for i in MODULES[module] if i in PATHS]
    assert "codefleet.wording" in reached, "guard: the view model's imports moved; update this"
    drawing = sorted(m for m in reached if any(under(i, "rich") for i in MODULES[m]))
    assert drawing == [], f"the view model reaches Rich through {drawing}: it is values only"


@pytest.mark.parametrize(("library", "allowed", "why"), EXCLUSIVE, ids=[e[0] for e in EXCLUSIVE])
def test_only_the_owning_module_imports_the_library(
    library: str, allowed: set[str], why: str
) -> None:
    importers = importers_of(library)
    assert importers <= allowed, f"{sorted(importers - allowed)} import {library}: {why}"
    assert importers == allowed, f"guard: {sorted(allowed)} should import {library} (did it move?)"


@pytest.mark.parametrize(("module", "needed", "why"), REQUIRED, ids=[r[0] for r in REQUIRED])
def test_a_seam_the_rules_leave_open_is_really_used(module: str, needed: str, why: str) -> None:
    assert module in MODULES, f"guard: {module} no longer exists; update REQUIRED"
    assert any(under(i, needed) for i in MODULES[module]), f"{module} should import {needed}: {why}"


def test_importing_a_module_by_its_package_is_caught_as_importing_the_module() -> None:
    runner_rule = RULES[0]
    imported = imports_in(
        "from codefleet.coord.storage import store\n", "codefleet.fleet.synthetic"
    )
    assert crossings(runner_rule, imported) == [
        "codefleet.coord.storage",
        "codefleet.coord.storage.store",
    ]
    relative = imports_in("from ..coord.storage import store\n", "codefleet.fleet.synthetic")
    assert "codefleet.coord.storage.store" in relative
    lazy = imports_in("def f():\n    from codefleet import coord\n", "codefleet.ui.synthetic")
    assert crossings(RULES[4], lazy) == ["codefleet.coord"]


def test_graph_check_loads_without_the_engine_the_server_or_the_sdk() -> None:
    code = (
        # what the `graph check` and `plan` commands import when they run (cli.start.plancmds imports
        # them inside the commands, so that --help stays light)
        "import sys, codefleet.cli.start.plancmds, codefleet.api.graphfile, codefleet.planning.check, "
        "codefleet.planning.analysistext, codefleet.planning.plansession, codefleet.planning.planner; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('codefleet', 'claude')))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    banned = (
        "codefleet.coord.engine",
        "codefleet.server.httpapp",
        "codefleet.coord.storage.store",
        "codefleet.coord.tables.liveindex",
        "claude_agent_sdk",
    )
    assert "codefleet.planning.check" in loaded, "guard: the probe imported nothing"
    assert "codefleet.planning.plansession" in loaded, "guard: the plan command is registered there"
    assert [m for m in loaded if m.startswith(banned)] == []


# -- routes change state only through the engine (STYLE §2) ---------------------------------

SERVER = ("codefleet.server",)

# server modules that may import the store module at all, and why: none. The app factory opens
# and closes the engine through coord.opening; /checks, /events and the SSE stream read through
# the engine's read-only interface (coord.engineview.EngineReads).
STORE_IMPORTERS: dict[str, str] = {}

# server modules that may reach `engine.store` at all (reads only, checked below), and why: none
STORE_REACHERS: dict[str, str] = {}

# (server module, engine attribute it may set, why): wiring in the app factory, not state
ENGINE_WIRING = {("codefleet.server.httpapp", "deaf_seconds")}


def store_classes() -> list[ast.ClassDef]:
    """`Store` and the classes it is built on (`EventLog`, `Database`), from the store modules."""
    classes = {
        n.name: n
        for module in STORE_MODULES
        for n in _source(module).body
        if isinstance(n, ast.ClassDef)
    }
    found, names = [], ["Store"]
    while names:
        cls = classes[names.pop()]
        found.append(cls)
        names += [b.id for b in cls.bases if isinstance(b, ast.Name) and b.id in classes]
    return found


def store_writes() -> set[str]:
    """The public `Store` methods that write: their body writes SQL or opens a transaction."""
    writes = {"transaction"}
    methods = [m for cls in store_classes() for m in cls.body]
    for method in methods:
        if not isinstance(method, ast.FunctionDef) or method.name.startswith("_"):
            continue
        called = {
            n.func.attr
            for n in ast.walk(method)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        }
        if called & {"_write", "_hold", "executemany", "transaction"}:
            writes.add(method.name)
    return writes


def _source(module: str) -> ast.Module:
    return ast.parse(PATHS[module].read_text())


def _reaches_store(node: ast.expr) -> bool:
    """`x.store`, `self.engine.store` or a local named `store`."""
    return (isinstance(node, ast.Attribute) and node.attr == "store") or (
        isinstance(node, ast.Name) and node.id == "store"
    )


def _reaches_engine(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute) and node.attr == "engine":
            return True
        node = node.value
    return isinstance(node, ast.Name) and node.id == "engine"


def store_write_calls(tree: ast.Module, writes: set[str]) -> list[str]:
    return sorted(
        f"line {n.lineno}: .{n.func.attr}()"
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in writes
        and _reaches_store(n.func.value)
    )


def engine_mutations(tree: ast.Module) -> list[tuple[int, str]]:
    """Assignments into the engine's attributes, and reads of its private ones."""
    found: list[tuple[int, str]] = []
    for n in ast.walk(tree):
        targets = n.targets if isinstance(n, ast.Assign | ast.Delete) else []
        if isinstance(n, ast.AugAssign | ast.AnnAssign):
            targets = [n.target]
        for t in targets:
            if isinstance(t, ast.Attribute | ast.Subscript) and _reaches_engine(t.value):
                found.append((t.lineno, t.attr if isinstance(t, ast.Attribute) else "[...]"))
        if isinstance(n, ast.Attribute) and n.attr.startswith("_") and _reaches_engine(n.value):
            found.append((n.lineno, n.attr))
    return found


def test_the_store_writes_are_found() -> None:
    assert [c.name for c in store_classes()] == ["Store", "EventLog", "Database"], (
        "guard: the store's classes moved; update store_classes()"
    )
    assert {"emit", "update_task", "insert_tasks", "insert_lease", "reset", "transaction"} <= (
        store_writes()
    ), "guard: store_writes() no longer recognises how the store writes"
    assert "events" not in store_writes() and "tasks" not in store_writes()


@pytest.mark.parametrize("module", modules_under(SERVER))
def test_routes_change_state_only_through_the_engine(module: str) -> None:
    tree = _source(module)
    why = "route handlers change task or agent state only through the engine (STYLE §2)"
    assert store_write_calls(tree, store_writes()) == [], f"{module} writes the store: {why}"
    mutations = {
        (line, a) for line, a in engine_mutations(tree) if (module, a) not in ENGINE_WIRING
    }
    assert not mutations, f"{module} sets or reaches into engine state {sorted(mutations)}: {why}"
    reaches = any(isinstance(n, ast.Attribute) and n.attr == "store" for n in ast.walk(tree))
    reads_why = (
        "the server reads through coord.engineview.EngineReads and opens through coord.opening"
    )
    assert not reaches or module in STORE_REACHERS, f"{module} reaches engine.store: {reads_why}"
    if any(under(i, m) for i in MODULES[module] for m in STORE_MODULES):
        assert module in STORE_IMPORTERS, f"{module} imports the store: {reads_why}"


def test_a_route_that_writes_the_store_or_pokes_the_engine_is_caught() -> None:
    handler = ast.parse(
        "def route(engine):\n"
        "    engine.store.update_task('t1', status='done')\n"
        "    store = engine.store\n"
        "    store.emit('x')\n"
        "    engine.index.live['t1'] = None\n"
        "    engine._kick()\n"
    )
    assert store_write_calls(handler, store_writes()) == [
        "line 2: .update_task()",
        "line 4: .emit()",
    ]
    assert sorted(engine_mutations(handler)) == [(5, "[...]"), (6, "_kick")]


# -- one way into the engine (docs/decisions/0142-one-way-into-the-engine.md) ---------------


def pass_through_forwards(cls: ast.ClassDef) -> list[str]:
    """Methods whose one statement (a docstring aside) returns, awaits or calls
    `self.<part>.<name>`: a second way in beside the calls object it forwards to."""
    found = []
    for f in cls.body:
        if not isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = [
            s for s in f.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        ]
        value = (
            body[0].value if len(body) == 1 and isinstance(body[0], ast.Return | ast.Expr) else None
        )
        if isinstance(value, ast.Await):
            value = value.value
        if isinstance(value, ast.Call):
            value = value.func
        if (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Attribute)
            and isinstance(value.value.value, ast.Name)
            and value.value.value.id == "self"
        ):
            found.append(f.name)
    return found


def test_the_engine_holds_no_pass_through_forwards() -> None:
    engine = next(
        n
        for n in _source("codefleet.coord.engine").body
        if isinstance(n, ast.ClassDef) and n.name == "Engine"
    )
    assert pass_through_forwards(engine) == [], (
        "a route calls the calls object by name (`engine.runner.acquire(...)`), not a forward"
    )


def test_a_pass_through_forward_is_caught() -> None:
    (cls,) = ast.parse(
        "class Engine:\n"
        "    def acquire(self, a):\n"
        "        'doc'\n"
        "        return self.runner.acquire(a)\n"
        "    async def wait(self):\n"
        "        return await self.runner.wait()\n"
        "    def transition(self):\n"
        "        with self.store.transaction():\n"
        "            yield\n"
    ).body
    assert isinstance(cls, ast.ClassDef)
    assert pass_through_forwards(cls) == ["acquire", "wait"]


# the engine's calls and tables write in the engine's `transition`, which they are handed; the
# store's own transaction is opened only by the engine (and the server-is-up mark of the tick)
OWN_TRANSACTION = {"codefleet.coord.engine", "codefleet.coord.tables.recovery"}


@pytest.mark.parametrize(
    "module",
    [
        m
        for m in modules_under(("codefleet.coord.calls", "codefleet.coord.tables"))
        if m not in OWN_TRANSACTION
    ],
)
def test_calls_and_tables_write_in_the_engines_transition(module: str) -> None:
    opened = [
        n.lineno
        for n in ast.walk(_source(module))
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "transaction"
        and _reaches_store(n.func.value)
    ]
    assert not opened, f"{module} opens the store's transaction (lines {opened}): use `transition`"


def test_the_store_importers_in_the_server_are_real() -> None:
    stale = {
        m for m in STORE_IMPORTERS if "codefleet.coord.storage.store" not in MODULES.get(m, set())
    }
    assert not stale, f"guard: {sorted(stale)} no longer import the store; drop the allowance"


# -- one shell runner -------------------------------------------------------------------------

SHELL_SPAWNERS = {"codefleet.fleet.views.shell"}  # checks and `run --verify` both go through it


def shell_spawns(tree: ast.Module) -> list[int]:
    """Lines that start a shell: `create_subprocess_shell`, `shell=True`, `os.system`/`popen`."""
    lines = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
        shell_kw = any(
            k.arg == "shell" and not (isinstance(k.value, ast.Constant) and not k.value.value)
            for k in n.keywords
        )
        if name == "create_subprocess_shell" or shell_kw or name in {"system", "popen"}:
            lines.append(n.lineno)
    return lines


def test_one_shell_runner_runs_every_check_and_verify_command() -> None:
    spawners = {m for m in MODULES if shell_spawns(_source(m))}
    assert spawners == SHELL_SPAWNERS, (
        f"{sorted(spawners - SHELL_SPAWNERS)} start a shell of their own: run it through "
        "fleet.views.shell.run_command (own process group, time limit, output cap, scrubbed env)"
    )
    assert shell_spawns(ast.parse("subprocess.run('make', shell=True)\nos.system('x')\n")) == [1, 2]


# -- the read model's one door (docs/decisions/0097-the-read-models-room.md, "The read model's room") ---------------------


def test_no_store_object_crosses_the_engines_read_interface() -> None:
    tree = _source("codefleet.coord.engineview")
    door = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "EngineReads")
    public = [n for n in door.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    assert any(m.name == "open_reader" for m in public), "guard: EngineReads moved; update this"
    leaks = {
        m.name: ast.unparse(m.returns)
        for m in public
        if m.returns is not None and "Store" in ast.unparse(m.returns)
    }
    assert leaks == {}, (
        "the read model gets plain rows, frozen views and a read-only SnapshotReader; a Store "
        "handed across would let a read write"
    )


# -- the floors: no import runs up, no circle (issue 41) ------------------------------------------
# Every module belongs to its folder (`codefleet.coord.tables.leases` to `codefleet.coord.tables`;
# `codefleet` itself is the folder of the top-level modules). Each folder stands on one floor;
# a module imports only folders on lower floors, or its own folder: never a folder above it,
# never a neighbour on its own floor. docs/architecture.md draws these floors.
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    (
        "the parts of a file: one mapper per kind, standard library and tree-sitter",
        ("codefleet.parts",),
    ),
    ("the foundation: shared values and pure rules", ("codefleet", "codefleet.toolcalls")),
    (
        "the wire, the store, the engine's pure policy, the offline models",
        (
            "codefleet.api",
            "codefleet.coord.storage",
            "codefleet.coord.policy",
            "codefleet.offlinemodels",
        ),
    ),
    (
        "the engine's tables, the graph's analysis, the runner's gate, the command line's shared parts",
        (
            "codefleet.coord.tables",
            "codefleet.analysis",
            "codefleet.fleet.gate",
            "codefleet.cli",
            "codefleet.testing",
        ),
    ),
    (
        "the engine's calls; where a runner's command or check runs",
        ("codefleet.coord.calls", "codefleet.fleet.views"),
    ),
    (
        "the engine's front door; an attempt's tools; reading a run's record",
        ("codefleet.coord", "codefleet.fleet.tools", "codefleet.review"),
    ),
    (
        "the runner; the read model; the transport; the run report",
        (
            "codefleet.fleet",
            "codefleet.readmodel",
            "codefleet.transport",
            "codefleet.review.report",
        ),
    ),
    (
        "the hook; the HTTP surface; the views for a person",
        ("codefleet.hook", "codefleet.server", "codefleet.ui"),
    ),
    (
        "the agents' sessions; the commands during and after a run",
        ("codefleet.session", "codefleet.cli.operate", "codefleet.cli.results"),
    ),
    ("planning; the commands that run a fleet", ("codefleet.planning", "codefleet.cli.run")),
    ("the commands before a run", ("codefleet.cli.start",)),
]
# The executables' entry points stand above every floor: the only modules that import every area
# of the command line (`cli.launch` picks a fast path first). `cli.app` names the command modules
# in a table and imports one only when its command runs: it stands on the command line's floor.
ENTRY_POINTS = (
    "codefleet.__main__",
    "codefleet.cli.__main__",
    "codefleet.cli.launch",
)
FLOOR_OF = {folder: n for n, (_, folders) in enumerate(FLOORS, start=1) for folder in folders}
TOP_FLOOR = len(FLOORS) + 1


def folder_of(module: str) -> str:
    """A module's folder: its package (a package's `__init__` is its own folder)."""
    return module if PATHS[module].name == "__init__.py" else module.rpartition(".")[0]


def floor_of(module: str) -> int:
    return TOP_FLOOR if module in ENTRY_POINTS else FLOOR_OF[folder_of(module)]


def module_edges(module: str) -> set[str]:
    """The codefleet modules `module` imports: `from pkg import mod` is `pkg.mod`, not `pkg`."""
    imported = MODULES[module]
    found = {i for i in imported if i in PATHS}
    packages_only_for_modules = {
        i for i in found if any(j.startswith(i + ".") and j in PATHS for j in imported)
    }
    named = {i for i in found - packages_only_for_modules}
    return named - {module}


def uphill(edges: dict[str, set[str]]) -> list[str]:
    """Each import that runs up a floor or sideways to a neighbour on the same floor."""
    found = []
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            if floor_of(target) > floor_of(module) or (
                floor_of(target) == floor_of(module)
                and folder_of(target) != folder_of(module)
                and module not in ENTRY_POINTS
            ):
                found.append(
                    f"{module} (floor {floor_of(module)}) -> {target} (floor {floor_of(target)})"
                )
    return found


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


EDGES = {module: module_edges(module) for module in PATHS}


def test_every_folder_stands_on_one_floor() -> None:
    folders = {folder_of(m) for m in PATHS if m not in ENTRY_POINTS}
    assert folders - set(FLOOR_OF) == set(), "a new folder: give it a floor in FLOORS"
    assert set(FLOOR_OF) - folders == set(), "FLOORS names a folder that no longer exists"


def test_no_import_runs_up_a_floor_or_across_to_a_neighbour() -> None:
    assert uphill(EDGES) == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert circles(EDGES) == []


def test_an_import_up_or_a_circle_is_caught() -> None:
    up = {"codefleet.coord.policy.scheduler": {"codefleet.coord.engine"}}
    assert uphill(up) == [
        "codefleet.coord.policy.scheduler (floor 3) -> codefleet.coord.engine (floor 6)"
    ]
    sideways = {"codefleet.coord.policy.scheduler": {"codefleet.coord.storage.store"}}
    assert len(uphill(sideways)) == 1
    assert uphill({"codefleet.coord.tables.leases": {"codefleet.coord.tables.preimages"}}) == []
    loop = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(loop) == [["a", "b", "c"]]


def test_a_folder_holds_at_most_fifteen_modules_of_its_own() -> None:
    own: dict[str, int] = {}
    for module, path in PATHS.items():
        if path.name not in ("__init__.py", "__main__.py"):
            own[folder_of(module)] = own.get(folder_of(module), 0) + 1
    assert {f: n for f, n in own.items() if n > 15} == {}


def test_no_two_modules_share_a_file_name() -> None:
    seen: dict[str, list[str]] = {}
    for module, path in PATHS.items():
        if path.name not in ("__init__.py", "__main__.py"):
            seen.setdefault(path.name, []).append(module)
    assert {name: mods for name, mods in seen.items() if len(mods) > 1} == {}


# -- the shipped fakes: reached only through the offline seams -------------------------------------
# (module, why it may import the scripted model APIs)
OFFLINE_SEAMS = {
    "codefleet.session.offline": "`--offline`: Claude Code sessions against the scripted model",
    "codefleet.session.codexagents": "an offline Codex runner on the same shared scripted model",
    "codefleet.planning.plansession": "`plan --offline`: the planning session against the scripted model",
}


def test_product_code_reaches_the_offline_models_only_through_the_offline_seams() -> None:
    reaching = {
        m
        for m in PATHS
        if not under(m, "codefleet.offlinemodels")
        and any(under(i, "codefleet.offlinemodels") for i in MODULES[m])
    }
    assert reaching == set(OFFLINE_SEAMS), (
        "the scripted models are the offline mode's, not the product's"
    )
