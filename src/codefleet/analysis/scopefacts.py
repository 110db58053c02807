"""Declared scope paths against the real tree: facts gathered once, judged purely.

`survey` does the I/O: each raw scope path goes through `paths.TreeRoot`
(the rule the server applies on load), then we look whether the file exists,
whether its directory does, and which existing name in that directory is
closest. `judge` turns those facts into canonical scopes and findings:

- a path outside the tree, into `.git`, onto a protected file or a directory
  is an ERROR (the server would refuse the graph);
- a path that does not exist is fine when it is plausibly a new file: the
  task's description names it, or its directory exists and no existing file
  there has a near-identical name; otherwise it is a WARNING (a typo, or a
  directory that is not there), naming the likely intended file;
- a part (`file.py::name`) is looked for in its file's parts, as the lease
  mapper finds them: a name the file does not have is fine when the
  description names it (a new definition); otherwise it is a WARNING naming
  the nearest part the file has, or the parts it has. `<imports>`, the one import block
  before each import statement became a part of its own (decision 0165), names no part:
  it is warned with a hint to name one import statement or the whole file;
- a file a task's description names, held by another task's scope that may run
  beside it and absent from its own, is a WARNING (`unscoped_mentions`): its
  write of that file would be vetoed while the other holds it.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codefleet.analysis.graphanalysis import Ancestry, Finding
from codefleet.parts.kinds import mapper_for
from codefleet.parts.putback import parts_of
from codefleet.paths import PathRejected, TreeRoot
from codefleet.toolcalls.leasekeys import split_part_key

__all__ = ["PathFact", "ScopedTask", "judge", "survey", "unscoped_mentions"]

NEAR_CUTOFF = 0.8  # difflib ratio above which an existing name is "near-identical"
IMPORT_BLOCK = "<imports>"  # the import block's old part name: now no part (decision 0165)
PARTS_SHOWN = 8  # a missing part's warning lists at most this many of the file's parts


@dataclass(frozen=True, slots=True)
class PathFact:
    """What the tree says about one raw scope path."""

    raw: str
    key: str | None  # canonical lease key; None when rejected
    rejected: str | None = None  # the refusal, for a person
    reason: str | None = None  # the refusal's code (outside_workdir, protected_path, ...)
    exists: bool = False
    parent_exists: bool = False
    near: str | None = None  # the closest existing name in the same directory
    parts: tuple[str, ...] | None = None  # a part's file's parts (None: not a part, or unknown)


@dataclass(frozen=True, slots=True)
class ScopedTask:
    """A task as `judge` needs it: id, raw scope, and the text that may name new files."""

    id: str
    file_scope: tuple[str, ...]
    description: str = ""


def survey(tree: TreeRoot, raws: Iterable[str]) -> dict[str, PathFact]:
    """Facts about each distinct raw path (the only function here that touches the disk)."""
    return {raw: _fact(tree, raw) for raw in dict.fromkeys(raws)}


def _fact(tree: TreeRoot, raw: str) -> PathFact:
    try:
        key = tree.canonical(raw)
    except PathRejected as err:
        return PathFact(raw, None, err.message, str(err.reason))
    path, name = split_part_key(key)
    full = tree.root / path
    if full.exists():
        return PathFact(raw, key, exists=True, parent_exists=True, parts=_parts(full, name))
    parent = full.parent
    if not parent.is_dir():
        return PathFact(raw, key)
    names = sorted(os.listdir(parent))
    near = difflib.get_close_matches(full.name, names, n=1, cutoff=NEAR_CUTOFF)
    rel_parent = parent.relative_to(tree.root).as_posix()
    hint = None if not near else (near[0] if rel_parent == "." else f"{rel_parent}/{near[0]}")
    return PathFact(raw, key, parent_exists=True, near=hint)


def _parts(file: Path, name: str | None) -> tuple[str, ...] | None:
    """The names of `file`'s parts when a part of it is asked for and it has parts."""
    mapper = mapper_for(file.name)
    if name is None or mapper is None or not file.is_file():
        return None
    try:
        found = parts_of(file.read_bytes(), mapper)
    except OSError:
        return None
    return None if found is None else tuple(p.name for p in found)


def judge(
    tasks: Sequence[ScopedTask], facts: Mapping[str, PathFact]
) -> tuple[dict[str, tuple[str, ...]], list[Finding]]:
    """Each task's canonical scope (rejected paths dropped) and the findings, in task order."""
    scopes: dict[str, tuple[str, ...]] = {}
    findings: list[Finding] = []
    for task in tasks:
        keys: list[str] = []
        for raw in task.file_scope:
            fact = facts[raw]
            finding = _finding(task, fact)
            if finding is not None:
                findings.append(finding)
            if fact.key is not None:
                keys.append(fact.key)
        scopes[task.id] = tuple(sorted(set(keys)))
    return scopes, findings


