"""`codefleet --help` loads the command line only: no server, client, settings or sessions.

Typer imports every command module to list the commands, so a module-level
import of FastAPI, httpx or the SDK in any of them is paid by every
invocation (`--help` included: ~1 s on the project's machine). Commands
import what they need inside their body, Rich included: the help is plain
text (`cli.helptext`), and the consoles load with the first command that
prints (`cli.output`).
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

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


def loaded_after(argv: list[str]) -> list[str]:
    """The heavy top-level packages in `sys.modules` once `codefleet <argv>` has exited."""
    code = (
        "import sys\n"
        f"sys.argv = ['codefleet', *{argv!r}]\n"
        "from codefleet.cli.launch import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', sorted(m for m in {sorted(HEAVY)!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    marker = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
    assert marker, done.stdout + done.stderr
    return list(ast.literal_eval(marker[-1].removeprefix("LOADED ")))


def _explain(argv: list[str], loaded: list[str]) -> str:
    what = "; ".join(f"{name} ({HEAVY[name]})" for name in loaded)
    return (
        f"`codefleet {' '.join(argv)}` loaded {what}. Move the import into the command "
        "that uses it (see cli/common.py)."
    )


def test_help_loads_no_server_client_settings_session_or_metadata() -> None:
    loaded = loaded_after(["--help"])
    assert loaded == [], _explain(["--help"], loaded)


@pytest.mark.parametrize("command", ["demo", "run", "serve", "join"])
def test_a_commands_help_loads_only_what_typer_itself_needs(command: str) -> None:
    """Typer builds a command's options with pydantic's TypeAdapter (whose plugin loader reads
    importlib.metadata): those two are Typer's."""
    typers = {"pydantic", "importlib.metadata"}
    loaded = [name for name in loaded_after([command, "--help"]) if name not in typers]
    assert loaded == [], _explain([command, "--help"], loaded)


def test_the_guard_sees_a_module_that_does_load_them() -> None:
    """The check is live: the demo's runner needs the server and the client, and has them."""
    code = "import sys, codefleet.cli.start.demo_run; print(sorted(m for m in ('fastapi', 'httpx') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['fastapi', 'httpx']"
