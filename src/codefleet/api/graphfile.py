"""Reading a task graph file: YAML in, validated task specs out, with clear errors.

The file is a mapping with a `tasks` list, whose keys are those of
`wire.TaskSpec` (unknown keys are an error, not silently dropped), and an
optional `checks` mapping of check name to shell command, and optional
`shell:`, `shell_network:`, `on_stale_read:` and `lease_granularity:`
defaults every task inherits unless it sets its own (`TASK_DEFAULTS`). The result is a
`GraphTasks`: the task specs as `POST /tasks` expects them, carrying the
checks, which `FleetClient.create_tasks` posts with them. Problems are
reported with the task's position and id so a person can find them:
malformed YAML (with its line), the wrong top-level shape, a bad field;
past a readable mapping, every problem of the file is in one `GraphError`.
Cycles (named as `cycle: A -> B -> A`), unknown dependencies and a `verify`
naming no check of the file are checked here too, so `doctor`, `graph check`
and `plan` catch them before a server is involved; the server checks them
again on load (`load` passes `OnServer`, the tasks and checks already there,
so references to them are checked here too). This module imports nothing of the engine or the server.
`check_scopes` applies the server's own path rule (`paths.TreeRoot`) to every
`file_scope` entry, for a given tree. An unknown key names the closest known
one. `find_graph` finds `codefleet.yaml`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import ValidationError

from codefleet.api.wire import (
    ChecksBody,
    CheckSpec,
    GraphBody,
    TaskSpec,
    check_commands,
    check_resources,
    check_reuse,
)
from codefleet.dag import find_cycle
from codefleet.models import Granularity, StaleReadPolicy
from codefleet.paths import PathRejected, TreeRoot
from codefleet.resources import glob_inside_tree
from codefleet.statedir import tree_root

__all__ = [
    "DEFAULT_GRAPH",
    "GraphError",
    "GraphTasks",
    "OnServer",
    "check_references",
    "check_scopes",
    "find_graph",
    "leases_line",
    "load_graph",
    "parse_checks",
    "parse_graph",
]

# Graph-wide defaults every task inherits unless it sets its own: the allowed values.
TASK_DEFAULTS: Final[Mapping[str, tuple[Any, ...]]] = {
    "shell": (True, False),
    "shell_network": (True, False),
    "on_stale_read": tuple(p.value for p in StaleReadPolicy),
    "lease_granularity": tuple(g.value for g in Granularity),
}
TOP_LEVEL_KEYS = frozenset({"tasks", "checks", "sequences", "integration", *TASK_DEFAULTS})
TASK_KEYS = frozenset(TaskSpec.model_fields)
_PROBE = {"title": "-", "description": "-"}  # a valid task, to validate `sequences` alone
DEFAULT_GRAPH = "codefleet.yaml"


class GraphError(ValueError):
    """A graph file that cannot be loaded, with a message meant for a person."""

    @classmethod
    def of(cls, where: str, problems: list[str]) -> GraphError:
        """Every problem found in `where`, in one message (one per line past the first)."""
        if len(problems) == 1:
            return cls(f"{where}: {problems[0]}")
        return cls(f"{where}: {len(problems)} problems:\n" + "\n".join(f"  {p}" for p in problems))


class GraphTasks(list[dict[str, Any]]):
    """A loaded graph: its task specs (a list, as before) plus its named checks."""

    def __init__(
        self,
        tasks: list[dict[str, Any]],
        checks: dict[str, str] | None = None,
        sequences: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(tasks)
        self.checks: dict[str, str] = dict(checks or {})
        self.sequences: dict[str, dict[str, Any]] = dict(sequences or {})  # `sequences:`
        self.check_resources: dict[str, list[str]] = {}  # the checks that name resources
        self.check_fresh: frozenset[str] = frozenset()  # the checks declared `reuse: false`
        self.integration: str | None = None  # `integration:`: the check every landing passes

    def with_tasks(self, tasks: list[dict[str, Any]]) -> GraphTasks:
        """These tasks, with this graph's checks, sequences, check resources and integration."""
        subset = GraphTasks(tasks, self.checks, self.sequences)
        subset.check_resources = dict(self.check_resources)
        subset.check_fresh = self.check_fresh
        subset.integration = self.integration
        return subset


def leases_line(specs: list[dict[str, Any]], default: Granularity, integration: str | None) -> str:
    """One line: what the graph's writes lease (`auto` resolved by `integration`). The value
    every task names, else `default` (the server's, or a runner's flag); tasks naming another
    are listed after it."""
    named = {
        str(s.get("id") or f"#{n}"): s.get("lease_granularity") for n, s in enumerate(specs, 1)
    }
    values = set(named.values())
    only = next(iter(values)) if len(values) == 1 else None
    chosen = Granularity(only) if only else default
    resolved = chosen.resolved(integration)
    others = sorted(
        f"{task} ({Granularity(value).resolved(integration).value})"
        for task, value in named.items()
        if value is not None and Granularity(value).resolved(integration) is not resolved
    )
    own = f"; leased otherwise: {', '.join(others)}" if others else ""
    return chosen.stated(integration) + own


