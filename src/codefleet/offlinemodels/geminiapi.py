"""A scripted fake of the Gemini API for driving the real Gemini CLI offline.

The fake Anthropic model (`anthropicapi.FakeModel`) with another wire: the same scripts
(`fakescript`: a prompt carries `marker(id)`, a script is a list of `Turn`s), the same
loopback server, request log, `wait_for` holds, signals and errors; only the path
(`POST /v1beta/models/<model>:streamGenerateContent`) and the rendering (`geminiwire`)
differ. A `ToolUse` is a `functionCall` of a Gemini CLI tool (`write_file`, `replace`,
`read_file`, ...) with its JSON arguments.

`gemini_home` lays out what a person's machine holds for a run against it (measured
with Gemini CLI 0.61.0, read from its bundle): the CLI picks the endpoint from
`GOOGLE_GEMINI_BASE_URL`, but that variable alone selects its "gateway" login, which
print mode refuses ("Invalid auth method selected"), so the user settings choose the
API-key login (`security.auth.selectedType: gemini-api-key`) and `GEMINI_API_KEY`
carries a fake key. The tree is trusted in `trustedFolders.json`, as the CLI's own
trust prompt records it: the CLI runs a project's hooks only in a trusted folder. Usage
statistics, telemetry and update checks are off. Name the model (`-m`): without one the
CLI first asks a routing model to classify the prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from codefleet.offlinemodels.anthropicapi import SSE_CONTENT_TYPE, FakeModel
from codefleet.offlinemodels.anthropicwire import RecordedRequest
from codefleet.offlinemodels.geminiwire import (
    GeminiRequest,
    count_turn,
    find_script_id,
    render_error,
    render_stream,
)

__all__ = ["FAKE_API_KEY", "GEMINI_MODEL", "FakeGeminiModel", "gemini_home"]

FAKE_API_KEY: Final = "fake-gemini-key"
GEMINI_MODEL: Final = "gemini-2.5-flash"
STREAM_PATH_RE: Final = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):streamGenerateContent$")
USER_SETTINGS: Final = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}


class FakeGeminiModel(FakeModel):
    """The fake Gemini API: `with FakeGeminiModel() as fm:` serves on 127.0.0.1."""

    def serves(self, path: str) -> bool:
        return STREAM_PATH_RE.match(path) is not None

    def answer_at(
        self, path: str, body: Mapping[str, Any]
    ) -> tuple[int, str, bytes, dict[str, str]]:
        match = STREAM_PATH_RE.match(path)
        model = match.group("model") if match else GEMINI_MODEL
        record = self._record(find_script_id(body), count_turn(body), body)
        turn = self._turn_for(record.script_id, record.turn)
        refused = self._staged(record, turn, render_error)
        if refused is not None:
            return refused
        return 200, SSE_CONTENT_TYPE, render_stream(turn, model), {}

    def _record(self, script_id: str | None, turn: int, body: Mapping[str, Any]) -> RecordedRequest:
        with self._cond:
            record = GeminiRequest(len(self._log), script_id, turn, body)
            self._log.append(record)
            self._cond.notify_all()
        return record


def gemini_home(fm: FakeGeminiModel, home: Path, trusted: Path) -> dict[str, str]:
    """Lay out a Gemini CLI user's HOME under `home` (created) that talks only to `fm` and
    trusts the folder `trusted`; the env vars a run needs (PATH excluded)."""
    settings = home / ".gemini"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "settings.json").write_text(json.dumps(USER_SETTINGS))
    (settings / "trustedFolders.json").write_text(json.dumps({str(trusted): "TRUST_FOLDER"}))
    tmp = home / "tmp"
    tmp.mkdir(exist_ok=True)
    return {
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "GEMINI_API_KEY": FAKE_API_KEY,
        "GOOGLE_GEMINI_BASE_URL": fm.base_url,
    }
