"""The scripted fake of the Responses API (`offlinemodels.openaiapi`), over plain HTTP and under
the real Codex CLI (`codex exec`, the pinned runtime), with no key and no network."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from codex_cli_bin import bundled_codex_path

from codefleet.offlinemodels.anthropicapi import marker
from codefleet.offlinemodels.openaiapi import FAKE_API_KEY, FakeCodexModel, patch_call

PATCH_TOOLS = [{"type": "custom", "name": "apply_patch"}, {"type": "function", "name": "view"}]


@pytest.fixture
def fake() -> Iterator[FakeCodexModel]:
    with FakeCodexModel() as fm:
        yield fm


def request(script: str, *extra: dict[str, Any]) -> dict[str, Any]:
    user = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": marker(script)}],
    }
    return {"model": "gpt-5.5", "stream": True, "tools": PATCH_TOOLS, "input": [user, *extra]}


def events(body: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: ")
    ]


def test_a_scripted_patch_is_streamed_as_a_custom_tool_call_with_the_raw_patch(
    fake: FakeCodexModel,
) -> None:
    fake.add_script(
        "s", [{"content": [{"text": "Patching."}, patch_call("*** Add File: a.py", "+x")]}]
    )
    answer = httpx.post(f"{fake.responses_url}/responses", json=request("s"))
    assert answer.headers["content-type"] == "text/event-stream"
    kinds = [e["type"] for e in events(answer.content)]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    done = events(answer.content)[-1]["response"]
    call = done["output"][1]
    assert call["type"] == "custom_tool_call" and call["name"] == "apply_patch"
    assert call["input"].splitlines()[1] == "*** Add File: a.py"
    assert done["usage"]["input_tokens"] == 1000


def test_a_tool_the_request_declares_as_a_function_is_called_with_json_arguments(
    fake: FakeCodexModel,
) -> None:
    fake.add_script("s", [{"content": [{"tool_use": {"name": "view", "input": {"path": "a"}}}]}])
    answer = httpx.post(f"{fake.responses_url}/responses", json=request("s"))
    call = events(answer.content)[-1]["response"]["output"][0]
    assert call["type"] == "function_call" and json.loads(call["arguments"]) == {"path": "a"}


def test_the_turn_is_read_from_the_call_ids_the_request_carries_back(fake: FakeCodexModel) -> None:
    fake.add_script(
        "s",
        [{"content": [patch_call("*** Delete File: a.py")]}, {"content": [{"text": "Second."}]}],
    )
    first = events(httpx.post(f"{fake.responses_url}/responses", json=request("s")).content)
    call = first[-1]["response"]["output"][0]
    output = {
        "type": "custom_tool_call_output",
        "call_id": call["call_id"],
        "output": "refused: held",
    }
    second = httpx.post(f"{fake.responses_url}/responses", json=request("s", call, output))
    assert events(second.content)[-1]["response"]["output"][0]["content"][0]["text"] == "Second."
    assert [r.turn for r in fake.requests("s")] == [0, 1]
    assert [t.content for t in fake.tool_results("s")] == ["refused: held"]


def test_a_scripted_rate_limit_is_a_429_with_retry_after(fake: FakeCodexModel) -> None:
    error = {
        "status": 429,
        "type": "rate_limit_exceeded",
        "message": "slow down",
        "retry_after_s": 1.5,
    }
    fake.add_script("s", [{"error": error}])
    answer = httpx.post(f"{fake.responses_url}/responses", json=request("s"))
    assert answer.status_code == 429 and answer.headers["retry-after"] == "2"
    assert answer.json()["error"]["code"] == "rate_limit_exceeded"


def test_any_other_request_gets_an_empty_ok(fake: FakeCodexModel) -> None:
    assert httpx.get(f"{fake.responses_url}/models").json() == {}
    assert fake.unexpected_requests() == ["GET /v1/models"]


def codex_exec(
    fake: FakeCodexModel, tree: Path, home: Path, prompt: str
) -> subprocess.CompletedProcess[str]:
    """`codex exec` with a provider pointing at the fake and no shell tool."""
    provider = {
        "model_provider": '"fake"',
        "model_providers.fake.name": '"fake"',
        "model_providers.fake.base_url": json.dumps(fake.responses_url),
        "model_providers.fake.env_key": '"FAKE_CODEX_KEY"',
        "model_providers.fake.wire_api": '"responses"',
        "features.shell_tool": "false",
        "features.unified_exec": "false",
        "approval_policy": '"never"',
    }
    overrides = [arg for key, value in provider.items() for arg in ("-c", f"{key}={value}")]
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "CODEX_HOME": str(home),
        "FAKE_CODEX_KEY": FAKE_API_KEY,
    }
    command = [str(bundled_codex_path()), "exec", "--skip-git-repo-check", *overrides]
    command += ["-s", "danger-full-access", "-m", "gpt-5.5", prompt]
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


def test_the_real_codex_cli_applies_a_scripted_patch_served_by_the_fake(
    fake: FakeCodexModel, tmp_path: Path
) -> None:
    tree, home = tmp_path / "tree", tmp_path / "home"
    tree.mkdir()
    home.mkdir()
    fake.add_script(
        "s",
        [
            {"content": [patch_call("*** Add File: hello.txt", "+hi")]},
            {"content": [{"text": "Done."}]},
        ],
    )
    done = codex_exec(fake, tree, home, f"Write hello. {marker('s')}")
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tree / "hello.txt").read_text() == "hi\n"
    assert [r.turn for r in fake.requests("s")] == [0, 1]
    assert "apply_patch" in {t["name"] for t in fake.requests("s")[0].body["tools"] if "name" in t}
