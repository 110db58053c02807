"""A dry-run script file: each task's steps, parsed and checked before a run starts.

A script maps a task id to a list of steps (`fleet.scripted` plays them; its
docstring and `codefleet run --help` list them). Each step is a one-key mapping with
optional `attempt: N`, `turn: N`, `rework: true` (plays only in the turn that
reworks the task after a failed check) and, on a `wait_*` step, `timeout: S`. A
script's own `wait_timeout: S` is its waits' limit where a step names none. The
files a `patch` (a unified diff) or a `write_from` names are read here, next to
the script, and a diff is read whole: a file that is missing or a diff that is not
one is a `ScriptError` naming the task and the file, before any agent runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import yaml

from codefleet.fleet.scriptpatch import PatchError, read_patch
from codefleet.fleet.scriptwaits import WAIT_KINDS

__all__ = ["STEP_KINDS", "ScriptError", "Step", "load_script", "parse_script"]

STEP_KINDS: Final = frozenset(
    {
        "write",
        "write_from",
        "patch",
        "edit",
        "append",
        "sleep",
        "wait_leased",
        "wait_acquired",
        "wait_denied",
        "fail",
        "check",
        "expect_check",
        "expect_error",
        "make_dir",
        "rate_limit",
        "cost",
        "command",
        "read",
        "wait_succeeded",
        "wait_landing",
        "expect_followup",
        "wait_message",
        "ask",
        "expect_answer",
        "wait_parked",
        "acquire_resource",
        "next_number",
        "allocate_port",
    }
)
STEP_OPTIONS: Final = frozenset({"attempt", "turn", "timeout", "rework"})
SCRIPT_WAIT_TIMEOUT: Final = "wait_timeout"  # a script's own key: its waits' default limit


class ScriptError(ValueError):
    """A script file that cannot be played."""


@dataclass(frozen=True, slots=True)
class Step:
    kind: str
    arg: Any
    attempt: int | None = None
    turn: int = 1
    timeout: float | None = None  # a wait's limit (None: the script's or the executor's)
    rework: bool = False  # plays only when the task is reworked (see `_Played.reworks`)

    def plays(self, attempt: int, turn: int, reworks: bool = False) -> bool:
        """Whether the step plays in this session (`attempt`) and turn; a `rework` step
        plays in the turn that reworks the task instead of a numbered one."""
        if self.attempt is not None and self.attempt != attempt:
            return False
        return reworks if self.rework else self.turn == turn


def _parse_step(task_id: str, raw: Any) -> Step:
    if not isinstance(raw, dict):
        raise ScriptError(f"{task_id}: each step must be a mapping, got {raw!r}")
    attempt, turn = raw.get("attempt"), raw.get("turn", 1)
    kinds = [k for k in raw if k not in STEP_OPTIONS]
    if len(kinds) != 1 or kinds[0] not in STEP_KINDS:
        raise ScriptError(f"{task_id}: a step needs exactly one of {sorted(STEP_KINDS)}: {raw!r}")
    if attempt is not None and not isinstance(attempt, int):
        raise ScriptError(f"{task_id}: attempt must be a number")
    if not isinstance(turn, int) or isinstance(turn, bool) or turn < 1:
        raise ScriptError(f"{task_id}: turn must be a number from 1")
    kind, timeout, rework = (
        kinds[0],
        _timeout(task_id, raw.get("timeout")),
        raw.get("rework", False),
    )
    if timeout is not None and kind not in WAIT_KINDS:
        raise ScriptError(f"{task_id}: timeout goes with a wait_* step, not {kind}")
    if not isinstance(rework, bool) or (rework and "turn" in raw):
        raise ScriptError(f"{task_id}: rework is true or false, without turn (it plays in "
                          "the turn that reworks the task)")  # fmt: skip
    return Step(kind, raw[kind], attempt, turn, timeout, rework)


def _timeout(where: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ScriptError(f"{where}: a wait's timeout is a number of seconds above 0")
    return float(value)


def parse_script(raw: Any, base: Path | None = None) -> dict[str, list[Step]]:
    """The steps of each task; a `patch` or `write_from` file is read from `base` (the
    script's folder; None: the current one); `wait_timeout: S` sets its waits' limit."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ScriptError("a script is a mapping of task id to a list of steps")
    default = None
    if not isinstance(raw.get(SCRIPT_WAIT_TIMEOUT), list | type(None)):
        raw = dict(raw)
        default = _timeout(SCRIPT_WAIT_TIMEOUT, raw.pop(SCRIPT_WAIT_TIMEOUT))
    script: dict[str, list[Step]] = {}
    for task_id, steps in raw.items():
        if not isinstance(steps, list):
            raise ScriptError(f"{task_id}: steps must be a list")
        parsed = [_parse_step(str(task_id), s) for s in steps]
        script[str(task_id)] = [_resolved(str(task_id), s, base, default) for s in parsed]
    return script


def _resolved(task_id: str, step: Step, base: Path | None, default: float | None) -> Step:
    """The step with its files read and its diff checked (errors before the run starts)."""
    if step.kind in WAIT_KINDS and step.timeout is None:
        return replace(step, timeout=default)
    if step.kind not in ("patch", "write_from"):
        return step
    try:
        if step.kind == "write_from":
            arg = step.arg if isinstance(step.arg, dict) else {}
            if not {"path", "from"} <= arg.keys():
                raise ScriptError("write_from is {path: P, from: FILE} (FILE next to the script)")
            return replace(step, arg={**arg, "content": _file_text(base, str(arg["from"]))})
        text = str(step.arg)
        return replace(step, arg=read_patch(text if "\n" in text else _file_text(base, text)))
    except (PatchError, ScriptError) as err:
        raise ScriptError(f"{task_id}: {step.kind}: {err}") from None


def _file_text(base: Path | None, name: str) -> str:
    path = (base or Path.cwd()) / name
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ScriptError(f"cannot read {path}: {getattr(err, 'strerror', None) or err}") from None


def load_script(path: Path) -> dict[str, list[Step]]:
    """The script in a YAML file; every problem is a `ScriptError` naming the file."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ScriptError(f"cannot read {path}: {err.strerror or err}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ScriptError(f"{path} is not valid YAML: {err}") from None
    try:
        return parse_script(raw, path.parent)
    except ScriptError as err:
        raise ScriptError(f"{path}: {err}") from None
