"""The architecture, tested: which module may import what, stated as data."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "codefleet"


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


MODULES = {module_name(p): imports_of(p) for p in SRC.rglob("*.py")}


def importers_of(prefix: str) -> set[str]:
    return {
        name
        for name, imported in MODULES.items()
        if any(i == prefix or i.startswith(prefix + ".") for i in imported)
    }


# (library, the only modules allowed to import it, why)
EXCLUSIVE = [
    (
        "httpx",
        {"codefleet.api.client"},
        "one HTTP client of the wire API: base URL, epoch header, error decoding live there only",
    ),
    ("sqlite3", {"codefleet.coord.store"}, "only the store speaks SQL"),
    (
        "claude_agent_sdk",
        {"codefleet.session.sdk"},
        "only the session module touches the SDK; everything else runs without it",
    ),
]

SERVER_BRAIN = {
    "codefleet.coord.engine", "codefleet.coord.graph", "codefleet.coord.agents",
    "codefleet.coord.checks", "codefleet.coord.files", "codefleet.server.app", "codefleet.coord.store",
    "codefleet.coord.index", "claude_agent_sdk",
}  # fmt: skip

HEAVY_FOR_THE_HOOK = {
    "fastapi", "starlette", "uvicorn", "pydantic", "pydantic_settings", "rich", "typer", "httpx",
    "yaml", "claude_agent_sdk", "sortedcontainers", "codefleet.api.client", "codefleet.config",
    "codefleet.cli.common", "codefleet.coord.engine", "codefleet.coord.store",
}  # fmt: skip

# (module, imports it must never make, why)
FORBIDDEN = [
    (
        "codefleet.fleet.runner",
        {
            "codefleet.coord.store",
            "codefleet.coord.scheduler",
            "codefleet.coord.engine",
            "codefleet.coord.index",
        },
        "runners are thin: all policy lives server-side",
    ),
    (
        "codefleet.coord.scheduler",
        {
            "sqlite3",
            "asyncio",
            "time",
            "codefleet.coord.store",
            "codefleet.coord.engine",
            "httpx",
            "fastapi",
        },
        "the scheduler is a pure function: no I/O, no clock, no database",
    ),
    (
        "codefleet.coord.engine",
        {"fastapi", "starlette", "uvicorn", "httpx"},
        "the engine knows no web framework",
    ),
    (
        "codefleet.coord.agents",
        {"fastapi", "starlette", "uvicorn", "httpx"},
        "the engine knows no web framework",
    ),
    (
        "codefleet.coord.graph",
        {"fastapi", "starlette", "uvicorn", "httpx"},
        "the engine knows no web framework",
    ),
    (
        "codefleet.coord.checks",
        {"fastapi", "starlette", "uvicorn", "httpx"},
        "the engine knows no web framework",
    ),
    *[
        (
            module,
            SERVER_BRAIN,
            "the graph loader and `graph check` run with no server: they never import its brain",
        )
        for module in (
            "codefleet.api.graph",
            "codefleet.planning.analysis",
            "codefleet.planning.answer",
            "codefleet.planning.check",
            "codefleet.planning.dag",
            "codefleet.planning.planner",
            "codefleet.planning.prompt",
            "codefleet.planning.render",
            "codefleet.planning.scopes",
            "codefleet.planning.simulate",
        )
    ],
    (
        "codefleet.fleet.checks",
        {
            "codefleet.coord.store",
            "codefleet.coord.scheduler",
            "codefleet.coord.engine",
            "codefleet.coord.index",
        },
        "checks run in the runner, which is thin: it reaches the server only through the client",
    ),
    *[
        (
            module,
            HEAVY_FOR_THE_HOOK,
            "`codefleet hook` runs on every write of a person's session: standard library only",
        )
        for module in (
            "codefleet.hook.command",
            "codefleet.hook.io",
            "codefleet.paths",
            "codefleet.models",
        )
    ],
]


@pytest.mark.parametrize(("library", "allowed", "why"), EXCLUSIVE, ids=[e[0] for e in EXCLUSIVE])
def test_only_the_owning_module_imports_the_library(
    library: str, allowed: set[str], why: str
) -> None:
    importers = importers_of(library)
    assert importers <= allowed, f"{sorted(importers - allowed)} import {library}: {why}"
    assert importers == allowed, f"guard: {sorted(allowed)} should import {library} (did it move?)"


@pytest.mark.parametrize(("module", "forbidden", "why"), FORBIDDEN, ids=[f[0] for f in FORBIDDEN])
def test_a_module_never_crosses_its_boundary(module: str, forbidden: set[str], why: str) -> None:
    assert module in MODULES, f"guard: {module} no longer exists; update this boundary"
    crossed = {
        i for i in MODULES[module] if any(i == f or i.startswith(f + ".") for f in forbidden)
    }
    assert not crossed, f"{module} imports {sorted(crossed)}: {why}"


def test_the_runner_speaks_to_the_server_only_through_the_client() -> None:
    assert "codefleet.api.client" in MODULES["codefleet.fleet.runner"]


def test_the_simulation_plays_the_real_scheduler_policy() -> None:
    assert "codefleet.coord.scheduler" in MODULES["codefleet.planning.simulate"], (
        "graph check predicts parallelism with scheduler.schedule, not a second implementation"
    )


def test_graph_check_loads_without_the_engine_the_server_or_the_sdk() -> None:
    code = (
        "import sys, codefleet.cli.planning, codefleet.api.graph; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('codefleet', 'claude')))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    banned = ("codefleet.coord.engine", "codefleet.server.app", "codefleet.coord.store", "codefleet.coord.index",
              "claude_agent_sdk")  # fmt: skip
    assert "codefleet.planning.check" in loaded, "guard: the probe imported nothing"
    assert "codefleet.planning.launch" in loaded, "guard: the plan command is registered there"
    assert [m for m in loaded if m.startswith(banned)] == []


def test_a_persons_hook_and_the_runners_gate_share_the_path_function_and_the_deny_shape() -> None:
    assert "codefleet.paths" in MODULES["codefleet.hook.command"], (
        "the hook canonicalizes with TreeRoot"
    )
    assert "codefleet.paths" in MODULES["codefleet.fleet.prewrite"]
    for module in ("codefleet.hook.command", "codefleet.fleet.prewrite", "codefleet.session.sdk"):
        assert "codefleet.hook.io" in MODULES[module], f"{module}: paths and denials from hookio"