def find_graph(given: Path | None, cwd: Path | None = None) -> Path | None:
    """The graph file to use: the one given, else `codefleet.yaml` in `cwd` if there is one,
    else in the root of the tree `cwd` is in (`statedir.tree_root`), where `init` writes it."""
    if given is not None:
        return given
    here = cwd or Path.cwd()
    for directory in (here, tree_root(here)[0]):
        if (directory / DEFAULT_GRAPH).is_file():
            return directory / DEFAULT_GRAPH
    return None


@dataclass(frozen=True, slots=True)
class OnServer:
    """The task ids and checks a server holds, which a graph loaded onto it may name."""

    tasks: frozenset[str] = frozenset()
    checks: Mapping[str, str] = field(default_factory=dict)


def load_graph(
    path: Path, standalone: bool = True, on_server: OnServer | None = None
) -> GraphTasks:
    """Task specs (and checks) from a YAML file, as `POST /tasks` expects them.

    `standalone=False` allows dependencies on tasks, and `verify` on checks,
    already on the server: those in `on_server` when it is given, any otherwise.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise GraphError(f"cannot read {path}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise GraphError(f"{path} is not UTF-8 text: {err.reason} at byte {err.start}") from err
    try:
        raw = yaml.load(text, Loader=_UniqueKeys)
    except yaml.YAMLError as err:
        raise GraphError(f"{path} is not valid YAML: {err}") from err
    except RecursionError:
        raise GraphError(f"{path} is nested too deeply to be a task graph") from None
    return parse_graph(raw, str(path), standalone, on_server)


def parse_graph(
    raw: Any,
    where: str = "the graph",
    standalone: bool = True,
    on_server: OnServer | None = None,
) -> GraphTasks:
    """Task specs and checks from a parsed YAML document; every problem is reported at once."""
    if not isinstance(raw, dict):
        raise GraphError(f"{where} must be a mapping with a 'tasks' list")
    problems = [
        f"unknown top-level key {_unknown(key, TOP_LEVEL_KEYS)}"
        for key in sorted(map(str, set(raw) - TOP_LEVEL_KEYS))
    ]
    tasks = raw.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        raise GraphError.of(where, [*problems, "'tasks' must be a non-empty list"])
    given, check_problems = _check_specs(raw.get("checks") or {})
    checks = check_commands(given)
    sequences, sequence_problems = _sequences(raw.get("sequences") or {})
    defaults, default_problems = _task_defaults(raw)
    problems += default_problems
    specs: list[TaskSpec] = []
    for n, item in enumerate(tasks, start=1):
        spec, spec_problems = _spec(n, _with_defaults(item, defaults))
        specs += [spec] if spec is not None else []
        problems += spec_problems
    found = GraphTasks([spec.model_dump(exclude_none=True) for spec in specs], checks, sequences)
    found.check_resources = {n: names for n, names in check_resources(given).items() if names}
    found.check_fresh = frozenset(n for n, may in check_reuse(given).items() if not may)
    problems += check_problems + sequence_problems + _graph_problems(found)
    if standalone or on_server is not None:
        known = on_server if on_server is not None and not standalone else OnServer()
        problems += _unknown_references(found, known.tasks, {**known.checks, **checks})
    found.integration, integration_problems = _integration(
        raw.get("integration"), {**(on_server.checks if on_server else {}), **checks}
    )
    problems += integration_problems
    if problems:
        raise GraphError.of(where, problems)
    return found


def check_references(tasks: GraphTasks, on_server: OnServer, where: str = "the graph") -> None:
    """Every dependency and `verify` of `tasks` that names nothing in them or `on_server`."""
    problems = _unknown_references(tasks, on_server.tasks, {**on_server.checks, **tasks.checks})
    if problems:
        raise GraphError.of(where, problems)


def _unknown_references(
    tasks: GraphTasks, stored: frozenset[str], checks: Mapping[str, str]
) -> list[str]:
    """Each dependency on a task neither in `tasks` nor `stored`, each `verify` not in `checks`."""
    known = stored | {t["id"] for t in tasks if t.get("id")}
    problems = [
        f"task {_name(task)} depends on unknown task {dep}"
        for task in tasks
        for dep in task.get("depends_on", ())
        if dep not in known
    ]
    return problems + [
        f"task {_name(task)} verifies with unknown check {task['verify']!r}; "
        "define it under 'checks:'"
        for task in tasks
        if task.get("verify") is not None and task["verify"] not in checks
    ]


def _integration(raw: Any, checks: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """The graph's `integration:` check, which must be one of its (or the server's) checks."""
    if raw is None:
        return None, []
    known = ", ".join(sorted(checks)) or "(none: define it under 'checks:')"
    if not isinstance(raw, str) or raw not in checks:
        return None, [f"integration: {raw!r} is not a check of this graph; the checks are: {known}"]
    return raw, []


class _UniqueKeys(yaml.SafeLoader):
    """The safe loader, but a key given twice in one mapping is an error naming its line
    (PyYAML keeps the last one silently: `integration:` twice would pick one unsaid)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping",
                    node.start_mark,
                    f"the key {key!r} is given twice",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _name(task: Mapping[str, Any]) -> str:
    return str(task.get("id") or repr(task["title"]))


