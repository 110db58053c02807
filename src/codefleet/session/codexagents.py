"""Codex runners, offline and live: the `CodexExecutor` a fleet's flags ask for.

Offline, a Codex runner talks to the same process-wide fake as the Claude runners
(`offline.shared_model`, a `FakeCodexModel` answering both wires), so one model file
serves a mixed fleet: the fake plays each Claude script to Codex as patches
(`openaiapi.codex_turns`), and a `wait_for` can wait across agents. Live, it talks to
the Responses API at `OPENAI_BASE_URL` (default OpenAI's) with the key in
`OPENAI_API_KEY`, the model from `CODEFLEET_CODEX_MODEL` (default `gpt-5.5`).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path
from typing import Final

from codefleet.fleet.executor import Attempt
from codefleet.offlinemodels.anthropicapi import FakeModel, marker
from codefleet.offlinemodels.openaiapi import FAKE_API_KEY, FakeCodexModel
from codefleet.session.codex import CodexExecutor
from codefleet.session.codexconfig import DEFAULT_CODEX_MODEL, CodexProvider
from codefleet.session.offline import script_id_for, shared_model

__all__ = [
    "MissingCodexKey",
    "codex_model",
    "live_codex_executor",
    "model_file_codex_executor",
    "offline_codex_executor",
]

KEY_ENV: Final = "OPENAI_API_KEY"
BASE_URL_ENV: Final = "OPENAI_BASE_URL"
MODEL_ENV: Final = "CODEFLEET_CODEX_MODEL"
OPENAI_RESPONSES: Final = "https://api.openai.com/v1"
OFFLINE_KEY_ENV: Final = "CODEFLEET_FAKE_CODEX_KEY"


def codex_model() -> str:
    return os.environ.get(MODEL_ENV) or DEFAULT_CODEX_MODEL


def offline_codex_executor(fake: FakeModel, script_ids: Collection[str] = ()) -> CodexExecutor:
    """A `CodexExecutor` whose sessions talk to `fake` (which speaks the Responses wire) with a fake key."""
    if not isinstance(fake, FakeCodexModel):
        raise TypeError("an offline Codex runner needs the fake that speaks the Responses API")
    ids = frozenset(script_ids)

    def prompt_marker(attempt: Attempt) -> str:
        return marker(script_id_for(ids, attempt))

    return CodexExecutor(
        CodexProvider(fake.responses_url, OFFLINE_KEY_ENV),
        env=lambda _attempt: {OFFLINE_KEY_ENV: FAKE_API_KEY},
        prompt_marker=prompt_marker,
    )


def model_file_codex_executor(model_file: Path) -> CodexExecutor:
    """The offline Codex executor playing `model_file` on the process-wide fake."""
    fake, script_ids = shared_model(model_file.resolve())
    return offline_codex_executor(fake, script_ids)


def live_codex_executor() -> CodexExecutor:
    """Real Codex sessions; `MissingCodexKey` unless `OPENAI_API_KEY` is set."""
    if not os.environ.get(KEY_ENV):
        raise MissingCodexKey(
            f"a Codex runner needs {KEY_ENV} (a Responses API key); or run it with --offline "
            "--model-script FILE against CodeFleet's scripted model"
        )
    base_url = os.environ.get(BASE_URL_ENV) or OPENAI_RESPONSES
    return CodexExecutor(CodexProvider(base_url, KEY_ENV), model=codex_model())


class MissingCodexKey(ValueError):
    """No key for live Codex sessions."""