def _finding(task: ScopedTask, fact: PathFact) -> Finding | None:
    if fact.key is None:
        return Finding(
            "error",
            fact.reason or "invalid_path",
            f"task {task.id}: file_scope entry {fact.raw!r}: {fact.rejected}",
            task.id,
            fact.raw,
        )
    if fact.exists:
        return _part_finding(task, fact)
    if _named_in(task.description, fact.key):
        return None
    if not fact.parent_exists:
        where = fact.key.rpartition("/")[0]
        return Finding(
            "warning",
            "missing_directory",
            f"task {task.id}: {fact.key} does not exist and "
            f"neither does its directory {where}/; is the path right?",
            task.id,
            fact.key,
        )
    if fact.near is not None:
        return Finding(
            "warning",
            "missing_path",
            f"task {task.id}: {fact.key} does not exist; did you mean {fact.near}?",
            task.id,
            fact.key,
        )
    return None


def _part_finding(task: ScopedTask, fact: PathFact) -> Finding | None:
    """A part its file does not have, that the description does not name as new work."""
    assert fact.key is not None
    path, name = split_part_key(fact.key)
    if name is None or fact.parts is None or name in fact.parts:
        return None
    if _named_as_new(task.description, name):
        return None
    near = difflib.get_close_matches(name, fact.parts, n=1, cutoff=0.6)
    shown = ", ".join(fact.parts[:PARTS_SHOWN]) + (", …" if len(fact.parts) > PARTS_SHOWN else "")
    hint = f"did you mean {path}::{near[0]}?" if near else f"its parts: {shown or 'none'}."
    if name == IMPORT_BLOCK:
        hint = _import_block_hint(path, fact.parts)
        return Finding(
            "warning",
            "missing_part",
            f"task {task.id}: {path} has no part {name}; {hint}",
            task.id,
            fact.key,
        )
    return Finding(
        "warning",
        "missing_part",
        f"task {task.id}: {path} has no part {name}; {hint} (A part the task adds is fine: "
        "name it in its description.)",
        task.id,
        fact.key,
    )


def _named_as_new(description: str, name: str) -> bool:
    """Does the description name the part: by its name, or a statement's part by the
    statement's own text (`<import { a } from "./a";>` by `import { a } from "./a";`)?"""
    statement = name.startswith("<") and name.endswith(">") and " " in name
    return name in description or (statement and name[1:-1] in description)


def _import_block_hint(path: str, parts: tuple[str, ...]) -> str:
    """Import statements are parts one by one: name one of them, or the whole file."""
    one = next((p for p in parts if p.startswith(("<import ", "<from "))), "<import os>")
    return f"each import statement is a part of its own: name one ({path}::{one}) or {path}"


def unscoped_mentions(
    tasks: Sequence[ScopedTask],
    scopes: Mapping[str, tuple[str, ...]],
    deps: Mapping[str, Sequence[str]],
) -> list[Finding]:
    """A file a task's description names that another task's scope holds and its own does
    not, where neither task waits for the other: the write would be vetoed."""
    files = {t.id: {key.partition("::")[0] for key in scopes[t.id]} for t in tasks}
    above = Ancestry({t.id: list(deps.get(t.id, ())) for t in tasks})
    found: list[Finding] = []
    for task in tasks:
        for other in tasks:
            if other.id == task.id or above.related(task.id, other.id):
                continue
            for path in sorted(files[other.id] - files[task.id]):
                if _mentions(task.description, path):
                    found.append(_unscoped(task.id, other.id, path))
    return found


def _unscoped(task_id: str, other: str, path: str) -> Finding:
    return Finding(
        "warning",
        "unscoped_mention",
        f"task {task_id}: its description names {path}, which {other}'s file_scope holds and "
        f"{task_id}'s does not: if {task_id} writes it while {other} runs, the write is "
        f"vetoed; add {path} (or its part) to {task_id}'s file_scope, or make {task_id} "
        f"depend on {other}",
        task_id,
        path,
    )


def _mentions(description: str, path: str) -> bool:
    """Does the description name the file as a word: its path, or its file name alone?"""
    names = {path, path.rpartition("/")[2]}
    return any(re.search(rf"(?<![\w./-]){re.escape(n)}(?![\w/-])", description) for n in names)


def _named_in(description: str, key: str) -> bool:
    """Does the description name the file (by path or by file name)? Then it is new work."""
    return key in description or key.rpartition("/")[2] in description
