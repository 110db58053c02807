"""Reading a task graph file: YAML in, validated task specs out, with clear errors.

The file is a mapping with one key, `tasks`, a list of tasks whose keys are
those of `wire.TaskSpec` (unknown keys are an error, not silently dropped).
Problems are reported with the task's position and id so a person can find
them: malformed YAML (with its line), the wrong top-level shape, a bad field.
Cycles and unknown dependencies are checked here too, so `doctor` can catch
them before a server is involved; the server checks them again on load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from codefleet.engine_graph import NewTask, reject_cycles
from codefleet.errors import InvalidGraph
from codefleet.wire import TaskSpec

__all__ = ["GraphError", "load_graph", "parse_graph"]

TOP_LEVEL_KEYS = frozenset({"tasks"})


class GraphError(ValueError):
    """A graph file that cannot be loaded, with a message meant for a person."""


def load_graph(path: Path, standalone: bool = True) -> list[dict[str, Any]]:
    """Task specs from a YAML file, as `POST /tasks` expects them.

    `standalone=False` allows dependencies on tasks already on the server.
    """
    try:
        text = path.read_text()
    except OSError as err:
        raise GraphError(f"cannot read {path}: {err.strerror or err}") from err
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise GraphError(f"{path} is not valid YAML: {err}") from err
    return parse_graph(raw, str(path), standalone)


def parse_graph(
    raw: Any, where: str = "the graph", standalone: bool = True
) -> list[dict[str, Any]]:
    if not isinstance(raw, dict):
        raise GraphError(f"{where} must be a mapping with a 'tasks' list")
    unknown = sorted(set(raw) - TOP_LEVEL_KEYS)
    if unknown:
        raise GraphError(f"{where}: unknown top-level key(s) {', '.join(map(str, unknown))}")
    tasks = raw.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise GraphError(f"{where}: 'tasks' must be a non-empty list")
    specs = [_spec(where, n, item) for n, item in enumerate(tasks, start=1)]
    _check_graph(where, specs, standalone)
    return [spec.model_dump(exclude_none=True) for spec in specs]


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
        raise GraphError(f"{where}: {label}: {field}: {first['msg']}") from None


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
                    f"{where}: task {spec.id or spec.title!r} depends on unknown task {dep}"
                )
    if len(ids) == len(specs):
        tasks = [NewTask(title=s.title, id=s.id, depends_on=s.depends_on) for s in specs]
        try:
            reject_cycles(tasks, ids)
        except InvalidGraph as err:
            raise GraphError(f"{where}: {err.message}") from None
