"""`stats --suggest`: the task graph amended from what a run learnt about collisions.

Pure: the graph file's tasks (as written) and the run's `RunFacts` in, the
amended tasks and one `Change` per amendment out; `render_graph` writes them
back as YAML with a comment on each change. Three rules (docs/decisions/0057-collision-analytics.md,
"Collision analytics"):

1. a file a task was vetoed on joins its `file_scope`, so the scheduler keeps
   it apart from the file's other writers from the start (a resource it was
   vetoed on joins its `resources`, so it never runs beside the holder);
2. a task whose retry only succeeded after the holder of the vetoed file had
   finished gets `depends_on` that holder, unless a dependency path already
   links the two either way (the order is then fixed already, or would
   become a cycle);
3. a task whose read of a file went stale because another task of the graph
   changed it (`stale_read`) gets `depends_on` that task, on the same terms:
   it then reads the file once its change is in.

Tasks are matched by id; a task the file gives no id cannot be matched.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import yaml

from codefleet.models import EventType, from_iso
from codefleet.resources import is_resource_key, resource_name
from codefleet.review.facts import RunFacts, Veto

__all__ = ["Change", "render_graph", "suggest"]

Row = dict[str, Any]
MARK: Final = "codefleet stats"
PLAIN: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")


@dataclass(frozen=True, slots=True)
class Change:
    task_id: str
    key: str  # "file_scope", "resources" or "depends_on"
    value: str
    why: str


def _norm(path: str) -> str:
    return posixpath.normpath(path.strip()).removeprefix("./")


def _ancestors(deps: Mapping[str, Sequence[str]], task_id: str) -> set[str]:
    seen: set[str] = set()
    todo = list(deps.get(task_id, ()))
    while todo:
        parent = todo.pop()
        if parent not in seen:
            seen.add(parent)
            todo.extend(deps.get(parent, ()))
    return seen


def _offset(facts: RunFacts, at: datetime) -> str:
    events = facts.record.events
    first = next((e for e in events if e["type"] == EventType.FLEET_STARTED), None)
    first = first or (events[0] if events else None)
    return f"+{(at - from_iso(str(first['at']))).total_seconds():.1f} s" if first else "?"


def _succeeded_at(facts: RunFacts) -> dict[str, datetime]:
    return {
        str(e["task_id"]): from_iso(str(e["at"]))
        for e in facts.record.events
        if e["type"] == EventType.TASK_SUCCEEDED
    }


def _waited_for_holder(facts: RunFacts, veto: Veto, done: Mapping[str, datetime]) -> bool:
    """The refused task succeeded on an attempt that began once the holder had succeeded."""
    last = [a for a in facts.attempts if a.task_id == veto.task_id and a.start > veto.at]
    holder_done = done.get(veto.holder_task_id)
    return bool(
        last
        and last[-1].outcome == "succeeded"
        and holder_done is not None
        and holder_done <= last[-1].start
    )


def suggest(tasks: Sequence[Mapping[str, Any]], facts: RunFacts) -> tuple[list[Row], list[Change]]:
    """The amended tasks (copies; the input is not changed) and the changes, in run order."""
    out = [dict(t) for t in tasks]
    by_id = {str(t["id"]): t for t in out if t.get("id")}
    deps = {i: [str(d) for d in t.get("depends_on") or ()] for i, t in by_id.items()}
    done = _succeeded_at(facts)
    changes: list[Change] = []
    for veto in facts.vetoes:
        task = by_id.get(veto.task_id)
        if task is None:
            continue
        changes.extend(_widen(task, veto, facts))
        holder = veto.holder_task_id
        if holder not in by_id or not _waited_for_holder(facts, veto, done):
            continue
        if holder in _ancestors(deps, veto.task_id) or veto.task_id in _ancestors(deps, holder):
            continue
        why = f"{veto.task_id}'s retry only succeeded after {holder} finished with {veto.path}"
        changes.extend(_depend(by_id, deps, veto.task_id, holder, why))
    for reader, changer, path in _stale_pairs(facts.record.events):
        why = f"{reader}'s read of {path} went stale: {changer} changed it meanwhile"
        changes.extend(_depend(by_id, deps, reader, changer, why))
    return out, changes


def _widen(task: Row, veto: Veto, facts: RunFacts) -> list[Change]:
    """The vetoed file into `file_scope`, or the vetoed resource into `resources`, if new."""
    resource = is_resource_key(veto.path)
    key, value = ("resources" if resource else "file_scope"), resource_name(veto.path)
    have = [str(v) for v in task.get(key) or ()]
    if _norm(value) in {_norm(v) for v in have}:
        return []
    task[key] = [*have, value]
    what = f"resource {value}" if resource else value
    why = (
        f"vetoed on {what} at {_offset(facts, veto.at)} while "
        f"{veto.holder_task_id} ({veto.holder_runner}) held it"
    )
    return [Change(veto.task_id, key, value, why)]


def _depend(
    by_id: Mapping[str, Row], deps: dict[str, list[str]], task_id: str, on: str, why: str
) -> list[Change]:
    """`task_id` depends on `on`, unless either is unknown or a path links them already."""
    if task_id not in by_id or on not in by_id or task_id == on:
        return []
    if on in _ancestors(deps, task_id) or task_id in _ancestors(deps, on):
        return []
    deps[task_id] = [*deps.get(task_id, []), on]
    by_id[task_id]["depends_on"] = list(deps[task_id])
    return [Change(task_id, "depends_on", on, why)]


def _stale_pairs(events: Iterable[Row]) -> list[tuple[str, str, str]]:
    """(reader, changer, path) of every stale read in the log, first seen first, once each."""
    pairs: dict[tuple[str, str], str] = {}
    for e in events:
        if e["type"] != EventType.STALE_READ:
            continue
        for item in e["payload"].get("paths") or ():
            for who in item.get("changed_by") or ():
                pairs.setdefault((str(e.get("task_id")), str(who)), str(item["path"]))
    return [(reader, changer, path) for (reader, changer), path in pairs.items()]


# -- writing the file ---------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as `|` blocks, so a description reads as it was written."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _scalar(value: Any) -> str:
    if isinstance(value, str) and PLAIN.match(value) and value.lower() not in _YAML_WORDS:
        return value
    return json.dumps(value)


_YAML_WORDS: Final = frozenset({"true", "false", "yes", "no", "on", "off", "null", "~"})


def _dump_key(key: str, value: Any) -> list[str]:
    text = yaml.dump({key: value}, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    return text.rstrip("\n").split("\n")


def _task_lines(task: Mapping[str, Any], notes: Mapping[tuple[str, str], str]) -> list[str]:
    lines: list[str] = []
    for key, value in task.items():
        if key in ("file_scope", "depends_on", "resources") and isinstance(value, list):
            lines.append(f"{key}:" if value else f"{key}: []")
            for item in value:
                note = notes.get((key, str(item)))
                lines.append(f"  - {_scalar(item)}" + (f"  # {MARK}: {note}" if note else ""))
        else:
            lines.extend(_dump_key(key, value))
    return [("  - " if n == 0 else "    ") + line for n, line in enumerate(lines)]


def _header(original: str) -> list[str]:
    """The original file's leading comment block, kept as written."""
    kept: list[str] = []
    for line in original.splitlines():
        if line.startswith("#") or not line.strip():
            kept.append(line)
        else:
            break
    while kept and not kept[-1].strip():
        kept.pop()
    return kept


def render_graph(
    original: str,
    graph: Mapping[str, Any],
    tasks: Iterable[Mapping[str, Any]],
    changes: Sequence[Change],
    source: str,
) -> str:
    """The amended graph file: the original's header comments, a note, then the tasks, with
    every other key of `graph` (the original, parsed) where it stood: before or after them."""
    notes: dict[str, dict[tuple[str, str], str]] = {}
    for c in changes:
        notes.setdefault(c.task_id, {})[(c.key, c.value)] = c.why
    head = _header(original)
    lines = [
        *head,
        "" if head else None,
        f"# Amended by `codefleet stats --suggest` from {source}: {len(changes)} change(s),",
        f"# each marked `# {MARK}: ...`. Check it: codefleet graph check THIS_FILE",
        "",
    ]
    keys = list(graph)
    at = keys.index("tasks") if "tasks" in keys else len(keys)
    for key in keys[:at]:
        lines.extend([*_dump_key(key, graph[key]), ""])
    lines.append("tasks:")
    for task in tasks:
        lines.extend(_task_lines(task, notes.get(str(task.get("id")), {})))
    for key in keys[at + 1 :]:
        lines.extend(["", *_dump_key(key, graph[key])])
    return "\n".join(line for line in lines if line is not None) + "\n"
