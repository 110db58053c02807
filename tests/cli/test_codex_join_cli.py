"""A person's own Codex CLI session in the lock: `join --agent codex` writes the project's
`.codex/hooks.json`, and the real Codex CLI (the pinned runtime, against the scripted
fake) asks CodeFleet before every patch: a patch touching a file a fleet task holds is
refused before the disk is touched, a patch of free files lands and is leased."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from codex_cli_bin import bundled_codex_path

from codefleet.api.client import FleetClient
from codefleet.hook.agentsettings import agent_block, join_agent
from codefleet.offlinemodels.anthropicapi import marker
from codefleet.offlinemodels.openaiapi import FAKE_API_KEY, FakeCodexModel, patch_call
from codefleet.server.thread import ServerThread

if TYPE_CHECKING:
    from conftest import StartAttempt


def codex_exec(
    fake: FakeCodexModel, tree: Path, home: Path, prompt: str
) -> subprocess.CompletedProcess[str]:
    """The person's `codex exec` in `tree`: the project trusted, its hooks trusted for this run."""
    config = {
        "model_provider": '"fake"',
        "model_providers.fake.name": '"fake"',
        "model_providers.fake.base_url": json.dumps(fake.responses_url),
        "model_providers.fake.env_key": '"FAKE_CODEX_KEY"',
        "model_providers.fake.wire_api": '"responses"',
        "model_providers.fake.request_max_retries": "0",
        "approval_policy": '"never"',
        f'projects."{tree}".trust_level': '"trusted"',
    }
    overrides = [arg for key, value in config.items() for arg in ("-c", f"{key}={value}")]
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "CODEX_HOME": str(home),
        "FAKE_CODEX_KEY": FAKE_API_KEY,
    }
    command = [
        str(bundled_codex_path()),
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-hook-trust",
    ]
    command += [*overrides, "-s", "danger-full-access", "-m", "gpt-5.5", prompt]
    return subprocess.run(
        command,
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


async def test_a_joined_codex_session_is_refused_a_held_file_and_leases_a_free_one(
    server: ServerThread,
    client: FleetClient,
    start_attempt: StartAttempt,
    workdir: Path,
    tmp_path: Path,
) -> None:
    holder = await start_attempt("H", runner="runner-7", scope=["a.py"])
    assert (await holder.gate.check("Write", {"file_path": "a.py"})).allowed
    exe = [sys.executable, "-m", "codefleet"]
    join_agent(workdir, "codex", agent_block("codex", exe, server.url, workdir, False))
    home = tmp_path / "codex-home"
    home.mkdir()
    with FakeCodexModel() as fake:
        fake.add_script(
            "P",
            [
                {"content": [patch_call("*** Update File: a.py", "@@", "-A = 1", "+A = 9")]},
                {"content": [patch_call("*** Add File: free.py", "+F = 1")]},
                {"content": [{"text": "Done."}]},
            ],
        )
        done = codex_exec(fake, workdir, home, f"Edit. {marker('P')}")
        told = [r.content for r in fake.tool_results("P")]

    assert done.returncode == 0, done.stderr[-2000:]
    assert (workdir / "a.py").read_text() == "A = 1\n"
    assert "a.py is being edited by runner-7 for task H" in told[0]
    assert (workdir / "free.py").read_text() == "F = 1\n"
    leased = {lease["path"]: lease for lease in await client.leases()}
    assert set(leased) == {"a.py", "free.py"}
