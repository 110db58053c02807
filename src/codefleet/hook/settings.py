"""`codefleet join` / `leave`: CodeFleet's hooks in a tree's `.claude/settings.local.json`.

Claude Code loads a project's local settings (`.claude/settings.local.json`)
in every session started in that directory, interactive or `claude -p`
(measured with the bundled CLI: they are read unless `--setting-sources`
leaves out `local`). `join` merges three command hooks into that file:
`PreToolUse` and `PostToolUse` on the write tools, and `SessionEnd`, each
running `codefleet hook ...` by the absolute path of the executable `join`
ran from, with the server URL and the tree in the command, so the hooks work
whatever `PATH` the person's session has.

The merge keeps every other key and every other hook; it is idempotent (a
second `join` with the same options changes nothing) and replaces our own
entries when the options change. `leave` removes exactly our entries (an
event key or `hooks` left empty goes too; a file left empty is deleted).
Before `join` changes an existing file, its previous content is copied to
`settings.local.json.bak`; `leave` writes no copy (what it removes is only
ours) and deletes a `.bak` that holds a hook of ours, so no hook command
outlives `leave`. In a git repository, `join` lists both files in
`info/exclude` (`exclude_from_git`): they are personal, never to be committed,
and `git status` stays clean. A file that is not a JSON object is an error
and is left untouched.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = [
    "HOOK_TIMEOUT_S",
    "WRITE_MATCHER",
    "JoinError",
    "Written",
    "codefleet_command",
    "drop_our_backup",
    "exclude_from_git",
    "hooks_block",
    "is_ours",
    "join_tree",
    "leave_tree",
    "merged",
    "settings_path",
    "tree_id_args",
    "without_ours",
]

# The write tools as a hook matcher; a test keeps it equal to `WRITE_TOOLS`.
WRITE_MATCHER: Final = "Write|Edit|MultiEdit|NotebookEdit"
# PostToolUse also records the session's reads (`models.READ_RECORDED_TOOLS`; a test checks).
POST_MATCHER: Final = f"{WRITE_MATCHER}|NotebookRead|Read"
HOOK_TIMEOUT_S: Final = 15  # the hook gives up on the server after 5 s and denies itself
EVENT_KEYS: Final = ("PreToolUse", "PostToolUse", "SessionEnd")
SUBCOMMANDS: Final = {
    "PreToolUse": "pre-tool-use",
    "PostToolUse": "post-tool-use",
    "SessionEnd": "session-end",
}
# `<anything>codefleet['"]? hook <event>`: our command, whoever's path and quoting it carries.
OURS: Final = re.compile(r"codefleet\S*\s+hook\s+(pre-tool-use|post-tool-use|session-end)\b")


class JoinError(ValueError):
    """The settings file cannot be merged safely (it is left as it was)."""


@dataclass(frozen=True, slots=True)
class Written:
    path: Path
    changed: bool
    backup: Path | None
    settings: dict[str, Any] | None  # None: the file was removed (nothing of it was left)


def settings_path(tree: Path) -> Path:
    return tree / ".claude" / "settings.local.json"


def backup_path(tree: Path) -> Path:
    path = settings_path(tree)
    return path.with_name(path.name + ".bak")


def codefleet_command() -> list[str]:
    """How to run this very `codefleet`: its executable by absolute path, else `python -m`."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "codefleet" and argv0.is_file():
        return [str(argv0.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "codefleet"]


def hooks_block(
    executable: list[str], server: str, tree: Path, fail_open: bool, tree_id: str | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Our three hook entries, keyed by Claude Code event name."""
    block: dict[str, list[dict[str, Any]]] = {}
    for event in EVENT_KEYS:
        argv = [*executable, "hook", SUBCOMMANDS[event], "--server", server, "--tree", str(tree)]
        argv += tree_id_args(tree_id)
        if fail_open:
            argv.append("--fail-open")
        entry: dict[str, Any] = {
            "hooks": [{"type": "command", "command": shlex.join(argv), "timeout": HOOK_TIMEOUT_S}]
        }
        if event != "SessionEnd":
            matcher = POST_MATCHER if event == "PostToolUse" else WRITE_MATCHER
            entry = {"matcher": matcher, **entry}
        block[event] = [entry]
    return block


def tree_id_args(tree_id: str | None) -> list[str]:
    """`--tree-id ID`: the hook finds the tree by it on a host that mounts it elsewhere."""
    return ["--tree-id", tree_id] if tree_id else []


def is_ours(hook: Any) -> bool:
    return (
        isinstance(hook, dict)
        and hook.get("type") == "command"
        and bool(OURS.search(str(hook.get("command", ""))))
    )


def without_ours(settings: dict[str, Any]) -> dict[str, Any]:
    """`settings` minus every CodeFleet hook; everything else exactly as it was."""
    out = deepcopy(settings)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [h for h in group["hooks"] if not is_ours(h)]
                if not inner and group["hooks"]:
                    continue  # the group held only our hooks
                group = {**group, "hooks": inner}
            kept.append(group)
        if kept:
            hooks[event] = kept
        elif groups:
            del hooks[event]
    if not hooks and "hooks" in settings and settings["hooks"]:
        del out["hooks"]
    return out


def merged(settings: dict[str, Any], block: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """`settings` with our hooks (replacing any earlier ones of ours), all else kept."""
    out = without_ours(settings)
    hooks = out.get("hooks")
    if hooks is None:
        hooks = out["hooks"] = {}
    if not isinstance(hooks, dict):
        raise JoinError(f'"hooks" is a {type(hooks).__name__}, not an object')
    for event, entries in block.items():
        existing = hooks.get(event, [])
        if not isinstance(existing, list):
            raise JoinError(f'"hooks.{event}" is a {type(existing).__name__}, not a list')
        hooks[event] = [*existing, *deepcopy(entries)]
    return out


def read_settings(path: Path) -> dict[str, Any] | None:
    """The file's JSON object, None when there is no file; `JoinError` when it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as err:
        raise JoinError(f"cannot read {path}: {err.strerror}") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as err:
        raise JoinError(f"{path} is not valid JSON ({err}); fix or move it first") from None
    if not isinstance(data, dict):
        raise JoinError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def join_tree(
    tree: Path,
    block: dict[str, list[dict[str, Any]]],
    dry_run: bool = False,
    path: Path | None = None,
) -> Written:
    """Merge `block` into the tree's local settings (or only compute it, with `dry_run`);
    `path`: another CLI's hook file of the same shape (`agentsettings`)."""
    path = path or settings_path(tree)
    before = read_settings(path)
    after = merged(before or {}, block)
    if dry_run or after == before:
        return Written(path, after != before, None, after)
    return write_settings(path, before, after)


def leave_tree(tree: Path, dry_run: bool = False, path: Path | None = None) -> Written:
    """Remove exactly our hooks from the tree's local settings (or `path`, as `join_tree`),
    and a backup holding one."""
    path = path or settings_path(tree)
    before = read_settings(path)
    if not dry_run:
        drop_our_backup(path.with_name(path.name + ".bak"))
    if before is None:
        return Written(path, False, None, None)
    after = without_ours(before)
    if dry_run or after == before:
        return Written(path, after != before, None, after)
    return write_settings(path, None, after)


def drop_our_backup(backup: Path, ours: Callable[[dict[str, Any]], bool] | None = None) -> None:
    """Delete `backup` when it holds a hook of ours (`ours`: another shape's test)."""
    try:
        kept = read_settings(backup)
    except JoinError:
        return  # not a settings object: not ours to judge
    if kept is not None and (ours(kept) if ours else without_ours(kept) != kept):
        backup.unlink()


def exclude_from_git(tree: Path, path: Path | None = None) -> Path | None:
    """List the files `join` writes in the repository's `info/exclude`; that file, or None.

    `path`: the hook file `join` wrote (default: the tree's local settings), listed with
    its backup. None when `tree` is not in a git repository (or git is missing); lines
    already there are not repeated.
    """
    try:
        prefix, exclude = subprocess.run(
            ["git", "rev-parse", "--show-prefix", "--git-path", "info/exclude"],
            cwd=tree,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split("\n")[:2]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None  # not a repository, or no git: nothing to exclude from
    exclude_file = (tree / exclude).resolve()
    text = exclude_file.read_text(encoding="utf-8") if exclude_file.exists() else ""
    path = path or settings_path(tree)
    relative = path.relative_to(tree).as_posix()
    wanted = [f"/{prefix}{relative}", f"/{prefix}{relative}.bak"]
    missing = [line for line in wanted if line not in text.splitlines()]
    if missing:
        exclude_file.parent.mkdir(parents=True, exist_ok=True)
        lead = "\n" if text and not text.endswith("\n") else ""
        lines = ["# codefleet join: personal hook settings", *missing]
        exclude_file.write_text(text + lead + "".join(f"{line}\n" for line in lines), "utf-8")
    return exclude_file


def write_settings(path: Path, before: dict[str, Any] | None, after: dict[str, Any]) -> Written:
    """Write `after` (delete the file when it is empty); first copy the file when `before`."""
    backup = None
    if before is not None:
        backup = path.with_name(path.name + ".bak")
        backup.write_bytes(path.read_bytes())
    if not after:
        path.unlink()
        return Written(path, True, backup, None)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(after, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # a crash never leaves a half-written settings file
    return Written(path, True, backup, after)
