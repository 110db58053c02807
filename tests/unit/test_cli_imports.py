"""`codefleet --help` loads the command line only: no command module, server, client or settings.

The root group loads a command's module only when that command runs or shows its
own help (`cli.app.LazyGroup`, decision 0169), so `--help` lists the commands from
`cli.app.COMMANDS` alone; each row there is held to the command it names (its
panel, its line), and every command its module registers has a row. The help is
plain text (`cli.helptext`): Rich loads with the first command that prints. The demo's
runner loads no module of a path the dry run never takes (decision 0174).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from codefleet.cli.app import COMMANDS, app
from codefleet.cli.helptext import summary

# What `--help` must not load, and why each is heavy or irrelevant to listing commands.
HEAVY = {
    "fastapi": "the server (codefleet serve, the demo's in-process server)",
    "starlette": "the server",
    "uvicorn": "the server",
    "httpx": "the wire client (every command that talks to a server)",
    "httpcore": "the wire client",
    "pydantic": "wire models and settings (loaded by the first command that reads settings)",
    "pydantic_settings": "settings",
    "yaml": "graph and script files",
    "claude_agent_sdk": "real sessions",
    "sqlite3": "the store",
    "importlib.metadata": "the package version (read by --version only)",
    "rich": "the consoles and tables (cli.output; the help is plain text, cli.helptext)",
    "asyncio": "the event loop (the commands that talk to a server run one)",
}
COMMAND_PACKAGES = tuple(f"codefleet.cli.{p}." for p in ("start", "run", "operate", "results"))


def loaded_after(argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The modules in `sys.modules` once `codefleet <argv>` has exited."""
    code = (
        "import sys\n"
        f"sys.argv = ['codefleet', *{argv!r}]\n"
        "from codefleet.cli.launch import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    marker = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
    assert marker, done.stdout + done.stderr
    return list(ast.literal_eval(marker[-1].removeprefix("LOADED ")))


def test_help_loads_no_command_module_server_client_settings_or_metadata() -> None:
    loaded = loaded_after(["--help"])
    heavy = [f"{name} ({why})" for name, why in HEAVY.items() if name in loaded]
    assert heavy == [], f"`codefleet --help` loaded {'; '.join(heavy)}"
    commands = [m for m in loaded if m.startswith(COMMAND_PACKAGES)]
    assert commands == [], f"`codefleet --help` imported command modules {commands}"


def test_a_commands_help_loads_its_own_module_and_not_the_others() -> None:
    """`landing --help` imports `cli.operate.landingcmds`; `serve`'s and `run`'s modules
    (the server, the sessions) stay out."""
    loaded = loaded_after(["landing", "--help"])
    assert "codefleet.cli.operate.landingcmds" in loaded
    for module in ("codefleet.cli.run.serve", "codefleet.cli.run.fleetcmds", "fastapi"):
        assert module not in loaded, f"`codefleet landing --help` imported {module}"


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_listed_command_loads_from_its_row_and_shows_its_help(name: str) -> None:
    module, panel, line = COMMANDS[name]
    root = typer.main.get_command(app)
    command = root.get_command(typer.Context(root), name)  # type: ignore[attr-defined]
    assert command is not None, f"codefleet.cli.{module} registers no command {name!r}"
    assert (getattr(command, "rich_help_panel", None), summary(command)) == (panel, line), (
        f"the row of {name!r} in cli.app.COMMANDS differs from the command: update the row"
    )
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage: ") and line.split()[0] in result.output


def test_every_command_a_listed_module_registers_has_a_row_naming_that_module() -> None:
    root = typer.main.get_command(app)
    for name in COMMANDS:  # loads every module the table names
        root.get_command(typer.Context(root), name)  # type: ignore[attr-defined]
    registered = {
        typer.main.get_command_name(info.name or info.callback.__name__): info.callback.__module__  # type: ignore[union-attr]
        for info in app.registered_commands
    } | {
        str(group.name): group.typer_instance.registered_commands[0].callback.__module__  # type: ignore[union-attr]
        for group in app.registered_groups
    }
    assert registered == {name: f"codefleet.cli.{row[0]}" for name, row in COMMANDS.items()}


def test_an_unknown_command_is_met_with_the_names_it_resembles() -> None:
    result = CliRunner().invoke(app, ["rn"])
    assert result.exit_code == 2
    assert "No such command 'rn'. Did you mean 'run', 'runs'?" in result.output


def test_the_guard_sees_a_module_that_does_load_them() -> None:
    """The check is live: the demo's runner needs the server and the client, and has them."""
    code = "import sys, codefleet.cli.start.demo_run; print(sorted(m for m in ('fastapi', 'codefleet.api.client') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['codefleet.api.client', 'fastapi']"


# What the demo's runner (its server, client and fleet) must not load, and the path that
# does: code a dry-run demo never runs, imported where it runs (decision 0174).
OFF_THE_DEMOS_PATH = {
    "prometheus_client": "the first `GET /metrics` (server.metrics)",
    "codefleet.analysis.graphanalysis": "`GET /graph` and `graph check`",
    "codefleet.analysis.simulate": "`GET /graph` and `graph check`",
    "codefleet.review.collisionstats": "`GET /stats` and `codefleet stats`",
    "codefleet.review.facts": "`GET /stats` and the run report",
    "codefleet.review.statsjson": "`GET /stats` and `codefleet stats`",
    "codefleet.fleet.verifybisect": "a final verify that failed, bisected",
    "tomllib": "a `uv run` check, to read the pyproject.toml (fleet.views.uvlock)",
    "rich.live": "the live dashboard (`codefleet watch`)",
    "httpx": "an https server or an injected transport (api.client: http rides the lane)",
    "httpcore": "httpx",
}


def test_the_demos_runner_loads_no_module_of_a_path_the_dry_run_never_takes() -> None:
    code = "import sys, codefleet.cli.start.demo_run; print(sorted(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(done.stdout.strip()))
    found = [
        f"{name} (loaded by {why})" for name, why in OFF_THE_DEMOS_PATH.items() if name in loaded
    ]
    assert found == [], f"the demo's runner imported {'; '.join(found)}: import it where it runs"


def test_each_module_kept_off_the_demos_path_exists() -> None:
    """The guard above is live: a renamed module would pass it unseen."""
    missing = [name for name in OFF_THE_DEMOS_PATH if importlib.util.find_spec(name) is None]
    assert missing == []
