"""Reading a task graph file: YAML in, validated task specs out, with clear errors.

The file is a mapping with a `tasks` list, whose keys are those of
`wire.TaskSpec` (unknown keys are an error, not silently dropped), and an
optional `checks` mapping of check name to shell command, and optional
`shell:` / `shell_network:` defaults every task inherits unless it sets
them (the `run_command` tool). The result is a
`GraphTasks`: the task specs as `POST /tasks` expects them, carrying the
checks, which `FleetClient.create_tasks` posts with them. Problems are
reported with the task's position and id so a person can find them:
malformed YAML (with its line), the wrong top-level shape, a bad field.
Cycles (named as `cycle: A -> B -> A`), unknown dependencies and a `verify`
naming no check of the file are checked here too, so `doctor`, `graph check`
and `plan` catch them before a server is involved; the server checks them
again on load. This module imports nothing of the engine or the server.
`check_scopes` applies the server's own path rule (`paths.TreeRoot`) to every
`file_scope` entry, for a given tree. An unknown key names the closest known
one. `find_graph` finds `codefleet.yaml`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from codefleet.api.wire import ChecksBody, TaskSpec
from codefleet.paths import PathRejected, TreeRoot
from codefleet.planning.dag import find_cycle

__all__ = [
    "DEFAULT_GRAPH",
    "GraphError",
    "GraphTasks",
    "check_scopes",
    "find_graph",
    "load_graph",
    "parse_checks",
    "parse_graph",
]

TOP_LEVEL_KEYS = frozenset({"tasks", "checks", "shell", "shell_network"})
SHELL_KEYS = ("shell", "shell_network")  # graph-wide defaults a task may override
TASK_KEYS = frozenset(TaskSpec.model_fields)
DEFAULT_GRAPH = "codefleet.yaml"


class GraphError(ValueError):
    """A graph file that cannot be loaded, with a message meant for a person."""


class GraphTasks(list[dict[str, Any]]):
    """A loaded graph: its task specs (a list, as before) plus its named checks."""

    def __init__(self, tasks: list[dict[str, Any]], checks: dict[str, str] | None = None) -> None:
        super().__init__(tasks)
        self.checks: dict[str, str] = dict(checks or {})


def find_graph(given: Path | None, cwd: Path | None = None) -> Path | None:
    """The graph file to use: the one given, else `codefleet.yaml` in `cwd` if there is one."""
    if given is not None:
        return given
    default = (cwd or Path.cwd()) / DEFAULT_GRAPH
    return default if default.is_file() else None


def load_graph(path: Path, standalone: bool = True) -> GraphTasks:
    """Task specs (and checks) from a YAML file, as `POST /tasks` expects them.

    `standalone=False` allows dependencies on tasks, and `verify` on checks,
    already on the server.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise GraphError(f"cannot read {path}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise GraphError(f"{path} is not UTF-8 text: {err.reason} at byte {err.start}") from err
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise GraphError(f"{path} is not valid YAML: {err}") from err
    except RecursionError:
        raise GraphError(f"{path} is nested too deeply to be a task graph") from None
    return parse_graph(raw, str(path), standalone)


def parse_graph(raw: Any, where: str = "the graph", standalone: bool = True) -> GraphTasks:
    if not isinstance(raw, dict):
        raise GraphError(f"{where} must be a mapping with a 'tasks' list")
    unknown = sorted(map(str, set(raw) - TOP_LEVEL_KEYS))
    if unknown:
        raise GraphError(f"{where}: unknown top-level key {_unknown(unknown[0], TOP_LEVEL_KEYS)}")
    tasks = raw.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise GraphError(f"{where}: 'tasks' must be a non-empty list")
    checks = parse_checks(raw.get("checks") or {}, where)
    defaults = _shell_defaults(raw, where)
    specs = [_spec(where, n, {**defaults, **item} if isinstance(item, dict) else item)
             for n, item in enumerate(tasks, start=1)]  # fmt: skip
    _check_graph(where, specs, standalone)
    for spec in specs if standalone else ():
        if spec.verify is not None and spec.verify not in checks:
            raise GraphError(
                f"{where}: task {spec.id or repr(spec.title)} verifies with unknown check "
                f"{spec.verify!r}; define it under 'checks:'"
            )
    return GraphTasks([spec.model_dump(exclude_none=True) for spec in specs], checks)


def _shell_defaults(raw: dict[Any, Any], where: str) -> dict[str, bool]:
    """The graph's `shell:` / `shell_network:` keys, which every task inherits unless it sets them."""
    defaults = {key: raw[key] for key in SHELL_KEYS if key in raw}
    for key, value in defaults.items():
        if not isinstance(value, bool):
            raise GraphError(f"{where}: '{key}' must be true or false")
    return defaults


def parse_checks(raw: Any, where: str = "the graph") -> dict[str, str]:
    """`{name: command}` validated like `POST /checks` (names `^[a-z][a-z0-9_-]{0,31}$`)."""
    if not isinstance(raw, dict):
        raise GraphError(f"{where}: 'checks' must be a mapping of check name to command")
    try:
        return dict(ChecksBody.model_validate({"checks": raw}).checks)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"][1:]) or "checks"
        raise GraphError(f"{where}: checks: {field}: {first['msg']}") from None


def _spec(where: str, n: int, item: Any) -> TaskSpec:
    label = f"task #{n}"
    if isinstance(item, dict) and item.get("id"):
        label += f" ({item['id']})"
    if not isinstance(item, dict):
        raise GraphError(f"{where}: {label} must be a mapping")
    try:
        return TaskSpec.model_validate(item)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "task"
        if first["type"] == "extra_forbidden":
            raise GraphError(
                f"{where}: {label}: unknown key {_unknown(field, TASK_KEYS)}"
            ) from None
        raise GraphError(f"{where}: {label}: {field}: {first['msg']}") from None


def _unknown(key: str, known: Iterable[str]) -> str:
    """`'file_scopes' (did you mean file_scope?)`, or the list of known keys."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    if close:
        return f"{key!r} (did you mean {close[0]}?)"
    return f"{key!r} (known keys: {', '.join(sorted(known))})"


def check_scopes(tasks: GraphTasks, tree: TreeRoot, where: str = "the graph") -> None:
    """Every `file_scope` entry through the server's own path rule for `tree` (see `paths`)."""
    for spec in tasks:
        for raw in spec.get("file_scope", ()):
            try:
                tree.canonical(raw)
            except PathRejected as err:
                task = spec.get("id") or repr(spec["title"])
                raise GraphError(
                    f"{where}: task {task}: file_scope entry {err.raw!r}: {err.message}"
                ) from None


def _check_graph(where: str, specs: list[TaskSpec], standalone: bool) -> None:
    ids = [s.id for s in specs if s.id]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise GraphError(f"{where}: task id(s) used twice: {', '.join(dupes)}")
    known = set(ids)
    for spec in specs if standalone else ():
        for dep in spec.depends_on:
            if dep not in known:
                raise GraphError(
                    f"{where}: task {spec.id or repr(spec.title)} depends on unknown task {dep}"
                )
    cycle = find_cycle({s.id: s.depends_on for s in specs if s.id})
    if cycle:
        raise GraphError(
            f"{where}: cycle: {' -> '.join(cycle)} (each task depends on the next one)"
        )
