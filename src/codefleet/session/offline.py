"""`--offline`: real Claude Code sessions against the built-in scripted fake model.

The sessions are the production ones (`session.sdk.SessionExecutor`: the bundled
CLI, the real hook, the real lease server); only the model is replaced by
`codefleet.offlinemodels.anthropicapi`, serving the per-task scripts of a model file
such as `examples/demo-model.yaml`. A script id is `<task>-a<attempt>` when the
file has one for that attempt, else `<task>`; the prompt carries its marker.

One FakeModel serves the whole process (started on first use, closed at
exit): the staged veto needs T3's and T4's sessions, on different runners, to
see each other's requests. Each session gets the fake's env (loopback base
URL, a fake key, no side traffic) and its own HOME and temp dirs under
`run_dir/homes/`, so nothing of the user's Claude Code setup is read or
written; a repair attempt gets the HOME of the session it resumes.
"""

from __future__ import annotations

import atexit
import functools
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from codefleet.fleet.executor import Attempt
from codefleet.offlinemodels.anthropicapi import (
    FakeModel,
    Login,
    Turn,
    marker,
    scripts_from_dict,
    session_env,
)
from codefleet.offlinemodels.openaiapi import FakeCodexModel
from codefleet.session.attempthooks import HOOK_TIMEOUT_S
from codefleet.session.sdk import SessionExecutor

__all__ = [
    "ModelFileError",
    "load_model_scripts",
    "model_file_executor",
    "offline_executor",
    "script_id_for",
    "shared_model",
]

# The CLI inherits our environment; blank what could send it elsewhere or use a real login.
BLANKED: Final = {
    name: ""
    for name in (
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "ANTHROPIC_MODEL",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "https_proxy",
        "http_proxy",
    )
}


class ModelFileError(ValueError):
    """A model file that cannot be played, with a message naming the file."""


def load_model_scripts(path: Path) -> dict[str, list[Turn]]:
    """The fake-model scripts in a YAML model file, keyed by script id."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ModelFileError(f"cannot read {path}: {err.strerror or err}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ModelFileError(f"{path} is not valid YAML: {err}") from None
    if raw is not None and not isinstance(raw, dict):
        raise ModelFileError(f"{path}: a model file maps script ids (task ids) to lists of turns")
    try:
        return scripts_from_dict(raw or {})
    except (ValueError, TypeError, KeyError) as err:  # fakescript's ScriptError is a ValueError
        raise ModelFileError(f"{path}: {err}") from None


def script_id_for(script_ids: Collection[str], attempt: Attempt) -> str:
    """`T4-a2` if the file scripts that attempt, else the task's own script `T4`."""
    specific = f"{attempt.task_id}-a{attempt.number}"
    return specific if specific in script_ids else attempt.task_id


def session_home(attempt: Attempt) -> Path:
    """A private HOME for one session, under the run directory; a repair attempt's is the
    HOME of the session it resumes (where the CLI keeps its transcript), when it is found."""
    homes = attempt.run_dir / "homes"
    resumed = attempt.task.repair_session
    if resumed:
        for transcript in homes.glob(f"{attempt.task_id}-a*/.claude/projects/*/{resumed}.jsonl"):
            return transcript.parents[3]
    return homes / f"{attempt.task_id}-a{attempt.number}-{attempt.runner_name}"


@functools.cache
def shared_model(model_file: Path) -> tuple[FakeModel, frozenset[str]]:
    """The process-wide fake model playing `model_file` (started once, closed at exit)."""
    scripts = load_model_scripts(model_file)
    fake = FakeCodexModel().start()  # both wires, so Claude and Codex runners share one model
    atexit.register(fake.close)
    for script_id, turns in scripts.items():
        fake.add_script(script_id, turns)
    return fake, frozenset(scripts)


def offline_executor(
    fake: FakeModel,
    script_ids: Collection[str] = (),
    *,
    max_turns: int = 40,
    max_budget_usd: float = 0.50,
    hook_timeout: float = HOOK_TIMEOUT_S,
    login: Login = "api_key",
) -> SessionExecutor:
    """A `SessionExecutor` whose sessions talk to `fake`, each with its own HOME."""
    ids = frozenset(script_ids)

    def env(attempt: Attempt) -> Mapping[str, str]:
        return {**BLANKED, **session_env(fake, session_home(attempt), login)}

    def prompt_marker(attempt: Attempt) -> str:
        return marker(script_id_for(ids, attempt))

    return SessionExecutor(
        max_turns=max_turns,
        max_budget_usd=max_budget_usd,
        env=env,
        prompt_marker=prompt_marker,
        hook_timeout=hook_timeout,
    )


def model_file_executor(model_file: Path, **limits: Any) -> SessionExecutor:
    """`offline_executor` over the shared fake model playing `model_file` (the offline demo)."""
    fake, script_ids = shared_model(model_file.resolve())
    return offline_executor(fake, script_ids, **limits)
