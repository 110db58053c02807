"""The prompt one Claude Code session gets for one attempt of one task.

It states the rules of the shared tree before the task: other agents edit the
same files at the same time, the declared file scope is a hint and not a
permission, and a refused write is final (stop, do not retry, do not edit
around it, name the file that blocked you). When the operator defined named
checks, the prompt lists them (the `run_check` tool) and says which one will
verify the task; with the shell, it explains the `run_command` tool and what
becomes of the files a command changes; with `ask_operator`, it says when to ask the
operator. Then the task title and description, and on a retry the
previous attempt's error (for a failed verification: the check's output), so
the agent knows why it is running again and what to fix. The operator's messages
to the task so far (`codefleet say`) follow, in order, under "Notes from the
operator". A `marker` (the offline fake model's script selector)
is appended only when given; live prompts never carry one.

Pure text: no I/O, no SDK import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from codefleet.attempt import AssignedTask, OperatorNote
from codefleet.models import ErrorKind

if TYPE_CHECKING:
    from codefleet.fleet.executor import Attempt

__all__ = ["NOTES_HEADING", "RULES", "attempt_prompt", "build_prompt", "operator_notes"]

NOTES_HEADING = "# Notes from the operator"

CHECKS = """\
Checks: you cannot run shell commands, but you can run the operator's named checks with the \
run_check tool, by name: {names}. A check runs in a private view of the tree holding your edits \
and all finished work, never other agents' unfinished edits; nothing it writes reaches the \
shared tree. Run the relevant check before you finish and fix what it reports."""
ASK = """\
Questions: if the task is unclear in a way a wrong guess would make costly, ask the person who \
runs this fleet with the ask_operator tool and wait for the answer. Decide small things yourself."""
COMMANDS = """\
Commands: you can run shell commands with the run_command tool (command, timeout_s). A command \
runs in a private layer over the tree (your edits and all finished work; files other agents are \
still editing appear as they were before), with no network unless the operator allowed it. When \
it ends, the files it changed are applied to the shared tree only if every one of them is free: \
if another agent holds one, NOTHING is applied and the refusal is final, as for a refused write. \
Regenerable and ignored files (virtualenvs, node_modules, caches, git-ignored paths) are kept \
out, protected paths are refused; the answer lists what was applied, kept out and refused."""
VERIFY = "When you finish, CodeFleet runs the check `{name}`; if it fails, the task is retried."

RULES = """\
You are one of several coding agents working at the same time in ONE shared working tree \
(your current directory). Other agents are editing other files in this tree right now.

Rules of the shared tree:
- Before every write, CodeFleet checks that no other agent holds the file. The file list \
below ("expected files") is only a hint about what you will probably touch; it is not a \
permission and not a limit. Edit whatever the task really needs.
- If a write is refused, the refusal is final. Do NOT retry that file, do NOT write the same \
change somewhere else or edit around it. Stop working immediately and reply with one short \
message saying which file blocked you. CodeFleet will run your task again later, when the \
file is free.
- Work only inside the current directory. You cannot run commands; make the change with the \
file tools (Read, Edit, Write, Glob, Grep). Do not create summary or notes files.
- When you are done, reply with a short summary of what you changed."""
NO_COMMANDS = "You cannot run commands; make the change with the"
HAS_COMMANDS = "Make file changes with the"


def attempt_prompt(
    attempt: Attempt, marker_for: Callable[[Attempt], str | None] | None, rules: str = RULES
) -> str:
    """`build_prompt` for one attempt: its task, its checks and the tools it has."""
    return build_prompt(
        attempt.task,
        marker_for(attempt) if marker_for else None,
        attempt.checks.names if attempt.checks else (),
        commands=attempt.commands is not None,
        ask=attempt.ask is not None,
        rules=rules,
    )


def build_prompt(
    task: AssignedTask,
    marker: str | None = None,
    checks: Sequence[str] = (),
    commands: bool = False,
    ask: bool = False,
    rules: str = RULES,
) -> str:
    """The whole user prompt for `task` (the runner's assignment), the check names, whether
    the session has the run_command tool, and whether it has the `ask_operator` tool.

    `rules` are the shared tree's rules as the agent's tools word them (`session.codex`
    passes Codex's)."""
    parts = [rules.replace(NO_COMMANDS, HAS_COMMANDS) if commands else rules]
    if commands:
        parts.append(COMMANDS)
    if ask:
        parts.append(ASK)
    if checks:
        verify = task.verify
        parts.append(CHECKS.format(names=", ".join(checks)))
        if verify:
            parts[-1] += " " + VERIFY.format(name=verify)
    parts.append(_task_section(task))
    previous = _previous_error(task)
    if previous:
        parts.append(previous)
    if task.notes:
        parts.append(operator_notes(task.notes))
    if marker:
        parts.append(marker)
    return "\n\n".join(parts) + "\n"


def _task_section(task: AssignedTask) -> str:
    scope = ", ".join(task.file_scope) or "(none declared)"
    description = task.description.strip() or "(no description)"
    return f"# Task {task.id}: {task.title}\n\nExpected files (a hint): {scope}\n\n{description}"


def _previous_error(task: AssignedTask) -> str:
    error, attempt, blocked = task.error, task.attempts, task.blocked_on_path
    if not error or attempt <= 1:
        return ""
    note = f" It was blocked on {blocked}, which is free now." if blocked else ""
    if task.error_kind is ErrorKind.VERIFY_FAILED:
        note = (
            " Its verification failed and its edits were rolled back, so redo the work and "
            "fix what the output below shows."
        )
    elif task.error_kind is ErrorKind.INTEGRATION_FAILED:
        note = (
            " Its work passed alone but broke the tree once put on top of work that landed "
            "meanwhile; its edits were rolled back. Redo the work on top of that work (keep "
            "it), so that the check below passes."
        )
    return (
        f"This is attempt {attempt}. The previous attempt ended with this error:{note}\n"
        f"{error.strip()}\n"
        "Read the files again before you edit them: they may have changed since."
    )


def operator_notes(notes: Sequence[OperatorNote]) -> str:
    """The prompt's section of the operator's messages, oldest first."""
    lines = [f"{n}. {note.text.strip()}" for n, note in enumerate(notes, start=1)]
    return NOTES_HEADING + "\n\nThe person who runs this fleet told you:\n" + "\n".join(lines)