def _task_defaults(raw: dict[Any, Any]) -> tuple[dict[str, Any], list[str]]:
    """The graph's `TASK_DEFAULTS` keys it sets, which every task inherits, or their problems."""
    defaults = {key: raw[key] for key in TASK_DEFAULTS if key in raw}
    problems = [
        _bad_default(key, value)
        for key, value in defaults.items()
        if not any(type(value) is type(v) and value == v for v in TASK_DEFAULTS[key])
    ]  # by type too: YAML's 1 is not true
    return ({} if problems else defaults), problems


def _bad_default(key: str, value: Any) -> str:
    if TASK_DEFAULTS[key] == (True, False):
        return f"'{key}' must be true or false"
    return f"{key} {value!r} is not one of {', '.join(TASK_DEFAULTS[key])}"


def _with_defaults(item: Any, defaults: Mapping[str, Any]) -> Any:
    """`item` with the graph's defaults under its own keys (a task's own value wins)."""
    return {**defaults, **item} if isinstance(item, dict) else item


def parse_checks(raw: Any, where: str = "the graph") -> dict[str, str]:
    """`{name: command}` validated like `POST /checks` (names `^[a-z][a-z0-9_-]{0,31}$`);
    a check may be `{run: command, resources: [db]}` (its resources: `check_resources`)."""
    checks, problems = _check_specs(raw)
    if problems:
        raise GraphError.of(where, problems)
    return check_commands(checks)


def _check_specs(raw: Any) -> tuple[dict[str, str | CheckSpec], list[str]]:
    if not isinstance(raw, dict):
        return {}, ["'checks' must be a mapping of check name to command"]
    try:
        return dict(ChecksBody.model_validate({"checks": raw}).checks), []
    except ValidationError as err:
        fields = [".".join(str(p) for p in e["loc"][1:]) or "checks" for e in err.errors()]
        return {}, [f"checks: {f}: {e['msg']}" for f, e in zip(fields, err.errors(), strict=True)]


def _sequences(raw: Any) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """`{name: {start: N} | {start_after: GLOB}}`, validated like `POST /tasks` (glob in the tree)."""
    if not isinstance(raw, dict):
        return {}, ["'sequences' must be a mapping of sequence name to its start"]
    try:
        body = GraphBody.model_validate({"tasks": [_PROBE], "sequences": raw})
    except ValidationError as err:
        fields = [".".join(str(p) for p in e["loc"][1:]) or "sequences" for e in err.errors()]
        return {}, [
            f"sequences: {f}: {e['msg']}" for f, e in zip(fields, err.errors(), strict=True)
        ]
    problems = [
        f"sequence {name}: start_after {spec.start_after!r} must be a glob inside the tree "
        "(relative, no '..')"
        for name, spec in body.sequences.items()
        if spec.start_after is not None and not glob_inside_tree(spec.start_after)
    ]
    return {n: s.model_dump(exclude_none=True) for n, s in body.sequences.items()}, problems


def _spec(n: int, item: Any) -> tuple[TaskSpec | None, list[str]]:
    """The task spec at position `n`, or None and every problem with it."""
    label = f"task #{n}"
    if isinstance(item, dict) and item.get("id"):
        label += f" ({item['id']})"
    if not isinstance(item, dict):
        return None, [f"{label} must be a mapping"]
    try:
        return TaskSpec.model_validate(item), []
    except ValidationError as err:
        return None, [f"{label}: {_field_problem(e)}" for e in err.errors()]


def _field_problem(error: Any) -> str:
    field = ".".join(str(p) for p in error["loc"]) or "task"
    if error["type"] == "extra_forbidden":
        return f"unknown key {_unknown(field, TASK_KEYS)}"
    return f"{field}: {error['msg']}"


def _unknown(key: str, known: Iterable[str]) -> str:
    """`'file_scopes' (did you mean file_scope?)`, or the list of known keys."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    if close:
        return f"{key!r} (did you mean {close[0]}?)"
    return f"{key!r} (known keys: {', '.join(sorted(known))})"


def check_scopes(tasks: GraphTasks, tree: TreeRoot, where: str = "the graph") -> None:
    """Every `file_scope` entry through the server's own path rule for `tree` (see `paths`)."""
    problems = []
    for spec in tasks:
        for raw in spec.get("file_scope", ()):
            try:
                tree.canonical(raw)
            except PathRejected as err:
                problems.append(f"task {_name(spec)}: file_scope entry {err.raw!r}: {err.message}")
    if problems:
        raise GraphError.of(where, problems)


def _graph_problems(tasks: GraphTasks) -> list[str]:
    """Ids used twice and a dependency cycle."""
    ids = [t["id"] for t in tasks if t.get("id")]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    problems = [f"task id(s) used twice: {', '.join(dupes)}"] if dupes else []
    cycle = find_cycle({t["id"]: t.get("depends_on", []) for t in tasks if t.get("id")})
    if cycle:
        problems.append(f"cycle: {' -> '.join(cycle)} (each task depends on the next one)")
    return problems
